//! The value runtime: what the native handlers call to work on SystemTap
//! values. Everything here is plain safe Rust; the codegen's `extern "C"`
//! glue wraps it. None of it blocks, and the hot paths do not allocate.
//!
//! How native code uses each piece:
//!
//! - [`arith`]: `/` and `%` ([`arith::div`], [`arith::rem`]) return
//!   `Err(DivisionByZero)` ("division by 0") instead of trapping, and
//!   `x / -1` wraps; shifts clamp their count ([`arith::shl`],
//!   [`arith::shr`]). The codegen may inline the same rules.
//! - [`strings`]: a string value is a byte buffer without NUL of at most
//!   `MAXSTRINGLEN - 1` bytes. Producers append into a caller's `Vec<u8>`
//!   and take `maxstringlen` ([`Limits::maxstringlen`]): [`strings::assign`],
//!   [`strings::append`] (`.=`), [`strings::concat`], [`strings::substr`],
//!   [`strings::str_replace`], [`strings::text_str`], [`strings::text_strn`];
//!   [`strings::Tokenizer`] holds `tokenize`'s state (one per session);
//!   [`strings::Regex`] is compiled once per `=~` site, and
//!   [`strings::LastMatch`] keeps the last match for `matched(n)` and
//!   `ngroups()`.
//! - [`map`]: one [`map::Map`] per global array, created with the
//!   [`map::MapLimit`] of its declaration. Keys are passed as a borrowed
//!   slice of [`map::Key`] (built on the stack by the glue). `get` never
//!   creates; `get_or_insert_with` (assignment, `++`, `<<<`) creates at
//!   the end of the insertion order or fails with [`map::MapOverflow`]
//!   ("Array overflow, check MAXMAPENTRIES"); `remove`, `clear`,
//!   `contains`. One-call forms: `get_long`/`add` (long arrays),
//!   `get_str`/`set_str` (string arrays), `stat_add` (statistics arrays).
//!   `foreach` calls [`map::Map::select`] once (filter for `a[*, "x"]`,
//!   sort, limit) into a reusable `Vec<EntryId>` and then reads each
//!   entry's key and value by id. To be exact where SystemTap is
//!   surprising: it sorts long and string arrays *in place*
//!   ([`map::Map::sort_in_place`], then `select` without a sort), so a
//!   later unsorted loop sees the sorted order, while statistics arrays
//!   are sorted on a copy (`select` with the sort); and a `limit` counts
//!   entries before the slice test.
//! - [`stats`]: one [`stats::Stat`] per statistic (or per element of a
//!   statistics array), created from the global's [`stats::StatSpec`].
//!   `add` is `<<<`; `get(StatOp)` is `@count` ... `@variance` with the
//!   "empty aggregate" error; `bucket(i)` is `@hist_log(s)[i]`;
//!   `buckets()` is what `foreach (b in @hist_log(s))` walks (128 log
//!   buckets, bucket 64 holds 0); `print_histogram` is `print(@hist_*(s))`.
//! - [`crate::format`]: `printf`/`sprintf` formats parsed at compile time
//!   and executed by `format_into`/`sprintf_into` (`format_into_mem` for
//!   `%m`/`%M`); `print_args` for `print`, `println`, `printd`,
//!   `printdln`; `sprint_args` for their `sprint*` forms.
//! - [`autoprint`]: at exit, after the user's end probes, for each global
//!   the checker marked written-but-never-read, in declaration order.

pub mod arith;
pub mod autoprint;
pub mod map;
pub mod stats;
pub mod strings;

/// The `-D` limits that change values and their printing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// MAXSTRINGLEN: string buffer size (a string keeps one byte less).
    pub maxstringlen: usize,
    /// MAXMAPENTRIES: size of arrays declared without one.
    pub maxmapentries: usize,
    /// HIST_ELISION: empty histogram buckets kept around non-empty ones;
    /// negative keeps all.
    pub hist_elision: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            maxstringlen: strings::DEFAULT_MAXSTRINGLEN,
            maxmapentries: map::DEFAULT_MAXMAPENTRIES,
            hist_elision: stats::DEFAULT_HIST_ELISION,
        }
    }
}

impl Limits {
    /// Applies one `-D NAME=VALUE`; returns false for a name that is not a
    /// value limit (the caller handles MAXACTION and the like) or a value
    /// that is not a number in range.
    pub fn set(&mut self, name: &str, value: &str) -> bool {
        let Ok(v) = value.trim().parse::<i64>() else {
            return false;
        };
        match name {
            "MAXSTRINGLEN" if v >= 1 => self.maxstringlen = v as usize,
            "MAXMAPENTRIES" if v >= 1 => self.maxmapentries = v as usize,
            "HIST_ELISION" => self.hist_elision = v,
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_from_defines() {
        let mut l = Limits::default();
        assert_eq!(
            (l.maxstringlen, l.maxmapentries, l.hist_elision),
            (512, 2048, 2)
        );
        assert!(l.set("MAXSTRINGLEN", "64"));
        assert!(l.set("HIST_ELISION", "-1"));
        assert!(l.set("MAXMAPENTRIES", "1"));
        assert!(!l.set("MAXACTION", "10"));
        assert!(!l.set("MAXSTRINGLEN", "x"));
        assert!(!l.set("MAXSTRINGLEN", "0"));
        assert_eq!(
            (l.maxstringlen, l.maxmapentries, l.hist_elision),
            (64, 1, -1)
        );
    }
}
