//! USDT markers: the `.note.stapsdt` notes of `<sys/sdt.h>` (provider,
//! name, site, semaphore, argument spec) and the argument spec parser.
//!
//! Note layout (sdt.h): owner `"stapsdt"`, type 3; descriptor = pc, the
//! link-time address of `_.stapsdt.base`, the semaphore address (8 bytes
//! each on LP64), then `provider\0name\0args\0`. When the file was
//! prelinked, `.stapsdt.base` moved and the note did not: pc and
//! semaphore are corrected by `sh_addr(.stapsdt.base) - base`.
//!
//! Argument spec: space-separated `[-]SIZE@OPERAND` (a negative size is
//! signed) with AT&T operands: `%reg` (every sub-register name), `$imm`,
//! `disp(%base)`, `(%base,%index,scale)`, `disp(%rip)`.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use object::{Object, ObjectSection};

/// One marker, at link-time addresses (after the prelink correction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdtNote {
    pub provider: String,
    pub name: String,
    pub pc: u64,
    /// The `_.stapsdt.base` address the note was written for.
    pub base: u64,
    /// The 2-byte is-enabled counter, 0 when the marker has none.
    pub semaphore: u64,
    /// The argument spec as written (`-4@%edi 8@-16(%rbp)`).
    pub args: String,
}

impl SdtNote {
    /// The parsed arguments; an unparsable spec is an error naming it.
    pub fn parsed_args(&self) -> Result<Vec<SdtArg>, String> {
        parse_args(&self.args)
    }
}

const NT_STAPSDT: u32 = 3;

/// The markers of an ELF file's bytes (none when it has no notes).
pub fn sdt_notes(data: &[u8]) -> Result<Vec<SdtNote>, String> {
    let file = object::File::parse(data).map_err(|e| e.to_string())?;
    let Some(section) = file.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let notes = section.data().map_err(|e| e.to_string())?;
    let base_addr = file.section_by_name(".stapsdt.base").map(|s| s.address());
    parse_notes(notes, base_addr)
}

/// The markers of the ELF file at `path`, read once per utap run and
/// shared by the checker (points, `$argN`, `-L`) and the session (sites
/// at exec and at each `dlopen`). Only the ELF header, the section
/// headers, their names and the note section are read (python3.11 is
/// 7 MB; its notes are 656 bytes).
pub fn notes_of(path: &str) -> Arc<Result<Vec<SdtNote>, String>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Result<Vec<SdtNote>, String>>>>> =
        OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
        return found.clone();
    }
    let read = Arc::new(read_notes(Path::new(path)));
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_string(), read.clone());
    read
}

/// Reads the notes of a 64-bit little-endian ELF file section by section
/// (see [`notes_of`]).
fn read_notes(path: &Path) -> Result<Vec<SdtNote>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let at = |off: u64, len: usize| -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, off)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(buf)
    };
    let eh = at(0, 64)?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return Err(format!(
            "{}: not a 64-bit little-endian ELF file",
            path.display()
        ));
    }
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as usize;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(&eh, 0x28),
        u16_at(&eh, 0x3a),
        u16_at(&eh, 0x3c),
        u16_at(&eh, 0x3e),
    );
    if shnum == 0 || shentsize < 64 || shstrndx >= shnum {
        return Ok(Vec::new());
    }
    let table = at(shoff, shnum * shentsize)?;
    let header = |i: usize| &table[i * shentsize..i * shentsize + 64];
    let strtab_hdr = header(shstrndx);
    let names = at(u64_at(strtab_hdr, 24), u64_at(strtab_hdr, 32) as usize)?;
    let name_of = |h: &[u8]| {
        let start = (u32_at(h, 0) as usize).min(names.len());
        let end = names[start..]
            .iter()
            .position(|&b| b == 0)
            .map_or(names.len(), |n| start + n);
        &names[start..end]
    };
    let (mut notes, mut base_addr) = (None, None);
    for i in 0..shnum {
        let h = header(i);
        match name_of(h) {
            b".note.stapsdt" => notes = Some((u64_at(h, 24), u64_at(h, 32) as usize)),
            b".stapsdt.base" => base_addr = Some(u64_at(h, 16)),
            _ => {}
        }
    }
    match notes {
        Some((off, len)) => parse_notes(&at(off, len)?, base_addr),
        None => Ok(Vec::new()),
    }
}

/// The stapsdt notes of a `.note.stapsdt` section's bytes.
fn parse_notes(notes: &[u8], base_addr: Option<u64>) -> Result<Vec<SdtNote>, String> {
    let mut out = Vec::new();
    let mut rest = notes;
    while rest.len() >= 12 {
        let word = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().unwrap());
        let (namesz, descsz, kind) = (word(0) as usize, word(4) as usize, word(8));
        let name_end = 12 + namesz.next_multiple_of(4);
        let desc_end = name_end + descsz.next_multiple_of(4);
        if desc_end > rest.len() {
            return Err("truncated .note.stapsdt".into());
        }
        let owner = &rest[12..12 + namesz];
        let desc = &rest[name_end..name_end + descsz];
        if kind == NT_STAPSDT && owner == b"stapsdt\0" {
            out.push(parse_note(desc, base_addr)?);
        }
        rest = &rest[desc_end..];
    }
    Ok(out)
}

