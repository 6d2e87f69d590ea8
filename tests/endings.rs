//! How sessions end (issue 11, points 2 and 4): promptly at `-T`, `exit()`,
//! an error or a termination signal, SIGQUIT included; a command under the
//! seccomp filter keeps running unharmed after utap has returned; a handler
//! stuck in a loop still yields; SIGKILL of utap kills a `-c` command under
//! the seccomp filter and leaves one without it running untraced; and
//! nothing is lost silently: output write errors, a closed pipe, a large
//! end-of-session dump, bad option values.

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::*;

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("utap-endings-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs utap to its end; returns the outcome and how long utap took.
fn timed(cmd: std::process::Command) -> (Outcome, Duration) {
    let start = Instant::now();
    let out = run(cmd);
    (out, start.elapsed())
}

/// A probe on openat gives the command a seccomp filter: after utap has
/// returned, the command's later `cat` (openat) must still work.
fn filtered_command_outlives(name: &str, ending: &str, status: i32) {
    let dir = tempdir(name);
    let copy = dir.join("copy");
    let script = format!("probe syscall.openat {{ }} {ending} probe end {{ println(\"end\") }}");
    let cmd = format!(
        "exec sh -c 'sleep 3; cat /etc/hostname > {}' >/dev/null 2>&1",
        copy.display()
    );
    let (out, took) = timed(utap(&script, &["-T", "0.3", "-c", &cmd]));
    // After an error, the error probes run instead of the end probes.
    let expected = if status == 0 { "end\n" } else { "" };
    assert_eq!(out.stdout, expected);
    assert_eq!(out.status, status, "{out:?}");
    // Before: utap waited for the command (3 s and more).
    assert!(took < Duration::from_secs(2), "utap took {took:?}");
    wait_until("the command's copy", || {
        std::fs::read(&copy).is_ok_and(|c| !c.is_empty())
    });
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read("/etc/hostname").unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn time_limit_returns_at_once_and_the_filtered_command_runs_on() {
    filtered_command_outlives("limit", "", 0);
}

#[test]
fn exit_returns_at_once_and_the_filtered_command_runs_on() {
    filtered_command_outlives("exit", "probe timer.ms(100) { exit() }", 0);
}

#[test]
fn an_error_returns_at_once_and_the_filtered_command_runs_on() {
    filtered_command_outlives("error", "probe timer.ms(100) { error(\"boom\") }", 1);
}

/// Says when it is attached, runs until a signal, says "end".
const UNTIL_SIGNAL: &str = r#"
probe process.begin { println("attached") }
probe process.syscall { }
probe timer.s(30) { println("timeout"); exit() }
probe end { println("end") }
"#;

#[test]
fn sigquit_runs_the_end_probes_and_lets_the_process_go() {
    let sleeper = Running::ready("sleeper", &["2"]);
    let live = Live::spawn(utap(UNTIL_SIGNAL, &["-x", &sleeper.pid().to_string()]));
    assert_eq!(live.line(), "attached");
    signal(live.pid(), libc::SIGQUIT);
    let out = live.finish();
    assert_eq!(out.stdout, "end\n");
    assert_eq!(out.stderr, "");
    assert_eq!(out.status, 0);
    assert_running_untraced(sleeper.pid());
}

/// Starts `script` on the sleeper fixture (2 threads) with `-c`, kills
/// utap with SIGKILL once the command runs; the command's pid.
fn sigkill_utap_under(script: &str) -> i32 {
    let script = format!(
        "{script} probe process.begin {{ if (pid() == target()) printf(\"target %d\\n\", target()) }}"
    );
    let cmd = format!("exec {} 2 >/dev/null 2>&1", fixture("sleeper"));
    let live = Live::spawn(utap(&script, &["-c", &cmd]));
    let line = live.line();
    let pid: i32 = line.strip_prefix("target ").unwrap().parse().unwrap();
    wait_until("the command's threads", || threads(pid).len() == 3);
    signal(live.pid(), libc::SIGKILL);
    let out = live.finish();
    assert_eq!(out.status, 128 + libc::SIGKILL);
    pid
}

#[test]
fn sigkill_of_utap_kills_a_filtered_command_through_exitkill() {
    // A syscall probe: the command runs under the seccomp filter, which
    // would fail its calls with ENOSYS once untraced.
    let pid = sigkill_utap_under("probe syscall.openat { }");
    // The tracing process dies with utap (PR_SET_PDEATHSIG), and the kernel
    // kills a dead tracer's PTRACE_O_EXITKILL tracees.
    wait_until("the command to die", || matches!(state(pid), '?' | 'Z'));
}

#[test]
fn sigkill_of_utap_leaves_an_unfiltered_command_running_untraced() {
    // No syscall probe, no filter: nothing in the command needs utap, so
    // (CONTRACT.md) it runs on, as an attached process does. Before, its
    // PTRACE_O_EXITKILL had the kernel kill it with utap.
    let pid = sigkill_utap_under("");
    assert_settled_untraced(pid, " after kill -9 of utap");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(threads(pid).len(), 3, "the command lost threads");
    assert_running_untraced(pid);
    signal(pid, libc::SIGKILL);
}

/// A handler looping under a huge MAXACTION.
const LOOPING: &str = r#"
global i
probe process.begin { if (pid() == target()) println("looping") }
probe timer.ms(100) { while (1) i++ }
"#;

fn loop_yields(args: &[&str], sig: Option<i32>) {
    // Without a filter the command is let go at the end: bounded, so that
    // it does not outlive the test run.
    let cmd = format!("exec timeout 30 {} 1 >/dev/null 2>&1", fixture("sleeper"));
    let mut all = vec!["-D", "MAXACTION=1000000000000000", "-c", &cmd];
    all.extend_from_slice(args);
    let live = Live::spawn(utap(LOOPING, &all));
    assert_eq!(live.line(), "looping");
    std::thread::sleep(Duration::from_millis(400));
    let start = Instant::now();
    if let Some(sig) = sig {
        signal(live.pid(), sig);
    }
    let out = live.finish();
    assert!(start.elapsed() < Duration::from_secs(3), "{out:?}");
    assert!(
        out.stderr
            .starts_with("ERROR: interrupted near keyword 'while' at <input>:4:"),
        "{out:?}"
    );
    assert_eq!(out.status, 1);
}

#[test]
fn a_looping_handler_yields_to_sigint() {
    loop_yields(&[], Some(libc::SIGINT));
}

#[test]
fn a_looping_handler_yields_to_sigterm() {
    loop_yields(&[], Some(libc::SIGTERM));
}

#[test]
fn a_looping_handler_yields_to_the_time_limit() {
    loop_yields(&["-T", "0.6"], None);
}

#[test]
fn output_to_a_full_device_is_an_error() {
    let script = "probe begin { println(\"hello\") exit() }";
    let out = run(utap(script, &["-o", "/dev/full"]));
    assert_eq!(
        out.stderr,
        "ERROR: cannot write the output: No space left on device\n"
    );
    assert_eq!(out.status, 1);
    // stdout itself on /dev/full, in a process session too.
    let mut cmd = utap(
        "probe process.begin { println(\"hello\") }",
        &["-c", "true"],
    );
    cmd.stdout(File::create("/dev/full").unwrap());
    let child = cmd.spawn().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "ERROR: cannot write the output: No space left on device\n"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// `utap ... | head -1`: once the reader has gone, utap ends quietly (dies
/// of SIGPIPE, as other Unix tools do), whether or not it traces.
fn reader_goes_away(args: &[&str], script: &str) {
    let mut cmd = utap(script, args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "x\n");
    drop(out);
    let err = child.stderr.take().unwrap();
    let status = wait_within_limit(&mut child);
    use std::io::Read;
    let mut text = String::new();
    BufReader::new(err).read_to_string(&mut text).unwrap();
    assert_eq!(text, "");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGPIPE));
}

#[test]
fn a_closed_output_pipe_ends_the_session_quietly() {
    reader_goes_away(&[], "probe timer.ms(1) { println(\"x\") }");
    let cmd = format!("exec timeout 30 {} 1 >/dev/null 2>&1", fixture("sleeper"));
    reader_goes_away(&["-c", &cmd], "probe timer.ms(1) { println(\"x\") }");
}

/// 200,000 autoprinted entries (≈3.6 MB) through a 1 MB buffer: written
/// whole at the end, not dropped.
fn large_dump(args: &[&str]) {
    let script = "global a probe begin { for (i = 0; i < 200000; i++) a[i] = i exit() }";
    let mut all = vec![
        "-s",
        "1",
        "-D",
        "MAXMAPENTRIES=300000",
        "-D",
        "MAXACTION=10000000",
        "-D",
        "MAXACTION_INTERRUPTIBLE=10000000",
    ];
    all.extend_from_slice(args);
    let out = run(utap(script, &all));
    assert_eq!(out.stderr, "");
    assert_eq!(out.status, 0);
    assert_eq!(out.stdout.lines().count(), 200_000);
    assert!(out.stdout.starts_with("a[199999]=0x30d3f\n"));
    assert!(out.stdout.ends_with("a[0]=0x0\n"));
}

#[test]
fn a_large_end_of_session_dump_is_written_whole() {
    large_dump(&[]);
    large_dump(&["-c", "true"]);
}

#[test]
fn bad_time_limits_are_usage_errors() {
    for v in ["-1", "nan", "inf", "1e300", "x"] {
        let out = run(utap("probe begin { exit() }", &["-T", v]));
        assert_eq!(out.status, 1, "-T {v}: {out:?}");
        assert!(
            out.stderr
                .contains("expected a number of seconds from 0 to 4294967295"),
            "-T {v}: {out:?}"
        );
        assert!(!out.stderr.contains("panicked"));
    }
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let out = run(utap("probe begin { exit() }", &["--no-such-option"]));
    assert_eq!(out.status, 1, "{out:?}");
    let mut help = command(utap_bin());
    help.arg("--help");
    assert_eq!(run(help).status, 0);
}

/// `-T` behind 200 busy threads: the clock starts once every thread is
/// attached (as SystemTap's starts with its module running), so the session
/// really traced for its time (before, attaching under load could eat the
/// whole limit and the syscall probe never fired); the end probe ran; and
/// afterwards every thread runs untraced, none stopped.
/// A process that dies of SIGSEGV while it is still making threads ends
/// the session: a new thread the tracer has not heard of yet (its
/// creator's clone report never comes) stops at its exit event, and is
/// let go there instead of being kept for the leader's death, which the
/// kernel reports only after that thread is gone. (5 of 20 runs hung.)
#[test]
fn a_process_that_crashes_while_making_threads_ends_the_session() {
    let crash = fixture("threadcrash");
    for _ in 0..20 {
        let o = run(utap("probe syscall.getppid { next }", &["-c", &crash]));
        assert_eq!(o.status, 0, "{}", o.stderr);
    }
}

#[test]
fn time_limit_behind_busy_threads_traces_then_lets_every_thread_go() {
    let target = Running::ready("busy", &["200", "1000"]);
    let pid = target.pid();
    let script = r#"
global n
probe process.syscall { n++ }
probe end { println(n > 0 ? "traced" : "nothing traced") }
"#;
    let out = run(utap(script, &["-T", "0.5", "-x", &pid.to_string()]));
    assert_eq!(out.stdout, "traced\n", "{out:?}");
    assert_eq!(out.status, 0, "{out:?}");
    // The tracing process lets the threads go behind the verdict.
    wait_until("every thread untraced", || {
        threads(pid)
            .iter()
            .all(|&t| status_field(t, "TracerPid").as_deref() == Some("0"))
    });
    assert_running_untraced(pid);
}

/// The verdict goes to the shell while the tracing process still lets
/// 1,000 threads go (`UTAP_DETACH_BUDGET_MS=0`: at once). The shell's utap
/// then exits, and that must not kill the tracing process, whose first
/// thread holds a parent-death signal: the threads of the `-c` command
/// still attached would die with it (PTRACE_O_EXITKILL), or a park's
/// `jmp .` would stay in its code.
#[test]
fn the_command_outlives_a_verdict_sent_before_its_threads_are_let_go() {
    let script = r#"
global n
probe process.thread.begin { if (++n == 1000) exit() }
probe end { println(target()) }
"#;
    let cmd = format!("exec {} 1000 100000 >/dev/null 2>&1", fixture("busy"));
    let mut c = utap(script, &["-c", &cmd]);
    c.env("UTAP_DETACH_BUDGET_MS", "0");
    let out = run(c);
    assert_eq!(out.status, 0, "{out:?}");
    let pid: i32 = out.stdout.trim().parse().expect("the target's pid");
    assert_settled_untraced(pid, " once utap returned");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(threads(pid).len(), 1001, "the command died behind utap");
    signal(pid, libc::SIGKILL);
}

/// utap raises itself to nice -20 when allowed (runtime/src/priority.rs),
/// but the `-c` command runs at the caller's nice value.
#[test]
fn the_command_runs_at_the_callers_nice_value() {
    // SAFETY: getpriority has no memory effects.
    let ours = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let out = run(utap("probe begin { }", &["-c", "nice"]));
    assert_eq!(out.stdout, format!("{ours}\n"), "{out:?}");
    assert_eq!(out.status, 0, "{out:?}");
}

/// utap's status for `-c CMD` with `script` and `extra` options.
fn status_of(script: &str, extra: &[&str], cmd: &str) -> Outcome {
    let mut args = extra.to_vec();
    args.extend(["-c", cmd]);
    run(utap(script, &args))
}

#[test]
fn exit_status_gives_the_commands_status_and_the_default_stays_utaps() {
    // Without a filter, and with one (a syscall probe).
    for script in ["probe process.begin { }", "probe syscall.openat { }"] {
        let exits_3 = "sh -c 'exit 3'";
        let killed = "sh -c 'kill -TERM $$'";
        // SystemTap's default: utap's own status.
        assert_eq!(status_of(script, &[], exits_3).status, 0, "{script}");
        assert_eq!(status_of(script, &[], killed).status, 0, "{script}");
        let out = status_of(script, &["--exit-status"], exits_3);
        assert_eq!((out.status, out.stderr.as_str()), (3, ""), "{script}");
        // Killed by SIGTERM: 128 + 15, as a shell reports it.
        let out = status_of(script, &["--exit-status"], killed);
        assert_eq!((out.status, out.stderr.as_str()), (143, ""), "{script}");
        assert_eq!(status_of(script, &["--exit-status"], "true").status, 0);
    }
    // utap's own error still exits 1.
    let out = status_of(
        "probe process.end { error(\"boom\") }",
        &["--exit-status"],
        "sh -c 'exit 3'",
    );
    assert_eq!(out.status, 1, "{out:?}");
    // A session that ends first: the command's status is not known yet.
    let out = status_of(
        "probe timer.ms(100) { exit() }",
        &["--exit-status"],
        "sh -c 'sleep 1; exit 3'",
    );
    assert_eq!(out.status, 0, "{out:?}");
    // It is for -c.
    let out = run(utap("probe begin { exit() }", &["--exit-status"]));
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("-c <CMD>"), "{}", out.stderr);
}

