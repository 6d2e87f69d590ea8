//! The tracer host: the process that owns a session's ptrace relationships,
//! apart from the process the shell waits for.
//!
//! Ending a session has a fast part (run the end probes, write the output,
//! give the shell its exit status) and a slow part that must not delay it:
//! detaching a thousand busy threads, or shepherding a `-c` command under a
//! seccomp RET_TRACE filter until it exits (untraced, every call the filter
//! traps would fail with ENOSYS). So utap splits in two before it compiles
//! the script of such a session, while it has one thread ([`split`]); the
//! compiler's heap is then the host's own (split after compiling, the host
//! would copy each page of it that it writes, shared with the foreground):
//!
//! * the **foreground** (the pid the shell waits for) only waits for the
//!   host's verdict ([`Foreground::wait`]) and exits with it; termination
//!   signals sent to it alone (`kill PID`, `timeout`) are passed on to the
//!   host, so they end the session as they would end a single process;
//! * the **host** runs the session (tracer thread, handlers, output) and,
//!   once the script has ended and its output is written, sends the verdict
//!   ([`HostLink::report`]) and lets go of the terminal; it then detaches
//!   or shepherds at its own pace and exits unseen.
//!
//! A host whose foreground dies first (`kill -9`) is killed by the kernel
//! (`PR_SET_PDEATHSIG`), and then, like any dead tracer's tracees, a `-c`
//! command under a seccomp filter is killed too (`PTRACE_O_EXITKILL`) and
//! an attached process, or a command without a filter, is detached and runs
//! on: `kill -9` of utap behaves as for one process. The
//! parent-death signal is cleared once the session has ended, so a host
//! may outlive a foreground that ended normally. It is a setting of the
//! thread that made it (the host's first), not of the process: only that
//! thread can clear it ([`HostLink::outlive_foreground`]); cleared on
//! another (the thread that sends the verdict after the detach budget), it
//! would stay, and the foreground's exit would kill a host still detaching.
//!
//! The link is a pipe carrying one 4-byte verdict; a multi-session daemon
//! would carry the same verdict (and more) over a socket.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// How the foreground ends: what the host decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Exit with this status.
    Exit(u8),
    /// Die of this signal, as Unix tools die of SIGPIPE when their reader
    /// has gone (`utap ... | head -1`).
    Signal(i32),
}

impl Verdict {
    fn encode(self) -> [u8; 4] {
        match self {
            Verdict::Exit(code) => (code as i32).to_le_bytes(),
            Verdict::Signal(sig) => (-sig).to_le_bytes(),
        }
    }

    fn decode(bytes: [u8; 4]) -> Verdict {
        match i32::from_le_bytes(bytes) {
            n if n < 0 => Verdict::Signal(-n),
            n => Verdict::Exit(n.min(255) as u8),
        }
    }

    /// Ends the calling process with this verdict.
    pub fn exit(self) -> ! {
        match self {
            Verdict::Exit(code) => std::process::exit(code as i32),
            Verdict::Signal(sig) => {
                // SAFETY: restoring the default action and raising.
                unsafe {
                    libc::signal(sig, libc::SIG_DFL);
                    libc::raise(sig);
                }
                std::process::exit(128 + sig)
            }
        }
    }
}

/// Which side of [`split`] the caller is on.
pub enum Side {
    Foreground(Foreground),
    Host(HostLink),
}

/// Splits utap into foreground and host. Call it while the process has one
/// thread (a fork copies only the caller). `attach`: the host will trace
/// an attached program, and its id had better fit the data plane's SUD
/// selectors ([`steer_next_pid`]).
pub fn split(attach: bool) -> io::Result<Side> {
    if attach && crate::dataplane::dispatch::enabled() {
        for _ in 1..FIT_TRIES {
            steer_next_pid();
            if let Some(side) = fork_host(true)? {
                return Ok(side);
            }
        }
    }
    fork_host(false).map(|side| side.expect("an unconditional fork"))
}

/// How many forks [`split`] tries for a host whose id fits.
const FIT_TRIES: usize = 16;

/// Whether process id `pid` fits the data plane's SUD selectors.
fn fits(pid: libc::pid_t) -> bool {
    crate::dataplane::dispatch::Keeper::of(pid as u32).is_some()
}

