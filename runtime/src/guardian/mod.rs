//! The guardian: a small process that outlives utap and undoes, in the
//! programs utap attached to (`-x`, the daemon's sessions), what only utap
//! could undo, should utap die without detaching (SIGKILL). The kernel
//! then lets the tracees go with our `int3` bytes, `jmp .` parks and
//! `syscall; int3` stubs still in their text, parked threads' registers
//! held only in our memory and semaphores still counted: the next hit
//! would kill the program with SIGTRAP, a parked thread would spin for ever.
//!
//! * The tracing process [`arm`]s it at the first attach: a [`journal`]
//!   memfd, shared, and a pipe whose write end only the tracing process
//!   holds (O_CLOEXEC). The guardian is `/proc/self/exe` in a hidden mode
//!   (fork+exec: the tracing process has threads), double-forked so that
//!   it is nobody's zombie and no `wait` of the tracer reaps it, and in its
//!   own session (`setsid`): a Ctrl-C or `kill -9 -PGID` of utap's group
//!   does not reach it.
//! * It blocks on a robust futex word of the tracing thread (the one that
//!   armed it under `-x`, see [`death`]): the kernel marks it and wakes
//!   the guardian when that thread exits, before it lets the tracees go;
//!   and on the pipe, whose EOF means the whole tracing process is gone
//!   (the daemon's sessions, on other threads, have the pipe alone).
//!   A clean ending ([`disarm`]) sets the journal's `clean` flag first, and
//!   an empty journal has nothing to undo: it exits silently.
//! * Otherwise ([`restore`]) it writes back the journaled text bytes at
//!   once through /proc/PID/mem (no stop needed: a one-byte write is
//!   atomic for running threads), decrements the semaphores, seizes only
//!   the threads utap had moved (parked, injected) to give them their own
//!   registers back, and detaches. It never signals or kills the program;
//!   whatever fails is skipped (the program is then no worse off than
//!   without a guardian).
//!
//! What it cannot save: a thread in a stop at one of our `int3`s when the
//! tracing thread exits, stopped before utap's death or hitting one after
//! it while still traced (the kernel delivers the SIGTRAP at the release);
//! see docs/internals/guardian.md.

mod death;
pub mod journal;
mod restore;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::{Mutex, OnceLock};

use journal::Journal;

/// The argument that starts utap as a guardian.
pub const MODE: &str = "--utap-guardian-internal";

struct Armed {
    journal: &'static Journal,
    /// The write end: closed by `disarm` or by our death.
    tx: Mutex<Option<OwnedFd>>,
    starts: Mutex<HashMap<i32, u64>>,
}

static ARMED: OnceLock<Option<Armed>> = OnceLock::new();

/// Starts the guardian (once per process); says so under -v. A guardian
/// that cannot start leaves the session as it was without one.
/// `tracer_thread`: the calling thread is the one that traces (a `-x`
/// session's), and its death alone is the signal (see [`death`]); the
/// daemon, whose sessions come and go on other threads, passes false.
pub fn arm(verbose: bool, tracer_thread: bool) {
    let armed = ARMED.get_or_init(|| match start(tracer_thread) {
        Ok(a) => Some(a),
        Err(e) => {
            if verbose {
                eprintln!("utap: no guardian: {e}");
            }
            None
        }
    });
    if verbose && let Some(a) = armed {
        let tid = death::watched(a.journal);
        // Under load the guardian may not have written its pid yet.
        let pid = match guardian_pid(a.journal) {
            0 => "not written yet".to_string(),
            pid => pid.to_string(),
        };
        eprintln!(
            "utap: guardian armed: pid {pid}, {} journal entries free{}",
            free_entries(a.journal),
            if tid != 0 {
                format!(", woken at thread {tid}'s exit")
            } else {
                String::new()
            }
        );
    }
}

