//! The machine code the tracer writes into programs: the common entry
//! (with the one `syscall` the seccomp filter lets through, the gadget)
//! and the per-site stubs. Hand-assembled, because every byte's position
//! matters to the detach (`stub_exit`) and the filter (`gadget`).
//!
//! A patched site is the run of instructions right before a `syscall`
//! (`site`: `mov $NR,%eax` of a libc wrapper, `mov 8(%rsp),%r9` of
//! `syscall()`, `cmpb $0,x(%rip); je; xor %eax,%eax` of glibc's `read`),
//! at least 5 bytes, overwritten with a `jmp` to its stub (and `int3`
//! over the rest, never reached); the `syscall` after it stays, so a
//! call restarted by the kernel (rip - 2) and a branch to the `syscall`
//! still run the original instruction. With D the length of the run as
//! relocated into the stub:
//!
//! ```text
//! stub:  0 the displaced run, relocated (its operands mean the same
//!          here: it runs before rsp moves; a `je` goes to its target)
//!   D +  0 lea -128(%rsp),%rsp   (the red zone stays the program's)
//!   D +  5 pushfq
//!   D +  6 movabs $common,%rcx
//!   D + 16 call *%rcx            (rcx and r11 are the syscall's to clobber)
//!   D + 18 popfq                 <- served: rax is the result
//!   D + 19 lea 128(%rsp),%rsp
//!   D + 27 jmp R                 (R: just past the site's syscall)
//!   D + 32 popfq                 <- not served here (common returns +14)
//!   D + 33 lea 128(%rsp),%rsp
//!   D + 41 syscall               (the original call, traced as before)
//!   D + 43 jmp R
//! ```
//!
//! The common entry finds the thread's block through `%gs`, skips the
//! handlers when the thread is already in one (a signal handler's
//! syscall: counted), runs the entry dispatcher on the block's stack,
//! makes the call from the gadget on the program's stack (signal frames
//! land there, below the red zone), runs the return dispatcher, and
//! returns with every register as the syscall would leave it.

use iced_x86::{BlockEncoder, BlockEncoderOptions, Instruction, InstructionBlock};

use super::layout::{BLOCK_BUSY, BLOCK_SAVED_RSP, BLOCK_SELF, BLOCK_SKIPPED, BLOCK_STACK_TOP};
use crate::script::context::{HandlerContext, ProbeValues};
use std::mem::offset_of;

/// A stub's length after its displaced run.
pub const TAIL_LEN: u64 = 48;
/// The longest displaced run, relocated.
pub const DISPLACED_MAX: u64 = 16;
/// The longest stub.
pub const STUB_MAX: u64 = DISPLACED_MAX + TAIL_LEN;
/// Offsets in a stub's tail (see the module doc).
pub const STUB_SERVED: u64 = 18;
pub const STUB_RAW: u64 = 32;
const RAW_SKIP: u8 = (STUB_RAW - STUB_SERVED) as u8;
/// Bytes the stub and the call put below the program's rsp: red zone,
/// flags, return address.
pub const FRAME: u64 = 128 + 8 + 8;

/// The common entry's machine code, with the dispatchers' addresses; and
/// the offsets of its two `syscall`s (the gadgets): one followed by the
/// return dispatcher, one for numbers with no return probe.
pub struct Common {
    pub bytes: Vec<u8>,
    pub gadgets: [u64; 2],
}

/// A tiny assembler: bytes and rel32 fix-ups to labels.
pub(super) struct Asm {
    b: Vec<u8>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, usize)>,
}

/// General-purpose register numbers.
pub(super) const RAX: u8 = 0;
pub(super) const RCX: u8 = 1;
pub(super) const RDX: u8 = 2;
pub(super) const RSI: u8 = 6;
pub(super) const RDI: u8 = 7;
pub(super) const R8: u8 = 8;
pub(super) const R9: u8 = 9;
pub(super) const R10: u8 = 10;

pub(super) fn probe_field(f: usize) -> u32 {
    (offset_of!(HandlerContext, probe) + f) as u32
}

