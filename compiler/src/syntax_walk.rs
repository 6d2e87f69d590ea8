//! Walking the syntax tree (before checking): every statement and
//! expression of a block, each before the ones inside it. Passes on the
//! checked program use `walk` instead.

use crate::ast::{self, Expr, ExprKind, ForeachSource, Stmt, StmtKind};

/// A statement or an expression, as [`nodes`] meets them.
#[derive(Clone, Copy)]
pub enum Node<'a> {
    Stmt(&'a Stmt),
    Expr(&'a Expr),
}

/// Calls `f` on every statement and expression of `b`, outermost first;
/// when `f` returns false, the parts of that node are not visited.
/// Expressions inside target-variable paths (`$p->a[i]`) are visited.
pub fn nodes<'a>(b: &'a ast::Block, f: &mut dyn FnMut(Node<'a>) -> bool) {
    b.stmts.iter().for_each(|s| stmt(s, f));
}

fn stmt<'a>(s: &'a Stmt, f: &mut dyn FnMut(Node<'a>) -> bool) {
    if !f(Node::Stmt(s)) {
        return;
    }
    match &s.kind {
        StmtKind::Block(b) => nodes(b, f),
        StmtKind::Expr(e) | StmtKind::Delete(e) | StmtKind::Return(Some(e)) => expr(e, f),
        StmtKind::If { cond, then, else_ } => {
            expr(cond, f);
            stmt(then, f);
            else_.iter().for_each(|e| stmt(e, f));
        }
        StmtKind::While { cond, body } => {
            expr(cond, f);
            stmt(body, f);
        }
        StmtKind::For {
            init,
            cond,
            step,
            body,
        } => {
            [init, cond, step]
                .into_iter()
                .flatten()
                .for_each(|e| expr(e, f));
            stmt(body, f);
        }
        StmtKind::Foreach(fe) => {
            if let ForeachSource::Hist(h) = &fe.source {
                expr(h, f);
            }
            fe.slice.iter().flatten().flatten().for_each(|e| expr(e, f));
            fe.limit.iter().for_each(|e| expr(e, f));
            stmt(&fe.body, f);
        }
        StmtKind::Try { body, catch, .. } => {
            nodes(body, f);
            nodes(catch, f);
        }
        StmtKind::Next
        | StmtKind::Break
        | StmtKind::Continue
        | StmtKind::Return(None)
        | StmtKind::Embedded(_)
        | StmtKind::Empty => {}
    }
}

/// [`nodes`] from one expression.
pub fn expr<'a>(e: &'a Expr, f: &mut dyn FnMut(Node<'a>) -> bool) {
    if !f(Node::Expr(e)) {
        return;
    }
    let path = |p: &'a [ast::TargetComp], f: &mut dyn FnMut(Node<'a>) -> bool| {
        for c in p {
            if let ast::TargetComp::Index(i) = c {
                expr(i, f);
            }
        }
    };
    match &e.kind {
        ExprKind::Num(_) | ExprKind::Str(_) | ExprKind::Var(_) | ExprKind::Wildcard => {}
        ExprKind::Target(t) => path(&t.path, f),
        ExprKind::Cast {
            expr: x, path: p, ..
        } => {
            expr(x, f);
            path(p, f);
        }
        ExprKind::Index { base, keys } => {
            if let ast::IndexBase::Hist(h) = base {
                expr(h, f);
            }
            keys.iter().for_each(|k| expr(k, f));
        }
        ExprKind::Defined(x)
        | ExprKind::Unary { expr: x, .. }
        | ExprKind::IncDec { target: x, .. } => expr(x, f),
        ExprKind::Hist { kind, expr: x } => {
            expr(x, f);
            if let ast::HistKind::Linear { lo, hi, step } = kind {
                [lo, hi, step].into_iter().for_each(|b| expr(b, f));
            }
        }
        ExprKind::AtCall { args, .. }
        | ExprKind::Call { args, .. }
        | ExprKind::In { keys: args, .. } => args.iter().for_each(|a| expr(a, f)),
        ExprKind::Stat { expr: x, args, .. } => {
            expr(x, f);
            args.iter().for_each(|a| expr(a, f));
        }
        ExprKind::Binary { lhs, rhs, .. }
        | ExprKind::Assign {
            target: lhs,
            value: rhs,
            ..
        } => {
            expr(lhs, f);
            expr(rhs, f);
        }
        ExprKind::Ternary { cond, then, else_ } => {
            [cond, then, else_].into_iter().for_each(|x| expr(x, f));
        }
    }
}

