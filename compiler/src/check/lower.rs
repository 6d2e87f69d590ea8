//! Lowering: AST → checked program, resolving every name and collecting
//! type constraints on the way.
//!
//! Bodies are walked once. Names resolve to locals (first mention creates
//! one), globals (the script's or a tapset's, which loads that tapset) or
//! functions (lowered on first call, so unused functions cost nothing).
//! Types are unified as we go (see `types`); expression types are written
//! in afterwards by `retype`, once every variable is solved.

use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

use super::catalogue::{ContextVarDef, FAMILIES, Family, FamilyKind};
use super::error::SemError;
use super::types::{Tv, Ty, Types};
use crate::ast::{self, FileId, Span};
use crate::ast::{AssignOp, BinOp, UnOp};
use crate::builtins;
use crate::program::*;
use utap_runtime::dwarf::plan::{UPDATE_POSTFIX, Update};

/// What a write to a DWARF target variable does.
#[derive(Clone, Copy)]
enum DwarfWrite {
    /// `$var = v`.
    Set,
    /// `$var OP= v`, `++`, `--` (postfix: the value is the old one).
    Update(Update, bool),
}

/// Where a function or global declaration came from.
pub struct FuncDecl {
    pub ast: Rc<ast::Function>,
    pub file: FileId,
    pub id: Option<FuncId>,
}

pub struct GlobalDecl {
    pub ast: ast::Global,
    pub file: FileId,
    pub id: Option<GlobalId>,
}

/// Per-global facts gathered while lowering.
pub struct GlobalInfo {
    pub val: Tv,
    /// Key type variables, fixed by the first use with an arity.
    pub keys: Option<(Vec<Tv>, Span)>,
}

pub struct FuncInfo {
    pub params: Vec<Tv>,
    pub ret: Tv,
    pub decl: Rc<ast::Function>,
    pub file: FileId,
    pub local_tvs: Vec<Tv>,
    pub local_spans: Vec<Span>,
}

/// The symbols visible to the script, growing as tapsets are used.
#[derive(Default)]
pub struct Symbols {
    pub functions: HashMap<String, Vec<FuncDecl>>,
    pub globals: HashMap<String, Vec<GlobalDecl>>,
}

/// Asks for a tapset definition the symbols lack (loading its file).
pub trait TapsetLoader {
    /// Loads the tapset file defining function `name`, if any; true if
    /// something was added to the symbols.
    fn load_function(&mut self, syms: &mut Symbols, name: &str) -> bool;
    fn load_global(&mut self, syms: &mut Symbols, name: &str) -> bool;
    /// Loads the tapsets defining aliases matched by `pattern`.
    fn load_aliases_for(&mut self, syms: &mut Symbols, pattern: &[&str]) -> bool;
    /// Aliases and plain probes of the files loaded since the last call.
    fn take_loaded(&mut self) -> (Vec<super::alias::AliasDef>, Vec<Rc<ast::Probe>>);
    /// Parse errors in loaded tapsets.
    fn take_errors(&mut self) -> Vec<crate::diag::Diagnostic>;
    /// The file a (partially parsed) tapset file counts as.
    fn canonical(&self, file: FileId) -> FileId;
    /// Every alias name the tapsets define (for suggestions).
    fn alias_names(&self) -> Vec<Vec<String>>;
    /// Whether some tapset file declares a (non-private) global `name`,
    /// whether or not the script uses that file.
    fn tapset_declares_global(&self, name: &str) -> bool;
}

/// A probe or function body being lowered.
pub struct Body {
    pub locals: Vec<LocalVar>,
    pub tvs: Vec<Tv>,
    pub spans: Vec<Span>,
    by_name: HashMap<String, LocalId>,
    /// Families of the points this handler serves (empty in functions).
    pub families: Vec<&'static Family>,
    pub func: Option<FuncId>,
    pub file: FileId,
    /// Arrays being iterated by enclosing foreach loops.
    foreach: Vec<GlobalId>,
    /// USDT marker points: the fewest arguments their markers have, when
    /// known at elaboration (`$argN` beyond it is an error).
    pub mark_args: Option<usize>,
    /// Function probes: the probed functions' debug information.
    pub dwarf: Option<std::rc::Rc<super::dwarf::DwarfSites>>,
}

impl Body {
    pub fn new(file: FileId, families: Vec<&'static Family>, func: Option<FuncId>) -> Body {
        Body {
            locals: Vec::new(),
            tvs: Vec::new(),
            spans: Vec::new(),
            by_name: HashMap::default(),
            families,
            func,
            file,
            foreach: Vec::new(),
            mark_args: None,
            dwarf: None,
        }
    }

    pub fn local(&mut self, types: &mut Types, name: &str, span: Span) -> (LocalId, Tv) {
        if let Some(&id) = self.by_name.get(name) {
            return (id, self.tvs[id.0 as usize]);
        }
        let id = LocalId(self.locals.len() as u32);
        let tv = types.fresh();
        self.locals.push(LocalVar {
            name: name.to_string(),
            ty: Type::Void,
        });
        self.tvs.push(tv);
        self.spans.push(span);
        self.by_name.insert(name.to_string(), id);
        (id, tv)
    }
}

pub struct Lowerer<'l> {
    pub syms: Symbols,
    pub loader: &'l mut dyn TapsetLoader,
    pub types: Types,
    pub errors: Vec<SemError>,
    pub guru: bool,
    pub globals: Vec<GlobalVar>,
    pub global_info: Vec<GlobalInfo>,
    pub functions: Vec<Option<FunctionDef>>,
    pub func_info: Vec<FuncInfo>,
    pub func_queue: Vec<FuncId>,
    /// Which file each global was declared in (for `private`).
    global_files: Vec<FileId>,
    /// The user's script: its globals and functions are its own (tapset
    /// code never sees them, so a user's `global n` cannot capture a
    /// tapset's local `n`).
    user_file: FileId,
    /// Probes of tapsets loaded while resolving aliases, not yet queued.
    pending_probes: Vec<Rc<ast::Probe>>,
    /// `--skip-badvars`: a context variable the probe lacks reads as 0
    /// (`""` pretty-printed) instead of being an error.
    pub skip_badvars: bool,
}

fn is_wildcard(e: &ast::Expr) -> bool {
    matches!(e.kind, ast::ExprKind::Wildcard)
}

/// A `*` key outside `delete` and `in` (elaborate.cxx's
/// symresolution_info::visit_arrayindex); `foreach` slices have their own
/// syntax.
fn wildcard_not_allowed(span: Span) -> SemError {
    SemError::new(span, "wildcard not allowed in array index")
        .label("`*` keys select a slice only in `delete`, `[..] in` and `foreach`")
}

/// The result of lowering an expression.
type Lowered = (Expr, Ty);

fn mk(kind: ExprKind, ty: Type, span: Span) -> Expr {
    Expr { kind, ty, span }
}

fn bad(span: Span) -> Lowered {
    (mk(ExprKind::Long(0), Type::Long, span), Ty::Unknown)
}

const LONG: Ty = Ty::Known(Type::Long);
const STRING: Ty = Ty::Known(Type::String);
const STATS: Ty = Ty::Known(Type::Stats);