fn parse_note(desc: &[u8], base_addr: Option<u64>) -> Result<SdtNote, String> {
    if desc.len() < 24 {
        return Err("short stapsdt note".into());
    }
    let addr = |i: usize| u64::from_le_bytes(desc[i * 8..i * 8 + 8].try_into().unwrap());
    let (mut pc, base, mut semaphore) = (addr(0), addr(1), addr(2));
    if let Some(actual) = base_addr.filter(|_| base != 0) {
        let delta = actual.wrapping_sub(base);
        pc = pc.wrapping_add(delta);
        if semaphore != 0 {
            semaphore = semaphore.wrapping_add(delta);
        }
    }
    let mut strings = desc[24..].split(|&b| b == 0);
    let mut next = || String::from_utf8_lossy(strings.next().unwrap_or(b"")).into_owned();
    let provider = next();
    let name = next();
    let args = next();
    Ok(SdtNote {
        provider,
        name,
        pc,
        base,
        semaphore,
        args,
    })
}

/// A general-purpose register as `user_regs_struct` names it, and which
/// bytes of it an operand uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    /// The 64-bit register: `rax`... `r15`, `rip`.
    pub name: &'static str,
    /// 1, 2, 4 or 8.
    pub width: u8,
    /// `%ah`, `%bh`, `%ch`, `%dh`: bits 8..16.
    pub high: bool,
}

/// One operand of an argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// `sym+off(%rip)` (gcc names globals this way): memory at the
    /// symbol's link-time address plus `offset`, resolved with the
    /// module's symbol table.
    Symbol {
        name: String,
        offset: i64,
    },
    Reg(Reg),
    Imm(i64),
    /// `disp(base, index, scale)`: memory at that address.
    Mem {
        disp: i64,
        base: Option<Reg>,
        index: Option<(Reg, u8)>,
    },
}

/// One marker argument: `size` bytes (1, 2, 4, 8), signed or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdtArg {
    pub size: u8,
    pub signed: bool,
    pub operand: Operand,
}

impl SdtArg {
    /// Truncates a raw 64-bit value to the argument's size and extends it
    /// by its signedness.
    pub fn extend(&self, raw: u64) -> i64 {
        let bits = u32::from(self.size) * 8;
        if bits >= 64 {
            return raw as i64;
        }
        let v = raw & ((1u64 << bits) - 1);
        if self.signed && v >> (bits - 1) & 1 == 1 {
            (v | !((1u64 << bits) - 1)) as i64
        } else {
            v as i64
        }
    }
}

/// Parses a whole spec (`""` has no arguments).
pub fn parse_args(spec: &str) -> Result<Vec<SdtArg>, String> {
    spec.split_whitespace().map(parse_arg).collect()
}

/// Parses one `[-]SIZE@OPERAND`; a bare operand (old sdt.h) is a signed
/// 8-byte value.
pub fn parse_arg(text: &str) -> Result<SdtArg, String> {
    let bad = || format!("unsupported USDT argument '{text}'");
    let (size, signed, op) = match text.split_once('@') {
        Some((sz, op)) => {
            let n: i32 = sz.parse().map_err(|_| bad())?;
            if !matches!(n.unsigned_abs(), 1 | 2 | 4 | 8) {
                return Err(bad());
            }
            (n.unsigned_abs() as u8, n < 0, op)
        }
        None => (8, true, text),
    };
    let operand = parse_operand(op).ok_or_else(bad)?;
    Ok(SdtArg {
        size,
        signed,
        operand,
    })
}

fn parse_operand(op: &str) -> Option<Operand> {
    if let Some(imm) = op.strip_prefix('$') {
        return Some(Operand::Imm(parse_int(imm)?));
    }
    if let Some(r) = op.strip_prefix('%') {
        return Some(Operand::Reg(register(r)?));
    }
    let open = op.find('(')?;
    let inner = op[open..].strip_prefix('(')?.strip_suffix(')')?;
    let disp = match &op[..open] {
        "" => 0,
        d if inner == "%rip" && !d.starts_with(|c: char| c == '-' || c.is_ascii_digit()) => {
            return symbolic(d);
        }
        d => parse_int(d)?,
    };
    let mut parts = inner.split(',').map(str::trim);
    let base = match parts.next()? {
        "" => None,
        b => Some(register(b.strip_prefix('%')?)?),
    };
    let index = match parts.next() {
        None => None,
        Some(i) => {
            let reg = register(i.strip_prefix('%')?)?;
            let scale = match parts.next() {
                None => 1,
                Some(s) => s.parse().ok().filter(|s| matches!(s, 1 | 2 | 4 | 8))?,
            };
            Some((reg, scale))
        }
    };
    if parts.next().is_some() || (base.is_none() && index.is_none()) {
        return None;
    }
    Some(Operand::Mem { disp, base, index })
}

