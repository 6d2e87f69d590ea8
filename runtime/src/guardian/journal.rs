//! The journal the tracing process keeps for its guardian: what it changed
//! in traced programs that only it could undo, in a memfd mapped shared
//! with the guardian (`super`). Entries are written before each change and
//! cleared after it is undone, with plain atomic stores (no syscall: this
//! runs on the tracer's event path, from any shard thread). The layout is
//! fixed and versioned (`#[repr(C)]`): the guardian maps the same file and
//! reads it only once the tracing process is dead. A full table is not an
//! error: the change goes unjournaled and `overflow` counts it (said by -v).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

/// "UTGJ": a journal of this layout.
pub const MAGIC: u32 = 0x4a47_5455;
pub const VERSION: u32 = 2;
pub const TEXTS: usize = 4096;
pub const SEMAPHORES: usize = 256;
pub const THREADS: usize = 256;

/// A slot's state: free, being written, in force.
const FREE: u32 = 0;
const BUSY: u32 = 1;
const LIVE: u32 = 2;

/// Bytes written over a program's text (an `int3`, a `jmp .`, a
/// `syscall; int3`, a return stub's `int3`), with what was there.
#[repr(C)]
pub struct Text {
    state: AtomicU32,
    pub pid: AtomicI32,
    pub start: AtomicU64,
    pub addr: AtomicU64,
    pub len: AtomicU32,
    pub orig: [AtomicU32; 4],
}

/// A USDT semaphore utap incremented `count` times.
#[repr(C)]
pub struct Semaphore {
    state: AtomicU32,
    pub pid: AtomicI32,
    pub start: AtomicU64,
    pub addr: AtomicU64,
    pub count: AtomicU32,
}

/// A thread utap moved to `site` (parked for a handover, running an
/// injected syscall) whose own registers are `regs`.
#[repr(C)]
pub struct Thread {
    state: AtomicU32,
    pub pid: AtomicI32,
    pub tid: AtomicI32,
    pub start: AtomicU64,
    pub site: AtomicU64,
    pub len: AtomicU32,
    pub regs: [AtomicU64; REGS_WORDS],
}

pub const REGS_WORDS: usize = std::mem::size_of::<libc::user_regs_struct>() / 8;

#[repr(C)]
pub struct Journal {
    pub magic: AtomicU32,
    pub version: AtomicU32,
    /// Set by the tracing process once every change is undone.
    pub clean: AtomicU32,
    /// Changes that found no free slot.
    pub overflow: AtomicU32,
    /// The guardian's pid, written by the guardian itself.
    pub guardian: AtomicI32,
    _align: AtomicU32,
    /// Room for the tracing thread's robust futex word and the list entry
    /// the kernel finds it by (`super::death`).
    pub death: [AtomicU64; 16],
    pub texts: [Text; TEXTS],
    pub semaphores: [Semaphore; SEMAPHORES],
    pub threads: [Thread; THREADS],
}

pub const SIZE: usize = std::mem::size_of::<Journal>();