/// Issue 29 point 2: a runtime error in a function probe's handler ends
/// the session while 8 threads hit the probe in a busy loop (reported:
/// 6 of 21 sessions under load never ended, threads left in `t` with the
/// int3 in place). Trials in a loop; every one must end with the error
/// and leave every thread running untraced.
#[test]
fn a_division_by_zero_in_a_function_probe_ends_the_session_every_time() {
    let script = r#"
global n, z
probe process.function("hot") { if (++n > 2000) println(1 / z) }
"#;
    let mut failed = Vec::new();
    for trial in 0..6 {
        let target = Running::ready("ufuncs", &["spin", "8"]);
        let pid = target.pid();
        let (out, took) = timed(utap(script, &["-x", &pid.to_string()]));
        let ended = out.status == 1 && out.stderr.starts_with("ERROR: division by 0");
        if !ended || took > Duration::from_secs(10) {
            failed.push(format!("trial {trial}: {took:?} {out:?}"));
        }
        assert_settled_untraced(pid, &format!(" after trial {trial}"));
    }
    assert!(
        failed.is_empty(),
        "{} of 6 trials failed: {failed:#?}",
        failed.len()
    );
}

/// Anonymous executable mappings of `pid` (our slot pages; the fixture
/// has none of its own).
fn anonymous_code(pid: i32) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 5 && f[1].contains('x')
        })
        .map(String::from)
        .collect()
}

