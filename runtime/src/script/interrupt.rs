//! The interrupt flag that native loops check at every back-edge.
//!
//! Handlers run on the tracer thread (or the scheduler's), so a handler
//! stuck in a long loop (a huge `-D MAXACTION`) keeps that thread from
//! seeing a signal or the `-T` deadline. Compiled code therefore loads this
//! one byte at each loop back-edge (one load and one branch, next to the
//! MAXACTION count) and raises SystemTap's "interrupted" error when it is
//! set. Termination signals and the `-T` watchdog set it; it is cleared
//! when the end probes start, so they can run their own loops (a second
//! signal interrupts them again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static FLAG: AtomicBool = AtomicBool::new(false);

/// Asks running handlers to stop at their next loop back-edge.
/// Async-signal-safe.
pub fn request() {
    FLAG.store(true, Ordering::Relaxed);
}

/// The end probes are about to run: let them loop.
pub fn clear() {
    FLAG.store(false, Ordering::Relaxed);
}

/// Whether an interrupt is pending.
pub fn requested() -> bool {
    FLAG.load(Ordering::Relaxed)
}

/// The flag's address, for compiled code (a byte: nonzero means stop).
pub fn flag_address() -> usize {
    FLAG.as_ptr() as usize
}

/// Interrupts handlers at `deadline` from a thread of its own (the thread
/// that runs handlers may be the one stuck), for `-T`.
pub fn at(deadline: Instant) {
    let _ = std::thread::Builder::new()
        .name("utap-deadline".into())
        .spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            request();
        });
}
