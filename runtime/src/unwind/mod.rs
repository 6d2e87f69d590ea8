//! User stack unwinding by CFI (`.eh_frame`, `.eh_frame_hdr`,
//! `.debug_frame`), not frame pointers, for `ubacktrace()` and friends.
//!
//! * Unwind sections are read from each module's *file* once per session
//!   ([`SectionCache`], keyed by device and inode) and shared by every
//!   process mapping it.
//! * Per process, a `framehop` unwinder holds the modules at their bias
//!   ([`ProcessUnwinder`]); it is built from `/proc/PID/maps` on the first
//!   unwind and rebuilt only when a frame falls outside every known module
//!   (a library loaded later) or after exec.
//! * Symbols: every module list read is kept for the session, so that an
//!   address is named even after its process exec'd, exited or unloaded
//!   the library ([`UnwindState::map`]): an end probe printing stacks of
//!   `sh -c './prog'` names prog's frames, not only the shell's.
//! * Per unwind, the stack is copied with one bounded `process_vm_readv`
//!   (≤ 64 KiB from the stack pointer, page-sized iovecs); reads beyond the
//!   copy (a signal handler on an alternate stack) cost one more read each.
//! * Signal frames: a return address at glibc's `__restore_rt`
//!   (`mov $15,%rax; syscall`) is the kernel's `rt_sigframe`, whose saved
//!   `ucontext` gives the interrupted rip/rsp/rbp.
//! * Return-probe trampolines are replaced by the real return addresses
//!   from the thread's shadow stack ([`returns`]).
//! * The vDSO (no file) is read from the process's memory with its maps:
//!   its symbols and `.eh_frame` make `clock_gettime` frames unwindable.

pub mod returns;
pub mod stack;

use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use object::{Object, ObjectSection};

use crate::elf::{AddressSpaceMap, ImageCache, LoadedModule, read_maps};
use crate::memory::ReadMemory;

pub use returns::HijackedReturns;
pub use stack::StackCopy;

/// Most frames one backtrace holds (SystemTap's MAXBACKTRACE is 20 for
/// the kernel; user stacks get more room, deep recursion is cut here).
pub const MAX_FRAMES: usize = 128;

/// Most module lists a session keeps for symbols (one per process image
/// unwound, and per re-read after a `dlopen`): a build of thousands of
/// processes keeps the latest ones, a few MB.
const MAX_SEEN: usize = 4096;

/// Section bytes shared between the modules of several processes.
#[derive(Clone, Debug, Default)]
pub struct Bytes(Arc<Vec<u8>>);

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// The unwind-relevant sections of one ELF file (link-time addresses).
#[derive(Clone, Debug, Default)]
pub struct UnwindSections {
    pub text: Option<(Range<u64>, Bytes)>,
    pub eh_frame: Option<(Range<u64>, Bytes)>,
    pub eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    pub debug_frame: Option<Bytes>,
    pub got: Option<Range<u64>>,
}

impl UnwindSections {
    /// Reads the sections of `path`; a file without them gives empty
    /// sections (framehop then falls back to frame pointers).
    pub fn read(path: &str) -> UnwindSections {
        let Ok(f) = std::fs::File::open(path) else {
            return UnwindSections::default();
        };
        // SAFETY: a private read-only mapping dropped before returning
        // (the sections are copied): only their pages are read.
        let Ok(data) = (unsafe { memmap2::Mmap::map(&f) }) else {
            return UnwindSections::default();
        };
        UnwindSections::parse(&data)
    }

