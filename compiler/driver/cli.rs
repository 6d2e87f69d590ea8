//! Command-line options, with SystemTap's names (see CONTRACT.md).

use clap::Parser;

/// What happens to the traced program when a session ends (README:
/// "Ending a session").
const ENDINGS: &str = "\
Ending a session: at -T, exit(), an error or SIGINT/SIGTERM/SIGHUP/SIGQUIT the end
probes run, the output is written and utap returns at once. The traced program:
  -x PID, or -c without a seccomp filter: detached, it runs on untraced.
  -c under the filter (a script naming its syscalls): after -T, exit() or an error
     it runs on, served by utap's tracing process until it exits; a signal kills it
     (as strace --seccomp-bpf). kill -9 of utap kills a -c command (EXITKILL).
Exit status: 0, or 1 after a usage, compile, runtime or output error.";

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

    /// Run CMD (as `/bin/sh -c "exec CMD"`), traced from its first instruction.
    #[arg(short = 'c', value_name = "CMD")]
    pub command: Option<String>,

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

    /// Stop the session after SECONDS (a number, fractions allowed). What
    /// happens to the traced command then: see "Ending a session" in README.
    #[arg(short = 'T', value_name = "SECONDS", value_parser = parse_seconds)]
    pub timeout: Option<f64>,

    /// Output buffer size in megabytes.
    #[arg(short = 's', value_name = "MB")]
    pub buffer_mb: Option<u32>,

    /// Guru mode: allow control actions (changing signals, stopping threads).
    #[arg(short = 'g')]
    pub guru: bool,

    /// Turn handler errors into counts reported at exit.
    #[arg(long = "suppress-handler-errors")]
    pub suppress_handler_errors: bool,

    /// The script file (unless -e), then the script's arguments. Options may
    /// come before or after them (`utap script.stp -c CMD`), as with stap's
    /// getopt; a `--` ends the options.
    #[arg(value_name = "SCRIPT.stp [ARGS]", allow_negative_numbers = true)]
    pub rest: Vec<String>,
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

/// Where the script comes from.
pub enum ScriptSource {
    Text(String),
    File(String),
}

impl Options {
    /// The script and its arguments, or a usage message.
    pub fn script(&self) -> Result<(ScriptSource, Vec<String>), String> {
        if let Some(text) = &self.script_text {
            return Ok((ScriptSource::Text(text.clone()), self.rest.clone()));
        }
        match self.rest.split_first() {
            Some((file, args)) => Ok((ScriptSource::File(file.clone()), args.to_vec())),
            None if self.list.is_some() || self.list_vars.is_some() => {
                Ok((ScriptSource::Text(String::new()), Vec::new()))
            }
            None => Err("no script given (a SCRIPT.stp file or -e SCRIPT)".to_string()),
        }
    }
}
