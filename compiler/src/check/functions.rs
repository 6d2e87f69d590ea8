//! Function probe points (`process("P").function("F")`, `.return`, `.plt`,
//! `.library("L").function`, `.statement`): building them, and checking
//! at elaboration that a named executable or library exists and has a
//! matching symbol (a located error with "did you mean" otherwise).
//! Addresses are found again per process at run time (the load bias
//! differs), by `utap_runtime::session`'s function probes.

use std::path::Path;

use utap_runtime::elf::ElfImage;
use utap_runtime::elf::symbols::demangle;
use utap_runtime::session::{FunctionPoint, FunctionSite};

use super::alias::edit_distance;
use super::catalogue::{
    BuildError, Built, FunctionFamily, PointArg, SiteKind, glob_match, process_target,
};
use super::dwarf::SourceSite;
use crate::program::{PointKind, ProcessEvent, ProcessTarget};

/// Builds a function point from its components' arguments: one point,
/// or one per line of a statement's line range or wildcard.
pub fn build(
    ff: FunctionFamily,
    args: &[Option<Option<PointArg>>],
) -> Result<Vec<Built>, BuildError> {
    let str_at = |i: usize| match args.get(i) {
        Some(Some(Some(PointArg::Str(s)))) => Some(s.clone()),
        _ => None,
    };
    if let SiteKind::Mark { provider } = ff.site {
        return super::marks::build(provider, ff.library, args).map(|kind| vec![Built::new(kind)]);
    }
    let site_arg = if ff.library { 2 } else { 1 };
    let mut library = if ff.library { str_at(1) } else { None };
    let (mut target, module) = match process_target(args)? {
        // process("libc.so.6").function(..): every process mapping it.
        ProcessTarget::Path(exe) if is_library(&exe) && library.is_none() => {
            library = Some(exe.clone());
            (ProcessTarget::Any, Some(exe))
        }
        ProcessTarget::Path(exe) => (ProcessTarget::Path(exe.clone()), Some(exe)),
        other => (other, None),
    };
    let source = str_at(site_arg).filter(|s| s.contains('@') && ff.site != SiteKind::Plt);
    let sites: Vec<SourceSite> = match (ff.site, args.get(site_arg)) {
        // NAME@file.c[:LINE], *@file.c:LINE: through the debug information.
        _ if source.is_some() => {
            let spec = source.unwrap_or_default();
            let file = match &library {
                Some(lib) if lib.starts_with('/') => Some(lib.clone()),
                Some(_) => None,
                None => module.clone(),
            };
            let file = file.ok_or_else(|| BuildError {
                message: format!("'{spec}' needs the probed file's path"),
                label: "source locations are looked up in a known executable or library".into(),
                component: 0,
            })?;
            super::dwarf::source_site(&file, &spec, ff.site == SiteKind::Statement).map_err(
                |message| BuildError {
                    message,
                    label: "resolved through the debug information's line tables".into(),
                    component: site_arg,
                },
            )?
        }
        (SiteKind::Statement, Some(Some(Some(PointArg::Num(addr))))) => {
            written(FunctionSite::Absolute(*addr as u64))
        }
        (SiteKind::Statement, Some(Some(Some(PointArg::Str(s))))) => {
            let (name, offset) = split_offset(s).ok_or_else(|| BuildError {
                message: format!("bad statement '{s}'"),
                label: "expected NAME+OFFSET (e.g. \"main+4\")".into(),
                component: site_arg,
            })?;
            written(FunctionSite::Function { name, offset })
        }
        // `.plt` alone: every entry (`.plt("*")`).
        (SiteKind::Plt, _) => written(FunctionSite::Plt(
            str_at(site_arg).unwrap_or_else(|| "*".into()),
        )),
        _ => written(FunctionSite::Function {
            name: str_at(site_arg).unwrap_or_default(),
            offset: 0,
        }),
    };
    // A library's functions are checked in the library when its path is
    // known; an executable's in the executable.
    let checked = match &library {
        Some(lib) if lib.starts_with('/') => Some((lib.clone(), true)),
        Some(_) => None,
        // Without a path: the -c/-x program, as SystemTap resolves it (a
        // shell built-in or a missing file is left to the session).
        None => module
            .map(|m| (m, true))
            .or_else(|| super::dwarf::implicit_program(&target).map(|exe| (exe, false))),
    };
    if let Some((file, named)) = checked {
        match ElfImage::open(Path::new(&file)) {
            Ok(image) => {
                for s in &sites {
                    check_symbols(&image, &s.site, site_arg)?;
                }
            }
            Err(e) if named => {
                return Err(BuildError {
                    message: format!("cannot probe functions of {file}"),
                    label: e.0,
                    component: 0,
                });
            }
            Err(_) => {}
        }
    }
    if let (ProcessTarget::Path(_), Some(_)) = (&target, &library) {
        // The process filter stays; the library names the module.
    } else if library.is_some() {
        target = ProcessTarget::Any;
    }
    let built = sites.into_iter().map(|s| Built {
        kind: PointKind::Process {
            target: target.clone(),
            event: ProcessEvent::Function(FunctionPoint {
                library: library.clone(),
                site: s.site,
                returning: ff.returning,
            }),
        },
        args: s.resolved.map(|r| {
            let mut args = args.to_vec();
            args[site_arg] = Some(Some(PointArg::Str(r)));
            args
        }),
    });
    Ok(built.collect())
}

