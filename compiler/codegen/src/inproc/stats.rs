//! `s <<< v` in the program: `utap_stat_add(ctx, global, element, v)`,
//! the translator's call, on the statistic's slot in the region (a
//! scalar statistic's one slot, or the element's, found or inserted as
//! an array element is). Every thread adds to that one slot with atomics:
//! count, sum and the bucket with atomic adds, min and max with
//! compare-and-swap loops (see `layout::stat`). The tracer folds the slot
//! into the script's statistic before `end` reads it. A scalar statistic
//! is added to in each thread's own copy instead, in its block
//! (`layout::stat_copies`), which the fold merges: no line every thread
//! writes.
//!
//! `@variance` is not kept here: SystemTap's running estimate depends on
//! the order of the values, which threads adding at once have none of;
//! the compiler keeps the adders of a statistic it is read from in the
//! tracer (`utap_compiler::route`).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{AtomicRmwOp, FuncRef, InstBuilder, Value, types};
use cranelift_frontend::{FunctionBuilder, Switch};
use cranelift_module::FuncId;

use utap_runtime::dataplane::layout::{
    BLOCK_STATS, RAISE_ARRAY_FULL, TableSpec, stat, stat_copies,
};
use utap_runtime::values::stats::{HIST_LOG_BUCKET0, HIST_LOG_BUCKETS, HistSpec};

use super::{Runtime, count_contended, mem, raise};
use crate::CodegenError;

const I64: types::Type = types::I64;

impl Runtime<'_> {
    /// `utap_stat_add(ctx, global, element, v)` over the statistics'
    /// tables `stats` (with their finders), whose histograms are `hists`.
    pub(super) fn define_stat_add(
        &mut self,
        stats: &[(TableSpec, (u32, FuncId))],
        hists: &[HistSpec],
    ) -> Result<(), CodegenError> {
        let header = self.header;
        self.define("utap_stat_add", 4, false, |b, a, fref| {
            let (ctx, gid, v) = (a[0], a[1], a[3]);
            let done = b.create_block();
            let mut switch = Switch::new();
            let mut cases = Vec::new();
            let tables: Vec<TableSpec> = stats.iter().map(|(t, _)| *t).collect();
            let copies = stat_copies(&tables);
            for ((t, (g, find)), hist) in stats.iter().zip(hists) {
                let blk = b.create_block();
                switch.set_entry(u128::from(*g), blk);
                let copy = copies.iter().find(|c| c.0 == *g).map(|c| c.1);
                cases.push((blk, t, *find, *hist, copy));
            }
            switch.emit(b, gid, done);
            for (blk, t, find, hist, copy) in cases {
                b.switch_to_block(blk);
                match copy {
                    Some(word) => add_to_copy(b, ctx, v, word, hist, done),
                    None => add_to_slot(b, header, ctx, v, t, hist, find, fref, done),
                }
            }
            b.switch_to_block(done);
            b.ins().return_(&[]);
        })?;
        Ok(())
    }
}

/// Finds (or inserts) the slot of `ctx.keys` in `t` and adds `v` to it;
/// an insertion with no room raises "Array overflow", a slot another
/// thread held too long counts the value as contended. Jumps to `done`.
#[allow(clippy::too_many_arguments)]
fn add_to_slot(
    b: &mut FunctionBuilder,
    header: i64,
    ctx: Value,
    v: Value,
    t: &TableSpec,
    hist: HistSpec,
    find: FuncId,
    fref: &mut dyn FnMut(&mut FunctionBuilder, FuncId) -> FuncRef,
    done: cranelift_codegen::ir::Block,
) {
    let insert = b.ins().iconst(I64, 1);
    let f = fref(b, find);
    let call = b.ins().call(f, &[ctx, insert]);
    let e = b.inst_results(call)[0];
    let missing = b.create_block();
    let not_missing = b.create_block();
    let contended = b.create_block();
    let have = b.create_block();
    let is_zero = b.ins().icmp_imm_s(IntCC::Equal, e, 0);
    b.ins().brif(is_zero, missing, &[], not_missing, &[]);
    b.switch_to_block(missing);
    let kind = b.ins().iconst(I64, RAISE_ARRAY_FULL);
    raise(b, header, ctx, kind, Some(i64::from(t.global)));
    b.ins().jump(done, &[]);
    b.switch_to_block(not_missing);
    let is_one = b.ins().icmp_imm_s(IntCC::Equal, e, 1);
    b.ins().brif(is_one, contended, &[], have, &[]);
    b.switch_to_block(contended);
    count_contended(b, header);
    b.ins().jump(done, &[]);
    b.switch_to_block(have);
    let word =
        |b: &mut FunctionBuilder, w: u64| b.ins().iadd_imm_s(e, (t.value_at() + 8 * w) as i64);
    let count = word(b, stat::COUNT);
    let one = b.ins().iconst(I64, 1);
    b.ins().atomic_rmw(I64, mem(), AtomicRmwOp::Add, count, one);
    let sum = word(b, stat::SUM);
    b.ins().atomic_rmw(I64, mem(), AtomicRmwOp::Add, sum, v);
    let min = word(b, stat::MIN);
    keep_extreme(b, min, v, IntCC::SignedLessThan);
    let max = word(b, stat::MAX);
    keep_extreme(b, max, v, IntCC::SignedGreaterThan);
    if let Some(i) = bucket(b, hist, v) {
        let off = b.ins().ishl_imm_s(i, 3);
        let at = b.ins().iadd(e, off);
        let at = b
            .ins()
            .iadd_imm_s(at, (t.value_at() + 8 * stat::FIXED) as i64);
        b.ins().atomic_rmw(I64, mem(), AtomicRmwOp::Add, at, one);
    }
    b.ins().jump(done, &[]);
}

