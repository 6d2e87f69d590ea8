//! The shape of the shared region: what lives where, as both sides (the
//! compiled in-process code and the tracer) agree on it.
//!
//! ```text
//! base ──────────── code (r-x in the program, rwx in the tracer)
//!   common entry + the syscall gadget (`code::common`)
//!   in-process runtime and handlers (Cranelift, `utap_codegen::inproc`)
//! base + code_len ─ data (rw- in both)
//!   Header            flags and first error
//!   long slots        the script's long scalar globals
//!   tables            one open-addressing table per array of longs or
//!                     statistic (a scalar statistic is a table of one
//!                     slot with no key)
//!   jit data          Cranelift's writable data objects
//!   blocks            per-thread blocks (ctx, re-entry flag, stack)
//!   ring heads        one `RingHead` per block: its output ring's state
//!   rings             one output ring per block (`printf` records)
//!   string rings      one per block, if handlers read strings from the
//!                     program (`super::strings`)
//! ```
//!
//! Everything in the data part is written by the program's threads: the
//! tracer reads it as untrusted input (bounds checked, never followed as a
//! pointer).

use std::mem::{offset_of, size_of};

use crate::script::context::HandlerContext;

/// Bytes of the code part (handlers of a `syscall.*` script, shared by
/// preset, take well under a megabyte).
pub const CODE_LEN: u64 = 4 << 20;
/// The common entry and gadget at the start of the code part, and the
/// function common entry (`function::common`) at `FCOMMON_AT` in it.
pub const COMMON_LEN: u64 = 4096;
pub const FCOMMON_AT: u64 = 2048;
/// The return stub (`function::ret_stub`), where hijacked returns land.
pub const RET_AT: u64 = 3072;
/// The handlers' one syscall helper (`code::read_helper`), at the end of
/// the common page.
pub const HELPER_AT: u64 = COMMON_LEN - 32;
/// The hook lists of function sites, at the end of the code part (the
/// program cannot write them; the tracer adds lists as sites are patched).
/// `function("*")` resolves to a point per function, and each point's
/// hooks make a list of their own: python3 with every libc function's
/// entry and return probed made 18,700 (40 bytes each, 56 with site
/// words).
pub const LISTS_LEN: u64 = 2 << 20;
/// Per-thread blocks, and the size of one (its stack is the rest).
pub const BLOCKS: u64 = 1024;
pub const BLOCK_LEN: u64 = 64 << 10;
/// Blocks kept for the tracer's own runs of in-process handlers (one per
/// tracer thread) at the end of the pool.
pub const TRACER_BLOCKS: u64 = 64;
/// Bytes for Cranelift's writable data objects.
pub const JIT_DATA_LEN: u64 = 1 << 20;

/// Flags and the first error, at the start of the data part.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Header {
    /// No handler starts any more when [`stopped`] says so: the tracer
    /// sets [`STOPPED`] (the script ended or failed); the low half is a
    /// robust futex word holding the tracing thread's id
    /// (`super::lifeline`), which the kernel turns to `FUTEX_OWNER_DIED`
    /// when that thread dies, so a dead session's hooks stop too.
    pub stop: u64,
    /// The first runtime error: its kind (`script::abi::RAISE_*`, or
    /// [`RAISE_ARRAY_FULL`]), location and probe (in-process indexes).
    pub error_kind: u64,
    pub error_location: u64,
    pub error_probe: u64,
    /// Room for the stop word's entry in the tracing thread's robust
    /// list (where the list's `futex_offset` puts it: 32 bytes past the
    /// word with glibc); a pointer into the tracer's own mapping, never
    /// followed by us.
    pub stop_links: [u64; 4],
    /// The global of an array overflow.
    pub error_global: u64,
    /// Hits skipped because the thread was already in a handler (a signal
    /// handler's syscall): SystemTap's skipped probes.
    pub skipped: u64,
    /// Array operations that gave up on a slot another thread held too
    /// long.
    pub contended: u64,
    /// The next output record's sequence number: the tracer prints the
    /// records of every ring in this order.
    pub seq: u64,
    /// The handlers' clock (`super::clock`).
    pub clock: super::clock::Clock,
}

