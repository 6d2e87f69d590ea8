//! The SystemTap conformance corpus, semantic part: every `sem/ok` case
//! must pass the checker and every `sem/fail` case must fail with a
//! semantic error (not a parse error), except the cases listed in
//! `check_conformance_exceptions.txt` with a reason each.

mod common;

use std::path::{Path, PathBuf};
use utap_runtime::harness::shell_words;

use utap_compiler::check::{CheckOptions, check};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::source::SourceMap;

/// The semantic cases of the shared conformance corpus.
fn corpus() -> Option<PathBuf> {
    common::shared_dir().map(|d| d.join("conformance/sem"))
}

fn exceptions() -> Vec<String> {
    include_str!("check_conformance_exceptions.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// Parses and checks one case: Ok, Err(parse error text) or Err(semantic).
fn run(path: &Path) -> Result<(), (bool, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let args = std::fs::read_to_string(path.with_extension("args"))
        .map(|l| shell_words(&l))
        .unwrap_or_default();
    let mut map = SourceMap::new();
    let file = map.add(path.display().to_string(), text);
    let mut ids = NodeIds::default();
    let opts = ParseOptions {
        args,
        ..Default::default()
    };
    let script = parse_file(&map, file, &opts, &mut ids)
        .map_err(|d| (false, utap_compiler::diag::render_all(&d, &map, false)))?;
    check(&mut map, script, &CheckOptions::default(), &mut ids)
        .map(|_| ())
        .map_err(|d| {
            let semantic = d.iter().any(|d| d.category == "semantic error");
            (semantic, utap_compiler::diag::render_all(&d, &map, false))
        })
}

fn cases(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "stp"))
        .collect();
    v.sort();
    v
}

#[test]
fn sem_ok_cases_pass_the_checker() {
    let Some(root) = corpus() else {
        common::skipped("sem_ok_cases_pass_the_checker");
        return;
    };
    let skip = exceptions();
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in cases(&root.join("ok")) {
        let name = format!("ok/{}", case.file_name().unwrap().to_string_lossy());
        match (run(&case), skip.contains(&name)) {
            (Ok(()), false) => passed += 1,
            (Ok(()), true) => {
                failures.push(format!("{name}: passes but is listed as an exception"))
            }
            (Err(_), true) => {}
            (Err((_, msg)), false) => failures.push(format!("{name}:\n{msg}")),
        }
    }
    eprintln!("sem/ok: {passed} passed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sem_fail_cases_fail_with_a_semantic_error() {
    let Some(root) = corpus() else {
        common::skipped("sem_fail_cases_fail_with_a_semantic_error");
        return;
    };
    let skip = exceptions();
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in cases(&root.join("fail")) {
        let name = format!("fail/{}", case.file_name().unwrap().to_string_lossy());
        let ok = matches!(run(&case), Err((true, _)));
        match (ok, skip.contains(&name)) {
            (true, false) => passed += 1,
            (true, true) => failures.push(format!(
                "{name}: fails correctly but is listed as an exception"
            )),
            (false, true) => {}
            (false, false) => failures.push(format!("{name}: {:?}", run(&case).err())),
        }
    }
    eprintln!("sem/fail: {passed} rejected");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn shell_words_split_like_sh() {
    assert_eq!(
        shell_words(r#"'begin,end' '{log ("hello\n")}' x"#),
        vec!["begin,end", r#"{log ("hello\n")}"#, "x"]
    );
}

/// Every `run/` case (what the codegen executes) passes the checker too.
#[test]
fn run_cases_pass_the_checker() {
    let Some(root) = corpus() else {
        common::skipped("run_cases_pass_the_checker");
        return;
    };
    let mut failures = Vec::new();
    let cases = cases(&root.join("../run"));
    for case in &cases {
        if let Err((_, msg)) = run(case) {
            failures.push(format!("{}:\n{msg}", case.display()));
        }
    }
    assert!(cases.len() >= 100, "{} run cases", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The project's examples check (guru mode: fault injection needs it).
#[test]
fn examples_pass_the_checker() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut failures = Vec::new();
    for path in entries.flatten().map(|e| e.path()) {
        if path.extension().is_none_or(|e| e != "stp") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut map = SourceMap::new();
        let file = map.add(path.display().to_string(), text);
        let mut ids = NodeIds::default();
        let popts = ParseOptions {
            guru: true,
            ..Default::default()
        };
        let result = parse_file(&map, file, &popts, &mut ids).and_then(|script| {
            let opts = CheckOptions {
                guru: true,
                ..Default::default()
            };
            check(&mut map, script, &opts, &mut ids).map(|_| ())
        });
        if let Err(d) = result {
            failures.push(utap_compiler::diag::render_all(&d, &map, false));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
