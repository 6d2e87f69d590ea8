//! Golden tests: runs the `utap` binary on every case and compares its
//! output byte for byte.
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

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};

#[path = "../compiler/tests/common/words.rs"]
mod words;
// The `.filter` directives, shared with the sample blocks of the docs (tests/docs.rs).
#[path = "support/filter.rs"]
mod filter;
use filter::normalize;
use words::shell_words;

/// How long a case may run.
const TIMEOUT: Duration = Duration::from_secs(30);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_opt(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

struct Case {
    /// Where the side files are.
    dir: PathBuf,
    name: String,
    /// The script to run, relative to `dir` (error messages name it so).
    script: PathBuf,
    conformance: bool,
    /// Run with `UTAP_INPROC=0`: every probe in the tracer (the syscall
    /// cases run on both routes, issue 27).
    tracer_only: bool,
}

struct Run {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    status: i32,
}

fn run_case(case: &Case) -> Result<Run, String> {
    let file = |ext: &str| case.dir.join(format!("{}.{ext}", case.name));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_utap"));
    cmd.current_dir(&case.dir);
    cmd.env("FIXTURES", env!("UTAP_FIXTURES"));
    if case.tracer_only {
        cmd.env("UTAP_INPROC", "0");
    }
    // cargo points LD_LIBRARY_PATH at its build directories; traced
    // commands would search them all for every library they load.
    cmd.env_remove("LD_LIBRARY_PATH");
    if let Some(opts) = read_opt(&file("opts")) {
        // Conformance cases too run with their options exactly as the
        // corpus gives them (`--compatible=1.3`, `-DMAXACTION=...`).
        cmd.args(shell_words(&opts));
    }
    if let Some(c) = read_opt(&file("cmd")) {
        cmd.arg("-c").arg(c.trim());
    }
    // Relative to the case directory when the script is there, so that
    // messages quoting the script's path do not depend on the checkout.
    let script = match (case.script.parent(), case.script.file_name()) {
        (Some(parent), Some(name)) if parent == case.dir => PathBuf::from(name),
        _ => case.script.clone(),
    };
    cmd.arg(script);
    if let Some(args) = read_opt(&file("args")) {
        cmd.args(shell_words(&args));
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run utap: {e}"))?;
    // Drain both pipes on threads so a chatty case cannot block.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("timed out after {}s", TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stdout = match read_opt(&file("filter")) {
        Some(f) => normalize(&f, &stdout)?,
        None => stdout,
    };
    Ok(Run {
        stdout,
        stderr: t_err.join().unwrap_or_default(),
        status: status.code().unwrap_or(128 + 9),
    })
}

/// A readable difference: the common lines, then what was expected and
/// what came instead, line by line.
fn diff(what: &str, expected: &[u8], actual: &[u8]) -> String {
    let e = String::from_utf8_lossy(expected);
    let a = String::from_utf8_lossy(actual);
    let el: Vec<&str> = e.split_inclusive('\n').collect();
    let al: Vec<&str> = a.split_inclusive('\n').collect();
    let prefix = el.iter().zip(&al).take_while(|(x, y)| x == y).count();
    let suffix = el[prefix..]
        .iter()
        .rev()
        .zip(al[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut s = format!(
        "{what} differs (first difference at line {}):\n",
        prefix + 1
    );
    for l in &el[prefix.saturating_sub(3)..prefix] {
        s += &format!("  {}", show(l));
    }
    for l in &el[prefix..el.len() - suffix] {
        s += &format!("- {}", show(l));
    }
    for l in &al[prefix..al.len() - suffix] {
        s += &format!("+ {}", show(l));
    }
    s
}

fn show(line: &str) -> String {
    if line.ends_with('\n') {
        line.to_string()
    } else {
        format!("{line}\\ (no newline at end)\n")
    }
}

fn check_case(case: &Case, bless: bool) -> Result<(), String> {
    let file = |ext: &str| case.dir.join(format!("{}.{ext}", case.name));
    let run = run_case(case)?;
    if bless && !case.conformance {
        let write = |ext: &str, data: &[u8], keep_empty: bool| {
            let p = file(ext);
            if data.is_empty() && !keep_empty {
                let _ = std::fs::remove_file(&p);
            } else {
                std::fs::write(&p, data).expect("write expectation");
            }
        };
        write("out", &run.stdout, true);
        write("err", &run.stderr, false);
        let exit = if run.status == 0 {
            Vec::new()
        } else {
            format!("{}\n", run.status).into_bytes()
        };
        write("exit", &exit, false);
        return Ok(());
    }
    let mut problems = Vec::new();
    let expected_out = std::fs::read(file("out")).unwrap_or_default();
    if expected_out != run.stdout {
        problems.push(diff("stdout", &expected_out, &run.stdout));
    }
    if !case.conformance {
        let expected_err = std::fs::read(file("err")).unwrap_or_default();
        if expected_err != run.stderr {
            problems.push(diff("stderr", &expected_err, &run.stderr));
        }
        let expected_exit: i32 = read_opt(&file("exit"))
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if expected_exit != run.status {
            problems.push(format!(
                "exit status {} instead of {expected_exit}\nstderr:\n{}",
                run.status,
                String::from_utf8_lossy(&run.stderr)
            ));
        }
    } else if !problems.is_empty() {
        problems.push(format!("stderr:\n{}", String::from_utf8_lossy(&run.stderr)));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The cases of `dir`: its `NAME.stp` files.
fn cases_in(dir: &Path, conformance: bool) -> Vec<Case> {
    cases_of(dir, dir, Path::new(""), conformance)
}

/// One case per `NAME.stp` of `scripts` (which is `rel` seen from `dir`),
/// with its side files in `dir`.
fn cases_of(scripts: &Path, dir: &Path, rel: &Path, conformance: bool) -> Vec<Case> {
    let mut names: Vec<String> = std::fs::read_dir(scripts)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().into_string().ok()?;
                    n.strip_suffix(".stp").map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|name| Case {
            dir: dir.to_path_buf(),
            script: rel.join(format!("{name}.stp")),
            name,
            conformance,
            tracer_only: false,
        })
        .collect()
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
    let script = std::fs::read_to_string(case.dir.join(&case.script)).unwrap_or_default();
    case.dir.join(format!("{}.cmd", case.name)).exists() && script.contains("syscall")
}

fn main() {
    let args = Arguments::from_args();
    let bless = std::env::var_os("UTAP_BLESS").is_some_and(|v| v == "1");
    let mut trials = Vec::new();
    for case in cases_in(&root().join("tests/golden"), false) {
        let name = format!("golden::{}", case.name);
        trials.push(Trial::test(name, move || {
            check_case(&case, bless).map_err(Failed::from)
        }));
    }
    let examples = root().join("examples");
    let rel = Path::new("../../examples");
    for case in cases_of(&examples, &root().join("tests/examples"), rel, false) {
        let name = format!("examples::{}", case.name);
        trials.push(Trial::test(name, move || {
            check_case(&case, bless).map_err(Failed::from)
        }));
    }
    // The syscall cases of a command again with every probe in the tracer:
    // both routes must print the same.
    let twice = cases_in(&root().join("tests/golden"), false)
        .into_iter()
        .chain(cases_of(
            &examples,
            &root().join("tests/examples"),
            rel,
            false,
        ))
        .filter(probes_syscalls_of_a_command);
    for mut case in twice {
        case.tracer_only = true;
        let name = format!("tracer-route::{}", case.name);
        trials.push(Trial::test(name, move || {
            check_case(&case, false).map_err(Failed::from)
        }));
    }
    let matched = Arc::new(AtomicUsize::new(0));
    let mut conf_total = 0;
    let conf_dir = conformance_run_dir();
    if conf_dir.is_dir() {
        let exceptions = Arc::new(exceptions());
        for case in cases_in(&conf_dir, true) {
            let name = format!("conformance::{}", case.name);
            let exceptions = exceptions.clone();
            let matched = matched.clone();
            conf_total += 1;
            trials.push(Trial::test(name, move || {
                let expected_failure = exceptions.iter().find(|(n, _)| *n == case.name);
                let result = check_case(&case, false);
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
            cases_in(&conf_dir, true).len(),
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
