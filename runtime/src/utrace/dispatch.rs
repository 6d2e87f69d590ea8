//! The control side of Syscall User Dispatch for attached programs (see
//! `crate::dataplane::dispatch` for the mechanism and its invariants):
//! arming and disarming threads, the SIGSYS stops, and the calls let
//! through under `PTRACE_SYSCALL`.

use super::control::Core;
use super::dataplane::injectable;
use super::ptrace;
use super::{SyscallSource, Tracer};
use crate::dataplane::dispatch::{Keeper, enabled, handles_sigsys, register, set_selector};
use crate::dataplane::layout::BLOCK_SELECTOR;
use crate::tid::Tid;

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
        // A handler's safe load (`dataplane::strings`) is no call of the
        // program's either.
        ptrace::get_regs(tid).is_ok_and(|r| {
            r.orig_rax != u64::MAX
                && (plane.at_gadget(r.rip).is_some() || plane.at_helper_call(r.rip))
        })
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
