//! utap's own CPU priority: nice -20 from the first line of `main`, when
//! allowed; the commands utap starts get the user's nice value back.
//!
//! Before tracing starts, utap parses, checks and compiles the script and
//! seizes every thread of a `-x` target. Next to a target with a thousand
//! runnable threads on two CPUs, a nice-0 utap got a thousandth of a CPU for
//! that: compiling alone took 4 s and the whole `-T 1` run 10–18 s. At nice
//! -20 a thread weighs as much as 87 nice-0 threads (the kernel's
//! `sched_prio_to_weight`), so utap gets the CPU it needs and the target
//! the rest. Threads created later (tracer, output, metrics) and the
//! tracing process inherit it.
//!
//! Lowering one's nice needs CAP_SYS_NICE (root has it) or an
//! `RLIMIT_NICE` that allows it; an unprivileged user's utap keeps its nice
//! value and is as slow to start next to a thousand busy threads as any
//! other program. No real-time class is used: a SCHED_FIFO tracer spinning
//! on a bug would freeze a CPU, and nice -20 is enough to win the CPU
//! against ordinary threads.
//!
//! The `-c` command and `system()` commands must not run at nice -20 on
//! utap's account: they get [`original`] back before exec.

use std::sync::atomic::{AtomicI32, Ordering};

/// The nice value utap started with, or [`UNCHANGED`].
static ORIGINAL: AtomicI32 = AtomicI32::new(UNCHANGED);

/// [`ORIGINAL`] when utap's nice value was not changed.
const UNCHANGED: i32 = i32::MIN;

/// The nice value utap asks for.
pub const RAISED: libc::c_int = -20;

/// Raises the calling thread to nice -20 if allowed, remembering the value
/// it had. Call it first thing in `main`, while the process has one thread
/// (Linux keeps a nice value per thread; new threads inherit it). Returns
/// whether the priority was raised.
pub fn raise_at_start() -> bool {
    // SAFETY: get/setpriority on the calling thread only.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let old = libc::getpriority(libc::PRIO_PROCESS, tid);
        if *libc::__errno_location() != 0 || old <= RAISED {
            return false;
        }
        if libc::setpriority(libc::PRIO_PROCESS, tid, RAISED) != 0 {
            return false;
        }
        ORIGINAL.store(old, Ordering::SeqCst);
    }
    true
}

/// The nice value utap started with, if [`raise_at_start`] changed it.
pub fn original() -> Option<libc::c_int> {
    match ORIGINAL.load(Ordering::SeqCst) {
        UNCHANGED => None,
        n => Some(n),
    }
}

/// Gives the calling thread utap's original nice value back: for a forked
/// child before exec. Async-signal-safe (one atomic load, setpriority).
pub fn restore_in_child() {
    if let Some(old) = original() {
        // SAFETY: setpriority on the calling thread only.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, old) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_restored_when_nothing_was_raised() {
        // The test harness never calls raise_at_start.
        assert_eq!(original(), None);
        restore_in_child();
    }
}
