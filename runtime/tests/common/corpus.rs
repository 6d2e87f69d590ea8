//! Where the SystemTap conformance corpus is, for the tests that compare
//! with its expected output. It lives outside the repository
//! (`shared/conformance` beside the workspace or an ancestor, or
//! `$UTAP_SHARED/conformance`), so a clone without it skips those tests
//! with one line each instead of failing.

use std::path::PathBuf;

/// `conformance/run` of the corpus, if there is one.
pub fn run_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("UTAP_SHARED") {
        let run = PathBuf::from(dir).join("conformance/run");
        return run.is_dir().then_some(run);
    }
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let candidate = dir.join("shared/conformance/run");
        if candidate.is_dir() {
            return Some(candidate);
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// A file of the corpus's `run/` directory (the caller checked that the
/// corpus exists with [`skip_without_corpus!`]).
pub fn run_file(name: &str) -> PathBuf {
    run_dir()
        .expect("corpus checked by skip_without_corpus!")
        .join(name)
}

/// Says that `test` was skipped, on the real stderr: the test harness
/// captures `eprintln!` of passing tests, and a skip should be seen.
pub fn skipped(test: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{test}: skipped, conformance corpus not found (../shared or $UTAP_SHARED)"
    );
}

/// Ends the calling test with one line when the corpus is absent.
macro_rules! skip_without_corpus {
    ($test:literal) => {
        if corpus::run_dir().is_none() {
            corpus::skipped($test);
            return;
        }
    };
}
pub(crate) use skip_without_corpus;
