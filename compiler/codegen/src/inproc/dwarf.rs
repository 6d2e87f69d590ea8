//! Target variables in the program: `__dwarf_long(plan, a, b)` (`$var`,
//! `$p->f[i]`, `@var("g")`, `@cast(addr, ..)->f`) as straight-line code
//! per plan, for the plans `utap_runtime::dataplane::plans` accepts.
//! Registers and the module's load bias come from the block (the
//! function common entry stored them), memory through the
//! safe load; a read that fails is SystemTap's "read fault" error, as the
//! tracer's `script::dwarf_fns` raises it, and the value is 0.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, InstBuilder, StackSlotData, StackSlotKind, Value, types};
use cranelift_frontend::{FunctionBuilder, Switch};

use utap_compiler::program::{ExprKind, Program};
use utap_compiler::walk;
use utap_runtime::dataplane::layout::{BLOCK_BIAS, BLOCK_REGS, RAISE_READ_FAULT};
use utap_runtime::dataplane::plans::{self, Plan};
use utap_runtime::dataplane::region::Region;
use utap_runtime::dataplane::strings::kind;
use utap_runtime::dwarf::plan::{Chain, Final, Loc, Op, Step};

use super::user::{Rings, helper_at, keep_values, safe_load};
use super::{Runtime, mem, raise_with};
use crate::CodegenError;

const I64: types::Type = types::I64;

/// The plans `__dwarf_long` calls of `sub` read, each once (the route
/// pass let in only plans the program evaluates).
pub(super) fn plans_read(sub: &Program) -> Vec<(i64, Plan)> {
    plan_ids(sub, "__dwarf_long")
        .into_iter()
        .filter_map(|id| Some((id, plans::plan(id).ok()?)))
        .collect()
}

/// The text plans `__dwarf_string` calls of `sub` read (`$$parms`...):
/// their numbers' chains, and whether one reads registers.
pub(super) fn texts_read(sub: &Program) -> Vec<(i64, (Vec<Option<Chain>>, bool))> {
    plan_ids(sub, "__dwarf_string")
        .into_iter()
        .filter_map(|id| Some((id, plans::text(id).ok()?)))
        .collect()
}

/// The plan numbers the calls of builtin `name` in `sub` pass, each once.
fn plan_ids(sub: &Program, name: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    walk::program(sub, &mut |e| {
        if let ExprKind::Builtin { name: n, args } = &e.kind
            && *n == name
            && let Some(ExprKind::Long(id)) = args.first().map(|a| &a.kind)
            && !ids.contains(id)
        {
            ids.push(*id);
        }
    });
    ids
}

/// What evaluating a chain needs: the handler's context (its block), the
/// script's two values, the safe load's helper, the raise's header and
/// where a fault goes (the block returns 0 after raising).
struct Eval {
    ctx: Value,
    input: [Value; 2],
    helper: i64,
    fault: Block,
}

impl Runtime<'_> {
    /// `utap_bi___dwarf_long(ctx, plan, a, b)`: a switch over `plans`.
    pub(super) fn define_target_vars(
        &mut self,
        region: &Region,
        plans: &[(i64, Plan)],
    ) -> Result<(), CodegenError> {
        let helper = helper_at(region);
        let header = self.header;
        self.define("utap_bi___dwarf_long", 4, true, |b, a, _| {
            let fault = b.create_block();
            b.append_block_param(fault, I64);
            let ev = Eval {
                ctx: a[0],
                input: [a[2], a[3]],
                helper,
                fault,
            };
            let ids: Vec<i64> = plans.iter().map(|(id, _)| *id).collect();
            let (cases, none) = switch_on_plan(b, a[1], &ids);
            for ((_, plan), &blk) in plans.iter().zip(&cases) {
                b.switch_to_block(blk);
                let v = long(b, &ev, &plan.chain);
                b.ins().return_(&[v]);
            }
            b.switch_to_block(none);
            let zero = b.ins().iconst(I64, 0);
            b.ins().return_(&[zero]);
            b.switch_to_block(fault);
            let addr = b.block_params(fault)[0];
            let what = b.ins().iconst(I64, RAISE_READ_FAULT);
            raise_with(b, header, ev.ctx, what, Some(addr));
            let zero = b.ins().iconst(I64, 0);
            b.ins().return_(&[zero]);
        })?;
        Ok(())
    }
}

