//! The checker's rules, each with the exact diagnostic a user sees, plus
//! golden `-p2` and `-L` outputs and the stdlib.

use utap_compiler::check::{self, CheckOptions, dump::dump, listing};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::program::*;
use utap_compiler::source::SourceMap;

fn opts(guru: bool) -> CheckOptions {
    CheckOptions {
        guru,
        ..Default::default()
    }
}

/// Checks `src`: the program, or the rendered diagnostics.
fn check_with(src: &str, o: &CheckOptions) -> Result<Program, String> {
    let mut map = SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids)
        .map_err(|d| utap_compiler::diag::render_all(&d, &map, false))?;
    check::check(&mut map, script, o, &mut ids)
        .map(|o| o.program)
        .map_err(|d| utap_compiler::diag::render_all(&d, &map, false))
}

fn ok(src: &str) -> Program {
    check_with(src, &opts(false)).unwrap_or_else(|e| panic!("{e}"))
}

fn err(src: &str) -> String {
    match check_with(src, &opts(false)) {
        Ok(_) => panic!("accepted: {src}"),
        Err(e) => e,
    }
}

#[test]
fn whole_stdlib_checks() {
    let p = ok(
        "probe syscall.*, syscall.*.return { println(name, argstr) } probe signal.* { println(sig_name) }",
    );
    assert!(p.probes.len() > 600, "{}", p.probes.len());
}
