//! What the compiler hands the data plane: the region with the compiled
//! in-process code in it, and the tables the tracer needs to run that code
//! itself, fill the region from the script's state and fold it back.

use super::layout::{BLOCK_HITS, Block, TRACER_BLOCKS};
use super::region::Region;
use crate::script::context::{HandlerContext, ProbeValues};

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
    /// Some syscall entry or return probe runs in process (an attached
    /// program's threads are then armed with SUD, `dispatch`).
    pub syscall_hooks: bool,
    /// The handlers' clock, when one reads it (`super::clock`): the
    /// tracer refreshes it while the session runs.
    pub clock: Option<std::sync::Mutex<super::clock::Keeper>>,
    /// The command names handed to blocks, when a handler reads
    /// `execname()` (`super::names`).
    pub names: Option<super::names::Names>,
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

    /// Whether syscall `nr` is served in process at a patched site.
    pub fn serves(&self, nr: i64) -> bool {
        usize::try_from(nr).is_ok_and(|n| self.served.get(n).copied().unwrap_or(false))
    }

    /// Runs probe `probe`'s in-process handler here, in the tracer, for a
    /// hit at a stop (a site the data plane cannot serve), on tracer block
    /// `shard`: the same code and the same state as in the program.
    /// Returns false if the probe has no in-process handler.
    /// `comm` is the thread's command name, for `execname()`.
    pub fn run_here(
        &self,
        shard: usize,
        probe: usize,
        point: usize,
        values: &ProbeValues,
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
            if (*self.region.header()).stop != 0 {
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
            let f: InProcHandler = std::mem::transmute::<u64, InProcHandler>(addr);
            f(ctx);
            let hits = (block as *mut u8).add(BLOCK_HITS as usize) as *mut u64;
            *hits += 1;
        }
        true
    }
}
