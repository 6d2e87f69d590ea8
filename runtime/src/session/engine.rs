//! The script's utrace engine: every process probe family of a script is
//! served by one engine attached to every traced thread, whose callbacks
//! fill in the probe context and run the compiled handlers.
//!
//! Callbacks run on the tracer thread and never block: handler output goes
//! to the transport queue, and process facts come from caches refreshed at
//! clone and exec.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::memory::ProcessMemory;
use crate::script::context::event;
use crate::script::context::written;
use crate::script::{ControlRequest, Outcome, ProbeValues, ScriptRuntime};
use crate::transport::Producer;
use crate::utrace::{
    BreakpointHit, CloneInfo, CloneKind, Control, Cx, EndReason, Engine, EngineId, Event,
    ExitStatus, ResumeAction, Signal, SignalReport, Tid,
};

use super::functions::FunctionProbes;
use super::points::{Dispatch, Hook, ProcessFilter};
use super::unwinder::UnwindStep;

/// What the engines of every tracer thread and the session's timers share,
/// behind the session's lock (`super::lock`): syscall handlers hold it
/// shared and run beside each other (each tracer thread on its own copy of
/// the script, under the globals' own locks); everything else holds it
/// exclusive.
pub(crate) struct Shared {
    /// One runtime copy of the script per tracer thread (by shard index),
    /// then one for the notification server; the first is also the one
    /// begin/end/timers and the exclusive paths use.
    runs: Vec<Mutex<ScriptRuntime>>,
    /// The transport's single producer: whole messages, pushed in turn.
    pub sink: Mutex<Producer>,
    pub engine: EngineId,
    /// Live traced threads per process, to know when a process ends.
    live: HashMap<i32, u32>,
    /// The `-c` command, seen from its execve's entry: adopted at its exec.
    adopt_at_exec: Option<i32>,
    /// Executable paths per process, kept only when a probe is limited to a
    /// path.
    exe: super::functions::IdMap<i32, String>,
    want_exe: bool,
    /// The syscall and arguments recorded at its entry, for the return
    /// probes: a call skipped by `$return`, and rt_sigreturn (whose exit
    /// sees the signal frame's registers), show as number -1 at their exit.
    entry_args: EntryArgs,
    /// Threads a script asked to quiesce, whose quiesce report is due.
    quiescing: Mutex<Vec<i32>>,
    /// Threads interrupted for a `timer.profile` sample: (tid, group).
    pub sampling: Vec<(i32, usize)>,
    /// The command runs under a seccomp filter: detaching would make every
    /// syscall the filter traps fail with ENOSYS (a RET_TRACE filter with
    /// no tracer), so when the script ends first the session keeps tracing
    /// passively until the command exits.
    pub linger: bool,
    /// The script has ended (end probes run): the exit status.
    pub finished: Option<i32>,
    /// `--exit-status`: when the target's exit ends the script, the status
    /// is the target's (its code, or 128 + the signal that killed it, as a
    /// shell reports it), unless the script's own is an error.
    pub exit_with_target: bool,
    /// Writes the output out and hands the status over (see
    /// [`super::Conclude`]); taken when the script ends.
    pub conclude: Option<super::Conclude>,
    /// `-v`: say why and after how many stops the session ended.
    pub verbose: bool,
    /// Function probes: breakpoints per process.
    pub functions: FunctionProbes,
    /// A daemon session (`crate::daemon`): the script ends when this
    /// process has exited (standalone, the tracer's `end_when_exits` does).
    pub end_with: Option<i32>,
    /// A daemon session: how its end lets go of the threads (detaching
    /// only its own engine), instead of ending the whole tracer.
    pub release: Option<Box<dyn FnOnce(&mut Control)>>,
    /// Several tracer threads serve the session: how a handler on another
    /// one has the first tracer thread end the script (end probes, output
    /// and status are handed over from there).
    pub end_elsewhere: Option<Box<dyn Fn(EndReason) + Send + Sync>>,
    /// The script's end is decided (on another tracer thread): no handler
    /// runs any more, as SystemTap's probes after `exit()`.
    pub stopping: AtomicBool,
    /// Syscall entries served by seccomp notification (`super::notify`),
    /// when that route is on: `-v` says how many.
    pub notified: Option<std::sync::Arc<super::notify::Counts>>,
    /// The in-process code, when the data plane serves this session
    /// (`super::inproc`): hooks of its probes run it, here or in the
    /// program.
    pub inproc: Option<std::sync::Arc<crate::dataplane::InProcImage>>,
    /// Its first error was reported.
    pub inproc_error_told: AtomicBool,
    /// Region slots the folds before held runs found not valid.
    pub held_bad: u64,
    /// What the data plane's output rings were read up to.
    pub rings: Mutex<crate::dataplane::rings::RingReader>,
    /// Machine output on utap's stdout: warn when a program writes there
    /// too (`super::stdout_check`).
    pub stdout_check: Option<super::stdout_check::SharedStdout>,
}

