//! Strings as native code sees them: an `i64` handle naming bytes either in
//! the script's literal pool or in the per-handler arena.
//!
//! A handle packs `(tag << 63) | (start << 32) | len`: tag 1 is the literal
//! pool, tag 0 the arena. Handle 0 is therefore the empty string. The arena
//! is a single byte vector that only grows during a handler run and is
//! cleared after it, so making a string is a bounded copy and nothing is
//! freed on the hot path. Concatenating onto the string that ends at the
//! arena's top extends it in place (`s = s . "x"` in a loop costs only the
//! appended bytes).

use crate::values::strings as vstr;

const LITERAL_TAG: u64 = 1 << 63;
const LEN_MASK: u64 = 0xffff_ffff;
const START_MASK: u64 = 0x7fff_ffff;

/// The empty string.
pub const EMPTY: i64 = 0;

/// Makes the handle of a literal at `start..start+len` of the pool.
pub fn literal_handle(start: usize, len: usize) -> i64 {
    (LITERAL_TAG | ((start as u64 & START_MASK) << 32) | (len as u64 & LEN_MASK)) as i64
}

/// The string storage of one runtime: literals (fixed) and the arena.
#[derive(Default)]
pub struct Strings {
    literals: Box<[u8]>,
    arena: Vec<u8>,
    scratch: Vec<u8>,
    /// A run made more string bytes than a handle can address (2 GiB):
    /// later strings of the run are empty and the run ends in an error.
    pub exhausted: bool,
    /// MAXSTRINGLEN: strings keep at most `maxstringlen - 1` bytes.
    pub maxstringlen: usize,
}

impl Strings {
    pub fn new(literals: Vec<u8>, maxstringlen: usize) -> Strings {
        Strings {
            literals: literals.into_boxed_slice(),
            arena: Vec::with_capacity(64 * 1024),
            scratch: Vec::new(),
            exhausted: false,
            maxstringlen,
        }
    }

    /// The bytes a handle names (empty for a handle that is out of range,
    /// which compiled code never produces).
    #[inline]
    pub fn get(&self, h: i64) -> &[u8] {
        let h = h as u64;
        let start = ((h >> 32) & START_MASK) as usize;
        let len = (h & LEN_MASK) as usize;
        let pool: &[u8] = if h & LITERAL_TAG != 0 {
            &self.literals
        } else {
            &self.arena
        };
        pool.get(start..start + len).unwrap_or(&[])
    }

    /// A new arena string holding `bytes` (cut to MAXSTRINGLEN).
    #[inline]
    pub fn make(&mut self, bytes: &[u8]) -> i64 {
        let bytes = vstr::stored(bytes, self.maxstringlen);
        if !self.room_for(bytes.len()) {
            return EMPTY;
        }
        let start = self.arena.len();
        self.arena.extend_from_slice(bytes);
        pack(start, bytes.len())
    }

    /// A new arena string built by `fill` into an empty scratch buffer
    /// (the value library's functions bound their output by the buffer's
    /// length, so they must not see the arena), then cut to MAXSTRINGLEN.
    #[inline]
    pub fn build(&mut self, fill: impl FnOnce(&mut Vec<u8>, usize)) -> i64 {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        fill(&mut scratch, self.maxstringlen);
        let h = self.make(&scratch);
        self.scratch = scratch;
        h
    }

    /// `a . b`, extending `a` in place when it ends at the arena's top.
    #[inline]
    pub fn concat(&mut self, a: i64, b: i64) -> i64 {
        let cap = vstr::capacity(self.maxstringlen);
        if !self.room_for(cap) {
            return EMPTY;
        }
        let (ua, ub) = (a as u64, b as u64);
        let a_len = (ua & LEN_MASK) as usize;
        let a_start = ((ua >> 32) & START_MASK) as usize;
        if ua & LITERAL_TAG == 0 && a_start + a_len == self.arena.len() && a_len > 0 {
            let room = cap.saturating_sub(a_len);
            let b_len = ((ub & LEN_MASK) as usize).min(room);
            if b_len == 0 {
                return a;
            }
            let b_start = ((ub >> 32) & START_MASK) as usize;
            if ub & LITERAL_TAG != 0 {
                let src = self.literals.get(b_start..b_start + b_len).unwrap_or(&[]);
                self.arena.extend_from_slice(src);
            } else {
                self.arena.extend_from_within(b_start..b_start + b_len);
            }
            return pack(a_start, a_len + b_len);
        }
        let start = self.arena.len();
        for h in [a, b] {
            let hu = h as u64;
            let s = ((hu >> 32) & START_MASK) as usize;
            let l = (hu & LEN_MASK) as usize;
            let room = cap.saturating_sub(self.arena.len() - start);
            let l = l.min(room);
            if hu & LITERAL_TAG != 0 {
                let src = self.literals.get(s..s + l).unwrap_or(&[]);
                self.arena.extend_from_slice(src);
            } else {
                self.arena.extend_from_within(s..s + l);
            }
        }
        pack(start, self.arena.len() - start)
    }

    /// Forgets every arena string (after a handler run).
    #[inline]
    pub fn reset(&mut self) {
        self.arena.clear();
        self.exhausted = false;
    }

    /// Whether `n` more bytes stay addressable by a handle.
    #[inline]
    fn room_for(&mut self, n: usize) -> bool {
        if self.arena.len() + n > START_MASK as usize {
            self.exhausted = true;
        }
        !self.exhausted
    }
}

#[inline]
fn pack(start: usize, len: usize) -> i64 {
    (((start as u64 & START_MASK) << 32) | (len as u64 & LEN_MASK)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_arena_strings() {
        let mut s = Strings::new(b"hello world".to_vec(), 512);
        let hello = literal_handle(0, 5);
        let world = literal_handle(6, 5);
        assert_eq!(s.get(hello), b"hello");
        assert_eq!(s.get(EMPTY), b"");
        let hw = s.concat(hello, world);
        assert_eq!(s.get(hw), b"helloworld");
        // Extending the top string in place keeps the old handle valid.
        let hw2 = s.concat(hw, hello);
        assert_eq!(s.get(hw), b"helloworld");
        assert_eq!(s.get(hw2), b"helloworldhello");
        let m = s.make(b"abc");
        assert_eq!(s.get(m), b"abc");
        s.reset();
        assert_eq!(s.get(hello), b"hello");
    }

    #[test]
    fn strings_are_cut_to_maxstringlen() {
        let mut s = Strings::new(b"abcdef".to_vec(), 5);
        let lit = literal_handle(0, 6);
        let c = s.concat(lit, lit);
        assert_eq!(s.get(c), b"abcd");
        let c2 = s.concat(c, lit);
        assert_eq!(s.get(c2), b"abcd");
        let m = s.make(b"xyz\0abc");
        assert_eq!(s.get(m), b"xyz");
    }
}
