//! The script runtime: runs compiled probe handlers.
//!
//! [`ScriptRuntime`] owns a script's state and fires its handlers one at a
//! time on the calling thread. A process session with several tracer
//! threads gives each its own copy ([`ScriptRuntime::replica`]) over the
//! same globals, phase and counts; handlers that may then run at once take
//! their globals' locks ([`ScriptRuntime::fire_point_guarded`],
//! [`global_locks`]). A run's output is collected in a buffer and
//! handed to an [`OutputSink`] when the handler returns; a handler never
//! writes to a file descriptor. Runtime errors are reported with
//! SystemTap's wording and location and move the session to its error
//! state (end probes are then skipped, error probes run), unless
//! `--suppress-handler-errors` counts them and goes on.
//!
//! The session driver for scripts without process probes is in
//! [`scheduler`]; a process session drives the same hooks
//! ([`ScriptRuntime::run_begin`], [`ScriptRuntime::fire`],
//! [`ScriptRuntime::timers`], [`ScriptRuntime::run_end`],
//! [`ScriptRuntime::finish`]) from its own event loop.
//!
//! This room is a floor below the session: what a hit carries into a
//! handler (the user function, the marker) comes from [`crate::hit`].

pub mod abi;
pub mod builtins;
pub mod context;
pub mod dwarf_fns;
pub mod global_locks;
pub mod globals;
pub mod image;
mod inproc_error;
pub mod interrupt;
pub mod limits;
pub mod output;
pub mod printing;
pub mod registers;
pub mod scheduler;
pub mod sink;
pub mod state;
pub mod strings;
pub mod tapset_fns;
#[cfg(test)]
mod tests;
pub mod timing;
pub mod ustack_fns;

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::memory::ReadMemory;

pub use context::{HandlerContext, ProbeValues};
pub use image::{HandlerFn, ScriptImage, Trigger};
pub use limits::Limits;
pub use sink::OutputSink;
pub use state::ControlRequest;

use state::ScriptState;

/// Where the session is (SystemTap's session states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Running begin probes.
    Starting,
    Running,
    /// `exit()` was called or the session is ending: end probes next.
    Stopping,
    /// A runtime error ended the session: error probes next.
    Error,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Starting,
            1 => Phase::Running,
            2 => Phase::Stopping,
            _ => Phase::Error,
        }
    }
}

/// What every runtime copy of a script (one per tracer thread) shares
/// besides the globals: the session's phase and its error and skip
/// counts, which any handler run may move.
#[derive(Default)]
struct Tally {
    phase: AtomicU8,
    errors: AtomicU64,
    skipped: AtomicU64,
    /// `-v`: guarded handler runs in progress, and the most at once.
    running: AtomicU32,
    most: AtomicU32,
}

impl Tally {
    fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    fn set(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::Release);
    }

    /// Moves to `to` if the session is still starting or running.
    fn leave_running(&self, to: Phase) {
        let live = |p: u8| matches!(Phase::from_u8(p), Phase::Starting | Phase::Running);
        let _ = self
            .phase
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                live(p).then_some(to as u8)
            });
    }
}

/// What one handler run did, for the caller's event loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The run ended with a runtime error (already reported).
    pub error: bool,
    /// The session should stop (`exit()`, or an error).
    pub stop: bool,
    /// The event's values after the run (guru writes to `$return`,
    /// `$signal`).
    pub probe: ProbeValues,
    /// Thread control the handler asked for.
    pub control: Vec<ControlRequest>,
}

/// A timer probe point, for an event loop to schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerPoint {
    pub probe: usize,
    /// Which point of the probe.
    pub point: usize,
    pub period_ns: u64,
    pub randomize_ns: u64,
}

/// Session options that affect the runtime.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    pub limits: Limits,
    /// `--suppress-handler-errors`.
    pub suppress_errors: bool,
    /// `target()`.
    pub target: i64,
    /// `-t`: time every handler run and report at the end; one label per
    /// probe of the image.
    pub timing: Option<Vec<timing::TimingLabel>>,
    /// `-v`: end-of-session notes (returns without `@entry` values).
    pub verbose: bool,
}

