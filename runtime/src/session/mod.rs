//! Process sessions: `utap script.stp -c CMD` and `-x PID`.
//!
//! A session runs the script's begin probes, starts the command (traced
//! from its first instruction, with a seccomp filter that stops only on the
//! syscalls the script probes, if it probes any) or attaches to every thread of a running
//! process, and serves every process probe from one utrace engine attached
//! to each thread of the target and its descendants ([`engine`]), on one
//! tracer thread per CPU (see `shard_count` and `crate::utrace`'s shards);
//! handlers, timer and end probes share the script state under its lock
//! ([`lock`]). Timer and end probes run on the first tracer thread.
//!
//! The session ends when the target process exits, when a handler calls
//! `exit()` or fails, at the `-T` limit, or on SIGINT/SIGTERM/SIGHUP/SIGQUIT;
//! then, first of all, the end probes run and the [`Conclude`] callback
//! writes the output and hands the status over (to the foreground utap, see
//! [`crate::host`]); only then is every thread detached (a command still
//! running goes on untraced, as with SystemTap).
//!
//! One exception: a command started under a seccomp filter cannot be left
//! untraced, because the kernel fails every syscall a RET_TRACE filter
//! traps with ENOSYS when no tracer is attached (why strace's
//! `--seccomp-bpf` kills its command on exit). When the script ends first,
//! its end probes run and its output is written at once, and the tracing
//! process stays as a passive tracer until the command exits
//! ([`Aftermath::Shepherd`]). SIGINT, SIGTERM, SIGHUP and SIGQUIT kill such
//! a command (and its traced descendants) before utap detaches, as strace's
//! `--seccomp-bpf` does (it implies `--kill-on-exit`); the end probes then
//! run as usual. A script with any syscall probe gets a filter
//! (one that traps every number when a probe takes every syscall: one stop
//! per syscall instead of PTRACE_SYSCALL's two). Without a filter (`-x`, or
//! a script without syscall probes) these signals detach and the command
//! goes on untraced.
//!
//! Syscall entries whose probes need no stop come through a seccomp user
//! notification instead of a RET_TRACE stop ([`notify`]); the same rules
//! hold for them (without a listener the kernel fails them with ENOSYS).

pub(crate) mod engine;
mod functions;
mod inproc;
mod lock;
mod notify;
mod unwinder;
pub use functions::UserFunction;
pub mod marks;
pub mod points;
mod profile;
mod stdout_check;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use points::{FunctionPoint, FunctionSite, ProcessEvent, ProcessFilter, ProcessPoint};

use crate::script::{OutputSink, ScriptRuntime, interrupt};
use crate::seccomp;
use crate::transport::Producer;
use crate::utrace::{
    AttachMode, Control, EndReason, SpawnCommand, SyscallSource, Tid, Tracer, also_on_termination,
    catch_termination_signals,
};
use engine::{ScriptEngine, Shared, SharedRef};
use points::{Dispatch, SyscallNeed};

/// What the session traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `-c CMD`: run CMD's words, or `/bin/sh -c CMD` (`utrace::command_line`).
    Command(String),
    /// `-x PID`: attach to a running process.
    Attach(i32),
}

#[derive(Clone, Debug)]
pub struct SessionOptions {
    pub target: Target,
    /// `-T SECONDS`.
    pub time_limit: Option<Duration>,
    /// `-v`: say which syscall-stop strategy is used and why.
    pub verbose: bool,
    /// `-g`: guru code may control other threads (stop, resume,
    /// quiesce), which keeps the session on one tracer thread.
    pub guru: bool,
    /// Per probe (by index): its handler can run without a ptrace stop
    /// (`utap_compiler::stopless`); `None`: unknown, every probe stops.
    /// Syscall entries served that way come through a seccomp
    /// notification ([`notify`]).
    pub stopless: Option<Vec<bool>>,
    /// The handlers compiled to run inside the program
    /// (`crate::dataplane`): served there for a `-c` command under a
    /// seccomp filter, in the tracer otherwise.
    pub inproc: Option<Arc<crate::dataplane::InProcImage>>,
    /// `--exit-status`: end with the command's status when its exit ends
    /// the session (see `Shared::exit_with_target`).
    pub exit_status: bool,
    /// What utap writes on its stdout that a program reads (`-f json
    /// output`), when it does: a warning if the command writes there too
    /// ([`stdout_check`]).
    pub machine_stdout: Option<String>,
}

