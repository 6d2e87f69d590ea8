//! Syscall User Dispatch (SUD) for attached programs (`-x`): how their
//! syscall sites are found without a seccomp filter, which could never be
//! taken out at detach. Here: the selectors and the robust list that
//! keeps them; the arming and the stops are the utrace core's
//! (`utrace/dispatch.rs`).
//!
//! Each thread is armed by the tracer (`PTRACE_SET_SYSCALL_USER_DISPATCH_
//! CONFIG`, Linux 6.4): a syscall made outside the region's code part,
//! while the thread's selector byte says BLOCK, is not made; the kernel
//! raises SIGSYS instead, which the tracer sees as a signal stop. The
//! call is let through at once (selector ALLOW, made again under
//! `PTRACE_SYSCALL`, whose entry and exit stops the tracer route serves),
//! and at its exit stop the site is patched if it can be (the stub's
//! gadget, in the allowed range, makes the call from then on).
//!
//! Invariants:
//! * **utap's death turns every selector to ALLOW before the kernel lets
//!   the threads go.** Each selector is a byte of a futex word on the
//!   tracing thread's robust list (the list glibc registered, where the
//!   guardian's death word is too), holding that thread's id; the kernel
//!   marks such words (owner died, id cleared) in the thread's exit,
//!   before it releases the thread's tracees (`exit_mm` precedes
//!   `exit_notify`). The byte read is the one of the id that equals 1
//!   (BLOCK), so it reads 0 (ALLOW) after. A tracing thread whose id has
//!   no such byte never arms SUD (the host makes its id fit, `host::
//!   split`).
//! * **No thread waits in a SIGSYS stop.** The kernel delivers a signal
//!   stop's signal when the tracer dies, and SIGSYS kills: the stop is
//!   left at once (a few register reads and writes), and the slow work
//!   (holding the threads, writing text) is done at the exit stop, where
//!   utap's death harms nothing. What is left is those few microseconds.
//! * **Every ending disarms every thread** (the quiesce, threads held).
//! * **A program that handles or ignores SIGSYS is never armed** (a
//!   handler would see our SIGSYS if utap died in the stop; an ignored
//!   one is forced through by the kernel).
//! * Not inherited by new threads, fork children or exec'd images
//!   (checked: a SUD-armed thread's clone or fork child does not trap):
//!   new threads are armed at their first stop; vfork children and
//!   exec'd programs stay on `PTRACE_SYSCALL`.

use std::sync::Mutex;

use super::layout::{self, BLOCK_ROBUST_LINKS, BLOCK_SELECTOR};
use super::robust;
use crate::tid::Tid;

/// Whether SUD is wanted: opt-in (`UTAP_SUD=1`) until its open faults
/// are fixed (a killed session can still take the program with it, and a
/// session's region is sometimes left mapped at the end); without it,
/// `-x` syscall probes stay on `PTRACE_SYSCALL`, as before.
pub fn enabled() -> bool {
    std::env::var("UTAP_SUD").is_ok_and(|v| v == "1")
}

/// The tracing thread's id as a selector word: the value that means
/// BLOCK, and which byte of the word the kernel is to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keeper {
    pub value: u32,
    pub byte: u64,
}

impl Keeper {
    /// The keeper a thread with id `tid` can be: a byte of the id (not
    /// the top one, which the kernel sets on death) equal to 1.
    pub fn of(tid: u32) -> Option<Keeper> {
        (0..3)
            .find(|k| (tid >> (8 * k)) & 0xff == 1)
            .map(|k| Keeper {
                value: tid,
                byte: k as u64,
            })
    }
}

/// The blocks linked into the tracing thread's robust list.
struct Linked {
    tid: u32,
    keeper: Keeper,
    head: u64,
    /// The first block's entry and the last one's (whose next is what
    /// followed the head before).
    first: u64,
    last: u64,
}

static LINKED: Mutex<Option<Linked>> = Mutex::new(None);

/// Links every block's selector word of the region whose blocks start at
/// `blocks` (our mapping) into the calling thread's robust list, after
/// its head. The list is the one glibc registered (one per thread; the
/// guardian's death word is on it too), so its `futex_offset` says where
/// each entry goes. Returns the keeper, or None if this thread cannot be
/// one (its id, a list that does not fit the blocks' room, another
/// thread linked first): SUD is then never armed.
pub fn register(blocks: u64) -> Option<Keeper> {
    // SAFETY: gettid has no memory effects.
    let me = unsafe { libc::gettid() } as u32;
    let mut linked = LINKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = linked.as_ref() {
        return (l.tid == me).then_some(l.keeper);
    }
    let keeper = Keeper::of(me)?;
    let head = robust::own_head()?;
    let at = entry_offset(robust::futex_offset(head))?;
    let entry = |i: u64| blocks + i * layout::BLOCK_LEN + at;
    robust::link(head, (0..layout::BLOCKS).map(entry));
    *linked = Some(Linked {
        tid: me,
        keeper,
        head,
        first: entry(0),
        last: entry(layout::BLOCKS - 1),
    });
    Some(keeper)
}

/// Takes the blocks out of the robust list again (before the region is
/// unmapped: the kernel would stop its walk at an unreadable entry, and
/// miss the guardian's word behind them).
pub fn unregister() {
    let mut linked = LINKED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(l) = linked.take() else {
        return;
    };
    robust::unlink(l.head, l.first, l.last);
}

/// Where in a block the entry of a list with `futex_offset` goes (the
/// entry plus the offset is the selector word): inside the block's room
/// for it, 8-aligned.
fn entry_offset(futex_offset: i64) -> Option<u64> {
    let at = (BLOCK_SELECTOR as i64).checked_sub(futex_offset)?;
    let room = BLOCK_ROBUST_LINKS as i64..BLOCK_ROBUST_LINKS as i64 + 32;
    (room.contains(&at) && at % 8 == 0).then_some(at as u64)
}

/// Sets block `block`'s selector (our mapping) to BLOCK or ALLOW.
pub fn set_selector(block: u64, keeper: Keeper, blocked: bool) {
    let v = if blocked { keeper.value } else { 0 };
    // SAFETY: a block of our mapping of the region.
    unsafe { std::ptr::write_volatile((block + BLOCK_SELECTOR) as *mut u32, v) };
}

/// Whether process `pid` catches or ignores SIGSYS (never armed: the
/// kernel would reset that disposition when it forces SUD's SIGSYS).
pub fn handles_sigsys(pid: Tid) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", pid.0)) else {
        return true;
    };
    let bit = 1u64 << (libc::SIGSYS - 1);
    status.lines().any(|l| {
        let mask = |name: &str| {
            l.strip_prefix(name)
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        };
        [mask("SigCgt:"), mask("SigIgn:")]
            .into_iter()
            .flatten()
            .any(|m| m & bit != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keeper_reads_the_byte_that_is_one() {
        assert_eq!(Keeper::of(0x0301).map(|k| k.byte), Some(0));
        assert_eq!(Keeper::of(0x0105).map(|k| k.byte), Some(1));
        assert_eq!(Keeper::of(0x01_0203).map(|k| k.byte), Some(2));
        assert_eq!(Keeper::of(0x0203), None);
    }

    #[test]
    fn glibc_lists_put_the_entry_in_the_blocks_room() {
        // glibc: the mutex's lock word minus its list's `next` field.
        assert_eq!(entry_offset(-32), Some(BLOCK_SELECTOR + 32));
        assert_eq!(entry_offset(0), None);
        assert_eq!(entry_offset(-33), None);
        assert_eq!(entry_offset(-48), None);
    }
}
