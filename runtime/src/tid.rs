//! Thread ids, and the maps keyed by them: the lowest floor, used by every
//! room that names a thread (the utrace core, breakpoints, the data plane,
//! the listener), so none of them reaches up into `utrace` for it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A thread id (for a process's main thread, also its process id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tid(pub i32);

impl std::fmt::Display for Tid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for Tid {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> std::result::Result<Tid, Self::Err> {
        s.parse().map(Tid)
    }
}

/// Thread ids are small distinct integers chosen by the kernel, not by an
/// adversary: a multiplicative hash is enough and keeps the several map
/// lookups of every stop cheap (SipHash would cost more than the rest of
/// the core's work on a stop).
#[derive(Default)]
pub(crate) struct TidHasher(u64);

impl Hasher for TidHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_i32(&mut self, n: i32) {
        self.0 = (n as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    /// Addresses (breakpoint sites, `crate::uprobe::AddrMap`): the high
    /// half of the product folded in, as sites 16 bytes apart would
    /// otherwise share their low bits, the table's index.
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 32);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type TidMap<V> = HashMap<Tid, V, BuildHasherDefault<TidHasher>>;
