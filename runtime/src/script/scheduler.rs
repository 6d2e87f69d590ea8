//! The session driver for scripts without process probes: begin probes in
//! priority order, then timers until `exit()`, an error, SIGINT/SIGTERM or
//! the `-T` time limit, then end (or error) probes, autoprint and the
//! error summary.
//!
//! It sleeps between timer expirations on the calling thread; handlers
//! run on that same thread, so globals need no locks. A process session
//! reuses the same [`ScriptRuntime`] hooks from its tracer loop instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{OutputSink, ScriptRuntime, TimerPoint};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM end the session (end probes still run).
pub fn install_interrupt_handler() {
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as usize);
        libc::signal(libc::SIGTERM, on_signal as *const () as usize);
    }
}

/// Whether SIGINT/SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A small xorshift generator for `.randomize(M)` (no dependency, and
/// nothing here needs cryptographic quality). Also used by the process
/// session, whose tracer loop schedules the same timer probes.
pub struct Jitter(u64);

impl Jitter {
    /// A generator seeded with `seed` and utap's pid (never zero).
    pub fn new(seed: u64) -> Jitter {
        Jitter((0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64 ^ seed.rotate_left(17)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `period ± randomize`, at least 1 ns.
    pub fn period(&mut self, t: &TimerPoint) -> Duration {
        let mut ns = t.period_ns as i128;
        if t.randomize_ns > 0 {
            let span = 2 * t.randomize_ns as i128 + 1;
            ns += (self.next() as i128 % span) - t.randomize_ns as i128;
        }
        Duration::from_nanos(ns.max(1) as u64)
    }
}

/// Runs a whole session; returns the exit status.
pub fn run(rt: &mut ScriptRuntime, sink: &mut dyn OutputSink, time_limit: Option<Duration>) -> i32 {
    let start = Instant::now();
    let deadline = time_limit.map(|d| start + d);
    if rt.run_begin(sink) {
        run_timers(rt, sink, deadline);
    }
    rt.run_end(sink);
    rt.finish(sink)
}

fn run_timers(rt: &mut ScriptRuntime, sink: &mut dyn OutputSink, deadline: Option<Instant>) {
    let timers = rt.timers();
    let mut jitter = Jitter::new(0);
    let now = Instant::now();
    let mut next: Vec<Instant> = timers.iter().map(|t| now + jitter.period(t)).collect();
    loop {
        if interrupted() {
            return;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return;
        }
        // Fire every due timer, earliest first.
        let due = (0..timers.len())
            .filter(|&i| next[i] <= now)
            .min_by_key(|&i| next[i]);
        if let Some(i) = due {
            let outcome = rt.fire_timer(timers[i].probe, sink);
            next[i] += jitter.period(&timers[i]);
            if next[i] < now {
                // Fell behind (a slow handler): do not fire in a burst.
                next[i] = now + jitter.period(&timers[i]);
            }
            if outcome.stop {
                return;
            }
            continue;
        }
        let mut wake = next
            .iter()
            .min()
            .copied()
            .unwrap_or(now + Duration::from_secs(3600));
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        // Sleep in short slices so SIGINT is noticed promptly.
        let nap = wake
            .saturating_duration_since(now)
            .min(Duration::from_millis(20));
        std::thread::sleep(nap);
    }
}
