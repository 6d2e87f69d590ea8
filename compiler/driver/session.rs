//! Passes 3 to 5 of the driver: compile the checked program to native code
//! (`-p3` prints the Cranelift IR, `-p4` the code sizes) and run it.
//! Sessions without process probes run here with the begin/end/timer
//! scheduler; their output goes through the transport queue.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use utap_codegen::{CompiledScript, Options as CodegenOptions, compile};
use utap_compiler::ast::Literal;
use utap_compiler::diag::Diagnostic;
use utap_compiler::program::{Program, Type};
use utap_compiler::source::SourceMap;
use utap_runtime::script::timing::TimingLabel;
use utap_runtime::script::{Limits, RuntimeOptions, ScriptRuntime, interrupt, scheduler};
use utap_runtime::transport::{self, Config, Output, Transport};

use crate::{cli, trace};
use utap_runtime::host::{self, HostLink, Side, Verdict};
use utap_runtime::session::{Aftermath, SessionOptions, Target};
use utap_runtime::utrace;

/// Why a later pass stopped.
pub enum PassError {
    Message(String),
    Diagnostics(Vec<Diagnostic>),
    /// Already printed (by the tracing process, before it handed over).
    Reported,
}

/// The limits from `-D`.
pub fn limits(opts: &cli::Options) -> Result<Limits, PassError> {
    let defs: Vec<String> = opts
        .defines
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    Limits::from_defines(&defs).map_err(PassError::Message)
}

/// `-G NAME=VALUE`: a global's initial value (a number for a long).
fn apply_global_values(opts: &cli::Options, program: &mut Program) -> Result<(), PassError> {
    for (name, value) in &opts.global_values {
        let Some(g) = program.globals.iter_mut().find(|g| g.name == *name) else {
            return Err(PassError::Message(format!(
                "-G: no global variable '{name}' in the script"
            )));
        };
        g.init = Some(match g.ty {
            Type::Long => Literal::Num(value.trim().parse().map_err(|_| {
                PassError::Message(format!("-G {name}: '{value}' is not a number"))
            })?),
            _ => Literal::Str(value.clone()),
        });
    }
    Ok(())
}

/// Pass 3 and 4: native code for every handler.
pub fn translate(
    opts: &cli::Options,
    map: &SourceMap,
    program: &mut Program,
) -> Result<CompiledScript, PassError> {
    apply_global_values(opts, program)?;
    let options = CodegenOptions {
        limits: limits(opts)?,
        keep_ir: opts.pass == Some(3),
    };
    compile(program, map, &options).map_err(|e| {
        let label = e.message.lines().next().unwrap_or_default().to_string();
        PassError::Diagnostics(vec![
            Diagnostic::semantic_error(e.message).with_label(e.span, label),
        ])
    })
}

/// `-p4`: what was compiled (probe handlers that differ only in constants
/// share one function).
pub fn print_sizes(compiled: &CompiledScript) {
    let total: usize = compiled.sizes.iter().map(|s| s.bytes).sum();
    for s in &compiled.sizes {
        if s.shared_by > 1 {
            println!(
                "{}: {} bytes, shared by {} probes",
                s.name, s.bytes, s.shared_by
            );
        } else {
            println!("{}: {} bytes", s.name, s.bytes);
        }
    }
    let probes = compiled.image.probes.len();
    let handlers: std::collections::HashSet<usize> = compiled
        .image
        .probes
        .iter()
        .map(|p| p.handler as usize)
        .collect();
    println!(
        "{} functions, {} bytes of native code ({} probes run {} handlers)",
        compiled.sizes.len(),
        total,
        probes,
        handlers.len()
    );
}

/// Starts the output thread; handlers' `printf` output is formatted there
/// (`rt` queues records from now on).
fn start_transport(
    opts: &cli::Options,
    rt: &mut ScriptRuntime,
) -> Result<(Transport, transport::Producer), PassError> {
    let mut config = Config::stdout();
    if opts.format == cli::Format::Json {
        config.render = Some(rt.defer_formatting_json());
        config.json = true;
    } else {
        config.render = Some(rt.defer_formatting());
    }
    if let Some(mb) = &opts.buffer_mb {
        config.buffer_bytes =
            transport::parse_buffer_mb(mb.as_str()).map_err(PassError::Message)?;
    }
    if let Some(path) = &opts.output {
        config.output = Output::file(std::path::Path::new(path))
            .map_err(|e| PassError::Message(format!("cannot open output file '{path}': {e}")))?;
        if config.json {
            // The file is a JSON Lines stream of its own: it starts with
            // the schema line too.
            let mut header = Vec::new();
            utap_runtime::json::header(&mut header);
            if let Output::Writer(w) = &mut config.output {
                w.write_all(&header).map_err(|e| {
                    PassError::Message(format!("cannot write output file '{path}': {e}"))
                })?;
            }
        }
    }
    Transport::start(config).map_err(|e| PassError::Message(format!("cannot start output: {e}")))
}