impl<'l> Lowerer<'l> {
    pub fn new(
        syms: Symbols,
        loader: &'l mut dyn TapsetLoader,
        guru: bool,
        user_file: FileId,
    ) -> Lowerer<'l> {
        Lowerer {
            user_file,
            syms,
            loader,
            types: Types::default(),
            errors: Vec::new(),
            guru,
            globals: Vec::new(),
            global_info: Vec::new(),
            functions: Vec::new(),
            func_info: Vec::new(),
            func_queue: Vec::new(),
            global_files: Vec::new(),
            pending_probes: Vec::new(),
            skip_badvars: false,
        }
    }

    pub fn load_aliases(&mut self, pattern: &[&str]) -> bool {
        self.loader.load_aliases_for(&mut self.syms, pattern)
    }

    /// Aliases and probes that used tapsets brought in.
    pub fn take_loaded(&mut self) -> (Vec<super::alias::AliasDef>, Vec<Rc<ast::Probe>>) {
        let (aliases, probes) = self.loader.take_loaded();
        let mut all = std::mem::take(&mut self.pending_probes);
        all.extend(probes);
        (aliases, all)
    }

    /// Every alias name the tapsets define (for suggestions).
    pub fn library_alias_names(&self) -> Vec<Vec<String>> {
        self.loader.alias_names()
    }

    /// Whether global `g` may be autoprinted: SystemTap prints only the
    /// user script's own globals, never one declared in a tapset (whether
    /// used from the tapset or declared again by the script under a
    /// tapset global's name: elaborate.cxx's add_global_var_display
    /// compares names, RHBZ 468139).
    pub fn autoprintable(&self, g: GlobalId) -> bool {
        let file = self.global_files[g.0 as usize];
        self.canon(file) == self.user_file
            && !self
                .loader
                .tapset_declares_global(&self.globals[g.0 as usize].name)
    }

    /// The file `file` counts as for scoping (`private`, user globals).
    pub fn canon(&self, file: FileId) -> FileId {
        self.loader.canonical(file)
    }

    pub fn requeue_probes(&mut self, probes: Vec<Rc<ast::Probe>>) {
        self.pending_probes.extend(probes);
    }

    pub fn loader_errors(&mut self) -> Vec<crate::diag::Diagnostic> {
        self.loader.take_errors()
    }

    /// Whether `name` is a global visible from `file` (loading a tapset).
    pub fn has_global(&mut self, name: &str, file: FileId) -> bool {
        self.find_global(name, file).is_some()
    }

    fn err(&mut self, e: SemError) {
        self.errors.push(e);
    }

    fn unify(&mut self, a: Ty, b: Ty, span: Span) -> Ty {
        match self.types.unify(a, b, span) {
            Ok(t) => t,
            Err(e) => {
                self.err(e);
                Ty::Unknown
            }
        }
    }

    // ----- symbols -----

    /// The global `name` as seen from `file`, loading a tapset if needed.
    fn find_global(&mut self, name: &str, file: FileId) -> Option<GlobalId> {
        let user = self.user_file;
        if !self.syms.globals.contains_key(name) {
            self.loader.load_global(&mut self.syms, name);
        }
        let decls = self.syms.globals.get_mut(name)?;
        let idx = visible(decls, file, user, |d| (d.file, d.ast.private))?;
        let decl = &mut decls[idx];
        if let Some(id) = decl.id {
            return Some(id);
        }
        let id = GlobalId(self.globals.len() as u32);
        decl.id = Some(id);
        let g = decl.ast.clone();
        let decl_file = decl.file;
        let val = self.types.fresh();
        if let Some(init) = &g.init {
            let t = match init {
                ast::Literal::Num(_) => LONG,
                ast::Literal::Str(_) => STRING,
            };
            self.unify(Ty::Var(val), t, g.span);
        }
        self.globals.push(GlobalVar {
            name: g.name.name.clone(),
            ty: Type::Void,
            keys: None,
            size: g.size,
            wrap: g.wrap,
            init: g.init.clone(),
            autoprint: false,
            span: g.span,
        });
        self.global_info.push(GlobalInfo { val, keys: None });
        self.global_files.push(decl_file);
        Some(id)
    }

    /// Records that `g` is used with `arity` keys (0 = scalar); returns the
    /// key type variables.
    fn global_arity(&mut self, g: GlobalId, arity: usize, span: Span) -> Option<Vec<Tv>> {
        let info = &self.global_info[g.0 as usize];
        match &info.keys {
            Some((keys, first)) => {
                if keys.len() != arity {
                    let first = *first;
                    let name = self.globals[g.0 as usize].name.clone();
                    let n = keys.len();
                    self.err(
                        SemError::new(span, format!("inconsistent arity ({arity} vs {n})"))
                            .label(format!("'{name}' used with {arity} index(es) here"))
                            .also(first, format!("arity {n} first inferred here")),
                    );
                    return None;
                }
                Some(keys.clone())
            }
            None => {
                if arity == 0 && self.global_has_size(g) {
                    let name = self.globals[g.0 as usize].name.clone();
                    let decl = self.globals[g.0 as usize].span;
                    self.err(
                        SemError::new(span, format!("array '{name}' used as a scalar"))
                            .label("used without an index here")
                            .also(decl, "declared as an array here"),
                    );
                    return None;
                }
                let keys: Vec<Tv> = (0..arity).map(|_| self.types.fresh()).collect();
                self.global_info[g.0 as usize].keys = Some((keys.clone(), span));
                Some(keys)
            }
        }
    }

    /// The function `name` (lowered later), loading a tapset if needed.
    /// Whether `name` calls a script or tapset function from `file` (which
    /// then shadows a builtin of that name).
    pub fn is_function(&mut self, name: &str, file: FileId) -> bool {
        self.find_function(name, file).is_some()
    }

    fn find_function(&mut self, name: &str, file: FileId) -> Option<FuncId> {
        let user = self.user_file;
        if !self.syms.functions.contains_key(name) {
            self.loader.load_function(&mut self.syms, name);
        }
        let decls = self.syms.functions.get_mut(name)?;
        let idx = visible(decls, file, user, |d| (d.file, d.ast.private))?;
        let decl = &mut decls[idx];
        if let Some(id) = decl.id {
            return Some(id);
        }
        let id = FuncId(self.functions.len() as u32);
        decl.id = Some(id);
        let f = decl.ast.clone();
        let file = decl.file;
        let params: Vec<Tv> = f.params.iter().map(|_| self.types.fresh()).collect();
        let ret = self.types.fresh();
        for (p, tv) in f.params.iter().zip(&params) {
            if let Some(t) = p.ty {
                self.unify(Ty::Var(*tv), decl_ty(t), p.name.span);
            }
        }
        if let Some(t) = f.ret {
            self.unify(Ty::Var(ret), decl_ty(t), f.name.span);
        }
        self.functions.push(None);
        self.func_info.push(FuncInfo {
            params,
            ret,
            decl: f,
            file,
            local_tvs: Vec::new(),
            local_spans: Vec::new(),
        });
        self.func_queue.push(id);
        Some(id)
    }

    /// Lowers every queued function body (functions found while lowering
    /// are queued in turn).
    pub fn lower_queued_functions(&mut self) {
        while let Some(id) = self.func_queue.pop() {
            let info = &self.func_info[id.0 as usize];
            let decl = info.decl.clone();
            let mut body = Body::new(info.file, Vec::new(), Some(id));
            for (p, tv) in decl.params.iter().zip(info.params.clone()) {
                let (_, ltv) = body.local(&mut self.types, &p.name.name, p.name.span);
                self.unify(Ty::Var(ltv), Ty::Var(tv), p.name.span);
            }
            let block = match &decl.body {
                ast::FunctionBody::Block(b) => self.lower_block(b, &mut body),
                ast::FunctionBody::Embedded(e) => {
                    self.err(embedded_error(e.span));
                    Block { stmts: Vec::new() }
                }
            };
            let info = &mut self.func_info[id.0 as usize];
            info.local_tvs = body.tvs;
            info.local_spans = body.spans;
            self.functions[id.0 as usize] = Some(FunctionDef {
                name: decl.name.name.clone(),
                params: decl.params.len(),
                locals: body.locals,
                ret: Type::Void,
                body: block,
                span: decl.span,
            });
        }
    }

    // ----- statements -----

    pub fn lower_block(&mut self, b: &ast::Block, body: &mut Body) -> Block {
        Block {
            stmts: b
                .stmts
                .iter()
                .filter_map(|s| self.lower_stmt(s, body))
                .collect(),
        }
    }

    /// An alias body whose unread assignments (`unread`: the value's type,
    /// for each statement that is one) are not lowered: their variables
    /// are still declared and typed, as diagnostics and `-L` list them.
    pub fn lower_alias_body(
        &mut self,
        b: &ast::Block,
        unread: &[Option<Type>],
        body: &mut Body,
    ) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(b.stmts.len());
        for (s, unread) in b.stmts.iter().zip(unread) {
            let assignment = match &s.kind {
                ast::StmtKind::Expr(e) => super::unread::plain_assignment(e),
                _ => None,
            };
            match (unread, assignment) {
                (Some(ty), Some((name, target, value))) => {
                    let (_, tt) = body.local(&mut self.types, name, target.span);
                    self.unify(Ty::Var(tt), Ty::Known(*ty), value.span);
                }
                _ => out.extend(self.lower_stmt(s, body)),
            }
        }
        out
    }

    fn cond(&mut self, e: &ast::Expr, body: &mut Body) -> Expr {
        let (x, t) = self.lower_expr(e, body);
        self.unify(t, LONG, e.span);
        x
    }

    fn boxed_stmt(&mut self, s: &ast::Stmt, body: &mut Body) -> Box<Stmt> {
        Box::new(self.lower_stmt(s, body).unwrap_or(Stmt {
            kind: StmtKind::Block(Block { stmts: Vec::new() }),
            span: s.span,
        }))
    }

    fn lower_stmt(&mut self, s: &ast::Stmt, body: &mut Body) -> Option<Stmt> {
        let kind = match &s.kind {
            ast::StmtKind::Block(b) => StmtKind::Block(self.lower_block(b, body)),
            ast::StmtKind::Expr(e) => StmtKind::Expr(self.lower_expr(e, body).0),
            ast::StmtKind::If { cond, then, else_ } => {
                let c = self.cond(cond, body);
                if let (true, ExprKind::Long(v)) = (contains_defined(cond), &c.kind) {
                    return match (*v != 0, else_) {
                        (true, _) => self.lower_stmt(then, body),
                        (false, Some(e)) => self.lower_stmt(e, body),
                        (false, None) => None,
                    };
                }
                StmtKind::If {
                    cond: c,
                    then: self.boxed_stmt(then, body),
                    else_: else_.as_ref().map(|e| self.boxed_stmt(e, body)),
                }
            }
            ast::StmtKind::While { cond, body: b } => StmtKind::While {
                cond: self.cond(cond, body),
                body: self.boxed_stmt(b, body),
            },
            ast::StmtKind::For {
                init,
                cond,
                step,
                body: b,
            } => StmtKind::For {
                init: init.as_ref().map(|e| self.lower_expr(e, body).0),
                cond: cond.as_ref().map(|e| self.cond(e, body)),
                step: step.as_ref().map(|e| self.lower_expr(e, body).0),
                body: self.boxed_stmt(b, body),
            },
            ast::StmtKind::Foreach(f) => StmtKind::Foreach(Box::new(self.lower_foreach(f, body)?)),
            ast::StmtKind::Next => StmtKind::Next,
            ast::StmtKind::Break => StmtKind::Break,
            ast::StmtKind::Continue => StmtKind::Continue,
            ast::StmtKind::Return(e) => {
                let Some(f) = body.func else {
                    self.err(SemError::new(s.span, "return outside a function"));
                    return None;
                };
                let ret = self.func_info[f.0 as usize].ret;
                match e {
                    Some(e) => {
                        let (x, t) = self.lower_expr(e, body);
                        self.unify(Ty::Var(ret), t, e.span);
                        StmtKind::Return(Some(x))
                    }
                    None => StmtKind::Return(None),
                }
            }
            ast::StmtKind::Delete(e) => StmtKind::Delete(self.lower_delete(e, body)?),
            ast::StmtKind::Try {
                body: b,
                catch_var,
                catch,
            } => {
                let b = self.lower_block(b, body);
                let var = catch_var.as_ref().map(|v| {
                    let (id, tv) = body.local(&mut self.types, &v.name, v.span);
                    self.unify(Ty::Var(tv), STRING, v.span);
                    id
                });
                StmtKind::Try {
                    body: b,
                    catch_var: var,
                    catch: self.lower_block(catch, body),
                }
            }
            ast::StmtKind::Embedded(e) => {
                self.err(embedded_error(e.span));
                return None;
            }
            ast::StmtKind::Empty => return None,
        };
        Some(Stmt { kind, span: s.span })
    }

    fn lower_foreach(&mut self, f: &ast::Foreach, body: &mut Body) -> Option<Foreach> {
        let (source, key_tvs, val_ty) = match &f.source {
            ast::ForeachSource::Array(name) => {
                let g = self.array_global(name, body.file, f.keys.len(), name.span)?;
                let keys = self.global_arity(g, f.keys.len(), name.span)?;
                if keys.is_empty() {
                    self.err(
                        SemError::new(
                            name.span,
                            format!("foreach over a non-array '{}'", name.name),
                        )
                        .label("a scalar global"),
                    );
                    return None;
                }
                let val = self.global_info[g.0 as usize].val;
                (
                    ForeachSource::Array(g),
                    keys.into_iter().map(Ty::Var).collect::<Vec<_>>(),
                    Ty::Var(val),
                )
            }
            ast::ForeachSource::Hist(e) => {
                let (x, t) = self.lower_expr(e, body);
                if !matches!(x.kind, ExprKind::Hist { .. }) {
                    self.err(
                        SemError::new(e.span, "foreach over a non-array")
                            .label("not an array or histogram"),
                    );
                    return None;
                }
                let _ = t;
                if f.keys.len() != 1 {
                    self.err(SemError::new(
                        f.span,
                        "a histogram is iterated with exactly one key (the bucket)",
                    ));
                    return None;
                }
                (ForeachSource::Hist(Box::new(x)), vec![LONG], LONG)
            }
        };
        let mut keys = Vec::new();
        let key_types = key_tvs.clone();
        for (k, t) in f.keys.iter().zip(key_tvs) {
            let (id, tv) = body.local(&mut self.types, &k.name, k.span);
            self.unify(Ty::Var(tv), t, k.span);
            keys.push(id);
        }
        let value = f.value.as_ref().map(|v| {
            let (id, tv) = body.local(&mut self.types, &v.name, v.span);
            self.unify(Ty::Var(tv), val_ty, v.span);
            id
        });
        if let Some(s) = &f.slice {
            if s.len() != f.keys.len() {
                self.err(
                    SemError::new(
                        f.span,
                        format!("inconsistent arity ({} vs {})", s.len(), f.keys.len()),
                    )
                    .label("the key filter needs one entry (or *) per key"),
                );
            }
        }
        // `arr[*, "x"]`: each given key has the type of its column.
        let slice = f.slice.as_ref().map(|s| {
            s.iter()
                .zip(
                    key_types
                        .iter()
                        .copied()
                        .map(Some)
                        .chain(std::iter::repeat(None)),
                )
                .map(|(k, t)| {
                    k.as_ref().map(|k| {
                        let (x, kt) = self.lower_expr(k, body);
                        if let Some(t) = t {
                            self.unify(kt, t, k.span);
                        }
                        x
                    })
                })
                .collect()
        });
        let limit = f.limit.as_ref().map(|l| {
            let (x, t) = self.lower_expr(l, body);
            self.unify(t, LONG, l.span);
            x
        });
        if let ForeachSource::Array(g) = &source {
            body.foreach.push(*g);
        }
        let b = self.boxed_stmt(&f.body, body);
        if let ForeachSource::Array(_) = &source {
            body.foreach.pop();
        }
        Some(Foreach {
            source,
            keys,
            value,
            slice,
            sort: f.sort,
            limit,
            body: b,
        })
    }

    fn lower_delete(&mut self, e: &ast::Expr, body: &mut Body) -> Option<LValue> {
        match &e.kind {
            ast::ExprKind::Var(name) => {
                if let Some(&id) = body.by_name.get(name) {
                    return Some(LValue::Local(id));
                }
                if let Some(g) = self.find_global(name, body.file) {
                    if self.global_info[g.0 as usize].keys.is_none() && self.global_has_size(g) {
                        self.global_arity(g, 1, e.span);
                    }
                    self.note_write(g, e.span, body);
                    return Some(LValue::Global(g));
                }
                let (id, _) = body.local(&mut self.types, name, e.span);
                Some(LValue::Local(id))
            }
            ast::ExprKind::Index { .. } => {
                let (lv, _) = self.lower_lvalue_slice(e, body, true)?;
                self.written(&lv, e.span, body);
                Some(lv)
            }
            _ => {
                self.err(SemError::new(
                    e.span,
                    "invalid operand of delete expression",
                ));
                None
            }
        }
    }

    fn global_has_size(&self, g: GlobalId) -> bool {
        self.globals[g.0 as usize].size.is_some()
    }

    /// A write to global `g` inside a foreach over it is an error.
    fn note_write(&mut self, g: GlobalId, span: Span, body: &Body) {
        if body.foreach.contains(&g) {
            let name = self.globals[g.0 as usize].name.clone();
            self.err(
                SemError::new(
                    span,
                    format!("variable '{name}' modified during 'foreach' iteration"),
                )
                .label("modified here"),
            );
        }
    }

    // ----- expressions -----

    fn array_global(
        &mut self,
        name: &ast::Ident,
        file: FileId,
        arity: usize,
        span: Span,
    ) -> Option<GlobalId> {
        match self.find_global(&name.name, file) {
            Some(g) => Some(g),
            None => {
                self.err(
                    SemError::new(
                        span,
                        format!(
                            "unresolved arity-{arity} global array {}, missing global declaration?",
                            name.name
                        ),
                    )
                    .label("arrays must be declared global"),
                );
                None
            }
        }
    }

    /// Resolves something that can be written (or `<<<`-ed, deleted, read
    /// as a stat): returns the lvalue and its type.
    fn lower_lvalue(&mut self, e: &ast::Expr, body: &mut Body) -> Option<(LValue, Ty)> {
        self.lower_lvalue_slice(e, body, false)
    }

    /// [`Self::lower_lvalue`]; with `slice`, an element's keys may be `*`
    /// (`delete a[*, k]`), else a `*` key is SystemTap's "wildcard not
    /// allowed in array index".
    fn lower_lvalue_slice(
        &mut self,
        e: &ast::Expr,
        body: &mut Body,
        slice: bool,
    ) -> Option<(LValue, Ty)> {
        match &e.kind {
            ast::ExprKind::Var(name) => Some(self.lower_var(name, e.span, body)),
            ast::ExprKind::Index {
                base: ast::IndexBase::Array(name),
                keys,
            } => {
                let g = self.array_global(name, body.file, keys.len(), e.span)?;
                let key_tvs = self.global_arity(g, keys.len(), name.span);
                let mut lowered = Vec::new();
                if !slice && keys.iter().any(is_wildcard) {
                    self.err(wildcard_not_allowed(e.span));
                }
                for (i, k) in keys.iter().enumerate() {
                    if is_wildcard(k) {
                        lowered.push(mk(ExprKind::Wildcard, Type::Void, k.span));
                        continue;
                    }
                    let (x, t) = self.lower_expr(k, body);
                    if let Some(kt) = key_tvs.as_ref().and_then(|v| v.get(i)) {
                        if self.types.resolve(t) == Some(Type::Stats) {
                            self.err(
                                SemError::new(k.span, "invalid type stat")
                                    .label("statistics cannot be array indexes"),
                            );
                        } else {
                            self.unify(Ty::Var(*kt), t, k.span);
                        }
                    }
                    lowered.push(x);
                }
                let val = self.global_info[g.0 as usize].val;
                Some((
                    LValue::Elem {
                        array: g,
                        keys: lowered,
                    },
                    Ty::Var(val),
                ))
            }
            ast::ExprKind::Index {
                base: ast::IndexBase::Hist(_),
                ..
            } => {
                self.err(SemError::new(
                    e.span,
                    "Assignment to read-only histogram bucket",
                ));
                None
            }
            ast::ExprKind::Target(t) if prometheus_value(t, body) => {
                self.err(write_only_value(e.span));
                None
            }
            ast::ExprKind::Target(t) => self
                .lower_target(t, e.span, body, true)
                .map(|(cv, ty)| (LValue::Context(cv), ty)),
            _ => {
                self.err(
                    SemError::new(e.span, "Expecting symbol or array index expression")
                        .label("not something that can be assigned"),
                );
                None
            }
        }
    }

    /// A bare name: a local, a global scalar (or whole array), or a new local.
    fn lower_var(&mut self, name: &str, span: Span, body: &mut Body) -> (LValue, Ty) {
        if let Some(&id) = body.by_name.get(name) {
            return (LValue::Local(id), Ty::Var(body.tvs[id.0 as usize]));
        }
        if let Some(g) = self.find_global(name, body.file) {
            let val = self.global_info[g.0 as usize].val;
            return (LValue::Global(g), Ty::Var(val));
        }
        let (id, tv) = body.local(&mut self.types, name, span);
        (LValue::Local(id), Ty::Var(tv))
    }

    /// Checks a lvalue that is about to be written (scalar arity, foreach).
    fn written(&mut self, lv: &LValue, span: Span, body: &Body) {
        match lv {
            LValue::Global(g) => {
                self.global_arity(*g, 0, span);
                self.note_write(*g, span, body);
            }
            LValue::Elem { array, .. } => self.note_write(*array, span, body),
            _ => {}
        }
    }

    fn load(&mut self, lv: LValue, t: Ty, span: Span) -> Lowered {
        if let LValue::Global(g) = &lv {
            self.global_arity(*g, 0, span);
        }
        (mk(ExprKind::Load(lv), Type::Void, span), t)
    }

    pub fn lower_expr(&mut self, e: &ast::Expr, body: &mut Body) -> Lowered {
        let span = e.span;
        match &e.kind {
            ast::ExprKind::Num(n) => (mk(ExprKind::Long(*n), Type::Long, span), LONG),
            // Array indexes report a `*` with their array (below); this is
            // any other place.
            ast::ExprKind::Wildcard => {
                self.err(wildcard_not_allowed(span));
                bad(span)
            }
            ast::ExprKind::Str(s) => (mk(ExprKind::Str(s.clone()), Type::String, span), STRING),
            ast::ExprKind::Var(name) => {
                let (lv, t) = self.lower_var(name, span, body);
                self.load(lv, t, span)
            }
            ast::ExprKind::Index {
                base: ast::IndexBase::Hist(h),
                keys,
            } => {
                let (hist, _) = self.lower_expr(h, body);
                if keys.len() != 1 {
                    self.err(SemError::new(
                        span,
                        "a histogram bucket takes exactly one index",
                    ));
                    return bad(span);
                }
                let (idx, t) = self.lower_expr(&keys[0], body);
                self.unify(t, LONG, keys[0].span);
                (
                    mk(
                        ExprKind::HistBucket {
                            hist: Box::new(hist),
                            index: Box::new(idx),
                        },
                        Type::Long,
                        span,
                    ),
                    LONG,
                )
            }
            ast::ExprKind::Index { .. } => match self.lower_lvalue(e, body) {
                Some((lv, t)) => self.load(lv, t, span),
                None => bad(span),
            },
            ast::ExprKind::Target(t) if self.wants_dwarf(t, body) => {
                self.lower_dwarf(t, span, body)
            }
            ast::ExprKind::Target(t)
                if t.path.is_empty()
                    && !body.families.is_empty()
                    && body.families.iter().all(|f| is_mark(f))
                    && let Some(k) = mark_context(&t.name) =>
            {
                let arg = mk(ExprKind::Long(k), Type::Long, span);
                let call = ExprKind::Builtin {
                    name: "__utap_mark",
                    args: vec![arg],
                };
                (mk(call, Type::String, span), STRING)
            }
            ast::ExprKind::Target(t)
                if matches!(t.name.as_str(), "$parms" | "$vars")
                    && t.path.is_empty()
                    && !body.families.is_empty()
                    && body
                        .families
                        .iter()
                        .all(|f| f.context_var("arg1").is_some()) =>
            {
                all_args(span)
            }
            ast::ExprKind::Target(t) if t.name == "$name" && plt_only(t, body) => {
                // `$$name` of a `.plt` probe: the called function's name,
                // what `probefunc()` gives there.
                let call = ExprKind::Builtin {
                    name: "probefunc",
                    args: Vec::new(),
                };
                (mk(call, Type::String, span), STRING)
            }
            ast::ExprKind::Target(t) if prometheus_value(t, body) => {
                self.err(write_only_value(span));
                bad(span)
            }
            ast::ExprKind::Target(t) if self.skip_badvars && !self.target_resolves(t, body) => {
                match t.pretty > 0 {
                    true => (mk(ExprKind::Str(String::new()), Type::String, span), STRING),
                    false => (mk(ExprKind::Long(0), Type::Long, span), LONG),
                }
            }
            ast::ExprKind::Target(t) => match self.lower_target(t, span, body, false) {
                Some((cv, ty)) => (mk(ExprKind::Context(cv), Type::Long, span), ty),
                None => bad(span),
            },
            ast::ExprKind::Cast { .. } => self.lower_cast(e, body),
            ast::ExprKind::AtCall { name, .. } => {
                self.err(SemError::new(
                    span,
                    format!("@{name} is not supported by utap"),
                ));
                bad(span)
            }
            ast::ExprKind::Defined(inner) => {
                let defined = self.is_defined(inner, body);
                (mk(ExprKind::Long(defined as i64), Type::Long, span), LONG)
            }
            ast::ExprKind::Unary { op, expr } => {
                let (x, t) = self.lower_expr(expr, body);
                self.unify(t, LONG, expr.span);
                match (op, &x.kind) {
                    (UnOp::Neg, ExprKind::Long(n)) => {
                        return (mk(ExprKind::Long(n.wrapping_neg()), Type::Long, span), LONG);
                    }
                    (UnOp::Not, ExprKind::Long(n)) => {
                        return (mk(ExprKind::Long((*n == 0) as i64), Type::Long, span), LONG);
                    }
                    _ => {}
                }
                (
                    mk(
                        ExprKind::Unary {
                            op: *op,
                            expr: Box::new(x),
                        },
                        Type::Long,
                        span,
                    ),
                    LONG,
                )
            }
            ast::ExprKind::IncDec { op, prefix, target } => {
                if let ast::ExprKind::Target(t) = &target.kind
                    && self.wants_dwarf(t, body)
                {
                    let update = match op {
                        ast::IncDecOp::Inc => Update::Add,
                        ast::IncDecOp::Dec => Update::Sub,
                    };
                    let one = mk(ExprKind::Long(1), Type::Long, span);
                    return self.dwarf_write(
                        DwarfWrite::Update(update, !*prefix),
                        t,
                        one,
                        span,
                        body,
                    );
                }
                let Some((lv, t)) = self.lower_lvalue(target, body) else {
                    return bad(span);
                };
                self.check_not_stats(t, target.span);
                self.written(&lv, target.span, body);
                self.unify(t, LONG, target.span);
                (
                    mk(
                        ExprKind::IncDec {
                            op: *op,
                            prefix: *prefix,
                            target: lv,
                        },
                        Type::Long,
                        span,
                    ),
                    LONG,
                )
            }
            ast::ExprKind::Binary { op, lhs, rhs } => self.lower_binary(*op, lhs, rhs, span, body),
            ast::ExprKind::Assign { op, target, value } => {
                self.lower_assign(*op, target, value, span, body)
            }
            ast::ExprKind::Ternary { cond, then, else_ } => {
                let c = self.cond(cond, body);
                if let (true, ExprKind::Long(v)) = (contains_defined(cond), &c.kind) {
                    return self.lower_expr(if *v != 0 { then } else { else_ }, body);
                }
                let (a, ta) = self.lower_expr(then, body);
                let (b, tb) = self.lower_expr(else_, body);
                let t = self.unify(ta, tb, else_.span);
                (
                    mk(
                        ExprKind::Ternary {
                            cond: Box::new(c),
                            then: Box::new(a),
                            else_: Box::new(b),
                        },
                        Type::Void,
                        span,
                    ),
                    t,
                )
            }
            ast::ExprKind::In { keys, array } => {
                let Some(g) = self.array_global(array, body.file, keys.len(), array.span) else {
                    return bad(span);
                };
                let key_tvs = self.global_arity(g, keys.len(), array.span);
                if key_tvs.as_ref().is_some_and(|k| k.is_empty()) {
                    self.err(
                        SemError::new(array.span, format!("'{}' is not an array", array.name))
                            .label("'in' needs an array"),
                    );
                }
                let mut lowered = Vec::new();
                for (i, k) in keys.iter().enumerate() {
                    if is_wildcard(k) {
                        lowered.push(mk(ExprKind::Wildcard, Type::Void, k.span));
                        continue;
                    }
                    let (x, t) = self.lower_expr(k, body);
                    if let Some(kt) = key_tvs.as_ref().and_then(|v| v.get(i)) {
                        self.unify(Ty::Var(*kt), t, k.span);
                    }
                    lowered.push(x);
                }
                (
                    mk(
                        ExprKind::In {
                            array: g,
                            keys: lowered,
                        },
                        Type::Long,
                        span,
                    ),
                    LONG,
                )
            }
            ast::ExprKind::Call { name, args } => self.lower_call(name, args, span, body),
            ast::ExprKind::Stat { op, expr, args } => {
                // `@variance(s, bits)`: the optional precision is checked
                // but not kept (the program has no field for it; runtime
                // uses SystemTap's default).
                for a in args {
                    let (_, t) = self.lower_expr(a, body);
                    self.unify(t, LONG, a.span);
                }
                if !args.is_empty() && *op != ast::StatOp::Variance {
                    self.err(SemError::new(
                        span,
                        "unexpected argument to a statistics extractor",
                    ));
                }
                let Some(lv) = self.stat_target(expr, body) else {
                    return bad(span);
                };
                (
                    mk(
                        ExprKind::StatGet {
                            op: *op,
                            target: lv,
                        },
                        Type::Long,
                        span,
                    ),
                    LONG,
                )
            }
            ast::ExprKind::Hist { kind, expr } => {
                let Some(lv) = self.stat_target(expr, body) else {
                    return bad(span);
                };
                let kind = match kind {
                    ast::HistKind::Log => HistKind::Log,
                    ast::HistKind::Linear { lo, hi, step } => {
                        let mut num = |x: &ast::Expr| -> i64 {
                            match self.lower_expr(x, body).0.kind {
                                ExprKind::Long(n) => n,
                                _ => {
                                    self.err(SemError::new(
                                        x.span,
                                        "@hist_linear parameters must be literal numbers",
                                    ));
                                    1
                                }
                            }
                        };
                        let (lo, hi, step) = (num(lo), num(hi), num(step));
                        if step <= 0 || hi < lo {
                            self.err(SemError::new(
                                span,
                                "invalid @hist_linear parameters (need lo <= hi and step > 0)",
                            ));
                        }
                        HistKind::Linear { lo, hi, step }
                    }
                };
                (
                    mk(ExprKind::Hist { kind, target: lv }, Type::Hist, span),
                    Ty::Known(Type::Hist),
                )
            }
        }
    }

    /// The operand of `@count(x)`, `@hist_log(x)`: a stats global or element.
    fn stat_target(&mut self, e: &ast::Expr, body: &mut Body) -> Option<LValue> {
        let (lv, t) = self.lower_lvalue(e, body)?;
        if let LValue::Global(g) = &lv {
            self.global_arity(*g, 0, e.span);
        }
        self.unify(t, STATS, e.span);
        Some(lv)
    }

    fn check_not_stats(&mut self, t: Ty, span: Span) {
        if self.types.resolve(t) == Some(Type::Stats) {
            self.err(
                SemError::new(span, "invalid type stat")
                    .label("a statistics variable")
                    .help("statistics only take values with <<< and are read with @count, @sum, @min, @max, @avg, @hist_*"),
            );
        }
    }

    fn lower_binary(
        &mut self,
        op: BinOp,
        lhs: &ast::Expr,
        rhs: &ast::Expr,
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        let (l, tl) = self.lower_expr(lhs, body);
        let (r, tr) = self.lower_expr(rhs, body);
        let (operand, result) = match op {
            BinOp::Concat => (Some(STRING), STRING),
            BinOp::Match | BinOp::NotMatch => (Some(STRING), LONG),
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => (None, LONG),
            _ => (Some(LONG), LONG),
        };
        match operand {
            Some(t) => {
                self.check_not_stats(tl, lhs.span);
                self.check_not_stats(tr, rhs.span);
                self.unify(tl, t, lhs.span);
                self.unify(tr, t, rhs.span);
            }
            None => {
                self.check_not_stats(tl, lhs.span);
                self.check_not_stats(tr, rhs.span);
                self.unify(tl, tr, span);
            }
        }
        if let (ExprKind::Long(a), ExprKind::Long(b), BinOp::And | BinOp::Or) =
            (&l.kind, &r.kind, op)
        {
            let v = if op == BinOp::And {
                *a != 0 && *b != 0
            } else {
                *a != 0 || *b != 0
            };
            return (mk(ExprKind::Long(v as i64), Type::Long, span), LONG);
        }
        let ty = if result == STRING {
            Type::String
        } else {
            Type::Long
        };
        (
            mk(
                ExprKind::Binary {
                    op,
                    lhs: Box::new(l),
                    rhs: Box::new(r),
                },
                ty,
                span,
            ),
            result,
        )
    }

    fn lower_assign(
        &mut self,
        op: AssignOp,
        target: &ast::Expr,
        value: &ast::Expr,
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        if let ast::ExprKind::Target(t) = &target.kind
            && prometheus_value(t, body)
        {
            return self.prometheus_write(op, value, span, body);
        }
        if let ast::ExprKind::Target(t) = &target.kind
            && self.wants_dwarf(t, body)
        {
            return self.lower_dwarf_store(op, t, value, span, body);
        }
        let Some((lv, tt)) = self.lower_lvalue(target, body) else {
            self.lower_expr(value, body);
            return bad(span);
        };
        let (v, tv) = self.lower_expr(value, body);
        self.written(&lv, target.span, body);
        if op == AssignOp::Stat {
            if matches!(lv, LValue::Local(_)) {
                // Reported once types are known ("stat locals not supported").
            }
            if matches!(lv, LValue::Context(_)) {
                self.err(SemError::new(target.span, "invalid type stat"));
            }
            if self.types.resolve(tv) == Some(Type::String) {
                self.err(
                    SemError::new(value.span, "type mismatch (string vs. long)")
                        .label("only numbers can be aggregated with <<<"),
                );
            } else {
                self.unify(tv, LONG, value.span);
            }
            self.unify(tt, STATS, target.span);
            return (
                mk(
                    ExprKind::StatAdd {
                        target: lv,
                        value: Box::new(v),
                    },
                    Type::Void,
                    span,
                ),
                Ty::Known(Type::Void),
            );
        }
        self.check_not_stats(tt, target.span);
        self.check_not_stats(tv, value.span);
        let t = match op {
            AssignOp::Assign => self.unify(tt, tv, value.span),
            AssignOp::Concat => {
                self.unify(tt, STRING, target.span);
                self.unify(tv, STRING, value.span)
            }
            _ => {
                self.unify(tt, LONG, target.span);
                self.unify(tv, LONG, value.span)
            }
        };
        (
            mk(
                ExprKind::Assign {
                    op,
                    target: lv,
                    value: Box::new(v),
                },
                Type::Void,
                span,
            ),
            t,
        )
    }

    fn lower_call(
        &mut self,
        name: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        if let Some(kind) = builtins::print_kind(&name.name) {
            return self.lower_print(kind, name, args, span, body);
        }
        // A script (or tapset) function shadows a builtin of the same name.
        let user = self.find_function(&name.name, body.file);
        if user.is_none()
            && let Some(b) = builtins::lookup(&name.name)
        {
            return self.lower_builtin(b, args, span, body);
        }
        let Some(f) = user else {
            let mut e = SemError::new(name.span, "unresolved function")
                .label(format!("no function '{}'", name.name));
            if let Some(similar) = self.similar_function(&name.name) {
                e.message = format!("unresolved function (similar: {similar})");
                e = e.help(format!("did you mean '{similar}'?"));
            }
            self.err(e);
            for a in args {
                self.lower_expr(a, body);
            }
            return bad(span);
        };
        let info = &self.func_info[f.0 as usize];
        let (params, ret) = (info.params.clone(), info.ret);
        if params.len() != args.len() {
            self.err(
                SemError::new(span, format!("unresolved arity-{} function", args.len()))
                    .label(format!(
                        "'{}' takes {} argument(s), given {}",
                        name.name,
                        params.len(),
                        args.len()
                    ))
                    .also(info.decl.name.span, "defined here"),
            );
        }
        let mut lowered = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let (x, t) = self.lower_expr(a, body);
            if self.types.resolve(t) == Some(Type::Stats) {
                self.err(
                    SemError::new(a.span, "invalid type stat")
                        .label("statistics cannot be passed to functions"),
                );
            } else if let Some(p) = params.get(i) {
                self.unify(Ty::Var(*p), t, a.span);
            }
            lowered.push(x);
        }
        (
            mk(
                ExprKind::Call {
                    func: f,
                    args: lowered,
                },
                Type::Void,
                span,
            ),
            Ty::Var(ret),
        )
    }

    fn similar_function(&self, name: &str) -> Option<String> {
        let mut names: Vec<&str> = builtins::BUILTINS.iter().map(|b| b.name).collect();
        names.extend(builtins::PRINT_FUNCTIONS.iter().map(|(n, ..)| *n));
        names.extend(self.syms.functions.keys().map(|s| s.as_str()));
        names
            .into_iter()
            .map(|n| (strsim::levenshtein(n, name), n))
            .filter(|(d, n)| *d > 0 && *d <= n.len().max(name.len()) / 2)
            .min()
            .map(|(_, n)| n.to_string())
    }

    fn lower_builtin(
        &mut self,
        b: &'static builtins::Builtin,
        args: &[ast::Expr],
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        if args.len() < b.required || args.len() > b.params.len() {
            let expected = if b.required == b.params.len() {
                b.required.to_string()
            } else {
                format!("{} to {}", b.required, b.params.len())
            };
            self.err(
                SemError::new(span, format!("unresolved arity-{} function", args.len())).label(
                    format!(
                        "'{}' takes {expected} argument(s), given {}",
                        b.name,
                        args.len()
                    ),
                ),
            );
        }
        if b.guru && !self.guru {
            self.err(
                SemError::new(
                    span,
                    format!("function '{}' is a control action; need utap -g", b.name),
                )
                .label("changes what the traced program does"),
            );
        }
        if b.name == "errno_num"
            && let Some(ast::Expr {
                kind: ast::ExprKind::Str(name),
                span,
                ..
            }) = args.first()
            && utap_runtime::syscalls::errno::errno_number(name).is_none()
        {
            self.err(
                SemError::new(*span, format!("unknown errno name '{name}'"))
                    .label("errno_str() prints no such name")
                    .help("names are upper case, as in errno(3): \"ENOSPC\""),
            );
        }
        let mut lowered = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let (x, t) = self.lower_expr(a, body);
            if let Some(p) = b.params.get(i) {
                self.unify(t, Ty::Known(*p), a.span);
            }
            lowered.push(x);
        }
        (
            mk(
                ExprKind::Builtin {
                    name: b.name,
                    args: lowered,
                },
                b.ret,
                span,
            ),
            Ty::Known(b.ret),
        )
    }

    fn lower_print(
        &mut self,
        kind: PrintKind,
        name: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        let ret = match kind {
            PrintKind::Sprint
            | PrintKind::Sprintln
            | PrintKind::Sprintf
            | PrintKind::Sprintd
            | PrintKind::Sprintdln => Type::String,
            _ => Type::Void,
        };
        let mut lowered = Vec::new();
        let mut format = None;
        let mut rest = args;
        match kind {
            PrintKind::Printf | PrintKind::Sprintf => {
                let Some(first) = args.first() else {
                    self.err(SemError::new(
                        span,
                        format!("{} needs a format string", name.name),
                    ));
                    return bad(span);
                };
                let fmt = match &first.kind {
                    ast::ExprKind::Str(s) => s.clone(),
                    _ => {
                        self.err(SemError::new(
                            first.span,
                            "print format must be a string literal",
                        ));
                        return bad(span);
                    }
                };
                match utap_runtime::format::parse(&fmt) {
                    Ok(pieces) => {
                        let wanted = utap_runtime::format::arg_types(&pieces);
                        if wanted.len() != args.len() - 1 {
                            self.err(
                                SemError::new(span, utap_runtime::format::WRONG_ARG_COUNT).label(
                                    format!(
                                        "the format takes {} argument(s), given {}",
                                        wanted.len(),
                                        args.len() - 1
                                    ),
                                ),
                            );
                        }
                        for (a, w) in args[1..]
                            .iter()
                            .zip(wanted.iter().map(Some).chain(std::iter::repeat(None)))
                        {
                            let (x, t) = self.lower_expr(a, body);
                            if let Some(w) = w {
                                let want = match w {
                                    utap_runtime::format::ArgType::Long => Type::Long,
                                    utap_runtime::format::ArgType::Str => Type::String,
                                };
                                self.unify(t, Ty::Known(want), a.span);
                            }
                            lowered.push(x);
                        }
                        format = Some(pieces);
                    }
                    Err(e) => {
                        let mut err = SemError::new(first.span, e.to_string());
                        if fmt.ends_with('%') && !fmt.ends_with("%%") {
                            err = err.help("a percent sign is written %%");
                        }
                        self.err(err);
                    }
                }
                rest = &[];
            }
            PrintKind::Printd | PrintKind::Printdln | PrintKind::Sprintd | PrintKind::Sprintdln => {
                if args.len() < 2 {
                    self.err(SemError::new(
                        span,
                        format!("{} needs a delimiter and at least one value", name.name),
                    ));
                }
                if let Some(first) = args.first()
                    && !matches!(first.kind, ast::ExprKind::Str(_))
                {
                    self.err(SemError::new(
                        first.span,
                        "print delimiter must be a string literal",
                    ));
                }
            }
            _ => {
                if args.is_empty() && !matches!(kind, PrintKind::Println | PrintKind::Sprintln) {
                    self.err(SemError::new(
                        span,
                        format!("{} needs at least one argument", name.name),
                    ));
                }
            }
        }
        for a in rest {
            let (x, t) = self.lower_expr(a, body);
            self.check_not_stats(t, a.span);
            lowered.push(x);
        }
        (
            mk(
                ExprKind::Print {
                    kind,
                    format,
                    args: lowered,
                },
                ret,
                span,
            ),
            Ty::Known(ret),
        )
    }

    // ----- context variables -----

    /// `$value .= TEXT` (or `=`) in `probe prometheus`: appended to (or
    /// replaces) the text being served, held by the runtime per scrape, so
    /// it may grow past MAXSTRINGLEN as SystemTap's procfs buffer does.
    fn prometheus_write(
        &mut self,
        op: AssignOp,
        value: &ast::Expr,
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        let (v, tv) = self.lower_expr(value, body);
        self.unify(tv, STRING, value.span);
        let name = match op {
            AssignOp::Concat => "__prometheus_append",
            AssignOp::Assign => "__prometheus_set",
            _ => {
                self.err(write_only_value(span));
                return bad(span);
            }
        };
        (
            mk(
                ExprKind::Builtin {
                    name,
                    args: vec![v],
                },
                Type::Void,
                span,
            ),
            Ty::Known(Type::Void),
        )
    }

    /// `@defined(e)`: true when `e` is a context variable of every point
    /// of this handler.
    fn is_defined(&mut self, e: &ast::Expr, body: &Body) -> bool {
        match &e.kind {
            ast::ExprKind::Target(t) if self.wants_dwarf(t, body) => {
                dwarf_defined(t, body.dwarf.as_deref().expect("checked by wants_dwarf"))
            }
            ast::ExprKind::Target(t) if prometheus_value(t, body) => true,
            ast::ExprKind::Target(t) => {
                t.path.is_empty()
                    && t.pretty == 0
                    && !body.families.is_empty()
                    && body
                        .families
                        .iter()
                        .all(|f| f.context_var(&t.name).is_some_and(|v| v.readable))
            }
            _ => false,
        }
    }

    /// Whether `$name` is a DWARF variable of the probed function rather
    /// than a context variable of the probe family.
    fn wants_dwarf(&self, t: &ast::TargetVar, body: &Body) -> bool {
        if body.dwarf.is_none() || body.func.is_some() {
            return false;
        }
        match t.name.as_str() {
            "$parms" | "$locals" | "$vars" | "$return" => return true,
            n if n.starts_with("@var(") => return true,
            // `$$name`, `$$provider`: .plt and marker context, not DWARF.
            n if n.starts_with('$') => return false,
            _ => {}
        }
        !body
            .families
            .iter()
            .all(|f| f.context_var(&t.name).is_some())
    }

    /// `$var`, `$p->a[i]`, `$var$`, `$$parms`...: a call of the runtime's
    /// DWARF builtins with the plan the debug information gives.
    fn lower_dwarf(&mut self, t: &ast::TargetVar, span: Span, body: &mut Body) -> Lowered {
        use utap_runtime::dwarf::Comp;
        let sites = body.dwarf.clone().expect("checked by wants_dwarf");
        let name = t.name.as_str();
        if name == "$return" {
            if !sites.returning {
                self.err(
                    SemError::new(span, "$$return is only available in .return probes")
                        .label("not a .return probe"),
                );
                return bad(span);
            }
            let format = utap_runtime::format::parse("return=%#x").ok();
            let ret = mk(ExprKind::Context(ContextVar::Return), Type::Long, span);
            let e = ExprKind::Print {
                kind: PrintKind::Sprintf,
                format,
                args: vec![ret],
            };
            return (mk(e, Type::String, span), STRING);
        }
        if sites.returning && !name.starts_with('@') {
            // Reads are made implicit @entry (check::entry); what is left
            // is a write.
            self.err(
                SemError::new(
                    span,
                    format!("'${name}' is not available in a .return probe"),
                )
                .label("utap reads target variables at function entry")
                .help(format!(
                    "write @entry(${name}) for its value at entry; $return is the return value here"
                )),
            );
            return bad(span);
        }
        if name.starts_with("@var(") && !var_module_named(t, &sites) {
            self.err(
                SemError::new(
                    span,
                    "@var: utap reads the globals of the probed module only",
                )
                .label("not a module this probe is in"),
            );
            return bad(span);
        }
        if sites.sites.is_empty() {
            let why = sites
                .missing
                .clone()
                .unwrap_or_else(|| "no probed function".into());
            self.err(
                SemError::new(span, format!("unable to find local '{name}': {why}"))
                    .label("target variables need DWARF debug information (gcc -g)")
                    .help("without it, read the arguments with $arg1..$arg6 or int_arg(n), pointer_arg(n)..."),
            );
            return bad(span);
        }
        let mut idx = Vec::new();
        let comps: Vec<Comp> = dwarf_comps(self, &t.path, &mut idx, body);
        if idx.len() > 2 {
            self.err(SemError::new(
                span,
                "utap supports at most two computed array indexes in a target variable",
            ));
            return bad(span);
        }
        let want = match name {
            _ if t.address => super::dwarf::Want::Address(name, &comps),
            "$parms" | "$locals" | "$vars" => super::dwarf::Want::All(name, t.pretty),
            _ if t.pretty > 0 => super::dwarf::Want::Pretty(name, &comps, t.pretty > 1),
            _ => super::dwarf::Want::Long(name, &comps),
        };
        let id = match super::dwarf::plan(&sites, &want) {
            Ok(id) => id,
            Err(e) => {
                let mut err = SemError::new(span, e.message)
                    .label("in the probed function's debug information");
                if let Some(h) = e.help {
                    err = err.help(h);
                }
                self.err(err);
                return bad(span);
            }
        };
        let long = matches!(
            want,
            super::dwarf::Want::Long(..) | super::dwarf::Want::Address(..)
        );
        dwarf_call(id, idx, long, span)
    }

    /// `@cast(addr, "type" [, "module"])->path[$]`: the memory at `addr`
    /// read as the type (from the module's DWARF, the probed one by
    /// default), in any probe.
    fn lower_cast(&mut self, e: &ast::Expr, body: &mut Body) -> Lowered {
        let ast::ExprKind::Cast {
            expr,
            type_name,
            module,
            path,
            pretty,
        } = &e.kind
        else {
            unreachable!("called on @cast")
        };
        let span = e.span;
        let (addr, ta) = self.lower_expr(expr, body);
        self.unify(ta, LONG, expr.span);
        if path.is_empty() && *pretty == 0 {
            // `@cast(p, "T")` alone is the address.
            return (addr, LONG);
        }
        let mut idx = vec![addr];
        let comps = dwarf_comps(self, path, &mut idx, body);
        if idx.len() > 2 {
            self.err(SemError::new(
                span,
                "utap supports one computed array index in a @cast",
            ));
            return bad(span);
        }
        let sites = body.dwarf.clone();
        match super::dwarf::cast_plan(
            sites.as_deref(),
            type_name,
            module.as_deref(),
            &comps,
            *pretty,
        ) {
            Ok(id) => dwarf_call(id, idx, *pretty == 0, span),
            Err(err) => {
                let mut d =
                    SemError::new(span, err.message).label("in the module's debug information");
                if let Some(h) = err.help {
                    d = d.help(h);
                }
                self.err(d);
                bad(span)
            }
        }
    }

    /// `$var = value` and `$var OP= value` under -g: stored where the
    /// variable lives.
    fn lower_dwarf_store(
        &mut self,
        op: AssignOp,
        t: &ast::TargetVar,
        value: &ast::Expr,
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        let (v, tv) = self.lower_expr(value, body);
        self.unify(tv, LONG, value.span);
        let write = match op {
            AssignOp::Assign => Some(DwarfWrite::Set),
            AssignOp::Add => Some(DwarfWrite::Update(Update::Add, false)),
            AssignOp::Sub => Some(DwarfWrite::Update(Update::Sub, false)),
            AssignOp::Mul => Some(DwarfWrite::Update(Update::Mul, false)),
            AssignOp::Div => Some(DwarfWrite::Update(Update::Div, false)),
            AssignOp::Mod => Some(DwarfWrite::Update(Update::Mod, false)),
            AssignOp::Shl => Some(DwarfWrite::Update(Update::Shl, false)),
            AssignOp::Shr => Some(DwarfWrite::Update(Update::Shr, false)),
            AssignOp::BitAnd => Some(DwarfWrite::Update(Update::And, false)),
            AssignOp::BitOr => Some(DwarfWrite::Update(Update::Or, false)),
            AssignOp::BitXor => Some(DwarfWrite::Update(Update::Xor, false)),
            AssignOp::Concat | AssignOp::Stat => None,
        };
        let text = if op == AssignOp::Concat { ".=" } else { "<<<" };
        match write {
            Some(w) => self.dwarf_write(w, t, v, span, body),
            None => {
                let dollar = match t.name.starts_with('@') {
                    true => t.name.clone(),
                    false => format!("${}", t.name),
                };
                self.err(
                    SemError::new(span, format!("'{dollar}' is a number: it cannot take {text}"))
                        .label("target variables take =, +=, -=, *=, /=, %=, <<=, >>=, &=, |=, ^=, ++ and --"),
                );
                bad(span)
            }
        }
    }

    /// A write to a target variable (`-g` only): `__dwarf_set` for `=`,
    /// `__dwarf_update` (read, compute, write back) for the others.
    fn dwarf_write(
        &mut self,
        write: DwarfWrite,
        t: &ast::TargetVar,
        v: Expr,
        span: Span,
        body: &mut Body,
    ) -> Lowered {
        use utap_runtime::dwarf::Comp;
        let sites = body.dwarf.clone().expect("checked by wants_dwarf");
        let dollar = match t.name.starts_with('@') {
            true => t.name.clone(),
            false => format!("${}", t.name),
        };
        if !self.guru {
            self.err(
                SemError::new(span, "write to target variable not permitted; need utap -g").label(
                    format!("writing '{dollar}' changes what the traced program sees"),
                ),
            );
            return bad(span);
        }
        if t.pretty > 0 || t.name.starts_with('$') {
            self.err(
                SemError::new(span, format!("'{dollar}' cannot be written"))
                    .label("utap stores a number into a target variable"),
            );
            return bad(span);
        }
        if sites.returning && !t.name.starts_with('@') {
            self.err(
                SemError::new(
                    span,
                    format!("'{dollar}' cannot be written in a .return probe"),
                )
                .label("the function's variables are gone when it returns"),
            );
            return bad(span);
        }
        let mut idx = Vec::new();
        let comps: Vec<Comp> = dwarf_comps(self, &t.path, &mut idx, body);
        let id = match super::dwarf::plan(&sites, &super::dwarf::Want::Store(&t.name, &comps)) {
            Ok(id) => id,
            Err(e) => {
                let mut err = SemError::new(span, e.message)
                    .label("in the probed function's debug information");
                if let Some(h) = e.help {
                    err = err.help(h);
                }
                self.err(err);
                return bad(span);
            }
        };
        while idx.len() < 2 {
            idx.push(mk(ExprKind::Long(0), Type::Long, span));
        }
        let plan = mk(ExprKind::Long(id), Type::Long, span);
        let (name, mut args) = match write {
            DwarfWrite::Set => ("__dwarf_set", vec![plan, v]),
            DwarfWrite::Update(u, postfix) => {
                let code = u.code() | if postfix { UPDATE_POSTFIX } else { 0 };
                let op = mk(ExprKind::Long(code), Type::Long, span);
                ("__dwarf_update", vec![plan, op, v])
            }
        };
        args.extend(idx);
        (mk(ExprKind::Builtin { name, args }, Type::Long, span), LONG)
    }

    fn lower_target(
        &mut self,
        t: &ast::TargetVar,
        span: Span,
        body: &mut Body,
        write: bool,
    ) -> Option<(ContextVar, Ty)> {
        let dollar = format!("${}", t.name);
        let def: Option<&'static ContextVarDef> = if body.families.is_empty() {
            None
        } else {
            let defs: Vec<_> = body
                .families
                .iter()
                .map(|f| f.context_var(&t.name))
                .collect();
            if defs.iter().all(|d| d.is_some()) {
                defs[0]
            } else {
                None
            }
        };
        let Some(def) = def else {
            self.err(self.unavailable(&dollar, t, span, body));
            return None;
        };
        if t.address {
            self.err(
                SemError::new(span, format!("'&{dollar}': not a variable in memory"))
                    .label("& takes a DWARF target variable ($var, $p->field)"),
            );
            return None;
        }
        if t.pretty > 0 {
            self.err(SemError::new(
                span,
                "pretty-printed target variables are not supported by utap",
            ));
            return None;
        }
        if let (ContextVar::Arg(i), Some(count)) = (def.var, body.mark_args)
            && usize::from(i) >= count
            && body.families.iter().all(|f| is_mark(f))
        {
            // SystemTap: an out-of-range $argN of a marker falls back to
            // DWARF, which a marker probe does not have.
            let have = match count {
                0 => "the marker has no arguments".to_string(),
                1 => "the marker has 1 argument ($arg1)".to_string(),
                n => format!("the marker has {n} arguments ($arg1..$arg{n})"),
            };
            self.err(
                SemError::new(span, "target-symbol requires debuginfo")
                    .label(format!("'{dollar}': {have}")),
            );
            return None;
        }
        if let Some(first) = t.path.first() {
            let what = match first {
                ast::TargetComp::Field(_) => "a structure",
                ast::TargetComp::Index(_) => "array",
            };
            self.err(
                SemError::new(
                    span,
                    format!("utrace variable '{dollar}' may not be used as {what}"),
                )
                .label(format!("'{dollar}' is a number")),
            );
            return None;
        }
        let readable = body
            .families
            .iter()
            .all(|f| f.context_var(&t.name).is_some_and(|v| v.readable));
        if !write && !readable {
            self.err(
                SemError::new(
                    span,
                    format!("utrace '{dollar}' variable is not available at a syscall entry"),
                )
                .label(format!(
                    "'{dollar}' can be set here (utap -g) to skip the call, not read"
                ))
                .help("read it in a .return probe"),
            );
            // Typed all the same: one error, not a cascade.
            return Some((def.var, Ty::Known(def.ty)));
        }
        if write {
            if !def.guru_writable {
                let shown = if t.name.starts_with("arg") {
                    "$argN".to_string()
                } else {
                    dollar.clone()
                };
                self.err(
                    SemError::new(span, format!("utrace '{shown}' variable is read-only"))
                        .label(format!("'{dollar}' can be read, not written")),
                );
                return None;
            }
            if !self.guru {
                self.err(
                    SemError::new(span, "write to target variable not permitted; need utap -g")
                        .label(format!(
                            "writing '{dollar}' changes what the traced program sees"
                        )),
                );
                return None;
            }
        }
        Some((def.var, Ty::Known(def.ty)))
    }

    /// Whether `$name` is a context variable of every family of the
    /// handler, read as a plain number (what `--skip-badvars` keeps).
    fn target_resolves(&self, t: &ast::TargetVar, body: &Body) -> bool {
        !body.families.is_empty()
            && body.func.is_none()
            && t.pretty == 0
            && t.path.is_empty()
            && body
                .families
                .iter()
                .all(|f| f.context_var(&t.name).is_some())
    }

    /// The error for a context variable this handler does not have.
    fn unavailable(&self, dollar: &str, t: &ast::TargetVar, span: Span, body: &Body) -> SemError {
        if body.func.is_some() {
            return SemError::new(
                span,
                format!("context variable '{dollar}' used in a function"),
            )
            .label("context variables exist only in probe handlers");
        }
        let owners: Vec<String> = FAMILIES
            .iter()
            .filter(|f| f.context_var(&t.name).is_some_and(|v| v.readable))
            .map(|f| format!("\"{}\"", f.pattern_text("(PATH_OR_PID)")))
            .collect();
        if let Some(n) = t.name.strip_prefix("arg")
            && !n.parse::<u8>().is_ok_and(|n| (1..=6).contains(&n))
            && body
                .families
                .iter()
                .all(|f| f.kind == FamilyKind::Process(super::catalogue::ProcessEventKind::Syscall))
        {
            return SemError::new(span, "invalid syscall argument number (1-6)")
                .label("the arguments are $arg1 .. $arg6");
        }
        if owners.is_empty() {
            if !t.path.is_empty() {
                return SemError::new(
                    span,
                    format!("target variable '{dollar}' is not supported by utap"),
                )
                .label("DWARF variables need kernel debug information")
                .help(
                    "utap's context variables are $syscall, $arg1..$arg6, $return, $signal, $code",
                );
            }
            let mut e = SemError::new(span, format!("unknown target variable '{dollar}'"));
            if body.by_name.contains_key(&t.name) {
                let name = &t.name;
                return e
                    .label(format!("'{name}' is a variable of this probe's tapset"))
                    .help(format!(
                        "write '{name}' without the '$' ('$' names DWARF target variables)"
                    ));
            }
            let here: Vec<String> = body
                .families
                .first()
                .map(|f| {
                    f.context
                        .iter()
                        .filter(|v| v.readable)
                        .map(|v| format!("${}", v.name))
                        .collect()
                })
                .unwrap_or_default();
            e = e.label("not a context variable of this probe");
            if !here.is_empty() {
                e = e.help(format!("available here: {}", here.join(" ")));
            }
            return e;
        }
        let verb = if owners.len() == 1 {
            "supports"
        } else {
            "support"
        };
        SemError::new(
            span,
            format!("only {} {verb} {dollar}", owners.join(" and ")),
        )
        .label("not available in this probe".to_string())
    }
}

