//! Function entry probes in the program: the machine code of the function
//! common entry and of the per-site stubs, and where a thread found in a
//! stub goes when the site is taken out. Hand-assembled like `code`, for
//! the same reason: the detach maps every stub offset back to the
//! program's own instruction.
//!
//! A patched function entry is its first instructions (5 to 21 bytes, no
//! branch but a leaf's final `ret`, proven by the function's disassembly
//! to hold no branch target), overwritten with a `jmp` to its stub (`int3` over the rest,
//! never reached). The stub runs the hooks before those instructions, as
//! an `int3` probe sees them, then the instructions relocated, then jumps
//! back. With D the relocated instructions' length:
//!
//! ```text
//! stub:  0 lea -128(%rsp),%rsp   (a `.statement` site's red zone)
//!        5 push %rax
//!        6 movabs $list,%rax     (the site's hooks: n, then n triples)
//!       16 push %rax
//!       17 movabs $fcommon,%rax
//!       27 call *%rax            (fcommon returns with `ret $8`)
//!       29 pop %rax
//!       30 lea 128(%rsp),%rsp
//!       38 the displaced instructions, relocated (D bytes)
//!   38 + D jmp back              (the instruction after them)
//! ```
//!
//! The function common entry saves flags and the caller-saved registers
//! it uses on the program's stack, finds the thread's block with
//! `rdgsbase` (a thread with no block: a thread created after the tracer
//! died, runs no hook), claims it (a thread already in a handler skips and
//! counts), stores the argument registers, and on the block's stack calls
//! each hook of the list — `fn(ctx)` with the probe's and the point's
//! in-process index — unless the session's stop flag is up. Every
//! register but rax (the stub's to restore) comes back as it was,
//! xmm0–xmm7 too (a function's floating-point arguments: the handlers are
//! integer code, but nothing here depends on how Cranelift lowers them).

use std::mem::offset_of;

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock,
};

use super::code::{Asm, R8, R9, RDI, RDX, RSI, probe_field};
use super::layout::{BLOCK_HITS, BLOCK_SAVED_RSP, BLOCK_SKIPPED, BLOCK_STACK_TOP};
use crate::script::context::{HandlerContext, ProbeValues, event};

/// Offsets in a function stub (see the module doc).
pub const HEAD_LEN: u64 = 38;
const RETURNED: u64 = 29;
/// The most bytes displaced from a site (a 64-byte slot holds the stub).
pub const MAX_DISPLACED: u64 = 21;
/// A stub's length for `d` relocated bytes.
pub fn stub_len(d: u64) -> u64 {
    HEAD_LEN + d + 5
}
const _: () = assert!(HEAD_LEN + MAX_DISPLACED + 5 <= 64);

fn ctx_field(f: usize) -> u32 {
    f as u32
}

