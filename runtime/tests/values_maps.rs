//! Arrays against the conformance corpus: run/map_hash_* fill an array of
//! exactly MAXMAPENTRIES (2048) entries, then either let the exit-time
//! printing show it (sorted by value, all ties: insertion order) or walk it
//! with `foreach` sorted by the first key. The assignments are read from
//! the `.stp` files themselves.

#[path = "common/corpus.rs"]
mod corpus;
use corpus::skip_without_corpus;

use utap_runtime::format::{Arg, PRINT_BUFFER_SIZE, format_into, parse};
use utap_runtime::values::autoprint::{GlobalValue, autoprint};
use utap_runtime::values::map::{EntryId, Key, KeyPart, LongMap, MapLimit, Sort, SortBy, StatMap};
use utap_runtime::values::stats::{StatOp, StatSpec};

fn case_file(name: &str) -> String {
    std::fs::read_to_string(corpus::run_file(name)).unwrap()
}

/// A key column as written in the script: a number or a string literal.
enum Lit {
    Long(i64),
    Str(String),
}

impl Lit {
    fn key(&self) -> Key<'_> {
        match self {
            Lit::Long(v) => Key::Long(*v),
            Lit::Str(s) => Key::Str(s.as_bytes()),
        }
    }
}

/// The `array[k1, k2] = v;` / `array[k] <<< v;` lines of a case: keys and
/// value. (The corpus strings hold no commas, quotes or escapes.)
fn assignments(stp: &str) -> Vec<(Vec<Lit>, i64)> {
    stp.lines()
        .filter_map(|line| {
            let line = line.trim().strip_prefix("array[")?;
            let (keys, rest) = line.split_once(']')?;
            let value = rest
                .trim()
                .trim_start_matches("<<<")
                .trim_start_matches('=')
                .trim()
                .trim_end_matches(';');
            let keys = keys
                .split(',')
                .map(|k| match k.strip_prefix('"') {
                    Some(s) => Lit::Str(s.trim_end_matches('"').to_string()),
                    None => Lit::Long(k.parse().unwrap()),
                })
                .collect();
            Some((keys, value.parse().unwrap()))
        })
        .collect()
}

fn long_case(name: &str) {
    let stp = case_file(&format!("{name}.stp"));
    let mut array = LongMap::new(MapLimit::default());
    for (keys, v) in assignments(&stp) {
        let keys: Vec<Key> = keys.iter().map(Lit::key).collect();
        array.set(&keys, v).unwrap();
    }
    assert_eq!(array.len(), 2048);
    // One more key does not fit.
    let extra: Vec<Key> = (0..array.iter().next().unwrap().0.len())
        .map(|_| Key::Str(b"not in the corpus"))
        .collect();
    assert_eq!(
        array.set(&extra, 1).unwrap_err().to_string(),
        "Array overflow, check MAXMAPENTRIES"
    );
    let mut out = Vec::new();
    autoprint(&mut out, "array", GlobalValue::LongMap(&array));
    assert!(
        out == case_file(&format!("{name}.out")).into_bytes(),
        "{name} differs"
    );
}

#[test]
fn map_hash_ii() {
    skip_without_corpus!("map_hash_ii");
    long_case("map_hash_II");
}
#[test]
fn map_hash_si() {
    skip_without_corpus!("map_hash_si");
    long_case("map_hash_SI");
}
#[test]
fn map_hash_ssi() {
    skip_without_corpus!("map_hash_ssi");
    long_case("map_hash_SSI");
}

fn stat_case(name: &str, format: &str) {
    let stp = case_file(&format!("{name}.stp"));
    let mut array = StatMap::new(MapLimit::default());
    for (keys, v) in assignments(&stp) {
        let keys: Vec<Key> = keys.iter().map(Lit::key).collect();
        array.stat_add(&keys, StatSpec::PLAIN, v).unwrap();
    }
    let mut ids: Vec<EntryId> = Vec::new();
    let by_first_key = Sort {
        by: SortBy::Key(0),
        descending: false,
    };
    array.select(None, Some(by_first_key), None, &mut ids);
    let pieces = parse(format).unwrap();
    let mut out = Vec::new();
    for id in ids {
        let mut args: Vec<Arg> = array
            .key(id)
            .unwrap()
            .iter()
            .map(|k| match k {
                KeyPart::Long(v) => Arg::Long(*v),
                KeyPart::Str(s) => Arg::Str(s),
            })
            .collect();
        let s = array.value(id).unwrap();
        for op in [
            StatOp::Count,
            StatOp::Sum,
            StatOp::Avg,
            StatOp::Min,
            StatOp::Max,
        ] {
            args.push(Arg::Long(s.get(op).unwrap()));
        }
        format_into(&mut out, &pieces, &args, PRINT_BUFFER_SIZE);
    }
    assert!(
        out == case_file(&format!("{name}.out")).into_bytes(),
        "{name} differs"
    );
}

#[test]
fn map_hash_stat_ii() {
    skip_without_corpus!("map_hash_stat_ii");
    stat_case(
        "map_hash_stat_II",
        "array[%d]: count:%d  sum:%d  avg:%d  min:%d  max:%d\n",
    );
}
#[test]
fn map_hash_stat_si() {
    skip_without_corpus!("map_hash_stat_si");
    stat_case(
        "map_hash_stat_SI",
        "array[\"%s\"]: count:%d  sum:%d  avg:%d  min:%d  max:%d\n",
    );
}
#[test]
fn map_hash_stat_ssi() {
    skip_without_corpus!("map_hash_stat_ssi");
    stat_case(
        "map_hash_stat_SSI",
        "array[\"%s\", \"%s\"]: count:%d  sum:%d  avg:%d  min:%d  max:%d\n",
    );
}