/// `-t`: where each probe is and how the script wrote its point.
pub fn timing_labels(program: &Program, map: &SourceMap) -> Vec<TimingLabel> {
    program
        .probes
        .iter()
        .map(|p| TimingLabel {
            location: map.location(p.span),
            from: p.name.clone(),
        })
        .collect()
}

/// Whether the script runs on a process (`-c`, `-x`): then it is compiled
/// and run in the tracing process (see [`split`]).
pub fn on_a_process(opts: &cli::Options) -> bool {
    matches!(opts.pass, None | Some(5)) && (opts.command.is_some() || opts.pid.is_some())
}

/// Which side of the split the caller is on.
pub enum Split {
    /// Waits for the verdict and exits with it.
    Foreground(host::Foreground),
    /// Compiles and runs the session; hands the verdict over.
    Host(SharedHandover),
}

/// Splits utap into the foreground the shell waits for and the tracing
/// process (see utap_runtime::host). Call it while utap has one thread,
/// before compiling: the compiler's pages are then the tracing process's
/// own, and it does not copy them as it writes them.
pub fn split(attach: bool) -> Result<Split, PassError> {
    match host::split(attach) {
        Ok(Side::Foreground(fg)) => Ok(Split::Foreground(fg)),
        Ok(Side::Host(link)) => Ok(Split::Host(Arc::new(Mutex::new(Handover {
            link,
            verdict: None,
            last_words: None,
        })))),
        Err(e) => Err(PassError::Message(format!(
            "cannot start the tracing process: {e}"
        ))),
    }
}

/// Gives the foreground `verdict` unless it has one already (a failure
/// before the session: the message is printed; then the verdict goes).
pub fn hand_over(handover: &SharedHandover, verdict: Verdict) {
    lock(handover).report(verdict);
}

/// Something to print just before the verdict goes (after it, the
/// tracing process's stderr is /dev/null): `-v`'s last "Pass" line.
pub fn before_verdict(handover: &SharedHandover, last_words: impl FnOnce() + Send + 'static) {
    lock(handover).last_words = Some(Box::new(last_words));
}

