//! Time-family arguments: `struct timespec`, clock ids, timer flags.

use super::bytes::*;
use super::flags::{Xlat, flags_str, xlat_str};
use super::strings::addr_str;
use crate::memory::ReadMemory;

/// `{tv_sec=1, tv_nsec=500000000}`, `NULL`, or the address when unreadable.
pub fn timespec_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_exact(mem, addr, 16) {
        Some(b) => {
            let sec = i64_at(&b, 0);
            let nsec = i64_at(&b, 8);
            format!("{{tv_sec={sec}, tv_nsec={nsec}}}")
        }
        None => addr_str(addr),
    }
}

/// strace's comment for a time: `1970-01-01T00:00:05+0000` in the local
/// time zone, with nanoseconds when non-zero; None for the epoch itself.
pub fn time_comment(sec: i64, nsec: u64) -> Option<String> {
    if (sec == 0 && nsec == 0) || nsec > 999_999_999 {
        return None;
    }
    // SAFETY: localtime_r and strftime write only into our buffers.
    unsafe {
        let t: libc::time_t = sec;
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return None;
        }
        let mut date = [0u8; 64];
        let n = libc::strftime(date.as_mut_ptr().cast(), date.len(), c"%FT%T".as_ptr(), &tm);
        let mut zone = [0u8; 16];
        let z = libc::strftime(zone.as_mut_ptr().cast(), zone.len(), c"%z".as_ptr(), &tm);
        if n == 0 || z == 0 {
            return None;
        }
        let date = String::from_utf8_lossy(&date[..n]);
        let zone = String::from_utf8_lossy(&zone[..z]);
        Some(if nsec > 0 {
            format!("{date}.{nsec:09}{zone}")
        } else {
            format!("{date}{zone}")
        })
    }
}

/// `struct timeval`: `{tv_sec=0, tv_usec=1000}`.
pub fn timeval_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_exact(mem, addr, 16) {
        Some(b) => format!("{{tv_sec={}, tv_usec={}}}", i64_at(&b, 0), i64_at(&b, 8)),
        None => addr_str(addr),
    }
}

const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

/// utimensat's times: `NULL` or `[{tv_sec=5, tv_nsec=0} /* 1970-... */, UTIME_NOW]`.
pub fn utimens_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let Some(b) = read_exact(mem, addr, 32) else {
        return addr_str(addr);
    };
    let one = |i: usize| {
        let sec = i64_at(&b, i * 16);
        let nsec = i64_at(&b, i * 16 + 8);
        match nsec {
            UTIME_NOW => "UTIME_NOW".to_string(),
            UTIME_OMIT => "UTIME_OMIT".to_string(),
            _ => {
                let ts = format!("{{tv_sec={sec}, tv_nsec={nsec}}}");
                match time_comment(sec, nsec as u64) {
                    Some(c) => format!("{ts} /* {c} */"),
                    None => ts,
                }
            }
        }
    };
    format!("[{}, {}]", one(0), one(1))
}

fn pair_at(b: &[u8], i: usize) -> (i64, i64) {
    (i64_at(b, i * 16), i64_at(b, i * 16 + 8))
}

/// `struct itimerspec`: `{it_interval={tv_sec=0, tv_nsec=0}, it_value={...}}`.
pub fn itimerspec_str(mem: &dyn ReadMemory, addr: u64) -> String {
    itimer_str(mem, addr, "tv_nsec")
}

/// `struct itimerval`: `{it_interval={tv_sec=0, tv_usec=0}, it_value={...}}`.
pub fn itimerval_str(mem: &dyn ReadMemory, addr: u64) -> String {
    itimer_str(mem, addr, "tv_usec")
}

fn itimer_str(mem: &dyn ReadMemory, addr: u64, sub: &str) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_exact(mem, addr, 32) {
        Some(b) => {
            let ((is, isub), (vs, vsub)) = (pair_at(&b, 0), pair_at(&b, 1));
            format!(
                "{{it_interval={{tv_sec={is}, {sub}={isub}}}, it_value={{tv_sec={vs}, {sub}={vsub}}}}}"
            )
        }
        None => addr_str(addr),
    }
}

const ITIMERS: &[Xlat] = &[
    (0, "ITIMER_REAL"),
    (1, "ITIMER_VIRTUAL"),
    (2, "ITIMER_PROF"),
];

/// setitimer/getitimer's which: `ITIMER_REAL`.
pub fn itimer_which_str(which: u64) -> String {
    xlat_str(which & 0xffff_ffff, ITIMERS, "ITIMER_???")
}

/// timerfd_settime's flags.
pub fn timerfd_flags_str(flags: u64) -> String {
    flags_str(
        flags & 0xffff_ffff,
        &[(1, "TFD_TIMER_ABSTIME"), (2, "TFD_TIMER_CANCEL_ON_SET")],
        "0",
        "TFD_???",
    )
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

    #[test]
    fn timevals() {
        let mut b = 2i64.to_ne_bytes().to_vec();
        b.extend_from_slice(&5i64.to_ne_bytes());
        let mem = Mem::new(0x1000, &b);
        assert_eq!(timeval_str(&mem, 0x1000), "{tv_sec=2, tv_usec=5}");
        assert_eq!(timeval_str(&mem, 0), "NULL");
        assert_eq!(timeval_str(&mem, 0x1008), "0x1008");
    }

    #[test]
    fn itimers() {
        let mut b = Vec::new();
        for v in [0i64, 0, 1, 500] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            itimerspec_str(&mem, 0x1000),
            "{it_interval={tv_sec=0, tv_nsec=0}, it_value={tv_sec=1, tv_nsec=500}}"
        );
        assert_eq!(
            itimerval_str(&mem, 0x1000),
            "{it_interval={tv_sec=0, tv_usec=0}, it_value={tv_sec=1, tv_usec=500}}"
        );
        assert_eq!(itimerval_str(&mem, 0), "NULL");
        assert_eq!(itimer_which_str(0), "ITIMER_REAL");
        assert_eq!(timerfd_flags_str(1), "TFD_TIMER_ABSTIME");
    }

    #[test]
    fn utime_pairs() {
        let mut b = Vec::new();
        for v in [0i64, (1 << 30) - 1, 7, (1 << 30) - 2] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        let mem = Mem::new(0x1000, &b);
        assert_eq!(utimens_str(&mem, 0x1000), "[UTIME_NOW, UTIME_OMIT]");
        assert_eq!(utimens_str(&mem, 0), "NULL");
        assert_eq!(utimens_str(&mem, 0x1008), "0x1008");
        assert_eq!(time_comment(0, 0), None);
        assert_eq!(time_comment(1, 1_000_000_000), None);
        // The comment's form; the hour and zone depend on the local zone.
        let c = time_comment(5, 0).unwrap();
        assert!(
            c.starts_with("19") && (c.ends_with("+0000") || c.contains('+') || c.contains('-')),
            "{c}"
        );
        let c = time_comment(86_400 * 365, 5).unwrap();
        assert!(c.contains(".000000005"), "{c}");
    }
}
