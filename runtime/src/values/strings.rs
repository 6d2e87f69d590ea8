//! Script strings: byte strings bounded by MAXSTRINGLEN, with SystemTap's
//! C-string semantics, and the string functions of the standard library
//! that are written in Rust.
//!
//! A stored string never contains a NUL byte and keeps at most
//! `MAXSTRINGLEN - 1` bytes (SystemTap's strings are `char[MAXSTRINGLEN]`
//! buffers). Every function that produces a string appends to a caller's
//! `Vec<u8>`, so the codegen can reuse buffers and nothing allocates once
//! they have grown.

use std::cmp::Ordering;
use std::fmt;

/// The front end keeps the non-UTF-8 bytes of a string literal (`"\231"`)
/// as the characters U+10FF80..=U+10FFFF (`utap_compiler::lexer::
/// bytes_to_string`); format text goes out as the bytes they stand for.
pub const RAW_BYTE_BASE: u32 = 0x10FF00;

/// SystemTap's default MAXSTRINGLEN (buffer size, terminator included).
pub const DEFAULT_MAXSTRINGLEN: usize = 512;

/// The most bytes a string can hold under `maxstringlen`.
#[inline]
pub fn capacity(maxstringlen: usize) -> usize {
    maxstringlen.saturating_sub(1)
}

/// The part of `s` a stored string keeps: up to the first NUL, at most
/// `capacity(maxstringlen)` bytes.
#[inline]
pub fn stored(s: &[u8], maxstringlen: usize) -> &[u8] {
    let s = until_nul(s);
    &s[..s.len().min(capacity(maxstringlen))]
}

/// `s` up to its first NUL byte (string literals such as `"\0"`).
#[inline]
pub fn until_nul(s: &[u8]) -> &[u8] {
    match s.iter().position(|&b| b == 0) {
        Some(n) => &s[..n],
        None => s,
    }
}

/// `dst = src`. Like every producer here, `src` is a script string: it
/// holds no NUL (stored strings never do; cut literals with
/// [`until_nul`] when compiling them), so nothing scans it.
#[inline]
pub fn assign(dst: &mut Vec<u8>, src: &[u8], maxstringlen: usize) {
    debug_assert!(!src.contains(&0), "script strings hold no NUL");
    dst.clear();
    dst.extend_from_slice(&src[..src.len().min(capacity(maxstringlen))]);
}

/// `dst .= src` (and the second half of `a . b`): what does not fit is cut.
#[inline]
pub fn append(dst: &mut Vec<u8>, src: &[u8], maxstringlen: usize) {
    debug_assert!(!src.contains(&0), "script strings hold no NUL");
    let room = capacity(maxstringlen).saturating_sub(dst.len());
    dst.extend_from_slice(&src[..src.len().min(room)]);
}

/// `dst = a . b`.
#[inline]
pub fn concat(dst: &mut Vec<u8>, a: &[u8], b: &[u8], maxstringlen: usize) {
    assign(dst, a, maxstringlen);
    append(dst, b, maxstringlen);
}

/// String comparison (`<`, `==`, ...): bytewise, as `strcmp`.
#[inline]
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    until_nul(a).cmp(until_nul(b))
}

/// `strlen(s)`.
#[inline]
pub fn strlen(s: &[u8]) -> i64 {
    until_nul(s).len() as i64
}

/// `substr(str, start, length)`: empty unless `0 <= start < strlen(str)`;
/// at most `length` bytes (and at most MAXSTRINGLEN - 1).
pub fn substr(s: &[u8], start: i64, length: i64, maxstringlen: usize) -> &[u8] {
    let s = until_nul(s);
    if start < 0 || start >= s.len() as i64 {
        return &[];
    }
    let keep = length
        .saturating_add(1)
        .clamp(0, maxstringlen as i64)
        .saturating_sub(1)
        .max(0) as usize;
    let rest = &s[start as usize..];
    &rest[..rest.len().min(keep)]
}

/// Errors raised by string functions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StringError {
    /// `stringat` out of range.
    PositionOutOfBounds,
    /// A `=~` pattern that does not compile.
    BadRegex(String),
}

