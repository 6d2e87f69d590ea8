//! Tracer co-location: the tracer thread goes to the CPU its tracee runs
//! on, so a ptrace stop is a switch between two tasks of one CPU instead of
//! a wake-up of an idle (halted) one.
//!
//! A ptrace stop costs ≈3 µs when tracer and tracee share a CPU and up to
//! ≈45 µs when each stop must wake an idle CPU (`shared/docs/DESIGN.md`).
//! The tracee's own affinity and the CPU count it sees must not change, so
//! only the tracer thread moves: `sched_setaffinity` on itself, to the CPU
//! the thread it is handling last ran on (`/proc/TID/stat`, read at most
//! once per [`RECHECK`] so the cost stays off the per-stop path).
//!
//! Pinning alone is not enough in theory: when the tracer resumes its
//! tracee it is itself still running on their shared CPU, so the scheduler
//! places the woken tracee on the idle CPU and the two ping-pong again.
//! With the tracer thread in `SCHED_IDLE` the shared CPU counts as idle for
//! that placement (`sched_idle_cpu`), the tracee stays, and it preempts the
//! tracer at once. The alternative to moving is never sleeping: `Poll`
//! keeps the tracer's CPU awake between close stops.
//!
//! `SCHED_IDLE` loses to every other runnable task on its CPU, so an
//! `Idle` tracer is one only while nothing else is runnable (the running
//! count of `/proc/loadavg`, at most every 2 ms): otherwise it is a normal
//! unpinned thread for 200 ms, then looks again. (Watching its own
//! run-queue wait instead does not work: a co-located tracer waits behind
//! its own tracee by design.)
//!
//! # Measured (tests/bench/overhead.py, `UTAP_COLOCATE=off|pin|idle|poll`)
//!
//! 2-CPU VM, `syscall.*` counting (one seccomp stop per syscall):
//!
//! * Other CPU idle, `loop 20000`: off 0.33–1.20 s, pin 0.38–0.69 s,
//!   poll 0.40–0.41 s, **idle 0.088–0.29 s** (`strace -f -c`: 0.42–1.50 s).
//!   Pinning alone does not help (the woken tracee is placed on the idle
//!   CPU); polling keeps only the tracer's side awake.
//! * Other CPU busy (load 2.4), `loop 200000`: off 0.683 s, pin 0.672 s,
//!   idle 0.606 s: the scheduler already shares the free CPU.
//! * Both CPUs busy with other work, `loop 50000`: off 0.18–0.87 s, idle
//!   0.19–0.29 s (without the guard idle took up to 2.59 s).
//! * A 2-thread CPU-bound tracee keeps both CPUs: `spin 2` 0.46–0.54 s
//!   untraced, 0.48–0.52 s traced (one thread alone 0.44 s); its running
//!   threads make the tracer a normal unpinned thread.
//!
//! So `Idle` is the default.
//!
//! # Starvation
//!
//! The guard above runs in the tracer thread, so it cannot run while the
//! tracer is starved: on a CPU busy with other work from the moment it
//! went idle, the tracer got almost no time, and every tracee thread sat
//! in its stop for as long as the other work ran (200 attached threads
//! made no traced syscall in a half-second session under CI's load). A
//! [`Rescue`] thread, started with the first idle tracer, looks every
//! [`RESCUE_EVERY`]: an idle tracer that is runnable and has handled no
//! stop since the last look is put back in its own policy from outside,
//! and backs off as if its guard had seen the competition.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::{Tid, ptrace};

/// How the tracer thread places itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colocation {
    /// Wherever the scheduler puts it.
    Off,
    /// Pinned to the CPU of the thread it last handled.
    Pin,
    /// Pinned as `Pin`, and in `SCHED_IDLE` so the tracee is woken on the
    /// shared CPU; backs off while other work shares that CPU.
    Idle,
    /// Not co-location but its alternative: after each stop the tracer
    /// polls `waitpid(WNOHANG)` for up to [`POLL`] before it sleeps, so its
    /// CPU never goes idle while stops keep coming.
    Poll,
}

