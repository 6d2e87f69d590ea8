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

use cranelift_codegen::ir::{Function, Inst};
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
fn count(p: &ProbeDef) -> usize {
    p.body.stmts.iter().filter(|s| preset(s).is_some()).count()
}

/// Where the constants each top-level preset of `p` made (`made`, from
/// `Translator::finish_body`) stand among the `iconst.i64`s of its
/// translation `func`, as `sharing` numbers them: (location, literal).
/// None when a preset's constants were not found.
pub fn positions(
    p: &ProbeDef,
    func: &Function,
    made: &[(Inst, Inst)],
) -> Option<Vec<(usize, usize)>> {
    if made.len() != count(p) {
        return None;
    }
    let insts: Vec<Inst> = made.iter().flat_map(|&(l, c)| [l, c]).collect();
    let at = crate::sharing::const_positions(func, &insts)?;
    Some(at.chunks(2).map(|c| (c[0], c[1])).collect())
}

/// The constants to change in a handler whose presets' constants stand at
/// `positions` to make it `p`'s: (position, value).
pub fn changes(positions: &[(usize, usize)], p: &ProbeDef, t: &mut Tables) -> Vec<(usize, i64)> {
    positions
        .iter()
        .zip(constants(p, t))
        .flat_map(|(&(at_loc, at_lit), (loc, lit))| [(at_loc, loc), (at_lit, lit)])
        .collect()
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
fn constants(p: &ProbeDef, t: &mut Tables) -> Vec<(i64, i64)> {
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
