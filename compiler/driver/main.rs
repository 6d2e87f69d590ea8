//! `utap`: the command-line driver. Options live in [`cli`]; each pass is a
//! library call, and `-p N` stops after pass N and prints its result.

mod cli;
mod daemon;
mod docs;
mod golden;
mod json_diag;
mod manpage;
mod session;
mod trace;

use std::io::IsTerminal;
use std::process::ExitCode;
use utap_compiler::check;
use utap_compiler::diag::{self, Diagnostic};
use utap_compiler::parser::{self, NodeIds, ParseOptions};
use utap_compiler::print;
use utap_compiler::source::SourceMap;
use utap_runtime::host::Verdict;
use utap_runtime::utrace::command_line::CommandLine;

fn main() -> ExitCode {
    // A session's guardian (runtime/src/guardian): nothing else of utap.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(utap_runtime::guardian::MODE) {
        return ExitCode::from(utap_runtime::guardian::main(&args[1..]) as u8);
    }
    keep_freed_memory();
    // Before anything else: compiling and attaching next to a target's
    // thousand busy threads need the CPU (runtime/src/priority.rs).
    utap_runtime::priority::raise_at_start();
    // A SIGINT must end utap even before its handlers are in place.
    utap_runtime::host::unignore_termination_signals();
    utap_runtime::endtrace::start();
    utap_runtime::endtrace::mark("utap started");
    let opts = cli::parse_args();
    if let Some(status) = docs::run(&opts) {
        return ExitCode::from(status);
    }
    if opts.test {
        return ExitCode::from(golden::run(&opts));
    }
    JSON.store(
        opts.format == cli::Format::Json && opts.list.is_none() && opts.list_vars.is_none(),
        std::sync::atomic::Ordering::Relaxed,
    );
    if json() {
        json_diag::header();
    }
    match run(&opts) {
        Ok(status) => ExitCode::from(status),
        Err(failure) => {
            print_failure(failure);
            ExitCode::FAILURE
        }
    }
}

/// Prints what went wrong (unless it was printed already).
fn print_failure(failure: Failure) {
    match failure {
        Failure::Message(m) if json() => json_diag::print_message(&m),
        Failure::Message(m) => eprintln!("utap: {m}"),
        Failure::Reported => {}
    }
}

/// Compiling a script allocates and frees a few megabytes in small pieces
/// (syntax trees of 700 aliases, their lowered bodies). glibc's defaults
/// hand freed memory back to the kernel (above 128 KiB at the heap's top)
/// and serve growing blocks over 128 KiB with fresh mmaps, so the same
/// pages are faulted in and zeroed again and again: keep them instead.
/// And fault the heap in 2 MiB at a time: see [`heap_in_huge_pages`].
fn keep_freed_memory() {
    // SAFETY: mallopt only sets glibc's allocator parameters.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TOP_PAD, 16 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
    if std::env::var_os("UTAP_HUGEPAGES").is_none_or(|v| v != "0") {
        heap_in_huge_pages();
    }
}