/// Whether every point of the handler is a `.plt` probe (where `$$name`
/// exists) and `t` is a plain read.
fn plt_only(t: &ast::TargetVar, body: &Body) -> bool {
    use super::catalogue::{FunctionFamily, ProcessEventKind, SiteKind};
    t.path.is_empty()
        && !body.families.is_empty()
        && body.families.iter().all(|f| {
            matches!(
                f.kind,
                FamilyKind::Process(ProcessEventKind::Function(FunctionFamily {
                    site: SiteKind::Plt,
                    ..
                }))
            )
        })
}

/// A USDT marker family (`.mark`, `.provider().mark`).
pub(super) fn is_mark(f: &Family) -> bool {
    matches!(
        f.kind,
        FamilyKind::Process(super::catalogue::ProcessEventKind::Function(ff))
            if matches!(ff.site, super::catalogue::SiteKind::Mark { .. })
    )
}

/// `$$name`, `$$provider`, `$$parms`/`$$vars` of a marker: what
/// `__utap_mark(k)` returns.
fn mark_context(name: &str) -> Option<i64> {
    match name {
        "$name" => Some(0),
        "$provider" => Some(1),
        "$parms" | "$vars" => Some(2),
        _ => None,
    }
}

/// `@defined($var->a[2])` at function probes: whether the debug
/// information gives a plan at every site (computed indexes count as 0).
fn dwarf_defined(t: &ast::TargetVar, sites: &super::dwarf::DwarfSites) -> bool {
    use utap_runtime::dwarf::Comp;
    if t.name == "$return" || sites.sites.is_empty() {
        return t.name == "$return" && sites.returning;
    }
    let comps: Vec<Comp> = t
        .path
        .iter()
        .map(|c| match c {
            ast::TargetComp::Field(f) => Comp::Field(f.clone()),
            ast::TargetComp::Index(e) => match &e.kind {
                ast::ExprKind::Num(n) => Comp::Index(Some(*n)),
                _ => Comp::Index(None),
            },
        })
        .collect();
    let name = t.name.as_str();
    if name.starts_with("@var(") && !var_module_named(t, sites) {
        return false;
    }
    let want = match name {
        "$parms" | "$locals" | "$vars" => return true,
        _ if t.pretty > 0 => super::dwarf::Want::Pretty(name, &comps, t.pretty > 1),
        _ => super::dwarf::Want::Long(name, &comps),
    };
    super::dwarf::plan(sites, &want).is_ok()
}