/// A compiled script ready to run.
pub struct ScriptRuntime {
    state: Box<ScriptState>,
    ctx: Box<HandlerContext>,
    /// Per probe: begin/end/error probes get MAXACTION_INTERRUPTIBLE.
    interruptible: Vec<bool>,
    suppress_errors: bool,
    /// Phase, errors and probes skipped because a lock stayed busy
    /// (MAXTRYLOCK), shared with the other copies ([`Self::replica`]).
    tally: Arc<Tally>,
    /// `--format json`: globals at exit are printed as JSON records.
    json: bool,
    /// `--metrics`: scrapes waiting for the globals' exposition.
    metrics: Option<crate::metrics::MetricsRequests>,
    timing: Option<Arc<Mutex<timing::Timing>>>,
    verbose: bool,
}

impl ScriptRuntime {
    pub fn new(image: Arc<ScriptImage>, options: RuntimeOptions) -> ScriptRuntime {
        let interruptible = image
            .probes
            .iter()
            .map(|p| {
                p.points.iter().any(|pt| {
                    matches!(
                        pt.trigger,
                        Trigger::Begin(_) | Trigger::End(_) | Trigger::Error(_)
                    )
                })
            })
            .collect();
        let timing = options.timing.clone().map(|labels| {
            Arc::new(Mutex::new(timing::Timing::new(
                labels,
                image.probes.iter().map(|p| p.points.len()),
            )))
        });
        let mut state = Box::new(ScriptState::new(image, options.limits.clone()));
        state.target = options.target;
        let ctx = Self::context(options.limits.max_nesting);
        ScriptRuntime {
            state,
            ctx,
            interruptible,
            suppress_errors: options.suppress_errors,
            tally: Arc::default(),
            json: false,
            metrics: None,
            timing,
            verbose: options.verbose,
        }
    }

    fn context(max_nesting: i64) -> Box<HandlerContext> {
        Box::new(HandlerContext {
            error: 0,
            actions_left: 0,
            nesting: 0,
            max_nesting,
            location: 0,
            long_globals: std::ptr::null_mut(),
            keys: [0; context::MAX_KEYS],
            foreach_value: 0,
            probe: ProbeValues::default(),
            probe_index: 0,
            point_index: 0,
            state: std::ptr::null_mut(),
        })
    }

    /// Another copy of the script for tracer thread `shard`, running its
    /// handlers beside this one's: its own scratch (strings, output,
    /// iterators, process facts) and handler context, the same globals,
    /// phase and counts. `--metrics` is served by the first copy only.
    pub fn replica(&self, shard: usize) -> ScriptRuntime {
        let mut state = Box::new(self.state.replica(shard));
        state.globals.reserve_shards(shard + 1);
        ScriptRuntime {
            state,
            ctx: Self::context(self.ctx.max_nesting),
            interruptible: self.interruptible.clone(),
            suppress_errors: self.suppress_errors,
            tally: Arc::clone(&self.tally),
            json: self.json,
            metrics: None,
            timing: self.timing.clone(),
            verbose: self.verbose,
        }
    }

    pub fn image(&self) -> &ScriptImage {
        &self.state.image
    }

    /// The globals' values, with the image that names them: what the
    /// data plane fills into its region and folds back
    /// (`crate::dataplane::globals`).
    pub fn globals_and_image(&mut self) -> (&mut globals::Globals, &ScriptImage) {
        let s = &mut *self.state;
        (&mut s.globals, &s.image)
    }

    pub fn phase(&self) -> Phase {
        self.tally.phase()
    }

    /// `execname()` of thread `tid`, from the process facts (read from
    /// `/proc` if not cached yet).
    pub fn execname_of(&mut self, tid: i32) -> &str {
        let procs = &mut self.state.procs;
        if procs.get(tid).is_none() {
            procs.refresh(tid);
        }
        procs.get(tid).map_or("", |i| i.execname.as_str())
    }

