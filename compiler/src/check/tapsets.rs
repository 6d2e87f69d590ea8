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

/// What each stdlib file defines. The largest file (syscalls.stp, most of
/// the text) is scanned on a second thread while this one scans the rest.
fn scan_stdlib() -> Vec<Defs> {
    let files = embedded::STDLIB_FILES;
    let Some(big) = (0..files.len()).max_by_key(|&i| files[i].1.len()) else {
        return Vec::new();
    };
    let scan_rest = || {
        files
            .iter()
            .enumerate()
            .map(|(i, (_, text))| (i != big).then(|| scan(text)))
            .collect::<Vec<_>>()
    };
    let (rest, big_defs) = crate::beside::beside("utap-scan", scan_rest, || scan(files[big].1));
    let mut big_defs = Some(big_defs);
    rest.into_iter()
        .map(|d| d.or_else(|| big_defs.take()).unwrap_or_default())
        .collect()
}

/// The stdlib files built into the binary: (file name, text).
pub fn stdlib_files() -> &'static [(&'static str, &'static str)] {
    embedded::STDLIB_FILES
}

/// What one tapset file defines at its top level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Defs {
    /// (name, private, item)
    pub functions: Vec<(String, bool)>,
    pub globals: Vec<(String, bool)>,
    /// Alias names, as component names (`syscall.open` -> ["syscall", "open"]).
    pub aliases: Vec<Vec<String>>,
    /// Byte range of each top-level item (function, global statement,
    /// alias or probe), so that only the items a script needs are parsed.
    pub items: Vec<Item>,
    /// The file uses `%( %)` at top level: items cannot be cut out, parse
    /// it whole.
    pub whole: bool,
}

/// One top-level item of a tapset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Item {
    pub range: std::ops::Range<usize>,
    /// A plain probe (runs whenever its file is used).
    pub probe: bool,
    pub functions: Vec<String>,
    pub globals: Vec<String>,
    pub aliases: Vec<Vec<String>>,
}

pub struct TapsetFile {
    /// Shown in diagnostics: `stdlib/NAME` or the path under `-I`.
    pub name: String,
    pub text: Cow<'static, str>,
    pub defs: Defs,
    /// Which items have been parsed.
    pub loaded: Vec<bool>,
}

/// Every tapset file, with indexes from a defined name to the files.
/// A top-level item: (file, item index).
pub type ItemRef = (usize, usize);

/// What [`Library::take`] marked as loaded.
pub enum Taken {
    /// The whole file (it cannot be cut into items).
    Whole,
    /// These items, in file order.
    Items(Vec<usize>),
}

#[derive(Default)]
pub struct Library {
    pub files: Vec<TapsetFile>,
    functions: HashMap<String, Vec<ItemRef>>,
    globals: HashMap<String, Vec<ItemRef>>,
    aliases: Vec<(Vec<String>, ItemRef)>,
}

