//! Command-line options, with SystemTap's names (see CONTRACT.md).

use clap::Parser;
use utap_compiler::foreign;

/// What happens to the traced program when a session ends
/// (docs/guide/tracing.md: "Ending a session").
const ENDINGS: &str = "\
Ending a session: at -T, exit(), an error or SIGINT/SIGTERM/SIGHUP/SIGQUIT the end
probes run, the output is written and utap returns at once. The traced program:
  -x PID, or -c without a seccomp filter: detached, it runs on untraced.
  -c under the filter (a script naming its syscalls): after -T, exit() or an error
     it runs on, served by utap's tracing process until it exits; a signal kills it
     (as strace --seccomp-bpf). kill -9 of utap kills it too (EXITKILL); a -c
     command without the filter is detached, as an attached process.
Exit status: 0, or 1 after a usage, compile, runtime or output error
(with --exit-status: the -c command's, when its exit ends the session).";

/// utap: SystemTap-style tracing of Linux processes.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "utap",
    version,
    about = "SystemTap-style scripting for tracing and steering Linux processes",
    override_usage = "utap [OPTIONS] SCRIPT.stp [ARGS...]\n       utap [OPTIONS] -e SCRIPT [ARGS...]",
    after_help = ENDINGS
)]
pub struct Options {
    /// Run the script given as text instead of a file.
    #[arg(short = 'e', value_name = "SCRIPT")]
    pub script_text: Option<String>,

    /// Run CMD (its words; `/bin/sh -c CMD` for shell syntax), traced from its first instruction.
    #[arg(short = 'c', value_name = "CMD")]
    pub command: Option<String>,

    /// Exit with the -c command's status when its exit ends the session (its
    /// exit code, or 128+N when signal N killed it, as a shell reports it;
    /// strace exits alike, but dies of the signal itself). Without it utap's
    /// own status, as SystemTap's. A utap error still exits 1; a session
    /// ended first (exit(), -T, a signal) gives utap's own status.
    #[arg(long = "exit-status", requires = "command")]
    pub exit_status: bool,

    /// Attach to every thread of the running process PID.
    #[arg(short = 'x', value_name = "PID")]
    pub pid: Option<i32>,

    /// Write script output to FILE instead of stdout.
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<String>,

    /// Stop after pass N: 1 parse, 2 elaborate, 3 translate, 4 compile, 5 run.
    #[arg(short = 'p', value_name = "N", value_parser = clap::value_parser!(u8).range(1..=5))]
    pub pass: Option<u8>,

    /// More verbose (repeatable).
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// List the probe points matching PATTERN.
    #[arg(short = 'l', value_name = "PATTERN")]
    pub list: Option<String>,

    /// List the probe points matching PATTERN, with their context variables.
    #[arg(short = 'L', value_name = "PATTERN")]
    pub list_vars: Option<String>,

    /// Also look for tapsets in DIR.
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<String>,

    /// Set a limit (MAXACTION, MAXMAPENTRIES, MAXSTRINGLEN, ...).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    pub defines: Vec<(String, String)>,

    /// Set the initial value of global NAME (`-G NAME=VALUE`).
    #[arg(short = 'G', value_name = "NAME=VALUE", value_parser = parse_define)]
    pub global_values: Vec<(String, String)>,

    /// Stop the session SECONDS after tracing starts (after the begin probes
    /// and attaching; a number, fractions allowed). What happens to the
    /// traced command then: see "Ending a session" in docs/guide/tracing.md.
    #[arg(short = 'T', value_name = "SECONDS", value_parser = parse_seconds)]
    pub timeout: Option<f64>,

    /// Output buffer size in megabytes (1-4095).
    #[arg(short = 's', value_name = "MB", allow_negative_numbers = true)]
    pub buffer_mb: Option<String>,

    /// Guru mode: allow control actions (changing signals, stopping threads).
    #[arg(short = 'g')]
    pub guru: bool,

    /// Output format: `text` (the default, as SystemTap) or `json` (JSON
    /// Lines, one object per message; schema in docs/guide/output.md). `-f` as bpftrace's.
    #[arg(short = 'f', long = "format", value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Turn handler errors into counts reported at exit.
    #[arg(long = "suppress-handler-errors")]
    pub suppress_handler_errors: bool,

