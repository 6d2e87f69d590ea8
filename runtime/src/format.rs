//! printf-style formats: the parsed form the checker validates at compile
//! time and the runtime executes. The parser and the formatter live here,
//! in one place, so that what the checker accepts is exactly what runs.
//!
//! The semantics are SystemTap's (`staptree.cxx` parses, the runtime's
//! `vsprintf.c` formats): one optional flag among `-+ #0`, a width and a
//! precision (digits or `*`), an optional `l`, and a conversion among
//! `b c s m M d i o u x X p`; `%%` is a literal `%`. Numbers are 64-bit,
//! `%u %o %x %X` print them unsigned, `%#x` prints `0x` even for zero and
//! `%p` is `%#x`. `%b` writes the value in binary (host byte order, 1, 2,
//! 4 or 8 bytes).

use std::fmt;

use crate::memory::{Fault, ReadMemory};

/// A parsed printf format: literal text and conversions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatPiece {
    Text(String),
    Conv(Conversion),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conversion {
    pub flags: FormatFlags,
    pub width: FormatNum,
    pub precision: FormatNum,
    pub kind: ConvKind,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FormatFlags {
    pub left: bool,
    pub plus: bool,
    pub space: bool,
    pub alt: bool,
    pub zero: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatNum {
    None,
    Fixed(u32),
    /// `*`: taken from the next argument.
    Star,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKind {
    /// `%d` / `%i`
    Signed,
    Unsigned,
    Octal,
    HexLower,
    HexUpper,
    Str,
    Char,
    Pointer,
    /// `%b`: binary write of a long, width selects 1/2/4/8 bytes.
    Binary,
    /// `%m`: string, width chars of memory; `%M` hex of it.
    Memory,
    MemoryHex,
    Percent,
}

/// A format string SystemTap's parser rejects (its messages; SystemTap
/// reports them as parse errors at the format string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// `%` followed by something that is no conversion.
    InvalidConversion,
    /// The string ends inside a conversion (`"%5"`, `"%-"`).
    Incomplete,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FormatError::InvalidConversion => "invalid or missing conversion specifier",
            FormatError::Incomplete => "trailing incomplete print format conversion",
        })
    }
}

impl std::error::Error for FormatError {}

/// The type of one argument a format consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    Long,
    Str,
}

/// SystemTap's message when the argument count does not match.
pub const WRONG_ARG_COUNT: &str = "Wrong number of args to formatted print operator";

/// Parses a printf format as SystemTap does.
pub fn parse(fmt: &str) -> Result<Vec<FormatPiece>, FormatError> {
    let b = fmt.as_bytes();
    let mut pieces = Vec::new();
    let mut text: Vec<u8> = Vec::new();
    let mut i = 0;
    let flush = |text: &mut Vec<u8>, pieces: &mut Vec<FormatPiece>| {
        if !text.is_empty() {
            pieces.push(FormatPiece::Text(
                String::from_utf8_lossy(&std::mem::take(text)).into_owned(),
            ));
        }
    };
    while i < b.len() {
        if b[i] != b'%' {
            text.push(b[i]);
            i += 1;
            continue;
        }
        // A lone `%` at the very end is an incomplete conversion (SystemTap
        // takes it as a literal percent; C leaves it undefined): almost
        // always a forgotten `%%`, so it is rejected when the script is
        // checked.
        if i + 1 == b.len() {
            return Err(FormatError::Incomplete);
        }
        if b[i + 1] == b'%' {
            text.push(b'%');
            i += 2;
            continue;
        }
        i += 1;
        let mut flags = FormatFlags::default();
        let mut started = false;
        match b[i] {
            b'0' => flags.zero = true,
            b'+' => flags.plus = true,
            b'-' => flags.left = true,
            b' ' => flags.space = true,
            b'#' => flags.alt = true,
            _ => {}
        }
        if flags != FormatFlags::default() {
            i += 1;
            started = true;
        }
        let mut width = FormatNum::None;
        let mut precision = FormatNum::None;
        if i < b.len() {
            if b[i] == b'*' {
                width = FormatNum::Star;
                i += 1;
            } else if b[i].is_ascii_digit() {
                width = FormatNum::Fixed(digits(b, &mut i));
            }
        }
        started |= width != FormatNum::None;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            if i < b.len() {
                if b[i] == b'*' {
                    precision = FormatNum::Star;
                    i += 1;
                } else if b[i].is_ascii_digit() {
                    precision = FormatNum::Fixed(digits(b, &mut i));
                }
            }
        }
        started |= precision != FormatNum::None;
        if i < b.len() && b[i] == b'l' {
            i += 1;
        }
        if i >= b.len() {
            // SystemTap drops a conversion that is nothing but `%.` or `%l`.
            if started {
                return Err(FormatError::Incomplete);
            }
            break;
        }
        let kind = match b[i] {
            b'b' => ConvKind::Binary,
            b'c' => ConvKind::Char,
            b's' => ConvKind::Str,
            b'm' => ConvKind::Memory,
            b'M' => ConvKind::MemoryHex,
            b'd' | b'i' => ConvKind::Signed,
            b'u' => ConvKind::Unsigned,
            b'o' => ConvKind::Octal,
            b'x' => ConvKind::HexLower,
            b'X' => ConvKind::HexUpper,
            b'p' => ConvKind::Pointer,
            _ => return Err(FormatError::InvalidConversion),
        };
        i += 1;
        flush(&mut text, &mut pieces);
        pieces.push(FormatPiece::Conv(Conversion {
            flags,
            width,
            precision,
            kind,
        }));
    }
    flush(&mut text, &mut pieces);
    Ok(pieces)
}

