//! The checked-in `stdlib/syscalls.stp` must be exactly what the generator
//! makes from the Rust table. Run with `UTAP_REGENERATE_TAPSETS=1` to
//! rewrite it after changing the table or the signatures.

use std::path::PathBuf;

use utap_runtime::syscalls::tapset::syscalls_tapset;

fn stdlib_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("stdlib")
        .join(name)
}

#[test]
fn syscalls_tapset_is_current() {
    let path = stdlib_file("syscalls.stp");
    let want = syscalls_tapset();
    if std::env::var_os("UTAP_REGENERATE_TAPSETS").is_some() {
        std::fs::write(&path, &want).expect("write stdlib/syscalls.stp");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: regenerate it with UTAP_REGENERATE_TAPSETS=1 cargo test -p utap-runtime --test syscalls_tapset",
        path.display()
    );
}

#[test]
fn signal_tapset_uses_known_syscall_aliases() {
    let text = std::fs::read_to_string(stdlib_file("signal.stp")).expect("stdlib/signal.stp");
    let syscalls = syscalls_tapset();
    for line in text.lines().filter(|l| l.starts_with("probe ")) {
        let Some((_, rhs)) = line.split_once(" = ") else {
            continue;
        };
        for target in rhs.trim_end_matches('{').split(',').map(str::trim) {
            if let Some(alias) = target.strip_prefix("syscall.") {
                let def = format!("probe syscall.{alias} = ");
                assert!(syscalls.contains(&def), "{line}: no {def}");
            }
        }
    }
}
