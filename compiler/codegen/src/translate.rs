//! Translation of one probe handler or script function into Cranelift IR.
//!
//! Every value is an `i64` (a long or a string handle). The first
//! parameter is the runtime's `HandlerContext`. Runtime errors follow
//! SystemTap's model: a failing runtime call sets `ctx.error`; native code
//! tests it after the call and jumps to the innermost `catch`, or leaves
//! the function (callers test it again after each call). The location a
//! runtime function would report is stored in `ctx.location` just before
//! the call; errors native code detects itself (division by zero,
//! MAXACTION, MAXNESTING) store it on their cold path.

use rustc_hash::FxHashMap as HashMap;
use std::mem::offset_of;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AtomicRmwOp, Block, FuncRef, Inst, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind,
    Value, types,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module};

use utap_compiler::ast::{AssignOp, BinOp, IncDecOp, SortBy, Span, StatOp, UnOp};
use utap_compiler::program::{
    self as p, ContextVar, Expr, ExprKind, ForeachSource, GlobalId, LValue, LocalVar, PrintKind,
    Stmt, StmtKind, Type,
};
use utap_runtime::dataplane::layout::BLOCK_COUNTERS;
use utap_runtime::script::abi::{
    PRINT_DELIM, PRINT_NEWLINE, PRINT_TO_STRING, RAISE_DIVISION_BY_ZERO, RAISE_INTERRUPTED,
    RAISE_MAXACTION, RAISE_MAXNESTING, SORT_NONE, SORT_VALUE,
};
use utap_runtime::script::context::{HandlerContext, ProbeValues, written};
use utap_runtime::script::image::ValueType;
use utap_runtime::script::interrupt;

use crate::CodegenError;
use crate::runtime_fns::RuntimeFns;
use crate::tables::Tables;

const I64: types::Type = types::I64;

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Offset of a field of the probe values inside the context.
fn probe_offset(cv: ContextVar) -> i32 {
    let base = offset_of!(HandlerContext, probe);
    let field = match cv {
        ContextVar::Syscall => offset_of!(ProbeValues, syscall),
        ContextVar::Arg(i) if i < 6 => offset_of!(ProbeValues, args) + 8 * i as usize,
        ContextVar::Arg(i) => offset_of!(ProbeValues, more_args) + 8 * (i as usize - 6).min(5),
        ContextVar::Return => offset_of!(ProbeValues, ret),
        ContextVar::Signal => offset_of!(ProbeValues, signal),
        ContextVar::Code => offset_of!(ProbeValues, code),
    };
    (base + field) as i32
}

fn stat_op_index(op: StatOp) -> i64 {
    match op {
        StatOp::Count => 0,
        StatOp::Sum => 1,
        StatOp::Min => 2,
        StatOp::Max => 3,
        StatOp::Avg => 4,
        StatOp::Variance => 5,
    }
}

struct LoopTarget {
    brk: Block,
    cont: Block,
    /// The foreach iterator to release on `break`.
    iter: Option<Value>,
}

/// What is being compiled.
pub enum Kind {
    Probe,
    Function,
}

pub struct Translator<'a, 'b, 's> {
    pub b: FunctionBuilder<'b>,
    pub module: &'a mut JITModule,
    pub rt: &'a mut RuntimeFns,
    pub funcs: &'a [FuncId],
    pub t: &'a mut Tables<'s>,
    ctx: Value,
    longs: Value,
    locals: Vec<Variable>,
    loops: Vec<LoopTarget>,
    error_targets: Vec<Block>,
    /// Normal exit (functions: takes the return value).
    exit: Block,
    /// Where an error leaves the function.
    error_exit: Block,
    kind: Kind,
    frefs: HashMap<FuncId, FuncRef>,
    /// One cold block per (error kind, error target) that records the
    /// location it is given and raises: every check branches there
    /// (building a raise per check was half of translating a handler).
    raise_blocks: Vec<(i64, Block, Block)>,
    /// Set while the next statement is one of the body's top level.
    top_level: bool,
    /// The constants made for each top-level preset statement
    /// (`crate::presets`): its location's, its literal's.
    presets: Vec<(Inst, Inst)>,
    /// In-process code (`crate::inproc`): threads of the program run a
    /// handler at once, so `+=`, `-=`, `++` and `--` on a long scalar
    /// global are one atomic add; and loops do not look at the tracer's
    /// interrupt flag, which is not in the program's memory (MAXACTION
    /// bounds them there).
    pub in_process: bool,
}

