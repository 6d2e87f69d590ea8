//! Tokens of the SystemTap language (logos).
//!
//! The lexer turns text into [`Token`]s with byte spans. It decodes string
//! escapes, validates numbers as SystemTap does (`strtoull` with base 0:
//! decimal, `0x` hex, leading-`0` octal, up to 2^64-1), keeps `%{ %}`
//! embedded code as one token, and recognises the preprocessor tokens and the
//! script-argument references `$1 @1 $# @#` (substituted later by
//! [`crate::preprocess`]). Malformed input becomes a [`Tok::Error`] token
//! rather than stopping the lexer: SystemTap reports such "junk" only when
//! the parser reaches it, so an error inside a `%( %)` branch that is
//! skipped goes unreported.
//!
//! Strings are decoded to bytes. Bytes that do not form UTF-8 (from escapes
//! such as `"\231"`) are kept as the characters U+10FF80..U+10FFFF so a Rust
//! `String` can carry them; [`string_bytes`] turns such a string back into
//! the exact bytes.

use logos::{FilterResult, Logos};
use std::fmt;

/// What went wrong while lexing, with SystemTap's wording.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LexError {
    pub message: String,
    pub help: Option<String>,
    /// Point only at the first `opener` bytes of the token (where an
    /// unterminated string/comment began), not at everything it swallowed.
    pub opener: Option<usize>,
}

impl LexError {
    pub fn new(message: impl Into<String>) -> LexError {
        LexError {
            message: message.into(),
            help: None,
            opener: None,
        }
    }
    fn unterminated(message: &str, opener: usize, help: &str) -> Box<LexError> {
        Box::new(LexError {
            message: message.into(),
            help: Some(help.into()),
            opener: Some(opener),
        })
    }
}

fn bad_char(lex: &mut logos::Lexer<Tok>) -> Box<LexError> {
    let c = lex.slice().chars().next().unwrap_or('?');
    Box::new(LexError::new(format!(
        "unexpected character '{}'",
        c.escape_default()
    )))
}

/// A token of the language. The variants without a logos pattern are made
/// by later passes over the token stream.
#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(error(Box<LexError>, bad_char))]
#[logos(skip r"[ \t\r\n\x0b\x0c]+")]
#[logos(skip(r"#[^\n]*", allow_greedy = true))]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
pub enum Tok {
    // Keywords.
    #[token("probe")]
    Probe,
    #[token("global")]
    Global,
    #[token("private")]
    Private,
    #[token("function")]
    Function,
    #[token("if")]
    If,
    #[token("else")]
    Else,
    #[token("for")]
    For,
    #[token("foreach")]
    Foreach,
    #[token("in")]
    In,
    #[token("limit")]
    Limit,
    #[token("return")]
    Return,
    #[token("delete")]
    Delete,
    #[token("while")]
    While,
    #[token("break")]
    Break,
    #[token("continue")]
    Continue,
    #[token("next")]
    Next,
    #[token("string")]
    String,
    #[token("long")]
    Long,
    #[token("try")]
    Try,
    #[token("catch")]
    Catch,

    // Words and literals.
    #[regex(r"[A-Za-z_][A-Za-z0-9_$]*", |lex| lex.slice().to_string())]
    Ident(String),
    /// `$name`, `$$vars`, `$` (without the leading `$`).
    #[regex(r"\$[A-Za-z_$][A-Za-z0-9_$]*", |lex| lex.slice()[1..].to_string())]
    #[token("$", |_| String::new())]
    Target(String),
    /// A `$` or `$$` right after `]` or `)`: the pretty-printing suffix
    /// of `$a[1]$` and `@cast(p, "T")$` (SystemTap's separate `$`
    /// token; made by the layout pass from a `Target` of dollars only).
    Pretty(u8),
    /// `@count`, `@cast`, ... (without the `@`).
    #[regex(r"@[A-Za-z_][A-Za-z0-9_$]*", |lex| lex.slice()[1..].to_string())]
    AtWord(String),
    /// A number literal as the unsigned 64-bit value SystemTap reads.
    #[regex(r"[0-9][A-Za-z0-9]*", number)]
    Num(u64),
    #[token("\"", string_literal)]
    Str(String),
    /// `%{ code %}`, the code between the markers.
    #[token("%{", embedded_code)]
    Embedded(String),
    /// `/* ... */` (never emitted: skipped or an error if unterminated).
    #[token("/*", block_comment)]
    BlockComment,