/// The function common entry, for a region whose stop flag is at `stop`
/// and whose handlers get `max_action` statements.
pub fn common(stop: u64, max_action: i64) -> Vec<u8> {
    let mut a = Asm::new();
    let (out, skip, next, done) = (a.label(), a.label(), a.label(), a.label());
    // pushfq; push rcx, rdx, rsi, rdi, r8, r9, r10, r11
    a.bytes(&[
        0x9c, 0x51, 0x52, 0x56, 0x57, 0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53,
    ]);
    a.bytes(&[0xf3, 0x49, 0x0f, 0xae, 0xcb]); // rdgsbase r11
    a.bytes(&[0x4d, 0x85, 0xdb, 0x0f, 0x84]); // test r11, r11; jz out
    a.rel32(out);
    a.claim_or(skip); // clobbers rcx
    a.bytes(&[0x48, 0x8b, 0x4c, 0x24, 0x38]); // mov rcx, [rsp+56]
    let arg = |i: usize| probe_field(offset_of!(ProbeValues, args) + 8 * i);
    for (i, reg) in [RDI, RSI, RDX, 1, R8, R9].into_iter().enumerate() {
        a.store(arg(i), reg);
    }
    a.store_imm(
        probe_field(offset_of!(ProbeValues, event)),
        event::FUNCTION as u32,
    );
    a.bytes(&[0x4c, 0x8b, 0x54, 0x24, 0x50]); // mov r10, [rsp+80]: the list
    a.store(BLOCK_SAVED_RSP as u32, 4); // mov [r11+SAVED], rsp
    a.bytes(&[0x49, 0x8d, 0xa3]); // lea rsp, [r11+TOP]
    a.d32(BLOCK_STACK_TOP as u32);
    a.bytes(&[0x53, 0x41, 0x54, 0x41, 0x55]); // push rbx, r12, r13
    a.bytes(&[0x48, 0x81, 0xec, 0x88, 0, 0, 0]); // sub rsp, 136
    for x in 0..8u8 {
        // movdqa [rsp+16*x], xmmX: a function's floating-point arguments
        a.bytes(&[0x66, 0x0f, 0x7f, 0x44 | (x << 3), 0x24, 16 * x]);
    }
    a.bytes(&[0x4c, 0x89, 0xdb]); // mov rbx, r11
    a.bytes(&[0x4d, 0x89, 0xd4]); // mov r12, r10
    a.bytes(&[0x4d, 0x8b, 0x2c, 0x24]); // mov r13, [r12]
    a.bytes(&[0x49, 0x83, 0xc4, 0x08]); // add r12, 8
    a.bytes(&[0x49, 0xff, 0x83]); // inc qword [r11+HITS]
    a.d32(BLOCK_HITS as u32);
    a.bind(next);
    a.bytes(&[0x4d, 0x85, 0xed, 0x0f, 0x84]); // test r13, r13; jz done
    a.rel32(done);
    a.bytes(&[0x48, 0xb8]); // movabs rax, stop
    a.bytes(&stop.to_le_bytes());
    a.bytes(&[0x48, 0x8b, 0x00, 0x48, 0x85, 0xc0, 0x0f, 0x85]); // mov rax,[rax]; test; jnz done
    a.rel32(done);
    a.bytes(&[0x49, 0x89, 0xdb]); // mov r11, rbx
    for f in [
        offset_of!(HandlerContext, error),
        offset_of!(HandlerContext, nesting),
        offset_of!(HandlerContext, location),
    ] {
        a.store_imm(ctx_field(f), 0);
    }
    a.bytes(&[0x48, 0xb8]); // movabs rax, max_action
    a.bytes(&max_action.to_le_bytes());
    a.store(ctx_field(offset_of!(HandlerContext, actions_left)), 0);
    a.bytes(&[0x49, 0x8b, 0x44, 0x24, 0x08]); // mov rax, [r12+8]
    a.store(ctx_field(offset_of!(HandlerContext, probe_index)), 0);
    a.bytes(&[0x49, 0x8b, 0x44, 0x24, 0x10]); // mov rax, [r12+16]
    a.store(ctx_field(offset_of!(HandlerContext, point_index)), 0);
    a.bytes(&[0x4c, 0x89, 0xdf]); // mov rdi, r11
    a.bytes(&[0x41, 0xff, 0x14, 0x24]); // call [r12]
    a.bytes(&[0x49, 0x83, 0xc4, 0x18]); // add r12, 24
    a.bytes(&[0x49, 0xff, 0xcd]); // dec r13
    a.bytes(&[0xe9]); // jmp next
    a.rel32(next);
    a.bind(done);
    a.bytes(&[0x49, 0x89, 0xdb]); // mov r11, rbx
    for x in 0..8u8 {
        // movdqa xmmX, [rsp+16*x]
        a.bytes(&[0x66, 0x0f, 0x6f, 0x44 | (x << 3), 0x24, 16 * x]);
    }
    a.bytes(&[0x48, 0x81, 0xc4, 0x88, 0, 0, 0]); // add rsp, 136
    a.bytes(&[0x41, 0x5d, 0x41, 0x5c, 0x5b]); // pop r13, r12, rbx
    a.load(4, BLOCK_SAVED_RSP as u32); // mov rsp, [r11+SAVED]
    a.store_imm(super::layout::BLOCK_BUSY as u32, 0);
    a.bind(out);
    // pop r11, r10, r9, r8, rdi, rsi, rdx, rcx; popfq; ret 8
    a.bytes(&[
        0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x5f, 0x5e, 0x5a, 0x59, 0x9d,
    ]);
    a.bytes(&[0xc2, 0x08, 0x00]);
    a.bind(skip);
    a.bytes(&[0x49, 0xff, 0x83]); // inc qword [r11+SKIPPED]
    a.d32(BLOCK_SKIPPED as u32);
    a.bytes(&[0xe9]);
    a.rel32(out);
    a.finish()
}

