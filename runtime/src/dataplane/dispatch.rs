//! Syscall User Dispatch (SUD) for attached programs (`-x`): how their
//! syscall sites are found without a seccomp filter, which could never be
//! taken out at detach.
//!
//! Each thread is armed by the tracer (`PTRACE_SET_SYSCALL_USER_DISPATCH_
//! CONFIG`, Linux 6.4): a syscall made outside the region's code part,
//! while the thread's selector byte says BLOCK, is not made; the kernel
//! raises SIGSYS instead, which the tracer sees as a signal stop. The
//! call is let through at once (selector ALLOW, made again under
//! `PTRACE_SYSCALL`, whose entry and exit stops the tracer route serves),
//! and at its exit stop the site is patched if it can be (the stub's
//! gadget, in the allowed range, makes the call from then on).
//!
//! Invariants:
//! * **utap's death turns every selector to ALLOW before the kernel lets
//!   the threads go.** Each selector is a byte of a futex word on the
//!   tracing thread's robust list (the list glibc registered, where the
//!   guardian's death word is too), holding that thread's id; the kernel
//!   marks such words (owner died, id cleared) in the thread's exit,
//!   before it releases the thread's tracees (`exit_mm` precedes
//!   `exit_notify`). The byte read is the one of the id that equals 1
//!   (BLOCK), so it reads 0 (ALLOW) after. A tracing thread whose id has
//!   no such byte never arms SUD (the host makes its id fit, `host::
//!   split`).
//! * **No thread waits in a SIGSYS stop.** The kernel delivers a signal
//!   stop's signal when the tracer dies, and SIGSYS kills: the stop is
//!   left at once (a few register reads and writes), and the slow work
//!   (holding the threads, writing text) is done at the exit stop, where
//!   utap's death harms nothing. What is left is those few microseconds.
//! * **Every ending disarms every thread** (the quiesce, threads held).
//! * **A program that handles or ignores SIGSYS is never armed** (a
//!   handler would see our SIGSYS if utap died in the stop; an ignored
//!   one is forced through by the kernel).
//! * Not inherited by new threads, fork children or exec'd images
//!   (checked: a SUD-armed thread's clone or fork child does not trap):
//!   new threads are armed at their first stop; vfork children and
//!   exec'd programs stay on `PTRACE_SYSCALL`.

use std::sync::Mutex;

use super::layout::{self, BLOCK_ROBUST_LINKS, BLOCK_SELECTOR};
use crate::tid::Tid;
use crate::utrace::ptrace;

/// Whether SUD is wanted: opt-in (`UTAP_SUD=1`) until its open faults
/// are fixed (a killed session can still take the program with it, and a
/// session's region is sometimes left mapped at the end); without it,
/// `-x` syscall probes stay on `PTRACE_SYSCALL`, as before.
pub fn enabled() -> bool {
    std::env::var("UTAP_SUD").is_ok_and(|v| v == "1")
}

/// `PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG` (linux/ptrace.h).
const PTRACE_SET_SUD: u32 = 0x4210;
/// `PR_SYS_DISPATCH_ON` (exclusive: the range is allowed) and `_OFF`.
const DISPATCH_ON: u64 = 1;
const DISPATCH_OFF: u64 = 0;
/// `SYS_USER_DISPATCH`, the `si_code` of its SIGSYS.
const SYS_USER_DISPATCH: i32 = 2;

/// The wait status of a `PTRACE_INTERRUPT` stop (`PTRACE_EVENT_STOP`
/// with SIGTRAP).
const INTERRUPT_STOP: i32 = 0x7f | (libc::SIGTRAP << 8) | (ptrace::EVENT_STOP << 16);

/// `struct ptrace_sud_config`.
#[repr(C)]
struct SudConfig {
    mode: u64,
    selector: u64,
    offset: u64,
    len: u64,
}

/// `struct robust_list_head`.
#[repr(C)]
struct RobustHead {
    next: u64,
    futex_offset: i64,
    pending: u64,
}

/// The tracing thread's id as a selector word: the value that means
/// BLOCK, and which byte of the word the kernel is to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keeper {
    pub value: u32,
    pub byte: u64,
}

