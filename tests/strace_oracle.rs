//! Oracle tests: utap against strace on the same deterministic fixture and
//! the same process tree (utap's `-c` runs CMD's words directly; so does
//! strace here).
//!
//! What is adapted, and only this (SystemTap's conventions where they
//! differ from strace's):
//! - return values in SystemTap's `retstr` form: a failure is `-2 (ENOENT)`
//!   where strace prints `-1 ENOENT (No such file or directory)` (done by
//!   `strace_compat::strace_line_to_systemtap`, whose docs list the rest);
//! - formatting: strace's `PID ` prefix (`-f -o`) and the spaces that
//!   align ` = ` are dropped; utap's lines start with the tid;
//! - pids: the fixture's pid appears in `getpid() = PID` and `kill(PID, 0)`
//!   and differs between the two runs, so it is replaced by `PID`;
//! - nothing about the command's own execve: as with SystemTap's `-c`
//!   (stapio forks the command, which execs with the probes armed), its
//!   entry and return are reported, as strace's are;
//! - counting by syscall entry: calls that never return (exit_group,
//!   exit) are not counted by `strace -c`, which tallies calls as they
//!   finish;
//! - not an adaptation but a race in the fixture: forker's parent waits for
//!   its first child while the second may exit, and the SIGCHLD then
//!   interrupts and restarts that wait4 (strace counts the restart as a
//!   call too), so wait4 is 2 or 3 in each run, compared as such.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use support::*;
use utap_runtime::syscalls::strace_compat::strace_line_to_systemtap;

/// The calls compared line by line.
const COMPARED: &[&str] = &[
    "openat", "close", "read", "write", "lseek", "getpid", "kill",
];

