//! What `--metrics` exports for each global, decided from the checked
//! program (the runtime formats; see `utap_runtime::metrics`).
//!
//! SystemTap globals are not declared as counters or gauges, so the rule
//! is read off the operations on them:
//! - exported: long and statistics globals (scalars and arrays) declared
//!   in the user's script; strings, `__`-prefixed names (utap's own, e.g.
//!   `__entry*`) and tapset globals are not;
//! - a long global is a **counter** when every write to it is `++` or
//!   `+=` of a non-negative literal (an initial value is allowed) and
//!   there is at least one; then its name gets `_total`. Anything else
//!   (`=`, `--`, `-=`, `+= expr`, `delete`) makes it a gauge;
//! - a metric name is the global's name in snake_case (`readBytes` →
//!   `read_bytes`), with `_gI` (I the global's index) added when another
//!   global's name is already that;
//! - an array's label names come from its index expressions where it is
//!   written: a local or global variable (`calls[name]++` → `name`), a
//!   call without arguments (`[execname()]` → `execname`), a context
//!   variable (`$syscall`, `$arg1`). A key written with different or
//!   other expressions, or whose name would repeat one before it (or be
//!   Prometheus's `le`/`quantile`), is `keyN` (N counted from 1).

use crate::ast::{AssignOp, FileId, IncDecOp};
use crate::program::{ContextVar, Expr, ExprKind, LValue, LocalVar, Program, StmtKind, Type};
use crate::walk::{self, Node};
use utap_runtime::metrics::MetricSpec;

/// The metrics of `p`'s globals declared in file `user` (the script
/// `script`, named in the HELP text), in the order they are declared.
pub fn specs(p: &Program, user: FileId, script: &str) -> Vec<MetricSpec> {
    let uses = uses(p);
    let mut exported: Vec<usize> = (0..p.globals.len())
        .filter(|&i| {
            let g = &p.globals[i];
            g.span.file == user
                && !g.name.starts_with("__")
                && matches!(g.ty, Type::Long | Type::Stats)
        })
        .collect();
    // The checker may order globals otherwise (statistics first).
    exported.sort_by_key(|&i| p.globals[i].span.start);
    let mut taken: Vec<String> = Vec::with_capacity(exported.len());
    exported
        .into_iter()
        .map(|i| {
            let g = &p.globals[i];
            let u = &uses[i];
            let counter = g.ty == Type::Long && u.increments && !u.other_writes;
            let name = family_name(&g.name, i, counter, &taken);
            taken.push(name.clone());
            MetricSpec {
                global: i,
                name,
                counter,
                labels: label_names(&u.keys),
                help: format!("utap global {} of {script}", g.name),
            }
        })
        .collect()
}

/// Global `i`'s family name: snake_case, `_total` for a counter, and
/// `_gI` before that when the name is already `taken` (`readBytes` beside
/// `read_bytes`, a counter `x` beside a global `x_total`).
fn family_name(global: &str, i: usize, counter: bool, taken: &[String]) -> String {
    let base = snake_case(global);
    let with_suffix = |b: &str| match counter && !b.ends_with("_total") {
        true => format!("{b}_total"),
        false => b.to_string(),
    };
    let name = with_suffix(&base);
    if taken.contains(&name) {
        let base = base.strip_suffix("_total").unwrap_or(&base);
        return with_suffix(&format!("{base}_g{i}"));
    }
    name
}

/// What the program does to one global.
#[derive(Clone, Debug, Default)]
struct Uses {
    /// `++` or `+=` of a non-negative literal somewhere.
    increments: bool,
    /// Any other write.
    other_writes: bool,
    /// Per key column: the name of the index expression written with, or
    /// `Some(None)` when writes disagree or have none.
    keys: Vec<Option<Option<String>>>,
}

fn uses(p: &Program) -> Vec<Uses> {
    let mut out = vec![Uses::default(); p.globals.len()];
    let bodies = p
        .functions
        .iter()
        .map(|f| (&f.body, &f.locals))
        .chain(p.probes.iter().map(|pr| (&pr.body, &pr.locals)));
    for (body, locals) in bodies {
        walk::nodes(body, &mut |n| match n {
            Node::Stmt(s) => {
                if let StmtKind::Delete(lv) = &s.kind
                    && let Some(g) = global_of(lv)
                {
                    out[g].other_writes = true;
                }
            }
            Node::Expr(e) => note_write(e, p, locals, &mut out),
        });
    }
    out
}

