//! Function entry probes in the program: the machine code of the function
//! common entry and of the per-site stubs, and where a thread found in a
//! stub goes when the site is taken out. Hand-assembled like `code`, for
//! the same reason: the detach maps every stub offset back to the
//! program's own instruction.
//!
//! A patched function entry is its first instructions (5 to 21 bytes, no
//! branch but conditional jumps, a final `ret` or `jmp`, or a final direct
//! or `%rip`-relative `call`, which the stub emulates: a `-pg` build's
//! mcount call; proven by the
//! module's disassembly to hold no branch target), overwritten with a `jmp`
//! to its stub (`int3` over the rest, never reached). The stub runs the hooks before those instructions, as
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
//! The function common entry saves the caller-saved registers it uses on
//! the program's stack (not the flags: at a function's entry and after
//! its return they are dead by the ABI, and DF is clear), finds the
//! thread's block with `rdgsbase` (a thread with no block of this region:
//! one created after the tracer died, runs no hook), claims it without a
//! locked instruction (a thread already in a handler skips and counts), stores the argument registers, and on the block's stack calls
//! each hook of the list — `fn(ctx)` with the probe's and the point's
//! in-process index — unless the session's stop flag is up. Every
//! register but rax (the stub's to restore) comes back as it was,
//! xmm0–xmm7 too (a function's floating-point arguments: the handlers are
//! integer code, but nothing here depends on how Cranelift lowers them).
//!
//! A site with return hooks has a second list (the list's second word):
//! after the entry hooks, the common entry pushes a frame (the slot, the
//! return address, the return list, the arguments) on the thread's shadow
//! stack and writes the return stub's address in the slot. The return
//! stub ([`ret_stub`]) pops the frame, writes the real address back where
//! its own `ret` takes it, and runs the return hooks.

use std::mem::offset_of;

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock, MemoryOperand, Register,
};

use super::code::{Asm, R8, R9, RAX, RDI, RDX, RSI, probe_field};
use super::layout::{
    BLOCK_BIAS, BLOCK_BUSY, BLOCK_HITS, BLOCK_LEN, BLOCK_MISSED, BLOCK_OWNER_FS, BLOCK_REGS,
    BLOCK_SAVED_RSP, BLOCK_SHADOW, BLOCK_SITE_FUNC, BLOCK_SKIPPED, BLOCK_STACK_TOP, SHADOW_FRAMES,
};
use crate::elf::sdt::Operand;
use crate::hit::MarkArg;
use crate::script::context::{HandlerContext, ProbeValues, event};

/// Offsets in a function stub (see the module doc).
pub const HEAD_LEN: u64 = 38;
const RETURNED: u64 = 29;
/// The most bytes displaced from a site (a 64-byte slot holds the stub).
pub const MAX_DISPLACED: u64 = 21;
/// The most bytes a stub for `d` displaced bytes takes (a final call's
/// emulation takes 13 more than the call, a jump back 5; never past its
/// slot).
pub fn stub_len(d: u64) -> u64 {
    (HEAD_LEN + d + 13).min(64)
}
const _: () = assert!(HEAD_LEN + MAX_DISPLACED + 5 <= 64);

fn ctx_field(f: usize) -> u32 {
    f as u32
}

/// The function common entry, for a region whose stop flag is at `stop`
/// and whose handlers get `max_action` statements; a site with return
/// hooks has its return address replaced by `ret_stub` (see
/// [`ret_stub`]). With `regs`, every general purpose register as the
/// site saw it goes to the block too (target variables, `super::plans`);
/// with `site`, the site's words ([`Site`]).
pub fn common(
    stop: u64,
    max_action: i64,
    ret_stub: u64,
    blocks: Blocks,
    regs: bool,
    site: bool,
) -> Vec<u8> {
    let mut a = Asm::new();
    let (out, skip, unclaim) = (a.label(), a.label(), a.label());
    // push rcx, rdx, rsi, rdi, r8, r9, r10, r11 (no flags: at a call they
    // are dead, and DF is clear, by the ABI)
    a.bytes(&[
        0x51, 0x52, 0x56, 0x57, 0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53,
    ]);
    a.bytes(&[0xf3, 0x49, 0x0f, 0xae, 0xcb]); // rdgsbase r11
    ours_or(&mut a, blocks, out);
    owner_or(&mut a, out);
    // Stopped (or utap died): nothing of the block is written, so a dead
    // session's entries cost a test even where processes share a block
    // (a fork after utap's death).
    a.stop_or(RAX, stop, out);
    claim_or(&mut a, skip);
    a.bytes(&[0x48, 0x8b, 0x4c, 0x24, 0x38]); // mov rcx, [rsp+56]
    for (i, reg) in [RDI, RSI, RDX, 1, R8, R9].into_iter().enumerate() {
        a.store(arg_field(i), reg);
    }
    if regs {
        store_regs(&mut a);
    }
    a.store_imm(
        probe_field(offset_of!(ProbeValues, event)),
        event::FUNCTION as u32,
    );
    a.bytes(&[0x4c, 0x8b, 0x54, 0x24, 0x48]); // mov r10, [rsp+72]: the list
    run_hooks(&mut a, stop, max_action, site);
    hijack(&mut a, stop, ret_stub, unclaim);
    a.bind(unclaim);
    a.store_imm(BLOCK_BUSY as u32, 0);
    a.bind(out);
    // pop r11, r10, r9, r8, rdi, rsi, rdx, rcx; ret 8
    a.bytes(&[
        0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x5f, 0x5e, 0x5a, 0x59,
    ]);
    a.bytes(&[0xc2, 0x08, 0x00]);
    a.bind(skip);
    a.bytes(&[0x49, 0xff, 0x83]); // inc qword [r11+SKIPPED]
    a.d32(BLOCK_SKIPPED as u32);
    a.bytes(&[0xe9]);
    a.rel32(out);
    a.finish()
}

