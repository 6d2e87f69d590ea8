//! bpftrace as the oracle of USDT marker probes: the kernel's uprobes on
//! the markers of tests/fixtures/usdt/usdt.c (run under `-c` by both
//! tools) see the same hits, in the same order, with the same arguments as
//! utap's breakpoints, semaphore-guarded marker included (both tools set
//! the is-enabled semaphore). Needs root and a bpftrace that can load
//! programs (tracefs mounted); skipped with a message otherwise.
//!
//! bpftrace 0.17 cannot read a `sym(%rip)` operand ("deref ident is not
//! handled yet": it prints garbage), so for `mixed`'s first argument and
//! `ticked`'s only one the comparison is of the hits alone; tests/usdt.rs
//! checks those values against the fixture's own.

mod support;

use std::process::Stdio;

use support::{bpftrace_usable, command, fixture, utap_bin};

/// Runs a bounded command; its stdout lines that start with `m `.
fn hits(args: &[&str]) -> Vec<String> {
    let out = command("timeout")
        .arg("60")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("spawn");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter(|l| l.starts_with("m "))
        .map(str::to_string)
        .collect()
}

#[test]
fn marker_hits_and_arguments_equal_bpftraces() {
    if !bpftrace_usable() {
        return;
    }
    let exe = fixture("usdt");
    let bt = hits(&[
        "bpftrace",
        "-e",
        &format!(
            "usdt:{exe}:demo:start {{ printf(\"m start\\n\"); }}
             usdt:{exe}:demo:work {{ printf(\"m work %d %d\\n\", arg0, arg1); }}
             usdt:{exe}:demo:mixed {{ printf(\"m mixed %d %d\\n\", arg1, arg2); }}
             usdt:{exe}:demo:ticked {{ printf(\"m ticked\\n\"); }}"
        ),
        "-c",
        &exe,
    ]);
    let script = r#"
probe process("EXE").mark("start") { printf("m start\n") }
probe process("EXE").mark("work") { printf("m work %d %d\n", $arg1, $arg2) }
probe process("EXE").provider("demo").mark("mixed") { printf("m mixed %d %d\n", $arg2, $arg3) }
probe process("EXE").mark("ticked") { printf("m ticked\n") }
"#
    .replace("EXE", &exe);
    let ut = hits(&[utap_bin(), "-e", &script, "-c", &exe]);
    // The fixture: start, then work(i, 2i), mixed(small, table[i], -1) and
    // the guarded ticked for i = 0..3.
    assert_eq!(bt.len(), 10, "bpftrace: {bt:?}");
    assert_eq!(bt[1], "m work 0 0", "{bt:?}");
    assert_eq!(ut, bt);
}
