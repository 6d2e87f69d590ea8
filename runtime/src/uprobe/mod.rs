//! Breakpoints the utrace core owns: the bytes, the step-over and the
//! return trampolines of every traced address space. Engines never touch
//! instruction bytes; they ask the core to insert a breakpoint
//! (`Control::insert_breakpoint`) and get `Engine::report_breakpoint` at
//! each hit, answering with resume actions arbitrated as for every other
//! event (see `utrace::breakpoint` for the stop handling).
//!
//! Invariants:
//! * **No breakpoint byte and no hijacked return address is left in a
//!   process the tracer lets go**: every detach path (end of session,
//!   Ctrl-C, -T, an error, a dropped tracer) restores all of them first,
//!   and a thread that trapped on a site just removed is rewound (rip -= 1)
//!   instead of getting a SIGTRAP.
//! * Sites are per address space (`mm`), reference counted per address:
//!   several probes or engines on one address share one `int3`.
//! * A site is entered in the table before its `int3` is written and a
//!   removed address is remembered, so a thread of the same process that
//!   runs concurrently with an insertion or removal is always recognised
//!   (the single-byte write is atomic; this is the kernel uprobes' rule).
//! * A `SIGTRAP` that is not at one of our sites is the program's own and
//!   is delivered to it.
//! * Return probes: a per-thread shadow stack of hijacked return addresses;
//!   stale frames (longjmp past them) are dropped by stack pointer at every
//!   trampoline hit and new hijack. A hijacked slot holds its return
//!   address's own stub (`int3; jmp R` in a slot page, made at the first
//!   hijack of that address): a return through a stub goes on by itself
//!   after its stop, no register to write. The space's shared trampoline
//!   serves where no stub can be made.

pub mod emulate;
pub mod mem;
pub mod xol;

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use crate::tid::{Tid, TidHasher, TidMap};
use emulate::StepOver;

/// Maps by address, looked up at every hit: the core's cheap hash for
/// thread ids (see `TidHasher`), not SipHash.
pub(crate) type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<TidHasher>>;

/// One breakpoint site.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    /// The original first byte.
    pub orig: u8,
    pub step: StepOver,
    /// The out-of-line slot holding the relocated instruction, once made
    /// (at the first hit).
    pub slot: Option<u64>,
    /// Probes/engines sharing it.
    pub refs: u32,
    /// The site is a frame set-up, `push %rbp; mov %rsp,%rbp`, whose slot
    /// runs both instructions (`xol::FRAME_SETUP`): the thread then never
    /// resumes at site + 1.
    pub frame_setup: bool,
}

impl Site {
    /// Whether a SIGTRAP with rip one past the site can only be this
    /// site's `int3`: when the original instruction is longer than one
    /// byte, site + 1 is inside it, no instruction boundary the thread can
    /// reach another way (a kill(SIGTRAP) or the program's own trap shows
    /// rip at a boundary). A one-byte instruction (`push %rbp`) leaves the
    /// thread at site + 1 after its step-over, where a pending SIGTRAP
    /// would also be delivered: only siginfo tells those apart.
    ///
    /// The frame set-up `push %rbp; mov %rsp,%rbp` (a one-byte first
    /// instruction, the entry of every function built with frame
    /// pointers) is run out of line as a pair, so no step-over leaves the
    /// thread at site + 1, and no code jumps there (past the push, which
    /// would unbalance the frame): once its slot is made, its traps are
    /// unambiguous too.
    pub fn trap_is_unambiguous(&self) -> bool {
        match &self.step {
            StepOver::Xol(_) if self.frame_setup && self.slot.is_some() => true,
            StepOver::Emulate(i) | StepOver::Xol(i) => i.len() > 1,
            StepOver::SingleStep => false,
        }
    }
}

