//! The calling thread's robust futex list (`set_robust_list(2)`), as the
//! data plane uses it: words that hold the tracing thread's id are marked
//! by the kernel (`FUTEX_OWNER_DIED`, the id cleared) when that thread
//! exits, however it dies, before the kernel lets its tracees go. The SUD
//! selectors (`dispatch`) and the session's stop word (`lifeline`) ride
//! on it, so the program stops depending on utap the moment utap dies.
//!
//! Only the owning thread edits its list (utap takes no robust mutex);
//! entries are linked right after the head, as one chain, and taken out
//! again before their memory goes away (the kernel stops its walk at an
//! unreadable entry and would miss the words behind it: the guardian's).

/// `struct robust_list_head`.
#[repr(C)]
struct RobustHead {
    next: u64,
    futex_offset: i64,
    pending: u64,
}

/// The kernel's bound on a robust list walk (`ROBUST_LIST_LIMIT`).
const ROBUST_LIMIT: usize = 2048;

/// The calling thread's registered list head, if any.
pub(super) fn own_head() -> Option<u64> {
    let mut head = 0u64;
    let mut len = 0usize;
    // SAFETY: both are valid out pointers; pid 0 is the calling thread.
    let got = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) };
    (got == 0 && head != 0 && len == std::mem::size_of::<RobustHead>()).then_some(head)
}

/// The list's `futex_offset`: an entry at E watches the word at E plus it.
pub(super) fn futex_offset(head: u64) -> i64 {
    // SAFETY: the head is the calling thread's, registered with the kernel.
    unsafe { (*(head as *const RobustHead)).futex_offset }
}

/// Links `entries` (addresses whose first word is free for the link)
/// after `head`, the calling thread's, in order.
pub(super) fn link(head: u64, entries: impl DoubleEndedIterator<Item = u64>) {
    let next_at = head as *mut u64; // the head's first field
    // SAFETY: the head is this thread's; the entries are ours to write.
    let mut next = unsafe { next_at.read_volatile() };
    for e in entries.rev() {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(e as *mut u64, next) };
        next = e;
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { next_at.write_volatile(next) };
}

/// Takes the chain `first..=last` that [`link`] made out of the list of
/// `head` (wherever it is now: entries may have been put before it).
pub(super) fn unlink(head: u64, first: u64, last: u64) {
    let mut at = head; // `next` is the head's first field
    for _ in 0..ROBUST_LIMIT {
        // SAFETY: `at` is the head or an entry of the thread's list, all
        // in live memory (ours until this returns).
        let next = unsafe { std::ptr::read_volatile(at as *const u64) };
        if next == first {
            // SAFETY: as above.
            unsafe {
                let after = std::ptr::read_volatile(last as *const u64);
                std::ptr::write_volatile(at as *mut u64, after);
            }
            return;
        }
        if next == head || next == 0 {
            return;
        }
        at = next;
    }
}
