//! The data plane: probe handlers that run inside the traced program, with
//! ptrace kept as the control plane.
//!
//! A hit served here costs a jump, a stub and a call, not a ptrace stop.
//! What runs in the program: per-site stubs placed near the site, the
//! common entry with its syscall gadget (`code`), and the handlers
//! `utap_compiler::route` chose, compiled for this ABI by
//! `utap_codegen::inproc` into the shared region (`region`, `layout`).
//! The tracer maps the region into a process at its first trapped
//! syscall that the data plane serves, gives every thread a block
//! (`%gs`), and patches each site a trap proves to be a syscall
//! wrapper's run of instructions before its `syscall` (`site`). That
//! control side (mapping, patching, SUD, taking out) is the utrace core's
//! `utrace/dataplane.rs` and `utrace/dispatch.rs`, as the breakpoints' is
//! `utrace/breakpoint.rs`: this room sits below the core and never names
//! it. Hits at sites it cannot patch are served at the stop by the
//! same in-process code, run by the tracer in its own mapping of the
//! region, so every probe keeps one state whatever the route of each hit.
//!
//! Invariants:
//! * **Text is patched only while every thread of the address space is
//!   held**, and only where the function's disassembly (from its symbol)
//!   puts instruction boundaries at the run's start and at the `syscall`,
//!   no branch lands inside the run and no held thread is in it. The
//!   `syscall` itself is never overwritten: a restarted call and a branch
//!   to it still run the original instruction.
//! * **A hit is served once**: at a patched site by the stub (the gadget's
//!   syscall is let through by the filter, by address), anywhere else by
//!   the tracer at its stop; a number with any probe that stays in the
//!   tracer is never served by a stub (the dispatcher says so and the
//!   stub makes the original call).
//! * **Nothing in the program depends on the tracer while it runs**: the
//!   region is the program's own mapping of the memfd, stubs live in the
//!   program's pages, and handlers take no lock, call nothing outside the
//!   region and make no syscall but the safe load's `process_vm_readv`
//!   from the region's helper (`strings`: it cannot fault, wait on
//!   anything or need the tracer). A thread already in a handler (a signal
//!   handler's syscall) skips and counts (MAXNESTING's rule).
//! * **The data part is untrusted**: the program can write it; the tracer
//!   reads it with bounds checks and never follows a pointer from it.
//! * **Every ending takes it out**: handlers stop, every thread of each
//!   space is held and moved out of stubs and region code, the region is
//!   folded back into the script's state, site bytes and `%gs` are
//!   restored, and the stub pages and region are unmapped where a held
//!   thread can run the `munmap`.
//!
//! Function entries (`function`): a `.function("F")` entry whose every
//! hook runs in process is patched with a jump to a per-site stub that
//! calls the function common entry with the site's hook list (in the
//! code part: the program cannot write it), then runs the displaced
//! instructions relocated. Under `-x` the entries are patched at attach,
//! before any thread runs, and never get an `int3` (a thread trapped on
//! one needs the tracer alive); under `-c`, at their first hit. A thread
//! held between displaced instructions is moved into the stub's copy.
//! If utap dies, patched entries keep working (the region stays mapped,
//! a thread with no block of this region's runs no hook).
//!
//! USDT markers: a marker's `nop` is patched as an entry is (the `nop` and
//! the instructions after it, at least 5 bytes that can be relocated,
//! no branch of the module landing inside them; else the `int3` stays),
//! when every hook there runs in process. Its stub calls a marker entry
//! written after the hook lists (`function::mark_entry`) instead of the
//! function common entry: it puts the note's register and constant
//! operands in the argument registers (a memory operand as its address,
//! which the handler reads through the safe load), calls the common entry
//! and puts the registers back. Flags are dead at a marker (an `asm` statement
//! clobbers them on x86) and the stub steps over the red zone, so the
//! same entry serves a site in a function's middle. The semaphore is the
//! utrace core's, as on the `int3` route; ending and SIGKILL behave as
//! for entries.
//!
//! Function returns: an entry with return hooks also pushes a frame on
//! the thread's shadow stack and puts the region's return stub in the
//! return address's slot; the return stub pops the frame, puts the real
//! address back and runs the return hooks with the entry's arguments.
//! Shadow stacks live in a private mapping of each process just past the
//! region (a fork child's stack and frames are copied together), one per
//! block. Invariants of returns:
//! * **A hijacked return always finds its frame**: frames a longjmp left
//!   are dropped by stack address, never the live ones; functions that
//!   return twice (setjmp, vfork) or unwind, and Go programs (goroutines
//!   move between threads), keep their returns on the tracer's route.
//! * **No thread runs another thread's frames**: a block belongs to the
//!   thread whose `%fs` it recorded; a thread created after utap died
//!   inherits its creator's `%gs` and runs no hook. A return whose `%gs`
//!   is not this region's block (a later session replaced it) finds its
//!   block by `%fs`.
//! * **Every ending puts every slot back** (threads held and moved out of
//!   region code first); the unwinder's stops park and re-arm the frames
//!   as the tracer's own (`utrace::unwinding`).
//! * **A dead session's leftovers are inert**: its stubs and region stay
//!   mapped (pending returns need them), its hooks run for none of a later
//!   session's threads, and a later session puts the file's bytes back at
//!   an entry it patches again. The session's stop word is on the tracing
//!   thread's robust futex list (`lifeline`): when utap dies the kernel
//!   marks it before it lets the threads go, and every entry, return and
//!   syscall stub tests it before it writes anything of the region, so
//!   the hooks stop at once and a patched site costs a jump and a test.
//!
//! Output: `printf` and `print` in a handler write a record (format index,
//! sequence number, long and literal-handle arguments) into the output
//! ring of the thread's block (`rings`); the session reads every ring in
//! sequence order every few milliseconds and at the end, before `end`'s
//! output, and formats the records as the tracer's own `printf` would.
//! Invariants of output:
//! * **A printing thread never waits**: a full ring drops the record and
//!   counts it; the count joins the transport's lost messages (the
//!   warning at exit).
//! * **Rings outlive threads**: a block given to a new thread keeps its
//!   ring, so nothing a dead thread wrote is lost or overwritten.
//! * **Records are untrusted**: kind, length and format index are checked
//!   and a ring with a bad record is skipped to its head and counted.
//!
//! Timers that share globals or output with the in-process handlers
//! run held (`globals::refill`): every thread of each space held out of
//! any handler (let run on until it leaves, never single-stepped: a
//! thread stepped at utap's death keeps the trap flag and dies of
//! SIGTRAP), the rings drained, the region folded into
//! the script's state, the timer run in the tracer, the tables and the
//! threads' copies emptied and the region filled again, the threads let
//! go. A hit is still served once, and both sides see one state.
//!
//! Syscall sites under `-x` (no seccomp filter: one could never be taken
//! out at detach) are, with `UTAP_SUD=1` (opt-in: `dispatch::enabled`
//! says why), found through Syscall User Dispatch (`dispatch`):
//! each attached thread is armed with the region's code as its allowed
//! range, so a call from anywhere else stops at a SIGSYS the tracer
//! treats as a seccomp stop. Its selectors need no tracer alive: they
//! turn to ALLOW when the tracing thread dies (see `dispatch`). A
//! process or thread that cannot be armed stays on `PTRACE_SYSCALL`, its
//! in-process handlers run by the tracer at each stop.