/// Issue 29 point 2: SIGINT early in a `-c` session with a function
/// probe takes the slot page out of the program, which runs on (before:
/// left mapped in 9 of 80 trials, when the held thread was at its clone
/// event, where no syscall can be injected). The command's words run
/// without a shell, its output into utap's (a file here).
#[test]
fn sigint_early_in_a_command_session_unmaps_the_slot_page() {
    let script = r#"probe process.function("hot") { } probe process.begin { println("go") }"#;
    let dir = tempdir("slotpage");
    let mut left = Vec::new();
    for trial in 0..30u64 {
        let path = dir.join(format!("out{trial}"));
        let mut c = utap(script, &["-c", &format!("{} spin 2", fixture("ufuncs"))]);
        c.stdout(File::create(&path).unwrap()).stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        wait_until("go", || {
            std::fs::read_to_string(&path).is_ok_and(|s| s.contains("go"))
        });
        std::thread::sleep(Duration::from_millis(trial * 37 % 400));
        signal(child.id() as i32, libc::SIGINT);
        let status = wait_within_limit(&mut child);
        assert_eq!(status.code(), Some(0), "trial {trial}");
        let pid = program_pid(&path);
        assert_settled_untraced(pid, &format!(" after trial {trial}"));
        let code = anonymous_code(pid);
        if !code.is_empty() {
            left.push(format!("trial {trial}: {code:?}"));
        }
        signal(pid, libc::SIGKILL);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        left.is_empty(),
        "{} of 30 trials left a slot page: {left:#?}",
        left.len()
    );
}

