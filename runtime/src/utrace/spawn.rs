//! Starting a traced command from its first instruction (`utap -c CMD`).
//!
//! The tracer thread forks; the child stops itself with SIGSTOP; the tracer
//! seizes it (with `PTRACE_O_EXITKILL`, so the command dies if utap is
//! killed outright: its pre-exec hook may install a seccomp filter that
//! needs a tracer; without one the caller takes the option back at the exec
//! stop, [`Control::outlive_tracer`]) and sends SIGCONT. This produces the
//! extra stops the design notes describe — `PTRACE_EVENT_STOP` for the
//! group-stop the child was in, another after SIGCONT, and the SIGCONT
//! itself — which are consumed here, SIGCONT suppressed. The child then
//! runs the caller's pre-exec hook (e.g. installing a seccomp filter; it
//! must be async-signal-safe) and execs. `spawn` returns with the new
//! program stopped at its exec stop, before its first instruction, so
//! engines can be attached before it runs. That first execve is not
//! reported at all: its entry came before tracing, so its exit is not
//! reported either (engines never see a return without its entry).
//!
//! With [`SpawnCommand::report_exec`] (SystemTap's `-c`, whose command
//! execs with the probes armed) `spawn` returns earlier: stopped at the
//! entry of that execve, its seccomp stop when the hook installed a
//! filter (which always traps execve), else its syscall-entry stop. The
//! stop is queued for the tracer loop, so the engines attached meanwhile
//! get the call's entry, its exec and its exit as for any later execve.

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};

use super::command_line::CommandLine;
use super::error::{Error, Result};
use super::ptrace::{self, Status};
use super::thread::{Run, Thread};
use super::{Control, Signal, Tid, Tracer};

/// A command line to execute (no PATH search: `path` is a path).
#[derive(Clone, Debug)]
pub struct SpawnCommand {
    path: CString,
    argv: Vec<CString>,
    /// Stop at the execve's entry, not its exec (see the module notes).
    report_exec: bool,
}

impl SpawnCommand {
    /// `program` with `args` (`argv[0]` is `program`).
    pub fn new<S: AsRef<str>>(program: &str, args: &[S]) -> Result<SpawnCommand> {
        let mut argv = vec![cstring(program)?];
        for a in args {
            argv.push(cstring(a.as_ref())?);
        }
        Ok(SpawnCommand {
            path: argv[0].clone(),
            argv,
            report_exec: false,
        })
    }

    /// Have engines see the command's own execve (entry, exec, exit):
    /// `spawn` returns at its entry (see the module notes).
    pub fn report_exec(mut self) -> SpawnCommand {
        self.report_exec = true;
        self
    }

    /// SystemTap's `-c CMD`: the program and arguments CMD's words name,
    /// or `/bin/sh -c CMD` for shell syntax ([`CommandLine`]).
    pub fn command_line(cmd: &str) -> Result<SpawnCommand> {
        SpawnCommand::from_line(CommandLine::parse(cmd).map_err(Error::Spawn)?)
    }

    /// A command line split already (by a daemon's client, in its own
    /// environment).
    pub fn from_line(line: CommandLine) -> Result<SpawnCommand> {
        match line {
            CommandLine::Shell(cmd) => SpawnCommand::new("/bin/sh", &["-c", &cmd]),
            CommandLine::Words { argv, .. } if argv.is_empty() => {
                Err(Error::Spawn("empty -c COMMAND".into()))
            }
            CommandLine::Words { program, argv } => {
                let path = program.to_str().ok_or_else(|| {
                    Error::Spawn(format!("program path is not UTF-8: {program:?}"))
                })?;
                let mut spawn = SpawnCommand::new(path, &argv[1..])?;
                spawn.argv[0] = cstring(&argv[0])?;
                Ok(spawn)
            }
        }
    }
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::Spawn(format!("argument contains a NUL byte: {s:?}")))
}

/// A started command.
#[derive(Debug)]
pub struct Spawned {
    pub pid: Tid,
    /// Stopped at the entry of its execve ([`SpawnCommand::report_exec`]),
    /// which engines are yet to see; else at its exec stop.
    pub at_exec_entry: bool,
    /// What the pre-exec hook returned (true without a hook).
    pub hook_ok: bool,
    /// The seccomp notification listener the hook handed over with
    /// `seccomp::install_with_listener`, if it did.
    pub listener: Option<crate::listener::Listener>,
}

