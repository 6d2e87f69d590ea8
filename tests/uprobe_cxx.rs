//! C++ exceptions through functions with `.return` probes (the unwinder
//! must never see the trampoline; see runtime/src/utrace/unwinding.rs):
//! the fixture (tests/fixtures/uprobe/uthrow.cc, built here with g++)
//! throws through `middle()`, catches in `catcher()`, and rethrows from
//! `rethrower()` to `outer()`. Traced, its output and exit status are
//! those of an untraced run, and utap's return counts equal the fixture's
//! own counts of normal returns (a function left by an exception does not
//! return). Skipped with a message when g++ is missing.
//!
//! C++ names (ucxx.cc: a namespace, a method, an overload, a template):
//! symbol output shows them demangled (`probefunc()`, `usymname()`,
//! `usymdata()`, backtraces, `-l`), and `.function("geo::scale")` names
//! every overload, `.function("geo::scale(long, long)")` one.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::{command, run, utap};

/// Builds the fixture for test `tag`, at `-O0` or `-O2` (each test its
/// own file: tests run in parallel, and one's build must not overwrite
/// what another runs).
fn build(opt: &str, tag: &str) -> Option<String> {
    build_fixture("uthrow", opt, tag)
}

/// Builds tests/fixtures/uprobe/NAME.cc with g++ at `opt`, for test `tag`.
fn build_fixture(name: &str, opt: &str, tag: &str) -> Option<String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/uprobe")
        .join(format!("{name}.cc"));
    let exe = format!(
        "{}/{name}{opt}-{tag}-{}",
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
        let Some(exe) = build(opt, "tracer") else {
            return;
        };
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
        assert_return_counts(&o.stdout, opt);
        assert_eq!(count(&o.stdout, "caught"), 10, "{opt}: {}", o.stdout);
    }
}

/// The same counts with handlers that run in the program (the data
/// plane's return stub and shadow stack; the unwinder's stops park and
/// re-arm those frames too): as on the tracer's route and as the
/// fixture's own counts.
const INPROC_SCRIPT: &str = r#"global m, c, r, o, t, te
probe process("EXE").function("middle").return { m++ }
probe process("EXE").function("catcher").return { c++ }
probe process("EXE").function("rethrower").return { r++ }
probe process("EXE").function("outer").return { o++ }
probe process("EXE").function("thrower").return { t++ }
probe process("EXE").function("thrower") { te++ }
probe end { printf("u_middle %d\nu_catcher %d\nu_rethrower %d\nu_outer %d\nu_thrower %d\nu_thrower_entry %d\n", m, c, r, o, t, te) }
"#;

#[test]
fn exceptions_cross_return_probes_in_the_program() {
    for opt in ["-O0", "-O2"] {
        let Some(exe) = build(opt, "inproc") else {
            return;
        };
        let script = INPROC_SCRIPT.replace("EXE", &exe);
        let traced = |inproc: bool| {
            let mut c = utap(&script, &["-v", "-c", &format!("{exe} 30")]);
            if !inproc {
                c.env("UTAP_INPROC", "0");
            }
            run(c)
        };
        let (o, tracer) = (traced(true), traced(false));
        let _ = std::fs::remove_file(&exe);
        assert_eq!(o.status, 0, "{opt}: {}{}", o.stdout, o.stderr);
        assert_eq!(o.stdout, tracer.stdout, "{opt}: in process (left), tracer");
        assert!(
            o.stderr.contains("run in the program"),
            "{opt}: {}",
            o.stderr
        );
        assert_return_counts(&o.stdout, opt);
    }
}

/// utap's counts of returns (`u_*`) equal the fixture's own counts of
/// normal returns (a function left by an exception does not return).
fn assert_return_counts(out: &str, opt: &str) {
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
}

const CXX_SCRIPT: &str = r#"global n
probe process("EXE").function("geo::Shape::area") { n[probefunc()]++ }
probe process("EXE").function("geo::scale") { n[probefunc()]++ }
probe process("EXE").function("geo::biggest<*>") { n[probefunc()]++ }
probe process("EXE").function("scale(long, long)").return { n["return " . usymname(uaddr())]++ }
probe process("EXE").function("area").call {
  if (!n["first"]++) printf("%s\n%s\n%s\n", usymdata(uaddr()), usymname(uaddr()), pp())
}
probe end { foreach (k in n+) printf("%s %d\n", k, n[k]) }"#;

#[test]
fn cxx_names_are_demangled_and_match_by_qualified_name() {
    let Some(exe) = build_fixture("ucxx", "-O0", "names") else {
        return;
    };
    // The program's own output (its counts: area 5, scale(x) 5,
    // scale(x, y) 3, biggest<long> 5, biggest<double> 1) is not mixed in.
    let o = run(utap(
        &CXX_SCRIPT.replace("EXE", &exe),
        &["-c", &format!("exec {exe} 5 >/dev/null")],
    ));
    let listed = run(utap(
        "",
        &["-l", &format!(r#"process("{exe}").function("geo::*")"#)],
    ));
    let bad = run(utap(
        &format!(r#"probe process("{exe}").function("geo::scael") {{ }}"#),
        &["-c", "true"],
    ));
    let bt = run(utap(
        &format!(
            r#"probe process("{exe}").function("geo::Shape::area") {{ print_ubacktrace_brief(); exit() }}"#
        ),
        &["-c", &format!("{exe} 1")],
    ));
    let image = utap_runtime::elf::ElfImage::open(std::path::Path::new(&exe)).unwrap();
    let size = image
        .symbols
        .function("_ZNK3geo5Shape4areaEl")
        .unwrap()
        .size;
    let _ = std::fs::remove_file(&exe);
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    let expected = format!(
        "geo::Shape::area(long) const+0x0/{size:#x} [{exe}]
geo::Shape::area(long) const
process(\"{exe}\").function(\"geo::Shape::area(long) const\").call
geo::biggest<double>(double, double) 1
geo::scale(long, long) 3
return geo::scale(long, long) 3
geo::Shape::area(long) const 5
first 5
geo::scale(long) 5
geo::biggest<long>(long, long) 5
"
    );
    assert_eq!(o.stdout, expected, "{}", o.stderr);
    let listing = format!(
        "process(\"{exe}\").function(\"geo::Shape::area(long) const\")
process(\"{exe}\").function(\"geo::biggest<double>(double, double)\")
process(\"{exe}\").function(\"geo::biggest<long>(long, long)\")
process(\"{exe}\").function(\"geo::scale(long)\")
process(\"{exe}\").function(\"geo::scale(long, long)\")
"
    );
    assert_eq!(listed.stdout, listing, "{}", listed.stderr);
    assert_eq!(bad.status, 1);
    assert!(
        bad.stderr.contains("did you mean 'geo::scale'?"),
        "{}",
        bad.stderr
    );
    assert!(
        bt.stdout
            .starts_with("geo::Shape::area(long) const+0x0\nmain+0x"),
        "{}{}",
        bt.stdout,
        bt.stderr
    );
}
