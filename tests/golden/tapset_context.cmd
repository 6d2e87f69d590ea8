$FIXTURES/syscalls one "two words"
