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
    if let Some(found) = super::point::function_file(kind) {
        return Some(found);
    }
    let (target, fp) = super::point::function_point(kind)?;
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
    // A pattern in a known module is one point per function: open each
    // file once.
    let mut images: std::collections::HashMap<String, ElfImage> = Default::default();
    for kind in kinds {
        let (fp, file) = dwarf_file(kind)?;
        let FunctionSite::Function { name, offset } = &fp.site else {
            return None;
        };
        out.returning |= fp.returning;
        let image = match images.entry(file) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let image = ElfImage::open(Path::new(e.key())).ok()?;
                e.insert(image)
            }
        };
        let info = match dwarf::debug_info(&image.path) {
            Ok(i) => i,
            Err(why) => {
                out.missing = Some(why);
                continue;
            }
        };
        for s in image
            .symbols
            .matching(name, super::point::glob_match)
            .into_iter()
            .filter(|s| s.func)
        {
            let pc = match (*offset, fp.returning) {
                (0, false) => dwarf::entry_pc(image, s.addr),
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
        && !c.steps.contains(&utap_runtime::dwarf::Step::Deref);
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
    let Some((fp, file)) = super::point::function_file(kind) else {
        return Vec::new();
    };
    if fp.returning {
        return Vec::new();
    }
    let Some(rest) = listed.split(".function(\"").nth(1) else {
        return Vec::new();
    };
    let name = rest.split(['"', '@']).next().unwrap_or_default();
    listing_vars(&file, name)
        .map(|v| {
            v.split(' ')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The line part of a source location (stapprobes: ":N" absolute, "+N"
/// relative to the function's declaration line, ":*" every line of the
/// function, ":x-y" and ":x,y-z" ranges and lists), as SystemTap's
/// `dwarf_query::parse_function_spec` classifies it: a list or range
/// wins over `+`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lines {
    Absolute(u64),
    Relative(u64),
    Wildcard,
    Enumerated(Vec<u64>),
}

/// `NAME@FILE`, `NAME@FILE:LINES`, `NAME@FILE+N` split into the name,
/// the file and the lines (the first `:` or `+` after the `@` starts
/// them, as in SystemTap).
pub fn split_source(spec: &str) -> Result<(&str, &str, Option<Lines>), String> {
    let (name, place) = spec.split_once('@').unwrap_or((spec, ""));
    let Some(at) = place.find([':', '+']) else {
        return Ok((name, place, None));
    };
    let (file, rest) = (&place[..at], &place[at + 1..]);
    let bad = || format!("bad line number '{rest}' in '{spec}'");
    let num = |t: &str| t.trim().parse::<u64>().map_err(|_| bad());
    let lines = if place.as_bytes()[at] == b':' && rest == "*" {
        Lines::Wildcard
    } else if rest.contains([',', '-']) {
        let mut v = Vec::new();
        for part in rest.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => v.extend(num(lo)?..=num(hi)?),
                None => v.push(num(part)?),
            }
        }
        v.sort();
        Lines::Enumerated(v)
    } else if place.as_bytes()[at] == b'+' {
        Lines::Relative(num(rest)?)
    } else {
        Lines::Absolute(num(rest)?)
    };
    Ok((name, file, Some(lines)))
}

/// One site a source location resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSite {
    pub site: FunctionSite,
    /// The location as SystemTap writes the probe it derives
    /// (`acc@/src/vw.c:10`: the function, its file as the debug
    /// information names it, the line), for statements; `None` keeps the
    /// point as written.
    pub resolved: Option<String>,
    /// A PLT entry's link-time address (its `pp()` names it).
    pub address: Option<u64>,
}

/// `.function("NAME@file.c")`, `.function("NAME@file.c:LINE")`,
/// `.statement("*@file.c:LINE")`, `.statement("NAME@file.c:LINES")`: the
/// sites in `path`, through the debug information (declarations and line
/// tables). A statement is its line's lowest address in the function,
/// given as its function's symbol plus an offset (how the runtime places
/// it); `:*`, ranges and lists give one site per line that has one, as
/// SystemTap's `dwflpp::iterate_over_srcfile_lines` finds them (each
/// address once).
pub fn source_site(path: &str, spec: &str, statement: bool) -> Result<Vec<SourceSite>, String> {
    let (name, file, lines) = split_source(spec)?;
    let place = spec.split_once('@').map_or("", |(_, p)| p);
    let image = ElfImage::open(Path::new(path)).map_err(|e| e.0)?;
    let info = dwarf::debug_info(&image.path)?;
    let glob = super::point::glob_match;
    let in_file = |f: &&dwarf::Function| {
        f.decl_file
            .as_deref()
            .is_some_and(|d| dwarf::read::file_matches(file, d))
    };
    let one = |name: &str| {
        Ok(vec![SourceSite {
            site: FunctionSite::Function {
                name: name.to_string(),
                offset: 0,
            },
            resolved: None,
            address: None,
        }])
    };
    if !statement {
        let line = match &lines {
            None => None,
            Some(Lines::Absolute(l)) => Some(*l),
            Some(_) => {
                return Err(format!(
                    "'{spec}': line ranges, lists and relative lines select statements"
                ));
            }
        };
        let mut names: Vec<&str> = info
            .functions
            .iter()
            .filter(|f| glob(name, &f.name))
            .filter(in_file)
            .filter(|f| line.is_none_or(|l| f.decl_line == l))
            .map(|f| f.name.as_str())
            .collect();
        names.sort();
        names.dedup();
        return match names.as_slice() {
            [] => Err(format!("no function '{name}' declared in {place}")),
            [one_name] => one(one_name),
            _ if !name.contains('*') => one(name),
            many => Err(format!(
                "'{spec}' matches several functions ({}): utap probes one function per point here",
                many.join(", ")
            )),
        };
    }
    let Some(lines) = lines else {
        return Err(format!("'{spec}' needs a line number (FILE:LINE)"));
    };
    let mut funcs: Vec<&dwarf::Function> = info
        .functions
        .iter()
        .filter(|f| glob(name, &f.name))
        .filter(in_file)
        .collect();
    funcs.sort_by_key(|f| f.low_pc);
    funcs.dedup_by_key(|f| f.low_pc);
    let mut out: Vec<SourceSite> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for f in funcs {
        let rows = info.unit_lines(f, file);
        // Each line's lowest address in the function.
        let mut best: std::collections::BTreeMap<u64, u64> = Default::default();
        for &(line, addr) in &rows {
            if f.low_pc <= addr && addr < f.high_pc {
                let e = best.entry(line).or_insert(addr);
                *e = (*e).min(addr);
            }
        }
        let wanted: Vec<u64> = match &lines {
            Lines::Absolute(l) => vec![*l],
            Lines::Relative(n) => vec![f.decl_line + n],
            Lines::Enumerated(v) => v.clone(),
            Lines::Wildcard => {
                // From the line of the function's first address, each line
                // number of the unit in turn while the function has it.
                let first = rows
                    .iter()
                    .filter(|(_, a)| f.low_pc <= *a && *a < f.high_pc)
                    .min_by_key(|(_, a)| *a)
                    .map(|(l, _)| *l);
                let mut all: Vec<u64> = rows.iter().map(|(l, _)| *l).collect();
                all.sort();
                all.dedup();
                all.into_iter()
                    .skip_while(|l| first.is_none_or(|first| *l < first))
                    .take_while(|l| best.contains_key(l))
                    .collect()
            }
        };
        let Some(sym) = image.symbols.iter().find(|s| s.func && s.addr == f.low_pc) else {
            continue;
        };
        for line in wanted {
            let Some(&addr) = best.get(&line) else {
                continue;
            };
            if !seen.insert(addr) {
                continue;
            }
            out.push(SourceSite {
                site: FunctionSite::Function {
                    name: sym.name.clone(),
                    offset: addr - sym.addr,
                },
                resolved: Some(format!(
                    "{}@{}:{line}",
                    f.name,
                    f.decl_file.as_deref().unwrap_or(file)
                )),
                address: None,
            });
        }
    }
    if out.is_empty() {
        return Err(format!("no line records for {place}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{Lines, split_source};

    #[test]
    fn line_specs_as_systemtap_classifies_them() {
        let lines = |s| split_source(s).unwrap().2;
        assert_eq!(split_source("f@a.c").unwrap(), ("f", "a.c", None));
        assert_eq!(lines("f@a.c:12"), Some(Lines::Absolute(12)));
        assert_eq!(lines("f@a.c+2"), Some(Lines::Relative(2)));
        assert_eq!(lines("*@dir/a.c:*"), Some(Lines::Wildcard));
        assert_eq!(lines("f@a.c:3-5"), Some(Lines::Enumerated(vec![3, 4, 5])));
        assert_eq!(lines("f@a.c:9,3-4"), Some(Lines::Enumerated(vec![3, 4, 9])));
        // A list or range wins over `+` (parse_function_spec).
        assert_eq!(lines("f@a.c+2-3"), Some(Lines::Enumerated(vec![2, 3])));
        assert!(split_source("f@a.c:x").is_err());
        assert!(split_source("f@a.c+*").is_err());
    }
}