impl Tracer {
    /// Starts `cmd` traced: [`Control::spawn`] before `run`.
    pub fn spawn(
        &mut self,
        cmd: &SpawnCommand,
        hook: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Spawned> {
        self.ctl().spawn(cmd, hook)
    }
}

impl Control<'_> {
    /// Starts `cmd` traced and returns it stopped at its exec stop. Attach
    /// engines (with `FOLLOW` to cover its children), then `run`. A thread
    /// left with no engine is detached when `run` starts. `hook` runs in the
    /// child just before exec and must only make async-signal-safe calls;
    /// its result is reported in `Spawned::hook_ok`. When the hook installed
    /// a seccomp RET_TRACE filter, call `set_syscall_source(pid,
    /// SyscallSource::Seccomp)` (only if `hook_ok`: otherwise stay with
    /// `PTRACE_SYSCALL`), and follow every child: an untraced process
    /// under a RET_TRACE filter gets ENOSYS from the filtered calls. For the
    /// same reason a command still running when the session ends early is
    /// best killed (strace's `--seccomp-bpf` implies `--kill-on-exit`).
    pub fn spawn(
        &mut self,
        cmd: &SpawnCommand,
        hook: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Spawned> {
        let mut argv: Vec<*const libc::c_char> = cmd.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut fds = [0; 2];
        // SAFETY: fds is a valid out array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::Spawn(format!(
                "pipe: {}",
                std::io::Error::last_os_error()
            )));
        }
        let [status_r, status_w] = fds;
        // SAFETY: the child only makes async-signal-safe calls (and the
        // caller's hook, which must too) before exec or _exit.
        // SAFETY: getpid has no memory effects.
        let parent = unsafe { libc::getpid() };
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe { child(cmd.path.as_ptr(), &argv, hook, status_w, parent) }
        }
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(status_w) };
        let result = if pid < 0 {
            Err(Error::Spawn(format!(
                "fork: {}",
                std::io::Error::last_os_error()
            )))
        } else {
            self.adopt(Tid(pid), status_r, cmd.report_exec)
        };
        // SAFETY: our read end.
        unsafe { libc::close(status_r) };
        result
    }

    /// Seizes the self-stopped child and runs it up to its exec stop, or
    /// with `at_entry` up to its execve's entry (see the module notes).
    fn adopt(&mut self, pid: Tid, status_r: libc::c_int, at_entry: bool) -> Result<Spawned> {
        let early_end = |st: Status| Error::Spawn(format!("the child ended before exec: {st:?}"));
        let (st, _) = wait(pid)?;
        if st != Status::SignalStop(Signal::STOP) {
            return Err(early_end(st));
        }
        ptrace::seize(pid, ptrace::OPTIONS | ptrace::O_EXITKILL)?;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid.0, libc::SIGCONT) };
        let mut listener = None;
        // Looking for the execve's entry, syscall stops are wanted until
        // it is known whether a seccomp filter will stop there.
        let mut request = match at_entry {
            true => ptrace::PTRACE_SYSCALL,
            false => ptrace::PTRACE_CONT,
        };
        let mut hook_ok = None;
        let entry = loop {
            let (st, raw) = match &listener {
                Some(l) => wait_serving(pid, l)?,
                None => wait(pid)?,
            };
            let sig = match st {
                Status::Event {
                    event: ptrace::EVENT_EXEC,
                    ..
                } => break None,
                Status::Event {
                    event: ptrace::EVENT_SECCOMP,
                    ..
                } => {
                    if at_entry && execve_at(pid, libc::PTRACE_SYSCALL_INFO_SECCOMP) {
                        break Some(raw);
                    }
                    listener = listener.or_else(|| take_listener(pid));
                    None
                }
                Status::SyscallStop if execve_at(pid, libc::PTRACE_SYSCALL_INFO_ENTRY) => {
                    // The status byte came before the execve: with a
                    // filter, its seccomp stop follows; without, this is
                    // the entry engines will see.
                    let ok = read_status(status_r);
                    hook_ok = Some(ok);
                    if !ok {
                        break Some(raw);
                    }
                    request = ptrace::PTRACE_CONT;
                    None
                }
                Status::Exited(_) | Status::Signaled { .. } => return Err(early_end(st)),
                Status::SignalStop(Signal::CONT) => None,
                Status::SignalStop(s) => Some(s),
                _ => None,
            };
            ptrace::restart(request, pid, sig)?;
        };
        let hook_ok = hook_ok.unwrap_or_else(|| read_status(status_r));
        let mut thread = Thread::new(pid, pid, Run::Stopped);
        thread.exitkill = true;
        match entry {
            // The loop reports the entry (`replay`), then the exec and exit.
            Some(raw) => self.core.replay.push((pid, raw)),
            None => {
                // Stopped inside execve: a PTRACE_SYSCALL resume sees its
                // exit, which is not reported (its entry came before
                // tracing).
                thread.in_syscall = true;
                thread.entered_untraced = true;
                self.core.pending_resolve.push(pid);
            }
        }
        self.core.threads.insert(pid, thread);
        Ok(Spawned {
            pid,
            at_exec_entry: entry.is_some(),
            hook_ok,
            listener,
        })
    }
}

/// The child's status byte: whether its pre-exec hook succeeded. Written
/// before its execve, so there by the time that is seen.
fn read_status(status_r: libc::c_int) -> bool {
    let mut byte = [0u8; 1];
    // SAFETY: reading one byte into a local buffer.
    let n = unsafe { libc::read(status_r, byte.as_mut_ptr().cast(), 1) };
    n == 1 && byte[0] == 1
}

