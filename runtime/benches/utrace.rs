//! Placeholder replaced by the events/s benchmark in the next commit.
fn main() {}
