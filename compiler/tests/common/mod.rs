//! Helpers shared by the front-end tests.
#![allow(dead_code)]

use std::path::PathBuf;
use utap_compiler::ast::Script;
use utap_compiler::diag::{self, Diagnostic};
use utap_compiler::parser::{self, NodeIds, ParseOptions};
use utap_compiler::source::SourceMap;

/// The shared conformance corpus: `$UTAP_SHARED`, or `shared/` next to the
/// workspace root or one level above it (CI has it at `../shared`).
pub fn shared_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("UTAP_SHARED") {
        let dir = PathBuf::from(dir);
        return dir.join("conformance").is_dir().then_some(dir);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    [root.join("../shared"), root.join("../../shared")]
        .into_iter()
        .find(|d| d.join("conformance").is_dir())
}

/// Says that `test` was skipped for want of the corpus, on the real
/// stderr (the harness captures `eprintln!` of passing tests).
pub fn skipped(test: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{test}: skipped, conformance corpus not found (../shared or $UTAP_SHARED)"
    );
}

/// Options fixed so results do not depend on the machine.
pub fn options(args: Vec<String>) -> ParseOptions {
    ParseOptions {
        args,
        arch: Some("x86_64".into()),
        kernel_release: Some("6.18.0-1-amd64".into()),
        ..ParseOptions::default()
    }
}

/// Parses `text` as a file named `name`.
pub fn parse_with(
    name: &str,
    text: &str,
    opts: &ParseOptions,
) -> (SourceMap, Result<Script, Vec<Diagnostic>>) {
    let mut map = SourceMap::new();
    let file = map.add(name, text);
    let mut ids = NodeIds::default();
    let result = parser::parse_file(&map, file, opts, &mut ids);
    (map, result)
}

pub fn parse(text: &str) -> Result<Script, Vec<Diagnostic>> {
    parse_with("t.stp", text, &options(Vec::new())).1
}

/// The canonical print of `text` (panics with the diagnostics on failure).
pub fn canonical(text: &str) -> String {
    let (map, result) = parse_with("t.stp", text, &options(Vec::new()));
    match result {
        Ok(s) => utap_compiler::print::script(&s),
        Err(d) => panic!(
            "{text:?} does not parse:\n{}",
            diag::render_all(&d, &map, false)
        ),
    }
}

/// The plain-text diagnostics for `text` (panics if it parses).
pub fn errors(text: &str) -> String {
    errors_with(text, &options(Vec::new()))
}

pub fn errors_with(text: &str, opts: &ParseOptions) -> String {
    let (map, result) = parse_with("t.stp", text, opts);
    match result {
        Ok(s) => panic!("{text:?} parsed: {}", utap_compiler::print::script(&s)),
        Err(d) => diag::render_all(&d, &map, false),
    }
}

/// The items of a script without spans and ids, for comparing trees.
pub fn shape(script: &Script) -> String {
    strip(&format!("{:?}", script.items))
}

/// Removes `Span { .. }` contents and `NodeId(..)` numbers from Debug text.
fn strip(debug: &str) -> String {
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    loop {
        let span = rest.find("Span { ");
        let id = rest.find("NodeId(");
        let (at, open, close) = match (span, id) {
            (Some(s), Some(i)) if i < s => (i, "NodeId(", ')'),
            (Some(s), _) => (s, "Span { ", '}'),
            (None, Some(i)) => (i, "NodeId(", ')'),
            (None, None) => break,
        };
        out.push_str(&rest[..at + open.len()]);
        let after = &rest[at + open.len()..];
        let end = after.find(close).map_or(after.len(), |e| e + 1);
        out.push(close);
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}