/// The guardian's pid, once it has written it (waits up to 100 ms).
fn guardian_pid(j: &Journal) -> i32 {
    let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
    loop {
        let pid = j.guardian.load(std::sync::atomic::Ordering::Acquire);
        if pid != 0 || std::time::Instant::now() > until {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn free_entries(j: &Journal) -> usize {
    journal::TEXTS + journal::SEMAPHORES + journal::THREADS - j.live()
}

/// The journal, when a guardian is armed.
pub fn journal() -> Option<&'static Journal> {
    ARMED.get()?.as_ref().map(|a| a.journal)
}

/// The session ended and undid everything: the guardian exits now. Says
/// under -v how many changes did not fit in the journal.
pub fn disarm(verbose: bool) {
    let Some(Some(a)) = ARMED.get() else {
        return;
    };
    a.journal
        .clean
        .store(1, std::sync::atomic::Ordering::Release);
    death::clear(a.journal);
    let overflow = a
        .journal
        .overflow
        .load(std::sync::atomic::Ordering::Relaxed);
    if verbose && overflow > 0 {
        eprintln!("utap: guardian journal was full: {overflow} change(s) not journaled");
    }
    drop(a.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
}

/// The start time of process `pid` (field 22 of its stat): with the pid,
/// what tells the guardian that the process is still the one journaled.
pub fn start_time(pid: i32) -> u64 {
    let Some(Some(a)) = ARMED.get() else {
        return 0;
    };
    let mut starts = a.starts.lock().unwrap_or_else(|e| e.into_inner());
    *starts
        .entry(pid)
        .or_insert_with(|| stat_start(pid).unwrap_or(0))
}

/// Field 22 of /proc/PID/stat (after the command's closing parenthesis).
pub(crate) fn stat_start(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// Journals bytes about to be written over `pid`'s text.
pub fn text_written(pid: i32, addr: u64, orig: &[u8]) {
    if let Some(j) = journal() {
        j.text_written(pid, start_time(pid), addr, orig);
    }
}

/// The bytes at `addr` in `pid` are the original ones again.
pub fn text_restored(pid: i32, addr: u64) {
    if let Some(j) = journal() {
        j.text_restored(pid, addr);
    }
}

/// A semaphore count changed by `delta`.
pub fn semaphore(pid: i32, addr: u64, delta: i32) {
    if let Some(j) = journal() {
        j.semaphore(pid, start_time(pid), addr, delta);
    }
}

/// Thread `tid` of `pid` is about to run at `site..site+len`; `regs` are
/// its own.
pub fn thread_moved(pid: i32, tid: i32, site: u64, len: u32, regs: &libc::user_regs_struct) {
    if let Some(j) = journal() {
        j.thread_moved(pid, start_time(pid), tid, site, len, regs);
    }
}

/// Thread `tid` has its own registers back.
pub fn thread_back(tid: i32) {
    if let Some(j) = journal() {
        j.thread_back(tid);
    }
}

/// Process `pid` exec'd or ended: nothing of ours left in it.
pub fn forget(pid: i32) {
    if let Some(Some(a)) = ARMED.get() {
        a.journal.forget(pid);
        a.starts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
    }
}

fn start(tracer_thread: bool) -> io::Result<Armed> {
    let journal = map_journal()?;
    if tracer_thread {
        death::watch(journal.0);
    }
    let mut fds = [0; 2];
    // SAFETY: fds is a valid out array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors we own.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    spawn(journal.1.as_raw_fd(), rx.as_raw_fd())?;
    Ok(Armed {
        journal: journal.0,
        tx: Mutex::new(Some(tx)),
        starts: Mutex::new(HashMap::new()),
    })
}

/// A new journal memfd, mapped shared for the rest of the process's life.
fn map_journal() -> io::Result<(&'static Journal, OwnedFd)> {
    // SAFETY: a constant C string.
    let fd = unsafe { libc::memfd_create(c"utap-journal".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let j = map(fd.as_raw_fd(), false)?;
    j.magic
        .store(journal::MAGIC, std::sync::atomic::Ordering::Relaxed);
    j.version
        .store(journal::VERSION, std::sync::atomic::Ordering::Relaxed);
    Ok((j, fd))
}

/// Maps a journal file of `journal::SIZE` bytes (sized here if empty);
/// `populate`: its pages mapped now (the guardian: no page faults between
/// its wake-up and its first write, measured ~0.1 ms for the ~65 pages).
fn map(fd: i32, populate: bool) -> io::Result<&'static Journal> {
    // SAFETY: fstat/ftruncate on our descriptor.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        if st.st_size == 0 && libc::ftruncate(fd, journal::SIZE as libc::off_t) != 0 {
            return Err(io::Error::last_os_error());
        }
        if st.st_size != 0 && st.st_size as usize != journal::SIZE {
            return Err(io::Error::other("journal of another size"));
        }
    }
    // SAFETY: a fresh shared mapping of SIZE bytes, never unmapped; the
    // Journal is atomics only, valid for any bytes (zero is "free").
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            journal::SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 },
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { &*(p as *const Journal) })
}

/// fork+exec of `/proc/self/exe MODE JOURNAL_FD PIPE_FD`, double-forked
/// (the middle process exits at once and is reaped here) and `setsid`.
fn spawn(journal: i32, rx: i32) -> io::Result<()> {
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg(MODE)
        .arg(journal.to_string())
        .arg(rx.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for fd in [journal, rx] {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    libc::setsid();
                    Ok(())
                }
                _ => libc::_exit(0),
            }
        });
    }
    let mut middle = cmd.spawn()?;
    middle.wait()?;
    Ok(())
}

