//! Signal names, as SystemTap and as strace spell them.
//!
//! SystemTap's `sig_name` (tapset/linux/aux_syscalls.stp `_signal_name`)
//! says "SIG_0" for 0, "SIGIO/SIGPOLL" for 29 and falls back to hex for
//! anything else it does not list (it forgets SIGSTKFLT and the real-time
//! range). utap's `signal_name` keeps those spellings and fills the gaps with
//! "SIGSTKFLT" and SystemTap's `signal_str` numbering of the real-time range:
//! 32 is "SIGRTMIN", 33 "SIGRTMIN+1" ... 64 "SIGRTMIN+32".
//!
//! strace (used for syscall argument text) says "0" for 0, "SIGIO" for 29,
//! "SIGRTMIN" for 32 and "SIGRT_1" ... "SIGRT_32" above it.

/// Standard signals 1..=31 as the kernel numbers them on x86_64.
static STANDARD: [&str; 32] = [
    "",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// The name of standard signal `n` (1..=31), e.g. "SIGINT".
pub fn standard_name(n: i32) -> &'static str {
    STANDARD[n as usize]
}

/// The kernel's first real-time signal (glibc reserves 32 and 33 and
/// reports SIGRTMIN as 34; the kernel numbering is what tracers see).
pub const KERNEL_SIGRTMIN: i64 = 32;
/// The kernel's last real-time signal on x86_64.
pub const KERNEL_SIGRTMAX: i64 = 64;

/// SystemTap-style name of signal `sig` (see the module comment).
pub fn signal_name(sig: i64) -> String {
    match sig {
        0 => "SIG_0".to_string(),
        29 => "SIGIO/SIGPOLL".to_string(),
        1..=31 => STANDARD[sig as usize].to_string(),
        KERNEL_SIGRTMIN => "SIGRTMIN".to_string(),
        33..=KERNEL_SIGRTMAX => format!("SIGRTMIN+{}", sig - KERNEL_SIGRTMIN),
        // SystemTap's lookup prints the unsigned 32-bit value in hex.
        _ => format!("0x{:x}", sig as u32),
    }
}

/// strace's name for signal `sig`, or its decimal number when it has none.
pub fn strace_signame(sig: i64) -> String {
    match sig {
        1..=31 => STANDARD[sig as usize].to_string(),
        KERNEL_SIGRTMIN => "SIGRTMIN".to_string(),
        33..=KERNEL_SIGRTMAX => format!("SIGRT_{}", sig - KERNEL_SIGRTMIN),
        _ => sig.to_string(),
    }
}

/// The number of a signal given by name, with or without "SIG", in either
/// spelling above ("SIGUSR1", "USR1", "SIGRTMIN+3", "SIGRT_3", "SIGIO/SIGPOLL").
pub fn signal_number(name: &str) -> Option<i64> {
    let bare = name.strip_prefix("SIG").unwrap_or(name);
    match bare {
        "IO/SIGPOLL" | "IO/POLL" | "POLL" => return Some(29),
        "IOT" => return Some(6),
        "CLD" => return Some(17),
        "RTMIN" => return Some(KERNEL_SIGRTMIN),
        _ => {}
    }
    if let Some(n) = bare
        .strip_prefix("RTMIN+")
        .or_else(|| bare.strip_prefix("RT_"))
        .and_then(|n| n.parse::<i64>().ok())
    {
        let sig = KERNEL_SIGRTMIN + n;
        return (sig <= KERNEL_SIGRTMAX).then_some(sig);
    }
    STANDARD
        .iter()
        .skip(1)
        .position(|s| &s[3..] == bare)
        .map(|i| i as i64 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_names() {
        assert_eq!(signal_name(2), "SIGINT");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(17), "SIGCHLD");
        assert_eq!(signal_name(16), "SIGSTKFLT");
        assert_eq!(signal_name(31), "SIGSYS");
        assert_eq!(strace_signame(10), "SIGUSR1");
        assert_eq!(strace_signame(29), "SIGIO");
    }

    #[test]
    fn numbers_agree_with_libc() {
        for (sig, name) in [
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGUSR2, "SIGUSR2"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGWINCH, "SIGWINCH"),
            (libc::SIGPWR, "SIGPWR"),
        ] {
            assert_eq!(signal_name(sig as i64), name);
            assert_eq!(signal_number(name), Some(sig as i64));
        }
    }

    #[test]
    fn systemtap_spellings() {
        assert_eq!(signal_name(0), "SIG_0");
        assert_eq!(signal_name(29), "SIGIO/SIGPOLL");
        assert_eq!(signal_name(32), "SIGRTMIN");
        assert_eq!(signal_name(35), "SIGRTMIN+3");
        assert_eq!(signal_name(64), "SIGRTMIN+32");
        assert_eq!(signal_name(65), "0x41");
        assert_eq!(signal_name(-1), "0xffffffff");
    }

    #[test]
    fn strace_spellings() {
        assert_eq!(strace_signame(0), "0");
        assert_eq!(strace_signame(32), "SIGRTMIN");
        assert_eq!(strace_signame(35), "SIGRT_3");
        assert_eq!(strace_signame(65), "65");
        assert_eq!(strace_signame(-3), "-3");
    }

    #[test]
    fn names_back_to_numbers() {
        assert_eq!(signal_number("SIGRTMIN+3"), Some(35));
        assert_eq!(signal_number("SIGRT_3"), Some(35));
        assert_eq!(signal_number("USR1"), Some(10));
        assert_eq!(signal_number("SIGIO/SIGPOLL"), Some(29));
        assert_eq!(signal_number("SIGRTMIN+40"), None);
        assert_eq!(signal_number("SIGBOGUS"), None);
        assert_eq!(signal_number(""), None);
    }
}