impl Keeper {
    /// The keeper a thread with id `tid` can be: a byte of the id (not
    /// the top one, which the kernel sets on death) equal to 1.
    pub fn of(tid: u32) -> Option<Keeper> {
        (0..3)
            .find(|k| (tid >> (8 * k)) & 0xff == 1)
            .map(|k| Keeper {
                value: tid,
                byte: k as u64,
            })
    }
}

/// The blocks linked into the tracing thread's robust list.
struct Linked {
    tid: u32,
    keeper: Keeper,
    head: u64,
    /// The first block's entry and the last one's (whose next is what
    /// followed the head before).
    first: u64,
    last: u64,
}

static LINKED: Mutex<Option<Linked>> = Mutex::new(None);

/// Links every block's selector word of the region whose blocks start at
/// `blocks` (our mapping) into the calling thread's robust list, after
/// its head. The list is the one glibc registered (one per thread; the
/// guardian's death word is on it too), so its `futex_offset` says where
/// each entry goes. Returns the keeper, or None if this thread cannot be
/// one (its id, a list that does not fit the blocks' room, another
/// thread linked first): SUD is then never armed.
pub fn register(blocks: u64) -> Option<Keeper> {
    // SAFETY: gettid has no memory effects.
    let me = unsafe { libc::gettid() } as u32;
    let mut linked = LINKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = linked.as_ref() {
        return (l.tid == me).then_some(l.keeper);
    }
    let keeper = Keeper::of(me)?;
    let head = own_head()?;
    // SAFETY: the head is this thread's, registered with the kernel.
    let offset = unsafe { (*(head as *const RobustHead)).futex_offset };
    let at = entry_offset(offset)?;
    let entry = |i: u64| blocks + i * layout::BLOCK_LEN + at;
    let next_at = head as *mut u64; // the head's first field
    // SAFETY: as above; only this thread edits its list (utap takes no
    // robust mutex), the kernel reads it at the thread's exit.
    let mut next = unsafe { next_at.read_volatile() };
    for i in (0..layout::BLOCKS).rev() {
        // SAFETY: inside our mapping of the region's blocks.
        unsafe { std::ptr::write_volatile(entry(i) as *mut u64, next) };
        next = entry(i);
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { next_at.write_volatile(next) };
    *linked = Some(Linked {
        tid: me,
        keeper,
        head,
        first: entry(0),
        last: entry(layout::BLOCKS - 1),
    });
    Some(keeper)
}

/// Takes the blocks out of the robust list again (before the region is
/// unmapped: the kernel would stop its walk at an unreadable entry, and
/// miss the guardian's word behind them).
pub fn unregister() {
    let mut linked = LINKED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(l) = linked.take() else {
        return;
    };
    // Find the pointer to our first entry (the head's, unless an entry
    // was put before ours since) and make it skip our chain.
    let mut at = l.head; // `next` is the head's first field
    for _ in 0..ROBUST_LIMIT {
        // SAFETY: `at` is the head or an entry of the thread's list, all
        // in live memory (ours until this returns).
        let next = unsafe { std::ptr::read_volatile(at as *const u64) };
        if next == l.first {
            // SAFETY: as above.
            unsafe {
                let after = std::ptr::read_volatile(l.last as *const u64);
                std::ptr::write_volatile(at as *mut u64, after);
            }
            return;
        }
        if next == l.head || next == 0 {
            return;
        }
        at = next;
    }
}

/// The kernel's bound on a robust list walk (`ROBUST_LIST_LIMIT`).
const ROBUST_LIMIT: usize = 2048;

/// The calling thread's registered robust list head, if any.
fn own_head() -> Option<u64> {
    let mut head = 0u64;
    let mut len = 0usize;
    // SAFETY: both are valid out pointers; pid 0 is the calling thread.
    let got = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) };
    (got == 0 && head != 0 && len == std::mem::size_of::<RobustHead>()).then_some(head)
}

/// Where in a block the entry of a list with `futex_offset` goes (the
/// entry plus the offset is the selector word): inside the block's room
/// for it, 8-aligned.
fn entry_offset(futex_offset: i64) -> Option<u64> {
    let at = (BLOCK_SELECTOR as i64).checked_sub(futex_offset)?;
    let room = BLOCK_ROBUST_LINKS as i64..BLOCK_ROBUST_LINKS as i64 + 32;
    (room.contains(&at) && at % 8 == 0).then_some(at as u64)
}

