$FIXTURES/threads 3
