//! Arguments of ioctl and futex, which strace decodes by request / operation.

use super::bytes::*;
use super::flags::{Xlat, flags_str, xlat_lookup};

/// Request names; where two subsystems share a number strace names both,
/// as for the sound timer and terminal requests.
const IOCTLS: &[Xlat] = &[
    (0x5401, "TCGETS"),
    (0x5402, "SNDCTL_TMR_START or TCSETS"),
    (0x5403, "SNDCTL_TMR_STOP or TCSETSW"),
    (0x5404, "SNDCTL_TMR_CONTINUE or TCSETSF"),
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
    /// `struct termios` the call reads (TCSETS*).
    InTermios,
    /// `struct termios` the call writes (TCGETS).
    OutTermios,
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
        0x5402..=0x5404 => IoctlArg::InTermios,
        0x5401 => IoctlArg::OutTermios,
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

const TERM_IFLAGS: &[Xlat] = &[
    (0o1, "IGNBRK"),
    (0o2, "BRKINT"),
    (0o4, "IGNPAR"),
    (0o10, "PARMRK"),
    (0o20, "INPCK"),
    (0o40, "ISTRIP"),
    (0o100, "INLCR"),
    (0o200, "IGNCR"),
    (0o400, "ICRNL"),
    (0o1000, "IUCLC"),
    (0o2000, "IXON"),
    (0o4000, "IXANY"),
    (0o10000, "IXOFF"),
    (0o20000, "IMAXBEL"),
    (0o40000, "IUTF8"),
];

const TERM_OFLAGS: &[Xlat] = &[
    (0o1, "OPOST"),
    (0o2, "OLCUC"),
    (0o4, "ONLCR"),
    (0o10, "OCRNL"),
    (0o20, "ONOCR"),
    (0o40, "ONLRET"),
    (0o100, "OFILL"),
    (0o200, "OFDEL"),
];

/// The delay fields of c_oflag: mask and the names of its values.
const TERM_ODELAYS: [(u64, &[Xlat], &str); 6] = [
    (0o400, &[(0, "NL0"), (0o400, "NL1")], "NL?"),
    (
        0o3000,
        &[
            (0, "CR0"),
            (0o1000, "CR1"),
            (0o2000, "CR2"),
            (0o3000, "CR3"),
        ],
        "CR?",
    ),
    (
        0o14000,
        &[
            (0, "TAB0"),
            (0o4000, "TAB1"),
            (0o10000, "TAB2"),
            (0o14000, "TAB3"),
        ],
        "TAB?",
    ),
    (0o20000, &[(0, "BS0"), (0o20000, "BS1")], "BS?"),
    (0o40000, &[(0, "VT0"), (0o40000, "VT1")], "VT?"),
    (0o100000, &[(0, "FF0"), (0o100000, "FF1")], "FF?"),
];

const TERM_LFLAGS: &[Xlat] = &[
    (0o1, "ISIG"),
    (0o2, "ICANON"),
    (0o4, "XCASE"),
    (0o10, "ECHO"),
    (0o20, "ECHOE"),
    (0o40, "ECHOK"),
    (0o100, "ECHONL"),
    (0o200, "NOFLSH"),
    (0o100000, "IEXTEN"),
    (0o1000, "ECHOCTL"),
    (0o2000, "ECHOPRT"),
    (0o4000, "ECHOKE"),
    (0o10000, "FLUSHO"),
    (0o40000, "PENDIN"),
    (0o400, "TOSTOP"),
    (0o200000, "EXTPROC"),
];

const TERM_CFLAGS: &[Xlat] = &[
    (0o100, "CSTOPB"),
    (0o200, "CREAD"),
    (0o400, "PARENB"),
    (0o1000, "PARODD"),
    (0o2000, "HUPCL"),
    (0o4000, "CLOCAL"),
    (0o10000000000, "CMSPAR"),
    (0o20000000000, "CRTSCTS"),
];

const BAUDS: &[Xlat] = &[
    (0, "B0"),
    (1, "B50"),
    (2, "B75"),
    (3, "B110"),
    (4, "B134"),
    (5, "B150"),
    (6, "B200"),
    (7, "B300"),
    (8, "B600"),
    (9, "B1200"),
    (10, "B1800"),
    (11, "B2400"),
    (12, "B4800"),
    (13, "B9600"),
    (14, "B19200"),
    (15, "B38400"),
    (0o10000, "BOTHER"),
    (0o10001, "B57600"),
    (0o10002, "B115200"),
    (0o10003, "B230400"),
    (0o10004, "B460800"),
    (0o10005, "B500000"),
    (0o10006, "B576000"),
    (0o10007, "B921600"),
    (0o10010, "B1000000"),
    (0o10011, "B1152000"),
    (0o10012, "B1500000"),
    (0o10013, "B2000000"),
    (0o10014, "B2500000"),
    (0o10015, "B3000000"),
    (0o10016, "B3500000"),
    (0o10017, "B4000000"),
];

fn oflag_str(v: u64) -> String {
    let mut parts = Vec::new();
    let mut rest = v;
    for (mask, names, dflt) in TERM_ODELAYS {
        let field = rest & mask;
        parts.push(
            xlat_lookup(field, names)
                .map_or_else(|| format!("{field:#x} /* {dflt} */"), str::to_string),
        );
        rest &= !mask;
    }
    if rest != 0 {
        parts.push(flags_str(rest, TERM_OFLAGS, "0", ""));
    }
    parts.join("|")
}

fn cflag_str(v: u64) -> String {
    const CBAUD: u64 = 0o10017;
    const CIBAUD: u64 = CBAUD << 16;
    const CSIZE: u64 = 0o60;
    let baud =
        |b: u64| xlat_lookup(b, BAUDS).map_or_else(|| format!("{b:#x} /* B??? */"), str::to_string);
    let mut parts = vec![baud(v & CBAUD)];
    if v & CIBAUD != 0 {
        parts.push(format!("{}<<IBSHIFT", baud((v & CIBAUD) >> 16)));
    }
    parts.push(["CS5", "CS6", "CS7", "CS8"][((v & CSIZE) >> 4) as usize].to_string());
    let rest = v & !(CBAUD | CIBAUD | CSIZE);
    if rest != 0 {
        parts.push(flags_str(rest, TERM_CFLAGS, "0", ""));
    }
    parts.join("|")
}

/// `struct termios` as strace abbreviates it:
/// `{c_iflag=ICRNL|IXON, c_oflag=NL0|CR0|...|OPOST|ONLCR, c_cflag=B38400|CS8|CREAD, c_lflag=ISIG|..., ...}`.
pub fn termios_str(mem: &dyn crate::memory::ReadMemory, addr: u64) -> String {
    let Some(b) = read_exact(mem, addr, 16) else {
        return super::strings::addr_str(addr);
    };
    let f = |i: usize| u64::from(u32_at(&b, i * 4));
    format!(
        "{{c_iflag={}, c_oflag={}, c_cflag={}, c_lflag={}, ...}}",
        flags_str(f(0), TERM_IFLAGS, "0", ""),
        oflag_str(f(1)),
        cflag_str(f(2)),
        flags_str(f(3), TERM_LFLAGS, "0", "")
    )
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
        assert_eq!(ioctl_arg(0x5401), IoctlArg::OutTermios);
        assert_eq!(ioctl_arg(0x5402), IoctlArg::InTermios);
        assert_eq!(ioctl_arg(0x1234), IoctlArg::Addr);
        let mut t = Vec::new();
        for v in [0o2400u32, 0o5, 0o277, 0o105073] {
            t.extend_from_slice(&v.to_ne_bytes());
        }
        let tmem = crate::syscalls::testmem::Mem::new(0x2000, &t);
        assert_eq!(
            termios_str(&tmem, 0x2000),
            "{c_iflag=ICRNL|IXON, c_oflag=NL0|CR0|TAB0|BS0|VT0|FF0|OPOST|ONLCR, c_cflag=B38400|CS8|CREAD, c_lflag=ISIG|ICANON|ECHO|ECHOE|ECHOK|IEXTEN|ECHOCTL|ECHOKE, ...}"
        );
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