/// Where each syscall register is kept in the block's probe values.
fn arg_slots() -> [(u8, u32); 6] {
    let a = |i: usize| probe_field(offset_of!(ProbeValues, args) + 8 * i);
    [
        (RDI, a(0)),
        (RSI, a(1)),
        (RDX, a(2)),
        (R10, a(3)),
        (R8, a(4)),
        (R9, a(5)),
    ]
}

impl Asm {
    pub(super) fn new() -> Asm {
        Asm {
            b: Vec::new(),
            labels: Vec::new(),
            fixups: Vec::new(),
        }
    }
    pub(super) fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }
    pub(super) fn bind(&mut self, l: usize) {
        self.labels[l] = Some(self.b.len());
    }
    pub(super) fn bytes(&mut self, b: &[u8]) {
        self.b.extend_from_slice(b);
    }
    pub(super) fn d32(&mut self, v: u32) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    /// `mov [r11+off], reg`
    pub(super) fn store(&mut self, off: u32, reg: u8) {
        self.bytes(&[0x49 | ((reg >> 3) << 2), 0x89, 0x83 | ((reg & 7) << 3)]);
        self.d32(off);
    }
    /// `mov reg, [r11+off]`
    pub(super) fn load(&mut self, reg: u8, off: u32) {
        self.bytes(&[0x49 | ((reg >> 3) << 2), 0x8b, 0x83 | ((reg & 7) << 3)]);
        self.d32(off);
    }
    /// `mov qword [r11+off], imm32`
    pub(super) fn store_imm(&mut self, off: u32, v: u32) {
        self.bytes(&[0x49, 0xc7, 0x83]);
        self.d32(off);
        self.d32(v);
    }
    /// `mov r11, gs:[SELF]`
    fn block_to_r11(&mut self) {
        self.bytes(&[0x65, 0x4c, 0x8b, 0x1c, 0x25]);
        self.d32(BLOCK_SELF as u32);
    }
    /// Claims the block, or jumps to `l` if it was taken (a thread in a
    /// handler re-entered from a signal handler, or two threads that
    /// share a block): `mov ecx, 1; xchg [r11+BUSY], rcx; test rcx, rcx;
    /// jnz l`. The exchange is atomic, so two threads never run handlers
    /// on one block's stack.
    pub(super) fn claim_or(&mut self, l: usize) {
        self.bytes(&[0xb9, 1, 0, 0, 0, 0x49, 0x87, 0x8b]);
        self.d32(BLOCK_BUSY as u32);
        self.bytes(&[0x48, 0x85, 0xc9, 0x0f, 0x85]);
        self.rel32(l);
    }
    /// Goes to `up` if the session's stop word at `stop` says stop
    /// (`layout::stopped`: any of its bits from 30 up). Clobbers `reg`
    /// (rax or rcx).
    pub(super) fn stop_or(&mut self, reg: u8, stop: u64, up: usize) {
        debug_assert!(reg < 8);
        self.bytes(&[0x48, 0xb8 | reg]); // movabs reg, stop
        self.bytes(&stop.to_le_bytes());
        self.bytes(&[0x48, 0x8b, reg << 3 | reg]); // mov reg, [reg]
        self.bytes(&[0x48, 0xc1, 0xe8 | reg, 0x1e, 0x0f, 0x85]); // shr reg, 30; jnz up
        self.rel32(up);
    }
    pub(super) fn rel32(&mut self, l: usize) {
        self.fixups.push((self.b.len(), l));
        self.d32(0);
    }
    /// Calls `f(block)` on the block's stack, the program's rsp saved in
    /// the block and rbx (callee-saved) holding the block meanwhile.
    fn call_on_block_stack(&mut self, f: u64) {
        self.store(BLOCK_SAVED_RSP as u32, 4); // mov [r11+SAVED], rsp
        self.bytes(&[0x49, 0x8d, 0xa3]); // lea rsp, [r11+TOP]
        self.d32(BLOCK_STACK_TOP as u32);
        self.bytes(&[0x53]); // push rbx
        self.bytes(&[0x4c, 0x89, 0xdb]); // mov rbx, r11
        self.bytes(&[0x48, 0x83, 0xec, 0x08]); // sub rsp, 8
        self.bytes(&[0x4c, 0x89, 0xdf]); // mov rdi, r11
        self.bytes(&[0x48, 0xb8]); // movabs rax, f
        self.b.extend_from_slice(&f.to_le_bytes());
        self.bytes(&[0xff, 0xd0]); // call rax
        self.bytes(&[0x48, 0x83, 0xc4, 0x08]); // add rsp, 8
        self.bytes(&[0x49, 0x89, 0xdb]); // mov r11, rbx
        self.bytes(&[0x5b]); // pop rbx
        self.load(4, BLOCK_SAVED_RSP as u32); // mov rsp, [r11+SAVED]
        self.store_imm(BLOCK_BUSY as u32, 0);
    }
    fn restore_args(&mut self) {
        for (reg, off) in arg_slots() {
            self.load(reg, off);
        }
    }
    /// `add qword [rsp], RAW_SKIP; ret`: back to the stub's raw part.
    fn ret_raw(&mut self) {
        self.bytes(&[0x48, 0x83, 0x04, 0x24, RAW_SKIP, 0xc3]);
    }
    pub(super) fn finish(mut self) -> Vec<u8> {
        for (at, l) in std::mem::take(&mut self.fixups) {
            let to = self.labels[l].expect("bound label") as i64;
            let rel = (to - (at as i64 + 4)) as i32;
            self.b[at..at + 4].copy_from_slice(&rel.to_le_bytes());
        }
        self.b
    }
}

