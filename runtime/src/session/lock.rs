//! The session's lock: handlers of different tracer threads (shards, see
//! `utrace::shard`) may fire at once, and they share the session's state.
//!
//! Two levels, as SystemTap's per-probe locking needs:
//! - syscall and signal probe handlers (the hot path, and what the
//!   notification server runs) hold this lock *shared* ([`ScriptLock::for_probe_shared`])
//!   and run beside each other: each tracer thread on its own copy of the
//!   script (`Shared::run`: strings, output buffer, iterators, error
//!   message, MAXACTION, process facts), and each run takes the read/write
//!   locks of the globals its probe uses, in global order
//!   (`script::global_locks`, the sets computed by `utap_compiler::locks`),
//!   so a run is atomic over what it touches and handlers on disjoint
//!   globals run at once. The session's per-event state they share is
//!   behind its own small locks or atomics: the syscall entries awaiting
//!   their exit (`EntryArgs`, striped by thread: a thread handed over
//!   between entry and exit finds its entry on the other tracer thread),
//!   the quiesce list, the transport's producer (held for one push), the
//!   phase and the error and skip counts (`ScriptRuntime`'s tally), the
//!   end decision (`stopping`);
//! - everything else holds it *exclusive* ([`ScriptLock::for_probe`],
//!   [`ScriptLock::borrow_mut`]): begin/end/timer probes, clone, exec,
//!   death, quiesce and breakpoint events, the session's
//!   bookkeeping. They need no global lock: no handler runs meanwhile.
//!   They run on the first copy of the script.
//!
//! As SystemTap's, a probe handler never waits without bound: it tries
//! MAXTRYLOCK times, TRYLOCKDELAY µs apart, and then the probe is
//! *skipped* and counted ("skipped probes" in the end summary; more than
//! MAXSKIPPED end the session with SystemTap's error). The shared hold is
//! not one of SystemTap's locks: it waits out bookkeeping at least as long
//! as the default MAXTRYLOCK. Begin, end, timer and the session's own
//! bookkeeping wait as long as it takes.

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
/// strings, raw pointers valid during a run, the session's closures):
/// see the audit below for why sharing it is sound.
pub(crate) struct Confined(Shared);

// SAFETY: every access to the `Shared` goes through `ScriptLock`'s
// RwLock. With it held exclusive, nothing borrowed from the state outlives
// the guard. With it held shared (syscall handlers of several threads),
// each thread reaches only: its own copy of the script (`Shared::runs`,
// one mutex per tracer thread and one for the notification server); the
// globals under their own locks (`script::global_locks`); and the parts
// of `Shared` that are atomics or behind mutexes (`entry_args`,
// `quiescing`, `sink`, `stopping`) or only read while shared (`exe`,
// `finished`, `end_elsewhere`, `engine`).
// Audit (issue 16 point 2), what is not `Send`/`Sync` in `Shared`:
// - `ScriptState::{memory, sink}`: raw pointers set by `fire_point` for
//   one run and cleared by `end_run`, on the thread of the run;
// - `ScriptState::usdt` (`Rc<Marker>`) and `ufunc` (`Rc<str>` names),
//   `Shared::functions` (breakpoint tables with `Rc`s): only set in
//   function and marker sessions, which have one tracer thread, and only
//   with the lock exclusive (breakpoint events);
// - `Shared::{release, conclude}` closures: called by `end`, with the lock
//   exclusive, on the first tracer thread;
// - the globals (`SharedGlobals`): plain data under per-global locks;
//   statistics copies are per shard, their rows made before the tracer
//   threads start, flags and counters atomic (`globals::ShardCopies`);
// - `ScriptRuntime` itself (a `Box<HandlerContext>` with raw pointers):
//   each copy is used by one thread at a time, behind its mutex.
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
        let (tries, delay) = shared.first().limits().trylock();
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
