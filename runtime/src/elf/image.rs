//! One ELF file on disk: its loadable segments (for the load bias), its
//! symbols (`.symtab`, `.dynsym`, and a separate debug file's `.symtab`
//! found by build-id or `.gnu_debuglink`, else the MiniDebugInfo of
//! `.gnu_debugdata`), and its PLT stubs.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SymbolKind};

use super::maps::{Mapping, dev_of};
use super::symbols::{Symbol, SymbolTable};

/// A `PT_LOAD` segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    pub vaddr: u64,
    pub offset: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub exec: bool,
}

/// A PLT stub: calls to `name` through the PLT land at `addr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PltEntry {
    pub name: String,
    pub addr: u64,
}

/// An ELF file's facts, read once (a probe on libc reads libc once).
#[derive(Clone, Debug)]
pub struct ElfImage {
    pub path: String,
    pub dev: (u32, u32),
    pub inode: u64,
    /// `ET_DYN` (PIE or shared library): loaded at a bias.
    pub relocatable: bool,
    pub entry: u64,
    pub loads: Vec<Load>,
    pub symbols: SymbolTable,
    pub plt: Vec<PltEntry>,
    pub soname: Option<String>,
    /// `DT_NEEDED` libraries.
    pub needed: Vec<String>,
    pub build_id: Option<Vec<u8>>,
    /// The separate debug file whose `.symtab` was merged, if any.
    pub debug_file: Option<PathBuf>,
    /// Symbols came from the MiniDebugInfo (`.gnu_debugdata`).
    pub mini_debuginfo: bool,
}

/// Why an ELF file could not be used.
#[derive(Debug)]
pub struct ElfError(pub String);

impl std::fmt::Display for ElfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where separate debug files live (`/usr/lib/debug`), overridable for tests.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

impl ElfImage {
    /// Reads `path` (following links, as the kernel maps the target).
    pub fn open(path: &Path) -> Result<ElfImage, ElfError> {
        ElfImage::open_with_debug_root(path, Path::new(DEBUG_ROOT))
    }

    pub fn open_with_debug_root(path: &Path, debug_root: &Path) -> Result<ElfImage, ElfError> {
        let fail = |what: String| ElfError(format!("{}: {what}", path.display()));
        let real = std::fs::canonicalize(path).map_err(|e| fail(e.to_string()))?;
        let md = std::fs::metadata(&real).map_err(|e| fail(e.to_string()))?;
        let handle = std::fs::File::open(&real).map_err(|e| fail(e.to_string()))?;
        // SAFETY: a private read-only mapping, dropped at the end of this
        // function (symbols, names and notes are copied out). A file
        // truncated meanwhile would fault as a read would fail.
        let data = unsafe { memmap2::Mmap::map(&handle) }.map_err(|e| fail(e.to_string()))?;
        ElfImage::parse(&real, dev_of(md.dev()), md.ino(), &data, Some(debug_root))
    }

    /// An image read from a process's memory: the vDSO (`[vdso]`), which
    /// has no file. No separate debug files are looked for.
    pub fn from_memory(name: &str, data: &[u8]) -> Result<ElfImage, ElfError> {
        ElfImage::parse(Path::new(name), (0, 0), 0, data, None)
    }

    /// The image of ELF bytes found at `real` (device, inode); separate
    /// debug files are searched under `debug_root` when given.
    fn parse(
        real: &Path,
        dev: (u32, u32),
        inode: u64,
        data: &[u8],
        debug_root: Option<&Path>,
    ) -> Result<ElfImage, ElfError> {
        let fail = |what: String| ElfError(format!("{}: {what}", real.display()));
        let file = ElfFile64::<Endianness>::parse(data)
            .map_err(|e| fail(format!("not a 64-bit ELF file ({e})")))?;
        let endian = file.endian();
        let header = file.elf_header();
        let loads = file
            .elf_program_headers()
            .iter()
            .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
            .map(|ph| Load {
                vaddr: ph.p_vaddr(endian),
                offset: ph.p_offset(endian),
                filesz: ph.p_filesz(endian),
                memsz: ph.p_memsz(endian),
                exec: ph.p_flags(endian) & elf::PF_X != 0,
            })
            .collect();
        let mut syms = symbols_of(&file);
        let has_symtab = file
            .symbol_table()
            .is_some_and(|t| t.symbols().next().is_some());
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let mut debug_file = None;
        if let (false, Some(debug_root)) = (has_symtab, debug_root) {
            let link = file.gnu_debuglink().ok().flatten().map(|(n, _)| n.to_vec());
            if let Some((p, more)) = debug_symbols(real, debug_root, build_id.as_deref(), link) {
                syms.extend(more);
                debug_file = Some(p);
            }
        }
        let mut mini_debuginfo = false;
        if !has_symtab && debug_file.is_none() {
            if let Some(more) = super::minidebug::symbols(&file, symbols_of) {
                syms.extend(more);
                mini_debuginfo = true;
            }
        }
        let (soname, needed) = dynamic_names(&file);
        Ok(ElfImage {
            path: real.to_string_lossy().into_owned(),
            dev,
            inode,
            relocatable: header.e_type(endian) == elf::ET_DYN,
            entry: header.e_entry(endian),
            loads,
            plt: plt_entries(&file),
            symbols: SymbolTable::new(syms),
            soname,
            needed,
            build_id,
            debug_file,
            mini_debuginfo,
        })
    }

