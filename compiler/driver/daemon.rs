//! The driver's side of the daemon (`utap_runtime::daemon`): `--daemon`
//! (compiling clients' scripts), `--sessions`, `--detach-session`, and the
//! client path of an ordinary `utap SCRIPT -x PID`.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use utap_compiler::check;
use utap_compiler::diag;
use utap_compiler::parser::{self, NodeIds, ParseOptions};
use utap_compiler::source::SourceMap;
use utap_runtime::daemon::channel::Channel;
use utap_runtime::daemon::protocol::{self, CommandEnv, Request};
use utap_runtime::daemon::server::{self, Prepare};
use utap_runtime::daemon::{Prepared, client};
use utap_runtime::host::Verdict;
use utap_runtime::script::RuntimeOptions;
use utap_runtime::transport;
use utap_runtime::utrace::command_line::CommandLine;

use crate::{Failure, cli, session, trace};

/// Runs what the daemon options ask for; `None` when this is an ordinary
/// standalone run.
pub fn run(opts: &cli::Options) -> Result<Option<u8>, Failure> {
    if opts.daemon {
        let socket = opts.socket.as_ref().map(PathBuf::from);
        server::serve(socket, Arc::new(Compiler)).map_err(Failure::Message)?;
        return Ok(Some(0));
    }
    if opts.sessions {
        return request(opts, Request::Sessions);
    }
    if let Some(id) = opts.detach_session {
        return request(opts, Request::Detach { id });
    }
    let Some(stream) = connect(opts)? else {
        return Ok(None);
    };
    let (source, _) = opts.script().map_err(Failure::Message)?;
    let (script_name, script) = crate::read_script(source)?;
    // The command's variables, `~`, globs and program are the client's
    // (and so is the message when they fail), as standalone.
    let split = match &opts.command {
        Some(cmd) => Some(CommandLine::parse(cmd).map_err(Failure::Message)?),
        None => None,
    };
    let output: Option<Box<dyn std::io::Write>> = match &opts.output {
        Some(path) => Some(Box::new(std::fs::File::create(path).map_err(|e| {
            Failure::Message(format!("cannot open output file '{path}': {e}"))
        })?)),
        None => None,
    };
    let request = Request::Run {
        argv: std::env::args().skip(1).collect(),
        script_name,
        script,
        colour: crate::colour(),
        command_io: opts.command.as_ref().map(|_| CommandEnv {
            cwd: std::env::current_dir()
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "/".into()),
            env: std::env::vars_os()
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect(),
            split: split.map(Into::into),
        }),
    };
    finish(client::run(stream, request, output))
}

/// The daemon's socket for the client side, and whether it is the
/// default one (whose directory must be private: `protocol::private_dir`).
fn socket_path(opts: &cli::Options) -> (PathBuf, bool) {
    match opts.connect.as_deref().or(opts.socket.as_deref()) {
        Some(p) if !p.is_empty() => (PathBuf::from(p), false),
        _ => (protocol::default_socket(), true),
    }
}

/// Why the default socket's directory is not to be trusted, if it is not
/// (a symbolic link, someone else's, open to others): a daemon found
/// there could be anyone's, and it would get the script, the environment
/// and, for `-c`, the terminal.
fn untrusted(path: &std::path::Path, default: bool) -> Option<String> {
    let dir = path.parent().filter(|_| default)?;
    protocol::private_dir(dir)
        .err()
        .map(|why| format!("refusing the daemon's directory: {why}"))
}

/// A connection to the daemon when this run should use one: `--connect`
/// (with `-x` or `-c`), or `-x` while the user's daemon runs (and not
/// `--no-daemon`). A `-c` run without `--connect` is standalone: its
/// command is the run's own (with the seccomp filter, killed with utap).
fn connect(opts: &cli::Options) -> Result<Option<std::os::unix::net::UnixStream>, Failure> {
    let explicit = opts.connect.is_some();
    if opts.no_daemon || opts.pass.is_some() {
        return Ok(None);
    }
    let on_a_process = opts.pid.is_some() || (explicit && opts.command.is_some());
    let eligible = on_a_process && opts.metrics.is_none();
    if explicit && !eligible {
        return Err(Failure::Message(
            "--connect runs a session on a process: give -x PID or -c CMD \
             (--metrics runs standalone)"
                .into(),
        ));
    }
    if !eligible {
        return Ok(None);
    }
    let (path, default) = socket_path(opts);
    if let Some(why) = untrusted(&path, default) {
        if explicit {
            return Err(Failure::Message(why));
        }
        // The daemon is only a convenience here: say why it is not used.
        eprintln!("utap: {why}; tracing without the daemon");
        return Ok(None);
    }
    match client::connect(&path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if explicit => Err(Failure::Message(format!(
            "cannot connect to a utap daemon at {}: {e}",
            path.display()
        ))),
        Err(_) => Ok(None),
    }
}

