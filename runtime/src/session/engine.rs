//! The script's utrace engine: every process probe family of a script is
//! served by one engine attached to every traced thread, whose callbacks
//! fill in the probe context and run the compiled handlers.
//!
//! Callbacks run on the tracer thread and never block: handler output goes
//! to the transport queue, and process facts come from caches refreshed at
//! clone and exec.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::memory::ProcessMemory;
use crate::script::{ControlRequest, Outcome, ProbeValues, ScriptRuntime};
use crate::transport::Producer;
use crate::utrace::{
    CloneInfo, CloneKind, Control, Cx, EndReason, Engine, EngineId, Event, ExitStatus,
    ResumeAction, Signal, SignalReport, Tid,
};

use super::points::{Dispatch, Hook, ProcessFilter};

/// What the engine and the session's timers share (all on the tracer thread).
pub(crate) struct Shared {
    pub script: ScriptRuntime,
    pub sink: Producer,
    pub engine: EngineId,
    /// Live traced threads per process, to know when a process ends.
    live: HashMap<i32, u32>,
    /// Executable paths per process, kept only when a probe is limited to a
    /// path.
    exe: HashMap<i32, String>,
    want_exe: bool,
    /// Number and arguments recorded at syscall entry, for the return
    /// probes. The number is needed for rt_sigreturn, whose exit sees the
    /// registers of the signal frame (orig_rax -1).
    entry_args: HashMap<i32, (i64, [i64; 6])>,
    /// Threads a script asked to quiesce, whose quiesce report is due.
    quiescing: Vec<i32>,
    /// The command runs under a seccomp filter: detaching would make every
    /// syscall the filter traps fail with ENOSYS (a RET_TRACE filter with
    /// no tracer), so when the script ends first the session keeps tracing
    /// passively until the command exits.
    pub linger: bool,
    /// The script has ended (end probes run): the exit status.
    pub finished: Option<i32>,
}

pub(crate) type SharedRef = Rc<RefCell<Shared>>;

impl Shared {
    pub fn new(script: ScriptRuntime, sink: Producer, dispatch: &Dispatch) -> Shared {
        Shared {
            script,
            sink,
            engine: EngineId(u32::MAX),
            live: HashMap::new(),
            exe: HashMap::new(),
            want_exe: dispatch.path_filters,
            entry_args: HashMap::new(),
            quiescing: Vec::new(),
            linger: false,
            finished: None,
        }
    }

    /// A process (and its threads) is now traced: learn its facts and fire
    /// `process.begin` and `process.thread.begin` for it.
    pub fn adopt_process(&mut self, ctl: &mut Control, d: &Dispatch, pid: Tid, threads: &[Tid]) {
        self.note_exec(pid.0);
        for &t in threads {
            self.script.procs_mut().refresh(t.0);
            *self.live.entry(pid.0).or_default() += 1;
        }
        let values = context(pid.0, pid.0);
        self.fire(ctl, &d.begin, &values);
        for &t in threads.iter().filter(|t| **t != pid) {
            self.fire(ctl, &d.thread_begin, &context(pid.0, t.0));
        }
    }

    fn note_exec(&mut self, pid: i32) {
        self.script.procs_mut().refresh(pid);
        if self.want_exe {
            if let Ok(p) = std::fs::read_link(format!("/proc/{pid}/exe")) {
                self.exe.insert(pid, p.to_string_lossy().into_owned());
            }
        }
    }

    fn matches(&self, filter: &ProcessFilter, pid: i32) -> bool {
        match filter {
            ProcessFilter::Any => true,
            ProcessFilter::Pid(p) => *p == pid,
            ProcessFilter::Path(path) => self.exe.get(&pid).is_some_and(|e| e == path),
        }
    }

