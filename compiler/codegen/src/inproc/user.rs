//! Reads of the program's memory in the program, through the safe load
//! (`process_vm_readv` on the thread's own process, from the region's
//! helper: a bad address is an error return, never a fault):
//!
//! * `user_string`, `user_string_n` and `user_string_quoted`: the string
//!   into the entry at the head of the block's string ring, and a handle
//!   to it (`utap_runtime::dataplane::strings` has the layout and what the
//!   tracer does with it). Reads go a page at a time, as the tracer's do,
//!   and stop at the NUL or the limit: a string that ends just before an
//!   unmapped page reads whole. A fault is SystemTap's "user string copy
//!   fault" for the first two, the address in hex for the quoted one, as
//!   on the tracer's route.
//! * `user_char`, `user_short`, `user_int`, `user_long`: the value, sign
//!   extended, or 0 when it cannot be read (as on the tracer's route).

use std::mem::offset_of;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{AbiParam, InstBuilder, StackSlotData, StackSlotKind, Value, types};
use cranelift_frontend::FunctionBuilder;

use utap_runtime::dataplane::layout::{BLOCK_LEN, BLOCK_STR_HEAD, HELPER_AT, RAISE_USER_FAULT};
use utap_runtime::dataplane::region::Region;
use utap_runtime::dataplane::strings::{ENTRY_FIXED, RING_LEN, STR_TAG, kind};
use utap_runtime::script::context::{HandlerContext, ProbeValues};

use super::{Runtime, mem, raise_with};
use crate::CodegenError;

const I64: types::Type = types::I64;
const PAGE: i64 = 4096;
const PROCESS_VM_READV: i64 = 310;

/// Addresses the reader needs, all fixed in the region.
#[derive(Clone, Copy)]
pub(super) struct Rings {
    blocks: i64,
    strings: i64,
    helper: i64,
    header: i64,
}

impl Rings {
    /// The string rings of `region`, whose header is at `header`.
    pub(super) fn of(region: &Region, header: i64) -> Rings {
        let data = region.data_base() as i64;
        Rings {
            blocks: data + region.data.blocks as i64,
            strings: data + region.data.strings as i64,
            helper: helper_at(region),
            header,
        }
    }
}

/// Where `region`'s safe-load helper is (`code::read_helper`).
pub(super) fn helper_at(region: &Region) -> i64 {
    (region.base() + HELPER_AT) as i64
}

impl Runtime<'_> {
    /// The three builtins over one reader, `utap_ip_read_string(ctx, addr,
    /// limit, kind) -> handle`; `max` is MAXSTRINGLEN.
    pub(super) fn define_strings(&mut self, region: &Region, max: i64) -> Result<(), CodegenError> {
        let r = Rings::of(region, self.header);
        let read = self.define("utap_ip_read_string", 4, true, |b, a, _| {
            let h = read_string(b, r, a[0], a[1], a[2], a[3]);
            b.ins().return_(&[h]);
        })?;
        // SystemTap's limits: `n + 1` bytes with the NUL, clamped to
        // 1..=MAXSTRINGLEN-1 (the tracer's `memory::user_string_n`).
        let most = (max - 1).max(1) - 1;
        for (name, params, quoted) in [
            ("utap_bi_user_string", 2, false),
            ("utap_bi_user_string_n", 3, false),
            ("utap_bi_user_string_quoted", 2, true),
        ] {
            self.define(name, params, true, |b, a, fref| {
                let limit = match params {
                    3 => {
                        let n = b.ins().iadd_imm_s(a[2], 1);
                        let n = clamp(b, n, 1, most + 1);
                        b.ins().iadd_imm_s(n, -1)
                    }
                    _ => b.ins().iconst(I64, most),
                };
                let k = b
                    .ins()
                    .iconst(I64, if quoted { kind::QUOTED } else { kind::RAW } as i64);
                let f = fref(b, read);
                let call = b.ins().call(f, &[a[0], a[1], limit, k]);
                let h = b.inst_results(call)[0];
                b.ins().return_(&[h]);
            })?;
        }
        self.define("utap_bi___syscall_retstr", 3, true, |b, a, _| {
            let h = keep_values(b, r, a[0], &[a[1], a[2]], kind::RETSTR);
            b.ins().return_(&[h]);
        })?;
        Ok(())
    }
}

