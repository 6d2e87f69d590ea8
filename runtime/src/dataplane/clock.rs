//! The clock of in-process handlers: `gettimeofday_*()`, `local_clock_ns()`
//! and `get_cycles()` without a syscall and without calling the program's
//! vDSO. A handler reads the time stamp counter and turns it into
//! nanoseconds with parameters the tracer keeps in the region's header
//! ([`Clock`], under a sequence count); the tracer samples the kernel's
//! clocks against the counter at the start and every [`REFRESH`] after.
//!
//! Invariants:
//! * **Only with an invariant TSC that the kernel itself uses as its
//!   clocksource** ([`usable`]): the counter then runs at one rate on every
//!   CPU and in the kernel's clocks; otherwise clock reads keep their
//!   probe in the tracer (`utap_compiler::route`).
//! * **Monotonic**: a refresh keeps the clock continuous where it takes
//!   over (its base is the old parameters' reading) and corrects the
//!   drift it finds by slewing the rate, never by a step; only the
//!   offset of the time of day steps, when the kernel's does
//!   (`settimeofday`, more than [`STEP`] off).
//! * **Untrusted**: the program can write the header; a reader that finds
//!   the sequence count moving tries a bounded number of times and then
//!   takes what it read (a spoilt number, never a hang).
//!
//! Two readings, one in the program and one in the tracer, agree within
//! a few microseconds (the sampling error of the rate over the first
//! refresh); intervals are exact to the rate's error (parts per million).

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

/// The clock's parameters, in the region's header.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Clock {
    /// Even when stable; odd while the tracer writes.
    pub seq: u64,
    /// The counter's value at the base.
    pub base_tsc: u64,
    /// CLOCK_MONOTONIC nanoseconds at the base.
    pub base_ns: u64,
    /// Nanoseconds per counter tick, fixed point 32.32.
    pub mult: u64,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, in nanoseconds.
    pub real_offset: i64,
}

/// How often the tracer samples the kernel's clocks again.
pub const REFRESH: Duration = Duration::from_millis(200);
/// A time of day this far from ours is a step of the kernel's, followed.
const STEP: i64 = 1_000_000;
/// The largest rate correction of one refresh, in parts per million.
const MAX_SLEW_PPM: i128 = 500;

/// `rdtsc` as a function of the SysV ABI: the 64-bit counter in rax.
pub const RDTSC: &[u8] = &[
    0x0f, 0x31, // rdtsc
    0x48, 0xc1, 0xe2, 0x20, // shl $32,%rdx
    0x48, 0x09, 0xd0, // or %rdx,%rax
    0xc3, // ret
];
/// The CPU the thread runs on: `rdtscp` puts the kernel's TSC_AUX in ecx
/// (the CPU number in bits 0..12, as the vDSO's getcpu reads it).
pub const RDTSCP_CPU: &[u8] = &[
    0x0f, 0x01, 0xf9, // rdtscp
    0x89, 0xc8, // mov %ecx,%eax
    0x25, 0xff, 0x0f, 0x00, 0x00, // and $0xfff,%eax
    0xc3, // ret
];

/// Whether handlers in the program may read the clock: the kernel's
/// clocksource is the TSC (`Err` says which it is instead).
pub fn usable() -> Result<(), String> {
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim() == "tsc" => Ok(()),
        Ok(s) => Err(format!("the clocksource is {}, not tsc", s.trim())),
        Err(e) => Err(format!("the clocksource is unknown ({path}: {e})")),
    }
}

/// Whether `rdtscp` is there (cpu() in the program).
pub fn has_rdtscp() -> bool {
    let ext = std::arch::x86_64::__cpuid(0x8000_0001);
    ext.edx & (1 << 27) != 0
}

/// The counter, here.
pub fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions.
    unsafe { std::arch::x86_64::_rdtsc() }
}

fn clock_ns(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes only `ts`.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// One reading of the kernel's clocks against the counter: the counter
/// halfway through the tightest of a few tries.
#[derive(Clone, Copy, Debug)]
struct Sample {
    tsc: u64,
    mono: i64,
    real: i64,
}

fn sample() -> Sample {
    let mut best: Option<(u64, Sample)> = None;
    for _ in 0..5 {
        let t0 = tsc();
        let mono = clock_ns(libc::CLOCK_MONOTONIC);
        let t1 = tsc();
        let real = clock_ns(libc::CLOCK_REALTIME);
        let width = t1.wrapping_sub(t0);
        let s = Sample {
            tsc: t0 + width / 2,
            mono,
            real,
        };
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, s));
        }
    }
    best.expect("five tries").1
}

/// `(a * b) >> 32` without overflow.
fn scale(delta: u64, mult: u64) -> u64 {
    ((delta as u128 * mult as u128) >> 32) as u64
}

/// The tracer's side: calibration and refreshes of one header's clock.
pub struct Keeper {
    clock: *mut Clock,
    first: Sample,
    last: Instant,
}