    /// The file offset of link-time address `vaddr` (in a PT_LOAD's file
    /// part).
    pub fn file_offset(&self, vaddr: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|l| vaddr >= l.vaddr && vaddr < l.vaddr + l.filesz)
            .map(|l| vaddr - l.vaddr + l.offset)
    }

    /// The run-time address of `vaddr` in a process with these mappings:
    /// the mapping of this file (by device and inode) whose file range
    /// holds the address's file offset (libbpf's formula, right for
    /// ET_EXEC, PIE and shared libraries alike).
    pub fn runtime_addr(&self, maps: &[Mapping], vaddr: u64) -> Option<u64> {
        let off = self.file_offset(vaddr)?;
        let exec = self.is_code(vaddr);
        let holds = |m: &&Mapping| {
            m.is_file(self.dev, self.inode) && off >= m.offset && off < m.offset + (m.end - m.start)
        };
        // lld lets segments share a file page: the same offset is then
        // mapped twice (r-- and r-x); the one with the segment's
        // permission is the segment's.
        maps.iter()
            .filter(holds)
            .find(|m| m.exec == exec)
            .or_else(|| maps.iter().find(holds))
            .map(|m| m.start + (off - m.offset))
    }

    /// The load bias (run-time minus link-time address) in a process with
    /// these mappings, if the file is mapped there.
    pub fn bias(&self, maps: &[Mapping]) -> Option<u64> {
        let l = self.loads.iter().find(|l| l.exec).or(self.loads.first())?;
        let at = self.runtime_addr(maps, l.vaddr)?;
        Some(at.wrapping_sub(l.vaddr))
    }

    /// The short name SystemTap prints for a module (the file name).
    pub fn short_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Whether `vaddr` lies in an executable segment.
    pub fn is_code(&self, vaddr: u64) -> bool {
        self.loads
            .iter()
            .any(|l| l.exec && vaddr >= l.vaddr && vaddr < l.vaddr + l.filesz)
    }
}

type Elf<'d> = ElfFile64<'d, Endianness>;

fn symbols_of(file: &Elf) -> Vec<Symbol> {
    let mut out = Vec::new();
    let tables = [file.symbol_table(), file.dynamic_symbol_table()];
    for table in tables.into_iter().flatten() {
        for s in table.symbols() {
            // (object's is_definition() leaves out STT_GNU_IFUNC.)
            if s.is_undefined() || s.section_index().is_none() {
                continue;
            }
            // STT_GNU_IFUNC symbols are functions too (their resolvers).
            let ifunc = matches!(s.flags(), object::SymbolFlags::Elf { st_info, .. }
                if st_info & 0xf == elf::STT_GNU_IFUNC);
            let func = s.kind() == SymbolKind::Text || ifunc;
            if !func && s.kind() != SymbolKind::Data {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            out.push(Symbol {
                name: name.split('@').next().unwrap_or(name).to_string(),
                addr: s.address(),
                size: s.size(),
                func,
                global: s.is_global(),
            });
        }
    }
    out
}

/// The `.symtab` of a separate debug file: by build-id under
/// `DEBUG_ROOT/.build-id/xx/rest.debug`, then by debuglink next to the
/// file, in its `.debug/`, and under `DEBUG_ROOT` + its directory.
fn debug_symbols(
    real: &Path,
    root: &Path,
    build_id: Option<&[u8]>,
    link: Option<Vec<u8>>,
) -> Option<(PathBuf, Vec<Symbol>)> {
    for c in debug_file_candidates(real, root, build_id, link) {
        let Ok(data) = std::fs::read(&c) else {
            continue;
        };
        let Ok(file) = Elf::parse(&*data) else {
            continue;
        };
        let syms = symbols_of(&file);
        if !syms.is_empty() {
            return Some((c, syms));
        }
    }
    None
}

/// Where the separate debug file of `real` may be, in search order (the
/// file itself left out): by build-id, then by debuglink.
pub fn debug_file_candidates(
    real: &Path,
    root: &Path,
    build_id: Option<&[u8]>,
    link: Option<Vec<u8>>,
) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() > 1) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        candidates.push(
            root.join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..])),
        );
    }
    if let Some(name) = link.and_then(|l| String::from_utf8(l).ok()) {
        let dir = real.parent().unwrap_or(Path::new("/"));
        candidates.push(dir.join(&name));
        candidates.push(dir.join(".debug").join(&name));
        candidates.push(root.join(dir.strip_prefix("/").unwrap_or(dir)).join(&name));
    }
    candidates.retain(|c| c != real);
    candidates
}