/// The fixture's pid: the process of ours running `ufuncs spin 2` with
/// its stdout on `out`.
fn program_pid(out: &std::path::Path) -> i32 {
    let mut found = None;
    wait_until("the program", || {
        found = std::fs::read_dir("/proc").unwrap().find_map(|e| {
            let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let fd1 = std::fs::read_link(format!("/proc/{pid}/fd/1")).ok()?;
            (fd1 == out).then_some(pid)
        });
        found.is_some()
    });
    found.unwrap()
}

/// The processes whose environment holds `marker` (a utap session's, and
/// what it started): pid, state letter and whether it runs utap's binary.
fn marked(marker: &str) -> Vec<(i32, char, bool)> {
    let utap = std::fs::canonicalize(utap_bin()).unwrap();
    let mut found = Vec::new();
    for pid in pids() {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == marker.as_bytes()) {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            let is_utap = exe.is_some_and(|e| e == utap);
            let states = threads(pid).into_iter().map(state).collect::<Vec<_>>();
            let st = states
                .iter()
                .copied()
                .find(|s| matches!(s, 't' | 'T'))
                .unwrap_or_else(|| state(pid));
            if st != 'Z' && st != '?' {
                found.push((pid, st, is_utap));
            }
        }
    }
    found
}

/// What a SIGKILL of the foreground `delay` into a session left 2 s later
/// (utap processes, stopped processes): "" when nothing.
fn left_by_a_foreground_kill(
    mut cmd: std::process::Command,
    marker: &str,
    delay: Duration,
) -> String {
    cmd.env("UTAP_TRIAL", &marker["UTAP_TRIAL=".len()..]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut fg = cmd.spawn().expect("spawn utap");
    std::thread::sleep(delay);
    let _ = fg.kill();
    let _ = fg.wait();
    let start = Instant::now();
    let mut left = marked(marker);
    while start.elapsed() < Duration::from_secs(2) {
        left = marked(marker);
        if left
            .iter()
            .all(|&(_, st, utap)| !utap && st != 't' && st != 'T')
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let bad: Vec<_> = left
        .iter()
        .filter(|&&(_, st, utap)| utap || st == 't' || st == 'T')
        .collect();
    // The command runs on when it had no filter: not this test's business.
    for &(pid, _, _) in &left {
        // SAFETY: kill(2) has no memory effects.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    if bad.is_empty() {
        String::new()
    } else {
        format!("{bad:?} (pid, state, is utap)")
    }
}

/// Issue 29, point 2: the foreground's `kill -9` at any moment (compiling,
/// attaching, spawning the command, tracing) ends the tracing process, and
/// leaves no process stopped. Before, the command's child stopped before
/// its exec stayed in `T` when the tracing process died before seizing it.
#[test]
fn sigkill_of_the_foreground_at_any_moment_of_a_command_session_leaves_nothing() {
    let mut delays = Delays::new();
    let seed = delays.0;
    let mut failures = Vec::new();
    for trial in 0..20 {
        let delay = delays.next(400);
        let marker = format!("UTAP_TRIAL={}-c{trial}", std::process::id());
        let script = if trial % 2 == 0 {
            "probe syscall.openat { }"
        } else {
            "probe process.begin { }"
        };
        let cmd = utap(script, &["-c", "sleep 30"]);
        let left = left_by_a_foreground_kill(cmd, &marker, delay);
        if !left.is_empty() {
            failures.push(format!("trial {trial} at {delay:?}: {left}"));
        }
    }
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
}

#[test]
fn sigkill_of_the_foreground_at_any_moment_of_an_attach_leaves_the_program_running() {
    let mut delays = Delays::new();
    let seed = delays.0;
    let mut failures = Vec::new();
    for trial in 0..20 {
        let delay = delays.next(400);
        let mut program = Running::ready("churn", &["4"]);
        let marker = format!("UTAP_TRIAL={}-x{trial}", std::process::id());
        let pid = program.pid().to_string();
        let cmd = utap("probe syscall.getppid { }", &["-x", &pid]);
        let left = left_by_a_foreground_kill(cmd, &marker, delay);
        if !left.is_empty() {
            failures.push(format!("trial {trial} at {delay:?}: {left}"));
        }
        assert_settled_untraced(
            program.pid(),
            &format!(" (trial {trial} at {delay:?}, seed {seed})"),
        );
        assert_eq!(program.exited(), None, "the program died (trial {trial})");
    }
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
}

/// Issue 29, point 2: SIGINT ends a `-x` session on a program keeping a
/// thousand threads alive and making more, promptly (was 3.3–43 s, once
/// over 60 s), leaving every thread running untraced. Measured here on 2
/// CPUs: utap ends 0.1–0.2 s after the signal and the last thread is let go
/// within 0.5 s; the bounds (5 s each) leave room for a loaded CI machine;
/// tests/bench/crowd.sh measures the figure (goal: under 1 s).
///
/// The checks run at nice -20 when allowed: once let go, the crowd's
/// thousand runnable threads leave a nice-0 reader of their thousand
/// /proc status files a thousandth of a CPU, and the check alone took
/// ~55 s (the test ~64 s) although utap had let every thread go at once.
#[test]
fn sigint_ends_a_session_on_a_crowd_of_threads_promptly() {
    let mut program = Running::ready("crowd", &["1000"]);
    let pid = program.pid();
    let script = r#"
        global n
        probe begin { println("attached") }
        probe syscall.getppid { n++ }
        probe end { println(n > 0 ? "counted" : "none") }
    "#;
    let live = Live::spawn(utap(script, &["-x", &pid.to_string()]));
    // The attach to a thousand threads making more took 0.3 to 43 s on
    // this VM (2026-12-07, this head and the one before alike): it is not
    // what this test measures, so it gets longer than LIMIT.
    assert_eq!(live.line_within(Duration::from_secs(120)), "attached");
    let raised = raise_this_thread();
    std::thread::sleep(Duration::from_secs(1));
    let start = Instant::now();
    signal(live.pid(), libc::SIGINT);
    let out = live.finish();
    let took = start.elapsed();
    assert_eq!(out.stdout, "counted\n", "{out:?}");
    assert_eq!(out.status, 0, "{out:?}");
    assert_settled_untraced(pid, " after SIGINT");
    let untraced = start.elapsed();
    eprintln!("utap ended {took:?} after SIGINT, every thread untraced {untraced:?} after it");
    assert!(took < Duration::from_secs(5), "utap took {took:?} to end");
    if raised {
        assert!(
            untraced < Duration::from_secs(5),
            "threads let go {untraced:?} after SIGINT"
        );
    }
    assert!(threads(pid).len() > 1000, "the crowd thinned");
    assert_eq!(program.exited(), None, "the program died");
}

/// Puts the calling thread at nice -20 if allowed (root, or an
/// RLIMIT_NICE that allows it); whether it did.
fn raise_this_thread() -> bool {
    // SAFETY: setpriority on the calling thread only.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -20) == 0 }
}

/// Issue 29, point 2: a shell starts a background command with SIGINT
/// ignored (`utap ... &` in a script). utap's handlers replace that once
/// installed, but a SIGINT between `main` and them (the split, compiling:
/// tenths of a second under load) was dropped, and the session then ran
/// until its command ended (tests/bench/crowd.sh hung). Now a SIGINT at
/// any moment after `main` starts ends utap: killed by it before the
/// handlers, the session ended by it after. A SIGINT before `main` (the
/// dynamic loader) is dropped for any program started so: not tested.
#[test]
fn early_sigint_is_not_lost_when_started_with_sigint_ignored() {
    use std::os::unix::process::CommandExt;
    let mut delays = Delays::new();
    let seed = delays.0;
    let dir = tempdir("ignored");
    let mut lost = Vec::new();
    for trial in 0..20 {
        let err = dir.join(format!("err{trial}"));
        let mut c = utap("probe process.begin { }", &["-c", "sleep 30"]);
        c.env("UTAP_END_TRACE", "1")
            .stdout(Stdio::null())
            .stderr(File::create(&err).unwrap());
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            c.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = c.spawn().unwrap();
        wait_until("utap's main", || {
            std::fs::read_to_string(&err).is_ok_and(|s| s.contains("utap started"))
        });
        // 0–400 ms, every other one within the first 40 ms: compiling
        // (where the signal was lost) takes about 20 ms on an idle machine.
        let delay = delays.next(if trial % 2 == 0 { 40 } else { 400 });
        std::thread::sleep(delay);
        signal(child.id() as i32, libc::SIGINT);
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
            lost.push(format!("trial {trial}: SIGINT {delay:?} after main"));
        }
        let _ = child.wait();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        lost.is_empty(),
        "seed {seed}: {} of 20 lost: {lost:#?}",
        lost.len()
    );
}

/// A command keeps the signals utap was started with ignored, as it would
/// untraced (and under strace): a shell's background job has SIGINT and
/// SIGQUIT ignored, and utap's own handlers, which exec resets to the
/// default, made them deadly to the command before.
#[test]
fn the_command_keeps_the_signals_utap_was_started_with_ignored() {
    use std::os::unix::process::CommandExt;
    let ignored = |c: &mut std::process::Command| {
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            c.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGQUIT, libc::SIG_IGN);
                Ok(())
            });
        }
    };
    let show = "grep SigIgn /proc/self/status";
    let mut c = utap("probe syscall.openat { }", &["-c", show]);
    ignored(&mut c);
    let traced = run(c);
    assert_eq!(traced.status, 0, "{}", traced.stderr);
    let mut c = command("grep");
    c.args(["SigIgn", "/proc/self/status"]);
    ignored(&mut c);
    let untraced = run(c);
    // SIGINT (bit 1) and SIGQUIT (bit 2) among them.
    let set = u64::from_str_radix(untraced.stdout.trim_start_matches("SigIgn:").trim(), 16);
    assert_eq!(set.map(|s| s & 6), Ok(6), "{}", untraced.stdout);
    assert_eq!(traced.stdout, untraced.stdout);
}
