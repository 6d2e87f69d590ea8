//! DWARF target variables at function probes: which functions (and at
//! which pc) a handler's points reach in the probed binary, and turning
//! `$var`, `$p->a[i]`, `$var$`, `$$parms`, `$$locals`, `$$vars` into calls
//! of the runtime's `__dwarf_long` / `__dwarf_string` with a plan number
//! (see `utap_runtime::dwarf`). Types are known here: plain `$var` is a
//! long, pretty-printed forms are strings.

use std::path::Path;
use std::sync::Arc;

use utap_runtime::dwarf::{self, Access, Comp, DebugInfo, PlanError, Scope, Site};
use utap_runtime::elf::ElfImage;
use utap_runtime::session::FunctionSite;

use crate::program::PointKind;

/// One probe site: a function of a module and the pc the probe is at.
pub struct DwarfSite {
    pub info: Arc<DebugInfo>,
    pub low_pc: u64,
    pub pc: u64,
    pub name: String,
}

/// The DWARF view of a handler whose points are all function probes.
pub struct DwarfSites {
    pub sites: Vec<DwarfSite>,
    /// Why some module has no debug information (the files looked for).
    pub missing: Option<String>,
    /// `.return` points: only `$return` / `$$return` apply.
    pub returning: bool,
}

/// The sites of a handler's points; `None` unless every point is a
/// `.function`/`.statement` probe in a module known at compile time.
pub fn sites_of(kinds: &[&PointKind]) -> Option<DwarfSites> {
    let mut out = DwarfSites {
        sites: Vec::new(),
        missing: None,
        returning: false,
    };
    for kind in kinds {
        let (fp, file) = super::functions::function_file(kind)?;
        let FunctionSite::Function { name, offset } = &fp.site else {
            return None;
        };
        out.returning |= fp.returning;
        let image = ElfImage::open(Path::new(&file)).ok()?;
        let info = match dwarf::debug_info(&image.path) {
            Ok(i) => i,
            Err(why) => {
                out.missing = Some(why);
                continue;
            }
        };
        for s in image
            .symbols
            .iter()
            .filter(|s| s.func && s.matches(name, super::catalogue::glob_match))
        {
            let pc = match (*offset, fp.returning) {
                (0, false) => dwarf::entry_pc(&image, s.addr),
                _ => s.addr.wrapping_add(*offset),
            };
            if out
                .sites
                .iter()
                .any(|x| x.pc == pc && x.info.path == info.path)
            {
                continue;
            }
            out.sites.push(DwarfSite {
                info: info.clone(),
                low_pc: s.addr,
                pc,
                name: s.name.clone(),
            });
        }
    }
    Some(out)
}

/// What a `$expression` asks for.
pub enum Want<'a> {
    Long(&'a str, &'a [Comp]),
    Pretty(&'a str, &'a [Comp], bool),
    /// `$$parms`, `$$locals`, `$$vars` with the pretty level.
    All(&'a str, u8),
}

/// Plans `want` at every site; the number of the registered plan.
pub fn plan(sites: &DwarfSites, want: &Want) -> Result<i64, PlanError> {
    let mut access = Access::default();
    for s in &sites.sites {
        let Some(f) = s.info.function_at(s.low_pc) else {
            if let Want::All(..) = want {
                access
                    .sites
                    .push((s.info.path.clone(), s.pc, Site::Text(Vec::new())));
                continue;
            }
            return Err(PlanError {
                message: format!("no debug information for function '{}'", s.name),
                help: Some("its compilation unit was built without -g".into()),
            });
        };
        let scope = Scope::new(&s.info, f, s.pc);
        let site = match want {
            Want::Long(name, comps) => Site::Long(scope.long(name, comps)?),
            Want::Pretty(name, comps, deep) => Site::Text(scope.pretty(name, comps, *deep)?),
            Want::All(which, pretty) => Site::Text(scope.all(which, *pretty)),
        };
        access.sites.push((s.info.path.clone(), s.pc, site));
    }
    Ok(dwarf::register(access))
}

