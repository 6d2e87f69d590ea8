//! `-l PATTERN` / `-L PATTERN`: the probe points a pattern matches, from
//! the catalogue and the tapsets' aliases, as SystemTap lists them: one
//! line per user-level name, sorted; `-L` adds the alias's variables
//! (`name:string`) and the context variables (`$syscall:long`) that every
//! expansion of the name has.

use std::collections::BTreeMap;

use super::catalogue::{ArgSpec, FAMILIES, glob_match};
use super::types::type_name;
use super::{CheckOptions, check_with_library, tapsets::Library};
use crate::diag::Diagnostic;
use crate::parser::{NodeIds, ParseOptions, parse_file};
use crate::program::*;
use crate::source::SourceMap;

/// How many components `**` may stand for when listing (the deepest name,
/// `process.syscall.return` or a tapset's `syscall.NAME.return`, has 3).
const DEEPEST: usize = 4;

/// Lists the points matching `pattern`; `vars` adds variables (`-L`).
/// `**` matches any number of components, as in SystemTap; families that
/// need an argument (`timer.ms(N)`) are listed with the argument's kind.
/// A pattern that matches nothing is an error saying so.
pub fn list(
    map: &mut SourceMap,
    pattern: &str,
    vars: bool,
    opts: &CheckOptions,
    ids: &mut NodeIds,
) -> Result<String, Vec<Diagnostic>> {
    let mut text = String::new();
    for variant in expand_double_star(pattern) {
        let lib = Library::new(!opts.no_stdlib, &opts.tapset_dirs)
            .map_err(|e| vec![Diagnostic::semantic_error(e)])?;
        match list_with_library(map, &variant, vars, opts, ids, lib) {
            Ok(t) => text.push_str(&t),
            Err(d) if d.is_empty() => {}
            Err(d) => return Err(d),
        }
    }
    for name in parametrized_families(pattern) {
        text.push_str(&name);
        text.push('\n');
    }
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines.dedup();
    if lines.is_empty() {
        return Err(vec![no_match(pattern)]);
    }
    Ok(lines.iter().map(|l| format!("{l}\n")).collect())
}

fn no_match(pattern: &str) -> Diagnostic {
    Diagnostic::semantic_error(format!("no probe point matches '{pattern}'"))
        .with_help("`utap -l '**'` lists every probe point utap has")
}

/// The single-`*` patterns `pattern`'s `**` components stand for:
/// `syscall.**` is `syscall.*`, `syscall.*.*`, ... (a `**` inside a
/// component, `sys**`, stays within it).
fn expand_double_star(pattern: &str) -> Vec<String> {
    let comps: Vec<&str> = pattern.split('.').collect();
    let Some(at) = comps.iter().position(|c| *c == "**") else {
        return vec![pattern.to_string()];
    };
    let (before, after) = (&comps[..at], &comps[at + 1..]);
    let mut out = Vec::new();
    for n in 1..=DEEPEST.saturating_sub(before.len() + after.len()).max(1) {
        let mut parts: Vec<&str> = before.to_vec();
        parts.extend(std::iter::repeat_n("*", n));
        parts.extend(after);
        out.extend(expand_double_star(&parts.join(".")));
    }
    out
}

/// The catalogue families with a required argument that `pattern` names,
/// as `timer.ms(number)`: resolution cannot list them, since a pattern
/// gives no argument.
fn parametrized_families(pattern: &str) -> Vec<String> {
    let wanted: Vec<&str> = pattern.split('.').collect();
    FAMILIES
        .iter()
        .filter(|f| f.comps.iter().any(|c| c.arg == ArgSpec::Num))
        .filter_map(|f| {
            let comps: Vec<_> = f.comps.iter().filter(|c| !c.optional).collect();
            let names: Vec<&str> = comps.iter().map(|c| c.name).collect();
            dotted_match(&wanted, &names).then(|| {
                let shown: Vec<String> = comps
                    .iter()
                    .map(|c| match c.arg {
                        ArgSpec::Num => format!("{}(number)", c.name),
                        _ => c.name.to_string(),
                    })
                    .collect();
                shown.join(".")
            })
        })
        .collect()
}

/// Whether the dotted pattern components match `names`, `**` standing for
/// any number of components (at least one).
fn dotted_match(pattern: &[&str], names: &[&str]) -> bool {
    match pattern.split_first() {
        None => names.is_empty(),
        Some((&"**", rest)) => (1..=names.len()).any(|n| dotted_match(rest, &names[n..])),
        Some((p, rest)) => names
            .split_first()
            .is_some_and(|(n, tail)| glob_match(p, n) && dotted_match(rest, tail)),
    }
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
        if let Some(marks) = probe
            .points
            .first()
            .and_then(|p| super::marks::expand_listing(&p.kind))
        {
            // Each marker with its own arguments.
            for (name, args) in marks {
                let mut vars = list.clone();
                vars.extend(args);
                found.entry(name).or_default().push(vars);
            }
            continue;
        }
        list.extend(context_vars(probe));
        // Function and PLT patterns in a known module are already one
        // point per match (see `functions::build`).
        if let Some(p) = probe.points.first() {
            list.extend(super::dwarf::listing_extra(&p.kind, &head));
        }
        found.entry(head).or_default().push(list);
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
                .filter(|v| v.readable)
                .map(|v| format!("${}:{}", v.name, type_name(v.ty)))
                .collect()
        })
        .unwrap_or_default()
}
