//! Fault injection at a syscall's entry (guru mode), shown by what reaches
//! the disk: `$return` set in an entry probe skips the call (the thread
//! sees that value, a return probe sees it as the result), `$argN` change
//! what the call runs with. Both ways entries are reported: a seccomp stop
//! (`-c`, with a filter) and `PTRACE_SYSCALL` (`-x`, no filter). Also the
//! strace oracle for examples/faultinject.stp, delays (`udelay`/`mdelay`)
//! and `raise`.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::*;

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("utap-inject-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Fake success for the unlink, EROFS for the create, 3 of the 7 bytes for
/// the write; the return probes report what the thread got.
const SKIP: &str = r#"
global skipped
probe syscall.unlinkat { if (isinstr(pathname_str, "victim")) { $return = 0; skipped[tid()] = 1 } }
probe syscall.openat { if (isinstr(filename, "created")) { $return = -errno_num("EROFS"); skipped[tid()] = 1 } }
probe syscall.write { if ($arg3 == 7) $arg3 = 3 }
probe syscall.unlinkat.return, syscall.openat.return {
	if (skipped[tid()]) printf("%s returned %s\n", name, retstr)
	delete skipped[tid()]
}
probe syscall.getppid { if (!attached++) println("attached") }
global attached
"#;

fn fileops_results(dir: &Path, fixture_out: &str, utap_out: &str) {
    assert!(
        dir.join("victim").exists(),
        "the skipped unlink removed the file"
    );
    assert!(
        !dir.join("created").exists(),
        "the skipped openat(O_CREAT) created the file"
    );
    assert_eq!(std::fs::read(dir.join("out")).unwrap(), b"abc");
    assert_eq!(
        fixture_out,
        "unlinkat: 0\nopenat: -1 Read-only file system\nwrite: 3\n"
    );
    assert_eq!(
        utap_out,
        "attached\nunlinkat returned 0\nopenat returned -30 (EROFS)\n"
    );
}

#[test]
fn entry_return_skips_the_call_under_seccomp() {
    let dir = scratch("seccomp");
    std::fs::write(dir.join("victim"), "x").unwrap();
    std::fs::write(dir.join("go"), "").unwrap();
    let cmd = format!("{} {}", fixture("fileops"), dir.display());
    let out = run(utap(SKIP, &["-g", "-v", "-c", &cmd]));
    assert!(out.stderr.contains("seccomp"), "{}", out.stderr);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let (fixture_out, utap_out) = split_ready(&out.stdout);
    fileops_results(&dir, &fixture_out, &utap_out);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn entry_return_skips_the_call_under_ptrace_syscall() {
    let dir = scratch("attach");
    std::fs::write(dir.join("victim"), "x").unwrap();
    let mut c = command(&fixture("fileops"));
    c.arg(&dir).stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 6];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    assert_eq!(&first, b"ready\n");
    let pid = child.id().to_string();
    let live = Live::spawn(utap(SKIP, &["-g", "-x", &pid]));
    assert_eq!(live.line(), "attached");
    std::fs::write(dir.join("go"), "").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let mut fixture_out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut fixture_out).unwrap();
    let out = live.finish();
    assert_eq!(out.status, 0, "{}", out.stderr);
    fileops_results(&dir, &fixture_out, &format!("attached\n{}", out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-c` output: the fixture's lines and utap's share stdout; the fixture's
/// all start with a syscall name and a colon.
fn split_ready(stdout: &str) -> (String, String) {
    let (mut fixture, mut utap) = (String::new(), String::new());
    for line in stdout.lines().filter(|l| *l != "ready") {
        let to = if line.contains(": ") {
            &mut fixture
        } else {
            &mut utap
        };
        to.push_str(line);
        to.push('\n');
    }
    (fixture, utap)
}

/// Bytes `dd bs=1 count=6` leaves in its file under `inject` (utap with
/// examples/faultinject.stp, or strace's `-e inject=`).
fn dd_bytes(dir: &Path, run_under: impl FnOnce(&str)) -> u64 {
    let file = dir.join("F");
    let _ = std::fs::remove_file(&file);
    run_under(&format!(
        "dd if=/dev/zero of={} bs=1 count=6",
        file.display()
    ));
    std::fs::metadata(&file).unwrap().len()
}

#[test]
fn faultinject_example_leaves_what_strace_inject_leaves() {
    let dir = scratch("dd");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/faultinject.stp");
    let utap_bytes = dd_bytes(&dir, |cmd| {
        let mut c = command(utap_bin());
        c.arg("-g").arg(&script).args(["-c", cmd]);
        let out = run(c);
        assert_eq!(out.status, 0, "{}", out.stderr);
        // dd's own message is cut short: its 6th write fails too.
        assert!(out.stderr.contains("dd: error writing"), "{}", out.stderr);
    });
    // The first two writes land; the third never runs.
    assert_eq!(utap_bytes, 2);
    if have("strace") {
        let strace_bytes = dd_bytes(&dir, |cmd| {
            let mut c = command("strace");
            c.args(["-f", "-qq", "-o", "/dev/null"]);
            c.args(["-e", "inject=write:error=ENOSPC:when=3+3"]);
            c.args(cmd.split_whitespace());
            run(c);
        });
        assert_eq!(utap_bytes, strace_bytes);
    } else {
        println!("strace is not installed: compared with the fixed count only");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn entry_return_read_is_rejected_and_needs_guru_mode() {
    let out = run(utap("probe syscall.write { $return = -28 }", &["-p2"]));
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("write to target variable not permitted; need utap -g"),
        "{}",
        out.stderr
    );
    let out = run(utap(
        "probe process.syscall { println($return) }",
        &["-g", "-p2"],
    ));
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("utrace '$return' variable is not available at a syscall entry"),
        "{}",
        out.stderr
    );
}

/// `mdelay` at an entry holds that thread only: the other threads' syscalls
/// are served and timer probes tick meanwhile.
#[test]
fn delay_holds_one_thread_while_the_others_are_served() {
    let script = r#"
global held, t0, others, ticks, during
probe syscall.getppid {
	if (execname() != "threads" || tid() == pid()) next
	if (!held) { held = tid(); t0 = gettimeofday_ms(); mdelay(400) }
	else others++
}
probe syscall.getppid.return {
	if (tid() == held) { during = others; printf("held %d\n", gettimeofday_ms() - t0 >= 400) }
}
probe timer.ms(20) { if (held && !during) ticks++ }
probe end { printf("others while held: %d, ticks while held: %d\n", during >= 3, ticks >= 5) }
"#;
    let start = Instant::now();
    let cmd = format!("{} 4", fixture("threads"));
    let out = run(utap(script, &["-g", "-c", &cmd]));
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "held 1\nothers while held: 1, ticks while held: 1\n"
    );
    assert!(start.elapsed() >= Duration::from_millis(400));
}

/// `udelay` at an exit holds the thread after the call ran; the delays of
/// two probes on the same event add up.
#[test]
fn delay_at_exit() {
    let script = r#"
global t0
probe syscall.getppid { if (execname() == "writer") t0 = gettimeofday_us() }
probe syscall.getppid.return { if (execname() == "writer") udelay(150000) }
probe syscall.getppid.return { if (execname() == "writer") mdelay(150) }
probe syscall.write { if (execname() == "writer" && t0) { printf("%d\n", gettimeofday_us() - t0 >= 300000); t0 = 0 } }
"#;
    let cmd = format!("{} 1", fixture("writer"));
    let out = run(utap(script, &["-g", "-c", &cmd]));
    assert_eq!(out.status, 0, "{}", out.stderr);
    // utap's output thread and the fixture share stdout: order them.
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["1", "write 1: 5 bytes"]);
}

/// "utap: N ptrace stops" from a `-v` run.
fn stops(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("utap: ")?.strip_suffix(" ptrace stops"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no stop count in {stderr}"))
}

/// Under the seccomp filter, skipping a call costs the entry stop only:
/// as many stops as a probe that changes nothing.
#[test]
fn entry_injection_needs_no_exit_stop() {
    let dir = scratch("stops");
    std::fs::write(dir.join("go"), "").unwrap();
    let cmd = format!("{} {}", fixture("fileops"), dir.display());
    let count = |script: &str| {
        std::fs::write(dir.join("victim"), "x").unwrap();
        let _ = std::fs::remove_file(dir.join("created"));
        let out = run(utap(script, &["-g", "-v", "-c", &cmd]));
        assert_eq!(out.status, 0, "{}", out.stderr);
        stops(&out.stderr)
    };
    let watching = count("probe syscall.unlinkat { }");
    let skipping = count("probe syscall.unlinkat { $return = 0 }");
    assert!(dir.join("victim").exists());
    assert_eq!(skipping, watching);
    let _ = std::fs::remove_dir_all(&dir);
}