/// The call of a DWARF builtin with plan `id` and the plan's values.
fn dwarf_call(id: i64, mut idx: Vec<Expr>, long: bool, span: Span) -> Lowered {
    while idx.len() < 2 {
        idx.push(mk(ExprKind::Long(0), Type::Long, span));
    }
    let mut args = vec![mk(ExprKind::Long(id), Type::Long, span)];
    args.extend(idx);
    match long {
        true => {
            let e = ExprKind::Builtin {
                name: "__dwarf_long",
                args,
            };
            (mk(e, Type::Long, span), LONG)
        }
        false => {
            let e = ExprKind::Builtin {
                name: "__dwarf_string",
                args,
            };
            (mk(e, Type::String, span), STRING)
        }
    }
}

/// Whether `@var(.., "MODULE")` names a probed module (or no module).
fn var_module_named(t: &ast::TargetVar, sites: &super::dwarf::DwarfSites) -> bool {
    match t.name.strip_suffix(')').and_then(|n| n.split_once(", ")) {
        Some((_, module)) => super::dwarf::var_module_ok(sites, module),
        None => true,
    }
}

/// The plan's components of a target path; computed indexes are lowered
/// into `idx` (in order).
fn dwarf_comps(
    lw: &mut Lowerer<'_>,
    path: &[ast::TargetComp],
    idx: &mut Vec<Expr>,
    body: &mut Body,
) -> Vec<utap_runtime::dwarf::Comp> {
    use utap_runtime::dwarf::Comp;
    let mut comps = Vec::new();
    for c in path {
        match c {
            ast::TargetComp::Field(f) => comps.push(Comp::Field(f.clone())),
            ast::TargetComp::Index(e) => match &e.kind {
                ast::ExprKind::Num(n) => comps.push(Comp::Index(Some(*n))),
                _ => {
                    let (x, ty) = lw.lower_expr(e, body);
                    lw.unify(ty, LONG, e.span);
                    idx.push(x);
                    comps.push(Comp::Index(None));
                }
            },
        }
    }
    comps
}