/// A hijacked return: where the function would have returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The probed function's entry address.
    pub func: u64,
    /// The address of the return-address slot (rsp at the entry).
    pub slot: u64,
    pub orig_ret: u64,
    /// The engine's own token (e.g. where it keeps `@entry` values).
    pub cookie: u64,
    /// What the slot was made to hold: the trampoline or `orig_ret`'s
    /// stub (`Space::stubs`).
    pub via: u64,
}

/// One address space (the processes sharing an mm: a process, and a
/// vfork child until it execs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Space {
    pub sites: AddrMap<Site>,
    /// Addresses whose site was removed: a late trap there is rewound.
    pub removed: HashSet<u64>,
    /// Where hijacked returns land (an `int3` at the executable's entry
    /// point, which never runs again after start-up).
    pub trampoline: Option<u64>,
    /// Return stubs by the return address they jump to: `int3; jmp R`
    /// in a slot page, made at the first hijack of R. Gone with the
    /// pages.
    pub stubs: AddrMap<u64>,
    /// The same stubs by their address: the return address each one
    /// jumps to.
    pub stub_ret: AddrMap<u64>,
    /// Hijacking slots (`xol::hijacking`) by (site, stub); `None` where
    /// one could not be made.
    pub hijacking: HashMap<(u64, u64), Option<u64>>,
    /// (position, site) in hijacking slots where a thread can be sent
    /// back to the site: the slot's start and its instruction's copy.
    pub hijacking_sites: Vec<(u64, u64)>,
    pub shadow: TidMap<Vec<Frame>>,
    /// Slot pages mapped in this space (inherited by fork children with
    /// the memory; gone at exec with the space).
    pub pages: Vec<xol::SlotPage>,
    /// (slot, site) of every site that had a slot when the bytes were
    /// restored: where a thread at a slot's start goes back to.
    pub slot_sites: Vec<(u64, u64)>,
    /// Mapping a slot page failed once: don't try at every hit.
    pub no_pages: bool,
    /// USDT is-enabled semaphores (2-byte counters) this tracer
    /// incremented, and by how much: taken back at detach.
    pub semaphores: HashMap<u64, u16>,
    /// The space's `/proc/PID/mem`, for the stack accesses of return
    /// hijacks and emulated steps (closed with the space).
    pub mem: mem::MemFile,
}

impl Space {
    /// Where a return through our landing at `addr` (the trampoline or a
    /// stub) goes: `Some(None)` for the trampoline (the shadow stack
    /// tells), `Some(Some(R))` for R's stub, `None` if not a landing.
    pub fn landing(&self, addr: u64) -> Option<Option<u64>> {
        if self.trampoline == Some(addr) {
            return Some(None);
        }
        self.stub_ret.get(&addr).map(|&r| Some(r))
    }

    /// Whether `value`, read from a return-address slot, is one of ours.
    pub fn is_landing(&self, value: u64) -> bool {
        self.landing(value).is_some()
    }
}

/// Counters for `-v`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepCounts {
    pub emulated: u64,
    /// Run from an out-of-line slot.
    pub out_of_line: u64,
    pub single_stepped: u64,
    /// Slot pages mapped (one injected mmap each).
    pub slot_pages: u64,
    /// Slot pages unmapped from processes let go.
    pub slot_pages_unmapped: u64,
    /// Threads interrupted so that text changed with none running.
    pub text_holds: u64,
    /// Returns that went on by themselves through their address's stub,
    /// and returns through the shared trampoline (rip written).
    pub stub_returns: u64,
    pub trampoline_returns: u64,
    /// Return hijacks whose store the program made itself, in a
    /// hijacking slot (no stack write by the tracer).
    pub slot_stores: u64,
}