fn digits(b: &[u8], i: &mut usize) -> u32 {
    let mut n: u32 = 0;
    while *i < b.len() && b[*i].is_ascii_digit() {
        n = n.wrapping_mul(10).wrapping_add(u32::from(b[*i] - b'0'));
        *i += 1;
    }
    n
}

/// The arguments a parsed format consumes, in order: a long for each `*`,
/// then the converted value (a string for `%s`, else a long). The checker
/// compares this with the call's arguments.
pub fn arg_types(pieces: &[FormatPiece]) -> Vec<ArgType> {
    let mut out = Vec::new();
    for p in pieces {
        let FormatPiece::Conv(c) = p else { continue };
        if c.kind == ConvKind::Percent {
            continue;
        }
        if c.width == FormatNum::Star {
            out.push(ArgType::Long);
        }
        if c.precision == FormatNum::Star {
            out.push(ArgType::Long);
        }
        out.push(if c.kind == ConvKind::Str {
            ArgType::Str
        } else {
            ArgType::Long
        });
    }
    out
}

/// One printf argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg<'a> {
    Long(i64),
    Str(&'a [u8]),
}

impl Arg<'_> {
    fn long(&self) -> i64 {
        match self {
            Arg::Long(v) => *v,
            Arg::Str(_) => 0,
        }
    }
    fn bytes(&self) -> &[u8] {
        match self {
            Arg::Str(s) => s,
            Arg::Long(_) => b"",
        }
    }
}

/// The most bytes one `printf` to the output stream writes (SystemTap's
/// STP_BUFFER_SIZE).
pub const PRINT_BUFFER_SIZE: usize = 8192;

/// Formatting needed memory that could not be read (`%m`, `%M`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatRunError {
    /// `%m`/`%M` without a process to read from.
    NoMemory,
    Fault(Fault),
}

impl fmt::Display for FormatRunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatRunError::NoMemory => f.write_str("no memory to read for %m/%M"),
            FormatRunError::Fault(fault) => write!(
                f,
                "user string copy fault -{} at 0x{:x}",
                fault.errno, fault.addr
            ),
        }
    }
}

impl std::error::Error for FormatRunError {}