/// Sets block `block`'s selector (our mapping) to BLOCK or ALLOW.
pub fn set_selector(block: u64, keeper: Keeper, blocked: bool) {
    let v = if blocked { keeper.value } else { 0 };
    // SAFETY: a block of our mapping of the region.
    unsafe { std::ptr::write_volatile((block + BLOCK_SELECTOR) as *mut u32, v) };
}

/// Arms SUD in stopped thread `tid`: syscalls outside `allowed` trap
/// while the byte of its block's selector reads BLOCK.
pub fn arm(tid: Tid, block: u64, keeper: Keeper, allowed: std::ops::Range<u64>) -> bool {
    let cfg = SudConfig {
        mode: DISPATCH_ON,
        selector: block + BLOCK_SELECTOR + keeper.byte,
        offset: allowed.start,
        len: allowed.end - allowed.start,
    };
    set(tid, &cfg)
}

/// Turns SUD off in stopped thread `tid`.
pub fn disarm(tid: Tid) -> bool {
    let cfg = SudConfig {
        mode: DISPATCH_OFF,
        selector: 0,
        offset: 0,
        len: 0,
    };
    set(tid, &cfg)
}

fn set(tid: Tid, cfg: &SudConfig) -> bool {
    let size = std::mem::size_of::<SudConfig>();
    ptrace::raw(PTRACE_SET_SUD, tid, size, cfg as *const SudConfig as usize).is_ok()
}

/// Whether `tid`'s SIGSYS stop is SUD's (not a seccomp RET_TRAP or a
/// kill).
pub fn is_dispatch_trap(tid: Tid) -> bool {
    ptrace::siginfo(tid).is_ok_and(|i| i.si_code == SYS_USER_DISPATCH)
}

/// Whether process `pid` catches or ignores SIGSYS (never armed: the
/// kernel would reset that disposition when it forces SUD's SIGSYS).
pub fn handles_sigsys(pid: Tid) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", pid.0)) else {
        return true;
    };
    let bit = 1u64 << (libc::SIGSYS - 1);
    status.lines().any(|l| {
        let mask = |name: &str| {
            l.strip_prefix(name)
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        };
        [mask("SigCgt:"), mask("SigIgn:")]
            .into_iter()
            .flatten()
            .any(|m| m & bit != 0)
    })
}

use super::tracer::injectable;
use crate::utrace::control::Core;
use crate::utrace::{SyscallSource, Tracer};

