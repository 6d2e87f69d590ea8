//! Entry values at statements, as SystemTap records them: in a
//! `process("P").statement("F@file.c:N")` probe, a parameter that the
//! debug information gives there only as `DW_OP_entry_value` (optimised
//! code reused its register) is the value it had when `F` was entered.
//! SystemTap (loc2stap's `handle_GNU_entry_value`) stores it at `F`'s
//! entry in a global indexed by `tid()` and reads it back at the
//! statement; so does this pass, before anything is resolved:
//!
//! * each plain `$x` of the probe that is such an entry value becomes a
//!   local set first thing in the probe from `__tvar_entryN_K[tid()]`;
//! * a new probe on `process("P").function("F")` stores `$x` (read at the
//!   entry, where the expression's register still holds it) there.
//!
//! A thread that reaches the statement without the entry having been
//! seen reads 0, as in SystemTap. `$x->f`, `$x$` and `$$parms` keep
//! SystemTap's "unable to resolve" (`?` in `$$parms`).

use std::path::Path;

use utap_runtime::dwarf::{self, Scope};
use utap_runtime::elf::ElfImage;
use utap_runtime::session::FunctionSite;

use crate::ast::{self, Expr, ExprKind, Item, Literal, Script};
use crate::parser::{NodeIds, ParseOptions, parse_file};
use crate::source::SourceMap;

use super::error::SemError;

/// Adds the entry probes and rewrites the statement probes (see the
/// module doc).
pub fn record(script: &mut Script, map: &mut SourceMap, ids: &mut NodeIds) -> Vec<SemError> {
    let mut errors = Vec::new();
    let mut added = Vec::new();
    for (n, item) in script.items.iter_mut().enumerate() {
        let Item::Probe(p) = item else { continue };
        let [point] = p.points.as_slice() else {
            continue;
        };
        let Some((path, spec)) = statement_point(point) else {
            continue;
        };
        let Some((function, names)) = entry_valued(&path, &spec) else {
            continue;
        };
        let mut used: Vec<String> = Vec::new();
        crate::syntax_walk::exprs_mut(&mut p.body, &mut |e: &mut Expr| match &mut e.kind {
            ExprKind::Defined(inner) => {
                // Recorded, so defined (SystemTap's expansion succeeds).
                if let ExprKind::Target(t) = &inner.kind
                    && t.path.is_empty()
                    && t.pretty == 0
                    && names.contains(&t.name)
                {
                    e.kind = ExprKind::Num(1);
                }
                true
            }
            ExprKind::IncDec { .. } => true,
            ExprKind::AtCall { name, .. } if name == "entry" => true,
            // A write to a target is the checker's to refuse.
            ExprKind::Assign { target, .. } if matches!(target.kind, ExprKind::Target(_)) => true,
            ExprKind::Target(t)
                if t.path.is_empty() && t.pretty == 0 && !t.address && names.contains(&t.name) =>
            {
                let k = match used.iter().position(|u| *u == t.name) {
                    Some(k) => k,
                    None => {
                        used.push(t.name.clone());
                        used.len() - 1
                    }
                };
                e.kind = ExprKind::Var(format!("__tvar_entry_{k}"));
                true
            }
            _ => false,
        });
        if used.is_empty() {
            continue;
        }
        match build(n, &path, &function, &used, p, map, ids) {
            Ok(items) => added.extend(items),
            Err(e) => errors.push(*e),
        }
    }
    script.items.extend(added);
    errors
}

/// `process("PATH").statement("SPEC")`: the path and the spec.
fn statement_point(point: &ast::ProbePoint) -> Option<(String, String)> {
    let [process, statement] = point.components.as_slice() else {
        return None;
    };
    match (process, statement) {
        (
            ast::Component {
                name: p,
                arg: Some(Literal::Str(path)),
                ..
            },
            ast::Component {
                name: s,
                arg: Some(Literal::Str(spec)),
                ..
            },
        ) if p == "process" && s == "statement" => Some((path.clone(), spec.clone())),
        _ => None,
    }
}

/// The function a statement is in and its parameters and locals that are
/// entry values there; `None` when the statement is not one address of
/// one function with debug information, or has none.
fn entry_valued(path: &str, spec: &str) -> Option<(String, Vec<String>)> {
    let sites = super::dwarf::source_site(path, spec, true).ok()?;
    let [site] = sites.as_slice() else {
        return None;
    };
    let FunctionSite::Function { name, offset } = &site.site else {
        return None;
    };
    let image = ElfImage::open(Path::new(path)).ok()?;
    let sym = image.symbols.iter().find(|s| s.func && s.name == *name)?;
    let info = dwarf::debug_info(&image.path).ok()?;
    let f = info.function_at(sym.addr)?;
    let scope = Scope::new(&info, f, sym.addr + offset);
    let names: Vec<String> = info
        .variables(f)
        .into_iter()
        .map(|v| v.name)
        .filter(|n| scope.entry_valued(n))
        .collect();
    (!names.is_empty()).then(|| (f.name.clone(), names))
}

/// The globals, the entry probe, and the statement probe's prologue.
fn build(
    n: usize,
    path: &str,
    function: &str,
    used: &[String],
    probe: &mut ast::Probe,
    map: &mut SourceMap,
    ids: &mut NodeIds,
) -> Result<Vec<Item>, Box<SemError>> {
    let g = format!("__tvar_entry{n}");
    let globals: Vec<String> = (0..used.len()).map(|k| format!("{g}_{k}")).collect();
    let mut text = format!("global {}\n", globals.join(", "));
    text.push_str(&format!(
        "probe process({path:?}).function({function:?}) {{\n  __tvar_tid = tid()\n"
    ));
    for (k, name) in used.iter().enumerate() {
        text.push_str(&format!("  {g}_{k}[__tvar_tid] = ${name}\n"));
    }
    text.push_str("}\nprobe begin {\n  __tvar_tid = tid()\n");
    for k in 0..used.len() {
        text.push_str(&format!("  __tvar_entry_{k} = {g}_{k}[__tvar_tid]\n"));
    }
    text.push_str("}\n");
    let file = map.add(
        format!("<entry values of {}>", map.location(probe.span)),
        text,
    );
    let script = parse_file(map, file, &ParseOptions::default(), ids).map_err(|d| {
        Box::new(SemError::new(
            probe.span,
            format!("internal error recording entry values: {d:?}"),
        ))
    })?;
    let mut items = script.items;
    let Some(Item::Probe(prologue)) = items.pop() else {
        unreachable!("the template ends with the statement's prologue")
    };
    let mut stmts = prologue.body.stmts;
    stmts.append(&mut probe.body.stmts);
    probe.body.stmts = stmts;
    // Scoped as the user's probe: its globals are the user script's.
    for item in &mut items {
        if let Item::Probe(entry) = item {
            entry.span = probe.span;
        }
    }
    Ok(items)
}
