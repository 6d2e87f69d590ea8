//! String values beyond literals in in-process handlers: `execname()`,
//! the handle the tracer put in the thread's block
//! (`utap_runtime::dataplane::names`), `pp()` and `pn()`, a literal per
//! probe and point, and `==`/`!=` between strings,
//! which compare handles: every in-process string handle is canonical
//! (one per distinct string, the empty string's always empty), so the
//! route pass lets in no other comparison. `probefunc()` is a literal per
//! point where the point fixes it (`utap_compiler::route::point_func`):
//! a function's name, or a syscall probe's kernel function by number; at
//! a wildcard's entry sites, the name handle the tracer wrote in the
//! site's hook list, which the function entry copied to the block.

use std::mem::offset_of;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Switch};
use utap_compiler::program::Program;
use utap_compiler::route::{PointFunc, point_func};
use utap_runtime::dataplane::layout::Block;
use utap_runtime::script::context::{HandlerContext, ProbeValues};
use utap_runtime::syscalls::table::SYSCALLS;

use super::lookup::{return_from_table, return_from_table_or};
use super::{I64, Runtime, mem};
use crate::CodegenError;
use crate::tables::Tables;

/// By in-process probe and point: the literal handles of `pp()` (the
/// resolved point) and `pn()` (the script's point), as the tracer's
/// image has them, and what `probefunc()` answers there; with the
/// kernel function's name by syscall number, if a point needs them.
pub(super) struct PointTexts {
    points: Vec<Vec<(i64, i64, Option<Func>)>>,
    syscalls: Vec<(u128, i64)>,
}

/// `probefunc()` at a point: a literal, the syscall's by number, or the
/// site's name from the block.
#[derive(Clone, Copy)]
enum Func {
    Fixed(i64),
    BySyscall,
    BySite,
}

impl PointTexts {
    /// Whether some point's `probefunc()` is its site's (the image then
    /// copies the site words and interns names).
    pub(super) fn by_site(&self) -> bool {
        self.points
            .iter()
            .flatten()
            .any(|p| matches!(p.2, Some(Func::BySite)))
    }

    pub(super) fn new(sub: &Program, tables: &mut Tables<'_>) -> PointTexts {
        let points: Vec<Vec<(i64, i64, Option<Func>)>> = sub
            .probes
            .iter()
            .map(|p| {
                p.points
                    .iter()
                    .map(|pt| {
                        let func = match point_func(&pt.kind) {
                            Some(PointFunc::Named(n)) => Some(Func::Fixed(tables.literal(n))),
                            Some(PointFunc::Syscall) => Some(Func::BySyscall),
                            Some(PointFunc::Site) => Some(Func::BySite),
                            None => None,
                        };
                        (tables.literal(&pt.text), tables.literal(&pt.head), func)
                    })
                    .collect()
            })
            .collect();
        let by_syscall = points
            .iter()
            .flatten()
            .any(|p| matches!(p.2, Some(Func::BySyscall)));
        let syscalls = match by_syscall {
            true => SYSCALLS
                .iter()
                .map(|e| {
                    (
                        e.nr as u128,
                        tables.literal(&format!("__x64_sys_{}", e.name)),
                    )
                })
                .collect(),
            false => Vec::new(),
        };
        PointTexts { points, syscalls }
    }
}

