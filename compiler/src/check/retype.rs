//! After inference: give every variable its solved type (reporting the
//! ones nothing determined) and write each expression's type into the tree.

use super::error::SemError;
use super::lower::Lowerer;
use super::types::Ty;
use crate::ast::BinOp;
use crate::ast::Span;
use crate::program::*;

/// Solves local types of one body; unresolved and stats locals are errors.
pub fn solve_locals(low: &mut Lowerer, locals: &mut [LocalVar], tvs: &[usize], spans: &[Span]) {
    let known: Vec<String> = locals
        .iter()
        .zip(tvs)
        .filter(|(_, tv)| low.types.resolve(Ty::Var(**tv)).is_some())
        .map(|(l, _)| l.name.clone())
        .collect();
    for ((l, tv), span) in locals.iter_mut().zip(tvs).zip(spans) {
        match low.types.resolve(Ty::Var(*tv)) {
            Some(Type::Hist) => low.errors.push(
                SemError::new(*span, "invalid type histogram")
                    .label(format!("'{}' cannot hold a histogram", l.name))
                    .help("print a histogram directly: print(@hist_log(s))"),
            ),
            Some(Type::Void) => low
                .errors
                .push(SemError::new(*span, "unresolved type").label(format!(
                    "'{}' is given the value of something that has none",
                    l.name
                ))),
            Some(Type::Stats) => low.errors.push(
                SemError::new(
                    *span,
                    "stat locals not supported, missing global declaration?",
                )
                .label(format!("'{}' is used as statistics", l.name)),
            ),
            Some(t) => l.ty = t,
            None => {
                let e = SemError::new(*span, "unresolved type")
                    .label(format!("the type of '{}' cannot be inferred", l.name));
                low.errors.push(match closest(&l.name, &known) {
                    Some(k) => e.help(format!("did you mean '{k}'?")),
                    None => e,
                });
            }
        }
    }
}

/// The variable of the same body `name` is most likely a misspelling of
/// (`filname` for the tapset's `filename`).
fn closest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::levenshtein(name, k), k))
        .filter(|(d, _)| *d > 0 && *d <= (name.len() / 3).clamp(1, 2))
        .min()
        .map(|(_, k)| k.as_str())
}

/// Solves globals and function signatures.
pub fn solve_globals_and_functions(low: &mut Lowerer) {
    for i in 0..low.globals.len() {
        let val = low.global_info[i].val;
        let keys = low.global_info[i].keys.clone();
        let span = low.globals[i].span;
        let name = low.globals[i].name.clone();
        match low.types.resolve(Ty::Var(val)) {
            Some(Type::Hist | Type::Void) => {
                low.errors
                    .push(SemError::new(span, "unresolved type").label(format!(
                        "'{name}' is given the value of something that has none"
                    )))
            }
            Some(t) => low.globals[i].ty = t,
            None => low.errors.push(
                SemError::new(span, "unresolved type")
                    .label(format!("the type of global '{name}' cannot be inferred")),
            ),
        }
        if let Some((keys, _)) = keys {
            if !keys.is_empty() {
                let mut tys = Vec::new();
                for k in keys {
                    match low.types.resolve(Ty::Var(k)) {
                        Some(t) => tys.push(t),
                        None => {
                            low.errors.push(
                                SemError::new(span, "unresolved type").label(format!(
                                    "the index type of '{name}' cannot be inferred"
                                )),
                            );
                            tys.push(Type::Long);
                        }
                    }
                }
                low.globals[i].keys = Some(tys);
            } else if low.globals[i].wrap {
                low.errors
                    .push(SemError::new(span, "wrapping not supported for scalars"));
            }
        }
    }
    for i in 0..low.functions.len() {
        let ret = low.func_info[i].ret;
        let ret = low.types.resolve(Ty::Var(ret)).unwrap_or(Type::Void);
        let tvs = std::mem::take(&mut low.func_info[i].local_tvs);
        let spans = std::mem::take(&mut low.func_info[i].local_spans);
        if let Some(mut f) = low.functions[i].take() {
            f.ret = ret;
            solve_locals(low, &mut f.locals, &tvs, &spans);
            low.functions[i] = Some(f);
        }
    }
}

/// Types of the things expressions refer to.
pub struct Env<'a> {
    pub globals: &'a [GlobalVar],
    /// Return types of the functions, by FuncId.
    pub returns: &'a [Type],
    /// Statistics read as plain values (`print(s)`, `f(s)`), found once
    /// every type is known.
    pub errors: std::cell::RefCell<Vec<SemError>>,
}

