//! Benchmarks of the native-code path, printed as ratios (not timed tests):
//!
//! 1. compile latency: source → native code of a 100-line script plus the
//!    stdlib functions it pulls in (parse, check, Cranelift), goal ≤ 20 ms;
//! 2. handler speed: a `begin` probe doing 10 million array increments and
//!    string concatenations, against the same work in plain Rust with std
//!    collections, goal ≤ 3x Rust's time.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use utap_codegen::{Options, compile};
use utap_compiler::check::{CheckOptions, check};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::source::SourceMap;
use utap_runtime::script::sink::BufferSink;
use utap_runtime::script::{Limits, RuntimeOptions, ScriptRuntime};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A 100-line script: functions, arrays, statistics, printf, strings,
/// timers and stdlib calls.
fn hundred_line_script() -> String {
    let mut s = String::from("global counts, names, lat, total\n");
    for i in 0..10 {
        s += &format!(
            "function f{i}:long (x:long, tag:string) {{\n  counts[tag, x % 7] += x\n  names[x] = sprintf(\"%s-%d\", tag, x)\n  if (x > {i}) return x * 2 + strlen(tag)\n  return big_endian4(x) & 0xff\n}}\n"
        );
    }
    for i in 0..6 {
        s += &format!(
            "probe timer.ms({}) {{\n  total += f{i}({i}, \"t{i}\")\n  lat <<< total\n  foreach ([t, k] in counts- limit 3) printf(\"%s %d %d\\n\", t, k, counts[t, k])\n  if (total > 1000) exit()\n}}\n",
            10 + i
        );
    }
    s += "probe end {\n  print(@hist_log(lat))\n  printf(\"%d %s\\n\", total, substr(names[1], 0, 3))\n}\n";
    while s.lines().count() < 100 {
        s += "probe never { total = total + 1 }\n";
    }
    s
}

fn compile_once(src: &str, limits: &Limits) -> utap_codegen::CompiledScript {
    let mut map = SourceMap::new();
    let file = map.add("bench.stp", src.to_string());
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids)
        .unwrap_or_else(|d| panic!("parse: {d:?}"));
    let checked = check(&mut map, script, &CheckOptions::default(), &mut ids)
        .unwrap_or_else(|d| panic!("check: {d:?}"));
    let options = Options {
        limits: limits.clone(),
        keep_ir: false,
    };
    compile(&checked.program, &map, &options).expect("compiles")
}

fn bench_compile() {
    let src = hundred_line_script();
    let limits = Limits::default();
    compile_once(&src, &limits); // warm up
    let times: Vec<Duration> = (0..15)
        .map(|_| {
            let t = Instant::now();
            black_box(compile_once(&src, &limits));
            t.elapsed()
        })
        .collect();
    let m = median(times);
    println!(
        "compile latency: {} lines -> native: median {:.2} ms (goal 20 ms: {:.2}x of budget)",
        src.lines().count(),
        m.as_secs_f64() * 1e3,
        m.as_secs_f64() / 0.020
    );
}

const N: i64 = 10_000_000;

fn handler_script() -> String {
    format!(
        "global a, last\nprobe begin {{\n  p = \"item\"\n  for (i = 0; i < {N}; i++) {{\n    a[i % 1000]++\n    s = p . \"x\"\n  }}\n  last = s\n  printf(\"%d %d %s\\n\", a[0], a[999], last)\n}}\n"
    )
}

fn rust_equivalent() -> String {
    let mut a: HashMap<i64, i64> = HashMap::new();
    let p = String::from("item");
    let mut s = String::new();
    for i in 0..N {
        *a.entry(black_box(i) % 1000).or_insert(0) += 1;
        s = p.clone() + "x";
    }
    format!("{} {} {}\n", a[&0], a[&999], s)
}

fn bench_handler() {
    let limits = Limits {
        max_action: i64::MAX,
        max_action_interruptible: i64::MAX,
        ..Limits::default()
    };
    let compiled = compile_once(&handler_script(), &limits);
    let mut script_times = Vec::new();
    let mut output = String::new();
    for _ in 0..3 {
        let mut rt = ScriptRuntime::new(
            compiled.image.clone(),
            RuntimeOptions {
                limits: limits.clone(),
                ..RuntimeOptions::default()
            },
        );
        let mut sink = BufferSink::default();
        let t = Instant::now();
        rt.run_begin(&mut sink);
        script_times.push(t.elapsed());
        assert!(sink.err.is_empty(), "{:?}", sink.err);
        output = String::from_utf8(sink.out).expect("utf-8");
    }
    let mut rust_times = Vec::new();
    let mut rust_out = String::new();
    for _ in 0..3 {
        let t = Instant::now();
        rust_out = black_box(rust_equivalent());
        rust_times.push(t.elapsed());
    }
    assert_eq!(
        output, rust_out,
        "script and Rust computed different results"
    );
    let (s, r) = (median(script_times), median(rust_times));
    println!(
        "handler speed: {N} array increments + string concatenations: script {:.0} ms, Rust std {:.0} ms: {:.2}x Rust's time (goal <= 3x)",
        s.as_secs_f64() * 1e3,
        r.as_secs_f64() * 1e3,
        s.as_secs_f64() / r.as_secs_f64()
    );
}

fn main() {
    // `cargo test --benches` runs this too: keep that quick.
    if std::env::args().any(|a| a == "--bench") {
        bench_compile();
        bench_handler();
    } else {
        println!("codegen benchmarks: run with `cargo bench -p utap-codegen --bench codegen`");
    }
}