    // Script arguments, substituted by the preprocessor.
    /// `$N` (the digits).
    #[regex(r"\$[0-9]+", |lex| lex.slice()[1..].to_string())]
    ArgNum(String),
    /// `@N` (the digits).
    #[regex(r"@[0-9]+", |lex| lex.slice()[1..].to_string())]
    ArgStr(String),
    #[token("$#")]
    ArgCountNum,
    #[token("@#")]
    ArgCountStr,

    // Preprocessor.
    #[token("%(")]
    PpIf,
    #[token("%?")]
    PpThen,
    #[token("%:")]
    PpElse,
    #[token("%)")]
    PpEnd,

    // Operators.
    #[token("<<<")]
    StatAdd,
    #[token("<<=")]
    ShlAssign,
    #[token(">>=")]
    ShrAssign,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<=")]
    Le,
    #[token(">=")]
    Ge,
    #[token("=~")]
    Match,
    #[token("!~")]
    NotMatch,
    #[token("+=")]
    AddAssign,
    #[token("-=")]
    SubAssign,
    #[token("*=")]
    MulAssign,
    #[token("/=")]
    DivAssign,
    #[token("%=")]
    ModAssign,
    #[token("&=")]
    AndAssign,
    #[token("^=")]
    XorAssign,
    #[token("|=")]
    OrAssign,
    #[token(".=")]
    ConcatAssign,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("++")]
    PlusPlus,
    #[token("--")]
    MinusMinus,
    #[token("->")]
    Arrow,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    /// `>>>`: logical (unsigned) shift right.
    #[token(">>>")]
    UShr,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("!")]
    Bang,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("=")]
    Assign,
    #[token("?")]
    Question,
    #[token(":")]
    Colon,
    #[token(";")]
    Semi,
    #[token(",")]
    Comma,
    #[token(".")]
    Dot,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,

    // Made by later passes.
    /// Marks where a statement begins (see `parser::layout`).
    StmtStart,
    /// A probe-point component name, wildcards included (`sys*call`).
    Component(String),
    /// Malformed input, reported if the parser reaches it.
    Error(Box<LexError>),
}

/// A token with its byte span in the text it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
    /// Written right after the previous token, with no space or comment
    /// between (probe-point components are glued this way: `sys*call`).
    pub glued: bool,
}

/// Lexes a whole text. Never fails: bad input becomes [`Tok::Error`] tokens.
pub fn lex(text: &str) -> Vec<Token> {
    // Real scripts have about one token per 3 bytes; reserving for one per 2
    // only reserves address space, and avoids copying the vector as it grows.
    let mut out = Vec::with_capacity(text.len() / 2 + 1);
    out.extend(tokens(text));
    out
}

/// The tokens of a text as a stream (what [`lex`] collects), for passes
/// that need no second look at them.
pub fn tokens(text: &str) -> Tokens<'_> {
    Tokens {
        lexer: Tok::lexer(text),
        prev_end: usize::MAX,
    }
}

/// See [`tokens`].
pub struct Tokens<'t> {
    lexer: logos::Lexer<'t, Tok>,
    prev_end: usize,
}

impl Iterator for Tokens<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        let result = self.lexer.next()?;
        let span = self.lexer.span();
        let glued = span.start == self.prev_end;
        self.prev_end = span.end;
        let (tok, end) = match result {
            Ok(tok) => (tok, span.end),
            Err(e) => {
                let end = e.opener.map_or(span.end, |n| span.start + n);
                (Tok::Error(e), end)
            }
        };
        Some(Token {
            tok,
            start: span.start,
            end,
            glued,
        })
    }
}

