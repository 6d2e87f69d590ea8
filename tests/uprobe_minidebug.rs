//! MiniDebugInfo: a stripped program whose function symbols survive only
//! xz-compressed in `.gnu_debugdata`, built from the uprobe fixture by the
//! recipe of GDB's manual ("MiniDebugInfo": keep the function symbols not
//! in `.dynsym`, `objcopy --only-keep-debug`, `strip`, `xz`, `objcopy
//! --add-section .gnu_debugdata=...`). utap's symbols of it equal `nm` of
//! the unstripped file, and `.function("fib")` and `usymname()` work on it
//! as on the original. Skipped with a message without binutils or xz.

mod support;

use std::collections::BTreeSet;
use std::process::Command;

use support::{fixture, run, utap};
use utap_runtime::elf::ElfImage;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sh(script: &str) {
    let o = Command::new("sh").arg("-ec").arg(script).output().unwrap();
    assert!(
        o.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The fixture rebuilt Fedora-style next to the original (its libraries
/// are found through `$ORIGIN`); None when the tools are missing.
fn minified(tag: &str) -> Option<String> {
    if !["nm", "objcopy", "strip", "xz"].iter().all(|t| have(t)) {
        eprintln!("SKIPPED: needs nm, objcopy, strip (binutils) and xz (xz-utils)");
        return None;
    }
    let orig = fixture("ufuncs");
    let out = format!("{}-mini-{tag}-{}", orig, std::process::id());
    let w = format!("{out}.d");
    sh(&format!(
        r#"rm -rf {w}; mkdir {w}; cp {orig} {out}
nm -D {out} --format=posix --defined-only | awk '{{ print $1 }}' | sort > {w}/dynsyms
nm {out} --format=posix --defined-only | awk '{{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }}' | sort > {w}/funcsyms
comm -13 {w}/dynsyms {w}/funcsyms > {w}/keep_symbols
objcopy --only-keep-debug {out} {w}/debug
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols={w}/keep_symbols {w}/debug {w}/mini_debuginfo
strip --strip-all -R .comment {out}
xz {w}/mini_debuginfo
objcopy --add-section .gnu_debugdata={w}/mini_debuginfo.xz {out}
rm -rf {w}"#
    ));
    Some(out)
}

/// `nm`'s text symbols of `path`: (name, address).
fn nm_text(path: &str) -> BTreeSet<(String, u64)> {
    let o = Command::new("nm")
        .args(["--format=posix", "--defined-only", path])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let text = matches!(f.get(1), Some(&"T") | Some(&"t"));
            let addr = u64::from_str_radix(f.get(2)?, 16).ok()?;
            text.then(|| (f[0].to_string(), addr))
        })
        .collect()
}

fn functions(image: &ElfImage) -> BTreeSet<(String, u64)> {
    image
        .symbols
        .iter()
        .filter(|s| s.func)
        .map(|s| (s.name.clone(), s.addr))
        .collect()
}

#[test]
fn symbols_equal_nm_of_the_unstripped_file() {
    let Some(mini) = minified("syms") else { return };
    let image = ElfImage::open(std::path::Path::new(&mini)).unwrap();
    let _ = std::fs::remove_file(&mini);
    assert!(image.mini_debuginfo, "symbols not from .gnu_debugdata");
    let ours = functions(&image);
    let want = nm_text(&fixture("ufuncs"));
    let missing: Vec<_> = want.difference(&ours).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    for f in ["fib", "add", "hot", "main"] {
        assert!(ours.iter().any(|(n, _)| n == f), "{f} in {ours:?}");
    }
}

#[test]
fn function_probes_and_usymname_on_a_minified_program() {
    let Some(mini) = minified("run") else { return };
    let script = r#"
global n, names
probe process("EXE").function("fib") { n++; names[usymname(uaddr())]++ }
probe end { printf("u_fib %d\n", n); foreach (k in names) printf("name %s\n", k) }
"#
    .replace("EXE", &mini);
    let o = run(utap(&script, &["-c", &format!("{mini} basic 3")]));
    let _ = std::fs::remove_file(&mini);
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    let get = |key: &str| -> i64 {
        o.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key:?} in {}", o.stdout))
    };
    assert_eq!(get("u_fib "), get("fib "), "{}", o.stdout);
    let names: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("name "))
        .collect();
    assert_eq!(names, ["name fib"], "{}", o.stdout);
}
