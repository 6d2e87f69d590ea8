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
/// script (one per CPU; servers sharing a copy take its lock in turn):
/// their CPU's when placed (see [`Placement`]), else taken in turn.
///
/// The command's one server is left to the scheduler: following its
/// threads' CPU in `SCHED_IDLE`, as the ptrace tracer threads do
/// (`utrace::colocate`), measured the same as the scheduler's placement
/// with synchronous wake-ups (`loop 100000` counted by name: 0.82–0.83 s
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
    /// Where the servers of per-thread listeners run (see [`Placement`]).
    placement: Option<Arc<Placement>>,
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
            placement: None,
        }
    }

    /// Places each server (with the thread it serves) on a CPU of its
    /// own (see [`Placement`]); for per-thread listeners.
    /// `UTAP_PLACE_SERVERS=0` leaves them to the scheduler.
    pub fn placed(mut self) -> Servers {
        if std::env::var("UTAP_PLACE_SERVERS").map_or(true, |v| v != "0") {
            self.placement = Placement::new(self.first_run, self.runs).map(Arc::new);
        }
        self
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
        let placement = self.placement.clone();
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
                    let server = Server {
                        shared: &shared,
                        dispatch: &dispatch,
                        count: &count,
                        run,
                        placement: placement.as_deref(),
                    };
                    server.serve(&listener);
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

/// One server thread serving one listener.
struct Server<'a> {
    shared: &'a SharedRef,
    dispatch: &'a Dispatch,
    count: &'a Counts,
    /// The copy of the script (and of the statistics) its handler runs
    /// use (`Shared::add_runs`), unless placed: then its CPU's.
    run: usize,
    placement: Option<&'a Placement>,
}

impl Server<'_> {
    fn serve(mut self, listener: &Listener) {
        // SAFETY: plain data.
        let mut n: Notification = unsafe { std::mem::zeroed() };
        let mut placed = None;
        loop {
            match listener.recv(&mut n) {
                Received::Notified => {}
                Received::Retry => continue,
                Received::Closed => break,
            }
            if let (None, Some(p)) = (placed, self.placement) {
                let (cpu, run) = p.take(n.pid as i32);
                placed = Some(cpu);
                self.run = run;
            }
            // The tracer's own calls, giving the thread its listener.
            if !crate::utrace::listen::injecting(n.pid as i32) {
                self.count.served.fetch_add(1, Ordering::Relaxed);
                entry(self.shared, self.dispatch, &n, self.run);
            }
            // ENOENT: the thread died meanwhile; nothing waits.
            listener.answer_continue(n.id);
        }
        if let (Some(cpu), Some(p)) = (placed, self.placement) {
            p.release(cpu);
        }
    }
}

/// Where the servers of per-thread listeners run. A notifying thread and
/// its server wake each other on the waker's CPU (synchronous wake-ups),
/// so a pair stays wherever it is; two pairs that met on one CPU stayed
/// there for a whole run while the other CPU idled (the scheduler does
/// not move tasks that ran a moment ago): `mtsys 2` took 0.58 s or
/// 1.17 s at random. So each server pins itself, at its first
/// notification, to the CPU with the fewest servers (its thread's last
/// CPU if that is one of them), and its thread follows it there (a server
/// wakes it on the server's CPU).
struct Placement {
    /// The CPUs utap may use, and how many servers each has.
    cpus: Vec<usize>,
    pairs: Mutex<Vec<usize>>,
    /// The servers' copies of the script: one per CPU, if there are as
    /// many (a CPU quota may allow fewer than the CPUs).
    first_run: usize,
    runs: usize,
}

impl Placement {
    /// `None` with a single CPU.
    fn new(first_run: usize, runs: usize) -> Option<Placement> {
        let cpus = allowed_cpus();
        (cpus.len() > 1).then(|| Placement {
            pairs: Mutex::new(vec![0; cpus.len()]),
            cpus,
            first_run,
            runs: runs.max(1),
        })
    }

    /// Pins the calling server for thread `tid`; its CPU's index and the
    /// copy of the script the CPU's servers use.
    fn take(&self, tid: i32) -> (usize, usize) {
        let last = last_cpu(tid);
        let i = {
            let mut pairs = self.pairs.lock().unwrap_or_else(|e| e.into_inner());
            let fewest = pairs.iter().copied().min().unwrap_or(0);
            let i = self
                .cpus
                .iter()
                .position(|&c| Some(c) == last)
                .filter(|&i| pairs[i] == fewest)
                .or_else(|| pairs.iter().position(|&p| p == fewest))
                .unwrap_or(0);
            pairs[i] += 1;
            i
        };
        pin_to(self.cpus[i]);
        (i, self.first_run + i % self.runs)
    }

    fn release(&self, i: usize) {
        let mut pairs = self.pairs.lock().unwrap_or_else(|e| e.into_inner());
        pairs[i] = pairs[i].saturating_sub(1);
    }
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a plain cpu_set_t filled by the kernel.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) {
    // SAFETY: a plain cpu_set_t for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

/// The CPU thread `tid` last ran on (`/proc/TID/stat`'s 39th field).
fn last_cpu(tid: i32) -> Option<usize> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Field 3 (state) is the first after the name: 39 is the 37th.
    rest.split_whitespace().nth(36)?.parse().ok()
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