/// Calls `f` on every expression of `b`, outermost first; `f` returns true
/// when it replaced the expression (its parts are then not visited).
pub fn exprs_mut(b: &mut ast::Block, f: &mut dyn FnMut(&mut Expr) -> bool) {
    for s in &mut b.stmts {
        stmt_mut(s, f);
    }
}

fn stmt_mut(s: &mut ast::Stmt, f: &mut dyn FnMut(&mut Expr) -> bool) {
    match &mut s.kind {
        StmtKind::Block(b) => exprs_mut(b, f),
        StmtKind::Expr(e) | StmtKind::Delete(e) | StmtKind::Return(Some(e)) => expr_mut(e, f),
        StmtKind::If { cond, then, else_ } => {
            expr_mut(cond, f);
            stmt_mut(then, f);
            if let Some(e) = else_ {
                stmt_mut(e, f);
            }
        }
        StmtKind::While { cond, body } => {
            expr_mut(cond, f);
            stmt_mut(body, f);
        }
        StmtKind::For {
            init,
            cond,
            step,
            body,
        } => {
            for e in [init, cond, step].into_iter().flatten() {
                expr_mut(e, f);
            }
            stmt_mut(body, f);
        }
        StmtKind::Foreach(fe) => {
            if let ast::ForeachSource::Hist(h) = &mut fe.source {
                expr_mut(h, f);
            }
            for e in fe.slice.iter_mut().flatten().flatten() {
                expr_mut(e, f);
            }
            if let Some(l) = &mut fe.limit {
                expr_mut(l, f);
            }
            stmt_mut(&mut fe.body, f);
        }
        StmtKind::Try { body, catch, .. } => {
            exprs_mut(body, f);
            exprs_mut(catch, f);
        }
        StmtKind::Next
        | StmtKind::Break
        | StmtKind::Continue
        | StmtKind::Return(None)
        | StmtKind::Embedded(_)
        | StmtKind::Empty => {}
    }
}

pub fn expr_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr) -> bool) {
    if f(e) {
        return;
    }
    match &mut e.kind {
        ExprKind::Num(_)
        | ExprKind::Str(_)
        | ExprKind::Var(_)
        | ExprKind::Target(_)
        | ExprKind::Wildcard => {}
        ExprKind::Index { base, keys } => {
            if let ast::IndexBase::Hist(h) = base {
                expr_mut(h, f);
            }
            keys.iter_mut().for_each(|k| expr_mut(k, f));
        }
        ExprKind::Cast { expr: x, .. }
        | ExprKind::Defined(x)
        | ExprKind::Unary { expr: x, .. }
        | ExprKind::IncDec { target: x, .. }
        | ExprKind::Hist { expr: x, .. } => expr_mut(x, f),
        ExprKind::AtCall { args, .. }
        | ExprKind::Call { args, .. }
        | ExprKind::In { keys: args, .. } => args.iter_mut().for_each(|a| expr_mut(a, f)),
        ExprKind::Stat { expr: x, args, .. } => {
            expr_mut(x, f);
            args.iter_mut().for_each(|a| expr_mut(a, f));
        }
        ExprKind::Binary { lhs, rhs, .. }
        | ExprKind::Assign {
            target: lhs,
            value: rhs,
            ..
        } => {
            expr_mut(lhs, f);
            expr_mut(rhs, f);
        }
        ExprKind::Ternary { cond, then, else_ } => {
            expr_mut(cond, f);
            expr_mut(then, f);
            expr_mut(else_, f);
        }
    }
}
