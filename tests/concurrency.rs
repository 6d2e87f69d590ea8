//! Tracing many threads at once (issue 16): what a script counts while
//! several traced threads make syscalls together is exactly what strace
//! sees, by name, by thread and in a `@hist_log`; and a program creating
//! and joining a thousand threads loses no event and never hangs.
//!
//! These hold whatever the tracer's threading: they guard the move from
//! one tracer thread to several (docs/internals/performance.md, "Tracing many threads"). The
//! tests that must see several tracer threads at work ask for them
//! (`UTAP_SHARDS`, whatever the machine's CPU count) and check with `-v`
//! that each one served stops and that threads were handed over.

mod support;

use std::collections::BTreeMap;

use support::*;

/// Threads of the `mtsys` workload and getppid calls per thread.
const THREADS: usize = 8;
const CALLS: usize = 20_000;

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

/// The same counts from `strace -f -o` on CMD's words (as utap runs `-c`
/// without shell syntax): every call entered from the exec of `program` on, except
/// that execve and futex.
fn strace_counts(cmd: &str, program: &str) -> Counts {
    let file = std::env::temp_dir().join(format!("utap-concurrency-{}.txt", std::process::id()));
    let mut c = command("strace");
    c.args(["-f", "-qq", "-o"]).arg(&file);
    c.args(cmd.split_whitespace());
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

/// The `-v` line of a sharded session: per tracer thread, its stops and
/// the threads handed over to it.
fn shard_line(stderr: &str) -> (Vec<u64>, Vec<u64>) {
    let line = stderr
        .lines()
        .find(|l| l.contains(" tracer threads: ptrace stops "))
        .unwrap_or_else(|| panic!("no tracer-thread line in {stderr}"));
    let nums =
        |s: &str| -> Vec<u64> { s.split(" + ").map(|n| n.trim().parse().unwrap()).collect() };
    let rest = line.split_once("ptrace stops ").unwrap().1;
    let (stops, handed) = rest.split_once("; threads handed over ").unwrap();
    let handed = handed.split_once(" (").unwrap().0;
    (nums(stops), nums(handed))
}

/// Several tracer threads really served the session: each handled stops,
/// and new threads were handed over to the others.
fn assert_sharded(stderr: &str, shards: usize) {
    let (stops, handed) = shard_line(stderr);
    assert_eq!(stops.len(), shards, "{stderr}");
    assert!(
        stops.iter().all(|&n| n > 0),
        "a tracer thread served nothing: {stderr}"
    );
    assert!(
        handed.iter().sum::<u64>() > 0,
        "no thread handed over: {stderr}"
    );
}

/// utap's run with `shards` tracer threads and `-v`, whose notes go to
/// stderr (checked by `assert_sharded`) beside the script's output. The
/// syscall entries come through ptrace stops (`UTAP_NOTIFY=0`): these
/// tests are about the tracer threads, which a seccomp notification
/// bypasses (tests/notify.rs), and so do handlers running in the program
/// (`UTAP_INPROC=0`, tests/dataplane.rs).
fn utap_sharded(script: &str, shards: usize, args: &[&str]) -> std::process::Command {
    let mut c = utap(script, &[&["-v"], args].concat());
    c.env("UTAP_SHARDS", shards.to_string());
    c.env("UTAP_NOTIFY", "0");
    c.env("UTAP_INPROC", "0");
    c
}

#[test]
fn eight_threads_counted_by_name_by_tid_and_in_a_histogram_equal_strace() {
    let program = fixture("mtsys");
    let cmd = format!("{program} {THREADS} {CALLS}");
    let out = run(utap_sharded(COUNT, 2, &["-c", &cmd]));
    assert_eq!(out.status, 0, "{out:?}");
    assert!(!out.stderr.contains("ERROR"), "{out:?}");
    assert!(!out.stderr.contains("skipped"), "{out:?}");
    assert_sharded(&out.stderr, 2);
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

/// 256 busy threads started together, all reaching the handover's stop at
/// once: a parked thread spins until its new tracer thread takes it, and
/// with a hundred of them parked at once the adopting tracer thread (in
/// `SCHED_IDLE`) was starved for seconds (up to 20 s for this run). One
/// thread is parked at a time; every call is still counted once.
#[test]
fn two_hundred_fifty_six_busy_threads_handed_over_count_exactly() {
    let cmd = format!("{} 256 200", fixture("mtsys"));
    let out = run(utap_sharded(COUNT, 2, &["-c", &cmd]));
    assert_eq!(out.status, 0, "{out:?}");
    assert_sharded(&out.stderr, 2);
    let got = parse_utap(&out.stdout);
    assert_eq!(got.per_thread, vec![200; 256], "{out:?}");
    assert_eq!(got.by_name.get("getppid"), Some(&(256 * 200)));
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

/// More tracer threads than CPUs, and a thousand threads, each handed
/// over at its first stop (`UTAP_SHARD_SETTLE=1`; by default only a thread
/// that keeps stopping moves): nothing is lost or counted twice.
#[test]
fn a_thousand_threads_over_four_tracer_threads_lose_nothing() {
    let mut c = utap_sharded(
        CHURN,
        4,
        &["-c", &format!("{} 1000 100", fixture("threads"))],
    );
    c.env("UTAP_SHARD_SETTLE", "1");
    let out = run(c);
    assert_eq!(out.status, 0, "{out:?}");
    assert_sharded(&out.stderr, 4);
    assert_eq!(
        out.stdout, "calls=1001 distinct=1001 begun=1000 ended=1000\n",
        "{out:?}"
    );
}

/// A thread-count script with no syscall probe: no seccomp filter, so an
/// interrupted session lets the program go on untraced.
const THREAD_COUNT: &str = r#"
global begun
probe process.begin { if (pid() == target()) printf("target %d\n", target()) }
probe process.thread.begin { begun++ }
probe end { println(begun >= 0 ? "end" : "") }
"#;

/// The bytes at the program's entry point (AT_ENTRY), where a handover
/// parks a thread on a `jmp .` while it changes tracer threads.
fn entry_code(pid: i32) -> Option<[u8; 2]> {
    use std::os::unix::fs::FileExt;
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let entry = auxv.chunks_exact(16).find_map(|p| {
        let key = u64::from_ne_bytes(p[..8].try_into().unwrap());
        (key == libc::AT_ENTRY).then(|| u64::from_ne_bytes(p[8..].try_into().unwrap()))
    })?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut code = [0u8; 2];
    mem.read_exact_at(&mut code, entry).ok()?;
    Some(code)
}

/// Ctrl-C at a random moment of a session whose program keeps creating
/// and joining threads (each handed between tracer threads at its birth):
/// utap ends with its end probe, and the program is left running,
/// untraced, never stopped, still making new threads (no thread left
/// parked), its entry code no longer a `jmp .`.
#[test]
fn ctrl_c_during_thread_churn_leaves_nothing_stopped_or_traced() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    for round in 0..4u64 {
        // 20–400 ms into the churn.
        let delay = 20
            + (seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(round * 1442695040888963407)
                >> 33)
                % 380;
        let cmd = format!("exec {} 8 >/dev/null 2>&1", fixture("churn"));
        let mut c = utap(THREAD_COUNT, &["-c", &cmd]);
        c.env("UTAP_SHARDS", "2").env("UTAP_SHARD_SETTLE", "1");
        c.env("UTAP_INPROC", "0");
        let live = Live::spawn(c);
        let line = live.line();
        let pid: i32 = line
            .strip_prefix("target ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected line {line:?}"));
        std::thread::sleep(std::time::Duration::from_millis(delay));
        signal(live.pid(), libc::SIGINT);
        let out = live.finish();
        assert_eq!(
            (out.stdout.as_str(), out.status),
            ("end\n", 0),
            "{out:?} after {delay} ms"
        );
        assert_eq!(out.stderr, "", "{out:?}");
        assert_settled_untraced(pid, &format!(" after {delay} ms"));
        // utap returns within its detach budget and puts the entry code
        // back behind it, once every tracer thread has let go.
        wait_until(&format!("entry code put back after {delay} ms"), || {
            entry_code(pid).is_some_and(|code| code != [0xeb, 0xfe])
        });
        // Still churning: threads it creates from now on appear (a thread
        // left parked would keep the main thread in pthread_join forever).
        let before = threads(pid);
        wait_until("new threads", || {
            threads(pid).iter().any(|t| !before.contains(t))
        });
        signal(pid, libc::SIGKILL);
    }
}

/// Per thread of a `-x` session (no seccomp filter: entry and exit stops),
/// its getppid entries and returns: each churn thread makes 3. The end
/// probe visits every thread the churn made in the second (hundreds, more
/// than MAXACTION's default allows: the test raises it).
const ENTRIES_AND_RETURNS: &str = r#"
global e, r
probe syscall.getppid { e[tid()]++ }
probe syscall.getppid.return { r[tid()]++ }
probe end {
  bad = 0; n = 0; full = 0
  foreach (t in e) { n++; if (e[t] > 3 || r[t] > e[t]) bad++; if (e[t] == 3 && r[t] == 3) full++ }
  printf("threads>0=%d full>0=%d bad=%d\n", n > 0, full > 0, bad)
}
"#;

/// Threads handed over at a syscall entry (`UTAP_SHARD_SETTLE=2`: a new
/// thread's second stop is its first getppid's entry) make the call after
/// the handover, and it is reported once: no thread shows more than its 3
/// entries, or more returns than entries. (A fast second of churn makes
/// more than the default 2,048 threads: the map limit is raised too.)
#[test]
fn threads_handed_over_at_a_syscall_entry_report_each_call_once() {
    let churn = Running::ready("churn", &["4"]);
    let mut c = utap_sharded(
        ENTRIES_AND_RETURNS,
        2,
        &[
            "-DMAXACTION=1000000",
            "-DMAXMAPENTRIES=1000000",
            "-T",
            "1",
            "-x",
            &churn.pid().to_string(),
        ],
    );
    c.env("UTAP_SHARD_SETTLE", "2");
    let out = run(c);
    assert_eq!(out.status, 0, "{out:?}");
    assert_sharded(&out.stderr, 2);
    assert_eq!(out.stdout, "threads>0=1 full>0=1 bad=0\n", "{out:?}");
    wait_until("every thread untraced", || {
        threads(churn.pid())
            .iter()
            .all(|&t| matches!(status_field(t, "TracerPid").as_deref(), Some("0") | None))
    });
}

/// A thread served by another tracer thread than its process leader execs
/// (`thread_exec`; `UTAP_SHARD_SETTLE=2` moves it at its first getppid):
/// it takes over the leader's id, its new tracer thread follows, and the
/// session ends when the new program exits, with every call counted.
/// utap's first tracer thread, the program's real parent, may reap the
/// new program's stops and death (it hung about one run in three).
#[test]
fn a_non_leader_exec_on_another_tracer_thread_ends_the_session() {
    let mut c = utap_sharded(
        "global n probe syscall.getppid { n++ } probe end { println(n) }",
        2,
        &["-c", &fixture("thread_exec")],
    );
    c.env("UTAP_SHARD_SETTLE", "2");
    let out = run(c);
    assert_eq!(out.status, 0, "{out:?}");
    assert_sharded(&out.stderr, 2);
    assert!(out.stderr.contains("exited with status 0"), "{out:?}");
    // The fixture's own 200 calls: -c runs it directly, no shell before it.
    assert_eq!(out.stdout, "200\n", "{out:?}");
}
