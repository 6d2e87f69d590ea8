//! The daemon's sessions, as the tracer thread keeps them.
//!
//! Everything here runs on the tracer thread, inside commands sent through
//! the tracer's handle, between reports (a quiesce point for every engine):
//! a session starts (script engine into a free slot, attached to its
//! target's threads, seizing them first if no session traces that process
//! yet), ends (its end probes, then its engine detached from every thread:
//! the last engine gone, the core detaches the thread from ptrace), and is
//! released (slot emptied) once its client has its verdict.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::channel::Channel;
use super::slots::Slot;
use crate::script::image::ScriptImage;
use crate::script::{RuntimeOptions, ScriptRuntime};
use crate::session::engine::{ScriptEngine, Shared, SharedRef};
use crate::session::points::Dispatch;
use crate::session::{Aftermath, Conclude, ProcessPoint, attach_error, finish, schedule_timers};
use crate::transport::{self, Transport};
use crate::utrace::{AttachMode, Control, EndReason, EngineId, SpawnCommand, Tid};

/// A session compiled and ready to start: everything crosses from the
/// connection's thread to the tracer thread.
pub struct Prepared {
    pub image: Arc<ScriptImage>,
    pub options: RuntimeOptions,
    pub points: Vec<ProcessPoint>,
    /// `-x PID` (0 with a command).
    pub pid: i32,
    /// `-c CMD`, and (set by the server) where it runs.
    pub command: Option<String>,
    pub io: Option<CommandIo>,
    /// `-T SECONDS`.
    pub time_limit: Option<Duration>,
    /// `-g`: the session may write (registers, syscall results, signals).
    pub guru: bool,
    /// `--format json`.
    pub json: bool,
    /// `-s MB`, in bytes.
    pub buffer_bytes: usize,
    pub verbose: bool,
    /// `--exit-status`: the client ends with its command's status.
    pub exit_status: bool,
    /// The script's name, for `--sessions`.
    pub name: String,
}

/// A `-c` command's descriptors (stdin, stdout, stderr), directory and
/// environment: the client's.
pub struct CommandIo {
    pub fds: Vec<std::os::fd::OwnedFd>,
    pub cwd: String,
    pub env: Vec<String>,
    /// The command as the client split it (None: split it here).
    pub line: Option<crate::utrace::command_line::CommandLine>,
}

struct Live {
    slot: usize,
    shared: SharedRef,
    pid: i32,
    guru: bool,
    name: String,
    started: Instant,
}

#[derive(Default)]
struct Table {
    slots: Vec<(Slot, EngineId)>,
    sessions: BTreeMap<u64, Live>,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table::default());
}

/// Sessions whose output is still being written to their clients.
pub(crate) static CONCLUDING: AtomicUsize = AtomicUsize::new(0);

/// Gives the tracer thread its slots (before `run`).
pub(crate) fn install(slots: Vec<(Slot, EngineId)>) {
    TABLE.with(|t| t.borrow_mut().slots = slots);
}

fn free_slot() -> Option<(usize, Slot, EngineId)> {
    TABLE.with(|t| {
        let t = t.borrow();
        let used: Vec<usize> = t.sessions.values().map(|l| l.slot).collect();
        t.slots
            .iter()
            .enumerate()
            .find(|(i, (s, _))| !used.contains(i) && s.engine.borrow().is_none())
            .map(|(i, (s, id))| (i, s.clone(), *id))
    })
}

/// The guru session already steering `pid`, if any.
fn guru_on(pid: i32) -> Option<u64> {
    TABLE.with(|t| {
        t.borrow()
            .sessions
            .iter()
            .find(|(_, l)| l.guru && l.pid == pid && l.shared.borrow().finished.is_none())
            .map(|(id, _)| *id)
    })
}

/// How the client ends once its output is written: the script's status,
/// 1 after an output error, SIGPIPE when its reader went away.
fn verdict(status: i32, stats: &transport::Stats) -> i32 {
    match &stats.error {
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => -libc::SIGPIPE,
        Some(_) => 1,
        None => status.clamp(0, 255),
    }
}

/// The session's end, off the tracer thread: drain its output to the
/// client, send the verdict, tell the connection (`done`).
fn conclusion(transport: Transport, channel: Channel, done: mpsc::Sender<()>) -> Conclude {
    Box::new(move |status: i32, _: Aftermath| {
        CONCLUDING.fetch_add(1, Ordering::SeqCst);
        std::thread::spawn(move || {
            let stats = transport.finish();
            channel.exit(verdict(status, &stats));
            CONCLUDING.fetch_sub(1, Ordering::SeqCst);
            let _ = done.send(());
        });
        status
    })
}

