$FIXTURES/syscalls