/// `strtoull(text, &end, 0)` as SystemTap uses it: the whole text must be a
/// decimal, `0x` hexadecimal or leading-`0` octal number below 2^64.
pub fn parse_number(text: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        (hex, 16)
    } else if text.len() > 1 && text.starts_with('0') {
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn number(lex: &mut logos::Lexer<Tok>) -> Result<u64, Box<LexError>> {
    parse_number(lex.slice())
        .ok_or_else(|| Box::new(LexError::new("number invalid or out of range")))
}

fn block_comment(lex: &mut logos::Lexer<Tok>) -> FilterResult<(), Box<LexError>> {
    match lex.remainder().find("*/") {
        Some(i) => {
            lex.bump(i + 2);
            FilterResult::Skip
        }
        None => {
            lex.bump(lex.remainder().len());
            FilterResult::Error(LexError::unterminated(
                "unterminated comment",
                2,
                "this '/*' comment has no closing '*/'",
            ))
        }
    }
}

fn embedded_code(lex: &mut logos::Lexer<Tok>) -> Result<String, Box<LexError>> {
    match lex.remainder().find("%}") {
        Some(i) => {
            let code = lex.remainder()[..i].to_string();
            lex.bump(i + 2);
            Ok(code)
        }
        None => {
            lex.bump(lex.remainder().len());
            Err(LexError::unterminated(
                "Could not find matching '%}' to close embedded function block",
                2,
                "embedded code starts here and runs to the end of the file",
            ))
        }
    }
}

/// Scans a string literal after its opening quote, decoding escapes as C
/// would for the escapes SystemTap passes through (`\a \b \t \n \v \f \r
/// \\ \ooo \xhh`); any other escaped character stands for itself.
fn string_literal(lex: &mut logos::Lexer<Tok>) -> Result<String, Box<LexError>> {
    let rest = lex.remainder().as_bytes();
    let mut bytes = Vec::new();
    let mut i = 0;
    loop {
        match rest.get(i) {
            None | Some(b'\n') => {
                lex.bump(i);
                return Err(LexError::unterminated(
                    "Could not find matching closing quote",
                    1,
                    "strings end on the line they begin; close it with '\"'",
                ));
            }
            Some(b'"') => {
                lex.bump(i + 1);
                return Ok(bytes_to_string(bytes));
            }
            Some(b'\\') => {
                i += 1;
                let Some(&c) = rest.get(i) else { continue };
                if c == b'\n' {
                    continue; // reported as unterminated above
                }
                i += 1;
                match c {
                    b'a' => bytes.push(7),
                    b'b' => bytes.push(8),
                    b't' => bytes.push(b'\t'),
                    b'n' => bytes.push(b'\n'),
                    b'v' => bytes.push(11),
                    b'f' => bytes.push(12),
                    b'r' => bytes.push(b'\r'),
                    b'0'..=b'7' => {
                        let mut v = (c - b'0') as u32;
                        for _ in 0..2 {
                            match rest.get(i) {
                                Some(&d @ b'0'..=b'7') => {
                                    v = v * 8 + (d - b'0') as u32;
                                    i += 1;
                                }
                                _ => break,
                            }
                        }
                        bytes.push(v as u8);
                    }
                    b'x' => {
                        let mut v = 0u32;
                        let mut n = 0;
                        while n < 2 {
                            match rest.get(i).and_then(|&d| (d as char).to_digit(16)) {
                                Some(d) => {
                                    v = v * 16 + d;
                                    i += 1;
                                    n += 1;
                                }
                                None => break,
                            }
                        }
                        if n == 0 {
                            bytes.push(b'x');
                        } else {
                            bytes.push(v as u8);
                        }
                    }
                    other => bytes.push(other),
                }
            }
            Some(&b) => {
                bytes.push(b);
                i += 1;
            }
        }
    }
}

/// First of the characters that stand for raw bytes 0x80..=0xFF.
const RAW_BYTE_BASE: u32 = 0x10FF00;

/// Bytes → `String`, keeping non-UTF-8 bytes as U+10FF80..U+10FFFF.
pub fn bytes_to_string(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let mut s = String::new();
            for chunk in e.as_bytes().utf8_chunks() {
                s.push_str(chunk.valid());
                for &b in chunk.invalid() {
                    s.push(char::from_u32(RAW_BYTE_BASE + b as u32).unwrap_or('?'));
                }
            }
            s
        }
    }
}

