//! Passes 3 to 5 of the driver: compile the checked program to native code
//! (`-p3` prints the Cranelift IR, `-p4` the code sizes) and run it.
//! Sessions without process probes run here with the begin/end/timer
//! scheduler; their output goes through the transport queue.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use utap_codegen::{CompiledScript, Options as CodegenOptions, compile};
use utap_compiler::ast::Literal;
use utap_compiler::diag::Diagnostic;
use utap_compiler::program::{Program, Type};
use utap_compiler::source::SourceMap;
use utap_runtime::script::timing::TimingLabel;
use utap_runtime::script::{Limits, RuntimeOptions, ScriptRuntime, scheduler};
use utap_runtime::transport::{self, Config, Output, Transport};

use crate::{cli, trace};
use utap_runtime::session::SessionOptions;

/// Why a later pass stopped.
pub enum PassError {
    Message(String),
    Diagnostics(Vec<Diagnostic>),
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
fn timing_labels(program: &Program, map: &SourceMap) -> Vec<TimingLabel> {
    program
        .probes
        .iter()
        .map(|p| TimingLabel {
            location: map.location(p.span),
            from: p.name.clone(),
        })
        .collect()
}

/// Pass 5: runs the session; returns the exit status.
pub fn run(
    opts: &cli::Options,
    map: &SourceMap,
    program: &Program,
    compiled: &CompiledScript,
) -> Result<i32, PassError> {
    let target = trace::target(opts, program).map_err(PassError::Message)?;
    let options = RuntimeOptions {
        limits: limits(opts)?,
        suppress_errors: opts.suppress_handler_errors,
        target: 0,
        timing: opts.timing.then(|| timing_labels(program, map)),
        verbose: opts.verbose > 0,
    };
    let mut rt = ScriptRuntime::new(Arc::clone(&compiled.image), options);
    let _metrics = match &opts.metrics {
        Some(addr) => {
            let (server, requests) =
                utap_runtime::metrics::MetricsServer::start(addr).map_err(PassError::Message)?;
            eprintln!("utap: serving metrics at http://{}/metrics", server.addr);
            rt.set_metrics(requests);
            Some(server)
        }
        None => None,
    };
    let (transport, mut producer) = start_transport(opts, &mut rt)?;
    let limit = opts.timeout.map(Duration::from_secs_f64);
    let status = match target {
        Some(target) => {
            let points = trace::process_points(program).map_err(PassError::Message)?;
            let session = SessionOptions {
                target,
                time_limit: limit,
                verbose: opts.verbose > 0,
            };
            utap_runtime::session::run(rt, &points, &session, producer)
                .map_err(|e| PassError::Message(e.to_string()))?
        }
        None => {
            scheduler::install_interrupt_handler();
            let status = scheduler::run(&mut rt, &mut producer, limit);
            drop(producer);
            status
        }
    };
    // The transport reports lost messages itself.
    transport.finish();
    Ok(status)
}