impl Tracer {
    /// After an attach (`-x`), when some syscall probe runs in process:
    /// maps the region into every attached process that allows it and
    /// arms SUD in each of its threads (all stopped at their attach
    /// stops), so their syscall sites are found and patched as under a
    /// seccomp filter. A process or thread left unarmed stays on
    /// `PTRACE_SYSCALL`, as before.
    pub fn dataplane_arm_attached(&mut self) {
        let Some(plane) = self.core.dataplane.as_mut() else {
            return;
        };
        if !plane.image.syscall_hooks || plane.quiesced || !enabled() {
            return;
        }
        let Some(keeper) = register(plane.blocks_start()) else {
            return;
        };
        plane.keeper = Some(keeper);
        let mut pids: Vec<Tid> = self.core.threads.values().map(|t| t.tgid).collect();
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            if handles_sigsys(pid) {
                continue;
            }
            // Every thread is at its attach stop once it came (a thread
            // just seized may not be in it yet, under load: its registers
            // unreadable). There, a call it was in has returned or will
            // restart, so any can run the injected calls; one outside a
            // syscall is the plainest.
            self.core.await_attach_stops(pid);
            let threads = self.core.threads_of(pid);
            let regs = |t: &Tid| ptrace::get_regs(*t).ok().map(|r| (*t, r));
            let plain = threads.iter().filter_map(regs).find(|(_, r)| injectable(r));
            let Some((tid, regs)) = plain.or_else(|| threads.iter().find_map(regs)) else {
                continue;
            };
            self.core.hold_for_text(pid);
            let mapped = self.map_into(tid, pid, &regs);
            self.release_text_hold();
            if mapped {
                for t in self.core.threads_of(pid) {
                    self.arm_thread(t, pid);
                }
            }
        }
    }

    /// Arms SUD in stopped thread `tid` of `pid` if it has a block; its
    /// syscall source follows. False if it stays on `PTRACE_SYSCALL`.
    pub(crate) fn arm_thread(&mut self, tid: Tid, pid: Tid) -> bool {
        let Some(plane) = self.core.dataplane.as_mut() else {
            return false;
        };
        let armed = match (plane.keeper, plane.block_addr(tid)) {
            (Some(keeper), Some(block)) if !plane.vforked.contains(&pid) && !plane.quiesced => {
                set_selector(block, keeper, true);
                let ok = arm(tid, block, keeper, plane.image.region.code());
                if !ok {
                    set_selector(block, keeper, false);
                }
                ok
            }
            _ => false,
        };
        match armed {
            true => plane.counts.sud_threads += 1,
            false if plane.keeper.is_some() => plane.counts.sud_refused += 1,
            false => {}
        }
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.source = match armed {
                true => SyscallSource::Dispatch,
                false => SyscallSource::Ptrace,
            };
            t.dispatching = false;
            t.patch_at_exit = false;
        }
        armed
    }

    /// A SIGSYS stop of `tid`: if it is SUD's, the call is made once
    /// more at once, let through (selector ALLOW) under `PTRACE_SYSCALL`,
    /// whose entry and exit stops the engines see; a site to patch is
    /// patched at that exit stop (`dispatch_done`). The thread never stays
    /// in this stop: were utap to die while it did, the kernel would
    /// deliver the SIGSYS at the release and kill the program. The signal
    /// is never delivered. False if it is not ours.
    pub(crate) fn on_dispatch_trap(&mut self, tid: Tid) -> bool {
        if !is_dispatch_trap(tid) {
            return false;
        }
        let Ok(regs) = ptrace::get_regs(tid) else {
            return false;
        };
        let armed = self
            .core
            .threads
            .get(&tid)
            .is_some_and(|t| t.source == SyscallSource::Dispatch);
        if !armed {
            // Trapped just before the quiesce disarmed the thread: never
            // the program's to see (resumed from another stop later, the
            // tracer's SIGSYS would kill it), so the call is made again,
            // undispatched now.
            return self.remake_call(tid, regs);
        }
        // The kernel put the number back in rax.
        let nr = regs.rax;
        if let Some(plane) = self.core.dataplane.as_ref()
            && let (Some(keeper), Some(block)) = (plane.keeper, plane.block_addr(tid))
        {
            set_selector(block, keeper, false);
        }
        let mut r = regs;
        r.rip = regs.rip.wrapping_sub(2);
        r.rax = nr;
        r.orig_rax = u64::MAX;
        if ptrace::set_regs(tid, &r).is_err() {
            return false;
        }
        let patch = self.patchable(tid, &regs, nr);
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.dispatching = true;
            t.patch_at_exit = patch;
            t.in_syscall = false;
            t.pending_signal = None;
        }
        if let Some(p) = self.core.dataplane.as_mut() {
            p.counts.sud_let_through += 1;
        }
        self.finish_stop_pub(tid);
        true
    }

    /// Sends `tid`, at a SUD SIGSYS stop with `regs`, back to its
    /// `syscall` with the number in rax, the signal dropped.
    fn remake_call(&mut self, tid: Tid, regs: crate::utrace::Regs) -> bool {
        let mut r = regs;
        r.rip = regs.rip.wrapping_sub(2);
        r.orig_rax = u64::MAX;
        if ptrace::set_regs(tid, &r).is_err() {
            return false;
        }
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.in_syscall = false;
            t.pending_signal = None;
        }
        self.finish_stop_pub(tid);
        true
    }

    /// The exit stop of a call let through: the selector says BLOCK again,
    /// and the call's site is patched if it is to be. The thread is left
    /// with the registers of its exit stop.
    pub(crate) fn dispatch_done(&mut self, tid: Tid) {
        let Some(t) = self.core.threads.get_mut(&tid) else {
            return;
        };
        t.dispatching = false;
        let patch = std::mem::take(&mut t.patch_at_exit);
        if let Some(plane) = self.core.dataplane.as_ref()
            && !plane.quiesced
            && let (Some(keeper), Some(block)) = (plane.keeper, plane.block_addr(tid))
        {
            set_selector(block, keeper, true);
        }
        if patch {
            self.patch_after_call(tid);
        }
    }

    /// Patches the site of the call `tid` just made (at its exit stop).
    /// The call is over, so the injected calls the patch may need can run
    /// from here: the registers say "no syscall" meanwhile and are put
    /// back as they were. A call to be restarted is left alone (it traps
    /// again).
    fn patch_after_call(&mut self, tid: Tid) {
        let Ok(exit) = ptrace::get_regs(tid) else {
            return;
        };
        if matches!(exit.rax as i64, -512 | -513 | -514 | -516) {
            return;
        }
        let mut r = exit;
        r.orig_rax = u64::MAX;
        if self.patch_trapped(tid, &r, exit.orig_rax).is_some()
            && let Some(p) = self.core.dataplane.as_mut()
        {
            p.counts.sud_patched += 1;
        }
        let _ = ptrace::set_regs(tid, &exit);
    }

    /// Whether `tid`'s syscall stop is a call a stub made from the
    /// region's gadget (already served in process).
    pub(crate) fn dataplane_gadget_call(&mut self, tid: Tid) -> bool {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return false;
        };
        if plane.spaces.is_empty() {
            return false;
        }
        // An rt_sigreturn's exit stop has the signal frame's registers,
        // whose rip may well be past the gadget's syscall (the signal came
        // as a call made there returned), and orig_rax -1: it is the
        // tracer's to report.
        ptrace::get_regs(tid)
            .is_ok_and(|r| r.orig_rax != u64::MAX && plane.at_gadget(r.rip).is_some())
    }
}

