//! The house's floors: modules that used each other in a circle were
//! untied by moving what both need down a floor (issue 31, point 13). The
//! floors are listed here, lowest first; this test reads the sources and
//! fails when a room uses (`crate::ROOM`, or `super::ROOM` between
//! siblings) a room of a higher floor, naming the file and the arrow.
//! Rooms on one floor may use each other; rooms not listed are not checked.

use std::path::{Path, PathBuf};

/// One crate's source root and its floors, lowest first; a room is a
/// module path (`values::strings`) and holds its submodules.
struct Building {
    src: &'static str,
    floors: &'static [&'static [&'static str]],
}

const BUILDINGS: &[Building] = &[
    Building {
        src: "runtime/src",
        floors: &[
            // Thread ids, which every room that names a thread uses.
            &["tid"],
            // Strings below the memory reader that returns them, below
            // printf formats that read and print them.
            &["values::strings"],
            &["memory"],
            &["format"],
            // What a probe hit carries (UserFunction, Marker) below the
            // script runtime that reads it, below the session that makes it.
            &["hit"],
            // Breakpoint records and the unwinder over them, below the
            // script runtime whose builtins use them.
            &["uprobe"],
            &["unwind"],
            &["script"],
            // The data plane runs the script's handlers in the program
            // (their ABI is the script runtime's) and fills and folds the
            // script's globals; the utrace core keeps it and drives it at
            // stops (its control side is the core's), below the session.
            &["dataplane"],
            &["utrace"],
            &["session"],
        ],
    },
    Building {
        src: "compiler/src",
        floors: &[
            // What every point builder shares (arguments, errors, built
            // points), then the builders, then the catalogue dispatching
            // to them, then aliases over the catalogue.
            &["check::point"],
            &["check::dwarf", "check::marks"],
            &["check::functions"],
            &["check::catalogue"],
            &["check::alias"],
        ],
    },
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The module path of a source file (`values/strings.rs` ->
/// `values::strings`, `session/mod.rs` -> `session`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|p| p != "mod" && p != "lib")
        .collect();
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of `text` without `//` comments (doc comments name modules
/// they do not use) and without its unit tests (whose `super` is the file).
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a `use`-like mention starting at `s` names: `a::b::c`, or
/// each leaf of `a::{b, c::{d, e}}`, prefixed with `prefix`.
fn paths(prefix: &str, s: &str, out: &mut Vec<String>) {
    let head_len = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(s.len());
    let head = &s[..head_len];
    if !s[head_len..].starts_with('{') || !(head.is_empty() || head.ends_with("::")) {
        out.push(format!("{prefix}{}", head.trim_end_matches(':')));
        return;
    }
    let inner = &s[head_len + 1..];
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                paths(&format!("{prefix}{head}"), inner[start..i].trim(), out);
                return;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                paths(&format!("{prefix}{head}"), inner[start..i].trim(), out);
                start = i + 1;
            }
            _ => {}
        }
    }
}

/// Every module path `module`'s code names: `crate::X...`, and
/// `super::X...` as the sibling's path.
fn mentions(module: &str, code: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `super` of `a::b` (file a/b.rs or a/b/mod.rs) is `a`.
    let parent = match module.rsplit_once("::") {
        Some((p, _)) => format!("{p}::"),
        None => String::new(),
    };
    for (word, prefix) in [("crate::", String::new()), ("super::", parent)] {
        let mut at = 0;
        while let Some(i) = code[at..].find(word) {
            let start = at + i;
            at = start + word.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            paths(&prefix, &code[at..], &mut out);
        }
    }
    out
}

/// The floor of the room holding module `path`, and the room.
fn floor_of(b: &Building, path: &str) -> Option<(usize, &'static str)> {
    let mut best: Option<(usize, &'static str)> = None;
    for (floor, rooms) in b.floors.iter().enumerate() {
        for room in *rooms {
            let inside = path == *room || path.starts_with(&format!("{room}::"));
            if inside && best.is_none_or(|(_, r)| r.len() < room.len()) {
                best = Some((floor, room));
            }
        }
    }
    best
}

#[test]
fn every_arrow_between_listed_rooms_points_down() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for b in BUILDINGS {
        let src = root().join(b.src);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let module = module_of(&src, &file);
            let Some((floor, room)) = floor_of(b, &module) else {
                continue;
            };
            let text = std::fs::read_to_string(&file).unwrap();
            for used in mentions(&module, &code(&text)) {
                checked += 1;
                if let Some((up, to)) = floor_of(b, &used)
                    && up > floor
                {
                    wrong.push(format!(
                        "{}: {room} (floor {floor}) uses {used} of {to} (floor {up})",
                        file.strip_prefix(root()).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} mentions read: is the parser right?"
    );
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "arrows up the floors:\n{}",
        wrong.join("\n")
    );
}

/// The reader sees the arrows it must: grouped, nested and sibling paths.
#[test]
fn mentions_read_grouped_nested_and_sibling_paths() {
    let text = "use crate::{memory::ReadMemory, values::{strings::x, map}};\n\
                let y = super::functions::build(a);\nfoo_crate::no";
    assert_eq!(
        mentions("check::dwarf", text),
        [
            "memory::ReadMemory",
            "values::strings::x",
            "values::map",
            "check::functions::build"
        ]
    );
    assert_eq!(
        code("a // crate::x\nb\n#[cfg(test)]\nmod tests {\nsuper::c\n}"),
        "a \nb"
    );
}
