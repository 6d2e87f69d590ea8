//! `timer.profile`: a sampling profiler without a kernel.
//!
//! SystemTap's `timer.profile` fires on every CPU at each kernel tick, in
//! the context of whatever runs there (`if (pid() == target())
//! s[ubacktrace()] <<< 1` is its profiler idiom). utap has no CPU context
//! to borrow, so a tick samples threads instead: at each period, every
//! traced thread that is running (state `R` in `/proc/PID/task/TID/stat`:
//! on a CPU or waiting for one) and not already held in a stop is asked
//! for a quiesce report (one `PTRACE_INTERRUPT`; the tracer never waits
//! for it), and when it stops the probe fires in that thread's context:
//! `pid()`, `tid()`, `ubacktrace()` are the thread's.
//!
//! Sleeping threads (blocked in a syscall, waiting on a futex) are
//! skipped: they use no CPU, so an on-CPU profile (what SystemTap's gives)
//! must not count them, and interrupting them would cost a stop each and
//! make some calls return `EINTR` (signal(7): `epoll_wait`, `semop`...
//! fail so after a stop). A thread that blocks between the state check and
//! the interrupt is sampled at its syscall (a valid stack).
//!
//! Cost: one stop per running thread per tick (≈3–45 µs, see
//! `crate::utrace`), plus one small procfs read per traced thread.

use std::time::{Duration, Instant};

use crate::utrace::{Colocation, Control, ResumeAction, Tid, Tracer};

use super::engine::{Fired, Shared, SharedRef};
use super::points::Dispatch;

/// A profiling session's ticks must come on time while the tracee keeps
/// its CPU busy: the default co-location (`utrace::colocate`: the tracer
/// pinned beside its tracee in `SCHED_IDLE`) would starve them behind a
/// CPU-bound thread, so the tracer stays where the scheduler puts it
/// (unless `UTAP_COLOCATE` says otherwise).
pub(crate) fn place_tracer(tracer: &mut Tracer, d: &Dispatch) {
    if !d.profile.is_empty() && std::env::var_os("UTAP_COLOCATE").is_none() {
        tracer.set_colocation(Colocation::Off);
    }
}

/// Schedules one sampling tick per `timer.profile` period of the script.
pub(crate) fn schedule(ctl: &mut Control, shared: &SharedRef, dispatch: &std::sync::Arc<Dispatch>) {
    for (group, &(period_ns, _)) in dispatch.profile.iter().enumerate() {
        let period = Duration::from_nanos(period_ns);
        let (shared, d) = (shared.clone(), dispatch.clone());
        let mut next = Instant::now() + period;
        ctl.add_timer(next, move |ctl| {
            let mut s = shared.borrow_mut();
            if s.finished.is_some() {
                return None;
            }
            s.sample(ctl, &d, group);
            // A fixed rate; after a late tick, no burst to catch up.
            next += period;
            let now = Instant::now();
            if next <= now {
                next = now + period;
            }
            Some(next)
        });
    }
}

impl Shared {
    /// One tick of sampling group `group`: asks every running traced
    /// thread its probes apply to for a stop.
    fn sample(&mut self, ctl: &mut Control, d: &Dispatch, group: usize) {
        let hooks = &d.profile[group].1;
        for tid in ctl.threads() {
            if ctl.is_stopped(tid) != Some(false) || self.sampling.iter().any(|s| s.0 == tid.0) {
                continue;
            }
            let Some(pid) = ctl.process_of(tid) else {
                continue;
            };
            if !hooks.iter().any(|h| self.matches(&h.filter, pid.0)) || !running(pid, tid) {
                continue;
            }
            if ctl.control(tid, self.engine, ResumeAction::Report).is_ok() {
                self.sampling.push((tid.0, group));
            }
        }
    }

    /// At a stop of `tid`: fires the `timer.profile` probes of the sample
    /// it was stopped for, if any.
    pub(crate) fn fire_sample(
        &mut self,
        ctl: &mut Control,
        d: &Dispatch,
        pid: i32,
        tid: i32,
    ) -> Option<Fired> {
        let i = self.sampling.iter().position(|s| s.0 == tid)?;
        let (_, group) = self.sampling.swap_remove(i);
        let values = super::engine::context(pid, tid);
        Some(self.fire(ctl, &d.profile[group].1, &values))
    }

    /// A thread is gone: no sample is due.
    pub(crate) fn forget_sample(&mut self, tid: i32) {
        self.sampling.retain(|s| s.0 != tid);
    }
}

/// Whether thread `tid` of `pid` is running or runnable (`R`).
fn running(pid: Tid, tid: Tid) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{}/task/{}/stat", pid.0, tid.0)) else {
        return false;
    };
    state(&stat) == Some(b'R')
}

/// The state letter of a `stat` line: after the command name, which is in
/// parentheses and may itself contain `)` and spaces.
fn state(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(close + 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_follows_the_last_parenthesis() {
        assert_eq!(state(b"42 (spin) R 1 42 42 0"), Some(b'R'));
        assert_eq!(state(b"42 (a) b) S 1 42"), Some(b'S'));
        assert_eq!(state(b"42 (x"), None);
    }

    #[test]
    fn this_thread_is_running() {
        let pid = Tid(std::process::id() as i32);
        // SAFETY: gettid has no side effects.
        let tid = Tid(unsafe { libc::gettid() });
        assert!(running(pid, tid));
        assert!(!running(pid, Tid(i32::MAX)));
    }
}
