//! Integer operators whose SystemTap semantics differ from a machine
//! instruction: division and modulo never trap (`x / -1 == -x`, wrapping,
//! and a zero divisor is a runtime error), and shift counts are clamped.
//! Longs are 64-bit and every other operator wraps.

use std::fmt;

/// The runtime error of `/` and `%` by zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DivisionByZero;

impl fmt::Display for DivisionByZero {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("division by 0")
    }
}

impl std::error::Error for DivisionByZero {}

/// `x / y`: `y == -1` negates (so `i64::MIN / -1 == i64::MIN`).
#[inline]
pub fn div(x: i64, y: i64) -> Result<i64, DivisionByZero> {
    match y {
        0 => Err(DivisionByZero),
        -1 => Ok(x.wrapping_neg()),
        _ => Ok(x / y),
    }
}

/// `x % y`: 0 for `y == 1` and `y == -1`; the sign follows `x` as in C.
#[inline]
pub fn rem(x: i64, y: i64) -> Result<i64, DivisionByZero> {
    match y {
        0 => Err(DivisionByZero),
        1 | -1 => Ok(0),
        _ => Ok(x % y),
    }
}

/// The shift count SystemTap uses: clamped to 0..=64, and like the x86
/// shift instruction it compiles to, a count of 64 shifts by nothing.
#[inline]
fn shift_count(n: i64) -> u32 {
    (n.clamp(0, 64) as u32) & 63
}

/// `x << n`.
#[inline]
pub fn shl(x: i64, n: i64) -> i64 {
    x.wrapping_shl(shift_count(n))
}

/// `x >> n` (arithmetic).
#[inline]
pub fn shr(x: i64, n: i64) -> i64 {
    x.wrapping_shr(shift_count(n))
}

/// `x >>> n` (logical).
#[inline]
pub fn ushr(x: i64, n: i64) -> i64 {
    ((x as u64).wrapping_shr(shift_count(n))) as i64
}

/// `big_endian2(v)`: the low 16 bits in big-endian order (the kernel's
/// `cpu_to_be16`), zero-extended.
#[inline]
pub fn big_endian2(v: i64) -> i64 {
    i64::from((v as u16).to_be())
}

/// `big_endian4(v)`: the low 32 bits in big-endian order, zero-extended.
#[inline]
pub fn big_endian4(v: i64) -> i64 {
    i64::from((v as u32).to_be())
}

/// `big_endian8(v)`.
#[inline]
pub fn big_endian8(v: i64) -> i64 {
    (v as u64).to_be() as i64
}

/// `little_endian2(v)`: the low 16 bits in little-endian order.
#[inline]
pub fn little_endian2(v: i64) -> i64 {
    i64::from((v as u16).to_le())
}

/// `little_endian4(v)`.
#[inline]
pub fn little_endian4(v: i64) -> i64 {
    i64::from((v as u32).to_le())
}

/// `little_endian8(v)`.
#[inline]
pub fn little_endian8(v: i64) -> i64 {
    (v as u64).to_le() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_never_traps() {
        assert_eq!(div(i64::MIN, -1), Ok(i64::MIN));
        assert_eq!(div(-1, -1), Ok(1));
        assert_eq!(div(1003004005, 1000), Ok(1003004));
        assert_eq!(div(-7, 2), Ok(-3));
        assert_eq!(div(0, -100), Ok(0));
        assert_eq!(div(5, 0), Err(DivisionByZero));
        assert_eq!(DivisionByZero.to_string(), "division by 0");
    }

    #[test]
    fn modulo() {
        assert_eq!(rem(i64::MIN, -1), Ok(0));
        assert_eq!(rem(7, 1), Ok(0));
        assert_eq!(rem(-7, 3), Ok(-1));
        assert_eq!(rem(1003004005, 1000), Ok(5));
        assert_eq!(rem(1, 0), Err(DivisionByZero));
    }

    #[test]
    fn shifts_clamp() {
        assert_eq!(shl(1, 8), 0x100);
        assert_eq!(shl(120, -2), 120);
        assert_eq!(shl(-4096, -3), -4096);
        assert_eq!(shr(-4096, 3), -512);
        assert_eq!(shr(-4096, -3), -4096);
        assert_eq!(shr(120, -2), 120);
        assert_eq!(shl(1, 63), i64::MIN);
        assert_eq!(shl(1, 64), 1);
        assert_eq!(shl(1, 1000), 1);
        assert_eq!(ushr(-1, 60), 0xf);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn byte_order() {
        assert_eq!(big_endian2(0x12345678), 0x7856);
        assert_eq!(big_endian4(0x12), 0x1200_0000);
        assert_eq!(big_endian4(-1), 0xffff_ffff);
        assert_eq!(big_endian8(0x12), 0x1200_0000_0000_0000);
        assert_eq!(little_endian2(0x12345678), 0x5678);
        assert_eq!(little_endian8(-2), -2);
    }
}
