//! Stepping over a breakpoint without a single-step: the tracer emulates
//! the probed instruction on the stopped thread's registers, or runs it
//! out of line (`super::xol`). Either way one ptrace stop per hit, and no
//! window in which the original instruction is back in memory for another
//! thread to run past. A single-step trap costs ≈15 µs on this kind of VM
//! against ≈2 µs for an int3, so single-stepping (with the process's other
//! threads held, see `utrace::breakpoint`) is only a counted fallback.
//!
//! Emulated: `nop`/`endbr64`, `push r64`, `mov r,r` (64/32-bit), `add`/`sub
//! r64, imm` (flags computed exactly), `lea`, `xor r32,r32` (zeroing),
//! `jmp rel`, `call rel`, `call *reg`, `call *mem`, `ret`. These cover the
//! first instruction of most functions (push 37%, mov 32%, sub 9%, jmp 4%
//! of libc's exports). The register-only ones are emulated whenever
//! possible (no memory access at all); `push` and `ret` run out of line
//! when a slot exists (one memory access fewer than emulating them);
//! calls are always emulated (run out of line they would push the slot's
//! address).

use iced_x86::{Code, Decoder, DecoderOptions, Instruction, OpKind, Register};

/// The registers the emulation reads and writes.
pub type Regs = libc::user_regs_struct;

/// How a breakpoint site is stepped over, chosen when it is inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOver {
    /// Emulated in the tracer.
    Emulate(Instruction),
    /// Run from a slot near the module (emulated, or single-stepped, when
    /// no slot can be had).
    Xol(Instruction),
    /// Put back, single-stepped with the other threads held, re-inserted.
    SingleStep,
}

/// Decodes the original instruction at `ip` and picks its step-over.
pub fn plan(bytes: &[u8], ip: u64) -> (StepOver, usize) {
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let insn = d.decode();
    if insn.is_invalid() {
        return (StepOver::SingleStep, 1);
    }
    let touches_memory = matches!(
        insn.code(),
        Code::Push_r64 | Code::Retnq | Code::Call_rel32_64 | Code::Call_rm64
    );
    let step = if emulable(&insn) && !touches_memory {
        StepOver::Emulate(insn)
    } else if super::xol::runnable(&insn) {
        StepOver::Xol(insn)
    } else if emulable(&insn) {
        StepOver::Emulate(insn)
    } else {
        StepOver::SingleStep
    };
    (step, insn.len())
}

/// Whether `i` can be emulated (the fallback of an out-of-line step).
pub fn can_emulate(i: &Instruction) -> bool {
    emulable(i)
}

fn emulable(i: &Instruction) -> bool {
    let regs_only = |n: u32| (0..n).all(|k| i.op_kind(k) == OpKind::Register);
    match i.code() {
        Code::Nopw | Code::Nopd | Code::Nopq | Code::Nop_rm16 | Code::Nop_rm32 | Code::Nop_rm64 => {
            true
        }
        Code::Endbr64 => true,
        Code::Push_r64 => gpr64(i.op0_register()).is_some(),
        Code::Mov_r64_rm64 | Code::Mov_rm64_r64 | Code::Mov_r32_rm32 | Code::Mov_rm32_r32 => {
            regs_only(2)
        }
        Code::Add_rm64_imm8 | Code::Add_rm64_imm32 | Code::Sub_rm64_imm8 | Code::Sub_rm64_imm32 => {
            i.op0_kind() == OpKind::Register
        }
        Code::Lea_r64_m | Code::Lea_r32_m => true,
        Code::Xor_r32_rm32 | Code::Xor_rm32_r32 => {
            regs_only(2) && i.op0_register() == i.op1_register()
        }
        Code::Jmp_rel32_64 | Code::Jmp_rel8_64 | Code::Call_rel32_64 | Code::Retnq => true,
        // call *%reg, call *mem (not fs:/gs:-relative: the base is not in
        // the registers we have).
        Code::Call_rm64 => match i.op0_kind() {
            OpKind::Register => gpr64(i.op0_register()).is_some(),
            OpKind::Memory => !matches!(i.memory_segment(), Register::FS | Register::GS),
            _ => false,
        },
        _ => false,
    }
}