impl Env<'_> {
    fn lvalue(&self, lv: &LValue, locals: &[LocalVar]) -> Type {
        match lv {
            LValue::Local(l) => locals[l.0 as usize].ty,
            LValue::Global(g) | LValue::Elem { array: g, .. } => self.globals[g.0 as usize].ty,
            LValue::Context(_) => Type::Long,
        }
    }

    pub fn block(&self, b: &mut Block, locals: &[LocalVar]) {
        for s in &mut b.stmts {
            self.stmt(s, locals);
        }
    }

    fn stmt(&self, s: &mut Stmt, locals: &[LocalVar]) {
        match &mut s.kind {
            StmtKind::Expr(e) => self.expr(e, locals),
            StmtKind::Block(b) => self.block(b, locals),
            StmtKind::If { cond, then, else_ } => {
                self.expr(cond, locals);
                self.stmt(then, locals);
                if let Some(e) = else_ {
                    self.stmt(e, locals);
                }
            }
            StmtKind::While { cond, body } => {
                self.expr(cond, locals);
                self.stmt(body, locals);
            }
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => {
                for e in [init, cond, step].into_iter().flatten() {
                    self.expr(e, locals);
                }
                self.stmt(body, locals);
            }
            StmtKind::Foreach(f) => {
                if let ForeachSource::Hist(h) = &mut f.source {
                    self.expr(h, locals);
                }
                for e in f.slice.iter_mut().flatten().flatten() {
                    self.expr(e, locals);
                }
                if let Some(l) = &mut f.limit {
                    self.expr(l, locals);
                }
                self.stmt(&mut f.body, locals);
            }
            StmtKind::Return(Some(e)) => self.expr(e, locals),
            StmtKind::Delete(lv) => self.lvalue_keys(lv, locals),
            StmtKind::Try { body, catch, .. } => {
                self.block(body, locals);
                self.block(catch, locals);
            }
            StmtKind::Return(None) | StmtKind::Next | StmtKind::Break | StmtKind::Continue => {}
        }
    }

    fn lvalue_keys(&self, lv: &mut LValue, locals: &[LocalVar]) {
        if let LValue::Elem { keys, .. } = lv {
            for k in keys {
                self.expr(k, locals);
            }
        }
    }

    pub fn expr(&self, e: &mut Expr, locals: &[LocalVar]) {
        e.ty = match &mut e.kind {
            ExprKind::Long(_) => Type::Long,
            ExprKind::Wildcard => Type::Void,
            ExprKind::Str(_) => Type::String,
            ExprKind::Load(lv) => {
                self.lvalue_keys(lv, locals);
                self.lvalue(lv, locals)
            }
            ExprKind::Context(_) => Type::Long,
            ExprKind::Unary { expr, .. } => {
                self.expr(expr, locals);
                Type::Long
            }
            ExprKind::Binary { op, lhs, rhs } => {
                self.expr(lhs, locals);
                self.expr(rhs, locals);
                if *op == BinOp::Concat {
                    Type::String
                } else {
                    Type::Long
                }
            }
            ExprKind::Ternary { cond, then, else_ } => {
                self.expr(cond, locals);
                self.expr(then, locals);
                self.expr(else_, locals);
                then.ty
            }
            ExprKind::Assign { target, value, .. } => {
                self.lvalue_keys(target, locals);
                self.expr(value, locals);
                self.lvalue(target, locals)
            }
            ExprKind::IncDec { target, .. } => {
                self.lvalue_keys(target, locals);
                Type::Long
            }
            ExprKind::StatAdd { target, value } => {
                self.lvalue_keys(target, locals);
                self.expr(value, locals);
                Type::Void
            }
            ExprKind::StatGet { target, .. } => {
                self.lvalue_keys(target, locals);
                Type::Long
            }
            ExprKind::Hist { target, .. } => {
                self.lvalue_keys(target, locals);
                Type::Hist
            }
            ExprKind::HistBucket { hist, index } => {
                self.expr(hist, locals);
                self.expr(index, locals);
                Type::Long
            }
            ExprKind::In { keys, .. } => {
                for k in keys {
                    self.expr(k, locals);
                }
                Type::Long
            }
            ExprKind::Call { func, args } => {
                for a in args {
                    self.expr(a, locals);
                }
                self.returns[func.0 as usize]
            }
            ExprKind::Builtin { args, .. } | ExprKind::Print { args, .. } => {
                for a in args {
                    self.expr(a, locals);
                }
                e.ty
            }
        };
        if matches!(e.kind, ExprKind::Load(_)) && e.ty == Type::Stats {
            self.errors.borrow_mut().push(
                SemError::new(e.span, "invalid type stat")
                    .label("statistics are read with @count, @sum, @min, @max, @avg, @hist_*"),
            );
        }
    }
}