/// If `c` stands for a raw byte (see [`bytes_to_string`]), that byte.
pub fn raw_byte(c: char) -> Option<u8> {
    let v = c as u32;
    (RAW_BYTE_BASE + 0x80..=RAW_BYTE_BASE + 0xFF)
        .contains(&v)
        .then(|| (v - RAW_BYTE_BASE) as u8)
}

/// The exact bytes a decoded string literal stands for.
pub fn string_bytes(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        match raw_byte(c) {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

pub const KEYWORDS: &[&str] = &[
    "probe", "global", "private", "function", "if", "else", "for", "foreach", "in", "limit",
    "return", "delete", "while", "break", "continue", "next", "string", "long", "try", "catch",
];

impl Tok {
    /// The keyword's text, if this token is a keyword.
    pub fn keyword(&self) -> Option<&'static str> {
        Some(match self {
            Tok::Probe => "probe",
            Tok::Global => "global",
            Tok::Private => "private",
            Tok::Function => "function",
            Tok::If => "if",
            Tok::Else => "else",
            Tok::For => "for",
            Tok::Foreach => "foreach",
            Tok::In => "in",
            Tok::Limit => "limit",
            Tok::Return => "return",
            Tok::Delete => "delete",
            Tok::While => "while",
            Tok::Break => "break",
            Tok::Continue => "continue",
            Tok::Next => "next",
            Tok::String => "string",
            Tok::Long => "long",
            Tok::Try => "try",
            Tok::Catch => "catch",
            _ => return None,
        })
    }

    /// An operator's or punctuation's text.
    pub fn operator(&self) -> Option<&'static str> {
        Some(match self {
            Tok::ArgCountNum => "$#",
            Tok::ArgCountStr => "@#",
            Tok::PpIf => "%(",
            Tok::PpThen => "%?",
            Tok::PpElse => "%:",
            Tok::PpEnd => "%)",
            Tok::StatAdd => "<<<",
            Tok::ShlAssign => "<<=",
            Tok::ShrAssign => ">>=",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Le => "<=",
            Tok::Ge => ">=",
            Tok::Match => "=~",
            Tok::NotMatch => "!~",
            Tok::AddAssign => "+=",
            Tok::SubAssign => "-=",
            Tok::MulAssign => "*=",
            Tok::DivAssign => "/=",
            Tok::ModAssign => "%=",
            Tok::AndAssign => "&=",
            Tok::XorAssign => "^=",
            Tok::OrAssign => "|=",
            Tok::ConcatAssign => ".=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::PlusPlus => "++",
            Tok::MinusMinus => "--",
            Tok::Arrow => "->",
            Tok::Shl => "<<",
            Tok::Shr => ">>",
            Tok::UShr => ">>>",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Amp => "&",
            Tok::Pipe => "|",
            Tok::Caret => "^",
            Tok::Tilde => "~",
            Tok::Bang => "!",
            Tok::Lt => "<",
            Tok::Gt => ">",
            Tok::Assign => "=",
            Tok::Question => "?",
            Tok::Colon => ":",
            Tok::Semi => ";",
            Tok::Comma => ",",
            Tok::Dot => ".",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            _ => return None,
        })
    }
}

