//! Which instructions before a `syscall` a site's stub can take over.
//!
//! A syscall site is the run of instructions right before a wrapper's
//! `syscall` that a 5-byte `jmp` to the stub overwrites; the stub runs
//! them relocated, then makes the call. Most wrappers have a 5-byte
//! `mov $NR,%eax` there; glibc's `read` has `cmpb $0,single_threaded(%rip);
//! je 1f; xor %eax,%eax` on one path and `mov 8(%rsp),%edi; xor %eax,%eax`
//! on the other, so one instruction is not always enough. The run is
//! taken backwards from the `syscall` until it is 5 bytes long, each
//! instruction one that means the same from the stub: plain ones (with
//! `%rip`-relative operands re-encoded for the stub's address) and
//! conditional jumps (re-aimed at their target in the program's text).
//! The `syscall` itself is never taken, so a restart (rip - 2) and a
//! branch to it still run the original instruction.
//!
//! The window left: a thread that a signal interrupted between two of the
//! run's instructions, and whose handler is still running when the site
//! is patched, returns from the handler into the jump. The patch is put
//! off while a held thread is inside the run, but a handler's saved
//! context is not seen; multi-instruction function entries have the same
//! window, and a run is at most 4 instructions long.
//!
//! Whether a thread trapped at the site's `syscall` can be sent back to
//! the site's start (so the stub serves the trapped call) is a second
//! question (`reruns_alike`): only if running the run again from the
//! state it left computes what it computed the first time.

use iced_x86::{
    Code, FlowControl, Instruction, InstructionInfoFactory, OpAccess, Register, RflagsBits,
};

/// The most instructions a site's run may have.
const MAX_RUN: usize = 4;

/// The run a stub takes for the `syscall` right after `insns[at]`
/// (`insns` decoded in order, without gaps), or `None` if the bytes
/// before it hold no such run of 5 bytes or more.
pub fn displaced_before(insns: &[Instruction], at: usize) -> Option<Vec<Instruction>> {
    let mut first = at + 1;
    let mut len = 0;
    while len < 5 {
        first = first.checked_sub(1)?;
        let i = insns.get(first)?;
        if at - first >= MAX_RUN || !relocatable(i) {
            return None;
        }
        if first < at && insns[first].next_ip() != insns[first + 1].ip() {
            return None;
        }
        len += i.len();
    }
    Some(insns[first..=at].to_vec())
}

/// An instruction that means the same run from a stub: a plain one
/// (operands relocated by the encoder) or a conditional jump to a fixed
/// target. Not a call (the callee would return into the stub), not a
/// `syscall` or trap.
fn relocatable(i: &Instruction) -> bool {
    match i.flow_control() {
        FlowControl::Next => !matches!(
            i.code(),
            Code::Syscall | Code::Sysenter | Code::Int3 | Code::Int_imm8
        ),
        FlowControl::ConditionalBranch => i.is_jcc_short_or_near(),
        _ => false,
    }
}

/// Whether a call of `insns` returns into `range` (a thread in the
/// callee when the site is patched would come back into the jump).
pub fn returns_land_in(insns: &[Instruction], range: std::ops::Range<u64>) -> bool {
    insns
        .iter()
        .any(|i| i.flow_control() == FlowControl::Call && range.contains(&i.next_ip()))
}

/// Whether running `run` again, from the registers and flags it left,
/// computes the same: it writes no memory, and every register or flag
/// it reads before writing it is one it never writes. (`mov $NR,%eax`
/// and `cmpb $0,x(%rip); je; xor %eax,%eax` do; `mov %eax,%r8d; xor
/// %eax,%eax` does not: the second run would copy 0.)
pub fn reruns_alike(run: &[Instruction]) -> bool {
    let mut factory = InstructionInfoFactory::new();
    let mut infos = Vec::with_capacity(run.len());
    for i in run {
        let info = factory.info(i);
        if info.used_memory().iter().any(|m| writes(m.access())) {
            return false;
        }
        let used = |how: fn(OpAccess) -> bool| -> Vec<Register> {
            let regs = info.used_registers().iter().filter(|u| how(u.access()));
            regs.map(|u| u.register().full_register()).collect()
        };
        infos.push((
            used(reads),
            used(writes),
            i.rflags_read(),
            i.rflags_modified(),
        ));
    }
    let all_regs: Vec<Register> = infos.iter().flat_map(|x| x.1.clone()).collect();
    let all_flags = infos.iter().fold(RflagsBits::NONE, |f, x| f | x.3);
    let mut done_regs: Vec<Register> = Vec::new();
    let mut done_flags = RflagsBits::NONE;
    for (reads, writes, flags_read, flags_written) in infos {
        let stale = |r: &Register| all_regs.contains(r) && !done_regs.contains(r);
        if reads.iter().any(stale) || flags_read & all_flags & !done_flags != 0 {
            return false;
        }
        done_regs.extend(writes);
        done_flags |= flags_written;
    }
    true
}

