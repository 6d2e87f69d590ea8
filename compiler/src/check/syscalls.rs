//! Syscall sets for the seccomp filter: a syscall probe guarded by
//! `$syscall == N` (or an `||` of such, from the point or its aliases) can
//! only fire on those numbers. The comparison moves from the runtime
//! condition into `ProcessEvent::Syscall { syscalls }`, so the runtime
//! stops only on those syscalls and runs no test for them.

use crate::ast::BinOp;
use crate::program::*;

/// Splits a point's condition into the syscall set it implies (None =
/// every syscall) and what remains to evaluate at run time.
pub fn split(cond: Option<Expr>) -> (Option<Vec<u32>>, Option<Expr>) {
    let Some(cond) = cond else {
        return (None, None);
    };
    let mut conjuncts = Vec::new();
    flatten_and(cond, &mut conjuncts);
    let mut set: Option<Vec<u32>> = None;
    let mut rest = Vec::new();
    for c in conjuncts {
        match syscall_set(&c) {
            Some(mut s) => {
                s.sort_unstable();
                s.dedup();
                set = Some(match set {
                    None => s,
                    Some(prev) => prev.into_iter().filter(|n| s.contains(n)).collect(),
                });
            }
            None => rest.push(c),
        }
    }
    (set, and_all(rest))
}

fn flatten_and(e: Expr, out: &mut Vec<Expr>) {
    match e.kind {
        ExprKind::Binary {
            op: BinOp::And,
            lhs,
            rhs,
        } => {
            flatten_and(*lhs, out);
            flatten_and(*rhs, out);
        }
        kind => out.push(Expr { kind, ..e }),
    }
}

/// And-s expressions back together (None when nothing is left).
pub fn and_all(mut parts: Vec<Expr>) -> Option<Expr> {
    let last = parts.pop()?;
    Some(parts.into_iter().rev().fold(last, |acc, e| {
        let span = e.span.to(acc.span);
        Expr {
            kind: ExprKind::Binary {
                op: BinOp::And,
                lhs: Box::new(e),
                rhs: Box::new(acc),
            },
            ty: Type::Long,
            span,
        }
    }))
}

/// `$syscall == N`, `N == $syscall`, or an `||` of those.
fn syscall_set(e: &Expr) -> Option<Vec<u32>> {
    let ExprKind::Binary { op, lhs, rhs } = &e.kind else {
        return None;
    };
    match op {
        BinOp::Or => {
            let mut a = syscall_set(lhs)?;
            a.extend(syscall_set(rhs)?);
            Some(a)
        }
        BinOp::Eq => match (&lhs.kind, &rhs.kind) {
            (ExprKind::Context(ContextVar::Syscall), ExprKind::Long(n))
            | (ExprKind::Long(n), ExprKind::Context(ContextVar::Syscall)) => {
                u32::try_from(*n).ok().map(|n| vec![n])
            }
            _ => None,
        },
        _ => None,
    }
}
