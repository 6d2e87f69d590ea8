//! Event masks: which callbacks an engine wants on a thread.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// A set of events an engine subscribes to with `attach`/`set_events`.
/// The union of the masks of a thread's engines decides how the thread is
/// resumed (`PTRACE_CONT` or `PTRACE_SYSCALL`), so an engine that wants no
/// syscall events costs no syscall stops.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Events(u32);

impl Events {
    pub const NONE: Events = Events(0);
    /// `report_quiesce` before every other report, and at stops requested
    /// with `Stop`/`Report`/`Interrupt`.
    pub const QUIESCE: Events = Events(1 << 0);
    /// `report_reap`: the thread is gone for good.
    pub const REAP: Events = Events(1 << 1);
    /// `report_clone`: the thread created a thread or process.
    pub const CLONE: Events = Events(1 << 2);
    /// `report_exec`: the thread's process executed a new program.
    pub const EXEC: Events = Events(1 << 3);
    /// `report_exit`: the thread is exiting (still inspectable).
    pub const EXIT: Events = Events(1 << 4);
    /// `report_death`: the thread has died.
    pub const DEATH: Events = Events(1 << 5);
    /// `report_syscall_entry`.
    pub const SYSCALL_ENTRY: Events = Events(1 << 6);
    /// `report_syscall_exit`.
    pub const SYSCALL_EXIT: Events = Events(1 << 7);
    /// `report_signal` for every signal about to be delivered.
    pub const SIGNAL: Events = Events(1 << 8);
    /// `report_jctl`: job-control stop or continue of the thread.
    pub const JCTL: Events = Events(1 << 9);
    /// Not an event: attach this engine, with the same mask, to every thread
    /// and process this thread creates (before `report_clone` runs).
    pub const FOLLOW: Events = Events(1 << 10);
    /// `report_breakpoint`: a breakpoint the core inserted was hit, or a
    /// hijacked return came back.
    pub const BREAKPOINT: Events = Events(1 << 11);

    pub const fn bits(self) -> u32 {
        self.0
    }
    pub const fn contains(self, other: Events) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn intersects(self, other: Events) -> bool {
        self.0 & other.0 != 0
    }
    pub const fn union(self, other: Events) -> Events {
        Events(self.0 | other.0)
    }
    pub const fn without(self, other: Events) -> Events {
        Events(self.0 & !other.0)
    }
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Events {
    type Output = Events;
    fn bitor(self, rhs: Events) -> Events {
        self.union(rhs)
    }
}

impl BitOrAssign for Events {
    fn bitor_assign(&mut self, rhs: Events) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 12] = [
            "QUIESCE",
            "REAP",
            "CLONE",
            "EXEC",
            "EXIT",
            "DEATH",
            "SYSCALL_ENTRY",
            "SYSCALL_EXIT",
            "SIGNAL",
            "JCTL",
            "FOLLOW",
            "BREAKPOINT",
        ];
        let names: Vec<&str> = (0..NAMES.len())
            .filter(|i| self.0 & (1 << i) != 0)
            .map(|i| NAMES[i])
            .collect();
        write!(f, "Events({})", names.join("|"))
    }
}

/// The event happening when `report_quiesce` is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// Nothing special: the stop was requested (`Stop`, `Report`,
    /// `Interrupt`) or the thread was just attached.
    None,
    SyscallEntry,
    SyscallExit,
    Signal,
    Clone,
    Exec,
    Exit,
    Jctl,
    /// A `SingleStep`/`BlockStep` completed.
    Step,
    /// A breakpoint of the core was hit.
    Breakpoint,
}

impl Event {
    /// The subscription that reports this event, if any.
    pub(crate) fn mask(self) -> Events {
        match self {
            Event::None | Event::Step => Events::NONE,
            Event::SyscallEntry => Events::SYSCALL_ENTRY,
            Event::SyscallExit => Events::SYSCALL_EXIT,
            Event::Signal => Events::SIGNAL,
            Event::Clone => Events::CLONE,
            Event::Exec => Events::EXEC,
            Event::Exit => Events::EXIT,
            Event::Jctl => Events::JCTL,
            Event::Breakpoint => Events::BREAKPOINT,
        }
    }
}
