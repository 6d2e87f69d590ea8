//! `@entry(expr)` in `.return` probes: the value `expr` had at the entry
//! of the call (or syscall) that is now returning, as SystemTap defines it.
//!
//! The mechanism is independent of the probe kind. Before anything is
//! resolved, each user probe using `@entry` is split in two:
//!
//! * an **entry probe** on the matching entry points (each written point
//!   without its trailing `.return`: `syscall.read.return` →
//!   `syscall.read`, `myio.return` → `myio`, and for function probes
//!   `process("p").function("f").return` → `process("p").function("f")`)
//!   evaluates every `@entry` expression and pushes the values on a stack
//!   kept per thread (global arrays keyed by `[tid(), depth]`), with a key
//!   naming the call (`$syscall` where the probe has one, else 0);
//! * the **return probe** first pops that thread's stack down to the
//!   newest entry with its key (older unmatched entries, such as those of
//!   `exit` or `rt_sigreturn`, which never return, are dropped) into
//!   locals, and each `@entry(expr)` reads its local.
//!
//! Nesting is safe: recursion (function probes) or a signal handler's
//! calls push and pop above the outer call's values. A return whose entry
//! was never seen (it predates the attach) finds no entry: `@entry` gives
//! the type's zero (0 or ""); such returns are counted per probe and `-v`
//! reports them at the end of the session.
//!
//! The entry probe is an ordinary probe on an ordinary point, so the
//! seccomp filter and `Cx::want_syscall_exit` see it like any other: a
//! syscall with an `@entry` return probe stops at its entry and its exit.
//! A probe family gains `@entry` support by having entry points written
//! as its return points minus `.return` ([`entry_point`]).

use crate::ast::{self, Expr, ExprKind, Item, Probe, Script};
use crate::parser::{NodeIds, ParseOptions, parse_file};
use crate::source::SourceMap;

use super::error::SemError;

/// The entry point matching a written return point: the point without
/// its last component, when that is `.return`.
pub fn entry_point(point: &ast::ProbePoint) -> Option<ast::ProbePoint> {
    let last = point.components.last()?;
    if last.name != "return" || last.arg.is_some() || point.components.len() < 2 {
        return None;
    }
    let mut p = point.clone();
    p.components.pop();
    // Recorded whatever the return's condition says: the condition may
    // change between the entry and the return.
    p.condition = None;
    Some(p)
}

/// Splits every user probe that uses `@entry` (see the module doc); the
/// new globals and entry probes are added to `script`. Notes for `-v` go
/// to `notes`.
pub fn split(
    script: &mut Script,
    map: &mut SourceMap,
    ids: &mut NodeIds,
    notes: &mut Vec<SemError>,
    missing: &mut Vec<(String, String)>,
) -> Vec<SemError> {
    let mut errors = Vec::new();
    let mut added = Vec::new();
    let mut n = 0;
    for item in &mut script.items {
        let Item::Probe(p) = item else { continue };
        if !p.points.is_empty() && p.points.iter().all(is_function_return) {
            crate::syntax_walk::exprs_mut(&mut p.body, &mut implicit_entry);
        }
        let mut exprs = Vec::new();
        let mut first_span = None;
        take_entries(&mut p.body, &mut exprs, &mut first_span);
        let Some(at) = first_span else { continue };
        let entries: Option<Vec<ast::ProbePoint>> = p.points.iter().map(entry_point).collect();
        let Some(entries) = entries else {
            // Only the one error: the values' locals get no type otherwise.
            crate::syntax_walk::exprs_mut(&mut p.body, &mut |e: &mut Expr| {
                let placeholder =
                    matches!(&e.kind, ExprKind::Var(v) if v.starts_with("__entry_value_"));
                if placeholder {
                    e.kind = ExprKind::Num(0);
                }
                placeholder
            });
            errors.push(
                SemError::new(at, "@entry is allowed only in .return probes")
                    .label("this probe's points are not all written with .return"),
            );
            continue;
        };
        match build(n, exprs, entries, p, map, ids) {
            Ok((items, counter)) => {
                added.extend(items);
                missing.push(counter);
            }
            Err(e) => errors.push(e),
        }
        notes.push(
            SemError::new(at, "@entry: a return whose entry was not seen (it predates the attach) gives 0 or \"\"")
                .label("recorded at the matching entry, per thread"),
        );
        n += 1;
    }
    script.items.extend(added);
    errors
}

/// Whether `point` is a function's return, `process(..).function(..).return`
/// (also with `.library(..)`): where target variables read at entry.
fn is_function_return(point: &ast::ProbePoint) -> bool {
    let c = &point.components;
    c.first().is_some_and(|f| f.name == "process")
        && c.iter().any(|x| x.name == "function" && x.arg.is_some())
        && c.last()
            .is_some_and(|l| l.name == "return" && l.arg.is_none())
}

/// SystemTap's implicit `@entry` in a function's `.return` probe: a DWARF
/// target variable (`$var`, `$p->f`, `$var$`, `$$parms`, `$$vars`...) means
/// its value at the call's entry. Left alone: `$return`, `$$return`, the
/// registers `$argN`, targets already in `@entry(..)` or `@defined(..)`,
/// and assigned targets (the checker reports those).
fn implicit_entry(e: &mut Expr) -> bool {
    match &mut e.kind {
        ExprKind::AtCall { name, .. } if name == "entry" => true,
        ExprKind::Defined(_) => true,
        ExprKind::IncDec { .. } => true,
        ExprKind::Assign { target, value, .. } if matches!(target.kind, ExprKind::Target(_)) => {
            crate::syntax_walk::expr_mut(value, &mut implicit_entry);
            true
        }
        ExprKind::Target(t) if read_at_entry(t) => {
            let inner = e.clone();
            e.kind = ExprKind::AtCall {
                name: "entry".into(),
                args: vec![inner],
            };
            true
        }
        _ => false,
    }
}

