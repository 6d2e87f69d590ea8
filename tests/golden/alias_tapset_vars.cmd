$FIXTURES/aliasvars