/// What an emulated step needs written to memory (a push or a call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Store {
    pub addr: u64,
    pub value: u64,
}

/// Something only the process's memory can give (ret's return address,
/// an indirect call's target).
pub trait Stack {
    fn read_u64(&self, addr: u64) -> Option<u64>;
}

/// Applies an emulable instruction to `r`; returns the memory store to
/// make, if any. `None` if the instruction turned out not to be emulable
/// (then the caller single-steps).
pub fn apply(i: &Instruction, r: &mut Regs, stack: &dyn Stack) -> Option<Option<Store>> {
    let next = i.next_ip();
    let mut store = None;
    match i.code() {
        Code::Push_r64 => {
            let v = *gpr64_mut(r, i.op0_register())?;
            r.rsp = r.rsp.wrapping_sub(8);
            store = Some(Store {
                addr: r.rsp,
                value: v,
            });
        }
        Code::Mov_r64_rm64 | Code::Mov_rm64_r64 => {
            let v = read_reg(r, i.op1_register())?;
            write_reg(r, i.op0_register(), v)?;
        }
        Code::Mov_r32_rm32 | Code::Mov_rm32_r32 => {
            let v = read_reg(r, i.op1_register())?;
            write_reg(r, i.op0_register(), v as u32 as u64)?;
        }
        Code::Add_rm64_imm8 | Code::Add_rm64_imm32 => {
            let a = read_reg(r, i.op0_register())?;
            let (res, flags) = add_flags(a, i.immediate(1));
            write_reg(r, i.op0_register(), res)?;
            r.eflags = (r.eflags & !ARITH_FLAGS) | flags;
        }
        Code::Sub_rm64_imm8 | Code::Sub_rm64_imm32 => {
            let a = read_reg(r, i.op0_register())?;
            let (res, flags) = sub_flags(a, i.immediate(1));
            write_reg(r, i.op0_register(), res)?;
            r.eflags = (r.eflags & !ARITH_FLAGS) | flags;
        }
        Code::Lea_r64_m | Code::Lea_r32_m => {
            let ea = effective_address(i, r)?;
            let v = if i.code() == Code::Lea_r32_m {
                ea as u32 as u64
            } else {
                ea
            };
            write_reg(r, i.op0_register(), v)?;
        }
        Code::Xor_r32_rm32 | Code::Xor_rm32_r32 => {
            write_reg(r, i.op0_register(), 0)?;
            r.eflags = (r.eflags & !ARITH_FLAGS) | ZF | PF;
        }
        Code::Jmp_rel32_64 | Code::Jmp_rel8_64 => {
            r.rip = i.near_branch64();
            return Some(None);
        }
        Code::Call_rel32_64 => {
            r.rsp = r.rsp.wrapping_sub(8);
            r.rip = i.near_branch64();
            return Some(Some(Store {
                addr: r.rsp,
                value: next,
            }));
        }
        Code::Call_rm64 => {
            let target = match i.op0_kind() {
                OpKind::Register => read_reg(r, i.op0_register())?,
                _ => stack.read_u64(effective_address(i, r)?)?,
            };
            r.rsp = r.rsp.wrapping_sub(8);
            r.rip = target;
            return Some(Some(Store {
                addr: r.rsp,
                value: next,
            }));
        }
        Code::Retnq => {
            r.rip = stack.read_u64(r.rsp)?;
            r.rsp = r.rsp.wrapping_add(8);
            return Some(None);
        }
        _ if emulable(i) => {} // nop, endbr64
        _ => return None,
    }
    r.rip = next;
    Some(store)
}

const CF: u64 = 1 << 0;
const PF: u64 = 1 << 2;
const AF: u64 = 1 << 4;
const ZF: u64 = 1 << 6;
const SF: u64 = 1 << 7;
const OF: u64 = 1 << 11;
const ARITH_FLAGS: u64 = CF | PF | AF | ZF | SF | OF;

fn common_flags(a: u64, b: u64, res: u64) -> u64 {
    let mut f = 0;
    if res == 0 {
        f |= ZF;
    }
    if res >> 63 != 0 {
        f |= SF;
    }
    if (res as u8).count_ones() % 2 == 0 {
        f |= PF;
    }
    if (a ^ b ^ res) & 0x10 != 0 {
        f |= AF;
    }
    f
}

