//! SystemTap's wildcards in probe-point components and function, marker
//! and library names: `*` matches any run of characters, `?` any one.
//! The checker (probe points, aliases, listing) and the session (names
//! resolved in each process's modules) match with this one function, so
//! a pattern means the same at check time and when a library appears.
//!
//! [`files`] is the other kind of wildcard: a process path such as
//! `process("/lib/x86_64*/libc.so*")` names files, expanded by glob(3)
//! as SystemTap expands it.

use std::os::unix::ffi::OsStrExt;

/// Whether `text` matches the wildcard `pattern` as a whole.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if pi < p.len() && (p[pi] == t[ti] || p[pi] == b'?') {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// Whether a process path has glob(3) wildcards (`*`, `?`, `[`) that a
/// backslash does not escape (SystemTap's `contains_glob_chars`).
pub fn has_wildcards(path: &str) -> bool {
    let mut bytes = path.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => {
                bytes.next();
            }
            b'*' | b'?' | b'[' => return true,
            _ => {}
        }
    }
    false
}

/// The files a process-path pattern names, as SystemTap's
/// `glob_executable` finds them: glob(3) (relative patterns from the
/// working directory, `$PATH` not searched), regular files only (symbolic
/// links followed), each by its canonical path, without duplicates, in
/// order. `Err` with glob(3)'s code when it fails (3: no match).
pub fn files(pattern: &str) -> Result<Vec<String>, i32> {
    let Ok(c) = std::ffi::CString::new(pattern) else {
        return Err(libc::GLOB_NOMATCH);
    };
    // SAFETY: an all-zero glob_t is its documented initial state; glob
    // fills it and globfree releases what it filled.
    let mut g: libc::glob_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::glob(c.as_ptr(), 0, None, &mut g) };
    let mut out = std::collections::BTreeSet::new();
    if rc == 0 {
        for i in 0..g.gl_pathc {
            // SAFETY: glob returned gl_pathc NUL-terminated paths.
            let p = unsafe { std::ffi::CStr::from_ptr(*g.gl_pathv.add(i)) };
            let path = std::path::Path::new(std::ffi::OsStr::from_bytes(p.to_bytes()));
            if std::fs::metadata(path).is_ok_and(|m| m.is_file())
                && let Ok(real) = std::fs::canonicalize(path)
            {
                out.insert(real.to_string_lossy().into_owned());
            }
        }
    }
    // SAFETY: g was filled by glob (or is still zeroed).
    unsafe { libc::globfree(&mut g) };
    match rc {
        0 => Ok(out.into_iter().collect()),
        e => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::{files, glob, has_wildcards};

    #[test]
    fn process_path_wildcards() {
        assert!(has_wildcards("/lib/x86_64*/libc.so*"));
        assert!(has_wildcards("/bin/l[s]"));
        assert!(has_wildcards("./a?"));
        assert!(!has_wildcards("/bin/ls"));
        assert!(!has_wildcards("/tmp/a\\*b"));
        // /proc/self/exe is a link to a regular file: listed by its target.
        let me = std::fs::canonicalize("/proc/self/exe").unwrap();
        assert_eq!(
            files("/proc/sel[f]/ex?").unwrap(),
            [me.to_string_lossy().into_owned()]
        );
        // Directories are not executables.
        assert_eq!(files("/pro?").unwrap(), Vec::<String>::new());
        assert_eq!(files("/no/such/*"), Err(libc::GLOB_NOMATCH));
    }

    #[test]
    fn stars_and_question_marks() {
        assert!(glob("*", "begin"));
        assert!(glob("*", ""));
        assert!(glob("a*c", "abcdefgabc"));
        assert!(glob("*bc*fg*c", "abcdefgabc"));
        assert!(!glob("*bc*bc*x", "abcdefgabc"));
        assert!(glob("foo**bar", "foobar"));
        assert!(!glob("foo", "foobar"));
        assert!(!glob("foobar", "foo"));
        assert!(glob("mem?py", "memcpy"));
        assert!(!glob("mem?py", "mempy"));
        assert!(glob("sys_?*", "sys_read"));
    }
}
