//! printf-style formats: the parsed form the checker validates at compile
//! time and the runtime executes. The parser and the formatter live here,
//! in one place, so that what the checker accepts is exactly what runs.

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
