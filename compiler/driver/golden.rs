//! `utap --test DIR... [--bless]`: the golden-test harness for tapset and
//! script authors (`utap_runtime::harness`, the one the project's own
//! tests/golden.rs runs), with this utap binary running the cases, on as
//! many threads as there are CPUs unless `-j N` says otherwise.

use std::path::Path;
use std::time::Duration;

use utap_runtime::harness::{self, Harness};

use crate::cli;

/// Runs the cases of every directory in `opts.rest`; the exit status (0
/// when all pass, 1 when one fails or nothing could run).
pub fn run(opts: &cli::Options) -> u8 {
    if opts.rest.is_empty() {
        eprintln!("utap: --test needs at least one directory of NAME.stp cases");
        return 1;
    }
    let mut cases = Vec::new();
    for dir in &opts.rest {
        let path = Path::new(dir);
        if !path.is_dir() {
            eprintln!("utap: --test: '{dir}' is not a directory");
            return 1;
        }
        let found = harness::cases_in(path);
        if found.is_empty() {
            eprintln!("utap: --test: no NAME.stp in '{dir}'");
            return 1;
        }
        cases.extend(found);
    }
    let utap = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("utap: --test: cannot find this utap binary: {e}");
            return 1;
        }
    };
    let h = Harness {
        utap,
        timeout: opts
            .test_timeout
            .map_or(harness::TIMEOUT, Duration::from_secs_f64),
    };
    let jobs = opts.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    let failed = h.run_all(&cases, opts.bless, jobs, &mut std::io::stdout().lock());
    u8::from(failed > 0)
}
