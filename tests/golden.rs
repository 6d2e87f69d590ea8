//! Golden tests: runs the `utap` binary on every case and compares its
//! output byte for byte, through the harness `utap --test` uses
//! (`utap_runtime::harness`: one runner, not two).
//!
//! A case is `NAME.stp` with optional side files:
//! - `NAME.args`: script arguments, one line of shell words;
//! - `NAME.opts`: utap options, one line of shell words (`-D X=Y`, `-G`,
//!   `--suppress-handler-errors`, `-g`, `-T N` ...);
//! - `NAME.cmd`: a command to trace (`-c`); `$FIXTURES` in it names the
//!   directory of the compiled test fixtures (tests/fixtures/);
//! - `NAME.filter`: how to make stdout deterministic before comparing it
//!   (pids, times, the dynamic loader's start-up), one directive a line:
//!   `after REGEX` drops every line up to the first match, inclusive;
//!   `drop REGEX` drops matching lines, `keep REGEX` all others; `replace REGEX => TEXT` rewrites
//!   matches; `squeeze` turns runs of spaces into one; `sort` sorts the
//!   lines;
//! - expected `NAME.out` (stdout), `NAME.err` (stderr), `NAME.exit` (exit
//!   status; 0 when absent).
//!
//! Cases come from `tests/golden/` (every expectation checked), from
//! `tests/examples/` (the same side files for each script of `examples/`), and from
//! `../shared/conformance/run/` (SystemTap's test suite: stdout only;
//! `tests/conformance-run-exceptions.txt` lists the cases expected to
//! fail, each with its reason). `UTAP_BLESS=1` rewrites the expectations
//! of `tests/golden/` cases from the actual results.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use libtest_mimic::{Arguments, Failed, Trial};
use utap_runtime::harness::{self, Case, Harness};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_opt(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The cases of `scripts` with side files in `dir`; `.cmd` lines may name
/// the compiled fixtures as `$FIXTURES`.
fn cases(scripts: &Path, dir: &Path, rel: &Path) -> Vec<Case> {
    let mut cases = harness::cases_of(scripts, dir, rel);
    for c in &mut cases {
        c.env
            .push(("FIXTURES".into(), env!("UTAP_FIXTURES").into()));
    }
    cases
}

fn cases_in(dir: &Path) -> Vec<Case> {
    cases(dir, dir, Path::new(""))
}

fn harness() -> Harness {
    Harness {
        utap: env!("CARGO_BIN_EXE_utap").into(),
        timeout: harness::TIMEOUT,
    }
}

/// `NAME reason...` lines; `#` starts a comment.
/// The corpus's run cases: `$UTAP_SHARED/conformance/run`, else `../shared`
/// next to the workspace (from a worktree under `wt/`, one level further up).
fn conformance_run_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("UTAP_SHARED") {
        return PathBuf::from(dir).join("conformance/run");
    }
    ["../shared/conformance/run", "../../shared/conformance/run"]
        .iter()
        .map(|p| root().join(p))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| root().join("../shared/conformance/run"))
}

fn exceptions() -> Vec<(String, String)> {
    let text = read_opt(&root().join("tests/conformance-run-exceptions.txt")).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((n, r)) => (n.to_string(), r.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// A case that runs a command (`.cmd`) under a script naming syscalls.
fn probes_syscalls_of_a_command(case: &Case) -> bool {
    let script = read_opt(&case.dir.join(&case.script)).unwrap_or_default();
    case.dir.join(format!("{}.cmd", case.name)).exists() && script.contains("syscall")
}

fn main() {
    let args = Arguments::from_args();
    let bless = std::env::var_os("UTAP_BLESS").is_some_and(|v| v == "1");
    let mut trials = Vec::new();
    for case in cases_in(&root().join("tests/golden")) {
        let name = format!("golden::{}", case.name);
        trials.push(Trial::test(name, move || {
            harness().check(&case, bless).map_err(Failed::from)
        }));
    }
    let examples = root().join("examples");
    let rel = Path::new("../../examples");
    for case in cases(&examples, &root().join("tests/examples"), rel) {
        let name = format!("examples::{}", case.name);
        trials.push(Trial::test(name, move || {
            harness().check(&case, bless).map_err(Failed::from)
        }));
    }
    // The syscall cases of a command again with every probe in the tracer:
    // both routes must print the same.
    let twice = cases_in(&root().join("tests/golden"))
        .into_iter()
        .chain(cases(&examples, &root().join("tests/examples"), rel))
        .filter(probes_syscalls_of_a_command);
    for mut case in twice {
        case.env.push(("UTAP_INPROC".into(), "0".into()));
        let name = format!("tracer-route::{}", case.name);
        trials.push(Trial::test(name, move || {
            harness().check(&case, false).map_err(Failed::from)
        }));
    }
    let matched = Arc::new(AtomicUsize::new(0));
    let mut conf_total = 0;
    let conf_dir = conformance_run_dir();
    if conf_dir.is_dir() {
        let exceptions = Arc::new(exceptions());
        for mut case in cases_in(&conf_dir) {
            case.stdout_only = true;
            let name = format!("conformance::{}", case.name);
            let exceptions = exceptions.clone();
            let matched = matched.clone();
            conf_total += 1;
            trials.push(Trial::test(name, move || {
                let expected_failure = exceptions.iter().find(|(n, _)| *n == case.name);
                let result = harness().check(&case, false);
                if result.is_ok() {
                    matched.fetch_add(1, Ordering::Relaxed);
                }
                match (result, expected_failure) {
                    (Ok(()), None) => Ok(()),
                    (Err(e), None) => Err(Failed::from(e)),
                    (Err(_), Some(_)) => Ok(()),
                    (Ok(()), Some(_)) => Err(Failed::from(
                        "passes now: remove it from tests/conformance-run-exceptions.txt",
                    )),
                }
            }));
        }
        eprintln!(
            "conformance: {} run cases, {} listed as expected failures",
            cases_in(&conf_dir).len(),
            exceptions.len()
        );
    } else {
        eprintln!(
            "conformance: {} not found, conformance cases skipped",
            conf_dir.display()
        );
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if conf_total > 0 && conclusion.num_filtered_out == 0 {
        eprintln!(
            "conformance run: {} of {conf_total} cases produce exactly the expected output",
            matched.load(Ordering::Relaxed)
        );
    }
    conclusion.exit();
}