/// `$value` read, or written other than with `=` and `.=`.
fn write_only_value(span: Span) -> SemError {
    SemError::new(span, "'$value' of probe prometheus can only be written")
        .label("the text served")
        .help("build it with $value .= \"...\" (or start over with $value = \"...\")")
}

/// Whether `t` is `$value` in a handler of `probe prometheus` only.
fn prometheus_value(t: &ast::TargetVar, body: &Body) -> bool {
    t.name == "value"
        && t.path.is_empty()
        && t.pretty == 0
        && body.func.is_none()
        && !body.families.is_empty()
        && body
            .families
            .iter()
            .all(|f| f.kind == FamilyKind::Prometheus)
}

/// `$$parms` / `$$vars` in a syscall probe, as SystemTap expands it:
/// `sprintf("$arg1=%#x ... $arg6=%#x", $arg1, ..., $arg6)`.
fn all_args(span: Span) -> Lowered {
    let text: Vec<String> = (1..=6).map(|i| format!("$arg{i}=%#x")).collect();
    let format = utap_runtime::format::parse(&text.join(" ")).ok();
    let args = (0..6)
        .map(|i| mk(ExprKind::Context(ContextVar::Arg(i)), Type::Long, span))
        .collect();
    (
        mk(
            ExprKind::Print {
                kind: PrintKind::Sprintf,
                format,
                args,
            },
            Type::String,
            span,
        ),
        STRING,
    )
}

