//! Whole-program rules that need every function lowered: functions called
//! inside a `foreach` must not modify the iterated array, and globals
//! written but never read are marked for printing at exit.

use rustc_hash::FxHashSet as HashSet;

use super::error::SemError;
use crate::ast::Span;
use crate::program::*;

/// What one body does to globals.
#[derive(Default, Clone)]
struct Effects {
    reads: HashSet<GlobalId>,
    writes: HashSet<GlobalId>,
    calls: Vec<(FuncId, Span, Vec<GlobalId>)>,
}

struct Walker<'a> {
    fx: &'a mut Effects,
    foreach: Vec<GlobalId>,
}

impl Walker<'_> {
    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e, false),
            StmtKind::Block(b) => self.block(b),
            StmtKind::If { cond, then, else_ } => {
                self.expr(cond, true);
                self.stmt(then);
                if let Some(e) = else_ {
                    self.stmt(e);
                }
            }
            StmtKind::While { cond, body } => {
                self.expr(cond, true);
                self.stmt(body);
            }
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => {
                if let Some(e) = init {
                    self.expr(e, false);
                }
                if let Some(e) = cond {
                    self.expr(e, true);
                }
                if let Some(e) = step {
                    self.expr(e, false);
                }
                self.stmt(body);
            }
            StmtKind::Foreach(f) => {
                match &f.source {
                    ForeachSource::Array(g) => {
                        self.fx.reads.insert(*g);
                    }
                    ForeachSource::Hist(h) => self.expr(h, true),
                }
                for e in f.slice.iter().flatten().flatten() {
                    self.expr(e, true);
                }
                if let Some(l) = &f.limit {
                    self.expr(l, true);
                }
                let pushed = matches!(f.source, ForeachSource::Array(_));
                if let ForeachSource::Array(g) = f.source {
                    self.foreach.push(g);
                }
                self.stmt(&f.body);
                if pushed {
                    self.foreach.pop();
                }
            }
            StmtKind::Return(Some(e)) => self.expr(e, true),
            StmtKind::Delete(lv) => self.write(lv),
            StmtKind::Try { body, catch, .. } => {
                self.block(body);
                self.block(catch);
            }
            _ => {}
        }
    }

    fn keys(&mut self, lv: &LValue) {
        if let LValue::Elem { keys, .. } = lv {
            for k in keys {
                self.expr(k, true);
            }
        }
    }

    fn read(&mut self, lv: &LValue) {
        self.keys(lv);
        if let LValue::Global(g) | LValue::Elem { array: g, .. } = lv {
            self.fx.reads.insert(*g);
        }
    }

    fn write(&mut self, lv: &LValue) {
        self.keys(lv);
        if let LValue::Global(g) | LValue::Elem { array: g, .. } = lv {
            self.fx.writes.insert(*g);
        }
    }

    /// `used`: the expression's value is used (so `x++` reads `x`).
    fn expr(&mut self, e: &Expr, used: bool) {
        match &e.kind {
            ExprKind::Long(_) | ExprKind::Str(_) | ExprKind::Context(_) | ExprKind::Wildcard => {}
            ExprKind::Load(lv) => self.read(lv),
            ExprKind::Unary { expr, .. } => self.expr(expr, true),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs, true);
                self.expr(rhs, true);
            }
            ExprKind::Ternary { cond, then, else_ } => {
                self.expr(cond, true);
                self.expr(then, used);
                self.expr(else_, used);
            }
            ExprKind::Assign { op, target, value } => {
                // `x += 1` as a statement writes x without reading it.
                let _ = op;
                self.write(target);
                if used {
                    self.read(target);
                }
                self.expr(value, true);
            }
            ExprKind::IncDec { target, .. } => {
                self.write(target);
                if used {
                    self.read(target);
                }
            }
            ExprKind::StatAdd { target, value } => {
                self.write(target);
                self.expr(value, true);
            }
            ExprKind::StatGet { target, .. } | ExprKind::Hist { target, .. } => self.read(target),
            ExprKind::HistBucket { hist, index } => {
                self.expr(hist, true);
                self.expr(index, true);
            }
            ExprKind::In { array, keys } => {
                self.fx.reads.insert(*array);
                for k in keys {
                    self.expr(k, true);
                }
            }
            ExprKind::Call { func, args } => {
                for a in args {
                    self.expr(a, true);
                }
                self.fx.calls.push((*func, e.span, self.foreach.clone()));
            }
            ExprKind::Builtin { args, .. } | ExprKind::Print { args, .. } => {
                for a in args {
                    self.expr(a, true);
                }
            }
        }
    }
}