/// `-L`: the variables of a function with their types, as SystemTap
/// lists them (`$x:int $p:struct point*`).
pub fn listing_vars(path: &str, function: &str) -> Option<String> {
    // Cached per file: listing every function of a big library reads its
    // debug information (or finds it missing) once.
    let info = dwarf::debug_info(path).ok()?;
    let f = *info.functions_named(function).first()?;
    let vars: Vec<String> = info
        .variables(f)
        .iter()
        .filter(|v| v.scope.is_none())
        .map(|v| format!("${}:{}", v.name, info.type_name(v.ty)))
        .collect();
    Some(vars.join(" "))
}

/// `-L`: the DWARF variables of the function a listed entry names
/// (`process("P").function("NAME")`), empty without debug information.
pub fn listing_extra(kind: &PointKind, listed: &str) -> Vec<String> {
    let Some((fp, file)) = super::functions::function_file(kind) else {
        return Vec::new();
    };
    if fp.returning {
        return Vec::new();
    }
    let Some(rest) = listed.split(".function(\"").nth(1) else {
        return Vec::new();
    };
    let name = rest.split('"').next().unwrap_or_default();
    listing_vars(&file, name)
        .map(|v| {
            v.split(' ')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// `.function("NAME@file.c")`, `.function("NAME@file.c:LINE")`,
/// `.statement("*@file.c:LINE")`, `.statement("NAME@file.c:LINE")`: the
/// site in `path`, through the debug information (declarations and line
/// tables). A statement is its line's lowest statement address, given as
/// its function's symbol plus an offset (how the runtime places it).
pub fn source_site(path: &str, spec: &str, statement: bool) -> Result<FunctionSite, String> {
    let (name, place) = spec.split_once('@').unwrap_or((spec, ""));
    let (file, line) = match place.rsplit_once(':') {
        Some((f, l)) => (
            f,
            Some(
                l.parse::<u64>()
                    .map_err(|_| format!("bad line number '{l}' in '{spec}'"))?,
            ),
        ),
        None => (place, None),
    };
    let image = ElfImage::open(Path::new(path)).map_err(|e| e.0)?;
    let info = dwarf::debug_info(&image.path)?;
    let glob = super::catalogue::glob_match;
    if !statement {
        let mut names: Vec<&str> = info
            .functions
            .iter()
            .filter(|f| glob(name, &f.name))
            .filter(|f| {
                f.decl_file
                    .as_deref()
                    .is_some_and(|d| utap_runtime::dwarf::read::file_matches(file, d))
            })
            .filter(|f| line.is_none_or(|l| f.decl_line == l))
            .map(|f| f.name.as_str())
            .collect();
        names.sort();
        names.dedup();
        return match names.as_slice() {
            [] => Err(format!("no function '{name}' declared in {place}")),
            [one] => Ok(FunctionSite::Function {
                name: one.to_string(),
                offset: 0,
            }),
            _ if !name.contains('*') => Ok(FunctionSite::Function {
                name: name.to_string(),
                offset: 0,
            }),
            many => Err(format!(
                "'{spec}' matches several functions ({}): utap probes one function per point here",
                many.join(", ")
            )),
        };
    }
    let Some(line) = line else {
        return Err(format!("'{spec}' needs a line number (FILE:LINE)"));
    };
    let addrs = info.line_addresses(file, line);
    for a in addrs {
        let Some(f) = info.function_containing(a) else {
            continue;
        };
        if !glob(name, &f.name) {
            continue;
        }
        let Some(sym) = image.symbols.iter().find(|s| s.func && s.addr == f.low_pc) else {
            continue;
        };
        return Ok(FunctionSite::Function {
            name: sym.name.clone(),
            offset: a - sym.addr,
        });
    }
    Err(format!("no line records for {file}:{line}"))
}
