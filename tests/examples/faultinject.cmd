$FIXTURES/writer 6