impl Colocation {
    /// The mode named by `UTAP_COLOCATE` (`off`, `pin`, `idle`, `poll`),
    /// else the default.
    pub fn from_env() -> Colocation {
        match std::env::var("UTAP_COLOCATE").as_deref() {
            Ok("off") => Colocation::Off,
            Ok("pin") => Colocation::Pin,
            Ok("idle") => Colocation::Idle,
            Ok("poll") => Colocation::Poll,
            _ => DEFAULT,
        }
    }
}

/// The default: 4–12x fewer seconds per stop than the scheduler's own
/// placement on an idle machine, no worse under load (module docs).
pub const DEFAULT: Colocation = Colocation::Idle;

/// How long a `Poll` tracer polls after a stop before it sleeps.
pub const POLL: Duration = Duration::from_micros(50);

/// How often the tracee's CPU is looked up again.
pub const RECHECK: Duration = Duration::from_millis(2);

/// How long an `Idle` tracer that found other work runnable stays a
/// normal, unpinned thread.
pub const BACKOFF: Duration = Duration::from_millis(200);

/// How many checks in a row must find other work runnable before an
/// `Idle` tracer backs off. One sighting is most often a blip (a kernel
/// thread such as `kdamond`, a daemon's periodic wake-up, the output
/// thread draining); backing off on it left the tracer unpinned for 200 ms
/// each time, which made entry-only counting 1.60x the floor tracer
/// instead of 1.26x on the idle VM (`tests/bench/scale.py --floor-only`,
/// 5 rounds). Real competition is still seen within a few milliseconds.
pub const STRIKES: u8 = 3;

/// How often the [`Rescue`] thread looks at the idle tracers.
pub const RESCUE_EVERY: Duration = Duration::from_millis(10);

/// The tracer thread's placement state.
pub(crate) struct Colocator {
    mode: Colocation,
    cpu: Option<usize>,
    checked: Option<Instant>,
    /// `Idle` backed off (other work shares the CPU) until then.
    backoff: Option<Instant>,
    /// Checks in a row that found other work runnable (see [`STRIKES`]).
    strikes: u8,
    /// The tracer thread's affinity and policy before it moved, restored
    /// when `run` ends.
    saved: Option<(libc::cpu_set_t, i32)>,
    /// What the [`Rescue`] thread sees of this tracer, once it went idle.
    watch: Option<Arc<Watch>>,
}

impl Colocator {
    pub fn new(mode: Colocation) -> Colocator {
        Colocator {
            mode,
            cpu: None,
            checked: None,
            backoff: None,
            strikes: 0,
            saved: None,
            watch: None,
        }
    }

    pub fn set_mode(&mut self, mode: Colocation) {
        self.mode = mode;
    }

    /// The next wait status (`waitpid` of any tracee or child of this
    /// thread), polled for a while first in `Poll` mode.
    pub fn wait(&mut self) -> std::result::Result<Option<(Tid, i32)>, i32> {
        if self.mode == Colocation::Poll {
            if let Some(last) = self.checked {
                while last.elapsed() < POLL {
                    if let Some(w) = ptrace::wait_any(libc::WUNTRACED | libc::WNOHANG)? {
                        self.checked = Some(Instant::now());
                        return Ok(Some(w));
                    }
                    std::hint::spin_loop();
                }
            }
            let w = ptrace::wait_any(libc::WUNTRACED)?;
            self.checked = Some(Instant::now());
            return Ok(w);
        }
        ptrace::wait_any(libc::WUNTRACED)
    }