pub mod clock;
pub mod code;
pub mod dispatch;
pub mod fold;
pub mod function;
pub mod globals;
pub mod image;
pub mod layout;
pub mod lifeline;
pub mod names;
pub mod plans;
pub mod region;
pub mod rings;
mod robust;
pub mod site;
pub mod strings;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::elf::ImageCache;
use crate::hit::MarkArg;
use crate::tid::{Tid, TidMap};
pub use image::InProcImage;

/// Stub slots: 64 bytes each, 64 to a page.
const STUB_SLOT: u64 = 64;
const _: () = assert!(STUB_SLOT >= code::STUB_MAX);

/// Per-thread counts of the blocks, summed (`-v`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockTotals {
    pub hits: u64,
    pub skipped: u64,
    /// Returns not probed: the shadow stack was full.
    pub missed: u64,
}

impl BlockTotals {
    /// Adds a block's counts (read as the program left them: untrusted,
    /// only summed).
    fn add(&mut self, b: &layout::Block) {
        // SAFETY: `b` is a valid reference; volatile because the program
        // writes these.
        let read = |v: &u64| unsafe { std::ptr::read_volatile(v) };
        self.hits = self.hits.wrapping_add(read(&b.hits));
        self.skipped = self.skipped.wrapping_add(read(&b.skipped));
        self.missed = self.missed.wrapping_add(read(&b.missed));
    }
}

