//! Statistics in the traced program (issue 27): `<<<` into a scalar
//! statistic and into statistic arrays keyed by a literal and by `pid()`
//! runs in the program, is folded back before `end`, and prints exactly
//! what the tracer route prints (`UTAP_INPROC=0`) on one and four
//! threads; the counts are also checked against the values the fixtures
//! make (an atomic counter gives every hit a distinct value 1..N, so the
//! totals do not depend on the threads' order). Readers while the program
//! runs and `@variance` keep their adders in the tracer; an overflowing
//! statistic array fails as SystemTap's does.

mod support;

use support::*;

/// `n` hands out 1, 2, ... N to the getppid hits; write's fd and result
/// go to the same statistics; begin adds first.
const SCRIPT: &str = r#"global n, s, by, bp
probe begin { s <<< -5; by["write"] <<< 1000 }
probe syscall.getppid { v = ++n; s <<< v; by["getppid"] <<< v % 37 - 3; bp[pid()] <<< v }
probe syscall.write { by["write"] <<< $arg1 }
probe syscall.write.return { s <<< $return }
probe end {
  printf("s: %d %d %d %d %d\n", @count(s), @sum(s), @min(s), @max(s), @avg(s))
  print(@hist_log(s))
  foreach (k+ in by) printf("%s %d %d %d %d %d\n", k, @count(by[k]), @sum(by[k]), @min(by[k]), @max(by[k]), @avg(by[k]))
  foreach (k+ in by) print(@hist_linear(by[k], 0, 40, 5))
  foreach (p in bp) printf("pid %d %d\n", @count(bp[p]), @sum(bp[p]))
}
"#;

fn traced(script: &str, cmd: &str, inproc: bool) -> Outcome {
    let mut c = utap(script, &["-v", "-c", cmd]);
    if !inproc {
        c.env("UTAP_INPROC", "0");
    }
    run(c)
}

/// The summary lines `SCRIPT` prints for `hits` getppid calls (values
/// 1..hits) and `writes` one-byte writes to fd 3.
fn expected_lines(hits: i64, writes: i64) -> Vec<String> {
    let count = hits + writes + 1;
    let sum = hits * (hits + 1) / 2 + writes - 5;
    let mods: i64 = (1..=hits).map(|v| v % 37 - 3).sum();
    let (wcount, wsum) = (writes + 1, 3 * writes + 1000);
    let wmin = if writes > 0 { 3 } else { 1000 };
    vec![
        format!("s: {count} {sum} -5 {hits} {}", sum / count),
        format!("getppid {hits} {mods} -3 33 {}", mods / hits),
        format!("write {wcount} {wsum} {wmin} 1000 {}", wsum / wcount),
        format!("pid {hits} {}", hits * (hits + 1) / 2),
    ]
}

/// One and four threads: the same output on both routes, the totals the
/// fixtures' values give, every adder in the program with few stops.
#[test]
fn statistics_in_process_print_as_the_tracer_route() {
    let loop_ = format!("{} 20000", fixture("loop"));
    let mtsys = format!("{} 4 20000", fixture("mtsys"));
    // loop writes one byte every 64th call: 313 of 20000.
    for (cmd, hits, writes) in [(loop_, 20_000, 313), (mtsys, 80_000, 0)] {
        let fast = traced(SCRIPT, &cmd, true);
        let slow = traced(SCRIPT, &cmd, false);
        assert_eq!(fast.status, 0, "{cmd}: {}", fast.stderr);
        assert_eq!(slow.status, 0, "{cmd}: {}", slow.stderr);
        assert_eq!(
            fast.stdout, slow.stdout,
            "{cmd}: in process (left), tracer (right)"
        );
        for line in expected_lines(hits, writes) {
            let word = line.split(' ').next().unwrap_or_default();
            if writes == 0 && word == "write" {
                continue;
            }
            assert!(
                fast.stdout.lines().any(|l| l == line),
                "{cmd}: no line {line:?} in\n{}",
                fast.stdout
            );
        }
        assert!(
            fast.stderr
                .contains("utap: 3 of 5 probe(s) run in the program"),
            "{cmd}: {}",
            fast.stderr
        );
        let served = verbose_counts::<3>(
            fast.stderr
                .lines()
                .filter(|l| l.starts_with("utap: data plane: "))
                .nth(1)
                .unwrap_or_default(),
            "utap: data plane: ",
        );
        assert_eq!(
            served,
            [(hits + writes) as u64, 0, 0],
            "{cmd}: {}",
            fast.stderr
        );
        assert!(ptrace_stops(&fast.stderr) < 200, "{cmd}: {}", fast.stderr);
    }
}