    /// The per-thread process facts the context builtins read; a process
    /// session forgets a thread here when it execs or exits.
    pub fn procs_mut(&mut self) -> &mut crate::procinfo::ProcCache {
        &mut self.state.procs
    }

    /// From now on `printf` queues records instead of text; the returned
    /// renderer (for [`crate::transport::Config::render`]) turns them into
    /// text on the output thread. Every sink this runtime pushes to must
    /// then render (see [`output`]).
    pub fn defer_formatting(&mut self) -> crate::transport::Renderer {
        self.state.out = output::RunOutput::new(true);
        let image = Arc::clone(&self.state.image);
        Box::new(move |batch, text| output::render(&image.formats, batch, text))
    }

    /// Whether this runtime's sink takes records (see
    /// [`ScriptRuntime::defer_formatting`]) rather than text.
    pub fn output_deferred(&self) -> bool {
        self.state.out.is_deferred()
    }

    /// Like [`ScriptRuntime::defer_formatting`], for `--format json`: the
    /// renderer writes JSON Lines, and the globals printed at exit are
    /// JSON records.
    pub fn defer_formatting_json(&mut self) -> crate::transport::Renderer {
        self.state.out = output::RunOutput::new(true);
        self.json = true;
        let image = Arc::clone(&self.state.image);
        Box::new(move |batch, text| output::render_json(&image.formats, batch, text))
    }

    /// Answers `--metrics` scrapes from now on (see [`Self::serve_metrics`]).
    pub fn set_metrics(&mut self, requests: crate::metrics::MetricsRequests) {
        self.metrics = Some(requests);
    }

    pub fn has_metrics(&self) -> bool {
        self.metrics.is_some()
    }

    /// Answers the scrapes waiting now; the session calls it between
    /// events. Never blocks, and costs one atomic load when nobody
    /// scrapes. The reply is a copy of the exported globals (formatted on
    /// the HTTP side), or the text the `probe prometheus` handlers leave
    /// in `$value` when the script has some (they run here, once per
    /// scrape). Globals the program's handlers keep are folded back first
    /// by `fold`, as they stand (the handlers run on; a statistic caught
    /// mid-update is left out of this scrape). True when a handler ended
    /// the session (`exit()`, too many errors).
    pub fn serve_metrics(
        &mut self,
        sink: &mut dyn OutputSink,
        fold: &dyn Fn(&mut ScriptRuntime),
    ) -> bool {
        let Some(requests) = self.metrics.take() else {
            return false;
        };
        if requests.wanted() {
            let handlers = self.ordered(|t| matches!(t, Trigger::Prometheus).then_some(0));
            if handlers.is_empty() {
                self.settle_globals(sink);
                fold(self);
                let values = sink::snapshot(&self.state, requests.globals());
                requests.serve(|| crate::metrics::Reply::Globals(values));
            } else {
                requests
                    .serve(|| crate::metrics::Reply::Text(self.prometheus_text(&handlers, sink)));
            }
        }
        self.metrics = Some(requests);
        self.phase() != Phase::Running
    }

    /// Runs the `probe prometheus` handlers on an empty `$value` and takes
    /// the text they built.
    fn prometheus_text(
        &mut self,
        handlers: &[(usize, usize)],
        sink: &mut dyn OutputSink,
    ) -> String {
        self.state.prometheus.clear();
        self.run_ordered(handlers.to_vec(), Phase::Running, sink);
        let text = String::from_utf8_lossy(&self.state.prometheus).into_owned();
        self.state.prometheus = Vec::new();
        text
    }

    /// `target()` (set once the -c command is started).
    /// The function-probe context of the next firings (`probefunc()`,
    /// `uaddr()`, `usymname()`...), or `None` outside function probes.
    pub fn set_user_function(&mut self, f: Option<crate::hit::UserFunction>) {
        self.state.ufunc = f;
    }