impl<'a, 'b, 's> Translator<'a, 'b, 's> {
    /// Sets up the entry block: parameters, locals, the exit blocks.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut b: FunctionBuilder<'b>,
        module: &'a mut JITModule,
        rt: &'a mut RuntimeFns,
        funcs: &'a [FuncId],
        t: &'a mut Tables<'s>,
        kind: Kind,
        locals: &[LocalVar],
        params: usize,
    ) -> Self {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ctx = b.block_params(entry)[0];
        let args: Vec<Value> = b.block_params(entry)[1..].to_vec();
        let longs = b.ins().load(
            I64,
            flags(),
            ctx,
            offset_of!(HandlerContext, long_globals) as i32,
        );
        // One zero for every local that is not a parameter, made whether
        // there are locals or not: handlers of expanded aliases differ in
        // which (unused) locals their elided alias bodies declared, and
        // should still translate to the same IR (see `sharing`).
        let zero = b.ins().iconst(I64, 0);
        let mut vars = Vec::with_capacity(locals.len());
        for i in 0..locals.len() {
            let var = b.declare_var(I64);
            let init = match args.get(i) {
                Some(&a) if i < params => a,
                _ => zero,
            };
            b.def_var(var, init);
            vars.push(var);
        }
        let exit = b.create_block();
        let error_exit = b.create_block();
        if matches!(kind, Kind::Function) {
            b.append_block_param(exit, I64);
        }
        Translator {
            b,
            module,
            rt,
            funcs,
            t,
            ctx,
            longs,
            locals: vars,
            loops: Vec::new(),
            error_targets: Vec::new(),
            exit,
            error_exit,
            kind,
            frefs: HashMap::default(),
            raise_blocks: Vec::new(),
            top_level: false,
            presets: Vec::new(),
            in_process: false,
        }
    }

    /// Emits the body and the exits, and finishes the function.
    /// `conditions` are the `if (...)` guards of the probe's points (the
    /// one of the point that fired, `ctx.point_index`, applies).
    /// Translates the body and closes the function. Returns the constants
    /// each top-level preset statement made (see `crate::presets`).
    pub fn finish_body(
        mut self,
        body: &p::Block,
        conditions: &[Option<&Expr>],
    ) -> Result<Vec<(Inst, Inst)>, CodegenError> {
        crate::size::check_body(body)?;
        self.point_conditions(conditions)?;
        for s in &body.stmts {
            self.top_level = true;
            self.stmt(s)?;
        }
        self.jump_exit_default();
        // Exits.
        self.b.switch_to_block(self.error_exit);
        self.b.set_cold_block(self.error_exit);
        self.jump_exit_default();
        self.b.switch_to_block(self.exit);
        match self.kind {
            Kind::Probe => {
                self.b.ins().return_(&[]);
            }
            Kind::Function => {
                let v = self.b.block_params(self.exit)[0];
                self.b.ins().return_(&[v]);
            }
        }
        self.fill_raise_blocks();
        self.b.seal_all_blocks();
        let config = self.module.target_config();
        self.b.finalize(config);
        Ok(self.presets)
    }

    /// Leaves the handler when the condition of the point that fired is
    /// false.
    fn point_conditions(&mut self, conditions: &[Option<&Expr>]) -> Result<(), CodegenError> {
        if conditions.iter().all(Option::is_none) {
            return Ok(());
        }
        let go = self.b.create_block();
        let stop = self.b.create_block();
        let single = conditions.len() == 1;
        let point = if single {
            None
        } else {
            Some(self.load_ctx(offset_of!(HandlerContext, point_index)))
        };
        for (i, cond) in conditions.iter().enumerate() {
            let Some(cond) = cond else { continue };
            let next = self.b.create_block();
            if let Some(point) = point {
                let this = self.b.create_block();
                let is = self.b.ins().icmp_imm_s(IntCC::Equal, point, i as i64);
                self.b.ins().brif(is, this, &[], next, &[]);
                self.b.switch_to_block(this);
            }
            let c = self.expr(cond)?;
            self.b.ins().brif(c, go, &[], stop, &[]);
            self.b.switch_to_block(next);
        }
        // A point without a condition.
        self.b.ins().jump(go, &[]);
        self.b.switch_to_block(stop);
        self.jump_exit_default();
        self.b.switch_to_block(go);
        Ok(())
    }

    fn jump_exit_default(&mut self) {
        match self.kind {
            Kind::Probe => {
                self.b.ins().jump(self.exit, &[]);
            }
            Kind::Function => {
                let zero = self.b.ins().iconst(I64, 0);
                self.b.ins().jump(self.exit, &[zero.into()]);
            }
        }
    }

    /// Continues emitting in a fresh block after a jump (the code that
    /// follows is unreachable but must still be well formed).
    fn dead_block(&mut self) {
        let b = self.b.create_block();
        self.b.switch_to_block(b);
    }

    // ---- runtime calls --------------------------------------------------

    fn fref(&mut self, id: FuncId) -> FuncRef {
        if let Some(&f) = self.frefs.get(&id) {
            return f;
        }
        let f = self.module.declare_func_in_func(id, self.b.func);
        self.frefs.insert(id, f);
        f
    }

    /// Calls runtime helper `name` with `ctx` and `args`.
    fn call(&mut self, name: &str, args: &[Value]) -> Value {
        let id = self.rt.get(self.module, name);
        self.call_id(id, args)
    }

    fn call_id(&mut self, id: FuncId, args: &[Value]) -> Value {
        let f = self.fref(id);
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(self.ctx);
        all.extend_from_slice(args);
        let inst = self.b.ins().call(f, &all);
        match self.b.inst_results(inst).first() {
            Some(&v) => v,
            None => self.b.ins().iconst(I64, 0),
        }
    }

    fn iconst(&mut self, v: i64) -> Value {
        self.b.ins().iconst(I64, v)
    }

    fn load_ctx(&mut self, offset: usize) -> Value {
        self.b.ins().load(I64, flags(), self.ctx, offset as i32)
    }

    fn store_ctx(&mut self, v: Value, offset: usize) {
        self.b.ins().store(flags(), v, self.ctx, offset as i32);
    }

    fn error_target(&self) -> Block {
        *self.error_targets.last().unwrap_or(&self.error_exit)
    }

    /// After a call that may fail: leave if `ctx.error` is set.
    fn check_error(&mut self) {
        let e = self.load_ctx(offset_of!(HandlerContext, error));
        let cont = self.b.create_block();
        let target = self.error_target();
        self.b.ins().brif(e, target, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    fn set_location(&mut self, loc: u32) {
        let v = self.iconst(loc as i64);
        self.store_ctx(v, offset_of!(HandlerContext, location));
    }

    /// Raises error `kind` at `loc` when `cond` is nonzero; the constant
    /// that gives the location.
    fn raise_if(&mut self, cond: Value, kind: i64, loc: u32) -> Value {
        let err = self.raise_block(kind);
        let cont = self.b.create_block();
        let loc = self.iconst(loc as i64);
        self.b.ins().brif(cond, err, &[loc.into()], cont, &[]);
        self.b.switch_to_block(cont);
        loc
    }

    /// The block raising `kind` towards the current error target; it takes
    /// the location (filled in by [`Self::fill_raise_blocks`]).
    fn raise_block(&mut self, kind: i64) -> Block {
        let target = self.error_target();
        if let Some(&(_, _, b)) = self
            .raise_blocks
            .iter()
            .find(|(k, t, _)| *k == kind && *t == target)
        {
            return b;
        }
        let b = self.b.create_block();
        self.b.append_block_param(b, I64);
        self.raise_blocks.push((kind, target, b));
        b
    }

    /// The raise blocks' code: record the location, raise, leave.
    fn fill_raise_blocks(&mut self) {
        for (kind, target, b) in std::mem::take(&mut self.raise_blocks) {
            self.b.switch_to_block(b);
            self.b.set_cold_block(b);
            let loc = self.b.block_params(b)[0];
            self.store_ctx(loc, offset_of!(HandlerContext, location));
            let k = self.iconst(kind);
            self.call("utap_raise", &[k]);
            self.b.ins().jump(target, &[]);
        }
    }

    fn loc(&mut self, span: Span) -> u32 {
        self.t.locations.span(self.t.sources, span)
    }

    /// One action of the MAXACTION budget, at statement `span`; the
    /// constant that gives the location.
    fn count_action(&mut self, span: Span) -> Value {
        let off = offset_of!(HandlerContext, actions_left);
        let v = self.load_ctx(off);
        let v = self.b.ins().iadd_imm_s(v, -1);
        self.store_ctx(v, off);
        let over = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, v, 0);
        let loc = self.loc(span);
        self.raise_if(over, RAISE_MAXACTION, loc)
    }

    /// At a loop's back-edge: one load and one branch on the interrupt
    /// flag, so that a signal or `-T` stops a long loop
    /// (`utap_runtime::script::interrupt`).
    fn check_interrupt(&mut self, span: Span) {
        if self.in_process {
            return;
        }
        let addr = self.iconst(interrupt::flag_address() as i64);
        let flag = self.b.ins().uload8(I64, flags(), addr, 0);
        let loc = self.loc(span);
        self.raise_if(flag, RAISE_INTERRUPTED, loc);
    }

    // ---- statements -------------------------------------------------------

    fn block(&mut self, b: &p::Block) -> Result<(), CodegenError> {
        for s in &b.stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), CodegenError> {
        let top_level = std::mem::take(&mut self.top_level);
        let loc = match s.kind {
            StmtKind::Block(_) => None,
            _ => Some(self.count_action(s.span)),
        };
        match &s.kind {
            StmtKind::Expr(e) => {
                let v = self.expr(e)?;
                if let (true, Some(loc), Some(_)) = (top_level, loc, crate::presets::preset(s)) {
                    let dfg = &self.b.func.dfg;
                    if let (Some(l), Some(c)) = (dfg.value_def(loc).inst(), dfg.value_def(v).inst())
                    {
                        self.presets.push((l, c));
                    }
                }
            }
            StmtKind::Block(b) => self.block(b)?,
            StmtKind::If { .. }
                if self.in_process
                    && let Some(m) = utap_compiler::route::max_update(s) =>
            {
                self.running_max(m)?;
            }
            StmtKind::If { cond, then, else_ } => {
                let c = self.expr(cond)?;
                let then_b = self.b.create_block();
                let else_b = self.b.create_block();
                let join = self.b.create_block();
                self.b.ins().brif(c, then_b, &[], else_b, &[]);
                self.b.switch_to_block(then_b);
                self.stmt(then)?;
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(else_b);
                if let Some(e) = else_ {
                    self.stmt(e)?;
                }
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
            }
            StmtKind::While { cond, body } => {
                self.loop_(s.span, Some(cond), None, body)?;
            }
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => {
                if let Some(i) = init {
                    self.expr(i)?;
                }
                self.loop_(s.span, cond.as_ref(), step.as_ref(), body)?;
            }
            StmtKind::Foreach(fe) => self.foreach(s.span, fe)?,
            StmtKind::Next => {
                self.jump_exit_default();
                self.dead_block();
            }
            StmtKind::Break | StmtKind::Continue => {
                let Some(l) = self.loops.last() else {
                    return Err(CodegenError::new(
                        s.span,
                        "break or continue outside a loop",
                    ));
                };
                let (brk, cont, iter) = (l.brk, l.cont, l.iter);
                if matches!(s.kind, StmtKind::Break) {
                    if let Some(it) = iter {
                        self.call("utap_foreach_end", &[it]);
                    }
                    self.b.ins().jump(brk, &[]);
                } else {
                    self.b.ins().jump(cont, &[]);
                }
                self.dead_block();
            }
            StmtKind::Return(e) => {
                let v = match e {
                    Some(e) => self.expr(e)?,
                    None => self.iconst(0),
                };
                match self.kind {
                    Kind::Function => {
                        self.b.ins().jump(self.exit, &[v.into()]);
                    }
                    Kind::Probe => {
                        self.b.ins().jump(self.exit, &[]);
                    }
                }
                self.dead_block();
            }
            StmtKind::Delete(lv) => self.delete(lv)?,
            StmtKind::Try {
                body,
                catch_var,
                catch,
            } => {
                let catch_b = self.b.create_block();
                let join = self.b.create_block();
                self.error_targets.push(catch_b);
                self.block(body)?;
                self.error_targets.pop();
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(catch_b);
                let msg = self.call("utap_catch", &[]);
                if let Some(var) = catch_var {
                    let v = self.locals[var.0 as usize];
                    self.b.def_var(v, msg);
                }
                self.block(catch)?;
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
            }
        }
        Ok(())
    }

    /// `while` and `for`: header tests `cond`, body, then `step`.
    fn loop_(
        &mut self,
        span: Span,
        cond: Option<&Expr>,
        step: Option<&Expr>,
        body: &Stmt,
    ) -> Result<(), CodegenError> {
        let head = self.b.create_block();
        let body_b = self.b.create_block();
        let step_b = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        match cond {
            Some(c) => {
                let v = self.expr(c)?;
                self.b.ins().brif(v, body_b, &[], exit, &[]);
            }
            None => {
                self.b.ins().jump(body_b, &[]);
            }
        }
        self.b.switch_to_block(body_b);
        self.loops.push(LoopTarget {
            brk: exit,
            cont: step_b,
            iter: None,
        });
        self.stmt(body)?;
        self.loops.pop();
        self.b.ins().jump(step_b, &[]);
        self.b.switch_to_block(step_b);
        if let Some(s) = step {
            self.expr(s)?;
        }
        self.count_action(span);
        self.check_interrupt(span);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    fn foreach(&mut self, span: Span, fe: &p::Foreach) -> Result<(), CodegenError> {
        let (has_limit, limit) = match &fe.limit {
            Some(l) => (self.iconst(1), self.expr(l)?),
            None => (self.iconst(0), self.iconst(0)),
        };
        let iter = match &fe.source {
            ForeachSource::Array(g) => {
                let mask = match &fe.slice {
                    Some(keys) => self.slice_keys(keys.iter().map(Option::as_ref))?,
                    None => 0,
                };
                let (sort, desc) = match fe.sort {
                    None => (SORT_NONE, 0),
                    Some(s) => {
                        let by = match s.by {
                            SortBy::Key(c) => c as i64,
                            SortBy::Value => SORT_VALUE + s.agg.map_or(0, stat_op_index),
                        };
                        (by, s.descending as i64)
                    }
                };
                let args = [
                    self.iconst(g.0 as i64),
                    self.iconst(sort),
                    self.iconst(desc),
                    has_limit,
                    limit,
                    self.iconst(mask),
                ];
                self.call("utap_foreach_array", &args)
            }
            ForeachSource::Hist(h) => {
                let ExprKind::Hist { target, .. } = &h.kind else {
                    return Err(CodegenError::new(
                        h.span,
                        "foreach over something that is not a histogram",
                    ));
                };
                let (g, elem) = self.stat_target(target)?;
                self.call("utap_foreach_hist", &[g, elem, has_limit, limit])
            }
        };
        let head = self.b.create_block();
        let body_b = self.b.create_block();
        let done = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let more = self.call("utap_foreach_next", &[iter]);
        self.b.ins().brif(more, body_b, &[], done, &[]);
        self.b.switch_to_block(body_b);
        for (i, k) in fe.keys.iter().enumerate() {
            let v = self.load_ctx(offset_of!(HandlerContext, keys) + 8 * i);
            let var = self.locals[k.0 as usize];
            self.b.def_var(var, v);
        }
        if let Some(v) = fe.value {
            let val = self.load_ctx(offset_of!(HandlerContext, foreach_value));
            let var = self.locals[v.0 as usize];
            self.b.def_var(var, val);
        }
        self.loops.push(LoopTarget {
            brk: exit,
            cont: head,
            iter: Some(iter),
        });
        self.stmt(&fe.body)?;
        self.loops.pop();
        self.count_action(span);
        self.check_interrupt(span);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(done);
        self.call("utap_foreach_end", &[iter]);
        self.b.ins().jump(exit, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    fn delete(&mut self, lv: &LValue) -> Result<(), CodegenError> {
        match lv {
            LValue::Local(l) => {
                let z = self.iconst(0);
                let var = self.locals[l.0 as usize];
                self.b.def_var(var, z);
            }
            LValue::Global(g) => {
                let gid = self.iconst(g.0 as i64);
                self.call("utap_global_clear", &[gid]);
            }
            LValue::Elem { array, keys } if keys.iter().any(is_wildcard) => {
                let mask = self.slice_keys(keys.iter().map(|k| (!is_wildcard(k)).then_some(k)))?;
                let gid = self.iconst(array.0 as i64);
                let mask = self.iconst(mask);
                self.call("utap_arr_delete_slice", &[gid, mask]);
            }
            LValue::Elem { array, keys } => {
                let ks = self.eval_keys(keys)?;
                self.store_keys(&ks);
                let gid = self.iconst(array.0 as i64);
                self.call("utap_arr_delete", &[gid]);
            }
            LValue::Context(_) => {}
        }
        Ok(())
    }

    // ---- lvalues ---------------------------------------------------------------

    /// The keys of an array slice (`a[*, k]`; `None` is `*`), evaluated
    /// left to right into `ctx.keys` (0 in the `*` columns); returns the
    /// mask of the given columns, as the runtime's slice calls take it.
    fn slice_keys<'e>(
        &mut self,
        keys: impl Iterator<Item = Option<&'e Expr>>,
    ) -> Result<i64, CodegenError> {
        let mut mask = 0i64;
        let mut ks = Vec::new();
        for (i, k) in keys.enumerate() {
            match k {
                Some(e) => {
                    mask |= 1 << i;
                    ks.push(self.expr(e)?);
                }
                None => ks.push(self.iconst(0)),
            }
        }
        self.store_keys(&ks);
        Ok(mask)
    }

    fn eval_keys(&mut self, keys: &[Expr]) -> Result<Vec<Value>, CodegenError> {
        keys.iter().map(|k| self.expr(k)).collect()
    }

    /// Stores evaluated keys into `ctx.keys` (right before the runtime
    /// call: evaluating a key may itself use the key slots).
    fn store_keys(&mut self, ks: &[Value]) {
        for (i, &v) in ks.iter().enumerate() {
            self.store_ctx(v, offset_of!(HandlerContext, keys) + 8 * i);
        }
    }

    fn global_value(&self, g: u32) -> ValueType {
        self.t.globals[g as usize].value
    }

    fn long_slot(&self, g: u32) -> Option<u32> {
        self.t.globals[g as usize].long_slot
    }

    /// The long slot of a scalar global updated atomically (in-process
    /// code only).
    fn atomic_slot(&self, lv: &LValue) -> Option<u32> {
        match lv {
            LValue::Global(g) if self.in_process => self.long_slot(g.0),
            _ => None,
        }
    }

    /// Adds `delta` to long slot `slot` atomically; the new value. A
    /// slot counted per thread (only added to, by statements:
    /// `inproc::counters`) takes it in the thread's own copy instead, with
    /// no atomic and no line another thread writes; nothing reads the
    /// value then.
    fn atomic_add(&mut self, slot: u32, delta: Value) -> Value {
        if let Some(&k) = self.t.counters.get(&slot) {
            let off = (BLOCK_COUNTERS + 8 * k as u64) as i32;
            let old = self.b.ins().load(I64, flags(), self.ctx, off);
            let new = self.b.ins().iadd(old, delta);
            self.b.ins().store(flags(), new, self.ctx, off);
            return new;
        }
        let addr = self.b.ins().iadd_imm_s(self.longs, 8 * slot as i64);
        let old = self
            .b
            .ins()
            .atomic_rmw(I64, flags(), AtomicRmwOp::Add, addr, delta);
        self.b.ins().iadd(old, delta)
    }

    /// Loads an lvalue whose keys (if any) are already evaluated.
    fn load(&mut self, lv: &LValue, ks: &[Value]) -> Value {
        match lv {
            LValue::Local(l) => self.b.use_var(self.locals[l.0 as usize]),
            LValue::Global(g) => match self.long_slot(g.0) {
                Some(slot) => self.b.ins().load(I64, flags(), self.longs, 8 * slot as i32),
                None => {
                    let gid = self.iconst(g.0 as i64);
                    self.call("utap_gstr_get", &[gid])
                }
            },
            LValue::Elem { array, .. } => {
                self.store_keys(ks);
                let gid = self.iconst(array.0 as i64);
                self.call("utap_arr_get", &[gid])
            }
            LValue::Context(cv) => self.load_ctx_i32(probe_offset(*cv)),
        }
    }

    /// Records in `probe.written` that guru code assigned `cv` (a syscall
    /// entry whose `$return` was set is skipped, whatever the value).
    fn mark_written(&mut self, cv: ContextVar) {
        let bit = match cv {
            ContextVar::Return => written::RETURN,
            ContextVar::Arg(i) => written::ARG << (i as i64).min(5),
            _ => return,
        };
        let off = (offset_of!(HandlerContext, probe) + offset_of!(ProbeValues, written)) as i32;
        let old = self.load_ctx_i32(off);
        let new = self.b.ins().bor_imm_s(old, bit);
        self.b.ins().store(flags(), new, self.ctx, off);
    }

    fn load_ctx_i32(&mut self, off: i32) -> Value {
        self.b.ins().load(I64, flags(), self.ctx, off)
    }

    /// Stores `v` into an lvalue whose keys are already evaluated.
    fn store(&mut self, lv: &LValue, ks: &[Value], v: Value, span: Span) {
        match lv {
            LValue::Local(l) => {
                let var = self.locals[l.0 as usize];
                self.b.def_var(var, v);
            }
            LValue::Global(g) => match self.long_slot(g.0) {
                Some(slot) => {
                    self.b.ins().store(flags(), v, self.longs, 8 * slot as i32);
                }
                None => {
                    let gid = self.iconst(g.0 as i64);
                    self.call("utap_gstr_set", &[gid, v]);
                }
            },
            LValue::Elem { array, .. } => {
                let loc = self.loc(span);
                self.set_location(loc);
                self.store_keys(ks);
                let gid = self.iconst(array.0 as i64);
                self.call("utap_arr_set", &[gid, v]);
                self.check_error();
            }
            LValue::Context(cv) => {
                self.b.ins().store(flags(), v, self.ctx, probe_offset(*cv));
                self.mark_written(*cv);
            }
        }
    }

    fn lvalue_keys(&mut self, lv: &LValue) -> Result<Vec<Value>, CodegenError> {
        match lv {
            LValue::Elem { keys, .. } => self.eval_keys(keys),
            _ => Ok(Vec::new()),
        }
    }

    /// `(global id, elem flag)` of a statistics lvalue, with the element's
    /// keys stored in `ctx.keys`.
    fn stat_target(&mut self, lv: &LValue) -> Result<(Value, Value), CodegenError> {
        match lv {
            LValue::Global(g) => Ok((self.iconst(g.0 as i64), self.iconst(0))),
            LValue::Elem { array, keys } => {
                let ks = self.eval_keys(keys)?;
                self.store_keys(&ks);
                Ok((self.iconst(array.0 as i64), self.iconst(1)))
            }
            _ => Err(CodegenError::new(
                Span::default(),
                "statistics operation on a non-global",
            )),
        }
    }

    /// The array of an element of a long array (`a[k]` with long values).
    fn long_array(&self, lv: &LValue) -> Option<GlobalId> {
        match lv {
            LValue::Elem { array, .. } if self.global_value(array.0) == ValueType::Long => {
                Some(*array)
            }
            _ => None,
        }
    }

    /// `if (x > g) g = x` in process: the test as written, then an atomic
    /// maximum instead of the store (see `route::max_update`), so a
    /// thread that raised `g` in between is never lowered again.
    fn running_max(&mut self, m: utap_compiler::route::MaxUpdate) -> Result<(), CodegenError> {
        let c = self.expr(m.cond)?;
        let (then_b, join) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(c, then_b, &[], join, &[]);
        self.b.switch_to_block(then_b);
        let ks = self.lvalue_keys(m.target)?;
        let v = self.expr(m.value)?;
        match m.target {
            LValue::Global(g) => {
                let slot = self.long_slot(g.0).expect("a long scalar");
                let addr = self.b.ins().iadd_imm_s(self.longs, 8 * slot as i64);
                self.b
                    .ins()
                    .atomic_rmw(I64, flags(), AtomicRmwOp::Smax, addr, v);
            }
            LValue::Elem { array, .. } => {
                let loc = self.loc(m.assign.span);
                self.set_location(loc);
                self.store_keys(&ks);
                let gid = self.iconst(array.0 as i64);
                let id = self.rt.declare(self.module, "utap_arr_max", 2, false);
                self.call_id(id, &[gid, v]);
                self.check_error();
            }
            _ => {}
        }
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(join);
        Ok(())
    }

    /// `array[ks] += delta` in one runtime call instead of a load and a
    /// store (the common `counts[k]++`); returns the new value.
    fn array_add(&mut self, array: GlobalId, ks: &[Value], delta: Value, span: Span) -> Value {
        let loc = self.loc(span);
        self.set_location(loc);
        self.store_keys(ks);
        let gid = self.iconst(array.0 as i64);
        let new = self.call("utap_arr_add", &[gid, delta]);
        self.check_error();
        new
    }

    // ---- expressions ---------------------------------------------------------------

    pub fn expr(&mut self, e: &Expr) -> Result<Value, CodegenError> {
        Ok(match &e.kind {
            ExprKind::Long(n) => self.iconst(*n),
            ExprKind::Wildcard => {
                return Err(CodegenError::new(
                    e.span,
                    "wildcard not allowed in array index",
                ));
            }
            ExprKind::Str(s) => {
                let h = self.t.literal(s);
                self.iconst(h)
            }
            ExprKind::Load(lv) => {
                let ks = self.lvalue_keys(lv)?;
                self.load(lv, &ks)
            }
            ExprKind::Context(cv) => self.load_ctx_i32(probe_offset(*cv)),
            ExprKind::Unary { op, expr } => {
                let v = self.expr(expr)?;
                match op {
                    UnOp::Neg => self.b.ins().ineg(v),
                    UnOp::Plus => v,
                    UnOp::Not => {
                        let c = self.b.ins().icmp_imm_s(IntCC::Equal, v, 0);
                        self.b.ins().uextend(I64, c)
                    }
                    UnOp::BitNot => self.b.ins().bnot(v),
                }
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(e, *op, lhs, rhs)?,
            ExprKind::Ternary { cond, then, else_ } => {
                let c = self.expr(cond)?;
                let tb = self.b.create_block();
                let eb = self.b.create_block();
                let join = self.b.create_block();
                self.b.append_block_param(join, I64);
                self.b.ins().brif(c, tb, &[], eb, &[]);
                self.b.switch_to_block(tb);
                let tv = self.expr(then)?;
                self.b.ins().jump(join, &[tv.into()]);
                self.b.switch_to_block(eb);
                let ev = self.expr(else_)?;
                self.b.ins().jump(join, &[ev.into()]);
                self.b.switch_to_block(join);
                self.b.block_params(join)[0]
            }
            ExprKind::Assign { op, target, value } => self.assign(e, *op, target, value)?,
            ExprKind::IncDec { op, prefix, target } => {
                let delta = if *op == IncDecOp::Inc { 1 } else { -1 };
                let ks = self.lvalue_keys(target)?;
                if let Some(array) = self.long_array(target) {
                    let d = self.iconst(delta);
                    let new = self.array_add(array, &ks, d, e.span);
                    if *prefix {
                        new
                    } else {
                        self.b.ins().iadd_imm_s(new, -delta)
                    }
                } else if let Some(slot) = self.atomic_slot(target) {
                    let d = self.iconst(delta);
                    let new = self.atomic_add(slot, d);
                    if *prefix {
                        new
                    } else {
                        self.b.ins().iadd_imm_s(new, -delta)
                    }
                } else {
                    let old = self.load(target, &ks);
                    let new = self.b.ins().iadd_imm_s(old, delta);
                    self.store(target, &ks, new, e.span);
                    if *prefix { new } else { old }
                }
            }
            ExprKind::StatAdd { target, value } => {
                let v = self.expr(value)?;
                let loc = self.loc(e.span);
                let (g, elem) = self.stat_target(target)?;
                self.set_location(loc);
                self.call("utap_stat_add", &[g, elem, v]);
                self.check_error();
                v
            }
            ExprKind::StatGet { op, target } => {
                let loc = self.loc(e.span);
                let (g, elem) = self.stat_target(target)?;
                self.set_location(loc);
                let op = self.iconst(stat_op_index(*op));
                let v = self.call("utap_stat_get", &[g, elem, op]);
                self.check_error();
                v
            }
            ExprKind::Hist { .. } => {
                return Err(CodegenError::new(
                    e.span,
                    "a histogram can only be printed, indexed or iterated",
                ));
            }
            ExprKind::HistBucket { hist, index } => {
                let ExprKind::Hist { target, .. } = &hist.kind else {
                    return Err(CodegenError::new(
                        hist.span,
                        "index of something that is not a histogram",
                    ));
                };
                let i = self.expr(index)?;
                let loc = self.loc(e.span);
                let (g, elem) = self.stat_target(target)?;
                self.set_location(loc);
                let v = self.call("utap_hist_bucket", &[g, elem, i]);
                self.check_error();
                v
            }
            ExprKind::In { array, keys } if keys.iter().any(is_wildcard) => {
                let mask = self.slice_keys(keys.iter().map(|k| (!is_wildcard(k)).then_some(k)))?;
                let gid = self.iconst(array.0 as i64);
                let mask = self.iconst(mask);
                self.call("utap_arr_exists_slice", &[gid, mask])
            }
            ExprKind::In { array, keys } => {
                let ks = self.eval_keys(keys)?;
                self.store_keys(&ks);
                let gid = self.iconst(array.0 as i64);
                self.call("utap_arr_exists", &[gid])
            }
            ExprKind::Call { func, args } => self.call_function(e, *func, args)?,
            ExprKind::Builtin { name, args } => self.builtin(e, name, args)?,
            ExprKind::Print { kind, format, args } => {
                self.print(e, *kind, format.as_deref(), args)?
            }
        })
    }

    fn binary(
        &mut self,
        e: &Expr,
        op: BinOp,
        lhs: &Expr,
        rhs: &Expr,
    ) -> Result<Value, CodegenError> {
        match op {
            BinOp::And | BinOp::Or => {
                let l = self.expr(lhs)?;
                let rhs_b = self.b.create_block();
                let join = self.b.create_block();
                self.b.append_block_param(join, I64);
                let short = self.iconst(if op == BinOp::And { 0 } else { 1 });
                if op == BinOp::And {
                    self.b.ins().brif(l, rhs_b, &[], join, &[short.into()]);
                } else {
                    self.b.ins().brif(l, join, &[short.into()], rhs_b, &[]);
                }
                self.b.switch_to_block(rhs_b);
                let r = self.expr(rhs)?;
                let c = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
                let r = self.b.ins().uextend(I64, c);
                self.b.ins().jump(join, &[r.into()]);
                self.b.switch_to_block(join);
                return Ok(self.b.block_params(join)[0]);
            }
            BinOp::Match | BinOp::NotMatch => {
                let ExprKind::Str(pattern) = &rhs.kind else {
                    return Err(CodegenError::new(
                        rhs.span,
                        "the regular expression of =~ must be a string literal",
                    ));
                };
                // Patterns are literals: a bad one is a compile-time error,
                // as in SystemTap's translator.
                if let Err(e) = utap_runtime::values::strings::Regex::new(pattern) {
                    return Err(CodegenError::new(rhs.span, e.to_string()));
                }
                let s = self.expr(lhs)?;
                let id = self.t.regex(pattern);
                let id = self.iconst(id);
                let loc = self.loc(e.span);
                self.set_location(loc);
                let m = self.call("utap_str_match", &[s, id]);
                self.check_error();
                return Ok(if op == BinOp::Match {
                    m
                } else {
                    self.b.ins().bxor_imm_s(m, 1)
                });
            }
            _ => {}
        }
        let l = self.expr(lhs)?;
        let r = self.expr(rhs)?;
        let strings = lhs.ty == Type::String;
        let op_loc = self
            .t
            .locations
            .after(self.t.sources, lhs.span.file, lhs.span.end as usize);
        Ok(self.apply(op, l, r, strings, op_loc))
    }

    /// `l op r` for everything but the short-circuit and regex operators.
    fn apply(&mut self, op: BinOp, l: Value, r: Value, strings: bool, loc: u32) -> Value {
        match op {
            BinOp::Add => self.b.ins().iadd(l, r),
            BinOp::Sub => self.b.ins().isub(l, r),
            BinOp::Mul => self.b.ins().imul(l, r),
            BinOp::Div | BinOp::Mod => self.divide(op == BinOp::Div, l, r, loc),
            BinOp::Shl | BinOp::Shr | BinOp::UShr => {
                // Counts clamp to 0..=64; 64 shifts by nothing (masked).
                let zero = self.iconst(0);
                let sixty_four = self.iconst(64);
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
                let n = self.b.ins().select(neg, zero, r);
                let big = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 64);
                let n = self.b.ins().select(big, sixty_four, n);
                match op {
                    BinOp::Shl => self.b.ins().ishl(l, n),
                    BinOp::UShr => self.b.ins().ushr(l, n),
                    _ => self.b.ins().sshr(l, n),
                }
            }
            BinOp::BitAnd => self.b.ins().band(l, r),
            BinOp::BitOr => self.b.ins().bor(l, r),
            BinOp::BitXor => self.b.ins().bxor(l, r),
            BinOp::Concat => self.call("utap_str_concat", &[l, r]),
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                let cc = match op {
                    BinOp::Lt => IntCC::SignedLessThan,
                    BinOp::Le => IntCC::SignedLessThanOrEqual,
                    BinOp::Gt => IntCC::SignedGreaterThan,
                    BinOp::Ge => IntCC::SignedGreaterThanOrEqual,
                    BinOp::Eq => IntCC::Equal,
                    _ => IntCC::NotEqual,
                };
                let c = if strings {
                    let cmp = self.call("utap_str_cmp", &[l, r]);
                    self.b.ins().icmp_imm_s(cc, cmp, 0)
                } else {
                    self.b.ins().icmp(cc, l, r)
                };
                self.b.ins().uextend(I64, c)
            }
            BinOp::And | BinOp::Or | BinOp::Match | BinOp::NotMatch => {
                unreachable!("handled by binary()")
            }
        }
    }

    /// `/` and `%` without traps: zero raises "division by 0", -1 negates
    /// (so `LLONG_MIN / -1` wraps) and gives remainder 0.
    fn divide(&mut self, div: bool, l: Value, r: Value, loc: u32) -> Value {
        let is_zero = self.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
        self.raise_if(is_zero, RAISE_DIVISION_BY_ZERO, loc);
        let minus_one = self.b.create_block();
        let normal = self.b.create_block();
        let join = self.b.create_block();
        self.b.append_block_param(join, I64);
        let is_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, r, -1);
        self.b.ins().brif(is_m1, minus_one, &[], normal, &[]);
        self.b.switch_to_block(minus_one);
        let v = if div {
            self.b.ins().ineg(l)
        } else {
            self.iconst(0)
        };
        self.b.ins().jump(join, &[v.into()]);
        self.b.switch_to_block(normal);
        let v = if div {
            self.b.ins().sdiv(l, r)
        } else {
            self.b.ins().srem(l, r)
        };
        self.b.ins().jump(join, &[v.into()]);
        self.b.switch_to_block(join);
        self.b.block_params(join)[0]
    }

    fn assign(
        &mut self,
        e: &Expr,
        op: AssignOp,
        target: &LValue,
        value: &Expr,
    ) -> Result<Value, CodegenError> {
        let ks = self.lvalue_keys(target)?;
        let v = self.expr(value)?;
        let bin = match op {
            AssignOp::Assign | AssignOp::Stat => None,
            AssignOp::Add => Some(BinOp::Add),
            AssignOp::Sub => Some(BinOp::Sub),
            AssignOp::Mul => Some(BinOp::Mul),
            AssignOp::Div => Some(BinOp::Div),
            AssignOp::Mod => Some(BinOp::Mod),
            AssignOp::Shl => Some(BinOp::Shl),
            AssignOp::Shr => Some(BinOp::Shr),
            AssignOp::BitAnd => Some(BinOp::BitAnd),
            AssignOp::BitOr => Some(BinOp::BitOr),
            AssignOp::BitXor => Some(BinOp::BitXor),
            AssignOp::Concat => Some(BinOp::Concat),
        };
        let Some(bin) = bin else {
            self.store(target, &ks, v, e.span);
            return Ok(v);
        };
        if bin == BinOp::Add
            && let Some(array) = self.long_array(target)
        {
            return Ok(self.array_add(array, &ks, v, e.span));
        }
        if let Some(slot) = self.atomic_slot(target)
            && matches!(bin, BinOp::Add | BinOp::Sub)
        {
            let delta = match bin {
                BinOp::Sub => self.b.ins().ineg(v),
                _ => v,
            };
            return Ok(self.atomic_add(slot, delta));
        }
        let old = self.load(target, &ks);
        let op_loc = self
            .t
            .locations
            .after(self.t.sources, e.span.file, e.span.start as usize);
        let loc = match target {
            LValue::Local(_) | LValue::Global(_) | LValue::Context(_) => op_loc,
            LValue::Elem { .. } => self.loc(e.span),
        };
        let new = self.apply(bin, old, v, false, loc);
        self.store(target, &ks, new, e.span);
        Ok(new)
    }

    fn call_function(
        &mut self,
        e: &Expr,
        func: p::FuncId,
        args: &[Expr],
    ) -> Result<Value, CodegenError> {
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(self.expr(a)?);
        }
        let loc = self.loc(e.span);
        let off = offset_of!(HandlerContext, nesting);
        let n = self.load_ctx(off);
        let max = self.load_ctx(offset_of!(HandlerContext, max_nesting));
        let deep = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, n, max);
        self.raise_if(deep, RAISE_MAXNESTING, loc);
        let n1 = self.b.ins().iadd_imm_s(n, 1);
        self.store_ctx(n1, off);
        let id = self.funcs[func.0 as usize];
        let r = self.call_id(id, &vals);
        self.store_ctx(n, off);
        self.check_error();
        Ok(r)
    }

    fn builtin(&mut self, e: &Expr, name: &str, args: &[Expr]) -> Result<Value, CodegenError> {
        let mut vals = Vec::with_capacity(args.len() + 1);
        for a in args {
            vals.push(self.expr(a)?);
        }
        let loc = self.loc(e.span);
        self.set_location(loc);
        let r = if let Some(idx) = utap_runtime::script::builtins::long_to_string_index(name) {
            let i = self.iconst(idx as i64);
            vals.insert(0, i);
            let id = self
                .rt
                .declare(self.module, "utap_bi_long_to_string", 2, true);
            self.call_id(id, &vals)
        } else {
            let Some(b) = utap_compiler::builtins::lookup(name) else {
                return Err(CodegenError::new(
                    e.span,
                    format!("no runtime implementation of '{name}'"),
                ));
            };
            // Optional parameters take their defaults (strtol's base 10,
            // ctime's now).
            while vals.len() < b.params.len() {
                let d = if name == "ctime" {
                    let id = self
                        .rt
                        .declare(self.module, "utap_bi_gettimeofday_s", 0, true);
                    self.call_id(id, &[])
                } else {
                    self.iconst(if name == "strtol" { 10 } else { 0 })
                };
                vals.push(d);
            }
            let sym = format!("utap_bi_{name}");
            let id = self.rt.declare(self.module, &sym, b.params.len(), true);
            self.call_id(id, &vals)
        };
        self.check_error();
        Ok(r)
    }

    /// Stores `vals` in a stack array; returns its address.
    fn arg_array(&mut self, vals: &[Value]) -> Value {
        let size = (vals.len().max(1) * 8) as u32;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            size,
            3,
        ));
        for (i, &v) in vals.iter().enumerate() {
            self.b.ins().stack_store(I64, v, slot, (i * 8) as i32);
        }
        self.b.ins().stack_addr(I64, slot, 0)
    }

    fn print(
        &mut self,
        e: &Expr,
        kind: PrintKind,
        format: Option<&[p::FormatPiece]>,
        args: &[Expr],
    ) -> Result<Value, CodegenError> {
        if args.iter().any(|a| a.ty == Type::Hist) {
            return self.print_hists(e, kind, args);
        }
        let to_string = matches!(
            kind,
            PrintKind::Sprint
                | PrintKind::Sprintln
                | PrintKind::Sprintf
                | PrintKind::Sprintd
                | PrintKind::Sprintdln
        );
        let loc = self.loc(e.span);
        if let Some(pieces) = format {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(self.expr(a)?);
            }
            let fmt = self.t.format(pieces.to_vec());
            let fmt = self.iconst(fmt);
            let n = self.iconst(vals.len() as i64);
            let addr = self.arg_array(&vals);
            self.set_location(loc);
            let r = if to_string {
                self.call("utap_sprintf", &[fmt, addr, n])
            } else {
                let r = self.call("utap_printf", &[fmt, addr, n]);
                self.check_error();
                r
            };
            return Ok(r);
        }
        let delimited = matches!(
            kind,
            PrintKind::Printd | PrintKind::Printdln | PrintKind::Sprintd | PrintKind::Sprintdln
        );
        let newline = matches!(
            kind,
            PrintKind::Println | PrintKind::Printdln | PrintKind::Sprintln | PrintKind::Sprintdln
        );
        let (delim, rest) = match (delimited, args.split_first()) {
            (true, Some((d, rest))) => (Some(self.expr(d)?), rest),
            _ => (None, args),
        };
        let mut vals = Vec::with_capacity(rest.len());
        let mut mask = 0i64;
        for (i, a) in rest.iter().enumerate() {
            if a.ty == Type::String && i < 64 {
                mask |= 1 << i;
            }
            vals.push(self.expr(a)?);
        }
        let mut flags = 0;
        if newline {
            flags |= PRINT_NEWLINE;
        }
        if delim.is_some() {
            flags |= PRINT_DELIM;
        }
        if to_string {
            flags |= PRINT_TO_STRING;
        }
        let flags = self.iconst(flags);
        let mask = self.iconst(mask);
        let delim = match delim {
            Some(d) => d,
            None => self.iconst(0),
        };
        let n = self.iconst(vals.len() as i64);
        let addr = self.arg_array(&vals);
        Ok(self.call("utap_print", &[flags, mask, delim, addr, n]))
    }

    /// `print(@hist_log(s))`: histograms print themselves; other
    /// arguments print as values.
    fn print_hists(
        &mut self,
        e: &Expr,
        kind: PrintKind,
        args: &[Expr],
    ) -> Result<Value, CodegenError> {
        if let (PrintKind::Sprint, [a]) = (kind, args)
            && let ExprKind::Hist { target, .. } = &a.kind
        {
            let loc = self.loc(a.span);
            let (g, elem) = self.stat_target(target)?;
            self.set_location(loc);
            let h = self.call("utap_sprint_hist", &[g, elem]);
            self.check_error();
            return Ok(h);
        }
        if !matches!(kind, PrintKind::Print | PrintKind::Println) {
            return Err(CodegenError::new(
                e.span,
                "a histogram can only be printed with print or println",
            ));
        }
        for a in args {
            if let ExprKind::Hist { target, .. } = &a.kind {
                let loc = self.loc(a.span);
                let (g, elem) = self.stat_target(target)?;
                self.set_location(loc);
                self.call("utap_print_hist", &[g, elem]);
                self.check_error();
            } else {
                let v = self.expr(a)?;
                let mask = self.iconst((a.ty == Type::String) as i64);
                let zero = self.iconst(0);
                let one = self.iconst(1);
                let addr = self.arg_array(&[v]);
                self.call("utap_print", &[zero, mask, zero, addr, one]);
            }
        }
        if kind == PrintKind::Println {
            let nl = self.iconst(PRINT_NEWLINE);
            let zero = self.iconst(0);
            let addr = self.arg_array(&[]);
            self.call("utap_print", &[nl, zero, zero, addr, zero]);
        }
        Ok(self.iconst(0))
    }
}

/// A `*` key of an array slice.
fn is_wildcard(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Wildcard)
}
