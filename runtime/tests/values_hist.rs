//! Statistics and histograms against the conformance corpus: each test
//! feeds the same values as a `run/` script, prints with the runtime's
//! API what the script prints, and compares with the expected `.out`
//! byte for byte.

#[path = "common/corpus.rs"]
mod corpus;
use corpus::skip_without_corpus;

use utap_runtime::format::{Arg, PRINT_BUFFER_SIZE, format_into, parse};
use utap_runtime::values::map::{Key, KeyPart, MapLimit, Sort, SortBy, StatMap};
use utap_runtime::values::stats::{HistSpec, Stat, StatOp, StatSpec};

fn expected(name: &str) -> String {
    let path = corpus::run_file(&format!("{name}.out"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn printf(out: &mut Vec<u8>, fmt: &str, args: &[Arg<'_>]) {
    format_into(out, &parse(fmt).unwrap(), args, PRINT_BUFFER_SIZE);
}

fn stat(hist: HistSpec, values: impl IntoIterator<Item = i64>) -> Stat {
    let mut s = Stat::new(StatSpec {
        hist,
        variance_shift: 0,
    });
    for v in values {
        s.add(v);
    }
    s
}

fn linear(start: i64, stop: i64, interval: i64) -> HistSpec {
    HistSpec::linear(start, stop, interval).unwrap()
}

fn assert_text(got: &[u8], name: &str) {
    let got = String::from_utf8_lossy(got);
    let want = expected(name);
    assert!(got == want, "{name}: got\n{got}\nwant\n{want}");
}

/// run/elision*.stp with HIST_ELISION = `elision`.
fn elision_case(name: &str, elision: i64) {
    let a = linear(0, 1500, 50);
    let b = linear(-100, 100, 10);
    let groups: [(HistSpec, &[i64]); 11] = [
        (a, &[444, 999]),
        (a, &[444, 500]),
        (a, &[0]),
        (a, &[50]),
        (a, &[1450]),
        (a, &[1500]),
        (b, &[-10]),
        (b, &[0]),
        (HistSpec::Log, &[128]),
        (HistSpec::Log, &[0]),
        (HistSpec::Log, &[-2, -4096]),
    ];
    let mut out = Vec::new();
    for (spec, vals) in groups {
        stat(spec, vals.iter().copied())
            .print_histogram(&mut out, elision)
            .unwrap();
    }
    assert_text(&out, name);
}

#[test]
fn elision_default() {
    skip_without_corpus!("elision_default");
    elision_case("elision", 2);
}
#[test]
fn elision_0() {
    skip_without_corpus!("elision_0");
    elision_case("elision_0", 0);
}
#[test]
fn elision_1() {
    skip_without_corpus!("elision_1");
    elision_case("elision_1", 1);
}
#[test]
fn elision_3() {
    skip_without_corpus!("elision_3");
    elision_case("elision_3", 3);
}
#[test]
fn elision_off() {
    skip_without_corpus!("elision_off");
    elision_case("elision_m1", -1);
}

/// The `count= sum= min= max= avg=` lines, then the histogram.
fn summary_and_hist(s: &Stat, out: &mut Vec<u8>) {
    for (label, op) in [
        ("count", StatOp::Count),
        ("sum", StatOp::Sum),
        ("min", StatOp::Min),
        ("max", StatOp::Max),
        ("avg", StatOp::Avg),
    ] {
        printf(
            out,
            &format!("{label}=%d\n"),
            &[Arg::Long(s.get(op).unwrap())],
        );
    }
    s.print_histogram(out, 2).unwrap();
}

fn times_table() -> Vec<i64> {
    let mut v = Vec::new();
    for key in 0..100 {
        for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 12, 13, 14, 15] {
            v.push(key * m);
        }
    }
    v
}

#[test]
fn linear_times_table() {
    skip_without_corpus!("linear_times_table");
    let mut out = Vec::new();
    summary_and_hist(&stat(linear(0, 1500, 50), times_table()), &mut out);
    assert_text(&out, "linear");
}

#[test]
fn linear_overunder() {
    skip_without_corpus!("linear_overunder");
    let mut out = Vec::new();
    summary_and_hist(&stat(linear(250, 1000, 50), times_table()), &mut out);
    assert_text(&out, "linear_overunder");
}

#[test]
fn linear_over() {
    skip_without_corpus!("linear_over");
    let mut out = Vec::new();
    summary_and_hist(&stat(linear(0, 100, 10), 1000..10000), &mut out);
    assert_text(&out, "linear_over");
}

#[test]
fn linear_under() {
    skip_without_corpus!("linear_under");
    let mut out = Vec::new();
    summary_and_hist(&stat(linear(1800, 2500, 100), 0..100), &mut out);
    assert_text(&out, "linear_under");
}

#[test]
fn linear_empty() {
    skip_without_corpus!("linear_empty");
    let s = stat(linear(0, 1500, 50), []);
    let mut out = Vec::new();
    printf(&mut out, "count=%d\n", &[Arg::Long(s.count())]);
    let mut hist = Vec::new();
    assert_eq!(
        s.print_histogram(&mut hist, 2).unwrap_err().to_string(),
        "empty aggregate"
    );
    assert_text(&out, "linear_empty");
}

#[test]
fn linear_nearlyempty() {
    skip_without_corpus!("linear_nearlyempty");
    let s = stat(linear(0, 1500, 50), [444, 999]);
    let mut out = Vec::new();
    summary_and_hist(&s, &mut out);
    assert_text(&out, "linear_nearlyempty");
}

#[test]
fn linear_large() {
    skip_without_corpus!("linear_large");
    let mut vals = vec![10000000; 3];
    vals.extend([100000000; 2]);
    vals.extend([500000000; 5]);
    vals.extend([1000000000; 4]);
    vals.push(10000000000);
    let mut out = Vec::new();
    summary_and_hist(&stat(linear(0, 1000000000, 100000000), vals), &mut out);
    assert_text(&out, "linear_large");
}

#[test]
fn linear_large_neg() {
    skip_without_corpus!("linear_large_neg");
    let mut vals = vec![0, -100000000, -100000000];
    vals.extend([-500000000; 5]);
    vals.extend([-1000000000; 4]);
    vals.push(-10000000000);
    let mut out = Vec::new();
    summary_and_hist(&stat(linear(-1000000000, 0, 100000000), vals), &mut out);
    assert_text(&out, "linear_large_neg");
}

#[test]
fn log() {
    skip_without_corpus!("log");
    let mut vals: Vec<i64> = (0..63).map(|i| 1i64 << i).collect();
    vals.extend((0..64).map(|i| (1i64 << i).wrapping_neg()));
    vals.extend([0; 20]);
    let mut out = Vec::new();
    stat(HistSpec::Log, vals)
        .print_histogram(&mut out, 2)
        .unwrap();
    assert_text(&out, "log");
}

#[test]
fn log_edge() {
    skip_without_corpus!("log_edge");
    let groups: [&[i64]; 4] = [&[-1, 1], &[0], &[i64::MAX], &[1, 2, 3, 4]];
    let mut out = Vec::new();
    for (n, vals) in groups.iter().enumerate() {
        let s = stat(HistSpec::Log, vals.iter().copied());
        s.print_histogram(&mut out, 2).unwrap();
        for (bucket, _) in s.buckets().iter().enumerate() {
            let count = s.bucket(bucket as i64).unwrap();
            if count != 0 {
                printf(
                    &mut out,
                    "bucket %d: %d\n",
                    &[Arg::Long(bucket as i64), Arg::Long(count)],
                );
            }
        }
        if n < 3 {
            printf(&mut out, "\n\n\n", &[]);
        }
    }
    assert_text(&out, "log_edge");
}

#[test]
fn hist_in_string() {
    skip_without_corpus!("hist_in_string");
    // print(sprint(@hist_linear(l, 0, 0, 1))) with 128 zeros.
    let s = stat(linear(0, 0, 1), [0; 128]);
    let mut text = Vec::new();
    s.print_histogram(&mut text, 2).unwrap();
    text.truncate(511);
    assert_text(&text, "hist_in_string");
}

#[test]
fn ix_hist() {
    skip_without_corpus!("ix_hist");
    let mut foo = StatMap::new(MapLimit::default());
    let spec = StatSpec {
        hist: HistSpec::Log,
        variance_shift: 0,
    };
    for i in 0..5i64 {
        for j in 0..i * 128 {
            foo.get_or_insert_with(&[Key::Long(i)], || Stat::new(spec))
                .unwrap()
                .add(i * j);
        }
    }
    let mut ids = Vec::new();
    let by_key = Sort {
        by: SortBy::Key(0),
        descending: false,
    };
    foo.select(None, Some(by_key), None, &mut ids);
    let mut out = Vec::new();
    for id in ids {
        assert!(matches!(foo.key(id).unwrap(), [KeyPart::Long(_)]));
        foo.value(id).unwrap().print_histogram(&mut out, 2).unwrap();
    }
    assert_text(&out, "ix_hist");
}

#[test]
fn foreach_value_hist_buckets() {
    // run/foreach_value: strlen of "one".."five" into a log histogram.
    let s = stat(HistSpec::Log, [3, 3, 5, 4, 4]);
    let nonzero: Vec<(usize, i64)> = s
        .buckets()
        .iter()
        .enumerate()
        .filter(|(_, n)| **n != 0)
        .map(|(i, n)| (i, *n))
        .collect();
    assert_eq!(nonzero, [(66, 2), (67, 3)]);
}

/// `@variance` against SystemTap's own testsuite expectations
/// (systemtap.maps/*.exp and PR31740.exp of current SystemTap).
#[test]
fn variance_as_systemtap_testsuite() {
    let var = |shift: u32, vals: &[i64]| {
        let mut s = Stat::new(StatSpec {
            hist: HistSpec::None,
            variance_shift: shift,
        });
        for &v in vals {
            s.add(v);
        }
        s.variance().unwrap()
    };
    assert_eq!(var(7, &[1, 2, 3]), 1);
    assert_eq!(var(0, &times_table()), 450768);
    assert_eq!(var(0, &(0..100).collect::<Vec<_>>()), 5741);
    assert_eq!(var(0, &(1000..10000).collect::<Vec<_>>()), 47241750);
    assert_eq!(var(7, &[444, 999]), 154012);
    // Elements of statistics arrays skip the scalar's aggregation step.
    let mut foo = StatMap::new(MapLimit::default());
    for v in [100, -1, -2] {
        for i in 0..5 {
            foo.stat_add(
                &[Key::Long(i)],
                StatSpec::PLAIN,
                if v == -1 { i } else { v },
            )
            .unwrap();
        }
    }
    let ix: Vec<i64> = (0..5)
        .map(|i| foo.get(&[Key::Long(i)]).unwrap().variance().unwrap())
        .collect();
    assert_eq!(ix, [3410, 3429, 3355, 3348, 3276]);
    let elem = |shift: u32, vals: &[i64]| {
        let spec = StatSpec {
            hist: HistSpec::Log,
            variance_shift: shift,
        };
        let mut m = StatMap::new(MapLimit::default());
        for &v in vals {
            m.get_or_insert_with(&[Key::Str(b"k")], || Stat::new(spec))
                .unwrap()
                .add(v);
        }
        m.get(&[Key::Str(b"k")]).unwrap().variance().unwrap()
    };
    // PR31740: stats["k"] <<< 1, 2, 3; @variance(stats["k"], 7).
    assert_eq!(elem(7, &[1, 2, 3]), 1);
    // foreach_limit2.exp: agg_array[9] and agg_array[1].
    assert_eq!(elem(0, &[18, 9, 54, 1, 2, 18, 18, 18, 18, 18]), 216);
    assert_eq!(elem(0, &[40, 20, 120, 2, 3, 40, 40, 40, 40]), 1209);
    // The same values as a scalar go through the aggregation step.
    assert_eq!(var(0, &[100, 0, -2]), 3411);
}