    /// The registers of the function-probe hit the next firings run for
    /// (in DWARF order, as the data plane's function entry stores them
    /// for target variables), if any.
    pub fn user_function_regs(&self) -> Option<[u64; 17]> {
        let g = self.hit_regs()?;
        Some([
            g.rax, g.rdx, g.rcx, g.rbx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11,
            g.r12, g.r13, g.r14, g.r15, 0,
        ])
    }

    /// The name of the function hit of the next firings (`probefunc()`).
    pub fn user_function_name(&self) -> Option<std::rc::Rc<str>> {
        Some(self.state.ufunc.as_ref()?.name.clone())
    }

    /// The load bias of the module the function hit of the next firings
    /// is in (0 outside function probes).
    pub fn user_function_bias(&self) -> u64 {
        let Some(uf) = self.state.ufunc.as_ref() else {
            return 0;
        };
        uf.modules
            .modules
            .iter()
            .find(|m| m.start <= uf.uaddr && uf.uaddr < m.end)
            .map_or(0, |m| m.bias)
    }

    /// The registers of the function or marker hit the next firings run
    /// for, if any.
    pub fn hit_regs(&self) -> Option<libc::user_regs_struct> {
        self.state.ufunc.as_ref()?.regs
    }

    /// The USDT marker the next firings run for, if any.
    pub fn marker(&self) -> Option<&std::rc::Rc<crate::hit::Marker>> {
        self.state.usdt.as_ref().map(|(m, _)| m)
    }

    /// The USDT marker of the next firings and its argument values, or
    /// `None` outside marker probes.
    pub fn set_marker(&mut self, m: Option<(std::rc::Rc<crate::hit::Marker>, Vec<i64>)>) {
        self.state.usdt = m;
    }

    /// The shadow stack of hijacked returns of the thread the next
    /// firings run for (see `crate::unwind::returns`); empty for none.
    pub fn set_hijacked_returns(&mut self, frames: &[crate::uprobe::Frame]) {
        self.state.unwind.returns.set(frames);
    }

    /// The tracer thread (shard) the next handler runs belong to: `<<<`
    /// there adds to that shard's copy of the statistic (see
    /// `globals::ShardCopies`).
    pub fn set_shard(&mut self, shard: usize) {
        self.state.shard = shard;
    }

    /// `<<<` values added on tracer threads other than the first, and how
    /// many times such copies were folded in (`-v`).
    pub fn shard_stat_counts(&self) -> (u64, u64) {
        let c = &self.state.globals.copies;
        (
            c.added.load(Ordering::Relaxed),
            c.folds.load(Ordering::Relaxed),
        )
    }

    /// Folds every statistic's per-shard copies in, for what reads the
    /// globals outside a handler (printing at exit, `--metrics`).
    fn settle_globals(&mut self, sink: &mut dyn OutputSink) {
        if let Err(e) = self.state.globals.settle_all() {
            sink.warn(&format!("ERROR: {e}"));
        }
    }

    /// `@entry`'s returns that found no entry, per return probe (the
    /// counters' values, wherever the handlers ran).
    fn entry_missing(&mut self) -> Vec<(String, i64)> {
        let image = self.state.image.clone();
        let mut out = Vec::new();
        for (g, what) in &image.entry_missing {
            let _ = self.state.globals.settle(*g);
            let slot = image.globals[*g].long_slot;
            let n = slot.map_or(0, |s| self.state.globals.longs[s as usize]);
            if n > 0 {
                out.push((what.clone(), n));
            }
        }
        out
    }

    pub fn set_target(&mut self, pid: i64) {
        self.state.target = pid;
    }

    /// Runtime errors so far.
    pub fn error_count(&self) -> u64 {
        self.tally.errors.load(Ordering::Relaxed)
    }

