//! The golden-test harness (`utap --test DIR...`, and the project's own
//! tests/golden.rs): a case is `NAME.stp` with optional side files, run
//! through the `utap` binary and compared byte for byte with what it
//! printed before.
//!
//! Side files of `NAME.stp`, in its directory:
//! - `NAME.args`: script arguments, one line of shell words;
//! - `NAME.opts`: utap options, one line of shell words (`-I DIR`,
//!   `-D X=Y`, `-G`, `-g`, `-T N` ...);
//! - `NAME.cmd`: a command to trace (`-c`), run from the case's directory;
//! - `NAME.filter`: how to make stdout deterministic before comparing it
//!   ([`normalize`]'s directives);
//! - expected `NAME.out` (stdout), `NAME.err` (stderr), `NAME.exit` (exit
//!   status; 0 when absent).
//!
//! Blessing writes `.out`, and `.err`/`.exit` when they are not empty/0
//! (removing stale ones), from what the run printed.

mod filter;
mod words;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use filter::normalize;
pub use words::shell_words;

/// How long a case may run unless told otherwise.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// One `NAME.stp` and where its side files are.
#[derive(Clone, Debug)]
pub struct Case {
    /// Where the side files are (and the directory the case runs in).
    pub dir: PathBuf,
    pub name: String,
    /// The script, relative to `dir` (error messages name it so).
    pub script: PathBuf,
    /// Extra environment of the utap run.
    pub env: Vec<(String, String)>,
    /// Compare stdout only (a corpus whose stderr is not utap's).
    pub stdout_only: bool,
}

/// What a case's run printed (stdout filtered) and its exit status.
#[derive(Debug)]
pub struct Run {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: i32,
}

/// The `utap` binary to run cases with, and each case's time limit.
#[derive(Clone, Debug)]
pub struct Harness {
    pub utap: PathBuf,
    pub timeout: Duration,
}

/// The cases of `dir`: its `NAME.stp` files, by name.
pub fn cases_in(dir: &Path) -> Vec<Case> {
    cases_of(dir, dir, Path::new(""))
}

/// One case per `NAME.stp` of `scripts` (which is `rel` seen from `dir`),
/// with its side files in `dir`.
pub fn cases_of(scripts: &Path, dir: &Path, rel: &Path) -> Vec<Case> {
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
            env: Vec::new(),
            stdout_only: false,
        })
        .collect()
}

fn read_opt(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

impl Case {
    fn file(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.name))
    }

    /// The utap command line of the case (without the binary).
    fn args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        if let Some(opts) = read_opt(&self.file("opts")) {
            args.extend(shell_words(&opts).into_iter().map(Into::into));
        }
        if let Some(c) = read_opt(&self.file("cmd")) {
            args.push("-c".into());
            args.push(c.trim().into());
        }
        // Relative to the case directory when the script is there, so
        // that messages quoting its path do not depend on the checkout.
        args.push(match (self.script.parent(), self.script.file_name()) {
            (Some(parent), Some(name)) if parent.as_os_str().is_empty() || parent == self.dir => {
                name.into()
            }
            _ => self.script.clone().into(),
        });
        if let Some(a) = read_opt(&self.file("args")) {
            args.extend(shell_words(&a).into_iter().map(Into::into));
        }
        args
    }
}

