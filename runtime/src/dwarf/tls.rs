//! A shared library's thread-local block, for its `__thread` variables
//! (`DW_OP_form_tls_address` in a module other than the program).
//!
//! x86_64 glibc keeps each thread's dynamic thread vector (DTV) behind the
//! thread pointer (`tcbhead_t.dtv`, `fs_base + 8`); slot `modid` (16 bytes
//! each, the block's address first) holds the module's block, and slot -1
//! their count. A module's id is its link map's `l_tls_modid`, whose
//! offset in glibc's private `struct link_map` is published by libc for
//! thread debuggers (`_thread_db_link_map_l_tls_modid`: size in bits,
//! count, offset), as gdb's libthread_db reads it. The link maps are found
//! from ld.so's `_r_debug` (`r_map`), matched by load bias (`l_addr`).

use crate::elf::AddressSpaceMap;
use crate::memory::ReadMemory;

/// `TLS_DTV_UNALLOCATED`: a slot whose block the thread has not made yet
/// (a `dlopen`ed module's, before its first access).
const UNALLOCATED: u64 = u64::MAX;

/// Why a module's block could not be found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsError {
    /// What is missing in the process (no ld.so, no libc descriptor...).
    Missing(&'static str),
    /// A read of the process's memory failed at this address.
    Fault(u64),
    /// The thread has no block for the module yet.
    Unallocated,
}

fn read_u64(mem: &dyn ReadMemory, addr: u64) -> Result<u64, TlsError> {
    let mut b = [0u8; 8];
    match mem.read(addr, &mut b) {
        Ok(8) => Ok(u64::from_le_bytes(b)),
        _ => Err(TlsError::Fault(addr)),
    }
}

/// The run-time address of the data symbol `name` in any module.
fn symbol(modules: &AddressSpaceMap, name: &str) -> Option<u64> {
    modules.modules.iter().find_map(|m| {
        let s = m.image.symbols.matching(name, |p, n| p == n);
        s.first().map(|s| s.addr.wrapping_add(m.bias))
    })
}

/// A `_thread_db_*` field descriptor's byte offset (its third word).
fn field_offset(
    mem: &dyn ReadMemory,
    modules: &AddressSpaceMap,
    name: &'static str,
) -> Result<u64, TlsError> {
    let at = symbol(modules, name).ok_or(TlsError::Missing(name))?;
    let mut b = [0u8; 12];
    match mem.read(at, &mut b) {
        Ok(12) => Ok(u64::from(u32::from_le_bytes([b[8], b[9], b[10], b[11]]))),
        _ => Err(TlsError::Fault(at)),
    }
}

/// The TLS block of the module loaded at `bias`, in the thread whose
/// thread pointer is `tp`.
pub fn module_block(
    mem: &dyn ReadMemory,
    modules: &AddressSpaceMap,
    bias: u64,
    tp: u64,
) -> Result<u64, TlsError> {
    let r_debug = symbol(modules, "_r_debug").ok_or(TlsError::Missing("_r_debug"))?;
    let modid_at = field_offset(mem, modules, "_thread_db_link_map_l_tls_modid")?;
    let dtv_at = field_offset(mem, modules, "_thread_db_pthread_dtvp")?;
    // r_debug: r_version (int, padded), r_map; link_map: l_addr, l_name,
    // l_ld, l_next.
    let mut map = read_u64(mem, r_debug + 8)?;
    let mut modid = None;
    for _ in 0..4096 {
        if map == 0 {
            break;
        }
        if read_u64(mem, map)? == bias {
            modid = Some(read_u64(mem, map + modid_at)?);
            break;
        }
        map = read_u64(mem, map + 24)?;
    }
    let modid = match modid {
        Some(0) | None => return Err(TlsError::Missing("the module's link map")),
        Some(id) => id,
    };
    let dtv = read_u64(mem, tp.wrapping_add(dtv_at))?;
    let slots = read_u64(mem, dtv.wrapping_sub(16))?;
    if modid > slots {
        return Err(TlsError::Unallocated);
    }
    match read_u64(mem, dtv.wrapping_add(modid * 16))? {
        UNALLOCATED => Err(TlsError::Unallocated),
        block => Ok(block),
    }
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::Missing(what) => write!(
                f,
                "cannot find the library's thread-local block: no {what} in the process"
            ),
            TlsError::Fault(a) => write!(f, "read fault [man error::fault] at {a:#x}"),
            TlsError::Unallocated => {
                f.write_str("the library's thread-local block is not allocated in this thread yet")
            }
        }
    }
}
