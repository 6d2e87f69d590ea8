//! Generic renderers for bit sets and enumerations, in strace's style:
//! `O_WRONLY|O_CREAT|0x40000000` (unknown bits in hex at the end) and
//! `SEEK_SET` (unknown values in hex).

/// A named constant: value and name.
pub type Xlat = (u64, &'static str);

/// Renders the bits of `value` named in `table` joined with `|`, then any
/// bits no entry names in hex. Zero shows as `zero`; a value of which no
/// bit has a name shows as `0x10 /* O_??? */` (`unknown` in the comment;
/// no comment when `unknown` is empty, as after a mapping type).
pub fn flags_str(value: u64, table: &[Xlat], zero: &str, unknown: &str) -> String {
    if value == 0 {
        return zero.to_string();
    }
    let mut parts: Vec<String> = Vec::new();
    let mut rest = value;
    for &(bits, name) in table {
        if bits != 0 && rest & bits == bits {
            parts.push(name.to_string());
            rest &= !bits;
        }
    }
    if rest != 0 && parts.is_empty() && !unknown.is_empty() {
        return format!("{rest:#x} /* {unknown} */");
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

/// The name of `value` in `table`, else `0x2a /* CLOCK_??? */` with
/// `unknown` in the comment, as strace shows unknown constants.
pub fn xlat_str(value: u64, table: &[Xlat], unknown: &str) -> String {
    xlat_lookup(value, table).map_or_else(|| unknown_str(value, unknown), str::to_string)
}

/// An unknown constant: `0x2a /* CLOCK_??? */`.
pub fn unknown_str(value: u64, unknown: &str) -> String {
    format!("{value:#x} /* {unknown} */")
}

/// The name of `value` in `table`.
pub fn xlat_lookup(value: u64, table: &[Xlat]) -> Option<&'static str> {
    table.iter().find(|&&(v, _)| v == value).map(|&(_, n)| n)
}

/// The value as the C `int` the kernel reads from a 64-bit register.
pub fn as_int(value: u64) -> i32 {
    value as u32 as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[Xlat] = &[(1, "A"), (2, "B"), (8, "D")];

    #[test]
    fn flags() {
        assert_eq!(flags_str(0, T, "0", "X_???"), "0");
        assert_eq!(flags_str(3, T, "0", "X_???"), "A|B");
        assert_eq!(flags_str(0x13, T, "0", "X_???"), "A|B|0x10");
        assert_eq!(flags_str(0x10, T, "0", "X_???"), "0x10 /* X_??? */");
    }

    #[test]
    fn enums() {
        assert_eq!(xlat_str(8, T, "X_???"), "D");
        assert_eq!(xlat_str(9, T, "X_???"), "0x9 /* X_??? */");
        assert_eq!(xlat_lookup(2, T), Some("B"));
        assert_eq!(xlat_lookup(3, T), None);
        assert_eq!(unknown_str(0x2a, "X_???"), "0x2a /* X_??? */");
        assert_eq!(as_int(0xffff_ffff), -1);
        assert_eq!(as_int(0x1_0000_0005), 5);
    }
}