    /// Counts `n` probe runs skipped because a lock could not be
    /// taken in time (SystemTap's `skipped_count`); more than MAXSKIPPED
    /// stop the session with SystemTap's error. Returns whether it stops.
    pub fn note_skipped(&mut self, n: u64, sink: &mut dyn OutputSink) -> bool {
        let skipped = self.tally.skipped.fetch_add(n, Ordering::Relaxed) + n;
        if skipped as i64 > self.state.limits.max_skipped
            && matches!(self.phase(), Phase::Starting | Phase::Running)
        {
            sink.warn(
                "ERROR: Skipped too many probes, check MAXSKIPPED or try again with stap -t for more details.",
            );
            self.tally.set(Phase::Error);
        }
        self.phase() == Phase::Error
    }

    /// The limits the script runs under (`-D`).
    pub fn limits(&self) -> &Limits {
        &self.state.limits
    }

    /// Runs probe `index`'s handler for one event of its first point.
    /// `memory` is the memory of the event's process (for `user_string`
    /// and friends).
    pub fn fire(
        &mut self,
        index: usize,
        probe: &ProbeValues,
        memory: Option<&dyn ReadMemory>,
        sink: &mut dyn OutputSink,
    ) -> Outcome {
        self.fire_point(index, 0, probe, memory, sink)
    }

    /// [`ScriptRuntime::fire`] for an event of point `point` of the probe
    /// (a probe listing several points checks that point's condition and
    /// reports it in `pp()`).
    pub fn fire_point(
        &mut self,
        index: usize,
        point: usize,
        probe: &ProbeValues,
        memory: Option<&dyn ReadMemory>,
        sink: &mut dyn OutputSink,
    ) -> Outcome {
        let Some(spec) = self.state.image.probes.get(index) else {
            return Outcome::default();
        };
        let handler = spec.handler;
        let limits = &self.state.limits;
        let ctx = &mut *self.ctx;
        ctx.error = 0;
        ctx.nesting = 0;
        ctx.location = 0;
        ctx.actions_left = if self.interruptible[index] {
            limits.max_action_interruptible
        } else {
            limits.max_action
        };
        ctx.probe = *probe;
        ctx.probe_index = index as i64;
        ctx.point_index = point as i64;
        ctx.long_globals = self.state.globals.longs.as_mut_ptr();
        ctx.state = &mut *self.state;
        // SAFETY: the memory reference outlives this call, and `end_run`
        // forgets it before returning.
        self.state.memory = memory.map(|m| unsafe {
            std::mem::transmute::<&dyn ReadMemory, &'static dyn ReadMemory>(m) as *const _
        });
        // SAFETY: as for `memory`: only used during the call.
        self.state.sink = Some(unsafe {
            std::mem::transmute::<&mut dyn OutputSink, &'static mut dyn OutputSink>(&mut *sink)
                as *mut _
        });
        // SAFETY: `handler` was compiled for this image; the context and
        // the state it points to live (and are not otherwise borrowed)
        // during the call.
        let started = self.timing.is_some().then(std::time::Instant::now);
        unsafe { handler(&mut *self.ctx) };
        if let (Some(t), Some(started)) = (&self.timing, started) {
            let took = started.elapsed();
            t.lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(index, point, took);
        }
        self.after_run(sink)
    }