/// In the function common entry (after its pushes, r11 the block, rax
/// and r11 clobbered, every other register the program's): the site's
/// registers to the block in DWARF order, rax, r11 and rsp from where
/// the stub and the entry put them, rip left 0 (no plan reads it); and
/// the module's bias, the last word of the site's hook list.
fn store_regs(a: &mut Asm) {
    let at = |r: u64| (BLOCK_REGS + 8 * r) as u32;
    a.bytes(&[0x48, 0x8b, 0x44, 0x24, 80]); // mov rax, [rsp+80]: the stub's push
    a.store(at(0), RAX);
    for (dwarf, reg) in [
        (1, RDX),
        (2, 1),
        (3, 3),
        (4, RSI),
        (5, RDI),
        (6, 5),
        (8, R8),
        (9, R9),
    ] {
        a.store(at(dwarf), reg);
    }
    a.bytes(&[0x48, 0x8d, 0x84, 0x24]); // lea rax, [rsp+SLOT]: the site's rsp
    a.d32(HIJACK_SLOT as u32);
    a.store(at(7), RAX);
    a.store(at(10), 10); // r10: untouched so far
    a.bytes(&[0x48, 0x8b, 0x04, 0x24]); // mov rax, [rsp]: the pushed r11
    a.store(at(11), RAX);
    for r in 12..16u8 {
        a.store(at(u64::from(r)), r);
    }
    a.store_imm(at(16), 0);
}

/// What a hook list says of its site after the hooks (`Plane::list`),
/// copied to the block before the hooks run when the image's handlers
/// read it: the load bias of the site's module (target variables at
/// link-time addresses) and the function's name as a name handle
/// (`probefunc()` at a wildcard's sites).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Site {
    pub bias: u64,
    pub func: i64,
}

/// In `run_hooks`, the list in r10: its site words to the block (r11).
/// Clobbers rax and rcx.
fn copy_site(a: &mut Asm) {
    a.bytes(&[0x49, 0x6b, 0x0a, 24]); // imul rcx, [r10], 24
    a.bytes(&[0x49, 0x8b, 0x44, 0x0a, 16]); // mov rax, [r10+rcx+16]: the bias
    a.store(BLOCK_BIAS as u32, RAX);
    a.bytes(&[0x49, 0x8b, 0x44, 0x0a, 24]); // mov rax, [r10+rcx+24]: the name
    a.store(BLOCK_SITE_FUNC as u32, RAX);
}

/// The per-thread blocks of a region: the first one's address and how
/// many there are.
#[derive(Clone, Copy, Debug)]
pub struct Blocks {
    pub start: u64,
    pub count: u64,
}

/// Goes to `not_ours` unless r11 (`%gs`) is one of this region's blocks:
/// no block, or another region's (a session after ours, when ours died
/// and left its stubs in the program), runs none of our hooks. Clobbers
/// rax and rcx.
fn ours_or(a: &mut Asm, blocks: Blocks, not_ours: usize) {
    a.bytes(&[0x4c, 0x89, 0xd8, 0x48, 0xb9]); // mov rax, r11; movabs rcx, start
    a.bytes(&blocks.start.to_le_bytes());
    a.bytes(&[0x48, 0x29, 0xc8, 0x48, 0xb9]); // sub rax, rcx; movabs rcx, span
    a.bytes(&(blocks.count * BLOCK_LEN).to_le_bytes());
    a.bytes(&[0x48, 0x39, 0xc8, 0x0f, 0x83]); // cmp rax, rcx; jae not_ours
    a.rel32(not_ours);
}

/// `$argN`'s slot in the block's context.
fn arg_field(i: usize) -> u32 {
    probe_field(offset_of!(ProbeValues, args) + 8 * i)
}

/// Claims the block for this hit, or goes to `busy` (the thread is in a
/// handler already: a signal handler's call). The block is the thread's
/// own, so only a signal on this thread can come between the test and the
/// store, and its hit is over before this one goes on: no locked
/// instruction is needed.
fn claim_or(a: &mut Asm, busy: usize) {
    a.bytes(&[0x49, 0x83, 0xbb]); // cmp qword [r11+BUSY], 0; jne busy
    a.d32(BLOCK_BUSY as u32);
    a.bytes(&[0x00, 0x0f, 0x85]);
    a.rel32(busy);
    a.store_imm(BLOCK_BUSY as u32, 1);
}

/// Goes to `not_owner` unless the thread is the block's (`%fs` base as
/// recorded, or recorded now if none was). Clobbers rax and rcx.
fn owner_or(a: &mut Asm, not_owner: usize) {
    let (record, owner) = (a.label(), a.label());
    a.bytes(&[0xf3, 0x48, 0x0f, 0xae, 0xc0]); // rdfsbase rax
    a.load(1, BLOCK_OWNER_FS as u32); // mov rcx, [r11+OWNER_FS]
    a.bytes(&[0x48, 0x85, 0xc9, 0x0f, 0x84]); // test rcx, rcx; jz record
    a.rel32(record);
    a.bytes(&[0x48, 0x39, 0xc1, 0x0f, 0x85]); // cmp rcx, rax; jne not_owner
    a.rel32(not_owner);
    a.bytes(&[0xe9]);
    a.rel32(owner);
    a.bind(record);
    a.store(BLOCK_OWNER_FS as u32, 0); // mov [r11+OWNER_FS], rax
    a.bind(owner);
}

/// Calls the hooks of the list in r10 (`[n, return list, n triples]`) on
/// the block's stack (r11), unless the stop flag is up; comes back on the
/// program's stack with r11 the block. The context is filled in.
fn run_hooks(a: &mut Asm, stop: u64, max_action: i64, site: bool) {
    let (next, done) = (a.label(), a.label());
    if site {
        copy_site(a);
    }
    a.store(BLOCK_SAVED_RSP as u32, 4); // mov [r11+SAVED], rsp
    a.bytes(&[0x49, 0x8d, 0xa3]); // lea rsp, [r11+TOP]
    a.d32(BLOCK_STACK_TOP as u32);
    a.bytes(&[0x53, 0x41, 0x54, 0x41, 0x55]); // push rbx, r12, r13
    a.bytes(&[0x48, 0x81, 0xec, 0x88, 0, 0, 0]); // sub rsp, 136
    for x in 0..8u8 {
        // movdqa [rsp+16*x], xmmX: a function's floating-point arguments
        // (and return values)
        a.bytes(&[0x66, 0x0f, 0x7f, 0x44 | (x << 3), 0x24, 16 * x]);
    }
    a.bytes(&[0x4c, 0x89, 0xdb]); // mov rbx, r11
    a.bytes(&[0x4d, 0x89, 0xd4]); // mov r12, r10
    a.bytes(&[0x4d, 0x8b, 0x2c, 0x24]); // mov r13, [r12]
    a.bytes(&[0x49, 0x83, 0xc4, 0x10]); // add r12, 16
    a.bytes(&[0x49, 0xff, 0x83]); // inc qword [r11+HITS]
    a.d32(BLOCK_HITS as u32);
    a.bind(next);
    a.bytes(&[0x4d, 0x85, 0xed, 0x0f, 0x84]); // test r13, r13; jz done
    a.rel32(done);
    a.stop_or(RAX, stop, done);
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
}

