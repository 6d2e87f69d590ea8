//! Tapset libraries: the stdlib built into the binary and each `-I DIR`.
//!
//! SystemTap's rule: a tapset file is used when it defines a probe alias,
//! function or global the script needs, transitively. To keep elaboration
//! cheap, files are not parsed up front: [`Library::new`] only scans each
//! file's top level for the names it defines (a few microseconds per file),
//! and the checker parses a file the first time it needs one of them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::catalogue::glob_match;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/stdlib_files.rs"));
}

/// What one tapset file defines at its top level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Defs {
    /// (name, private)
    pub functions: Vec<(String, bool)>,
    pub globals: Vec<(String, bool)>,
    /// Alias names, as component names (`syscall.open` -> ["syscall", "open"]).
    pub aliases: Vec<Vec<String>>,
}

pub struct TapsetFile {
    /// Shown in diagnostics: `stdlib/NAME` or the path under `-I`.
    pub name: String,
    pub text: Cow<'static, str>,
    pub defs: Defs,
    /// Set once the checker has parsed (used) it.
    pub used: bool,
}

/// Every tapset file, with indexes from a defined name to the files.
#[derive(Default)]
pub struct Library {
    pub files: Vec<TapsetFile>,
    functions: HashMap<String, Vec<usize>>,
    globals: HashMap<String, Vec<usize>>,
    aliases: Vec<(Vec<String>, usize)>,
}

impl Library {
    /// The embedded stdlib (when `stdlib`) followed by every `.stp` file under
    /// each of `dirs` (sorted, recursively). An unreadable directory is an
    /// error naming it.
    pub fn new(stdlib: bool, dirs: &[PathBuf]) -> Result<Library, String> {
        let mut lib = Library::default();
        if stdlib {
            for (name, text) in embedded::STDLIB_FILES {
                lib.add(format!("stdlib/{name}"), Cow::Borrowed(*text));
            }
        }
        for dir in dirs {
            let mut paths = Vec::new();
            collect(dir, &mut paths)
                .map_err(|e| format!("cannot read tapset directory '{}': {e}", dir.display()))?;
            paths.sort();
            for path in paths {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read tapset '{}': {e}", path.display()))?;
                lib.add(path.display().to_string(), Cow::Owned(text));
            }
        }
        Ok(lib)
    }

    /// Adds one file (also used by tests).
    pub fn add(&mut self, name: String, text: Cow<'static, str>) {
        let idx = self.files.len();
        let defs = scan(&text);
        for (f, _) in &defs.functions {
            self.functions.entry(f.clone()).or_default().push(idx);
        }
        for (g, _) in &defs.globals {
            self.globals.entry(g.clone()).or_default().push(idx);
        }
        for a in &defs.aliases {
            self.aliases.push((a.clone(), idx));
        }
        self.files.push(TapsetFile {
            name,
            text,
            defs,
            used: false,
        });
    }

    /// Files defining a function of this name.
    pub fn function_files(&self, name: &str) -> &[usize] {
        self.functions.get(name).map_or(&[], |v| v.as_slice())
    }

    /// Files defining a global of this name.
    pub fn global_files(&self, name: &str) -> &[usize] {
        self.globals.get(name).map_or(&[], |v| v.as_slice())
    }

    /// Files defining an alias matched by the (possibly wildcard) component
    /// names of a probe point.
    pub fn alias_files(&self, pattern: &[&str]) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .aliases
            .iter()
            .filter(|(names, _)| {
                names.len() == pattern.len()
                    && names.iter().zip(pattern).all(|(n, p)| glob_match(p, n))
            })
            .map(|(_, f)| *f)
            .collect();
        out.dedup();
        out
    }

    /// Every alias name (for `-l`), with its file.
    pub fn all_aliases(&self) -> impl Iterator<Item = (&[String], usize)> {
        self.aliases.iter().map(|(n, f)| (n.as_slice(), *f))
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "stp") {
            out.push(path);
        }
    }
    Ok(())
}

/// A top-level token for the scanner.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    Punct(&'a str),
    Other,
}

/// Splits text into the few tokens the scanner cares about, skipping
/// comments, strings, numbers and embedded C. Returns (token, brace depth
/// before it).
fn tokens(text: &str) -> Vec<(Tok<'_>, u32)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut depth) = (0usize, 0u32);
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'#' => i = skip_line(b, i),
            b'/' if b.get(i + 1) == Some(&b'/') => i = skip_line(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = find(b, i + 2, b"*/").map_or(b.len(), |e| e + 2);
            }
            b'%' if b.get(i + 1) == Some(&b'{') => {
                i = find(b, i + 2, b"%}").map_or(b.len(), |e| e + 2);
                out.push((Tok::Other, depth));
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push((Tok::Other, depth));
            }
            b'{' => {
                out.push((Tok::Punct("{"), depth));
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                out.push((Tok::Punct("}"), depth));
                i += 1;
            }
            b'+' if b.get(i + 1) == Some(&b'=') => {
                out.push((Tok::Punct("+="), depth));
                i += 2;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'*' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'*')
                {
                    i += 1;
                }
                out.push((Tok::Ident(&text[start..i]), depth));
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && b[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                out.push((Tok::Other, depth));
            }
            _ => {
                let p = &text[i..i + 1];
                out.push((Tok::Punct(p), depth));
                i += 1;
                while !text.is_char_boundary(i) {
                    i += 1;
                }
            }
        }
    }
    out
}

