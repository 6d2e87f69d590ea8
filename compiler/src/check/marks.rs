//! USDT marker probe points (`process("P").mark("NAME")`,
//! `process("P").provider("PROV").mark("NAME")`, `process.mark(..)`):
//! building them, checking at elaboration that a named executable or
//! library has a matching marker (a located error with "did you mean"
//! otherwise), how many arguments the matched markers have (for `$argN`),
//! and the `-l`/`-L` expansion, one line per marker as SystemTap lists
//! them. Run-time addresses come from `utap_runtime::session::marks`.

use std::sync::Arc;

use utap_runtime::elf::sdt::{SdtArg, SdtNote, notes_of};
use utap_runtime::session::{FunctionPoint, FunctionSite};

use super::point::{BuildError, PointArg, glob_match, is_library, process_target};
use crate::program::{PointKind, ProcessEvent, ProcessTarget};

/// The notes of `path`, read once per run (shared with the session).
fn notes(path: &str) -> Arc<Result<Vec<SdtNote>, String>> {
    notes_of(path)
}

/// Builds a marker point from its components' arguments.
/// With `library`, `process("PATH").library("LIB").mark(..)`: the
/// markers of LIB (a path, file name or soname, wildcards) in the
/// processes of PATH, also when it is loaded later (dlopen).
pub fn build(
    provider: bool,
    library: bool,
    args: &[Option<Option<PointArg>>],
) -> Result<PointKind, BuildError> {
    let str_at = |i: usize| match args.get(i) {
        Some(Some(Some(PointArg::Str(s)))) => Some(s.clone()),
        _ => None,
    };
    let first = if library { 2 } else { 1 };
    let name_arg = if provider { first + 1 } else { first };
    let name = str_at(name_arg).unwrap_or_default();
    let provider = if provider { str_at(first) } else { None };
    if library {
        let lib = str_at(1).unwrap_or_default();
        // Checked now when the library is named by path; a file name or
        // soname is matched against each process's modules at run time.
        if lib.starts_with('/') && !lib.contains('*') {
            check_markers(&lib, provider.as_deref(), &name, name_arg)?;
        }
        return Ok(PointKind::Process {
            target: process_target(args)?,
            event: ProcessEvent::Function(FunctionPoint {
                library: Some(lib),
                site: FunctionSite::Mark { provider, name },
                returning: false,
            }),
        });
    }
    let (target, library, module) = match process_target(args)? {
        // A library's markers: in every process mapping it.
        ProcessTarget::Path(exe) if is_library(&exe) => {
            (ProcessTarget::Any, Some(exe.clone()), Some(exe))
        }
        ProcessTarget::Path(exe) => (ProcessTarget::Path(exe.clone()), None, Some(exe)),
        other => (other, None, None),
    };
    if let Some(file) = module {
        check_markers(&file, provider.as_deref(), &name, name_arg)?;
    }
    Ok(PointKind::Process {
        target,
        event: ProcessEvent::Function(FunctionPoint {
            library,
            site: FunctionSite::Mark { provider, name },
            returning: false,
        }),
    })
}

/// The file a marker point names, when known at elaboration.
fn module_of(kind: &PointKind) -> Option<(String, Option<&str>, &str)> {
    let PointKind::Process {
        target,
        event:
            ProcessEvent::Function(FunctionPoint {
                library,
                site: FunctionSite::Mark { provider, name },
                ..
            }),
    } = kind
    else {
        return None;
    };
    let file = match (library, target) {
        (Some(lib), _) if lib.starts_with('/') && !lib.contains('*') => lib.clone(),
        (Some(_), _) => return None,
        (None, ProcessTarget::Path(p)) => p.clone(),
        _ => return None,
    };
    Some((file, provider.as_deref(), name))
}

fn matching<'a>(notes: &'a [SdtNote], provider: Option<&str>, name: &str) -> Vec<&'a SdtNote> {
    notes
        .iter()
        .filter(|n| {
            provider.is_none_or(|p| glob_match(p, &n.provider)) && glob_match(name, &n.name)
        })
        .collect()
}

/// The point must name a marker of `file`.
fn check_markers(
    file: &str,
    provider: Option<&str>,
    name: &str,
    component: usize,
) -> Result<(), BuildError> {
    let found = notes(file);
    let notes = match found.as_ref() {
        Ok(n) => n,
        Err(e) => {
            return Err(BuildError {
                message: format!("cannot probe markers of {file}"),
                label: e.clone(),
                component: 0,
            });
        }
    };
    if !matching(notes, provider, name).is_empty() {
        return Ok(());
    }
    let short = file.rsplit('/').next().unwrap_or(file);
    let best = notes
        .iter()
        .map(|n| (strsim::levenshtein(&n.name, name), n.name.as_str()))
        .min()
        .filter(|(d, _)| *d <= name.len().max(3) / 2);
    Err(BuildError {
        message: format!("no match for mark '{name}' in {file}"),
        label: match (best, notes.is_empty()) {
            (_, true) => format!("{short} has no USDT markers (.note.stapsdt)"),
            (Some((_, n)), _) => format!("did you mean '{n}'?"),
            (None, _) => format!("no marker of {short} matches"),
        },
        component,
    })
}

/// The fewest arguments among the markers a point matches, when its file
/// is known: `$argN` beyond it is an error, as in SystemTap.
pub fn arg_count(kind: &PointKind) -> Option<usize> {
    let (file, provider, name) = module_of(kind)?;
    let found = notes(&file);
    let notes = found.as_ref().as_ref().ok()?;
    matching(notes, provider, name)
        .iter()
        .map(|n| n.parsed_args().map_or(0, |a| a.len()))
        .min()
}

/// The name and parsed arguments of each marker a point matches, when
/// its file is known at elaboration (`crate::route` checks which
/// operands an in-process handler would read).
pub fn operands(kind: &PointKind) -> Option<Vec<(String, Vec<SdtArg>)>> {
    let (file, provider, name) = module_of(kind)?;
    let found = notes(&file);
    let notes = found.as_ref().as_ref().ok()?;
    let out = matching(notes, provider, name)
        .iter()
        .map(|n| (n.name.clone(), n.parsed_args().unwrap_or_default()))
        .collect();
    Some(out)
}

/// `-l`/`-L`: one line per matching marker, `process("PATH").mark("NAME")`
/// (with `.provider("P")` when written), and its `$argN:long` variables.
pub fn expand_listing(kind: &PointKind) -> Option<Vec<(String, Vec<String>)>> {
    let (file, provider, name) = module_of(kind)?;
    let found = notes(&file);
    let notes = found.as_ref().as_ref().ok()?;
    let mut out: Vec<(String, Vec<String>)> = matching(notes, provider, name)
        .iter()
        .map(|n| {
            let prov = match provider {
                Some(_) => format!(".provider(\"{}\")", n.provider),
                None => String::new(),
            };
            let count = n.parsed_args().map_or(0, |a| a.len());
            (
                format!("process(\"{file}\"){prov}.mark(\"{}\")", n.name),
                (1..=count).map(|i| format!("$arg{i}:long")).collect(),
            )
        })
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}
