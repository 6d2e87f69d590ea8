$FIXTURES/ufuncs basic 3