/// The log histogram of 1..20000 with loop's 313 ones and begin's -5,
/// bucket by bucket (the tracer's own arithmetic is checked elsewhere).
#[test]
fn log_histogram_buckets_are_exact() {
    let o = traced(SCRIPT, &format!("{} 20000", fixture("loop")), true);
    assert_eq!(o.status, 0, "{}", o.stderr);
    let rows: Vec<(i64, i64)> = o
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("value"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let (v, rest) = l.split_once('|')?;
            Some((
                v.trim().parse().ok()?,
                rest.split_whitespace().last()?.parse().ok()?,
            ))
        })
        .filter(|&(_, c)| c > 0)
        .collect();
    let mut want = vec![(-4, 1), (1, 1 + 313)];
    let mut lo = 2;
    while lo <= 20000 {
        want.push((lo, (2 * lo - 1).min(20000) - lo + 1));
        lo *= 2;
    }
    assert_eq!(rows, want, "{}", o.stdout);
}

/// A statistic `@variance` reads keeps its adders in the tracer, with the
/// reason printed by -v; one a timer reads while the program runs does
/// not (the timer runs held, on the region folded back), and reads the
/// same numbers.
#[test]
fn variance_keeps_adders_in_the_tracer_and_a_timer_reads_held() {
    let script = "global s, t, u\n\
        probe syscall.getppid { s <<< 1; u <<< 3 }\n\
        probe syscall.write { t <<< 2 }\n\
        probe timer.ms(20) { if (@count(t) > 1000000) printf(\"x\\n\") }\n\
        probe end { printf(\"%d %d %d %d\\n\", @count(s), @count(t), @variance(s), @count(u)) }";
    let o = traced(script, &format!("{} 2000", fixture("loop")), true);
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "2000 32 0 2000\n");
    for why in [
        "utap:   1 in the tracer (syscall.getppid...): adds to statistic 's', which @variance reads",
        "utap: 1 of 4 probe(s) run in the program",
    ] {
        assert!(o.stderr.contains(why), "no {why:?} in {}", o.stderr);
    }
}

/// Past a statistic array's size: SystemTap's overflow error from the
/// program, exit 1, as on the tracer route.
#[test]
fn statistic_array_overflow_fails_as_systemtap() {
    let script = "global a[3], n\n\
        probe syscall.getppid { a[++n] <<< 1 }\n\
        probe end { printf(\"end %d\\n\", n) }";
    let cmd = format!("{} 200", fixture("loop"));
    let error = "ERROR: Array overflow, check size limit (3) near identifier 'a' at <input>:2:25";
    for inproc in [true, false] {
        let o = traced(script, &cmd, inproc);
        assert_eq!(o.status, 1, "{}", o.stderr);
        assert!(
            o.stderr.lines().any(|l| l == error),
            "inproc {inproc}: {}",
            o.stderr
        );
    }
}

/// Edge values (0, ±1, the i64 limits, offsets a linear histogram wraps)
/// land in the same buckets in the program as in the tracer.
#[test]
fn edge_values_fall_in_the_tracer_buckets() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/dataplane_stats_edges.stp"
    ))
    .expect("edges script");
    let cmd = format!("{} 16", fixture("loop"));
    let fast = traced(&script, &cmd, true);
    let slow = traced(&script, &cmd, false);
    assert_eq!(fast.status, 0, "{}", fast.stderr);
    assert_eq!(
        fast.stdout, slow.stdout,
        "in process (left), tracer (right)"
    );
    assert!(
        fast.stdout
            .starts_with("16 -4 -9223372036854775808 9223372036854775807\n")
    );
    assert!(
        fast.stderr
            .contains("utap: 1 of 2 probe(s) run in the program"),
        "{}",
        fast.stderr
    );
}
