//! Running one system call in a stopped tracee (the ptrace trick CRIU's
//! compel uses): point rip at a `syscall; int3` written for the moment
//! into the executable's entry code (`_start`, which never runs again
//! once the program has started, and before that the process has only
//! the one thread, stopped here), let it run to the `int3`, take `rax`,
//! and put the bytes and registers back. Used to map the out-of-line slot
//! pages of breakpoints (`uprobe::xol`).

use super::ptrace::{self, Status};
use super::{Regs, Signal, Tid, Tracer};
use crate::uprobe::mem;

/// `syscall; int3`
const STUB: [u8; 3] = [0x0f, 0x05, 0xcc];
/// Where in the entry code: past the return trampoline's byte at AT_ENTRY.
const STUB_OFFSET: u64 = 4;

impl Tracer {
    /// Runs syscall `nr` with `args` in `tid` (of process `owner`), which
    /// is stopped at a signal-delivery-stop with registers `saved`; leaves
    /// it stopped with `saved` back. Returns the raw result (`-errno` on
    /// failure), or `None` if it could not be run. A signal arriving
    /// meanwhile is kept to be delivered when the thread resumes; if the
    /// thread dies meanwhile, its status is replayed to the loop.
    pub(crate) fn remote_syscall(
        &mut self,
        tid: Tid,
        owner: Tid,
        saved: &Regs,
        nr: u64,
        args: [u64; 6],
    ) -> Option<u64> {
        let at = super::breakpoint::auxv_entry(owner.0)? + STUB_OFFSET;
        let mut orig = [0u8; STUB.len()];
        if mem::read(owner.0, at, &mut orig).ok()? != orig.len() {
            return None;
        }
        crate::guardian::text_written(owner.0, at, &orig);
        crate::guardian::thread_moved(owner.0, tid.0, at, STUB.len() as u32, saved);
        if mem::write(owner.0, at, &STUB).is_err() {
            crate::guardian::thread_back(tid.0);
            crate::guardian::text_restored(owner.0, at);
            return None;
        }
        let mut r = *saved;
        r.rip = at;
        r.rax = nr;
        r.orig_rax = u64::MAX; // not in a syscall: no restart fix-ups
        (r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9) =
            (args[0], args[1], args[2], args[3], args[4], args[5]);
        // An armed thread (SUD) makes this call outside the allowed range:
        // its selector says ALLOW meanwhile.
        let paused = self
            .core
            .dataplane
            .as_ref()
            .and_then(|p| p.pause_dispatch(tid));
        let result = match ptrace::set_regs(tid, &r) {
            Ok(()) => self.run_to_stub_trap(tid, at + STUB.len() as u64),
            Err(_) => None,
        };
        if let (Some(p), Some(block)) = (self.core.dataplane.as_ref(), paused) {
            p.resume_dispatch(block);
        }
        if mem::write(owner.0, at, &orig).is_ok() {
            crate::guardian::text_restored(owner.0, at);
        }
        if result.is_some() && ptrace::set_regs(tid, saved).is_ok() {
            crate::guardian::thread_back(tid.0);
        }
        result
    }

    /// Resumes `tid` until it traps at `end`; returns its rax there.
    fn run_to_stub_trap(&mut self, tid: Tid, end: u64) -> Option<u64> {
        let mut deliver_later: Option<Signal> = None;
        let result = loop {
            ptrace::restart(ptrace::PTRACE_CONT, tid, None).ok()?;
            let Ok(Some((_, status))) = ptrace::wait_for(tid.0, 0) else {
                break None;
            };
            match ptrace::decode(status) {
                Status::SignalStop(Signal::TRAP) => {
                    let regs = ptrace::get_regs(tid).ok()?;
                    if regs.rip == end {
                        break Some(regs.rax);
                    }
                    deliver_later = Some(Signal::TRAP);
                }
                Status::SignalStop(sig) => deliver_later = Some(sig),
                Status::Exited(_) | Status::Signaled { .. } => {
                    self.core.replay.push((tid, status));
                    return None;
                }
                Status::Event {
                    event: ptrace::EVENT_EXIT,
                    ..
                } => {
                    self.core.replay.push((tid, status));
                    return None;
                }
                // A seccomp stop for the mmap, a group-stop: go on.
                _ => {}
            }
        };
        if let (Some(sig), Some(t)) = (deliver_later, self.core.threads.get_mut(&tid)) {
            t.pending_signal = Some(sig);
        }
        result
    }
}
