//! Syscall User Dispatch (SUD) for attached programs (`-x`): how their
//! syscall sites are found without a seccomp filter, which could never be
//! taken out at detach.
//!
//! Each thread is armed by the tracer (`PTRACE_SET_SYSCALL_USER_DISPATCH_
//! CONFIG`, Linux 6.4): a syscall made outside the region's code part,
//! while the thread's selector byte says BLOCK, is not made; the kernel
//! raises SIGSYS instead, which the tracer sees as a signal stop and
//! treats as a seccomp stop: the site is patched (the stub's gadget, in
//! the allowed range, makes the call from then on) or, if it cannot be,
//! the call is made once more with the thread's selector at ALLOW under
//! `PTRACE_SYSCALL` (the tracer route's entry and exit stops).
//!
//! Invariants:
//! * **utap's death turns every selector to ALLOW before the kernel lets
//!   the threads go.** Each selector is a byte of a futex word on the
//!   tracing thread's robust list, holding that thread's id; the kernel
//!   marks such words (owner died, id cleared) in the thread's exit,
//!   before it releases the thread's tracees (`exit_mm` precedes
//!   `exit_notify`). The byte read is the one of the id that equals 1
//!   (BLOCK), so it reads 0 (ALLOW) after. A tracing thread whose id has
//!   no such byte never arms SUD (the host makes its id fit, `host::
//!   split`). Left: a thread held in a SIGSYS stop at that moment is
//!   given its SIGSYS (the kernel delivers a stop's signal at release).
//! * **Every ending disarms every thread** (the quiesce, threads held).
//! * **A program that handles or ignores SIGSYS is never armed** (the
//!   kernel forces its SIGSYS through, resetting such dispositions).
//! * Not inherited by new threads, fork children or exec'd images: new
//!   threads are armed at their first stop; vfork children and exec'd
//!   programs stay on `PTRACE_SYSCALL`.

use std::sync::OnceLock;

use super::layout::{self, BLOCK_ROBUST_NEXT, BLOCK_SELECTOR};
use crate::utrace::Tid;
use crate::utrace::ptrace;

/// `PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG` (linux/ptrace.h).
const PTRACE_SET_SUD: u32 = 0x4210;
/// `PR_SYS_DISPATCH_ON` (exclusive: the range is allowed) and `_OFF`.
const DISPATCH_ON: u64 = 1;
const DISPATCH_OFF: u64 = 0;
/// `SYS_USER_DISPATCH`, the `si_code` of its SIGSYS.
const SYS_USER_DISPATCH: i32 = 2;

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

/// The calling thread's robust list, once per process: every block's
/// selector word of the region whose blocks start at `blocks` (our
/// mapping). Returns the keeper, or None if this thread cannot be one or
/// the list could not be set (SUD is then never armed).
pub fn register(blocks: u64) -> Option<Keeper> {
    static DONE: OnceLock<Option<(u32, Keeper)>> = OnceLock::new();
    // SAFETY: gettid has no memory effects.
    let me = unsafe { libc::gettid() } as u32;
    let got = DONE.get_or_init(|| {
        let keeper = Keeper::of(me)?;
        let head = Box::leak(Box::new(RobustHead {
            next: 0,
            futex_offset: BLOCK_SELECTOR as i64 - BLOCK_ROBUST_NEXT as i64,
            pending: 0,
        }));
        let head_at = head as *mut RobustHead as u64;
        let mut next = head_at;
        for i in (0..layout::BLOCKS).rev() {
            let link = blocks + i * layout::BLOCK_LEN + BLOCK_ROBUST_NEXT;
            // SAFETY: inside our mapping of the region's blocks.
            unsafe { std::ptr::write_volatile(link as *mut u64, next) };
            next = link;
        }
        head.next = next;
        let len = std::mem::size_of::<RobustHead>();
        // SAFETY: the head is leaked (lives as long as the process).
        let r = unsafe { libc::syscall(libc::SYS_set_robust_list, head_at, len) };
        (r == 0).then_some((me, keeper))
    });
    // Only the thread that registered is the keeper.
    got.filter(|(tid, _)| *tid == me).map(|(_, k)| k)
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
        if !plane.image.syscall_hooks || plane.quiesced {
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
            // Every thread is at its attach stop (an interrupt: a call it
            // was in has returned or will restart), so any can run the
            // injected calls; one outside a syscall is the plainest.
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
        }
        armed
    }

    /// A SIGSYS stop of `tid`: if it is SUD's, the call is served like a
    /// seccomp stop's (its site patched, the thread sent back to it), or
    /// made once more, let through (selector ALLOW) under
    /// `PTRACE_SYSCALL`, whose entry and exit stops the engines see. The
    /// signal is never delivered. False if it is not ours.
    pub(crate) fn on_dispatch_trap(&mut self, tid: Tid) -> bool {
        let ours = self
            .core
            .threads
            .get(&tid)
            .is_some_and(|t| t.source == SyscallSource::Dispatch);
        if !ours || !is_dispatch_trap(tid) {
            return false;
        }
        let Ok(regs) = ptrace::get_regs(tid) else {
            return false;
        };
        // The kernel put the number back in rax.
        let nr = regs.rax;
        if self.serve_trapped(tid, regs, nr) {
            return true;
        }
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
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.dispatching = true;
            t.in_syscall = false;
            t.pending_signal = None;
        }
        if let Some(p) = self.core.dataplane.as_mut() {
            p.counts.sud_let_through += 1;
        }
        self.finish_stop_pub(tid);
        true
    }

    /// The exit stop of a call let through: the selector says BLOCK again.
    pub(crate) fn dispatch_done(&mut self, tid: Tid) {
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.dispatching = false;
        }
        if let Some(plane) = self.core.dataplane.as_ref()
            && !plane.quiesced
            && let (Some(keeper), Some(block)) = (plane.keeper, plane.block_addr(tid))
        {
            set_selector(block, keeper, true);
        }
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
        ptrace::get_regs(tid).is_ok_and(|r| plane.at_gadget(r.rip).is_some())
    }
}

impl Core {
    /// At the quiesce (every thread of `pid` held): SUD off in each, its
    /// selector ALLOW.
    pub(crate) fn dataplane_disarm(&mut self, pid: Tid) {
        let Some(plane) = self.dataplane.as_ref() else {
            return;
        };
        let Some(keeper) = plane.keeper else {
            return;
        };
        for tid in self.threads_of(pid) {
            let armed = self
                .threads
                .get(&tid)
                .is_some_and(|t| t.source == SyscallSource::Dispatch);
            if !armed {
                continue;
            }
            if let Some(block) = plane.block_addr(tid) {
                set_selector(block, keeper, false);
            }
            disarm(tid);
            if let Some(t) = self.threads.get_mut(&tid) {
                t.source = SyscallSource::Ptrace;
                t.dispatching = false;
            }
        }
    }
}
