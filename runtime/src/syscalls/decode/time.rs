//! Time-family arguments: `struct timespec`, clock ids, timer flags.

use super::flags::{Xlat, flags_str, xlat_str};
use super::strings::{addr_str, read_bytes};
use crate::memory::ReadMemory;

/// `{tv_sec=1, tv_nsec=500000000}`, `NULL`, or the address when unreadable.
pub fn timespec_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_bytes(mem, addr, 16).filter(|b| b.len() == 16) {
        Some(b) => {
            let sec = i64::from_ne_bytes(b[0..8].try_into().unwrap());
            let nsec = i64::from_ne_bytes(b[8..16].try_into().unwrap());
            format!("{{tv_sec={sec}, tv_nsec={nsec}}}")
        }
        None => addr_str(addr),
    }
}

const CLOCKS: &[Xlat] = &[
    (0, "CLOCK_REALTIME"),
    (1, "CLOCK_MONOTONIC"),
    (2, "CLOCK_PROCESS_CPUTIME_ID"),
    (3, "CLOCK_THREAD_CPUTIME_ID"),
    (4, "CLOCK_MONOTONIC_RAW"),
    (5, "CLOCK_REALTIME_COARSE"),
    (6, "CLOCK_MONOTONIC_COARSE"),
    (7, "CLOCK_BOOTTIME"),
    (8, "CLOCK_REALTIME_ALARM"),
    (9, "CLOCK_BOOTTIME_ALARM"),
    (11, "CLOCK_TAI"),
];

/// A clock id: `CLOCK_MONOTONIC`.
pub fn clockid_str(clock: u64) -> String {
    xlat_str(clock & 0xffff_ffff, CLOCKS, "CLOCK_???")
}

/// clock_nanosleep / timer_settime flags: `0`, `TIMER_ABSTIME`.
pub fn timer_flags_str(flags: u64) -> String {
    flags_str(
        flags & 0xffff_ffff,
        &[(1, "TIMER_ABSTIME")],
        "0",
        "TIMER_???",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn timespecs_and_clocks() {
        let mut b = 1i64.to_ne_bytes().to_vec();
        b.extend_from_slice(&500_000_000i64.to_ne_bytes());
        let mem = Mem::new(0x1000, &b);
        assert_eq!(timespec_str(&mem, 0x1000), "{tv_sec=1, tv_nsec=500000000}");
        assert_eq!(timespec_str(&mem, 0), "NULL");
        assert_eq!(timespec_str(&mem, 0x1008), "0x1008");
        assert_eq!(clockid_str(1), "CLOCK_MONOTONIC");
        assert_eq!(clockid_str(42), "0x2a /* CLOCK_??? */");
        assert_eq!(timer_flags_str(1), "TIMER_ABSTIME");
    }
}