/// Adds `v` to the thread's own copy of a scalar statistic, at `word`
/// of its block's `stats` (`layout::stat_copies`): plain loads and
/// stores, as no other thread writes it (a signal handler's hit on the
/// same thread is skipped before it gets here). A copy with count 0 takes
/// `v` as its min and max. Jumps to `done`.
fn add_to_copy(
    b: &mut FunctionBuilder,
    ctx: Value,
    v: Value,
    word: u64,
    hist: HistSpec,
    done: cranelift_codegen::ir::Block,
) {
    let at = |w: u64| (BLOCK_STATS + 8 * (word + w)) as i32;
    let count = b.ins().load(I64, mem(), ctx, at(stat::COUNT));
    let first = b.ins().icmp_imm_s(IntCC::Equal, count, 0);
    let next = b.ins().iadd_imm_s(count, 1);
    b.ins().store(mem(), next, ctx, at(stat::COUNT));
    let sum = b.ins().load(I64, mem(), ctx, at(stat::SUM));
    let sum = b.ins().iadd(sum, v);
    b.ins().store(mem(), sum, ctx, at(stat::SUM));
    for (w, beyond) in [
        (stat::MIN, IntCC::SignedLessThan),
        (stat::MAX, IntCC::SignedGreaterThan),
    ] {
        let old = b.ins().load(I64, mem(), ctx, at(w));
        let better = b.ins().icmp(beyond, v, old);
        let take = b.ins().bor(better, first);
        let new = b.ins().select(take, v, old);
        b.ins().store(mem(), new, ctx, at(w));
    }
    if let Some(i) = bucket(b, hist, v) {
        let off = b.ins().ishl_imm_s(i, 3);
        let slot = b.ins().iadd(ctx, off);
        let n = b.ins().load(I64, mem(), slot, at(stat::FIXED));
        let n = b.ins().iadd_imm_s(n, 1);
        b.ins().store(mem(), n, slot, at(stat::FIXED));
    }
    b.ins().jump(done, &[]);
}

/// Stores `v` at `addr` while `v` is beyond the word by `beyond` (a
/// compare-and-swap loop: a thread that lost the race compares again).
fn keep_extreme(b: &mut FunctionBuilder, addr: Value, v: Value, beyond: IntCC) {
    let lp = b.create_block();
    b.append_block_param(lp, I64);
    let swap = b.create_block();
    let after = b.create_block();
    let first = b.ins().atomic_load(I64, mem(), addr);
    b.ins().jump(lp, &[first.into()]);
    b.switch_to_block(lp);
    let old = b.block_params(lp)[0];
    let better = b.ins().icmp(beyond, v, old);
    b.ins().brif(better, swap, &[], after, &[]);
    b.switch_to_block(swap);
    let seen = b.ins().atomic_cas(mem(), addr, old, v);
    let won = b.ins().icmp(IntCC::Equal, seen, old);
    b.ins().brif(won, after, &[], lp, &[seen.into()]);
    b.switch_to_block(after);
}

/// The histogram bucket of `v`, as `HistSpec::bucket_of` computes it.
fn bucket(b: &mut FunctionBuilder, hist: HistSpec, v: Value) -> Option<Value> {
    match hist {
        HistSpec::None => None,
        HistSpec::Log => Some(log_bucket(b, v)),
        HistSpec::Linear {
            start,
            interval,
            buckets,
        } => Some(linear_bucket(b, v, start, interval, buckets as i64)),
    }
}

/// 64 for 0; 64 + bits for a positive value (at most 127), 64 - bits for
/// a negative one, where bits is the magnitude's bit length.
fn log_bucket(b: &mut FunctionBuilder, v: Value) -> Value {
    let zero_bucket = HIST_LOG_BUCKET0 as i64;
    // |i64::MIN| wraps to itself, whose unsigned bit length is 64.
    let mag = b.ins().iabs(v);
    let clz = b.ins().clz(mag);
    let c64 = b.ins().iconst(I64, 64);
    let bits = b.ins().isub(c64, clz);
    let up = b.ins().iadd_imm_s(bits, zero_bucket);
    let top = b.ins().iconst(I64, HIST_LOG_BUCKETS as i64 - 1);
    let up = b.ins().umin(up, top);
    let base = b.ins().iconst(I64, zero_bucket);
    let down = b.ins().isub(base, bits);
    let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, v, 0);
    let r = b.ins().select(neg, down, up);
    let is_zero = b.ins().icmp_imm_s(IntCC::Equal, v, 0);
    b.ins().select(is_zero, base, r)
}

/// 0 below `start`; else 1 + (v - start) / interval (unsigned, as
/// SystemTap divides), at most the overflow bucket.
fn linear_bucket(
    b: &mut FunctionBuilder,
    v: Value,
    start: i64,
    interval: i64,
    buckets: i64,
) -> Value {
    let start = b.ins().iconst(I64, start);
    let off = b.ins().isub(v, start);
    let q = match interval {
        0 => b.ins().iconst(I64, 0),
        _ => {
            let d = b.ins().iconst(I64, interval);
            b.ins().udiv(off, d)
        }
    };
    let q1 = b.ins().iadd_imm_s(q, 1);
    let last = b.ins().iconst(I64, (buckets - 1).max(0));
    let r = b.ins().umin(q1, last);
    let zero = b.ins().iconst(I64, 0);
    let below = b.ins().icmp_imm_s(IntCC::SignedLessThan, off, 0);
    b.ins().select(below, zero, r)
}