/// What the data plane did, for `-v`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub processes: u64,
    pub inject_failed: u64,
    pub sites: u64,
    pub sites_refused: u64,
    pub function_sites: u64,
    /// Of those, USDT markers.
    pub mark_sites: u64,
    pub threads_moved: u64,
    pub taken_out: u64,
    /// Threads armed with Syscall User Dispatch, and refused (`dispatch`).
    pub sud_threads: u64,
    pub sud_refused: u64,
    /// SIGSYS stops whose call was let through to the tracer route, and
    /// sites patched at the exit stop of such a call.
    pub sud_let_through: u64,
    pub sud_patched: u64,
    /// Hits of probes that ran held (`globals::refill`), and threads a
    /// hold found still inside a handler after letting them run on.
    pub held_runs: u64,
    pub held_inside: u64,
}

/// One address space's part in the data plane.
#[derive(Clone, Default)]
pub(crate) struct Space {
    /// The region is mapped (`Some(true)`), could not be (`Some(false)`).
    pub(crate) mapped: Option<bool>,
    /// Patched syscall sites.
    pub(crate) sites: HashMap<u64, SyscallSite>,
    /// Sites that cannot be patched.
    pub(crate) refused: HashSet<u64>,
    /// Stub pages: (base, slots used).
    pub(crate) pages: Vec<(u64, u64)>,
    /// Function entries whose every hook runs in process, offered by the
    /// session, patched at their first hit: site → hook lists.
    pub(crate) offers: HashMap<u64, SiteHookList>,
    /// Patched function entries.
    pub(crate) fsites: HashMap<u64, FunctionSite>,
}

/// One hook of a function site: the in-process handler, the probe's
/// in-process index, the point's index.
pub type Hook = (u64, u32, u32);

/// The hooks of a function site: at its entry and at its returns; at a
/// USDT marker, the marker's arguments (its stub calls a marker entry
/// that loads them, `function::mark_entry`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteHookList {
    pub entry: Vec<Hook>,
    pub ret: Vec<Hook>,
    pub mark: Option<Vec<MarkArg>>,
    /// The list's site words (`function::Site`).
    pub site: function::Site,
}

/// A patched syscall site (see `code`).
#[derive(Clone, Debug)]
pub(crate) struct SyscallSite {
    pub(crate) stub: u64,
    /// The bytes the jump replaced: the displaced run, up to the `syscall`.
    pub(crate) orig: Vec<u8>,
    /// Stub offsets of the relocated instructions, and the run's length
    /// there.
    pub(crate) offsets: Vec<u64>,
    pub(crate) moved_len: u64,
    /// The displaced instructions' lengths at the site.
    pub(crate) lens: Vec<u64>,
}

impl SyscallSite {
    /// The site's `syscall`, as an offset from the site.
    pub(crate) fn call_off(&self) -> u64 {
        self.orig.len() as u64
    }
}

/// A patched function entry.
#[derive(Clone, Debug)]
pub(crate) struct FunctionSite {
    pub(crate) stub: u64,
    /// The bytes the jump replaced.
    pub(crate) orig: Vec<u8>,
    /// Stub offsets of the relocated instructions and of the jump back.
    pub(crate) offsets: Vec<u64>,
    /// The displaced instructions' lengths.
    pub(crate) lens: Vec<u64>,
}

impl Space {
    /// A free stub slot within a rel32 jump of `site`.
    pub(crate) fn take_slot(&mut self, site: u64) -> Option<u64> {
        let reach = crate::uprobe::xol::REACH;
        let page = crate::uprobe::xol::PAGE_SIZE;
        let p = self
            .pages
            .iter_mut()
            .find(|(b, used)| *used < page / STUB_SLOT && b.abs_diff(site) <= reach)?;
        let slot = p.0 + p.1 * STUB_SLOT;
        p.1 += 1;
        Some(slot)
    }

    /// The function site whose stub holds `addr`, and the offset in it.
    pub(crate) fn fstub_at(&self, addr: u64) -> Option<(u64, u64, &FunctionSite)> {
        self.fsites.iter().find_map(|(&site, f)| {
            let len = function::stub_len(f.lens.iter().sum());
            (f.stub..f.stub + len)
                .contains(&addr)
                .then(|| (site, addr - f.stub, f))
        })
    }