    /// [`Self::fire_point`] for a handler that may run beside others of
    /// other tracer threads: it first takes the locks of the globals the
    /// probe uses (`global_locks`). `None` when one stays busy past
    /// MAXTRYLOCK: the probe is skipped and counted, as SystemTap's; also
    /// `None`, uncounted, when a handler that held them ended the script.
    pub fn fire_point_guarded(
        &mut self,
        index: usize,
        point: usize,
        probe: &ProbeValues,
        memory: Option<&dyn ReadMemory>,
        sink: &mut dyn OutputSink,
    ) -> Option<Outcome> {
        let st = &self.state;
        let set = &st.image.probes.get(index)?.locks;
        let (tries, delay) = st.limits.trylock();
        if !st.globals.lock_set(set, tries, delay) {
            self.note_skipped(1, sink);
            return None;
        }
        if st.globals.ended() {
            // exit() on another tracer thread, which held these locks.
            st.globals.unlock_set(set);
            return None;
        }
        let tally = self.verbose.then(|| Arc::clone(&self.tally));
        if let Some(t) = &tally {
            let now = t.running.fetch_add(1, Ordering::Relaxed) + 1;
            t.most.fetch_max(now, Ordering::Relaxed);
        }
        let outcome = self.fire_point(index, point, probe, memory, sink);
        if let Some(t) = &tally {
            t.running.fetch_sub(1, Ordering::Relaxed);
        }
        let st = &self.state;
        if outcome.stop {
            st.globals.mark_ended();
        }
        st.globals.unlock_set(&st.image.probes[index].locks);
        Some(outcome)
    }

    /// `-v`: the most handler runs that were in progress at once, each
    /// holding its globals' locks (`fire_point_guarded`).
    pub fn most_beside(&self) -> u32 {
        self.tally.most.load(Ordering::Relaxed)
    }

    fn after_run(&mut self, sink: &mut dyn OutputSink) -> Outcome {
        let ctx = &mut *self.ctx;
        let state = &mut *self.state;
        if !state.out.is_empty() {
            sink.push(state.out.as_bytes());
            state.out.clear();
        }
        for d in state.diagnostics.drain(..) {
            sink.warn(&d);
        }
        if state.strings.exhausted && ctx.error == 0 {
            ctx.error = 1;
            state.error_message =
                "out of string memory (2 GiB of strings in one handler run)".into();
        }
        let error = ctx.error != 0;
        if error {
            let errors = self.tally.errors.fetch_add(1, Ordering::Relaxed) + 1;
            let msg = state.describe_error(ctx.location);
            if !self.suppress_errors {
                sink.warn(&format!("ERROR: {msg}"));
                if errors as i64 > state.limits.max_errors {
                    self.tally.set(Phase::Error);
                }
            }
            ctx.error = 0;
        }
        if state.exit_requested {
            self.tally.leave_running(Phase::Stopping);
        }
        let outcome = Outcome {
            error,
            stop: matches!(self.tally.phase(), Phase::Stopping | Phase::Error),
            probe: ctx.probe,
            control: std::mem::take(&mut state.control),
        };
        state.end_run();
        outcome
    }

    /// `(probe, point)` of the points matching `pick`, ordered by priority
    /// then declaration.
    fn ordered(&self, pick: impl Fn(&Trigger) -> Option<i64>) -> Vec<(usize, usize)> {
        let mut v: Vec<(i64, usize, usize)> = Vec::new();
        for (i, p) in self.state.image.probes.iter().enumerate() {
            for (j, pt) in p.points.iter().enumerate() {
                if let Some(prio) = pick(&pt.trigger) {
                    v.push((prio, i, j));
                }
            }
        }
        v.sort_by_key(|&(prio, i, j)| (prio, i, j));
        v.into_iter().map(|(_, i, j)| (i, j)).collect()
    }

    fn run_ordered(
        &mut self,
        probes: Vec<(usize, usize)>,
        phase: Phase,
        sink: &mut dyn OutputSink,
    ) {
        // Begin, end, error and prometheus probes run on the first.
        self.set_shard(0);
        let us = ProbeValues {
            pid: std::process::id() as i64,
            tid: unsafe { libc::gettid() } as i64,
            ..ProbeValues::default()
        };
        for (i, j) in probes {
            if self.phase() != phase {
                break;
            }
            self.fire_point(i, j, &us, None, sink);
        }
    }

    /// Runs the begin probes in order; false when the session already
    /// stops (`exit()` or an error in a begin probe).
    pub fn run_begin(&mut self, sink: &mut dyn OutputSink) -> bool {
        let probes = self.ordered(|t| match t {
            Trigger::Begin(p) => Some(*p),
            _ => None,
        });
        self.run_ordered(probes, Phase::Starting, sink);
        if self.phase() == Phase::Starting {
            self.tally.set(Phase::Running);
        }
        self.phase() == Phase::Running
    }

