//! The clock builtins of in-process handlers (`utap_runtime::dataplane::
//! clock` says how the clock works and why it is safe): `gettimeofday_*`,
//! `local_clock_ns`, `cpu_clock_ns` from the time stamp counter and the
//! header's parameters, `get_cycles` and `cpu` from `rdtsc`/`rdtscp`,
//! which Cranelift has no instruction for: two hand-assembled helpers at
//! the start of the region's code part, called by address.

use std::mem::offset_of;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, SigRef, Value};
use cranelift_frontend::FunctionBuilder;
use utap_runtime::dataplane::clock::{Clock, RDTSC, RDTSCP_CPU};
use utap_runtime::dataplane::layout::Header;

use super::{I64, Runtime, mem};
use crate::CodegenError;

/// Bytes the helpers take at the start of the code part.
pub(super) const HELPERS_LEN: u64 = 64;
const RDTSCP_AT: u64 = 32;

/// Where the helpers are, once written.
#[derive(Clone, Copy)]
pub(super) struct Helpers {
    rdtsc: u64,
    rdtscp_cpu: u64,
}

/// Writes the helpers at `at`, in the region's code part (writable in
/// the tracer's mapping).
///
/// # Safety
/// `at..at + HELPERS_LEN` is the region's, mapped here, and nothing else
/// is placed there.
pub(super) unsafe fn write_helpers(at: u64) -> Helpers {
    const _: () = assert!(RDTSC.len() as u64 <= RDTSCP_AT);
    const _: () = assert!(RDTSCP_AT + RDTSCP_CPU.len() as u64 <= HELPERS_LEN);
    // SAFETY: as the caller promises.
    unsafe {
        std::ptr::copy_nonoverlapping(RDTSC.as_ptr(), at as *mut u8, RDTSC.len());
        std::ptr::copy_nonoverlapping(
            RDTSCP_CPU.as_ptr(),
            (at + RDTSCP_AT) as *mut u8,
            RDTSCP_CPU.len(),
        );
    }
    Helpers {
        rdtsc: at,
        rdtscp_cpu: at + RDTSCP_AT,
    }
}

/// Tries of the sequence count before a reader takes what it read (the
/// program may have spoilt the count).
const TRIES: i64 = 4;

/// (name, divisor, time of day rather than monotonic, parameters).
const CLOCKS: [(&str, i64, i64, usize); 6] = [
    ("utap_bi_gettimeofday_ns", 1, 1, 1),
    ("utap_bi_gettimeofday_us", 1_000, 1, 1),
    ("utap_bi_gettimeofday_ms", 1_000_000, 1, 1),
    ("utap_bi_gettimeofday_s", 1_000_000_000, 1, 1),
    ("utap_bi_local_clock_ns", 1, 0, 1),
    ("utap_bi_cpu_clock_ns", 1, 0, 2),
];

impl Runtime<'_> {
    /// The clock builtins.
    pub(super) fn define_clock(&mut self, h: Helpers) -> Result<(), CodegenError> {
        let clock = self.header + offset_of!(Header, clock) as i64;
        let now = self.define("utap_ip_now", 2, true, |b, a, _| {
            let v = now(b, clock, h.rdtsc, a[1]);
            b.ins().return_(&[v]);
        })?;
        for (name, div, real, params) in CLOCKS {
            self.define(name, params, true, |b, a, fref| {
                let f = fref(b, now);
                let real = b.ins().iconst(I64, real);
                let call = b.ins().call(f, &[a[0], real]);
                let mut v = b.inst_results(call)[0];
                if div > 1 {
                    v = b.ins().sdiv_imm_s(v, div);
                }
                b.ins().return_(&[v]);
            })?;
        }
        for (name, at) in [
            ("utap_bi_get_cycles", h.rdtsc),
            ("utap_bi_cpu", h.rdtscp_cpu),
        ] {
            self.define(name, 1, true, |b, _, _| {
                let v = call_helper(b, at);
                b.ins().return_(&[v]);
            })?;
        }
        Ok(())
    }
}

fn helper_sig(b: &mut FunctionBuilder) -> SigRef {
    let mut sig = cranelift_codegen::ir::Signature::new(cranelift_codegen::isa::CallConv::SystemV);
    sig.returns.push(cranelift_codegen::ir::AbiParam::new(I64));
    b.import_signature(sig)
}

fn call_helper(b: &mut FunctionBuilder, at: u64) -> Value {
    let sig = helper_sig(b);
    let addr = b.ins().iconst(I64, at as i64);
    let call = b.ins().call_indirect(sig, addr, &[]);
    b.inst_results(call)[0]
}

/// Nanoseconds now: CLOCK_MONOTONIC's, plus the time of day's offset when
/// `real` is 1. A seqlock read of the parameters around the counter,
/// tried [`TRIES`] times.
fn now(b: &mut FunctionBuilder, clock: i64, rdtsc: u64, real: Value) -> Value {
    let field = |f: usize| clock + f as i64;
    let try_ = b.create_block();
    b.append_block_param(try_, I64);
    let done = b.create_block();
    b.append_block_param(done, I64);
    let again = b.create_block();
    let zero = b.ins().iconst(I64, 0);
    b.ins().jump(try_, &[zero.into()]);

    b.switch_to_block(try_);
    let tries = b.block_params(try_)[0];
    let seq_at = b.ins().iconst(I64, field(offset_of!(Clock, seq)));
    let s1 = b.ins().atomic_load(I64, mem(), seq_at);
    let load = |b: &mut FunctionBuilder, f: usize| {
        let at = b.ins().iconst(I64, field(f));
        b.ins().atomic_load(I64, mem(), at)
    };
    let base_tsc = load(b, offset_of!(Clock, base_tsc));
    let base_ns = load(b, offset_of!(Clock, base_ns));
    let mult = load(b, offset_of!(Clock, mult));
    let offset = load(b, offset_of!(Clock, real_offset));
    let t = call_helper(b, rdtsc);
    let s2 = b.ins().atomic_load(I64, mem(), seq_at);
    let delta = b.ins().isub(t, base_tsc);
    let lo = b.ins().imul(delta, mult);
    let hi = b.ins().umulhi(delta, mult);
    let lo = b.ins().ushr_imm_u(lo, 32);
    let hi = b.ins().ishl_imm_u(hi, 32);
    let scaled = b.ins().bor(hi, lo);
    let mono = b.ins().iadd(base_ns, scaled);
    let off = b.ins().imul(offset, real);
    let v = b.ins().iadd(mono, off);
    let same = b.ins().icmp(IntCC::Equal, s1, s2);
    let odd = b.ins().band_imm_u(s1, 1);
    let even = b.ins().icmp_imm_s(IntCC::Equal, odd, 0);
    let stable = b.ins().band(same, even);
    let tries1 = b.ins().iadd_imm_s(tries, 1);
    let last = b
        .ins()
        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, tries1, TRIES);
    let give_up = b.ins().bor(stable, last);
    b.ins().brif(give_up, done, &[v.into()], again, &[]);

    b.switch_to_block(again);
    b.ins().jump(try_, &[tries1.into()]);

    b.switch_to_block(done);
    b.block_params(done)[0]
}
