//! A load of many items of one tapset file is parsed as two halves on two
//! threads (`check::Loader::parse_halves`): the program and the diagnostics
//! must be those of one parse of the file.

use std::path::PathBuf;

use utap_compiler::check::{self, CheckOptions};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::program::*;
use utap_compiler::source::SourceMap;

/// A tapset of `n` aliases `many.aK` (syscall K), with `bad` (if any)
/// written with a syntax error.
fn tapset(n: usize, bad: Option<usize>) -> String {
    let mut text = String::new();
    for k in 0..n {
        let body = if bad == Some(k) {
            "name = = 1"
        } else {
            "name = \"x\""
        };
        text.push_str(&format!(
            "probe many.a{k} = process.syscall if ($syscall == {k}) {{\n\t{body}\n\tk = {k}\n}}\n"
        ));
    }
    text
}

/// A directory holding `many.stp` with this text.
fn tapset_dir(tag: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("utap-halves-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("many.stp"), text).unwrap();
    dir
}

/// Checks `src` against the tapsets of `dir` only: the program or the
/// rendered diagnostics.
fn check_in(dir: &PathBuf, src: &str) -> Result<Program, String> {
    let mut map = SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids).unwrap();
    let opts = CheckOptions {
        no_stdlib: true,
        tapset_dirs: vec![dir.clone()],
        ..Default::default()
    };
    check::check(&mut map, script, &opts, &mut ids)
        .map(|o| o.program)
        .map_err(|d| utap_compiler::diag::render_all(&d, &map, false))
}

#[test]
fn many_aliases_of_one_file_expand_in_file_order() {
    let dir = tapset_dir("order", &tapset(100, None));
    let p = check_in(&dir, "probe many.* { println(name) }").unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let sets: Vec<Option<Vec<u32>>> = p
        .probes
        .iter()
        .map(|probe| match &probe.points[0].kind {
            PointKind::Process {
                event: ProcessEvent::Syscall { syscalls },
                ..
            } => syscalls.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let expected: Vec<Option<Vec<u32>>> = (0..100).map(|k| Some(vec![k])).collect();
    assert_eq!(sets, expected);
}

#[test]
fn a_syntax_error_in_the_second_half_reads_as_in_one_parse() {
    let text = tapset(100, Some(80));
    let dir = tapset_dir("error", &text);
    let err = check_in(&dir, "probe many.* { println(name) }").unwrap_err();
    // The same file parsed in one piece.
    let mut map = SourceMap::new();
    let name = dir.join("many.stp").display().to_string();
    let file = map.add(name, text);
    let opts = ParseOptions {
        tapset: true,
        ..Default::default()
    };
    let diags = parse_file(&map, file, &opts, &mut NodeIds::default()).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    // Then, as the file did not load, nothing matches.
    let one_parse = utap_compiler::diag::render_all(&diags, &map, false);
    assert!(err.starts_with(&one_parse), "{err}");
    assert!(err.contains(":322:9 ]"), "{err}");
    let rest = &err[one_parse.len()..];
    assert!(
        rest.starts_with("semantic error: probe point mismatch at position 2")
            && rest.contains("no probe point matches 'many.*'")
            && !rest.contains("parse error"),
        "{rest}"
    );
}
