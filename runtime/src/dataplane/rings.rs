//! Reading the output rings (`layout::RingHead`, `layout::record`): the
//! records `printf` and `print` wrote in the program, in their sequence
//! order, for the session to format and write.
//!
//! The rings are the program's to write: every record is checked (kind,
//! length, format index) and a ring holding a bad one is skipped to its
//! head and counted, never trusted further. Reading takes no lock and
//! never waits for a writer: a record is there once its head is stored.

use std::sync::atomic::{AtomicU64, Ordering};

use super::image::InProcImage;
use super::layout::{self, RING_WORDS, RingHead, record};

/// What a record asks to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Print {
    /// `printf(formats[fmt], args...)`.
    Printf { fmt: usize },
    /// `print*(args...)`: `flags` as the tracer's `utap_print` takes them
    /// (newline, delimiter), bit `i` of `mask` says argument `i` is a
    /// literal string handle.
    Print { flags: i64, mask: u64, delim: i64 },
}

/// One record read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    /// The ring (block) it came from: where its strings read in the
    /// program are (`super::strings`).
    pub ring: usize,
    pub print: Print,
    /// Longs and literal string handles.
    pub args: Vec<i64>,
}

/// What one reading of every ring found.
#[derive(Debug, Default)]
pub struct Drained {
    /// Records in sequence order.
    pub records: Vec<Record>,
    /// Records dropped by a full ring since the last reading.
    pub dropped: u64,
    /// Rings that held something that is not a record.
    pub bad: u64,
}

/// The reader's memory between readings: the drops already counted.
#[derive(Debug, Default)]
pub struct RingReader {
    dropped_seen: Vec<u64>,
    /// Totals, for `-v`.
    pub printed: u64,
    pub dropped: u64,
    pub bad: u64,
    /// Records lost because a string they print, read in the program,
    /// was overwritten before they were read (`super::strings`).
    pub strings_lost: u64,
}

impl RingReader {
    /// Takes every complete record out of every ring of `image`.
    pub fn drain(&mut self, image: &InProcImage) -> Drained {
        let rings = (layout::BLOCKS + layout::TRACER_BLOCKS) as usize;
        self.dropped_seen.resize(rings, 0);
        let mut out = Drained::default();
        for i in 0..rings {
            let (head, words) = image.region.data.ring(i as u64);
            let base = image.region.data_base();
            // SAFETY: ring heads and words lie inside our mapping of the
            // region (its layout); their values are untrusted.
            let head = (base + head) as *mut RingHead;
            let words = (base + words) as *const u64;
            // SAFETY: as above.
            let dropped = unsafe { field(head, 2) }.load(Ordering::Relaxed);
            out.dropped += dropped.wrapping_sub(self.dropped_seen[i]).min(1 << 32);
            self.dropped_seen[i] = dropped;
            let from = out.records.len();
            if !take_ring(head, words, image.formats.len(), &mut out.records) {
                out.bad += 1;
            }
            out.records[from..].iter_mut().for_each(|r| r.ring = i);
        }
        out.records.sort_by_key(|r| r.seq);
        self.printed += out.records.len() as u64;
        self.dropped += out.dropped;
        self.bad += out.bad;
        out
    }
}

/// Word `i` of a ring head (0 head, 1 tail, 2 dropped) as an atomic.
///
/// # Safety
/// `h` points at a ring head in our mapping of the region (shared with
/// the program, which stores to it atomically).
unsafe fn field<'a>(h: *mut RingHead, i: usize) -> &'a AtomicU64 {
    // SAFETY: RingHead is repr(C) of u64 words; see the caller's promise.
    unsafe { AtomicU64::from_ptr((h as *mut u64).add(i)) }
}

/// Moves the records between a ring's tail and head to `into`; false
/// (the ring emptied) when one is malformed.
fn take_ring(
    head: *mut RingHead,
    words: *const u64,
    formats: usize,
    into: &mut Vec<Record>,
) -> bool {
    // SAFETY: the caller's head is a ring head of the region.
    let (head_word, tail_word) = unsafe { (field(head, 0), field(head, 1)) };
    let end = head_word.load(Ordering::Acquire);
    let mut at = tail_word.load(Ordering::Relaxed);
    let word = |k: u64| {
        // SAFETY: the index is taken modulo the ring's size.
        unsafe { words.add((k & (RING_WORDS - 1)) as usize).read_volatile() }
    };
    let mut ok = end.wrapping_sub(at) <= RING_WORDS;
    while ok && at != end {
        match decode(&word, at, end, formats) {
            Some((r, len)) => {
                into.push(r);
                at += len;
            }
            None => ok = false,
        }
    }
    tail_word.store(end, Ordering::Release);
    ok
}

/// The record at word `at` and its length in words, if well formed.
fn decode(word: &dyn Fn(u64) -> u64, at: u64, end: u64, formats: usize) -> Option<(Record, u64)> {
    let header = word(at);
    let (kind, len, fmt) = (header & 0xff, (header >> 8) & 0xffff, header >> 32);
    let fixed = match kind {
        record::PRINTF => record::PRINTF_FIXED,
        record::PRINT => record::PRINT_FIXED,
        _ => return None,
    };
    if len < fixed || len > fixed + record::MAX_ARGS || len > end - at {
        return None;
    }
    let print = match kind {
        record::PRINTF if (fmt as usize) < formats => Print::Printf { fmt: fmt as usize },
        record::PRINT => Print::Print {
            flags: word(at + 2) as i64,
            mask: word(at + 3),
            delim: word(at + 4) as i64,
        },
        _ => return None,
    };
    let args = (at + fixed..at + len).map(|k| word(k) as i64).collect();
    Some((
        Record {
            seq: word(at + 1),
            ring: 0,
            print,
            args,
        },
        len,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records as the in-process `utap_printf`/`utap_print` lay them out,
    /// one wrapping past the ring's end, read back in order; a bad kind
    /// empties the ring.
    #[test]
    fn records_are_read_back_across_the_wrap() {
        let mut ring = vec![0u64; RING_WORDS as usize];
        let start = RING_WORDS - 3;
        let mut put = |k: u64, v: u64| ring[(k & (RING_WORDS - 1)) as usize] = v;
        put(start, record::header(record::PRINTF, 4, 1));
        put(start + 1, 7);
        put(start + 2, 42);
        put(start + 3, 43);
        put(start + 4, record::header(record::PRINT, 6, 0));
        put(start + 5, 8);
        for (i, v) in [1, 0b1, 0, 99].into_iter().enumerate() {
            put(start + 6 + i as u64, v);
        }
        let mut head = RingHead {
            head: start + 10,
            tail: start,
            ..RingHead::default()
        };
        let mut got = Vec::new();
        assert!(take_ring(&mut head, ring.as_ptr(), 2, &mut got));
        assert_eq!(head.tail, start + 10);
        assert_eq!(got[0].print, Print::Printf { fmt: 1 });
        assert_eq!((got[0].seq, got[0].args.clone()), (7, vec![42, 43]));
        let want = Print::Print {
            flags: 1,
            mask: 1,
            delim: 0,
        };
        assert_eq!(
            (got[1].print.clone(), got[1].args.clone()),
            (want, vec![99])
        );

        ring[0] = 9;
        let mut head = RingHead {
            head: RING_WORDS + 5,
            tail: RING_WORDS,
            ..RingHead::default()
        };
        assert!(!take_ring(&mut head, ring.as_ptr(), 2, &mut got));
        assert_eq!(head.tail, RING_WORDS + 5);
    }
}
