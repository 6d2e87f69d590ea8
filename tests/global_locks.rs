//! Per-global locks (issue 16, point 2): handlers of different tracer
//! threads run at once unless they touch the same global, as SystemTap's
//! per-probe lock sets allow. Under two tracer threads (`UTAP_SHARDS=2`,
//! syscall entries through ptrace stops with `UTAP_NOTIFY=0`), 8 threads
//! × 100,000 getppid calls:
//! - two probes writing different globals count every call, and they
//!   were inside their handlers at the same time (`-v` reports the most
//!   handler runs in progress at once: one big lock makes it 1);
//! - two probes doing a read-modify-write of one global lose no update;
//! - probes taking only shared locks (a read, a `<<<`) never wait for
//!   each other, so even `-DMAXTRYLOCK=1` skips none.

mod support;

use support::*;

const THREADS: u64 = 8;
const CALLS: u64 = 100_000;

/// One workload at a time: each keeps both CPUs busy, and three at once
/// on a 2-CPU machine could outlast the run's time limit.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn sharded(script: &str, args: &[&str]) -> Outcome {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let program = fixture("mtsys");
    let cmd = format!("{program} {THREADS} {CALLS}");
    let mut c = utap(script, &[&["-v"], args, &["-c", &cmd]].concat());
    c.env("UTAP_SHARDS", "2").env("UTAP_NOTIFY", "0");
    // The tracer's locks are under test: every probe stays in the tracer.
    c.env("UTAP_INPROC", "0");
    let out = run(c);
    assert_eq!(out.status, 0, "{out:?}");
    assert!(!out.stderr.contains("ERROR"), "{out:?}");
    assert!(!out.stderr.contains("skipped"), "{out:?}");
    assert!(
        out.stderr.contains("utap: 2 tracer threads"),
        "not sharded: {out:?}"
    );
    out
}

/// The `-v` count of handler runs in progress at once.
fn most_beside(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("utap: handler runs side by side"))
        .and_then(|l| l.split("at most ").nth(1))
        .and_then(|l| l.split(' ').next())
        .map_or(1, |n| n.parse().unwrap())
}

#[test]
fn two_probes_on_different_globals_count_everything_and_run_at_once() {
    let script = r#"
global a, b
probe syscall.getppid { if (execname() == "mtsys") a++ }
probe syscall.getppid { if (execname() == "mtsys") b++ }
probe end { printf("%d %d\n", a, b) }
"#;
    let out = sharded(script, &[]);
    let n = THREADS * CALLS;
    assert_eq!(out.stdout, format!("{n} {n}\n"), "{out:?}");
    assert!(most_beside(&out.stderr) >= 2, "never side by side: {out:?}");
}

#[test]
fn two_probes_updating_one_global_lose_no_update() {
    let script = r#"
global c
probe syscall.getppid { if (execname() == "mtsys") c = c + 1 }
probe syscall.getppid { if (execname() == "mtsys") { x = c; c = x + 1 } }
probe end { printf("%d\n", c) }
"#;
    let out = sharded(script, &[]);
    assert_eq!(out.stdout, format!("{}\n", 2 * THREADS * CALLS), "{out:?}");
}

#[test]
fn shared_locks_never_skip_even_with_one_try() {
    let script = r#"
global most = 1000000000, s
probe syscall.getppid { if (execname() == "mtsys" && most > 0) s <<< 1 }
probe syscall.getppid { if (execname() == "mtsys" && most > 1) s <<< 2 }
probe end { printf("%d %d\n", @count(s), @sum(s)) }
"#;
    let out = sharded(script, &["-DMAXTRYLOCK=1"]);
    let n = THREADS * CALLS;
    assert_eq!(out.stdout, format!("{} {}\n", 2 * n, 3 * n), "{out:?}");
    assert!(most_beside(&out.stderr) >= 2, "never side by side: {out:?}");
}