fn effects(b: &Block) -> Effects {
    let mut fx = Effects::default();
    Walker {
        fx: &mut fx,
        foreach: Vec::new(),
    }
    .block(b);
    fx
}

/// Applies the rules; returns the errors found.
pub fn apply(program: &mut Program) -> Vec<SemError> {
    let mut errors = Vec::new();
    let funcs: Vec<Effects> = program.functions.iter().map(|f| effects(&f.body)).collect();
    // Transitive writes of each function.
    let mut writes: Vec<HashSet<GlobalId>> = funcs.iter().map(|f| f.writes.clone()).collect();
    loop {
        let mut changed = false;
        for (i, f) in funcs.iter().enumerate() {
            for (callee, _, _) in &f.calls {
                let add: Vec<GlobalId> = writes[callee.0 as usize]
                    .difference(&writes[i])
                    .copied()
                    .collect();
                if !add.is_empty() {
                    changed = true;
                    writes[i].extend(add);
                }
            }
        }
        if !changed {
            break;
        }
    }
    let probes: Vec<Effects> = program.probes.iter().map(|p| effects(&p.body)).collect();
    let mut reads = HashSet::default();
    let mut written = HashSet::default();
    for fx in funcs.iter().chain(&probes) {
        reads.extend(fx.reads.iter().copied());
        written.extend(fx.writes.iter().copied());
        for (callee, span, loops) in &fx.calls {
            for g in loops {
                if writes[callee.0 as usize].contains(g) {
                    let name = &program.globals[g.0 as usize].name;
                    errors.push(
                        SemError::new(
                            *span,
                            format!(
                                "function call modifies var '{name}' during 'foreach' iteration"
                            ),
                        )
                        .label(format!(
                            "'{}' writes '{name}'",
                            program.functions[callee.0 as usize].name
                        )),
                    );
                }
            }
        }
    }
    // Probe conditions read globals too.
    for p in &program.probes {
        for pt in &p.points {
            if let Some(c) = &pt.condition {
                let mut fx = Effects::default();
                Walker {
                    fx: &mut fx,
                    foreach: Vec::new(),
                }
                .expr(c, true);
                reads.extend(fx.reads);
            }
        }
    }
    for (i, g) in program.globals.iter_mut().enumerate() {
        let id = GlobalId(i as u32);
        g.autoprint = written.contains(&id) && !reads.contains(&id);
    }
    errors
}

/// Locals of a body that are read but never assigned (SystemTap warns:
/// usually a misspelt name). `params` leading locals count as assigned.
/// Returns each such local with the span of its first read.
pub fn never_assigned(body: &Block, locals: &[LocalVar], params: usize) -> Vec<(LocalId, Span)> {
    let mut written: HashSet<u32> = (0..params as u32).collect();
    let mut loads: Vec<(u32, Span)> = Vec::new();
    locals_block(body, &mut written, &mut loads);
    let mut out: Vec<(LocalId, Span)> = Vec::new();
    for (l, span) in loads {
        if !written.contains(&l)
            && (l as usize) < locals.len()
            && !out.iter().any(|(o, _)| o.0 == l)
        {
            out.push((LocalId(l), span));
        }
    }
    out
}

fn locals_block(b: &Block, w: &mut HashSet<u32>, r: &mut Vec<(u32, Span)>) {
    for s in &b.stmts {
        locals_stmt(s, w, r);
    }
}

