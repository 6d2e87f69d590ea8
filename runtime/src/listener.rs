//! The tracer's end of a seccomp user notification (`SECCOMP_RET_USER_NOTIF`,
//! see `crate::seccomp::Filter::with_notify`): a thread making a notified
//! syscall waits in the kernel — no ptrace stop — until the listener
//! answers; the notification carries the syscall number, its six
//! arguments, the instruction pointer and the thread's id.
//!
//! The answer is "continue" (the syscall runs as if allowed) or an error.
//! A notification whose thread died meanwhile fails to answer with ENOENT:
//! nothing waits for it any more. When the listener closes (utap gone),
//! the kernel fails every pending and later notified syscall with ENOSYS.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::tid::Tid;

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): the notifying thread
/// and the listener wake each other as a synchronous pair (the woken side
/// may run on the waker's CPU), as a ptrace stop and its tracer do.
const FD_SYNC_WAKE_UP: u64 = 1;

/// Whether this kernel lets a tracer take a child's listener
/// (`pidfd_getfd`, Linux 5.6): asked with an invalid descriptor, the call
/// fails with EBADF where it exists and ENOSYS where not.
pub fn supported() -> bool {
    // SAFETY: no descriptor is created.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_getfd, -1, 0, 0) };
    rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS)
}

/// A listener taken from a traced child.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    /// The kernel holds a received notification's thread in a killable
    /// wait (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`): a signal cannot
    /// make it restart the syscall and notify again.
    pub killable: bool,
}

/// One notification.
pub type Notification = libc::seccomp_notif;

/// What [`Listener::recv`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    Notified,
    /// Interrupted (EINTR) or the thread went away before it was received
    /// (ENOENT, the filter still in use): try again.
    Retry,
    /// No process uses the filter any more (or the descriptor failed).
    Closed,
}

impl Listener {
    /// Takes descriptor `fd` of (stopped, traced) process `pid`
    /// (`pidfd_getfd` needs ptrace access, which the tracer has).
    pub fn take(pid: Tid, fd: i32, killable: bool) -> std::io::Result<Listener> {
        // SAFETY: plain syscalls; the descriptors returned are ours.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.0, 0) };
        if pidfd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
        let ours = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if ours < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Listener {
            fd: unsafe { OwnedFd::from_raw_fd(ours as i32) },
            killable,
        })
    }

    /// Asks for synchronous wake-ups where the kernel has them (6.6+);
    /// returns whether it did.
    pub fn sync_wake_up(&self) -> bool {
        // SAFETY: an ioctl on our descriptor with an integer argument.
        unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                FD_SYNC_WAKE_UP,
                0,
            ) == 0
        }
    }

    /// Waits for the next notification (blocking).
    pub fn recv(&self, n: &mut Notification) -> Received {
        // SAFETY: the kernel wants a zeroed buffer; plain data.
        *n = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                n as *mut Notification,
            )
        };
        if rc == 0 {
            return Received::Notified;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => Received::Retry,
            // Also what a receive gets at once when no thread uses the
            // filter any more.
            Some(libc::ENOENT) if !self.hung_up() => Received::Retry,
            _ => Received::Closed,
        }
    }

    /// Whether no thread uses the filter any more (`POLLHUP`).
    fn hung_up(&self) -> bool {
        self.revents(0) & libc::POLLHUP != 0
    }

    /// Lets the notified syscall run. False if its thread is gone (ENOENT).
    pub fn answer_continue(&self, id: u64) -> bool {
        self.send(libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        })
    }

    fn send(&self, mut resp: libc::seccomp_notif_resp) -> bool {
        loop {
            // SAFETY: a response on our descriptor.
            let rc = unsafe {
                libc::ioctl(
                    self.fd.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_SEND,
                    &mut resp as *mut libc::seccomp_notif_resp,
                )
            };
            if rc == 0 {
                return true;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
    }

    /// Whether a notification is waiting, within `timeout_ms` (-1: no
    /// limit); also true when the listener is closed (hang-up), so that
    /// [`Listener::recv`] reports it.
    pub fn poll(&self, timeout_ms: i32) -> bool {
        self.revents(timeout_ms) != 0
    }

    /// What `poll(2)` for input reports within `timeout_ms` (0: none).
    fn revents(&self, timeout_ms: i32) -> libc::c_short {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if rc > 0 { p.revents } else { 0 }
    }

    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}
