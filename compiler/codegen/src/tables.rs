//! Compile-time tables that end up in the runtime image: string literals,
//! printf formats, regular expressions and error locations.

use rustc_hash::FxHashMap as HashMap;

use utap_runtime::format::FormatPiece;
use utap_runtime::script::image::GlobalSpec;
use utap_runtime::script::strings::literal_handle;

use crate::locations::{Locations, Sources};

pub struct Tables<'a> {
    pub sources: &'a dyn Sources,
    pub locations: Locations,
    pub literals: Vec<u8>,
    pub literal_index: HashMap<Vec<u8>, i64>,
    pub formats: Vec<Vec<FormatPiece>>,
    pub regexes: Vec<String>,
    pub globals: Vec<GlobalSpec>,
    pub maxstringlen: usize,
    /// In-process code: the long slots counted per thread, with their
    /// counter (`inproc::counters`).
    pub counters: HashMap<u32, u32>,
}

impl<'a> Tables<'a> {
    pub fn new(sources: &'a dyn Sources, globals: Vec<GlobalSpec>, maxstringlen: usize) -> Self {
        Tables {
            sources,
            locations: Locations::new(),
            literals: Vec::new(),
            literal_index: HashMap::default(),
            formats: Vec::new(),
            regexes: Vec::new(),
            globals,
            maxstringlen,
            counters: HashMap::default(),
        }
    }

    /// The handle of a string literal (stored as the runtime would keep
    /// it: up to a NUL, at most MAXSTRINGLEN - 1 bytes).
    pub fn literal(&mut self, s: &str) -> i64 {
        // Raw bytes of escapes such as "\231" come as U+10FF80.. chars.
        let raw = utap_compiler::lexer::string_bytes(s);
        let bytes = utap_runtime::values::strings::stored(&raw, self.maxstringlen);
        if bytes.is_empty() {
            return utap_runtime::script::strings::EMPTY;
        }
        if let Some(&h) = self.literal_index.get(bytes) {
            return h;
        }
        let h = literal_handle(self.literals.len(), bytes.len());
        self.literals.extend_from_slice(bytes);
        self.literal_index.insert(bytes.to_vec(), h);
        h
    }

    pub fn format(&mut self, pieces: Vec<FormatPiece>) -> i64 {
        if let Some(i) = self.formats.iter().position(|f| *f == pieces) {
            return i as i64;
        }
        self.formats.push(pieces);
        self.formats.len() as i64 - 1
    }

    pub fn regex(&mut self, pattern: &str) -> i64 {
        if let Some(i) = self.regexes.iter().position(|r| r == pattern) {
            return i as i64;
        }
        self.regexes.push(pattern.to_string());
        self.regexes.len() as i64 - 1
    }
}