/// Whether `pid` is stopped at an execve of the kind `op` (a seccomp stop
/// or a syscall-entry stop).
fn execve_at(pid: Tid, op: u8) -> bool {
    let Ok(info) = ptrace::syscall_info(pid) else {
        return false;
    };
    if info.op != op {
        return false;
    }
    // SAFETY: `op` says which member is filled; both start with `nr`.
    let nr = unsafe {
        match op {
            libc::PTRACE_SYSCALL_INFO_SECCOMP => info.u.seccomp.nr,
            _ => info.u.entry.nr,
        }
    };
    nr == libc::SYS_execve as u64
}

fn wait(pid: Tid) -> Result<(Status, i32)> {
    match ptrace::wait_for(pid.0, libc::WUNTRACED) {
        Ok(Some((_, status))) => Ok((ptrace::decode(status), status)),
        Ok(None) => Err(Error::Spawn("wait found no child".into())),
        Err(errno) => Err(Error::Os {
            op: "waitpid",
            tid: pid,
            errno,
        }),
    }
}

/// At a seccomp stop before exec: the listener, if this is the
/// `seccomp::LISTENER_NR` call of `install_with_listener` (its arguments:
/// the descriptor, whether the wait is killable).
fn take_listener(pid: Tid) -> Option<crate::listener::Listener> {
    let info = ptrace::syscall_info(pid).ok()?;
    if info.op != libc::PTRACE_SYSCALL_INFO_SECCOMP {
        return None;
    }
    // SAFETY: `op` says the seccomp member is filled.
    let (nr, args) = unsafe { (info.u.seccomp.nr, info.u.seccomp.args) };
    if nr != u64::from(crate::seccomp::LISTENER_NR) {
        return None;
    }
    crate::listener::Listener::take(pid, args[0] as i32, args[1] != 0).ok()
}

/// [`wait`] while the child, under its notify filter, may make notified
/// syscalls before exec (writing its status byte): those are let through
/// unreported (nothing before exec is), as the stops are.
fn wait_serving(pid: Tid, listener: &crate::listener::Listener) -> Result<(Status, i32)> {
    loop {
        match ptrace::wait_for(pid.0, libc::WUNTRACED | libc::WNOHANG) {
            Ok(Some((_, status))) => return Ok((ptrace::decode(status), status)),
            Ok(None) => {}
            Err(errno) => {
                return Err(Error::Os {
                    op: "waitpid",
                    tid: pid,
                    errno,
                });
            }
        }
        if listener.poll(1) {
            // SAFETY: plain data.
            let mut n = unsafe { std::mem::zeroed() };
            if listener.recv(&mut n) == crate::listener::Received::Notified {
                listener.answer_continue(n.id);
            }
        }
    }
}

/// Signals utap itself was started with ignored (bit `n` for signal
/// `n`), which the command keeps ignored as it would untraced: a shell
/// starts a background job with SIGINT and SIGQUIT ignored, and utap's own
/// handlers (which exec resets to the default) must not undo that for it.
static INHERITED_IGNORED: AtomicU64 = AtomicU64::new(0);

/// Records that utap was started with `sig` ignored (see
/// [`INHERITED_IGNORED`]); called before utap changes the disposition.
pub fn inherited_ignored(sig: libc::c_int) {
    if (1..64).contains(&sig) {
        INHERITED_IGNORED.fetch_or(1 << sig, Ordering::Relaxed);
    }
}

/// In the child: ignores again what utap was started with ignored.
unsafe fn ignore_as_inherited() {
    let mask = INHERITED_IGNORED.load(Ordering::Relaxed);
    for sig in (1..64).filter(|s| mask & (1 << s) != 0) {
        // SAFETY: signal(2) is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
}

/// Until it is seized the child is nobody's tracee: were the tracer to die
/// (the foreground's `kill -9` takes the tracing process with it) while the
/// child is stopped before its exec, it would stay in `T` for ever, holding
/// a copy of the tracer's descriptors. Its parent's death kills it instead.
unsafe fn die_with_the_tracer(parent: libc::pid_t) {
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        if libc::getppid() != parent {
            // The tracer died before the signal was set.
            libc::_exit(127);
        }
    }
}

/// In the forked child. Async-signal-safe calls only.
unsafe fn child(
    path: *const libc::c_char,
    argv: &[*const libc::c_char],
    hook: Option<&mut dyn FnMut() -> bool>,
    status_w: libc::c_int,
    parent: libc::pid_t,
) -> ! {
    unsafe {
        die_with_the_tracer(parent);
        // The tracer thread may block signals; the command must not inherit that.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Rust ignores SIGPIPE, and an ignored signal stays ignored across
        // exec: the command must die of it as it would untraced.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        ignore_as_inherited();
        // Not at utap's nice -20: the user's own priority.
        crate::priority::restore_in_child();
        libc::raise(libc::SIGSTOP);
        // Seized now (with PTRACE_O_EXITKILL): the tracer's death kills us
        // through that, and the command must not inherit a death signal
        // that would fire when the tracer thread ends after the session.
        libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong);
        let ok = match hook {
            Some(h) => h(),
            None => true,
        };
        let byte = [ok as u8];
        libc::write(status_w, byte.as_ptr().cast(), 1);
        libc::execv(path, argv.as_ptr());
        libc::_exit(127)
    }
}