/// An array insertion found no room: "Array overflow".
pub const RAISE_ARRAY_FULL: i64 = 100;
/// A string read in the program faulted (`super::strings`); the address
/// is in the header's `error_global`.
pub const RAISE_USER_FAULT: i64 = 101;
/// A target variable's read in the program faulted (`super::plans`); the
/// address is in the header's `error_global`.
pub const RAISE_READ_FAULT: i64 = 102;

/// The value the tracer stores in [`Header::stop`] to stop every handler.
pub const STOPPED: u64 = 1 << 32;
/// The bits of [`Header::stop`] that stop the handlers, 30 and up: the
/// tracer's flag, and `FUTEX_OWNER_DIED` (and `FUTEX_WAITERS`) in the
/// robust word (a live thread id has neither: ids fit `FUTEX_TID_MASK`,
/// 30 bits).
pub const STOP_MASK: u64 = !0x3fff_ffff;

/// Whether handlers stop at a stop word of `v`.
pub fn stopped(v: u64) -> bool {
    v & STOP_MASK != 0
}

/// One thread's block; `%gs` points at it in the program, so the common
/// entry finds it without a syscall.
#[repr(C)]
pub struct Block {
    /// The context compiled handlers get (`HandlerContext`'s layout).
    pub ctx: HandlerContext,
    /// The block's own address (`%gs:SELF`).
    pub self_ptr: u64,
    /// Nonzero while a handler runs on this thread.
    pub busy: u64,
    /// The program's rsp while the handler runs on the block's stack.
    pub saved_rsp: u64,
    /// Hits served in process on this thread (`-v`).
    pub hits: u64,
    /// Hits skipped on this thread (re-entry).
    pub skipped: u64,
    /// The `%fs` base of the thread the block is for (0: taken at its
    /// first hit). A thread created after the tracer died inherits its
    /// creator's `%gs` but not its `%fs`: it runs no hook, and never
    /// touches its creator's return frames.
    pub owner_fs: u64,
    /// The thread's shadow stack of return frames, in the process's own
    /// private memory (a fork child gets a copy with its stack): see
    /// [`Shadow`].
    pub shadow: u64,
    /// Returns not probed because the shadow stack was full.
    pub missed: u64,
    /// The thread's Syscall User Dispatch selector (`dispatch`): one of
    /// its bytes is what the kernel reads; the word is a robust futex
    /// word of the tracing thread, so that its death turns the byte to
    /// ALLOW (0) before the kernel lets the threads go.
    pub selector: u32,
    pub selector_pad: u32,
    /// Room for this block's entry in the tracing thread's robust futex
    /// list: the entry sits where the list glibc registered puts it
    /// (`selector` minus the list's `futex_offset`, 32 bytes past the word
    /// with glibc); a pointer into the tracer's own mapping, never
    /// followed by us.
    pub robust_links: [u64; 4],
    /// The thread's `execname()`: a string handle the tracer sets when it
    /// gives the block (and the thread's first stop after an exec gives a
    /// new one), interned by [`super::image::Names`].
    pub comm: i64,
    /// The thread's own copies of the long globals handlers only add to
    /// (`n++` on a hot path): no cache line every thread writes; the fold
    /// adds them to the shared slot. Last, so a block given to a new
    /// thread keeps what the old one counted.
    pub counters: [i64; COUNTERS],
    /// The thread's own copies of the scalar statistics (see
    /// [`stat_copies`]), kept as their slots are ([`stat`]; a copy with
    /// count 0 is empty, whatever its other words hold).
    pub stats: [i64; STAT_COPY_WORDS],
    /// The program's registers at a function entry's hit, in DWARF order
    /// (rax rdx rcx rbx rsi rdi rbp rsp r8..r15, then 0 for rip): stored
    /// by the function common entry only in an image whose handlers read
    /// target variables (`super::plans`).
    pub regs: [u64; 17],
    /// The load bias of the hit's module and its function's name handle
    /// (the hook list's site words, `function::Site`), stored before the
    /// hooks run in an image whose handlers read them.
    pub bias: u64,
    pub site_func: i64,
    /// Bytes ever written to the block's string ring (`super::strings`):
    /// never reset, so a handle the tracer has not read yet can be told
    /// from one overwritten since, even across threads given the block.
    pub str_head: u64,
}