    /// The syscall site whose stub holds `addr`, and the offset in it.
    pub(crate) fn stub_at(&self, addr: u64) -> Option<(u64, u64, &SyscallSite)> {
        self.sites.iter().find_map(|(&site, s)| {
            (s.stub..s.stub + s.moved_len + code::TAIL_LEN)
                .contains(&addr)
                .then(|| (site, addr - s.stub, s))
        })
    }
}

/// The data plane of one tracer.
pub struct Plane {
    pub image: Arc<InProcImage>,
    pub(crate) spaces: HashMap<Tid, Space>,
    /// Blocks by thread, and the free ones.
    pub(crate) blocks: TidMap<u64>,
    pub(crate) free: Vec<u64>,
    pub(crate) next_block: u64,
    /// vfork children (they share their parent's memory: never patched
    /// from them).
    pub(crate) vforked: HashSet<Tid>,
    pub(crate) cache: ImageCache,
    /// Per process and executable mapping (start, inode): every address a
    /// direct branch or call of the module's functions lands on, and every
    /// function symbol's start, sorted (`Tracer::module_targets`).
    pub(crate) targets: HashMap<(Tid, u64, u64), Arc<Vec<u64>>>,
    /// The gadgets' offsets in the common entry.
    pub(crate) gadget_offsets: [u64; 2],
    /// Hits and skips of blocks reused since (a thread's counts outlive
    /// it).
    pub(crate) retired: BlockTotals,
    /// Offered sites not patched yet: patched at the next stop of a thread
    /// of their process that can run injected calls (`Tracer::
    /// dataplane_patch_offered`), or else at their first hit.
    pub(crate) pending: Vec<(Tid, u64)>,
    /// Hook lists written at the end of the code part, by contents, and
    /// the next free byte there.
    pub(crate) lists: HashMap<(Vec<Hook>, u64, function::Site), u64>,
    /// Marker entries written there, by their code (the same marker in
    /// every process of one executable shares one).
    pub(crate) mark_entries: HashMap<Vec<u8>, u64>,
    pub(crate) next_list: u64,
    /// Offered function entries are patched before the program runs on
    /// (`-x`: every thread is stopped at attach), so they get no `int3`
    /// unless patching fails.
    pub patches_at_attach: bool,
    /// The handlers are stopped and the program let go of the region.
    pub quiesced: bool,
    pub counts: Counts,
    /// The tracing thread's selector value, once SUD is armed anywhere.
    pub(crate) keeper: Option<dispatch::Keeper>,
    /// The header's stop word is on the tracing thread's robust list
    /// (`lifeline`).
    pub(crate) lifeline: bool,
}

impl Drop for Plane {
    /// The blocks leave the tracing thread's robust list before the
    /// region is unmapped (`dispatch::unregister`).
    fn drop(&mut self) {
        if self.keeper.is_some() {
            dispatch::unregister();
        }
        if self.lifeline {
            lifeline::unlink();
        }
    }
}

