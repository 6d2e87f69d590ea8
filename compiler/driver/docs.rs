//! Documentation reachable from the shell: `--generate-man` (utap(1)),
//! `--completions SHELL` and `--help-function NAME`, all generated from
//! what the binary knows (the clap definition, the stdlib's doc comments
//! and the builtin table: `check::reference`, which also names the
//! functions `--help-function` completes, with their summaries).

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
        clap_complete::generate(shell, &mut with_function_names(), "utap", &mut out);
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

/// The command with `--help-function`'s values listed: every function of
/// the reference, its summary (the doc's first sentence) as the value's
/// help, which zsh and fish show beside the name. Only for the completion
/// scripts: parsing keeps accepting any NAME, so that an unknown one gets
/// utap's own message.
fn with_function_names() -> clap::Command {
    let values: Vec<clap::builder::PossibleValue> = reference::functions()
        .into_iter()
        .map(|f| {
            let name: &'static str = Box::leak(f.name.into_boxed_str());
            // Quotes and backslashes would end the shells' quoted strings.
            let help: String = reference::summary(&f.doc)
                .chars()
                .filter(|c| !matches!(c, '"' | '\'' | '`' | '\\' | '$'))
                .collect();
            clap::builder::PossibleValue::new(name).help(help)
        })
        .collect();
    Options::command().mut_arg("help_function", |a| {
        a.value_parser(clap::builder::PossibleValuesParser::new(values))
    })
}

fn emit(bytes: &[u8]) -> u8 {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}
