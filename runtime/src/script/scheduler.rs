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
    interrupt();
}

/// Makes SIGINT, SIGTERM, SIGHUP and SIGQUIT end the session (end probes
/// still run).
pub fn install_interrupt_handler() {
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, on_signal as *const () as usize);
        }
    }
}

/// Ends the session as a signal would (e.g. when the output's reader has
/// gone); callable from any thread.
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // A handler stuck in a loop stops at its next back-edge.
    super::interrupt::request();
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

/// The timer probes of a session and when each fires next. A process
/// session's tracer loop embeds one: sleep (or wait for ptrace events)
/// until [`Timers::next_deadline`], then fire what [`Timers::pop_due`]
/// returns with [`ScriptRuntime::fire_timer`].
pub struct Timers {
    points: Vec<TimerPoint>,
    next: Vec<Instant>,
    jitter: Jitter,
}

impl Timers {
    pub fn new(points: Vec<TimerPoint>) -> Timers {
        let mut jitter = Jitter(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64);
        let now = Instant::now();
        let next = points.iter().map(|t| now + jitter.period(t)).collect();
        Timers {
            points,
            next,
            jitter,
        }
    }

    /// When the earliest timer fires (None without timers).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next.iter().min().copied()
    }

    /// The earliest timer due at `now`, rescheduled for its next period
    /// (a timer that fell behind does not fire in a burst).
    pub fn pop_due(&mut self, now: Instant) -> Option<TimerPoint> {
        let i = (0..self.points.len())
            .filter(|&i| self.next[i] <= now)
            .min_by_key(|&i| self.next[i])?;
        let period = self.jitter.period(&self.points[i]);
        self.next[i] += period;
        if self.next[i] < now {
            self.next[i] = now + period;
        }
        Some(self.points[i])
    }
}

/// Runs a whole session; returns the exit status.
pub fn run(rt: &mut ScriptRuntime, sink: &mut dyn OutputSink, time_limit: Option<Duration>) -> i32 {
    let start = Instant::now();
    let deadline = time_limit.map(|d| start + d);
    if let Some(d) = deadline {
        super::interrupt::at(d);
    }
    if rt.run_begin(sink) {
        run_timers(rt, sink, deadline);
    }
    super::interrupt::clear();
    sink.ending();
    rt.run_end(sink);
    rt.finish(sink)
}

fn run_timers(rt: &mut ScriptRuntime, sink: &mut dyn OutputSink, deadline: Option<Instant>) {
    let mut timers = Timers::new(rt.timers());
    loop {
        if interrupted() {
            return;
        }
        if rt.serve_metrics(sink, &|_| {}) {
            return;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return;
        }
        if let Some(timer) = timers.pop_due(now) {
            if rt.fire_timer_point(timer, sink).stop {
                return;
            }
            continue;
        }
        let mut wake = timers
            .next_deadline()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_deadline_order_and_reschedule() {
        let t = |probe, ms: u64| TimerPoint {
            probe,
            point: 0,
            period_ns: ms * 1_000_000,
            randomize_ns: 0,
        };
        let mut timers = Timers::new(vec![t(0, 10), t(1, 25)]);
        let start = timers.next_deadline().unwrap() - Duration::from_millis(10);
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(timers.pop_due(at(5)), None);
        let probe = |t: Option<TimerPoint>| t.map(|t| t.probe);
        assert_eq!(probe(timers.pop_due(at(10))), Some(0));
        assert_eq!(timers.pop_due(at(10)), None);
        assert_eq!(probe(timers.pop_due(at(26))), Some(0));
        assert_eq!(probe(timers.pop_due(at(26))), Some(1));
        assert_eq!(timers.next_deadline(), Some(at(30)));
    }
}
