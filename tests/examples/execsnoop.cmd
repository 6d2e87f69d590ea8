$FIXTURES/forker