/// The common entry (see the module doc), calling `entry` and `ret`, the
/// compiled dispatchers; `stop` is the session's stop word
/// (`layout::stopped`): once it is up, a call writes nothing of the
/// region and goes straight to a gadget (a dead session's sites cost a
/// test).
pub fn common(entry: u64, ret: u64, stop: u64) -> Common {
    let mut a = Asm::new();
    let (skip, raw, skip_ret, no_return) = (a.label(), a.label(), a.label(), a.label());
    let (stopped, plain) = (a.label(), a.label());
    let syscall_slot = probe_field(offset_of!(ProbeValues, syscall));
    let ret_slot = probe_field(offset_of!(ProbeValues, ret));
    a.block_to_r11();
    a.stop_or(RCX, stop, stopped);
    a.claim_or(skip);
    a.store(syscall_slot, RAX);
    for (reg, off) in arg_slots() {
        a.store(off, reg);
    }
    a.call_on_block_stack(entry);
    a.bytes(&[0x48, 0x83, 0xf8, 0x01, 0x0f, 0x84]); // cmp rax, 1; je raw
    a.rel32(raw);
    a.bytes(&[0x48, 0x83, 0xf8, 0x02, 0x0f, 0x84]); // cmp rax, 2; je no_return
    a.rel32(no_return);
    a.load(RAX, syscall_slot);
    a.restore_args();
    let gadget = a.b.len() as u64;
    a.bytes(&[0x0f, 0x05]); // syscall: the gadget
    a.block_to_r11();
    a.claim_or(skip_ret);
    a.store(ret_slot, RAX);
    a.call_on_block_stack(ret);
    a.load(RAX, ret_slot);
    a.restore_args();
    a.bytes(&[0xc3]);
    // No return probe on this number: the call, and back.
    a.bind(no_return);
    a.load(RAX, syscall_slot);
    a.restore_args();
    let second = a.b.len() as u64;
    a.bind(plain);
    a.bytes(&[0x0f, 0x05, 0xc3]);
    // Not a number served in process: the stub makes the call.
    a.bind(raw);
    a.load(RAX, syscall_slot);
    a.restore_args();
    a.ret_raw();
    // The session stopped (or utap died): the call from the gadget, with
    // rax and the arguments as the program set them (a call from the
    // stub would stop under the filter: a hold waiting for its interrupt
    // would take that stop instead, and nothing could be injected).
    a.bind(stopped);
    a.bytes(&[0xe9]);
    a.rel32(plain);
    // Re-entered (a signal handler's syscall while a handler runs).
    a.bind(skip);
    a.bytes(&[0x49, 0xff, 0x83]); // inc qword [r11+SKIPPED]
    a.d32(BLOCK_SKIPPED as u32);
    a.ret_raw();
    a.bind(skip_ret);
    a.bytes(&[0x49, 0xff, 0x83]);
    a.d32(BLOCK_SKIPPED as u32);
    a.bytes(&[0xc3]);
    Common {
        bytes: a.finish(),
        gadgets: [gadget, second],
    }
}

