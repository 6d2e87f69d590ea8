//! USDT marker probes (`process("P").mark("NAME")`,
//! `.provider("P").mark("NAME")`): the markers of a module found in its
//! `.note.stapsdt` (read once per file), and the arguments of a hit
//! decoded from each marker's argument spec with the thread's registers
//! and one memory read per memory operand.
//!
//! A probe on a marker is a breakpoint on the marker's `nop`, placed and
//! shared like a function probe's (see [`super::functions`]). A marker with
//! an is-enabled semaphore has it incremented in each process while it is
//! probed; the utrace core takes it back at every detach (see
//! `uprobe::Breakpoints::restore_all`).

use std::collections::HashMap;
use std::rc::Rc;

use crate::elf::LoadedModule;
use crate::elf::sdt::{Operand, Reg, SdtNote, notes_of};
pub use crate::hit::{MarkArg, Marker, parms};
use crate::memory::ReadMemory;

use crate::glob::glob;

/// The notes of each file, read on first use.
#[derive(Default)]
pub(crate) struct NoteCache {
    by_path: HashMap<String, Rc<Vec<SdtNote>>>,
}

impl NoteCache {
    pub fn notes(&mut self, path: &str) -> Rc<Vec<SdtNote>> {
        self.by_path
            .entry(path.to_string())
            .or_insert_with(|| {
                // Read once per run, shared with the checker.
                let notes = match notes_of(path).as_ref() {
                    Ok(n) => n.clone(),
                    Err(_) => Vec::new(),
                };
                Rc::new(notes)
            })
            .clone()
    }
}

/// The markers of module `m` matching `provider` (when written) and
/// `name` (wildcards), with their run-time site addresses.
pub(crate) fn resolve(
    cache: &mut NoteCache,
    m: &LoadedModule,
    provider: Option<&str>,
    name: &str,
) -> Vec<(u64, Rc<Marker>)> {
    let notes = cache.notes(&m.image.path);
    notes
        .iter()
        .filter(|n| provider.is_none_or(|p| glob(p, &n.provider)) && glob(name, &n.name))
        .map(|n| (n.pc.wrapping_add(m.bias), Rc::new(marker(m, n, provider))))
        .collect()
}

fn marker(m: &LoadedModule, n: &SdtNote, provider: Option<&str>) -> Marker {
    let args = n
        .parsed_args()
        .unwrap_or_default()
        .into_iter()
        .map(|spec| {
            let symbol_addr = match &spec.operand {
                Operand::Symbol { name, offset } => m
                    .image
                    .symbols
                    .iter()
                    .find(|s| s.name == *name)
                    .map(|s| s.addr.wrapping_add(*offset as u64).wrapping_add(m.bias)),
                _ => None,
            };
            MarkArg { spec, symbol_addr }
        })
        .collect();
    let provider_part = match provider {
        Some(_) => format!(".provider(\"{}\")", n.provider),
        None => String::new(),
    };
    let function = m
        .image
        .symbols
        .lookup(n.pc)
        .map(|(s, _)| s.name.clone())
        .unwrap_or_default();
    Marker {
        provider: n.provider.clone(),
        name: n.name.clone(),
        pp: format!(
            "process(\"{}\"){provider_part}.mark(\"{}\")",
            m.image.path, n.name
        ),
        function,
        args,
        semaphore: match n.semaphore {
            0 => 0,
            s => s.wrapping_add(m.bias),
        },
    }
}

/// The value of one argument at a hit: the register, immediate or memory
/// the spec names, truncated to its size and extended by its sign. An
/// unreadable operand reads as 0.
pub fn read_arg(arg: &MarkArg, regs: &libc::user_regs_struct, mem: &dyn ReadMemory) -> i64 {
    let spec = &arg.spec;
    let load = |addr: u64| {
        let mut b = [0u8; 8];
        let n = usize::from(spec.size);
        match mem.read(addr, &mut b[..n]) {
            Ok(got) if got == n => u64::from_le_bytes(b),
            _ => 0,
        }
    };
    let raw = match &spec.operand {
        Operand::Imm(v) => *v as u64,
        Operand::Reg(r) => register(regs, r),
        Operand::Mem { .. } | Operand::Symbol { .. } => arg_address(arg, regs).map_or(0, load),
    };
    spec.extend(raw)
}

