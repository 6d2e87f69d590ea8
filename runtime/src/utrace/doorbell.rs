//! Waking the tracer thread without polling.
//!
//! The tracer blocks in `waitpid`, which no file descriptor can interrupt,
//! and a signal sent to it could land just before it enters `waitpid` and
//! be lost. So the wake-up is itself a wait status: the tracer forks a tiny
//! *doorbell* child that blocks in `poll` on an eventfd (rung by commands
//! and by the termination-signal handler) and a timerfd (armed for the next
//! tick). When either is ready the child stops itself with SIGSTOP, which
//! the tracer's `waitpid(WUNTRACED)` sees like any tracee stop; the tracer
//! does its work and sends SIGCONT. No wake-up can be lost (the eventfd
//! keeps its count until the child reads it), an idle tracer and doorbell
//! use no CPU, and the event path stays one blocking `waitpid` per stop.
//!
//! The child only makes async-signal-safe system calls, closes every other
//! inherited descriptor (so it never holds a pipe open for somebody else),
//! leaves the terminal's process group, and dies with its parent thread
//! (`PR_SET_PDEATHSIG`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Tid;
use super::error::{Error, Result};
use super::ptrace::errno;

pub(crate) struct Doorbell {
    pub pid: Tid,
    /// Shared with every `TracerHandle` and the signal handler.
    pub ring: Arc<OwnedFd>,
    timer: OwnedFd,
    armed: Option<Instant>,
    /// False once the child is known dead (its pid may be reused).
    alive: bool,
}

fn cvt(what: &'static str, r: libc::c_int) -> Result<libc::c_int> {
    if r < 0 {
        Err(Error::Os {
            op: what,
            tid: Tid(0),
            errno: errno(),
        })
    } else {
        Ok(r)
    }
}

impl Doorbell {
    /// Must run on the tracer thread: the child is that thread's child.
    pub fn new() -> Result<Doorbell> {
        // SAFETY: plain syscalls; the fds are owned right away.
        let ring = unsafe {
            OwnedFd::from_raw_fd(cvt(
                "eventfd",
                libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK),
            )?)
        };
        let timer = unsafe {
            OwnedFd::from_raw_fd(cvt(
                "timerfd_create",
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
                ),
            )?)
        };
        let pid = spawn_child(ring.as_raw_fd(), timer.as_raw_fd())?;
        Ok(Doorbell {
            pid,
            ring: Arc::new(ring),
            timer,
            armed: None,
            alive: true,
        })
    }

    /// Lets the stopped child poll again.
    pub fn rearm(&self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid.0, libc::SIGCONT) };
    }

    /// Makes the doorbell ring at `deadline` (None: never).
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        if self.armed == deadline {
            return;
        }
        self.armed = deadline;
        let d = deadline.map_or(Duration::ZERO, |d| {
            d.saturating_duration_since(Instant::now())
                .max(Duration::from_nanos(1))
        });
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as _,
                tv_nsec: d.subsec_nanos() as _,
            },
        };
        // SAFETY: valid fd and spec; a zero value disarms.
        unsafe { libc::timerfd_settime(self.timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// The child died (and was reaped): start another on the same
    /// descriptors.
    pub fn respawn(&mut self) -> Result<()> {
        self.alive = false;
        self.armed = None;
        self.pid = spawn_child(self.ring.as_raw_fd(), self.timer.as_raw_fd())?;
        self.alive = true;
        Ok(())
    }

    /// The timer fired (the doorbell stopped for it): forget the armed time.
    pub fn timer_fired(&mut self) {
        self.armed = None;
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        if !self.alive {
            return;
        }
        // SAFETY: our own child; reap it so no zombie is left.
        unsafe {
            libc::kill(self.pid.0, libc::SIGKILL);
            let mut st = 0;
            libc::waitpid(self.pid.0, &mut st, libc::__WALL);
        }
    }
}

/// Rings a doorbell (async-signal-safe: one `write`).
pub(crate) fn ring(fd: libc::c_int) {
    let one: u64 = 1;
    // SAFETY: writing 8 bytes from a local to an eventfd.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

fn spawn_child(ring: libc::c_int, timer: libc::c_int) -> Result<Tid> {
    // SAFETY: the child runs only async-signal-safe system calls and never
    // returns into Rust code.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(Error::Os {
            op: "fork",
            tid: Tid(0),
            errno: errno(),
        }),
        0 => unsafe { doorbell_child(ring, timer) },
        pid => Ok(Tid(pid)),
    }
}

/// The doorbell loop. Async-signal-safe calls only.
unsafe fn doorbell_child(ring: libc::c_int, timer: libc::c_int) -> ! {
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::setpgid(0, 0);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        libc::dup2(ring, 0);
        libc::dup2(timer, 1);
        libc::close_range(2, u32::MAX, 0);
        let mut fds = [
            libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: 1,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let mut buf = [0u8; 8];
        loop {
            if libc::getppid() == 1 {
                libc::_exit(0);
            }
            if libc::poll(fds.as_mut_ptr(), 2, -1) > 0 {
                libc::read(0, buf.as_mut_ptr().cast(), 8);
                libc::read(1, buf.as_mut_ptr().cast(), 8);
                libc::kill(libc::getpid(), libc::SIGSTOP);
            }
        }
    }
}