    /// The timer points to schedule.
    pub fn timers(&self) -> Vec<TimerPoint> {
        let mut v = Vec::new();
        for (i, p) in self.state.image.probes.iter().enumerate() {
            for (j, pt) in p.points.iter().enumerate() {
                if let Trigger::Timer {
                    period_ns,
                    randomize_ns,
                } = pt.trigger
                {
                    v.push(TimerPoint {
                        probe: i,
                        point: j,
                        period_ns,
                        randomize_ns,
                    });
                }
            }
        }
        v
    }

    /// Fires probe `probe` for its (first) timer point.
    pub fn fire_timer(&mut self, probe: usize, sink: &mut dyn OutputSink) -> Outcome {
        let timer = self
            .timers()
            .into_iter()
            .find(|t| t.probe == probe)
            .unwrap_or(TimerPoint {
                probe,
                point: 0,
                period_ns: 0,
                randomize_ns: 0,
            });
        self.fire_timer_point(timer, sink)
    }

    /// Fires a timer point (no process context).
    pub fn fire_timer_point(&mut self, timer: TimerPoint, sink: &mut dyn OutputSink) -> Outcome {
        // Timers run on the first tracer thread (or the scheduler's).
        self.set_shard(0);
        let us = ProbeValues {
            pid: std::process::id() as i64,
            tid: unsafe { libc::gettid() } as i64,
            ..ProbeValues::default()
        };
        self.fire_point(timer.probe, timer.point, &us, None, sink)
    }

    /// Ends the session: end probes (or, after an error, error probes).
    pub fn run_end(&mut self, sink: &mut dyn OutputSink) {
        self.tally.leave_running(Phase::Stopping);
        if self.phase() == Phase::Stopping {
            let ends = self.ordered(|t| match t {
                Trigger::End(p) => Some(*p),
                _ => None,
            });
            self.run_ordered(ends, Phase::Stopping, sink);
        }
        if self.phase() == Phase::Error {
            let errs = self.ordered(|t| match t {
                Trigger::Error(p) => Some(*p),
                _ => None,
            });
            self.run_ordered(errs, Phase::Error, sink);
        }
    }

    /// Prints the autoprinted globals and the error summary; returns the
    /// exit status (1 after a runtime error).
    pub fn finish(&mut self, sink: &mut dyn OutputSink) -> i32 {
        self.settle_globals(sink);
        let mut out = std::mem::take(&mut self.state.out);
        out.clear();
        if self.phase() != Phase::Error {
            if self.json {
                out.json(|b| sink::autoprint_json(&self.state, b));
            } else {
                out.text(|b| sink::autoprint(&self.state, b));
            }
        }
        if let Some(t) = &self.timing {
            let image = &self.state.image;
            let t = t.lock().unwrap_or_else(|e| e.into_inner());
            let report = t.report(|i, j| image.probes[i].points[j].text.clone());
            out.text(|b| b.extend_from_slice(report.as_bytes()));
        }
        if !out.is_empty() {
            sink.push(out.as_bytes());
        }
        out.clear();
        self.state.out = out;
        if self.verbose {
            for (probe, n) in self.entry_missing() {
                sink.warn(&format!(
                    "utap: {n} return(s) of {probe} had no @entry values (the entry \
                     predates the attach): 0 or \"\" used"
                ));
            }
        }
        let errors = self.tally.errors.load(Ordering::Relaxed);
        let skipped = self.tally.skipped.load(Ordering::Relaxed);
        if errors > 0 || skipped > 0 {
            sink.warn(&format!(
                "WARNING: Number of errors: {errors}, skipped probes: {skipped}"
            ));
        }
        if self.phase() == Phase::Error {
            sink.warn("Pass 5: run failed.  [man error::pass5]");
            1
        } else {
            0
        }
    }
}
