//! Syscall entry probes served below the ptrace floor (issue 16 point 3):
//! a thread's seccomp filter returns `SECCOMP_RET_USER_NOTIF` instead of
//! `RET_TRACE` for the syscalls whose probes need no stop, and a server
//! thread runs their handlers on each notification and answers "continue".
//! A ptrace tracer must fetch the syscall number with a request at every
//! stop; the notification brings number, arguments and thread id with the
//! event, and the thread waits in the kernel, not in a ptrace stop.
//!
//! **Whose listener.** By default each busy thread gets a filter and a
//! listener of its own (at its 64th seccomp stop, a main thread at its
//! 4,096th), served by a server of its own, so threads on different CPUs
//! are served in parallel (`utrace::listen`; until then, and for threads
//! that never get one, the command's filter traces). With
//! `UTAP_THREAD_LISTENERS=0` the command's filter notifies and one server
//! serves every thread.
//!
//! **Which syscalls** ([`plan`]): those with entry probes and no `.return`
//! probe (the exit needs a stop), all of whose handlers the compiler found
//! stopless (`utap_compiler::stopless`: no registers, stack, symbols or
//! thread control), in sessions that are not `-g` and have no function,
//! marker, profile or quiesce probes. Everything else keeps its ptrace
//! stops; execve and execveat always do (exec events).
//!
//! **Order and exactness.** The threads stay ptrace-attached for clone,
//! exec, exit and signals. A thread has at most one notification pending
//! and its handlers finish before it is answered, so per-thread order
//! holds. The filter asks for `WAIT_KILLABLE_RECV` (Linux 5.19): once a
//! notification is received only SIGKILL ends the wait, so a signal cannot
//! make the syscall restart and be reported twice. A thread that died
//! before its answer is dropped (ENOENT).
//!
//! **Ending.** A server runs until no thread uses its filter any more
//! (the listener hangs up; it then waits for another); after the script's
//! end it answers without running handlers (the session shepherds the
//! command as for RET_TRACE).
//! If utap dies, the kernel fails pending and later notified syscalls
//! with ENOSYS — but the command dies with utap (`PTRACE_O_EXITKILL`).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;

use super::engine::{SharedRef, context};
use super::points::{Dispatch, SyscallNeed};
use crate::listener::{Listener, Notification, Received};
use crate::script::ProbeValues;
use crate::script::context::event;
use crate::seccomp::ALWAYS_TRACED;

/// Syscall numbers served by notification, ascending; empty: none.
pub(crate) fn plan(d: &Dispatch, need: SyscallNeed, stopless: &[bool], every: u32) -> Vec<u32> {
    if !d.functions.is_empty() || !d.profile.is_empty() || !d.quiesce.is_empty() {
        return Vec::new();
    }
    let candidates: Vec<u32> = match need {
        SyscallNeed::Nothing => return Vec::new(),
        SyscallNeed::Some(s) => s.to_vec(),
        SyscallNeed::All => (0..every).collect(),
    };
    candidates
        .into_iter()
        .filter(|nr| !ALWAYS_TRACED.contains(nr))
        .filter(|&nr| {
            let hooks = d.entry.get(nr as i64);
            d.exit.get(nr as i64).is_empty()
                && !hooks.is_empty()
                && hooks
                    .iter()
                    .all(|h| stopless.get(h.probe).copied().unwrap_or(false))
        })
        .collect()
}

/// Whether the route may be used: on unless `UTAP_NOTIFY=0`, where the
/// kernel can hand the listener over.
pub(crate) fn enabled() -> bool {
    std::env::var("UTAP_NOTIFY").map_or(true, |v| v != "0") && crate::listener::supported()
}

/// The notification servers of a session: one per listener, the
/// command's or each busy thread's (`utrace::listen`), each blocked on
/// its own listener so that a notifying thread wakes its server on its
/// own CPU. Servers run their handlers on one of `runs` copies of the
/// script, taken in turn (one per CPU; servers sharing a copy take its
/// lock in turn).
///
/// A server is not co-located with the threads it serves as the ptrace
/// tracer threads are (`utrace::colocate`): following their CPU in
/// `SCHED_IDLE` measured the same as the scheduler's placement with
/// synchronous wake-ups (`loop 100000` counted by name: 0.82–0.83 s
/// against 0.77–0.82 s, load 4).
pub(crate) struct Servers {
    shared: SharedRef,
    dispatch: Arc<Dispatch>,
    /// The first of the servers' copies of the script, and how many.
    first_run: usize,
    runs: usize,
    started: AtomicUsize,
    /// Servers whose listener hung up, waiting for another.
    idle: Arc<Mutex<Vec<SyncSender<Listener>>>>,
    /// What every server did.
    pub count: Arc<Counts>,
}

