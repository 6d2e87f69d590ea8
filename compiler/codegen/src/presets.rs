//! Handlers that differ only in the strings their alias bodies give to
//! locals are translated once.
//!
//! The 384 expansions of `syscall.*.return` in a script that reads `name`
//! have the same checked body but for their first statement, the alias's
//! `name = "read"` (another literal, another source line). Grouping by IR
//! (`sharing`) compiles them once, but translating each one to find that
//! out was most of pass 3. Such a statement, a *preset*, is translated into
//! the same IR whatever its literal and position, but for two constants:
//! its location (for a MAXACTION error) and its literal's handle; the
//! translator reports both (`Translator::finish_body`). So a probe whose
//! body equals an already translated one's but for the literals and spans
//! of its top-level presets gets that one's constants with these two
//! changed, and joins its group untranslated. `UTAP_CHECK_PRESETS=1`
//! translates it anyway and fails on any difference (tests/sharing.rs).

use utap_compiler::program::{ExprKind, LValue, LocalId, ProbeDef, Stmt, StmtKind};

use crate::tables::Tables;

/// `local = "literal"` as a statement: the local and the literal.
pub fn preset(s: &Stmt) -> Option<(LocalId, &str)> {
    let StmtKind::Expr(e) = &s.kind else {
        return None;
    };
    let ExprKind::Assign {
        op: utap_compiler::ast::AssignOp::Assign,
        target: LValue::Local(l),
        value,
    } = &e.kind
    else {
        return None;
    };
    match &value.kind {
        ExprKind::Str(text) => Some((*l, text)),
        _ => None,
    }
}

/// How many top-level presets `p`'s body has.
pub fn count(p: &ProbeDef) -> usize {
    p.body.stmts.iter().filter(|s| preset(s).is_some()).count()
}

/// Whether `b` translates as `a` but for the constants of its top-level
/// presets: the same point conditions and statements, except presets of
/// the same local that may differ in literal and span.
pub fn same_but_presets(a: &ProbeDef, b: &ProbeDef) -> bool {
    a.points.len() == b.points.len()
        && a.points
            .iter()
            .zip(&b.points)
            .all(|(x, y)| x.condition == y.condition)
        && a.body.stmts.len() == b.body.stmts.len()
        && a.body
            .stmts
            .iter()
            .zip(&b.body.stmts)
            .all(|(x, y)| match (preset(x), preset(y)) {
                (Some((lx, _)), Some((ly, _))) => lx == ly,
                _ => x == y,
            })
}

/// The constants `p`'s top-level presets make, in body order: location,
/// then literal handle, as the translator makes them (and in its order, so
/// that the tables grow exactly as translating `p` would grow them).
pub fn constants(p: &ProbeDef, t: &mut Tables) -> Vec<(i64, i64)> {
    p.body
        .stmts
        .iter()
        .filter_map(|s| preset(s).map(|(_, text)| (s.span, text)))
        .map(|(span, text)| {
            let loc = t.locations.span(t.sources, span);
            (i64::from(loc), t.literal(text))
        })
        .collect()
}
