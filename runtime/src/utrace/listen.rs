//! A seccomp listener per busy traced thread (issue 16). With one listener
//! for the whole command, every notification of every thread goes through
//! one server thread, and two threads on two CPUs take twice the time of
//! one. A thread can have a listener of its own only if no filter of its
//! chain has one (seccomp(2): one listener per filter tree; EBUSY
//! otherwise), so the command's filter returns `SECCOMP_RET_TRACE` and has
//! none: a thread's first syscalls stop in ptrace. At its
//! [`LISTEN_AFTER`]th seccomp stop ([`MAIN_LISTENS_AFTER`]th for a
//! process's main thread) the tracer installs in that thread a
//! second filter returning `SECCOMP_RET_USER_NOTIF` for the notified
//! syscalls (a notification takes precedence over a trace) and takes its
//! listener, which a server thread of its own serves: each thread and its
//! server wake each other synchronously, on one CPU, beside the other
//! pairs. A thread that stops fewer times (short-lived threads, thread
//! churn) never pays for the installation.
//!
//! Threads and processes created later by a thread with a listener
//! inherit that filter, so they share its server (correct, not parallel);
//! the kernel would refuse them their own.
//!
//! The installation runs `seccomp(2)` and then `close` of the thread's
//! copy of the descriptor in the thread, through its own `syscall`
//! instruction (the one it stopped at): the program's call is skipped,
//! the injected calls are made through `PTRACE_SYSCALL` stops, and the
//! thread goes back to its `syscall` instruction with its own number, so
//! it makes its call again, now under the new filter. Nothing in the
//! program's code is written; the filter program is put below the
//! thread's red zone. The `close` may itself be notified to the new
//! listener: its server lets it through unreported ([`injecting`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;

use super::ptrace::{self, Status};
use super::{Regs, Signal, Tid, Tracer};
use crate::listener::Listener;
use crate::seccomp::{FLAG_NEW_LISTENER, FLAG_WAIT_KILLABLE_RECV};
use crate::uprobe::mem;

/// The seccomp stop at which a thread gets its listener: a thread that
/// stops this often is likely to go on, and an installation costs about
/// as much as a few dozen stops (see docs/internals/performance.md, issue 16).
pub const LISTEN_AFTER: u32 = 64;
/// The same for a process's main thread. The threads it creates after
/// it has its listener share that listener (and its one server), so it
/// waits longer, for its program to have started its threads: a
/// single-threaded program pays for its first 4,096 stops through ptrace
/// (about 8 ms), a program whose main thread starts its workers within
/// them has them served in parallel.
pub const MAIN_LISTENS_AFTER: u32 = 4096;

/// What the tracer gives the busy threads of the session's command.
pub struct ThreadListeners {
    /// The per-thread filter (`seccomp::Filter::notify_only`).
    pub program: Vec<libc::sock_filter>,
    /// A server for one more listener, waiting for it on the channel
    /// returned (`None`: none can be had; the thread goes on through
    /// ptrace stops). Had before the filter is installed: a listener
    /// nobody serves would leave the injected `close` waiting.
    pub server: Box<dyn Fn() -> Option<SyncSender<Listener>> + Send + Sync>,
}

/// Whether a thread's filter chain has a listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Listening {
    /// None yet: it may get one.
    #[default]
    No,
    /// Its own, or one it inherited.
    Yes,
    /// It cannot have one (its `syscall` instruction is not the 2-byte
    /// one, the kernel refused): it goes on through ptrace stops.
    Never,
}

/// Threads running our injected calls now (any session, any shard).
static INJECTING: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// How many: the servers look in [`INJECTING`] only when it is not 0.
static INJECTIONS: AtomicUsize = AtomicUsize::new(0);

/// Whether thread `tid`'s notified syscall is one the tracer injected
/// (see the module doc), to be let through unreported.
pub fn injecting(tid: i32) -> bool {
    INJECTIONS.load(Ordering::Acquire) != 0
        && INJECTING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&tid)
}

/// Marks `tid` as running injected calls while alive.
struct Injection(i32);

impl Injection {
    fn new(tid: i32) -> Injection {
        INJECTING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tid);
        INJECTIONS.fetch_add(1, Ordering::AcqRel);
        Injection(tid)
    }
}