fn decl_ty(t: ast::TypeDecl) -> Ty {
    match t {
        ast::TypeDecl::Long => LONG,
        ast::TypeDecl::String => STRING,
    }
}

pub fn embedded_error(span: Span) -> SemError {
    SemError::new(span, "embedded C code is not supported by utap")
        .label("%{ ... %} blocks run kernel C code in SystemTap")
}

/// Whether an expression mentions `@defined` (such conditions are folded
/// so the untaken branch may use variables that do not exist here).
pub fn contains_defined(e: &ast::Expr) -> bool {
    match &e.kind {
        ast::ExprKind::Defined(_) => true,
        ast::ExprKind::Unary { expr, .. } => contains_defined(expr),
        ast::ExprKind::Binary { lhs, rhs, .. } => contains_defined(lhs) || contains_defined(rhs),
        ast::ExprKind::Ternary { cond, then, else_ } => {
            contains_defined(cond) || contains_defined(then) || contains_defined(else_)
        }
        _ => false,
    }
}

/// Which of a name's declarations code in `file` sees: its own file's
/// first, else one that is neither private nor the user script's (tapset
/// code does not see the user's globals and functions).
fn visible<D>(
    decls: &[D],
    file: FileId,
    user: FileId,
    where_: impl Fn(&D) -> (FileId, bool),
) -> Option<usize> {
    decls.iter().position(|d| where_(d).0 == file).or_else(|| {
        decls.iter().position(|d| {
            let (f, private) = where_(d);
            !private && f != user
        })
    })
}
