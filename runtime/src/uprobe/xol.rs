//! Out-of-line execution (XOL): the probed instruction runs from a slot in
//! a page mapped in the tracee near its module, followed by a `jmp` back to
//! the instruction after the site. One ptrace stop per hit and no
//! single-step: the tracer only points rip at the slot. `iced-x86`'s block
//! encoder relocates the copy (RIP-relative operands and branch targets
//! re-encoded for the slot's address), which is why the page must lie
//! within ±2 GiB of the module.
//!
//! Calls are never run out of line (they would push the slot's address:
//! the emulator pushes the original next address instead), nor are
//! syscalls, interrupts and transactional instructions (they stay on the
//! counted single-step fallback).

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, FlowControl, Instruction, InstructionBlock,
};

use crate::elf::Mapping;

/// Bytes per slot: the relocated instruction (a far-branch rewrite takes
/// up to 16) and the `jmp` back.
pub const SLOT_SIZE: u64 = 32;
/// Size of one slot page.
pub const PAGE_SIZE: u64 = 4096;
/// How far a slot may be from the site (rel32 reach, with a margin for the
/// module's own extent).
pub const REACH: u64 = (1 << 31) - (64 << 20);

/// A page of slots mapped in one address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPage {
    pub base: u64,
    /// Slots handed out so far.
    pub used: u64,
}

impl SlotPage {
    /// The next free slot, if this page is within reach of `site`.
    pub fn take_near(&mut self, site: u64) -> Option<u64> {
        if self.used >= PAGE_SIZE / SLOT_SIZE || self.base.abs_diff(site) > REACH {
            return None;
        }
        let slot = self.base + self.used * SLOT_SIZE;
        self.used += 1;
        Some(slot)
    }
}

/// Whether `i` can run from a slot (see the module doc).
pub fn runnable(i: &Instruction) -> bool {
    match i.flow_control() {
        FlowControl::Next
        | FlowControl::UnconditionalBranch
        | FlowControl::ConditionalBranch
        | FlowControl::IndirectBranch
        | FlowControl::Return => {}
        _ => return false,
    }
    !matches!(
        i.code(),
        Code::Syscall | Code::Sysenter | Code::Retfq | Code::Retfd | Code::Retfw
    ) && !i.is_jmp_far()
        && !i.is_jmp_far_indirect()
}

/// The slot's bytes: `i` relocated to `slot`, then a jump back to the
/// instruction after the site. `None` if it cannot be encoded there (a
/// RIP-relative operand out of reach) or does not fit.
pub fn relocate(i: &Instruction, slot: u64) -> Option<Vec<u8>> {
    let back = Instruction::with_branch(Code::Jmp_rel32_64, i.next_ip()).ok()?;
    let insns = [*i, back];
    let block = InstructionBlock::new(&insns, slot);
    let out = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE).ok()?;
    (out.code_buffer.len() as u64 <= SLOT_SIZE).then_some(out.code_buffer)
}

/// `push %rbp; mov %rsp,%rbp`: the frame set-up, run out of line as a pair
/// (see `Site::trap_is_unambiguous`).
pub const FRAME_SETUP: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];

/// The slot's bytes for a frame set-up at `site`: both instructions (no
/// operand to relocate), then a jump back past them. `None` out of reach.
pub fn relocate_frame_setup(site: u64, slot: u64) -> Option<Vec<u8>> {
    let after = slot + FRAME_SETUP.len() as u64 + 5;
    let rel = i32::try_from((site + FRAME_SETUP.len() as u64).wrapping_sub(after) as i64).ok()?;
    let mut code = FRAME_SETUP.to_vec();
    code.push(0xe9);
    code.extend_from_slice(&rel.to_le_bytes());
    Some(code)
}

/// How many return stubs one space may have (a slot each): a program
/// returning to more places than that from probed functions returns to
/// the rest through the shared trampoline.
pub const MAX_STUBS: usize = 4096;

/// Whether return stubs are made: `UTAP_RETURN_STUBS=0` keeps every
/// return on the shared trampoline (for measurements and the
/// trampoline's tests).
pub fn stubs_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var("UTAP_RETURN_STUBS").map_or(true, |v| v != "0"))
}

/// Where a return stub keeps its own address (see [`hijacking`]).
pub const STUB_SELF: u64 = 8;

