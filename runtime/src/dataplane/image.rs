//! What the compiler hands the data plane: the region with the compiled
//! in-process code in it, and the tables the tracer needs to run that code
//! itself, fill the region from the script's state and fold it back.

use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::{
    BLOCK_COUNTERS, BLOCK_HITS, BLOCK_STATS, BLOCKS, Block, STAT_COPY_WORDS, TRACER_BLOCKS,
};
use super::region::Region;
use crate::script::context::{HandlerContext, ProbeValues};

/// What a function hit at a stop gives in-process handlers run there
/// (`InProcImage::run_here`): what the function entry stores in the
/// program's block.
pub struct StopSite {
    /// The registers in DWARF order (`super::plans`).
    pub regs: [u64; 17],
    /// The load bias of the hit's module.
    pub bias: u64,
    /// The function's name (`probefunc()`).
    pub func: Vec<u8>,
}

/// The entry of a compiled dispatcher or handler: `fn(ctx)`, the
/// dispatcher's result 0 (served) or 1 (not a number served in process).
pub type InProcFn = unsafe extern "C" fn(*mut HandlerContext) -> i64;
pub type InProcHandler = unsafe extern "C" fn(*mut HandlerContext);

/// Syscall numbers the dispatchers cover (x86_64 has fewer than 512).
pub const SYSCALL_NUMBERS: usize = 1024;

/// Syscalls that never run from the gadget: they return on another stack
/// (clone, fork, vfork, clone3), read the stack as a signal frame
/// (rt_sigreturn), or replace or end the program (execve, execveat, exit,
/// exit_group), which the tracer must see as it always did.
pub const NEVER_SERVED: [u32; 9] = [15, 56, 57, 58, 59, 60, 231, 322, 435];

pub struct InProcImage {
    pub region: Region,
    /// `fn(ctx) -> i64` run before the gadget's syscall, and after it.
    pub dispatch_entry: u64,
    pub dispatch_return: u64,
    /// By probe of the script: its in-process handler and its index among
    /// the in-process probes (the `probe_index` that code expects).
    pub handlers: Vec<Option<(u64, u32)>>,
    /// Syscall numbers whose every probe runs in process: a site trapped on
    /// one of them is patched.
    pub served: Vec<bool>,
    /// Long scalar globals the in-process code touches: (global, slot).
    pub long_globals: Vec<(u32, u32)>,
    /// Those counted per thread (handlers only add to them): (slot, its
    /// index in every block's `counters`).
    pub counted: Vec<(u32, u32)>,
    /// Program blocks handed out so far (`Block::counters` are summed
    /// over them and the tracer's blocks).
    pub blocks_used: AtomicU64,
    /// The in-process compile's literal bytes (string key handles point
    /// into them) and error locations.
    pub literals: Vec<u8>,
    /// The handle of each literal, by its bytes (to fill in keys).
    pub literal_handles: std::collections::HashMap<Vec<u8>, i64>,
    pub locations: Vec<String>,
    /// The in-process compile's printf formats (a ring record's `fmt`
    /// indexes them).
    pub formats: Vec<Vec<crate::format::FormatPiece>>,
    pub max_action: i64,
    pub max_nesting: i64,
    /// MAXSTRINGLEN (quoting strings read in the program, `super::strings`).
    pub max_string_len: usize,
    /// Some syscall entry or return probe runs in process (an attached
    /// program's threads are then armed with SUD, `dispatch`).
    pub syscall_hooks: bool,
    /// Some handler reads a target variable through registers: the
    /// function common entry stores them in the block (`super::plans`).
    pub entry_regs: bool,
    /// Some handler reads its site's words (a target variable's load
    /// bias, `probefunc()` at a wildcard's sites): the function entry and
    /// the return stub copy them from the hook list (`function::Site`).
    pub entry_site: bool,
    /// The handlers' clock, when one reads it (`super::clock`): the
    /// tracer refreshes it while the session runs.
    pub clock: Option<std::sync::Mutex<super::clock::Keeper>>,
    /// The command names handed to blocks, when a handler reads
    /// `execname()` (`super::names`).
    pub names: Option<super::names::Names>,
    /// By probe of the script: its hits run held (a timer sharing state
    /// or output with the in-process handlers: `super::globals::refill`).
    pub held: Vec<bool>,
}

impl std::fmt::Debug for InProcImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcImage")
            .field("base", &format_args!("{:#x}", self.region.base()))
            .field("handlers", &self.handlers.iter().flatten().count())
            .finish()
    }
}

impl InProcImage {
    /// The address of tracer block `shard`.
    pub fn tracer_block(&self, shard: usize) -> *mut Block {
        let d = &self.region.data;
        let i = super::layout::BLOCKS + (shard as u64 % TRACER_BLOCKS);
        (self.region.data_base() + d.block(i)) as *mut Block
    }