/// `a + b` and the flags `add` sets.
pub fn add_flags(a: u64, b: u64) -> (u64, u64) {
    let res = a.wrapping_add(b);
    let mut f = common_flags(a, b, res);
    if res < a {
        f |= CF;
    }
    if (!(a ^ b) & (a ^ res)) >> 63 != 0 {
        f |= OF;
    }
    (res, f)
}

/// `a - b` and the flags `sub` sets.
pub fn sub_flags(a: u64, b: u64) -> (u64, u64) {
    let res = a.wrapping_sub(b);
    let mut f = common_flags(a, b, res);
    if a < b {
        f |= CF;
    }
    if ((a ^ b) & (a ^ res)) >> 63 != 0 {
        f |= OF;
    }
    (res, f)
}

fn effective_address(i: &Instruction, r: &Regs) -> Option<u64> {
    if i.memory_base() == Register::RIP {
        return Some(i.ip_rel_memory_address());
    }
    let mut ea = i.memory_displacement64();
    if i.memory_base() != Register::None {
        ea = ea.wrapping_add(read_reg(r, i.memory_base())?);
    }
    if i.memory_index() != Register::None {
        let idx = read_reg(r, i.memory_index())?;
        ea = ea.wrapping_add(idx.wrapping_mul(i.memory_index_scale() as u64));
    }
    if i.memory_base().size() == 4 {
        ea = ea as u32 as u64;
    }
    Some(ea)
}

fn gpr64(reg: Register) -> Option<usize> {
    const ORDER: [Register; 16] = [
        Register::RAX,
        Register::RCX,
        Register::RDX,
        Register::RBX,
        Register::RSP,
        Register::RBP,
        Register::RSI,
        Register::RDI,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ];
    ORDER.iter().position(|&x| x == reg.full_register())
}

fn gpr64_mut(r: &mut Regs, reg: Register) -> Option<&mut u64> {
    Some(match gpr64(reg)? {
        0 => &mut r.rax,
        1 => &mut r.rcx,
        2 => &mut r.rdx,
        3 => &mut r.rbx,
        4 => &mut r.rsp,
        5 => &mut r.rbp,
        6 => &mut r.rsi,
        7 => &mut r.rdi,
        8 => &mut r.r8,
        9 => &mut r.r9,
        10 => &mut r.r10,
        11 => &mut r.r11,
        12 => &mut r.r12,
        13 => &mut r.r13,
        14 => &mut r.r14,
        _ => &mut r.r15,
    })
}

/// A 64- or 32-bit general register's value (32-bit: the low half).
fn read_reg(r: &Regs, reg: Register) -> Option<u64> {
    let mut copy = *r;
    let v = *gpr64_mut(&mut copy, reg)?;
    Some(match reg.size() {
        8 => v,
        4 => v as u32 as u64,
        _ => return None,
    })
}

