//! Walking the checked program: every expression of a block, an expression
//! before the ones inside it, in source order. Later passes (elision,
//! codegen's layout) visit expressions through these instead of each
//! keeping its own copy of the tree's shape.

use crate::program::{Block, Expr, ExprKind, ForeachSource, LValue, Program, Stmt, StmtKind};

/// Every expression of the program: functions, then probes (point
/// conditions before the body).
pub fn program<'a>(p: &'a Program, f: &mut dyn FnMut(&'a Expr)) {
    for func in &p.functions {
        block(&func.body, f);
    }
    for probe in &p.probes {
        for c in probe.points.iter().filter_map(|pt| pt.condition.as_ref()) {
            expr(c, f);
        }
        block(&probe.body, f);
    }
}

pub fn block<'a>(b: &'a Block, f: &mut dyn FnMut(&'a Expr)) {
    nodes(b, &mut |n| {
        if let Node::Expr(e) = n {
            f(e)
        }
    });
}

/// A statement or an expression, as [`nodes`] meets them.
#[derive(Clone, Copy)]
pub enum Node<'a> {
    Stmt(&'a Stmt),
    Expr(&'a Expr),
}

/// Every statement and expression of a block, each before the ones inside
/// it, for passes that also look at what statements bind (loop and catch
/// variables) or delete.
pub fn nodes<'a>(b: &'a Block, f: &mut dyn FnMut(Node<'a>)) {
    b.stmts.iter().for_each(|s| stmt(s, f));
}

fn stmt<'a>(s: &'a Stmt, f: &mut dyn FnMut(Node<'a>)) {
    f(Node::Stmt(s));
    match &s.kind {
        StmtKind::Expr(e) | StmtKind::Return(Some(e)) => expr_nodes(e, f),
        StmtKind::Block(b) => nodes(b, f),
        StmtKind::If { cond, then, else_ } => {
            expr_nodes(cond, f);
            stmt(then, f);
            else_.iter().for_each(|e| stmt(e, f));
        }
        StmtKind::While { cond, body } => {
            expr_nodes(cond, f);
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
                .for_each(|e| expr_nodes(e, f));
            stmt(body, f);
        }
        StmtKind::Foreach(fe) => {
            if let ForeachSource::Hist(h) = &fe.source {
                expr_nodes(h, f);
            }
            fe.slice
                .iter()
                .flatten()
                .flatten()
                .for_each(|e| expr_nodes(e, f));
            fe.limit.iter().for_each(|e| expr_nodes(e, f));
            stmt(&fe.body, f);
        }
        StmtKind::Delete(lv) => lvalue(lv, &mut |e| f(Node::Expr(e))),
        StmtKind::Try { body, catch, .. } => {
            nodes(body, f);
            nodes(catch, f);
        }
        StmtKind::Next | StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
    }
}

fn expr_nodes<'a>(e: &'a Expr, f: &mut dyn FnMut(Node<'a>)) {
    expr(e, &mut |e| f(Node::Expr(e)));
}

fn lvalue<'a>(lv: &'a LValue, f: &mut dyn FnMut(&'a Expr)) {
    if let LValue::Elem { keys, .. } = lv {
        keys.iter().for_each(|k| expr(k, f));
    }
}

pub fn expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Long(_) | ExprKind::Str(_) | ExprKind::Context(_) | ExprKind::Wildcard => {}
        ExprKind::Load(lv)
        | ExprKind::IncDec { target: lv, .. }
        | ExprKind::StatGet { target: lv, .. }
        | ExprKind::Hist { target: lv, .. } => lvalue(lv, f),
        ExprKind::Assign { target, value, .. } | ExprKind::StatAdd { target, value } => {
            lvalue(target, f);
            expr(value, f);
        }
        ExprKind::Unary { expr: inner, .. } => expr(inner, f),
        ExprKind::Binary { lhs, rhs, .. }
        | ExprKind::HistBucket {
            hist: lhs,
            index: rhs,
        } => {
            expr(lhs, f);
            expr(rhs, f);
        }
        ExprKind::Ternary { cond, then, else_ } => {
            [cond, then, else_].into_iter().for_each(|e| expr(e, f));
        }
        ExprKind::In { keys: list, .. }
        | ExprKind::Call { args: list, .. }
        | ExprKind::Builtin { args: list, .. }
        | ExprKind::Print { args: list, .. } => list.iter().for_each(|a| expr(a, f)),
    }
}

/// [`block`], with each expression lent mutably (for rewriting passes).
pub fn block_mut(b: &mut Block, f: &mut dyn FnMut(&mut Expr)) {
    b.stmts.iter_mut().for_each(|s| stmt_mut(s, f));
}

pub fn stmt_mut(s: &mut Stmt, f: &mut dyn FnMut(&mut Expr)) {
    match &mut s.kind {
        StmtKind::Expr(e) | StmtKind::Return(Some(e)) => expr_mut(e, f),
        StmtKind::Block(b) => block_mut(b, f),
        StmtKind::If { cond, then, else_ } => {
            expr_mut(cond, f);
            stmt_mut(then, f);
            else_.iter_mut().for_each(|e| stmt_mut(e, f));
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
            [init, cond, step]
                .into_iter()
                .flatten()
                .for_each(|e| expr_mut(e, f));
            stmt_mut(body, f);
        }
        StmtKind::Foreach(fe) => {
            if let ForeachSource::Hist(h) = &mut fe.source {
                expr_mut(h, f);
            }
            fe.slice
                .iter_mut()
                .flatten()
                .flatten()
                .for_each(|e| expr_mut(e, f));
            fe.limit.iter_mut().for_each(|e| expr_mut(e, f));
            stmt_mut(&mut fe.body, f);
        }
        StmtKind::Delete(lv) => lvalue_mut(lv, f),
        StmtKind::Try { body, catch, .. } => {
            block_mut(body, f);
            block_mut(catch, f);
        }
        StmtKind::Next | StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
    }
}

fn lvalue_mut(lv: &mut LValue, f: &mut dyn FnMut(&mut Expr)) {
    if let LValue::Elem { keys, .. } = lv {
        keys.iter_mut().for_each(|k| expr_mut(k, f));
    }
}

pub fn expr_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    f(e);
    match &mut e.kind {
        ExprKind::Long(_) | ExprKind::Str(_) | ExprKind::Context(_) | ExprKind::Wildcard => {}
        ExprKind::Load(lv)
        | ExprKind::IncDec { target: lv, .. }
        | ExprKind::StatGet { target: lv, .. }
        | ExprKind::Hist { target: lv, .. } => lvalue_mut(lv, f),
        ExprKind::Assign { target, value, .. } | ExprKind::StatAdd { target, value } => {
            lvalue_mut(target, f);
            expr_mut(value, f);
        }
        ExprKind::Unary { expr: inner, .. } => expr_mut(inner, f),
        ExprKind::Binary { lhs, rhs, .. }
        | ExprKind::HistBucket {
            hist: lhs,
            index: rhs,
        } => {
            expr_mut(lhs, f);
            expr_mut(rhs, f);
        }
        ExprKind::Ternary { cond, then, else_ } => {
            [cond, then, else_].into_iter().for_each(|e| expr_mut(e, f));
        }
        ExprKind::In { keys: list, .. }
        | ExprKind::Call { args: list, .. }
        | ExprKind::Builtin { args: list, .. }
        | ExprKind::Print { args: list, .. } => list.iter_mut().for_each(|a| expr_mut(a, f)),
    }
}
