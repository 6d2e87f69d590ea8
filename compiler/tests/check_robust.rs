//! Bad input never panics the checker: every conformance script, mutated
//! at many places (a byte deleted, a token swapped for another), either
//! checks or gets diagnostics. Deterministic (no randomness).

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use utap_compiler::check::{CheckOptions, check};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::source::SourceMap;

fn corpus_files() -> Vec<PathBuf> {
    let Some(root) = common::shared_dir().map(|d| d.join("conformance")) else {
        common::skipped("mutated_corpus_never_panics");
        return Vec::new();
    };
    let mut files = Vec::new();
    for dir in ["sem/ok", "sem/fail", "run"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            files.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "stp")),
            );
        }
    }
    files.sort();
    files
}

fn check_text(text: &str, guru: bool) {
    let mut map = SourceMap::new();
    let file = map.add("m.stp", text);
    let mut ids = NodeIds::default();
    let popts = ParseOptions {
        guru,
        ..Default::default()
    };
    if let Ok(script) = parse_file(&map, file, &popts, &mut ids) {
        let opts = CheckOptions {
            guru,
            ..Default::default()
        };
        let _ = check(&mut map, script, &opts, &mut ids);
    }
}

/// Replacements that turn valid code into the usual mistakes.
const SWAPS: &[(&str, &str)] = &[
    ("=", "<<<"),
    ("<<<", "="),
    ("+", "."),
    (".", "+"),
    ("begin", "process.syscall"),
    ("end", "timer.ms(0)"),
    ("]", ", 1]"),
    ("global", "private global"),
    ("(", "(@count("),
    ("printf(\"", "printf(\"%s%d"),
    ("$", "$arg9"),
];

#[test]
fn mutated_corpus_never_panics() {
    let files = corpus_files();
    let mut cases = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut variants = Vec::new();
        let step = (text.len() / 4).max(1);
        for at in (0..text.len()).step_by(step) {
            if text.is_char_boundary(at) && text.is_char_boundary(at + 1) {
                variants.push(format!("{}{}", &text[..at], &text[at + 1..]));
            }
        }
        for (from, to) in SWAPS {
            if let Some(at) = text.find(from) {
                variants.push(format!("{}{to}{}", &text[..at], &text[at + from.len()..]));
            }
        }
        for (i, v) in variants.iter().enumerate() {
            cases += 1;
            let guru = i % 2 == 1;
            let r = catch_unwind(AssertUnwindSafe(|| check_text(v, guru)));
            assert!(r.is_ok(), "panic on a mutation of {}:\n{v}", path.display());
        }
    }
    eprintln!("{cases} mutated scripts checked");
}
