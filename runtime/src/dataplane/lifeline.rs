//! The session's stop word on the tracing thread's robust futex list: if
//! utap dies, the kernel marks the word (`FUTEX_OWNER_DIED`) before it
//! lets the program's threads go, and from then on every hook in the
//! program sees the stop flag up and returns at once. A dead session's
//! patched sites then cost a jump and a test, not a handler (a forking
//! program ran 80 times slower with two processes racing for one
//! block's hooks after a SIGKILL), and nothing of it writes the region.
//!
//! The word is the low half of `Header::stop` (`layout::stopped`); it
//! holds the tracing thread's id from `link` until the tracer sets
//! `STOPPED` (the id is gone then, and the kernel skips the word).

use std::sync::Mutex;

use super::layout::Header;
use super::robust;

/// The header whose stop word is linked, and the list it is on.
struct Linked {
    head: u64,
    entry: u64,
}

static LINKED: Mutex<Option<Linked>> = Mutex::new(None);

/// Links the stop word of the region header at `header` (our mapping)
/// into the calling thread's robust list and writes the thread's id into
/// it. The calling thread must be the one whose death ends the session
/// (the tracing thread). False if it cannot (no list, a `futex_offset`
/// that does not put the entry in the header's room, a word already
/// linked): the hooks then run on after utap's death, as before.
pub fn link(header: u64) -> bool {
    let mut linked = LINKED.lock().unwrap_or_else(|e| e.into_inner());
    if linked.is_some() {
        return false;
    }
    let Some(head) = robust::own_head() else {
        return false;
    };
    let Some(at) = entry_offset(robust::futex_offset(head)) else {
        return false;
    };
    // SAFETY: gettid has no memory effects.
    let me = unsafe { libc::gettid() } as u32;
    let word = (header + std::mem::offset_of!(Header, stop) as u64) as *mut u32;
    // SAFETY: the stop word's low half, in our mapping of the header; the
    // program reads it as part of the whole word.
    unsafe { std::ptr::write_volatile(word, me) };
    let entry = header + at;
    robust::link(head, std::iter::once(entry));
    *linked = Some(Linked { head, entry });
    true
}

/// Takes the stop word out of the list again (before the region is
/// unmapped).
pub fn unlink() {
    let mut linked = LINKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = linked.take() {
        robust::unlink(l.head, l.entry, l.entry);
    }
}

/// Where in the header the entry of a list with `futex_offset` goes (the
/// entry plus the offset is the stop word): inside `stop_links`,
/// 8-aligned.
fn entry_offset(futex_offset: i64) -> Option<u64> {
    let stop = std::mem::offset_of!(Header, stop) as i64;
    let room = std::mem::offset_of!(Header, stop_links) as i64;
    let at = stop.checked_sub(futex_offset)?;
    (room..room + 32)
        .contains(&at)
        .then_some(at as u64)
        .filter(|a| a % 8 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::layout;

    #[test]
    fn glibcs_list_puts_the_entry_in_the_headers_room() {
        assert_eq!(entry_offset(-32), Some(32));
        assert_eq!(entry_offset(0), None);
        assert_eq!(entry_offset(-36), None);
        assert_eq!(entry_offset(-64), None);
    }

    #[test]
    fn a_dead_owner_stops_the_handlers_and_a_live_one_does_not() {
        assert!(!layout::stopped(0));
        assert!(!layout::stopped(0x3fff_ffff));
        assert!(layout::stopped(0x4000_0000));
        assert!(layout::stopped(0xc000_0000));
        assert!(layout::stopped(layout::STOPPED));
    }
}