/// A session that could not start: the message for the user.
#[derive(Debug)]
pub struct SessionError(pub String);

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Called once, as soon as the script has ended (its end probes ran and
/// their output is queued), with the script's exit status and what the
/// tracing still has to do: writes the output out, tells whoever waits for
/// the result (the foreground utap, see [`crate::host`]) and returns the
/// final status.
pub type Conclude = Box<dyn FnOnce(i32, Aftermath) -> i32>;

/// What the tracing does after the script has ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aftermath {
    /// Detach every thread (quick, unless there are very many), then end.
    Detach,
    /// Shepherd a command under a seccomp filter until it exits.
    Shepherd,
}

/// Runs `script` over the target; returns utap's exit status (1 after a
/// runtime error). `sink` is the transport's producer.
pub fn run(
    mut script: ScriptRuntime,
    points: &[ProcessPoint],
    opts: &SessionOptions,
    mut sink: Producer,
    conclude: Conclude,
) -> Result<i32, SessionError> {
    crate::endtrace::start();
    catch_termination_signals().map_err(|e| SessionError(format!("signal setup: {e}")))?;
    // A handler looping on the tracer thread still yields to them.
    also_on_termination(interrupt::request);
    // Built once: the shards and the notification thread share it.
    let dispatch = Arc::new(Dispatch::new(points));
    let mut tracer = Tracer::new().map_err(|e| SessionError(e.to_string()))?;
    profile::place_tracer(&mut tracer, &dispatch);
    // The session's engine is this new tracer's first. Its other tracer
    // threads start now, beside the command's fork and exec, not while
    // the command waits at its exec stop.
    let inproc = opts.inproc.clone();
    let shards = match inproc {
        // Hits do not come to the tracer: one thread serves the rest.
        Some(_) => 1,
        None => shard_count(&dispatch, opts),
    };
    if shards > 1 {
        tracer
            .prepare_shards(shards)
            .map_err(|e| SessionError(format!("cannot start tracer threads: {e}")))?;
    }
    // As with SystemTap, the -c command exists (created, stopped at its
    // execve's entry or its exec) before the begin probes run, so target()
    // is its pid there.
    let notified = match &opts.stopless {
        Some(stopless) if notify::enabled() && !opts.guru && inproc.is_none() => {
            notify::plan(&dispatch, dispatch.syscall_need(), stopless, EVERY_SYSCALL)
        }
        _ => Vec::new(),
    };
    // Served by per-thread listeners (the default), the command's filter
    // has no listener of its own (`utrace::listen`).
    let per_thread = !notified.is_empty() && notify::per_thread();
    let mut spawned = match &opts.target {
        Target::Command(cmd) => Ok(spawn(
            &mut tracer,
            cmd,
            dispatch.syscall_need(),
            if per_thread { &[] } else { &notified },
            inproc.as_ref().map(|i| i.region.code()),
            opts.verbose,
        )?),
        Target::Attach(pid) => {
            // Before anything is written into a program we did not start.
            crate::guardian::arm(opts.verbose, true);
            Err(Tid(*pid))
        }
    };
    script.set_target(match &spawned {
        Ok(s) => s.pid.0 as i64,
        Err(pid) => pid.0 as i64,
    });
    let listener = spawned.as_mut().ok().and_then(|s| s.listener.take());
    if !script.run_begin(&mut sink) {
        if let Ok(Started { pid, .. }) = spawned {
            // Never run: under its seccomp filter it could not run untraced.
            // SAFETY: signalling our own stopped child.
            unsafe { libc::kill(pid.0, libc::SIGKILL) };
        }
        return Ok(conclude(finish(&mut script, &mut sink), Aftermath::Detach));
    }
    // A command stopped at its execve's entry is adopted (its facts,
    // function probes, process.begin) at the exec, as the program it runs.
    let mut before_exec = false;
    let (pid, threads, seccomp_on) = match spawned {
        Ok(s) => {
            before_exec = s.at_exec_entry;
            (s.pid, vec![s.pid], s.seccomp_on)
        }
        Err(pid) => attach_target(&mut tracer, pid, opts.verbose)?,
    };
    let inproc = inproc::usable(inproc.as_ref()).filter(|img| {
        // What begin set is what the handlers in the program start from.
        match crate::dataplane::globals::fill(&mut script, img) {
            Ok(()) => true,
            Err(e) => {
                if opts.verbose {
                    crate::say!("utap: data plane off: {e}");
                }
                false
            }
        }
    });
    // -T counts from here, as SystemTap's counts from the module running:
    // the begin probes have run and every thread is attached, so `-T 1`
    // traces for a second however long attaching a thousand threads took.
    let deadline = opts.time_limit.map(|limit| Instant::now() + limit);
    if let Some(deadline) = deadline {
        interrupt::at(deadline);
    }
    let shared = new_shared(Shared::new(script, sink, &dispatch));
    {
        let mut s = shared.borrow_mut();
        s.linger = seccomp_on;
        s.verbose = opts.verbose;
        s.exit_with_target = opts.exit_status;
        s.conclude = Some(conclude);
        s.inproc = inproc.clone();
        s.stdout_check = opts
            .machine_stdout
            .as_deref()
            .and_then(stdout_check::SharedStdout::new);
    }
    let id = tracer.add_engine(ScriptEngine {
        shared: shared.clone(),
        dispatch: dispatch.clone(),
    });
    shared.borrow_mut().engine = id;
    {
        let mut ctl = tracer.ctl();
        for &t in &threads {
            ctl.attach(t, id, AttachMode::Create, dispatch.events())
                .map_err(|e| SessionError(format!("cannot trace {t}: {e}")))?;
        }
        ctl.end_when_exits(pid);
        if seccomp_on {
            ctl.kill_on_signal();
        }
        if let Some(img) = &inproc {
            ctl.enable_dataplane(img.clone(), matches!(opts.target, Target::Attach(_)));
            inproc::watch_errors(&mut ctl, &shared);
        }
        if before_exec {
            shared.borrow_mut().adopt_at_exec(pid);
        } else {
            shared
                .borrow_mut()
                .adopt_process(&mut ctl, &dispatch, pid, &threads);
        }
        schedule_timers(&mut ctl, &shared, deadline);
        profile::schedule(&mut ctl, &shared, &dispatch);
        // However the session ends, the script ends first: the user gets
        // the end probes' output before the threads are let go.
        let on_end = shared.clone();
        ctl.on_end(move |ctl, why| on_end.borrow_mut().end(ctl, why));
    }
    // Under -x no thread traps on an int3 the data plane could replace:
    // one that did would need utap alive to go on.
    tracer.dataplane_patch_attached();
    // Under -x, syscall sites are found through Syscall User Dispatch
    // (a seccomp filter could never be taken out at detach).
    if matches!(opts.target, Target::Attach(_)) {
        tracer.dataplane_arm_attached();
    }
    // Sharding (counted above) gives every tracer thread the same
    // engines at the same ids: the session's is this tracer's first.
    debug_assert_eq!(id.0, 0);
    // A copy of the script per tracer thread, and the notification
    // servers' after them.
    let serving = listener.is_some() || (per_thread && seccomp_on);
    let server_runs = match serving {
        true => notify::Servers::runs_wanted(),
        false => 0,
    };
    shared.borrow_mut().add_runs(shards + server_runs);
    if serving {
        if shared.borrow().end_elsewhere.is_none() {
            shared.borrow_mut().end_elsewhere = Some(end_on_first(&tracer, &shared));
        }
        let servers = notify::Servers::new(shared.clone(), dispatch.clone(), shards, server_runs);
        shared.borrow_mut().notified = Some(servers.count.clone());
        match listener {
            Some(listener) => servers
                .start(listener)
                .map_err(|e| SessionError(format!("cannot start the notification thread: {e}")))?,
            None => {
                let servers = servers.placed();
                listen_in_threads(&mut tracer, servers, &notified, opts.verbose)?
            }
        }
    }
    if shards > 1 {
        share_tracing(&mut tracer, &shared, &dispatch, shards)?;
    }
    crate::endtrace::mark("tracing started");
    if opts.verbose {
        crate::say!(
            "utap: tracing started: process {pid}, {} thread(s)",
            threads.len()
        );
    }
    tracer.run().map_err(|e| SessionError(e.to_string()))?;
    // Every change undone, every thread detached: the guardian may go.
    crate::guardian::disarm(opts.verbose);
    let status = shared.borrow().finished.unwrap_or(1);
    // Every thread is detached: dropping the tracer (reaping its doorbell
    // child) and the script state takes about a millisecond, which the
    // foreground need not wait for (see `drop_leftovers`).
    LEFTOVERS.with(|l| l.borrow_mut().push(Box::new((tracer, shared, dispatch))));
    Ok(status)
}

