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

use super::dwarf::SourceSite;
use super::point::{
    BuildError, Built, FunctionFamily, PointArg, SiteKind, glob_match, process_target,
};
pub use super::point::{function_file, function_point, is_library};
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
    let mut image = None;
    if let Some((file, named)) = checked {
        match ElfImage::open(Path::new(&file)) {
            Ok(img) => {
                for s in &sites {
                    check_symbols(&img, &s.site, site_arg)?;
                }
                image = Some(img);
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
    // In a module known now, each function or PLT entry a pattern matches
    // is a point of its own, named as SystemTap names the probe it derives.
    let sites = match (&image, ff.site, sites.as_slice()) {
        (Some(img), SiteKind::Function, [only]) if only.resolved.is_none() => match &only.site {
            FunctionSite::Function { name, offset: 0 } => each_function(img, name),
            _ => sites,
        },
        (Some(img), SiteKind::Plt, [only]) => match &only.site {
            FunctionSite::Plt(pattern) => each_plt_entry(img, pattern),
            _ => sites,
        },
        _ => sites,
    };
    let named = image
        .as_ref()
        .map(|img| Named::new(img, ff, args, site_arg, &target));
    let built = sites.into_iter().map(|s| {
        let (args, pp) = match (&named, &s.resolved) {
            (Some(n), Some(r)) => {
                let (args, pp) = n.resolved(r, s.address);
                (Some(args), Some(pp))
            }
            (None, Some(r)) => {
                let mut args = args.to_vec();
                args[site_arg] = Some(Some(PointArg::Str(r.clone())));
                (Some(args), None)
            }
            _ => (None, None),
        };
        Built {
            kind: PointKind::Process {
                target: target.clone(),
                event: ProcessEvent::Function(FunctionPoint {
                    library: library.clone(),
                    site: s.site,
                    returning: ff.returning,
                }),
            },
            args,
            pp,
        }
    });
    Ok(built.collect())
}

/// Each function of `image` that `pattern` names, once per address,
/// resolved as SystemTap's `dwarf_query::final_function_name` writes it:
/// `NAME@FILE:LINE` (the debug information's function, its declaration's
/// file and line) when the debug information has the function under the
/// symbol's name (for C++, its unqualified name), else the symbol's name
/// alone, as SystemTap's symbol-table pass names a weak alias such as
/// libc's `write` (whose DWARF name is `__libc_write`). At an address with
/// several matching names, the one the debug information uses wins.
fn each_function(image: &ElfImage, pattern: &str) -> Vec<SourceSite> {
    let info = utap_runtime::dwarf::debug_info(&image.path).ok();
    let same = |sym: &utap_runtime::elf::symbols::Symbol, dw: &str| {
        sym.name == dw
            || demangle(&sym.name).is_some_and(|d| d.short.rsplit("::").next() == Some(dw))
    };
    let matching: Vec<_> = image
        .symbols
        .iter()
        .filter(|s| s.func && s.matches(pattern, glob_match))
        .collect();
    let mut out: Vec<SourceSite> = Vec::new();
    let mut i = 0;
    while i < matching.len() {
        let addr = matching[i].addr;
        let group: Vec<_> = matching[i..]
            .iter()
            .take_while(|s| s.addr == addr)
            .collect();
        i += group.len();
        let dw = info.as_ref().and_then(|i| i.function_at(addr));
        let (sym, f) =
            match dw.and_then(|f| group.iter().find(|s| same(s, &f.name)).map(|s| (s, f))) {
                Some((s, f)) => (*s, Some(f)),
                None => (group[0], None),
            };
        let resolved = match f {
            Some(f) => match &f.decl_file {
                Some(file) if f.decl_line > 0 => format!("{}@{file}:{}", f.name, f.decl_line),
                Some(file) => format!("{}@{file}", f.name),
                None => f.name.clone(),
            },
            None => sym.shown().into_owned(),
        };
        if out
            .iter()
            .any(|o| matches!(&o.site, FunctionSite::Function { name, .. } if *name == sym.name))
        {
            continue;
        }
        out.push(SourceSite {
            site: FunctionSite::Function {
                name: sym.name.clone(),
                offset: 0,
            },
            resolved: Some(resolved),
            address: None,
        });
    }
    out
}

/// Each PLT entry of `image` that `pattern` names, once per name.
fn each_plt_entry(image: &ElfImage, pattern: &str) -> Vec<SourceSite> {
    let mut out: Vec<SourceSite> = Vec::new();
    for p in image.plt.iter().filter(|p| glob_match(pattern, &p.name)) {
        if out
            .iter()
            .any(|s| s.site == FunctionSite::Plt(p.name.clone()))
        {
            continue;
        }
        out.push(SourceSite {
            site: FunctionSite::Plt(p.name.clone()),
            resolved: Some(p.name.clone()),
            address: Some(p.addr),
        });
    }
    out
}

/// How a point resolved in a known module is written.
struct Named {
    /// The module's canonical path.
    module: String,
    /// The written arguments, with the program and library by their
    /// canonical paths.
    args: Vec<Option<Option<PointArg>>>,
    site_arg: usize,
    site: SiteKind,
    call: bool,
    returning: bool,
}

impl Named {
    fn new(
        image: &ElfImage,
        ff: FunctionFamily,
        args: &[Option<Option<PointArg>>],
        site_arg: usize,
        target: &ProcessTarget,
    ) -> Named {
        let canonical = |p: &str| {
            std::fs::canonicalize(p)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_else(|_| p.to_string())
        };
        let module = canonical(&image.path);
        let mut args = args.to_vec();
        let program = match target {
            ProcessTarget::Path(p) => Some(canonical(p)),
            _ if ff.library => super::dwarf::implicit_program(target).map(|p| canonical(&p)),
            _ => Some(module.clone()),
        };
        if let Some(p) = program {
            args[0] = Some(Some(PointArg::Str(p)));
        }
        if ff.library {
            args[1] = Some(Some(PointArg::Str(module.clone())));
        }
        Named {
            module,
            call: ff.site == SiteKind::Function
                && !ff.returning
                && matches!(args.get(site_arg + 1), Some(Some(None))),
            args,
            site_arg,
            site: ff.site,
            returning: ff.returning,
        }
    }

    /// The arguments as `-l` lists the point and `pn()` names it
    /// (SystemTap's well-formed point: `.library` kept with its path), and
    /// the text of `pp()` (the derived probe's: the module that holds the
    /// site as the process, a PLT entry as its statement address).
    fn resolved(
        &self,
        site: &str,
        address: Option<u64>,
    ) -> (Vec<Option<Option<PointArg>>>, String) {
        let mut args = self.args.clone();
        args[self.site_arg] = Some(Some(PointArg::Str(site.to_string())));
        let mut pp = format!("process(\"{}\")", self.module);
        match (self.site, address) {
            (SiteKind::Plt, Some(a)) => pp.push_str(&format!(".statement({a:#x})")),
            (SiteKind::Function, _) => pp.push_str(&format!(".function(\"{site}\")")),
            _ => pp.push_str(&format!(".statement(\"{site}\")")),
        }
        if self.call {
            pp.push_str(".call");
        }
        if self.returning {
            pp.push_str(".return");
        }
        (args, pp)
    }
}

/// A site as written (no source location to resolve).
fn written(site: FunctionSite) -> Vec<SourceSite> {
    vec![SourceSite {
        site,
        resolved: None,
        address: None,
    }]
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
        .map(|n| (strsim::levenshtein(n, pattern), n))
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
