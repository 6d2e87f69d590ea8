//! Holding an address space still while its text changes: every
//! breakpoint byte is written (inserted, removed, restored at detach) and
//! every slot page unmapped only while no thread sharing that memory can
//! run. The threads of the space (the process's threads, and a vfork child
//! borrowing its memory) that are running get a `PTRACE_INTERRUPT`; their
//! stops are kept in `uprobes_held`, not handled, and go back to the loop
//! once the change is over (`Tracer::release_text_hold`), or are detached
//! as they are at the end of the session.
//!
//! Threads already stopped, listening in a group-stop or not yet at their
//! first stop cannot execute an instruction until the tracer lets them,
//! so they need nothing.

use super::control::Core;
use super::ptrace;
use super::thread::Run;
use super::{Tid, Tracer};

impl Core {
    /// Stops every running thread sharing `owner`'s memory, but `except`;
    /// returns how many were interrupted. Stops already taken but not yet
    /// handled (waiting in `replay`) are held as they are: waiting for
    /// those threads again would hang.
    pub(crate) fn hold_space(&mut self, except: Option<Tid>, owner: Tid) -> usize {
        let uprobes = &self.uprobes;
        let threads = &self.threads;
        let in_space = |t: Tid| {
            threads
                .get(&t)
                .is_some_and(|th| uprobes.owner(th.tgid) == owner)
        };
        let (held, rest): (Vec<_>, Vec<_>) = self
            .replay
            .drain(..)
            .partition(|&(t, _)| Some(t) != except && in_space(t));
        self.replay = rest;
        self.uprobes_held.extend(held);
        let pending: Vec<Tid> = self.uprobes_held.iter().map(|&(t, _)| t).collect();
        let others: Vec<Tid> = self
            .threads
            .values()
            .filter(|t| t.run == Run::Running && Some(t.tid) != except)
            .filter(|t| self.uprobes.owner(t.tgid) == owner && !pending.contains(&t.tid))
            .map(|t| t.tid)
            .collect();
        let mut stopped = 0;
        // Every interrupt first, then the waits: the threads stop in
        // parallel (a thread waiting for a CPU takes a time slice to stop).
        let mut waits = Vec::new();
        for t in others {
            let Some(th) = self.threads.get_mut(&t) else {
                continue;
            };
            // A leader that already exited stays a zombie, without a stop
            // or a status, until its last thread ends: never wait for it.
            if th.tid == th.tgid && is_zombie(t) {
                continue;
            }
            // Always a fresh PTRACE_INTERRUPT, even if one was sent before:
            // any other ptrace stop clears a pending interrupt in the
            // kernel ("any trap clears pending STOP trap"), so an earlier
            // one may be gone, and waiting on it would hang.
            if ptrace::interrupt(t).is_err() {
                continue;
            }
            th.interrupted = true;
            if self.uprobes.vforkers.values().any(|&v| v == t) {
                // Blocked in vfork until its child lets the memory go, and
                // then stopped by the interrupt before any instruction of
                // its own: quiescent without a wait (which could hang on a
                // child held here). Its stop comes through the loop.
                continue;
            }
            waits.push(t);
        }
        for t in waits {
            if let Ok(Some(status)) = ptrace::wait_for(t.0, 0) {
                self.uprobes_held.push(status);
                stopped += 1;
                self.note_restart(t);
            }
        }
        self.uprobes.counts.text_holds += stopped as u64;
        stopped
    }

    /// Holds the space of `pid` for a text change made outside any
    /// single-step; the held stops are let go by the loop after the
    /// current report (`Tracer::release_text_hold`).
    pub(crate) fn hold_for_text(&mut self, pid: Tid) {
        let owner = self.uprobes.owner(pid);
        self.hold_space(None, owner);
        self.text_hold = true;
    }

    /// Holds every space with breakpoints (before the end's restore).
    pub(crate) fn hold_all_spaces(&mut self) {
        let owners: Vec<Tid> = self.uprobes.spaces.keys().copied().collect();
        for owner in owners {
            self.hold_space(None, owner);
        }
    }
}

impl Tracer {
    /// After a report that changed text: the held threads go back to the
    /// loop, unless a single-step still needs them held.
    pub(crate) fn release_text_hold(&mut self) {
        if !std::mem::take(&mut self.core.text_hold) {
            return;
        }
        if self.core.uprobes.stepping.is_empty() {
            let held = std::mem::take(&mut self.core.uprobes_held);
            self.core.replay.extend(held);
        }
    }
}

/// ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND: the kernel makes the
/// interrupted call again, with the same number (ERESTART_RESTARTBLOCK
/// makes restart_syscall instead, a call of its own).
const RESTARTS: [i64; 3] = [-512, -513, -514];

impl Core {
    /// A thread our interrupt stopped inside a syscall will enter it again
    /// from the same place: remembered, so that entry is not reported as a
    /// second call. Called at the hold's own wait and at every interrupt
    /// stop the loop sees (an interrupt sent to a thread already in a
    /// stop stays pending and cuts its next call short). Not a call made from the data plane's gadget: the
    /// filter lets its second entry through unreported anyway.
    pub(super) fn note_restart(&mut self, tid: Tid) {
        #[cfg(target_arch = "x86_64")]
        if let Ok(r) = ptrace::get_regs(tid)
            && (r.orig_rax as i64) >= 0
            && RESTARTS.contains(&(r.rax as i64))
            && self
                .dataplane
                .as_ref()
                .is_none_or(|p| p.at_gadget(r.rip).is_none())
            && let Some(th) = self.threads.get_mut(&tid)
        {
            th.restarting = Some(r.orig_rax);
        }
    }
}

/// Whether `tid` is a zombie (state Z in /proc/TID/stat).
fn is_zombie(tid: Tid) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", tid.0))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('Z')))
        .unwrap_or(false)
}

impl Core {
    /// Waits for the attach stops of `pid`'s threads that have not come
    /// yet (a thread just seized, its interrupt pending, may still be
    /// running under load: its registers unreadable). The stops go to the
    /// loop's replay, as the hold's do; no new interrupt is sent (one left
    /// pending would cut the next injected call short). Bounded: a thread
    /// that does not stop within 2 s is left out.
    pub(crate) fn await_attach_stops(&mut self, pid: Tid) {
        let waiting: Vec<Tid> = self
            .threads_of(pid)
            .into_iter()
            .filter(|&t| {
                self.threads
                    .get(&t)
                    .is_some_and(|th| th.run == Run::Running)
                    && ptrace::get_regs(t).is_err()
            })
            .collect();
        for t in waiting {
            for _ in 0..2000 {
                match ptrace::wait_for(t.0, libc::WNOHANG) {
                    Ok(Some(status)) => {
                        self.replay.push(status);
                        break;
                    }
                    Ok(None) => std::thread::sleep(std::time::Duration::from_millis(1)),
                    Err(_) => break,
                }
            }
        }
    }
}