// SAFETY: the pointer is into the region's mapping, which outlives the
// keeper (both belong to the image); writes go through atomics.
unsafe impl Send for Keeper {}
unsafe impl Sync for Keeper {}

impl Keeper {
    /// Calibrates the counter against CLOCK_MONOTONIC over `window` (a
    /// busy wait: a millisecond gives the rate to a few parts in 10^5,
    /// which the refreshes then slew away) and writes the parameters.
    ///
    /// # Safety
    /// `clock` points at the header's clock in a live mapping.
    pub unsafe fn start(clock: *mut Clock, window: Duration) -> Keeper {
        let first = sample();
        let until = Instant::now() + window;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let now = sample();
        let mult = rate(&first, &now).unwrap_or(1 << 32);
        let k = Keeper {
            clock,
            first,
            last: Instant::now(),
        };
        k.write(now.tsc, now.mono as u64, mult, now.real - now.mono);
        k
    }

    /// Samples the kernel's clocks again if [`REFRESH`] has passed: the
    /// new base is where the current parameters put the counter now, the
    /// new rate the whole run's measured rate corrected to meet the
    /// kernel's clock one refresh from now.
    pub fn tick(&mut self) {
        if self.last.elapsed() < REFRESH {
            return;
        }
        self.last = Instant::now();
        let now = sample();
        let (base_tsc, base_ns, mult, offset) = self.read();
        let ours = base_ns.wrapping_add(scale(now.tsc.wrapping_sub(base_tsc), mult)) as i64;
        let Some(measured) = rate(&self.first, &now) else {
            return;
        };
        // Nanoseconds to make up (positive: ours is behind), over the
        // ticks of one refresh.
        let behind = (now.mono - ours) as i128;
        let ticks = (REFRESH.as_nanos() as i128 * (1 << 32)) / measured.max(1) as i128;
        let correction = (behind << 32) / ticks.max(1);
        let bound = measured as i128 * MAX_SLEW_PPM / 1_000_000;
        let mult = (measured as i128 + correction.clamp(-bound, bound)) as u64;
        let real_offset = now.real - now.mono;
        let offset = if (real_offset - offset).abs() > STEP {
            real_offset
        } else {
            offset
        };
        self.write(now.tsc, ours as u64, mult, offset);
    }

    fn read(&self) -> (u64, u64, u64, i64) {
        let c = self.atomics();
        (
            c[1].load(Ordering::Relaxed),
            c[2].load(Ordering::Relaxed),
            c[3].load(Ordering::Relaxed),
            c[4].load(Ordering::Relaxed) as i64,
        )
    }

    fn write(&self, base_tsc: u64, base_ns: u64, mult: u64, real_offset: i64) {
        let c = self.atomics();
        let seq = c[0].load(Ordering::Relaxed) | 1;
        c[0].store(seq, Ordering::Relaxed);
        fence(Ordering::Release);
        c[1].store(base_tsc, Ordering::Relaxed);
        c[2].store(base_ns, Ordering::Relaxed);
        c[3].store(mult, Ordering::Relaxed);
        c[4].store(real_offset as u64, Ordering::Relaxed);
        c[0].store(seq.wrapping_add(1), Ordering::Release);
    }

    fn atomics(&self) -> &[AtomicU64; 5] {
        // SAFETY: `Clock` is five aligned u64s in a live shared mapping.
        unsafe { &*(self.clock as *const [AtomicU64; 5]) }
    }
}

/// Nanoseconds per tick between two samples, 32.32.
fn rate(a: &Sample, b: &Sample) -> Option<u64> {
    let ticks = b.tsc.checked_sub(a.tsc).filter(|&t| t > 0)?;
    let ns = u64::try_from(b.mono - a.mono).ok().filter(|&n| n > 0)?;
    u64::try_from(((ns as u128) << 32) / ticks as u128).ok()
}

/// What a handler computes, here (tests compare the two).
pub fn read_mono(clock: &Clock) -> i64 {
    let t = tsc();
    clock
        .base_ns
        .wrapping_add(scale(t.wrapping_sub(clock.base_tsc), clock.mult)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_follows_the_kernels() {
        if usable().is_err() {
            eprintln!("skipped: the clocksource is not tsc");
            return;
        }
        let mut c = Box::new(Clock::default());
        // SAFETY: a live Clock of ours.
        let mut k = unsafe { Keeper::start(&mut *c, Duration::from_millis(1)) };
        let mut last = 0;
        for _ in 0..3 {
            std::thread::sleep(REFRESH + Duration::from_millis(5));
            k.tick();
            for _ in 0..1000 {
                // Read between two kernel readings: a preemption between
                // them widens the bracket, it is not the clock's error.
                let before = clock_ns(libc::CLOCK_MONOTONIC);
                let ours = read_mono(&c);
                let after = clock_ns(libc::CLOCK_MONOTONIC);
                assert!(ours >= last, "went back: {last} then {ours}");
                assert!(
                    ours > before - 200_000 && ours < after + 200_000,
                    "{ours} not within {before}..{after} (± 200 µs)"
                );
                last = ours;
            }
        }
    }
}