impl Runtime<'_> {
    /// `user_char`, `user_short`, `user_int` and `user_long`.
    pub(super) fn define_user_values(&mut self, region: &Region) -> Result<(), CodegenError> {
        let helper = helper_at(region);
        for (name, ty) in [
            ("utap_bi_user_char", types::I8),
            ("utap_bi_user_short", types::I16),
            ("utap_bi_user_int", types::I32),
            ("utap_bi_user_long", I64),
        ] {
            self.define(name, 2, true, |b, a, _| {
                let v = user_value(b, helper, a[0], a[1], ty);
                b.ins().return_(&[v]);
            })?;
        }
        Ok(())
    }
}

/// The `ty` at `addr` in `ctx`'s process, sign extended; 0 when it cannot
/// be read whole.
fn user_value(
    b: &mut FunctionBuilder,
    helper: i64,
    ctx: Value,
    addr: Value,
    ty: types::Type,
) -> Value {
    let size = i64::from(ty.bytes());
    let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
    let buf = b.ins().stack_addr(I64, slot, 0);
    let len = b.ins().iconst(I64, size);
    let got = safe_load(b, helper, ctx, buf, addr, len);
    let whole = b.ins().icmp_imm_s(IntCC::Equal, got, size);
    let v = b.ins().load(ty, mem(), buf, 0);
    let v = match ty == I64 {
        true => v,
        false => b.ins().sextend(I64, v),
    };
    let zero = b.ins().iconst(I64, 0);
    b.ins().select(whole, v, zero)
}

/// `v` clamped to `lo..=hi` (signed).
fn clamp(b: &mut FunctionBuilder, v: Value, lo: i64, hi: i64) -> Value {
    let lo = b.ins().iconst(I64, lo);
    let hi = b.ins().iconst(I64, hi);
    let v = b.ins().smax(v, lo);
    b.ins().smin(v, hi)
}

