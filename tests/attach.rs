//! `-x PID` on a running multi-threaded program (the `sleeper` fixture):
//! probes fire, process.begin and thread.begin are reported for what
//! already runs, and however the session ends (exit(), SIGINT, SIGTERM)
//! the program goes on running, not stopped and not traced. Attaching to
//! a process that is traced already fails with the EPERM message.

mod support;

use std::io::Write;
use std::process::Stdio;

use support::*;

/// Counts what fires; ends after 300 ms.
const COUNTING: &str = r#"
global begins, threads, syscalls
probe process.begin { if (pid() == target()) begins++ }
probe process.thread.begin { if (pid() == target() && tid() != pid()) threads++ }
probe process.syscall { if (pid() == target()) syscalls++ }
probe timer.ms(300) { exit() }
probe end { printf("begin=%d thread.begin=%d syscalls>0=%d\n", begins, threads, syscalls > 0) }
"#;

#[test]
fn attach_then_exit_leaves_the_program_running_untraced() {
    let sleeper = Running::ready("sleeper", &["3"]);
    let pid = sleeper.pid().to_string();
    let out = finish(utap(COUNTING, &["-x", &pid]).spawn().unwrap());
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, "begin=1 thread.begin=3 syscalls>0=1\n");
    assert_eq!(out.status, 0);
    assert_eq!(threads(sleeper.pid()).len(), 4);
    assert_running_untraced(sleeper.pid());
}

/// Says when it is attached, runs until a signal, says "end".
const UNTIL_SIGNAL: &str = r#"
global syscalls
probe process.begin { println("attached") }
probe process.syscall { if (!syscalls++) println("traced") }
probe timer.s(30) { println("timeout"); exit() }
probe end { printf("end syscalls>0=%d\n", syscalls > 0) }
"#;

fn signal_mid_trace(sig: i32) {
    let sleeper = Running::ready("sleeper", &["2"]);
    let live = Live::spawn(utap(UNTIL_SIGNAL, &["-x", &sleeper.pid().to_string()]));
    assert_eq!(live.line(), "attached");
    // A syscall of the sleeping threads is traced (a fixed wait was too
    // short on a loaded machine: nothing traced yet at the signal).
    assert_eq!(live.line(), "traced");
    // The tracer is utap's tracing process (see utap_runtime::host).
    for tid in threads(sleeper.pid()) {
        let tracer: i32 = status_field(tid, "TracerPid").unwrap().parse().unwrap();
        assert_eq!(status_field(tracer, "PPid"), Some(live.pid().to_string()));
    }
    signal(live.pid(), sig);
    let out = live.finish();
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, "end syscalls>0=1\n");
    assert_eq!(out.status, 0);
    assert_running_untraced(sleeper.pid());
}

#[test]
fn sigint_mid_trace_detaches_and_runs_end_probes() {
    signal_mid_trace(libc::SIGINT);
}

#[test]
fn sigterm_mid_trace_detaches_and_runs_end_probes() {
    signal_mid_trace(libc::SIGTERM);
}

#[test]
fn attaching_to_a_traced_process_fails_with_eperm() {
    let sleeper = Running::ready("sleeper", &["1"]);
    let pid = sleeper.pid();
    // Another tracer (this test thread) holds it; PTRACE_SEIZE does not
    // stop it.
    // SAFETY: ptrace on our own child; no memory is passed.
    let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) };
    assert_eq!(seized, 0, "{}", std::io::Error::last_os_error());
    let out = finish(utap(COUNTING, &["-x", &pid.to_string()]).spawn().unwrap());
    // Yama is named only where the kernel has it.
    let why = if std::path::Path::new("/proc/sys/kernel/yama").exists() {
        "it is traced already, belongs to another user, or kernel.yama.ptrace_scope forbids it"
    } else {
        "it is traced already, or belongs to another user"
    };
    assert_eq!(
        out.stderr,
        format!("utap: cannot attach to process {pid}: operation not permitted ({why})\n")
    );
    assert_eq!(out.stdout, "");
    assert_eq!(out.status, 1);
    // Still ours, and never stopped by utap.
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    assert_eq!(status_field(pid, "TracerPid"), Some(me.to_string()));
    for tid in threads(pid) {
        assert!(!matches!(state(tid), 't' | 'T'), "thread {tid} stopped");
    }
}

#[test]
fn attaching_to_no_such_pid_fails() {
    // Pid numbers above pid_max never exist.
    let out = finish(utap(COUNTING, &["-x", "2147483600"]).spawn().unwrap());
    assert_eq!(
        out.stderr,
        "utap: cannot attach to process 2147483600: no such process\n"
    );
    assert_eq!(out.status, 1);
}

/// `process(PID)` limits a probe to one process: a shell that runs two
/// `true`s after utap attached; every process's syscalls reach the
/// unqualified probe, only the shell's the qualified one.
#[test]
fn pid_qualifier_limits_a_probe_to_one_process() {
    let mut sh = command("/bin/sh");
    sh.stdin(Stdio::piped()).stdout(Stdio::null());
    let mut sh = sh.spawn().unwrap();
    let pid = sh.id().to_string();
    let script = r#"
global all, mine
probe process.begin { if (pid() == target()) println("attached") }
probe process.syscall { all[pid()] = execname() }
probe process($1).syscall { mine[pid()] = execname() }
probe end
{
	foreach (p in all) every[all[p]]++
	foreach (p in mine) limited[mine[p]]++
	foreach (n+ in every) printf("every: %s x%d\n", n, every[n])
	foreach (n+ in limited) printf("process(PID): %s x%d\n", n, limited[n])
}
global every, limited
"#;
    let mut cmd = utap(script, &["-x", &pid]);
    cmd.arg(&pid);
    let live = Live::spawn(cmd);
    assert_eq!(live.line(), "attached");
    let mut stdin = sh.stdin.take().unwrap();
    stdin.write_all(b"/bin/true\n/bin/true\nexit 0\n").unwrap();
    drop(stdin);
    let out = live.finish();
    let _ = sh.wait();
    assert_eq!(out.stderr, "");
    assert_eq!(
        out.stdout,
        "every: sh x1\nevery: true x2\nprocess(PID): sh x1\n"
    );
}