    /// The blocks whose per-thread copies the fold reads: the program
    /// blocks handed out and the tracer's.
    fn used_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        let used = self.blocks_used.load(Ordering::Acquire).min(BLOCKS);
        (0..used)
            .chain(BLOCKS..BLOCKS + TRACER_BLOCKS)
            .map(|i| self.region.data_base() + self.region.data.block(i))
    }

    /// What every thread added to counter `k` (`Block::counters`), summed
    /// as the program left them (untrusted, only added, wrapping as the
    /// adds do).
    pub fn counted_total(&self, k: u32) -> i64 {
        self.used_blocks()
            .map(|b| {
                let at = b + BLOCK_COUNTERS + 8 * k as u64;
                // SAFETY: inside our mapping (k < COUNTERS); any value is
                // a valid long.
                unsafe { std::ptr::read_volatile(at as *const i64) }
            })
            .fold(0i64, i64::wrapping_add)
    }

    /// The threads' copies of a scalar statistic at `word` of
    /// `Block::stats` (`layout::stat_copies`), `words` each, but the empty
    /// ones (count 0): untrusted, checked by the fold.
    pub fn stat_copies(&self, word: u64, words: u64) -> Vec<Vec<i64>> {
        let (word, words) = (word.min(STAT_COPY_WORDS as u64), words as usize);
        let words = words.min(STAT_COPY_WORDS - word as usize);
        self.used_blocks()
            .map(|b| {
                let at = (b + BLOCK_STATS + 8 * word) as *const i64;
                // SAFETY: inside the block's `stats` (clamped above); any
                // value is a valid long.
                (0..words)
                    .map(|w| unsafe { std::ptr::read_volatile(at.add(w)) })
                    .collect::<Vec<i64>>()
            })
            .filter(|c| c.first().is_some_and(|&n| n != 0))
            .collect()
    }

    /// Empties every thread's copies of the counted globals and scalar
    /// statistics (their totals were folded; the threads are held).
    pub fn clear_copies(&self) {
        for b in self.used_blocks() {
            // SAFETY: both arrays lie inside the block, in our mapping.
            unsafe {
                std::ptr::write_bytes((b + BLOCK_COUNTERS) as *mut i64, 0, super::layout::COUNTERS);
                std::ptr::write_bytes((b + BLOCK_STATS) as *mut i64, 0, STAT_COPY_WORDS);
            }
        }
    }

    /// Refreshes the handlers' clock if it is time (the tracer's
    /// periodic look at the region).
    pub fn tick_clock(&self) {
        if let Some(k) = &self.clock {
            k.lock().unwrap_or_else(|e| e.into_inner()).tick();
        }
    }

    /// The handle `execname()` gives for command name `comm`, or the
    /// empty string's when no handler reads it.
    pub fn name_handle(&self, comm: &[u8]) -> i64 {
        match &self.names {
            Some(n) => n.handle(comm, &self.literal_handles),
            None => crate::script::strings::EMPTY,
        }
    }

    /// What resolves the in-process code's string handles.
    pub fn texts(&self) -> super::names::Texts<'_> {
        super::names::Texts::new(&self.literals, self.names.as_ref())
    }

    /// Whether probe `probe`'s hits run held: every thread of the program
    /// out of any handler, the region folded back before and filled after.
    pub fn runs_held(&self, probe: usize) -> bool {
        self.held.get(probe).copied().unwrap_or(false)
    }

    /// Whether syscall `nr` is served in process at a patched site.
    pub fn serves(&self, nr: i64) -> bool {
        usize::try_from(nr).is_ok_and(|n| self.served.get(n).copied().unwrap_or(false))
    }

    /// Runs probe `probe`'s in-process handler here, in the tracer, for a
    /// hit at a stop (a site the data plane cannot serve), on tracer block
    /// `shard`: the same code and the same state as in the program.
    /// Returns false if the probe has no in-process handler.
    /// `comm` is the thread's command name, for `execname()`; `site` what
    /// a function hit gives (registers, bias, name: as the function entry
    /// stores them in the program's block).
    pub fn run_here(
        &self,
        shard: usize,
        probe: usize,
        point: usize,
        values: &ProbeValues,
        site: Option<&StopSite>,
        comm: &[u8],
    ) -> bool {
        let Some(Some((addr, index))) = self.handlers.get(probe).copied() else {
            return false;
        };
        let block = self.tracer_block(shard);
        // SAFETY: the block is inside our mapping of the region and used
        // by this tracer thread only; the handler was compiled for this
        // context layout and calls nothing outside the region.
        unsafe {
            if super::layout::stopped((*self.region.header()).stop) {
                return true;
            }
            let ctx = &mut (*block).ctx;
            ctx.error = 0;
            ctx.actions_left = self.max_action;
            ctx.nesting = 0;
            ctx.max_nesting = self.max_nesting;
            ctx.location = 0;
            ctx.long_globals = (self.region.data_base() + self.region.data.longs) as *mut i64;
            ctx.probe = *values;
            ctx.probe_index = index as i64;
            ctx.point_index = point as i64;
            ctx.state = std::ptr::null_mut();
            (*block).comm = self.name_handle(comm);
            if let Some(s) = site {
                ((*block).regs, (*block).bias) = (s.regs, s.bias);
                if self.entry_site {
                    (*block).site_func = self.name_handle(&s.func);
                }
            }
            let f: InProcHandler = std::mem::transmute::<u64, InProcHandler>(addr);
            f(ctx);
            let hits = (block as *mut u8).add(BLOCK_HITS as usize) as *mut u64;
            *hits += 1;
        }
        true
    }
}
