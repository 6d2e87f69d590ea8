//! Syscall entry probes served by seccomp user notification instead of a
//! ptrace stop (issue 16 point 3, `utap_runtime::session::notify`): counts
//! by name equal `strace -f -c`'s exactly, one thread and eight, with the
//! command's one listener or a listener per busy thread; a handler
//! that needs registers keeps the ptrace route and still counts exactly;
//! `-v` says which route served the entries; `exit()` in a notified
//! handler, `-T` and SIGINT leave no thread of the command waiting.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::*;

/// `strace -f -c` of CMD's words (as utap's `-c` runs them): calls per
/// syscall name.
fn strace_counts(cmd: &str) -> BTreeMap<String, u64> {
    // Tests run in parallel in this one process: a file per run.
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run_no = RUNS.fetch_add(1, Ordering::SeqCst);
    let file =
        std::env::temp_dir().join(format!("utap-notify-{}-{run_no}.txt", std::process::id()));
    let mut c = command("strace");
    c.args(["-f", "-qq", "-c", "-o"]).arg(&file);
    c.args(cmd.split_whitespace());
    let out = run(c);
    assert!(out.stderr.is_empty(), "strace failed: {}", out.stderr);
    let table = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    strace_c_counts(&table)
}

const COUNT: &str = r#"
global n
probe process.syscall { n[syscall_name($syscall)]++ }
probe end { foreach (s+ in n) printf("%s %d\n", s, n[s]) }
"#;

/// Counts with registers read in the handler: not stopless, so ptrace.
const COUNT_WITH_REGISTERS: &str = r#"
global n
probe process.syscall { if (u_register("rip") != 0) n[syscall_name($syscall)]++ }
probe end { foreach (s+ in n) printf("%s %d\n", s, n[s]) }
"#;

/// Runs `script -v -c cmd`; its counts and its stderr.
fn utap_counts(script: &str, cmd: &str) -> (BTreeMap<String, u64>, String) {
    utap_counts_with(script, cmd, &[])
}

/// [`utap_counts`] with environment variables set.
fn utap_counts_with(
    script: &str,
    cmd: &str,
    env: &[(&str, &str)],
) -> (BTreeMap<String, u64>, String) {
    let mut c = utap(script, &["-v", "-c", cmd]);
    // The notification route is what these tests check: the data plane
    // would take these handlers into the program.
    c.env("UTAP_INPROC", "0");
    c.envs(env.iter().copied());
    let out = finish(c.spawn().unwrap());
    assert_eq!(out.status, 0, "utap failed: {}", out.stderr);
    let mut counts: BTreeMap<String, u64> = out
        .stdout
        .lines()
        .map(|l| {
            let (name, n) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            (name.to_string(), n.parse().unwrap())
        })
        .collect();
    // Never returning: strace -c tallies calls as they finish.
    counts.remove("exit");
    counts.remove("exit_group");
    (counts, out.stderr)
}

/// How many listeners `-v` says the servers served.
fn listeners(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        l.strip_prefix("utap: ")?
            .split_once(" seccomp listener(s) served by ")?
            .0
            .parse()
            .ok()
    })
}

/// The number of entries `-v` says the notification route served.
fn notified(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        l.strip_prefix("utap: ")?
            .strip_suffix(" syscall entries served by seccomp notification (no ptrace stop)")?
            .parse()
            .ok()
    })
}

/// With the command's one listener (`UTAP_THREAD_LISTENERS=0`), every
/// entry from the first is notified.
#[test]
fn entry_counts_served_by_notification_equal_strace_c() {
    if !strace_available() {
        return;
    }
    let cmd = fixture("syscalls");
    let (ours, stderr) = utap_counts_with(COUNT, &cmd, &[("UTAP_THREAD_LISTENERS", "0")]);
    assert!(
        stderr.contains("seccomp user notification serves the entries of"),
        "{stderr}"
    );
    let total: u64 = ours.values().sum::<u64>();
    // Every entry but execve's (always a ptrace stop) came notified; exit
    // and exit_group too (removed from `ours` above).
    let served = notified(&stderr).unwrap_or_else(|| panic!("no count in {stderr}"));
    assert!(
        served >= total - ours.get("execve").copied().unwrap_or(0),
        "{served} of {total}: {stderr}"
    );
    assert!(ptrace_stops(&stderr) < 10, "{stderr}");
    assert_eq!(ours, strace_counts(&cmd));
}

#[test]
fn eight_threads_counts_served_by_notification_equal_strace_c() {
    if !strace_available() {
        return;
    }
    let cmd = format!("{} 8 3000", fixture("mtsys"));
    let (mut ours, stderr) = utap_counts(COUNT, &cmd);
    // Each thread has its own listener from its 64th call on.
    assert_eq!(listeners(&stderr), Some(8), "{stderr}");
    assert!(
        notified(&stderr).is_some_and(|n| n > 8 * (3000 - 64)),
        "{stderr}"
    );
    let mut theirs = strace_counts(&cmd);
    // The threads' calls, nothing else (-c runs mtsys itself).
    assert_eq!(ours["getppid"], 8 * 3000, "{ours:?}");
    // How often the threads meet in futex waits (the barrier, the joins)
    // depends on the scheduling of each run, traced or not.
    ours.remove("futex");
    theirs.remove("futex");
    assert_eq!(ours, theirs);
}

