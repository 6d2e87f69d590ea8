$FIXTURES/threads 4
