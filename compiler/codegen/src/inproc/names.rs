//! String values beyond literals in in-process handlers: `execname()`,
//! the handle the tracer put in the thread's block
//! (`utap_runtime::dataplane::names`), `pp()` and `pn()`, a literal per
//! probe and point, and `==`/`!=` between strings,
//! which compare handles: every in-process string handle is canonical
//! (one per distinct string, the empty string's always empty), so the
//! route pass lets in no other comparison.

use std::mem::offset_of;

use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::condcodes::IntCC;
use utap_compiler::program::Program;
use utap_runtime::dataplane::layout::Block;
use utap_runtime::script::context::HandlerContext;

use super::lookup::return_from_table;
use super::{I64, Runtime, mem};
use crate::CodegenError;
use crate::tables::Tables;

/// By in-process probe and point: the literal handles of `pp()` (the
/// resolved point) and `pn()` (the script's point), as the tracer's
/// image has them.
pub(super) struct PointTexts(Vec<Vec<(i64, i64)>>);

impl PointTexts {
    pub(super) fn new(sub: &Program, tables: &mut Tables<'_>) -> PointTexts {
        PointTexts(
            sub.probes
                .iter()
                .map(|p| {
                    p.points
                        .iter()
                        .map(|pt| (tables.literal(&pt.text), tables.literal(&pt.head)))
                        .collect()
                })
                .collect(),
        )
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

    /// `utap_bi_pp(ctx)` and `utap_bi_pn(ctx)`: a switch on the context's
    /// probe and point indexes (those the dispatcher or the function
    /// common entry stored).
    pub(super) fn define_points(&mut self, texts: &PointTexts) -> Result<(), CodegenError> {
        for (name, pick) in [
            (
                "utap_bi_pp",
                (|t: &(i64, i64)| t.0) as fn(&(i64, i64)) -> i64,
            ),
            ("utap_bi_pn", |t: &(i64, i64)| t.1),
        ] {
            let table: Vec<(u128, Vec<(u128, i64)>)> = texts
                .0
                .iter()
                .enumerate()
                .map(|(k, points)| {
                    let row = points.iter().enumerate().map(|(i, t)| (i as u128, pick(t)));
                    (k as u128, row.collect())
                })
                .collect();
            self.define(name, 1, true, |b, a, _| {
                let field = |f: usize| f as i32;
                let probe = b.ins().load(
                    I64,
                    mem(),
                    a[0],
                    field(offset_of!(HandlerContext, probe_index)),
                );
                let point = b.ins().load(
                    I64,
                    mem(),
                    a[0],
                    field(offset_of!(HandlerContext, point_index)),
                );
                return_from_table(b, probe, point, &table)
            })?;
        }
        Ok(())
    }
}