    /// Serve the script's numeric globals at http://ADDR/metrics in the
    /// Prometheus text format (ADDR a loopback address:port; port 0 picks one).
    #[arg(long = "metrics", value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Print the utap(1) man page (roff) and exit.
    #[arg(long = "generate-man")]
    pub generate_man: bool,

    /// Print the completion script for SHELL (bash, zsh, fish, elvish,
    /// powershell) and exit.
    #[arg(long = "completions", value_name = "SHELL")]
    pub completions: Option<clap_complete::Shell>,

    /// Run the golden tests of each DIR (given as the arguments): every
    /// NAME.stp with its .opts/.cmd/.args/.filter side files, compared with
    /// NAME.out/.err/.exit (docs/guide/testing.md). Exit status 1 when one fails.
    #[arg(long = "test")]
    pub test: bool,

    /// With --test: write each case's NAME.out/.err/.exit from its run.
    #[arg(long = "bless", requires = "test")]
    pub bless: bool,

    /// With --test: how many cases run at once (default: the number of CPUs).
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = clap::value_parser!(u16).range(1..), requires = "test")]
    pub jobs: Option<u16>,

    /// With --test: how long one case may run (default 30); a case over it
    /// is killed and fails with "timed out after SECONDSs".
    #[arg(long = "test-timeout", value_name = "SECONDS", value_parser = parse_seconds, requires = "test")]
    pub test_timeout: Option<f64>,

    /// Describe the stdlib or builtin function NAME and exit.
    #[arg(long = "help-function", value_name = "NAME")]
    pub help_function: Option<String>,

    /// Suppress warnings (stap -w).
    #[arg(short = 'w')]
    pub no_warnings: bool,

    /// Unoptimised mode (stap -u): accepted; utap's optimisations never
    /// change what a script prints.
    #[arg(short = 'u')]
    pub unoptimised: bool,

    /// Per-probe timing report at the end of the session (stap -t).
    #[arg(short = 't')]
    pub timing: bool,

    /// Language of SystemTap release VERSION (stap --compatible): accepted;
    /// utap's language is SystemTap 5's, which reads older scripts alike.
    #[arg(long = "compatible", value_name = "VERSION", value_parser = parse_version)]
    pub compatible: Option<String>,

    /// Context variables that cannot be resolved read as 0 instead of
    /// being errors (stap --skip-badvars).
    #[arg(long = "skip-badvars")]
    pub skip_badvars: bool,

    /// Run the per-user utap daemon (see docs/guide/daemon.md): it owns the traced processes, and clients' sessions
    /// share them.
    #[arg(long = "daemon")]
    pub daemon: bool,

    /// The daemon's socket (default: $XDG_RUNTIME_DIR/utap/utapd.sock, or
    /// $TMPDIR/utap-UID/utapd.sock without XDG_RUNTIME_DIR; a directory
    /// that is a symbolic link, another user's or open to others is refused).
    #[arg(long = "socket", value_name = "PATH")]
    pub socket: Option<String>,

    /// Run this session in the utap daemon at PATH (default: the user's).
    /// Without it, `-x` uses the user's daemon when one runs.
    #[arg(long = "connect", value_name = "PATH", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub connect: Option<String>,

    /// Never use a daemon: trace standalone.
    #[arg(long = "no-daemon")]
    pub no_daemon: bool,

    /// List the daemon's sessions (with --connect=PATH: that daemon's).
    #[arg(long = "sessions")]
    pub sessions: bool,

    /// End the daemon session ID as Ctrl-C would end it.
    #[arg(long = "detach-session", value_name = "ID")]
    pub detach_session: Option<u64>,

    /// The script file (unless -e), then the script's arguments. Options may
    /// come before or after them (`utap script.stp -c CMD`), as with stap's
    /// getopt; a `--` ends the options.
    #[arg(value_name = "SCRIPT.stp [ARGS]", allow_negative_numbers = true)]
    pub rest: Vec<String>,
}

/// How the session's messages are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// The longest `-T`: about 136 years, far beyond any session, and small
/// enough that every deadline fits in an `Instant`.
const MAX_SECONDS: f64 = 4_294_967_295.0;