impl Library {
    /// The embedded stdlib (when `stdlib`) followed by every `.stp` file under
    /// each of `dirs` (sorted, recursively). An unreadable directory is an
    /// error naming it.
    pub fn new(stdlib: bool, dirs: &[PathBuf]) -> Result<Library, String> {
        let mut lib = Library::default();
        if stdlib {
            for ((name, text), defs) in embedded::STDLIB_FILES.iter().zip(scan_stdlib()) {
                lib.add_scanned(format!("stdlib/{name}"), Cow::Borrowed(*text), defs);
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
        let defs = scan(&text);
        self.add_scanned(name, text, defs);
    }

    /// Adds one file whose definitions are known.
    fn add_scanned(&mut self, name: String, text: Cow<'static, str>, defs: Defs) {
        let idx = self.files.len();
        for (i, item) in defs.items.iter().enumerate() {
            for f in &item.functions {
                self.functions.entry(f.clone()).or_default().push((idx, i));
            }
            for g in &item.globals {
                self.globals.entry(g.clone()).or_default().push((idx, i));
            }
            for a in &item.aliases {
                self.aliases.push((a.clone(), (idx, i)));
            }
        }
        self.files.push(TapsetFile {
            name,
            text,
            loaded: vec![false; defs.items.len()],
            defs,
        });
    }

    /// Items defining a function of this name.
    pub fn function_items(&self, name: &str) -> &[ItemRef] {
        self.functions.get(name).map_or(&[], |v| v.as_slice())
    }

    /// Items defining a global of this name.
    pub fn global_items(&self, name: &str) -> &[ItemRef] {
        self.globals.get(name).map_or(&[], |v| v.as_slice())
    }

    /// Items defining an alias matched by the (possibly wildcard) component
    /// names of a probe point.
    pub fn alias_items(&self, pattern: &[&str]) -> Vec<ItemRef> {
        let mut out: Vec<ItemRef> = self
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

    /// Marks `items` of `file` (plus, on first use of the file, its plain
    /// probes; everything for a `whole` file) as loaded and returns the
    /// text to parse: the file with every other byte blanked (newlines
    /// kept, so positions and line numbers stay those of the file). None
    /// when nothing is new.
    pub fn take_items(&mut self, file: usize, items: &[usize]) -> Option<String> {
        match self.take(file, items)? {
            Taken::Whole => Some(self.files[file].text.to_string()),
            Taken::Items(wanted) => Some(self.items_text(file, &wanted)),
        }
    }

    /// Marks what [`Library::take_items`] would parse as loaded: the whole
    /// file, or these items (in file order).
    pub fn take(&mut self, file: usize, items: &[usize]) -> Option<Taken> {
        let f = &mut self.files[file];
        let first_use = !f.loaded.iter().any(|l| *l);
        let mut wanted: Vec<usize> = if f.defs.whole {
            (0..f.defs.items.len()).collect()
        } else {
            items.to_vec()
        };
        if first_use {
            wanted.extend((0..f.defs.items.len()).filter(|&i| f.defs.items[i].probe));
        }
        wanted.retain(|&i| !f.loaded[i]);
        if wanted.is_empty() && !(first_use && f.defs.whole) {
            return None;
        }
        if f.defs.whole {
            f.loaded.iter_mut().for_each(|l| *l = true);
            return Some(Taken::Whole);
        }
        wanted.sort_unstable();
        wanted.dedup();
        for &i in &wanted {
            f.loaded[i] = true;
        }
        Some(Taken::Items(wanted))
    }

    /// The text of `file` with only these items (everything after the
    /// last one left out; positions before it unchanged).
    pub fn items_text(&self, file: usize, wanted: &[usize]) -> String {
        let f = &self.files[file];
        let end = wanted
            .iter()
            .map(|&i| f.defs.items[i].range.end)
            .max()
            .unwrap_or(0);
        let mut text: Vec<u8> = f.text.as_bytes()[..end]
            .iter()
            .map(|&b| if b == b'\n' { b'\n' } else { b' ' })
            .collect();
        for &i in wanted {
            let r = f.defs.items[i].range.clone();
            text[r.clone()].copy_from_slice(&f.text.as_bytes()[r]);
        }
        // Item ranges start and end on token boundaries, so this is UTF-8.
        String::from_utf8(text).unwrap_or_default()
    }

    /// Every alias name (for `-l`).
    pub fn all_aliases(&self) -> impl Iterator<Item = &[String]> {
        self.aliases.iter().map(|(n, _)| n.as_slice())
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
    /// `%{ ... %}`
    Embedded,
    Other,
}

/// A token with its brace depth (before it) and byte range.
#[derive(Clone, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    depth: u32,
    start: usize,
    end: usize,
}

/// Splits text into the few tokens the scanner cares about, skipping
/// comments, strings, numbers and embedded C.
fn tokens(text: &str) -> (Vec<Token<'_>>, bool) {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut preprocessor = false;
    let (mut i, mut depth) = (0usize, 0u32);
    while i < b.len() {
        let start = i;
        let c = b[i];
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                i = skip_line(b, i);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = skip_line(b, i);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = find(b, i + 2, b"*/").map_or(b.len(), |e| e + 2);
                continue;
            }
            b'%' if b.get(i + 1) == Some(&b'{') => {
                i = find(b, i + 2, b"%}").map_or(b.len(), |e| e + 2);
                Tok::Embedded
            }
            b'%' if b.get(i + 1) == Some(&b'(') => {
                preprocessor = true;
                i += 2;
                Tok::Other
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                Tok::Other
            }
            b'{' => {
                i += 1;
                out.push(Token {
                    tok: Tok::Punct("{"),
                    depth,
                    start,
                    end: i,
                });
                depth += 1;
                continue;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
                Tok::Punct("}")
            }
            b'+' if b.get(i + 1) == Some(&b'=') => {
                i += 2;
                Tok::Punct("+=")
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'*' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'*')
                {
                    i += 1;
                }
                Tok::Ident(&text[start..i])
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && b[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                Tok::Other
            }
            _ => {
                i += 1;
                while !text.is_char_boundary(i) {
                    i += 1;
                }
                Tok::Punct(&text[start..i])
            }
        };
        out.push(Token {
            tok,
            depth,
            start,
            end: i,
        });
    }
    (out, preprocessor)
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

/// Finds the items a tapset file defines at its top level.
pub fn scan(text: &str) -> Defs {
    let (toks, preprocessor) = tokens(text);
    let mut defs = Defs {
        whole: preprocessor,
        ..Defs::default()
    };
    let mut i = 0;
    let mut private: Option<usize> = None;
    while i < toks.len() {
        let t = &toks[i];
        i += 1;
        if t.depth != 0 {
            continue;
        }
        let start = private.take().unwrap_or(t.start);
        let is_private = start != t.start;
        let mut item = Item::default();
        let next = match t.tok {
            Tok::Ident("private") => {
                private = Some(t.start);
                continue;
            }
            Tok::Ident("function") => {
                if let Some(Token {
                    tok: Tok::Ident(name),
                    ..
                }) = toks.get(i)
                {
                    defs.functions.push((name.to_string(), is_private));
                    item.functions.push(name.to_string());
                }
                body_end(&toks, i)
            }
            Tok::Ident("global") => {
                let next = scan_globals(&toks, i, &mut item);
                defs.globals
                    .extend(item.globals.iter().map(|g| (g.clone(), is_private)));
                next
            }
            Tok::Ident("probe") => {
                let names = scan_probe(&toks, i);
                item.probe = names.is_empty();
                defs.aliases.extend(names.iter().cloned());
                item.aliases = names;
                body_end(&toks, i)
            }
            _ => continue,
        };
        let end = toks
            .get(next.saturating_sub(1))
            .map_or(text.len(), |t| t.end);
        item.range = start..end.max(start);
        defs.items.push(item);
        i = next;
    }
    defs
}

/// The index after the end of an item's body: the `}` closing the first
/// top-level `{`, or an embedded-C block.
fn body_end(toks: &[Token<'_>], mut i: usize) -> usize {
    while let Some(t) = toks.get(i) {
        i += 1;
        match t.tok {
            Tok::Punct("{") if t.depth == 0 => {
                while let Some(t) = toks.get(i) {
                    i += 1;
                    if t.depth == 0 && t.tok == Tok::Punct("}") {
                        return i;
                    }
                }
                return i;
            }
            // `function f() %{ ... %}`
            Tok::Embedded if t.depth == 0 => return i,
            _ => {}
        }
    }
    i
}

/// `global a, b[10], c = 5, d%`: records the names, returns the next index.
fn scan_globals(toks: &[Token<'_>], mut i: usize, item: &mut Item) -> usize {
    loop {
        let Some(Token {
            tok: Tok::Ident(name),
            depth: 0,
            ..
        }) = toks.get(i)
        else {
            return i;
        };
        item.globals.push(name.to_string());
        i += 1;
        // Skip `[N]`, `%`, `= literal` up to a comma.
        loop {
            match toks.get(i).map(|t| (&t.tok, t.depth)) {
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

/// The names of `probe a.b, c = x {` (an alias), empty for `probe x {`.
fn scan_probe(toks: &[Token<'_>], mut i: usize) -> Vec<Vec<String>> {
    let mut names: Vec<Vec<String>> = vec![Vec::new()];
    let mut parens = 0;
    while let Some(t) = toks.get(i) {
        if t.depth != 0 {
            break;
        }
        i += 1;
        match t.tok {
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
                return names.into_iter().filter(|n| !n.is_empty()).collect();
            }
            Tok::Punct("{") => break,
            _ => {}
        }
    }
    Vec::new()
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
    fn items_are_cut_out_with_their_positions() {
        let text = "global a = 1\nfunction f(x) { return x }\nprivate function g() %{ c %}\nprobe begin { a = f(1) }\nprobe s.x = begin { }\n";
        let mut lib = Library::default();
        lib.add("t.stp".into(), Cow::Owned(text.to_string()));
        let ranges: Vec<&str> = lib.files[0]
            .defs
            .items
            .iter()
            .map(|i| &text[i.range.clone()])
            .collect();
        assert_eq!(
            ranges,
            [
                "global a = 1",
                "function f(x) { return x }",
                "private function g() %{ c %}",
                "probe begin { a = f(1) }",
                "probe s.x = begin { }"
            ]
        );
        // First use: the wanted item plus the file's plain probes.
        let cut = lib.take_items(0, &[1]).unwrap();
        // Cut after the last wanted item; everything before keeps its place.
        let probe = "probe begin { a = f(1) }";
        assert_eq!(cut.len(), text.find(probe).unwrap() + probe.len());
        assert_eq!(
            cut.lines().map(str::trim).collect::<Vec<_>>(),
            ["", "function f(x) { return x }", "", probe]
        );
        assert_eq!(lib.take_items(0, &[1]), None);
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
        assert_eq!(lib.alias_items(&["syscall", "*"]), vec![(0, 0)]);
        assert_eq!(lib.alias_items(&["syscall", "*", "return"]), vec![(1, 0)]);
        assert!(lib.alias_items(&["nothing"]).is_empty());
    }
}
