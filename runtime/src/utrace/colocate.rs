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
//! # Measured (tests/bench/overhead.py, `UTAP_COLOCATE=off|pin|idle|poll`)
//!
//! On the 2-CPU VM with the other CPU busy (load 2–7: the only machine
//! state available while this was written), `syscall.*` counting over
//! 200,000 getppid: off 0.63–0.68 s, pin 0.64 s, idle 0.58–0.63 s; with a
//! third busy task: off 1.28 s, poll 1.29–2.18 s, idle 0.99–1.20 s. When
//! both CPUs run other work, `SCHED_IDLE` can starve the tracer behind
//! them: 0.34 s in one run but 2.59 s in the next, against 0.44–0.63 s
//! for off; `poll` burns CPU the other work needs. Neither gain is
//! safe, so the default stays `Off`: the scheduler already co-locates
//! tracer and tracee when the other CPU is busy, which is where every
//! measurement above was made. The idle-machine case (where DESIGN.md
//! measured ≈45 µs per stop) still has to be measured with these modes.

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
    /// shared CPU. Starves the tracer when other work shares that CPU.
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

/// The default: the only mode never measured slower than the scheduler's
/// own placement (see the module docs).
pub const DEFAULT: Colocation = Colocation::Off;

/// How long a `Poll` tracer polls after a stop before it sleeps.
pub const POLL: Duration = Duration::from_micros(50);

/// How often the tracee's CPU is looked up again.
pub const RECHECK: Duration = Duration::from_millis(2);

/// The tracer thread's placement state.
pub(crate) struct Colocator {
    mode: Colocation,
    cpu: Option<usize>,
    checked: Option<Instant>,
    /// The tracer thread's affinity and policy before it moved, restored
    /// when `run` ends.
    saved: Option<(libc::cpu_set_t, i32)>,
}

impl Colocator {
    pub fn new(mode: Colocation) -> Colocator {
        Colocator {
            mode,
            cpu: None,
            checked: None,
            saved: None,
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
        let Some(cpu) = last_cpu(tid) else { return };
        if self.cpu == Some(cpu) {
            return;
        }
        if self.saved.is_none() {
            self.saved = Some(save());
            if self.mode == Colocation::Idle {
                set_policy(libc::SCHED_IDLE);
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

    /// Puts the tracer thread back as it was (end of `run`).
    pub fn restore(&mut self) {
        if let Some((set, policy)) = self.saved.take() {
            set_policy(policy);
            // SAFETY: restoring the affinity read by `save`.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        }
        self.cpu = None;
        self.checked = None;
    }
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

/// The CPU `tid` last ran on (field 39 of `/proc/TID/stat`), read without
/// allocating.
fn last_cpu(tid: Tid) -> Option<usize> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut n = prefix.len();
    let digits = tid.0.to_string_stackless(&mut path[n..])?;
    n += digits;
    path[n..n + 5].copy_from_slice(b"/stat");
    // path[n + 5] is the terminating NUL.
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 1024];
    // SAFETY: reading into `buf`, then closing our own fd.
    let len = unsafe {
        let len = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        len
    };
    let text = buf.get(..usize::try_from(len).ok()?)?;
    // Fields after the command (which may contain spaces) start with the
    // state, field 3; the CPU is field 39.
    let after = &text[text.iter().rposition(|&b| b == b')')? + 1..];
    let field = after
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .nth(39 - 3)?;
    std::str::from_utf8(field).ok()?.parse().ok()
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
    }
}
