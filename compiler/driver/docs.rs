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
        return Some(match crate::manpage::render() {
            Ok(out) => emit(&out),
            Err(e) => {
                eprintln!("utap: cannot render the man page: {e}");
                1
            }
        });
    }
    if let Some(shell) = opts.completions {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut with_function_names(), "utap", &mut out);
        let text = dynamic_completion(shell, String::from_utf8_lossy(&out).into_owned());
        return Some(emit(text.as_bytes()));
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

/// What clap's static scripts cannot offer, asked of the system when the
/// user presses Tab: the probe points after `-l`/`-L` (utap's own `-l
/// '**'`, so they are the installed utap's), the user's PIDs after `-x`,
/// and `.stp` scripts (and directories) for the script argument: added to
/// clap's bash and fish scripts, put in place of its `_default` actions in
/// zsh's.
fn dynamic_completion(shell: clap_complete::Shell, clap: String) -> String {
    match shell {
        clap_complete::Shell::Bash => clap + BASH_DYNAMIC,
        clap_complete::Shell::Fish => clap + FISH_DYNAMIC,
        clap_complete::Shell::Zsh => clap
            .replace(":PID:_default'", ":PID:_pids'")
            .replace(":PATTERN:_default'", ZSH_PATTERNS)
            .replace("the options:_default'", r#"the options:_files -g "*.stp"'"#),
        _ => clap,
    }
}

/// zsh: the probe points of `utap -l '**'`, one a line (in the spec's
/// single quotes, hence `'\''`).
const ZSH_PATTERNS: &str = r#":PATTERN:{compadd -- ${(f)"$(utap -l '\''**'\'' 2>/dev/null)"}}'"#;

/// Wraps clap's `_utap`: handles the three cases, hands the rest over.
const BASH_DYNAMIC: &str = r#"
# utap's own cases; clap's _utap above does the rest.
_utap_main() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        -l|-L)
            local IFS=$'\n'
            COMPREPLY=( $(compgen -W "$("${COMP_WORDS[0]}" -l '**' 2>/dev/null)" -- "$cur") )
            return 0 ;;
        -x)
            local d pids=()
            for d in /proc/[0-9]*; do
                [[ -O $d ]] && pids+=("${d#/proc/}")
            done
            COMPREPLY=( $(compgen -W "${pids[*]}" -- "$cur") )
            return 0 ;;
        -e|-c|-o|-p|-I|-D|-G|-T|-s|-f|--format|--metrics|--completions|--compatible|--socket|--detach-session|--help-function)
            _utap "$@"
            return ;;
    esac
    if [[ "$cur" != -* ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=( $(compgen -f -X '!*.stp' -- "$cur") $(compgen -d -- "$cur") )
        return 0
    fi
    _utap "$@"
}
complete -F _utap_main -o bashdefault -o default -o nosort utap
"#;

/// Adds candidates to clap's `-x`, `-l`, `-L` and script completions.
const FISH_DYNAMIC: &str = r#"
complete -c utap -s x -f -a '(__fish_complete_pids)'
complete -c utap -s l -s L -f -a '(utap -l "**" 2>/dev/null)'
complete -c utap -a '(__fish_complete_suffix .stp)'
"#;

fn emit(bytes: &[u8]) -> u8 {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}
