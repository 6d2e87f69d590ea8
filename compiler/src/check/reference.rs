//! The function and probe reference (`utap --help-function NAME`,
//! docs/reference.md), generated from what utap itself knows: the doc
//! comments of the stdlib's functions and probe aliases (the `//` lines or
//! the kerneldoc `/** ... */` block right above a `function` or
//! `probe NAME =` line), the builtin table's signatures and docs and the
//! probe catalogue. Nothing here is written by hand, so
//! a stdlib function added with a comment appears after a rebuild.

use super::catalogue::{ArgSpec, FAMILIES};
use super::tapsets::stdlib_files;
use super::types::type_name;
use crate::builtins::BUILTINS;
use crate::program::Type;

/// One documented function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionDoc {
    pub name: String,
    /// `name:string(a:long, b:string)` as declared.
    pub signature: String,
    pub doc: String,
    /// `stdlib/FILE.stp`, or `builtin`.
    pub origin: String,
}

/// Every public stdlib function and builtin (names without a leading
/// `_`: those are internal helpers), sorted by name; a stdlib definition wins over a builtin.
pub fn functions() -> Vec<FunctionDoc> {
    let mut out: Vec<FunctionDoc> = Vec::new();
    for (file, text) in stdlib_files() {
        for (decl, doc) in documented(text, "function ") {
            let name: String = decl
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() || name.starts_with('_') || out.iter().any(|f| f.name == name) {
                continue;
            }
            let signature = decl.split('{').next().unwrap_or(&decl).trim().to_string();
            out.push(FunctionDoc {
                name,
                signature,
                doc,
                origin: format!("stdlib/{file}"),
            });
        }
    }
    for b in BUILTINS {
        if b.name.starts_with('_') || out.iter().any(|f| f.name == b.name) {
            continue;
        }
        out.push(FunctionDoc {
            name: b.name.to_string(),
            signature: builtin_signature(b),
            doc: b.doc.to_string(),
            origin: "builtin".into(),
        });
    }
    for (name, _, signature, doc) in crate::builtins::PRINT_FUNCTIONS {
        if out.iter().any(|f| f.name == *name) {
            continue;
        }
        out.push(FunctionDoc {
            name: name.to_string(),
            signature: signature.to_string(),
            doc: doc.to_string(),
            origin: "builtin, print family".into(),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn builtin_signature(b: &crate::builtins::Builtin) -> String {
    let params: Vec<String> = b
        .params
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let p = match b.names.get(i) {
                Some(name) => format!("{name}:{}", type_name(*t)),
                None => format!("arg{}:{}", i + 1, type_name(*t)),
            };
            if i >= b.required { format!("[{p}]") } else { p }
        })
        .collect();
    let ret = match b.ret {
        Type::Void => String::new(),
        t => format!(":{}", type_name(t)),
    };
    let guru = if b.guru { " (guru mode, -g)" } else { "" };
    format!("{}{ret}({}){guru}", b.name, params.join(", "))
}

/// (declaration after `keyword`, doc) for each line starting with
/// `keyword`; the doc is the comment right above it ("" when none): `//` lines, or a
/// kerneldoc block `/** ... */` as SystemTap's tapsets write them
/// (see [`kerneldoc`]).
fn documented(text: &str, keyword: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut comment: Vec<&str> = Vec::new();
    // The lines of a `/** ... */` block being read, and the finished
    // block's text.
    let mut block: Option<Vec<&str>> = None;
    let mut doc: Option<String> = None;
    for line in text.lines() {
        if let Some(lines) = block.as_mut() {
            match line.find("*/") {
                Some(end) => {
                    lines.push(&line[..end]);
                    doc = Some(kerneldoc(lines));
                    block = None;
                }
                None => lines.push(line),
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("/**") {
            comment.clear();
            match rest.find("*/") {
                Some(end) => doc = Some(kerneldoc(&[&rest[..end]])),
                None => block = Some(vec![rest]),
            }
            continue;
        }
        if let Some(c) = line.strip_prefix("//") {
            doc = None;
            comment.push(c.strip_prefix(' ').unwrap_or(c));
            continue;
        }
        if let Some(decl) = line.strip_prefix(keyword) {
            let text = match doc.take() {
                Some(d) => d,
                None => comment.join("\n"),
            };
            out.push((decl.trim().to_string(), text));
        }
        comment.clear();
        doc = None;
    }
    out
}

/// The text of a kerneldoc comment (the lines between `/**` and `*/`):
///
/// ```text
///  * sfunction NAME - summary
///  *
///  * @param: what it is
///  *
///  * Description: more
/// ```
///
/// becomes the summary as a sentence, a `- param: ...` list and the
/// description's paragraphs.
fn kerneldoc(lines: &[&str]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut in_param = false;
    for raw in lines {
        let t = raw.trim();
        let t = t.strip_prefix('*').unwrap_or(t);
        let t = t.strip_prefix(' ').unwrap_or(t).trim_end();
        if out.iter().all(|l| l.is_empty()) && !t.is_empty() {
            // `sfunction NAME - summary` (also sprobe, sglobal).
            let summary = match t.split_once(" - ") {
                Some((head, s)) if head.split_whitespace().count() == 2 => s.trim(),
                _ => t,
            };
            let mut s: String = summary.to_string();
            if let Some(first) = s.get(..1) {
                s = first.to_uppercase() + &s[1..];
            }
            if !s.ends_with(['.', '?', '!', ':']) {
                s.push('.');
            }
            out.clear();
            out.push(s);
            continue;
        }
        if t.is_empty() {
            in_param = false;
            if out.last().is_some_and(|l| !l.is_empty()) {
                out.push(String::new());
            }
        } else if let Some(p) = t.strip_prefix('@')
            && let Some((name, what)) = p.split_once(':')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            in_param = true;
            out.push(format!("- {name}: {}", what.trim()));
        } else if in_param {
            out.push(format!("  {}", t.trim_start()));
        } else {
            out.push(
                t.strip_prefix("Description:")
                    .unwrap_or(t)
                    .trim()
                    .to_string(),
            );
        }
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    // A list right after the summary needs the blank line Markdown wants.
    let mut joined: Vec<String> = Vec::new();
    for l in out {
        if l.starts_with("- ")
            && joined.last().is_some_and(|p: &String| {
                !p.is_empty() && !p.starts_with("- ") && !p.starts_with("  ")
            })
        {
            joined.push(String::new());
        }
        joined.push(l);
    }
    joined.join("\n")
}

/// The lead of a doc: its first line up to the end of the first sentence
/// (". ") or clause (": ", where examples follow), for one-line listings
/// such as the shell completions.
pub fn summary(doc: &str) -> String {
    let first = doc.lines().next().unwrap_or("").trim();
    let cut = [first.find(". ").map(|i| i + 1), first.find(": ")]
        .into_iter()
        .flatten()
        .min();
    match cut {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}

/// `utap --help-function NAME`: the function's signature, origin and doc.
pub fn function_help(name: &str) -> Option<String> {
    let f = functions().into_iter().find(|f| f.name == name)?;
    let mut out = format!("function {}\n  ({})\n", f.signature, f.origin);
    if !f.doc.is_empty() {
        out.push('\n');
        for line in f.doc.lines() {
            for part in wrap(line, 76) {
                out.push_str(&format!("  {part}\n").replace("  \n", "\n"));
            }
        }
    }
    Some(out)
}

/// `line` cut at spaces into lines of at most `width` characters (a longer
/// word stays whole); the continuation lines of a `- item` are indented
/// under its text.
fn wrap(line: &str, width: usize) -> Vec<String> {
    let body = line.trim_start();
    let lead = &line[..line.len() - body.len()];
    let hang = if body.starts_with("- ") {
        format!("{lead}  ")
    } else {
        lead.to_string()
    };
    let mut out = Vec::new();
    let mut cur = lead.to_string();
    let mut empty = true;
    for word in body.split(' ') {
        if !empty && cur.chars().count() + 1 + word.chars().count() > width {
            out.push(std::mem::replace(&mut cur, hang.clone()));
            empty = true;
        }
        if !empty {
            cur.push(' ');
        }
        cur.push_str(word);
        empty = false;
    }
    out.push(cur);
    out
}

/// The whole reference as Markdown (docs/reference.md).
pub fn markdown() -> String {
    let mut out = String::from(
        "# utap function and probe reference\n\n\
         Generated from the stdlib's doc comments, the builtin table and the probe \
         catalogue (`compiler/src/check/reference.rs`); do not edit. A test keeps it \
         in sync: `UTAP_REGENERATE_DOCS=1 cargo test --release -p utap --test docs reference` \
         rewrites it.\n\n## Probe points\n\n| probe point | context variables | fires |\n|---|---|---|\n",
    );
    for f in FAMILIES {
        let shown: Vec<String> = f
            .comps
            .iter()
            .map(|c| match c.arg {
                ArgSpec::None => c.name.to_string(),
                ArgSpec::Num => format!("{}(N)", c.name),
                ArgSpec::OptNum => format!("{}[(N)]", c.name),
                ArgSpec::OptStrOrNum => format!("{}[(PATH_OR_PID)]", c.name),
                ArgSpec::Str => format!("{}(\"NAME\")", c.name),
                ArgSpec::OptStr => format!("{}[(\"NAME\")]", c.name),
                ArgSpec::StrOrNum => format!("{}(NAME_OR_ADDR)", c.name),
            })
            .map(|c| c.to_string())
            .collect();
        let mut name = String::new();
        for (c, spec) in shown.iter().zip(f.comps) {
            if !name.is_empty() {
                name.push_str(if spec.optional { "[." } else { "." });
            }
            name.push_str(c);
            if spec.optional {
                name.push(']');
            }
        }
        let vars: Vec<String> = f.context.iter().map(|v| format!("${}", v.name)).collect();
        out.push_str(&format!("| `{name}` | {} | {} |\n", vars.join(" "), f.doc));
    }
    out.push_str("\n## Tapset probe aliases\n\n");
    for (file, text) in stdlib_files() {
        for (decl, doc) in documented(text, "probe ") {
            let name = decl.split(['=', ' ', '+']).next().unwrap_or("").trim();
            if name.is_empty() || doc.is_empty() {
                continue;
            }
            out.push_str(&format!(
                "### `{name}`\n\n({})\n\n{}\n\n",
                format_args!("stdlib/{file}"),
                doc
            ));
        }
    }
    out.push_str("## Functions\n\n");
    for f in functions() {
        out.push_str(&format!(
            "### {}\n\n`{}` ({})\n\n",
            f.name, f.signature, f.origin
        ));
        if !f.doc.is_empty() {
            out.push_str(&f.doc);
            out.push_str("\n\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_right_above_a_function_are_its_doc() {
        let text = "// not this\n\n// Adds.\n// Twice.\nfunction add:long(a:long) { return a }\nfunction bare() {}\n";
        assert_eq!(
            documented(text, "function "),
            vec![
                (
                    "add:long(a:long) { return a }".to_string(),
                    "Adds.\nTwice.".to_string()
                ),
                ("bare() {}".to_string(), String::new())
            ]
        );
    }

    #[test]
    fn a_kerneldoc_block_above_a_function_is_its_doc() {
        let text = "/**\n * sfunction add - adds twice\n *\n * @a: the number,\n *    any number\n *\n * Description: Twice a.\n * Really.\n */\nfunction add:long(a:long) { return a }\n/** sfunction one - one line */\nfunction one() {}\n";
        let docs = documented(text, "function ");
        assert_eq!(
            docs[0].1,
            "Adds twice.\n\n- a: the number,\n  any number\n\nTwice a.\nReally."
        );
        assert_eq!(docs[1], ("one() {}".to_string(), "One line.".to_string()));
    }

    #[test]
    fn summary_is_the_first_sentence() {
        assert_eq!(summary("One. Two.\n\nMore."), "One.");
        assert_eq!(summary("The name: name(0) is \"x\". More."), "The name");
        assert_eq!(summary("Only one line"), "Only one line");
        assert_eq!(summary(""), "");
    }

    #[test]
    fn help_text_is_wrapped_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("- x: aa bb", 7), vec!["- x: aa", "  bb"]);
        assert_eq!(wrap("  indented line", 80), vec!["  indented line"]);
        assert_eq!(wrap("", 80), vec![""]);
    }

    #[test]
    fn stdlib_functions_and_builtins_are_listed() {
        let fs = functions();
        let rs = fs.iter().find(|f| f.name == "return_str").unwrap();
        assert_eq!(rs.signature, "return_str:string(format:long, ret:long)");
        assert!(rs.doc.starts_with("SystemTap's return_str"), "{}", rs.doc);
        assert!(fs.iter().all(|f| !f.name.starts_with('_')));
        assert!(fs.iter().any(|f| f.origin == "builtin"));
    }

    /// Issue 31: every function a script may call (not `_internal`) says
    /// what it does, in the one source `--help-function`, docs/reference.md
    /// and the completions read: its stdlib doc comment or its builtin row.
    #[test]
    fn every_public_function_has_a_description() {
        let fs = functions();
        let missing: Vec<String> = fs
            .iter()
            .filter(|f| f.doc.trim().is_empty())
            .map(|f| format!("{} ({})", f.name, f.origin))
            .collect();
        assert!(missing.is_empty(), "no description: {missing:?}");
        // Every public stdlib function and builtin is listed at all.
        for (file, text) in stdlib_files() {
            for line in text.lines() {
                if let Some(decl) = line.trim_start().strip_prefix("function ") {
                    let name: String = decl
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    assert!(
                        name.starts_with('_') || fs.iter().any(|f| f.name == name),
                        "{name} of stdlib/{file} is not in the reference"
                    );
                }
            }
        }
        for b in BUILTINS.iter().filter(|b| !b.name.starts_with('_')) {
            assert!(fs.iter().any(|f| f.name == b.name), "{}", b.name);
        }
        for (name, ..) in crate::builtins::PRINT_FUNCTIONS {
            assert!(fs.iter().any(|f| f.name == *name), "{name}");
        }
    }
}