/// Every address space with breakpoints, by the pid owning it.
#[derive(Default)]
pub(crate) struct Breakpoints {
    pub spaces: TidMap<Space>,
    /// vfork children: they share the parent's space until exec/exit.
    pub alias: TidMap<Tid>,
    /// The thread that called vfork, by child: blocked in the kernel
    /// until the child execs or exits (it runs no instruction before).
    pub vforkers: TidMap<Tid>,
    pub counts: StepCounts,
    /// Fallback single-steps in progress: (owner of the address space,
    /// stepping thread).
    /// Every other stop of such a process is held until the step is over,
    /// a just-created thread's first stop included.
    pub stepping: Vec<(Tid, Tid)>,
    /// The frames a return trap popped, innermost first: kept between
    /// traps so that a return allocates nothing.
    pub returned: Vec<Frame>,
    /// The thread whose breakpoint stop is being reported: a return hijack
    /// it asks for is written by the step-over that follows (`pending`).
    pub defer_for: Option<Tid>,
    /// A hijack's store of the trampoline not made yet: the step-over
    /// makes it with its own (an emulated push or call: one write for
    /// both words), and the end of the stop makes it otherwise, before the
    /// thread runs.
    pub pending: Option<PendingHijack>,
}

/// The trampoline's store over a return address, deferred to the
/// step-over of the breakpoint stop (see `Breakpoints::pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PendingHijack {
    pub tid: Tid,
    pub owner: Tid,
    /// The return address's slot (rsp at the entry).
    pub slot: u64,
    /// The trampoline or the return address's stub.
    pub value: u64,
}

/// What the engines are told at a breakpoint stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakpointHit {
    /// The site's address (rip - 1 at the trap).
    pub addr: u64,
    /// At a return trampoline: the frame that returned (its `func` is the
    /// entry probe's address); `rax` holds the return value.
    pub returned: Option<Frame>,
}

impl Breakpoints {
    pub fn owner(&self, pid: Tid) -> Tid {
        if self.alias.is_empty() {
            return pid;
        }
        *self.alias.get(&pid).unwrap_or(&pid)
    }

    pub fn space(&self, pid: Tid) -> Option<&Space> {
        self.spaces.get(&self.owner(pid))
    }

    pub fn space_mut(&mut self, pid: Tid) -> Option<&mut Space> {
        let owner = self.owner(pid);
        self.spaces.get_mut(&owner)
    }

    pub fn is_empty(&self) -> bool {
        self.spaces.is_empty()
    }