/// In the function common entry, after the entry hooks (program's stack,
/// r11 the block): a site with return hooks gets a frame on the thread's
/// shadow stack and its return address replaced by `ret_stub`. Frames at
/// below the new one's slot were left without returning (longjmp) and are
/// dropped first; one at the same slot too, unless it is a tail call's:
/// a function that jumped to this one left a stub (ours, or the tracer's
/// over ours) in the slot, and its frame returns next, after this one's
/// (whose address is that stub), as the kernel chains uretprobe
/// instances. A full shadow stack misses the return (counted).
fn hijack(a: &mut Asm, stop: u64, ret_stub: u64, done: usize) {
    let (drop, push, full) = (a.label(), a.label(), a.label());
    a.bytes(&[0x4c, 0x8b, 0x54, 0x24, 0x48]); // mov r10, [rsp+72]: the list
    a.bytes(&[0x4d, 0x8b, 0x52, 0x08]); // mov r10, [r10+8]: its return list
    a.bytes(&[0x4d, 0x85, 0xd2, 0x0f, 0x84]); // test r10, r10; jz done
    a.rel32(done);
    a.stop_or(RAX, stop, done);
    a.load(RSI, BLOCK_SHADOW as u32); // mov rsi, [r11+SHADOW]
    a.bytes(&[0x48, 0x85, 0xf6, 0x0f, 0x84]); // test rsi, rsi; jz done
    a.rel32(done);
    let pop = a.label();
    a.bytes(&[0x48, 0x8d, 0x94, 0x24]); // lea rdx, [rsp+SLOT]: the return address
    a.d32(HIJACK_SLOT as u32);
    a.bytes(&[0x4c, 0x8b, 0x02, 0x49, 0xb9]); // mov r8, [rdx]: the slot now; movabs r9, ret_stub
    a.bytes(&ret_stub.to_le_bytes());
    a.bytes(&[0x48, 0x8b, 0x0e]); // mov rcx, [rsi]: depth
    a.bind(drop);
    a.bytes(&[0x48, 0x85, 0xc9, 0x0f, 0x84]); // test rcx, rcx; jz push
    a.rel32(push);
    a.bytes(&[0x48, 0x6b, 0xc1, 0x50]); // imul rax, rcx, 80
    a.bytes(&[0x48, 0x8d, 0x7c, 0x06, 0xc0]); // lea rdi, [rsi+rax-64]: the top frame
    a.bytes(&[0x48, 0x39, 0x17, 0x0f, 0x87]); // cmp [rdi], rdx; ja push: an outer frame
    a.rel32(push);
    a.bytes(&[0x0f, 0x82]); // jb pop: a deeper one, left by a longjmp
    a.rel32(pop);
    // The same slot: a tail call's callers (the slot holds our stub, or
    // the tracer's over ours), kept; or left by a longjmp and the slot
    // called again from the same place, dropped.
    a.bytes(&[0x4d, 0x39, 0xc8, 0x0f, 0x84]); // cmp r8, r9; je push
    a.rel32(push);
    a.bytes(&[0x4c, 0x39, 0x47, 0x08, 0x0f, 0x85]); // cmp [rdi+8], r8; jne push
    a.rel32(push);
    a.bind(pop);
    a.bytes(&[0x48, 0xff, 0xc9, 0xe9]); // dec rcx; jmp drop
    a.rel32(drop);
    a.bind(push);
    a.bytes(&[0x48, 0x81, 0xf9]); // cmp rcx, SHADOW_FRAMES
    a.d32(SHADOW_FRAMES as u32);
    a.bytes(&[0x0f, 0x83]); // jae full
    a.rel32(full);
    a.bytes(&[0x48, 0x6b, 0xc1, 0x50]); // imul rax, rcx, 80
    a.bytes(&[0x48, 0x8d, 0x7c, 0x06, 0x10]); // lea rdi, [rsi+rax+16]: the frame
    a.bytes(&[0x48, 0x89, 0x17]); // mov [rdi], rdx: slot
    a.bytes(&[0x48, 0x8b, 0x02, 0x48, 0x89, 0x47, 0x08]); // mov rax,[rdx]; mov [rdi+8],rax
    a.bytes(&[0x4c, 0x89, 0x57, 0x10]); // mov [rdi+16], r10: return list
    for i in 0..6u8 {
        a.load(0, arg_field(i as usize)); // mov rax, [r11+ARG]
        a.bytes(&[0x48, 0x89, 0x47, 24 + 8 * i]); // mov [rdi+24+8i], rax
    }
    a.bytes(&[0x48, 0xff, 0xc1, 0x48, 0x89, 0x0e]); // inc rcx; mov [rsi], rcx
    a.bytes(&[0x48, 0xb8]); // movabs rax, ret_stub
    a.bytes(&ret_stub.to_le_bytes());
    a.bytes(&[0x48, 0x89, 0x02, 0xe9]); // mov [rdx], rax; jmp done
    a.rel32(done);
    a.bind(full);
    a.bytes(&[0x48, 0x89, 0x0e]); // mov [rsi], rcx
    a.bytes(&[0x49, 0xff, 0x83]); // inc qword [r11+MISSED]
    a.d32(BLOCK_MISSED as u32);
}

/// Where the function common entry finds the program's return address:
/// above its pushes (64), the stub's return (8), list (8), rax (8) and
/// red zone (128).
const HIJACK_SLOT: u64 = 64 + 8 + 8 + 8 + 128;