    /// The sections of ELF bytes (a file's, or the vDSO's from memory).
    pub fn parse(data: &[u8]) -> UnwindSections {
        let Ok(file) = object::File::parse(data) else {
            return UnwindSections::default();
        };
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            let bytes = s.uncompressed_data().ok()?.into_owned();
            Some((s.address()..s.address() + s.size(), Bytes(Arc::new(bytes))))
        };
        UnwindSections {
            text: section(".text"),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|(_, b)| b),
            got: file
                .section_by_name(".got")
                .map(|s| s.address()..s.address() + s.size()),
        }
    }

    /// Whether link-time address `svma` starts glibc's signal trampoline
    /// `__restore_rt`: `mov $0xf,%rax; syscall` (rt_sigreturn).
    pub fn is_sigreturn(&self, svma: u64) -> bool {
        const CODE: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05];
        let Some((range, bytes)) = &self.text else {
            return false;
        };
        if !range.contains(&svma) {
            return false;
        }
        let at = (svma - range.start) as usize;
        bytes.get(at..at + CODE.len()) == Some(&CODE[..])
    }

    fn module(&self, name: &str, m: &LoadedModule) -> Module<Bytes> {
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.as_ref().map(|t| t.0.clone()),
            text: self.text.as_ref().map(|t| t.1.clone()),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|t| t.0.clone()),
            eh_frame: self.eh_frame.as_ref().map(|t| t.1.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|t| t.1.clone()),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        };
        Module::new(name.to_string(), m.start..m.end, m.bias, info)
    }
}

/// Unwind sections by (device, inode), read once per session.
#[derive(Default)]
pub struct SectionCache {
    files: HashMap<((u32, u32), u64), Arc<UnwindSections>>,
}

impl SectionCache {
    pub fn get(&mut self, m: &LoadedModule) -> Arc<UnwindSections> {
        self.files
            .entry((m.image.dev, m.image.inode))
            .or_insert_with(|| Arc::new(UnwindSections::read(&m.image.path)))
            .clone()
    }
}

/// The modules of one process with their unwinder.
pub struct ProcessUnwinder {
    pub map: AddressSpaceMap,
    unwinder: UnwinderX86_64<Bytes>,
    sections: Vec<Arc<UnwindSections>>,
    /// Addresses found in no module even with fresh maps (JIT code,
    /// garbage past the root): they do not trigger another re-read.
    unknown: Vec<u64>,
}

impl ProcessUnwinder {
    pub fn new(pid: i32, images: &mut ImageCache, files: &mut SectionCache) -> ProcessUnwinder {
        let maps = read_maps(pid).unwrap_or_default();
        let mut map = AddressSpaceMap::new(&maps, images);
        let mut unwinder = UnwinderX86_64::new();
        let mut sections = Vec::new();
        for m in &map.modules {
            let s = files.get(m);
            unwinder.add_module(s.module(&m.image.path, m));
            sections.push(s);
        }
        if let Some((m, s)) = vdso(pid, &maps) {
            unwinder.add_module(s.module(&m.image.path, &m));
            sections.push(Arc::new(s));
            map.modules.push(m);
        }
        ProcessUnwinder {
            map,
            unwinder,
            sections,
            unknown: Vec::new(),
        }
    }

    /// Whether `addr` lies in a module this unwinder knows.
    pub fn knows(&self, addr: u64) -> bool {
        self.map.module_of(addr).is_some() || self.unknown.contains(&addr)
    }

    fn sections_of(&self, addr: u64) -> Option<(&LoadedModule, &UnwindSections)> {
        let i = self
            .map
            .modules
            .iter()
            .position(|m| addr >= m.start && addr < m.end)?;
        Some((&self.map.modules[i], &self.sections[i]))
    }

