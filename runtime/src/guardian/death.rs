//! The tracing thread's death, told to the guardian before the kernel lets
//! the tracees go. A dying thread's `exit_mm` walks its robust futex list
//! (`set_robust_list(2)`): every word there holding the thread's TID gets
//! `FUTEX_OWNER_DIED`, and a waiter on it is woken. That comes before
//! `exit_notify`, where `exit_ptrace` releases the thread's tracees, so a
//! guardian woken there (at SCHED_FIFO, it preempts the dying thread on
//! its CPU) writes the original bytes back before any thread can run
//! into an `int3` untraced.
//!
//! Neither of the other signals does: the pipe's EOF comes with the last
//! thread of the tracing process, and a `PIDFD_THREAD` pidfd of a
//! thread-group leader (the tracing thread under `-x` is utap's main
//! thread) is readable only once the whole group is gone (measured on
//! 6.18: 500 ms after the leader's exit, when its last thread went).
//!
//! The word lives in the shared journal, so the kernel's wake (always a
//! shared futex) reaches the guardian waiting on its own mapping. Its
//! list entry is linked into the list glibc already registered for the
//! thread (one list per thread), after the head, by the thread itself;
//! the journal is never unmapped, so the entry may stay linked for the
//! process's life: a cleared word is skipped by the kernel.

use std::sync::atomic::{AtomicU32, Ordering};

use super::journal::Journal;

/// Set in a futex word when someone waits on it (the kernel then wakes).
const FUTEX_WAITERS: u32 = 0x8000_0000;
/// The TID bits of a robust futex word.
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// Index of the word's `u64` in `Journal::death` (room on both sides for
/// the list entry, whose place depends on the list's `futex_offset`).
const WORD: usize = 8;

/// `struct robust_list_head` (linux/futex.h).
#[repr(C)]
struct RobustHead {
    next: *mut usize,
    futex_offset: libc::c_long,
    pending: *mut usize,
}

/// The death word (the low half of `death[WORD]`).
pub fn word(j: &Journal) -> &AtomicU32 {
    // SAFETY: an AtomicU64 is 8 bytes, 8-aligned; its low (little-endian)
    // half is a valid, aligned AtomicU32 living as long as the journal.
    unsafe { &*(std::ptr::from_ref(&j.death[WORD]).cast::<AtomicU32>()) }
}

/// Links the journal's death word into the calling thread's robust list,
/// holding its TID: the kernel marks it and wakes the guardian when this
/// thread exits, however it dies. False when the thread has no list
/// (then the pipe alone tells the guardian).
pub fn watch(j: &Journal) -> bool {
    let mut head: *mut RobustHead = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: both are valid out pointers; pid 0 is the calling thread.
    let got = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) };
    if got != 0 || head.is_null() || len != std::mem::size_of::<RobustHead>() {
        return false;
    }
    let w = word(j);
    // SAFETY: the head is this thread's own, registered with the kernel.
    let offset = unsafe { (*head).futex_offset } as isize;
    let entry = (std::ptr::from_ref(w) as isize - offset) as usize;
    let area = j.death.as_ptr() as usize;
    let room = area..area + std::mem::size_of_val(&j.death) - 8;
    if !room.contains(&entry) || !entry.is_multiple_of(8) {
        return false;
    }
    // SAFETY: gettid has no memory effects.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    w.store((tid & FUTEX_TID_MASK) | FUTEX_WAITERS, Ordering::SeqCst);
    let entry = entry as *mut usize;
    // SAFETY: `entry` is inside the journal (checked above), never
    // unmapped; the list is this thread's and only this thread edits it
    // (the kernel reads it at this thread's exit).
    unsafe {
        entry.write_volatile((*head).next as usize);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        std::ptr::addr_of_mut!((*head).next).write_volatile(entry);
    }
    true
}

/// The TID the word watches, 0 for none (never armed, or cleared).
pub fn watched(j: &Journal) -> u32 {
    let v = word(j).load(Ordering::Acquire);
    if v & FUTEX_WAITERS != 0 {
        v & FUTEX_TID_MASK
    } else {
        0
    }
}

/// A clean end: the word no longer holds the TID (the kernel skips it at
/// the thread's exit) and the guardian is woken to see `clean`.
pub fn clear(j: &Journal) {
    let w = word(j);
    w.store(0, Ordering::SeqCst);
    futex(w, libc::FUTEX_WAKE, 1, None);
}

/// Blocks until the word no longer holds `tid` (its thread died or the
/// session ended) or `timeout` passed.
pub fn wait(j: &Journal, tid: u32, timeout: std::time::Duration) {
    let w = word(j);
    let v = w.load(Ordering::Acquire);
    if ended(j, tid) {
        return;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    futex(w, libc::FUTEX_WAIT, v, Some(&ts));
}

/// Whether the word's thread is gone or the word was cleared.
pub fn ended(j: &Journal, tid: u32) -> bool {
    let v = word(j).load(Ordering::Acquire);
    v & FUTEX_TID_MASK != tid || v & FUTEX_WAITERS == 0
}

/// A shared (not process-private) futex call: the kernel's robust-list
/// wake and the guardian's wait meet on the memfd's page.
fn futex(w: &AtomicU32, op: i32, val: u32, ts: Option<&libc::timespec>) {
    let ts = ts.map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: `w` is a valid aligned word; `ts` null or valid.
    unsafe {
        libc::syscall(libc::SYS_futex, w.as_ptr(), op, val, ts, 0usize, 0u32);
    }
}