impl Runtime<'_> {
    /// `utap_bi___dwarf_string(ctx, plan, a, b)`: a switch over `texts`;
    /// each keeps its numbers (value, read or not) in a string ring entry
    /// the tracer renders as it prints (`plans::render_text`). A number
    /// that cannot be read shows as `?`, as in the tracer: no error.
    pub(super) fn define_target_texts(
        &mut self,
        region: &Region,
        texts: &[(i64, (Vec<Option<Chain>>, bool))],
    ) -> Result<(), CodegenError> {
        let helper = helper_at(region);
        let rings = Rings::of(region, self.header);
        self.define("utap_bi___dwarf_string", 4, true, |b, a, _| {
            let ids: Vec<i64> = texts.iter().map(|(id, _)| *id).collect();
            let (cases, none) = switch_on_plan(b, a[1], &ids);
            for ((id, (chains, _)), &blk) in texts.iter().zip(&cases) {
                b.switch_to_block(blk);
                let mut words = vec![b.ins().iconst(I64, *id)];
                for c in chains {
                    let (v, ok) = match c {
                        Some(c) => long_or_unread(b, a[0], [a[2], a[3]], helper, c),
                        None => {
                            let zero = b.ins().iconst(I64, 0);
                            (zero, zero)
                        }
                    };
                    words.extend([v, ok]);
                }
                let h = keep_values(b, rings, a[0], &words, kind::DWARF_TEXT);
                b.ins().return_(&[h]);
            }
            b.switch_to_block(none);
            let empty = b.ins().iconst(I64, utap_runtime::script::strings::EMPTY);
            b.ins().return_(&[empty]);
        })?;
        Ok(())
    }
}

/// A switch on the plan number `plan` over `ids`: a block per plan, in
/// order, and the one for a number the route pass did not let in (never
/// taken).
fn switch_on_plan(b: &mut FunctionBuilder, plan: Value, ids: &[i64]) -> (Vec<Block>, Block) {
    let mut switch = Switch::new();
    let cases: Vec<Block> = ids.iter().map(|_| b.create_block()).collect();
    for (&id, &blk) in ids.iter().zip(&cases) {
        switch.set_entry(id as u64 as u128, blk);
    }
    let none = b.create_block();
    switch.emit(b, plan, none);
    (cases, none)
}

/// A chain's number and 1, or 0 and 0 when a read fails.
fn long_or_unread(
    b: &mut FunctionBuilder,
    ctx: Value,
    input: [Value; 2],
    helper: i64,
    c: &Chain,
) -> (Value, Value) {
    let (fault, join) = (b.create_block(), b.create_block());
    b.append_block_param(fault, I64);
    b.append_block_param(join, I64);
    b.append_block_param(join, I64);
    let ev = Eval {
        ctx,
        input,
        helper,
        fault,
    };
    let v = long(b, &ev, c);
    let one = b.ins().iconst(I64, 1);
    b.ins().jump(join, &[v.into(), one.into()]);
    b.switch_to_block(fault);
    let zero = b.ins().iconst(I64, 0);
    b.ins().jump(join, &[zero.into(), zero.into()]);
    b.switch_to_block(join);
    (b.block_params(join)[0], b.block_params(join)[1])
}

/// The number a chain gives (the tracer's `Machine::long`).
fn long(b: &mut FunctionBuilder, ev: &Eval, c: &Chain) -> Value {
    let mut v = match &c.loc {
        Loc::Memory(ops) | Loc::Value(ops) => run(b, ev, ops),
        Loc::Register(r) => reg(b, ev, *r),
        // Refused by `plans::plan`.
        Loc::Pieces(_) | Loc::Unavailable => b.ins().iconst(I64, 0),
    };
    let mut memory = matches!(c.loc, Loc::Memory(_));
    for s in &c.steps {
        v = match s {
            Step::Deref if memory => load(b, ev, v, 8),
            Step::Deref => v,
            Step::Offset(o) => b.ins().iadd_imm_s(v, *o),
            Step::Index { arg, stride } => {
                let i = ev.input[(*arg).min(1)];
                let off = b.ins().imul_imm_s(i, *stride);
                b.ins().iadd(v, off)
            }
            Step::Bits { .. } => v,
        };
        memory |= *s == Step::Deref;
    }
    match c.fin {
        Final::Address => v,
        Final::Load { size, signed } => {
            let raw = match memory {
                true => load(b, ev, v, size),
                false => v,
            };
            extend(b, raw, u32::from(size.clamp(1, 8)) * 8, signed)
        }
        Final::Bits {
            shift,
            width,
            signed,
        } => {
            let raw = match memory {
                true => {
                    let n = (u32::from(shift) + u32::from(width))
                        .div_ceil(8)
                        .clamp(1, 8);
                    load(b, ev, v, n as u8)
                }
                false => v,
            };
            let raw = b.ins().ushr_imm_u(raw, i64::from(shift));
            let width = u32::from(width);
            let raw = match width {
                0 | 64.. => raw,
                w => b.ins().band_imm_s(raw, ((1u64 << w) - 1) as i64),
            };
            match width {
                1..64 => extend(b, raw, width, signed),
                _ => raw,
            }
        }
        // Refused by `plans::plan`.
        Final::Float { .. } => b.ins().iconst(I64, 0),
    }
}

