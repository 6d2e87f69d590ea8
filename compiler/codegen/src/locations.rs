//! Error locations as SystemTap prints them after "near":
//! `operator '/' at script.stp:3:14`, `identifier 'error' at x.stp:2:3`.
//!
//! The checked program only keeps spans, so the token is recovered from the
//! source text at the span: its kind from its first character, its text by
//! the lexical rules of the language.

use rustc_hash::FxHashMap as HashMap;

use utap_compiler::ast::{FileId, Span};
use utap_compiler::source::SourceMap;

/// Source text and display names of the script and tapset files.
pub trait Sources {
    /// The file name as SystemTap shows it in messages.
    fn name(&self, file: FileId) -> &str;
    fn text(&self, file: FileId) -> &str;
}

/// A simple list of (name, text) indexed by [`FileId`].
#[derive(Clone, Debug, Default)]
pub struct SourceList(pub Vec<(String, String)>);

impl Sources for SourceList {
    fn name(&self, file: FileId) -> &str {
        self.0
            .get(file as usize)
            .map_or("<input>", |f| f.0.as_str())
    }
    fn text(&self, file: FileId) -> &str {
        self.0.get(file as usize).map_or("", |f| f.1.as_str())
    }
}

/// The compiler's own file table (the driver's and benchmarks' case).
impl Sources for SourceMap {
    fn name(&self, file: FileId) -> &str {
        SourceMap::name(self, file)
    }
    fn text(&self, file: FileId) -> &str {
        SourceMap::text(self, file)
    }
}

const KEYWORDS: &[&str] = &[
    "break", "catch", "continue", "delete", "else", "for", "foreach", "function", "global", "if",
    "in", "limit", "next", "private", "probe", "return", "try", "while",
];

/// Describes the token starting at byte `at` of `file`.
pub fn describe(sources: &dyn Sources, file: FileId, at: usize) -> String {
    describe_with(sources, file, at, &line_starts(sources.text(file)))
}

/// [`describe`] with the file's line starts already known (a tapset has
/// thousands of locations: counting lines from the top for each one made
/// compiling `syscall.*` quadratic in the tapset's size).
fn describe_with(sources: &dyn Sources, file: FileId, at: usize, starts: &[usize]) -> String {
    let text = sources.text(file);
    let at = at.min(text.len());
    let rest = &text[at..];
    let (kind, tok) = token_at(rest);
    let (line, col) = line_col(starts, at);
    format!("{kind} '{tok}' at {}:{line}:{col}", sources.name(file))
}

/// Byte offsets at which the lines of `text` start.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The first token at or after `from` (skipping blanks and comments).
pub fn next_token_offset(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = from.min(bytes.len());
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if text[i..].starts_with("//") || text[i..].starts_with('#') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            i = text[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |e| i + 2 + e + 2);
        } else {
            return i;
        }
    }
}

fn token_at(rest: &str) -> (&'static str, &str) {
    let b = rest.as_bytes();
    let Some(&first) = b.first() else {
        return ("operator", "");
    };
    let word_len = |start: usize| {
        start
            + b[start..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'$')
                .count()
    };
    if first.is_ascii_alphabetic() || first == b'_' || first == b'$' {
        let w = &rest[..word_len(0)];
        let kind = if KEYWORDS.contains(&w) {
            "keyword"
        } else {
            "identifier"
        };
        return (kind, w);
    }
    if first == b'@' {
        return ("operator", &rest[..word_len(1)]);
    }
    if first.is_ascii_digit() {
        return ("number", &rest[..word_len(0)]);
    }
    if first == b'"' {
        let mut i = 1;
        while i < b.len() && b[i] != b'"' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        return ("string", &rest[1..i.min(b.len())]);
    }
    const OPS: &[&str] = &[
        "<<<", ">>=", "<<=", "++", "--", "+=", "-=", "*=", "/=", "%=", ".=", "&=", "|=", "^=",
        "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "=~", "!~",
    ];
    for op in OPS {
        if rest.starts_with(op) {
            return ("operator", &rest[..op.len()]);
        }
    }
    ("operator", &rest[..first_char_len(rest)])
}

fn first_char_len(s: &str) -> usize {
    s.chars().next().map_or(0, char::len_utf8)
}

/// 1-based line and column of byte `at`, from the line starts.
fn line_col(starts: &[usize], at: usize) -> (usize, usize) {
    let line = starts.partition_point(|&s| s <= at).max(1);
    (line, at - starts[line - 1] + 1)
}

/// The location table of a compiled script, interned by position.
#[derive(Default)]
pub struct Locations {
    pub table: Vec<String>,
    index: HashMap<(FileId, usize), u32>,
    /// Line starts per file, computed on first use.
    lines: HashMap<FileId, Vec<usize>>,
}

impl Locations {
    pub fn new() -> Locations {
        // Entry 0: no location known.
        Locations {
            table: vec![String::new()],
            index: HashMap::default(),
            lines: HashMap::default(),
        }
    }

    /// The id of the token at byte `at` of `file`.
    pub fn at(&mut self, sources: &dyn Sources, file: FileId, at: usize) -> u32 {
        if let Some(&id) = self.index.get(&(file, at)) {
            return id;
        }
        let id = self.table.len() as u32;
        let starts = self
            .lines
            .entry(file)
            .or_insert_with(|| line_starts(sources.text(file)));
        self.table.push(describe_with(sources, file, at, starts));
        self.index.insert((file, at), id);
        id
    }

    /// The id of the token a span starts with.
    pub fn span(&mut self, sources: &dyn Sources, span: Span) -> u32 {
        self.at(sources, span.file, span.start as usize)
    }

    /// The id of the first token after `from` (an operator between two
    /// operands).
    pub fn after(&mut self, sources: &dyn Sources, file: FileId, from: usize) -> u32 {
        let at = next_token_offset(sources.text(file), from);
        self.at(sources, file, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_tokens_as_systemtap() {
        let src = SourceList(vec![(
            "s.stp".into(),
            "probe begin {\n  x = 1 /* c */ / 0\n  error(\"a\")\n}".into(),
        )]);
        let text = src.text(0);
        let div = text.find("/ 0").unwrap();
        assert_eq!(describe(&src, 0, div), "operator '/' at s.stp:2:17");
        let after = next_token_offset(text, text.find("1 ").unwrap() + 1);
        assert_eq!(after, div);
        let err = text.find("error").unwrap();
        assert_eq!(describe(&src, 0, err), "identifier 'error' at s.stp:3:3");
        assert_eq!(describe(&src, 0, 0), "keyword 'probe' at s.stp:1:1");
    }
}
