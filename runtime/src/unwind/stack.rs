//! The copy of a thread's stack one unwind works from, and the kernel's
//! signal frame layout.

use crate::memory::ReadMemory;

/// How much stack one unwind copies.
pub const STACK_COPY: usize = 64 * 1024;

/// The stack from the stack pointer up, as far as it is mapped and at most
/// [`STACK_COPY`] bytes, read in one `process_vm_readv` (one page-sized
/// iovec per page, so the copy stops at the end of the stack mapping).
pub struct StackCopy {
    pub start: u64,
    pub bytes: Vec<u8>,
}

impl StackCopy {
    pub fn read(mem: &dyn ReadMemory, sp: u64) -> StackCopy {
        let mut bytes = vec![0u8; STACK_COPY];
        let n = mem.read(sp, &mut bytes).unwrap_or(0);
        bytes.truncate(n);
        StackCopy { start: sp, bytes }
    }

    /// The word at `addr`: from the copy, else read from the process (a
    /// frame beyond the copy, or on another stack).
    pub fn read_u64(&self, mem: &dyn ReadMemory, addr: u64) -> Option<u64> {
        if let Some(off) = addr.checked_sub(self.start)
            && let Some(b) = self.bytes.get(off as usize..off as usize + 8)
        {
            return Some(u64::from_le_bytes(b.try_into().unwrap()));
        }
        let mut b = [0u8; 8];
        match mem.read(addr, &mut b) {
            Ok(8) => Some(u64::from_le_bytes(b)),
            _ => None,
        }
    }
}

/// Offset of `uc_mcontext` in `struct ucontext` (x86-64: uc_flags,
/// uc_link, stack_t of 24 bytes).
const MCONTEXT: u64 = 40;
/// Indexes of rbp, rsp, rip in `mcontext.gregs`.
const REG_RBP: u64 = 10;
const REG_RSP: u64 = 15;
const REG_RIP: u64 = 16;

/// The interrupted (rip, rsp, rbp) of a signal frame, given the stack
/// pointer of the `__restore_rt` frame: the handler's `ret` popped
/// `pretcode`, so `sp` points at the `ucontext`.
pub fn sigframe_regs(
    sp: u64,
    read: &mut impl FnMut(u64) -> Result<u64, ()>,
) -> Option<(u64, u64, u64)> {
    let greg = |i: u64| sp + MCONTEXT + 8 * i;
    let ip = read(greg(REG_RIP)).ok()?;
    let rsp = read(greg(REG_RSP)).ok()?;
    let rbp = read(greg(REG_RBP)).ok()?;
    Some((ip, rsp, rbp))
}