fn read_at_entry(t: &ast::TargetVar) -> bool {
    let register_arg = t
        .name
        .strip_prefix("arg")
        .is_some_and(|n| n.parse::<u8>().is_ok());
    !register_arg
        && !matches!(
            t.name.as_str(),
            "return" | "$return" | "$name" | "$provider"
        )
}

/// Replaces each `@entry(e)` in `b` by the local `__entry_value_K` and
/// collects the `e`s.
fn take_entries(b: &mut ast::Block, out: &mut Vec<Expr>, first: &mut Option<ast::Span>) {
    crate::syntax_walk::exprs_mut(b, &mut |e: &mut Expr| {
        let ExprKind::AtCall { name, args } = &mut e.kind else {
            return false;
        };
        if name != "entry" || args.len() != 1 {
            return false;
        }
        let inner = args.pop().expect("one argument");
        first.get_or_insert(e.span);
        e.kind = ExprKind::Var(format!("__entry_value_{}", out.len()));
        out.push(inner);
        true
    });
}

/// The globals, the entry probe, and the return probe's new prologue;
/// with the global counting the returns that found no entry and the
/// return probe's points, for `-v` to name. (A counter, not a call into
/// the tracer: the two probes can then run in the program.)
fn build(
    n: usize,
    exprs: Vec<Expr>,
    entries: Vec<ast::ProbePoint>,
    ret: &mut Probe,
    map: &mut SourceMap,
    ids: &mut NodeIds,
) -> Result<(Vec<Item>, (String, String)), SemError> {
    let g = format!("__entry{n}");
    let what: String = ret
        .points
        .iter()
        .map(super::point_text)
        .collect::<Vec<_>>()
        .join(", ");
    let k = exprs.len();
    let values: Vec<String> = (0..k).map(|i| format!("{g}_v{i}")).collect();
    let key = "(@defined($syscall) ? $syscall : 0)";
    let mut text = format!("global {g}_depth, {g}_key, {g}_missing");
    for v in &values {
        text.push_str(&format!(", {v}"));
    }
    text.push_str("\nprobe begin {\n  __entry_tid = tid()\n");
    text.push_str(&format!(
        "  __entry_d = ++{g}_depth[__entry_tid]\n  {g}_key[__entry_tid, __entry_d] = {key}\n"
    ));
    for (i, v) in values.iter().enumerate() {
        text.push_str(&format!(
            "  {v}[__entry_tid, __entry_d] = __entry_expr_{i}\n"
        ));
    }
    text.push_str("}\nprobe begin {\n  __entry_tid = tid()\n");
    text.push_str(&format!(
        "  __entry_k = {key}\n  __entry_found = 0\n  \
         while (!__entry_found && __entry_tid in {g}_depth) {{\n    \
         __entry_d = {g}_depth[__entry_tid]\n    \
         __entry_found = {g}_key[__entry_tid, __entry_d] == __entry_k\n    \
         delete {g}_key[__entry_tid, __entry_d]\n"
    ));
    for (i, v) in values.iter().enumerate() {
        text.push_str(&format!(
            "    if (__entry_found) __entry_value_{i} = {v}[__entry_tid, __entry_d]\n    \
             delete {v}[__entry_tid, __entry_d]\n"
        ));
    }
    text.push_str(&format!(
        "    if (__entry_d > 1) {g}_depth[__entry_tid] = __entry_d - 1\n    \
         else delete {g}_depth[__entry_tid]\n  }}\n  \
         if (!__entry_found) {g}_missing++\n}}\n"
    ));
    let file = map.add(format!("<@entry of {}>", map.location(ret.span)), text);
    let script = parse_file(map, file, &ParseOptions::default(), ids)
        .map_err(|d| SemError::new(ret.span, format!("internal error building @entry: {d:?}")))?;
    let mut items = script.items;
    let Some(Item::Probe(mut prologue)) = items.pop() else {
        unreachable!("the template ends with the return prologue")
    };
    let Some(Item::Probe(mut entry)) = items.pop() else {
        unreachable!("the template's entry probe")
    };
    // The user's expressions, moved into the entry probe.
    let mut exprs: Vec<Option<Expr>> = exprs.into_iter().map(Some).collect();
    crate::syntax_walk::exprs_mut(&mut entry.body, &mut |e: &mut Expr| {
        let ExprKind::Var(name) = &e.kind else {
            return false;
        };
        let Some(i) = name
            .strip_prefix("__entry_expr_")
            .and_then(|i| i.parse::<usize>().ok())
        else {
            return false;
        };
        if let Some(x) = exprs.get_mut(i).and_then(Option::take) {
            *e = x;
        }
        true
    });
    entry.points = entries;
    entry.span = ret.span;
    prologue.body.stmts.append(&mut ret.body.stmts);
    ret.body.stmts = prologue.body.stmts;
    // Globals first, as written scripts have them.
    let mut out: Vec<Item> = items;
    out.push(Item::Probe(entry));
    Ok((out, (format!("{g}_missing"), what)))
}