/// `DT_SONAME` and `DT_NEEDED`.
fn dynamic_names(file: &Elf) -> (Option<String>, Vec<String>) {
    let endian = file.endian();
    let mut soname = None;
    let mut needed = Vec::new();
    let Some(dynamic) = file.section_by_name(".dynamic") else {
        return (None, needed);
    };
    let Some(dynstr) = file.section_by_name(".dynstr").and_then(|s| s.data().ok()) else {
        return (None, needed);
    };
    let Ok(data) = dynamic.data() else {
        return (None, needed);
    };
    let string = |off: u64| -> Option<String> {
        let rest = dynstr.get(off as usize..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        String::from_utf8(rest[..end].to_vec()).ok()
    };
    for entry in data.chunks_exact(16) {
        let tag = u64::from_ne_bytes(entry[..8].try_into().unwrap());
        let val = u64::from_ne_bytes(entry[8..].try_into().unwrap());
        match tag as u32 {
            elf::DT_NEEDED => needed.extend(string(val)),
            elf::DT_SONAME => soname = string(val),
            _ if tag == elf::DT_NULL as u64 => break,
            _ => {}
        }
    }
    let _ = endian;
    (soname, needed)
}

/// PLT stubs: every `jmp *GOT(%rip)` in `.plt`, `.plt.sec` and `.plt.got`
/// whose GOT slot a dynamic relocation names; the stub starts at the
/// section's entry boundary (16 bytes, or `sh_entsize`).
fn plt_entries(file: &Elf) -> Vec<PltEntry> {
    use std::collections::HashMap;
    let endian = file.endian();
    let mut slots: HashMap<u64, String> = HashMap::new();
    if let (Some(rels), Some(dynsyms)) = (file.dynamic_relocations(), file.dynamic_symbol_table()) {
        for (offset, rel) in rels {
            if let object::RelocationTarget::Symbol(idx) = rel.target() {
                if let Some(name) = dynsyms
                    .symbol_by_index(idx)
                    .ok()
                    .and_then(|s| s.name().ok())
                {
                    slots.insert(offset, name.to_string());
                }
            }
        }
    }
    let mut out = Vec::new();
    for section in file.sections() {
        let Ok(name) = section.name() else { continue };
        if !matches!(name, ".plt" | ".plt.sec" | ".plt.got") {
            continue;
        }
        let Ok(data) = section.data() else { continue };
        let base = section.address();
        let entsize = match section.elf_section_header().sh_entsize(endian) {
            8 | 16 => section.elf_section_header().sh_entsize(endian),
            _ => 16,
        };
        let mut decoder =
            iced_x86::Decoder::with_ip(64, data, base, iced_x86::DecoderOptions::NONE);
        for insn in &mut decoder {
            use iced_x86::{Code, Register};
            if insn.code() != Code::Jmp_rm64 || insn.memory_base() != Register::RIP {
                continue;
            }
            let got = insn.ip_rel_memory_address();
            if let Some(sym) = slots.get(&got) {
                let start = base + (insn.ip() - base) / entsize * entsize;
                out.push(PltEntry {
                    name: sym.clone(),
                    addr: start,
                });
            }
        }
    }
    out.sort_by_key(|e| e.addr);
    out
}
