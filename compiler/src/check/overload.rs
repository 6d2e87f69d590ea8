//! Function overloading (SystemTap 4.x): several script functions of one
//! name and arity are tried in declaration order; `next` in one of them
//! gives the call to the next. The last one's result (or its `next`: the
//! type's zero) is the call's.
//!
//! ```text
//! function kind(x) { if (x < 0) next; return "non-negative" }
//! function kind(x) { return "negative" }
//! ```
//!
//! Done on the user's script before checking: overload `i` of `f` becomes
//! `f__overload<i>` with each `next` turned into "set the global
//! `__overload_next`, return", and a new `f` with the same parameters calls
//! them in turn until one returns without `next`. Each dispatcher clears
//! the flag after every call, so a nested overloaded call never leaves it
//! set for an outer one. Functions of one name with different arities stay
//! a "duplicate function definition" error.

use std::collections::HashMap;

use crate::ast::{self, Expr, ExprKind, FunctionBody, Item, Script, Stmt, StmtKind};
use crate::parser::{NodeIds, ParseOptions, parse_file};
use crate::source::SourceMap;

use super::error::SemError;

/// The global flag a `next` in an overload sets.
const FLAG: &str = "__overload_next";

/// Rewrites every overloaded function of `script` (see the module doc).
pub fn resolve(script: &mut Script, map: &mut SourceMap, ids: &mut NodeIds) -> Vec<SemError> {
    let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, item) in script.items.iter().enumerate() {
        if let Item::Function(f) = item
            && matches!(f.body, FunctionBody::Block(_))
        {
            groups.entry(f.name.name.clone()).or_default().push(i);
        }
    }
    let mut names: Vec<(String, Vec<usize>)> =
        groups.into_iter().filter(|(_, v)| v.len() > 1).collect();
    names.sort_by_key(|(_, v)| v[0]);
    let mut added = Vec::new();
    let mut errors = Vec::new();
    for (name, members) in names {
        let arity = |i: usize| match &script.items[i] {
            Item::Function(f) => f.params.len(),
            _ => 0,
        };
        if members.iter().any(|&i| arity(i) != arity(members[0])) {
            continue;
        }
        let mut returns_value = false;
        let mut params = Vec::new();
        for (k, &i) in members.iter().enumerate() {
            let Item::Function(f) = &mut script.items[i] else {
                continue;
            };
            returns_value |= f.ret.is_some() || body_returns_value(&f.body);
            if k == 0 {
                params = f.params.iter().map(|p| p.name.name.clone()).collect();
            }
            f.name.name = format!("{name}__overload{k}");
            if let FunctionBody::Block(b) = &mut f.body {
                for s in &mut b.stmts {
                    next_to_flag(s, ids);
                }
            }
        }
        let span = match &script.items[members[0]] {
            Item::Function(f) => f.span,
            _ => continue,
        };
        let text = dispatcher(&name, &params, members.len(), returns_value);
        let file = map.add(format!("<overloads of {name}>"), text);
        match parse_file(map, file, &ParseOptions::default(), ids) {
            Ok(s) => added.extend(s.items),
            Err(d) => errors.push(SemError::new(
                span,
                format!("internal error building the overloads of {name}: {d:?}"),
            )),
        }
    }
    if !added.is_empty() {
        // One declaration of the flag for all dispatchers.
        let decl = map.add("<overloads>", format!("global {FLAG}\n"));
        if let Ok(s) = parse_file(map, decl, &ParseOptions::default(), ids) {
            script.items.extend(s.items);
        }
    }
    script.items.extend(added);
    errors
}

/// The function that tries overloads `0..count` of `name` in turn.
fn dispatcher(name: &str, params: &[String], count: usize, returns_value: bool) -> String {
    let args = params.join(", ");
    let mut text = format!("function {name}({args}) {{\n");
    for k in 0..count {
        let call = format!("{name}__overload{k}({args})");
        if returns_value {
            text.push_str(&format!("  __overload_r = {call}\n"));
        } else {
            text.push_str(&format!("  {call}\n"));
        }
        text.push_str(&format!(
            "  __overload_n = {FLAG}\n  {FLAG} = 0\n  if (!__overload_n) return{}\n",
            if returns_value { " __overload_r" } else { "" }
        ));
    }
    text.push_str("}\n");
    text
}

/// Whether a function body has a `return VALUE`.
fn body_returns_value(body: &FunctionBody) -> bool {
    fn stmt(s: &Stmt) -> bool {
        match &s.kind {
            StmtKind::Return(Some(_)) => true,
            StmtKind::Block(b) => b.stmts.iter().any(stmt),
            StmtKind::If { then, else_, .. } => stmt(then) || else_.as_deref().is_some_and(stmt),
            StmtKind::While { body, .. } | StmtKind::For { body, .. } => stmt(body),
            StmtKind::Foreach(f) => stmt(&f.body),
            StmtKind::Try { body, catch, .. } => {
                body.stmts.iter().any(stmt) || catch.stmts.iter().any(stmt)
            }
            _ => false,
        }
    }
    match body {
        FunctionBody::Block(b) => b.stmts.iter().any(stmt),
        FunctionBody::Embedded(_) => false,
    }
}

/// `next` → `{ __overload_next = 1; return }`.
fn next_to_flag(s: &mut Stmt, ids: &mut NodeIds) {
    match &mut s.kind {
        StmtKind::Next => {
            let span = s.span;
            let expr = |ids: &mut NodeIds, kind| Expr {
                id: ids.fresh(),
                kind,
                span,
            };
            let target = expr(ids, ExprKind::Var(FLAG.into()));
            let value = expr(ids, ExprKind::Num(1));
            let set = expr(
                ids,
                ExprKind::Assign {
                    op: ast::AssignOp::Assign,
                    target: Box::new(target),
                    value: Box::new(value),
                },
            );
            s.kind = StmtKind::Block(ast::Block {
                stmts: vec![
                    Stmt {
                        kind: StmtKind::Expr(set),
                        span,
                    },
                    Stmt {
                        kind: StmtKind::Return(None),
                        span,
                    },
                ],
                span,
            });
        }
        StmtKind::Block(b) => b.stmts.iter_mut().for_each(|s| next_to_flag(s, ids)),
        StmtKind::If { then, else_, .. } => {
            next_to_flag(then, ids);
            if let Some(e) = else_ {
                next_to_flag(e, ids);
            }
        }
        StmtKind::While { body, .. } | StmtKind::For { body, .. } => next_to_flag(body, ids),
        StmtKind::Foreach(f) => next_to_flag(&mut f.body, ids),
        StmtKind::Try { body, catch, .. } => {
            body.stmts.iter_mut().for_each(|s| next_to_flag(s, ids));
            catch.stmts.iter_mut().for_each(|s| next_to_flag(s, ids));
        }
        _ => {}
    }
}