/// A return stub at `slot` for return address `ret`: `int3` (the return's
/// stop), then a jump to `ret`, so the thread goes on by itself; its own
/// address at [`STUB_SELF`], which hijacking slots store. The jump is a
/// `jmp rel32` when `ret` is within its reach, else `jmp *[rip+9]` with
/// `ret` at +16: a stub is placed near the probed function, where its
/// hijacking slots can reach it, and the caller may be in another module.
pub fn return_stub(slot: u64, ret: u64) -> [u8; 24] {
    let mut code = [0x90; 24];
    code[0] = 0xcc;
    match i32::try_from(ret.wrapping_sub(slot + 6) as i64) {
        Ok(rel) => {
            code[1] = 0xe9;
            code[2..6].copy_from_slice(&rel.to_le_bytes());
        }
        Err(_) => {
            code[1..7].copy_from_slice(&[0xff, 0x25, 9, 0, 0, 0]);
            code[16..24].copy_from_slice(&ret.to_le_bytes());
        }
    }
    code[8..16].copy_from_slice(&slot.to_le_bytes());
    code
}

/// Length of a hijacking slot's store (`push` + `pop`).
pub const HIJACK_STORE: u64 = 9;

/// A hijacking slot at `slot`: the entry of a function whose return goes
/// through `stub` stores the stub over the return address itself,
/// `push [stub + STUB_SELF]; pop [rsp]` (no register or flag changed; the
/// `pop` addresses rsp after its increment), then runs the site's
/// instruction(s) as its slot would (`frame_setup`: the pair) and jumps
/// back. The tracer then writes only rip at the entry, no stack word.
/// `None` out of reach or too long.
pub fn hijacking(
    slot: u64,
    stub: u64,
    site: u64,
    i: &Instruction,
    frame_setup: bool,
) -> Option<Vec<u8>> {
    let disp = i32::try_from((stub + STUB_SELF).wrapping_sub(slot + 6) as i64).ok()?;
    let mut code = vec![0xff, 0x35];
    code.extend_from_slice(&disp.to_le_bytes());
    code.extend_from_slice(&[0x8f, 0x04, 0x24]);
    let body = slot + HIJACK_STORE;
    let rest = if frame_setup {
        relocate_frame_setup(site, body)?
    } else {
        relocate(i, body)?
    };
    code.extend_from_slice(&rest);
    (code.len() as u64 <= SLOT_SIZE).then_some(code)
}