impl Harness {
    /// Runs `case` once; stdout filtered by its `.filter`.
    pub fn run(&self, case: &Case) -> Result<Run, String> {
        let mut cmd = Command::new(&self.utap);
        cmd.current_dir(&case.dir).args(case.args());
        cmd.envs(case.env.iter().map(|(k, v)| (k, v)));
        // cargo points LD_LIBRARY_PATH at its build directories; traced
        // commands would search them all for every library they load.
        cmd.env_remove("LD_LIBRARY_PATH");
        // Its own process group, so that a timeout kills the command it
        // traces too.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.utap.display()))?;
        // Both pipes drained on threads so that a chatty case cannot block.
        let drain = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = r.read_to_end(&mut v);
                v
            })
        };
        let out = drain(Box::new(child.stdout.take().expect("piped")));
        let err = drain(Box::new(child.stderr.take().expect("piped")));
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if start.elapsed() > self.timeout {
                let group = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {}s", self.timeout.as_secs_f64()));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = out.join().unwrap_or_default();
        let stdout = match read_opt(&case.file("filter")) {
            Some(f) => normalize(&f, &stdout)?,
            None => stdout,
        };
        Ok(Run {
            stdout,
            stderr: err.join().unwrap_or_default(),
            status: status.code().unwrap_or(128 + 9),
        })
    }

    /// Runs `case` and compares with its expected files (every difference,
    /// each as a [`diff`]); with `bless`, writes them instead.
    pub fn check(&self, case: &Case, bless: bool) -> Result<(), String> {
        let run = self.run(case)?;
        if bless {
            return bless_case(case, &run);
        }
        let mut problems = Vec::new();
        let expected_out = std::fs::read(case.file("out")).unwrap_or_default();
        if expected_out != run.stdout {
            problems.push(diff("stdout", &expected_out, &run.stdout));
        }
        if !case.stdout_only {
            let expected_err = std::fs::read(case.file("err")).unwrap_or_default();
            if expected_err != run.stderr {
                problems.push(diff("stderr", &expected_err, &run.stderr));
            }
            let expected_exit: i32 = read_opt(&case.file("exit"))
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            if expected_exit != run.status {
                let mut p = format!("exit status {} instead of {expected_exit}", run.status);
                // The stderr already shown in its diff is not repeated.
                if expected_err == run.stderr {
                    p += &format!("\nstderr:\n{}", String::from_utf8_lossy(&run.stderr));
                }
                problems.push(p);
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

    /// Checks every case on `jobs` threads, writing `FAIL SCRIPT` and its
    /// differences per failure (in case order) and `N passed, M failed`
    /// to `report`; the number failed.
    pub fn run_all(
        &self,
        cases: &[Case],
        bless: bool,
        jobs: usize,
        report: &mut dyn Write,
    ) -> usize {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<(usize, Result<(), String>)>> = Mutex::default();
        std::thread::scope(|s| {
            for _ in 0..jobs.clamp(1, cases.len().max(1)) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(case) = cases.get(i) else { break };
                        let r = self.check(case, bless);
                        results
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((i, r));
                    }
                });
            }
        });
        let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        results.sort_by_key(|r| r.0);
        summarize(cases, &results, bless, report)
    }
}

/// The failures' reports and the count line; the number failed.
fn summarize(
    cases: &[Case],
    results: &[(usize, Result<(), String>)],
    bless: bool,
    report: &mut dyn Write,
) -> usize {
    let mut failed = 0;
    for (i, r) in results {
        if let Err(e) = r {
            failed += 1;
            let c = &cases[*i];
            let e = e.trim_end_matches('\n');
            let _ = writeln!(report, "FAIL {}\n{e}", c.dir.join(&c.script).display());
        }
    }
    let what = if bless { "blessed" } else { "passed" };
    let _ = writeln!(report, "{} {what}, {failed} failed", results.len() - failed);
    failed
}

/// Writes a case's expected files from `run`.
fn bless_case(case: &Case, run: &Run) -> Result<(), String> {
    let write = |ext: &str, data: &[u8], keep_empty: bool| {
        let p = case.file(ext);
        if data.is_empty() && !keep_empty {
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("cannot remove {}: {e}", p.display()))
                }
                _ => Ok(()),
            }
        } else {
            std::fs::write(&p, data).map_err(|e| format!("cannot write {}: {e}", p.display()))
        }
    };
    write("out", &run.stdout, true)?;
    if case.stdout_only {
        return Ok(());
    }
    write("err", &run.stderr, false)?;
    let exit = match run.status {
        0 => Vec::new(),
        s => format!("{s}\n").into_bytes(),
    };
    write("exit", &exit, false)
}

/// A readable difference: the common lines before it, then what was
/// expected (`- `) and what came instead (`+ `), line by line.
pub fn diff(what: &str, expected: &[u8], actual: &[u8]) -> String {
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