fn reads(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Read
            | OpAccess::CondRead
            | OpAccess::ReadWrite
            | OpAccess::ReadCondWrite
            | OpAccess::CondWrite
    )
}

fn writes(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    fn decode(bytes: &[u8], ip: u64) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    /// glibc 2.36's `read`, from its start through its second `syscall`.
    const READ: &[u8] = &[
        0x80, 0x3d, 0x31, 0x33, 0x0e, 0x00, 0x00, // cmpb $0,0xe3331(%rip)
        0x74, 0x17, // je +0x20
        0x31, 0xc0, // xor %eax,%eax
        0x0f, 0x05, // syscall
        0x48, 0x3d, 0x00, 0xf0, 0xff, 0xff, // cmp $-4096,%rax
        0x77, 0x5b, // ja
        0xc3, // ret
        0x2e, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, // cs nopw
        0x48, 0x83, 0xec, 0x28, // sub $0x28,%rsp
        0x48, 0x89, 0x54, 0x24, 0x18, // mov %rdx,0x18(%rsp)
        0x48, 0x89, 0x74, 0x24, 0x10, // mov %rsi,0x10(%rsp)
        0x89, 0x7c, 0x24, 0x08, // mov %edi,0x8(%rsp)
        0xe8, 0x49, 0xd5, 0xf8, 0xff, // call __pthread_enable_asynccancel
        0x48, 0x8b, 0x54, 0x24, 0x18, // mov 0x18(%rsp),%rdx
        0x48, 0x8b, 0x74, 0x24, 0x10, // mov 0x10(%rsp),%rsi
        0x41, 0x89, 0xc0, // mov %eax,%r8d
        0x8b, 0x7c, 0x24, 0x08, // mov 0x8(%rsp),%edi
        0x31, 0xc0, // xor %eax,%eax
        0x0f, 0x05, // syscall
    ];

    fn run_before(insns: &[Instruction], call: u64) -> Option<Vec<Instruction>> {
        let at = insns.iter().position(|i| i.next_ip() == call)?;
        displaced_before(insns, at)
    }

    #[test]
    fn reads_two_syscalls_get_runs_of_several_instructions() {
        let insns = decode(READ, 0x1000);
        let single = run_before(&insns, 0x100b).unwrap();
        let ips: Vec<u64> = single.iter().map(|i| i.ip()).collect();
        assert_eq!(ips, [0x1000, 0x1007, 0x1009], "cmpb, je, xor");
        assert!(reruns_alike(&single));
        let threaded = run_before(&insns, 0x104a).unwrap();
        let ips: Vec<u64> = threaded.iter().map(|i| i.ip()).collect();
        assert_eq!(ips, [0x1044, 0x1048], "mov 8(%rsp),%edi; xor");
        assert!(reruns_alike(&threaded));
        assert!(!returns_land_in(&insns, 0x1045..0x104a));
        assert!(
            returns_land_in(&insns, 0x1030..0x1040),
            "the call returns to 0x1037"
        );
    }

    #[test]
    fn a_run_that_reads_what_it_writes_does_not_rerun() {
        // mov %eax,%r8d; xor %eax,%eax
        let insns = decode(&[0x41, 0x89, 0xc0, 0x31, 0xc0, 0x0f, 0x05], 0);
        let run = run_before(&insns, 5).unwrap();
        assert_eq!(run.len(), 2);
        assert!(!reruns_alike(&run));
        // add $0x100000,%rdi
        let add = decode(&[0x48, 0x81, 0xc7, 0, 0, 0x10, 0, 0x0f, 0x05], 0);
        assert!(!reruns_alike(&run_before(&add, 7).unwrap()));
        // mov $0x6e,%eax
        let mov = decode(&[0xb8, 0x6e, 0, 0, 0, 0x0f, 0x05], 0);
        assert!(reruns_alike(&run_before(&mov, 5).unwrap()));
    }

    #[test]
    fn calls_jumps_and_stores_are_not_taken() {
        // call; syscall: a call cannot be taken
        let call = decode(&[0xe8, 0, 0, 0, 0, 0x0f, 0x05], 0);
        assert!(run_before(&call, 5).is_none());
        // jmp +0; xor: an unconditional jump ends the run short of 5 bytes
        let jmp = decode(&[0xeb, 0x00, 0x31, 0xc0, 0x0f, 0x05], 0);
        assert!(run_before(&jmp, 4).is_none());
        // mov %edi,0x8(%rsp); xor: taken, but it writes memory
        let store = decode(&[0x89, 0x7c, 0x24, 0x08, 0x31, 0xc0, 0x0f, 0x05], 0);
        let run = run_before(&store, 6).unwrap();
        assert!(!reruns_alike(&run));
        // Five 1-byte nops: more instructions than a run may have.
        let nops = decode(&[0x90, 0x90, 0x90, 0x90, 0x90, 0x0f, 0x05], 0);
        assert!(run_before(&nops, 5).is_none());
    }
}