/// The return stub, where every hijacked return of a process lands (rsp
/// one past the slot, return values in rax/rdx/xmm0/xmm1): it finds the
/// slot's frame on the thread's shadow stack (dropping frames a longjmp
/// left), puts the real return address back in the slot, runs the return
/// hooks with the entry's arguments and `$return`, and jumps there with
/// every register as the function left it. A slot with no frame cannot
/// go anywhere right: `ud2` (only a program that wrote our memory).
pub fn ret_stub(stop: u64, max_action: i64, blocks: Blocks, site: bool) -> Vec<u8> {
    let mut a = Asm::new();
    let (find, found, lost, out, skip) = (a.label(), a.label(), a.label(), a.label(), a.label());
    let (scan, next, have) = (a.label(), a.label(), a.label());
    a.bytes(&[0x48, 0x83, 0xec, 0x08]); // sub rsp, 8 (flags are dead after a ret)
    // push rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11
    a.bytes(&[
        0x50, 0x51, 0x52, 0x56, 0x57, 0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53,
    ]);
    a.bytes(&[0xf3, 0x49, 0x0f, 0xae, 0xcb]); // rdgsbase r11
    ours_or(&mut a, blocks, scan);
    a.bytes(&[0xf3, 0x48, 0x0f, 0xae, 0xc0]); // rdfsbase rax
    a.bytes(&[0x49, 0x39, 0x83]); // cmp [r11+OWNER_FS], rax; je have
    a.d32(BLOCK_OWNER_FS as u32);
    a.bytes(&[0x0f, 0x84]);
    a.rel32(have);
    // `%gs` is no block of ours (a later session's, or none): the frames
    // are in the block this thread owned.
    a.bind(scan);
    a.bytes(&[0xf3, 0x48, 0x0f, 0xae, 0xc0]); // rdfsbase rax
    a.bytes(&[0x49, 0xbb]); // movabs r11, start
    a.bytes(&blocks.start.to_le_bytes());
    a.bytes(&[0x48, 0xb9]); // movabs rcx, BLOCK_LEN
    a.bytes(&BLOCK_LEN.to_le_bytes());
    a.bytes(&[0xba]); // mov edx, count
    a.d32(blocks.count as u32);
    a.bind(next);
    a.bytes(&[0x49, 0x39, 0x83]); // cmp [r11+OWNER_FS], rax; je have
    a.d32(BLOCK_OWNER_FS as u32);
    a.bytes(&[0x0f, 0x84]);
    a.rel32(have);
    a.bytes(&[0x49, 0x01, 0xcb, 0xff, 0xca, 0x0f, 0x85]); // add r11, rcx; dec edx; jnz next
    a.rel32(next);
    a.bytes(&[0xe9]); // jmp lost
    a.rel32(lost);
    a.bind(have);
    a.load(RSI, BLOCK_SHADOW as u32); // mov rsi, [r11+SHADOW]
    a.bytes(&[0x48, 0x85, 0xf6, 0x0f, 0x84]); // test rsi, rsi; jz lost
    a.rel32(lost);
    a.bytes(&[0x48, 0x8d, 0x54, 0x24, 0x48]); // lea rdx, [rsp+72]: the slot
    a.bytes(&[0x48, 0x8b, 0x0e]); // mov rcx, [rsi]
    a.bind(find);
    a.bytes(&[0x48, 0x85, 0xc9, 0x0f, 0x84]); // test rcx, rcx; jz lost
    a.rel32(lost);
    a.bytes(&[0x48, 0x6b, 0xc1, 0x50]); // imul rax, rcx, 80
    a.bytes(&[0x48, 0x8d, 0x7c, 0x06, 0xc0]); // lea rdi, [rsi+rax-64]: the top frame
    a.bytes(&[0x48, 0x39, 0x17, 0x0f, 0x84]); // cmp [rdi], rdx; je found
    a.rel32(found);
    a.bytes(&[0x0f, 0x87]); // ja lost: an outer frame, ours is not there
    a.rel32(lost);
    a.bytes(&[0x48, 0xff, 0xc9, 0xe9]); // dec rcx; jmp find
    a.rel32(find);
    a.bind(found);
    a.bytes(&[0x48, 0xff, 0xc9, 0x48, 0x89, 0x0e]); // dec rcx; mov [rsi], rcx
    a.bytes(&[0x48, 0x8b, 0x47, 0x08]); // mov rax, [rdi+8]
    a.bytes(&[0x48, 0x89, 0x44, 0x24, 0x48]); // mov [rsp+72], rax: where `ret` goes
    a.bytes(&[0x4c, 0x8b, 0x57, 0x10]); // mov r10, [rdi+16]: the return list
    a.stop_or(RAX, stop, out);
    // No owner check: the block was found by this thread's `%fs`.
    claim_or(&mut a, skip);
    for i in 0..6u8 {
        a.bytes(&[0x48, 0x8b, 0x47, 24 + 8 * i]); // mov rax, [rdi+24+8i]
        a.store(arg_field(i as usize), 0);
    }
    a.bytes(&[0x48, 0x8b, 0x44, 0x24, 0x40]); // mov rax, [rsp+64]: $return
    a.store(probe_field(offset_of!(ProbeValues, ret)), 0);
    a.store_imm(probe_field(offset_of!(ProbeValues, returning)), 1);
    a.store_imm(
        probe_field(offset_of!(ProbeValues, event)),
        event::FUNCTION_RETURN as u32,
    );
    run_hooks(&mut a, stop, max_action, site);
    a.store_imm(BLOCK_BUSY as u32, 0);
    a.bind(out);
    // pop r11, r10, r9, r8, rdi, rsi, rdx, rcx, rax
    a.bytes(&[
        0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x5f, 0x5e, 0x5a, 0x59, 0x58,
    ]);
    // lea rsp, [rsp+8]; jmp qword [rsp-8]: a `ret` here would pop the
    // return predictor's entry of the caller's caller (the function's own
    // `ret` took the caller's), so every return out of the caller's frames
    // would be mispredicted after it; an indirect jump leaves that stack
    // alone. The slot below rsp is safe: a signal frame skips the red zone.
    a.bytes(&[0x48, 0x8d, 0x64, 0x24, 0x08, 0xff, 0x64, 0x24, 0xf8]);
    a.bind(skip);
    a.bytes(&[0x49, 0xff, 0x83]); // inc qword [r11+SKIPPED]
    a.d32(BLOCK_SKIPPED as u32);
    a.bytes(&[0xe9]);
    a.rel32(out);
    a.bind(lost);
    a.bytes(&[0x0f, 0x0b]); // ud2
    a.finish()
}