impl Runtime<'_> {
    /// `utap_bi_execname(ctx)` and `utap_str_cmp(ctx, a, b)` (0 when
    /// equal; the translator tests it against 0 for `==` and `!=`).
    pub(super) fn define_names(&mut self) -> Result<(), CodegenError> {
        // The context is the block's first field.
        let comm = offset_of!(Block, comm) as i32;
        self.define("utap_bi_execname", 1, true, |b, a, _| {
            let v = b.ins().load(I64, mem(), a[0], comm);
            b.ins().return_(&[v]);
        })?;
        self.define("utap_str_cmp", 3, true, |b, a, _| {
            let (l, r) = (a[1], a[2]);
            let same = b.ins().icmp(IntCC::Equal, l, r);
            // Lengths in the low words: two empty strings whatever tag.
            let lens = b.ins().bor(l, r);
            let lens = b.ins().band_imm_u(lens, 0xffff_ffff);
            let both_empty = b.ins().icmp_imm_u(IntCC::Equal, lens, 0);
            let eq = b.ins().bor(same, both_empty);
            let eq = b.ins().uextend(I64, eq);
            let ne = b.ins().bxor_imm_u(eq, 1);
            b.ins().return_(&[ne]);
        })?;
        Ok(())
    }

    /// `utap_bi_pp(ctx)`, `utap_bi_pn(ctx)` and `utap_bi_probefunc(ctx)`:
    /// a switch on the context's probe and point indexes (those the
    /// dispatcher or the function common entry stored); for a syscall
    /// point's `probefunc()`, then on the syscall number.
    pub(super) fn define_points(&mut self, texts: &PointTexts) -> Result<(), CodegenError> {
        for (name, pick) in [
            (
                "utap_bi_pp",
                (|t: &(i64, i64, Option<Func>)| Some(t.0)) as fn(&_) -> Option<i64>,
            ),
            ("utap_bi_pn", |t| Some(t.1)),
        ] {
            let table = point_table(texts, pick);
            self.define(name, 1, true, |b, a, _| {
                let (probe, point) = probe_and_point(b, a[0]);
                return_from_table(b, probe, point, &table)
            })?;
        }
        let fixed = point_table(texts, |t| match t.2 {
            Some(Func::Fixed(h)) => Some(h),
            _ => None,
        });
        // A point with no fixed answer is a syscall's, whose second level
        // switches on the number, or a function site's, whose name the
        // entry copied to the block (the route pass lets in no other).
        let syscall_row = vec![(0u128, texts.syscalls.clone())];
        let site = point_table(texts, |t| match t.2 {
            Some(Func::BySite) => Some(0),
            _ => None,
        });
        self.define("utap_bi_probefunc", 1, true, |b, a, _| {
            let (probe, point) = probe_and_point(b, a[0]);
            let (not_fixed, by_site, by_syscall) =
                (b.create_block(), b.create_block(), b.create_block());
            return_from_table_or(b, probe, point, &fixed, not_fixed);
            b.switch_to_block(not_fixed);
            // Not by the event kind: a syscall entry does not write it.
            jump_if_listed(b, probe, point, &site, by_site, by_syscall);
            b.switch_to_block(by_site);
            let name = b
                .ins()
                .load(I64, mem(), a[0], offset_of!(Block, site_func) as i32);
            b.ins().return_(&[name]);
            b.switch_to_block(by_syscall);
            let nr = b.ins().load(
                I64,
                mem(),
                a[0],
                (offset_of!(HandlerContext, probe) + offset_of!(ProbeValues, syscall)) as i32,
            );
            let zero = b.ins().iconst(I64, 0);
            return_from_table(b, zero, nr, &syscall_row)
        })?;
        Ok(())
    }
}

/// Goes to `yes` if `table` lists the (probe, point) pair, else to `no`.
fn jump_if_listed(
    b: &mut FunctionBuilder,
    probe: Value,
    point: Value,
    table: &[(u128, Vec<(u128, i64)>)],
    yes: cranelift_codegen::ir::Block,
    no: cranelift_codegen::ir::Block,
) {
    let mut by_probe = Switch::new();
    let mut rows = Vec::new();
    for (key, row) in table.iter().filter(|(_, row)| !row.is_empty()) {
        let blk = b.create_block();
        by_probe.set_entry(*key, blk);
        rows.push((blk, row));
    }
    by_probe.emit(b, probe, no);
    for (blk, row) in rows {
        b.switch_to_block(blk);
        let mut by_point = Switch::new();
        for &(key, _) in row {
            by_point.set_entry(key, yes);
        }
        by_point.emit(b, point, no);
    }
}

/// The context's probe and point indexes.
fn probe_and_point(b: &mut FunctionBuilder, ctx: Value) -> (Value, Value) {
    let field = |f: usize| f as i32;
    let probe = b.ins().load(
        I64,
        mem(),
        ctx,
        field(offset_of!(HandlerContext, probe_index)),
    );
    let point = b.ins().load(
        I64,
        mem(),
        ctx,
        field(offset_of!(HandlerContext, point_index)),
    );
    (probe, point)
}

/// By probe, then point: the handles `pick` gives (none where it gives
/// `None`).
fn point_table(
    texts: &PointTexts,
    pick: impl Fn(&(i64, i64, Option<Func>)) -> Option<i64>,
) -> Vec<(u128, Vec<(u128, i64)>)> {
    texts
        .points
        .iter()
        .enumerate()
        .map(|(k, points)| {
            let row = points
                .iter()
                .enumerate()
                .filter_map(|(i, t)| Some((i as u128, pick(t)?)));
            (k as u128, row.collect())
        })
        .collect()
}
