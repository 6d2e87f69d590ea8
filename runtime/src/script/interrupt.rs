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

use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Instant;

/// Low byte (the one compiled code loads; x86_64 is little-endian): an
/// interrupt is pending. High byte: the session is ending, so a `-T`
/// watchdog that wakes late must not interrupt the end probes.
static STATE: AtomicU16 = AtomicU16::new(0);
const PENDING: u16 = 0x0001;
const ENDING: u16 = 0x0100;

/// Asks running handlers to stop at their next loop back-edge (a signal:
/// also during the end probes). Async-signal-safe.
pub fn request() {
    STATE.fetch_or(PENDING, Ordering::Relaxed);
}

/// The end probes are about to run: let them loop; from now on only a
/// signal interrupts them, not the deadline.
pub fn clear() {
    STATE.store(ENDING, Ordering::Relaxed);
}

/// Whether an interrupt is pending.
pub fn requested() -> bool {
    STATE.load(Ordering::Relaxed) & PENDING != 0
}

/// The flag's address, for compiled code (a byte: nonzero means stop).
pub fn flag_address() -> usize {
    STATE.as_ptr() as usize
}

/// Interrupts handlers at `deadline` from a thread of its own (the thread
/// that runs handlers may be the one stuck), for `-T`; not once the end
/// probes have started.
pub fn at(deadline: Instant) {
    let _ = std::thread::Builder::new()
        .name("utap-deadline".into())
        .spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            crate::endtrace::mark("deadline: watchdog woke");
            // The end is decided: our threads must not wait behind the
            // tracees (a thousand busy ones took 10 s, see crate::hurry).
            crate::hurry::now();
            let _ = STATE.compare_exchange(0, PENDING, Ordering::Relaxed, Ordering::Relaxed);
        });
}
