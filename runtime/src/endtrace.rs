//! `UTAP_END_TRACE=1`: timestamps of the steps that end a session, on
//! stderr, to see where the time goes between the deadline (or signal) and
//! the shell getting its prompt back (issue 11: "within 100 ms").

use std::sync::OnceLock;
use std::time::Instant;

fn origin() -> Option<Instant> {
    static ORIGIN: OnceLock<Option<Instant>> = OnceLock::new();
    *ORIGIN.get_or_init(|| std::env::var_os("UTAP_END_TRACE").map(|_| Instant::now()))
}

/// Starts the clock (call early; later calls do nothing).
pub fn start() {
    let _ = origin();
}

/// Prints `what` with the milliseconds since [`start`], when enabled.
pub fn mark(what: &str) {
    if let Some(t0) = origin() {
        // SAFETY: gettid has no memory effects.
        let tid = unsafe { libc::gettid() };
        eprintln!(
            "utap-end: {:9.3} ms [{tid}] {what}",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
}
