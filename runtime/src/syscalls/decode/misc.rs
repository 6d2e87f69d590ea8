//! Arguments of ioctl and futex, which strace decodes by request / operation.

use super::bytes::*;
use super::flags::{Xlat, as_int, xlat_lookup};

const IOCTLS: &[Xlat] = &[
    (0x5401, "TCGETS"),
    (0x5402, "TCSETS"),
    (0x5403, "TCSETSW"),
    (0x5404, "TCSETSF"),
    (0x540b, "TCFLSH"),
    (0x540e, "TIOCSCTTY"),
    (0x540f, "TIOCGPGRP"),
    (0x5410, "TIOCSPGRP"),
    (0x5413, "TIOCGWINSZ"),
    (0x5414, "TIOCSWINSZ"),
    (0x541b, "FIONREAD"),
    (0x5421, "FIONBIO"),
    (0x5422, "TIOCNOTTY"),
    (0x5450, "FIONCLEX"),
    (0x5451, "FIOCLEX"),
    (0x5452, "FIOASYNC"),
    (0x80045430, "TIOCGPTN"),
    (0x40045431, "TIOCSPTLCK"),
    (0x40049409, "BTRFS_IOC_CLONE or FICLONE"),
];

/// An ioctl request: `TCGETS`, else `_IOC(...)`-free hex as strace's raw style.
pub fn ioctl_request_str(request: u64) -> String {
    let r = request & 0xffff_ffff;
    xlat_lookup(r, IOCTLS).map_or_else(|| format!("{r:#x}"), str::to_string)
}

/// How strace shows an ioctl's third argument for the requests it decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoctlArg {
    /// No argument.
    None,
    /// A plain `int` (FICLONE's source descriptor).
    Int,
    /// An `int` the call reads: `[1]`.
    InInt,
    /// An `int` the call writes: `[27]` after success.
    OutInt,
    /// `struct winsize` the call reads.
    InWinsize,
    /// `struct winsize` the call writes.
    OutWinsize,
    /// Anything else: the address.
    Addr,
}

/// The argument of ioctl `request`.
pub fn ioctl_arg(request: u64) -> IoctlArg {
    match request & 0xffff_ffff {
        0x540e | 0x5422 | 0x5450 | 0x5451 => IoctlArg::None,
        0x40049409 => IoctlArg::Int,
        0x5421 | 0x5452 | 0x5410 | 0x40045431 => IoctlArg::InInt,
        0x541b | 0x540f | 0x80045430 => IoctlArg::OutInt,
        0x5414 => IoctlArg::InWinsize,
        0x5413 => IoctlArg::OutWinsize,
        _ => IoctlArg::Addr,
    }
}

/// `{ws_row=24, ws_col=80, ws_xpixel=0, ws_ypixel=0}`.
pub fn winsize_str(mem: &dyn crate::memory::ReadMemory, addr: u64) -> String {
    match read_exact(mem, addr, 8) {
        Some(b) => {
            let h = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
            format!(
                "{{ws_row={}, ws_col={}, ws_xpixel={}, ws_ypixel={}}}",
                h(0),
                h(2),
                h(4),
                h(6)
            )
        }
        None => super::strings::addr_str(addr),
    }
}

/// Whether an ioctl request takes no argument (strace then omits it).
pub fn ioctl_without_arg(request: u64) -> bool {
    matches!(request & 0xffff_ffff, 0x540e | 0x5422 | 0x5450 | 0x5451)
}

const FUTEX_OPS: &[Xlat] = &[
    (0, "FUTEX_WAIT"),
    (1, "FUTEX_WAKE"),
    (2, "FUTEX_FD"),
    (3, "FUTEX_REQUEUE"),
    (4, "FUTEX_CMP_REQUEUE"),
    (5, "FUTEX_WAKE_OP"),
    (6, "FUTEX_LOCK_PI"),
    (7, "FUTEX_UNLOCK_PI"),
    (8, "FUTEX_TRYLOCK_PI"),
    (9, "FUTEX_WAIT_BITSET"),
    (10, "FUTEX_WAKE_BITSET"),
    (11, "FUTEX_WAIT_REQUEUE_PI"),
    (12, "FUTEX_CMP_REQUEUE_PI"),
    (13, "FUTEX_LOCK_PI2"),
];
pub const FUTEX_PRIVATE: u64 = 128;
pub const FUTEX_CLOCK_REALTIME: u64 = 256;

/// A futex operation: `FUTEX_WAIT_PRIVATE`, `FUTEX_WAIT_BITSET|FUTEX_CLOCK_REALTIME`.
pub fn futex_op_str(op: u64) -> String {
    let op = op & 0xffff_ffff;
    let cmd = op & !(FUTEX_PRIVATE | FUTEX_CLOCK_REALTIME);
    let Some(name) = xlat_lookup(cmd, FUTEX_OPS) else {
        return format!("{op:#x}");
    };
    let mut out = name.to_string();
    if op & FUTEX_PRIVATE != 0 {
        out.push_str("_PRIVATE");
    }
    if op & FUTEX_CLOCK_REALTIME != 0 {
        out.push_str("|FUTEX_CLOCK_REALTIME");
    }
    out
}

/// The futex command without the private / clock bits.
pub fn futex_cmd(op: u64) -> u64 {
    op & 0xffff_ffff & !(FUTEX_PRIVATE | FUTEX_CLOCK_REALTIME)
}

/// An `int` argument in decimal.
pub fn int_str(v: u64) -> String {
    as_int(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctls() {
        assert_eq!(ioctl_request_str(0x5401), "TCGETS");
        assert_eq!(ioctl_request_str(0x5413), "TIOCGWINSZ");
        assert_eq!(ioctl_request_str(0x1234), "0x1234");
        assert!(ioctl_without_arg(0x5451));
        assert!(!ioctl_without_arg(0x5401));
        assert_eq!(ioctl_arg(0x541b), IoctlArg::OutInt);
        assert_eq!(ioctl_arg(0x5421), IoctlArg::InInt);
        assert_eq!(ioctl_arg(0x5413), IoctlArg::OutWinsize);
        assert_eq!(ioctl_arg(0x5401), IoctlArg::Addr);
        let mut b = Vec::new();
        for v in [24u16, 80, 0, 0] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        let mem = crate::syscalls::testmem::Mem::new(0x1000, &b);
        assert_eq!(
            winsize_str(&mem, 0x1000),
            "{ws_row=24, ws_col=80, ws_xpixel=0, ws_ypixel=0}"
        );
    }

    #[test]
    fn futex_ops() {
        assert_eq!(futex_op_str(128), "FUTEX_WAIT_PRIVATE");
        assert_eq!(futex_op_str(129), "FUTEX_WAKE_PRIVATE");
        assert_eq!(
            futex_op_str(9 | 128 | 256),
            "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"
        );
        assert_eq!(futex_op_str(99), "0x63");
        assert_eq!(futex_cmd(137), 9);
    }
}