/// Long globals counted per thread at most (the rest: atomic adds on the
/// shared slot).
pub const COUNTERS: usize = 32;
/// Words of a block for per-thread copies of scalar statistics (a
/// statistic with a log histogram takes 132).
pub const STAT_COPY_WORDS: usize = 512;

/// The scalar statistics of `tables` each thread keeps a copy of in its
/// block, as `<<<` in the program and the fold agree on them: (global,
/// first word in `Block::stats`, words), in table order while they fit.
/// Threads adding to one statistic at once then write no common cache
/// line (its slot's atomics cost four threads more than one thread's
/// throughput); the rest keep the shared slot.
pub fn stat_copies(tables: &[TableSpec]) -> Vec<(u32, u64, u64)> {
    let mut next = 0;
    let mut out = Vec::new();
    for t in tables.iter().filter(|t| t.stat && t.arity == 0) {
        if next + t.values <= STAT_COPY_WORDS as u64 {
            out.push((t.global, next, t.values));
            next += t.values;
        }
    }
    out
}

pub const BLOCK_SELF: u64 = offset_of!(Block, self_ptr) as u64;
pub const BLOCK_BUSY: u64 = offset_of!(Block, busy) as u64;
pub const BLOCK_SAVED_RSP: u64 = offset_of!(Block, saved_rsp) as u64;
pub const BLOCK_HITS: u64 = offset_of!(Block, hits) as u64;
pub const BLOCK_SKIPPED: u64 = offset_of!(Block, skipped) as u64;
pub const BLOCK_OWNER_FS: u64 = offset_of!(Block, owner_fs) as u64;
pub const BLOCK_SHADOW: u64 = offset_of!(Block, shadow) as u64;
pub const BLOCK_MISSED: u64 = offset_of!(Block, missed) as u64;
pub const BLOCK_SELECTOR: u64 = offset_of!(Block, selector) as u64;
pub const BLOCK_ROBUST_LINKS: u64 = offset_of!(Block, robust_links) as u64;
pub const BLOCK_COMM: u64 = offset_of!(Block, comm) as u64;
pub const BLOCK_COUNTERS: u64 = offset_of!(Block, counters) as u64;
pub const BLOCK_STATS: u64 = offset_of!(Block, stats) as u64;
pub const BLOCK_STR_HEAD: u64 = offset_of!(Block, str_head) as u64;
pub const BLOCK_REGS: u64 = offset_of!(Block, regs) as u64;
pub const BLOCK_BIAS: u64 = offset_of!(Block, bias) as u64;
pub const BLOCK_SITE_FUNC: u64 = offset_of!(Block, site_func) as u64;
// The handlers' stack (the rest of the block) keeps at least 32 KiB.
const _: () = assert!(size_of::<Block>() as u64 + (32 << 10) <= BLOCK_STACK_TOP);

/// A thread's shadow stack of hijacked returns (function return probes
/// in process): `depth`, then `depth` frames, innermost last. It lives in
/// a private anonymous mapping of each process at [`shadow_base`], one
/// [`SHADOW_LEN`] per block index, so a fork child, whose stack is a
/// copy, has a copy of the frames that go with it.
#[repr(C)]
pub struct Shadow {
    pub depth: u64,
    pub pad: u64,
    pub frames: [ShadowFrame; SHADOW_FRAMES as usize],
}

/// One hijacked return: the stack slot that held the return address, the
/// address, the site's return hook list, and the entry's arguments
/// (`$argN` in a return probe are the entry's).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShadowFrame {
    pub slot: u64,
    pub orig: u64,
    pub list: u64,
    pub args: [u64; 6],
    pub pad: u64,
}

/// Frames a shadow stack holds: deeper calls are not hijacked (their
/// returns are missed and counted, as the kernel's uretprobes miss past
/// their depth).
pub const SHADOW_FRAMES: u64 = 200;
pub const SHADOW_FRAME_LEN: u64 = size_of::<ShadowFrame>() as u64;
/// Bytes per thread of the shadow area (a page multiple).
pub const SHADOW_LEN: u64 = 16 << 10;
const _: () = assert!(size_of::<Shadow>() as u64 <= SHADOW_LEN && SHADOW_FRAME_LEN == 80);

/// Where the shadow area of a region at `base` of `len` bytes lies in every
/// program: just past the region.
pub fn shadow_base(base: u64, len: u64) -> u64 {
    base + len
}