thread_local! {
    /// What ended sessions of this thread left to drop.
    static LEFTOVERS: std::cell::RefCell<Vec<Box<dyn std::any::Any>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Drops what [`run`] left of its session on this thread (its tracer,
/// script state): call it once the verdict has reached whoever waits.
/// Left undropped, the doorbell children still die with this thread
/// (`PR_SET_PDEATHSIG`).
pub fn drop_leftovers() {
    let left = LEFTOVERS.with(|l| std::mem::take(&mut *l.borrow_mut()));
    drop(left);
}

/// How many tracer threads serve the session: one per CPU (`UTAP_SHARDS`
/// overrides), or one for what must stay on one (see `utrace`'s `shard`):
/// function, marker and `.return` probes (breakpoints), `timer.profile`
/// (it samples every thread from one tick), `-g` (guru thread control
/// across threads) and `process.quiesce`.
fn shard_count(d: &Dispatch, opts: &SessionOptions) -> usize {
    if !d.functions.is_empty() || !d.profile.is_empty() || !d.quiesce.is_empty() || opts.guru {
        return 1;
    }
    if let Some(n) = std::env::var("UTAP_SHARDS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        return n.clamp(1, 64);
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(64))
}

/// Gives each busy thread of the command a listener of its own, served
/// by a server of its own (`utrace::listen`): notifications of threads on
/// different CPUs are then served in parallel.
fn listen_in_threads(
    tracer: &mut Tracer,
    servers: notify::Servers,
    notified: &[u32],
    verbose: bool,
) -> Result<(), SessionError> {
    let filter = seccomp::Filter::notify_only(notified.iter().copied())
        .map_err(|e| SessionError(format!("cannot build the threads' seccomp filter: {e}")))?;
    if verbose {
        crate::say!(
            "utap: seccomp user notification serves the entries of {} syscall(s) without a ptrace stop, in each thread from its {}th stop on ({}th for a main thread)",
            notified.len(),
            crate::utrace::listen::LISTEN_AFTER,
            crate::utrace::listen::MAIN_LISTENS_AFTER
        );
    }
    tracer.listen_in_threads(crate::utrace::ThreadListeners {
        program: filter.program().to_vec(),
        server: Box::new(move || servers.waiting()),
    });
    Ok(())
}

/// Starts the other tracer threads, each with its own script engine over
/// the same (locked) script state.
fn share_tracing(
    tracer: &mut Tracer,
    shared: &SharedRef,
    dispatch: &Arc<Dispatch>,
    shards: usize,
) -> Result<(), SessionError> {
    let (state, dispatch) = (shared.clone(), dispatch.clone());
    let factory: crate::utrace::EngineFactory = Arc::new(move || {
        let engine = ScriptEngine {
            shared: state.clone(),
            dispatch: dispatch.clone(),
        };
        vec![Box::new(engine) as Box<dyn crate::utrace::Engine>]
    });
    let end = end_on_first(tracer, shared);
    shared.borrow_mut().end_elsewhere = Some(end);
    tracer
        .enable_shards(shards, factory)
        .map_err(|e| SessionError(format!("cannot start tracer threads: {e}")))
}

/// How a handler running elsewhere than on the first tracer thread (a
/// shard, the notification server) has the script ended there.
fn end_on_first(tracer: &Tracer, shared: &SharedRef) -> Box<dyn Fn(EndReason) + Send + Sync> {
    let weak = Arc::downgrade(shared);
    let main = tracer.handle();
    Box::new(move |why| {
        let weak = weak.clone();
        let _ = main.send(move |ctl| {
            if let Some(s) = weak.upgrade() {
                s.borrow_mut().end(ctl, why);
            }
        });
    })
}

/// The script state behind its lock, for a session's engines and timers.
pub(crate) fn new_shared(shared: Shared) -> SharedRef {
    Arc::new(lock::ScriptLock::new(shared))
}

/// End (or error) probes, autoprinted globals, the error summary. From now
/// on no output is dropped (no tracee waits for it).
pub(crate) fn finish(script: &mut ScriptRuntime, sink: &mut dyn OutputSink) -> i32 {
    crate::endtrace::mark("end probes start");
    interrupt::clear();
    sink.ending();
    script.run_end(sink);
    let status = script.finish(sink);
    crate::endtrace::mark("end probes done");
    status
}

/// Attaches to the `-x` process; returns its pid and threads (no seccomp
/// filter can be added to a running process).
fn attach_target(
    tracer: &mut Tracer,
    pid: Tid,
    verbose: bool,
) -> Result<(Tid, Vec<Tid>, bool), SessionError> {
    let threads = tracer
        .ctl()
        .attach_process(pid)
        .map_err(|e| attach_error(pid, e))?;
    if verbose {
        crate::say!(
            "utap: attached to {} thread(s) of {pid}; syscalls stop the thread unless the data plane's dispatch serves them (no seccomp filter can be added to a running process)",
            threads.len()
        );
    }
    Ok((pid, threads, false))
}

pub(crate) fn attach_error(pid: Tid, e: crate::utrace::Error) -> SessionError {
    use crate::utrace::Error;
    let why = match e {
        Error::Gone(_)
        | Error::NoSuchThread(_)
        | Error::Os {
            errno: libc::ESRCH | libc::ENOENT,
            ..
        } => "no such process".to_string(),
        Error::Os {
            errno: libc::EPERM, ..
        } => match traced_by_utap(pid) {
            Some(tracer) => format!(
                "it is traced by another utap (pid {tracer}); to run several scripts on one \
                 process at once, run them through a utap daemon (start `utap --daemon`, \
                 then `utap --connect SCRIPT -x {pid}` for each)"
            ),
            None => eperm_reasons(std::path::Path::new("/proc/sys/kernel/yama").exists()),
        },
        other => other.to_string(),
    };
    SessionError(format!("cannot attach to process {pid}: {why}"))
}

/// The utap process tracing `pid`, if its tracer is a utap.
fn traced_by_utap(pid: Tid) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let tracer: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))?
        .trim()
        .parse()
        .ok()?;
    let exe = std::fs::read_link(format!("/proc/{tracer}/exe")).ok()?;
    (tracer != 0 && exe.file_name()? == "utap").then_some(tracer)
}

