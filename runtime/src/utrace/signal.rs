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
    /// out of range (the standard names come from the syscall tables).
    pub fn name(self) -> String {
        match self.0 {
            0 => "SIG0".to_string(),
            n @ 1..=31 => crate::syscalls::signals::standard_name(n).to_string(),
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

/// What delivering a signal to a thread would do now (utrace's signal
/// disposition in `report_signal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// The program installed a handler.
    Handler,
    /// Ignored (SIG_IGN, or ignored by default).
    Ignore,
    Terminate,
    CoreDump,
    Stop,
    Continue,
}

impl Signal {
    /// The default action (SIG_DFL), per signal(7).
    pub fn default_disposition(self) -> Disposition {
        match self.0 {
            libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH => Disposition::Ignore,
            libc::SIGCONT => Disposition::Continue,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => Disposition::Stop,
            libc::SIGQUIT
            | libc::SIGILL
            | libc::SIGTRAP
            | libc::SIGABRT
            | libc::SIGBUS
            | libc::SIGFPE
            | libc::SIGSEGV
            | libc::SIGXCPU
            | libc::SIGXFSZ
            | libc::SIGSYS => Disposition::CoreDump,
            _ => Disposition::Terminate,
        }
    }

    /// The disposition for thread `tid`, from the caught and ignored masks
    /// in /proc (None if the thread is gone).
    pub fn disposition_in(self, tid: super::Tid) -> Option<Disposition> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", tid.0)).ok()?;
        let mask = |field: &str| {
            let v = status.lines().find_map(|l| l.strip_prefix(field))?;
            u64::from_str_radix(v.trim(), 16).ok()
        };
        let bit = 1u64.checked_shl(self.0 as u32 - 1).unwrap_or(0);
        Some(if self.0 == libc::SIGKILL || self.0 == libc::SIGSTOP {
            self.default_disposition()
        } else if mask("SigCgt:")? & bit != 0 {
            Disposition::Handler
        } else if mask("SigIgn:")? & bit != 0 {
            Disposition::Ignore
        } else {
            self.default_disposition()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Disposition, Signal};

    #[test]
    fn default_dispositions() {
        assert_eq!(
            Signal(libc::SIGCHLD).default_disposition(),
            Disposition::Ignore
        );
        assert_eq!(
            Signal(libc::SIGSEGV).default_disposition(),
            Disposition::CoreDump
        );
        assert_eq!(
            Signal(libc::SIGTSTP).default_disposition(),
            Disposition::Stop
        );
        assert_eq!(Signal(40).default_disposition(), Disposition::Terminate);
    }

    #[test]
    fn names() {
        assert_eq!(Signal(2).name(), "SIGINT");
        assert_eq!(Signal(34).name(), "SIGRTMIN+2");
        assert_eq!(Signal(99).name(), "SIG99");
    }
}
