//! Elision of work whose result nobody uses, as SystemTap's optimizer does:
//! an assignment to a local that is never read is dropped when its value
//! has no side effect. This is what makes `syscall.*` aliases cheap: a
//! handler that uses only `name` never computes `argstr`.

use rustc_hash::FxHashSet as HashSet;

use crate::builtins;
use crate::program::*;
use crate::walk;

/// Drops dead local assignments and side-effect-free expression
/// statements from a body (repeatedly, since dropping one can make another
/// dead). Returns the locals elided.
pub fn dead_locals(body: &mut Block, pure_fns: &[bool]) -> Vec<LocalId> {
    let mut elided = Vec::new();
    loop {
        let mut read = HashSet::default();
        reads_block(body, &mut read);
        let mut dropped = HashSet::default();
        drop_block(body, &read, &mut dropped, pure_fns);
        if dropped.is_empty() {
            break;
        }
        let mut dropped: Vec<u32> = dropped.into_iter().collect();
        dropped.sort_unstable();
        for l in dropped {
            if !elided.contains(&LocalId(l)) {
                elided.push(LocalId(l));
            }
        }
    }
    elided
}

fn drop_block(b: &mut Block, read: &HashSet<u32>, dropped: &mut HashSet<u32>, pf: &[bool]) {
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
            }) if !read.contains(&l.0) && pure(value, pf) => {
                dropped.insert(l.0);
                return false;
            }
            // A side-effect-free expression statement (`"text"`, `a + b`).
            StmtKind::Expr(e) if pure(e, pf) => return false,
            StmtKind::Block(inner) => drop_block(inner, read, dropped, pf),
            StmtKind::If { then, else_, .. } => {
                drop_stmt(then, read, dropped, pf);
                if let Some(e) = else_ {
                    drop_stmt(e, read, dropped, pf);
                }
            }
            _ => {}
        }
        true
    });
}

fn drop_stmt(s: &mut Stmt, read: &HashSet<u32>, dropped: &mut HashSet<u32>, pf: &[bool]) {
    if let StmtKind::Block(b) = &mut s.kind {
        drop_block(b, read, dropped, pf);
    }
}

/// Which functions have no side effect (they write no global, print
/// nothing and call only such functions and pure builtins): the least
/// fixed point over the call graph, so recursive functions stay impure (a
/// call can exhaust MAXNESTING, an error the script must see).
pub fn pure_functions(functions: &[FunctionDef]) -> Vec<bool> {
    let mut pf = vec![false; functions.len()];
    loop {
        let next: Vec<bool> = functions.iter().map(|f| block_pure(&f.body, &pf)).collect();
        if next == pf {
            return pf;
        }
        pf = next;
    }
}

/// A body whose only effects are on its own locals.
pub fn block_pure(b: &Block, pf: &[bool]) -> bool {
    b.stmts.iter().all(|s| stmt_pure(s, pf))
}

fn stmt_pure(s: &Stmt, pf: &[bool]) -> bool {
    match &s.kind {
        StmtKind::Expr(e) => local_effects_only(e, pf),
        StmtKind::Block(b) => block_pure(b, pf),
        StmtKind::If { cond, then, else_ } => {
            local_effects_only(cond, pf)
                && stmt_pure(then, pf)
                && else_.as_ref().is_none_or(|e| stmt_pure(e, pf))
        }
        // Loops can exhaust MAXACTION, an error the script must see.
        StmtKind::While { .. } | StmtKind::For { .. } => false,
        StmtKind::Return(e) => e.as_ref().is_none_or(|e| local_effects_only(e, pf)),
        StmtKind::Next | StmtKind::Break | StmtKind::Continue => true,
        // Loops over globals are reads, but keep it simple: not pure.
        _ => false,
    }
}

/// Pure, or an assignment to a local of a pure value (inside functions).
fn local_effects_only(e: &Expr, pf: &[bool]) -> bool {
    match &e.kind {
        ExprKind::Assign {
            target: LValue::Local(_),
            value,
            ..
        } => local_effects_only(value, pf),
        ExprKind::IncDec {
            target: LValue::Local(_),
            ..
        } => true,
        _ => pure(e, pf),
    }
}

/// No side effect: literals, loads, operators, pure builtins and pure
/// script functions (`pf`, by FuncId).
pub fn pure(e: &Expr, pf: &[bool]) -> bool {
    let all = |args: &[Expr]| args.iter().all(|a| pure(a, pf));
    match &e.kind {
        ExprKind::Long(_) | ExprKind::Str(_) | ExprKind::Context(_) | ExprKind::Wildcard => true,
        ExprKind::Load(lv) => lvalue_pure(lv, pf),
        ExprKind::Unary { expr, .. } => pure(expr, pf),
        ExprKind::Binary { lhs, rhs, .. } => pure(lhs, pf) && pure(rhs, pf),
        ExprKind::Ternary { cond, then, else_ } => {
            pure(cond, pf) && pure(then, pf) && pure(else_, pf)
        }
        ExprKind::In { keys, .. } => all(keys),
        ExprKind::StatGet { target, .. } => lvalue_pure(target, pf),
        ExprKind::Builtin { name, args } => {
            builtins::lookup(name).is_some_and(|b| b.pure_) && all(args)
        }
        ExprKind::Call { func, args } => pf.get(func.0 as usize) == Some(&true) && all(args),
        ExprKind::Print { kind, args, .. } => {
            matches!(
                kind,
                PrintKind::Sprint
                    | PrintKind::Sprintln
                    | PrintKind::Sprintf
                    | PrintKind::Sprintd
                    | PrintKind::Sprintdln
            ) && all(args)
        }
        _ => false,
    }
}