/// `--sessions` and `--detach-session`.
fn request(opts: &cli::Options, request: Request) -> Result<Option<u8>, Failure> {
    let (path, default) = socket_path(opts);
    if let Some(why) = untrusted(&path, default) {
        return Err(Failure::Message(why));
    }
    let stream = client::connect(&path)
        .map_err(|e| Failure::Message(format!("no utap daemon at {}: {e}", path.display())))?;
    finish(client::run(stream, request, None))
}

fn finish(verdict: Verdict) -> Result<Option<u8>, Failure> {
    match verdict {
        Verdict::Exit(code) => Ok(Some(code)),
        v => v.exit(),
    }
}

/// Compiles clients' scripts in the daemon, as a standalone utap does,
/// with the client's command line.
struct Compiler;

impl Prepare for Compiler {
    fn prepare(
        &self,
        argv: &[String],
        script_name: &str,
        script: &str,
        colour: bool,
        command: Option<&CommandLine>,
        channel: &Channel,
    ) -> Option<(Prepared, Box<dyn Any>)> {
        let fail = |msg: String| {
            channel.stderr(format!("utap: {msg}\n"));
            None
        };
        let args = std::iter::once("utap".to_string()).chain(argv.iter().cloned());
        let opts = match cli::Options::try_parse_from(args) {
            Ok(o) => o,
            Err(e) => return fail(e.to_string().trim_end().to_string()),
        };
        if opts.pid.is_none() && opts.command.is_none() {
            return fail("a daemon session needs -x PID or -c CMD".into());
        }
        let pid = opts.pid.unwrap_or(0);
        let script_args = match opts.script() {
            Ok((_, args)) => args,
            Err(m) => return fail(m),
        };
        let mut map = SourceMap::new();
        let file = map.add(script_name, script);
        let diagnostics = |d: &[diag::Diagnostic], map: &SourceMap| {
            channel.stderr(diag::render_all(d, map, colour));
            None
        };
        let parse_opts = ParseOptions {
            args: script_args,
            guru: opts.guru,
            ..ParseOptions::default()
        };
        let mut ids = NodeIds::default();
        let parsed = match parser::parse_file(&map, file, &parse_opts, &mut ids) {
            Ok(p) => p,
            Err(d) => return diagnostics(&d, &map),
        };
        let check_opts = check::CheckOptions {
            args: parse_opts.args.clone(),
            ..crate::check_options_with(&opts, command)
        };
        let checked = match check::check(&mut map, parsed, &check_opts, &mut ids) {
            Ok(c) => c,
            Err(d) => return diagnostics(&d, &map),
        };
        if !checked.warnings.is_empty() && !opts.no_warnings {
            channel.stderr(diag::render_all(&checked.warnings, &map, colour));
        }
        let mut program = checked.program;
        let compiled = match session::translate(&opts, &map, &mut program) {
            Ok(c) => c,
            Err(session::PassError::Diagnostics(d)) => return diagnostics(&d, &map),
            Err(session::PassError::Message(m)) => return fail(m),
            Err(session::PassError::Reported) => return None,
        };
        if let Err(m) = trace::target(&opts, &program, command) {
            return fail(m);
        }
        let points = match trace::process_points(&program) {
            Ok(p) => p,
            Err(m) => return fail(m),
        };
        let limits = match session::limits(&opts) {
            Ok(l) => l,
            Err(session::PassError::Message(m)) => return fail(m),
            Err(_) => return None,
        };
        let buffer_bytes = match &opts.buffer_mb {
            Some(mb) => match transport::parse_buffer_mb(mb) {
                Ok(b) => b,
                Err(m) => return fail(m),
            },
            None => transport::DEFAULT_BUFFER_MB << 20,
        };
        let prepared = Prepared {
            image: compiled.image.clone(),
            options: RuntimeOptions {
                limits,
                suppress_errors: opts.suppress_handler_errors,
                target: 0,
                timing: opts.timing.then(|| session::timing_labels(&program, &map)),
                verbose: opts.verbose > 0,
            },
            points,
            pid,
            command: opts.command.clone(),
            io: None,
            time_limit: opts.timeout.map(Duration::from_secs_f64),
            guru: opts.guru,
            json: opts.format == cli::Format::Json,
            buffer_bytes,
            verbose: opts.verbose > 0,
            exit_status: opts.exit_status,
            name: script_name.to_string(),
        };
        Some((prepared, Box::new(compiled)))
    }
}
