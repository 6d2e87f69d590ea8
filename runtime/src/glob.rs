//! SystemTap's wildcards in probe-point components and function, marker
//! and library names: `*` matches any run of characters, `?` any one.
//! The checker (probe points, aliases, listing) and the session (names
//! resolved in each process's modules) match with this one function, so
//! a pattern means the same at check time and when a library appears.

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

#[cfg(test)]
mod tests {
    use super::glob;

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