/// Why ptrace may refuse: Yama is named only on kernels that have it.
fn eperm_reasons(yama: bool) -> String {
    if yama {
        "operation not permitted (it is traced already, belongs to another user, \
         or kernel.yama.ptrace_scope forbids it)"
            .to_string()
    } else {
        "operation not permitted (it is traced already, or belongs to another user)".to_string()
    }
}

/// The `-c` command, started.
struct Started {
    pid: Tid,
    /// It runs under the session's seccomp filter.
    seccomp_on: bool,
    /// The filter's notification listener, when it has one.
    listener: Option<crate::listener::Listener>,
    /// Stopped at its execve's entry, which the probes are to see.
    at_exec_entry: bool,
}

/// Starts `-c CMD` (`utrace::command_line`) traced from its first
/// instruction, with a seccomp filter when the script probes syscalls; the
/// entries of `notified` (see [`notify`]) come through the returned
/// listener. When the script probes syscalls, the command's own execve is
/// theirs to see, as under SystemTap (whose command execs with the probes
/// armed): it is returned stopped at that call's entry.
fn spawn(
    tracer: &mut Tracer,
    cmd: &str,
    syscalls: SyscallNeed,
    notified: &[u32],
    gadget: Option<std::ops::Range<u64>>,
    verbose: bool,
) -> Result<Started, SessionError> {
    let mut command = SpawnCommand::command_line(cmd)
        .map_err(|e| SessionError(format!("cannot run {cmd:?}: {e}")))?;
    if syscalls != SyscallNeed::Nothing {
        command = command.report_exec();
    }
    // Built before fork: installing it in the child must not allocate.
    // A probe on every syscall still gets a filter (tracing every number
    // x86_64 has, far beyond its ≈460): one stop per syscall instead of
    // PTRACE_SYSCALL's two, and exits only where a return probe wants them.
    let needed: Vec<u32> = match syscalls {
        SyscallNeed::Nothing => Vec::new(),
        SyscallNeed::Some(s) => s.to_vec(),
        SyscallNeed::All => (0..EVERY_SYSCALL).collect(),
    };
    let with_notify = match notified {
        [] => None,
        _ => {
            let traced = needed.iter().copied().filter(|n| !notified.contains(n));
            seccomp::Filter::with_notify(traced, notified.iter().copied()).ok()
        }
    };
    let notify_on = with_notify.is_some();
    let filter = match (syscalls, with_notify, gadget) {
        (SyscallNeed::Nothing, ..) => None,
        (_, Some(f), _) => Some(f),
        (_, None, Some(g)) => seccomp::Filter::with_gadget(needed.iter().copied(), g).ok(),
        (_, None, None) => seccomp::Filter::new(needed.iter().copied()).ok(),
    };
    let mut install = || {
        filter.as_ref().is_some_and(|f| match notify_on {
            true => seccomp::install_with_listener(f).is_ok(),
            false => seccomp::install(f).is_ok(),
        })
    };
    let hook: Option<&mut dyn FnMut() -> bool> = match filter {
        Some(_) => Some(&mut install),
        None => None,
    };
    let spawned = tracer
        .spawn(&command, hook)
        .map_err(|e| SessionError(format!("cannot run {cmd:?}: {e}")))?;
    let seccomp_on = filter.is_some() && spawned.hook_ok;
    if seccomp_on && notify_on && spawned.listener.is_none() {
        // Its notified syscalls would fail with ENOSYS: never run it.
        // SAFETY: signalling our own stopped child.
        unsafe { libc::kill(spawned.pid.0, libc::SIGKILL) };
        return Err(SessionError(format!(
            "cannot run {cmd:?}: the seccomp notification listener could not be taken"
        )));
    }
    if seccomp_on {
        tracer
            .ctl()
            .set_syscall_source(spawned.pid, SyscallSource::Seccomp);
    } else {
        // Nothing in it needs utap: it outlives a `kill -9` of utap, as
        // an attached process does (docs/guide/tracing.md, "Ending a session").
        tracer
            .ctl()
            .outlive_tracer(spawned.pid)
            .map_err(|e| SessionError(format!("cannot run {cmd:?}: {e}")))?;
    }
    if verbose {
        crate::say!("{}", strategy_note(syscalls, seccomp_on));
        if let Some(l) = spawned.listener.as_ref().filter(|_| seccomp_on) {
            crate::say!(
                "utap: seccomp user notification serves the entries of {} syscall(s) without a ptrace stop ({})",
                notified.len(),
                match l.killable {
                    true => "killable waits",
                    false => "no WAIT_KILLABLE_RECV: a signal may restart a notified call",
                }
            );
        }
        if seccomp_on && seccomp::needs_no_new_privs() {
            crate::say!(
                "utap: without CAP_SYS_ADMIN the filter needs NO_NEW_PRIVS: setuid programs run without their privileges"
            );
        }
    }
    Ok(Started {
        pid: spawned.pid,
        seccomp_on,
        listener: spawned.listener.filter(|_| seccomp_on),
        at_exec_entry: spawned.at_exec_entry,
    })
}