/// Writes a 64-bit register, or a 32-bit one (which zero-extends).
fn write_reg(r: &mut Regs, reg: Register, v: u64) -> Option<()> {
    let size = reg.size();
    let slot = gpr64_mut(r, reg)?;
    match size {
        8 => *slot = v,
        4 => *slot = v as u32 as u64,
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoStack;
    impl Stack for NoStack {
        fn read_u64(&self, _: u64) -> Option<u64> {
            Some(0x4242)
        }
    }

    fn regs() -> Regs {
        // SAFETY: plain data.
        let mut r: Regs = unsafe { std::mem::zeroed() };
        r.rsp = 0x7000;
        r.rbp = 0x1111;
        r.rdi = 5;
        r.rsi = 7;
        r.eflags = 0x202;
        r
    }

    fn run(bytes: &[u8], r: &mut Regs) -> Option<Store> {
        let (step, len) = plan(bytes, 0x1000);
        assert_eq!(len, bytes.len(), "{bytes:x?}");
        let (StepOver::Emulate(i) | StepOver::Xol(i)) = step else {
            panic!("{bytes:x?} not emulated")
        };
        assert!(can_emulate(&i), "{bytes:x?}");
        apply(&i, r, &NoStack).unwrap()
    }

    #[test]
    fn prologue_instructions() {
        let mut r = regs();
        // push %rbp
        assert_eq!(
            run(&[0x55], &mut r),
            Some(Store {
                addr: 0x6ff8,
                value: 0x1111
            })
        );
        assert_eq!((r.rsp, r.rip), (0x6ff8, 0x1001));
        // mov %rsp,%rbp
        run(&[0x48, 0x89, 0xe5], &mut r);
        assert_eq!((r.rbp, r.rip), (0x6ff8, 0x1003));
        // sub $0x10,%rsp
        run(&[0x48, 0x83, 0xec, 0x10], &mut r);
        assert_eq!(r.rsp, 0x6fe8);
        // lea (%rdi,%rsi,4),%eax
        run(&[0x8d, 0x04, 0xb7], &mut r);
        assert_eq!(r.rax, 5 + 7 * 4);
        // endbr64
        run(&[0xf3, 0x0f, 0x1e, 0xfa], &mut r);
        assert_eq!(r.rip, 0x1004);
        // jmp rel32 (+0x10)
        run(&[0xe9, 0x10, 0, 0, 0], &mut r);
        assert_eq!(r.rip, 0x1015);
        // call rel32 pushes the next address
        let s = run(&[0xe8, 0x10, 0, 0, 0], &mut r);
        assert_eq!(s.unwrap().value, 0x1005);
        assert_eq!(r.rip, 0x1015);
        // ret
        run(&[0xc3], &mut r);
        assert_eq!(r.rip, 0x4242);
        // xor %eax,%eax
        r.rax = u64::MAX;
        run(&[0x31, 0xc0], &mut r);
        assert_eq!(r.rax, 0);
        assert_eq!(r.eflags & ARITH_FLAGS, ZF | PF);
    }

    #[test]
    fn indirect_calls_push_the_original_next_address() {
        let mut r = regs();
        r.rax = 0x5000;
        // call *%rax
        let s = run(&[0xff, 0xd0], &mut r).unwrap();
        assert_eq!((s.value, s.addr, r.rip), (0x1002, 0x6ff8, 0x5000));
        // call *0x10(%rip): the target is read from 0x1016
        let s = run(&[0xff, 0x15, 0x10, 0, 0, 0], &mut r).unwrap();
        assert_eq!((s.value, r.rip), (0x1006, 0x4242));
    }

    #[test]
    fn memory_operands_run_out_of_line_syscalls_are_single_stepped() {
        // mov 0x10(%rip),%rax reads memory; push and ret run from a slot
        for bytes in [&[0x48, 0x8b, 0x05, 0x10, 0, 0, 0][..], &[0x55], &[0xc3]] {
            assert!(matches!(plan(bytes, 0x1000).0, StepOver::Xol(_)));
        }
        assert_eq!(plan(&[0x0f, 0x05], 0x1000).0, StepOver::SingleStep);
        assert!(matches!(
            plan(&[0xe8, 0, 0, 0, 0], 0x1000).0,
            StepOver::Emulate(_)
        ));
    }

    /// The flags of add/sub against the CPU's own.
    #[test]
    fn flags_match_the_cpu() {
        let values = [
            0u64,
            1,
            0x0f,
            0x10,
            0x7fff_ffff_ffff_ffff,
            0x8000_0000_0000_0000,
            u64::MAX,
            0x1234_5678,
        ];
        for &a in &values {
            for &b in &values {
                let (sum, sf) = add_flags(a, b);
                let (diff, df) = sub_flags(a, b);
                let (hs, hf, hd, hdf): (u64, u64, u64, u64);
                // SAFETY: register-only arithmetic and pushf.
                unsafe {
                    std::arch::asm!(
                        "mov {s}, {a}", "add {s}, {b}", "pushfq", "pop {sf}",
                        "mov {d}, {a}", "sub {d}, {b}", "pushfq", "pop {df}",
                        a = in(reg) a, b = in(reg) b, s = out(reg) hs, sf = out(reg) hf,
                        d = out(reg) hd, df = out(reg) hdf,
                    );
                }
                assert_eq!((sum, sf), (hs, hf & ARITH_FLAGS), "{a:#x}+{b:#x}");
                assert_eq!((diff, df), (hd, hdf & ARITH_FLAGS), "{a:#x}-{b:#x}");
            }
        }
    }
}