    /// The return addresses of the stack whose innermost frame has these
    /// registers: the first element is `ip` itself. Stops at the root
    /// (a null or unreadable return address) or after `MAX_FRAMES`.
    /// Return-probe trampolines are replaced by `returns`' real addresses.
    #[allow(clippy::too_many_arguments)]
    pub fn backtrace(
        &self,
        cache: &mut CacheX86_64,
        stack: &StackCopy,
        mem: &dyn ReadMemory,
        returns: &HijackedReturns,
        ip: u64,
        sp: u64,
        bp: u64,
    ) -> Vec<u64> {
        let mut hijacked = 0;
        let mut out = vec![ip];
        let mut regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut read = |addr: u64| stack.read_u64(mem, addr).ok_or(());
        let mut frame = FrameAddress::InstructionPointer(ip);
        while out.len() < MAX_FRAMES {
            let pc = frame.address();
            if let Some((m, s)) = self.sections_of(pc)
                && frame.is_return_address()
                && s.is_sigreturn(pc.wrapping_sub(m.bias))
            {
                // The interrupted context, saved by the kernel.
                let Some(r) = stack::sigframe_regs(regs.sp(), &mut read) else {
                    break;
                };
                regs = UnwindRegsX86_64::new(r.0, r.1, r.2);
                frame = FrameAddress::InstructionPointer(r.0);
                out.push(r.0);
                continue;
            }
            match self
                .unwinder
                .unwind_frame(frame, &mut regs, cache, &mut read)
            {
                Ok(Some(ret)) if ret != 0 => {
                    // The slot the return address was read from: just
                    // below the caller's stack pointer.
                    let real = returns.real(ret, regs.sp().wrapping_sub(8), hijacked);
                    if real != ret {
                        hijacked += 1;
                    }
                    let ret = real;
                    let Some(next) = FrameAddress::from_return_address(ret) else {
                        break;
                    };
                    out.push(ret);
                    frame = next;
                }
                _ => break,
            }
        }
        out
    }
}

/// The vDSO of process `pid` (`[vdso]`, no file): its image and unwind
/// sections read from the process's memory (one read of its two pages,
/// when the process's unwinder is built), so that a stack stopped in
/// `clock_gettime` unwinds through it and shows `__vdso_clock_gettime`.
fn vdso(pid: i32, maps: &[crate::elf::Mapping]) -> Option<(LoadedModule, UnwindSections)> {
    let m = maps.iter().find(|m| m.path == "[vdso]")?;
    let len = usize::try_from(m.end.checked_sub(m.start)?).ok()?;
    if len > 1 << 20 {
        return None;
    }
    let mut data = vec![0u8; len];
    let got = crate::memory::ProcessMemory::new(pid)
        .read(m.start, &mut data)
        .ok()?;
    if got != len {
        return None;
    }
    let image = crate::elf::ElfImage::from_memory("vdso", &data).ok()?;
    // Its first PT_LOAD (vaddr 0 in practice) is at the mapping's start.
    let bias = m
        .start
        .wrapping_sub(image.loads.first().map_or(0, |l| l.vaddr));
    let sections = UnwindSections::parse(&data);
    let module = LoadedModule {
        image: Arc::new(image),
        bias,
        start: m.start,
        end: m.end,
    };
    Some((module, sections))
}

/// What a session keeps for unwinding: file sections, images, the
/// per-process unwinders and framehop's rule cache.
#[derive(Default)]
pub struct UnwindState {
    images: ImageCache,
    files: SectionCache,
    processes: HashMap<i32, ProcessUnwinder>,
    /// Every module list read in this session, newest last: the stacks an
    /// end probe symbolizes came from forks, exec'd children and
    /// libraries since unloaded, not only from the target as it is now.
    seen: Vec<AddressSpaceMap>,
    cache: Option<Box<CacheX86_64>>,
    /// The shadow stack of the thread whose handler runs (set by the
    /// session before each firing).
    pub returns: HijackedReturns,
}

impl UnwindState {
    /// Forgets a process's modules (after exec or at its end).
    pub fn forget(&mut self, pid: i32) {
        self.processes.remove(&pid);
    }

    /// The process's unwinder, built from its maps on first use, and
    /// rebuilt when `addr` lies outside its known modules (a library
    /// loaded since); an address still unknown then is remembered so it
    /// costs no further re-read.
    pub fn process(&mut self, pid: i32, addr: u64) -> &ProcessUnwinder {
        let stale = self.processes.get(&pid).is_none_or(|p| !p.knows(addr));
        // A process that is gone keeps the modules it had: an end probe
        // symbolizes the stacks its handlers collected.
        let gone = stale
            && self.processes.contains_key(&pid)
            && !std::path::Path::new(&format!("/proc/{pid}/maps")).exists();
        if stale && !gone {
            let mut p = ProcessUnwinder::new(pid, &mut self.images, &mut self.files);
            if !p.knows(addr) {
                if p.unknown.len() == 64 {
                    p.unknown.remove(0);
                }
                p.unknown.push(addr);
            }
            self.remember(&p.map);
            self.processes.insert(pid, p);
        }
        &self.processes[&pid]
    }

