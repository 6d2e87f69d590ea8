//! DWARF target variables (`$var`, `$p->field`, `$a[i]`, `$$parms`,
//! `$$locals`, `$$vars`, `$var$`) at function probes of binaries with debug
//! information (in the file or a separate debug file found by build-id or
//! `.gnu_debuglink`).
//!
//! * [`read`]: the debug information of one ELF file, read with `gimli`:
//!   functions by name, their parameters and locals with types and location
//!   expressions, the probe address after the prologue, the CFA rule there
//!   (from `.eh_frame`).
//! * [`plan`]: what the checker turns each `$expression` into at compile
//!   time: a location program (registers, CFA, memory, addresses + bias),
//!   member offsets and index strides, and a shape for pretty-printing.
//!   Plans are registered here and found by number by the runtime builtins
//!   (`__dwarf_long`, `__dwarf_string`): no DWARF is parsed on the hit path.
//!
//! * [`tls`]: a shared library's thread-local block, through the DTV.
//!
//! Debug files are read once per utap run and kept for its lifetime
//! ([`debug_info`] caches them by path).

pub mod plan;
pub mod read;
pub mod tls;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use plan::{
    Access, Chain, Comp, Machine, Piece, PlanError, Scope, Shape, Site, Step, plan_of, register,
};
pub use read::{DebugInfo, Function, Variable};

/// The debug information of `path` (an executable or library), read on
/// first use; `Err` says which debug files were looked for.
pub fn debug_info(path: &str) -> Result<Arc<DebugInfo>, String> {
    type Loaded = Result<Arc<DebugInfo>, String>;
    static CACHE: OnceLock<Mutex<HashMap<String, Loaded>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
        return found.clone();
    }
    let loaded = DebugInfo::open(std::path::Path::new(path)).map(Arc::new);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_string(), loaded.clone());
    loaded
}

/// Where a `.function("NAME")` entry probe goes in the function whose
/// symbol is at `sym_addr` of `path`: after the prologue when the debug
/// information describes unoptimised code (SystemTap's prologue search),
/// else the symbol itself.
///
/// Unoptimised code (gcc and clang at -O0) always sets up a frame
/// pointer first: a function that does not (libc's, most optimised code)
/// keeps its symbol address without reading any DWARF, so that probing a
/// few functions of a big library does not parse its whole debug file.
pub fn entry_pc(image: &crate::elf::ElfImage, sym_addr: u64) -> u64 {
    if !sets_up_frame(image, sym_addr) {
        return sym_addr;
    }
    match debug_info(&image.path) {
        Ok(d) => d.probe_pc(sym_addr).unwrap_or(sym_addr),
        Err(_) => sym_addr,
    }
}

/// Whether the function at `addr` of `image` starts with `push %rbp;
/// mov %rsp,%rbp` (after an `endbr64`), read from the file.
fn sets_up_frame(image: &crate::elf::ElfImage, addr: u64) -> bool {
    use std::os::unix::fs::FileExt;
    const FRAME: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];
    const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
    let Some(off) = image.file_offset(addr) else {
        return false;
    };
    let mut b = [0u8; 8];
    let read = std::fs::File::open(&image.path).and_then(|f| f.read_exact_at(&mut b, off));
    read.is_ok() && (b[..4] == FRAME || (b[..4] == ENDBR64 && b[4..] == FRAME))
}