/// Where the marker entry finds what it saved, from rsp after its six
/// pushes (rdi first): r9, r8, rcx, rdx, rsi, rdi, then the stub's
/// return, the list and rax (the stub's), then the red zone.
const MARK_SAVED: [(&str, u32); 7] = [
    ("r9", 0),
    ("r8", 8),
    ("rcx", 16),
    ("rdx", 24),
    ("rsi", 32),
    ("rdi", 40),
    ("rax", 64),
];
/// The list's offset, and the program's rsp at the marker, from there.
const MARK_LIST: u32 = 56;
const MARK_RSP: u32 = 72 + 128;

/// The entry a USDT marker's stub calls instead of the function common
/// entry (same frame: `[rsp]` the stub, `[rsp+8]` the list, `ret $8`):
/// it puts the marker's arguments (`args`, the note's operands, at most
/// six) in the six argument registers, where the function common entry
/// takes `$arg1`..`$arg6` from, calls it, and puts the registers back.
/// `site` is the marker's `nop` (a `%rip` operand reads one past it, as
/// at a trap); `fcommon` the function common entry.
///
/// A memory operand (`disp(base, index, scale)`, `sym(%rip)`) is passed
/// as its address, which the handler reads through the safe load
/// (`utap_compiler::route::mark_loads`). The flags are dead at a marker as at a call: an `asm`
/// statement clobbers them on x86.
pub fn mark_entry(args: &[MarkArg], site: u64, fcommon: u64) -> Vec<u8> {
    let mut a = Asm::new();
    // push rdi, rsi, rdx, rcx, r8, r9
    a.bytes(&[0x57, 0x56, 0x52, 0x51, 0x41, 0x50, 0x41, 0x51]);
    for i in 0..6u32 {
        match args.get(i as usize) {
            Some(arg) => {
                mark_arg(&mut a, arg, site, 8 * i);
                a.bytes(&[0x50]); // push rax
            }
            None => a.bytes(&[0x6a, 0x00]), // push 0
        }
    }
    // pop r9, r8, rcx, rdx, rsi, rdi: the values, into their registers
    a.bytes(&[0x41, 0x59, 0x41, 0x58, 0x59, 0x5a, 0x5e, 0x5f]);
    a.bytes(&[0xff, 0x74, 0x24, MARK_LIST as u8]); // push qword [rsp+LIST]
    a.bytes(&[0x48, 0xb8]); // movabs rax, fcommon
    a.bytes(&fcommon.to_le_bytes());
    a.bytes(&[0xff, 0xd0]); // call rax (fcommon's `ret $8` drops the list)
    // pop r9, r8, rcx, rdx, rsi, rdi: the program's own
    a.bytes(&[0x41, 0x59, 0x41, 0x58, 0x59, 0x5a, 0x5e, 0x5f]);
    a.bytes(&[0xc2, 0x08, 0x00]); // ret 8
    a.finish()
}

/// One marker argument in rax, truncated and extended as the tracer's
/// `marks::read_arg` does; for a memory operand, its address (the
/// handler loads it: `utap_compiler::route::mark_loads`). `depth`: bytes
/// pushed since the six saves.
fn mark_arg(a: &mut Asm, marg: &MarkArg, site: u64, depth: u32) {
    let arg = &marg.spec;
    let reg = match &arg.operand {
        Operand::Reg(r) => r,
        Operand::Imm(v) => {
            a.bytes(&[0x48, 0xb8]); // movabs rax, value
            a.bytes(&arg.extend(*v as u64).to_le_bytes());
            return;
        }
        Operand::Mem { disp, base, index } => {
            return mark_address(a, *disp, base.as_ref(), index.as_ref(), site, depth);
        }
        Operand::Symbol { .. } => {
            // The symbol's run-time address (the tracer resolved it with
            // the module's bias; 0, which reads as 0, when it could not).
            a.bytes(&[0x48, 0xb8]); // movabs rax, address
            a.bytes(&marg.symbol_addr.unwrap_or(0).to_le_bytes());
            return;
        }
    };
    fetch_reg(a, reg, site, depth);
    match (arg.size, arg.signed) {
        (1, true) => a.bytes(&[0x48, 0x0f, 0xbe, 0xc0]), // movsx rax, al
        (1, false) => a.bytes(&[0x0f, 0xb6, 0xc0]),      // movzx eax, al
        (2, true) => a.bytes(&[0x48, 0x0f, 0xbf, 0xc0]), // movsx rax, ax
        (2, false) => a.bytes(&[0x0f, 0xb7, 0xc0]),      // movzx eax, ax
        (4, true) => a.bytes(&[0x48, 0x63, 0xc0]),       // movsxd rax, eax
        (4, false) => a.bytes(&[0x89, 0xc0]),            // mov eax, eax
        _ => {}
    }
}

/// `disp(base, index, scale)`'s address in rax, as `marks::read_arg`
/// computes it from the registers.
fn mark_address(
    a: &mut Asm,
    disp: i64,
    base: Option<&crate::elf::sdt::Reg>,
    index: Option<&(crate::elf::sdt::Reg, u8)>,
    site: u64,
    depth: u32,
) {
    match base {
        Some(b) => fetch_reg(a, b, site, depth),
        None => a.bytes(&[0x31, 0xc0]), // xor eax, eax
    }
    if let Some((i, scale)) = index {
        a.bytes(&[0x50]); // push rax
        fetch_reg(a, i, site, depth + 8);
        a.bytes(&[0x48, 0x6b, 0xc0, *scale]); // imul rax, rax, scale
        a.bytes(&[0x48, 0x03, 0x04, 0x24, 0x48, 0x83, 0xc4, 0x08]); // add rax, [rsp]; add rsp, 8
    }
    match i32::try_from(disp) {
        Ok(d) => {
            a.bytes(&[0x48, 0x05]); // add rax, imm32 (sign extended)
            a.d32(d as u32);
        }
        Err(_) => {
            a.bytes(&[0x50, 0x48, 0xb8]); // push rax; movabs rax, disp
            a.bytes(&disp.to_le_bytes());
            a.bytes(&[0x48, 0x03, 0x04, 0x24, 0x48, 0x83, 0xc4, 0x08]); // add rax, [rsp]; add rsp, 8
        }
    }
}

