$FIXTURES/ufuncs basic 5
