//! Library alias assignments nobody reads, dropped before lowering.
//!
//! `probe syscall.* { ... }` expands into 768 tapset alias bodies setting
//! `argstr`, `fd`, `retval`, `retstr`..., of which a handler usually reads
//! one or two. Elision (elide.rs) drops the rest after lowering, as
//! SystemTap's optimizer does before it infers types; dropping them before
//! lowering saves the checker most of its work on such a script.
//!
//! Only what elision would surely drop goes here: a plain `x = value`
//! statement at the top level of a library alias body, where `x` is no
//! global, is mentioned nowhere else in the handler (the user's body, the
//! other alias statements, its own value), and `value` is made of
//! literals, context variables, operators and pure builtins whose types
//! are plain from the syntax. `x` is still declared with that type: the
//! diagnostics that name what an alias gives, and `-L`, list it.

use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;

use super::catalogue::Family;
use super::lower::Lowerer;
use crate::ast::{self, AssignOp, BinOp, ExprKind as E, FileId, StmtKind as S};
use crate::builtins;
use crate::program::Type;
use crate::syntax_walk::{self, Node};

/// How many times each name is mentioned (read, or written other than by
/// a plain `=`).
#[derive(Default)]
pub(super) struct Mentions<'a>(HashMap<&'a str, u32>);

impl<'a> Mentions<'a> {
    /// The names a user's probe body mentions.
    pub fn of_block(b: &'a ast::Block) -> Mentions<'a> {
        let mut m = Mentions::default();
        m.block(b, 1);
        m
    }

    fn count(&self, name: &str) -> u32 {
        self.0.get(name).copied().unwrap_or(0)
    }

    fn add(&mut self, name: &'a str, by: i32) {
        let n = self.0.entry(name).or_default();
        *n = n.saturating_add_signed(by);
    }

    fn block(&mut self, b: &'a ast::Block, by: i32) {
        syntax_walk::nodes(b, &mut |n| self.node(n, by));
    }

    fn expr(&mut self, e: &'a ast::Expr, by: i32) {
        syntax_walk::expr(e, &mut |n| self.node(n, by));
    }

    /// Counts the names `n` itself mentions; false when it counted its
    /// parts too. The target of a plain `x = v` statement is a write, not
    /// a mention.
    fn node(&mut self, n: Node<'a>, by: i32) -> bool {
        match n {
            Node::Stmt(s) => match &s.kind {
                S::Expr(e) => {
                    if let Some((_, _, value)) = plain_assignment(e) {
                        self.expr(value, by);
                        return false;
                    }
                }
                S::Foreach(f) => {
                    for v in f.value.iter().chain(&f.keys) {
                        self.add(&v.name, by);
                    }
                    if let ast::ForeachSource::Array(a) = &f.source {
                        self.add(&a.name, by);
                    }
                }
                S::Try {
                    catch_var: Some(v), ..
                } => self.add(&v.name, by),
                _ => {}
            },
            Node::Expr(e) => match &e.kind {
                E::Var(name) => self.add(name, by),
                E::Index {
                    base: ast::IndexBase::Array(a),
                    ..
                }
                | E::In { array: a, .. } => self.add(&a.name, by),
                _ => {}
            },
        }
        true
    }
}

/// A `x = value` statement's expression: `x`'s name, `x`, the value.
pub(super) fn plain_assignment(e: &ast::Expr) -> Option<(&str, &ast::Expr, &ast::Expr)> {
    let E::Assign {
        op: AssignOp::Assign,
        target,
        value,
    } = &e.kind
    else {
        return None;
    };
    match &target.kind {
        E::Var(name) => Some((name, target, value)),
        _ => None,
    }
}

/// The top-level statements of `aliases` (library aliases only; the
/// user's own stay whole) that a handler whose own body mentions `user`
/// does not need: for each alias and statement, the type of the value of
/// an unread assignment, None for a statement to lower.
pub(super) fn unread(
    low: &mut Lowerer,
    user: &Mentions,
    aliases: &[&Rc<ast::Alias>],
    families: &[&'static Family],
    user_file: FileId,
) -> Vec<Vec<Option<Type>>> {
    let mut mentions = Mentions::default();
    for a in aliases {
        mentions.block(&a.body, 1);
    }
    let mut unread: Vec<Vec<Option<Type>>> = aliases
        .iter()
        .map(|a| vec![None; a.body.stmts.len()])
        .collect();
    // Dropping one statement can leave another's target unmentioned.
    loop {
        let mut dropped = false;
        for (a, types) in aliases.iter().zip(unread.iter_mut()) {
            let file = low.canon(a.span.file);
            if file == user_file {
                continue;
            }
            for (s, ty) in a.body.stmts.iter().zip(types.iter_mut()) {
                let S::Expr(e) = &s.kind else { continue };
                let Some((name, _, value)) = plain_assignment(e) else {
                    continue;
                };
                if ty.is_some()
                    || mentions.count(name) > 0
                    || user.count(name) > 0
                    || low.has_global(name, file)
                {
                    continue;
                }
                *ty = value_type(low, value, families, file);
                if ty.is_some() {
                    mentions.expr(value, -1);
                    dropped = true;
                }
            }
        }
        if !dropped {
            return unread;
        }
    }
}

/// The type of `e` when it has no side effect and cannot fail, judged on
/// its syntax: what elision's `pure` accepts, typed as lowering would
/// type it. None for anything else (it is then lowered).
fn value_type(
    low: &mut Lowerer,
    e: &ast::Expr,
    families: &[&'static Family],
    file: FileId,
) -> Option<Type> {
    let mut ty = |x: &ast::Expr| value_type(low, x, families, file);
    match &e.kind {
        E::Num(_) => Some(Type::Long),
        E::Str(_) => Some(Type::String),
        E::Target(t) if t.path.is_empty() && t.pretty == 0 && !t.address => {
            let defs: Option<Vec<_>> = families
                .iter()
                .map(|f| match super::lower::is_mark(f) {
                    true => None,
                    false => f.context_var(&t.name).filter(|d| d.readable),
                })
                .collect();
            defs?.first().map(|d| d.ty)
        }
        E::Unary { expr, .. } => (ty(expr)? == Type::Long).then_some(Type::Long),
        E::Binary { op, lhs, rhs } => {
            let (l, r) = (ty(lhs)?, ty(rhs)?);
            match op {
                BinOp::Concat => (l == Type::String && r == Type::String).then_some(Type::String),
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                    (l == r).then_some(Type::Long)
                }
                // A constant divisor of 0 or a bad regex is an error.
                BinOp::Div | BinOp::Mod | BinOp::Match | BinOp::NotMatch => None,
                _ => (l == Type::Long && r == Type::Long).then_some(Type::Long),
            }
        }
        E::Ternary { cond, then, else_ } => {
            let (c, t, f) = (ty(cond)?, ty(then)?, ty(else_)?);
            (c == Type::Long && t == f).then_some(t)
        }
        E::Call { name, args } => {
            let b = builtins::lookup(&name.name)?;
            let fits = b.pure_
                && b.ret != Type::Void
                && (b.required..=b.params.len()).contains(&args.len());
            if !fits || low.is_function(&name.name, file) {
                return None;
            }
            for (a, want) in args.iter().zip(b.params) {
                if value_type(low, a, families, file)? != *want {
                    return None;
                }
            }
            Some(b.ret)
        }
        _ => None,
    }
}