/// `name`, `name+8` or `name-8` before `(%rip)`.
fn symbolic(d: &str) -> Option<Operand> {
    let (name, offset) = match d.find(['+', '-']) {
        Some(i) => (&d[..i], parse_int(d[i..].trim_start_matches('+'))?),
        None => (d, 0),
    };
    let ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'));
    (ok && !name.is_empty()).then(|| Operand::Symbol {
        name: name.to_string(),
        offset,
    })
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = match digits.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    } as i64;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// x86-64 register names, every width.
fn register(name: &str) -> Option<Reg> {
    const LEGACY: [(&str, [&str; 4], Option<&str>); 8] = [
        ("rax", ["rax", "eax", "ax", "al"], Some("ah")),
        ("rbx", ["rbx", "ebx", "bx", "bl"], Some("bh")),
        ("rcx", ["rcx", "ecx", "cx", "cl"], Some("ch")),
        ("rdx", ["rdx", "edx", "dx", "dl"], Some("dh")),
        ("rsi", ["rsi", "esi", "si", "sil"], None),
        ("rdi", ["rdi", "edi", "di", "dil"], None),
        ("rbp", ["rbp", "ebp", "bp", "bpl"], None),
        ("rsp", ["rsp", "esp", "sp", "spl"], None),
    ];
    const WIDTHS: [u8; 4] = [8, 4, 2, 1];
    const NUMBERED: [&str; 8] = ["r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"];
    let reg = |name, width, high| Some(Reg { name, width, high });
    if name == "rip" {
        return reg("rip", 8, false);
    }
    for (full, names, high) in LEGACY {
        if let Some(i) = names.iter().position(|n| *n == name) {
            return reg(full, WIDTHS[i], false);
        }
        if high == Some(name) {
            return reg(full, 1, true);
        }
    }
    for full in NUMBERED {
        if let Some(suffix) = name.strip_prefix(full) {
            let width = match suffix {
                "" => 8,
                "d" => 4,
                "w" => 2,
                "b" | "l" => 1,
                _ => continue,
            };
            return reg(full, width, false);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &'static str, width: u8) -> Reg {
        Reg {
            name,
            width,
            high: false,
        }
    }

    #[test]
    fn parses_every_operand_form() {
        let a =
            parse_args("-4@%edi 8@-16(%rbp) -4@$-1 8@(%rax,%rdx,8) 1@%sil 2@%r9w -1@%ah").unwrap();
        assert_eq!(
            a[0],
            SdtArg {
                size: 4,
                signed: true,
                operand: Operand::Reg(r("rdi", 4))
            }
        );
        assert_eq!(
            a[1].operand,
            Operand::Mem {
                disp: -16,
                base: Some(r("rbp", 8)),
                index: None
            }
        );
        assert!(!a[1].signed);
        assert_eq!(a[2].operand, Operand::Imm(-1));
        assert_eq!(
            a[3].operand,
            Operand::Mem {
                disp: 0,
                base: Some(r("rax", 8)),
                index: Some((r("rdx", 8), 8))
            }
        );
        assert_eq!(a[4].operand, Operand::Reg(r("rsi", 1)));
        assert_eq!(a[5].operand, Operand::Reg(r("r9", 2)));
        assert_eq!(
            a[6].operand,
            Operand::Reg(Reg {
                name: "rax",
                width: 1,
                high: true
            })
        );
        assert_eq!(
            parse_arg("8@0x10(%rip)").unwrap().operand,
            Operand::Mem {
                disp: 16,
                base: Some(r("rip", 8)),
                index: None
            }
        );
        assert_eq!(parse_arg("-4@112(%rsp)").unwrap().size, 4);
        assert_eq!(
            parse_arg("-1@small(%rip)").unwrap().operand,
            Operand::Symbol {
                name: "small".into(),
                offset: 0
            }
        );
        assert_eq!(
            parse_arg("8@table+16(%rip)").unwrap().operand,
            Operand::Symbol {
                name: "table".into(),
                offset: 16
            }
        );
        assert_eq!(parse_args("").unwrap(), Vec::new());
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "3@%eax",
            "4@%xyz",
            "4@",
            "x@%eax",
            "8@(%rax,%rbx,3)",
            "8@()",
        ] {
            assert!(parse_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn extends_by_size_and_sign() {
        let a = |size, signed| SdtArg {
            size,
            signed,
            operand: Operand::Imm(0),
        };
        assert_eq!(a(4, true).extend(0xffff_ffff), -1);
        assert_eq!(a(4, false).extend(0x1_ffff_ffff), 0xffff_ffff);
        assert_eq!(a(1, true).extend(0x80), -128);
        assert_eq!(a(2, false).extend(0xfff0_1234), 0x1234);
        assert_eq!(a(8, true).extend(u64::MAX), -1);
    }
}