/// The state behind the script's lock (`super::lock`).
pub(crate) type SharedRef = std::sync::Arc<super::lock::ScriptLock>;

impl Shared {
    pub fn new(script: ScriptRuntime, sink: Producer, dispatch: &Dispatch) -> Shared {
        Shared {
            runs: vec![Mutex::new(script)],
            sink: Mutex::new(sink),
            engine: EngineId(u32::MAX),
            live: HashMap::new(),
            adopt_at_exec: None,
            exe: Default::default(),
            want_exe: dispatch.path_filters,
            entry_args: EntryArgs::default(),
            quiescing: Mutex::default(),
            sampling: Vec::new(),
            linger: false,
            finished: None,
            exit_with_target: false,
            conclude: None,
            verbose: false,
            functions: FunctionProbes::default(),
            end_with: None,
            release: None,
            end_elsewhere: None,
            stopping: AtomicBool::new(false),
            notified: None,
            inproc: None,
            inproc_error_told: AtomicBool::new(false),
            held_bad: 0,
            rings: Default::default(),
            stdout_check: None,
        }
    }

    /// The first copy of the script, with the whole state held.
    pub fn script(&mut self) -> &mut ScriptRuntime {
        self.runs[0].get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// The first copy of the script and the output, with the whole state
    /// held (timers, `--metrics`).
    pub fn script_and_sink(&mut self) -> (&mut ScriptRuntime, &mut Producer) {
        let run = self.runs[0].get_mut().unwrap_or_else(|e| e.into_inner());
        (run, self.sink.get_mut().unwrap_or_else(|e| e.into_inner()))
    }

    /// The first copy of the script, from a shared hold (reading it).
    pub fn first(&self) -> MutexGuard<'_, ScriptRuntime> {
        self.run(0)
    }