/// Register `reg` as the program had it at the marker, in rax, with its
/// width and `%ah`-style shift applied (`marks::register`).
fn fetch_reg(a: &mut Asm, reg: &crate::elf::sdt::Reg, site: u64, depth: u32) {
    let saved = MARK_SAVED.iter().find(|(n, _)| *n == reg.name);
    match (reg.name, saved) {
        (_, Some(&(_, off))) => {
            a.bytes(&[0x48, 0x8b, 0x84, 0x24]); // mov rax, [rsp+off]
            a.d32(off + depth);
        }
        ("rsp", _) => {
            a.bytes(&[0x48, 0x8d, 0x84, 0x24]); // lea rax, [rsp+RSP]
            a.d32(MARK_RSP + depth);
        }
        ("rip", _) => {
            a.bytes(&[0x48, 0xb8]); // movabs rax, site + 1
            a.bytes(&(site + 1).to_le_bytes());
        }
        (name, None) => {
            let n = GPRS.iter().position(|g| *g == name).unwrap_or(0) as u8;
            // mov rax, reg
            a.bytes(&[0x48 | (n >> 3), 0x8b, 0xc0 | (n & 7)]);
        }
    }
    if reg.high {
        a.bytes(&[0x48, 0xc1, 0xe8, 0x08]); // shr rax, 8
    }
    match reg.width {
        1 => a.bytes(&[0x0f, 0xb6, 0xc0]), // movzx eax, al
        2 => a.bytes(&[0x0f, 0xb7, 0xc0]), // movzx eax, ax
        4 => a.bytes(&[0x89, 0xc0]),       // mov eax, eax
        _ => {}
    }
}

/// The general-purpose registers by encoding number.
const GPRS: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

/// The instructions a function entry at `site` displaces: decoded from
/// `code` (the function's bytes from `start`, with the site's original
/// bytes), at least 5 bytes of plain instructions and direct jumps (no
/// call, indirect branch or syscall; a `ret` or `jmp` ends them) that end
/// inside the function, with no branch of the function landing inside
/// them. `None` if the site cannot be patched.
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
        // A conditional jump is relocated (to its target, from the stub);
        // a leaf's `ret` or a tail `jmp` ends the sequence: the stub goes
        // on by itself.
        let jcc = i.flow_control() == FlowControl::ConditionalBranch && i.is_jcc_short_or_near();
        let end = i.code() == Code::Retnq
            || (i.flow_control() == FlowControl::UnconditionalBranch && i.is_jmp_short_or_near())
            || emulated_call(i);
        if !plain && !jcc && !end {
            return None;
        }
        len += i.len() as u64;
        taken.push(*i);
        if end {
            break;
        }
    }
    if !(5..=MAX_DISPLACED).contains(&len) {
        return None;
    }
    (!branch_lands_in(&insns, site + 1..site + len)).then_some(taken)
}

/// Whether the stub goes on by itself after `last` (no jump back).
fn ends_flow(last: &Instruction) -> bool {
    last.code() == Code::Retnq
        || last.flow_control() == FlowControl::UnconditionalBranch
        || emulated_call(last)
}

/// A call the stub makes as the program would (a `-pg` build's `call
/// mcount` or `call *mcount@GOTPCREL(%rip)`, `-mfentry`'s `call
/// __fentry__`): direct, or through a `%rip`-relative pointer. Displaced
/// last, it is emulated: the stub pushes the original return address (the
/// instruction after the displaced ones, in the program's own text) and
/// jumps to the target, so the callee sees the call the program made
/// (uftrace's mcount finds its function by that address) and returns
/// into the program.
fn emulated_call(i: &Instruction) -> bool {
    match i.code() {
        Code::Call_rel32_64 => true,
        Code::Call_rm64 => i.memory_base() == Register::RIP && i.memory_index() == Register::None,
        _ => false,
    }
}

/// The instructions an emulated `call` becomes: push its return address
/// (`push imm32` sign-extends the low half; the high half is written
/// over it: no register, no flag changes), then jump where it went.
fn call_emulation(call: &Instruction) -> Option<[Instruction; 3]> {
    let ret = call.next_ip();
    let push = Instruction::with1(Code::Pushq_imm32, ret as u32 as i32).ok()?;
    let high = MemoryOperand::with_base_displ(Register::RSP, 4);
    let high = Instruction::with2(Code::Mov_rm32_imm32, high, (ret >> 32) as u32).ok()?;
    let jump = match call.code() {
        Code::Call_rel32_64 => Instruction::with_branch(Code::Jmp_rel32_64, call.near_branch64()),
        _ => Instruction::with1(
            Code::Jmp_rm64,
            MemoryOperand::with_base_displ(Register::RIP, call.memory_displacement64() as i64),
        ),
    }
    .ok()?;
    Some([push, high, jump])
}

/// A function's instructions, decoded from its bytes `code` at `start`
/// up to the first that does not decode.
pub(crate) fn decode_function(code: &[u8], start: u64) -> Vec<Instruction> {
    Decoder::with_ip(64, code, start, DecoderOptions::NONE)
        .into_iter()
        .take_while(|i| i.code() != Code::INVALID)
        .collect()
}