/// Reads at most `limit` bytes of the string at `addr` into a new entry
/// of `ctx`'s string ring; its handle (0 after raising on a fault).
fn read_string(
    b: &mut FunctionBuilder,
    r: Rings,
    ctx: Value,
    addr: Value,
    limit: Value,
    kind: Value,
) -> Value {
    let need = round8(b, limit);
    let (pos, entry) = place_entry(b, r, ctx, need);
    let dst = b.ins().iadd_imm_s(entry, ENTRY_FIXED as i64);

    let (next, scan, found, fault, finish) = (
        b.create_block(),
        b.create_block(),
        b.create_block(),
        b.create_block(),
        b.create_block(),
    );
    b.append_block_param(next, I64); // bytes read so far
    b.append_block_param(scan, I64); // bytes read before this chunk
    b.append_block_param(scan, I64); // its bytes scanned
    b.append_block_param(scan, I64); // its length
    b.append_block_param(found, I64); // the string's length
    b.append_block_param(finish, I64); // bytes in the entry
    b.append_block_param(finish, I64); // its kind
    let zero = b.ins().iconst(I64, 0);
    b.ins().jump(next, &[zero.into()]);

    // The next chunk: up to the page's end and the limit.
    b.switch_to_block(next);
    let total = b.block_params(next)[0];
    let done = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, total, limit);
    let chunk = b.create_block();
    b.ins().brif(done, found, &[total.into()], chunk, &[]);
    b.switch_to_block(chunk);
    let at = b.ins().iadd(addr, total);
    let in_page = b.ins().band_imm_s(at, PAGE - 1);
    let page = b.ins().iconst(I64, PAGE);
    let in_page = b.ins().isub(page, in_page);
    let left = b.ins().isub(limit, total);
    let want = b.ins().umin(in_page, left);
    let into = b.ins().iadd(dst, total);
    let got = safe_load(b, r.helper, ctx, into, at, want);
    let bad = b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, got, 0);
    b.ins().brif(
        bad,
        fault,
        &[],
        scan,
        &[total.into(), zero.into(), got.into()],
    );

    // Look for the NUL in what came.
    b.switch_to_block(scan);
    let (before, j, n) = (
        b.block_params(scan)[0],
        b.block_params(scan)[1],
        b.block_params(scan)[2],
    );
    let more = b.ins().icmp(IntCC::SignedLessThan, j, n);
    let (byte, chunk_done) = (b.create_block(), b.create_block());
    b.ins().brif(more, byte, &[], chunk_done, &[]);
    b.switch_to_block(chunk_done);
    let total = b.ins().iadd(before, n);
    b.ins().jump(next, &[total.into()]);
    b.switch_to_block(byte);
    let k = b.ins().iadd(before, j);
    let p = b.ins().iadd(dst, k);
    let c = b.ins().uload8(I64, mem(), p, 0);
    let j1 = b.ins().iadd_imm_s(j, 1);
    let nul = b.ins().icmp_imm_s(IntCC::Equal, c, 0);
    b.ins().brif(
        nul,
        found,
        &[k.into()],
        scan,
        &[before.into(), j1.into(), n.into()],
    );

    b.switch_to_block(found);
    let len = b.block_params(found)[0];
    b.ins().jump(finish, &[len.into(), kind.into()]);

    // A fault: the quoted form keeps the address, the others raise.
    b.switch_to_block(fault);
    let quoted = b.ins().icmp_imm_s(IntCC::Equal, kind, kind::QUOTED as i64);
    let (keep, fail) = (b.create_block(), b.create_block());
    b.ins().brif(quoted, keep, &[], fail, &[]);
    b.switch_to_block(keep);
    b.ins().store(mem(), addr, dst, 0);
    let eight = b.ins().iconst(I64, 8);
    let k = b.ins().iconst(I64, kind::FAULT as i64);
    b.ins().jump(finish, &[eight.into(), k.into()]);
    b.switch_to_block(fail);
    let what = b.ins().iconst(I64, RAISE_USER_FAULT);
    raise_with(b, r.header, ctx, what, Some(addr));
    let none = b.ins().iconst(I64, 0);
    let out = b.create_block();
    b.append_block_param(out, I64);
    b.ins().jump(out, &[none.into()]);

    b.switch_to_block(finish);
    let (len, k) = (b.block_params(finish)[0], b.block_params(finish)[1]);
    let h = publish_entry(b, ctx, pos, entry, k, len);
    b.ins().jump(out, &[h.into()]);

    b.switch_to_block(out);
    b.block_params(out)[0]
}

/// Where the next entry of `ctx`'s string ring goes, `need` bytes after
/// its fixed words: at the head, or at the ring's start when it would not
/// fit before the end. Its position and address.
fn place_entry(b: &mut FunctionBuilder, r: Rings, ctx: Value, need: Value) -> (Value, Value) {
    let index = b.ins().iadd_imm_s(ctx, -r.blocks);
    let index = b.ins().ushr_imm_u(index, BLOCK_LEN.trailing_zeros() as i64);
    let ring = b.ins().imul_imm_s(index, RING_LEN as i64);
    let ring = b.ins().iadd_imm_s(ring, r.strings);
    let head = b.ins().load(I64, mem(), ctx, BLOCK_STR_HEAD as i32);
    let need = b.ins().iadd_imm_s(need, ENTRY_FIXED as i64);
    let off = b.ins().band_imm_s(head, RING_LEN as i64 - 1);
    let end = b.ins().iadd(off, need);
    let fits = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, end, RING_LEN as i64);
    let next_lap = b.ins().bor_imm_s(head, RING_LEN as i64 - 1);
    let next_lap = b.ins().iadd_imm_s(next_lap, 1);
    let pos = b.ins().select(fits, head, next_lap);
    let off = b.ins().band_imm_s(pos, RING_LEN as i64 - 1);
    let entry = b.ins().iadd(ring, off);
    (pos, entry)
}

