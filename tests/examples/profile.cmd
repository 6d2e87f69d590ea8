$FIXTURES/profile 800