/// The handlers' syscall helper (`layout::HELPER_AT`), for the safe
/// load's `process_vm_readv` (`super::strings`): `fn(nr, a1, .., a5)`
/// in the System V convention, the sixth argument 0. Its `syscall` is in
/// the code part, which the filter and SUD let through by address, and
/// at a place the tracer knows (`READ_SYSCALL`): a stop there is a
/// handler's, never the program's call, and a thread there is inside a
/// handler.
pub fn read_helper() -> Vec<u8> {
    vec![
        0x48, 0x89, 0xf8, // mov rax, rdi
        0x48, 0x89, 0xf7, // mov rdi, rsi
        0x48, 0x89, 0xd6, // mov rsi, rdx
        0x48, 0x89, 0xca, // mov rdx, rcx
        0x4d, 0x89, 0xc2, // mov r10, r8
        0x4d, 0x89, 0xc8, // mov r8, r9
        0x45, 0x31, 0xc9, // xor r9d, r9d
        0x0f, 0x05, // syscall
        0xc3, // ret
    ]
}

/// Offset of the helper's `syscall` in it.
pub const READ_SYSCALL: u64 = 21;

/// A syscall site's stub: its bytes, and where each displaced
/// instruction starts in it.
pub struct Stub {
    pub bytes: Vec<u8>,
    pub offsets: Vec<u64>,
}

impl Stub {
    /// The displaced run's length in the stub (where the tail starts).
    pub fn displaced_len(&self) -> u64 {
        self.bytes.len() as u64 - TAIL_LEN
    }
}

/// The stub placed at `stub` of a site whose run before the `syscall`
/// is `displaced` (`site::displaced_before`), entering `common`. `None`
/// if the run cannot be relocated there or is too long relocated.
pub fn stub(stub: u64, displaced: &[Instruction], common: u64) -> Option<Stub> {
    let back = displaced.last()?.next_ip() + 2;
    let out = BlockEncoder::encode(
        64,
        InstructionBlock::new(displaced, stub),
        BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS,
    )
    .ok()?;
    let d = out.code_buffer.len() as u64;
    if d > DISPLACED_MAX {
        return None;
    }
    let rel = |from_end: u64| -> Option<[u8; 4]> {
        let dist = back as i64 - from_end as i64;
        i32::try_from(dist).ok().map(i32::to_le_bytes)
    };
    let tail = stub + d;
    let mut b = out.code_buffer;
    b.extend_from_slice(&[0x48, 0x8d, 0x64, 0x24, 0x80]);
    b.push(0x9c);
    b.extend_from_slice(&[0x48, 0xb9]);
    b.extend_from_slice(&common.to_le_bytes());
    b.extend_from_slice(&[0xff, 0xd1]);
    b.push(0x9d);
    b.extend_from_slice(&[0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0]);
    b.push(0xe9);
    b.extend_from_slice(&rel(tail + STUB_RAW)?);
    b.push(0x9d);
    b.extend_from_slice(&[0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0]);
    b.extend_from_slice(&[0x0f, 0x05]);
    b.push(0xe9);
    b.extend_from_slice(&rel(tail + TAIL_LEN)?);
    debug_assert_eq!(b.len() as u64, d + TAIL_LEN);
    let offsets = out
        .new_instruction_offsets
        .iter()
        .map(|&o| o as u64)
        .collect();
    Some(Stub { bytes: b, offsets })
}