/// Writes the entry's fixed words (its position; kind and length), then
/// the head past it, with release order (the tracer reads an entry once
/// the head is past it); the entry's handle.
fn publish_entry(
    b: &mut FunctionBuilder,
    ctx: Value,
    pos: Value,
    entry: Value,
    kind: Value,
    len: Value,
) -> Value {
    b.ins().store(mem(), pos, entry, 0);
    let shape = b.ins().ishl_imm_u(kind, 32);
    let shape = b.ins().bor(shape, len);
    b.ins().store(mem(), shape, entry, 8);
    let used = round8(b, len);
    let new_head = b.ins().iadd(pos, used);
    let new_head = b.ins().iadd_imm_s(new_head, ENTRY_FIXED as i64);
    let head_at = b.ins().iadd_imm_s(ctx, BLOCK_STR_HEAD as i64);
    b.ins().atomic_store(mem(), new_head, head_at);
    let low = b.ins().ushr_imm_u(pos, 3);
    let low = b.ins().band_imm_s(low, 0x1fff_ffff);
    let low = b.ins().ishl_imm_u(low, 32);
    let h = b.ins().bor(low, len);
    b.ins().bor_imm_s(h, STR_TAG as i64)
}

/// Values kept in an entry of kind `k`, for the tracer to render (as
/// `__syscall_retstr`, which depends on them alone); the handle.
pub(super) fn keep_values(
    b: &mut FunctionBuilder,
    r: Rings,
    ctx: Value,
    values: &[Value],
    k: u64,
) -> Value {
    let len = b.ins().iconst(I64, 8 * values.len() as i64);
    let (pos, entry) = place_entry(b, r, ctx, len);
    for (i, &v) in values.iter().enumerate() {
        b.ins()
            .store(mem(), v, entry, (ENTRY_FIXED + 8 * i as u64) as i32);
    }
    let k = b.ins().iconst(I64, k as i64);
    publish_entry(b, ctx, pos, entry, k, len)
}

/// `v` rounded up to a multiple of 8.
fn round8(b: &mut FunctionBuilder, v: Value) -> Value {
    let v = b.ins().iadd_imm_s(v, 7);
    b.ins().band_imm_s(v, !7)
}

/// The safe load: `len` bytes at `src` in `ctx`'s process to `dst`, by
/// `process_vm_readv` from the region's helper. The bytes read, or
/// `-errno` (a bad address is `-EFAULT`, never a fault).
pub(super) fn safe_load(
    b: &mut FunctionBuilder,
    helper: i64,
    ctx: Value,
    dst: Value,
    src: Value,
    len: Value,
) -> Value {
    // Two iovecs: ours, the program's.
    let iov = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 32, 3));
    let local = b.ins().stack_addr(I64, iov, 0);
    let remote = b.ins().stack_addr(I64, iov, 16);
    b.ins().store(mem(), dst, local, 0);
    b.ins().store(mem(), len, local, 8);
    b.ins().store(mem(), src, remote, 0);
    b.ins().store(mem(), len, remote, 8);
    let pid = b.ins().load(
        I64,
        mem(),
        ctx,
        (offset_of!(HandlerContext, probe) + offset_of!(ProbeValues, pid)) as i32,
    );
    let one = b.ins().iconst(I64, 1);
    syscall(b, helper, PROCESS_VM_READV, &[pid, local, one, remote, one])
}

/// `syscall(nr, args...)` through the region's helper (at most five
/// arguments; the sixth is 0): its raw result (`-errno` on failure).
fn syscall(b: &mut FunctionBuilder, helper: i64, nr: i64, args: &[Value]) -> Value {
    let mut sig = cranelift_codegen::ir::Signature::new(cranelift_codegen::isa::CallConv::SystemV);
    for _ in 0..6 {
        sig.params.push(AbiParam::new(I64));
    }
    sig.returns.push(AbiParam::new(I64));
    let sig = b.import_signature(sig);
    let mut vals = vec![b.ins().iconst(I64, nr)];
    vals.extend_from_slice(args);
    while vals.len() < 6 {
        let zero = b.ins().iconst(I64, 0);
        vals.push(zero);
    }
    let at = b.ins().iconst(I64, helper);
    let call = b.ins().call_indirect(sig, at, &vals);
    b.inst_results(call)[0]
}
