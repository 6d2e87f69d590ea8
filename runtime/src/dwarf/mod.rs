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
//! Debug files are read once per utap run and kept for its lifetime
//! ([`debug_info`] caches them by path).

pub mod plan;
pub mod read;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use plan::{
    Access, Chain, Comp, Machine, Piece, PlanError, Scope, Shape, Site, Step, plan_of, register,
};
pub use read::{DebugInfo, Function, Variable};

/// The debug information of `path` (an executable or library), read on
/// first use; `Err` says which debug files were looked for.
pub fn debug_info(path: &str) -> Result<Arc<DebugInfo>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Result<Arc<DebugInfo>, String>>>> =
        OnceLock::new();
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
pub fn entry_pc(path: &str, sym_addr: u64) -> u64 {
    match debug_info(path) {
        Ok(d) => d.probe_pc(sym_addr).unwrap_or(sym_addr),
        Err(_) => sym_addr,
    }
}
