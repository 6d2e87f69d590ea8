//! Inputs that once broke the front end (found by `compiler/fuzz`, or by
//! hand), kept so they stay fixed. Each file in `tests/fuzz-regressions/` is
//! a raw fuzzer input: the first byte picks the session, as in the target.

use utap_compiler::parser::ParseOptions;
use utap_compiler::print::check_round_trip;

#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut failures = Vec::new();
    for path in &files {
        let data = std::fs::read(path).unwrap();
        let (mode, text) = data.split_first().map_or((0, &[][..]), |(m, t)| (*m, t));
        let text = String::from_utf8_lossy(text);
        match std::panic::catch_unwind(|| {
            check_round_trip(&text, &ParseOptions::for_fuzz_input(mode))
        }) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{}: {e}", path.display())),
            Err(_) => failures.push(format!("{}: panicked", path.display())),
        }
    }
    println!("{} fuzz regression inputs", files.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
