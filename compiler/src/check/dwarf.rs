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
use utap_runtime::session::{FunctionPoint, FunctionSite};

use crate::program::{PointKind, ProcessTarget};

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

thread_local! {
    /// See [`set_target_exe`].
    static TARGET_EXE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The program of `-c`/`-x` for this check (see `CheckOptions::target_exe`).
pub fn set_target_exe(exe: Option<String>) {
    TARGET_EXE.with(|t| *t.borrow_mut() = exe);
}

/// The program a `process.function(..)` without a path probes: the
/// `-c`/`-x` program, or `process(PID)`'s executable; `None` for a named
/// program and when unknown.
pub(super) fn implicit_program(target: &ProcessTarget) -> Option<String> {
    match target {
        ProcessTarget::Any => TARGET_EXE.with(|t| t.borrow().clone()),
        ProcessTarget::Pid(pid) => std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned()),
        ProcessTarget::Path(_) => None,
    }
}

/// The file a function point's DWARF is read from: its named program or
/// library, else for `process.function(..)` the `-c`/`-x` program and
/// for `process(PID).function(..)` that process's executable, when it
/// has debug information (without, such points keep their register
/// forms: `$$parms` as `$arg1=..`).
fn dwarf_file(kind: &PointKind) -> Option<(&FunctionPoint, String)> {
    if let Some(found) = super::functions::function_file(kind) {
        return Some(found);
    }
    let (target, fp) = super::functions::function_point(kind)?;
    if fp.library.is_some() {
        return None;
    }
    let exe = implicit_program(target)?;
    dwarf::debug_info(&exe).ok()?;
    Some((fp, exe))
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
        let (fp, file) = dwarf_file(kind)?;
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
    /// `$var = value` (under -g): a number's place in memory.
    Store(&'a str, &'a [Comp]),
    /// `&$var`: the address of its place.
    Address(&'a str, &'a [Comp]),
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
            Want::Store(name, comps) => Site::Long(stored_chain(scope.long(name, comps)?, name)?),
            Want::Address(name, comps) => Site::Long(scope.address(name, comps)?),
            Want::Pretty(name, comps, deep) => Site::Text(scope.pretty(name, comps, *deep)?),
            Want::All(which, pretty) => Site::Text(scope.all(which, *pretty)),
        };
        access.sites.push((s.info.path.clone(), s.pc, site));
    }
    Ok(dwarf::register(access))
}

/// A chain `$var = v` can store to: one that ends in memory (a register
/// location is refused: registers are restored from the hit's copy when
/// the thread resumes).
fn stored_chain(c: utap_runtime::dwarf::Chain, name: &str) -> Result<dwarf::Chain, PlanError> {
    use utap_runtime::dwarf::plan::{Final, Loc};
    let in_register = matches!(c.loc, Loc::Register(_) | Loc::Value(_) | Loc::Pieces(_))
        && !c
            .steps
            .iter()
            .any(|s| *s == utap_runtime::dwarf::Step::Deref);
    if in_register {
        return Err(PlanError {
            message: format!(
                "'${name}' is in a register here: utap writes target variables in memory only"
            ),
            help: Some(
                "probe a statement where it is in memory, or build the program with -O0".into(),
            ),
        });
    }
    if !matches!(c.fin, Final::Load { .. } | Final::Bits { .. }) {
        return Err(PlanError {
            message: format!("'${name}' cannot be written: it is not an integer or a pointer"),
            help: None,
        });
    }
    Ok(c)
}

/// `@cast(addr, "type" [, "module"])->path`: a plan that reads through
/// `addr` with the type from `module`'s debug information (the probed
/// module when not named); it does not depend on the probe site.
pub fn cast_plan(
    sites: Option<&DwarfSites>,
    type_name: &str,
    module: Option<&str>,
    comps: &[Comp],
    pretty: u8,
) -> Result<i64, PlanError> {
    let info = match (module, sites.and_then(|s| s.sites.first())) {
        (Some(m), _) if m.starts_with('<') || m == "kernel" => {
            return Err(PlanError {
                message: format!(
                    "@cast module '{m}': utap reads types from an executable or library's debug information"
                ),
                help: Some(
                    "name the program or library: @cast(p, \"struct x\", \"/path/to/prog\")".into(),
                ),
            });
        }
        (Some(m), _) => dwarf::debug_info(m).map_err(|e| PlanError {
            message: format!("@cast: {e}"),
            help: None,
        })?,
        (None, Some(site)) => site.info.clone(),
        (None, None) => {
            return Err(PlanError {
                message: format!("@cast(.., \"{type_name}\") needs a module"),
                help: Some("give the program or library as the third argument, or use @cast in a function probe of it".into()),
            });
        }
    };
    let Some(scope) = Scope::for_types(&info) else {
        return Err(PlanError {
            message: format!("no debug information in {}", info.path),
            help: None,
        });
    };
    let site = match pretty {
        0 => Site::Long(scope.cast(type_name, comps)?),
        p => Site::Text(scope.cast_pretty(type_name, comps, p > 1)?),
    };
    Ok(dwarf::register(Access {
        sites: Vec::new(),
        any: Some(site),
    }))
}

/// `@var("name", "module")`: the module must be the probed one (utap
/// reads a global with its module's load bias, known at the probe).
pub fn var_module_ok(sites: &DwarfSites, module: &str) -> bool {
    let real = std::fs::canonicalize(module)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| module.to_string());
    sites
        .sites
        .iter()
        .any(|s| s.info.path == real || s.info.path.ends_with(&format!("/{module}")))
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
