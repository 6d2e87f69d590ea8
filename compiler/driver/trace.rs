//! The driver's side of process sessions (`-c`, `-x`, process probes):
//! translating the checker's probe points into the runtime's.

use utap_compiler::program::{PointKind, ProcessEvent as Ev, ProcessTarget, Program};
use utap_runtime::session::{ProcessEvent, ProcessFilter, ProcessPoint, Target};
use utap_runtime::utrace::command_line::CommandLine;

use crate::cli;

/// The target from `-c` / `-x`, or why the script cannot run. `split`:
/// the `-c` command split already (by a daemon's client, which checked it).
pub fn target(
    opts: &cli::Options,
    program: &Program,
    split: Option<&CommandLine>,
) -> Result<Option<Target>, String> {
    match (&opts.command, opts.pid) {
        (Some(_), Some(_)) => Err("-c and -x cannot be used together".into()),
        (Some(cmd), None) => {
            if split.is_none() {
                check_command(cmd)?;
            }
            Ok(Some(Target::Command(cmd.clone())))
        }
        (None, Some(pid)) => {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(format!("cannot attach to process {pid}: no such process"));
            }
            Ok(Some(Target::Attach(pid)))
        }
        (None, None) if !process_points(program)?.is_empty() => {
            Err("process probes need a process to trace: give -c CMD or -x PID".into())
        }
        (None, None) => Ok(None),
    }
}

/// Every process probe point of the program, by probe index.
pub fn process_points(program: &Program) -> Result<Vec<ProcessPoint>, String> {
    let mut out = Vec::new();
    for (probe, p) in program.probes.iter().enumerate() {
        for (point, pt) in p.points.iter().enumerate() {
            if let PointKind::Process { target, event } = &pt.kind {
                out.push(ProcessPoint {
                    probe,
                    point,
                    filter: filter(target)?,
                    event: event_of(event),
                });
            }
        }
    }
    Ok(out)
}

fn event_of(e: &Ev) -> ProcessEvent {
    match e {
        Ev::Begin => ProcessEvent::Begin,
        Ev::Create => ProcessEvent::Create,
        Ev::End => ProcessEvent::End,
        Ev::ThreadBegin => ProcessEvent::ThreadBegin,
        Ev::ThreadEnd => ProcessEvent::ThreadEnd,
        Ev::Syscall { syscalls } => ProcessEvent::Syscall(syscalls.clone()),
        Ev::SyscallReturn { syscalls } => ProcessEvent::SyscallReturn(syscalls.clone()),
        Ev::Signal => ProcessEvent::Signal,
        Ev::Quiesce => ProcessEvent::Quiesce,
        Ev::Profile { period_ns } => ProcessEvent::Profile {
            period_ns: *period_ns,
        },
        Ev::Function(f) => ProcessEvent::Function(f.clone()),
    }
}

/// `process("PATH")` names an executable as SystemTap resolves it: a name
/// without a slash is looked up in PATH, and links are resolved, so that it
/// compares equal to `/proc/PID/exe`.
fn filter(target: &ProcessTarget) -> Result<ProcessFilter, String> {
    Ok(match target {
        ProcessTarget::Any => ProcessFilter::Any,
        ProcessTarget::Pid(p) => ProcessFilter::Pid(*p as i32),
        ProcessTarget::Path(path) => ProcessFilter::Path(resolve(path)?),
    })
}

fn resolve(path: &str) -> Result<String, String> {
    let found = if path.contains('/') {
        Some(std::path::PathBuf::from(path))
    } else {
        std::env::var_os("PATH").and_then(|dirs| {
            std::env::split_paths(&dirs)
                .map(|d| d.join(path))
                .find(|p| p.is_file())
        })
    };
    found
        .and_then(|p| std::fs::canonicalize(p).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .ok_or_else(|| format!("cannot find executable '{path}' of process(\"{path}\")"))
}

/// Fails before anything starts when `-c CMD` cannot run: a program that
/// is not there, unmatched quotes, an undefined variable (SystemTap's
/// wordexp rules, `utrace::command_line`).
fn check_command(cmd: &str) -> Result<(), String> {
    CommandLine::parse(cmd).map(|_| ())
}
