//! Documentation reachable from the shell: `--generate-man` (utap(1)),
//! `--completions SHELL` and `--help-function NAME`, all generated from
//! what the binary knows (the clap definition, the stdlib's doc comments).

use clap::CommandFactory;

use crate::cli::Options;
use utap_compiler::check::reference;

/// Handles the documentation options; `Some(exit status)` when one was
/// given (nothing else runs then).
pub fn run(opts: &Options) -> Option<u8> {
    if opts.generate_man {
        let mut out = Vec::new();
        let man = clap_mangen::Man::new(Options::command());
        return Some(match man.render(&mut out) {
            Ok(()) => emit(&out),
            Err(e) => {
                eprintln!("utap: cannot render the man page: {e}");
                1
            }
        });
    }
    if let Some(shell) = opts.completions {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Options::command(), "utap", &mut out);
        return Some(emit(&out));
    }
    if let Some(name) = &opts.help_function {
        return Some(match reference::function_help(name) {
            Some(text) => emit(text.as_bytes()),
            None => {
                eprintln!("utap: no function named '{name}' (docs/reference.md lists them all)");
                1
            }
        });
    }
    None
}

fn emit(bytes: &[u8]) -> u8 {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}
