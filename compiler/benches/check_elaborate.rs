//! Elaboration time of a script that pulls in the whole stdlib (every
//! syscall alias, entry and return, and the signal tapset): parse + check,
//! median of 21 runs. Goal (issue 3): at most 10 ms.
//!
//! Run: `cargo bench -p utap-compiler --bench check_elaborate`

use std::time::{Duration, Instant};

use utap_compiler::check::{CheckOptions, check};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::source::SourceMap;

const SCRIPT: &str = "global calls\n\
probe syscall.*, syscall.*.return { calls[name]++; if (pid() == 0) println(argstr) }\n\
probe signal.* { println(name) }\n";

/// A typical script: two syscall aliases.
const TYPICAL: &str =
    "probe syscall.openat, syscall.close { printf(\"%s(%s)\\n\", name, argstr) }\n";

fn elaborate(src: &str) -> usize {
    let mut map = SourceMap::new();
    let file = map.add("bench.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids).expect("parses");
    let out = check(&mut map, script, &CheckOptions::default(), &mut ids).expect("checks");
    out.program.probes.len()
}

/// Parsing the syscall tapset alone, for comparison.
fn parse_syscalls() -> Duration {
    let text = include_str!("../../stdlib/syscalls.stp");
    let mut map = SourceMap::new();
    let file = map.add("syscalls.stp", text);
    let t = Instant::now();
    let opts = ParseOptions {
        tapset: true,
        ..Default::default()
    };
    parse_file(&map, file, &opts, &mut NodeIds::default()).expect("parses");
    t.elapsed()
}

/// Indexing the embedded stdlib (done by every check).
fn index_stdlib() -> Duration {
    let t = Instant::now();
    std::hint::black_box(utap_compiler::check::tapsets::Library::new(true, &[]).expect("stdlib"));
    t.elapsed()
}

fn main() {
    let mut ix: Vec<Duration> = (0..11).map(|_| index_stdlib()).collect();
    ix.sort();
    println!(
        "index the stdlib: median {:.3} ms",
        ix[5].as_secs_f64() * 1e3
    );
    let mut p: Vec<Duration> = (0..11).map(|_| parse_syscalls()).collect();
    p.sort();
    println!(
        "parse stdlib/syscalls.stp alone: median {:.2} ms",
        p[5].as_secs_f64() * 1e3
    );
    for (what, src) in [("whole stdlib", SCRIPT), ("typical script", TYPICAL)] {
        let probes = elaborate(src);
        let mut times: Vec<Duration> = (0..21)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(elaborate(src));
                t.elapsed()
            })
            .collect();
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "elaborate {what} ({probes} probes): median {:.2} ms (min {:.2} ms, max {:.2} ms)",
            median.as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3
        );
    }
}
