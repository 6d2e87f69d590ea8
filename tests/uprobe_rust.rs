//! Rust symbols, demangled as `rustfilt` shows them (without the hash):
//! a Rust fixture (tests/fixtures/uprobe/rfix.rs, built here with rustc in
//! the legacy `_ZN...17h<hash>E` and the v0 `_R...` schemes) is probed by
//! its Rust path, and `probefunc()`, backtraces, `usymname()` and `-l`
//! name it `rfix::compute`.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::{run, utap};

/// Builds rfix.rs with `mangling` (`legacy`: rustc's default; `v0`), with
/// DWARF (`-g`) or without any (`-l` then lists symbols' names: with
/// DWARF it shows `compute@rfix.rs:7`, as SystemTap does).
fn build(mangling: &str, dwarf: bool) -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/uprobe/rfix.rs");
    let exe = format!(
        "{}/rfix-{mangling}-{dwarf}-{}",
        env!("UTAP_FIXTURES"),
        std::process::id()
    );
    let mut c = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()));
    c.args(["-C", "opt-level=1", "-o", &exe]);
    c.args(if dwarf { ["-g"] } else { ["-Cstrip=debuginfo"] });
    if mangling == "v0" {
        c.args(["-C", "symbol-mangling-version=v0"]);
    }
    let status = c.arg(&src).status().expect("rustc runs");
    assert!(status.success(), "rustc failed on {}", src.display());
    exe
}

/// The mangled name of `compute` in `exe`, from its symbol table.
fn mangled(exe: &str) -> String {
    let nm = Command::new("nm").arg(exe).output().expect("nm runs");
    String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.rsplit(' ').next())
        .find(|n| n.contains("7compute"))
        .expect("compute in the symbol table")
        .to_string()
}

fn check(mangling: &str, prefix: &str) {
    let exe = build(mangling, true);
    assert!(mangled(&exe).starts_with(prefix), "{}", mangled(&exe));
    let script = format!(
        "probe process(\"{exe}\").function(\"rfix::compute\") {{
           println(probefunc()); println(usymname(uaddr())); print_ubacktrace_brief()
         }}
         probe process(\"{exe}\").function(\"compute\") {{ println(\"unqualified\") }}"
    );
    let o = run(utap(&script, &["-c", &format!("exec {exe} x >/dev/null")]));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines[..2],
        ["rfix::compute", "rfix::compute"],
        "{}",
        o.stdout
    );
    assert!(lines[2].starts_with("rfix::compute+0x0"), "{}", o.stdout);
    assert!(lines[3].starts_with("rfix::main+0x"), "{}", o.stdout);
    assert!(o.stdout.contains("\nunqualified\n"), "{}", o.stdout);
    let _ = std::fs::remove_file(&exe);
    let exe = build(mangling, false);
    let pattern = format!("process(\"{exe}\").function(\"rfix::comp*\")");
    let listed = run(utap("", &["-l", &pattern]));
    assert_eq!(
        listed.stdout,
        format!("process(\"{exe}\").function(\"rfix::compute\")\n"),
        "{}",
        listed.stderr
    );
    let _ = std::fs::remove_file(&exe);
}

#[test]
fn legacy_rust_names_are_demangled_everywhere() {
    check("legacy", "_ZN4rfix7compute17h");
}

#[test]
fn v0_rust_names_are_demangled_everywhere() {
    check("v0", "_RNvCs");
}
