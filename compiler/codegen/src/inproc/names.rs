//! String values beyond literals in in-process handlers: `execname()`,
//! the handle the tracer put in the thread's block
//! (`utap_runtime::dataplane::names`), and `==`/`!=` between strings,
//! which compare handles: every in-process string handle is canonical
//! (one per distinct string, the empty string's always empty), so the
//! route pass lets in no other comparison.

use std::mem::offset_of;

use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::condcodes::IntCC;
use utap_runtime::dataplane::layout::Block;

use super::{I64, Runtime, mem};
use crate::CodegenError;

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
}
