$FIXTURES/writer 5