/// Where to map a new slot page for `site`: the free page right below the
/// nearest mapping that has a free page under it (never under the stack,
/// which grows down), within reach. Above-the-mapping gaps are avoided:
/// the heap grows up into them.
pub fn page_near(maps: &[Mapping], site: u64) -> Option<u64> {
    let mut best: Option<u64> = None;
    let mut prev_end = 0x10_0000u64; // above mmap_min_addr and the null page
    for m in maps {
        if m.start >= prev_end + PAGE_SIZE && m.path != "[stack]" {
            let cand = m.start - PAGE_SIZE;
            let closer = best.is_none_or(|b| cand.abs_diff(site) < b.abs_diff(site));
            if cand.abs_diff(site) <= REACH && closer {
                best = Some(cand);
            }
        }
        prev_end = prev_end.max(m.end);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    #[test]
    fn a_return_stub_traps_then_jumps_to_its_return_address() {
        let slot = 0x5555_0000_1000;
        for ret in [0x5555_1234_5678, 0x7f00_1234_5678] {
            let code = return_stub(slot, ret);
            assert_eq!(code[0], 0xcc);
            let jmp = decode(&code[1..], slot + 1);
            let target = match jmp.code() {
                Code::Jmp_rel32_64 => jmp.near_branch64(),
                Code::Jmp_rm64 => {
                    let at = (jmp.ip_rel_memory_address() - slot) as usize;
                    u64::from_le_bytes(code[at..at + 8].try_into().unwrap())
                }
                other => panic!("{other:?}"),
            };
            assert_eq!(target, ret);
            let own = &code[STUB_SELF as usize..STUB_SELF as usize + 8];
            assert_eq!(u64::from_le_bytes(own.try_into().unwrap()), slot);
        }
    }

    #[test]
    fn a_hijacking_slot_stores_the_stub_then_runs_the_frame_setup() {
        let (slot, stub, site) = (0x5555_0000_1000, 0x5555_0000_1040, 0x5555_0001_2340);
        let push = decode(&FRAME_SETUP, site);
        let code = hijacking(slot, stub, site, &push, true).unwrap();
        let insns = decode_all(&code, slot);
        assert_eq!(insns[0].code(), Code::Push_rm64);
        assert!(insns[0].is_ip_rel_memory_operand());
        assert_eq!(insns[0].ip_rel_memory_address(), stub + STUB_SELF);
        assert_eq!(insns[1].code(), Code::Pop_rm64);
        assert_eq!(insns[1].memory_base(), iced_x86::Register::RSP);
        assert_eq!(insns[1].memory_displacement64(), 0);
        assert_eq!(insns[2].ip(), slot + HIJACK_STORE);
        assert_eq!(insns[2].code(), Code::Push_r64);
        assert_eq!(insns[3].code(), Code::Mov_rm64_r64);
        assert_eq!(insns[4].near_branch64(), site + 4, "back past the pair");
        let far = hijacking(slot, slot + (1 << 33), site, &push, true);
        assert_eq!(far, None, "stub out of reach");
    }

    fn decode(bytes: &[u8], ip: u64) -> Instruction {
        Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE).decode()
    }

    fn decode_all(bytes: &[u8], ip: u64) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    #[test]
    fn rip_relative_load_is_rewritten_for_the_slot() {
        // mov 0x100(%rip),%rax at 0x40_1000 reads 0x40_1107.
        let i = decode(&[0x48, 0x8b, 0x05, 0x00, 0x01, 0, 0], 0x40_1000);
        assert!(runnable(&i));
        let slot = 0x40_0000;
        let code = relocate(&i, slot).unwrap();
        let out = decode_all(&code, slot);
        assert_eq!(out[0].ip_rel_memory_address(), 0x40_1107);
        assert_eq!(out[1].code(), Code::Jmp_rel32_64);
        assert_eq!(out[1].near_branch64(), 0x40_1007);
    }

    #[test]
    fn branches_keep_their_targets() {
        // je +0x10 (short) at 0x1000: taken to 0x1012, else 0x1002.
        let i = decode(&[0x74, 0x10], 0x7f00_0000_1000);
        let slot = 0x7f00_0000_0000;
        let out = decode_all(&relocate(&i, slot).unwrap(), slot);
        assert_eq!(out[0].near_branch64(), 0x7f00_0000_1012);
        assert_eq!(out.last().unwrap().near_branch64(), 0x7f00_0000_1002);
    }

    #[test]
    fn calls_and_syscalls_do_not_run_out_of_line() {
        for bytes in [
            &[0xe8, 0, 0, 0, 0][..],
            &[0xff, 0xd0],
            &[0x0f, 0x05],
            &[0xcd, 0x80],
        ] {
            assert!(!runnable(&decode(bytes, 0x1000)), "{bytes:x?}");
        }
        for bytes in [
            &[0xc3][..],
            &[0x55],
            &[0x6b, 0xc7, 0x03],
            &[0xff, 0x25, 0, 0, 0, 0],
        ] {
            assert!(runnable(&decode(bytes, 0x1000)), "{bytes:x?}");
        }
    }

    #[test]
    fn a_frame_setup_runs_as_a_pair_and_jumps_past_both() {
        for (site, slot) in [
            (0x40_1000u64, 0x40_0000u64),
            (0x7f00_0000_0000, 0x7f00_0000_8000),
        ] {
            let out = decode_all(&relocate_frame_setup(site, slot).unwrap(), slot);
            let codes: Vec<Code> = out.iter().map(|i| i.code()).collect();
            assert_eq!(
                codes,
                [Code::Push_r64, Code::Mov_rm64_r64, Code::Jmp_rel32_64]
            );
            assert_eq!(out[2].near_branch64(), site + 4);
        }
        assert_eq!(relocate_frame_setup(0x7f00_0000_0000, 0x1000), None);
    }

    #[test]
    fn a_page_goes_below_a_mapping_within_reach() {
        let m = |start: u64, end: u64, path: &str| {
            Mapping::parse(&format!("{start:x}-{end:x} r-xp 0 08:01 1 {path}")).unwrap()
        };
        let maps = [
            m(0x5555_0000_0000, 0x5555_0001_0000, "/bin/x"),
            m(0x5555_0001_0000, 0x5555_0002_0000, "[heap]"),
            m(0x7f00_0000_0000, 0x7f00_0010_0000, "/lib/libc.so.6"),
            m(0x7ffd_0000_0000, 0x7ffd_0001_0000, "[stack]"),
        ];
        assert_eq!(page_near(&maps, 0x5555_0000_1000), Some(0x5554_ffff_f000));
        assert_eq!(page_near(&maps, 0x7f00_0000_5000), Some(0x7eff_ffff_f000));
    }
}
