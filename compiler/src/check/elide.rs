//! Elision of work whose result nobody uses, as SystemTap's optimizer does:
//! an assignment to a local that is never read is dropped when its value
//! has no side effect. This is what makes `syscall.*` aliases cheap: a
//! handler that uses only `name` never computes `argstr`.

use std::collections::HashSet;

use crate::builtins;
use crate::program::*;

/// Drops dead local assignments from a body (repeatedly, since dropping
/// one can make another dead). Returns the names of the locals elided.
pub fn dead_locals(body: &mut Block, locals: &[LocalVar]) -> Vec<String> {
    let mut elided = Vec::new();
    loop {
        let mut read = HashSet::new();
        reads_block(body, &mut read);
        let mut dropped = HashSet::new();
        drop_block(body, &read, &mut dropped);
        if dropped.is_empty() {
            break;
        }
        for l in dropped {
            let name = &locals[l as usize].name;
            if !elided.contains(name) {
                elided.push(name.clone());
            }
        }
    }
    elided
}

fn drop_block(b: &mut Block, read: &HashSet<u32>, dropped: &mut HashSet<u32>) {
    b.stmts.retain_mut(|s| {
        match &mut s.kind {
            StmtKind::Expr(Expr {
                kind:
                    ExprKind::Assign {
                        target: LValue::Local(l),
                        value,
                        ..
                    },
                ..
            }) if !read.contains(&l.0) && pure(value) => {
                dropped.insert(l.0);
                return false;
            }
            StmtKind::Block(inner) => drop_block(inner, read, dropped),
            StmtKind::If { then, else_, .. } => {
                drop_stmt(then, read, dropped);
                if let Some(e) = else_ {
                    drop_stmt(e, read, dropped);
                }
            }
            _ => {}
        }
        true
    });
}

fn drop_stmt(s: &mut Stmt, read: &HashSet<u32>, dropped: &mut HashSet<u32>) {
    if let StmtKind::Block(b) = &mut s.kind {
        drop_block(b, read, dropped);
    }
}

/// No side effect: literals, loads, operators and pure builtins.
pub fn pure(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Long(_) | ExprKind::Str(_) | ExprKind::Context(_) => true,
        ExprKind::Load(lv) => lvalue_pure(lv),
        ExprKind::Unary { expr, .. } => pure(expr),
        ExprKind::Binary { lhs, rhs, .. } => pure(lhs) && pure(rhs),
        ExprKind::Ternary { cond, then, else_ } => pure(cond) && pure(then) && pure(else_),
        ExprKind::In { keys, .. } => keys.iter().all(pure),
        ExprKind::StatGet { target, .. } => lvalue_pure(target),
        ExprKind::Builtin { name, args } => {
            builtins::lookup(name).is_some_and(|b| b.pure_) && args.iter().all(pure)
        }
        ExprKind::Print { kind, args, .. } => {
            matches!(
                kind,
                PrintKind::Sprint
                    | PrintKind::Sprintln
                    | PrintKind::Sprintf
                    | PrintKind::Sprintd
                    | PrintKind::Sprintdln
            ) && args.iter().all(pure)
        }
        _ => false,
    }
}

fn lvalue_pure(lv: &LValue) -> bool {
    match lv {
        LValue::Elem { keys, .. } => keys.iter().all(pure),
        _ => true,
    }
}

/// Locals read anywhere in a block.
fn reads_block(b: &Block, out: &mut HashSet<u32>) {
    for s in &b.stmts {
        reads_stmt(s, out);
    }
}

fn reads_stmt(s: &Stmt, out: &mut HashSet<u32>) {
    match &s.kind {
        StmtKind::Expr(e) => reads_expr(e, out),
        StmtKind::Block(b) => reads_block(b, out),
        StmtKind::If { cond, then, else_ } => {
            reads_expr(cond, out);
            reads_stmt(then, out);
            if let Some(e) = else_ {
                reads_stmt(e, out);
            }
        }
        StmtKind::While { cond, body } => {
            reads_expr(cond, out);
            reads_stmt(body, out);
        }
        StmtKind::For {
            init,
            cond,
            step,
            body,
        } => {
            for e in [init, cond, step].into_iter().flatten() {
                reads_expr(e, out);
            }
            reads_stmt(body, out);
        }
        StmtKind::Foreach(f) => {
            if let ForeachSource::Hist(h) = &f.source {
                reads_expr(h, out);
            }
            for e in f.slice.iter().flatten().flatten() {
                reads_expr(e, out);
            }
            if let Some(l) = &f.limit {
                reads_expr(l, out);
            }
            // Loop variables count as read: the loop assigns them.
            out.extend(f.keys.iter().map(|k| k.0));
            out.extend(f.value.iter().map(|k| k.0));
            reads_stmt(&f.body, out);
        }
        StmtKind::Return(Some(e)) => reads_expr(e, out),
        StmtKind::Delete(lv) => reads_lvalue(lv, out),
        StmtKind::Try {
            body,
            catch,
            catch_var,
        } => {
            reads_block(body, out);
            reads_block(catch, out);
            out.extend(catch_var.iter().map(|k| k.0));
        }
        _ => {}
    }
}

fn reads_lvalue(lv: &LValue, out: &mut HashSet<u32>) {
    match lv {
        LValue::Local(l) => {
            out.insert(l.0);
        }
        LValue::Elem { keys, .. } => {
            for k in keys {
                reads_expr(k, out);
            }
        }
        _ => {}
    }
}

fn reads_expr(e: &Expr, out: &mut HashSet<u32>) {
    match &e.kind {
        ExprKind::Load(lv)
        | ExprKind::StatGet { target: lv, .. }
        | ExprKind::Hist { target: lv, .. } => reads_lvalue(lv, out),
        ExprKind::Unary { expr, .. } => reads_expr(expr, out),
        ExprKind::Binary { lhs, rhs, .. } => {
            reads_expr(lhs, out);
            reads_expr(rhs, out);
        }
        ExprKind::Ternary { cond, then, else_ } => {
            reads_expr(cond, out);
            reads_expr(then, out);
            reads_expr(else_, out);
        }
        ExprKind::Assign { op, target, value } => {
            // `x = v` does not read x; `x += v` does.
            if *op != crate::ast::AssignOp::Assign {
                reads_lvalue(target, out);
            } else if let LValue::Elem { keys, .. } = target {
                for k in keys {
                    reads_expr(k, out);
                }
            }
            reads_expr(value, out);
        }
        ExprKind::IncDec { target, .. } => reads_lvalue(target, out),
        ExprKind::StatAdd { target, value } => {
            reads_lvalue(target, out);
            reads_expr(value, out);
        }
        ExprKind::HistBucket { hist, index } => {
            reads_expr(hist, out);
            reads_expr(index, out);
        }
        ExprKind::In { keys, .. } => keys.iter().for_each(|k| reads_expr(k, out)),
        ExprKind::Call { args, .. }
        | ExprKind::Builtin { args, .. }
        | ExprKind::Print { args, .. } => args.iter().for_each(|a| reads_expr(a, out)),
        ExprKind::Long(_) | ExprKind::Str(_) | ExprKind::Context(_) => {}
    }
}
