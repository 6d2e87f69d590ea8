//! `-l PATTERN` / `-L PATTERN`: the probe points a pattern matches, from
//! the catalogue and the tapsets' aliases, as SystemTap lists them: one
//! line per user-level name, sorted; `-L` adds the alias's variables
//! (`name:string`) and the context variables (`$syscall:long`) that every
//! expansion of the name has.

use std::collections::BTreeMap;

use super::catalogue::FAMILIES;
use super::types::type_name;
use super::{CheckOptions, check_with_library, tapsets::Library};
use crate::diag::Diagnostic;
use crate::parser::{NodeIds, ParseOptions, parse_file};
use crate::program::*;
use crate::source::SourceMap;

/// Lists the points matching `pattern`; `vars` adds variables (`-L`).
/// A pattern that matches nothing is an `Err` with no diagnostics (the
/// caller exits 1 without a message, as SystemTap does).
pub fn list(
    map: &mut SourceMap,
    pattern: &str,
    vars: bool,
    opts: &CheckOptions,
    ids: &mut NodeIds,
) -> Result<String, Vec<Diagnostic>> {
    let lib = Library::new(!opts.no_stdlib, &opts.tapset_dirs)
        .map_err(|e| vec![Diagnostic::semantic_error(e)])?;
    list_with_library(map, pattern, vars, opts, ids, lib)
}

pub fn list_with_library(
    map: &mut SourceMap,
    pattern: &str,
    vars: bool,
    opts: &CheckOptions,
    ids: &mut NodeIds,
    lib: Library,
) -> Result<String, Vec<Diagnostic>> {
    let file = map.add("<listing>", format!("probe {pattern} {{}}\n"));
    let script = parse_file(map, file, &ParseOptions::default(), ids)?;
    let opts = CheckOptions {
        separate_points: true,
        ..opts.clone()
    };
    // As SystemTap: a pattern that matches nothing lists nothing and fails
    // silently (the resolution error shows from -vv on).
    let (out, heads) = check_with_library(map, script, &opts, ids, lib).map_err(|diags| {
        let no_match = diags
            .iter()
            .all(|d| d.message.starts_with("probe point mismatch"));
        if no_match && opts.verbose < 2 {
            Vec::new()
        } else {
            diags
        }
    })?;
    // name -> the variable lists of each expansion
    let mut found: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for (probe, head) in out.program.probes.iter().zip(heads) {
        let mut list: Vec<String> = probe
            .locals
            .iter()
            .map(|l| format!("{}:{}", l.name, type_name(l.ty)))
            .collect();
        list.extend(context_vars(probe));
        let expanded = probe
            .points
            .first()
            .and_then(|p| super::functions::expand_listing(&p.kind, &head));
        for name in expanded.unwrap_or_else(|| vec![head]) {
            found.entry(name).or_default().push(list.clone());
        }
    }
    let mut text = String::new();
    for (name, expansions) in found {
        text.push_str(&name);
        if vars && let Some(first) = expansions.first() {
            for v in first {
                if expansions.iter().all(|e| e.contains(v)) {
                    text.push(' ');
                    text.push_str(v);
                }
            }
        }
        text.push('\n');
    }
    Ok(text)
}

/// `$name:type` for the context variables of a probe's family.
fn context_vars(probe: &ProbeDef) -> Vec<String> {
    let Some(p) = probe.points.first() else {
        return Vec::new();
    };
    FAMILIES
        .iter()
        .find(|f| f.has_kind(&p.kind))
        .map(|f| {
            f.context
                .iter()
                .map(|v| format!("${}:{}", v.name, type_name(v.ty)))
                .collect()
        })
        .unwrap_or_default()
}