fn skip_line(b: &[u8], i: usize) -> usize {
    find(b, i, b"\n").map_or(b.len(), |e| e + 1)
}

fn find(b: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(pat.len())
        .position(|w| w == pat)
        .map(|p| p + from)
}

/// Finds the names a tapset file defines at its top level.
pub fn scan(text: &str) -> Defs {
    let toks = tokens(text);
    let mut defs = Defs::default();
    let mut i = 0;
    let mut private = false;
    while i < toks.len() {
        let (tok, depth) = &toks[i];
        i += 1;
        if *depth != 0 {
            continue;
        }
        match tok {
            Tok::Ident("private") => {
                private = true;
                continue;
            }
            Tok::Ident("function") => {
                if let Some((Tok::Ident(name), _)) = toks.get(i) {
                    defs.functions.push((name.to_string(), private));
                }
            }
            Tok::Ident("global") => i = scan_globals(&toks, i, private, &mut defs),
            Tok::Ident("probe") => i = scan_probe(&toks, i, &mut defs),
            _ => {}
        }
        private = false;
    }
    defs
}

/// `global a, b[10], c = 5, d%`: records the names, returns the next index.
fn scan_globals(toks: &[(Tok<'_>, u32)], mut i: usize, private: bool, defs: &mut Defs) -> usize {
    loop {
        let Some((Tok::Ident(name), 0)) = toks.get(i) else {
            return i;
        };
        defs.globals.push((name.to_string(), private));
        i += 1;
        // Skip `[N]`, `%`, `= literal` up to a comma.
        loop {
            match toks.get(i) {
                Some((Tok::Punct(","), 0)) => {
                    i += 1;
                    break;
                }
                Some((Tok::Punct("[" | "]" | "%" | "=" | "-"), 0)) | Some((Tok::Other, 0)) => {
                    i += 1
                }
                _ => return i,
            }
        }
    }
}

/// `probe a.b, c = x {` (alias) or `probe x {` (plain probe).
fn scan_probe(toks: &[(Tok<'_>, u32)], mut i: usize, defs: &mut Defs) -> usize {
    let mut names: Vec<Vec<String>> = vec![Vec::new()];
    let mut parens = 0;
    while let Some((tok, 0)) = toks.get(i) {
        i += 1;
        match tok {
            Tok::Punct("(") => parens += 1,
            Tok::Punct(")") => parens -= 1,
            _ if parens > 0 => {}
            Tok::Ident(name) => {
                if let Some(cur) = names.last_mut() {
                    cur.push(name.to_string());
                }
            }
            Tok::Punct(",") => names.push(Vec::new()),
            Tok::Punct("=" | "+=") => {
                defs.aliases
                    .extend(names.into_iter().filter(|n| !n.is_empty()));
                return i;
            }
            Tok::Punct("{") => return i - 1,
            _ => {}
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_top_level_definitions_only() {
        let defs = scan(
            r#"
# function commented(x) {}
global counts[100], last = 5, wrap%
private global hidden
function syscall_name:string (nr:long) { return "x" }
private function helper(a) { global_not = 1; function_not = 2 }
probe syscall.open, syscall.openat = process.syscall if ($syscall == 2) { name = "open" }
probe syscall.open.return += process.syscall.return { }
probe begin { probe_not = "probe x = y" }
function emb() %{ /* function c() */ %}
"#,
        );
        assert_eq!(
            defs.functions,
            vec![
                ("syscall_name".into(), false),
                ("helper".into(), true),
                ("emb".into(), false)
            ]
        );
        assert_eq!(
            defs.globals,
            vec![
                ("counts".into(), false),
                ("last".into(), false),
                ("wrap".into(), false),
                ("hidden".into(), true)
            ]
        );
        assert_eq!(
            defs.aliases,
            vec![
                vec!["syscall".to_string(), "open".into()],
                vec!["syscall".to_string(), "openat".into()],
                vec!["syscall".to_string(), "open".into(), "return".into()],
            ]
        );
    }

    #[test]
    fn alias_lookup_matches_wildcards_per_component() {
        let mut lib = Library::default();
        lib.add(
            "a.stp".into(),
            Cow::Borrowed("probe syscall.read = process.syscall {}"),
        );
        lib.add(
            "b.stp".into(),
            Cow::Borrowed("probe syscall.read.return = process.syscall.return {}"),
        );
        assert_eq!(lib.alias_files(&["syscall", "*"]), vec![0]);
        assert_eq!(lib.alias_files(&["syscall", "*", "return"]), vec![1]);
        assert!(lib.alias_files(&["nothing"]).is_empty());
    }
}
