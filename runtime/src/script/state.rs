//! The mutable state of a running script that native code reaches through
//! `HandlerContext::state`: strings, globals, the output of the current
//! handler run, the pending error, foreach iterators and the tracee.

use std::sync::Arc;

use crate::memory::ReadMemory;
use crate::values::map::EntryId;
use crate::values::strings::{Regex, Tokenizer};

use super::context::HandlerContext;
use super::global_locks::SharedGlobals;
use super::globals::Globals;
use super::image::ScriptImage;
use super::limits::Limits;
use super::output::RunOutput;
use super::sink::OutputSink;
use super::strings::Strings;

/// Output of a run beyond this many bytes is handed to the sink at once.
pub const FLUSH_AT: usize = 64 * 1024;

/// A `foreach` in progress.
pub enum Iteration {
    /// Entries of an array, chosen and ordered when the loop started.
    Array {
        global: u32,
        entries: Vec<EntryId>,
        pos: usize,
    },
    /// Bucket indexes of a histogram, with their counts.
    Buckets {
        counts: Vec<i64>,
        pos: usize,
        end: usize,
    },
}

/// Runtime state shared by all handler runs of one script.
pub struct ScriptState {
    pub image: Arc<ScriptImage>,
    pub limits: Limits,
    pub strings: Strings,
    /// Shared by every runtime copy of the script (see `global_locks`).
    pub globals: SharedGlobals,
    /// The tracer thread (shard) running the current handler: `<<<` on
    /// any other than the first goes to that shard's copy
    /// (`globals::ShardCopies`).
    pub shard: usize,
    /// Output of the current handler run (pushed to the sink at its end).
    pub out: RunOutput,
    /// `$value` of `probe prometheus`: the text a scrape is served.
    pub prometheus: Vec<u8>,
    /// The message of the pending runtime error (`HandlerContext::error`).
    pub error_message: String,
    /// `exit()` was called.
    pub exit_requested: bool,
    /// Open `foreach` loops (slots are reused; freed at the end of a run).
    pub iterations: Vec<Option<Iteration>>,
    pub tokenizer: Tokenizer,
    /// Compiled `=~` patterns (compiled on first use).
    pub regexes: Vec<Option<Regex>>,
    /// The memory of the process the current event belongs to.
    pub memory: Option<*const dyn ReadMemory>,
    /// Where the current run's output goes (set for the run only).
    pub sink: Option<*mut dyn OutputSink>,
    /// Scratch buffer of the `sprint*` functions.
    pub print_scratch: Vec<u8>,
    /// Warnings (`warn()`) of the current run, for the sink's stderr side.
    pub diagnostics: Vec<String>,
    /// Guru-mode thread control requested by the current run.
    pub control: Vec<ControlRequest>,
    /// `target()`: the -c/-x process, 0 without one.
    pub target: i64,
    /// At a function probe: the function, `uaddr()`, the process's modules.
    pub ufunc: Option<crate::hit::UserFunction>,
    /// At a USDT marker probe: the marker (`$$name`, `pp()`...) and its
    /// decoded arguments.
    pub usdt: Option<(std::rc::Rc<crate::hit::Marker>, Vec<i64>)>,
    /// State of `randint`'s generator.
    pub rng: u64,
    /// What `execname()`, `ppid()`, `uid()`... report, per thread.
    pub procs: crate::procinfo::ProcCache,
    /// Unwind tables and module maps for `ubacktrace()` & co.
    pub unwind: crate::unwind::UnwindState,
}

/// A thread-control action a handler asked for (guru mode); the process
/// session carries it out after the handler returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlRequest {
    /// `stop()`: keep the current thread stopped; `stop(tid)`: stop it.
    Stop(i64),
    /// `resume(tid)`.
    Resume(i64),
    /// `quiesce(tid)`: stop it at its next quiescent point and report it.
    Quiesce(i64),
    /// `raise(signo)`: send the signal to this thread.
    Raise { tid: i64, signo: i64 },
    /// `udelay(us)` / `mdelay(ms)`: hold this thread for so many
    /// microseconds (in a tracing stop; a timer of the tracer resumes it).
    Delay { tid: i64, us: i64 },
}

impl ScriptState {
    pub fn new(image: Arc<ScriptImage>, limits: Limits) -> ScriptState {
        let globals = Globals::new(&image.globals, image.long_slots, &limits);
        ScriptState::with_globals(image, limits, SharedGlobals::new(globals))
    }

    /// Another state for the same script, over the same globals: the
    /// scratch of one more tracer thread's handler runs.
    pub fn replica(&self, shard: usize) -> ScriptState {
        let mut s = ScriptState::with_globals(
            Arc::clone(&self.image),
            self.limits.clone(),
            self.globals.clone(),
        );
        s.out = RunOutput::new(self.out.deferred());
        s.target = self.target;
        s.shard = shard;
        s
    }

    fn with_globals(
        image: Arc<ScriptImage>,
        limits: Limits,
        globals: SharedGlobals,
    ) -> ScriptState {
        let strings = Strings::new(image.literals.clone(), limits.max_string_len);
        let regexes = image.regexes.iter().map(|_| None).collect();
        ScriptState {
            image,
            limits,
            strings,
            globals,
            shard: 0,
            out: RunOutput::new(false),
            error_message: String::new(),
            exit_requested: false,
            iterations: Vec::new(),
            tokenizer: Tokenizer::new(),
            regexes,
            memory: None,
            sink: None,
            print_scratch: Vec::new(),
            diagnostics: Vec::new(),
            prometheus: Vec::new(),
            control: Vec::new(),
            target: 0,
            ufunc: None,
            usdt: None,
            procs: crate::procinfo::ProcCache::new(),
            unwind: Default::default(),
            rng: 0x9e37_79b9_7f4a_7c15
                ^ (std::process::id() as u64) << 32
                ^ crate::procinfo::gettimeofday_ns() as u64,
        }
    }

    /// Records a runtime error: native code sees `ctx.error` and unwinds.
    #[cold]
    pub(crate) fn raise(&mut self, ctx: *mut HandlerContext, message: impl Into<String>) {
        self.error_message = message.into();
        // SAFETY: ctx is the live context of the running handler.
        unsafe { (*ctx).error = 1 };
    }

    /// "msg near operator '/' at script.stp:3:14".
    pub fn describe_error(&self, location: i64) -> String {
        match self.image.locations.get(location as usize) {
            Some(loc) if !loc.is_empty() => format!("{} near {}", self.error_message, loc),
            _ => self.error_message.clone(),
        }
    }

    /// Hands a large run's output over in pieces (as SystemTap flushes a
    /// full print buffer), so a handler that prints megabytes does not need
    /// a transport buffer as large as its whole output.
    #[inline]
    pub fn flush_if_large(&mut self) {
        if self.out.len() >= FLUSH_AT
            && let Some(sink) = self.sink
        {
            // SAFETY: `sink` is set by `ScriptRuntime::fire_point` for the
            // duration of the run, from a live exclusive borrow.
            unsafe { (*sink).push(self.out.as_bytes()) };
            self.out.clear();
        }
    }

    /// Frees what a handler run left behind.
    pub fn end_run(&mut self) {
        self.strings.reset();
        self.iterations.clear();
        self.memory = None;
        self.sink = None;
    }
}
