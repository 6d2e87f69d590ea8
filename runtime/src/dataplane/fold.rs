//! Moving the in-process globals between the script's state and the
//! region: filled in after the begin probes (so handlers in the program
//! see what `begin` set), folded back once the handlers are stopped for
//! good (before `end` runs), and the first in-process error turned into
//! SystemTap's message.
//!
//! The region's data part is the program's to write: every slot read back
//! is checked (tags, literal handles within the literal pool); a slot that
//! fails is skipped and counted, never trusted.

use super::image::InProcImage;
use super::layout::{
    Header, RAISE_ARRAY_FULL, RAISE_READ_FAULT, RAISE_USER_FAULT, TableSpec, stat, tag,
};
use crate::script::abi::{RAISE_DIVISION_BY_ZERO, RAISE_MAXACTION, RAISE_MAXNESTING};
use crate::values::map::{MapLimit, MapOverflow};
use crate::values::stats::{Stat, StatSpec};

/// The hash the in-process tables use (`utap_codegen::inproc::find`):
/// both sides must agree on it.
pub fn slot_of(keys: &[i64], mask: u64) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &k in keys {
        h = (h.rotate_left(5) ^ k as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    (h ^ (h >> 29)) & mask
}

/// The bytes of literal handle `h` in `literals`, if it is one.
pub(crate) fn literal(literals: &[u8], h: i64) -> Option<&[u8]> {
    let h = h as u64;
    if h >> 63 != 1 {
        return None;
    }
    let start = ((h >> 32) & 0x7fff_ffff) as usize;
    let len = (h & 0xffff_ffff) as usize;
    literals.get(start..start.checked_add(len)?)
}

/// The insertion number of slot `i` (see `TableSpec::order_offset`).
pub(crate) fn slot_order(image: &InProcImage, t: &TableSpec, i: u64) -> u64 {
    let at = (image.region.data_base() + t.order_offset + 8 * i) as *const u64;
    // SAFETY: inside our mapping (layout); any value is a valid u64.
    unsafe { std::ptr::read_volatile(at) }
}

/// A table slot's address in our mapping.
pub(crate) fn slot_ptr(image: &InProcImage, t: &TableSpec, i: u64) -> *mut u64 {
    (image.region.data_base() + t.offset + i * t.slot_len()) as *mut u64
}

/// Inserts one entry of table `t` from the tracer with its value words,
/// as the in-process code would.
pub(crate) fn insert(
    image: &InProcImage,
    t: &TableSpec,
    keys: &[i64],
    values: &[i64],
) -> Result<(), String> {
    let mask = t.capacity - 1;
    let mut i = slot_of(keys, mask);
    for _ in 0..t.capacity {
        let s = slot_ptr(image, t, i);
        // SAFETY: inside our mapping; no program runs handlers yet.
        unsafe {
            if *s == tag::EMPTY {
                for (w, &k) in keys.iter().enumerate() {
                    *s.add(1 + w) = k as u64;
                }
                for (w, &v) in values.iter().enumerate().take(t.values as usize) {
                    *s.add(1 + keys.len() + w) = v as u64;
                }
                *s = tag::LIVE;
                let data = image.region.data_base();
                *((data + t.count_offset) as *mut u64) += 1;
                let order = (data + t.order_counter()) as *mut u64;
                *((data + t.order_offset + 8 * i) as *mut u64) = *order;
                *order += 1;
                return Ok(());
            }
        }
        i = (i + 1) & mask;
    }
    Err("an in-process array is full".into())
}

/// The value words of a statistic's slot (`layout::stat`).
pub(crate) fn stat_words(s: &Stat) -> Vec<i64> {
    let mut w = vec![
        s.count(),
        s.sum(),
        s.min().unwrap_or(i64::MAX),
        s.max().unwrap_or(i64::MIN),
    ];
    w.extend_from_slice(s.buckets());
    w
}

/// The statistic a slot's value words hold; `None` if they are not one
/// of `spec` (the program wrote them).
pub(crate) fn stat_of(spec: StatSpec, words: &[i64]) -> Option<Stat> {
    let fixed = stat::FIXED as usize;
    if words.len() < fixed {
        return None;
    }
    let (count, sum) = (words[stat::COUNT as usize], words[stat::SUM as usize]);
    let (min, max) = (words[stat::MIN as usize], words[stat::MAX as usize]);
    if count > 0 && min > max {
        return None;
    }
    Stat::from_totals(spec, count, sum, min, max, &words[fixed..])
}

/// The first error of an in-process handler, as SystemTap words it
/// ("division by 0 near operator '/' at x.stp:3:14"), if one happened.
pub fn first_error(image: &InProcImage, declared: impl Fn(u32) -> Option<i64>) -> Option<String> {
    // SAFETY: the header is inside our mapping; its words may hold anything.
    let h = unsafe { std::ptr::read_volatile(image.region.header() as *const Header) };
    let kind = h.error_kind as i64;
    let what = match kind {
        0 => return None,
        RAISE_DIVISION_BY_ZERO => "division by 0".to_string(),
        RAISE_MAXACTION => "MAXACTION exceeded".to_string(),
        RAISE_MAXNESTING => "MAXNESTING exceeded".to_string(),
        RAISE_ARRAY_FULL => {
            let size = declared(h.error_global as u32);
            let limit = MapLimit::new(size, false, 0);
            MapOverflow {
                declared: limit.declared.then_some(limit.max_entries),
            }
            .to_string()
        }
        RAISE_USER_FAULT => crate::memory::Fault {
            addr: h.error_global,
            errno: libc::EFAULT,
        }
        .string_message(),
        // As the tracer's `script::dwarf_fns` words it.
        RAISE_READ_FAULT => format!("read fault [man error::fault] at {:#x}", h.error_global),
        _ => "internal error".to_string(),
    };
    Some(match image.locations.get(h.error_location as usize) {
        Some(loc) if !loc.is_empty() => format!("{what} near {loc}"),
        _ => what,
    })
}