/// The location program's value (a small stack machine, run at compile
/// time over Cranelift values).
fn run(b: &mut FunctionBuilder, ev: &Eval, ops: &[Op]) -> Value {
    let mut st: Vec<Value> = Vec::with_capacity(4);
    for op in ops {
        let v = match op {
            Op::Reg(r) => reg(b, ev, *r),
            Op::Const(c) => b.ins().iconst(I64, *c),
            Op::Input(k) => ev.input[(*k).min(1)],
            Op::PlusConst(c) => {
                let t = pop(b, &mut st);
                b.ins().iadd_imm_s(t, *c)
            }
            Op::Deref(n) => {
                let t = pop(b, &mut st);
                load(b, ev, t, *n)
            }
            Op::Plus | Op::Minus | Op::Mul | Op::And => {
                let y = pop(b, &mut st);
                let x = pop(b, &mut st);
                match op {
                    Op::Plus => b.ins().iadd(x, y),
                    Op::Minus => b.ins().isub(x, y),
                    Op::Mul => b.ins().imul(x, y),
                    _ => b.ins().band(x, y),
                }
            }
            Op::Addr(a) => {
                let bias = b.ins().load(I64, mem(), ev.ctx, BLOCK_BIAS as i32);
                b.ins().iadd_imm_s(bias, *a as i64)
            }
            // Refused by `plans::plan`.
            Op::Tls(_) | Op::ModuleTls => b.ins().iconst(I64, 0),
        };
        st.push(v);
    }
    pop(b, &mut st)
}

/// The top of the machine's stack (0 for a malformed program, which the
/// DWARF reader does not produce).
fn pop(b: &mut FunctionBuilder, st: &mut Vec<Value>) -> Value {
    st.pop().unwrap_or_else(|| b.ins().iconst(I64, 0))
}

/// DWARF register `r` as the site saw it (stored in the block).
fn reg(b: &mut FunctionBuilder, ev: &Eval, r: u16) -> Value {
    let off = BLOCK_REGS + 8 * u64::from(r.min(plans::REGS - 1));
    b.ins().load(I64, mem(), ev.ctx, off as i32)
}

/// The `n` (1..=8) bytes at `addr`, zero-extended; a short read goes to
/// the fault block with the address.
fn load(b: &mut FunctionBuilder, ev: &Eval, addr: Value, n: u8) -> Value {
    let n = i64::from(n.clamp(1, 8));
    let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
    let buf = b.ins().stack_addr(I64, slot, 0);
    let zero = b.ins().iconst(I64, 0);
    b.ins().store(mem(), zero, buf, 0);
    let len = b.ins().iconst(I64, n);
    let got = safe_load(b, ev.helper, ev.ctx, buf, addr, len);
    let whole = b.ins().icmp_imm_s(IntCC::Equal, got, n);
    let ok = b.create_block();
    b.ins().brif(whole, ok, &[], ev.fault, &[addr.into()]);
    b.switch_to_block(ok);
    b.ins().load(I64, mem(), buf, 0)
}

/// The low `bits` of `v`, sign- or zero-extended to 64.
fn extend(b: &mut FunctionBuilder, v: Value, bits: u32, signed: bool) -> Value {
    if bits >= 64 {
        return v;
    }
    match signed {
        true => {
            let up = b.ins().ishl_imm_u(v, i64::from(64 - bits));
            b.ins().sshr_imm_u(up, i64::from(64 - bits))
        }
        false => b.ins().band_imm_s(v, ((1u64 << bits) - 1) as i64),
    }
}