    /// Inserts (or shares) the breakpoint at `addr` in `pid`'s space.
    pub fn insert(&mut self, pid: Tid, addr: u64) -> std::io::Result<()> {
        let owner = self.owner(pid);
        let space = self.spaces.entry(owner).or_default();
        if let Some(site) = space.sites.get_mut(&addr) {
            site.refs += 1;
            return Ok(());
        }
        let mut bytes = [0u8; 16];
        let n = mem::read(owner.0, addr, &mut bytes)?;
        if n == 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EFAULT));
        }
        if bytes[0] == 0xcc {
            // Someone else's int3 (or the program's own): not ours to own.
            return Err(std::io::Error::from_raw_os_error(libc::EBUSY));
        }
        let (step, _) = emulate::plan(&bytes[..n], addr);
        space.sites.insert(
            addr,
            Site {
                orig: bytes[0],
                step,
                slot: None,
                refs: 1,
                frame_setup: bytes[..n].starts_with(&xol::FRAME_SETUP),
            },
        );
        space.removed.remove(&addr);
        crate::guardian::text_written(owner.0, addr, &bytes[..1]);
        if let Err(e) = mem::write(owner.0, addr, &[0xcc]) {
            space.sites.remove(&addr);
            crate::guardian::text_restored(owner.0, addr);
            return Err(e);
        }
        Ok(())
    }

    /// Drops one reference; the last one puts the original byte back.
    pub fn remove(&mut self, pid: Tid, addr: u64) -> std::io::Result<()> {
        let owner = self.owner(pid);
        let Some(space) = self.spaces.get_mut(&owner) else {
            return Ok(());
        };
        let Some(site) = space.sites.get_mut(&addr) else {
            return Ok(());
        };
        site.refs -= 1;
        if site.refs > 0 {
            return Ok(());
        }
        let orig = site.orig;
        space.sites.remove(&addr);
        space.removed.insert(addr);
        mem::write(owner.0, addr, &[orig])?;
        crate::guardian::text_restored(owner.0, addr);
        Ok(())
    }

    /// Hands the site at `addr` over to the data plane, which wrote its
    /// own bytes there (`dataplane::function`): forgotten without writing,
    /// and a trap already taken there is rewound to run them.
    pub fn take_over(&mut self, pid: Tid, addr: u64) {
        let owner = self.owner(pid);
        if let Some(space) = self.space_mut(pid) {
            space.sites.remove(&addr);
            // Its bytes are the data plane's now, valid without utap.
            crate::guardian::text_restored(owner.0, addr);
            space.removed.insert(addr);
        }
    }

    /// Forgets the site at `addr` without writing anything: its module
    /// was unmapped (dlclose), the byte went with it.
    pub fn unmapped(&mut self, pid: Tid, addr: u64) {
        let owner = self.owner(pid);
        if let Some(space) = self.space_mut(pid) {
            space.sites.remove(&addr);
            crate::guardian::text_restored(owner.0, addr);
        }
    }

    /// Increments the 16-bit USDT semaphore at `addr` in `pid`'s space
    /// (a counter in writable data; the program reads it to decide
    /// whether to evaluate a marker's arguments).
    pub fn enable_semaphore(&mut self, pid: Tid, addr: u64) -> std::io::Result<()> {
        let owner = self.owner(pid);
        let space = self.spaces.entry(owner).or_default();
        crate::guardian::semaphore(owner.0, addr, 1);
        if let Err(e) = add_to_counter(owner, addr, 1) {
            crate::guardian::semaphore(owner.0, addr, -1);
            return Err(e);
        }
        *space.semaphores.entry(addr).or_default() += 1;
        Ok(())
    }

    /// Restores every breakpoint byte and hijacked return slot of every
    /// space (before the tracer lets the processes go). Spaces stay known,
    /// so late traps are still recognised and rewound.
    pub fn restore_all(&mut self) {
        for (owner, space) in self.spaces.iter_mut() {
            restore_space(*owner, space);
        }
    }

    /// A fork child nobody traces: its copy of the bytes and hijacked
    /// slots is put back (it has not run an instruction yet) and its space
    /// forgotten, so it never meets an `int3` untraced.
    pub fn let_go(&mut self, child: Tid) {
        if self.alias.contains_key(&child) {
            return;
        }
        if let Some(mut space) = self.spaces.remove(&child) {
            restore_space(child, &mut space);
        }
    }

    /// Forgets `pid`'s space (it exec'd: a new mm without our bytes).
    pub fn forget(&mut self, pid: Tid) {
        self.vforkers.remove(&pid);
        if self.alias.remove(&pid).is_none() {
            self.spaces.remove(&pid);
            crate::guardian::forget(pid.0);
        }
    }

    /// A fork copied the parent's memory, int3 bytes and hijacked slots
    /// included: the child gets a copy of the space (and of the creating
    /// thread's shadow stack). A vfork child shares the parent's.
    pub fn cloned(&mut self, parent_tid: Tid, parent: Tid, child: Tid, vfork: bool) {
        let owner = self.owner(parent);
        if vfork {
            if self.spaces.contains_key(&owner) {
                self.alias.insert(child, owner);
                self.vforkers.insert(child, parent_tid);
            }
            return;
        }
        let Some(space) = self.spaces.get(&owner) else {
            return;
        };
        let mut copy = space.clone();
        journal_copy(child, &copy);
        let frames = copy.shadow.remove(&parent_tid).unwrap_or_default();
        copy.shadow.clear();
        if !frames.is_empty() {
            copy.shadow.insert(child, frames);
        }
        self.spaces.insert(child, copy);
    }
}