impl Servers {
    pub fn new(
        shared: SharedRef,
        dispatch: Arc<Dispatch>,
        first_run: usize,
        runs: usize,
    ) -> Servers {
        Servers {
            shared,
            dispatch,
            first_run,
            runs: runs.max(1),
            started: AtomicUsize::new(0),
            idle: Arc::new(Mutex::new(Vec::new())),
            count: Arc::new(Counts::default()),
        }
    }

    /// How many copies of the script the servers want: one per CPU.
    pub fn runs_wanted() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(64))
    }

    /// Starts a server thread serving `listener`.
    pub fn start(&self, listener: Listener) -> std::io::Result<()> {
        let tx = self.spawn()?;
        let _ = tx.send(listener);
        Ok(())
    }

    /// A server waiting for a listener on the channel returned: an idle
    /// one (its listener hung up: its threads are gone), else a new one.
    pub fn waiting(&self) -> Option<SyncSender<Listener>> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        idle.or_else(|| self.spawn().ok())
    }

    fn spawn(&self) -> std::io::Result<SyncSender<Listener>> {
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        let run = self.first_run + n % self.runs;
        let (shared, dispatch, count) = (
            self.shared.clone(),
            self.dispatch.clone(),
            self.count.clone(),
        );
        let idle = Arc::downgrade(&self.idle);
        let (tx, mut rx) = std::sync::mpsc::sync_channel::<Listener>(1);
        // Not joined: a server ends when its listener hangs up and the
        // session has ended (its pool is gone), or with the process
        // (answering to the last, so no thread of the command is left
        // waiting while utap lives).
        std::thread::Builder::new()
            .name("utap-notify".into())
            .spawn(move || {
                count.servers.fetch_add(1, Ordering::Relaxed);
                while let Ok(listener) = rx.recv() {
                    count.listeners.fetch_add(1, Ordering::Relaxed);
                    listener.sync_wake_up();
                    serve(&listener, &shared, &dispatch, &count, run);
                    drop(listener);
                    let Some(idle) = idle.upgrade() else {
                        return;
                    };
                    let (tx, next) = std::sync::mpsc::sync_channel(1);
                    idle.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
                    rx = next;
                }
            })?;
        Ok(tx)
    }
}

/// What the servers of a session did (for `-v`).
#[derive(Default)]
pub(crate) struct Counts {
    /// Notifications served (handlers run).
    pub served: AtomicU64,
    /// Listeners served, and server threads started to serve them.
    pub listeners: AtomicU64,
    pub servers: AtomicU64,
}

/// Whether busy threads get listeners of their own (`utrace::listen`):
/// on unless `UTAP_THREAD_LISTENERS=0`, which keeps one listener for the
/// command (its filter's), served by one thread.
pub(crate) fn per_thread() -> bool {
    std::env::var("UTAP_THREAD_LISTENERS").map_or(true, |v| v != "0")
}

/// `shard`: the copy of the script (and of the statistics) the server's
/// handler runs use (`Shared::add_runs`).
fn serve(listener: &Listener, shared: &SharedRef, d: &Dispatch, count: &Counts, shard: usize) {
    // SAFETY: plain data.
    let mut n: Notification = unsafe { std::mem::zeroed() };
    loop {
        match listener.recv(&mut n) {
            Received::Notified => {}
            Received::Retry => continue,
            Received::Closed => return,
        }
        // The tracer's own calls, giving a new thread its listener.
        if !crate::utrace::listen::injecting(n.pid as i32) {
            count.served.fetch_add(1, Ordering::Relaxed);
            entry(shared, d, &n, shard);
        }
        // ENOENT: the thread died meanwhile; nothing waits.
        listener.answer_continue(n.id);
    }
}

/// Runs the entry handlers of one notified syscall, beside the tracer
/// threads' handlers (the state held shared, the globals' locks taken).
fn entry(shared: &SharedRef, d: &Dispatch, n: &Notification, shard: usize) {
    let nr = n.data.nr as i64;
    let hooks = d.entry.get(nr);
    if hooks.is_empty() {
        return;
    }
    let Some(s) = shared.for_probe_shared() else {
        return;
    };
    let mut run = s.run(shard);
    let tid = n.pid as i32;
    let procs = run.procs_mut();
    // A thread is in the cache from its attach or clone report; one that
    // raced ahead of its report is read from /proc once.
    if procs.get(tid).is_none() {
        procs.refresh(tid);
    }
    let pid = procs.get(tid).map_or(tid, |p| p.tgid);
    let values = ProbeValues {
        syscall: nr,
        args: n.data.args.map(|a| a as i64),
        event: event::SYSCALL,
        ..context(pid, tid)
    };
    run.set_shard(shard);
    let fired = s.fire_on(&mut run, true, None, hooks, &values);
    if fired.end {
        s.end_on_first(crate::utrace::EndReason::Requested);
    }
}