/// Syscall numbers a filter for "every syscall" traces (x86_64 has < 512;
/// larger numbers fail with ENOSYS anyway).
const EVERY_SYSCALL: u32 = 1024;

fn strategy_note(syscalls: SyscallNeed, seccomp_on: bool) -> String {
    match (syscalls, seccomp_on) {
        (SyscallNeed::Nothing, _) => "utap: no syscall probe; no seccomp filter, no syscall stops".into(),
        (SyscallNeed::All, true) => {
            "utap: a probe takes every syscall; seccomp filter stops once on each (+ exits with a return probe)".into()
        }
        (SyscallNeed::Some(s), true) => format!(
            "utap: seccomp filter stops only on {} syscall(s) (+ execve)",
            s.len()
        ),
        (SyscallNeed::Some(_), false) => {
            "utap: seccomp filter could not be installed; stopping on every syscall".into()
        }
        (SyscallNeed::All, false) => {
            "utap: seccomp filter could not be installed; stopping twice on every syscall".into()
        }
    }
}

/// How often the tracer looks for `--metrics` scrapes.
const METRICS_POLL: Duration = Duration::from_millis(50);

/// Timer probes and the `-T` deadline, as ticks of the tracer loop.
pub(crate) fn schedule_timers(ctl: &mut Control, shared: &SharedRef, deadline: Option<Instant>) {
    let now = Instant::now();
    let timers = shared.borrow().first().timers();
    for t in timers {
        let shared = shared.clone();
        let mut jitter = crate::script::scheduler::Jitter::new(t.probe as u64);
        ctl.add_timer(now + jitter.period(&t), move |ctl| {
            let mut s = shared.borrow_mut();
            let s: &mut Shared = &mut s;
            if s.finished.is_some() {
                return None;
            }
            let held =
                s.inproc.as_ref().is_some_and(|i| i.runs_held(t.probe)) && s.hold_region(ctl);
            // A signal came (during the hold, which takes a while): the
            // session is ending; the timer's loops would only stop with
            // SystemTap's "interrupted" error. The region was only read.
            if held && crate::script::interrupt::requested() {
                return Some(Instant::now() + jitter.period(&t));
            }
            let (run, sink) = s.script_and_sink();
            let outcome = run.fire_timer(t.probe, sink);
            let failed = held && s.release_region();
            // resume()/quiesce()/stop(tid) from a timer: no current thread.
            s.apply(ctl, &outcome, -1, &mut 0);
            if outcome.stop || failed {
                s.end(ctl, EndReason::Requested);
                return None;
            }
            Some(Instant::now() + jitter.period(&t))
        });
    }
    if shared.borrow().first().has_metrics() {
        // Scrapes are answered between events, never while a tracee waits.
        let shared = shared.clone();
        ctl.add_timer(now + METRICS_POLL, move |ctl| {
            let mut s = shared.borrow_mut();
            let s: &mut Shared = &mut s;
            if s.finished.is_some() {
                return None;
            }
            // `probe prometheus` handlers run here; exit() in one ends it.
            let image = s.inproc.clone();
            let (run, sink) = s.script_and_sink();
            let fold = |run: &mut ScriptRuntime| {
                if let Some(img) = &image {
                    crate::dataplane::globals::fold(run, img);
                }
            };
            if run.serve_metrics(sink, &fold) {
                s.end(ctl, EndReason::Requested);
                return None;
            }
            Some(Instant::now() + METRICS_POLL)
        });
    }
    if let Some(deadline) = deadline {
        let shared = shared.clone();
        ctl.add_timer(deadline, move |ctl| {
            crate::endtrace::mark("deadline: tracer's timer ran");
            shared.borrow_mut().end(ctl, EndReason::Requested);
            None
        });
    }
}