/// Forks the host. `need_fit`: a child whose id does not fit exits at
/// once (reaped here), and None is returned.
fn fork_host(need_fit: bool) -> io::Result<Option<Side>> {
    // Output buffered now would be written by both sides.
    io::Write::flush(&mut io::stdout())?;
    let mut fds = [0; 2];
    // SAFETY: fds is a valid out array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors we own.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: getpid/fork have no memory effects on us.
    let parent = unsafe { libc::getpid() };
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        // SAFETY: _exit/getpid have no memory effects.
        0 if need_fit && !fits(unsafe { libc::getpid() }) => unsafe { libc::_exit(0) },
        unfit if unfit > 0 && need_fit && !fits(unfit) => {
            let mut status = 0;
            // SAFETY: reaping our own child, which exits at once.
            unsafe { libc::waitpid(unfit, &mut status, 0) };
            Ok(None)
        }
        0 => {
            drop(rx);
            // SAFETY: prctl/getppid have no memory effects.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                if libc::getppid() != parent {
                    // The foreground is already gone.
                    libc::_exit(1);
                }
            }
            Ok(Some(Side::Host(HostLink {
                tx: Some(tx),
                // SAFETY: gettid has no memory effects.
                armed: unsafe { libc::gettid() },
            })))
        }
        host => {
            crate::endtrace::mark("split");
            drop(tx);
            // It only waits, and must be quick to exit when told to, even
            // behind a thousand busy threads of the target.
            crate::hurry::now();
            pass_signals_on(host);
            Ok(Some(Side::Foreground(Foreground { host, rx })))
        }
    }
}

/// Uses up process ids with short-lived threads until the next one
/// (likely the host's, if nothing else forks meanwhile) can keep the data
/// plane's Syscall User Dispatch selectors (`dataplane::dispatch`: a byte
/// of the tracing thread's id must be 1). Ids are handed out in order, so
/// this takes at most 256 threads (about 3 ms); a host whose id does not
/// fit traces as before, without SUD.
fn steer_next_pid() {
    // As root: say which id the kernel hands out next (CRIU's way).
    const LAST: &str = "/proc/sys/kernel/ns_last_pid";
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
    };
    if let (Some(last), Some(max)) = (read(LAST), read("/proc/sys/kernel/pid_max"))
        && let Some(next) = next_fit(last, max)
        && std::fs::write(LAST, (next - 1).to_string()).is_ok()
    {
        return;
    }
    for _ in 0..300 {
        // SAFETY: gettid has no memory effects.
        let spawned = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(|| unsafe { libc::gettid() });
        let Ok(Ok(last)) = spawned.map(|t| t.join()) else {
            return;
        };
        let next = last as u32 + 1;
        if fits(next as libc::pid_t) && free(next) {
            return;
        }
    }
}

/// The first id after `last` that fits and is free, in the order the
/// kernel hands ids out (up to `pid_max`, then from 300 again).
fn next_fit(last: u32, pid_max: u32) -> Option<u32> {
    /// The kernel's `RESERVED_PIDS`: where ids start again after a wrap.
    const RESERVED: u32 = 300;
    (last + 1..pid_max)
        .chain(RESERVED..=last)
        .find(|&p| fits(p as libc::pid_t) && free(p))
}

/// Whether no process or thread has id `p` now.
fn free(p: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{p}")).exists()
}

