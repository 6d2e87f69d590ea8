//! Statistics under several tracer threads (issue 16, point 2): as
//! SystemTap's per-CPU copies, each tracer thread adds `<<<` values to its
//! own copy of a statistic, and reading it folds the copies together. What
//! a script reads must be exactly what one copy that saw every value gives:
//! count, sum, min, max, average and every histogram bucket, for a scalar
//! statistic and for each element of a statistics array.

mod support;

use std::collections::BTreeMap;

use support::*;

const THREADS: u64 = 8;
const CALLS: u64 = 100_000;

/// Each mtsys thread's getppid calls numbered 1, 2, ... CALLS, every
/// number added to one statistic and to the thread's element of a
/// statistics array; then the aggregates and the non-empty `@hist_log`
/// buckets of both. `gone` and `gone_by` get the same values and are
/// deleted before anything reads them: the other tracer thread's copies
/// must go too.
const SCRIPT: &str = r#"
global n, all, by_tid, gone, gone_by
probe syscall.getppid {
  if (execname() == "mtsys") {
    v = ++n[tid()]; all <<< v; by_tid[tid()] <<< v; gone <<< v; gone_by[tid()] <<< v
  }
}
probe end {
  delete gone; delete gone_by
  left = 0; foreach (t in gone_by) left++
  printf("deleted %d %d\n", @count(gone), left)
  printf("all %d %d %d %d %d\n", @count(all), @sum(all), @min(all), @max(all), @avg(all))
  foreach (b in @hist_log(all)) if (@hist_log(all)[b]) printf("hist %d %d\n", b, @hist_log(all)[b])
  foreach (t in by_tid) {
    printf("tid %d %d %d %d %d\n", @count(by_tid[t]), @sum(by_tid[t]), @min(by_tid[t]),
           @max(by_tid[t]), @avg(by_tid[t]))
    foreach (b in @hist_log(by_tid[t])) if (@hist_log(by_tid[t])[b])
      printf("thist %d %d\n", b, @hist_log(by_tid[t])[b])
  }
}
"#;

/// `@hist_log` buckets of the values 1..=calls, `times` over: bucket
/// 65 + k holds 2^k ..= 2^(k+1) - 1 (tests/golden/hist_bucket_index).
fn log_buckets(calls: u64, times: u64) -> BTreeMap<u64, u64> {
    let mut buckets = BTreeMap::new();
    let mut k = 0;
    while 1u64 << k <= calls {
        let (lo, hi) = (1u64 << k, ((1u64 << (k + 1)) - 1).min(calls));
        buckets.insert(65 + k, (hi - lo + 1) * times);
        k += 1;
    }
    buckets
}

/// The per-tracer-thread stop counts of `-v`'s tracer-thread line.
fn stops_per_tracer_thread(stderr: &str) -> Vec<u64> {
    let line = stderr
        .lines()
        .find(|l| l.contains(" tracer threads: ptrace stops "))
        .unwrap_or_else(|| panic!("no tracer-thread line in {stderr}"));
    let stops = line.split_once("ptrace stops ").unwrap().1;
    let stops = stops.split_once(';').unwrap().0;
    stops
        .split(" + ")
        .map(|n| n.trim().parse().unwrap())
        .collect()
}

/// `<<<` values `-v` says were added to other tracer threads' copies.
fn added_elsewhere(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("utap: statistics: "))
        .unwrap_or_else(|| panic!("no statistics line in {stderr}"));
    let n = line.trim_start_matches("utap: statistics: ");
    n.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn stats_added_on_two_tracer_threads_read_exactly() {
    let cmd = format!("{} {THREADS} {CALLS}", fixture("mtsys"));
    let mut c = utap(SCRIPT, &["-v", "-c", &cmd]);
    // Through ptrace stops on two tracer threads: the seccomp notification
    // route would serve these entries on its one server thread, and the
    // data plane in the program (`<<<` runs there; tests/dataplane_stats.rs).
    c.env("UTAP_SHARDS", "2")
        .env("UTAP_NOTIFY", "0")
        .env("UTAP_INPROC", "0");
    let out = run(c);
    assert_eq!(out.status, 0, "{out:?}");
    assert!(!out.stderr.contains("ERROR"), "{out:?}");
    assert!(!out.stderr.contains("skipped"), "{out:?}");
    let stops = stops_per_tracer_thread(&out.stderr);
    assert_eq!(stops.len(), 2, "{}", out.stderr);
    assert!(stops.iter().all(|&n| n > 0), "{}", out.stderr);
    // The second tracer thread's values went to its own copies.
    let added = added_elsewhere(&out.stderr);
    assert!(added > 0 && added <= 2 * THREADS * CALLS, "{}", out.stderr);

    let sum = CALLS * (CALLS + 1) / 2;
    let (mut all, mut hist, mut tids, mut thist) = (vec![], BTreeMap::new(), vec![], vec![]);
    let mut deleted = None;
    for line in out.stdout.lines() {
        let f: Vec<u64> = line
            .split(' ')
            .skip(1)
            .map(|n| n.parse().unwrap())
            .collect();
        match line.split(' ').next() {
            Some("all") => all = f,
            Some("hist") => drop(hist.insert(f[0], f[1])),
            Some("tid") => tids.push(f),
            Some("thist") => thist.push((f[0], f[1])),
            Some("deleted") => deleted = Some(f),
            _ => panic!("unexpected line {line:?}"),
        }
    }
    assert_eq!(deleted, Some(vec![0, 0]), "{}", out.stdout);
    let n = THREADS * CALLS;
    assert_eq!(all, vec![n, THREADS * sum, 1, CALLS, THREADS * sum / n]);
    assert_eq!(hist, log_buckets(CALLS, THREADS));
    let one = vec![CALLS, sum, 1, CALLS, sum / CALLS];
    assert_eq!(tids, vec![one; THREADS as usize], "{}", out.stdout);
    let per_thread: Vec<(u64, u64)> = log_buckets(CALLS, 1).into_iter().collect();
    let want: Vec<(u64, u64)> = (0..THREADS).flat_map(|_| per_thread.clone()).collect();
    assert_eq!(thist, want);
}