/// Starts session `id` (on the tracer thread): begin probes, then its
/// engine on every thread of its target. A failure to attach after the
/// begin probes ran ends the session with status 1, as standalone.
pub(crate) fn start(
    ctl: &mut Control,
    id: u64,
    p: Prepared,
    channel: Channel,
    done: mpsc::Sender<()>,
) -> Result<(), String> {
    if p.guru
        && let Some(other) = guru_on(p.pid)
    {
        return Err(format!(
            "process {} is already steered by guru session {other}: only one guru (-g) session \
             per process at a time (observe it without -g, or end session {other} first)",
            p.pid
        ));
    }
    let (slot_no, slot, engine) = free_slot().ok_or_else(|| {
        format!(
            "the daemon serves {} sessions at once already",
            super::slots::SLOTS
        )
    })?;
    let deadline = p.time_limit.map(|limit| Instant::now() + limit);
    let mut script = ScriptRuntime::new(p.image, p.options);
    let mut config = channel.transport_config(p.buffer_bytes, p.json);
    config.render = Some(match p.json {
        true => script.defer_formatting_json(),
        false => script.defer_formatting(),
    });
    let (transport, mut sink) =
        Transport::start(config).map_err(|e| format!("cannot start output: {e}"))?;
    let conclude = conclusion(transport, channel, done);
    let spawned = match (&p.command, p.io) {
        (Some(cmd), Some(io)) => match spawn(ctl, cmd, io) {
            Ok(pid) => Some(pid),
            Err(msg) => {
                sink.control(format!("utap: {msg}\n"));
                conclude(1, Aftermath::Detach);
                return Ok(());
            }
        },
        _ => None,
    };
    let pid = spawned.unwrap_or(Tid(p.pid));
    script.set_target(pid.0 as i64);
    if !script.run_begin(&mut sink) {
        if let Some(pid) = spawned {
            // Never run, as standalone.
            // SAFETY: signalling our own stopped child.
            unsafe { libc::kill(pid.0, libc::SIGKILL) };
        }
        conclude(finish(&mut script, &mut sink), Aftermath::Detach);
        return Ok(());
    }
    let mut threads: Vec<Tid> = ctl
        .threads()
        .into_iter()
        .filter(|t| ctl.process_of(*t) == Some(pid))
        .collect();
    if spawned.is_none() {
        // An attached program must outlive the daemon's death unharmed.
        crate::guardian::arm(false, false);
    }
    if threads.is_empty() {
        match ctl.attach_process(pid) {
            Ok(t) => threads = t,
            Err(e) => {
                sink.control(format!("utap: {}\n", attach_error(pid, e)));
                conclude(1, Aftermath::Detach);
                return Ok(());
            }
        }
    }
    let dispatch = Arc::new(Dispatch::new(&p.points));
    let shared: SharedRef = crate::session::new_shared(Shared::new(script, sink, &dispatch));
    {
        let mut s = shared.borrow_mut();
        s.verbose = p.verbose;
        s.exit_with_target = p.exit_status;
        s.engine = engine;
        s.conclude = Some(conclude);
        s.end_with = Some(pid.0);
        s.release = Some(Box::new(move |ctl: &mut Control| {
            for t in ctl.threads() {
                let _ = ctl.detach(t, engine);
            }
        }));
    }
    slot.busy.set(Duration::ZERO);
    *slot.engine.borrow_mut() = Some(ScriptEngine {
        shared: shared.clone(),
        dispatch: dispatch.clone(),
    });
    TABLE.with(|t| {
        t.borrow_mut().sessions.insert(
            id,
            Live {
                slot: slot_no,
                shared: shared.clone(),
                pid: pid.0,
                guru: p.guru,
                name: p.name,
                started: Instant::now(),
            },
        )
    });
    // A thread exiting meanwhile is no error: it is gone.
    threads.retain(|&t| {
        ctl.attach(t, engine, AttachMode::Create, dispatch.events())
            .is_ok()
    });
    shared
        .borrow_mut()
        .adopt_process(ctl, &dispatch, pid, &threads);
    schedule_timers(ctl, &shared, deadline);
    Ok(())
}