/// Formats `args` by `pieces`, appending at most `limit` bytes to `out`
/// (use [`PRINT_BUFFER_SIZE`] for `printf`, MAXSTRINGLEN - 1 for
/// `sprintf`). `%m`/`%M` fail here; see [`format_into_mem`].
pub fn format_into(out: &mut Vec<u8>, pieces: &[FormatPiece], args: &[Arg<'_>], limit: usize) {
    // Without memory the only failure is %m/%M; their output is skipped.
    let _ = format_into_mem(out, pieces, args, limit, None);
}

/// `sprintf`: the result as a stored string (at most `maxstringlen - 1`
/// bytes, ending at a NUL that `%c` or `%b` may have produced).
pub fn sprintf_into(
    out: &mut Vec<u8>,
    pieces: &[FormatPiece],
    args: &[Arg<'_>],
    maxstringlen: usize,
) {
    let start = out.len();
    format_into(out, pieces, args, maxstringlen.saturating_sub(1));
    if let Some(n) = out[start..].iter().position(|&b| b == 0) {
        out.truncate(start + n);
    }
}

/// Formats with `mem` to read `%m`/`%M` operands from. On a fault the
/// output of this call is discarded, as SystemTap does.
pub fn format_into_mem(
    out: &mut Vec<u8>,
    pieces: &[FormatPiece],
    args: &[Arg<'_>],
    limit: usize,
    mem: Option<&dyn ReadMemory>,
) -> Result<(), FormatRunError> {
    let start = out.len();
    let mut w = Writer {
        out,
        end: start + limit,
    };
    let mut args = args.iter();
    let mut next = || args.next().copied().unwrap_or(Arg::Long(0));
    for p in pieces {
        let c = match p {
            FormatPiece::Text(t) => {
                write_text(&mut w, t);
                continue;
            }
            FormatPiece::Conv(c) => c,
        };
        if c.kind == ConvKind::Percent {
            w.byte(b'%');
            continue;
        }
        let room = w.room() as i64 + 1;
        let mut num = |n: FormatNum| -> i32 {
            match n {
                FormatNum::None => -1,
                FormatNum::Fixed(v) => i64::from(v).clamp(0, room) as i32,
                FormatNum::Star => next().long().clamp(0, room) as i32,
            }
        };
        let width = num(c.width);
        let precision = num(c.precision);
        let arg = next();
        let f = c.flags;
        if let Some((base, signed, upper, alt)) = integer_conversion(c.kind) {
            let f = FormatFlags {
                alt: f.alt || alt,
                ..f
            };
            number(
                &mut w,
                arg.long() as u64,
                base,
                width,
                precision,
                f,
                signed,
                upper,
            );
            continue;
        }
        match c.kind {
            ConvKind::Str => string(&mut w, arg.bytes(), width, precision, f),
            ConvKind::Char => character(&mut w, arg.long() as u8, width, f),
            ConvKind::Binary => binary(&mut w, arg.long(), width, precision, f),
            ConvKind::Memory | ConvKind::MemoryHex => {
                let res = memory(&mut w, arg.long() as u64, width, precision, f, c.kind, mem);
                if let Err(e) = res {
                    w.out.truncate(start);
                    return Err(e);
                }
            }
            ConvKind::Percent => unreachable!("handled above"),
            _ => unreachable!("integer conversions handled above"),
        }
    }
    Ok(())
}

/// Where the front end's raw bytes of a literal start (owned by the
/// string room, below this one).
pub use crate::values::strings::RAW_BYTE_BASE;

/// The bytes format text stands for (raw-byte characters decoded).
pub fn text_bytes(t: &str, out: &mut Vec<u8>) {
    // Raw-byte characters encode as F4 8F BE/BF xx.
    if !t.as_bytes().contains(&0xF4) {
        out.extend_from_slice(t.as_bytes());
        return;
    }
    for c in t.chars() {
        let v = c as u32;
        if (RAW_BYTE_BASE + 0x80..=RAW_BYTE_BASE + 0xFF).contains(&v) {
            out.push((v - RAW_BYTE_BASE) as u8);
        } else {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

fn write_text(w: &mut Writer<'_>, t: &str) {
    if !t.as_bytes().contains(&0xF4) {
        w.bytes(t.as_bytes());
    } else {
        let mut bytes = Vec::with_capacity(t.len());
        text_bytes(t, &mut bytes);
        w.bytes(&bytes);
    }
}

/// Appends within a byte budget, dropping what does not fit.
struct Writer<'o> {
    out: &'o mut Vec<u8>,
    end: usize,
}

impl Writer<'_> {
    fn room(&self) -> usize {
        self.end.saturating_sub(self.out.len())
    }
    fn byte(&mut self, b: u8) {
        if self.out.len() < self.end {
            self.out.push(b);
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        let n = b.len().min(self.room());
        self.out.extend_from_slice(&b[..n]);
    }
    fn repeat(&mut self, b: u8, n: i64) {
        if n > 0 {
            let n = (n as usize).min(self.room());
            self.out.resize(self.out.len() + n, b);
        }
    }
}

/// The kernel-derived `number()`: sign, `0x`/`0` prefix, zero or space
/// padding to `width`, at least `precision` digits.
#[allow(clippy::too_many_arguments)]
/// How an integer conversion prints: base, signed, upper-case digits, and
/// whether `#` is implied (`%p` is `%#x`). `None` for the other kinds.
fn integer_conversion(kind: ConvKind) -> Option<(u64, bool, bool, bool)> {
    Some(match kind {
        ConvKind::Signed => (10, true, false, false),
        ConvKind::Unsigned => (10, false, false, false),
        ConvKind::Octal => (8, false, false, false),
        ConvKind::HexLower => (16, false, false, false),
        ConvKind::HexUpper => (16, false, true, false),
        ConvKind::Pointer => (16, false, false, true),
        _ => return None,
    })
}

#[allow(clippy::too_many_arguments)]
fn number(
    w: &mut Writer<'_>,
    mut num: u64,
    base: u64,
    width: i32,
    precision: i32,
    f: FormatFlags,
    signed: bool,
    upper: bool,
) {
    let mut size = width as i64;
    let zeropad = f.zero && !f.left;
    let mut sign = None;
    if signed {
        if (num as i64) < 0 {
            sign = Some(b'-');
            num = (num as i64).wrapping_neg() as u64;
            size -= 1;
        } else if f.plus {
            sign = Some(b'+');
            size -= 1;
        } else if f.space {
            sign = Some(b' ');
            size -= 1;
        }
    }
    if f.alt {
        match base {
            16 => size -= 2,
            8 => size -= 1,
            _ => {}
        }
    }
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut tmp = [0u8; 66];
    let mut n = 0;
    if num == 0 {
        tmp[0] = b'0';
        n = 1;
    }
    while num != 0 {
        tmp[n] = digits[(num % base) as usize];
        num /= base;
        n += 1;
    }
    let precision = (precision as i64).max(n as i64);
    size -= precision;
    if !zeropad && !f.left {
        w.repeat(b' ', size);
        size = 0;
    }
    if let Some(s) = sign {
        w.byte(s);
    }
    if f.alt {
        match base {
            8 => w.byte(b'0'),
            16 => w.bytes(if upper { b"0X" } else { b"0x" }),
            _ => {}
        }
    }
    if !f.left {
        w.repeat(if zeropad { b'0' } else { b' ' }, size);
        size = 0;
    }
    w.repeat(b'0', precision - n as i64);
    for i in (0..n).rev() {
        w.byte(tmp[i]);
    }
    w.repeat(b' ', size);
}

/// `%s`: at most `precision` bytes, padded to `width`; SystemTap writes a
/// NUL after the field for the `0` flag.
fn string(w: &mut Writer<'_>, s: &[u8], width: i32, precision: i32, f: FormatFlags) {
    let s = crate::values::strings::until_nul(s);
    let len = if precision >= 0 {
        s.len().min(precision as usize)
    } else {
        s.len()
    };
    let pad = width as i64 - len as i64;
    if !f.left {
        w.repeat(b' ', pad);
    }
    w.bytes(&s[..len]);
    if f.left {
        w.repeat(b' ', pad);
    }
    if f.zero {
        w.byte(0);
    }
}

/// `%c`; with `#` a non-printable byte (and `'`, `\`) is escaped.
fn character(w: &mut Writer<'_>, c: u8, width: i32, f: FormatFlags) {
    let printable = (0x20..0x7f).contains(&c) && c != b'\'' && c != b'\\';
    let escape = match c {
        0x07 => Some(b'a'),
        0x08 => Some(b'b'),
        0x0c => Some(b'f'),
        b'\n' => Some(b'n'),
        b'\r' => Some(b'r'),
        b'\t' => Some(b't'),
        0x0b => Some(b'v'),
        b'\'' => Some(b'\''),
        b'\\' => Some(b'\\'),
        _ => None,
    };
    let size: i64 = if f.alt && !printable {
        if escape.is_some() { 2 } else { 4 }
    } else {
        1
    };
    let pad = width as i64 - size;
    if !f.left {
        w.repeat(b' ', pad);
    }
    if size == 1 {
        w.byte(c);
    } else {
        w.byte(b'\\');
        match escape {
            Some(e) => w.byte(e),
            None => w.bytes(&[b'0' + ((c >> 6) & 3), b'0' + ((c >> 3) & 7), b'0' + (c & 7)]),
        }
    }
    if f.left {
        w.repeat(b' ', pad);
    }
}

/// `%b`: the value's low 1, 2, 4 or 8 bytes in host order. The precision
/// picks the size; an unspecified one follows the width (8 when that is
/// not a valid size); the field is padded with NULs to the width.
fn binary(w: &mut Writer<'_>, v: i64, width: i32, precision: i32, f: FormatFlags) {
    let valid = |p: i32| if matches!(p, 1 | 2 | 4 | 8) { p } else { -1 };
    let mut precision = valid(precision);
    let mut width = width;
    if width == -1 {
        if precision == -1 {
            width = 8;
            precision = 8;
        } else {
            width = precision;
        }
    } else if precision == -1 {
        precision = valid(width);
        if precision == -1 {
            precision = 8;
        }
    }
    let pad = i64::from(width - precision);
    if !f.left {
        w.repeat(0, pad);
    }
    let bytes = v.to_ne_bytes();
    let n = precision as usize;
    // Written whole or not at all.
    if w.room() >= n {
        if cfg!(target_endian = "little") {
            w.bytes(&bytes[..n]);
        } else {
            w.bytes(&bytes[8 - n..]);
        }
    }
    if f.left {
        w.repeat(0, pad);
    }
}

/// `%m` (raw bytes) and `%M` (hex) of `precision` bytes (1 by default) of
/// the tracee's memory at `addr`, padded to `width`.
fn memory(
    w: &mut Writer<'_>,
    addr: u64,
    width: i32,
    precision: i32,
    f: FormatFlags,
    kind: ConvKind,
    mem: Option<&dyn ReadMemory>,
) -> Result<(), FormatRunError> {
    let mem = mem.ok_or(FormatRunError::NoMemory)?;
    let len = if precision > 0 { precision as usize } else { 1 };
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match mem.read(addr + got as u64, &mut buf[got..]) {
            Ok(0) => {
                return Err(FormatRunError::Fault(Fault {
                    addr: addr + got as u64,
                    errno: libc::EFAULT,
                }));
            }
            Ok(n) => got += n,
            Err(fault) => return Err(FormatRunError::Fault(fault)),
        }
    }
    let shown = if kind == ConvKind::MemoryHex {
        2 * len
    } else {
        len
    } as i64;
    if !f.left {
        w.repeat(b' ', width as i64 - shown);
    }
    if kind == ConvKind::MemoryHex {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for b in &buf {
            w.bytes(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
    } else {
        w.bytes(&buf);
    }
    if f.left {
        w.repeat(b' ', width as i64 - shown);
    }
    if f.zero {
        w.byte(0);
    }
    Ok(())
}

/// A value for `print`/`println`/`printd`/`sprint`: a long prints in
/// decimal, a string as is.
pub fn print_value(out: &mut Vec<u8>, arg: Arg<'_>) {
    match arg {
        Arg::Long(v) => {
            let mut buf = itoa_buf();
            out.extend_from_slice(fmt_i64(v, &mut buf));
        }
        Arg::Str(s) => out.extend_from_slice(crate::values::strings::until_nul(s)),
    }
}

/// `print(a, b, ...)`, `println`, `printd(delim, ...)`, `printdln`: the
/// values joined by `delim` (nothing for print), then a newline for the
/// `ln` forms.
pub fn print_args(out: &mut Vec<u8>, args: &[Arg<'_>], delim: Option<&[u8]>, newline: bool) {
    for (i, a) in args.iter().enumerate() {
        if i > 0
            && let Some(d) = delim
        {
            out.extend_from_slice(crate::values::strings::until_nul(d));
        }
        print_value(out, *a);
    }
    if newline {
        out.push(b'\n');
    }
}

/// `sprint`, `sprintln`, `sprintd`, `sprintdln`: as [`print_args`], the
/// result cut to a stored string (MAXSTRINGLEN - 1 bytes).
pub fn sprint_args(
    out: &mut Vec<u8>,
    args: &[Arg<'_>],
    delim: Option<&[u8]>,
    newline: bool,
    maxstringlen: usize,
) {
    let start = out.len();
    print_args(out, args, delim, newline);
    out.truncate(start + (out.len() - start).min(maxstringlen.saturating_sub(1)));
}

fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        // 20 digits never happen for i64 magnitude with a sign (max 19).
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(kind: ConvKind) -> Conversion {
        Conversion {
            flags: FormatFlags::default(),
            width: FormatNum::None,
            precision: FormatNum::None,
            kind,
        }
    }

    fn f(fmt: &str, args: &[Arg<'_>]) -> String {
        let pieces = parse(fmt).unwrap();
        let mut out = Vec::new();
        format_into(&mut out, &pieces, args, PRINT_BUFFER_SIZE);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn parses_like_systemtap() {
        assert_eq!(parse("a%%b%%").unwrap(), [FormatPiece::Text("a%b%".into())]);
        assert_eq!(parse("%"), Err(FormatError::Incomplete));
        assert_eq!(parse("100%"), Err(FormatError::Incomplete));
        assert_eq!(
            parse("%-*.*s|").unwrap(),
            [
                FormatPiece::Conv(Conversion {
                    flags: FormatFlags {
                        left: true,
                        ..Default::default()
                    },
                    width: FormatNum::Star,
                    precision: FormatNum::Star,
                    kind: ConvKind::Str,
                }),
                FormatPiece::Text("|".into())
            ]
        );
        assert_eq!(
            parse("%ld").unwrap(),
            [FormatPiece::Conv(conv(ConvKind::Signed))]
        );
        assert_eq!(parse("%lld"), Err(FormatError::InvalidConversion));
        assert_eq!(parse("%-#x"), Err(FormatError::InvalidConversion));
        assert_eq!(parse("%q"), Err(FormatError::InvalidConversion));
        assert_eq!(parse("%5"), Err(FormatError::Incomplete));
        assert_eq!(parse("x%-"), Err(FormatError::Incomplete));
        assert_eq!(parse("x%."), Ok(vec![FormatPiece::Text("x".into())]));
        assert_eq!(
            FormatError::InvalidConversion.to_string(),
            "invalid or missing conversion specifier"
        );
        assert_eq!(
            FormatError::Incomplete.to_string(),
            "trailing incomplete print format conversion"
        );
    }

    #[test]
    fn raw_byte_characters_in_text() {
        let text: String = [
            'a',
            char::from_u32(RAW_BYTE_BASE + 0x99).unwrap(),
            'é',
            '%',
            'd',
        ]
        .iter()
        .collect();
        let mut out = Vec::new();
        format_into(
            &mut out,
            &parse(&text).unwrap(),
            &[Arg::Long(7)],
            PRINT_BUFFER_SIZE,
        );
        assert_eq!(out, b"a\x99\xc3\xa97");
        let mut plain = Vec::new();
        text_bytes("plain", &mut plain);
        assert_eq!(plain, b"plain");
    }

    #[test]
    fn arg_types_count_stars() {
        let p = parse("%*.*s %d %c %b %p").unwrap();
        use ArgType::*;
        assert_eq!(arg_types(&p), [Long, Long, Str, Long, Long, Long, Long]);
    }

    #[test]
    fn integers_as_conformance_int1() {
        let vals = [1i64, 10, 9000000000000, -1, -1024];
        let row = |fmt: &str| {
            let args: Vec<Arg> = vals.iter().map(|&v| Arg::Long(v)).collect();
            let full = [fmt; 5].join(",");
            f(&full, &args)
        };
        assert_eq!(row("%d"), "1,10,9000000000000,-1,-1024");
        assert_eq!(row("%2d"), " 1,10,9000000000000,-1,-1024");
        assert_eq!(
            row("%016d"),
            "0000000000000001,0000000000000010,0009000000000000,-000000000000001,-000000000001024"
        );
        assert_eq!(row("%#d"), "1,10,9000000000000,-1,-1024");
        assert_eq!(
            row("%u"),
            "1,10,9000000000000,18446744073709551615,18446744073709550592"
        );
        assert_eq!(
            row("%2x"),
            " 1, a,82f79cd9000,ffffffffffffffff,fffffffffffffc00"
        );
        assert_eq!(
            row("%016X"),
            "0000000000000001,000000000000000A,0000082F79CD9000,FFFFFFFFFFFFFFFF,FFFFFFFFFFFFFC00"
        );
        assert_eq!(
            row("%#lx"),
            "0x1,0xa,0x82f79cd9000,0xffffffffffffffff,0xfffffffffffffc00"
        );
        assert_eq!(
            row("%#o"),
            "01,012,0202757163310000,01777777777777777777777,01777777777777777776000"
        );
        assert_eq!(
            row("%16o"),
            "               1,              12, 202757163310000,1777777777777777777777,1777777777777777776000"
        );
        assert_eq!(
            f(
                "%#x|%+d|% d|%-5d|%.3d",
                &[
                    Arg::Long(0),
                    Arg::Long(5),
                    Arg::Long(5),
                    Arg::Long(-2),
                    Arg::Long(7)
                ]
            ),
            "0x0|+5| 5|-2   |007"
        );
    }

    #[test]
    fn pointers_as_conformance_ptr() {
        let p = |fmt: &str, v: i64| f(fmt, &[Arg::Long(v)]);
        assert_eq!(p("%p", 0), "0x0");
        assert_eq!(p("%p", 0x12345678abcdef00), "0x12345678abcdef00");
        assert_eq!(p("%20pX", 1), "                 0x1X");
        assert_eq!(p("%-20pX", 0x12345678), "0x12345678          X");
        assert_eq!(p("%.20pX", 1), "0x00000000000000000001X");
        assert_eq!(p("%20.8pX", 0), "          0x00000000X");
        assert_eq!(p("%20.8pX", 0x12345678abcdef00), "  0x12345678abcdef00X");
    }

    #[test]
    fn strings_and_chars() {
        let s = |fmt: &str, v: &str| f(fmt, &[Arg::Str(v.as_bytes())]);
        assert_eq!(s("[%5s]", "ab"), "[   ab]");
        assert_eq!(s("[%-5s]", "ab"), "[ab   ]");
        assert_eq!(s("[%.1s]", "ab"), "[a]");
        assert_eq!(s("[%#s]", "ab"), "[ab]");
        assert_eq!(s("[%03s]", "ab"), "[ ab\0]");
        let c = |fmt: &str, v: i64| f(fmt, &[Arg::Long(v)]);
        assert_eq!(c("%c", 115), "s");
        assert_eq!(c("%3c|", 65), "  A|");
        assert_eq!(c("%-3c|", 65), "A  |");
        assert_eq!(c("%#c", 10), "\\n");
        assert_eq!(c("%#c", 39), "\\'");
        assert_eq!(c("%#c", 1), "\\001");
        assert_eq!(c("%#c", 65), "A");
        assert_eq!(c("%c", 0x141), "A");
    }

    fn fb(fmt: &str, args: &[Arg<'_>]) -> Vec<u8> {
        let pieces = parse(fmt).unwrap();
        let mut out = Vec::new();
        format_into(&mut out, &pieces, args, PRINT_BUFFER_SIZE);
        out
    }

    #[test]
    fn binary_as_conformance_bin() {
        assert_eq!(fb("%1b", &[Arg::Long(0x42)]), b"B");
        // run/bin6: deadbeef = big_endian8(0x6465616462656566).
        let v = i64::from_ne_bytes(*b"deadbeef");
        let d = Arg::Long(v);
        assert_eq!(fb("%b", &[d]), b"deadbeef");
        assert_eq!(fb("%2b", &[d]), b"de");
        assert_eq!(fb("%*b", &[Arg::Long(4), d]), b"dead");
        assert_eq!(fb("%.1b", &[d]), b"d");
        assert_eq!(fb("%.*b", &[Arg::Long(2), d]), b"de");
        assert_eq!(fb("%1.8b", &[d]), b"deadbeef");
        assert_eq!(fb("%2.4b", &[d]), b"dead");
        assert_eq!(fb("%4.2b", &[d]), b"\0\0de");
        assert_eq!(fb("%8.1b", &[d]), b"\0\0\0\0\0\0\0d");
        assert_eq!(
            fb("%*.*b", &[Arg::Long(8), Arg::Long(1), d]),
            b"\0\0\0\0\0\0\0d"
        );
        assert_eq!(fb("%-4.2b|", &[d]), b"de\0\0|");
        assert_eq!(fb("%3b", &[d]), b"deadbeef");
    }

    #[test]
    fn limits_truncate_and_clamp() {
        let pieces = parse("%s-%5d").unwrap();
        let mut out = Vec::new();
        format_into(&mut out, &pieces, &[Arg::Str(b"abc"), Arg::Long(42)], 6);
        // SystemTap clamps the width to the room left (2 bytes + the
        // terminator's), so " 42" is cut to " 4", not "   42" to "  ".
        assert_eq!(out, b"abc- 4");
        let mut s = Vec::new();
        sprintf_into(&mut s, &parse("a%cb").unwrap(), &[Arg::Long(0)], 512);
        assert_eq!(s, b"a");
        let mut t = Vec::new();
        sprintf_into(
            &mut t,
            &parse("%s").unwrap(),
            &[Arg::Str(&[b'x'; 600])],
            512,
        );
        assert_eq!(t.len(), 511);
    }

    struct Buf(Vec<u8>);
    impl ReadMemory for Buf {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Fault> {
            let a = addr as usize;
            if a >= self.0.len() {
                return Err(Fault { addr, errno: 14 });
            }
            let n = buf.len().min(self.0.len() - a);
            buf[..n].copy_from_slice(&self.0[a..a + n]);
            Ok(n)
        }
    }

    #[test]
    fn memory_conversions() {
        let mem = Buf(b"hello".to_vec());
        let run = |fmt: &str, addr: i64| {
            let mut out = b"keep".to_vec();
            let r = format_into_mem(
                &mut out,
                &parse(fmt).unwrap(),
                &[Arg::Long(addr)],
                100,
                Some(&mem),
            );
            (r, String::from_utf8(out).unwrap())
        };
        assert_eq!(run("%.3m", 1), (Ok(()), "keepell".into()));
        assert_eq!(run("%m", 0), (Ok(()), "keeph".into()));
        assert_eq!(run("%6.2M|", 0), (Ok(()), "keep  6865|".into()));
        let (r, out) = run("x%.3m", 4);
        assert_eq!(out, "keep");
        assert_eq!(
            r.unwrap_err().to_string(),
            "user string copy fault -14 at 0x5"
        );
    }

    #[test]
    fn print_forms() {
        let mut out = Vec::new();
        print_args(
            &mut out,
            &[Arg::Str(b"hello"), Arg::Str(b"world"), Arg::Long(777)],
            Some(b"<-->"),
            false,
        );
        assert_eq!(out, b"hello<-->world<-->777");
        out.clear();
        print_args(&mut out, &[Arg::Long(99), Arg::Str(b"foo")], None, true);
        assert_eq!(out, b"99foo\n");
        out.clear();
        print_value(&mut out, Arg::Long(i64::MIN));
        assert_eq!(out, b"-9223372036854775808");
        out.clear();
        sprint_args(
            &mut out,
            &[Arg::Str(b"abc"), Arg::Long(12)],
            Some(b","),
            true,
            6,
        );
        assert_eq!(out, b"abc,1");
    }
}
