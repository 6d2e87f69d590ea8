//! Per-global locks, SystemTap's way: every global has a reader-writer
//! lock, and a probe handler that may run beside others (a syscall probe
//! on one of several tracer threads) takes the locks of the globals it
//! uses (its lock set, computed by the compiler, `utap_compiler::locks`)
//! in global-index order before it runs, and lets them go after. Two
//! handlers touching disjoint globals run at once; two touching the same
//! one run one after the other, each atomic as a whole.
//!
//! The globals themselves stay where native code finds them (the long
//! slot vector, `Globals::vars`) in one store shared by every runtime
//! copy of the script ([`SharedGlobals`]); the locks are the only guard.
//! The runtime functions reach the store through a `&mut Globals` made
//! for the call, so two tracer threads may hold one at the same time,
//! each touching only the globals whose locks it holds (and its own
//! statistics copies): sound in what memory is accessed, though a cell
//! per global would state it in the types.
//!
//! As in SystemTap, a lock is never waited for without bound: each one is
//! tried MAXTRYLOCK times, TRYLOCKDELAY µs apart, and when one stays busy
//! the locks already taken are let go and the probe is skipped (and
//! counted). What has the whole script to itself (begin/end/timer probes,
//! the session's bookkeeping) needs none of these: it holds the session's
//! exclusive lock (`session::lock`), which no parallel handler holds.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::globals::Globals;

/// One global of a probe's lock set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalLock {
    /// Index in `ScriptImage::globals`.
    pub global: u32,
    /// Exclusive (a write, or a read of a statistic); else shared.
    pub write: bool,
}

/// A reader-writer spin lock: a handler holds one for microseconds, and a
/// tracer thread must never sleep in the kernel on another's behalf.
#[derive(Default)]
pub struct RwSpin(AtomicU32);

const WRITER: u32 = 1 << 31;

impl RwSpin {
    pub fn try_read(&self) -> bool {
        let mut s = self.0.load(Ordering::Relaxed);
        loop {
            if s & WRITER != 0 {
                return false;
            }
            match self
                .0
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    pub fn try_write(&self) -> bool {
        self.0
            .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn try_lock(&self, write: bool) -> bool {
        match write {
            true => self.try_write(),
            false => self.try_read(),
        }
    }

    fn unlock(&self, write: bool) {
        match write {
            true => self.0.store(0, Ordering::Release),
            false => drop(self.0.fetch_sub(1, Ordering::Release)),
        }
    }
}

/// How long to wait before try `attempt` + 1 of a busy lock: spin, then
/// yield, then sleep TRYLOCKDELAY. The holder is usually mid-handler (a
/// microsecond) on another CPU, or preempted on this one; a sleep costs a
/// timer's slack (≈50 µs), so it comes last.
pub fn backoff(attempt: u64, delay: Duration) {
    if attempt < 256 {
        std::hint::spin_loop();
    } else if attempt < 4096 || delay.is_zero() {
        std::thread::yield_now();
    } else {
        std::thread::sleep(delay);
    }
}

/// The script's globals and their locks, shared by every runtime copy.
struct Store {
    globals: UnsafeCell<Globals>,
    locks: Vec<RwSpin>,
    /// A handler ended the script (exit(), an error): set before its
    /// locks are let go, so a handler of another tracer thread that was
    /// waiting on them sees it and does not run (as SystemTap's, no probe
    /// runs after exit()).
    ended: std::sync::atomic::AtomicBool,
}

/// A handle on the shared globals. It derefs to [`Globals`]: callers
/// access a global only under its lock (a parallel handler, through its
/// probe's lock set) or with the whole script to themselves (everything
/// else, see the module doc).
#[derive(Clone)]
pub struct SharedGlobals(Arc<Store>);

// SAFETY: the globals are plain data (no Rc, no thread-bound pointer);
// concurrent access is governed by the per-global locks, see above.
unsafe impl Send for Store {}
unsafe impl Sync for Store {}

impl SharedGlobals {
    pub fn new(globals: Globals) -> SharedGlobals {
        let locks = (0..globals.vars.len()).map(|_| RwSpin::default()).collect();
        SharedGlobals(Arc::new(Store {
            globals: UnsafeCell::new(globals),
            locks,
            ended: Default::default(),
        }))
    }

    /// A handler ended the script: no handler run beside it starts now.
    pub fn mark_ended(&self) {
        self.0
            .ended
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn ended(&self) -> bool {
        self.0.ended.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Takes the locks of `set` (sorted by global) with SystemTap's
    /// bounded tries; false (nothing held) when one stays busy.
    pub fn lock_set(&self, set: &[GlobalLock], tries: u64, delay: Duration) -> bool {
        for (i, l) in set.iter().enumerate() {
            let lock = &self.0.locks[l.global as usize];
            let mut attempt = 0;
            while !lock.try_lock(l.write) {
                attempt += 1;
                if attempt >= tries {
                    self.unlock_set(&set[..i]);
                    return false;
                }
                backoff(attempt, delay);
            }
        }
        true
    }

    /// Lets go of the locks [`SharedGlobals::lock_set`] took.
    pub fn unlock_set(&self, set: &[GlobalLock]) {
        for l in set.iter().rev() {
            self.0.locks[l.global as usize].unlock(l.write);
        }
    }
}

impl std::ops::Deref for SharedGlobals {
    type Target = Globals;
    fn deref(&self) -> &Globals {
        // SAFETY: see the type's doc: the lock discipline guards access.
        unsafe { &*self.0.globals.get() }
    }
}

impl std::ops::DerefMut for SharedGlobals {
    fn deref_mut(&mut self) -> &mut Globals {
        // SAFETY: as for `deref`.
        unsafe { &mut *self.0.globals.get() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_writers_exclude() {
        let l = RwSpin::default();
        assert!(l.try_read() && l.try_read());
        assert!(!l.try_write());
        l.unlock(false);
        l.unlock(false);
        assert!(l.try_write());
        assert!(!l.try_read() && !l.try_write());
        l.unlock(true);
        assert!(l.try_read());
    }
}