/// The instructions a function entry at `site` displaces: decoded from
/// `code` (the function's bytes from `start`, with the site's original
/// bytes), at least 5 bytes of plain instructions (no branch, call,
/// return or syscall) that end inside the function, with no branch of the
/// function landing inside them. `None` if the site cannot be patched.
pub fn displaced(code: &[u8], start: u64, site: u64) -> Option<Vec<Instruction>> {
    let insns = decode_function(code, start);
    let first = insns.iter().position(|i| i.ip() == site)?;
    let mut taken = Vec::new();
    let mut len = 0;
    for i in &insns[first..] {
        if len >= 5 {
            break;
        }
        let plain = i.flow_control() == FlowControl::Next
            && !matches!(i.code(), Code::Syscall | Code::Sysenter | Code::Int3);
        // A leaf's `ret` ends the sequence: the stub returns itself.
        let ret = i.code() == Code::Retnq;
        if !plain && !ret {
            return None;
        }
        len += i.len() as u64;
        taken.push(*i);
        if ret {
            break;
        }
    }
    if len < 5 || len > MAX_DISPLACED {
        return None;
    }
    (!branch_lands_in(&insns, site + 1..site + len)).then_some(taken)
}

/// A function's instructions, decoded from its bytes `code` at `start`
/// up to the first that does not decode.
pub(super) fn decode_function(code: &[u8], start: u64) -> Vec<Instruction> {
    Decoder::with_ip(64, code, start, DecoderOptions::NONE)
        .into_iter()
        .take_while(|i| i.code() != Code::INVALID)
        .collect()
}

/// Whether a direct branch or call of `insns` lands inside `range` (the
/// bytes a patch would replace, but for their first).
pub(super) fn branch_lands_in(insns: &[Instruction], range: std::ops::Range<u64>) -> bool {
    insns.iter().any(|b| {
        matches!(
            b.flow_control(),
            FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch | FlowControl::Call
        ) && range.contains(&b.near_branch_target())
    })
}

/// A function stub (see the module doc) at `stub` for the instructions
/// `displaced` of the site, calling `fcommon` with `list`; and the offset
/// in the stub of each relocated instruction. `None` if they cannot be
/// relocated there (a rip-relative operand out of reach).
pub fn stub(
    stub: u64,
    displaced: &[Instruction],
    list: u64,
    fcommon: u64,
) -> Option<(Vec<u8>, Vec<u64>)> {
    let last = displaced.last()?;
    let mut insns = displaced.to_vec();
    if last.code() != Code::Retnq {
        insns.push(Instruction::with_branch(Code::Jmp_rel32_64, last.next_ip()).ok()?);
    }
    let block = InstructionBlock::new(&insns, stub + HEAD_LEN);
    let out = BlockEncoder::encode(
        64,
        block,
        BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS,
    )
    .ok()?;
    let mut b = Vec::with_capacity(64);
    b.extend_from_slice(&[0x48, 0x8d, 0x64, 0x24, 0x80, 0x50, 0x48, 0xb8]);
    b.extend_from_slice(&list.to_le_bytes());
    b.extend_from_slice(&[0x50, 0x48, 0xb8]);
    b.extend_from_slice(&fcommon.to_le_bytes());
    b.extend_from_slice(&[0xff, 0xd0, 0x58]);
    b.extend_from_slice(&[0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0]);
    debug_assert_eq!(b.len() as u64, HEAD_LEN);
    b.extend_from_slice(&out.code_buffer);
    let offsets = out
        .new_instruction_offsets
        .iter()
        .map(|&o| HEAD_LEN + o as u64)
        .collect();
    (b.len() <= 64).then_some((b, offsets))
}

/// Where a thread stopped at `off` in a function stub goes when the site
/// is taken out: the rsp adjustment, whether rax is to be taken from the
/// stack (at that offset from rsp first), and the new rip, as an offset
/// from the site. `offsets`: the stub offsets of the relocated
/// instructions and of the jump back; `lens`: the original instructions'
/// lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub rax_at: Option<u64>,
    pub rsp_add: u64,
    pub site_off: u64,
}

pub fn stub_exit(off: u64, offsets: &[u64], lens: &[u64]) -> Option<Exit> {
    let e = |rax_at, rsp_add, site_off| {
        Some(Exit {
            rax_at,
            rsp_add,
            site_off,
        })
    };
    match off {
        0 => e(None, 0, 0),
        5 | 30 => e(None, 128, 0),
        6 | 16 | RETURNED => e(Some(0), 136, 0),
        17 | 27 => e(Some(8), 144, 0),
        _ => {
            let k = offsets.iter().position(|&o| o == off)?;
            e(None, 0, lens[..k].iter().sum())
        }
    }
}

