//! Documentation reachable from the shell: the man page renders with
//! man(1), the bash completion loads, `--help-function` answers from the
//! stdlib's doc comments, docs/reference.md is what the generator makes
//! now, every `[man NAME]` pointer in a message has its page, README is a
//! front door whose every command is run, and every sample in the docs
//! shows what its command prints now (tests/samples.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod samples;
use samples::Kind;

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
    // The sections a reader looks for, in man(7)'s order.
    let mut at = 0;
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "EXAMPLES",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "SEE ALSO",
    ] {
        let found = text[at..].find(&format!("\n{section}\n"));
        assert!(
            found.is_some(),
            "no {section} section after byte {at}:\n{text}"
        );
        at += found.unwrap() + 1;
    }
    let environment = &text[text.find("\nENVIRONMENT\n").unwrap()..text.find("\nFILES\n").unwrap()];
    for var in utap_variables() {
        assert!(
            environment.contains(&var),
            "ENVIRONMENT does not describe {var}:\n{environment}"
        );
    }
    assert!(
        text.contains("utapd.sock") && text.contains("/usr/share/utap/stdlib"),
        "{text}"
    );
    assert!(
        text.contains("stapprobes(3stap)") && text.contains("error::pass5(7stap)"),
        "{text}"
    );
}

/// Every `UTAP_*` variable utap reads (`var("UTAP_..")` or `var_os` in
/// compiler/ and runtime/, tests and benchmarks left out).
fn utap_variables() -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec![root().join("compiler"), root().join("runtime")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() && !matches!(name.as_str(), "tests" | "benches" | "fuzz" | "target") {
                dirs.push(p);
            } else if name.ends_with(".rs") {
                files.push(p);
            }
        }
    }
    let re = regex::Regex::new(r#"var(?:_os)?\("(UTAP_[A-Z_]+)"\)"#).unwrap();
    let mut vars: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            re.captures_iter(&text)
                .map(|c| c[1].to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    vars.sort();
    vars.dedup();
    assert!(vars.len() >= 10, "{vars:?}");
    vars
}

/// Runs bash with utap's completion loaded and asks it to complete the
/// last of `words` (as bash would at a Tab), in directory `dir`.
fn complete(words: &[&str], dir: &Path) -> Vec<String> {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let script = temp(&format!("complete-{n}.bash"));
    std::fs::write(&script, utap(&["--completions", "bash"]).stdout).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let n = words.len();
    let program = format!(
        "source '{}' && complete -p utap && COMP_WORDS=({}) && COMP_CWORD={} && \
         _utap_main utap '{}' '{}' && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        n - 1,
        words[n - 1],
        words[n - 2],
    );
    let bash = Command::new("bash")
        .arg("-c")
        .arg(program)
        .current_dir(dir)
        .output()
        .unwrap();
    std::fs::remove_file(&script).unwrap();
    assert!(
        bash.status.success(),
        "{}",
        String::from_utf8_lossy(&bash.stderr)
    );
    let text = String::from_utf8_lossy(&bash.stdout).into_owned();
    let mut lines = text.lines().map(str::to_string);
    assert_eq!(
        lines.next().unwrap(),
        "complete -o bashdefault -o default -o nosort -F _utap_main utap"
    );
    lines.collect()
}

#[test]
fn bash_completes_probe_points_after_l() {
    if tool_missing("bash", "bash_completes_probe_points_after_l") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_utap");
    let got = complete(&[bin, "-l", "syscall.opena"], &root());
    assert_eq!(
        got,
        [
            "syscall.openat",
            "syscall.openat.return",
            "syscall.openat2",
            "syscall.openat2.return"
        ]
    );
    let got = complete(&[bin, "-L", "process.thread."], &root());
    assert_eq!(got, ["process.thread.begin", "process.thread.end"]);
}

#[test]
fn bash_completes_the_users_pids_after_x() {
    if tool_missing("bash", "bash_completes_the_users_pids_after_x") {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let got = complete(
        &[env!("CARGO_BIN_EXE_utap"), "-x", &pid[..pid.len() - 1]],
        &root(),
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(got.contains(&pid), "{pid} not in {got:?}");
    assert!(
        got.iter().all(|p| p.starts_with(&pid[..pid.len() - 1])),
        "{got:?}"
    );
}

#[test]
fn bash_completes_scripts_and_directories_for_the_script() {
    if tool_missing(
        "bash",
        "bash_completes_scripts_and_directories_for_the_script",
    ) {
        return;
    }
    let dir = temp("scripts");
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    for f in ["count.stp", "count.txt", "trace.stp"] {
        std::fs::write(dir.join(f), "").unwrap();
    }
    let mut got = complete(&[env!("CARGO_BIN_EXE_utap"), "-v", ""], &dir);
    got.sort();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(got, ["count.stp", "lib", "trace.stp"]);
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
    // PIDs after -x, probe points after -l/-L, .stp files for the script.
    assert!(
        zsh.contains(":PID:_pids'") && zsh.contains(":PATTERN:{compadd -- ${(f)\"$(utap -l"),
        "{zsh}"
    );
    assert!(zsh.contains(r#"the options:_files -g "*.stp"'"#), "{zsh}");
    assert!(
        fish.contains("complete -c utap -s x -f -a '(__fish_complete_pids)'"),
        "{fish}"
    );
    assert!(
        fish.contains("complete -c utap -s l -s L -f -a '(utap -l \"**\" 2>/dev/null)'"),
        "{fish}"
    );
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

/// Every `<!-- sample -->` block of README.md and docs/ shows what its
/// command prints now (after the block's filter); `UTAP_BLESS=1` rewrites
/// the outputs shown.
#[test]
fn doc_samples_show_what_the_commands_print() {
    let mut failures = Vec::new();
    let mut n = 0;
    for file in samples::markdown_files(&root()) {
        let mut fresh = Vec::new();
        for b in samples::blocks(&file).0 {
            let Kind::Sample { filter } = &b.kind else {
                continue;
            };
            n += 1;
            match samples::check_sample(n, &root(), filter, &b.body) {
                Ok(None) => {}
                Ok(Some(out)) => fresh.push((b.line, out)),
                Err(e) => failures.push(format!("{}:{}: {e}", file.display(), b.line)),
            }
        }
        if !fresh.is_empty() {
            samples::bless(&file, &fresh);
        }
    }
    assert!(n >= 8, "only {n} samples found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A block that shows `$ command` and its output anywhere in the docs is a
/// checked sample, so that no output shown goes stale.
#[test]
fn every_shown_output_in_the_docs_is_a_checked_sample() {
    for file in samples::markdown_files(&root()) {
        let text = std::fs::read_to_string(&file).unwrap();
        let (marked, _) = samples::blocks(&file);
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with("```") && lines.get(i + 1).is_some_and(|n| n.starts_with("$ ")) {
                let at_open = marked.iter().any(|b| b.line == i + 1);
                let is_close = lines[..i].iter().filter(|x| x.starts_with("```")).count() % 2 == 1;
                assert!(
                    at_open || is_close,
                    "{}:{}: a `$ command` block without <!-- sample -->",
                    file.display(),
                    i + 1
                );
            }
        }
    }
}

/// README is a front door: at most 400 lines, the build-and-run and the
/// test command first, and every command in it run by this test (`run`
/// and `sample` blocks) or by CI (`ci` blocks: lines of .ci/run).
#[test]
fn readme_is_a_front_door_whose_commands_all_run() {
    let readme = root().join("README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let count = text.lines().count();
    assert!(count <= 400, "README.md has {count} lines (at most 400)");
    let (marked, unmarked) = samples::blocks(&readme);
    assert!(
        unmarked.is_empty(),
        "README.md: command blocks at lines {unmarked:?} have no marker"
    );
    let first = marked.first().expect("README has command blocks");
    assert!(first.line <= 5, "the two commands come first");
    assert!(first.body[0].starts_with("cargo build --release && ./target/release/utap examples/"));
    assert!(first.body[1].starts_with("cargo test --release --workspace"));
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let ci_lines: Vec<&str> = ci.lines().map(str::trim).collect();
    for b in &marked {
        match &b.kind {
            Kind::Ci => {
                for l in &b.body {
                    let cmd = l.split("  #").next().unwrap().trim();
                    if !cmd.is_empty() && !cmd.starts_with('#') {
                        assert!(
                            ci_lines.contains(&cmd),
                            "README.md:{}: `{cmd}` is not a line of .ci/run",
                            b.line
                        );
                    }
                }
            }
            Kind::Run => {
                if let Err(e) = samples::run_block(&root(), &b.body) {
                    panic!("README.md:{}: the block fails:\n{e}", b.line);
                }
            }
            Kind::Sample { .. } => {} // doc_samples_show_what_the_commands_print
        }
    }
}

/// The Debian package ships the man page and completions from files in the
/// tree (cargo deb packs files; it runs no generator): they must be what
/// the binary generates now. `UTAP_REGENERATE_DOCS=1` rewrites them.
#[test]
fn packaged_man_page_and_completions_are_what_utap_generates() {
    let generated = [
        ("docs/man/utap.1", vec!["--generate-man"]),
        ("docs/completions/utap.bash", vec!["--completions", "bash"]),
        ("docs/completions/_utap", vec!["--completions", "zsh"]),
        ("docs/completions/utap.fish", vec!["--completions", "fish"]),
    ];
    for (file, args) in generated {
        let out = utap(&args);
        assert!(out.status.success(), "utap {args:?}");
        let path = root().join(file);
        if std::env::var_os("UTAP_REGENERATE_DOCS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &out.stdout).unwrap();
        }
        let kept = std::fs::read(&path).unwrap_or_default();
        assert!(
            kept == out.stdout,
            "{file} is not what `utap {}` prints: run UTAP_REGENERATE_DOCS=1 cargo test --release -p utap --test docs packaged",
            args.join(" ")
        );
    }
}

/// The package's contents, as Cargo.toml's [package.metadata.deb] lists
/// them: every source of an asset exists (cargo deb would fail late).
#[test]
fn debian_package_assets_exist() {
    let toml = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let deb = &toml[toml.find("[package.metadata.deb]").expect("a deb section")..];
    let re = regex::Regex::new(r#"\["([^"]+)", "([^"]+)", "([0-7]+)"\]"#).unwrap();
    let mut n = 0;
    for c in re.captures_iter(deb) {
        n += 1;
        let src = &c[1];
        if src.starts_with("target/") {
            continue; // the release build, made before `cargo deb --no-build`
        }
        let pattern = root().join(src);
        let dir = pattern.parent().unwrap();
        let name = pattern.file_name().unwrap().to_string_lossy().into_owned();
        let found = std::fs::read_dir(dir).is_ok_and(|rd| {
            rd.flatten().any(|e| {
                let f = e.file_name().to_string_lossy().into_owned();
                match name.split_once('*') {
                    Some((a, b)) => f.starts_with(a) && f.ends_with(b),
                    None => f == name,
                }
            })
        });
        assert!(found, "asset {src} matches no file");
    }
    assert!(n >= 8, "only {n} assets");
}