/// Gives the termination signals their default action where utap was
/// started with them ignored. A shell starts a background command (`utap
/// ... &` in a script) with SIGINT and SIGQUIT ignored, and utap's handlers
/// replace that only once installed (the foreground's at [`split`], the
/// host's after compiling): a SIGINT before then was dropped by the kernel
/// and the session, once started, never ended (`tests/bench/crowd.sh`
/// waited for ever). Whenever it comes, a termination signal ends utap:
/// before the handlers, by killing it. A `-c` command still starts with
/// them ignored, as it would untraced (`utrace::spawn`). Call it first
/// thing in `main`.
pub fn unignore_termination_signals() {
    for sig in TERMINATION_SIGNALS {
        // SAFETY: reading and setting a disposition; no handler involved.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                crate::utrace::inherited_ignored(sig);
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// The host's pid, for the foreground's signal handler.
static HOST: AtomicI32 = AtomicI32::new(0);
/// The last signal the foreground passed on.
static PASSED: AtomicI32 = AtomicI32::new(0);

/// The signals that end a session; the foreground passes them on.
pub const TERMINATION_SIGNALS: [i32; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

extern "C" fn pass_on(sig: libc::c_int) {
    let host = HOST.load(Ordering::SeqCst);
    PASSED.store(sig, Ordering::SeqCst);
    if host > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(host, sig) };
    }
}

/// From now on the foreground's termination signals go to the host.
fn pass_signals_on(host: libc::pid_t) {
    HOST.store(host, Ordering::SeqCst);
    for sig in TERMINATION_SIGNALS {
        // SAFETY: installing an async-signal-safe handler.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = pass_on as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The side the shell waits for.
pub struct Foreground {
    host: libc::pid_t,
    rx: OwnedFd,
}

impl Foreground {
    /// Waits for the host's verdict, passing termination signals on to it.
    /// A host that dies without one (a crash, `kill -9` of the host) gives
    /// a message and exit status 1; one killed by a termination signal
    /// passed on from here (before it catches them: while compiling) is a
    /// death by that signal, as for one process.
    pub fn wait(self) -> Verdict {
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            // SAFETY: reading into the rest of a local buffer.
            let n =
                unsafe { libc::read(self.rx.as_raw_fd(), buf[got..].as_mut_ptr().cast(), 4 - got) };
            match n {
                n if n > 0 => got += n as usize,
                0 => break,
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        if got == 4 {
            crate::endtrace::mark("foreground got the verdict");
            return Verdict::decode(buf);
        }
        self.host_death()
    }

    /// What to make of a host that ended without a verdict (it is our
    /// child: reap it).
    fn host_death(&self) -> Verdict {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(self.host, &mut status, 0) };
        let killed_by =
            (r == self.host && libc::WIFSIGNALED(status)).then(|| libc::WTERMSIG(status));
        match killed_by {
            Some(sig) if sig == PASSED.load(Ordering::SeqCst) => Verdict::Signal(sig),
            Some(sig) => {
                eprintln!(
                    "utap: the tracing process was killed by {}",
                    crate::syscalls::signals::signal_name(sig as i64)
                );
                Verdict::Exit(1)
            }
            None => {
                eprintln!("utap: the tracing process ended without a result");
                Verdict::Exit(1)
            }
        }
    }
}

/// The host's end of the link.
pub struct HostLink {
    tx: Option<OwnedFd>,
    /// The thread whose parent-death signal kills the host (0: cleared).
    armed: libc::pid_t,
}

impl HostLink {
    /// Sends the verdict to the foreground (only the first call does
    /// anything). Call it once the output is written: the foreground exits
    /// at once. Afterwards the host has no terminal: its stdin, stdout and
    /// stderr become /dev/null, so that whoever reads utap's output sees
    /// its end when the foreground exits.
    pub fn report(&mut self, verdict: Verdict) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        crate::endtrace::mark("verdict sent");
        self.outlive_foreground();
        // SAFETY: open, dup2, write and close have no memory effects beyond
        // the descriptors named.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if null >= 0 {
                for fd in 0..3 {
                    libc::dup2(null, fd);
                }
                libc::close(null);
            }
            let bytes = verdict.encode();
            libc::write(tx.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
        }
    }

    /// From now on the foreground's death no longer kills the host (the
    /// session has ended; what is left is letting threads go). Does
    /// something only on the thread that split, which holds the signal:
    /// call it there before another thread may send the verdict.
    pub fn outlive_foreground(&mut self) {
        // SAFETY: gettid and prctl have no memory effects.
        unsafe {
            if self.armed != 0 && libc::gettid() == self.armed {
                libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong);
                self.armed = 0;
            }
        }
    }

    /// Whether the verdict was sent.
    pub fn reported(&self) -> bool {
        self.tx.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::Verdict;

    #[test]
    fn verdicts_survive_the_link() {
        for v in [
            Verdict::Exit(0),
            Verdict::Exit(1),
            Verdict::Exit(255),
            Verdict::Signal(13),
        ] {
            assert_eq!(Verdict::decode(v.encode()), v);
        }
    }
}
