//! Engine slots: how sessions come and go on a tracer that is running.
//!
//! The utrace core registers engines before `run` (`Tracer::add_engine`
//! needs the tracer itself, which `run` holds). The daemon therefore
//! registers a fixed pool of slot engines at start; a session takes a free
//! slot, puts its script engine in it, and attaches the slot's engine id to
//! its threads. An empty slot answers every report with `Resume`. Each slot
//! also adds up the time its session's callbacks take (`--sessions`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::session::engine::ScriptEngine;
use crate::utrace::{
    BreakpointHit, CloneInfo, Cx, Engine, Event, ExitStatus, Jctl, ResumeAction, SignalReport, Tid,
};

/// How many sessions a daemon serves at once.
pub const SLOTS: usize = 64;

/// The tracer thread's view of one slot.
#[derive(Clone, Default)]
pub(crate) struct Slot {
    pub engine: Rc<RefCell<Option<ScriptEngine>>>,
    pub busy: Rc<Cell<Duration>>,
}

/// The engine registered with the tracer for a slot.
pub(crate) struct SlotEngine(pub Slot);

impl SlotEngine {
    /// Runs `f` on the slot's script engine, timed; `Resume` when empty.
    #[inline]
    fn with(&mut self, f: impl FnOnce(&mut ScriptEngine) -> ResumeAction) -> ResumeAction {
        let Ok(mut guard) = self.0.engine.try_borrow_mut() else {
            return ResumeAction::Resume;
        };
        let Some(engine) = guard.as_mut() else {
            return ResumeAction::Resume;
        };
        let started = Instant::now();
        let action = f(engine);
        self.0.busy.set(self.0.busy.get() + started.elapsed());
        action
    }
}

impl Engine for SlotEngine {
    fn report_quiesce(&mut self, cx: &mut Cx, action: ResumeAction, event: Event) -> ResumeAction {
        self.with(|e| e.report_quiesce(cx, action, event))
    }

    fn report_signal(
        &mut self,
        cx: &mut Cx,
        action: ResumeAction,
        sig: &mut SignalReport,
    ) -> ResumeAction {
        self.with(|e| e.report_signal(cx, action, sig))
    }

    fn report_syscall_entry(&mut self, cx: &mut Cx, action: ResumeAction) -> ResumeAction {
        self.with(|e| e.report_syscall_entry(cx, action))
    }

    fn report_syscall_exit(&mut self, cx: &mut Cx, action: ResumeAction) -> ResumeAction {
        self.with(|e| e.report_syscall_exit(cx, action))
    }

    fn report_clone(
        &mut self,
        cx: &mut Cx,
        action: ResumeAction,
        clone: &CloneInfo,
    ) -> ResumeAction {
        self.with(|e| e.report_clone(cx, action, clone))
    }

    fn report_exec(&mut self, cx: &mut Cx, action: ResumeAction, former: Tid) -> ResumeAction {
        self.with(|e| e.report_exec(cx, action, former))
    }

    fn report_exit(&mut self, cx: &mut Cx, action: ResumeAction, status: i32) -> ResumeAction {
        self.with(|e| e.report_exit(cx, action, status))
    }

    fn report_jctl(&mut self, cx: &mut Cx, action: ResumeAction, jctl: Jctl) -> ResumeAction {
        self.with(|e| e.report_jctl(cx, action, jctl))
    }

    fn report_breakpoint(
        &mut self,
        cx: &mut Cx,
        action: ResumeAction,
        hit: &BreakpointHit,
    ) -> ResumeAction {
        self.with(|e| e.report_breakpoint(cx, action, hit))
    }

    fn report_death(&mut self, cx: &mut Cx, status: ExitStatus) {
        self.with(|e| {
            e.report_death(cx, status);
            ResumeAction::Resume
        });
    }

    fn report_reap(&mut self, cx: &mut Cx) {
        self.with(|e| {
            e.report_reap(cx);
            ResumeAction::Resume
        });
    }
}
