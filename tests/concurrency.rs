//! Tracing many threads at once (issue 16): what a script counts while
//! several traced threads make syscalls together is exactly what strace
//! sees, by name, by thread and in a `@hist_log`; and a program creating
//! and joining a thousand threads loses no event and never hangs.
//!
//! These hold whatever the tracer's threading: they guard the move from
//! one tracer thread to several (README, "Tracing many threads").

mod support;

use std::collections::BTreeMap;

use support::*;

/// Threads of the `mtsys` workload and getppid calls per thread.
const THREADS: usize = 8;
const CALLS: usize = 10_000;

/// Every syscall of the workload (after its exec) counted by name, the
/// getppid calls by thread, and each syscall's name length into a
/// `@hist_log`. `futex` is left out: how often pthread's barrier and
/// join wait depends on timing, not on the program.
const COUNT: &str = r#"
global by_name, by_tid, namelen
probe syscall.* {
  if (execname() == "mtsys" && name != "futex") { by_name[name]++; namelen <<< strlen(name) }
}
probe syscall.getppid { if (execname() == "mtsys") by_tid[tid()]++ }
probe end {
  foreach (n+ in by_name) printf("name %s %d\n", n, by_name[n])
  foreach (t in by_tid) printf("tid %d %d\n", t, by_tid[t])
  foreach (b in @hist_log(namelen)) if (@hist_log(namelen)[b]) printf("hist %d %d\n", b, @hist_log(namelen)[b])
}
"#;

/// What the script printed: counts by name, sorted per-thread counts,
/// histogram buckets.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    by_name: BTreeMap<String, u64>,
    per_thread: Vec<u64>,
    hist: BTreeMap<u32, u64>,
}

fn parse_utap(out: &str) -> Counts {
    let mut c = Counts::default();
    for line in out.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["name", n, v] => {
                c.by_name.insert(n.to_string(), v.parse().unwrap());
            }
            ["tid", _, v] => c.per_thread.push(v.parse().unwrap()),
            ["hist", b, v] => {
                c.hist.insert(b.parse().unwrap(), v.parse().unwrap());
            }
            _ => panic!("unexpected line {line:?} in {out}"),
        }
    }
    c.per_thread.sort();
    c
}

/// SystemTap's `@hist_log` bucket of a positive value: 64 + 1 + log2(v)
/// (1 is bucket 65, 2–3 is 66, 4–7 is 67: tests/golden/hist_bucket_index).
fn log_bucket(v: u64) -> u32 {
    65 + (63 - v.leading_zeros())
}

/// The same counts from `strace -f -o` on `/bin/sh -c "exec CMD"` (as utap
/// runs `-c`): every call entered from the exec of `program` on, except
/// that execve and futex.
fn strace_counts(cmd: &str, program: &str) -> Counts {
    let file = std::env::temp_dir().join(format!("utap-concurrency-{}.txt", std::process::id()));
    let mut c = command("strace");
    c.args(["-f", "-qq", "-o"]).arg(&file);
    c.args(["/bin/sh", "-c", &format!("exec {cmd}")]);
    let out = run(c);
    assert_eq!(out.status, 0, "strace failed: {}", out.stderr);
    let text = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    let exec = format!("execve(\"{program}\"");
    let mut counts = Counts::default();
    let mut per_tid: BTreeMap<&str, u64> = BTreeMap::new();
    let mut started = false;
    for line in text.lines() {
        let Some((tid, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if !started {
            started = rest.starts_with(&exec);
            continue;
        }
        let Some((name, _)) = rest.split_once('(') else {
            continue;
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue; // "<... x resumed>", "+++ exited", "--- SIGCHLD"
        }
        if name == "futex" {
            continue;
        }
        *counts.by_name.entry(name.to_string()).or_default() += 1;
        *counts
            .hist
            .entry(log_bucket(name.len() as u64))
            .or_default() += 1;
        if name == "getppid" {
            *per_tid.entry(tid).or_default() += 1;
        }
    }
    assert!(started, "no exec of {program} in strace's output");
    counts.per_thread = per_tid.into_values().collect();
    counts.per_thread.sort();
    counts
}

#[test]
fn eight_threads_counted_by_name_by_tid_and_in_a_histogram_equal_strace() {
    let program = fixture("mtsys");
    let cmd = format!("{program} {THREADS} {CALLS}");
    let out = run(utap(COUNT, &["-c", &cmd]));
    assert_eq!(out.stderr, "", "{out:?}");
    assert_eq!(out.status, 0, "{out:?}");
    let got = parse_utap(&out.stdout);
    assert_eq!(got.per_thread, vec![CALLS as u64; THREADS], "{out:?}");
    assert_eq!(
        got.by_name.get("getppid"),
        Some(&((THREADS * CALLS) as u64))
    );
    if !have("strace") {
        println!("strace is not installed: the comparison with strace is skipped");
        return;
    }
    let want = strace_counts(&cmd, &program);
    assert_eq!(got, want, "utap (left) against strace (right)");
}

/// `threads 1000 100` starts and joins 100 threads at a time until 1,000
/// have run, each making one getppid after the main thread's marker
/// getppid (the shell before the exec makes a getppid of its own: not
/// counted).
const CHURN: &str = r#"
global calls, tids, begun, ended
probe syscall.getppid { if (execname() == "threads") { calls++; tids[tid()]++ } }
probe process.thread.begin { if (tid() != pid()) begun++ }
probe process.thread.end { if (tid() != pid()) ended++ }
probe end {
  distinct = 0
  foreach (t in tids) distinct++
  printf("calls=%d distinct=%d begun=%d ended=%d\n", calls, distinct, begun, ended)
}
"#;

#[test]
fn a_thousand_threads_created_and_joined_lose_nothing() {
    let out = run(utap(
        CHURN,
        &["-c", &format!("{} 1000 100", fixture("threads"))],
    ));
    assert_eq!(out.stderr, "", "{out:?}");
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        out.stdout, "calls=1001 distinct=1001 begun=1000 ended=1000\n",
        "{out:?}"
    );
}
