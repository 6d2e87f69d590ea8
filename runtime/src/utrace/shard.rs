//! Several tracer threads ("shards") serving one session, so that traced
//! threads on different CPUs are served in parallel (issue 16).
//!
//! Each shard is a complete tracer loop ([`Tracer::run`]) on its own
//! thread, with its own engines (made by the session's factory, at the
//! same ids as the first shard's), doorbell, timers and colocation; it
//! waits with `__WALL | __WNOTHREAD`, so it reaps only its own tracees.
//! Shard 0 is the tracer the session created; it holds what the session
//! attached (the `-c` command, the `-x` threads), its timers and its end
//! hook.
//!
//! **Handover.** The kernel makes a new thread a tracee of its creator's
//! tracer thread. A thread that keeps stopping is worth serving elsewhere:
//! at its [`SETTLE`]th stop on a shard (64; `UTAP_SHARD_SETTLE` for tests),
//! once that stop is reported and arbitrated and the thread would resume,
//! it moves to the shard with the fewest busy threads if that one has
//! fewer than its own, else it counts as busy where it is. Short-lived
//! threads (a few stops from birth to exit) never pay for a move. ptrace
//! cannot pass a tracee on, so the owner saves its registers, points its
//! instruction pointer at a `jmp .` (`eb fe`, written over the program's
//! entry code at AT_ENTRY, which never runs again once the program
//! started), and detaches it; the thread spins there, making no system
//! call (a seccomp `RET_TRACE` without a tracer would fail it) and
//! reporting nothing; the new owner seizes it, interrupts it and, at that
//! stop, puts its registers back and resumes it without a report. At a
//! syscall entry (the usual stop of a busy thread) the call is skipped
//! while parked (`orig_rax` -1) and the registers put back point at its
//! `syscall` instruction with the number in `rax`: the call is made again
//! after the handover, and that second entry stop is not reported
//! (`Thread::retrap`). A thread moves once; each shard's colocation then
//! follows its own tracees' CPUs (the issue's "keep the owner and move the
//! owner's affinity"), so migration needs no further handover.
//!
//! **Ending.** Any shard's end (`Control::end`, the watched process's
//! exit, a termination signal) ends the group: every shard is rung, detaches
//! its own tracees (only it may), then closes its command queue and
//! detaches whatever a last handover brought it; a handover to a closed
//! shard is taken back by its sender. Shard 0 runs the end hook, then
//! waits for the others and finally puts the entry code back. Dropping
//! shard 0's `Tracer` (a panic) does the same.
//!
//! **What stays on one shard.** Threads of a process with breakpoints
//! (their sites, step windows and return trampolines are one shard's
//! state), process leaders, threads in a group-stop, with a signal or a
//! stop pending, or inside a syscall other than at its entry, and fork
//! children (new processes stay with their creator's shard) are never
//! handed over. Sessions that control threads across threads, sample with
//! `timer.profile` or place breakpoints are not sharded at all (the session
//! decides, see `crate::session`).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::control::{Core, EndReason};
use super::error::{Error, Result};
use super::ptrace;
use super::thread::{Parkable, Run, Thread};
use super::tracer::Command;
use super::{Control, Engine, ResumeAction, Tid, Tracer};

/// Makes one shard's engines, in the order (ids) of shard 0's.
pub type EngineFactory = Arc<dyn Fn() -> Vec<Box<dyn Engine>> + Send + Sync>;

/// What one shard shares with the others; a cache line of its own, as
/// its shard writes its counts at every stop.
#[repr(align(128))]
struct Slot {
    /// Its command queue; `None` once it has closed (see *Ending*).
    tx: Mutex<Option<mpsc::Sender<Command>>>,
    ring: Mutex<Option<Arc<OwnedFd>>>,
    /// Its busy threads (updated at its stops and at each handover).
    load: AtomicUsize,
    /// Its ptrace-stops so far.
    stops: AtomicU64,
    /// Threads handed over to it.
    adopted: AtomicU64,
    /// Nanoseconds those threads spent parked, from detach to restore.
    parked_ns: AtomicU64,
}