/// Whether this kernel lets programs read the GS base (`rdgsbase`, which
/// the function common entry uses to tell a thread with a block from one
/// without): HWCAP2_FSGSBASE.
pub fn rdgsbase_works() -> bool {
    // SAFETY: getauxval reads our own auxiliary vector.
    unsafe { libc::getauxval(libc::AT_HWCAP2) & 2 != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::code::tests::decode_all;
    use iced_x86::Register;

    #[test]
    fn the_common_entry_decodes_and_balances_its_stack() {
        let c = common(0x3f00_0040_0000, 1000);
        let ins = decode_all(&c, 0);
        assert!(ins.iter().all(|i| i.code() != Code::INVALID));
        let pushes = ins
            .iter()
            .filter(|i| matches!(i.code(), Code::Push_r64 | Code::Pushfq))
            .count();
        let pops = ins
            .iter()
            .filter(|i| matches!(i.code(), Code::Pop_r64 | Code::Popfq))
            .count();
        assert_eq!((pushes, pops), (12, 12));
        assert!(
            ins.iter()
                .any(|i| i.code() == Code::Rdgsbase_r64 && i.op0_register() == Register::R11)
        );
        let ret = ins.iter().find(|i| i.code() == Code::Retnq_imm16).unwrap();
        assert_eq!(ret.immediate16(), 8);
        // The argument vector registers are saved and restored.
        let saved = ins
            .iter()
            .filter(|i| i.code() == Code::Movdqa_xmmm128_xmm)
            .count();
        let restored = ins
            .iter()
            .filter(|i| i.code() == Code::Movdqa_xmm_xmmm128)
            .count();
        assert_eq!((saved, restored), (8, 8));
    }

    #[test]
    fn a_prologue_is_displaced_and_relocated() {
        // push rbp; mov rbp,rsp; mov rax,[rip+0x100]; ret
        let start = 0x55_0000_1000u64;
        let code = [
            0x55, 0x48, 0x89, 0xe5, 0x48, 0x8b, 0x05, 0x00, 0x01, 0, 0, 0xc3,
        ];
        let d = displaced(&code, start, start).unwrap();
        assert_eq!(d.len(), 3);
        let at = start - 0x1000;
        let (bytes, offsets) = stub(at, &d, 0x3f00_0000_8000, 0x3f00_0000_0800).unwrap();
        let ins = decode_all(&bytes, at);
        let mov = ins.iter().find(|i| i.ip() == at + offsets[2]).unwrap();
        assert_eq!(mov.memory_displacement64(), start + 11 + 0x100);
        let back = ins.last().unwrap();
        assert_eq!(back.near_branch64(), start + 11);
        assert_eq!(bytes.len() as u64, stub_len(11));
        let lens: Vec<u64> = d.iter().map(|i| i.len() as u64).collect();
        assert_eq!(stub_exit(offsets[1], &offsets, &lens).unwrap().site_off, 1);
        assert_eq!(stub_exit(offsets[3], &offsets, &lens).unwrap().site_off, 11);
        for i in &ins[..8] {
            assert!(
                stub_exit(i.ip() - at, &offsets, &lens).is_some(),
                "{:?}",
                i.code()
            );
        }
    }

    #[test]
    fn a_branch_into_the_prologue_or_a_short_function_refuses() {
        let start = 0x1000u64;
        // xor eax,eax; L: inc eax; cmp eax,10; jne L; ret
        let code = [0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3];
        assert!(displaced(&code, start, start).is_none());
        // xor eax,eax; ret
        assert!(displaced(&[0x31, 0xc0, 0xc3], start, start).is_none());
        // jmp *[rip+x] (a PLT entry)
        assert!(displaced(&[0xff, 0x25, 0, 0, 0, 0, 0x90], start, start).is_none());
        // A 5-byte leaf, lea 1(%rdi),%rax; ret: the stub returns itself.
        let leaf = [0x48, 0x8d, 0x47, 0x01, 0xc3];
        let d = displaced(&leaf, start, start).unwrap();
        assert_eq!(d.len(), 2);
        let (bytes, offsets) = stub(0x2000, &d, 0x3000, 0x4000).unwrap();
        assert_eq!(offsets.len(), 2);
        assert_eq!(*bytes.last().unwrap(), 0xc3);
    }
}