    /// The copy of the script tracer thread `shard` runs handlers on
    /// (`runs` has one per tracer thread: nobody else waits for it).
    pub fn run(&self, shard: usize) -> MutexGuard<'_, ScriptRuntime> {
        let m = &self.runs[shard % self.runs.len()];
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes copies of the script up to `n` (one per tracer thread, and the
    /// notification server's), before they start.
    pub fn add_runs(&mut self, n: usize) {
        while self.runs.len() < n {
            let shard = self.runs.len();
            let copy = self.script().replica(shard);
            self.runs.push(Mutex::new(copy));
        }
    }

    /// A process is gone or runs something new: every copy forgets what
    /// it knew of `tid` (it is read again on use).
    fn forget_proc(&mut self, tid: i32) {
        for r in &mut self.runs {
            r.get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .procs_mut()
                .remove(tid);
        }
    }

    /// The `-c` command, traced from its execve's entry: [`Self::adopt_process`]
    /// when the exec is done.
    pub fn adopt_at_exec(&mut self, pid: Tid) {
        self.adopt_at_exec = Some(pid.0);
    }

    /// A process (and its threads) is now traced: learn its facts and fire
    /// `process.begin` and `process.thread.begin` for it.
    pub fn adopt_process(&mut self, ctl: &mut Control, d: &Dispatch, pid: Tid, threads: &[Tid]) {
        self.note_exec(pid.0);
        for &t in threads {
            self.script().procs_mut().refresh(t.0);
            *self.live.entry(pid.0).or_default() += 1;
        }
        self.place_functions(ctl, d, pid.0);
        let values = context(pid.0, pid.0);
        self.fire(ctl, &d.begin, &values);
        for &t in threads.iter().filter(|t| **t != pid) {
            self.fire(ctl, &d.thread_begin, &context(pid.0, t.0));
        }
    }

    /// Process `pid` runs a new program (its exec, or its adoption).
    fn note_exec(&mut self, pid: i32) {
        if let Some(c) = &mut self.stdout_check {
            c.check(pid);
        }
        self.forget_proc(pid);
        self.script().procs_mut().refresh(pid);
        if self.want_exe {
            if let Ok(p) = std::fs::read_link(format!("/proc/{pid}/exe")) {
                self.exe.insert(pid, p.to_string_lossy().into_owned());
            }
        }
    }

    /// Places the function probes that apply to `pid` in what it maps now.
    pub fn place_functions(&mut self, ctl: &mut Control, d: &Dispatch, pid: i32) {
        if d.functions.is_empty() || self.finished.is_some() {
            return;
        }
        let mut functions = std::mem::take(&mut self.functions);
        let img = self.inproc.clone();
        // A pid-limited hook stays on int3: a fork child shares the jump.
        let in_process = |h: &super::points::Hook| {
            !matches!(h.filter, super::points::ProcessFilter::Pid(_))
                && img
                    .as_ref()
                    .is_some_and(|i| i.handlers.get(h.probe).is_some_and(Option::is_some))
        };
        functions.place(
            ctl,
            pid,
            &d.functions,
            |h| self.matches(&h.filter, pid),
            in_process,
        );
        self.functions = functions;
    }

    fn set_user_function(
        &mut self,
        pid: i32,
        name: Option<std::rc::Rc<str>>,
        uaddr: u64,
        regs: &libc::user_regs_struct,
    ) {
        let modules = self.functions.spaces.get(&pid).cloned().unwrap_or_default();
        self.script().set_user_function(Some(super::UserFunction {
            name: name.unwrap_or_else(|| "".into()),
            uaddr,
            modules,
            regs: Some(*regs),
        }));
    }

    pub(crate) fn matches(&self, filter: &ProcessFilter, pid: i32) -> bool {
        match filter {
            ProcessFilter::Any => true,
            ProcessFilter::Pid(p) => *p == pid,
            ProcessFilter::Path(path) => self.exe.get(&pid).is_some_and(|e| e == path),
        }
    }

    /// Runs the handlers of `hooks` that apply to the event's process, in
    /// order, with the whole state held (on the first copy of the script);
    /// returns the (possibly guru-modified) context values and whether the
    /// current thread must stay stopped. A handler that ends the script
    /// ends it here.
    pub fn fire(&mut self, ctl: &mut Control, hooks: &[Hook], values: &ProbeValues) -> Fired {
        let fired = {
            let me: &Shared = self;
            let mut run = me.first();
            run.set_shard(ctl.shard_index());
            me.fire_on(&mut run, false, Some(ctl), hooks, values)
        };
        if fired.end {
            self.end(ctl, EndReason::Requested);
        }
        fired
    }

    /// Runs the handlers of `hooks` that apply to the event's process on
    /// `run`, in order, each seeing the values the previous one left (guru
    /// writes). `guarded`: the state is held shared, other tracer threads
    /// run handlers meanwhile, and each run takes its probe's global locks
    /// (or is skipped). Without a `ctl` (a syscall served by seccomp
    /// notification, `super::notify`) no thread is in a stop, which the
    /// compiler checked the handlers do not need (`utap_compiler::stopless`:
    /// no registers, no thread control, no guru writes). `Fired::end`: a
    /// handler ended the script (exit(), an error); the caller ends it once
    /// it holds the whole state.
    pub fn fire_on(
        &self,
        run: &mut ScriptRuntime,
        guarded: bool,
        mut ctl: Option<&mut Control>,
        hooks: &[Hook],
        values: &ProbeValues,
    ) -> Fired {
        let mut fired = Fired {
            values: *values,
            stop: false,
            end: false,
        };
        if self.finished.is_some() || self.stopping.load(Ordering::Relaxed) {
            return fired;
        }
        if run.phase() != crate::script::Phase::Running {
            // exit() or an error on another tracer thread, whose end is
            // on its way: as SystemTap's, no probe starts any more.
            fired.end = true;
            return fired;
        }
        let tid = Tid(values.tid as i32);
        match ctl.as_deref().and_then(|c| c.hijacked_returns(tid)) {
            Some(frames) => run.set_hijacked_returns(frames),
            None => run.set_hijacked_returns(&[]),
        }
        let memory = ProcessMemory::new(values.tid as i32);
        let mut sink = LockedSink(&self.sink);
        let mut delay_us = 0;
        for hook in hooks {
            if !self.matches(&hook.filter, fired.values.pid as i32) {
                continue;
            }
            if self.fire_in_process(run, hook.probe, hook.point, &fired.values) {
                if self.inproc_failed(run) {
                    fired.end = true;
                    break;
                }
                continue;
            }
            let (v, mem) = (
                &fired.values,
                Some(&memory as &dyn crate::memory::ReadMemory),
            );
            let outcome = match guarded {
                true => match run.fire_point_guarded(hook.probe, hook.point, v, mem, &mut sink) {
                    Some(o) => o,
                    None => continue,
                },
                false => run.fire_point(hook.probe, hook.point, v, mem, &mut sink),
            };
            fired.values = outcome.probe;
            if let Some(ctl) = ctl.as_deref_mut() {
                fired.stop |= self.apply(ctl, &outcome, values.tid, &mut delay_us);
            }
            if outcome.stop {
                fired.end = true;
                break;
            }
        }
        if let Some(ctl) = ctl {
            fired.stop |= self.hold_for_delay(ctl, values.tid, fired.stop, delay_us);
        }
        fired
    }

    /// Has the first tracer thread end the script (only it runs `end`'s
    /// work), once: from another tracer thread or the notification server.
    pub(crate) fn end_on_first(&self, why: EndReason) {
        let Some(elsewhere) = self.end_elsewhere.as_ref() else {
            return;
        };
        if !self.stopping.swap(true, Ordering::AcqRel) {
            elsewhere(why);
        }
    }

    /// Ends the script (exit(), an error, -T, a signal, the target's
    /// exit): end probes now, output written and the status handed over,
    /// then the tracing ends too unless the command must be shepherded
    /// (see `linger`).
    pub fn end(&mut self, ctl: &mut Control, why: EndReason) {
        if ctl.shard_index() != 0 {
            self.end_on_first(why);
            return;
        }
        if self.finished.is_none() {
            // exit(), an error, the target's exit: as for -T (crate::hurry).
            // Not in a daemon, which serves other sessions afterwards.
            if self.end_with.is_none() {
                crate::hurry::now();
            }
            if self.verbose {
                crate::say!("utap: session ended: {why}");
                crate::say!("utap: {} ptrace stops", ctl.stop_count());
                if let Some(n) = &self.notified {
                    let get = |c: &std::sync::atomic::AtomicU64| {
                        c.load(std::sync::atomic::Ordering::Relaxed)
                    };
                    crate::say!(
                        "utap: {} syscall entries served by seccomp notification (no ptrace stop)",
                        get(&n.served)
                    );
                    crate::say!(
                        "utap: {} seccomp listener(s) served by {} server thread(s)",
                        get(&n.listeners),
                        get(&n.servers)
                    );
                }
                let shards = ctl.shard_stats();
                if !shards.is_empty() {
                    let list = |f: fn(&crate::utrace::ShardStats) -> u64| {
                        let v: Vec<String> = shards.iter().map(|s| f(s).to_string()).collect();
                        v.join(" + ")
                    };
                    let moved: u64 = shards.iter().map(|s| s.adopted).sum();
                    let parked: u64 = shards.iter().map(|s| s.parked_ns).sum();
                    crate::say!(
                        "utap: {} tracer threads: ptrace stops {}; threads handed over {} ({:.1} µs parked on average)",
                        shards.len(),
                        list(|s| s.stops),
                        list(|s| s.adopted),
                        parked as f64 / moved.max(1) as f64 / 1000.0
                    );
                }
                let most = self.script().most_beside();
                if most > 1 {
                    crate::say!(
                        "utap: handler runs side by side (holding their globals' locks): at most {most} at once"
                    );
                }
                let (added, folds) = self.script().shard_stat_counts();
                if added > 0 {
                    crate::say!(
                        "utap: statistics: {added} values added on other tracer threads' copies, folded in {folds} times"
                    );
                }
                let c = ctl.step_counts();
                if c != Default::default() {
                    crate::say!(
                        "utap: breakpoint step-overs: {} emulated, {} out of line, {} single-stepped ({} slot pages)",
                        c.emulated,
                        c.out_of_line,
                        c.single_stepped,
                        c.slot_pages
                    );
                }
                if c.stub_returns + c.trampoline_returns > 0 {
                    crate::say!(
                        "utap: returns: {} through their stubs, {} through the trampoline ({} return addresses replaced by the program)",
                        c.stub_returns,
                        c.trampoline_returns,
                        c.slot_stores
                    );
                }
            }
            self.settle_dataplane(ctl);
            let (run, sink) = self.script_and_sink();
            let status = match (super::finish(run, sink), why) {
                (0, EndReason::ProcessExited { status, .. }) if self.exit_with_target => {
                    status.code()
                }
                (status, _) => status,
            };
            let after = match self.linger && matches!(why, EndReason::Requested) {
                true => super::Aftermath::Shepherd,
                false => super::Aftermath::Detach,
            };
            let conclude = self.conclude.take();
            self.finished = Some(conclude.map_or(status, |c| c(status, after)));
        }
        if !self.linger {
            match self.release.take() {
                Some(release) => {
                    // Other sessions may go on: take out this one's
                    // breakpoints (shared sites are counted).
                    self.functions.remove_all(ctl);
                    release(ctl);
                }
                None if self.end_with.is_some() => {}
                None => ctl.end(EndReason::Requested),
            }
        }
    }

    /// Carries out a handler's thread-control requests; true when the
    /// current thread is to stay stopped (`current` is -1 in a timer).
    /// Delays and signals (`udelay`, `raise`) apply to the current thread
    /// only: in a timer probe there is none.
    /// `delay_us` adds up the `udelay`/`mdelay` of the current event.
    pub fn apply(
        &self,
        ctl: &mut Control,
        outcome: &Outcome,
        current: i64,
        delay_us: &mut i64,
    ) -> bool {
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
                    lock(&self.quiescing).push(t as i32);
                    let _ = ctl.control(Tid(t as i32), self.engine, ResumeAction::Report);
                }
                ControlRequest::Raise { tid, signo } if tid == current => {
                    let _ = ctl.send_signal(Tid(tid as i32), Signal(signo as i32));
                }
                ControlRequest::Delay { tid, us } if tid == current => {
                    *delay_us = delay_us.saturating_add(us);
                }
                ControlRequest::Raise { .. } | ControlRequest::Delay { .. } => {}
            }
        }
        stop
    }

    /// After the handlers of one event: the delays they asked for, added
    /// up, hold the thread in its stop until a timer resumes it (true);
    /// `stop()` (`stopped`) holds it for good instead, until `resume()`.
    fn hold_for_delay(&self, ctl: &mut Control, tid: i64, stopped: bool, us: i64) -> bool {
        if us <= 0 || stopped {
            return false;
        }
        let at = Instant::now() + Duration::from_micros(us as u64);
        ctl.resume_at(Tid(tid as i32), self.engine, at);
        true
    }
}

