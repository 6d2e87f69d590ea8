//! MiniDebugInfo (`.gnu_debugdata`): Fedora and other distributions strip
//! their binaries but keep, xz-compressed in this section, a small ELF file
//! holding the `.symtab` entries of the functions that `.dynsym` lacks
//! (GDB's "MiniDebugInfo"). Its symbols carry the stripped file's
//! link-time addresses, so they merge with `.dynsym` as they are.

use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSection};

use super::symbols::Symbol;

/// The name of the section holding the compressed ELF file.
pub const SECTION: &str = ".gnu_debugdata";

/// Largest decompressed size accepted (the symbol tables of big programs
/// are a few MB; a corrupt or hostile stream must not exhaust memory).
const MAX_SIZE: u64 = 256 << 20;

/// The symbols of `file`'s MiniDebugInfo, if it has a readable one.
pub(super) fn symbols(
    file: &ElfFile64<Endianness>,
    symbols_of: impl Fn(&ElfFile64<Endianness>) -> Vec<Symbol>,
) -> Option<Vec<Symbol>> {
    let compressed = file.section_by_name(SECTION)?.data().ok()?;
    let data = decompress(compressed)?;
    let inner = ElfFile64::<Endianness>::parse(&*data).ok()?;
    let syms = symbols_of(&inner);
    (!syms.is_empty()).then_some(syms)
}

/// The xz stream's contents, or None if it is not valid xz (or too big).
fn decompress(compressed: &[u8]) -> Option<Vec<u8>> {
    let mut out = Capped(Vec::new());
    let mut input = compressed;
    lzma_rs::xz_decompress(&mut input, &mut out).ok()?;
    Some(out.0)
}

/// A buffer that refuses to grow past [`MAX_SIZE`].
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if (self.0.len() + buf.len()) as u64 > MAX_SIZE {
            return Err(std::io::Error::other("MiniDebugInfo too large"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