fn note_write(e: &Expr, p: &Program, locals: &[LocalVar], out: &mut [Uses]) {
    let (target, increment) = match &e.kind {
        ExprKind::Assign { op, target, value } => (
            target,
            *op == AssignOp::Add && matches!(value.kind, ExprKind::Long(n) if n >= 0),
        ),
        ExprKind::IncDec { op, target, .. } => (target, *op == IncDecOp::Inc),
        ExprKind::StatAdd { target, .. } => (target, false),
        _ => return,
    };
    let Some(g) = global_of(target) else {
        return;
    };
    let u = &mut out[g];
    if increment {
        u.increments = true;
    } else if !matches!(e.kind, ExprKind::StatAdd { .. }) {
        u.other_writes = true;
    }
    if let LValue::Elem { keys, .. } = target {
        if u.keys.len() < keys.len() {
            u.keys.resize(keys.len(), None);
        }
        for (slot, k) in u.keys.iter_mut().zip(keys) {
            let name = key_name(k, p, locals);
            *slot = match slot.take() {
                None => Some(name),
                Some(seen) if seen == name => Some(seen),
                Some(_) => Some(None),
            };
        }
    }
}

fn global_of(lv: &LValue) -> Option<usize> {
    match lv {
        LValue::Global(g) | LValue::Elem { array: g, .. } => Some(g.0 as usize),
        _ => None,
    }
}

/// The name an index expression gives its key column, if any.
fn key_name(k: &Expr, p: &Program, locals: &[LocalVar]) -> Option<String> {
    let raw = match &k.kind {
        ExprKind::Load(LValue::Local(l)) => locals.get(l.0 as usize)?.name.clone(),
        ExprKind::Load(LValue::Global(g)) => p.globals.get(g.0 as usize)?.name.clone(),
        ExprKind::Builtin { name, args } if args.is_empty() => name.to_string(),
        ExprKind::Call { func, args } if args.is_empty() => {
            p.functions.get(func.0 as usize)?.name.clone()
        }
        ExprKind::Context(c) => match c {
            ContextVar::Syscall => "syscall".into(),
            ContextVar::Arg(i) => format!("arg{}", i + 1),
            ContextVar::Return => "return".into(),
            ContextVar::Signal => "signal".into(),
            ContextVar::Code => "code".into(),
        },
        _ => return None,
    };
    let name = snake_case(raw.trim_start_matches('_'));
    let valid = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some(name)
}

/// One label name per key column: the script's where it gives one that is
/// new and allowed, else `keyN`.
fn label_names(keys: &[Option<Option<String>>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        let fallback = format!("key{}", i + 1);
        let name = match k {
            Some(Some(n))
                if !out.contains(n) && n != "le" && n != "quantile" && !is_fallback_name(n) =>
            {
                n.clone()
            }
            _ => fallback,
        };
        out.push(name);
    }
    out
}

/// `keyN` names are the fallbacks': a script's own `key2` could collide.
fn is_fallback_name(n: &str) -> bool {
    n.strip_prefix("key")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// `readBytes` → `read_bytes` (Prometheus names are snake_case).
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_snake_case() {
        assert_eq!(snake_case("readBytes"), "read_bytes");
        assert_eq!(snake_case("HTTPCalls"), "httpcalls");
        assert_eq!(snake_case("lat_ns"), "lat_ns");
        assert_eq!(snake_case("x2Y"), "x2_y");
    }

    #[test]
    fn family_names_never_repeat() {
        let taken = vec!["read_bytes".to_string(), "x_total".to_string()];
        assert_eq!(family_name("readBytes", 3, false, &taken), "read_bytes_g3");
        assert_eq!(family_name("x", 4, true, &taken), "x_g4_total");
        assert_eq!(family_name("y", 5, true, &taken), "y_total");
    }

    #[test]
    fn labels_fall_back_to_key_n() {
        let keys = vec![
            Some(Some("name".to_string())),
            Some(None),
            Some(Some("name".to_string())),
            Some(Some("le".to_string())),
            Some(Some("key1".to_string())),
        ];
        assert_eq!(label_names(&keys), ["name", "key2", "key3", "key4", "key5"]);
    }
}