/// What a firing left behind.
pub(crate) struct Fired {
    pub values: ProbeValues,
    pub stop: bool,
    /// A handler ended the script: the caller ends it (`Shared::end`).
    pub end: bool,
}

/// Takes a mutex, poisoned or not: what these guard (maps, lists, a
/// runtime copy between runs) is whole after each operation.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The transport's producer, for handler runs of several tracer threads:
/// each run's output (or a flushed part of it) is pushed whole, under a
/// mutex held for the copy into the ring only, so messages stay whole and
/// each traced thread's stay in order (a thread's events are handled one
/// at a time, wherever it is handed over).
pub(crate) struct LockedSink<'a>(pub &'a Mutex<Producer>);

impl crate::script::OutputSink for LockedSink<'_> {
    fn push(&mut self, bytes: &[u8]) {
        crate::script::OutputSink::push(&mut *lock(self.0), bytes);
    }
    fn warn(&mut self, line: &str) {
        crate::script::OutputSink::warn(&mut *lock(self.0), line);
    }
    fn system(&mut self, cmd: &[u8]) {
        crate::script::OutputSink::system(&mut *lock(self.0), cmd);
    }
    fn ending(&mut self) {
        crate::script::OutputSink::ending(&mut *lock(self.0));
    }
}

/// The syscall and arguments recorded at each thread's syscall entry, for
/// its return probes. Several tracer threads use it at once (a thread
/// handed over between a syscall's entry and exit finds its entry on the
/// other), so it is split in a few maps by thread id, each behind a mutex
/// held for one lookup.
#[derive(Default)]
pub(crate) struct EntryArgs([Mutex<HashMap<i32, Entry>>; 8]);

