//! Leaving no thread stopped or traced, whatever way utap ends.
//!
//! * Normal end and errors: `Tracer::run` detaches every thread before it
//!   returns, and dropping a `Tracer` (also while unwinding from a panic)
//!   does the same.
//! * SIGINT, SIGTERM, SIGHUP, SIGQUIT: [`catch_termination_signals`] installs a
//!   handler that records the signal and rings every live tracer's
//!   doorbell; each tracer then detaches everything and `run` returns
//!   `EndReason::Signal`. The caller exits afterwards (utap: with status
//!   128+signal). With no tracer alive the handler restores the default
//!   action and re-raises, so the program still dies of the signal.
//! * SIGKILL of utap, or a crash: the kernel detaches the tracees of a dead
//!   tracer and wakes stopped ones; `-c` children under a seccomp filter
//!   (PTRACE_O_EXITKILL) are killed with it, as with strace; those without
//!   one lost the option at their exec stop and run on.
//!
//! Detaching a running thread means interrupting it first (PTRACE_DETACH
//! needs a stop), passing on the signal of a signal-delivery-stop, and
//! leaving a thread in a group-stop stopped, as it would be untraced.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use super::Signal;

const SLOTS: usize = 64;
static TERM_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// An async-signal-safe `fn()` also called on a termination signal.
static ALSO: AtomicUsize = AtomicUsize::new(0);

/// Also calls `f` (which must be async-signal-safe) when a termination
/// signal arrives: e.g. to stop a handler stuck in a loop on the tracer
/// thread, which cannot see the doorbell until it returns.
pub fn also_on_termination(f: fn()) {
    ALSO.store(f as usize, Ordering::SeqCst);
}
static RINGS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

/// Installs the SIGINT/SIGTERM/SIGHUP/SIGQUIT handler (idempotent).
/// SIGQUIT too: it would otherwise kill utap without its end probes.
pub fn catch_termination_signals() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: installing an async-signal-safe handler.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_termination as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The termination signal received, if any.
pub fn termination_signal() -> Option<Signal> {
    match TERM_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(Signal(s)),
    }
}

/// Ends every live tracer's session as if `sig` had arrived (e.g. SIGPIPE
/// when the output's reader has gone); safe from any thread and from a
/// signal handler. Returns whether a tracer was there to be told.
pub fn end_sessions(sig: Signal) -> bool {
    let _ = TERM_SIGNAL.compare_exchange(0, sig.0, Ordering::SeqCst, Ordering::SeqCst);
    let mut rung = false;
    for slot in &RINGS {
        let fd = slot.load(Ordering::SeqCst);
        if fd >= 0 {
            super::doorbell::ring(fd);
            rung = true;
        }
    }
    rung
}

extern "C" fn on_termination(sig: libc::c_int) {
    // The end is decided: our threads must not wait behind the tracees.
    crate::hurry::now();
    let also = ALSO.load(Ordering::SeqCst);
    if also != 0 {
        // SAFETY: stored from a `fn()` by also_on_termination.
        let f: fn() = unsafe { std::mem::transmute::<usize, fn()>(also) };
        f();
    }
    if !end_sessions(Signal(sig)) {
        // SAFETY: async-signal-safe calls.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Registers a tracer's doorbell with the handler.
pub(crate) fn register(fd: libc::c_int) {
    for slot in &RINGS {
        if slot
            .compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

pub(crate) fn unregister(fd: libc::c_int) {
    for slot in &RINGS {
        let _ = slot.compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst);
    }
}

use std::time::{Duration, Instant};

use super::control::request_stop;
use super::ptrace::{self, Status};
use super::thread::Run;
use super::{Tid, Tracer};

impl Tracer {
    /// Detaches every traced thread and waits until each is let go or
    /// gone. Threads that vanish without a wait status (never expected, but
    /// a hang here would leave tracees stopped) are checked every second
    /// and given up on after a few seconds.
    pub(crate) fn detach_all(&mut self) {
        // No int3 and no hijacked return may outlive the tracing; threads
        // held for a breakpoint step are detached like the others. The
        // bytes go first, while threads may run (a thread that trapped just
        // before is rewound): holding first let more threads reach an int3
        // whose SIGTRAP could be left pending. Then every thread of each
        // space is held (utrace::hold) to take the slot pages out.
        self.dataplane_take_out();
        self.core.uprobes.restore_all();
        if !self.core.uprobes.is_empty() {
            self.core.hold_all_spaces();
            self.unmap_slot_pages();
        }
        self.core.text_hold = false;
        for (tid, status) in std::mem::take(&mut self.core.uprobes_held) {
            match ptrace::decode(status) {
                Status::Exited(_) | Status::Signaled { .. } => {
                    self.core.threads.remove(&tid);
                }
                st => self.detach_stopped(tid, st),
            }
        }
        for (tid, _) in std::mem::take(&mut self.core.orphans) {
            let _ = ptrace::detach(tid, None);
        }
        let tids: Vec<Tid> = self.core.threads.keys().copied().collect();
        for tid in tids {
            let Some(t) = self.core.threads.get_mut(&tid) else {
                continue;
            };
            t.detach_pending = true;
            t.attachments.clear();
            match t.run {
                Run::Stopped => {
                    let sig = t.pending_signal.take();
                    let _ = ptrace::detach(tid, sig);
                    self.core.threads.remove(&tid);
                }
                Run::Running | Run::Listening => {
                    if request_stop(t, false).is_err() {
                        self.core.threads.remove(&tid);
                    }
                }
                Run::Starting => {}
            }
        }
        let mut patience = 5;
        while !self.core.threads.is_empty() && patience > 0 {
            self.doorbell
                .set_deadline(Some(Instant::now() + Duration::from_secs(1)));
            let Ok(Some((tid, status))) = ptrace::wait_any(libc::WUNTRACED) else {
                break;
            };
            if tid == self.doorbell.pid {
                self.doorbell.timer_fired();
                self.doorbell.rearm();
                patience -= 1;
                self.core.threads.retain(|tid, _| thread_exists(*tid));
                continue;
            }
            let st = ptrace::decode(status);
            match st {
                Status::Exited(_) | Status::Signaled { .. } => {
                    self.core.threads.remove(&tid);
                }
                Status::Continued => {}
                _ if self.core.threads.contains_key(&tid) => self.detach_stopped(tid, st),
                // An auto-attached child we never heard of.
                _ => {
                    let _ = ptrace::detach(tid, None);
                }
            }
        }
        self.doorbell.set_deadline(None);
        self.core.threads.clear();
    }
}

fn thread_exists(tid: Tid) -> bool {
    std::path::Path::new(&format!("/proc/{}", tid.0)).exists()
}
