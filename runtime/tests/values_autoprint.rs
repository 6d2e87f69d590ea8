//! The exit-time printing of written-but-unread globals against the
//! conformance corpus (the lines the synthetic end probes print).

#[path = "common/corpus.rs"]
mod corpus;
use corpus::skip_without_corpus;

use utap_runtime::values::autoprint::{GlobalValue, autoprint};
use utap_runtime::values::map::{Key, LongMap, MapLimit, StatMap, StrMap};
use utap_runtime::values::stats::{Stat, StatSpec};

fn expected(name: &str) -> String {
    std::fs::read_to_string(corpus::run_file(&format!("{name}.out"))).unwrap()
}

/// The last `lines` lines of a case's expected output.
fn expected_tail(name: &str, lines: usize) -> String {
    let all = expected(name);
    let v: Vec<&str> = all.lines().collect();
    let mut tail = v[v.len() - lines..].join("\n");
    tail.push('\n');
    tail
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap()
}

#[test]
fn global_end() {
    skip_without_corpus!("global_end");
    let mut alpha = LongMap::default();
    for (s, n, v) in [("one", 1, 1), ("one", 2, 2), ("two", 1, 3), ("two", 2, 4)] {
        alpha
            .set(&[Key::Str(s.as_bytes()), Key::Long(n)], v)
            .unwrap();
    }
    let mut iota = StrMap::default();
    iota.set(&[Key::Str(b"one")], b"eleven".to_vec()).unwrap();
    iota.set(&[Key::Str(b"two")], b"twelve".to_vec()).unwrap();
    let mut phi = Stat::new(StatSpec::PLAIN);
    for v in 1..=4 {
        phi.add(v);
    }
    let mut out = Vec::new();
    autoprint(&mut out, "alpha", GlobalValue::LongMap(&alpha));
    autoprint(
        &mut out,
        "gamma",
        GlobalValue::Str(b"abcdefghijklmnopqrstuvwxyz"),
    );
    autoprint(&mut out, "iota", GlobalValue::StrMap(&iota));
    autoprint(&mut out, "phi", GlobalValue::Stat(&phi));
    assert_eq!(text(out), expected_tail("global_end", 8));
}

#[test]
fn global_end_var() {
    skip_without_corpus!("global_end_var");
    let mut out = Vec::new();
    for (name, v) in [("gs0_save", 41), ("gs2", 4), ("gs3", 4), ("gs4", 5)] {
        autoprint(&mut out, name, GlobalValue::Long(v));
    }
    let mut ga1 = LongMap::default();
    ga1.set(&[Key::Str(b"foo")], 2).unwrap();
    let mut ga2 = LongMap::default();
    ga2.set(&[Key::Str(b"foo")], 1).unwrap();
    autoprint(&mut out, "ga1", GlobalValue::LongMap(&ga1));
    autoprint(&mut out, "ga2", GlobalValue::LongMap(&ga2));
    assert_eq!(text(out), expected_tail("global_end_var", 6));
}

#[test]
fn map_wrap1() {
    skip_without_corpus!("map_wrap1");
    let mut foo = LongMap::new(MapLimit::new(Some(5), true, 2048));
    for i in 0..10 {
        foo.set(&[Key::Long(i)], i).unwrap();
    }
    let mut out = Vec::new();
    autoprint(&mut out, "foo", GlobalValue::LongMap(&foo));
    assert_eq!(text(out), expected("map_wrap1"));
}

#[test]
fn global_stat_empty() {
    skip_without_corpus!("global_stat_empty");
    let mut out = Vec::new();
    autoprint(
        &mut out,
        "var",
        GlobalValue::Stat(&Stat::new(StatSpec::PLAIN)),
    );
    assert_eq!(text(out), expected("global_stat"));
}

#[test]
fn negative_longs_and_stat_arrays() {
    let mut out = Vec::new();
    autoprint(&mut out, "x", GlobalValue::Long(-1));
    autoprint(&mut out, "s", GlobalValue::Str(b""));
    let mut st = StatMap::default();
    for (k, vals) in [(1, &[5][..]), (2, &[1, 2, 3][..]), (3, &[7, 7][..])] {
        for &v in vals {
            st.get_or_insert_with(&[Key::Long(k), Key::Str(b"k")], || {
                Stat::new(StatSpec::PLAIN)
            })
            .unwrap()
            .add(v);
        }
    }
    autoprint(&mut out, "st", GlobalValue::StatMap(&st));
    // Equal values keep insertion order.
    let mut ties = LongMap::default();
    for k in [3, 1, 2] {
        ties.set(&[Key::Long(k)], 0).unwrap();
    }
    autoprint(&mut out, "t", GlobalValue::LongMap(&ties));
    autoprint(&mut out, "empty", GlobalValue::LongMap(&LongMap::default()));
    assert_eq!(
        text(out),
        "x=0xffffffffffffffff\n\
         s=\"\"\n\
         st[2,\"k\"] @count=3 @min=1 @max=3 @sum=6 @avg=2\n\
         st[3,\"k\"] @count=2 @min=7 @max=7 @sum=14 @avg=7\n\
         st[1,\"k\"] @count=1 @min=5 @max=5 @sum=5 @avg=5\n\
         t[3]=0x0\n\
         t[1]=0x0\n\
         t[2]=0x0\n"
    );
}