/// A site as written (no source location to resolve).
fn written(site: FunctionSite) -> Vec<SourceSite> {
    vec![SourceSite {
        site,
        resolved: None,
    }]
}

/// A shared library rather than a program (by name: `lib*.so*`, `*.so`).
pub(super) fn is_library(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so") || name.contains(".so.")
}

/// `"main+4"`, `"main+0x10"`, `"main"`.
fn split_offset(s: &str) -> Option<(String, u64)> {
    let (name, off) = match s.split_once('+') {
        Some((n, o)) => (n, o.trim()),
        None => (s, "0"),
    };
    let off = match off.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => off.parse().ok()?,
    };
    (!name.is_empty()).then(|| (name.to_string(), off))
}

/// The site must name something in `image`.
fn check_symbols(
    image: &ElfImage,
    site: &FunctionSite,
    component: usize,
) -> Result<(), BuildError> {
    let (pattern, names): (&str, Vec<String>) = match site {
        FunctionSite::Function { name, .. } => {
            let funcs = || image.symbols.iter().filter(|s| s.func);
            if funcs().any(|s| s.matches(name, glob_match)) {
                return Ok(());
            }
            // Suggestions: shown names, and C++ names without parameters.
            let short = funcs().filter_map(|s| Some(demangle(&s.name)?.short));
            let shown = funcs().map(|s| s.shown().into_owned());
            (name, shown.chain(short).collect())
        }
        FunctionSite::Plt(name) => (name, image.plt.iter().map(|p| p.name.clone()).collect()),
        FunctionSite::Absolute(_) | FunctionSite::Mark { .. } => return Ok(()),
    };
    if names.iter().any(|n| glob_match(pattern, n)) {
        return Ok(());
    }
    let what = if matches!(site, FunctionSite::Plt(_)) {
        "plt entry"
    } else {
        "function"
    };
    let best = names
        .iter()
        .map(|n| (edit_distance(n, pattern), n))
        .min()
        .filter(|(d, _)| *d <= pattern.len().max(3) / 2);
    Err(BuildError {
        message: format!("no match for {what} '{pattern}' in {}", image.path),
        label: match best {
            Some((_, n)) => format!("did you mean '{n}'?"),
            None => format!("no {what} of {} matches", image.short_name()),
        },
        component,
    })
}

/// The process filter and the function point of a function probe.
pub(super) fn function_point(kind: &PointKind) -> Option<(&ProcessTarget, &FunctionPoint)> {
    match kind {
        PointKind::Process {
            target,
            event: ProcessEvent::Function(fp),
        } => Some((target, fp)),
        _ => None,
    }
}

/// A function point and the file known at elaboration that holds its
/// functions (a library given by path, or the program); `None` for other
/// points and for `process.function` without a path.
pub fn function_file(kind: &PointKind) -> Option<(&FunctionPoint, String)> {
    let (target, fp) = function_point(kind)?;
    let file = match (&fp.library, target) {
        (Some(lib), _) if lib.starts_with('/') => lib.clone(),
        (None, ProcessTarget::Path(p)) => p.clone(),
        _ => return None,
    };
    Some((fp, file))
}

/// `-l`/`-L`: a function point with a wildcard, in a module known at
/// elaboration, lists one name per matching function (or PLT entry), as
/// SystemTap does; `None` for other points.
pub fn expand_listing(kind: &PointKind, head: &str) -> Option<Vec<String>> {
    let (fp, file) = function_file(kind)?;
    let (comp, pattern) = match &fp.site {
        FunctionSite::Function { name, offset: 0 } => ("function", name),
        FunctionSite::Plt(name) => ("plt", name),
        _ => return None,
    };
    let image = ElfImage::open(Path::new(&file)).ok()?;
    let mut written = format!(".{comp}(\"{pattern}\")");
    if !head.contains(&written) {
        // `.plt` without its argument.
        written = format!(".{comp}");
    }
    // C++ functions listed by their demangled names, which match again.
    let mut names: Vec<String> = match &fp.site {
        FunctionSite::Plt(_) => image
            .plt
            .iter()
            .filter(|p| glob_match(pattern, &p.name))
            .map(|p| p.name.clone())
            .collect(),
        _ => image
            .symbols
            .iter()
            .filter(|s| s.func && s.matches(pattern, glob_match))
            .map(|s| s.shown().into_owned())
            .collect(),
    };
    names.sort();
    names.dedup();
    Some(
        names
            .iter()
            .map(|n| replace_last(head, &written, &format!(".{comp}(\"{n}\")")))
            .collect(),
    )
}

/// `text` with the last `from` replaced by `to`.
fn replace_last(text: &str, from: &str, to: &str) -> String {
    match text.rfind(from) {
        Some(at) => format!("{}{to}{}", &text[..at], &text[at + from.len()..]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_offsets() {
        assert_eq!(split_offset("main+4"), Some(("main".into(), 4)));
        assert_eq!(split_offset("f+0x10"), Some(("f".into(), 16)));
        assert_eq!(split_offset("f"), Some(("f".into(), 0)));
        assert_eq!(split_offset("+4"), None);
    }
}