/// The guardian process (`utap MODE JOURNAL_FD PIPE_FD`): waits for the
/// tracing process (or its tracing thread) to go, then
/// restores what the journal holds. Returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let fd = |i: usize| args.get(i).and_then(|a| a.parse::<i32>().ok());
    let (Some(jfd), Some(rx)) = (fd(0), fd(1)) else {
        return 2;
    };
    // SAFETY: ignoring signals has no memory effects.
    unsafe {
        for sig in [
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGTERM,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let Ok(j) = map(jfd, true) else {
        return 2;
    };
    if j.magic.load(std::sync::atomic::Ordering::Relaxed) != journal::MAGIC
        || j.version.load(std::sync::atomic::Ordering::Relaxed) != journal::VERSION
    {
        return 2;
    }
    // SAFETY: getpid has no memory effects.
    j.guardian.store(
        unsafe { libc::getpid() },
        std::sync::atomic::Ordering::Release,
    );
    run_first();
    wait_for_end(rx, j);
    if j.clean.load(std::sync::atomic::Ordering::Acquire) != 0 || j.live() == 0 {
        return 0;
    }
    restore::all(j);
    0
}

/// Asks to run before ordinary tasks when woken (SCHED_FIFO 1, when
/// allowed; otherwise as it was). Measured, most deaths left were threads
/// hitting an `int3` between the release and the guardian's write, the
/// guardian being scheduled milliseconds late on a loaded machine; it
/// sleeps in `poll` until then, and its restore is a bounded ~0.1 ms of
/// work (the seize retries sleep), so it cannot hog a CPU.
fn run_first() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: param is a valid struct; a refusal changes nothing.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}

/// How often a guardian woken by its futex also looks at the pipe (the
/// futex covers every death of the tracing thread; the pipe is a backstop).
const PIPE_LOOK: std::time::Duration = std::time::Duration::from_millis(20);

/// Blocks until the tracing thread's death word is marked (or cleared) or
/// every writer of the pipe `rx` is gone.
fn wait_for_end(rx: i32, j: &Journal) {
    let tid = death::watched(j);
    if tid == 0 {
        wait_for_eof(rx, -1);
        return;
    }
    while !death::ended(j, tid) {
        death::wait(j, tid, PIPE_LOOK);
        if wait_for_eof(rx, 0) {
            return;
        }
    }
}

/// Waits up to `timeout_ms` (-1: for ever) for the pipe's EOF (nobody
/// writes to it: readable means closed); whether it came.
fn wait_for_eof(rx: i32, timeout_ms: i32) -> bool {
    let mut fds = [libc::pollfd {
        fd: rx,
        events: libc::POLLIN,
        revents: 0,
    }];
    let mut b = [0u8; 64];
    loop {
        // SAFETY: fds is a valid array.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout_ms) };
        if n < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return true;
        }
        if n == 0 {
            return false;
        }
        // SAFETY: b is a valid buffer.
        let n = unsafe { libc::read(rx, b.as_mut_ptr().cast(), b.len()) };
        if n == 0 || (n < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
            return true;
        }
    }
}