/// The `jmp stub` written over a site's `len` bytes (`int3` after it).
pub fn site_jump(site: u64, stub: u64, len: usize) -> Option<Vec<u8>> {
    let d = i32::try_from(stub as i64 - (site as i64 + 5)).ok()?;
    let mut j = vec![0xcc; len.max(5)];
    j[0] = 0xe9;
    j[1..5].copy_from_slice(&d.to_le_bytes());
    Some(j)
}

/// Where a thread stopped at `off` in a site's stub goes when the site is
/// taken out: (rsp adjustment, whether the program's flags are at [rsp]
/// to pop first, the new rip: the site itself, its syscall, or past it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub rsp_add: u64,
    pub pop_flags: bool,
    pub to: Resume,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// This far into the site: the displaced instructions before it ran.
    Displaced(u64),
    /// The site's `syscall` (rax holds the number).
    Syscall,
    /// Past the `syscall` (its result in rax, or a restart pending).
    After,
}

/// How a thread at offset `off` of a stub is moved out (see [`Exit`]);
/// `offsets`: where the displaced instructions start in the stub, `lens`:
/// their lengths at the site, `d`: the run's length in the stub. `None`
/// for an offset no instruction starts at.
pub fn stub_exit(off: u64, offsets: &[u64], lens: &[u64], d: u64) -> Option<Exit> {
    if off < d {
        let k = offsets.iter().position(|&o| o == off)?;
        return Some(Exit {
            rsp_add: 0,
            pop_flags: false,
            to: Resume::Displaced(lens[..k].iter().sum()),
        });
    }
    tail_exit(off - d)
}