/// Bytes of the shadow area (program threads' blocks only).
pub const SHADOW_AREA_LEN: u64 = BLOCKS * SHADOW_LEN;
/// The top of the block's stack, 16-byte aligned.
pub const BLOCK_STACK_TOP: u64 = BLOCK_LEN - 64;

/// Output ring of one block: `RING_WORDS` words the block's thread
/// writes records into (`printf`, `print`: see [`record`]), the tracer
/// reads and formats. Single producer (the thread owning the block, or
/// a tracer thread for its own block), single consumer (the tracer). It
/// outlives the block's threads: a block given to a new thread keeps its
/// ring and the records not yet read.
pub const RING_WORDS: u64 = 16384;
pub const RING_LEN: u64 = RING_WORDS * 8;

/// The state of one output ring, apart from its words (so that the
/// tracer's scan of every ring touches one small array).
#[repr(C)]
#[derive(Debug, Default)]
pub struct RingHead {
    /// Words written, ever (the producer publishes a record by storing
    /// it, with release order, after the record's words).
    pub head: u64,
    /// Words read, ever (written by the tracer only).
    pub tail: u64,
    /// Records the producer found no room for.
    pub dropped: u64,
    pub pad: [u64; 5],
}

pub const RING_HEAD_LEN: u64 = size_of::<RingHead>() as u64;
pub const RING_HEAD: u64 = offset_of!(RingHead, head) as u64;
pub const RING_TAIL: u64 = offset_of!(RingHead, tail) as u64;
pub const RING_DROPPED: u64 = offset_of!(RingHead, dropped) as u64;

/// Output records in a ring: a header word, the sequence number, then
/// the words of the kind.
///
/// ```text
/// header: kind (bits 0..8) | words in the record (8..24) | fmt (32..64)
/// PRINTF: header, seq, args...                  (args: longs or literal handles)
/// PRINT:  header, seq, flags, string mask, delimiter, args...
/// ```
pub mod record {
    pub const PRINTF: u64 = 1;
    pub const PRINT: u64 = 2;
    /// Words before a PRINTF's arguments, and a PRINT's.
    pub const PRINTF_FIXED: u64 = 2;
    pub const PRINT_FIXED: u64 = 5;
    /// Arguments a record carries at most (the compiler keeps calls with
    /// more in the tracer).
    pub const MAX_ARGS: u64 = 32;

    pub fn header(kind: u64, words: u64, fmt: u64) -> u64 {
        kind | (words << 8) | (fmt << 32)
    }
}

/// Where an array of longs or a statistic lives in the data part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSpec {
    pub global: u32,
    /// Value words of a slot: 1 for a long, [`stat::FIXED`] plus the
    /// histogram's buckets for a statistic.
    pub values: u64,
    /// A statistic (its value words are laid out as [`stat`] says).
    pub stat: bool,
    /// Offset from the data part's start.
    pub offset: u64,
    /// Slots (a power of two, at least twice `max_entries`).
    pub capacity: u64,
    /// Key columns.
    pub arity: u64,
    /// The map's limit (declared size or MAXMAPENTRIES).
    pub max_entries: u64,
    /// Offset of the live-entry counter; the next insertion's number
    /// follows it.
    pub count_offset: u64,
    /// Offset of one word per slot: the number of the insertion that made
    /// it live, so the fold keeps the order the tracer's maps keep (and
    /// `foreach` breaks ties in it on both routes).
    pub order_offset: u64,
}

impl TableSpec {
    /// Offset of the insertion counter.
    pub fn order_counter(&self) -> u64 {
        self.count_offset + 8
    }

    /// Bytes of one slot: tag, keys, value words.
    pub fn slot_len(&self) -> u64 {
        8 * (1 + self.arity + self.values)
    }

    /// Byte offset of the slot's first value word.
    pub fn value_at(&self) -> u64 {
        8 * (1 + self.arity)
    }
}

/// The value words of a statistic's slot, added to by every thread with
/// atomics (SystemTap keeps a copy per CPU; one shared copy costs an
/// atomic add per word here, see docs/internals): the tracer turns them
/// into the script's statistic when it folds the region back.
pub mod stat {
    pub const COUNT: u64 = 0;
    pub const SUM: u64 = 1;
    /// Kept with compare-and-swap loops; a new slot starts them at
    /// `i64::MAX` and `i64::MIN` (they mean nothing while COUNT is 0).
    pub const MIN: u64 = 2;
    pub const MAX: u64 = 3;
    /// The histogram's bucket counts follow.
    pub const FIXED: u64 = 4;
}