/// The shards of one session.
pub(crate) struct Group {
    slots: Vec<Slot>,
    ended: AtomicBool,
    /// Some thread was handed over (see `foreign`).
    moved: AtomicBool,
    reason: Mutex<Option<EndReason>>,
    /// Per process: the `jmp .` site and the bytes it replaced.
    parks: Mutex<HashMap<i32, (u64, [u8; 2])>>,
    /// Threads parked and not yet put back by their new owner: at most
    /// [`IN_FLIGHT`] (see `hand_over`).
    in_flight: AtomicUsize,
    /// Stops of a thread before it may move ([`SETTLE`]).
    settle: u32,
    /// Per shard: its loop still serves events (see `loop_ended`).
    serving: Mutex<Vec<bool>>,
    served: Condvar,
}

/// A shard's place in its group (in its `Core`).
#[derive(Clone)]
pub(crate) struct ShardRef {
    pub group: Arc<Group>,
    pub index: usize,
}

/// What `Control::shard_stats` reports per shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// ptrace-stops it handled.
    pub stops: u64,
    /// Threads handed over to it.
    pub adopted: u64,
    /// Nanoseconds they spent parked, in all (the handover's cost to them).
    pub parked_ns: u64,
}

impl Group {
    fn new(n: usize) -> Group {
        Group {
            slots: (0..n)
                .map(|_| Slot {
                    tx: Mutex::new(None),
                    ring: Mutex::new(None),
                    load: AtomicUsize::new(0),
                    stops: AtomicU64::new(0),
                    adopted: AtomicU64::new(0),
                    parked_ns: AtomicU64::new(0),
                })
                .collect(),
            ended: AtomicBool::new(false),
            moved: AtomicBool::new(false),
            reason: Mutex::new(None),
            parks: Mutex::new(HashMap::new()),
            in_flight: AtomicUsize::new(0),
            settle: std::env::var("UTAP_SHARD_SETTLE")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(SETTLE)
                .max(1),
            serving: Mutex::new((0..n).map(|i| i != 0).collect()),
            served: Condvar::new(),
        }
    }

    /// Ends every shard (the first reason wins); returns that reason.
    pub fn end(&self, why: EndReason) -> EndReason {
        let reason = *lock(&self.reason).get_or_insert(why);
        self.ended.store(true, Ordering::SeqCst);
        for slot in &self.slots {
            if let Some(ring) = lock(&slot.ring).as_ref() {
                super::doorbell::ring(ring.as_raw_fd());
            }
        }
        reason
    }

    /// A parked thread reached its new owner, or is gone.
    fn landed(&self) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// The group's end reason, once some shard ended it.
    pub fn ended(&self) -> Option<EndReason> {
        if !self.ended.load(Ordering::Relaxed) {
            return None;
        }
        *lock(&self.reason)
    }

