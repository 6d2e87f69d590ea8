//! Strings read from the program's memory in the program (`user_string`,
//! `user_string_n`, `user_string_quoted`, and the tapsets' `filename`
//! over them), and strings the tracer renders from values a handler keeps
//! (`__syscall_retstr`, the tapsets' `retstr`): the safe load and the
//! string rings.
//!
//! **The safe load** is `process_vm_readv` on the thread's own process,
//! made from the region's syscall helper (`code::read_helper`): a bad
//! address is an `EFAULT` return, never a fault, so nothing the program
//! passes can crash it, no signal handler or disposition of its own is
//! touched, and nothing needs utap alive (a handler running as utap dies
//! finishes its read). It costs one syscall (no more than a page at a
//! time, as the tracer's own reads), where a load fixed up by the tracer
//! would need it alive at every fault.
//!
//! **The string ring** of a block holds what its thread read, one entry
//! per string, written at the ring's head and never waited for:
//!
//! ```text
//! entry (8-aligned, never split by the ring's end):
//!   word 0  its position: bytes written to the ring before it, ever
//!   word 1  kind (bits 32..) | length (bits 0..32)
//!   bytes   the string as read (kind RAW, QUOTED), the address a
//!           quoted read faulted at (kind FAULT, 8 bytes), or a syscall's
//!           number and result (kind RETSTR, 16 bytes)
//! ```
//!
//! A string is a handle like a literal's (`STR_TAG`, the entry's position
//! / 8 modulo 2^29, its length), which the handler keeps in locals and
//! passes to `printf` and `print`; the tracer finds the bytes when it
//! formats the record, in the ring of the block the record came from, and
//! quotes them then (`user_string_quoted`'s text is the tracer's own). The
//! entry is good if the ring's head has not come round to it since
//! ([`resolve`]); a record whose string was overwritten before it was
//! read is lost, and counted with the dropped ones. Such strings are never keys or
//! compared in the program (`utap_compiler::route` keeps those handlers
//! in the tracer): their handles are not canonical.

use std::sync::atomic::{AtomicU64, Ordering};

use super::image::InProcImage;
use super::layout::{BLOCK_STR_HEAD, BLOCKS, TRACER_BLOCKS};

/// Bytes of one block's string ring.
pub const RING_LEN: u64 = 256 << 10;
/// Bit 61 tags a string read in the program (63: a literal's, 62: a
/// name's).
pub const STR_TAG: u64 = 1 << 61;
/// The longest string the ring takes (MAXSTRINGLEN above it keeps the
/// handlers that read strings in the tracer).
pub const MAX_LEN: u64 = 4096;
/// Bytes before an entry's string.
pub const ENTRY_FIXED: u64 = 16;

/// What an entry holds.
pub mod kind {
    /// The bytes as read (`user_string`, `user_string_n`).
    pub const RAW: u64 = 0;
    /// Bytes to quote when printed (`user_string_quoted`).
    pub const QUOTED: u64 = 1;
    /// The address a quoted read faulted at: prints as `0x<hex>`.
    pub const FAULT: u64 = 2;
    /// A syscall's number and result (16 bytes): prints as the tracer's
    /// `__syscall_retstr` (the tapset's `retstr`).
    pub const RETSTR: u64 = 3;
    /// A target variable's text (`$$parms`, `$$vars`: `super::plans::text`):
    /// the plan's number, then for each number it shows, its value and
    /// whether it could be read (two words each).
    pub const DWARF_TEXT: u64 = 4;
}

/// Whether `h` is a handle of a string read in the program.
pub fn is_read(h: i64) -> bool {
    (h as u64) >> 61 == 1
}

/// The handle of the entry at `pos` holding `len` bytes.
pub fn handle(pos: u64, len: u64) -> i64 {
    (STR_TAG | (((pos >> 3) & 0x1fff_ffff) << 32) | (len & 0xffff_ffff)) as i64
}

