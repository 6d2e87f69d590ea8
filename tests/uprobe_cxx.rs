//! C++ exceptions through functions with `.return` probes (the unwinder
//! must never see the trampoline; see runtime/src/utrace/unwinding.rs):
//! the fixture (tests/fixtures/uprobe/uthrow.cc, built here with g++)
//! throws through `middle()`, catches in `catcher()`, and rethrows from
//! `rethrower()` to `outer()`. Traced, its output and exit status are
//! those of an untraced run, and utap's return counts equal the fixture's
//! own counts of normal returns (a function left by an exception does not
//! return). Skipped with a message when g++ is missing.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::{command, run, utap};

/// Builds the fixture once per test process, at `-O0` and `-O2`.
fn build(opt: &str) -> Option<String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/uprobe/uthrow.cc");
    let exe = format!(
        "{}/uthrow{opt}-{}",
        env!("UTAP_FIXTURES"),
        std::process::id()
    );
    let ok = Command::new("g++")
        .args([opt, "-Wall", "-o", &exe])
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: g++ is not installed (or failed): no C++ fixture");
        return None;
    }
    Some(exe)
}

fn count(output: &str, name: &str) -> i64 {
    output
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no '{name} N' in {output:?}"))
}

const SCRIPT: &str = r#"
global n
probe process("EXE").function("middle").return, process("EXE").function("catcher").return,
      process("EXE").function("rethrower").return, process("EXE").function("outer").return,
      process("EXE").function("thrower").return
{ n[probefunc()]++ }
probe process("EXE").function("thrower") { n["thrower_entry"]++ }
probe end { foreach (k in n+) printf("u_%s %d\n", k, n[k]) }
"#;

#[test]
fn exceptions_cross_return_probes_without_changing_the_program() {
    for opt in ["-O0", "-O2"] {
        let Some(exe) = build(opt) else { return };
        let plain = run({
            let mut c = command(&exe);
            c.arg("30");
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c
        });
        assert_eq!(plain.status, 0, "{plain:?}");
        let o = run(utap(
            &SCRIPT.replace("EXE", &exe),
            &["-c", &format!("{exe} 30")],
        ));
        let _ = std::fs::remove_file(&exe);
        assert_eq!(o.status, 0, "{opt}: {}{}", o.stdout, o.stderr);
        assert!(
            o.stdout.starts_with(&plain.stdout),
            "{opt}: traced output differs:\n{}\nuntraced:\n{}\n{}",
            o.stdout,
            plain.stdout,
            o.stderr
        );
        let out = &o.stdout;
        assert_eq!(count(out, "u_middle"), count(out, "middle"), "{opt}: {out}");
        assert_eq!(
            count(out, "u_catcher"),
            count(out, "catcher"),
            "{opt}: {out}"
        );
        assert_eq!(count(out, "u_outer"), count(out, "outer"), "{opt}: {out}");
        // rethrower returns when middle did not throw: 30 - 10.
        assert_eq!(count(out, "u_rethrower"), 20, "{opt}: {out}");
        // thrower: 60 entries, 40 normal returns.
        assert_eq!(count(out, "u_thrower_entry"), 60, "{opt}: {out}");
        assert_eq!(count(out, "u_thrower"), 40, "{opt}: {out}");
        assert_eq!(count(out, "caught"), 10, "{opt}: {out}");
    }
}
