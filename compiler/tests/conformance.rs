//! The shared conformance corpus against the front end: every `parse/ok`
//! file parses and round-trips through the canonical printer, every
//! `parse/fail` file is rejected with a diagnostic (no panic), and the
//! `sem/*` and `run/` files, which must all parse, parse and round-trip too.
//! Cases we believe wrong for the SystemTap we track are listed with their
//! reason in `tests/parse-exceptions.txt`; any other mismatch fails.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use utap_compiler::diag;
use utap_compiler::print;
use utap_runtime::harness::shell_words;

fn exceptions() -> BTreeMap<String, String> {
    let text = include_str!("parse-exceptions.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (case, reason) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (case.to_string(), reason.trim().to_string())
        })
        .collect()
}

fn cases(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "stp"));
    files.sort();
    files
}

fn args_of(stp: &Path) -> Vec<String> {
    std::fs::read_to_string(stp.with_extension("args"))
        .map(|l| shell_words(l.trim_end_matches('\n')))
        .unwrap_or_default()
}

/// Parses a corpus file; on success also checks the round trip.
fn check_file(path: &Path) -> Result<(), String> {
    let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
    let opts = options(args_of(path));
    let name = path.display().to_string();
    let (map, result) = parse_with(&name, &text, &opts);
    let script = result.map_err(|d| diag::render_all(&d, &map, false))?;
    let printed = print::script(&script);
    // The canonical text has no arguments left to substitute.
    let (map2, again) = parse_with("printed.stp", &printed, &options(Vec::new()));
    let script2 = again.map_err(|d| {
        format!(
            "canonical text does not parse:\n{printed}\n{}",
            diag::render_all(&d, &map2, false)
        )
    })?;
    if shape(&script) != shape(&script2) {
        return Err(format!(
            "re-parsing the canonical text gives another tree:\n{printed}"
        ));
    }
    let printed2 = print::script(&script2);
    if printed != printed2 {
        return Err(format!(
            "printing is not stable:\n{printed}\n---\n{printed2}"
        ));
    }
    Ok(())
}

fn key(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap().display().to_string()
}

#[test]
fn conformance_corpus() {
    let Some(shared) = shared_dir() else {
        common::skipped("conformance_corpus");
        return;
    };
    let root = shared.join("conformance");
    let exceptions = exceptions();
    let mut used = Vec::new();
    let mut failures = Vec::new();
    let mut counts = BTreeMap::new();
    for (dir, should_parse) in [
        ("parse/ok", true),
        ("parse/fail", false),
        ("sem/ok", true),
        ("sem/fail", true),
        ("run", true),
    ] {
        let (mut passed, mut excepted, mut total) = (0, 0, 0);
        for path in cases(&root.join(dir)) {
            total += 1;
            let case = key(&root, &path);
            let outcome = std::panic::catch_unwind(|| check_file(&path));
            let ok = match outcome {
                Err(_) => {
                    failures.push(format!("{case}: PANIC"));
                    continue;
                }
                Ok(Ok(())) => should_parse,
                Ok(Err(msg)) => {
                    if should_parse {
                        if exceptions.contains_key(&case) {
                            used.push(case.clone());
                            excepted += 1;
                        } else {
                            failures.push(format!("{case}: should parse:\n{msg}"));
                        }
                        continue;
                    }
                    if msg.is_empty() || !msg.contains("error") {
                        failures.push(format!("{case}: rejected without a diagnostic"));
                        continue;
                    }
                    true
                }
            };
            if ok {
                passed += 1;
            } else if exceptions.contains_key(&case) {
                used.push(case.clone());
                excepted += 1;
            } else {
                failures.push(format!("{case}: should be rejected but parses"));
            }
        }
        counts.insert(dir, (passed, excepted, total));
    }
    for (dir, (passed, excepted, total)) in &counts {
        println!("{dir}: {passed}/{total} as expected, {excepted} listed exceptions");
    }
    for case in exceptions.keys() {
        if !used.contains(case) {
            failures.push(format!(
                "{case}: listed as an exception but behaves as the corpus says"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