impl Drop for Injection {
    fn drop(&mut self) {
        let mut tids = INJECTING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = tids.iter().position(|&t| t == self.0) {
            tids.swap_remove(i);
        }
        INJECTIONS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Below the red zone the thread's code may use without moving rsp.
const RED_ZONE: u64 = 128;

impl Tracer {
    /// At a seccomp stop of `tid` (not yet reported): counts it and, at the
    /// [`LISTEN_AFTER`]th, gives the thread a listener of its own (see the
    /// module doc). Returns true if the thread's call was skipped to be
    /// made again: the stop is then not reported.
    pub(crate) fn maybe_listen(&mut self, tid: Tid) -> bool {
        if self.core.thread_listeners.is_none() {
            return false;
        }
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return false;
        };
        if thread.listening != Listening::No {
            return false;
        }
        thread.seccomp_stops += 1;
        let after = match thread.tid == thread.tgid {
            true => MAIN_LISTENS_AFTER,
            false => LISTEN_AFTER,
        };
        if thread.seccomp_stops < after {
            return false;
        }
        let (listening, again) = self.give_listener(tid);
        if let Some(thread) = self.core.threads.get_mut(&tid) {
            thread.listening = listening;
        }
        again
    }

    /// Installs the thread's filter; returns what the thread has now and
    /// whether its call is to be made again.
    fn give_listener(&mut self, tid: Tid) -> (Listening, bool) {
        let Some(cfg) = self.core.thread_listeners.clone() else {
            return (Listening::Never, false);
        };
        let Some(tgid) = self.core.threads.get(&tid).map(|t| t.tgid) else {
            return (Listening::Never, false);
        };
        let Ok(regs) = ptrace::get_regs(tid) else {
            return (Listening::Never, false);
        };
        let Some(again) = ptrace::call_again(tid, &regs) else {
            return (Listening::Never, false);
        };
        let Some(server) = (cfg.server)() else {
            return (Listening::Never, false);
        };
        let _marked = Injection::new(tid.0);
        let mut call = Inline::new(tid, regs, again);
        let got = self.install_filter(&mut call, tgid, &cfg.program);
        let listening = match got {
            Ok((fd, killable)) => {
                // Served before the close, which may be notified to it.
                if let Ok(listener) = Listener::take(tgid, fd, killable) {
                    let _ = server.send(listener);
                }
                let close = libc::SYS_close as u64;
                let _ = self.inline_syscall(&mut call, close, [fd as u64, 0, 0, 0, 0, 0]);
                Listening::Yes
            }
            // A listener in the chain already (a creator's, before the
            // tracer knew of it).
            Err(Some(rc)) if rc == -(libc::EBUSY as i64) => Listening::Yes,
            Err(_) => Listening::Never,
        };
        (listening, self.finish_inline(call))
    }

    /// Runs `seccomp(SET_MODE_FILTER, NEW_LISTENER, program)` in the
    /// thread; the thread's new descriptor and whether its waits are
    /// killable, or the call's error (`None`: it could not be made).
    fn install_filter(
        &mut self,
        call: &mut Inline,
        tgid: Tid,
        program: &[libc::sock_filter],
    ) -> Result<(i32, bool), Option<i64>> {
        let (at, bytes) = fprog_below(call.saved.rsp, program);
        mem::write_data(tgid.0, at, &bytes).map_err(|_| None)?;
        let set = libc::SECCOMP_SET_MODE_FILTER as u64;
        let mut last = None;
        for (flags, killable) in [
            (FLAG_NEW_LISTENER | FLAG_WAIT_KILLABLE_RECV, true),
            (FLAG_NEW_LISTENER, false),
        ] {
            let args = [set, flags as u64, at, 0, 0, 0];
            let rc = self
                .inline_syscall(call, libc::SYS_seccomp as u64, args)
                .ok_or(None)? as i64;
            if rc >= 0 {
                return Ok((rc as i32, killable));
            }
            last = Some(rc);
            // EINVAL: no WAIT_KILLABLE_RECV before Linux 5.19.
            if rc != -(libc::EINVAL as i64) {
                break;
            }
        }
        Err(last)
    }

    /// Makes syscall `nr` in the thread through its `syscall` instruction
    /// and returns its raw result (`-errno`), leaving the thread at the
    /// call's exit stop; `None` if the thread died or could not be run.
    fn inline_syscall(&mut self, call: &mut Inline, nr: u64, args: [u64; 6]) -> Option<u64> {
        if call.dead {
            return None;
        }
        let mut r = call.saved;
        // At the first call the thread is at the program's seccomp stop:
        // that call is skipped (orig_rax -1); its exit stop, if the
        // kernel reports one, comes before the injected call's entry.
        r.orig_rax = u64::MAX;
        r.rip = call.again.rip;
        r.rax = nr;
        (r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9) =
            (args[0], args[1], args[2], args[3], args[4], args[5]);
        if ptrace::set_regs(call.tid, &r).is_err() {
            call.dead = true;
            return None;
        }
        call.made_any = true;
        let got = self.run_to_exit_stop(call);
        if got.is_none() {
            call.dead = true;
        }
        got
    }

    /// Resumes the thread with `PTRACE_SYSCALL` until the exit stop of a
    /// call it entered; returns rax there.
    fn run_to_exit_stop(&mut self, call: &mut Inline) -> Option<u64> {
        let tid = call.tid;
        let mut entered = false;
        loop {
            ptrace::restart(ptrace::PTRACE_SYSCALL, tid, None).ok()?;
            let Ok(Some((_, status))) = ptrace::wait_for(tid.0, 0) else {
                return None;
            };
            match ptrace::decode(status) {
                Status::SyscallStop => {
                    let info = ptrace::syscall_info(tid).ok()?;
                    match info.op {
                        libc::PTRACE_SYSCALL_INFO_ENTRY => entered = true,
                        libc::PTRACE_SYSCALL_INFO_EXIT if entered => {
                            return ptrace::get_regs(tid).ok().map(|r| r.rax);
                        }
                        _ => {}
                    }
                }
                Status::Event {
                    event: ptrace::EVENT_SECCOMP,
                    ..
                } => entered = true,
                Status::Event {
                    event: ptrace::EVENT_EXIT,
                    ..
                }
                | Status::Exited(_)
                | Status::Signaled { .. } => {
                    self.core.replay.push((tid, status));
                    return None;
                }
                Status::SignalStop(sig) => call.deliver_later = Some(sig),
                _ => {}
            }
        }
    }

    /// Puts the thread back at its `syscall` instruction with its own
    /// number (it makes its call again), keeping a signal that came
    /// meanwhile; returns whether the stop is not to be reported (the
    /// call is made again, or the thread died: its end is replayed).
    fn finish_inline(&mut self, call: Inline) -> bool {
        if call.dead {
            return true;
        }
        // Nothing injected: the thread is as it stopped.
        if !call.made_any {
            return false;
        }
        let again = Regs {
            orig_rax: u64::MAX,
            ..call.again
        };
        let _ = ptrace::set_regs(call.tid, &again);
        if let (Some(sig), Some(t)) = (call.deliver_later, self.core.threads.get_mut(&call.tid)) {
            t.pending_signal = Some(sig);
        }
        true
    }
}

/// Injected calls in one stopped thread.
struct Inline {
    tid: Tid,
    /// Its registers at the program's seccomp stop, and those that make
    /// its call again (`ptrace::call_again`).
    saved: Regs,
    again: Regs,
    /// A call was injected (so the program's was skipped).
    made_any: bool,
    dead: bool,
    deliver_later: Option<Signal>,
}

impl Inline {
    fn new(tid: Tid, saved: Regs, again: Regs) -> Inline {
        Inline {
            tid,
            saved,
            again,
            made_any: false,
            dead: false,
            deliver_later: None,
        }
    }
}

/// Where below `rsp` (past the red zone, 16-aligned) to put a
/// `struct sock_fprog` followed by `program`, and those bytes.
fn fprog_below(rsp: u64, program: &[libc::sock_filter]) -> (u64, Vec<u8>) {
    let size = 16 + 8 * program.len() as u64;
    let at = (rsp - RED_ZONE - size) & !15;
    let mut bytes = Vec::with_capacity(size as usize);
    bytes.extend_from_slice(&(program.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&[0; 6]);
    bytes.extend_from_slice(&(at + 16).to_le_bytes());
    for insn in program {
        bytes.extend_from_slice(&insn.code.to_le_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_le_bytes());
    }
    (at, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_lies_below_the_red_zone_after_its_header() {
        let prog = [libc::sock_filter {
            code: 6,
            jt: 1,
            jf: 2,
            k: 0x7fff_0000,
        }];
        let (at, bytes) = fprog_below(0x7ffc_0000_1008, &prog);
        assert_eq!(at % 16, 0);
        assert!(at + bytes.len() as u64 <= 0x7ffc_0000_1008 - RED_ZONE);
        assert_eq!(u16::from_le_bytes([bytes[0], bytes[1]]), 1);
        assert_eq!(
            u64::from_le_bytes(bytes[8..16].try_into().unwrap()),
            at + 16
        );
        assert_eq!(&bytes[16..], &[6, 0, 1, 2, 0, 0, 0xff, 0x7f]);
    }
}
