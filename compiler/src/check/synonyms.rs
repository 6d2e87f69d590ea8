//! Prefix synonyms: SystemTap's other system call tapsets.
//!
//! SystemTap probes system calls through several tapset families that
//! fire on the same calls with the same variables: `syscall.*` (its
//! default), `nd_syscall.*` (kprobes, no debuginfo), `nd1_syscall.*` and
//! `nd2_syscall.*` (the older and newer non-dwarf forms) and
//! `dw_syscall.*` (debuginfo only). utap has one implementation, so each
//! prefix is a synonym of `syscall`: `nd_syscall.open` resolves exactly as
//! `syscall.open` (same aliases, variables and seccomp filter), and only
//! the name the point was written with (`-l`, the probe's head) keeps the
//! prefix. A wildcard first component (`*_syscall.open`) does not match
//! the synonyms, which are not aliases of their own.

use crate::ast;

/// The prefixes that mean `syscall`.
pub const SYSCALL_SYNONYMS: &[&str] = &["nd_syscall", "nd1_syscall", "nd2_syscall", "dw_syscall"];

/// Whether `name` is one of [`SYSCALL_SYNONYMS`].
pub fn is_synonym(name: &str) -> bool {
    SYSCALL_SYNONYMS.contains(&name)
}

/// The point with a synonym prefix replaced by `syscall`, if it has one.
pub fn canonical(point: &ast::ProbePoint) -> Option<ast::ProbePoint> {
    let first = point.components.first()?;
    if !is_synonym(&first.name) || first.arg.is_some() {
        return None;
    }
    let mut p = point.clone();
    p.components[0].name = "syscall".to_string();
    Some(p)
}

/// Component names with a synonym prefix replaced by `syscall` (which
/// tapset aliases to load).
pub fn canonical_names(mut names: Vec<String>) -> Vec<String> {
    if names.first().is_some_and(|n| is_synonym(n)) {
        names[0] = "syscall".to_string();
    }
    names
}

/// `syscall.open` as written with `prefix` (`nd_syscall.open`).
pub fn written_head(head: &str, prefix: &str) -> String {
    match head.strip_prefix("syscall") {
        Some(rest) if rest.is_empty() || rest.starts_with('.') => format!("{prefix}{rest}"),
        _ => head.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_keep_the_written_prefix() {
        assert_eq!(
            written_head("syscall.open.return", "nd2_syscall"),
            "nd2_syscall.open.return"
        );
        assert_eq!(written_head("syscall_any", "dw_syscall"), "syscall_any");
        assert_eq!(
            canonical_names(vec!["dw_syscall".into(), "read".into()]),
            ["syscall", "read"]
        );
        assert_eq!(canonical_names(vec!["nd_syscallx".into()]), ["nd_syscallx"]);
    }
}
