//! USDT marker arguments the note keeps in memory (`-4@-20(%rbp)`), in
//! the program: the marker entry passes the operand's address as
//! `$argN` (`utap_runtime::dataplane::function::mark_entry`), so the
//! in-process copy of a marker probe reads `$argN` through the safe load,
//! as `user_int($argN)` and the like: the value, or 0 when it cannot be
//! read, sign- or zero-extended by the operand's size, as the tracer's
//! `marks::read_arg` reads it at a stop.

use utap_compiler::ast::BinOp;
use utap_compiler::program::{ContextVar, Expr, ExprKind, Program, Type};
use utap_compiler::route;
use utap_compiler::walk;

/// Rewrites the `$argN` that [`route::mark_loads`] names in `sub`'s
/// probes (bodies and point conditions) into loads.
pub(super) fn load_mark_args(sub: &mut Program) {
    for p in &mut sub.probes {
        let loads = match route::mark_loads(p) {
            Ok(l) if !l.is_empty() => l,
            _ => continue,
        };
        // Pre-order: the node visited right after a rewrite is the
        // `$argN` inside it, which must stay.
        let mut inner = false;
        let mut rewrite = |e: &mut Expr| {
            if std::mem::take(&mut inner) {
                return;
            }
            let ExprKind::Context(ContextVar::Arg(n)) = e.kind else {
                return;
            };
            if let Some(&(_, size, signed)) = loads.iter().find(|l| l.0 == usize::from(n)) {
                *e = load(e.clone(), size, signed);
                inner = true;
            }
        };
        walk::block_mut(&mut p.body, &mut rewrite);
        for c in p.points.iter_mut().filter_map(|pt| pt.condition.as_mut()) {
            walk::expr_mut(c, &mut rewrite);
        }
    }
}

/// `user_<type>(addr)`, masked to `size` bytes when unsigned.
fn load(addr: Expr, size: u8, signed: bool) -> Expr {
    let span = addr.span;
    let name = match size {
        1 => "user_char",
        2 => "user_short",
        4 => "user_int",
        _ => "user_long",
    };
    let call = Expr {
        kind: ExprKind::Builtin {
            name,
            args: vec![addr],
        },
        ty: Type::Long,
        span,
    };
    if signed || size >= 8 {
        return call;
    }
    let mask = Expr {
        kind: ExprKind::Long(((1u64 << (8 * u32::from(size))) - 1) as i64),
        ty: Type::Long,
        span,
    };
    Expr {
        kind: ExprKind::Binary {
            op: BinOp::BitAnd,
            lhs: Box::new(call),
            rhs: Box::new(mask),
        },
        ty: Type::Long,
        span,
    }
}
