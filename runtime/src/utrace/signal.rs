//! Signals as raw numbers.
//!
//! nix's `Signal` enum has no real-time signals, and glibc itself uses
//! signals 32 and 33, so the core keeps every signal as its raw number.

use std::fmt;

/// A signal number (1..=64 on Linux), real-time signals included.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Signal(pub i32);

impl Signal {
    pub const HUP: Signal = Signal(libc::SIGHUP);
    pub const INT: Signal = Signal(libc::SIGINT);
    pub const KILL: Signal = Signal(libc::SIGKILL);
    pub const TERM: Signal = Signal(libc::SIGTERM);
    pub const TRAP: Signal = Signal(libc::SIGTRAP);
    pub const STOP: Signal = Signal(libc::SIGSTOP);
    pub const CONT: Signal = Signal(libc::SIGCONT);
    pub const USR1: Signal = Signal(libc::SIGUSR1);
    pub const USR2: Signal = Signal(libc::SIGUSR2);

    pub fn number(self) -> i32 {
        self.0
    }

    /// Signals whose default action is a job-control stop. With
    /// `PTRACE_SEIZE`, a `PTRACE_EVENT_STOP` carrying one of these is a
    /// group-stop.
    pub fn is_stop_signal(self) -> bool {
        matches!(
            self.0,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
        )
    }

    /// The conventional name: `SIGINT`, `SIGRTMIN+3`, or `SIG70` when
    /// out of range.
    pub fn name(self) -> String {
        const NAMES: [&str; 32] = [
            "SIG0",
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
        match self.0 {
            n @ 0..=31 => NAMES[n as usize].to_string(),
            // The kernel's SIGRTMIN is 32; glibc reserves 32 and 33.
            n @ 32..=64 => format!("SIGRTMIN+{}", n - 32),
            n => format!("SIG{n}"),
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Signal;

    #[test]
    fn names() {
        assert_eq!(Signal(2).name(), "SIGINT");
        assert_eq!(Signal(34).name(), "SIGRTMIN+2");
        assert_eq!(Signal(99).name(), "SIG99");
    }
}
