//! Documentation reachable from the shell: the man page renders with
//! man(1), the bash completion loads, `--help-function` answers from the
//! stdlib's doc comments, docs/reference.md is what the generator makes
//! now, and every `[man NAME]` pointer in a message has its page.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn utap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(args)
        .output()
        .expect("utap runs")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tool_missing(tool: &str, test: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("{test}: skipped, {tool} is not installed");
    }
    !found
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("utap-docs-{}-{name}", std::process::id()))
}

#[test]
fn man_page_renders_with_man() {
    let out = utap(&["--generate-man"]);
    assert!(out.status.success());
    if tool_missing("man", "man_page_renders_with_man") {
        return;
    }
    let page = temp("utap.1");
    std::fs::write(&page, &out.stdout).unwrap();
    let man = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .unwrap();
    std::fs::remove_file(&page).unwrap();
    let text = String::from_utf8_lossy(&man.stdout);
    assert!(
        man.status.success(),
        "{}",
        String::from_utf8_lossy(&man.stderr)
    );
    assert!(text.contains("utap - SystemTap-style scripting"), "{text}");
    assert!(
        text.contains("--format") && text.contains("--suppress-handler-errors"),
        "{text}"
    );
}

#[test]
fn bash_loads_the_completion() {
    let out = utap(&["--completions", "bash"]);
    assert!(out.status.success());
    if tool_missing("bash", "bash_loads_the_completion") {
        return;
    }
    let script = temp("utap.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let bash = Command::new("bash")
        .arg("-c")
        .arg(format!("source '{}' && complete -p utap", script.display()))
        .output()
        .unwrap();
    std::fs::remove_file(&script).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&bash.stdout).trim(),
        "complete -o bashdefault -o default -o nosort -F _utap utap",
        "{}",
        String::from_utf8_lossy(&bash.stderr)
    );
}

#[test]
fn zsh_and_fish_completions_name_the_options() {
    let zsh = String::from_utf8(utap(&["--completions", "zsh"]).stdout).unwrap();
    assert!(zsh.starts_with("#compdef utap"), "{zsh}");
    assert!(zsh.contains("--format"));
    let fish = String::from_utf8(utap(&["--completions", "fish"]).stdout).unwrap();
    assert!(fish.contains("complete -c utap -s f -l format"), "{fish}");
    // `--help-function` completes function names, with their summaries
    // (the same docs --help-function and docs/reference.md show).
    assert!(
        fish.contains(
            "thread_indent\\t'Returns an amount of space with the current task information.'"
        ),
        "{fish}"
    );
    assert!(zsh.contains("thread_indent\\:"), "{zsh}");
    let bash = String::from_utf8(utap(&["--completions", "bash"]).stdout).unwrap();
    assert!(bash.contains("read_stopwatch_us"), "{bash}");
}

#[test]
fn help_function_answers_from_the_doc_comments() {
    let out = utap(&["--help-function", "errno_p"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "function errno_p:long(err:long)\n  (stdlib/syscalls.stp)\n\n  SystemTap's errno_p: the errno number (positive) when err, of either\n  sign, is one with a name (-2 and 2 give 2: ENOENT), else 0.\n"
    );
    // A kerneldoc block (`/** sfunction NAME - summary ... */`) is a doc too.
    let out = utap(&["--help-function", "read_stopwatch_us"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "function read_stopwatch_us:long(name:string)\n  (stdlib/stopwatch.stp)\n\n  Reads the time in microseconds for a stopwatch.\n\n  - name: the stopwatch name\n"
    );
    // A builtin's description comes from its row in the builtin table.
    let out = utap(&["--help-function", "isinstr"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "function isinstr:long(s1:string, s2:string)\n  (builtin)\n\n  1 when s2 occurs in s1, else 0: isinstr(\"foobar\", \"oba\") is 1.\n"
    );
    let out = utap(&["--help-function", "no_such_function"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "utap: no function named 'no_such_function' (docs/reference.md lists them all)\n"
    );
}

/// Issue 31: no public function (stdlib or builtin) is listed without a
/// description, and every stdlib `function` not named `_internal` is listed.
#[test]
fn every_public_function_has_a_description() {
    let fs = utap_compiler::check::reference::functions();
    let missing: Vec<&str> = fs
        .iter()
        .filter(|f| f.doc.trim().is_empty())
        .map(|f| f.name.as_str())
        .collect();
    assert!(missing.is_empty(), "no description: {missing:?}");
    for entry in std::fs::read_dir(root().join("stdlib")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "stp") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let Some(decl) = line.trim_start().strip_prefix("function ") else {
                continue;
            };
            let name: String = decl
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.starts_with('_') {
                assert!(
                    fs.iter().any(|f| f.name == name),
                    "{name} ({}) is missing from the reference",
                    path.display()
                );
                let out = utap(&["--help-function", &name]);
                assert!(out.status.success(), "--help-function {name}");
            }
        }
    }
}

/// docs/reference.md is generated; `UTAP_REGENERATE_DOCS=1` rewrites it.
#[test]
fn reference_is_in_sync_with_the_stdlib() {
    let path = root().join("docs/reference.md");
    let now = utap_compiler::check::reference::markdown();
    if std::env::var_os("UTAP_REGENERATE_DOCS").is_some() {
        std::fs::write(&path, &now).unwrap();
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == now,
        "docs/reference.md is out of date: run UTAP_REGENERATE_DOCS=1 cargo test --release -p utap --test docs reference"
    );
}

/// Every `[man NAME]` a message prints has docs/man/NAME.7stap.
#[test]
fn man_pointers_in_messages_have_pages() {
    let mut names = Vec::new();
    for dir in ["compiler", "runtime", "stdlib"] {
        collect_pointers(&root().join(dir), &mut names);
    }
    names.sort();
    names.dedup();
    assert!(names.contains(&"error::pass5".to_string()), "{names:?}");
    for name in &names {
        let page = root().join(format!("docs/man/{name}.7stap"));
        assert!(
            page.is_file(),
            "[man {name}] is printed but {} is missing",
            page.display()
        );
    }
}

fn collect_pointers(dir: &Path, names: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
            collect_pointers(&p, names);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "stp")
            && let Ok(text) = std::fs::read_to_string(&p)
        {
            for (i, _) in text.match_indices("[man ") {
                let rest = &text[i + 5..];
                if let Some(end) = rest.find(']') {
                    let name = &rest[..end];
                    if name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '_')
                    {
                        names.push(name.to_string());
                    }
                }
            }
        }
    }
}