/// `-T SECONDS`: a finite, non-negative number no larger than
/// [`MAX_SECONDS`] (`-1`, `nan`, `inf`, `1e300` are usage errors).
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=MAX_SECONDS).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a number of seconds from 0 to {MAX_SECONDS}, got '{s}'"
        )),
    }
}

fn parse_define(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ if !s.is_empty() && !s.contains('=') => Ok((s.to_string(), String::new())),
        _ => Err(format!("expected NAME=VALUE, got '{s}'")),
    }
}

/// `--compatible=VERSION`: a release number such as `1.3` or `4.0`.
fn parse_version(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    match ok {
        true => Ok(s.to_string()),
        false => Err(format!(
            "'{s}' is not a SystemTap version (such as 1.3 or 4.0)"
        )),
    }
}

/// Parses the command line. An option utap does not have (one of stap's
/// kernel-module options, say) is named in a one-line "not supported by
/// utap" error, exit status 1, instead of clap's generic text.
pub fn parse_args() -> Options {
    let mut opts = match Options::try_parse() {
        Ok(o) => o,
        Err(e) if e.kind() == clap::error::ErrorKind::UnknownArgument => {
            let arg = e
                .get(clap::error::ContextKind::InvalidArg)
                .map(|v| v.to_string())
                .unwrap_or_default();
            eprintln!("{}", unsupported_option(&arg));
            std::process::exit(1);
        }
        Err(e) if migrant_hint(&e).is_some() => {
            eprintln!("utap: {}", migrant_hint(&e).unwrap_or_default());
            std::process::exit(1);
        }
        // clap's message; `--help`/`--version` exit 0, usage errors 1 (as
        // README says; clap's own default would be 2).
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 1 } else { 0 })
        }
    };
    opts.normalise();
    opts
}

/// The message for an option utap lacks: `-k`, `--ldd`, `--foo=bar` is
/// named without its value.
pub fn unsupported_option(arg: &str) -> String {
    let name = arg.split('=').next().unwrap_or(arg);
    format!(
        "utap: option '{name}' is not supported by utap\n  \
         (run 'utap --help' for the options utap has)"
    )
}

/// A one-line hint for an option value another tool's user would give:
/// strace's and bpftrace's `-p PID`, strace's `-f` (`utap_compiler::foreign`).
fn migrant_hint(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    let arg = e.get(ContextKind::InvalidArg)?.to_string();
    let value = e
        .get(ContextKind::InvalidValue)
        .map(|v| v.to_string())
        .unwrap_or_default();
    if arg.starts_with("-p ") {
        return foreign::pid_option(&value);
    }
    let a_format = ["text", "json"]
        .iter()
        .any(|f| value.eq_ignore_ascii_case(f));
    if arg.starts_with("--format") && !a_format {
        return Some(foreign::FOLLOW_FORKS.to_string());
    }
    None
}

/// Where the script comes from.
pub enum ScriptSource {
    Text(String),
    File(String),
    /// `-` as the script file: read the script from standard input.
    Stdin,
}

impl Options {
    /// stap habits clap reads differently: `-c` given as one word with its
    /// value (`"-c sleep 0.2"`) leaves the value's leading blank.
    fn normalise(&mut self) {
        if let Some(c) = &mut self.command {
            *c = c.trim_start().to_string();
        }
    }

    /// The script and its arguments, or a usage message.
    pub fn script(&self) -> Result<(ScriptSource, Vec<String>), String> {
        if let Some(text) = &self.script_text {
            if let Some(hint) = foreign::strace_expression(text) {
                return Err(hint);
            }
            return Ok((ScriptSource::Text(text.clone()), self.rest.clone()));
        }
        match self.rest.split_first() {
            Some((file, args)) if file == "-" => Ok((ScriptSource::Stdin, args.to_vec())),
            Some((file, args)) => Ok((ScriptSource::File(file.clone()), args.to_vec())),
            None if self.list.is_some() || self.list_vars.is_some() => {
                Ok((ScriptSource::Text(String::new()), Vec::new()))
            }
            None => Err("no script given (a SCRIPT.stp file or -e SCRIPT)".to_string()),
        }
    }
}