/// A single-threaded program: its first 4,096 entries stop in ptrace, the
/// rest are notified to the listener it then gets; the counts are exact
/// across the change.
#[test]
fn a_main_thread_gets_its_listener_at_its_4096th_stop() {
    if !strace_available() {
        return;
    }
    let cmd = format!("{} 10000", fixture("loop"));
    let (ours, stderr) = utap_counts(COUNT, &cmd);
    let total: u64 = ours.values().sum();
    assert_eq!(listeners(&stderr), Some(1), "{stderr}");
    let served = notified(&stderr).unwrap_or_else(|| panic!("no count in {stderr}"));
    assert!(
        served > total - 4096 - 10 && served < total - 4000,
        "{served} of {total}: {stderr}"
    );
    assert_eq!(ours, strace_counts(&cmd));
}

/// Threads created by a thread that has its listener inherit its filter,
/// and with it that listener (the kernel gives them no other): one
/// listener serves all, and every call is counted once.
#[test]
fn threads_created_after_their_creator_has_a_listener_share_it() {
    if !strace_available() {
        return;
    }
    let cmd = format!("{} 3 2000 5000", fixture("mtsys"));
    let (mut ours, stderr) = utap_counts(COUNT, &cmd);
    assert_eq!(listeners(&stderr), Some(1), "{stderr}");
    assert_eq!(ours["getppid"], 3 * 2000 + 5000, "{ours:?}");
    let mut theirs = strace_counts(&cmd);
    ours.remove("futex");
    theirs.remove("futex");
    assert_eq!(ours, theirs);
}

#[test]
fn a_handler_reading_registers_keeps_ptrace_stops_and_counts_exactly() {
    if !strace_available() {
        return;
    }
    let cmd = fixture("syscalls");
    let (ours, stderr) = utap_counts(COUNT_WITH_REGISTERS, &cmd);
    assert!(
        !stderr.contains("seccomp user notification"),
        "notified although the handler reads registers: {stderr}"
    );
    let total: u64 = ours.values().sum();
    assert!(ptrace_stops(&stderr) >= total, "{stderr}");
    assert_eq!(ours, strace_counts(&cmd));
}

#[test]
fn utap_notify_0_keeps_the_ptrace_route() {
    let cmd = format!("{} 1 500", fixture("mtsys"));
    let mut c = utap(COUNT, &["-v", "-c", &cmd]);
    c.env("UTAP_NOTIFY", "0").env("UTAP_INPROC", "0");
    let out = finish(c.spawn().unwrap());
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(notified(&out.stderr).is_none(), "{}", out.stderr);
    // The thread's 500 calls.
    assert!(out.stdout.contains("getppid 500\n"), "{}", out.stdout);
    assert!(ptrace_stops(&out.stderr) > 500, "{}", out.stderr);
}

/// A file the command writes when it has run to completion.
fn done_marker(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("utap-notify-{name}-{}", std::process::id()))
}

fn wait_for_file(path: &std::path::Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.ends_with('\n') {
                let _ = std::fs::remove_file(path);
                return s;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the command did not finish: a thread left waiting?"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn exit_in_a_notified_handler_ends_the_script_and_the_command_runs_on() {
    let marker = done_marker("exit");
    let _ = std::fs::remove_file(&marker);
    let script = r#"
global n
probe syscall.getppid { if (++n == 1000) exit() }
probe end { printf("ended after %d\n", n) }
"#;
    let cmd = format!(
        "sh -c '{} 4 20000 && echo done > {}'",
        fixture("mtsys"),
        marker.display()
    );
    let out = finish(utap(script, &["-c", &cmd]).spawn().unwrap());
    assert_eq!(out.status, 0, "{}", out.stderr);
    // Other threads' getppid calls may be in the handler's queue when
    // exit() runs: none of them fires after it.
    assert_eq!(out.stdout, "ended after 1000\n");
    assert_eq!(wait_for_file(&marker), "done\n");
}

#[test]
fn time_limit_leaves_no_thread_waiting() {
    let marker = done_marker("limit");
    let _ = std::fs::remove_file(&marker);
    let cmd = format!(
        "sh -c '{} 2 400000 && echo done > {}'",
        fixture("mtsys"),
        marker.display()
    );
    let out = finish(utap(COUNT, &["-T", "0.3", "-c", &cmd]).spawn().unwrap());
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("getppid "), "{}", out.stdout);
    // The command goes on (shepherded) to its end.
    assert_eq!(wait_for_file(&marker), "done\n");
}

#[test]
fn sigint_ends_utap_and_leaves_no_thread_waiting() {
    let script = r#"
global n
probe syscall.getppid { if (++n == 100) println("started") }
probe end { println("end") }
"#;
    let cmd = format!("{} 2 100000000", fixture("mtsys"));
    let live = Live::spawn(utap(script, &["-c", &cmd]));
    assert_eq!(live.line(), "started");
    let mtsys = descendants_named(live.pid(), "mtsys");
    assert_eq!(mtsys.len(), 1, "{mtsys:?}");
    signal(live.pid(), libc::SIGINT);
    let out = live.finish();
    assert_eq!(out.stdout, "end\n", "{}", out.stderr);
    // Under a filter the command is killed with utap's end, as strace's
    // --seccomp-bpf does: gone, not left waiting for an answer.
    wait_until("the command to be gone", || {
        !std::path::Path::new(&format!("/proc/{}", mtsys[0])).exists() || state(mtsys[0]) == 'Z'
    });
}

/// Processes named `name` (comm) in the tree below `pid`.
fn descendants_named(pid: i32, name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(p) = parents.pop() {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            break;
        };
        for e in dir.flatten() {
            let Ok(child) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let Some((head, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let ppid: i32 = rest
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if ppid == p {
                parents.push(child);
                if head.ends_with(&format!("({name}")) {
                    found.push(child);
                }
            }
        }
    }
    found
}