/// Starts a client's `-c` command (its words, or `/bin/sh -c CMD`) stopped at its
/// exec, with the client's descriptors, directory and environment. No
/// seccomp filter: the process may be shared with sessions that probe
/// other syscalls, and it must be free to run on untraced when its last
/// session ends.
fn spawn(ctl: &mut Control, cmd: &str, io: CommandIo) -> Result<Tid, String> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    let command = match io.line {
        Some(line) => SpawnCommand::from_line(line),
        None => SpawnCommand::command_line(cmd),
    }
    .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    // Everything the child needs is built before the fork: it must not
    // allocate.
    let cwd = CString::new(io.cwd.clone()).map_err(|_| "bad directory".to_string())?;
    let env: Vec<CString> = io
        .env
        .iter()
        .filter_map(|v| CString::new(v.as_str()).ok())
        .collect();
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|v| v.as_ptr()).collect();
    envp.push(std::ptr::null());
    let fds: Vec<i32> = io.fds.iter().map(|f| f.as_raw_fd()).collect();
    let mut setup = || {
        unsafe extern "C" {
            static mut environ: *const *const libc::c_char;
        }
        // SAFETY: async-signal-safe calls on descriptors and strings built
        // before the fork; environ is this (single-threaded) child's own.
        unsafe {
            for (i, &fd) in fds.iter().enumerate() {
                libc::dup2(fd, i as i32);
            }
            if libc::chdir(cwd.as_ptr()) != 0 {
                return false;
            }
            environ = envp.as_ptr();
        }
        true
    };
    let spawned = ctl
        .spawn(&command, Some(&mut setup))
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !spawned.hook_ok {
        // SAFETY: signalling our own stopped child.
        unsafe { libc::kill(spawned.pid.0, libc::SIGKILL) };
        return Err(format!("cannot run {cmd:?} in {}", io.cwd));
    }
    // No filter: a `kill -9` of the daemon leaves it running untraced.
    ctl.outlive_tracer(spawned.pid)
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    Ok(spawned.pid)
}

/// Ends session `id` as Ctrl-C ends a standalone one (end probes, output,
/// verdict; its engine detached). False if there is no such session.
pub(crate) fn end(ctl: &mut Control, id: u64) -> bool {
    let Some(shared) = TABLE.with(|t| t.borrow().sessions.get(&id).map(|l| l.shared.clone()))
    else {
        return false;
    };
    shared.borrow_mut().end(ctl, EndReason::Requested);
    true
}

/// Ends every session (the daemon is stopping).
pub(crate) fn end_all(ctl: &mut Control) {
    let ids: Vec<u64> = TABLE.with(|t| t.borrow().sessions.keys().copied().collect());
    for id in ids {
        end(ctl, id);
    }
}

/// Forgets an ended session whose client has its verdict: its engine is
/// off every thread and its slot free again.
pub(crate) fn release(ctl: &mut Control, id: u64) {
    end(ctl, id);
    let Some(live) = TABLE.with(|t| t.borrow_mut().sessions.remove(&id)) else {
        return;
    };
    let (slot, engine) = TABLE.with(|t| t.borrow().slots[live.slot].clone());
    for t in ctl.threads() {
        let _ = ctl.detach(t, engine);
    }
    let script_engine = slot.engine.borrow_mut().take();
    drop(script_engine);
    drop(live);
}

/// `utap --sessions`: one line per session.
pub(crate) fn list(ctl: &mut Control) -> String {
    let mut out = String::from("ID\tPID\tTHREADS\tDROPS\tCPU_MS\tMODE\tSTATE\tAGE_S\tSCRIPT\n");
    TABLE.with(|t| {
        let t = t.borrow();
        for (id, live) in &t.sessions {
            let (slot, engine) = &t.slots[live.slot];
            let threads = ctl
                .threads()
                .into_iter()
                .filter(|&tid| ctl.events(tid, *engine).is_ok())
                .count();
            let s = live.shared.borrow();
            let _ = writeln!(
                out,
                "{id}\t{}\t{threads}\t{}\t{:.3}\t{}\t{}\t{}\t{}",
                live.pid,
                s.sink.lock().unwrap_or_else(|e| e.into_inner()).lost(),
                slot.busy.get().as_secs_f64() * 1000.0,
                if live.guru { "guru" } else { "observe" },
                if s.finished.is_some() {
                    "ending"
                } else {
                    "running"
                },
                live.started.elapsed().as_secs(),
                live.name,
            );
        }
    });
    out
}