    /// Runs the handlers of `hooks` that apply to the event's process, in
    /// order; returns the (possibly guru-modified) context values and
    /// whether the current thread must stay stopped.
    pub fn fire(&mut self, ctl: &mut Control, hooks: &[Hook], values: &ProbeValues) -> Fired {
        let mut fired = Fired {
            values: *values,
            stop: false,
        };
        if self.finished.is_some() {
            return fired;
        }
        let memory = ProcessMemory::new(values.tid as i32);
        for hook in hooks {
            if !self.matches(&hook.filter, values.pid as i32) {
                continue;
            }
            let outcome = self.script.fire_point(
                hook.probe,
                hook.point,
                &fired.values,
                Some(&memory),
                &mut self.sink,
            );
            fired.values = outcome.probe;
            fired.stop |= self.apply(ctl, &outcome, values.tid);
            if outcome.stop {
                self.end(ctl);
                break;
            }
        }
        fired
    }

    /// Ends the script (exit(), an error, -T): end probes now, and the
    /// tracing too unless the command must be shepherded (see `linger`).
    pub fn end(&mut self, ctl: &mut Control) {
        if self.finished.is_none() {
            self.finished = Some(super::finish(&mut self.script, &mut self.sink));
        }
        if !self.linger {
            ctl.end(EndReason::Requested);
        }
    }

    /// Carries out a handler's thread-control requests; true when the
    /// current thread is to stay stopped (`current` is -1 in a timer).
    pub fn apply(&mut self, ctl: &mut Control, outcome: &Outcome, current: i64) -> bool {
        let mut stop = false;
        for req in &outcome.control {
            match *req {
                ControlRequest::Stop(t) if t == current => stop = true,
                ControlRequest::Stop(t) => {
                    let _ = ctl.control(Tid(t as i32), self.engine, ResumeAction::Stop);
                }
                ControlRequest::Resume(t) => {
                    let _ = ctl.control(Tid(t as i32), self.engine, ResumeAction::Resume);
                }
                ControlRequest::Quiesce(t) => {
                    self.quiescing.push(t as i32);
                    let _ = ctl.control(Tid(t as i32), self.engine, ResumeAction::Report);
                }
            }
        }
        stop
    }
}

/// What a firing left behind.
pub(crate) struct Fired {
    pub values: ProbeValues,
    pub stop: bool,
}

fn context(pid: i32, tid: i32) -> ProbeValues {
    ProbeValues {
        pid: pid as i64,
        tid: tid as i64,
        ..ProbeValues::default()
    }
}

fn action(stop: bool) -> ResumeAction {
    if stop {
        ResumeAction::Stop
    } else {
        ResumeAction::Resume
    }
}

/// The engine object registered with the tracer. The dispatch tables are
/// immutable once the session starts, so they are borrowed beside the
/// mutable state instead of copied per event.
pub(crate) struct ScriptEngine {
    pub shared: SharedRef,
    pub dispatch: Rc<Dispatch>,
}

impl Engine for ScriptEngine {
    fn report_quiesce(&mut self, cx: &mut Cx, _: ResumeAction, event: Event) -> ResumeAction {
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let tid = cx.tid().0;
        let Some(i) = s.quiescing.iter().position(|&t| t == tid) else {
            return ResumeAction::Resume;
        };
        if event != Event::None {
            return ResumeAction::Resume;
        }
        s.quiescing.swap_remove(i);
        let hooks = &d.quiesce;
        let values = context(cx.pid().0, tid);
        action(s.fire(cx, hooks, &values).stop)
    }

    fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        let Ok(info) = cx.syscall() else {
            return ResumeAction::Resume;
        };
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let args = info.args.map(|a| a as i64);
        if d.exit.get(info.nr as i64).is_empty() {
            // No return probe on this syscall: no exit stop (under seccomp
            // the thread goes on with PTRACE_CONT).
            cx.want_syscall_exit(false);
        } else {
            s.entry_args.insert(cx.tid().0, (info.nr as i64, args));
        }
        let hooks = d.entry.get(info.nr as i64);
        if hooks.is_empty() {
            return ResumeAction::Resume;
        }
        let values = ProbeValues {
            syscall: info.nr as i64,
            args,
            ..context(cx.pid().0, cx.tid().0)
        };
        action(s.fire(cx, hooks, &values).stop)
    }

    fn report_syscall_exit(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        let Ok(info) = cx.syscall() else {
            return ResumeAction::Resume;
        };
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let tid = cx.tid().0;
        let (nr, args) = s
            .entry_args
            .remove(&tid)
            .unwrap_or((info.nr as i64, info.args.map(|a| a as i64)));
        let hooks = d.exit.get(nr);
        if hooks.is_empty() {
            return ResumeAction::Resume;
        }
        let ret = info.ret.unwrap_or(0);
        let values = ProbeValues {
            syscall: nr,
            args,
            ret,
            returning: 1,
            ..context(cx.pid().0, tid)
        };
        let fired = s.fire(cx, hooks, &values);
        if fired.values.ret != ret {
            let _ = cx.set_syscall_return(fired.values.ret);
        }
        action(fired.stop)
    }

    fn report_signal(
        &mut self,
        cx: &mut Cx,
        _: ResumeAction,
        sig: &mut SignalReport,
    ) -> ResumeAction {
        let Some(original) = sig.original else {
            return ResumeAction::Resume;
        };
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        if d.signal.is_empty() {
            return ResumeAction::Resume;
        }
        let code = cx.siginfo().map(|i| i.si_code as i64).unwrap_or(0);
        let hooks = &d.signal;
        let values = ProbeValues {
            signal: original.0 as i64,
            code,
            ..context(cx.pid().0, cx.tid().0)
        };
        let fired = s.fire(cx, hooks, &values);
        if fired.values.signal != values.signal {
            sig.deliver = match fired.values.signal {
                0 => None,
                n => Some(Signal(n as i32)),
            };
        }
        action(fired.stop)
    }

    fn report_clone(&mut self, cx: &mut Cx, _: ResumeAction, clone: &CloneInfo) -> ResumeAction {
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let child = clone.child.0;
        s.script.procs_mut().refresh(child);
        let (hooks, values) = match clone.kind {
            CloneKind::Thread => {
                let pid = cx.pid().0;
                *s.live.entry(pid).or_default() += 1;
                (&d.thread_begin, context(pid, child))
            }
            CloneKind::Fork | CloneKind::Vfork => {
                *s.live.entry(child).or_default() += 1;
                if let Some(exe) = s.exe.get(&cx.pid().0).cloned() {
                    s.exe.insert(child, exe);
                }
                (&d.begin, context(child, child))
            }
        };
        action(s.fire(cx, hooks, &values).stop)
    }

    fn report_exec(&mut self, cx: &mut Cx, _: ResumeAction, former: Tid) -> ResumeAction {
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let pid = cx.pid().0;
        if former.0 != pid {
            s.script.procs_mut().remove(former.0);
        }
        s.note_exec(pid);
        // process("PATH").begin: the process now runs PATH.
        action(s.fire(cx, &d.exec_begin, &context(pid, pid)).stop)
    }

    fn report_death(&mut self, cx: &mut Cx, status: ExitStatus) {
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let (pid, tid) = (cx.pid().0, cx.tid().0);
        s.entry_args.remove(&tid);
        let left = s.live.get_mut(&pid).map(|n| {
            *n = n.saturating_sub(1);
            *n
        });
        if tid != pid {
            s.fire(cx, &d.thread_end, &context(pid, tid));
        }
        if left == Some(0) || (left.is_none() && tid == pid) {
            s.live.remove(&pid);
            let values = ProbeValues {
                code: status.code() as i64,
                ..context(pid, pid)
            };
            s.fire(cx, &d.end, &values);
            s.exe.remove(&pid);
        }
        s.script.procs_mut().remove(tid);
    }
}
