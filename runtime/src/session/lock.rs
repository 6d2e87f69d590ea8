//! The script's lock: handlers of different tracer threads (shards, see
//! `utrace::shard`) may fire at once, and they share the script's state.
//!
//! SystemTap locks, per probe handler, the globals the handler uses (read
//! locks for reads, write locks for writes) in a fixed order, so a handler
//! never sees another's partial update. utap takes one lock over the whole
//! script state instead: it gives the same guarantee (each handler run is
//! atomic with respect to every other), cannot deadlock, and costs little
//! parallelism here, because a handler run is a small part of a ptrace
//! stop (≈3% of the tracer's samples, `utrace` module docs): what the
//! tracer threads do in parallel is the stops, which take no lock. It also
//! keeps the per-run scratch (strings, `foreach` iterators, the run's output
//! buffer, the error message, MAXACTION) private to the run. Statistics
//! already have SystemTap's per-CPU layout (`script::globals::ShardCopies`:
//! `<<<` goes to the tracer thread's own copy, reads fold them), which is
//! what lets a `<<<` take a *read* lock once globals get their own locks.
//!
//! What per-global locks still need (not built): the per-run scratch and
//! the `HandlerContext` per tracer thread instead of one in
//! `ScriptRuntime`; the long slots and string/array globals behind one
//! `RwLock` each, taken per probe in global-index order from the probe's
//! read/write set (SystemTap's `locks[]`, computed by its translator); the
//! session's per-event maps in `Shared` (`entry_args`, `live`) under their
//! own small locks, since a thread handed over between a syscall's entry
//! and exit finds its entry on the other tracer thread; and the error,
//! skip and phase counters of `ScriptRuntime` shared between the copies.
//!
//! As SystemTap's, a probe handler never waits for the lock without bound:
//! it tries MAXTRYLOCK times, TRYLOCKDELAY µs apart, and then the probe is
//! *skipped* and counted ("skipped probes" in the end summary; more than
//! MAXSKIPPED end the session with SystemTap's error). Begin, end, timer
//! and the session's own bookkeeping wait as long as it takes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use super::engine::Shared;
use crate::script::global_locks::backoff;

/// [`Shared`] behind the script's lock.
pub(crate) struct ScriptLock {
    inner: RwLock<Confined>,
    /// Probes skipped since the last time the count was folded into the
    /// script (by whoever holds the lock next).
    skipped: AtomicU64,
    /// MAXTRYLOCK and TRYLOCKDELAY, read once.
    tries: u64,
    /// How often a syscall handler tries for its shared hold: not a lock
    /// of SystemTap's (MAXTRYLOCK is about the globals' locks), it waits
    /// out bookkeeping at least as long as the default MAXTRYLOCK.
    shared_tries: u64,
    delay: Duration,
}

/// The state, which holds single-threaded parts (reference-counted
/// strings, raw pointers valid during a run, the session's closures).
pub(crate) struct Confined(Shared);

// SAFETY: every access to the `Shared` goes through `ScriptLock`'s
// RwLock, and nothing borrowed from it outlives the guard: the Rc values
// inside are cloned and dropped only by the lock's holder, the raw
// pointers of a handler run are set and cleared within it, and the
// session's closures run under the lock too. Sessions whose state hands
// out values across threads (function and marker probes, the profile
// sampler, guru thread control) are never sharded (`shard_count`).
// Audit (issue 16 point 2), what is not `Send`/`Sync` in `Shared`:
// - `ScriptState::{memory, sink}`: raw pointers set by `fire_point` for
//   one run and cleared by `end_run` before the guard is dropped;
// - `ScriptState::usdt` (`Rc<Marker>`) and `ufunc` (`Rc<str>` names),
//   `Shared::functions` (breakpoint tables with `Rc`s): only in function
//   and marker sessions, which have one tracer thread;
// - `Shared::{release, conclude, end_elsewhere}` closures: called by the
//   guard's holder (`end`), on the first tracer thread;
// - per-shard statistics copies (`Globals::copies`): plain data, written
//   by `<<<` and folded by readers, both under the write guard.
// Readers through `borrow()` (a shared guard) only read plain fields
// (`finished`, the timer list, `has_metrics`, the daemon's status line
// with `sink.lost()`); none clones an `Rc`.
unsafe impl Send for Confined {}
unsafe impl Sync for Confined {}

/// The script's state, held for a handler run (derefs to `Shared`).
pub(crate) type Guard<'a> = RwLockWriteGuard<'a, Confined>;

impl std::ops::Deref for Confined {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl std::ops::DerefMut for Confined {
    fn deref_mut(&mut self) -> &mut Shared {
        &mut self.0
    }
}

impl ScriptLock {
    pub fn new(shared: Shared) -> ScriptLock {
        let limits = shared.first().limits().clone();
        let tries = limits.max_trylock.max(1) as u64;
        let delay = Duration::from_micros(limits.trylock_delay_us.max(0) as u64);
        ScriptLock {
            inner: RwLock::new(Confined(shared)),
            skipped: AtomicU64::new(0),
            tries,
            shared_tries: tries.max(100_000),
            delay,
        }
    }

    /// Waits for the state (begin/end probes, timers, bookkeeping).
    pub fn borrow_mut(&self) -> Guard<'_> {
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        fold_skipped(&self.skipped, &mut g);
        g
    }

    /// Waits to read the state.
    pub fn borrow(&self) -> RwLockReadGuard<'_, Confined> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// For a probe handler: the state, or `None` (the probe is skipped and
    /// counted) when it stays busy for MAXTRYLOCK tries.
    pub fn for_probe(&self) -> Option<Guard<'_>> {
        for attempt in 0..self.tries {
            match self.inner.try_write() {
                Ok(mut g) => {
                    fold_skipped(&self.skipped, &mut g);
                    return Some(g);
                }
                Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            backoff(attempt, self.delay);
        }
        self.skipped.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// For a syscall probe handler, which runs beside the other tracer
    /// threads' under the globals' own locks (`script::global_locks`): the
    /// state held shared, or `None` (skipped and counted) when bookkeeping
    /// holds it for MAXTRYLOCK tries.
    pub fn for_probe_shared(&self) -> Option<RwLockReadGuard<'_, Confined>> {
        for attempt in 0..self.shared_tries {
            match self.inner.try_read() {
                Ok(g) => return Some(g),
                Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            backoff(attempt, self.delay);
        }
        self.skipped.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// Probes skipped while the lock was busy go into the script's count (and
/// its MAXSKIPPED check) as soon as someone holds the lock.
fn fold_skipped(skipped: &AtomicU64, g: &mut Confined) {
    if skipped.load(Ordering::Relaxed) == 0 {
        return;
    }
    let n = skipped.swap(0, Ordering::Relaxed);
    let s = &mut g.0;
    // Past MAXSKIPPED the script is in its error phase: the next handler
    // run's outcome ends the session.
    let (run, sink) = s.script_and_sink();
    run.note_skipped(n, sink);
}
