$FIXTURES/signals
