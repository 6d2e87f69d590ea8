//! The engine interface: callbacks a tracing engine implements.
//!
//! Callbacks run on the tracer thread while the reported thread sits in a
//! ptrace-stop. Like utrace callbacks (seed 000) they must never block on
//! I/O, on other threads or on the user: to keep a thread stopped, return
//! [`ResumeAction::Stop`] and let other code resume it later with
//! `control`. SIGKILL always ends a stopped thread anyway.
//!
//! Every callback gets the prevailing action of the engines called before it
//! for this event and returns its own; the smallest prevails, and an
//! engine's own return value replaces whatever it asked for earlier.
//! Default implementations return [`ResumeAction::Resume`] ("no opinion").

use std::any::Any;

use super::{BreakpointHit, Cx, Event, ResumeAction, Signal, Tid};

/// Names an engine registered with `Tracer::add_engine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EngineId(pub u32);

/// The signal part of a `report_signal`: engines read and change `deliver`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalReport {
    /// The signal the thread was about to receive; `None` for the injection
    /// report that follows an `Interrupt` (seed 001's "NONE" disposition).
    pub original: Option<Signal>,
    /// What will be delivered: set `Some(other)` to replace or inject,
    /// `None` to suppress. The last engine's choice wins.
    pub deliver: Option<Signal>,
}

/// What kind of thing a clone created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloneKind {
    /// A thread in the same process (`PTRACE_EVENT_CLONE` with CLONE_THREAD).
    Thread,
    /// A new process (fork, or clone without CLONE_THREAD).
    Fork,
    /// A new process sharing memory until it execs or exits.
    Vfork,
}

/// The payload of `report_clone`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloneInfo {
    pub child: Tid,
    pub kind: CloneKind,
}

/// Job-control transitions reported by `report_jctl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jctl {
    /// The thread entered a group-stop because of this signal.
    Stopped(Signal),
    /// The group-stop ended (SIGCONT).
    Continued,
}

/// How a thread (or process) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(i32),
    Signaled { sig: Signal, core: bool },
}

impl ExitStatus {
    /// The shell convention: the exit code, or 128 + signal number.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Exited(c) => c,
            ExitStatus::Signaled { sig, .. } => 128 + sig.0,
        }
    }
}

/// A tracing engine. Register with `Tracer::add_engine`, attach to threads
/// with `attach`; only callbacks for events in the engine's mask on that
/// thread are made.
pub trait Engine: Any {
    /// Called first, with the event now happening (`Event::None` for a stop
    /// requested with `Stop`/`Report`/`Interrupt`, or a step), if the engine
    /// asked for `QUIESCE`. May call `set_events` to get the event's own
    /// report right after.
    fn report_quiesce(
        &mut self,
        _cx: &mut Cx,
        _action: ResumeAction,
        _event: Event,
    ) -> ResumeAction {
        ResumeAction::Resume
    }
    /// A signal is about to be delivered (or, with `signal.original ==
    /// None`, an injection opportunity after `Interrupt`).
    fn report_signal(
        &mut self,
        _cx: &mut Cx,
        _action: ResumeAction,
        _signal: &mut SignalReport,
    ) -> ResumeAction {
        ResumeAction::Resume
    }
    /// At syscall entry: `cx.syscall()` has the number and arguments;
    /// `cx.set_syscall_return(v)` skips the call and makes it return `v`.
    fn report_syscall_entry(&mut self, _cx: &mut Cx, _action: ResumeAction) -> ResumeAction {
        ResumeAction::Resume
    }
    /// At syscall exit: `cx.syscall()` has number, arguments and return
    /// value; `cx.set_syscall_return(v)` changes it.
    fn report_syscall_exit(&mut self, _cx: &mut Cx, _action: ResumeAction) -> ResumeAction {
        ResumeAction::Resume
    }
    /// The thread created `clone.child` (already traced, stopped until the
    /// report is over). Engines with `FOLLOW` are already attached to it;
    /// others may `cx.attach` to it here. A child no engine attaches to is
    /// detached.
    fn report_clone(
        &mut self,
        _cx: &mut Cx,
        _action: ResumeAction,
        _clone: &CloneInfo,
    ) -> ResumeAction {
        ResumeAction::Resume
    }
    /// The thread's process executed a new program (`former` is the thread's
    /// id before the exec when a non-leader thread exec'd).
    fn report_exec(&mut self, _cx: &mut Cx, _action: ResumeAction, _former: Tid) -> ResumeAction {
        ResumeAction::Resume
    }
    /// The thread is exiting with this raw wait status; registers are
    /// still readable.
    fn report_exit(&mut self, _cx: &mut Cx, _action: ResumeAction, _status: i32) -> ResumeAction {
        ResumeAction::Resume
    }
    /// Job-control stop or continue.
    fn report_jctl(&mut self, _cx: &mut Cx, _action: ResumeAction, _jctl: Jctl) -> ResumeAction {
        ResumeAction::Resume
    }
    /// A breakpoint the core inserted was hit (registers show rip at the
    /// site), or, with `hit.returned`, a hijacked function returned (rip
    /// at the real return address, rax its value). The core steps over
    /// the instruction after the reports.
    fn report_breakpoint(
        &mut self,
        _cx: &mut Cx,
        _action: ResumeAction,
        _hit: &BreakpointHit,
    ) -> ResumeAction {
        ResumeAction::Resume
    }
    /// The thread died. It can no longer be examined.
    fn report_death(&mut self, _cx: &mut Cx, _status: ExitStatus) {}
    /// The thread is gone for good; the engine is detached from it.
    fn report_reap(&mut self, _cx: &mut Cx) {}
}
