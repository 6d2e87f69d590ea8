//! The blocks of the docs that show a command, checked against what the
//! command does now, so that no sample goes stale (issue 31).
//!
//! Markers, an HTML comment right before a fenced block:
//! - `<!-- sample` FILTER `-->`: the block's first line is `$ COMMAND`, the
//!   rest is its output: stdout, then stderr (two pipes, so that the
//!   lines of two writers never mix mid-line). The command runs with
//!   only PATH, HOME and `LC_ALL=C` in its environment, in a scratch directory holding `examples/` and copies of
//!   the fixtures the samples trace (`ustack`, `profile`: tests/fixtures/),
//!   with the utap under test first in PATH; the
//!   FILTER lines (golden tests' `.filter` directives, runtime/src/
//!   harness/filter.rs) are applied to both outputs before comparing, for what
//!   varies from run to run (pids, times, the order of two writers' lines).
//!   `UTAP_BLESS=1` writes the actual output into the block.
//! - `<!-- run -->`: the block's lines run with `sh -e` from the project
//!   directory with a scratch HOME (install steps into `~`).
//! - `<!-- ci -->`: each line of the block (comments after `  #` left out)
//!   is a line of `.ci/run`, which runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use utap_runtime::harness as filter;

/// A marked fenced block.
pub struct Block {
    /// 1-based line of the fence that opens the block.
    pub line: usize,
    pub kind: Kind,
    /// The lines between the fences.
    pub body: Vec<String>,
}

pub enum Kind {
    Sample { filter: String },
    Run,
    Ci,
}

/// The marked blocks of one markdown file, and the unmarked blocks that
/// show shell commands (a fence tagged `sh` or a first line `$ ...`).
pub fn blocks(file: &Path) -> (Vec<Block>, Vec<usize>) {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (mut marked, mut unmarked) = (Vec::new(), Vec::new());
    let mut pending: Option<Kind> = None;
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_end();
        if let Some(rest) = l.strip_prefix("<!-- sample") {
            let mut filter = String::new();
            let mut rest = rest.to_string();
            while !rest.trim_end().ends_with("-->") {
                filter.push_str(&rest);
                filter.push('\n');
                i += 1;
                rest = lines[i].to_string();
            }
            filter.push_str(rest.trim_end().trim_end_matches("-->"));
            pending = Some(Kind::Sample { filter });
        } else if l == "<!-- run -->" {
            pending = Some(Kind::Run);
        } else if l == "<!-- ci -->" {
            pending = Some(Kind::Ci);
        } else if l.starts_with("```") {
            let open = i + 1;
            let tag = l.trim_start_matches('`').to_string();
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].starts_with("```") {
                body.push(lines[i].to_string());
                i += 1;
            }
            match pending.take() {
                Some(kind) => marked.push(Block {
                    line: open,
                    kind,
                    body,
                }),
                None if tag == "sh" || body.first().is_some_and(|b| b.starts_with("$ ")) => {
                    unmarked.push(open)
                }
                None => {}
            }
        } else if !l.is_empty() {
            pending = None;
        }
        i += 1;
    }
    (marked, unmarked)
}

/// Every markdown file of the docs: README.md and docs/ (recursively).
pub fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// A scratch directory for one sample: `examples/` and the fixtures the
/// samples run, under the names the docs use.
fn scratch(n: usize, root: &Path) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("utap-sample-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(root.join("examples"), dir.join("examples")).unwrap();
    let fixtures = Path::new(env!("UTAP_FIXTURES"));
    for name in ["ustack", "profile"] {
        std::fs::copy(fixtures.join(name), dir.join(name)).unwrap();
    }
    dir
}

fn path_with_utap() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_utap")).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs a sample's command; its stdout, then its stderr.
pub fn run_sample(n: usize, root: &Path, command: &str) -> String {
    let dir = scratch(n, root);
    let out = Command::new("timeout")
        .args(["120", "sh", "-c", command])
        .current_dir(&dir)
        .env_clear() // cargo test's LD_LIBRARY_PATH would show in every open
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("PATH", path_with_utap())
        .env("LC_ALL", "C")
        .output()
        .expect("sh runs");
    std::fs::remove_dir_all(&dir).unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

/// Runs a `run` block with `sh -e` in the project with a scratch HOME.
pub fn run_block(root: &Path, body: &[String]) -> Result<(), String> {
    let home = std::env::temp_dir().join(format!("utap-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("sh")
        .args(["-e", "-c", &body.join("\n")])
        .current_dir(root)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", path_with_utap())
        .output()
        .expect("sh runs");
    std::fs::remove_dir_all(&home).unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// What a sample shows, filtered, against what its command prints now.
pub fn check_sample(
    n: usize,
    root: &Path,
    filter: &str,
    body: &[String],
) -> Result<Option<String>, String> {
    let command = body
        .first()
        .and_then(|l| l.strip_prefix("$ "))
        .ok_or("a sample block starts with `$ COMMAND`")?;
    let shown = body[1..]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    let actual = run_sample(n, root, command);
    let want = filter::normalize(filter, shown.as_bytes())?;
    let got = filter::normalize(filter, actual.as_bytes())?;
    if want == got {
        return Ok(None);
    }
    Err(format!(
        "`{command}` prints (filtered):\n{}\nthe docs show (filtered):\n{}\nraw output:\n{actual}",
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    ))
    .or_else(|e| {
        if std::env::var_os("UTAP_BLESS").is_some() {
            Ok(Some(actual))
        } else {
            Err(e)
        }
    })
}

/// Writes fresh outputs into sample blocks: (fence line, output) pairs.
pub fn bless(file: &Path, fresh: &[(usize, String)]) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (open, output) in fresh.iter().rev() {
        // lines[open] is `$ COMMAND`; the output runs to the closing fence.
        let start = open + 1;
        let end = (start..lines.len())
            .find(|&i| lines[i].starts_with("```"))
            .unwrap();
        let new: Vec<String> = output.lines().map(str::to_string).collect();
        lines.splice(start..end, new);
    }
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}
