$FIXTURES/modcalls
