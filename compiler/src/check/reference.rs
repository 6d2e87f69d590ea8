//! The function and probe reference (`utap --help-function NAME`,
//! docs/reference.md), generated from what utap itself knows: the doc
//! comments of the stdlib's functions and probe aliases (the `//` lines
//! right above a `function` or `probe NAME =` line), the builtin table's
//! signatures and the probe catalogue. Nothing here is written by hand, so
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
            doc: String::new(),
            origin: "builtin".into(),
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
            let p = format!("arg{}:{}", i + 1, type_name(*t));
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
/// `keyword` that has `//` comment lines right above it.
fn documented(text: &str, keyword: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut comment: Vec<&str> = Vec::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("//") {
            comment.push(c.strip_prefix(' ').unwrap_or(c));
            continue;
        }
        if let Some(decl) = line.strip_prefix(keyword)
            && !comment.is_empty()
        {
            out.push((decl.trim().to_string(), comment.join("\n")));
        }
        comment.clear();
    }
    out
}

/// `utap --help-function NAME`: the function's signature, origin and doc.
pub fn function_help(name: &str) -> Option<String> {
    let f = functions().into_iter().find(|f| f.name == name)?;
    let mut out = format!("function {}\n  ({})\n", f.signature, f.origin);
    if !f.doc.is_empty() {
        out.push('\n');
        for line in f.doc.lines() {
            out.push_str(&format!("  {line}\n").replace("  \n", "\n"));
        }
    }
    Some(out)
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
            if name.is_empty() {
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
            vec![(
                "add:long(a:long) { return a }".to_string(),
                "Adds.\nTwice.".to_string()
            )]
        );
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
}