fn tail_exit(off: u64) -> Option<Exit> {
    let e = |rsp_add, pop_flags, to| {
        Some(Exit {
            rsp_add,
            pop_flags,
            to,
        })
    };
    match off {
        0 => e(0, false, Resume::Syscall),
        5 => e(128, false, Resume::Syscall),
        6 | 16 | STUB_RAW => e(136, true, Resume::Syscall),
        STUB_SERVED => e(136, true, Resume::After),
        19 => e(128, false, Resume::After),
        27 => e(0, false, Resume::After),
        33 => e(128, false, Resume::Syscall),
        41 => e(0, false, Resume::Syscall),
        43 => e(0, false, Resume::After),
        _ => None,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use iced_x86::{Code, Decoder, DecoderOptions, Instruction, Register};

    pub(in crate::dataplane) fn decode_all(bytes: &[u8], ip: u64) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    #[test]
    fn the_block_is_claimed_with_an_exchange() {
        let c = common(0x3f00_0000_2000, 0x3f00_0000_3000, 0x3f00_0000_4000);
        let ins = decode_all(&c.bytes, 0);
        let xchg: Vec<&Instruction> = ins
            .iter()
            .filter(|i| i.code() == Code::Xchg_rm64_r64)
            .collect();
        assert_eq!(xchg.len(), 2, "one claim before the call, one after");
        for x in xchg {
            assert_eq!(x.memory_base(), Register::R11);
            assert_eq!(x.memory_displacement64(), BLOCK_BUSY);
        }
    }

    #[test]
    fn a_stub_decodes_to_its_documented_offsets() {
        let (stub_at, site, common_at) = (0x7f00_0000_1000, 0x7f00_0010_2000, 0x3f00_0000_0000);
        // mov $0x6e,%eax (5 bytes); mov $0x6e,%r10d (6); glibc read's
        // cmpb $0,x(%rip); je; xor %eax,%eax (11 at the site, 15 relocated:
        // the je becomes a near one).
        let runs: [&[u8]; 3] = [
            &[0xb8, 0x6e, 0, 0, 0],
            &[0x41, 0xba, 0x6e, 0, 0, 0],
            &[
                0x80, 0x3d, 0x31, 0x33, 0x0e, 0x00, 0x00, 0x74, 0x17, 0x31, 0xc0,
            ],
        ];
        for run in runs {
            let displaced = decode_all(run, site);
            let lens: Vec<u64> = displaced.iter().map(|i| i.len() as u64).collect();
            let len: u64 = lens.iter().sum();
            let s = stub(stub_at, &displaced, common_at).unwrap();
            let d = s.displaced_len();
            let ins = decode_all(&s.bytes, stub_at);
            let at: Vec<u64> = ins.iter().map(|i| i.ip() - stub_at).collect();
            let n = displaced.len();
            assert_eq!(at[..n], s.offsets[..]);
            let tail: Vec<u64> = at[n..].iter().map(|o| o - d).collect();
            assert_eq!(tail, [0, 5, 6, 16, 18, 19, 27, 32, 33, 41, 43]);
            assert_eq!(ins[n + 2].immediate64(), common_at);
            assert_eq!(ins[n + 6].near_branch64(), site + len + 2);
            assert_eq!(ins[n + 9].code(), Code::Syscall);
            assert_eq!(ins[n + 10].near_branch64(), site + len + 2);
            for (k, i) in displaced.iter().enumerate() {
                let moved = &ins[k];
                assert_eq!(moved.mnemonic(), i.mnemonic());
                if i.is_ip_rel_memory_operand() {
                    assert_eq!(moved.ip_rel_memory_address(), i.ip_rel_memory_address());
                }
                if i.is_jcc_short_or_near() {
                    assert_eq!(moved.near_branch64(), i.near_branch64());
                }
                let e = stub_exit(s.offsets[k], &s.offsets, &lens, d).unwrap();
                assert_eq!(e.to, Resume::Displaced(i.ip() - site));
            }
            for off in at {
                assert!(
                    stub_exit(off, &s.offsets, &lens, d).is_some(),
                    "offset {off}"
                );
            }
            assert_eq!(stub_exit(1, &s.offsets, &lens, d), None);
        }
    }

    #[test]
    fn the_read_helper_moves_its_arguments_and_calls_at_its_offset() {
        use iced_x86::{Code, Register as R};
        let h = read_helper();
        assert!(
            h.len() as u64 <= super::super::layout::COMMON_LEN - super::super::layout::HELPER_AT
        );
        let mut d = iced_x86::Decoder::new(64, &h, 0);
        let got: Vec<(u64, Code, R, R)> = std::iter::from_fn(|| d.can_decode().then(|| d.decode()))
            .map(|i| (i.ip(), i.code(), i.op0_register(), i.op1_register()))
            .collect();
        let mov = Code::Mov_rm64_r64;
        assert_eq!(
            got,
            [
                (0, mov, R::RAX, R::RDI),
                (3, mov, R::RDI, R::RSI),
                (6, mov, R::RSI, R::RDX),
                (9, mov, R::RDX, R::RCX),
                (12, mov, R::R10, R::R8),
                (15, mov, R::R8, R::R9),
                (18, Code::Xor_rm32_r32, R::R9D, R::R9D),
                (READ_SYSCALL, Code::Syscall, R::None, R::None),
                (READ_SYSCALL + 2, Code::Retnq, R::None, R::None),
            ]
        );
    }

    #[test]
    fn the_common_entry_decodes_and_its_syscalls_are_the_gadgets() {
        let c = common(0x3f00_0000_2000, 0x3f00_0000_3000, 0x3f00_0000_4000);
        let ins = decode_all(&c.bytes, 0);
        assert!(ins.iter().all(|i| i.code() != Code::INVALID));
        let syscalls: Vec<u64> = ins
            .iter()
            .filter(|i| i.code() == Code::Syscall)
            .map(|i| i.ip())
            .collect();
        assert_eq!(syscalls, c.gadgets);
        let first = &ins[0];
        assert_eq!(first.segment_prefix(), Register::GS);
        assert_eq!(first.op0_register(), Register::R11);
        assert_eq!(first.memory_displacement64(), BLOCK_SELF);
    }

    #[test]
    fn a_site_jump_reaches_its_stub() {
        let j = site_jump(0x40_1000, 0x40_0000, 6).unwrap();
        let i = decode_all(&j, 0x40_1000);
        assert_eq!(i[0].near_branch64(), 0x40_0000);
        assert_eq!(j.len(), 6);
        assert_eq!(j[5], 0xcc);
    }
}