impl Plane {
    /// The data plane of `image`: writes the common entry at the start of
    /// the region's code.
    pub fn new(image: Arc<InProcImage>) -> Plane {
        let image_header = image.region.header() as u64;
        let stop = image_header + std::mem::offset_of!(layout::Header, stop) as u64;
        let common = code::common(image.dispatch_entry, image.dispatch_return, stop);
        let at = image.region.base() as *mut u8;
        debug_assert!(common.bytes.len() as u64 <= layout::COMMON_LEN);
        // SAFETY: the first COMMON_LEN bytes of our mapping of the region
        // are reserved for it (the JIT allocates after them), and no
        // program has the region yet.
        unsafe { std::ptr::copy_nonoverlapping(common.bytes.as_ptr(), at, common.bytes.len()) };
        let ret_at = image.region.base() + layout::RET_AT;
        let blocks = function::Blocks {
            start: image.region.data_base() + image.region.data.blocks,
            count: layout::BLOCKS,
        };
        let (regs, site) = (image.entry_regs, image.entry_site);
        let fcommon = function::common(stop, image.max_action, ret_at, blocks, regs, site);
        let ret = function::ret_stub(stop, image.max_action, blocks, site);
        let helper = code::read_helper();
        assert!(
            common.bytes.len() as u64 <= layout::FCOMMON_AT
                && layout::FCOMMON_AT + fcommon.len() as u64 <= layout::RET_AT
                && layout::RET_AT + ret.len() as u64 <= layout::HELPER_AT
                && layout::HELPER_AT + helper.len() as u64 <= layout::COMMON_LEN
        );
        // SAFETY: as above, the rest of the reserved bytes.
        unsafe {
            let f = at.add(layout::FCOMMON_AT as usize);
            std::ptr::copy_nonoverlapping(fcommon.as_ptr(), f, fcommon.len());
            let r = at.add(layout::RET_AT as usize);
            std::ptr::copy_nonoverlapping(ret.as_ptr(), r, ret.len());
            let h = at.add(layout::HELPER_AT as usize);
            std::ptr::copy_nonoverlapping(helper.as_ptr(), h, helper.len());
        }
        Plane {
            patches_at_attach: false,
            pending: Vec::new(),
            lists: HashMap::new(),
            mark_entries: HashMap::new(),
            next_list: image.region.base() + layout::CODE_LEN - layout::LISTS_LEN,
            gadget_offsets: common.gadgets,
            image,
            spaces: HashMap::new(),
            blocks: TidMap::default(),
            free: Vec::new(),
            next_block: 0,
            vforked: HashSet::new(),
            cache: ImageCache::default(),
            targets: HashMap::new(),
            retired: BlockTotals::default(),
            quiesced: false,
            counts: Counts::default(),
            keeper: None,
            lifeline: lifeline::link(image_header),
        }
    }

    /// Whether `addr` is a block's address (a `%gs` base we set).
    pub(crate) fn is_block(&self, addr: u64) -> bool {
        let d = &self.image.region.data;
        let start = self.image.region.data_base() + d.blocks;
        (start..start + layout::BLOCKS * layout::BLOCK_LEN).contains(&addr)
    }

    /// Whether `addr` is in the region's code (common entry, handlers).
    pub(crate) fn in_code(&self, addr: u64) -> bool {
        self.image.region.code().contains(&addr)
    }

    /// The common entry's address.
    pub fn common(&self) -> u64 {
        self.image.region.base()
    }

    /// The function common entry's address.
    pub fn fcommon(&self) -> u64 {
        self.image.region.base() + layout::FCOMMON_AT
    }