fn lock(handover: &SharedHandover) -> std::sync::MutexGuard<'_, Handover> {
    handover.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pass 5: runs the session; returns the exit status (or ends utap with
/// its verdict). A process session (`handover`, in the tracing process)
/// hands its verdict over to the foreground.
pub fn run(
    opts: &cli::Options,
    map: &SourceMap,
    program: &Program,
    compiled: &CompiledScript,
    handover: Option<&SharedHandover>,
) -> Result<i32, PassError> {
    let target = trace::target(opts, program, None).map_err(PassError::Message)?;
    warn_unserved_prometheus(opts, program);
    let options = RuntimeOptions {
        limits: limits(opts)?,
        suppress_errors: opts.suppress_handler_errors,
        target: 0,
        timing: opts.timing.then(|| timing_labels(program, map)),
        verbose: opts.verbose > 0,
    };
    let limit = opts.timeout.map(Duration::from_secs_f64);
    // The user's script is the first file read (see main's `passes`).
    let metric_specs = utap_compiler::metrics::specs(program, 0, map.name(0));
    let (Some(target), Some(handover)) = (target, handover) else {
        let mut rt = ScriptRuntime::new(Arc::clone(&compiled.image), options);
        let metrics = start_metrics(opts, &mut rt, metric_specs)?;
        let (transport, mut producer) = start_transport(opts, &mut rt)?;
        transport.on_closed(scheduler::interrupt);
        scheduler::install_interrupt_handler();
        let status = scheduler::run(&mut rt, &mut producer, limit);
        drop(producer);
        let verdict = verdict(status, transport.finish());
        // exit() runs no destructor: a scrape whose prometheus probe called
        // exit() is still being answered on the HTTP thread; let it finish.
        drop(metrics);
        verdict.exit();
    };
    let points = trace::process_points(program).map_err(PassError::Message)?;
    let stopless = utap_compiler::stopless::stopless_probes(program);
    let inproc = in_process(opts, map, program, &target)?;
    let result = traced(
        opts,
        compiled,
        options,
        target,
        limit,
        &points,
        stopless,
        inproc.as_ref().map(|i| i.image.clone()),
        handover,
        metric_specs,
        machine_stdout(opts, program),
    );
    // Every thread is detached now: the foreground may go.
    let mut h = lock(handover);
    let reported = match result {
        Err(e) if !h.link.reported() => {
            if let PassError::Message(m) = &e {
                eprintln!("utap: {m}");
            }
            h.report(Verdict::Exit(1));
            Err(PassError::Reported)
        }
        Ok(status) => {
            let verdict = h
                .verdict
                .unwrap_or(Verdict::Exit(status.clamp(0, 255) as u8));
            h.report(verdict);
            Ok(status)
        }
        result => result,
    };
    drop(h);
    utap_runtime::session::drop_leftovers();
    reported
}

/// What utap writes on its stdout for another program to parse, if it
/// does (no `-o FILE`): JSON Lines, or folded stacks for a flame graph
/// tool. A process session warns when the command writes there too
/// (docs/guide/output.md).
fn machine_stdout(opts: &cli::Options, program: &Program) -> Option<String> {
    if opts.output.is_some() {
        return None;
    }
    if opts.format == cli::Format::Json {
        return Some("utap's -f json output".into());
    }
    let mut folded = false;
    utap_compiler::walk::program(program, &mut |e| {
        folded |= matches!(
            &e.kind,
            utap_compiler::program::ExprKind::Builtin { name, .. }
                if name.ends_with("_folded")
        );
    });
    folded.then(|| "utap's folded stacks".into())
}

/// The handlers that run inside the program (`utap_compiler::route`),
/// compiled for it: for a `-c` command or an `-x` process (whose syscall
/// sites need `UTAP_SUD=1`), not with MAXERRORS above 0 (the first error
/// in the program stops every handler there). `-v` says which probes stay
/// in the tracer and why.
fn in_process(
    opts: &cli::Options,
    map: &SourceMap,
    program: &Program,
    target: &Target,
) -> Result<Option<utap_codegen::inproc::InProc>, PassError> {
    let limits = limits(opts)?;
    // A `--metrics` scrape folds the region into the tracer's state
    // first (`ScriptRuntime::serve_metrics`).
    if !matches!(target, Target::Command(_) | Target::Attach(_)) || limits.max_errors != 0 {
        return Ok(None);
    }
    let routes = utap_compiler::route::routes(program);
    if opts.verbose > 0 {
        say_routes(program, &routes);
    }
    let options = CodegenOptions {
        limits,
        keep_ir: false,
    };
    match utap_codegen::inproc::compile(program, &routes, map, &options) {
        Ok(found) => Ok(found),
        Err(e) => {
            if opts.verbose > 0 {
                eprintln!("utap: every probe runs in the tracer: {e}");
            }
            Ok(None)
        }
    }
}

/// `-v`: how many probes run in the program, and why the others do not
/// (each reason once, with how many probes it keeps in the tracer).
fn say_routes(program: &Program, routes: &[utap_compiler::route::Route]) {
    use utap_compiler::route::Route;
    let inside = routes.iter().filter(|r| **r == Route::InProcess).count();
    eprintln!(
        "utap: {inside} of {} probe(s) run in the program (data plane)",
        routes.len()
    );
    let mut why: Vec<(&str, usize, &str)> = Vec::new();
    for (p, r) in program.probes.iter().zip(routes) {
        if let Route::Tracer(reason) = r {
            match why.iter_mut().find(|(w, ..)| *w == reason.as_str()) {
                Some(entry) => entry.1 += 1,
                None => why.push((reason, 1, &p.name)),
            }
        }
    }
    for (reason, n, first) in why {
        eprintln!("utap:   {n} in the tracer ({first}...): {reason}");
    }
}

/// `probe prometheus` without `--metrics`: nothing would ever run it
/// (SystemTap serves it in /proc; utap only over HTTP), so say how.
fn warn_unserved_prometheus(opts: &cli::Options, program: &Program) {
    let has = program.probes.iter().any(|p| {
        p.points
            .iter()
            .any(|pt| pt.kind == utap_compiler::program::PointKind::Prometheus)
    });
    if has && opts.metrics.is_none() && !opts.no_warnings {
        eprintln!(
            "WARNING: probe prometheus runs only when /metrics is scraped: serve it with --metrics 127.0.0.1:PORT"
        );
    }
}

/// `--metrics ADDR`: the HTTP server's thread, started in the process that
/// runs the session (after the split: a fork keeps only the calling thread),
/// exporting the globals `specs` name.
fn start_metrics(
    opts: &cli::Options,
    rt: &mut ScriptRuntime,
    specs: Vec<utap_runtime::metrics::MetricSpec>,
) -> Result<Option<utap_runtime::metrics::MetricsServer>, PassError> {
    let Some(addr) = &opts.metrics else {
        return Ok(None);
    };
    let (server, requests) =
        utap_runtime::metrics::MetricsServer::start(addr, specs).map_err(PassError::Message)?;
    eprintln!("utap: serving metrics at http://{}/metrics", server.addr);
    rt.set_metrics(requests);
    Ok(Some(server))
}

/// The tracing process's link to the foreground, and the verdict it will
/// get once the threads are let go.
pub struct Handover {
    link: HostLink,
    verdict: Option<Verdict>,
    last_words: Option<Box<dyn FnOnce() + Send>>,
}

pub type SharedHandover = Arc<Mutex<Handover>>;

impl Handover {
    /// Sends the verdict (the first time only), after the last words.
    fn report(&mut self, verdict: Verdict) {
        if self.link.reported() {
            return;
        }
        if let Some(words) = self.last_words.take() {
            words();
        }
        self.link.report(verdict);
    }
}

/// How long the foreground waits for the threads to be detached before it
/// returns anyway (detaching goes on behind it): long enough for a few
/// hundred threads, so that a debugger started right after utap usually
/// finds the process untraced; short enough to end "at once".
/// `UTAP_DETACH_BUDGET_MS` changes it (tests: 0 ends the foreground while
/// the host is still detaching).
fn detach_budget() -> Duration {
    let ms = std::env::var("UTAP_DETACH_BUDGET_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    Duration::from_millis(ms)
}

/// The tracing process's session: output thread, tracer, and the hand-over
/// of the result to the foreground once the script has ended.
#[allow(clippy::too_many_arguments)]
fn traced(
    opts: &cli::Options,
    compiled: &CompiledScript,
    options: RuntimeOptions,
    target: Target,
    limit: Option<Duration>,
    points: &[utap_runtime::session::ProcessPoint],
    stopless: Vec<bool>,
    inproc: Option<Arc<utap_runtime::dataplane::InProcImage>>,
    handover: &SharedHandover,
    metric_specs: Vec<utap_runtime::metrics::MetricSpec>,
    machine_stdout: Option<String>,
) -> Result<i32, PassError> {
    let mut rt = ScriptRuntime::new(Arc::clone(&compiled.image), options);
    let _metrics = start_metrics(opts, &mut rt, metric_specs)?;
    let (transport, producer) = start_transport(opts, &mut rt)?;
    transport.on_closed(|| {
        interrupt::request();
        utrace::end_sessions(utrace::Signal(libc::SIGPIPE));
    });
    let session = SessionOptions {
        target,
        time_limit: limit,
        verbose: opts.verbose > 0,
        guru: opts.guru,
        stopless: Some(stopless),
        inproc,
        exit_status: opts.exit_status,
        machine_stdout,
    };
    let handover = handover.clone();
    let conclude = Box::new(move |status: i32, after: Aftermath| {
        let verdict = verdict(status, transport.finish());
        utap_runtime::endtrace::mark("output written");
        let mut h = lock(&handover);
        h.verdict = Some(verdict);
        match after {
            // Shepherding lasts as long as the command: hand over now.
            Aftermath::Shepherd => h.report(verdict),
            Aftermath::Detach => {
                // Here, on the thread that holds it: the verdict may go
                // from another while this one still detaches.
                h.link.outlive_foreground();
                let handover = handover.clone();
                let budget = detach_budget();
                std::thread::spawn(move || {
                    std::thread::sleep(budget);
                    lock(&handover).report(verdict);
                });
            }
        }
        match verdict {
            Verdict::Exit(code) => code as i32,
            Verdict::Signal(sig) => 128 + sig,
        }
    });
    utap_runtime::session::run(rt, points, &session, producer, conclude)
        .map_err(|e| PassError::Message(e.to_string()))
}

/// How utap ends once the output is written: the script's status, 1 after
/// an output error (reported by the transport), or death by SIGPIPE when
/// the reader went away (quietly, as other Unix tools end).
fn verdict(status: i32, stats: transport::Stats) -> Verdict {
    match stats.error {
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Verdict::Signal(libc::SIGPIPE),
        Some(_) => Verdict::Exit(1),
        None => Verdict::Exit(status.clamp(0, 255) as u8),
    }
}