/// Claims a free slot of `slots` (`state` of each given by `st`).
fn claim<T>(slots: &[T], st: impl Fn(&T) -> &AtomicU32) -> Option<&T> {
    slots.iter().find(|s| {
        st(s)
            .compare_exchange(FREE, BUSY, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })
}

impl Journal {
    /// Journals `orig`, the bytes at `addr` about to be overwritten; an
    /// address already journaled keeps its first (truly original) bytes.
    pub fn text_written(&self, pid: i32, start: u64, addr: u64, orig: &[u8]) {
        if orig.len() > 16 || self.text_at(pid, addr).is_some() {
            return;
        }
        let Some(t) = claim(&self.texts, |t| &t.state) else {
            self.overflow.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut words = [0u8; 16];
        words[..orig.len()].copy_from_slice(orig);
        for (w, c) in t.orig.iter().zip(words.chunks_exact(4)) {
            w.store(
                u32::from_le_bytes(c.try_into().unwrap_or_default()),
                Ordering::Relaxed,
            );
        }
        t.pid.store(pid, Ordering::Relaxed);
        t.start.store(start, Ordering::Relaxed);
        t.addr.store(addr, Ordering::Relaxed);
        t.len.store(orig.len() as u32, Ordering::Relaxed);
        t.state.store(LIVE, Ordering::Release);
    }

    fn text_at(&self, pid: i32, addr: u64) -> Option<&Text> {
        self.live_texts().find(|t| {
            t.pid.load(Ordering::Relaxed) == pid && t.addr.load(Ordering::Relaxed) == addr
        })
    }

    /// The original bytes at `addr` are back.
    pub fn text_restored(&self, pid: i32, addr: u64) {
        if let Some(t) = self.text_at(pid, addr) {
            t.state.store(FREE, Ordering::Release);
        }
    }

    /// Adds `delta` to the count of the semaphore at `addr`.
    pub fn semaphore(&self, pid: i32, start: u64, addr: u64, delta: i32) {
        let found = self.semaphores.iter().find(|s| {
            s.state.load(Ordering::Acquire) == LIVE
                && s.pid.load(Ordering::Relaxed) == pid
                && s.addr.load(Ordering::Relaxed) == addr
        });
        if let Some(s) = found {
            let n = (s.count.load(Ordering::Relaxed) as i64 + i64::from(delta)).max(0) as u32;
            s.count.store(n, Ordering::Relaxed);
            if n == 0 {
                s.state.store(FREE, Ordering::Release);
            }
            return;
        }
        if delta <= 0 {
            return;
        }
        let Some(s) = claim(&self.semaphores, |s| &s.state) else {
            self.overflow.fetch_add(1, Ordering::Relaxed);
            return;
        };
        s.pid.store(pid, Ordering::Relaxed);
        s.start.store(start, Ordering::Relaxed);
        s.addr.store(addr, Ordering::Relaxed);
        s.count.store(delta as u32, Ordering::Relaxed);
        s.state.store(LIVE, Ordering::Release);
    }

    /// Thread `tid` is about to be moved to `site..site+len`; `regs` put
    /// it back where it was.
    pub fn thread_moved(
        &self,
        pid: i32,
        start: u64,
        tid: i32,
        site: u64,
        len: u32,
        regs: &libc::user_regs_struct,
    ) {
        self.thread_back(tid);
        let Some(t) = claim(&self.threads, |t| &t.state) else {
            self.overflow.fetch_add(1, Ordering::Relaxed);
            return;
        };
        for (w, v) in t.regs.iter().zip(regs_words(regs)) {
            w.store(v, Ordering::Relaxed);
        }
        t.pid.store(pid, Ordering::Relaxed);
        t.tid.store(tid, Ordering::Relaxed);
        t.start.store(start, Ordering::Relaxed);
        t.site.store(site, Ordering::Relaxed);
        t.len.store(len, Ordering::Relaxed);
        t.state.store(LIVE, Ordering::Release);
    }

    /// Thread `tid` has its own registers back.
    pub fn thread_back(&self, tid: i32) {
        for t in self.live_threads() {
            if t.tid.load(Ordering::Relaxed) == tid {
                t.state.store(FREE, Ordering::Release);
            }
        }
    }

    /// Process `pid` exec'd or ended: nothing of ours is left in it.
    pub fn forget(&self, pid: i32) {
        for t in self
            .live_texts()
            .filter(|t| t.pid.load(Ordering::Relaxed) == pid)
        {
            t.state.store(FREE, Ordering::Release);
        }
        for s in self
            .live_semaphores()
            .filter(|s| s.pid.load(Ordering::Relaxed) == pid)
        {
            s.state.store(FREE, Ordering::Release);
        }
        for t in self
            .live_threads()
            .filter(|t| t.pid.load(Ordering::Relaxed) == pid)
        {
            t.state.store(FREE, Ordering::Release);
        }
    }

    pub fn live_texts(&self) -> impl Iterator<Item = &Text> {
        self.texts
            .iter()
            .filter(|t| t.state.load(Ordering::Acquire) == LIVE)
    }

    pub fn live_semaphores(&self) -> impl Iterator<Item = &Semaphore> {
        self.semaphores
            .iter()
            .filter(|s| s.state.load(Ordering::Acquire) == LIVE)
    }

    pub fn live_threads(&self) -> impl Iterator<Item = &Thread> {
        self.threads
            .iter()
            .filter(|t| t.state.load(Ordering::Acquire) == LIVE)
    }

    /// Entries in force.
    pub fn live(&self) -> usize {
        self.live_texts().count() + self.live_semaphores().count() + self.live_threads().count()
    }
}

impl Text {
    /// The original bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let mut b: Vec<u8> = self
            .orig
            .iter()
            .flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes())
            .collect();
        b.truncate(self.len.load(Ordering::Relaxed).min(16) as usize);
        b
    }
}

impl Thread {
    /// The thread's own registers.
    pub fn saved(&self) -> libc::user_regs_struct {
        let mut words = [0u64; REGS_WORDS];
        for (w, v) in words.iter_mut().zip(&self.regs) {
            *w = v.load(Ordering::Relaxed);
        }
        // SAFETY: user_regs_struct is REGS_WORDS u64s, any bits valid.
        unsafe { std::mem::transmute::<[u64; REGS_WORDS], libc::user_regs_struct>(words) }
    }
}

fn regs_words(regs: &libc::user_regs_struct) -> [u64; REGS_WORDS] {
    // SAFETY: user_regs_struct is REGS_WORDS u64s.
    unsafe { std::mem::transmute::<libc::user_regs_struct, [u64; REGS_WORDS]>(*regs) }
}
