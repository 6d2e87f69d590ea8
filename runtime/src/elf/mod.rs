//! ELF modules of traced processes, for function probes and symbols.
//!
//! * [`maps`]: `/proc/PID/maps`, matched to files by device and inode.
//! * [`image`]: one ELF file: PT_LOAD segments, symbols from `.symtab`,
//!   `.dynsym` and separate debug files (build-id, `.gnu_debuglink`), PLT
//!   stubs, DT_SONAME/DT_NEEDED.
//! * [`minidebug`]: MiniDebugInfo, the xz-compressed `.symtab` of
//!   `.gnu_debugdata` in stripped distribution binaries.
//! * [`symbols`]: address-sorted symbol tables (`usymname`, `usymdata`).
//! * [`modules`]: the modules of one address space with their load bias,
//!   for turning any address of a traced process into `name+off [module]`.
//!
//! Addresses in an [`ElfImage`] are link-time; a run-time address is
//! `ElfImage::runtime_addr(maps, vaddr)` (file-offset formula), so PIE,
//! non-PIE and shared libraries need no special cases.

pub mod image;
pub mod maps;
pub mod minidebug;
pub mod modules;
pub mod sdt;
pub mod symbols;

pub use image::{ElfError, ElfImage, Load, PltEntry};
pub use maps::{Mapping, read_maps};
pub use modules::{AddressSpaceMap, ImageCache, LoadedModule};
pub use symbols::{Symbol, SymbolTable};