/// The text of handle `h` from the string ring of block `ring`, as the
/// tracer prints it, if the entry is still there; `maxstringlen` bounds
/// the quoting as the tracer's `user_string_quoted` does.
pub fn resolve(image: &InProcImage, ring: usize, h: i64, maxstringlen: usize) -> Option<Vec<u8>> {
    let r = &image.region;
    let d = &r.data;
    if d.strings == d.len || ring as u64 >= BLOCKS + TRACER_BLOCKS {
        return None;
    }
    let u = h as u64;
    let len = u & 0xffff_ffff;
    if !is_read(h) || len > MAX_LEN {
        return None;
    }
    // SAFETY: the head word of a block inside our mapping of the region,
    // written atomically by its thread; its value is untrusted.
    let head_at = (r.data_base() + d.block(ring as u64) + BLOCK_STR_HEAD) as *mut u64;
    let head = unsafe { AtomicU64::from_ptr(head_at) };
    let before = head.load(Ordering::Acquire);
    // The full position: the latest one at or below the head with these
    // low bits.
    let low = ((u >> 32) & 0x1fff_ffff) << 3;
    let pos = before.wrapping_sub(before.wrapping_sub(low) & 0xffff_ffff);
    let base = r.data_base() + d.string_ring(ring as u64);
    let word = |off: u64| {
        // SAFETY: `off` is below RING_LEN - 8 (masked), inside the ring.
        unsafe { ((base + (off & (RING_LEN - 8))) as *const u64).read_volatile() }
    };
    let off = pos & (RING_LEN - 1);
    let entry = ENTRY_FIXED + len.next_multiple_of(8);
    if off + entry > RING_LEN || word(off) != pos {
        return None;
    }
    let kind = word(off + 8) >> 32;
    if word(off + 8) & 0xffff_ffff != len {
        return None;
    }
    let mut bytes = vec![0u8; len as usize];
    // SAFETY: `off + entry <= RING_LEN`: the bytes are inside the ring;
    // a writer may change them meanwhile (checked below).
    unsafe {
        let src = (base + off + ENTRY_FIXED) as *const u8;
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = src.add(i).read_volatile();
        }
    }
    // Good if no entry written since can have reached it: a writer at the
    // head now writes at most two entries' room on (one skipped to the
    // ring's start, one written there).
    let after = head.load(Ordering::Acquire);
    let room = 2 * (ENTRY_FIXED + MAX_LEN);
    if after.wrapping_sub(pos) < entry || after.wrapping_sub(pos) + room > RING_LEN {
        return None;
    }
    render(kind, &bytes, maxstringlen)
}

/// An entry's text: raw, quoted as the tracer's `user_string_quoted`
/// quotes, or a faulted read's address.
fn render(kind: u64, bytes: &[u8], maxstringlen: usize) -> Option<Vec<u8>> {
    match kind {
        kind::RAW => Some(bytes.to_vec()),
        kind::QUOTED => {
            let mut out = Vec::with_capacity(bytes.len() + 2);
            crate::values::strings::text_strn(&mut out, bytes, 0, true, maxstringlen);
            Some(out)
        }
        kind::FAULT => {
            let addr = u64::from_le_bytes(bytes.try_into().ok()?);
            Some(format!("0x{addr:x}").into_bytes())
        }
        kind::RETSTR if bytes.len() == 16 => {
            let word = |i: usize| i64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
            Some(crate::syscalls::builtins::syscall_retstr(word(0), word(8)).into_bytes())
        }
        kind::DWARF_TEXT => {
            let words: Vec<i64> = bytes
                .chunks_exact(8)
                .map(|w| i64::from_le_bytes(w.try_into().unwrap()))
                .collect();
            let (&id, values) = words.split_first()?;
            let text = super::plans::render_text(id, values)?;
            Some(crate::values::strings::stored(text.as_bytes(), maxstringlen).to_vec())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_tagged_apart_from_literals_and_names() {
        let h = handle(0x1_0000_0010, 5);
        assert!(is_read(h));
        assert_eq!(h as u64 & 0xffff_ffff, 5);
        assert!(!is_read(crate::script::strings::literal_handle(3, 4)));
        assert!(!is_read(
            (super::super::names::NAME_TAG | (1 << 32) | 3) as i64
        ));
        assert!(!is_read(-1));
        assert!(!is_read(7));
    }

    #[test]
    fn entries_render_as_the_tracer_prints_them() {
        assert_eq!(render(kind::RAW, b"a\nb", 512).unwrap(), b"a\nb");
        assert_eq!(render(kind::QUOTED, b"a\nb", 512).unwrap(), b"\"a\\nb\"");
        let at = 0x1234u64.to_le_bytes();
        assert_eq!(render(kind::FAULT, &at, 512).unwrap(), b"0x1234");
        assert_eq!(render(kind::FAULT, b"abc", 512), None);
        let mut v = 257i64.to_le_bytes().to_vec();
        v.extend((-2i64).to_le_bytes());
        assert_eq!(render(kind::RETSTR, &v, 512).unwrap(), b"-2 (ENOENT)");
        assert_eq!(render(kind::RETSTR, &v[..8], 512), None);
        assert_eq!(render(9, b"x", 512), None);
    }
}
