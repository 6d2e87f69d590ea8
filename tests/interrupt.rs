//! SIGINT and SIGTERM to utap while it traces a `-c` command.
//!
//! A command started under the seccomp filter (the script's syscall
//! probes name their syscalls) cannot run untraced: every call the filter
//! traps would fail with ENOSYS. So utap kills it, as strace's
//! `--seccomp-bpf` does, then runs the end probes. Without a filter (a
//! script with no syscall probe) the command is detached and goes on
//! untraced, and works.
//! Either way utap ends with status 0 after its end probes, as SystemTap
//! does on Ctrl-C.

mod support;

use support::*;

/// `filtered`: probe a syscall (seccomp filter) or no syscall at all (no
/// filter; a probe on every syscall also gets a filter).
fn script(filtered: bool) -> String {
    let probe = if filtered {
        "syscall.openat"
    } else {
        "process.thread.begin"
    };
    format!(
        r#"
global n
probe process.begin {{ if (pid() == target()) printf("target %d\n", target()) }}
probe {probe} {{ n++ }}
probe timer.s(30) {{ println("timeout"); exit() }}
probe end {{ println(n >= 0 ? "end" : "") }}
"#
    )
}

/// Runs the sleeper under `-c`, signals utap once the sleeper is running;
/// returns the sleeper's pid.
fn interrupt(filtered: bool, sig: i32) -> i32 {
    // Its output must not hold utap's pipes open after utap ends.
    let cmd = format!("exec {} 2 >/dev/null 2>&1", fixture("sleeper"));
    let live = Live::spawn(utap(&script(filtered), &["-c", &cmd]));
    let line = live.line();
    let pid: i32 = line
        .strip_prefix("target ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected line {line:?}"));
    // The sleeper has started its threads.
    wait_until("the sleeper's threads", || threads(pid).len() == 3);
    signal(live.pid(), sig);
    let out = live.finish();
    assert_eq!(out.stdout, "end\n");
    assert_eq!(out.stderr, "");
    assert_eq!(out.status, 0);
    pid
}

/// Dead: gone, or a zombie nobody has reaped yet.
fn assert_killed(pid: i32) {
    wait_until("the command to die", || matches!(state(pid), '?' | 'Z'));
}

#[test]
fn sigint_kills_a_command_under_the_seccomp_filter() {
    assert_killed(interrupt(true, libc::SIGINT));
}

#[test]
fn sigterm_kills_a_command_under_the_seccomp_filter() {
    assert_killed(interrupt(true, libc::SIGTERM));
}

fn leaves_running(sig: i32) {
    let pid = interrupt(false, sig);
    assert_running_untraced(pid);
    // Still working: its threads sleep in usleep, they do not spin on
    // failing syscalls.
    assert_idle(pid);
    signal(pid, libc::SIGKILL);
}

#[test]
fn sigint_leaves_an_unfiltered_command_running_untraced() {
    leaves_running(libc::SIGINT);
}

#[test]
fn sigterm_leaves_an_unfiltered_command_running_untraced() {
    leaves_running(libc::SIGTERM);
}

/// Ctrl-C while the script still compiles (in the tracing process, which
/// catches no signal yet) ends utap as it ends any program: killed by
/// SIGINT, with nothing printed, and no process of it left holding the
/// pipes (`finish` reads them to their end).
#[test]
fn sigint_while_compiling_ends_utap_quietly() {
    // About a second of compiling on this VM.
    let script: String = (0..100)
        .map(|i| format!("probe syscall.*.return {{ if (retval == {i}) println(name, argstr) }}\n"))
        .collect();
    let live = Live::spawn(utap(&script, &["-c", "true"]));
    std::thread::sleep(std::time::Duration::from_millis(100));
    signal(live.pid(), libc::SIGINT);
    let out = live.finish();
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, "");
    assert_eq!(out.status, 128 + libc::SIGINT);
}
