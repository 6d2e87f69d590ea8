//! `printf` and `print` in the program: each call becomes one record in
//! the output ring of the thread's block (`layout::RingHead`,
//! `layout::record`), which the tracer reads, formats and writes with
//! the rest of the script's output. A full ring drops the record and
//! counts it (as the transport does), never waits: the thread runs on.
//!
//! The ring is found from the block (the handler's context) by index:
//! blocks, ring heads and rings are arrays of one size each, at
//! addresses fixed when the region was made.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{AtomicRmwOp, InstBuilder, Value, types};
use cranelift_frontend::FunctionBuilder;

use std::mem::offset_of;
use utap_runtime::dataplane::layout::{
    BLOCK_LEN, Header, RING_DROPPED, RING_HEAD, RING_HEAD_LEN, RING_LEN, RING_TAIL, RING_WORDS,
    record,
};
use utap_runtime::dataplane::region::Region;

use super::{Runtime, mem};
use crate::CodegenError;

const I64: types::Type = types::I64;

/// Addresses the record writer needs, all fixed in the region.
#[derive(Clone, Copy)]
struct Rings {
    blocks: i64,
    heads: i64,
    words: i64,
    seq: i64,
}

impl Runtime<'_> {
    /// `utap_printf(ctx, fmt, args, n)` and `utap_print(ctx, flags, mask,
    /// delim, args, n)`, the translator's calls, as ring records.
    pub(super) fn define_output(&mut self, region: &Region) -> Result<(), CodegenError> {
        let data = region.data_base() as i64;
        let rings = Rings {
            blocks: data + region.data.blocks as i64,
            heads: data + region.data.ring_heads as i64,
            words: data + region.data.rings as i64,
            seq: self.header + offset_of!(Header, seq) as i64,
        };
        self.define("utap_printf", 4, false, |b, a, _| {
            let (ctx, fmt, args, n) = (a[0], a[1], a[2], a[3]);
            write_record(b, rings, ctx, record::PRINTF, fmt, &[], args, n);
            b.ins().return_(&[]);
        })?;
        self.define("utap_print", 6, true, |b, a, _| {
            let (ctx, flags, mask, delim, args, n) = (a[0], a[1], a[2], a[3], a[4], a[5]);
            let zero = b.ins().iconst(I64, 0);
            write_record(
                b,
                rings,
                ctx,
                record::PRINT,
                zero,
                &[flags, mask, delim],
                args,
                n,
            );
            b.ins().return_(&[zero]);
        })?;
        Ok(())
    }
}

/// Appends `header, seq, fixed..., args[0..n]` to the ring of `ctx`'s
/// block and publishes it; counts a drop when it does not fit. The
/// builder is left in the block after (nothing returned).
#[allow(clippy::too_many_arguments)]
fn write_record(
    b: &mut FunctionBuilder,
    r: Rings,
    ctx: Value,
    kind: u64,
    fmt: Value,
    fixed: &[Value],
    args: Value,
    n: Value,
) {
    let index = b.ins().iadd_imm_s(ctx, -r.blocks);
    let index = b.ins().ushr_imm_u(index, BLOCK_LEN.trailing_zeros() as i64);
    let head_at = b.ins().imul_imm_s(index, RING_HEAD_LEN as i64);
    let head_at = b.ins().iadd_imm_s(head_at, r.heads);
    let ring = b.ins().imul_imm_s(index, RING_LEN as i64);
    let ring = b.ins().iadd_imm_s(ring, r.words);
    let fixed_words = record::PRINTF_FIXED + fixed.len() as u64;
    let words = b.ins().iadd_imm_s(n, fixed_words as i64);
    let head = b.ins().load(I64, mem(), head_at, RING_HEAD as i32);
    let tail_at = b.ins().iadd_imm_s(head_at, RING_TAIL as i64);
    let tail = b.ins().atomic_load(I64, mem(), tail_at);
    let used = b.ins().isub(head, tail);
    let after = b.ins().iadd(used, words);
    let full = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedGreaterThan, after, RING_WORDS as i64);
    let (drop, room, done) = (b.create_block(), b.create_block(), b.create_block());
    b.ins().brif(full, drop, &[], room, &[]);

    b.switch_to_block(drop);
    let dropped = b.ins().load(I64, mem(), head_at, RING_DROPPED as i32);
    let dropped = b.ins().iadd_imm_s(dropped, 1);
    b.ins().store(mem(), dropped, head_at, RING_DROPPED as i32);
    b.ins().jump(done, &[]);

    b.switch_to_block(room);
    let fmt = b.ins().ishl_imm_u(fmt, 32);
    let shape = b.ins().ishl_imm_u(words, 8);
    let header = b.ins().bor(fmt, shape);
    let header = b.ins().bor_imm_s(header, kind as i64);
    let seq_at = b.ins().iconst(I64, r.seq);
    let one = b.ins().iconst(I64, 1);
    let seq = b
        .ins()
        .atomic_rmw(I64, mem(), AtomicRmwOp::Add, seq_at, one);
    let put = |b: &mut FunctionBuilder, k: u64, v: Value| {
        let at = b.ins().iadd_imm_s(head, k as i64);
        store_word(b, ring, at, v);
    };
    put(b, 0, header);
    put(b, 1, seq);
    for (i, &v) in fixed.iter().enumerate() {
        put(b, record::PRINTF_FIXED + i as u64, v);
    }
    let first_arg = b.ins().iadd_imm_s(head, fixed_words as i64);
    copy_args(b, ring, first_arg, args, n);
    let new_head = b.ins().iadd(head, words);
    let head_field = b.ins().iadd_imm_s(head_at, RING_HEAD as i64);
    b.ins().atomic_store(mem(), new_head, head_field);
    b.ins().jump(done, &[]);

    b.switch_to_block(done);
}

/// Stores `v` as word `at` (taken modulo the ring's size) of `ring`.
fn store_word(b: &mut FunctionBuilder, ring: Value, at: Value, v: Value) {
    let k = b.ins().band_imm_s(at, RING_WORDS as i64 - 1);
    let k = b.ins().ishl_imm_u(k, 3);
    let p = b.ins().iadd(ring, k);
    b.ins().store(mem(), v, p, 0);
}

/// Copies `n` words from `args` to the ring from word `at` on.
fn copy_args(b: &mut FunctionBuilder, ring: Value, at: Value, args: Value, n: Value) {
    let (test, body, out) = (b.create_block(), b.create_block(), b.create_block());
    b.append_block_param(test, I64);
    let zero = b.ins().iconst(I64, 0);
    b.ins().jump(test, &[zero.into()]);

    b.switch_to_block(test);
    let j = b.block_params(test)[0];
    let more = b.ins().icmp(IntCC::UnsignedLessThan, j, n);
    b.ins().brif(more, body, &[], out, &[]);

    b.switch_to_block(body);
    let off = b.ins().ishl_imm_u(j, 3);
    let src = b.ins().iadd(args, off);
    let v = b.ins().load(I64, mem(), src, 0);
    let k = b.ins().iadd(at, j);
    store_word(b, ring, k, v);
    let next = b.ins().iadd_imm_s(j, 1);
    b.ins().jump(test, &[next.into()]);

    b.switch_to_block(out);
}