/// A syscall's number and arguments at its entry.
type Entry = (i64, [i64; 6]);

impl EntryArgs {
    fn part(&self, tid: i32) -> MutexGuard<'_, HashMap<i32, Entry>> {
        lock(&self.0[tid as usize % self.0.len()])
    }

    pub fn insert(&self, tid: i32, entry: Entry) {
        self.part(tid).insert(tid, entry);
    }

    pub fn remove(&self, tid: i32) -> Option<Entry> {
        self.part(tid).remove(&tid)
    }
}

pub(crate) fn context(pid: i32, tid: i32) -> ProbeValues {
    ProbeValues {
        pid: pid as i64,
        tid: tid as i64,
        ..ProbeValues::default()
    }
}

/// Carries out what guru code did to a syscall at its entry: new
/// arguments, and a `$return` that skips the call (the thread sees that
/// value, and a return probe sees it as the result).
fn inject_at_entry(cx: &mut Cx, v: &ProbeValues, args: &[i64; 6]) {
    if v.written & written::ARGS != 0 && v.args != *args {
        let _ = cx.set_syscall_args(v.args.map(|a| a as u64));
    }
    if v.written & written::RETURN != 0 {
        let _ = cx.set_syscall_return(v.ret);
    }
}

/// What guru code did to a function's arguments at its entry: the new
/// values go to the SysV argument registers before the first instruction.
fn set_arguments(cx: &mut Cx, v: &ProbeValues, args: &[i64; 6]) {
    if v.written & written::ARGS == 0 || v.args == *args {
        return;
    }
    if let Ok(mut r) = cx.regs() {
        let a = v.args.map(|x| x as u64);
        (r.rdi, r.rsi, r.rdx, r.rcx, r.r8, r.r9) = (a[0], a[1], a[2], a[3], a[4], a[5]);
        let _ = cx.set_regs(&r);
    }
}