fn lvalue_pure(lv: &LValue, pf: &[bool]) -> bool {
    match lv {
        LValue::Elem { keys, .. } => keys.iter().all(|k| pure(k, pf)),
        _ => true,
    }
}

/// Drops functions no probe calls any more (after elision), renumbering
/// the calls.
pub fn prune_functions(program: &mut Program) {
    let n = program.functions.len();
    let mut used = vec![false; n];
    let mut work: Vec<FuncId> = Vec::new();
    let mut collect = |id: &mut FuncId| work.push(*id);
    for p in &mut program.probes {
        walk_calls_block(&mut p.body, &mut collect);
        for pt in &mut p.points {
            if let Some(c) = &mut pt.condition {
                walk_calls_expr(c, &mut collect);
            }
        }
    }
    while let Some(f) = work.pop() {
        if std::mem::replace(&mut used[f.0 as usize], true) {
            continue;
        }
        walk_calls_block(
            &mut program.functions[f.0 as usize].body,
            &mut |id: &mut FuncId| work.push(*id),
        );
    }
    if used.iter().all(|u| *u) {
        return;
    }
    let mut map = vec![None; n];
    let mut next = 0;
    for (i, u) in used.iter().enumerate() {
        if *u {
            map[i] = Some(FuncId(next));
            next += 1;
        }
    }
    let functions = std::mem::take(&mut program.functions);
    program.functions = functions
        .into_iter()
        .zip(&used)
        .filter(|(_, u)| **u)
        .map(|(f, _)| f)
        .collect();
    let renumber = |b: &mut Block| {
        walk_calls_block(b, &mut |id: &mut FuncId| {
            *id = map[id.0 as usize].unwrap_or(*id);
        })
    };
    for f in &mut program.functions {
        renumber(&mut f.body);
    }
    for p in &mut program.probes {
        renumber(&mut p.body);
        for pt in &mut p.points {
            if let Some(c) = &mut pt.condition {
                walk_calls_expr(c, &mut |id: &mut FuncId| {
                    *id = map[id.0 as usize].unwrap_or(*id);
                });
            }
        }
    }
}

/// Calls `f` on the callee of every call in `b`.
fn walk_calls_block(b: &mut Block, f: &mut dyn FnMut(&mut FuncId)) {
    walk::block_mut(b, &mut |e| walk_call(e, f));
}

fn walk_calls_expr(e: &mut Expr, f: &mut dyn FnMut(&mut FuncId)) {
    walk::expr_mut(e, &mut |e| walk_call(e, f));
}

fn walk_call(e: &mut Expr, f: &mut dyn FnMut(&mut FuncId)) {
    if let ExprKind::Call { func, .. } = &mut e.kind {
        f(func);
    }
}

/// Locals read anywhere in a block.
/// The locals a body reads or assigns (those elision left).
pub fn used_locals(b: &Block) -> HashSet<u32> {
    let mut used = HashSet::default();
    reads_block(b, &mut used);
    walk::block(b, &mut |e| {
        if let ExprKind::Assign {
            target: LValue::Local(l),
            ..
        } = &e.kind
        {
            used.insert(l.0);
        }
    });
    used
}

fn reads_block(b: &Block, out: &mut HashSet<u32>) {
    walk::nodes(b, &mut |n| match n {
        walk::Node::Expr(e) => out.extend(read_by(e)),
        walk::Node::Stmt(s) => stmt_reads(s, out),
    });
}

/// The local an expression reads itself (the walk visits the expressions
/// inside it, array keys included). `x = v` does not read x; `x += v` does.
fn read_by(e: &Expr) -> Option<u32> {
    let target = match &e.kind {
        ExprKind::Load(lv)
        | ExprKind::StatGet { target: lv, .. }
        | ExprKind::Hist { target: lv, .. }
        | ExprKind::IncDec { target: lv, .. }
        | ExprKind::StatAdd { target: lv, .. } => lv,
        ExprKind::Assign { op, target, .. } if *op != crate::ast::AssignOp::Assign => target,
        _ => return None,
    };
    match target {
        LValue::Local(l) => Some(l.0),
        _ => None,
    }
}

/// Locals a statement itself counts as reading: `delete x`, and loop and
/// catch variables (the statement assigns them).
fn stmt_reads(s: &Stmt, out: &mut HashSet<u32>) {
    match &s.kind {
        StmtKind::Delete(LValue::Local(l)) => {
            out.insert(l.0);
        }
        StmtKind::Foreach(f) => {
            out.extend(f.keys.iter().map(|k| k.0));
            out.extend(f.value.iter().map(|k| k.0));
        }
        StmtKind::Try { catch_var, .. } => out.extend(catch_var.iter().map(|k| k.0)),
        _ => {}
    }
}