/// A fork child's copy of our bytes and semaphore counts, journaled as
/// its own (the guardian restores each process it finds).
fn journal_copy(child: Tid, space: &Space) {
    for (&addr, site) in &space.sites {
        crate::guardian::text_written(child.0, addr, &[site.orig]);
    }
    for &stub in space.stub_ret.keys() {
        crate::guardian::text_written(child.0, stub, &[0x90]);
    }
    for (&addr, &n) in &space.semaphores {
        crate::guardian::semaphore(child.0, addr, i32::from(n));
    }
}

/// Puts back the hijacked return addresses (where the slot still holds
/// what the hijack wrote) and the original bytes of one space.
fn restore_space(owner: Tid, space: &mut Space) {
    let file = &mut space.mem;
    for f in space.shadow.values().flatten() {
        if file.read_u64(owner.0, f.slot).ok() == Some(f.via) {
            let _ = file.write(owner.0, f.slot, &f.orig_ret.to_le_bytes());
        }
    }
    // A thread held inside a hijacking slot may still store its stub
    // after this (when its page cannot be unmapped): the stub must then
    // just jump.
    for &stub in space.stub_ret.keys() {
        if file.write(owner.0, stub, &[0x90]).is_ok() {
            crate::guardian::text_restored(owner.0, stub);
        }
    }
    for (&addr, site) in space.sites.iter() {
        if let Some(slot) = site.slot {
            space.slot_sites.push((slot, addr));
        }
        if mem::write(owner.0, addr, &[site.orig]).is_ok() {
            crate::guardian::text_restored(owner.0, addr);
        }
        space.removed.insert(addr);
    }
    space.sites.clear();
    for (addr, n) in space.semaphores.drain() {
        if add_to_counter(owner, addr, -i32::from(n)).is_ok() {
            crate::guardian::semaphore(owner.0, addr, -i32::from(n));
        }
    }
}

/// Adds `delta` to the 16-bit counter at `addr` (never below 0).
fn add_to_counter(owner: Tid, addr: u64, delta: i32) -> std::io::Result<()> {
    let mut b = [0u8; 2];
    if mem::read(owner.0, addr, &mut b)? < 2 {
        return Err(std::io::Error::from_raw_os_error(libc::EFAULT));
    }
    let v = (i32::from(u16::from_le_bytes(b)) + delta).clamp(0, i32::from(u16::MAX)) as u16;
    mem::write_data(owner.0, addr, &v.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(bytes: &[u8], slot: Option<u64>) -> Site {
        Site {
            orig: bytes[0],
            step: emulate::plan(bytes, 0x1000).0,
            slot,
            refs: 1,
            frame_setup: bytes.starts_with(&xol::FRAME_SETUP),
        }
    }

    #[test]
    fn only_a_trap_one_past_a_longer_instruction_needs_no_siginfo() {
        // endbr64, sub $0x18,%rsp, mov %rdi,%rax: site + 1 is inside them.
        for bytes in [
            &[0xf3, 0x0f, 0x1e, 0xfa][..],
            &[0x48, 0x83, 0xec, 0x18],
            &[0x48, 0x89, 0xf8],
        ] {
            assert!(site(bytes, None).trap_is_unambiguous(), "{bytes:x?}");
        }
        // push %rbx; push %rbp not followed by mov %rsp,%rbp; syscall.
        for bytes in [&[0x53, 0x90][..], &[0x55, 0x90, 0x90, 0x90], &[0x0f, 0x05]] {
            assert!(
                !site(bytes, Some(0x2000)).trap_is_unambiguous(),
                "{bytes:x?}"
            );
        }
        // The frame set-up: once its pair runs from a slot.
        let setup = [0x55, 0x48, 0x89, 0xe5];
        assert!(!site(&setup, None).trap_is_unambiguous());
        assert!(site(&setup, Some(0x2000)).trap_is_unambiguous());
    }
}