/// A marker's arguments decoded at its hit, stored as `$arg1`..`$arg12`;
/// returns them all (for `$$parms`).
fn mark_args(
    mark: &super::marks::Marker,
    regs: &libc::user_regs_struct,
    tid: i32,
    values: &mut ProbeValues,
) -> Vec<i64> {
    let memory = ProcessMemory::new(tid);
    let decoded: Vec<i64> = mark
        .args
        .iter()
        .map(|a| super::marks::read_arg(a, regs, &memory))
        .collect();
    values.args = [0; 6];
    values.more_args = [0; 6];
    for (i, v) in decoded.iter().enumerate().take(12) {
        match i {
            0..6 => values.args[i] = *v,
            _ => values.more_args[i - 6] = *v,
        }
    }
    decoded
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
    pub dispatch: std::sync::Arc<Dispatch>,
}

impl ScriptEngine {
    /// A handler run beside the other tracer threads ended the script:
    /// end it now that the shared hold is let go.
    fn ended(&self, cx: &mut Cx, fired: &Fired) {
        if fired.end {
            self.shared.borrow_mut().end(cx, EndReason::Requested);
        }
    }
}

/// Runs `hooks` with the state held shared (`s`), on this tracer thread's
/// copy of the script, beside the handlers of the other tracer threads.
fn fire_beside(s: &Shared, cx: &mut Cx, hooks: &[Hook], values: &ProbeValues) -> Fired {
    let shard = cx.shard_index();
    let mut run = s.run(shard);
    run.set_shard(shard);
    s.fire_on(&mut run, true, Some(&mut **cx), hooks, values)
}

