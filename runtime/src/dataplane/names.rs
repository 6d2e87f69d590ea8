//! Command names (`execname()`) in the program: a handler there cannot
//! read `/proc`, so the tracer reads a thread's `comm` when it gives the
//! thread a block (its first stop in a process with the region, and again
//! after an exec) and stores a string handle in the block (`Block::comm`).
//!
//! Handles are canonical: a name equal to a literal of the compile is that
//! literal's handle, any other name gets one handle of its own
//! ([`NAME_TAG`], its index and length). Two in-process strings are then
//! equal exactly when their handles are, so `execname() == "sh"` and
//! arrays keyed by `execname()` compare words, with no bytes in the
//! program. The tracer resolves handles when it formats records and folds
//! tables ([`Texts`]); a handle it never made (the program may scribble on
//! the region) resolves to nothing, as a bad literal handle does.
//!
//! As on the tracer route (`crate::procinfo`), a name set later with
//! `prctl(PR_SET_NAME)` shows from the thread's next block on.

use std::collections::HashMap;
use std::sync::Mutex;

use super::fold::literal;

/// Bit 62 tags a name handle (bit 63 is a literal's): `(idx << 32) | len`
/// below it, so the low word is the length as for every handle.
pub const NAME_TAG: u64 = 1 << 62;

/// The names handed out so far, by bytes and by index.
#[derive(Default)]
pub struct Names {
    inner: Mutex<Interned>,
}

#[derive(Default)]
struct Interned {
    by_bytes: HashMap<Vec<u8>, i64>,
    list: Vec<Vec<u8>>,
}

impl Names {
    /// The handle of `bytes`: a literal's if one of `literal_handles` has
    /// these bytes, else the name's own (made on first use).
    pub fn handle(&self, bytes: &[u8], literal_handles: &HashMap<Vec<u8>, i64>) -> i64 {
        if bytes.is_empty() {
            return crate::script::strings::EMPTY;
        }
        if let Some(&h) = literal_handles.get(bytes) {
            return h;
        }
        let mut n = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&h) = n.by_bytes.get(bytes) {
            return h;
        }
        let h = (NAME_TAG | ((n.list.len() as u64) << 32) | bytes.len() as u64) as i64;
        n.list.push(bytes.to_vec());
        n.by_bytes.insert(bytes.to_vec(), h);
        h
    }

    /// A copy of the names for resolving handles without the lock.
    fn snapshot(&self) -> Vec<Vec<u8>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .list
            .clone()
    }
}

/// Resolves the string handles the in-process code makes: literals and
/// names.
pub struct Texts<'a> {
    literals: &'a [u8],
    names: Vec<Vec<u8>>,
}

impl<'a> Texts<'a> {
    pub fn new(literals: &'a [u8], names: Option<&Names>) -> Texts<'a> {
        Texts {
            literals,
            names: names.map(Names::snapshot).unwrap_or_default(),
        }
    }

    /// The bytes of handle `h`, if it is a literal or a name handed out.
    pub fn get(&self, h: i64) -> Option<&[u8]> {
        if h == crate::script::strings::EMPTY {
            return Some(b"");
        }
        let u = h as u64;
        if u >> 62 != 1 {
            return literal(self.literals, h);
        }
        let name = self.names.get(((u >> 32) & 0x3fff_ffff) as usize)?;
        (name.len() as u64 == u & 0xffff_ffff).then_some(&name[..])
    }
}

/// A thread's command name as `/proc` gives it, without the newline
/// (empty when the thread is gone).
pub fn comm_of(tid: i32) -> Vec<u8> {
    let mut c = std::fs::read(format!("/proc/{tid}/comm")).unwrap_or_default();
    if c.last() == Some(&b'\n') {
        c.pop();
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_names_get_equal_handles_and_literals_win() {
        let mut lits = HashMap::new();
        let pool = b"shcat".to_vec();
        lits.insert(b"sh".to_vec(), crate::script::strings::literal_handle(0, 2));
        let names = Names::default();
        let sh = names.handle(b"sh", &lits);
        assert_eq!(sh, lits[&b"sh".to_vec()]);
        let a = names.handle(b"python3", &lits);
        let b = names.handle(b"bash", &lits);
        assert_ne!(a, b);
        assert_eq!(names.handle(b"python3", &lits), a);
        assert_eq!(names.handle(b"", &lits), crate::script::strings::EMPTY);
        let t = Texts::new(&pool, Some(&names));
        assert_eq!(t.get(sh), Some(&b"sh"[..]));
        assert_eq!(t.get(a), Some(&b"python3"[..]));
        assert_eq!(t.get(b), Some(&b"bash"[..]));
        assert_eq!(t.get(crate::script::strings::EMPTY), Some(&b""[..]));
        // Handles the tracer never made resolve to nothing.
        assert_eq!(t.get((NAME_TAG | (7 << 32) | 4) as i64), None);
        assert_eq!(t.get((NAME_TAG | 3) as i64), None);
    }
}