/// Runs `strace -f -qq OPTS -o FILE CMD` (CMD's words, as utap's `-c` runs
/// a command without shell syntax); returns FILE's text.
fn strace(opts: &[&str], cmd: &str) -> String {
    let dir = std::env::temp_dir().join(format!("utap-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let file = dir.join(format!("{}.txt", RUNS.fetch_add(1, Ordering::SeqCst)));
    let mut c = command("strace");
    c.args(["-f", "-qq"]).args(opts).arg("-o").arg(&file);
    c.args(cmd.split_whitespace());
    // Its status is the command's (forker exits 3).
    let out = run(c);
    assert!(out.stderr.is_empty(), "strace failed: {}", out.stderr);
    let text = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    text
}

/// `(pid, rest)` of a line that starts with a number.
fn split_pid(line: &str) -> Option<(&str, &str)> {
    let (pid, rest) = line.split_once(' ')?;
    pid.bytes()
        .all(|b| b.is_ascii_digit())
        .then_some((pid, rest.trim_start()))
}

/// The calls of the process that runs `program` (the first process in
/// the trace: both start with its exec of `program`), limited to
/// [`COMPARED`], with its pid
/// replaced by `PID`. `convert` turns a line (without the pid) into
/// `name(args) = retstr`.
fn calls_of_the_command(
    text: &str,
    program: &str,
    convert: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    let lines = text.lines().filter_map(split_pid);
    let pid = lines
        .clone()
        .next()
        .map(|(pid, _)| pid.to_string())
        .unwrap_or_else(|| panic!("no call of {program} in:\n{text}"));
    lines
        .filter(|(p, _)| *p == pid)
        .filter_map(|(_, rest)| convert(rest))
        .filter(|call| COMPARED.iter().any(|n| call.starts_with(&format!("{n}("))))
        .map(|call| pid_normalised(&call, &pid))
        .collect()
}

fn pid_normalised(call: &str, pid: &str) -> String {
    call.replace(&format!("= {pid}"), "= PID")
        .replace(&format!("({pid},"), "(PID,")
}

#[test]
fn strace_example_lines_equal_strace() {
    if !strace_available() {
        return;
    }
    let program = fixture("syscalls");
    let script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/strace.stp"))
            .unwrap();
    let ours = finish(utap(&script, &["-c", &program]).spawn().unwrap());
    assert_eq!(ours.status, 0, "utap failed: {}", ours.stderr);
    let theirs = strace(&[], &program);

    let utap_calls = calls_of_the_command(&ours.stdout, &program, |l| Some(l.to_string()));
    let strace_calls = calls_of_the_command(&theirs, &program, |l| {
        strace_line_to_systemtap(l).unwrap_or_else(|e| panic!("{e}"))
    });
    // The fixture's own calls must be there (not only the loader's).
    for expected in [
        "openat(AT_FDCWD, \"/nonexistent/utap-fixture\", O_RDONLY) = -2 (ENOENT)",
        "write(3, \"hello\\n\", 6) = 6",
        "close(-1) = -9 (EBADF)",
        "kill(PID, 0) = 0",
    ] {
        assert!(
            utap_calls.iter().any(|c| c == expected),
            "no {expected} in {utap_calls:#?}"
        );
    }
    assert_eq!(utap_calls, strace_calls);
}

/// `name count` per line from a counting script's output (the signals
/// fixture's own `usr1=3 usr2=1` line is not one).
fn utap_counts(out: &str) -> BTreeMap<String, u64> {
    out.lines()
        .filter(|l| !l.starts_with("usr1="))
        .map(|l| {
            let (name, n) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            (name.to_string(), n.parse().unwrap())
        })
        .collect()
}

const COUNT: &str = r#"
global n
probe process.syscall%s { n[syscall_name($syscall)]++ }
probe end { foreach (s+ in n) printf("%s %d\n", s, n[s]) }
"#;

fn counts(return_probe: bool, program: &str) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let script = COUNT.replacen("%s", if return_probe { ".return" } else { "" }, 1);
    let ours = finish(utap(&script, &["-c", program]).spawn().unwrap());
    assert!(ours.stderr.is_empty(), "utap failed: {}", ours.stderr);
    let mut ours = utap_counts(&ours.stdout);
    let mut theirs = strace_c_counts(&strace(&["-c"], program));
    if program.ends_with("/forker") {
        for counts in [&mut ours, &mut theirs] {
            let waits = counts.remove("wait4");
            assert!(
                matches!(waits, Some(2 | 3)),
                "wait4 {waits:?} in {counts:?}"
            );
        }
    }
    (ours, theirs)
}

#[test]
fn syscall_return_counts_equal_strace_c_over_a_process_tree() {
    if !strace_available() {
        return;
    }
    // forker: a parent that forks two children, one exec'ing.
    let (ours, theirs) = counts(true, &fixture("forker"));
    assert_eq!(ours.get("clone"), Some(&2), "{ours:?}");
    // The command's own execve and the child's exec of true.
    assert_eq!(ours.get("execve"), Some(&2), "{ours:?}");
    assert_eq!(ours, theirs);
}

#[test]
fn syscall_entry_counts_equal_strace_c_over_a_process_tree() {
    if !strace_available() {
        return;
    }
    let (mut ours, theirs) = counts(false, &fixture("forker"));
    // Never returning: counted at entry only. Three processes exit.
    assert_eq!(ours.remove("exit_group"), Some(3), "{ours:?}");
    assert_eq!(ours, theirs);
}

#[test]
fn syscall_counts_of_the_oracle_fixture_equal_strace_c() {
    if !strace_available() {
        return;
    }
    let (ours, theirs) = counts(true, &fixture("syscalls"));
    assert_eq!(ours.get("openat").copied(), theirs.get("openat").copied());
    // -c runs the fixture itself: its own execve is seen, once.
    assert_eq!(ours.get("execve"), Some(&1), "{ours:?}");
    assert_eq!(ours, theirs);
}

#[test]
fn syscall_return_counts_of_signal_handlers_equal_strace_c() {
    if !strace_available() {
        return;
    }
    // signals: four handled signals, each ending in rt_sigreturn, whose
    // exit sees the signal frame's registers (orig_rax -1).
    let (ours, theirs) = counts(true, &fixture("signals"));
    assert_eq!(ours.get("rt_sigreturn"), Some(&4), "{ours:?}");
    assert_eq!(ours, theirs);
}

// ---- the examples' counts against strace ---------------------------------

/// Runs `examples/NAME.stp` over `cmd`; its stdout.
fn example(name: &str, cmd: &str) -> String {
    let path = format!("{}/examples/{name}.stp", env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(path).unwrap();
    let out = finish(utap(&script, &["-c", cmd]).spawn().unwrap());
    assert_eq!(out.status, 0, "{name} failed: {}", out.stderr);
    out.stdout
}

/// The `errors` column of `strace -c` per syscall name (calls without
/// errors are left out).
fn strace_errors(table: &str) -> BTreeMap<String, u64> {
    table
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            if cols.len() != 6 || !cols[0].contains('.') || cols[5] == "total" {
                return None;
            }
            Some((cols[5].to_string(), cols[4].parse().ok()?))
        })
        .collect()
}