impl Engine for ScriptEngine {
    fn report_quiesce(&mut self, cx: &mut Cx, _: ResumeAction, event: Event) -> ResumeAction {
        let Some(mut s) = self.shared.for_probe() else {
            return ResumeAction::Resume;
        };
        let d = &*self.dispatch;
        let (pid, tid) = (cx.pid().0, cx.tid().0);
        // A profile sample is taken at whichever stop comes first.
        let sampled = s.fire_sample(cx, d, pid, tid).is_some_and(|f| f.stop);
        let due = {
            let mut q = lock(&s.quiescing);
            let i = q.iter().position(|&t| t == tid);
            match i {
                Some(i) if event == Event::None => drop(q.swap_remove(i)),
                _ => {}
            }
            i.is_some()
        };
        if !due || event != Event::None {
            return action(sampled);
        }
        let hooks = &d.quiesce;
        let values = context(pid, tid);
        action(s.fire(cx, hooks, &values).stop || sampled)
    }

    fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        let Ok(info) = cx.syscall() else {
            return ResumeAction::Resume;
        };
        let Some(s) = self.shared.for_probe_shared() else {
            return ResumeAction::Resume;
        };
        let d = &*self.dispatch;
        let args = info.args.map(|a| a as i64);
        let want_exit = !d.exit.get(info.nr).is_empty();
        if !want_exit {
            // No return probe on this syscall: no exit stop (under seccomp
            // the thread goes on with PTRACE_CONT).
            cx.want_syscall_exit(false);
        }
        let hooks = d.entry.get(info.nr);
        if hooks.is_empty() {
            if want_exit {
                s.entry_args.insert(cx.tid().0, (info.nr, args));
            }
            return ResumeAction::Resume;
        }
        let values = ProbeValues {
            syscall: info.nr,
            args,
            event: event::SYSCALL,
            ..context(cx.pid().0, cx.tid().0)
        };
        let fired = fire_beside(&s, cx, hooks, &values);
        let v = fired.values;
        inject_at_entry(cx, &v, &args);
        if want_exit {
            s.entry_args.insert(cx.tid().0, (info.nr, v.args));
        }
        drop(s);
        self.ended(cx, &fired);
        action(fired.stop)
    }

    fn report_syscall_exit(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        let Ok(info) = cx.syscall() else {
            return ResumeAction::Resume;
        };
        let Some(s) = self.shared.for_probe_shared() else {
            return ResumeAction::Resume;
        };
        let d = &*self.dispatch;
        let tid = cx.tid().0;
        let (nr, args) = match s.entry_args.remove(tid) {
            // Skipped at its entry ($return set): the number is -1 now.
            Some((nr, args)) if info.nr == -1 => (nr, args),
            Some((_, args)) => (info.nr, args),
            None => (info.nr, info.args.map(|a| a as i64)),
        };
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
            event: event::SYSCALL_RETURN,
            ..context(cx.pid().0, tid)
        };
        let fired = fire_beside(&s, cx, hooks, &values);
        drop(s);
        if fired.values.ret != ret {
            let _ = cx.set_syscall_return(fired.values.ret);
        }
        self.ended(cx, &fired);
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
        let d = &*self.dispatch;
        if d.signal.is_empty() {
            return ResumeAction::Resume;
        }
        let Some(s) = self.shared.for_probe_shared() else {
            return ResumeAction::Resume;
        };
        let code = cx.siginfo().map(|i| i.si_code as i64).unwrap_or(0);
        let hooks = &d.signal;
        let values = ProbeValues {
            signal: original.0 as i64,
            code,
            ..context(cx.pid().0, cx.tid().0)
        };
        let fired = fire_beside(&s, cx, hooks, &values);
        drop(s);
        self.ended(cx, &fired);
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
        s.forget_proc(child);
        s.script().procs_mut().refresh(child);
        let (parent, creator) = (cx.pid().0, cx.tid().0);
        let (hooks, values) = match clone.kind {
            CloneKind::Thread => {
                *s.live.entry(parent).or_default() += 1;
                (&d.thread_begin, context(parent, child))
            }
            CloneKind::Fork | CloneKind::Vfork => {
                *s.live.entry(child).or_default() += 1;
                s.functions.cloned(parent, child);
                if let Some(exe) = s.exe.get(&parent).cloned() {
                    s.exe.insert(child, exe);
                }
                (&d.begin, context(child, child))
            }
        };
        // process.create first, in the creator's context (SystemTap's
        // kprocess.create runs at copy_process's return in the parent),
        // then the new task's begin in its own.
        let mut stop = false;
        if !d.create.is_empty() {
            let mut created = context(parent, creator);
            created.args[0] = values.pid;
            created.args[1] = values.tid;
            stop |= s.fire(cx, &d.create, &created).stop;
        }
        stop |= s.fire(cx, hooks, &values).stop;
        action(stop)
    }

    fn report_exec(&mut self, cx: &mut Cx, _: ResumeAction, former: Tid) -> ResumeAction {
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let pid = cx.pid().0;
        if former.0 != pid {
            s.forget_proc(former.0);
        }
        if s.adopt_at_exec == Some(pid) {
            // The -c command's own exec: it starts being the command now.
            s.adopt_at_exec = None;
            s.adopt_process(cx, d, Tid(pid), &[Tid(pid)]);
            return action(false);
        }
        s.note_exec(pid);
        s.functions.forget(pid);
        s.place_functions(cx, d, pid);
        // process("PATH").begin: the process now runs PATH.
        action(s.fire(cx, &d.exec_begin, &context(pid, pid)).stop)
    }

    fn report_breakpoint(
        &mut self,
        cx: &mut Cx,
        _: ResumeAction,
        hit: &BreakpointHit,
    ) -> ResumeAction {
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let (pid, tid) = (cx.pid().0, cx.tid().0);
        let Ok(regs) = cx.regs() else {
            return ResumeAction::Resume;
        };
        let args = [regs.rdi, regs.rsi, regs.rdx, regs.rcx, regs.r8, regs.r9].map(|a| a as i64);
        let Some(frame) = hit.returned else {
            let step = s.functions.unwind_step(pid, hit.addr);
            match step {
                Some(UnwindStep::Park) => drop(cx.park_returns()),
                Some(UnwindStep::Rearm) => drop(cx.rearm_returns()),
                None => {}
            }
            if s.functions.is_loader(pid, hit.addr) {
                // The loader mapped or unmapped something: place again.
                s.place_functions(cx, d, pid);
                return ResumeAction::Resume;
            }
            let Some(site) = s.functions.site(pid, hit.addr).cloned() else {
                return ResumeAction::Resume;
            };
            let mut values = ProbeValues {
                args,
                event: event::FUNCTION,
                ..context(pid, tid)
            };
            if let Some(mark) = &site.mark {
                let decoded = mark_args(mark, &regs, tid, &mut values);
                s.script().set_marker(Some((mark.clone(), decoded)));
            }
            let name = site.entry_name.clone().or(site.ret_name.clone());
            s.set_user_function(pid, name, hit.addr, &regs);
            let (mut stop, mut args) = (false, args);
            if !site.entry.is_empty() {
                let fired = s.fire(cx, &site.entry, &values);
                set_arguments(cx, &fired.values, &args);
                (stop, args) = (fired.stop, fired.values.args);
            }
            s.script().set_user_function(None);
            s.script().set_marker(None);
            // The unwinder reads its own return address: a `.return` on
            // it is not hijacked (it returns only when the throw fails).
            let unwinding = step == Some(UnwindStep::Park);
            if !site.ret.is_empty() && s.finished.is_none() && !unwinding {
                // The @entry hook: values saved here come back at return.
                let cookie = s.functions.save_entry(args);
                let _ = cx.hijack_return(hit.addr, cookie);
            }
            return action(stop);
        };
        let entry_args = s.functions.take_entry(frame.cookie).unwrap_or(args);
        let Some(site) = s.functions.site(pid, frame.func).cloned() else {
            return ResumeAction::Resume;
        };
        let values = ProbeValues {
            args: entry_args,
            ret: regs.rax as i64,
            returning: 1,
            event: event::FUNCTION_RETURN,
            ..context(pid, tid)
        };
        s.set_user_function(pid, site.ret_name.clone(), frame.func, &regs);
        let stop = s.fire(cx, &site.ret, &values).stop;
        s.script().set_user_function(None);
        action(stop)
    }

    fn report_death(&mut self, cx: &mut Cx, status: ExitStatus) {
        let mut s = self.shared.borrow_mut();
        let d = &*self.dispatch;
        let (pid, tid) = (cx.pid().0, cx.tid().0);
        s.entry_args.remove(tid);
        s.forget_sample(tid);
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
            s.functions.forget(pid);
            if s.end_with == Some(pid) {
                let why = EndReason::ProcessExited {
                    pid: Tid(pid),
                    status,
                };
                s.end(cx, why);
            }
        }
        s.forget_proc(tid);
    }
}
