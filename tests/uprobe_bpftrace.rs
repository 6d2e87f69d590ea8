//! bpftrace as the oracle of function probes: the kernel's uprobes and
//! uretprobes count the same calls as utap's breakpoints, on the same
//! fixtures, under `-c` (the uprobe fixture: a PIE's functions, recursion,
//! a library's function) and under `-x` (tests/fixtures/ugo.c: attached
//! while the fixture waits for SIGUSR1, after which every count equals the
//! fixture's own). Needs root and a bpftrace that can load programs
//! (tracefs mounted); skipped with a message otherwise, as in a container
//! without the BPF capability.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;

use support::{bpftrace_usable, command, fixture, utap_bin};

/// The `PREFIXname: N` / `PREFIXname N` lines of a run's output (`@`:
/// bpftrace's maps, `u_`: utap's, "": the fixture's own).
fn counts(text: &str, prefix: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.strip_prefix(prefix)?.split_once([':', ' '])?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Runs `cmd` (bounded by `timeout`), returns its stdout; when `ready` is
/// given, sends SIGUSR1 to `go` once a line `ready` appears.
fn run_bounded(mut cmd: Vec<String>, ready: Option<(&str, i32)>) -> String {
    cmd.splice(0..0, ["30".to_string()]);
    let mut c = command("timeout");
    c.args(&cmd).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    if let Some((marker, pid)) = ready {
        let mut line = String::new();
        while out.read_line(&mut line).unwrap_or(0) > 0 {
            let seen = line.trim_end() == marker;
            text.push_str(&line);
            line.clear();
            if seen {
                // SAFETY: a plain kill(2) of the fixture.
                unsafe { libc::kill(pid, libc::SIGUSR1) };
                break;
            }
        }
    }
    out.read_to_string(&mut text).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{cmd:?}: {status}\n{text}\n{err}");
    text
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn counts_equal_bpftraces_under_c() {
    if !bpftrace_usable() {
        return;
    }
    let exe = fixture("ufuncs");
    let lib = fixture("libufix.so");
    let target = format!("{exe} basic 9");
    let bt = run_bounded(
        strings(&[
            "bpftrace",
            "-e",
            &format!(
                "uprobe:{exe}:fib {{ @fib = count(); }} uretprobe:{exe}:fib {{ @fib_ret = count(); }}
                 uprobe:{exe}:add {{ @add = count(); }} uprobe:{lib}:ulib_square {{ @ulib = count(); }}
                 uretprobe:{lib}:ulib_square {{ @ulib_ret = count(); }}"
            ),
            "-c",
            &target,
        ]),
        None,
    );
    let ut = run_bounded(
        strings(&[
            utap_bin(),
            "-c",
            &target,
            "-e",
            &r#"global n
probe process("EXE").function("fib") { n["fib"]++ }
probe process("EXE").function("fib").return { n["fib_ret"]++ }
probe process("EXE").function("add") { n["add"]++ }
probe process("LIB").function("ulib_square") { n["ulib"]++ }
probe process("LIB").function("ulib_square").return { n["ulib_ret"]++ }
probe end { foreach (k in n) printf("u_%s %d\n", k, n[k]) }"#
                .replace("EXE", &exe)
                .replace("LIB", &lib),
        ]),
        None,
    );
    let (b, u) = (counts(&bt, "@"), counts(&ut, "u_"));
    for k in ["fib", "fib_ret", "add", "ulib", "ulib_ret"] {
        assert!(b.contains_key(k), "{k}: bpftrace {bt}");
        assert_eq!(u.get(k), b.get(k), "{k}: utap {ut}\nbpftrace {bt}");
    }
    assert_eq!(b.get("fib"), Some(&177), "{bt}");
}

/// Starts the ugo fixture; its own counts go to the returned file.
fn start_ugo(tag: &str) -> (support::Running, String) {
    let file = format!(
        "{}/ugo-{tag}-{}.out",
        env!("UTAP_FIXTURES"),
        std::process::id()
    );
    (support::Running::ready("ugo", &["40", &file]), file)
}

fn own_counts(file: &str, running: &mut support::Running) -> BTreeMap<String, i64> {
    for _ in 0..200 {
        if running.exited().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(file).expect("the fixture's counts");
    let _ = std::fs::remove_file(file);
    counts(&text, "")
}

#[test]
fn counts_equal_bpftraces_and_the_fixtures_under_x() {
    if !bpftrace_usable() {
        return;
    }
    let exe = fixture("ugo");
    let (mut p, file) = start_ugo("bpftrace");
    let pid = p.pid();
    let bt = run_bounded(
        strings(&[
            "bpftrace",
            "-p",
            &pid.to_string(),
            "-e",
            &format!(
                "BEGIN {{ printf(\"up\\n\"); }} uprobe:{exe}:tick {{ @tick = count(); }}
                 uprobe:{exe}:walk {{ @walk = count(); }} uretprobe:{exe}:walk {{ @walk_ret = count(); }}"
            ),
        ]),
        Some(("up", pid)),
    );
    let own_bt = own_counts(&file, &mut p);
    let (mut p, file) = start_ugo("utap");
    let pid = p.pid();
    let ut = run_bounded(
        strings(&[
            utap_bin(),
            "-x",
            &pid.to_string(),
            "-e",
            &r#"global n
probe process.begin { printf("up\n") }
probe process("EXE").function("tick") { n["tick"]++ }
probe process("EXE").function("walk") { n["walk"]++ }
probe process("EXE").function("walk").return { n["walk_ret"]++ }
probe end { foreach (k in n) printf("u_%s %d\n", k, n[k]) }"#
                .replace("EXE", &exe),
        ]),
        Some(("up", pid)),
    );
    let own_ut = own_counts(&file, &mut p);
    let (b, u) = (counts(&bt, "@"), counts(&ut, "u_"));
    assert_eq!(own_bt.get("tick"), Some(&40), "{own_bt:?}");
    assert_eq!(own_bt.get("walk"), Some(&160), "{own_bt:?}");
    assert_eq!(own_ut, own_bt);
    for (k, own) in [("tick", "tick"), ("walk", "walk"), ("walk_ret", "walk")] {
        assert_eq!(b.get(k), own_bt.get(own), "bpftrace {k}: {bt}");
        assert_eq!(u.get(k), own_ut.get(own), "utap {k}: {ut}");
    }
}