/// Where a `disp(base, index, scale)` operand is, from the registers at
/// the marker, or a `sym(%rip)` operand (resolved with the module's bias
/// when the marker was found); `None` for registers and constants, and
/// for a symbol that was not found. The data plane's marker entry
/// passes this address to in-process handlers, which load it themselves.
pub fn arg_address(arg: &MarkArg, regs: &libc::user_regs_struct) -> Option<u64> {
    let (disp, base, index) = match &arg.spec.operand {
        Operand::Mem { disp, base, index } => (disp, base, index),
        Operand::Symbol { .. } => return arg.symbol_addr,
        _ => return None,
    };
    let mut addr = *disp as u64;
    if let Some(b) = base {
        addr = addr.wrapping_add(register(regs, b));
    }
    if let Some((i, scale)) = index {
        addr = addr.wrapping_add(register(regs, i).wrapping_mul(u64::from(*scale)));
    }
    Some(addr)
}

/// A register's bytes as the operand names them (`%ah` is bits 8..16;
/// a RIP-relative address is relative to the marker, whose `nop` is one
/// byte: rip at the trap is already past it).
fn register(regs: &libc::user_regs_struct, r: &Reg) -> u64 {
    let full = match r.name {
        "rax" => regs.rax,
        "rbx" => regs.rbx,
        "rcx" => regs.rcx,
        "rdx" => regs.rdx,
        "rsi" => regs.rsi,
        "rdi" => regs.rdi,
        "rbp" => regs.rbp,
        "rsp" => regs.rsp,
        "r8" => regs.r8,
        "r9" => regs.r9,
        "r10" => regs.r10,
        "r11" => regs.r11,
        "r12" => regs.r12,
        "r13" => regs.r13,
        "r14" => regs.r14,
        "r15" => regs.r15,
        "rip" => regs.rip,
        _ => 0,
    };
    let v = if r.high { full >> 8 } else { full };
    match r.width {
        8 => v,
        w => v & ((1u64 << (u32::from(w) * 8)) - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::sdt::parse_arg;

    struct Buf(u64, Vec<u8>);
    impl ReadMemory for Buf {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, crate::memory::Fault> {
            let off = addr.wrapping_sub(self.0) as usize;
            if off >= self.1.len() {
                return Err(crate::memory::Fault { addr, errno: 14 });
            }
            let n = buf.len().min(self.1.len() - off);
            buf[..n].copy_from_slice(&self.1[off..off + n]);
            Ok(n)
        }
    }

    fn arg(text: &str) -> MarkArg {
        MarkArg {
            spec: parse_arg(text).unwrap(),
            symbol_addr: None,
        }
    }

    #[test]
    fn decodes_registers_memory_and_immediates() {
        // SAFETY: user_regs_struct is plain integers.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        regs.rax = 0x1122_3344_5566_ff88;
        regs.rsp = 0x1000;
        regs.rcx = 2;
        let mut stack = vec![0u8; 64];
        stack[8..16].copy_from_slice(&(-300i64).to_le_bytes());
        stack[16..24].copy_from_slice(&7u64.to_le_bytes());
        let mem = Buf(0x1000, stack);
        let v = |t: &str| read_arg(&arg(t), &regs, &mem);
        assert_eq!(v("8@%rax"), 0x1122_3344_5566_ff88);
        assert_eq!(v("-1@%al"), -120);
        assert_eq!(v("1@%ah"), 0xff);
        assert_eq!(v("-2@%ax"), -120);
        assert_eq!(v("4@%eax"), 0x5566_ff88);
        assert_eq!(v("-8@8(%rsp)"), -300);
        assert_eq!(v("-4@8(%rsp)"), -300);
        assert_eq!(v("8@(%rsp,%rcx,8)"), 7);
        assert_eq!(v("-4@$-1"), -1);
        assert_eq!(v("8@-8(%rsp)"), 0, "unreadable memory reads 0");
    }

    #[test]
    fn parms_use_percent_hash_x() {
        assert_eq!(
            parms(&[0, 255, -1]),
            "$arg1=0x0 $arg2=0xff $arg3=0xffffffffffffffff"
        );
        assert_eq!(parms(&[]), "");
    }
}
