//! Syscall entry probes served below the ptrace floor (issue 16 point 3):
//! a `-c` command's filter returns `SECCOMP_RET_USER_NOTIF` instead of
//! `RET_TRACE` for the syscalls whose probes need no stop, and a server
//! thread runs their handlers on each notification and answers "continue".
//! A ptrace tracer must fetch the syscall number with a request at every
//! stop; the notification brings number, arguments and thread id with the
//! event, and the thread waits in the kernel, not in a ptrace stop.
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
//! **Ending.** The server runs until no process uses the filter any more
//! (the listener hangs up); after the script's end it answers without
//! running handlers (the session shepherds the command as for RET_TRACE).
//! If utap dies, the kernel fails pending and later notified syscalls
//! with ENOSYS — but the command dies with utap (`PTRACE_O_EXITKILL`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Starts the server thread; returns the count of notifications it
/// serves. It is not co-located with the threads it serves as the ptrace
/// tracer threads are (`utrace::colocate`): following their CPU in
/// `SCHED_IDLE` measured the same as the scheduler's placement with
/// synchronous wake-ups (`loop 100000` counted by name: 0.82–0.83 s
/// against 0.77–0.82 s, load 4).
///
/// The thread is not joined: it ends when the listener hangs up,
/// or with the process (answering to the last, so no thread of the command
/// is left waiting while utap lives).
pub(crate) fn start(
    listener: Listener,
    shared: SharedRef,
    dispatch: Arc<Dispatch>,
    shard: usize,
) -> std::io::Result<Arc<AtomicU64>> {
    let count = Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    listener.sync_wake_up();
    std::thread::Builder::new()
        .name("utap-notify".into())
        .spawn(move || {
            serve(&listener, &shared, &dispatch, &counted, shard);
        })?;
    Ok(count)
}

/// `shard`: the copy of the script (and of the statistics) the server's
/// handler runs use, its own (`Shared::add_runs`).
fn serve(listener: &Listener, shared: &SharedRef, d: &Dispatch, count: &AtomicU64, shard: usize) {
    // SAFETY: plain data.
    let mut n: Notification = unsafe { std::mem::zeroed() };
    loop {
        match listener.recv(&mut n) {
            Received::Notified => {}
            Received::Retry => continue,
            Received::Closed => return,
        }
        count.fetch_add(1, Ordering::Relaxed);
        entry(shared, d, &n, shard);
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
