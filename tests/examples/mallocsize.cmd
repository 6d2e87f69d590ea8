$FIXTURES/ufuncs basic 4