impl Core {
    /// A thread held at its SUD SIGSYS stop (the trap came as the quiesce
    /// held it) makes its call again instead, undispatched, and is
    /// recorded as held at an interrupt: its stop may serve an injected
    /// call, after which a detach passing on the stop's signal would send
    /// the tracer's SIGSYS and kill the program.
    fn drop_held_trap(&mut self, tid: Tid) {
        let sigsys = ptrace::Status::SignalStop(crate::utrace::Signal(libc::SIGSYS));
        let Some(held) = self.uprobes_held.iter_mut().find(|h| h.0 == tid) else {
            return;
        };
        if ptrace::decode(held.1) != sigsys || !is_dispatch_trap(tid) {
            return;
        }
        let Ok(mut r) = ptrace::get_regs(tid) else {
            return;
        };
        r.rip = r.rip.wrapping_sub(2);
        r.orig_rax = u64::MAX;
        if ptrace::set_regs(tid, &r).is_ok() {
            held.1 = INTERRUPT_STOP;
        }
    }

    /// At the quiesce (every thread of `pid` held): SUD off in each, its
    /// selector ALLOW.
    pub(crate) fn dataplane_disarm(&mut self, pid: Tid) {
        let Some(plane) = self.dataplane.as_ref() else {
            return;
        };
        let Some(keeper) = plane.keeper else {
            return;
        };
        let blocks: Vec<(Tid, Option<u64>)> = self
            .threads_of(pid)
            .into_iter()
            .map(|t| (t, plane.block_addr(t)))
            .collect();
        for (tid, block) in blocks {
            self.drop_held_trap(tid);
            let armed = self
                .threads
                .get(&tid)
                .is_some_and(|t| t.source == SyscallSource::Dispatch);
            if !armed {
                continue;
            }
            if let Some(block) = block {
                set_selector(block, keeper, false);
            }
            disarm(tid);
            if let Some(t) = self.threads.get_mut(&tid) {
                t.source = SyscallSource::Ptrace;
                t.dispatching = false;
                t.patch_at_exit = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keeper_reads_the_byte_that_is_one() {
        assert_eq!(Keeper::of(0x0301).map(|k| k.byte), Some(0));
        assert_eq!(Keeper::of(0x0105).map(|k| k.byte), Some(1));
        assert_eq!(Keeper::of(0x01_0203).map(|k| k.byte), Some(2));
        assert_eq!(Keeper::of(0x0203), None);
    }

    #[test]
    fn glibc_lists_put_the_entry_in_the_blocks_room() {
        // glibc: the mutex's lock word minus its list's `next` field.
        assert_eq!(entry_offset(-32), Some(BLOCK_SELECTOR + 32));
        assert_eq!(entry_offset(0), None);
        assert_eq!(entry_offset(-33), None);
        assert_eq!(entry_offset(-48), None);
    }
}
