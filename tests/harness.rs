//! `utap --test DIR` on a scratch tapset author's directory: a passing
//! case (with `.opts -I` for the author's tapset, `.args`, a `.cmd` and a
//! `.filter`), a failing one (a diff on stdout and the `N passed, M
//! failed` line, exit status 1), a new one blessed with `--bless` and
//! passing after, a case over its time limit, and a wrong directory.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write a case file");
}

/// `utap --test ARGS...` from `cwd`: (stdout, stderr, status).
fn test(cwd: &Path, args: &[&str]) -> (String, String, i32) {
    let o = Command::new(env!("CARGO_BIN_EXE_utap"))
        .arg("--test")
        .args(args)
        .current_dir(cwd)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("utap runs");
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (s(&o.stdout), s(&o.stderr), o.status.code().unwrap_or(-1))
}

/// A tapset directory and a test directory beside it.
fn scratch(tag: &str) -> Scratch {
    let root = std::env::temp_dir().join(format!("utap-harness-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (tapset, tests) = (root.join("tapset"), root.join("tests"));
    std::fs::create_dir_all(&tapset).unwrap();
    std::fs::create_dir_all(&tests).unwrap();
    write(
        &tapset,
        "greet.stp",
        "function greet(who) { return \"hello \" . who }\n",
    );
    write(
        &tests,
        "pass.stp",
        "probe begin { println(greet(@1)); printf(\"pid %d\\n\", target()) }\n",
    );
    write(&tests, "pass.opts", "-I ../tapset\n");
    write(&tests, "pass.args", "'tapset user'\n");
    write(&tests, "pass.cmd", "true\n");
    write(&tests, "pass.filter", "replace pid [0-9]+ => pid N\n");
    write(&tests, "pass.out", "hello tapset user\npid N\n");
    write(
        &tests,
        "fail.stp",
        "probe begin { println(\"actual\"); exit() }\n",
    );
    write(&tests, "fail.out", "expected\n");
    let new = root.join("new");
    std::fs::create_dir_all(&new).unwrap();
    write(&new, "new.stp", "probe begin { error(\"no\") }\n");
    Scratch(root)
}

#[test]
fn a_passing_and_a_failing_case() {
    let s = scratch("fail");
    let (out, err, status) = test(&s.0, &["tests"]);
    assert_eq!(status, 1, "{out}{err}");
    assert_eq!(
        out,
        "FAIL tests/fail.stp\n\
         stdout differs (first difference at line 1):\n\
         - expected\n\
         + actual\n\
         1 passed, 1 failed\n",
        "{err}"
    );
    // One job at a time reports the same, in the same order.
    let (out1, _, status1) = test(&s.0, &["-j", "1", "tests"]);
    assert_eq!((status1, out1), (1, out));
}

#[test]
fn a_new_case_is_blessed_then_passes() {
    let s = scratch("bless");
    let (out, err, status) = test(&s.0, &["new"]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(
        out.starts_with(
            "FAIL new/new.stp\nstderr differs (first difference at line 1):\n+ ERROR: no"
        ),
        "{out}"
    );
    assert!(out.contains("exit status 1 instead of 0\n"), "{out}");
    assert!(out.ends_with("0 passed, 1 failed\n"), "{out}");

    let (out, err, status) = test(&s.0, &["--bless", "new", "tests"]);
    assert_eq!(
        (status, out.as_str()),
        (0, "3 blessed, 0 failed\n"),
        "{err}"
    );
    let read = |n: &str| std::fs::read_to_string(s.0.join(n)).unwrap_or_default();
    assert_eq!(read("new/new.out"), "");
    assert!(
        read("new/new.err").starts_with("ERROR: no"),
        "{}",
        read("new/new.err")
    );
    assert_eq!(read("new/new.exit"), "1\n");
    assert_eq!(read("tests/fail.out"), "actual\n");
    // The filtered output is what is kept.
    assert_eq!(read("tests/pass.out"), "hello tapset user\npid N\n");

    let (out, err, status) = test(&s.0, &["tests", "new"]);
    assert_eq!((status, out.as_str()), (0, "3 passed, 0 failed\n"), "{err}");
}

#[test]
fn a_case_over_its_time_limit_fails() {
    let s = scratch("slow");
    let slow = s.0.join("slow");
    std::fs::create_dir_all(&slow).unwrap();
    write(&slow, "slow.stp", "probe timer.s(20) { exit() }\n");
    let started = std::time::Instant::now();
    let (out, _, status) = test(&slow, &["--test-timeout", "0.5", "."]);
    assert_eq!(status, 1, "{out}");
    assert!(out.contains("timed out after 0.5s"), "{out}");
    assert!(started.elapsed().as_secs() < 10);
}

#[test]
fn a_directory_without_cases_is_an_error() {
    let s = scratch("none");
    let (out, err, status) = test(&s.0, &["tapset/none"]);
    assert_eq!((status, out.as_str()), (1, ""));
    assert_eq!(err, "utap: --test: 'tapset/none' is not a directory\n");
}
