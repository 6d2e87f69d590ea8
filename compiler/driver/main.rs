//! `utap`: the command-line driver. Options live in [`cli`]; each pass is a
//! library call, and `-p N` stops after pass N and prints its result.

mod cli;
mod session;
mod trace;

use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;
use utap_compiler::check;
use utap_compiler::diag::{self, Diagnostic};
use utap_compiler::parser::{self, NodeIds, ParseOptions};
use utap_compiler::print;
use utap_compiler::source::SourceMap;

fn main() -> ExitCode {
    let opts = cli::Options::parse();
    match run(&opts) {
        Ok(status) => ExitCode::from(status),
        Err(Failure::Message(m)) => {
            eprintln!("utap: {m}");
            ExitCode::FAILURE
        }
        Err(Failure::Reported) => ExitCode::FAILURE,
    }
}

enum Failure {
    /// A one-line problem, printed as `utap: MESSAGE`.
    Message(String),
    /// Diagnostics were already printed.
    Reported,
}

/// Options of the checker (pass 2) from the command line.
fn check_options(opts: &cli::Options) -> check::CheckOptions {
    check::CheckOptions {
        guru: opts.guru,
        verbose: u32::from(opts.verbose),
        tapset_dirs: opts.include.iter().map(Into::into).collect(),
        ..Default::default()
    }
}

/// Runs the passes; the exit status of a run (1 after a runtime error).
fn run(opts: &cli::Options) -> Result<u8, Failure> {
    if let Some((pattern, vars)) = opts
        .list
        .as_ref()
        .map(|p| (p, false))
        .or(opts.list_vars.as_ref().map(|p| (p, true)))
    {
        let mut map = SourceMap::new();
        let mut ids = NodeIds::default();
        let text = check::listing::list(&mut map, pattern, vars, &check_options(opts), &mut ids)
            .map_err(|d| report(&d, &map))?;
        print!("{text}");
        return Ok(0);
    }
    let (source, args) = opts.script().map_err(Failure::Message)?;
    let mut map = SourceMap::new();
    let file = match source {
        cli::ScriptSource::Text(text) => map.add("<input>", text),
        cli::ScriptSource::File(path) => {
            let text = std::fs::read(&path).map_err(|e| {
                Failure::Message(match e.kind() {
                    std::io::ErrorKind::NotFound => format!("input file '{path}' is missing"),
                    _ => format!("input file '{path}' can't be opened for reading: {e}"),
                })
            })?;
            map.add(path, String::from_utf8_lossy(&text).into_owned())
        }
    };
    let parse_opts = ParseOptions {
        args,
        guru: opts.guru,
        ..ParseOptions::default()
    };
    let mut ids = NodeIds::default();
    let script =
        parser::parse_file(&map, file, &parse_opts, &mut ids).map_err(|d| report(&d, &map))?;
    if opts.pass == Some(1) {
        print!("{}", print::script(&script));
        return Ok(0);
    }
    let check_opts = check::CheckOptions {
        args: parse_opts.args.clone(),
        ..check_options(opts)
    };
    let checked =
        check::check(&mut map, script, &check_opts, &mut ids).map_err(|d| report(&d, &map))?;
    if !checked.warnings.is_empty() {
        let colour = std::io::stderr().is_terminal();
        eprint!("{}", diag::render_all(&checked.warnings, &map, colour));
    }
    if opts.pass == Some(2) {
        let dump = if opts.verbose > 0 {
            check::dump::dump_verbose(&checked.program)
        } else {
            check::dump::dump(&checked.program)
        };
        print!("{dump}");
        return Ok(0);
    }
    let mut program = checked.program;
    let compiled = session::translate(opts, &map, &mut program).map_err(|e| pass_error(e, &map))?;
    match opts.pass {
        Some(3) => {
            print!("{}", compiled.ir);
            Ok(0)
        }
        Some(4) => {
            session::print_sizes(&compiled);
            Ok(0)
        }
        _ => session::run(opts, &program, &compiled)
            .map(|status| status as u8)
            .map_err(|e| pass_error(e, &map)),
    }
}

fn pass_error(e: session::PassError, map: &SourceMap) -> Failure {
    match e {
        session::PassError::Message(m) => Failure::Message(m),
        session::PassError::Diagnostics(d) => report(&d, map),
    }
}

/// Prints diagnostics to stderr (in colour on a terminal).
fn report(diags: &[Diagnostic], map: &SourceMap) -> Failure {
    let colour = std::io::stderr().is_terminal();
    eprint!("{}", diag::render_all(diags, map, colour));
    Failure::Reported
}