/// The rows `NAME N ...` of an example's table whose second column is a
/// number (headers and other lines are skipped).
fn table_column(out: &str, col: usize) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in out.lines() {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if let (Some(name), Some(Ok(n))) = (cols.first(), cols.get(col).map(|c| c.parse::<u64>())) {
            *m.entry(name.to_string()).or_default() += n;
        }
    }
    m
}

#[test]
fn syslatency_example_counts_equal_strace_c() {
    if !strace_available() {
        return;
    }
    let program = fixture("syscalls");
    let ours = table_column(&example("syslatency", &program), 1);
    let theirs = strace_c_counts(&strace(&["-c"], &program));
    assert_eq!(ours, theirs);
}

#[test]
fn errtop_example_error_counts_equal_strace_c() {
    if !strace_available() {
        return;
    }
    let program = fixture("syscalls");
    let out = example("errtop", &program);
    // SYSCALL ERRNO COUNT OF: failures per call and errno, and the call's
    // count of invocations.
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut of: BTreeMap<String, u64> = BTreeMap::new();
    for l in out.lines().skip(1) {
        let cols: Vec<&str> = l.split_whitespace().collect();
        *errors.entry(cols[0].to_string()).or_default() += cols[2].parse::<u64>().unwrap();
        of.insert(cols[0].to_string(), cols[3].parse().unwrap());
    }
    let table = strace(&["-c"], &program);
    assert_eq!(errors, strace_errors(&table));
    let calls = strace_c_counts(&table);
    for (name, n) in of {
        assert_eq!(Some(&n), calls.get(&name), "{name}");
    }
}

#[test]
fn procsyscalls_example_total_equals_strace_c() {
    if !strace_available() {
        return;
    }
    let program = fixture("syscalls");
    let out = example("procsyscalls", &program);
    let total: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("total"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no total in {out}"));
    let theirs: u64 = strace_c_counts(&strace(&["-c"], &program)).values().sum();
    assert_eq!(total, theirs);
}

#[test]
fn sighandler_and_killsnoop_examples_count_as_strace() {
    if !strace_available() {
        return;
    }
    let program = fixture("signals");
    let text = strace(&[], &program);
    let delivered = |sig: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("--- {sig} ")))
            .count() as u64
    };
    let handled = table_column(&example("sighandler", &program), 1);
    assert_eq!(handled.get("SIGUSR1"), Some(&delivered("SIGUSR1")));
    assert_eq!(handled.get("SIGUSR2"), Some(&delivered("SIGUSR2")));
    let kills = text.lines().filter(|l| l.contains(" kill(")).count();
    let sent = example("killsnoop", &program)
        .lines()
        .filter(|l| l.contains(" -> "))
        .count();
    assert_eq!(sent, kills);
}

#[test]
fn rwbytes_and_opentop_examples_count_as_strace() {
    if !strace_available() {
        return;
    }
    let program = format!("{} 5", fixture("writer"));
    let ours: u64 = example("rwbytes", &program)
        .lines()
        .filter(|l| l.contains(" write fd "))
        .map(|l| {
            let calls = l.split(" calls").next().unwrap();
            calls.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    let theirs = strace_c_counts(&strace(&["-c"], &program));
    assert_eq!(Some(&ours), theirs.get("write"));

    let program = fixture("syscalls");
    // OPENS FAILS PATH
    let opens: u64 = example("opentop", &program)
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap().parse::<u64>().unwrap())
        .sum();
    let theirs = strace_c_counts(&strace(&["-c"], &program));
    assert_eq!(Some(&opens), theirs.get("openat"));
}