/// Whether a direct branch or call of `insns` lands inside `range` (the
/// bytes a patch would replace, but for their first).
pub(crate) fn branch_lands_in(insns: &[Instruction], range: std::ops::Range<u64>) -> bool {
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
    if emulated_call(last) {
        insns.pop();
        insns.extend(call_emulation(last)?);
    } else if !ends_flow(last) {
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
            let n = lens.len();
            // An emulated call (`call_emulation`: three instructions for
            // the last displaced one, no jump back): past its push, the
            // push is undone and the thread makes the call itself.
            if offsets.len() == n + 2 && k >= n {
                return e(None, 8, lens[..n - 1].iter().sum());
            }
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

    #[test]
    fn the_common_entry_decodes_and_balances_its_stack() {
        let blocks = Blocks {
            start: 0x3f00_0100_0000,
            count: 1024,
        };
        let c = common(
            0x3f00_0040_0000,
            1000,
            0x3f00_0000_0c00,
            blocks,
            false,
            false,
        );
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
        assert_eq!((pushes, pops), (11, 11));
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
        // With target variables, the 17 register words of the block and
        // the bias are written, and nothing else changes the stack.
        let r = common(0x3f00_0040_0000, 1000, 0x3f00_0000_0c00, blocks, true, true);
        let ri = decode_all(&r, 0);
        assert!(ri.iter().all(|i| i.code() != Code::INVALID));
        let into_regs = ri
            .iter()
            .filter(|i| {
                i.memory_base() == Register::R11
                    && (BLOCK_REGS..BLOCK_SITE_FUNC + 8).contains(&i.memory_displacement64())
                    && matches!(i.code(), Code::Mov_rm64_r64 | Code::Mov_rm64_imm32)
            })
            .count();
        assert_eq!(into_regs, 19);
        assert_eq!(ri.len(), ins.len() + 25);
    }

    #[test]
    fn the_return_stub_decodes_and_balances_its_stack() {
        let blocks = Blocks {
            start: 0x3f00_0100_0000,
            count: 1024,
        };
        let c = ret_stub(0x3f00_0040_0000, 1000, blocks, false);
        let ins = decode_all(&c, 0);
        assert!(ins.iter().all(|i| i.code() != Code::INVALID));
        let count = |codes: &[Code]| ins.iter().filter(|i| codes.contains(&i.code())).count();
        // Nine registers, and rbx/r12/r13 around the hooks.
        assert_eq!(count(&[Code::Push_r64, Code::Pushfq]), 12);
        assert_eq!(count(&[Code::Pop_r64, Code::Popfq]), 12);
        // No `ret`: one jump through the slot to the real address (the
        // return predictor keeps the caller's callers), `ud2` for a lost
        // frame.
        assert_eq!(count(&[Code::Retnq]), 0);
        let jumps: Vec<_> = ins.iter().filter(|i| i.code() == Code::Jmp_rm64).collect();
        assert_eq!(jumps.len(), 1);
        assert_eq!(jumps[0].memory_base(), Register::RSP);
        assert_eq!(jumps[0].memory_displacement64() as i64, -8);
        assert_eq!(count(&[Code::Ud2]), 1);
        assert_eq!(count(&[Code::Rdfsbase_r64]), 2);
        // The return values in xmm0/xmm1 are kept around the hooks.
        assert_eq!(count(&[Code::Movdqa_xmmm128_xmm]), 8);
        // The entry's hijack writes the stub's address: it is in fcommon.
        let f = common(
            0x3f00_0040_0000,
            1000,
            0x3f00_0000_0c00,
            blocks,
            false,
            false,
        );
        let fi = decode_all(&f, 0);
        assert!(
            fi.iter()
                .any(|i| i.code() == Code::Mov_r64_imm64 && i.immediate64() == 0x3f00_0000_0c00)
        );
    }

    /// Runs `mark_entry` for `specs` from a stub-like caller (red zone,
    /// rax, the list, `call`) with known registers, the function common
    /// entry replaced by code that records the six argument registers:
    /// each must be what the tracer's `marks::read_arg` reads from the
    /// same registers, and the program's registers must come back.
    fn run_mark_entry(specs: &[&str]) {
        use crate::session::marks::{MarkArg, arg_address, read_arg};
        let args: Vec<MarkArg> = specs
            .iter()
            .map(|t| MarkArg {
                spec: crate::elf::sdt::parse_arg(t).unwrap(),
                symbol_addr: None,
            })
            .collect();
        // SAFETY: a fresh private anonymous mapping, ours alone.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        let base = page as u64;
        let (fake, entry, caller, out) = (base, base + 256, base + 2048, base + 4096);
        let site = 0x55_0000_1319u64;
        let mut f = vec![0x49, 0xbb]; // movabs r11, out
        f.extend_from_slice(&out.to_le_bytes());
        f.extend_from_slice(&[
            0x49, 0x89, 0x3b, 0x49, 0x89, 0x73, 0x08, 0x49, 0x89, 0x53, 0x10,
        ]);
        f.extend_from_slice(&[
            0x49, 0x89, 0x4b, 0x18, 0x4d, 0x89, 0x43, 0x20, 0x4d, 0x89, 0x4b,
        ]);
        f.extend_from_slice(&[0x28, 0x48, 0x8b, 0x44, 0x24, 0x08, 0x49, 0x89, 0x43, 0x30]);
        f.extend_from_slice(&[0xc2, 0x08, 0x00]); // ret 8
        let e = mark_entry(&args, site, fake);
        // lea rsp,[rsp-128]; push rax; push 0x1234; call entry; pop rax;
        // lea rsp,[rsp+128]; ret
        let mut c = vec![
            0x48, 0x8d, 0x64, 0x24, 0x80, 0x50, 0x68, 0x34, 0x12, 0, 0, 0xe8,
        ];
        let rel = entry.wrapping_sub(caller + c.len() as u64 + 4) as i32;
        c.extend_from_slice(&rel.to_le_bytes());
        c.extend_from_slice(&[0x58, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0, 0xc3]);
        // SAFETY: each piece fits its part of the page.
        unsafe {
            std::ptr::copy_nonoverlapping(f.as_ptr(), fake as *mut u8, f.len());
            std::ptr::copy_nonoverlapping(e.as_ptr(), entry as *mut u8, e.len());
            std::ptr::copy_nonoverlapping(c.as_ptr(), caller as *mut u8, c.len());
        }
        // SAFETY: user_regs_struct is plain integers.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        regs.rax = 0x1122_3344_5566_ff88;
        regs.rbx = -5i64 as u64;
        regs.rcx = 0x8000_0000_0000_0001;
        regs.rdx = 0x00ff_ff81;
        regs.rsi = 0xffff_fffe;
        regs.rdi = 42;
        regs.r8 = 0x1ff;
        regs.r9 = 7;
        regs.r12 = 0x1234_8001;
        let (mut rax, mut rcx, mut rdx) = (regs.rax, regs.rcx, regs.rdx);
        let (mut rsi, mut rdi, mut r8, mut r9) = (regs.rsi, regs.rdi, regs.r8, regs.r9);
        let sp: u64;
        // SAFETY: the caller, entry and recorder only touch their stack
        // frames (below rsp, no red zone in use: the block may push), the
        // output page, rax and r11 (declared); rbx is pushed and popped.
        unsafe {
            std::arch::asm!(
                "push rbx",
                "mov rbx, r10",
                "mov r13, rsp",
                "call r11",
                "pop rbx",
                out("r13") sp,
                inout("rax") rax, inout("rcx") rcx, inout("rdx") rdx,
                inout("rsi") rsi, inout("rdi") rdi, inout("r8") r8, inout("r9") r9,
                // rbx's value and the callee's address in registers of
                // our choosing, and rsp kept in one: the compiler could
                // pick rbx for any of them.
                in("r12") regs.r12, inout("r10") regs.rbx => _, inout("r11") caller => _,
            );
        }
        // The marker's rsp is the caller's at its first instruction: one
        // return address below the asm's (and rbx pushed before it).
        regs.rsp = sp - 8;
        regs.rip = site + 1;
        assert_eq!(
            (rax, rcx, rdx, rsi, rdi, r8, r9),
            (
                regs.rax, regs.rcx, regs.rdx, regs.rsi, regs.rdi, regs.r8, regs.r9
            ),
            "the program's registers come back"
        );
        // SAFETY: the recorder wrote seven words at `out`.
        let got: Vec<i64> = (0..7)
            .map(|i| unsafe { *((out + 8 * i) as *const i64) })
            .collect();
        struct NoMemory;
        impl crate::memory::ReadMemory for NoMemory {
            fn read(&self, addr: u64, _: &mut [u8]) -> Result<usize, crate::memory::Fault> {
                Err(crate::memory::Fault { addr, errno: 14 })
            }
        }
        // A memory operand is passed as its address.
        let mut want: Vec<i64> = args
            .iter()
            .map(|a| match arg_address(a, &regs) {
                Some(addr) => addr as i64,
                None => read_arg(a, &regs, &NoMemory),
            })
            .collect();
        want.resize(6, 0);
        want.push(0x1234);
        assert_eq!(got, want, "{specs:?}");
        // SAFETY: unmapping our own page.
        unsafe { libc::munmap(page, 8192) };
    }

    #[test]
    fn a_marker_entry_loads_registers_and_constants_as_the_tracer_reads_them() {
        run_mark_entry(&["-8@%rbx", "-4@%eax", "1@%dl", "-4@$-7", "-2@%r12w", "1@%ah"]);
        run_mark_entry(&["8@%rdi", "-4@%esi", "8@%rcx", "-1@%r8b", "8@%r9", "8@%rsp"]);
        run_mark_entry(&["-1@%dl", "8@%rip", "4@%ecx", "-8@8(%rsp)"]);
        run_mark_entry(&[
            "-4@-20(%rsi)",
            "8@16(%rax,%rcx,8)",
            "4@(%rdx,%r12,4)",
            "2@%r9w",
        ]);
        run_mark_entry(&[
            "8@-8(%rsp)",
            "-4@4(%rip)",
            "1@0x7fff1234(%rdi)",
            "8@8(,%r8,2)",
        ]);
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
        assert_eq!(bytes.len() as u64, HEAD_LEN + 11 + 5);
        assert!(stub_len(11) >= HEAD_LEN + 11 + 5);
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

    /// A `-pg` entry (`push %rbp; mov %rsp,%rbp; call *mcount@GOTPCREL`)
    /// and an `-mfentry` one (`call __fentry__`): the call is displaced
    /// last and emulated, pushing the program's own return address and
    /// jumping where the call went; a thread held inside the emulation
    /// goes back to the call with the push undone.
    #[test]
    fn an_mcount_call_is_displaced_and_emulated() {
        let start = 0x55_5555_1250u64;
        let pg = [
            0x55, 0x48, 0x89, 0xe5, 0xff, 0x15, 0x76, 0x2d, 0, 0, 0x5d, 0x48, 0x8d, 0x47, 0x01,
            0xc3,
        ];
        let d = displaced(&pg, start, start).unwrap();
        assert_eq!(d.len(), 3);
        let at = start - 0x3000;
        let (bytes, offsets) = stub(at, &d, 0x3f00_0000_8000, 0x3f00_0000_0800).unwrap();
        assert!(bytes.len() as u64 <= stub_len(10));
        let ins = decode_all(&bytes[HEAD_LEN as usize..], at + HEAD_LEN);
        let codes: Vec<Code> = ins.iter().map(|i| i.code()).collect();
        assert_eq!(
            codes,
            [
                Code::Push_r64,
                Code::Mov_rm64_r64,
                Code::Pushq_imm32,
                Code::Mov_rm32_imm32,
                Code::Jmp_rm64
            ]
        );
        // The pushed word is the program's return address, start + 10.
        let ret = start + 10;
        assert_eq!(ins[2].immediate32() as u64, ret & 0xffff_ffff);
        assert_eq!(ins[3].memory_displacement64(), 4);
        assert_eq!(ins[3].immediate32() as u64, ret >> 32);
        // Through the same GOT slot.
        assert_eq!(ins[4].memory_displacement64(), start + 10 + 0x2d76);
        let lens: Vec<u64> = d.iter().map(|i| i.len() as u64).collect();
        assert_eq!(offsets.len(), 5);
        let exit = |k: usize| stub_exit(offsets[k], &offsets, &lens).unwrap();
        assert_eq!((exit(1).rsp_add, exit(1).site_off), (0, 1));
        assert_eq!((exit(2).rsp_add, exit(2).site_off), (0, 4));
        assert_eq!((exit(3).rsp_add, exit(3).site_off), (8, 4));
        assert_eq!((exit(4).rsp_add, exit(4).site_off), (8, 4));
        // -mfentry: the call alone, to a target within reach.
        let fentry = [0xe8, 0x0b, 0, 0, 0, 0x48, 0x8d, 0x47, 0x01, 0xc3];
        let d = displaced(&fentry, start, start).unwrap();
        assert_eq!(d.len(), 1);
        let (bytes, _) = stub(at, &d, 0x3f00_0000_8000, 0x3f00_0000_0800).unwrap();
        let ins = decode_all(&bytes[HEAD_LEN as usize..], at + HEAD_LEN);
        assert_eq!(ins.last().unwrap().code(), Code::Jmp_rel32_64);
        assert_eq!(ins.last().unwrap().near_branch64(), start + 5 + 0x0b);
        // A call through a register is not emulated: call *%rax; ret.
        assert!(displaced(&[0xff, 0xd0, 0x90, 0x90, 0x90, 0xc3], start, start).is_none());
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