    /// At a stop of `tid`: moves the tracer to `tid`'s CPU when it has
    /// changed (looked up at most once per `RECHECK`).
    pub fn at_stop(&mut self, tid: Tid) {
        if matches!(self.mode, Colocation::Off | Colocation::Poll) {
            return;
        }
        let now = Instant::now();
        if self
            .checked
            .is_some_and(|t| now.duration_since(t) < RECHECK)
        {
            return;
        }
        self.checked = Some(now);
        if let Some(w) = &self.watch {
            w.progress.fetch_add(1, Ordering::Relaxed);
            if w.rescued.swap(false, Ordering::Relaxed) {
                // Put back in its policy from outside: back off.
                self.restore();
                self.backoff = Some(now + BACKOFF);
                return;
            }
        }
        if self.mode == Colocation::Idle && self.starved(now) {
            return;
        }
        let Some(cpu) = last_cpu(tid) else { return };
        if self.cpu == Some(cpu) {
            return;
        }
        if self.saved.is_none() {
            let saved = save();
            self.saved = Some(saved);
            if self.mode == Colocation::Idle {
                let watch = self.watch.get_or_insert_with(Rescue::watch);
                watch.policy.store(saved.1, Ordering::Relaxed);
                set_policy(libc::SCHED_IDLE);
                watch.idle.store(true, Ordering::Release);
            }
        }
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu` < CPU_SETSIZE (it came from the kernel).
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: 0 = the calling (tracer) thread only.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } == 0 {
            self.cpu = Some(cpu);
        }
    }

    /// `SCHED_IDLE` loses to any other runnable task on its CPU: while
    /// anything but the tracer itself is runnable (other work, or other
    /// tracee threads: the tracee of this stop is stopped), seen at
    /// [`STRIKES`] checks in a row, the tracer is a normal unpinned thread,
    /// re-checked after `BACKOFF`. True then.
    fn starved(&mut self, now: Instant) -> bool {
        if let Some(until) = self.backoff {
            if now < until {
                return true;
            }
            self.backoff = None;
        }
        if !others_running().unwrap_or(true) {
            self.strikes = 0;
            return false;
        }
        self.strikes += 1;
        if self.strikes < STRIKES {
            return false;
        }
        self.strikes = 0;
        self.restore();
        self.backoff = Some(now + BACKOFF);
        true
    }

    /// Puts the tracer thread back as it was (end of `run`).
    pub fn restore(&mut self) {
        if let Some(w) = &self.watch {
            w.idle.store(false, Ordering::Release);
        }
        if let Some((set, policy)) = self.saved.take() {
            set_policy(policy);
            // SAFETY: restoring the affinity read by `save`.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        }
        self.cpu = None;
        self.checked = None;
    }
}

/// One idle tracer as the [`Rescue`] thread sees it.
pub(crate) struct Watch {
    tid: i32,
    /// Stops handled (bumped at each `at_stop` that looks again, at
    /// most once per [`RECHECK`]).
    progress: AtomicU64,
    /// `progress` at the rescue thread's last look.
    last_look: AtomicU64,
    /// In `SCHED_IDLE` now.
    idle: AtomicBool,
    /// Put back in `policy` by the rescue; the tracer backs off.
    rescued: AtomicBool,
    policy: AtomicI32,
}

/// The thread that takes a starved idle tracer out of `SCHED_IDLE` (see
/// "Starvation" above): one per utap process while it has tracers,
/// started with the first idle one, in the normal policy.
struct Rescue;

static WATCHED: Mutex<Vec<Weak<Watch>>> = Mutex::new(Vec::new());

impl Rescue {
    /// A watch of the calling tracer thread; starts the rescue thread
    /// with the first.
    fn watch() -> Arc<Watch> {
        let w = Arc::new(Watch {
            // SAFETY: plain query.
            tid: unsafe { libc::gettid() },
            progress: AtomicU64::new(0),
            last_look: AtomicU64::new(u64::MAX),
            idle: AtomicBool::new(false),
            rescued: AtomicBool::new(false),
            policy: AtomicI32::new(libc::SCHED_OTHER),
        });
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        if watched.is_empty() {
            let _ = std::thread::Builder::new()
                .name("utap-rescue".into())
                .spawn(Rescue::run);
        }
        watched.push(Arc::downgrade(&w));
        w
    }

    fn run() {
        loop {
            std::thread::sleep(RESCUE_EVERY);
            let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
            watched.retain(|w| w.strong_count() > 0);
            if watched.is_empty() {
                // No tracer left: the next to go idle starts a new one.
                return;
            }
            for w in watched.iter().filter_map(Weak::upgrade) {
                w.rescue_if_starved();
            }
        }
    }
}

impl Watch {
    /// Puts the tracer back in its own policy if it is idle, runnable and
    /// has handled no stop since the last look.
    fn rescue_if_starved(&self) {
        let progress = self.progress.load(Ordering::Relaxed);
        let before = self.last_look.swap(progress, Ordering::Relaxed);
        if before != progress || !self.idle.load(Ordering::Acquire) || !runnable(Tid(self.tid)) {
            return;
        }
        let param = libc::sched_param { sched_priority: 0 };
        let policy = self.policy.load(Ordering::Relaxed);
        // SAFETY: another thread of this process, by its id.
        unsafe { libc::sched_setscheduler(self.tid, policy, &param) };
        self.idle.store(false, Ordering::Release);
        self.rescued.store(true, Ordering::Relaxed);
    }
}

/// Whether thread `tid` is runnable (state `R`, field 3 of its stat):
/// waiting for a CPU, not for a tracee.
fn runnable(tid: Tid) -> bool {
    let mut buf = [0u8; 1024];
    stat_field(tid, 3, &mut buf) == Some(b"R")
}

fn save() -> (libc::cpu_set_t, i32) {
    // SAFETY: plain queries of the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set);
        (set, libc::sched_getscheduler(0).max(0))
    }
}

fn set_policy(policy: i32) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: 0 = the calling thread; priority 0 is valid for these policies.
    unsafe { libc::sched_setscheduler(0, policy, &param) };
}

/// Whether any task but the caller is runnable system-wide (the running
/// count of `/proc/loadavg`, which includes the caller).
fn others_running() -> Option<bool> {
    let mut buf = [0u8; 128];
    let text = read_small(b"/proc/loadavg\0", &mut buf)?;
    let field = text.split(|&b| b == b' ').nth(3)?;
    let running = field.split(|&b| b == b'/').next()?;
    let n: u64 = std::str::from_utf8(running).ok()?.parse().ok()?;
    Some(n > 1)
}

/// Reads a small file (NUL-terminated path) into `buf`.
fn read_small<'b>(path: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: reading into `buf`, then closing our own fd.
    let len = unsafe {
        let len = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        len
    };
    buf.get(..usize::try_from(len).ok()?)
}

/// The CPU `tid` last ran on (field 39 of `/proc/TID/stat`), read without
/// allocating.
fn last_cpu(tid: Tid) -> Option<usize> {
    let mut buf = [0u8; 1024];
    let field = stat_field(tid, 39, &mut buf)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Field `n` (1-based, as proc(5) counts, from 3 on) of `/proc/TID/stat`,
/// read into `buf` without allocating.
fn stat_field(tid: Tid, n: usize, buf: &mut [u8]) -> Option<&[u8]> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut len = prefix.len();
    len += tid.0.to_string_stackless(&mut path[len..])?;
    path[len..len + 5].copy_from_slice(b"/stat");
    // path[len + 5] is the terminating NUL.
    let text = read_small(&path[..len + 6], buf)?;
    // Fields after the command (which may contain spaces) start with the
    // state, field 3.
    let after = &text[text.iter().rposition(|&b| b == b')')? + 1..];
    after
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .nth(n.checked_sub(3)?)
}

/// Decimal digits of a thread id into a stack buffer.
trait StacklessDigits {
    fn to_string_stackless(self, out: &mut [u8]) -> Option<usize>;
}

impl StacklessDigits for i32 {
    fn to_string_stackless(self, out: &mut [u8]) -> Option<usize> {
        let mut v = u32::try_from(self).ok()?;
        let mut tmp = [0u8; 10];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let digits = &tmp[i..];
        out.get_mut(..digits.len())?.copy_from_slice(digits);
        Some(digits.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cpu_of_a_thread() {
        // SAFETY: plain query.
        let me = unsafe { libc::gettid() };
        let cpu = last_cpu(Tid(me)).expect("own /proc stat");
        // SAFETY: plain query.
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) } as usize;
        assert!(cpu < ncpu, "cpu {cpu} of {ncpu}");
        assert_eq!(last_cpu(Tid(-5)), None);
        assert!(runnable(Tid(me)), "a running thread is in state R");
        assert!(others_running().is_some());
    }
}