fn locals_stmt(s: &Stmt, w: &mut HashSet<u32>, r: &mut Vec<(u32, Span)>) {
    match &s.kind {
        StmtKind::Expr(e) => locals_expr(e, w, r),
        StmtKind::Block(b) => locals_block(b, w, r),
        StmtKind::If { cond, then, else_ } => {
            locals_expr(cond, w, r);
            locals_stmt(then, w, r);
            if let Some(e) = else_ {
                locals_stmt(e, w, r);
            }
        }
        StmtKind::While { cond, body } => {
            locals_expr(cond, w, r);
            locals_stmt(body, w, r);
        }
        StmtKind::For {
            init,
            cond,
            step,
            body,
        } => {
            for e in [init, cond, step].into_iter().flatten() {
                locals_expr(e, w, r);
            }
            locals_stmt(body, w, r);
        }
        StmtKind::Foreach(f) => {
            w.extend(f.keys.iter().map(|k| k.0));
            w.extend(f.value.iter().map(|k| k.0));
            if let ForeachSource::Hist(h) = &f.source {
                locals_expr(h, w, r);
            }
            for e in f.slice.iter().flatten().flatten() {
                locals_expr(e, w, r);
            }
            if let Some(l) = &f.limit {
                locals_expr(l, w, r);
            }
            locals_stmt(&f.body, w, r);
        }
        StmtKind::Return(Some(e)) => locals_expr(e, w, r),
        StmtKind::Delete(lv) => locals_lvalue(lv, true, s.span, w, r),
        StmtKind::Try {
            body,
            catch_var,
            catch,
        } => {
            w.extend(catch_var.iter().map(|k| k.0));
            locals_block(body, w, r);
            locals_block(catch, w, r);
        }
        _ => {}
    }
}

fn locals_lvalue(
    lv: &LValue,
    write: bool,
    span: Span,
    w: &mut HashSet<u32>,
    r: &mut Vec<(u32, Span)>,
) {
    match lv {
        LValue::Local(l) if write => {
            w.insert(l.0);
        }
        LValue::Local(l) => r.push((l.0, span)),
        LValue::Elem { keys, .. } => keys.iter().for_each(|k| locals_expr(k, w, r)),
        _ => {}
    }
}

fn locals_expr(e: &Expr, w: &mut HashSet<u32>, r: &mut Vec<(u32, Span)>) {
    match &e.kind {
        ExprKind::Load(lv)
        | ExprKind::StatGet { target: lv, .. }
        | ExprKind::Hist { target: lv, .. } => locals_lvalue(lv, false, e.span, w, r),
        ExprKind::Assign {
            target: lv, value, ..
        }
        | ExprKind::StatAdd { target: lv, value } => {
            locals_expr(value, w, r);
            locals_lvalue(lv, true, e.span, w, r);
        }
        ExprKind::IncDec { target, .. } => locals_lvalue(target, true, e.span, w, r),
        ExprKind::Unary { expr, .. } => locals_expr(expr, w, r),
        ExprKind::Binary { lhs, rhs, .. } => {
            locals_expr(lhs, w, r);
            locals_expr(rhs, w, r);
        }
        ExprKind::Ternary { cond, then, else_ } => {
            locals_expr(cond, w, r);
            locals_expr(then, w, r);
            locals_expr(else_, w, r);
        }
        ExprKind::HistBucket { hist, index } => {
            locals_expr(hist, w, r);
            locals_expr(index, w, r);
        }
        ExprKind::In { keys, .. } => keys.iter().for_each(|k| locals_expr(k, w, r)),
        ExprKind::Call { args, .. }
        | ExprKind::Builtin { args, .. }
        | ExprKind::Print { args, .. } => args.iter().for_each(|a| locals_expr(a, w, r)),
        ExprKind::Long(_) | ExprKind::Str(_) | ExprKind::Context(_) | ExprKind::Wildcard => {}
    }
}