/// Compiling syscalltop touches about 10 MiB of fresh heap: 2,500 faults
/// of 4 KiB pages, whose kernel side (the fault, zeroing the page) led
/// the profile of lowering. Transparent huge pages asked for over the
/// heap's first 16 MiB (`MADV_HUGEPAGE`, honoured where THP is `madvise`
/// or `always`) halve the faults: syscalltop's start-up 25.1 → 21.8 ms
/// (medians of 25, alternating), peak RSS tracing 100 threads 14.5 →
/// 15.7 MiB. `UTAP_HUGEPAGES=0` turns it off.
fn heap_in_huge_pages() {
    const HUGE: usize = 2 << 20;
    // SAFETY: sbrk(0) only reads the break; one block is allocated and
    // freed (M_TOP_PAD makes the heap grow by 16 MiB more than asked,
    // and M_TRIM_THRESHOLD keeps it); madvise only advises on pages of
    // the heap, between the old break and the new one.
    unsafe {
        let start = libc::sbrk(0) as usize;
        let block = std::hint::black_box(libc::malloc(256 << 10));
        libc::free(block);
        let end = libc::sbrk(0) as usize;
        let (from, to) = ((start + HUGE - 1) & !(HUGE - 1), end & !(HUGE - 1));
        if to > from {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

/// `--format json` (not for listings): diagnostics are JSON records on
/// stdout, after the schema line printed first.
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn json() -> bool {
    JSON.load(std::sync::atomic::Ordering::Relaxed)
}

enum Failure {
    /// A one-line problem, printed as `utap: MESSAGE`.
    Message(String),
    /// Diagnostics were already printed.
    Reported,
}

/// Options of the checker (pass 2) from the command line.
fn check_options(opts: &cli::Options) -> check::CheckOptions {
    check_options_with(opts, None)
}

/// [`check_options`], with the `-c` command as split already (by a
/// daemon's client, in its environment).
fn check_options_with(opts: &cli::Options, split: Option<&CommandLine>) -> check::CheckOptions {
    check::CheckOptions {
        guru: opts.guru,
        verbose: u32::from(opts.verbose),
        tapset_dirs: opts.include.iter().map(Into::into).collect(),
        skip_badvars: opts.skip_badvars,
        target_exe: target_exe(opts, split),
        ..Default::default()
    }
}

/// The program `-c CMD` runs (as the runtime will start it:
/// `utrace::command_line`; for shell syntax or a command that cannot run,
/// its first word through `$PATH`) or the executable of `-x PID`: the
/// DWARF of `process.function(..)` points.
fn target_exe(opts: &cli::Options, split: Option<&CommandLine>) -> Option<String> {
    if let Some(cmd) = &opts.command {
        let line = match split {
            Some(line) => Ok(line.clone()),
            None => CommandLine::parse(cmd),
        };
        if let Ok(CommandLine::Words { program, .. }) = line {
            return Some(program.to_string_lossy().into_owned());
        }
        let first = cmd.split_whitespace().next()?;
        return Some(check::catalogue::find_executable(first));
    }
    let pid = opts.pid?;
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Runs the passes; the exit status of a run (1 after a runtime error).
fn run(opts: &cli::Options) -> Result<u8, Failure> {
    if let Some((pattern, vars)) = opts
        .list
        .as_ref()
        .map(|p| (p, false))
        .or(opts.list_vars.as_ref().map(|p| (p, true)))
    {
        if let Some(hint) = utap_compiler::foreign::bpftrace_listing(pattern) {
            return Err(Failure::Message(hint));
        }
        let mut map = SourceMap::new();
        let mut ids = NodeIds::default();
        let text = check::listing::list(&mut map, pattern, vars, &check_options(opts), &mut ids)
            .map_err(|d| report(&d, &map))?;
        print!("{text}");
        return Ok(0);
    }
    if let Some(status) = daemon::run(opts)? {
        return Ok(status);
    }
    if !session::on_a_process(opts) {
        return passes(opts, None);
    }
    match session::split(opts.pid.is_some()).map_err(|e| pass_error(e, &SourceMap::new()))? {
        session::Split::Foreground(fg) => match fg.wait() {
            Verdict::Exit(code) => Ok(code),
            verdict => verdict.exit(),
        },
        session::Split::Host(handover) => {
            // A failure before the session: its message, then the verdict.
            let code = match passes(opts, Some(&handover)) {
                Ok(code) => code,
                Err(failure) => {
                    print_failure(failure);
                    1
                }
            };
            session::hand_over(&handover, Verdict::Exit(code));
            match code {
                0 => Ok(0),
                _ => Err(Failure::Reported),
            }
        }
    }
}

/// Passes 1 to 5 (in the tracing process for a script on a process,
/// `handover`); the exit status.
fn passes(opts: &cli::Options, handover: Option<&session::SharedHandover>) -> Result<u8, Failure> {
    let (source, args) = opts.script().map_err(Failure::Message)?;
    let (name, text) = read_script(source)?;
    let mut map = SourceMap::new();
    let file = map.add(name, text);
    let parse_opts = ParseOptions {
        args,
        guru: opts.guru,
        ..ParseOptions::default()
    };
    let mut ids = NodeIds::default();
    let mut clock = PassClock::new(opts);
    let script =
        parser::parse_file(&map, file, &parse_opts, &mut ids).map_err(|d| report(&d, &map))?;
    clock.done("1", format_args!("parsed user script"));
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
    let p = &checked.program;
    clock.done(
        "2",
        format_args!(
            "analyzed script: {} probes, {} functions, {} globals",
            p.probes.len(),
            p.functions.len(),
            p.globals.len()
        ),
    );
    if !checked.warnings.is_empty() && !opts.no_warnings {
        if json() {
            json_diag::print(&checked.warnings, &map);
        } else {
            eprint!("{}", diag::render_all(&checked.warnings, &map, colour()));
        }
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
    let bytes: usize = compiled.sizes.iter().map(|s| s.bytes).sum();
    clock.done(
        "3-4",
        format_args!(
            "translated and compiled {} functions into {bytes} bytes of native code",
            compiled.sizes.len()
        ),
    );
    match opts.pass {
        Some(3) => {
            print!("{}", compiled.ir);
            Ok(0)
        }
        Some(4) => {
            session::print_sizes(&compiled);
            Ok(0)
        }
        _ => {
            let mut clock = Some(clock);
            if let (Some(handover), Some(mut clock)) = (handover, clock.take()) {
                // Printed by the tracing process before the verdict goes.
                session::before_verdict(handover, move || {
                    clock.done("5", format_args!("run completed"))
                });
            }
            let status = session::run(opts, &map, &program, &compiled, handover)
                .map_err(|e| pass_error(e, &map));
            if let Some(clock) = &mut clock {
                clock.done("5", format_args!("run completed"));
            }
            utap_runtime::endtrace::mark("run completed");
            // The session is over: exit now rather than tear the compiled
            // script down (seconds on a CPU-starved machine, issue 11).
            if let Ok(code) = status {
                use std::io::Write;
                let _ = std::io::stdout().flush();
                std::process::exit(code.into());
            }
            status.map(|status| status as u8)
        }
    }
}

/// The script's name (for diagnostics) and text.
fn read_script(source: cli::ScriptSource) -> Result<(String, String), Failure> {
    Ok(match source {
        cli::ScriptSource::Text(text) => ("<input>".to_string(), text),
        cli::ScriptSource::Stdin => {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut text).map_err(|e| {
                Failure::Message(format!("cannot read the script from standard input: {e}"))
            })?;
            (
                "<input>".to_string(),
                String::from_utf8_lossy(&text).into_owned(),
            )
        }
        cli::ScriptSource::File(path) => {
            let text = std::fs::read(&path).map_err(|e| {
                Failure::Message(match e.kind() {
                    std::io::ErrorKind::NotFound => format!("input file '{path}' is missing"),
                    _ => format!("input file '{path}' can't be opened for reading: {e}"),
                })
            })?;
            (path, String::from_utf8_lossy(&text).into_owned())
        }
    })
}

fn pass_error(e: session::PassError, map: &SourceMap) -> Failure {
    match e {
        session::PassError::Message(m) => Failure::Message(m),
        session::PassError::Diagnostics(d) => report(&d, map),
        session::PassError::Reported => Failure::Reported,
    }
}

/// Prints diagnostics to stderr (in colour on a terminal).
fn report(diags: &[Diagnostic], map: &SourceMap) -> Failure {
    if json() {
        json_diag::print(diags, map);
        return Failure::Reported;
    }
    eprint!("{}", diag::render_all(diags, map, colour()));
    Failure::Reported
}

/// Colour on a terminal, unless `NO_COLOR` is set to something
/// (<https://no-color.org>).
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `-v`: what each pass did and how long it took, on stderr, in
/// SystemTap's "Pass N: ..." form (without its memory figures).
struct PassClock {
    verbose: bool,
    started: std::time::Instant,
}

impl PassClock {
    fn new(opts: &cli::Options) -> PassClock {
        PassClock {
            verbose: opts.verbose > 0,
            started: std::time::Instant::now(),
        }
    }

    /// Prints "Pass N: WHAT in T ms." and starts timing the next pass.
    fn done(&mut self, pass: &str, what: std::fmt::Arguments<'_>) {
        if self.verbose {
            let ms = self.started.elapsed().as_secs_f64() * 1000.0;
            eprintln!("Pass {pass}: {what} in {ms:.1} ms.");
        }
        self.started = std::time::Instant::now();
    }
}