    /// The address of hook list `hooks` in the region, written now if it
    /// is new: the count, the return hook list's address (0: none), each
    /// hook's three words, then the site's words (`function::Site`) in an
    /// image that reads them (else lists are shared by every site with
    /// the same hooks: `function("*")` gives each function a point, and
    /// so a list, of its own).
    pub(crate) fn list(&mut self, hooks: &[Hook], ret: u64, site: function::Site) -> Option<u64> {
        let with_site = self.image.entry_site;
        let site = if with_site {
            site
        } else {
            function::Site::default()
        };
        let key = (hooks.to_vec(), ret, site);
        if let Some(&at) = self.lists.get(&key) {
            return Some(at);
        }
        let len = 16 + 24 * hooks.len() as u64 + if with_site { 16 } else { 0 };
        let end = self.image.region.base() + layout::CODE_LEN;
        if self.next_list + len > end {
            return None;
        }
        let at = self.next_list;
        let mut words = vec![hooks.len() as u64, ret];
        for &(f, probe, point) in hooks {
            words.extend([f, probe as u64, point as u64]);
        }
        if with_site {
            words.extend([site.bias, site.func as u64]);
        }
        // SAFETY: inside our (writable) mapping of the region's code part,
        // in the lists area nothing else uses; programs only read it.
        unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), at as *mut u64, words.len()) };
        self.next_list += len;
        self.lists.insert(key, at);
        Some(at)
    }

    /// The entry list of a site with hooks `hooks`: its return hooks' list
    /// first, if it has any.
    pub(crate) fn site_list(&mut self, hooks: &SiteHookList) -> Option<u64> {
        let ret = match hooks.ret.is_empty() {
            true => 0,
            false => self.list(&hooks.ret, 0, hooks.site)?,
        };
        self.list(&hooks.entry, ret, hooks.site)
    }

    /// What the stub of a site with hooks `hooks` at `site` calls: the
    /// function common entry, or for a marker its own marker entry,
    /// written now after the lists.
    pub(crate) fn site_entry(&mut self, hooks: &SiteHookList, site: u64) -> Option<u64> {
        let Some(args) = &hooks.mark else {
            return Some(self.fcommon());
        };
        let code = function::mark_entry(args, site, self.fcommon());
        if let Some(&at) = self.mark_entries.get(&code) {
            return Some(at);
        }
        let end = self.image.region.base() + layout::CODE_LEN;
        let at = self.next_list;
        if at + code.len() as u64 > end {
            return None;
        }
        // SAFETY: inside our (writable) mapping of the region's code part,
        // in the lists area nothing else uses; programs only run it.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, code.len()) };
        // Lists that follow stay 8-byte aligned.
        self.next_list += (code.len() as u64).next_multiple_of(8);
        self.mark_entries.insert(code, at);
        Some(at)
    }

    /// The return stub's address.
    pub fn ret_stub(&self) -> u64 {
        self.image.region.base() + layout::RET_AT
    }

    /// The session offers function entry `site` of `pid`, whose every
    /// entry and return hook runs in process (`(probe, point)` of the
    /// script): patched at its first hit. Ignored if a probe has no
    /// in-process handler.
    /// `bias` is the load bias of the site's module, `func` the function's
    /// name (`probefunc()`).
    pub fn offer(
        &mut self,
        pid: Tid,
        site: u64,
        entry: &[(usize, usize)],
        ret: &[(usize, usize)],
        bias: u64,
        func: &str,
    ) {
        if !function::rdgsbase_works() || (entry.is_empty() && ret.is_empty()) {
            return;
        }
        let (Some(entry), Some(ret)) = (self.hooks(entry), self.hooks(ret)) else {
            return;
        };
        let list = SiteHookList {
            entry,
            ret,
            mark: None,
            site: function::Site {
                bias,
                func: match self.image.entry_site {
                    true => self.image.name_handle(func.as_bytes()),
                    false => 0,
                },
            },
        };
        let space = self.spaces.entry(pid).or_default();
        if !space.fsites.contains_key(&site) && space.offers.insert(site, list).is_none() {
            self.pending.push((pid, site));
        }
    }

    /// The session offers USDT marker `site` of `pid` (its `nop`), whose
    /// every hook runs in process and whose arguments are `args`: patched
    /// as a function entry is, its stub calling a marker entry that loads
    /// the arguments first.
    pub fn offer_mark(&mut self, pid: Tid, site: u64, hooks: &[(usize, usize)], args: &[MarkArg]) {
        self.offer(pid, site, hooks, &[], 0, "");
        if let Some(list) = self
            .spaces
            .get_mut(&pid)
            .and_then(|s| s.offers.get_mut(&site))
        {
            list.mark = Some(args.to_vec());
        }
    }

    /// The in-process hooks of `(probe, point)`s, if every probe has a
    /// handler here.
    pub(crate) fn hooks(&self, hooks: &[(usize, usize)]) -> Option<Vec<Hook>> {
        hooks
            .iter()
            .map(|&(probe, point)| {
                let (f, index) = self.image.handlers.get(probe).copied().flatten()?;
                Some((f, index, point as u32))
            })
            .collect()
    }

    /// A module of `pid` holding `site` was unmapped: nothing there is ours
    /// to restore any more.
    pub fn forget_site(&mut self, pid: Tid, site: u64) {
        if let Some(s) = self.spaces.get_mut(&pid) {
            s.offers.remove(&site);
            s.fsites.remove(&site);
        }
    }

    /// Whether `rip` is at one of the gadgets (the common entry's
    /// `syscall`s) or just past it (in the call): which one's address.
    pub fn at_gadget(&self, rip: u64) -> Option<u64> {
        self.gadget_offsets
            .iter()
            .map(|&o| self.common() + o)
            .find(|&g| rip == g || rip == g + 2)
    }

    /// Whether `rip` is at the handlers' syscall helper's `syscall` or
    /// just past it: a handler reading the program's memory, never the
    /// program's own call.
    pub fn at_helper_call(&self, rip: u64) -> bool {
        let at = self.common() + layout::HELPER_AT + code::READ_SYSCALL;
        rip == at || rip == at + 2
    }

    /// A new block for `tid` of process `pid`, initialised; its address.
    pub(crate) fn new_block(&mut self, tid: Tid, pid: Tid) -> Option<u64> {
        let i = match self.free.pop() {
            Some(i) => i,
            None if self.next_block < layout::BLOCKS => {
                self.next_block += 1;
                self.next_block - 1
            }
            None => return None,
        };
        let r = &self.image.region;
        let addr = r.data_base() + r.data.block(i);
        // SAFETY: the block lies inside our mapping of the region; the
        // thread it is for is stopped, so nothing else uses it.
        unsafe {
            let b = addr as *mut layout::Block;
            self.retired.add(&*b);
            // The robust list's link stays (`dispatch`): the kernel walks
            // it when the tracing thread dies. So do the per-thread copies
            // (counters, statistics): what an earlier thread of the block
            // added stays.
            let links = (*b).robust_links;
            std::ptr::write_bytes(b as *mut u8, 0, layout::BLOCK_COUNTERS as usize);
            (*b).robust_links = links;
            (*b).self_ptr = addr;
            (*b).ctx.long_globals = (r.data_base() + r.data.longs) as *mut i64;
            (*b).ctx.max_nesting = self.image.max_nesting;
            (*b).ctx.probe.pid = pid.0 as i64;
            (*b).ctx.probe.tid = tid.0 as i64;
            (*b).shadow = self.shadow_of(i);
            if self.image.names.is_some() {
                (*b).comm = self.image.name_handle(&names::comm_of(tid.0));
            }
        }
        self.image
            .blocks_used
            .fetch_max(i + 1, std::sync::atomic::Ordering::AcqRel);
        self.blocks.insert(tid, i);
        Some(addr)
    }

    /// The shadow stack of block `i` in every program (see
    /// `layout::Shadow`).
    pub(crate) fn shadow_of(&self, i: u64) -> u64 {
        let r = &self.image.region;
        layout::shadow_base(r.base(), r.len()) + i * layout::SHADOW_LEN
    }

    /// The block index of block address `addr`.
    pub(crate) fn block_index(&self, addr: u64) -> Option<u64> {
        let r = &self.image.region;
        let start = r.data_base() + r.data.blocks;
        self.is_block(addr)
            .then(|| (addr - start) / layout::BLOCK_LEN)
    }

    /// The address of `tid`'s block, if it has one.
    pub(crate) fn block_addr(&self, tid: Tid) -> Option<u64> {
        let r = &self.image.region;
        self.blocks
            .get(&tid)
            .map(|&i| r.data_base() + r.data.block(i))
    }

    /// The first block's address (our mapping and the programs').
    pub(crate) fn blocks_start(&self) -> u64 {
        self.image.region.data_base() + self.image.region.data.blocks
    }

    /// If `tid`'s selector reads BLOCK, sets it to ALLOW (for a call the
    /// tracer injects) and returns its block.
    pub(crate) fn pause_dispatch(&self, tid: Tid) -> Option<u64> {
        let keeper = self.keeper?;
        let block = self.block_addr(tid)?;
        // SAFETY: a block of our mapping.
        let now =
            unsafe { std::ptr::read_volatile((block + layout::BLOCK_SELECTOR) as *const u32) };
        (now == keeper.value).then(|| {
            dispatch::set_selector(block, keeper, false);
            block
        })
    }

    /// Undoes `pause_dispatch`.
    pub(crate) fn resume_dispatch(&self, block: u64) {
        if let Some(k) = self.keeper {
            dispatch::set_selector(block, k, true);
        }
    }

    /// `tid` is gone or runs a new program: its block is free again.
    pub(crate) fn free_block(&mut self, tid: Tid) {
        if let Some(i) = self.blocks.remove(&tid) {
            self.free.push(i);
        }
    }

    /// Hits served in process, skipped and returns missed, summed over
    /// the blocks.
    pub fn block_totals(&self) -> BlockTotals {
        let r = &self.image.region;
        let mut t = self.retired;
        let used =
            (0..self.next_block).chain(layout::BLOCKS..layout::BLOCKS + layout::TRACER_BLOCKS);
        for i in used {
            let at = r.data_base() + r.data.block(i);
            // SAFETY: inside our mapping; the values may be anything the
            // program wrote (untrusted, only summed).
            unsafe { t.add(&*(at as *const layout::Block)) };
        }
        t
    }
}