impl fmt::Display for Tok {
    /// How a token is named in "found ..." messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(k) = self.keyword() {
            return write!(f, "keyword '{k}'");
        }
        if let Some(op) = self.operator() {
            return write!(f, "'{op}'");
        }
        match self {
            Tok::Ident(s) => write!(f, "identifier '{s}'"),
            Tok::Component(s) => write!(f, "probe point component '{s}'"),
            Tok::Target(s) => write!(f, "target variable '${s}'"),
            Tok::Pretty(n) => write!(f, "'{}'", "$".repeat(*n as usize)),
            Tok::AtWord(s) => write!(f, "'@{s}'"),
            Tok::Num(n) => write!(f, "number '{n}'"),
            Tok::Str(s) => write!(f, "string \"{}\"", s.escape_default()),
            Tok::Embedded(_) => write!(f, "embedded code '%{{ %}}'"),
            Tok::ArgNum(d) => write!(f, "'${d}'"),
            Tok::ArgStr(d) => write!(f, "'@{d}'"),
            Tok::StmtStart => write!(f, "start of statement"),
            Tok::Error(e) => write!(f, "{}", e.message),
            _ => write!(f, "{self:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        lex(text).into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn words_and_keywords() {
        assert_eq!(
            toks("probe a$b $x $$vars @count if2 $"),
            vec![
                Tok::Probe,
                Tok::Ident("a$b".into()),
                Tok::Target("x".into()),
                Tok::Target("$vars".into()),
                Tok::AtWord("count".into()),
                Tok::Ident("if2".into()),
                Tok::Target("".into()),
            ]
        );
    }

    #[test]
    fn numbers_as_strtoull() {
        assert_eq!(
            toks("0 10 0x1F 017 18446744073709551615"),
            vec![
                Tok::Num(0),
                Tok::Num(10),
                Tok::Num(31),
                Tok::Num(15),
                Tok::Num(u64::MAX)
            ]
        );
        for bad in ["0880", "0xzoopoo", "18446744073709551616", "12A3", "0x"] {
            assert!(matches!(toks(bad)[..], [Tok::Error(_)]), "{bad}");
        }
    }

    #[test]
    fn string_escapes() {
        assert_eq!(
            toks(r#""a\n\t\"\\\101\x41\q""#),
            vec![Tok::Str("a\n\t\"\\AAq".into())]
        );
        let s = match &toks(r#""\231""#)[0] {
            Tok::Str(s) => s.clone(),
            t => panic!("{t:?}"),
        };
        assert_eq!(string_bytes(&s), vec![0o231]);
    }

    #[test]
    fn operators_longest_first() {
        assert_eq!(
            toks("a<<<b <<= >>= -> %( %? %: %) .= ++"),
            vec![
                Tok::Ident("a".into()),
                Tok::StatAdd,
                Tok::Ident("b".into()),
                Tok::ShlAssign,
                Tok::ShrAssign,
                Tok::Arrow,
                Tok::PpIf,
                Tok::PpThen,
                Tok::PpElse,
                Tok::PpEnd,
                Tok::ConcatAssign,
                Tok::PlusPlus,
            ]
        );
    }

    #[test]
    fn comments_and_glue() {
        let ts = lex("a*b /* c */ d # e\n// f\ng*");
        let glued: Vec<_> = ts.iter().map(|t| t.glued).collect();
        assert_eq!(glued, vec![false, true, true, false, false, true]);
    }

    #[test]
    fn unterminated_things_point_at_their_start() {
        let ts = lex("x /* never closed");
        assert_eq!((ts[1].start, ts[1].end), (2, 4));
        assert!(matches!(&ts[1].tok, Tok::Error(e) if e.message == "unterminated comment"));
        let ts = lex("x = \"abc\ny");
        assert_eq!((ts[2].start, ts[2].end), (4, 5));
        let ts = lex("%{ code");
        assert!(matches!(&ts[0].tok, Tok::Error(e) if e.message.contains("'%}'")));
    }

    #[test]
    fn arguments_and_embedded() {
        assert_eq!(
            toks("$1 @12 $# @# %{ int x; %}"),
            vec![
                Tok::ArgNum("1".into()),
                Tok::ArgStr("12".into()),
                Tok::ArgCountNum,
                Tok::ArgCountStr,
                Tok::Embedded(" int x; ".into()),
            ]
        );
    }
}

#[cfg(test)]
mod size {
    /// Tokens are moved through several passes: keep them small.
    #[test]
    fn token_is_small() {
        assert!(std::mem::size_of::<super::Tok>() <= 32);
    }
}