    pub fn stats(&self) -> Vec<ShardStats> {
        self.slots
            .iter()
            .map(|s| ShardStats {
                stops: s.stops.load(Ordering::Relaxed),
                adopted: s.adopted.load(Ordering::Relaxed),
                parked_ns: s.parked_ns.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// The `jmp .` site of process `tgid`, written on first use.
    fn park_site(&self, tgid: Tid) -> Option<u64> {
        let mut parks = lock(&self.parks);
        if let Some(&(addr, _)) = parks.get(&tgid.0) {
            return Some(addr);
        }
        let addr = entry_point(tgid)?;
        let old = write_code(tgid, addr, &[0xeb, 0xfe])?;
        parks.insert(tgid.0, (addr, old));
        Some(addr)
    }

    fn stop_serving(&self, index: usize) {
        lock(&self.serving)[index] = false;
        self.served.notify_all();
    }

    /// Every shard but `owner` forgets thread `tid` (without a ptrace
    /// request: it is no longer theirs).
    pub fn forget_elsewhere(&self, owner: usize, tid: Tid) {
        self.to_others(owner, &|| {
            Box::new(move |ctl: &mut Control| {
                ctl.core.threads.remove(&tid);
            })
        });
    }

    /// Passes a wait status shard `from` reaped for another shard's
    /// tracee to every other shard (see `foreign`).
    pub fn pass_on(&self, from: usize, tid: Tid, status: i32) {
        self.to_others(from, &|| {
            Box::new(move |ctl: &mut Control| ctl.core.passed.push((tid, status)))
        });
    }

    /// Whether some thread has changed shards in this session.
    pub fn moved(&self) -> bool {
        self.moved.load(Ordering::Acquire)
    }

    /// Sends a command made by `make` to every shard but `me`, ringing it.
    fn to_others(&self, me: usize, make: &dyn Fn() -> Command) {
        for (i, slot) in self.slots.iter().enumerate().filter(|(i, _)| *i != me) {
            let sent = lock(&slot.tx)
                .as_ref()
                .is_some_and(|tx| tx.send(make()).is_ok());
            if sent && let Some(ring) = lock(&self.slots[i].ring).as_ref() {
                super::doorbell::ring(ring.as_raw_fd());
            }
        }
    }

    /// A process exec'd (its old entry code is gone with its old image) or
    /// ended (its pid may be reused): nothing to put back there.
    pub fn forget_park(&self, tgid: Tid) {
        if let Some((addr, _)) = lock(&self.parks).remove(&tgid.0) {
            crate::guardian::text_restored(tgid.0, addr);
        }
    }

    /// Puts every entry code back (no thread is parked any more).
    fn restore_parks(&self) {
        for (tgid, (addr, old)) in lock(&self.parks).drain() {
            if write_code(Tid(tgid), addr, &old).is_some() {
                crate::guardian::text_restored(tgid, addr);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shards a tracer started (kept by shard 0).
#[derive(Default)]
pub(crate) struct Shards {
    threads: Vec<JoinHandle<()>>,
    /// Started ahead by `prepare_shards`, waiting for their engines.
    prepared: Option<Prepared>,
}

/// Shard threads that have made their tracer (and forked its doorbell
/// child) and wait for what `enable_shards` sends them.
struct Prepared {
    group: Arc<Group>,
    starts: Vec<mpsc::SyncSender<Start>>,
    ready: Vec<mpsc::Receiver<Result<()>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Prepared {
    /// Never enabled (the session ended in its begin probes): the threads
    /// see their start channel close, drop their tracer and end.
    fn drop(&mut self) {
        self.starts.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What a prepared shard needs to serve: its engines and the session's
/// settings every shard applies.
struct Start {
    factory: EngineFactory,
    kill_on_signal: bool,
    end_on_exit: Option<Tid>,
    thread_listeners: Option<Arc<super::ThreadListeners>>,
}

impl Tracer {
    /// Serves the session with `n` tracer threads: this one (shard 0) and
    /// `n - 1` new ones, whose engines `factory` makes (the same engines,
    /// at the same ids, as this tracer's). Call before `run`, after the
    /// session's `kill_on_signal`/`end_when_exits`/`listen_in_threads`,
    /// which every shard applies. `n <= 1` changes nothing.
    pub fn enable_shards(&mut self, n: usize, factory: EngineFactory) -> Result<()> {
        if self.shards.prepared.is_none() {
            self.prepare_shards(n)?;
        }
        let Some(mut prepared) = self.shards.prepared.take() else {
            return Ok(());
        };
        let group = Arc::clone(&prepared.group);
        *lock(&group.slots[0].tx) = Some(self.sender.clone());
        *lock(&group.slots[0].ring) = Some(Arc::clone(&self.doorbell.ring));
        self.core.shard = Some(ShardRef { group, index: 0 });
        let (kill_on_signal, end_on_exit) = (self.core.kill_on_signal, self.core.end_on_exit);
        for start in std::mem::take(&mut prepared.starts) {
            let _ = start.send(Start {
                factory: Arc::clone(&factory),
                kill_on_signal,
                end_on_exit,
                thread_listeners: self.core.thread_listeners.clone(),
            });
        }
        self.shards.threads.append(&mut prepared.threads);
        for ready in std::mem::take(&mut prepared.ready) {
            ready
                .recv()
                .map_err(|_| Error::Spawn("a tracer thread did not start".into()))??;
        }
        Ok(())
    }

    /// Starts the `n - 1` other tracer threads ahead of [`enable_shards`]
    /// (same `n`), so that making their tracers (each forks a doorbell
    /// child) overlaps with starting the traced command instead of holding
    /// it at its exec stop. Dropped unused if `enable_shards` never comes.
    /// `n <= 1` changes nothing.
    pub fn prepare_shards(&mut self, n: usize) -> Result<()> {
        if n <= 1
            || !cfg!(target_arch = "x86_64")
            || self.core.shard.is_some()
            || self.shards.prepared.is_some()
        {
            return Ok(());
        }
        let group = Arc::new(Group::new(n));
        let mut prepared = Prepared {
            group: Arc::clone(&group),
            starts: Vec::new(),
            ready: Vec::new(),
            threads: Vec::new(),
        };
        for index in 1..n {
            let (ready_tx, ready) = mpsc::sync_channel(1);
            let (start, started) = mpsc::sync_channel(1);
            let group = Arc::clone(&group);
            let spawned = std::thread::Builder::new()
                .name(format!("utap-shard-{index}"))
                .spawn(move || serve(group, index, started, ready_tx));
            match spawned {
                Ok(handle) => {
                    prepared.threads.push(handle);
                    prepared.starts.push(start);
                    prepared.ready.push(ready);
                }
                Err(e) => return Err(Error::Spawn(format!("tracer thread: {e}"))),
            }
        }
        self.shards.prepared = Some(prepared);
        Ok(())
    }

    /// How many tracer threads serve the session.
    pub fn shard_count(&self) -> usize {
        self.core.shard.as_ref().map_or(1, |s| s.group.slots.len())
    }

    /// At a thread's [`SETTLE`]th stop here (`UTAP_SHARD_SETTLE`), once its engines have
    /// spoken and it would be resumed: hands it to the shard with the
    /// fewest busy threads if that has fewer than this one, else counts it
    /// busy here. True when it is gone from here.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn hand_over(&mut self, tid: Tid) -> bool {
        let Some(shard) = self.core.shard.clone() else {
            return false;
        };
        let group = &shard.group;
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return false;
        };
        if thread.stops_here < group.settle || thread.settled {
            return false;
        }
        // A parked thread spins until its new owner takes it, and tracer
        // threads run in SCHED_IDLE (`colocate`): a hundred threads parked
        // at once (a program starting its thread pool) starved the
        // adopting tracer for seconds. One at a time; the others try again
        // at their next stops.
        if group.in_flight.load(Ordering::Acquire) >= IN_FLIGHT {
            return false;
        }
        if !movable(thread)
            || self.core.end.is_some()
            || group.ended().is_some()
            || !self.core.uprobes.is_empty()
        {
            return false;
        }
        let mine = self.core.busy;
        let (target, load) = group
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.load.load(Ordering::Relaxed)))
            .min_by_key(|&(i, load)| (load, i != shard.index))
            .unwrap_or((shard.index, 0));
        if target == shard.index || load >= mine {
            thread.settled = true;
            self.core.busy += 1;
            return false;
        }
        let Some(park) = group.park_site(thread.tgid) else {
            return false;
        };
        let Some((regs, parked, restore, retrap)) = park_regs(thread, park) else {
            return false;
        };
        // Its own registers exist only here until it is adopted: the
        // guardian puts them back should utap die meanwhile.
        crate::guardian::thread_moved(thread.tgid.0, tid.0, park, 2, &restore);
        if ptrace::set_regs(tid, &parked).is_err() {
            crate::guardian::thread_back(tid.0);
            return false;
        }
        if ptrace::detach(tid, None).is_err() {
            // Still ours and stopped where it was: it goes on from here.
            let _ = ptrace::set_regs(tid, &regs);
            crate::guardian::thread_back(tid.0);
            return false;
        }
        let Some(mut thread) = self.core.threads.remove(&tid) else {
            return false;
        };
        group.in_flight.fetch_add(1, Ordering::AcqRel);
        thread.restore = Some(Box::new((restore, std::time::Instant::now())));
        thread.retrap = retrap;
        thread.settled = true;
        group.moved.store(true, Ordering::Release);
        group.slots[target].load.fetch_add(1, Ordering::Relaxed);
        // Sent under the slot's lock: a shard closes its queue under the
        // same lock, so the thread is either adopted there or taken back.
        let slot = &group.slots[target];
        let tx = lock(&slot.tx);
        let sent = match tx.as_ref() {
            Some(tx) => {
                let r = tx.send(Box::new(move |ctl: &mut Control| adopt(ctl.core, thread)));
                r.map_err(|e| e.0)
            }
            None => Err(Box::new(move |ctl: &mut Control| adopt(ctl.core, thread)) as Command),
        };
        match sent {
            Ok(()) => {
                if let Some(ring) = lock(&slot.ring).as_ref() {
                    super::doorbell::ring(ring.as_raw_fd());
                }
            }
            Err(back) => {
                drop(tx);
                back(&mut Control {
                    core: &mut self.core,
                });
            }
        }
        true
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(crate) fn hand_over(&mut self, _: Tid) -> bool {
        false
    }

    /// Publishes this shard's counts (at each stop: two relaxed stores).
    #[inline]
    pub(crate) fn note_shard_stop(&self) {
        if let Some(s) = &self.core.shard {
            let slot = &s.group.slots[s.index];
            slot.stops.store(self.core.stops, Ordering::Relaxed);
            slot.load.store(self.core.busy, Ordering::Relaxed);
        }
    }

    /// `run`'s loop has ended. Shard 0 then waits (a bounded time) until
    /// every other shard has finished the event it was handling: the end
    /// hook (end probes) comes after every report, also the deaths the
    /// others reaped just before the process's last thread exited.
    pub(crate) fn loop_ended(&self) {
        let Some(shard) = &self.core.shard else {
            return;
        };
        let group = &shard.group;
        if shard.index != 0 {
            return group.stop_serving(shard.index);
        }
        let mut serving = lock(&group.serving);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while serving.iter().any(|&s| s) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            serving = group
                .served
                .wait_timeout(serving, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// After `run`'s loop: ends the group, closes this shard's queue and
    /// detaches what last handovers brought; shard 0 then waits for the
    /// others and puts the entry code back. Idempotent.
    pub(crate) fn close_shard(&mut self) {
        let Some(shard) = self.core.shard.clone() else {
            return;
        };
        let group = &shard.group;
        group.end(EndReason::Requested);
        *lock(&group.slots[shard.index].tx) = None;
        self.drain_commands();
        if !self.core.threads.is_empty() {
            self.detach_all();
        }
        if shard.index == 0 {
            for t in std::mem::take(&mut self.shards.threads) {
                let _ = t.join();
            }
            // Handed back by shards that closed first, after our own
            // detaching: let them go too.
            self.drain_commands();
            if !self.core.threads.is_empty() {
                self.detach_all();
            }
            group.restore_parks();
        }
    }
}

/// A handed-over thread was put back where it was parked (or died
/// parked).
pub(crate) fn note_handover(shard: &Option<ShardRef>, parked: std::time::Instant) {
    if let Some(s) = shard {
        s.group.landed();
        let ns = parked.elapsed().as_nanos() as u64;
        s.group.slots[s.index]
            .parked_ns
            .fetch_add(ns, Ordering::Relaxed);
    }
}

/// Parked threads at a time (see `hand_over`).
const IN_FLIGHT: usize = 1;

/// Stops of a thread on its shard before it may move: a thread that stops
/// this often keeps its tracer busy, while short-lived threads (a few
/// stops from birth to exit) are not worth a handover's cost (docs/internals/performance.md,
/// "Tracing many threads").
pub(crate) const SETTLE: u32 = 64;

/// A thread that may change shards: not a process leader, at a stop where
/// it can be parked, with nothing pending that belongs to this shard.
fn movable(t: &Thread) -> bool {
    t.tid != t.tgid
        && t.run == Run::Stopped
        && t.parkable != Parkable::No
        && !t.attachments.is_empty()
        && !t.group_stopped
        && !t.detach_pending
        && !t.quiesce_due
        && !t.stepping
        && !t.retrap
        && t.bp_step.is_none()
        && t.pending_signal.is_none()
        && t.injected.is_none()
        && t.prevailing() == ResumeAction::Resume
}

/// The registers of `t` now, those that park it on `park`, those that put
/// it back, and whether its syscall is made again: at a syscall entry the call is
/// skipped now (`orig_rax` -1) and the thread goes back to its `syscall`
/// instruction with the number in `rax`; elsewhere it goes back as it was.
#[cfg(target_arch = "x86_64")]
fn park_regs(t: &Thread, park: u64) -> Option<(super::Regs, super::Regs, super::Regs, bool)> {
    let regs = ptrace::get_regs(t.tid).ok()?;
    let retrap = t.parkable == Parkable::Entry;
    let restore = match retrap {
        true => ptrace::call_again(t.tid, &regs)?,
        false => regs,
    };
    let mut parked = regs;
    parked.rip = park;
    parked.orig_rax = u64::MAX;
    Some((regs, parked, restore, retrap))
}

/// Takes over a parked thread: seize, interrupt; its registers go back at
/// the interrupt's stop (`Tracer::on_status`).
fn adopt(core: &mut Core, mut thread: Thread) {
    let options = ptrace::OPTIONS
        | if thread.exitkill {
            ptrace::O_EXITKILL
        } else {
            0
        };
    // Gone meanwhile (its process was killed): nothing left to serve.
    if ptrace::seize(thread.tid, options).is_err() {
        crate::guardian::thread_back(thread.tid.0);
        if let Some(s) = &core.shard {
            s.group.landed();
        }
        return;
    }
    let _ = ptrace::interrupt(thread.tid);
    thread.run = Run::Running;
    thread.interrupted = true;
    core.busy += 1;
    if let Some(s) = &core.shard {
        s.group.slots[s.index]
            .adopted
            .fetch_add(1, Ordering::Relaxed);
        if s.group.ended().is_some() {
            thread.detach_pending = true;
        }
    }
    core.threads.insert(thread.tid, thread);
}

/// A shard thread: its own tracer, run until the group ends.
fn serve(
    group: Arc<Group>,
    index: usize,
    started: mpsc::Receiver<Start>,
    ready: mpsc::SyncSender<Result<()>>,
) {
    // However this thread ends (a panic in a callback too), shard 0 does
    // not wait for it.
    struct Done(Arc<Group>, usize);
    impl Drop for Done {
        fn drop(&mut self) {
            self.0.stop_serving(self.1);
        }
    }
    let _done = Done(Arc::clone(&group), index);
    let mut tracer = match Tracer::new() {
        Ok(t) => t,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let Ok(start) = started.recv() else {
        return;
    };
    for engine in (start.factory)() {
        tracer.engines.push(engine);
    }
    tracer.core.engine_count = tracer.engines.len() as u32;
    tracer.core.kill_on_signal = start.kill_on_signal;
    tracer.core.end_on_exit = start.end_on_exit;
    tracer.core.thread_listeners = start.thread_listeners;
    *lock(&group.slots[index].tx) = Some(tracer.sender.clone());
    *lock(&group.slots[index].ring) = Some(Arc::clone(&tracer.doorbell.ring));
    tracer.core.shard = Some(ShardRef {
        group: Arc::clone(&group),
        index,
    });
    let _ = ready.send(Ok(()));
    // However this thread ends (a panic in a callback too), the others end.
    struct EndGroup(Arc<Group>);
    impl Drop for EndGroup {
        fn drop(&mut self) {
            self.0.end(EndReason::Requested);
        }
    }
    let _end = EndGroup(group);
    let _ = tracer.run();
}

/// AT_ENTRY of process `tgid`, from its auxiliary vector.
fn entry_point(tgid: Tid) -> Option<u64> {
    let auxv = std::fs::read(format!("/proc/{}/auxv", tgid.0)).ok()?;
    auxv.chunks_exact(16).find_map(|pair| {
        let key = u64::from_ne_bytes(pair[..8].try_into().ok()?);
        let value = u64::from_ne_bytes(pair[8..].try_into().ok()?);
        (key == libc::AT_ENTRY).then_some(value)
    })
}

/// Writes `code` at `addr` in process `tgid` through /proc/PID/mem (which
/// writes read-only text for a tracer); returns the bytes it replaced.
fn write_code(tgid: Tid, addr: u64, code: &[u8; 2]) -> Option<[u8; 2]> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{}/mem", tgid.0))
        .ok()?;
    let mut old = [0u8; 2];
    mem.read_exact_at(&mut old, addr).ok()?;
    crate::guardian::text_written(tgid.0, addr, &old);
    mem.write_all_at(code, addr).ok()?;
    Some(old)
}