/// What the data part holds for one table: its global, key columns,
/// limit (declared size or MAXMAPENTRIES; 1 for a scalar statistic),
/// value words and whether it is a statistic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableShape {
    pub global: u32,
    pub arity: u64,
    pub max_entries: u64,
    pub values: u64,
    pub stat: bool,
}

impl TableShape {
    /// An array of longs.
    pub fn longs(global: u32, arity: u64, max_entries: u64) -> TableShape {
        TableShape {
            global,
            arity,
            max_entries,
            values: 1,
            stat: false,
        }
    }

    /// A statistic keeping `buckets` histogram buckets (`arity` 0: a
    /// scalar statistic, one slot).
    pub fn stat(global: u32, arity: u64, max_entries: u64, buckets: u64) -> TableShape {
        TableShape {
            global,
            arity,
            max_entries,
            values: stat::FIXED + buckets,
            stat: true,
        }
    }
}

/// Slot tags of a table.
pub mod tag {
    pub const EMPTY: u64 = 0;
    /// Claimed by a thread writing its keys.
    pub const CLAIMED: u64 = 1;
    pub const LIVE: u64 = 2;
    /// Deleted: the keys stay, a later insertion of them revives it.
    pub const DELETED: u64 = 3;
    /// Being revived.
    pub const REVIVING: u64 = 4;
}

/// Offsets of everything in the data part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataLayout {
    pub longs: u64,
    pub long_slots: u64,
    pub tables: Vec<TableSpec>,
    pub jit_data: u64,
    pub blocks: u64,
    pub ring_heads: u64,
    pub rings: u64,
    /// The blocks' string rings (`super::strings`), if the handlers read
    /// strings from the program (else `len`: none).
    pub strings: u64,
    pub len: u64,
}

fn align(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

impl DataLayout {
    /// Lays out `long_slots` long globals and the tables of `arrays`.
    pub fn new(long_slots: u64, arrays: &[TableShape], strings: bool) -> DataLayout {
        let longs = align(size_of::<Header>() as u64, 64);
        let mut at = align(longs + 8 * long_slots.max(1), 64);
        let tables = arrays
            .iter()
            .map(|shape| {
                let capacity = (2 * shape.max_entries.max(1)).next_power_of_two();
                let count_offset = at;
                let offset = at + 64;
                let mut t = TableSpec {
                    global: shape.global,
                    values: shape.values,
                    stat: shape.stat,
                    offset,
                    capacity,
                    arity: shape.arity,
                    max_entries: shape.max_entries,
                    count_offset,
                    order_offset: 0,
                };
                t.order_offset = offset + capacity * t.slot_len();
                at = align(t.order_offset + 8 * capacity, 64);
                t
            })
            .collect();
        let jit_data = align(at, 4096);
        let blocks = jit_data + JIT_DATA_LEN;
        let ring_heads = blocks + (BLOCKS + TRACER_BLOCKS) * BLOCK_LEN;
        let rings = align(ring_heads + (BLOCKS + TRACER_BLOCKS) * RING_HEAD_LEN, 4096);
        let strings_at = rings + (BLOCKS + TRACER_BLOCKS) * RING_LEN;
        let string_rings = if strings { BLOCKS + TRACER_BLOCKS } else { 0 };
        DataLayout {
            longs,
            long_slots,
            tables,
            jit_data,
            blocks,
            ring_heads,
            rings,
            strings: strings_at,
            len: strings_at + string_rings * super::strings::RING_LEN,
        }
    }

    /// Offset of block `i`'s string ring.
    pub fn string_ring(&self, i: u64) -> u64 {
        self.strings + i * super::strings::RING_LEN
    }

    /// Offsets of block `i`'s ring head and ring words.
    pub fn ring(&self, i: u64) -> (u64, u64) {
        (
            self.ring_heads + i * RING_HEAD_LEN,
            self.rings + i * RING_LEN,
        )
    }

    /// Offset of block `i` (program threads first, then the tracer's).
    pub fn block(&self, i: u64) -> u64 {
        self.blocks + i * BLOCK_LEN
    }
}
