//! Parse throughput (lines per second) on a large generated script:
//! `cargo bench -p utap-compiler --bench parse`. A measurement, not a test;
//! the goal is at least 1,000,000 lines/s.

use std::time::Instant;
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::source::SourceMap;

/// A script of about `lines` lines using most of the language.
pub fn generate(lines: usize) -> String {
    let mut s = String::from("global counts, total, hist\n");
    let mut n = 1;
    let mut i = 0;
    while n < lines {
        s.push_str(&format!(
            "probe process.syscall, timer.ms({i}) {{\n\
             \x20 if (pid() != target()) next\n\
             \x20 counts[execname(), $syscall] <<< 1\n\
             \x20 total += $arg1 * 2 + (i{i} - 1) / 3\n\
             \x20 name = sprintf(\"%s-%d\", execname(), tid())\n\
             \x20 foreach ([e, s] in counts- limit 10)\n\
             \x20   printf(\"%s %d %d\\n\", e, s, @count(counts[e, s]))\n\
             \x20 hist <<< total\n\
             }}\n\
             function f{i}:long(a:long, b) {{\n\
             \x20 while (a > 0) {{ a--; b = b . \"x\" }}\n\
             \x20 return a ? 1 : b == \"\" \n\
             }}\n"
        ));
        n += 13;
        i += 1;
    }
    s
}

/// Nanoseconds this thread has run on a CPU (Linux), so that figures taken
/// on a busy machine still mean something.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let text = generate(200_000);
    let lines = text.lines().count();
    let mut map = SourceMap::new();
    let file = map.add("big.stp", text);
    let opts = ParseOptions::default();
    // Warm up, then take the best of a few runs.
    let mut best = f64::MAX;
    let mut best_cpu = f64::MAX;
    for _ in 0..5 {
        let mut ids = NodeIds::default();
        let start = Instant::now();
        let cpu = cpu_ns();
        let script = parse_file(&map, file, &opts, &mut ids).expect("generated script parses");
        let secs = start.elapsed().as_secs_f64();
        best_cpu = best_cpu.min((cpu_ns() - cpu) as f64 / 1e9);
        assert!(!script.items.is_empty());
        best = best.min(secs);
    }
    // Where the time goes. With nothing to preprocess (as here) parse_file
    // streams lexer -> layout -> grammar, so the token passes are timed as
    // that stream, and the rest is the grammar and the checks after it.
    let t = Instant::now();
    let text = map.text(file);
    let tokens =
        utap_compiler::parser::layout::laid_out(utap_compiler::lexer::tokens(text)).count();
    let passes = t.elapsed().as_secs_f64();
    assert!(!utap_compiler::preprocess::may_need(text));
    println!(
        "passes: lex+layout {:.1} ms, grammar+checks {:.1} ms ({} tokens)",
        passes * 1e3,
        (best - passes) * 1e3,
        tokens
    );
    println!(
        "parse: {lines} lines in {:.1} ms: {:.0} lines/s ({:.1} MB/s); on-CPU time {:.1} ms: {:.0} lines/s",
        best * 1e3,
        lines as f64 / best,
        map.text(file).len() as f64 / best / 1e6,
        best_cpu * 1e3,
        lines as f64 / best_cpu
    );
}