    /// Keeps a module list for symbols after its process has changed or
    /// gone; the oldest are dropped past [`MAX_SEEN`].
    fn remember(&mut self, map: &AddressSpaceMap) {
        if map.modules.is_empty() {
            return;
        }
        if self.seen.len() == MAX_SEEN {
            self.seen.remove(0);
        }
        self.seen.push(map.clone());
    }

    /// Unwinds the thread with registers (ip, sp, bp) of process `pid`.
    pub fn backtrace(
        &mut self,
        pid: i32,
        mem: &dyn ReadMemory,
        ip: u64,
        sp: u64,
        bp: u64,
    ) -> Vec<u64> {
        let stack = StackCopy::read(mem, sp);
        let mut cache = self
            .cache
            .take()
            .unwrap_or_else(|| Box::new(CacheX86_64::new()));
        let returns = std::mem::take(&mut self.returns);
        let mut frames = self
            .process(pid, ip)
            .backtrace(&mut cache, &stack, mem, &returns, ip, sp, bp);
        // A frame in a library loaded since the maps were read: once more
        // with fresh maps.
        if let Some(&missing) = frames.iter().find(|&&a| !self.processes[&pid].knows(a)) {
            frames = self
                .process(pid, missing)
                .backtrace(&mut cache, &stack, mem, &returns, ip, sp, bp);
        }
        self.returns = returns;
        self.cache = Some(cache);
        frames
    }

    /// The modules that symbolize `addr` for process `pid`: its own as
    /// last read; when none holds `addr` (a stack kept from a child, an
    /// exec'd image, an unloaded library), the newest module list of the
    /// session that does; else its own read afresh. Kept lists come
    /// before a re-read, which costs a maps read per address of an end
    /// probe's stacks while the target lives.
    pub fn map(&mut self, pid: i32, addr: u64) -> &AddressSpaceMap {
        let own = |p: &ProcessUnwinder| p.map.module_of(addr).is_some();
        if self.processes.get(&pid).is_some_and(own) {
            return &self.processes[&pid].map;
        }
        match self.seen.iter().rposition(|m| m.module_of(addr).is_some()) {
            Some(i) => &self.seen[i],
            None => &self.process(pid, addr).map,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ProcessMemory;
    use std::hint::black_box;

    #[inline(never)]
    fn deep(n: u32, out: &mut Vec<String>) -> u32 {
        if n == 0 {
            let (ip, sp, bp): (u64, u64, u64);
            // SAFETY: copies rip, rsp, rbp into registers.
            unsafe {
                std::arch::asm!("lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp",
                    ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp);
            }
            let pid = std::process::id() as i32;
            let mut state = UnwindState::default();
            let frames = state.backtrace(pid, &ProcessMemory::new(pid), ip, sp, bp);
            for f in frames {
                out.push(state.map(pid, f).symname(f));
            }
            return 0;
        }
        black_box(deep(black_box(n - 1), out)) + 1
    }

    /// This test binary (Rust, no frame pointers, linked by lld with
    /// segments sharing file pages) unwinds through its own recursion.
    #[test]
    fn unwinds_own_stack_by_cfi() {
        let names = recursion_caller();
        let deep_frames = names.iter().filter(|n| n.ends_with("::deep")).count();
        assert_eq!(deep_frames, 6, "{names:#?}");
        assert!(
            names.iter().any(|n| n.contains("recursion_caller")),
            "{names:#?}"
        );
    }

    /// The recursion's caller, never inlined (the test function itself may
    /// be inlined into the harness's closure, and then has no frame).
    #[inline(never)]
    fn recursion_caller() -> Vec<String> {
        let mut names = Vec::new();
        black_box(deep(black_box(5), &mut names));
        names
    }
}
