//! The value runtime against plain Rust with std collections on the
//! issue's handler benchmark: 10 million `a[i % 1000]++` and 10 million
//! string concatenations. Prints times and ratios (utap / std), each best
//! of three. Run: cargo bench -p utap-runtime --bench values

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use utap_runtime::values::map::{Key, LongMap, MapLimit, StrMap};
use utap_runtime::values::strings;

const N: i64 = 10_000_000;

fn best_of_3(mut f: impl FnMut() -> i64) -> (Duration, i64) {
    let mut best = Duration::MAX;
    let mut result = 0;
    for _ in 0..3 {
        let start = Instant::now();
        result = black_box(f());
        best = best.min(start.elapsed());
    }
    (best, result)
}

fn report(what: &str, ours: (Duration, i64), std: (Duration, i64)) {
    assert_eq!(ours.1, std.1, "{what}: different results");
    println!(
        "{what:<44} utap {:>8.1} ms   std {:>8.1} ms   ratio {:.2}",
        ours.0.as_secs_f64() * 1e3,
        std.0.as_secs_f64() * 1e3,
        ours.0.as_secs_f64() / std.0.as_secs_f64()
    );
}

fn map_increments() {
    let ours = best_of_3(|| {
        let mut a = LongMap::new(MapLimit::default());
        for i in 0..N {
            let k = [Key::Long(black_box(i) % 1000)];
            *a.get_or_insert_with(&k, || 0).unwrap() += 1;
        }
        *a.get(&[Key::Long(7)]).unwrap()
    });
    let std = best_of_3(|| {
        let mut a: HashMap<i64, i64> = HashMap::new();
        for i in 0..N {
            *a.entry(black_box(i) % 1000).or_insert(0) += 1;
        }
        a[&7]
    });
    report("a[i % 1000]++ (long key)", ours, std);
}

fn map_string_keys() {
    let names: Vec<String> = (0..1000).map(|i| format!("process-{i}")).collect();
    let ours = best_of_3(|| {
        let mut a = LongMap::new(MapLimit::default());
        for i in 0..N {
            let name = names[(black_box(i) % 1000) as usize].as_bytes();
            *a.get_or_insert_with(&[Key::Str(name)], || 0).unwrap() += 1;
        }
        *a.get(&[Key::Str(b"process-7")]).unwrap()
    });
    let std = best_of_3(|| {
        let mut a: HashMap<String, i64> = HashMap::new();
        for i in 0..N {
            let name = &names[(black_box(i) % 1000) as usize];
            // Lookup by &str first, as a careful Rust program would.
            match a.get_mut(name.as_str()) {
                Some(v) => *v += 1,
                None => {
                    a.insert(name.clone(), 1);
                }
            }
        }
        a["process-7"]
    });
    report("a[name]++ (string key)", ours, std);
}

fn string_concat() {
    let max = strings::DEFAULT_MAXSTRINGLEN;
    let ours = best_of_3(|| {
        let mut s = Vec::with_capacity(max);
        let mut total = 0i64;
        for i in 0..N {
            let tail: &[u8] = if black_box(i) & 1 == 0 {
                b"-even"
            } else {
                b"-odd"
            };
            strings::concat(&mut s, b"pid 4242 comm bash", tail, max);
            total += s.len() as i64;
        }
        total
    });
    let std = best_of_3(|| {
        let mut s = String::with_capacity(max);
        let mut total = 0i64;
        for i in 0..N {
            let tail = if black_box(i) & 1 == 0 {
                "-even"
            } else {
                "-odd"
            };
            s.clear();
            s.push_str("pid 4242 comm bash");
            s.push_str(tail);
            total += s.len() as i64;
        }
        total
    });
    report("s = \"...\" . tail", ours, std);
}

fn string_values() {
    let ours = best_of_3(|| {
        let mut a = StrMap::new(MapLimit::default());
        let mut total = 0i64;
        for i in 0..N {
            let k = [Key::Long(black_box(i) % 1000)];
            let v = a.get_or_insert_with(&k, Vec::new).unwrap();
            strings::assign(v, b"last value", strings::DEFAULT_MAXSTRINGLEN);
            total += v.len() as i64;
        }
        total
    });
    let std = best_of_3(|| {
        let mut a: HashMap<i64, String> = HashMap::new();
        let mut total = 0i64;
        for i in 0..N {
            let v = a.entry(black_box(i) % 1000).or_default();
            v.clear();
            v.push_str("last value");
            total += v.len() as i64;
        }
        total
    });
    report("a[i % 1000] = \"...\" (string value)", ours, std);
}

fn main() {
    println!("{N} operations each, best of 3:");
    map_increments();
    map_string_keys();
    string_concat();
    string_values();
}