impl fmt::Display for StringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StringError::PositionOutOfBounds => f.write_str("Position out of bounds"),
            StringError::BadRegex(msg) => write!(f, "regex compilation error: {msg}"),
        }
    }
}

impl std::error::Error for StringError {}

/// `stringat(str, pos)`: the byte at `pos` (SystemTap >= 2.3 reports an
/// out-of-range position as an error).
pub fn stringat(s: &[u8], pos: i64) -> Result<i64, StringError> {
    let s = until_nul(s);
    usize::try_from(pos)
        .ok()
        .and_then(|p| s.get(p))
        .map(|&b| b as i8 as i64)
        .ok_or(StringError::PositionOutOfBounds)
}

/// `isinstr(s1, s2)`: whether `s2` occurs in `s1`.
pub fn isinstr(s1: &[u8], s2: &[u8]) -> bool {
    find(until_nul(s1), until_nul(s2)).is_some()
}

/// `strpos(s1, s2)`: offset of the first `s2` in `s1`, or -1.
pub fn strpos(s1: &[u8], s2: &[u8]) -> i64 {
    find(until_nul(s1), until_nul(s2)).map_or(-1, |p| p as i64)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// `strtol(str, base)`, as the kernel's `simple_strtol` that SystemTap
/// calls: an optional `-`, base 0 detects `0x`/`0` prefixes, base 16 skips
/// `0x`, digits are `0-9a-fA-F` below the base, parsing stops at the first
/// other byte (no leading spaces), and overflow wraps.
pub fn strtol(s: &[u8], base: i64) -> i64 {
    let s = until_nul(s);
    match s.split_first() {
        Some((b'-', rest)) => (strtoul(rest, base) as i64).wrapping_neg(),
        _ => strtoul(s, base) as i64,
    }
}

fn strtoul(mut s: &[u8], base: i64) -> u64 {
    let lower = |i: usize| s.get(i).map(u8::to_ascii_lowercase);
    let mut base = base as u32 as u64;
    if base == 0 {
        base = if lower(0) == Some(b'0') {
            if lower(1) == Some(b'x') && s.get(2).is_some_and(u8::is_ascii_hexdigit) {
                16
            } else {
                8
            }
        } else {
            10
        };
    }
    if base == 16 && lower(0) == Some(b'0') && lower(1) == Some(b'x') {
        s = &s[2..];
    }
    let mut acc: u64 = 0;
    for &c in s {
        let digit = match c.to_ascii_lowercase() {
            d @ b'0'..=b'9' => d - b'0',
            d @ b'a'..=b'f' => d - b'a' + 10,
            _ => break,
        } as u64;
        if digit >= base {
            break;
        }
        acc = acc.wrapping_mul(base).wrapping_add(digit);
    }
    acc
}

/// `str_replace(str, search, replace)`: every occurrence, left to right,
/// the result cut at MAXSTRINGLEN - 1. An empty `search` returns `str`.
pub fn str_replace(
    out: &mut Vec<u8>,
    s: &[u8],
    search: &[u8],
    replace: &[u8],
    maxstringlen: usize,
) {
    let (s, search, replace) = (until_nul(s), until_nul(search), until_nul(replace));
    out.clear();
    if search.is_empty() {
        append(out, s, maxstringlen);
        return;
    }
    let mut rest = s;
    while let Some(p) = find(rest, search) {
        append(out, &rest[..p], maxstringlen);
        append(out, replace, maxstringlen);
        rest = &rest[p + search.len()..];
    }
    append(out, rest, maxstringlen);
}

/// The state of `tokenize`, which SystemTap keeps per context: a copy of
/// the last non-empty input and the position of the next token.
#[derive(Clone, Debug, Default)]
pub struct Tokenizer {
    buf: Vec<u8>,
    /// Where the next token starts; `None` once the input is used up.
    next: Option<usize>,
}

impl Tokenizer {
    pub fn new() -> Tokenizer {
        Tokenizer::default()
    }

    /// `tokenize(input, delim)`: a non-empty `input` starts over on a copy
    /// of it; an empty one continues. Appends the next non-empty token
    /// (delimited by any byte of `delim`) to `out`, or nothing when there is
    /// none left.
    pub fn tokenize(&mut self, input: &[u8], delim: &[u8], out: &mut Vec<u8>, maxstringlen: usize) {
        let input = stored(input, maxstringlen);
        if !input.is_empty() {
            self.buf.clear();
            self.buf.extend_from_slice(input);
            self.next = Some(0);
        }
        let delim = until_nul(delim);
        while let Some(start) = self.next {
            let rest = &self.buf[start..];
            let end = match rest.iter().position(|b| delim.contains(b)) {
                Some(n) => {
                    self.next = Some(start + n + 1);
                    start + n
                }
                None => {
                    self.next = None;
                    self.buf.len()
                }
            };
            if end > start {
                out.extend_from_slice(&self.buf[start..end]);
                return;
            }
        }
    }
}

/// `text_str(input)`: non-printable bytes escaped as C does (`\n`, `\t`,
/// ..., else `\ooo`), `"` and `\` escaped too.
pub fn text_str(out: &mut Vec<u8>, input: &[u8], maxstringlen: usize) {
    escape_text(out, input, 0, false, maxstringlen);
}

/// `text_strn(input, len, quoted)`: as `text_str`, but at most `len` bytes
/// of output (0: MAXSTRINGLEN - 1), and with `quoted` the result is
/// wrapped in `"`, followed by `...` when the input did not fit.
/// (SystemTap's 2012 runtime: a cut may split an escape sequence.)
pub fn text_strn(out: &mut Vec<u8>, input: &[u8], len: i64, quoted: bool, maxstringlen: usize) {
    let len = len.clamp(0, maxstringlen as i64);
    escape_text(out, input, len, quoted, maxstringlen);
}

fn short_escape(c: u8) -> Option<u8> {
    Some(match c {
        0x07 => b'a',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0x0b => b'v',
        b'"' => b'"',
        b'\\' => b'\\',
        _ => return None,
    })
}

fn escape_text(out: &mut Vec<u8>, input: &[u8], len: i64, quoted: bool, maxstringlen: usize) {
    let cap = capacity(maxstringlen) as i64;
    let mut room = if len <= 0 || len > cap { cap } else { len };
    let base = out.len();
    if quoted {
        room = room.max(5) - 2;
        out.push(b'"');
    }
    let input = until_nul(input);
    let mut i = 0;
    while i < input.len() && room > 0 {
        let c = input[i];
        let num: i64 = if (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\' {
            out.push(c);
            1
        } else {
            let num = if short_escape(c).is_some() { 2 } else { 4 };
            if room < num {
                break;
            }
            out.push(b'\\');
            match short_escape(c) {
                Some(e) => out.push(e),
                None => out.extend_from_slice(&[
                    b'0' + ((c >> 6) & 3),
                    b'0' + ((c >> 3) & 7),
                    b'0' + (c & 7),
                ]),
            }
            num
        };
        room -= num;
        i += 1;
    }
    if quoted {
        if i < input.len() {
            let keep = (out.len() as i64 - 3 + room).max(base as i64 + 1) as usize;
            out.truncate(keep);
            out.extend_from_slice(b"\"...");
        } else {
            out.push(b'"');
        }
    }
}

/// A compiled `=~` pattern. SystemTap uses POSIX extended regular
/// expressions; the `regex` crate's syntax covers the ERE subset scripts
/// use (classes like `[[:digit:]]`, anchors, alternation, repetition), and
/// matching is bytewise (no Unicode).
#[derive(Clone, Debug)]
pub struct Regex(regex::bytes::Regex);

impl Regex {
    pub fn new(pattern: &str) -> Result<Regex, StringError> {
        // Raw bytes of the literal (see [`RAW_BYTE_BASE`]) become
        // `\xNN` escapes, which match that byte.
        let mut escaped = String::with_capacity(pattern.len());
        for c in pattern.chars() {
            let v = c as u32;
            let base = RAW_BYTE_BASE;
            if (base + 0x80..=base + 0xFF).contains(&v) {
                escaped.push_str(&format!("\\x{:02x}", v - base));
            } else {
                escaped.push(c);
            }
        }
        regex::bytes::RegexBuilder::new(&escaped)
            .unicode(false)
            // POSIX: `.` matches any character, newline included; `^`/`$`
            // anchor at the ends of the string only.
            .dot_matches_new_line(true)
            // SystemTap's regex escapes include octal ones (`\012`).
            .octal(true)
            .build()
            .map(Regex)
            .map_err(|e| StringError::BadRegex(e.to_string()))
    }

    /// `s =~ pattern`: whether the pattern matches anywhere in `s`.
    pub fn is_match(&self, s: &[u8]) -> bool {
        self.0.is_match(until_nul(s))
    }

    /// `s =~ pattern`, remembering the match for `matched(n)` and
    /// `ngroups()`. Reuses `last`'s buffers.
    pub fn match_into(&self, s: &[u8], last: &mut LastMatch) -> bool {
        let s = until_nul(s);
        let locs = match &mut last.locs {
            Some(l) if l.len() == self.0.captures_len() => l,
            slot => slot.insert(self.0.capture_locations()),
        };
        last.ok = self.0.captures_read(locs, s).is_some();
        last.text.clear();
        if last.ok {
            last.text.extend_from_slice(s);
        }
        last.ok
    }
}

/// The last `=~` match of a context, for `matched`, `matched_str` and
/// `ngroups` (SystemTap's `CONTEXT->last_match`).
#[derive(Clone, Debug, Default)]
pub struct LastMatch {
    ok: bool,
    text: Vec<u8>,
    locs: Option<regex::bytes::CaptureLocations>,
}

impl LastMatch {
    pub fn new() -> LastMatch {
        LastMatch::default()
    }

    /// `matched(n)`: the text of group `n` (0: the whole match), empty for a
    /// group that did not take part.
    pub fn matched(&self, n: i64, out: &mut Vec<u8>) -> Result<(), String> {
        if !self.ok {
            return Err(format!(
                "Attempted to get subexpression {n} from failed match"
            ));
        }
        let locs = self
            .locs
            .as_ref()
            .expect("a successful match has locations");
        let idx = usize::try_from(n)
            .ok()
            .filter(|&i| i < locs.len())
            .ok_or_else(|| format!("Attempted to get nonexistent subexpression {n}"))?;
        if let Some((start, end)) = locs.get(idx) {
            out.extend_from_slice(&self.text[start..end]);
        }
        Ok(())
    }

    /// `ngroups()`: the subexpressions of the pattern, the whole match
    /// included.
    pub fn ngroups(&self) -> Result<i64, String> {
        match (&self.locs, self.ok) {
            (Some(l), true) => Ok(l.len() as i64),
            _ => Err("Attempted to get subexpression count from failed match".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u8]) -> &str {
        std::str::from_utf8(v).unwrap()
    }

    #[test]
    fn bounded_storage() {
        let mut d = Vec::new();
        assign(&mut d, b"abcdef", 4);
        assert_eq!(d, b"abc");
        append(&mut d, b"xyz", 8);
        assert_eq!(d, b"abcxyz");
        append(&mut d, b"123", 8);
        assert_eq!(d, b"abcxyz1");
        concat(&mut d, until_nul(b"he\0llo"), b"world", 512);
        assert_eq!(d, b"heworld");
        assert_eq!(stored(b"x\0y", 512), b"x");
        assert_eq!(compare(b"fooban", b"foobar"), Ordering::Less);
        assert_eq!(compare(b"xxx", b"aaa"), Ordering::Greater);
        assert_eq!(compare(b"a", b"a\0b"), Ordering::Equal);
    }

    #[test]
    fn substr_as_conformance_substr() {
        let h = b"Hello World!";
        let cases: [(i64, i64, &str); 14] = [
            (0, 0, ""),
            (-1, 10, ""),
            (10, 0, ""),
            (0, 1, "H"),
            (1, 1, "e"),
            (2, 1, "l"),
            (2, 5, "llo W"),
            (6, 1, "W"),
            (11, 1, "!"),
            (11, 100, "!"),
            (12, 1, ""),
            (0, 10, "Hello Worl"),
            (0, 100, "Hello World!"),
            (0, 100000, "Hello World!"),
        ];
        for (start, len, want) in cases {
            assert_eq!(substr(h, start, len, 512), want.as_bytes(), "{start},{len}");
        }
        assert_eq!(substr(h, 0, i64::MAX, 512), h);
        assert_eq!(substr(h, 0, 100, 5), b"Hell");
    }

    #[test]
    fn stringat_and_search() {
        assert_eq!(stringat(b"ok", 0), Ok(b'o' as i64));
        assert_eq!(stringat(b"ok", 2), Err(StringError::PositionOutOfBounds));
        assert_eq!(
            stringat(b"ok", -1).unwrap_err().to_string(),
            "Position out of bounds"
        );
        assert!(isinstr(b"abcfoobad", b"foo"));
        assert!(!isinstr(b"abcdefg", b"foo"));
        assert!(isinstr(b"", b""));
        assert_eq!(strpos(b"abcfoo", b"foo"), 3);
        assert_eq!(strpos(b"abc", b"x"), -1);
    }

    #[test]
    fn strtol_as_conformance_strtol() {
        let cases: [(&[u8], i64, i64); 12] = [
            (b"1", 10, 1),
            (b"-1", 10, -1),
            (b"123456789", 10, 123456789),
            (b"-123456789", 10, -123456789),
            (b"abcdef", 10, 0),
            (b"1a2b3c4d5e6f7g8h9", 10, 1),
            (b" 1 2 3 4", 10, 0),
            (b"", 10, 0),
            (b"1000", 10, 1000),
            (b"1000", 16, 4096),
            (b"1000", 8, 512),
            (b"1000", 2, 8),
        ];
        for (input, base, want) in cases {
            assert_eq!(strtol(input, base), want, "{:?}", input);
        }
        assert_eq!(strtol(b"0x1f", 16), 31);
        assert_eq!(strtol(b"0x1f", 0), 31);
        assert_eq!(strtol(b"017", 0), 15);
        assert_eq!(strtol(b"ffffffffffffffff", 16), -1);
    }

    #[test]
    fn str_replace_as_conformance() {
        let mut o = Vec::new();
        str_replace(&mut o, b"hello system tap", b"system", b"pointer", 128);
        assert_eq!(s(&o), "hello pointer tap");
        str_replace(&mut o, b"hello system tap", b"system", b"\0", 128);
        assert_eq!(s(&o), "hello  tap");
        str_replace(&mut o, b"hello system tap", b"\0", b"pointer", 128);
        assert_eq!(s(&o), "hello system tap");
        str_replace(&mut o, b"\0", b"\0", b"x", 128);
        assert_eq!(s(&o), "");
        str_replace(&mut o, b"aaa", b"a", b"bb", 6);
        assert_eq!(s(&o), "bbbbb");
    }

    fn tokens(t: &mut Tokenizer, input: &str, delim: &str) -> Vec<String> {
        let mut got = Vec::new();
        let mut tok = Vec::new();
        t.tokenize(input.as_bytes(), delim.as_bytes(), &mut tok, 512);
        while !tok.is_empty() {
            got.push(String::from_utf8(tok.clone()).unwrap());
            tok.clear();
            t.tokenize(b"", delim.as_bytes(), &mut tok, 512);
        }
        got
    }

    #[test]
    fn tokenize_as_conformance() {
        let mut t = Tokenizer::new();
        assert_eq!(tokens(&mut t, "a,b,c", ","), ["a", "b", "c"]);
        assert_eq!(tokens(&mut t, "1,,2,3, ,4", ","), ["1", "2", "3", " ", "4"]);
        assert!(tokens(&mut t, "", ",").is_empty());
        assert_eq!(tokens(&mut t, "no delimiters", ","), ["no delimiters"]);
        assert_eq!(
            tokens(&mut t, "this is a string, which", ", "),
            ["this", "is", "a", "string", "which"]
        );
        assert_eq!(tokens(&mut t, "x|y", ""), ["x|y"]);
        let mut fresh = Tokenizer::new();
        let mut out = Vec::new();
        fresh.tokenize(b"", b",", &mut out, 512);
        assert!(out.is_empty());
    }

    #[test]
    fn text_str_as_conformance() {
        let a = b"\n\nXYZZY\x19";
        let b = b"\x3f\x99\x07\n\n\r\n";
        let c: Vec<u8> = [&a[..], &b[..]].concat();
        let run = |input: &[u8], len: i64, quoted: bool| {
            let mut o = Vec::new();
            text_strn(&mut o, input, len, quoted, 512);
            String::from_utf8(o).unwrap()
        };
        let mut o = Vec::new();
        text_str(&mut o, &c, 512);
        assert_eq!(s(&o), r"\n\nXYZZY\031?\231\a\n\n\r\n");
        assert_eq!(run(a, 10, false), r"\n\nXYZZY");
        assert_eq!(run(b, 10, false), r"?\231\a\n");
        assert_eq!(run(b, 12, false), r"?\231\a\n\n");
        assert_eq!(run(a, 0, true), r#""\n\nXYZZY\031""#);
        assert_eq!(run(a, 10, true), r#""\n\nX"..."#);
        assert_eq!(run(b, 10, true), r#""?\231"..."#);
        assert_eq!(run(a, 15, true), r#""\n\nXYZZY\031""#);
        assert_eq!(run(b, 15, true), r#""?\231\a\n\"..."#);
        assert_eq!(run(&c, 15, true), r#""\n\nXYZZY\"..."#);
        let digits = b"12345678901234567890";
        assert_eq!(run(b"1234567890", 10, true), r#""12345"..."#);
        assert_eq!(run(b"1234567890", 12, true), r#""1234567890""#);
        assert_eq!(run(digits, 12, true), r#""1234567"..."#);
        assert_eq!(run(digits, 10, false), "1234567890");
        assert_eq!(run(b"a\"b\\", 0, false), r#"a\"b\\"#);
    }

    #[test]
    fn regex_matching() {
        let r = Regex::new("^[[:digit:]]+(ab|cd)?$").unwrap();
        assert!(r.is_match(b"123cd"));
        assert!(!r.is_match(b"x123"));
        assert!(Regex::new("a(").is_err());
        assert!(Regex::new("a.b").unwrap().is_match(b"a\nb"));
        assert!(!Regex::new("^b").unwrap().is_match(b"a\nb"));
        assert!(Regex::new("a\\012b").unwrap().is_match(b"a\nb"));
        let raw: String = ['^', char::from_u32(0x10FF99).unwrap(), 'é']
            .iter()
            .collect();
        let r = Regex::new(&raw).unwrap();
        assert!(r.is_match(b"\x99\xc3\xa9"));
        assert!(!r.is_match(b"\xc3\xa9"));
        assert!(Regex::new("\\xff").unwrap().is_match(b"\xff"));
    }

    #[test]
    fn last_match_groups() {
        let r = Regex::new("([a-z]+)=([0-9]+)|(x)").unwrap();
        let mut last = LastMatch::new();
        assert_eq!(
            last.ngroups().unwrap_err(),
            "Attempted to get subexpression count from failed match"
        );
        assert!(r.match_into(b"pid=42;", &mut last));
        assert_eq!(last.ngroups(), Ok(4));
        let group = |n| {
            let mut o = Vec::new();
            last.matched(n, &mut o)
                .map(|_| String::from_utf8(o).unwrap())
        };
        assert_eq!(group(0).unwrap(), "pid=42");
        assert_eq!(group(2).unwrap(), "42");
        assert_eq!(group(3).unwrap(), "");
        assert_eq!(
            group(4).unwrap_err(),
            "Attempted to get nonexistent subexpression 4"
        );
        assert_eq!(
            group(-1).unwrap_err(),
            "Attempted to get nonexistent subexpression -1"
        );
        assert!(!r.match_into(b"nothing", &mut last));
        let mut o = Vec::new();
        assert_eq!(
            last.matched(1, &mut o).unwrap_err(),
            "Attempted to get subexpression 1 from failed match"
        );
    }
}
