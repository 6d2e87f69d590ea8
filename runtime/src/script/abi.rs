//! The `extern "C"` functions compiled handlers call, and the table of
//! their symbol names the codegen registers with the JIT.
//!
//! Conventions: the first argument is always the handler's
//! [`HandlerContext`]; longs and string handles are `i64`; array keys are
//! passed in `ctx.keys`; a function that fails stores the error in the
//! state and sets `ctx.error`, which native code tests right after the
//! call. Names start with `utap_` so a typo cannot resolve to a libc
//! symbol.
//!
//! Every function is `unsafe`: its `ctx` must be the context of the
//! handler run in progress (compiled code passes its first argument
//! through), and array arguments must point to `n` readable words.
// That contract is the same for every function: it is stated once above.
#![allow(clippy::missing_safety_doc)]

use crate::values::map::{Key, KeyPart, Sort, SortBy};
use crate::values::stats::{Stat, StatError, StatOp};
use crate::values::strings as vstr;

use super::context::{HandlerContext, MAX_KEYS};
use super::globals::{Global, key_tuple};
use super::state::{Iteration, ScriptState};

/// Errors native code raises itself (`utap_raise`'s `kind`).
pub const RAISE_DIVISION_BY_ZERO: i64 = 1;
pub const RAISE_MAXACTION: i64 = 2;
pub const RAISE_MAXNESTING: i64 = 3;
/// A loop saw the interrupt flag (see `script::interrupt`).
pub const RAISE_INTERRUPTED: i64 = 4;

/// Marker of "no sort" and "sort by value" in `utap_foreach_array`'s `sort`.
pub const SORT_NONE: i64 = -1;
/// `sort = SORT_VALUE + agg` sorts by value (agg: the `StatOp` index of a
/// statistics array: 0 count, 1 sum, 2 min, 3 max, 4 avg, 5 variance).
pub const SORT_VALUE: i64 = 16;

#[inline]
fn st<'a>(ctx: *mut HandlerContext) -> &'a mut ScriptState {
    // SAFETY: native code only ever passes the context of the running
    // handler, whose state outlives the run.
    unsafe { HandlerContext::state(ctx) }
}

/// `StatOp` from the codegen's numbering.
pub fn stat_op(n: i64) -> StatOp {
    match n {
        1 => StatOp::Sum,
        2 => StatOp::Min,
        3 => StatOp::Max,
        4 => StatOp::Avg,
        5 => StatOp::Variance,
        _ => StatOp::Count,
    }
}

// ---- errors and control ------------------------------------------------

pub unsafe extern "C" fn utap_raise(ctx: *mut HandlerContext, kind: i64) {
    let msg = match kind {
        RAISE_DIVISION_BY_ZERO => "division by 0",
        RAISE_MAXACTION => "MAXACTION exceeded",
        RAISE_MAXNESTING => "MAXNESTING exceeded",
        // SystemTap's message for a probe cut short by a pending
        // interrupt (its usermode runtime checks at the same places).
        RAISE_INTERRUPTED => "interrupted",
        _ => "internal error",
    };
    st(ctx).raise(ctx, msg);
}

/// Entering a `catch`: clears the error and returns its message.
pub unsafe extern "C" fn utap_catch(ctx: *mut HandlerContext) -> i64 {
    let s = st(ctx);
    unsafe { (*ctx).error = 0 };
    let msg = std::mem::take(&mut s.error_message);
    s.strings.make(msg.as_bytes())
}

// ---- strings -------------------------------------------------------------

pub unsafe extern "C" fn utap_str_concat(ctx: *mut HandlerContext, a: i64, b: i64) -> i64 {
    st(ctx).strings.concat(a, b)
}

pub unsafe extern "C" fn utap_str_cmp(ctx: *mut HandlerContext, a: i64, b: i64) -> i64 {
    let s = &st(ctx).strings;
    vstr::compare(s.get(a), s.get(b)) as i64
}

/// `s =~ regex[id]` (1 or 0).
pub unsafe extern "C" fn utap_str_match(ctx: *mut HandlerContext, s: i64, id: i64) -> i64 {
    let state = st(ctx);
    let id = id as usize;
    if state.regexes[id].is_none() {
        match vstr::Regex::new(&state.image.regexes[id]) {
            Ok(re) => state.regexes[id] = Some(re),
            Err(e) => {
                state.raise(ctx, e.to_string());
                return 0;
            }
        }
    }
    let re = state.regexes[id].as_ref().expect("compiled");
    re.is_match(state.strings.get(s)) as i64
}

// ---- string scalars ------------------------------------------------------

pub unsafe extern "C" fn utap_gstr_get(ctx: *mut HandlerContext, gid: i64) -> i64 {
    let s = st(ctx);
    match &s.globals.vars[gid as usize] {
        Global::Str(v) => s.strings.make(v),
        _ => 0,
    }
}

pub unsafe extern "C" fn utap_gstr_set(ctx: *mut HandlerContext, gid: i64, h: i64) {
    let s = st(ctx);
    let max = s.limits.max_string_len;
    if let Global::Str(v) = &mut s.globals.vars[gid as usize] {
        vstr::assign(v, s.strings.get(h), max);
    }
}

// ---- arrays ----------------------------------------------------------------

/// Runs `f` with the key tuple in `ctx.keys` for global `gid`.
#[inline]
fn with_keys<R>(
    ctx: *mut HandlerContext,
    gid: i64,
    f: impl FnOnce(&mut Global, &[Key<'_>], usize) -> R,
) -> R {
    let s = st(ctx);
    let raw = unsafe { &(*ctx).keys };
    let strings = &s.strings;
    let mut keys = [Key::Long(0); MAX_KEYS];
    let n = key_tuple(
        &s.globals.key_types[gid as usize],
        raw,
        |h| strings.get(h),
        &mut keys,
    );
    let max = s.limits.max_string_len;
    f(&mut s.globals.vars[gid as usize], &keys[..n], max)
}

/// `a[k]` (0 or "" when missing; a string comes back as a new handle).
pub unsafe extern "C" fn utap_arr_get(ctx: *mut HandlerContext, gid: i64) -> i64 {
    enum Got {
        Long(i64),
        Str(*const [u8]),
    }
    let got = with_keys(ctx, gid, |g, k, _| match g {
        Global::LongArray(m) => Got::Long(m.get(k).copied().unwrap_or(0)),
        Global::StrArray(m) => match m.get(k) {
            Some(v) => Got::Str(v.as_slice() as *const [u8]),
            None => Got::Long(0),
        },
        _ => Got::Long(0),
    });
    match got {
        Got::Long(v) => v,
        // SAFETY: the value lives in the array, which nothing changes
        // between the lookup and this copy into the arena (a different
        // field of the state).
        Got::Str(p) => st(ctx).strings.make(unsafe { &*p }),
    }
}

/// `a[k] = v`.
pub unsafe extern "C" fn utap_arr_set(ctx: *mut HandlerContext, gid: i64, v: i64) {
    // The string value stays in the arena, which the array update below
    // does not touch: borrow it by pointer next to the key borrow.
    let value: *const [u8] = st(ctx).strings.get(v);
    let r = with_keys(ctx, gid, |g, k, max| match g {
        Global::LongArray(m) => m.set(k, v),
        Global::StrArray(m) => m.get_or_insert_with(k, Vec::new).map(|slot| {
            // SAFETY: see above; the arena is not changed during the call.
            vstr::assign(slot, unsafe { &*value }, max)
        }),
        _ => Ok(()),
    });
    if let Err(e) = r {
        st(ctx).raise(ctx, e.to_string());
    }
}

/// `a[k] += delta` on a long array; returns the new value.
pub unsafe extern "C" fn utap_arr_add(ctx: *mut HandlerContext, gid: i64, delta: i64) -> i64 {
    let r = with_keys(ctx, gid, |g, k, _| match g {
        Global::LongArray(m) => m.get_or_insert_with(k, || 0).map(|v| {
            *v = v.wrapping_add(delta);
            *v
        }),
        _ => Ok(0),
    });
    r.unwrap_or_else(|e| {
        st(ctx).raise(ctx, e.to_string());
        0
    })
}

/// Folds the other tracer threads' copies of statistic `gid` into it
/// before a use other than `<<<` (see `globals::ShardCopies`); a cheap
/// test for every other global.
#[inline]
fn settle(ctx: *mut HandlerContext, gid: i64) {
    if let Err(e) = st(ctx).globals.settle(gid as usize) {
        st(ctx).raise(ctx, e.to_string());
    }
}

/// `[k] in a`.
pub unsafe extern "C" fn utap_arr_exists(ctx: *mut HandlerContext, gid: i64) -> i64 {
    settle(ctx, gid);
    with_keys(ctx, gid, |g, k, _| match g {
        Global::LongArray(m) => m.contains(k),
        Global::StrArray(m) => m.contains(k),
        Global::StatArray(m, _) => m.contains(k),
        _ => false,
    }) as i64
}

/// `delete a[k]`.
pub unsafe extern "C" fn utap_arr_delete(ctx: *mut HandlerContext, gid: i64) {
    settle(ctx, gid);
    with_keys(ctx, gid, |g, k, _| match g {
        Global::LongArray(m) => drop(m.remove(k)),
        Global::StrArray(m) => drop(m.remove(k)),
        Global::StatArray(m, _) => drop(m.remove(k)),
        _ => {}
    })
}

/// Runs `f` on array `gid` with the slice filter made of `ctx.keys`: key
/// column i is fixed when bit i of `mask` is set, any value otherwise.
fn with_slice<R>(
    ctx: *mut HandlerContext,
    gid: i64,
    mask: i64,
    f: impl FnOnce(&mut Global, &[Option<Key<'_>>]) -> R,
) -> R {
    with_keys(ctx, gid, |g, k, _| {
        let mut filter = [None; MAX_KEYS];
        for (i, key) in k.iter().enumerate() {
            filter[i] = (mask & (1 << i) != 0).then_some(*key);
        }
        f(g, &filter[..k.len()])
    })
}

/// `[k, *] in a`: whether some element matches the slice.
pub unsafe extern "C" fn utap_arr_exists_slice(
    ctx: *mut HandlerContext,
    gid: i64,
    mask: i64,
) -> i64 {
    settle(ctx, gid);
    with_slice(ctx, gid, mask, |g, filter| match g {
        Global::LongArray(m) => m.any_matching(filter),
        Global::StrArray(m) => m.any_matching(filter),
        Global::StatArray(m, _) => m.any_matching(filter),
        _ => false,
    }) as i64
}

/// `delete a[k, *]`: removes every element matching the slice.
pub unsafe extern "C" fn utap_arr_delete_slice(ctx: *mut HandlerContext, gid: i64, mask: i64) {
    settle(ctx, gid);
    with_slice(ctx, gid, mask, |g, filter| match g {
        Global::LongArray(m) => m.remove_matching(filter),
        Global::StrArray(m) => m.remove_matching(filter),
        Global::StatArray(m, _) => m.remove_matching(filter),
        _ => {}
    })
}

/// `delete g` for any global: an array is emptied, a scalar reset.
pub unsafe extern "C" fn utap_global_clear(ctx: *mut HandlerContext, gid: i64) {
    settle(ctx, gid);
    let g = &mut *st(ctx).globals;
    match &mut g.vars[gid as usize] {
        Global::Long(slot) => g.longs[*slot as usize] = 0,
        Global::Str(v) => v.clear(),
        Global::Stat(stat) => stat.clear(),
        Global::LongArray(m) => m.clear(),
        Global::StrArray(m) => m.clear(),
        Global::StatArray(m, _) => m.clear(),
    }
}

// ---- statistics -------------------------------------------------------------

/// Runs `f` on the statistic `gid` (a scalar, or with `elem` the element
/// at `ctx.keys`, created when `create`). `None` when the element is
/// missing.
fn with_stat<R>(
    ctx: *mut HandlerContext,
    gid: i64,
    elem: i64,
    create: bool,
    f: impl FnOnce(&mut Stat) -> R,
) -> Result<Option<R>, String> {
    if !create {
        settle(ctx, gid);
    }
    if elem == 0 {
        return match &mut st(ctx).globals.vars[gid as usize] {
            Global::Stat(s) => Ok(Some(f(s))),
            _ => Ok(None),
        };
    }
    with_keys(ctx, gid, |g, k, _| match g {
        Global::StatArray(m, spec) => {
            if create {
                let spec = *spec;
                m.get_or_insert_with(k, || Stat::new(spec))
                    .map(|s| Some(f(s)))
                    .map_err(|e| e.to_string())
            } else {
                Ok(m.get_mut(k).map(f))
            }
        }
        _ => Ok(None),
    })
}

/// `s <<< v`.
pub unsafe extern "C" fn utap_stat_add(ctx: *mut HandlerContext, gid: i64, elem: i64, v: i64) {
    if st(ctx).shard != 0 {
        return shard_add(ctx, gid, elem, v);
    }
    if let Err(e) = with_stat(ctx, gid, elem, true, |s| s.add(v)) {
        st(ctx).raise(ctx, e);
    }
}

/// `s <<< v` on a tracer thread other than the first: into its own copy.
fn shard_add(ctx: *mut HandlerContext, gid: i64, elem: i64, v: i64) {
    let s = st(ctx);
    let result = match elem {
        0 => {
            let shard = s.shard;
            s.globals.shard_add(shard, gid as usize, None, v)
        }
        _ => {
            let raw = unsafe { &(*ctx).keys };
            let strings = &s.strings;
            let mut keys = [Key::Long(0); MAX_KEYS];
            let types = &s.globals.key_types[gid as usize];
            let n = key_tuple(types, raw, |h| strings.get(h), &mut keys);
            let shard = s.shard;
            s.globals
                .shard_add(shard, gid as usize, Some(&keys[..n]), v)
        }
    };
    if let Err(e) = result {
        st(ctx).raise(ctx, e.to_string());
    }
}

/// Reads a statistic (see [`with_stat`]); a missing one, a failing read
/// or an array overflow raises its error and gives `None`.
fn read_stat<R>(
    ctx: *mut HandlerContext,
    gid: i64,
    elem: i64,
    f: impl FnOnce(&mut Stat) -> Result<R, StatError>,
) -> Option<R> {
    let message = match with_stat(ctx, gid, elem, false, f) {
        Ok(Some(Ok(v))) => return Some(v),
        Ok(Some(Err(e))) => e.to_string(),
        Ok(None) => StatError::Empty.to_string(),
        Err(e) => e,
    };
    st(ctx).raise(ctx, message);
    None
}

/// `@op(s)`: `@count`/`@sum` of nothing are 0, the others an error.
pub unsafe extern "C" fn utap_stat_get(
    ctx: *mut HandlerContext,
    gid: i64,
    elem: i64,
    op: i64,
) -> i64 {
    let op = stat_op(op);
    if matches!(op, StatOp::Count | StatOp::Sum)
        && let Ok(None) = with_stat(ctx, gid, elem, false, |_| ())
    {
        return 0;
    }
    read_stat(ctx, gid, elem, |s| s.get(op)).unwrap_or(0)
}

/// `@hist_log(s)[i]`.
pub unsafe extern "C" fn utap_hist_bucket(
    ctx: *mut HandlerContext,
    gid: i64,
    elem: i64,
    i: i64,
) -> i64 {
    read_stat(ctx, gid, elem, |s| s.bucket(i)).unwrap_or(0)
}

/// The histogram of a statistic as `print` shows it.
fn histogram_text(ctx: *mut HandlerContext, gid: i64, elem: i64) -> Option<Vec<u8>> {
    let elision = st(ctx).limits.hist_elision;
    read_stat(ctx, gid, elem, |s| {
        let mut text = Vec::new();
        s.print_histogram(&mut text, elision).map(|()| text)
    })
}

/// `print(@hist_log(s))`: appends the histogram to the output.
pub unsafe extern "C" fn utap_print_hist(ctx: *mut HandlerContext, gid: i64, elem: i64) {
    if let Some(text) = histogram_text(ctx, gid, elem) {
        st(ctx).out.extend(&text);
        st(ctx).flush_if_large();
    }
}

/// `sprint(@hist_log(s))`: the histogram as a string.
pub unsafe extern "C" fn utap_sprint_hist(ctx: *mut HandlerContext, gid: i64, elem: i64) -> i64 {
    histogram_text(ctx, gid, elem).map_or(0, |text| st(ctx).strings.make(&text))
}

// ---- foreach ----------------------------------------------------------------

fn push_iteration(s: &mut ScriptState, it: Iteration) -> i64 {
    if let Some(i) = s.iterations.iter().position(Option::is_none) {
        s.iterations[i] = Some(it);
        i as i64
    } else {
        s.iterations.push(Some(it));
        s.iterations.len() as i64 - 1
    }
}

/// Starts `foreach ([k..] in a <sort> limit n)`; `mask` has bit i set when
/// key column i is fixed by a slice (`a[*, "x"]`), its value in ctx.keys.
pub unsafe extern "C" fn utap_foreach_array(
    ctx: *mut HandlerContext,
    gid: i64,
    sort: i64,
    descending: i64,
    has_limit: i64,
    limit: i64,
    mask: i64,
) -> i64 {
    let sort = match sort {
        SORT_NONE => None,
        n if n >= SORT_VALUE => Some(Sort {
            by: SortBy::Value(stat_op(n - SORT_VALUE)),
            descending: descending != 0,
        }),
        n => Some(Sort {
            by: SortBy::Key(n as usize),
            descending: descending != 0,
        }),
    };
    let limit = (has_limit != 0).then_some(limit);
    let mut entries = Vec::new();
    settle(ctx, gid);
    with_keys(ctx, gid, |g, k, _| {
        let filter: Vec<Option<Key<'_>>> = k
            .iter()
            .enumerate()
            .map(|(i, key)| (mask & (1 << i) != 0).then_some(*key))
            .collect();
        let filter = (mask != 0).then_some(&filter[..]);
        match g {
            Global::LongArray(m) => m.select(filter, sort, limit, &mut entries),
            Global::StrArray(m) => m.select(filter, sort, limit, &mut entries),
            Global::StatArray(m, _) => m.select(filter, sort, limit, &mut entries),
            _ => {}
        }
    });
    let it = Iteration::Array {
        global: gid as u32,
        entries,
        pos: 0,
    };
    push_iteration(st(ctx), it)
}

/// Starts `foreach (b in @hist_xxx(s) limit n)`.
pub unsafe extern "C" fn utap_foreach_hist(
    ctx: *mut HandlerContext,
    gid: i64,
    elem: i64,
    has_limit: i64,
    limit: i64,
) -> i64 {
    let counts = with_stat(ctx, gid, elem, false, |s| s.buckets().to_vec())
        .ok()
        .flatten()
        .unwrap_or_default();
    let end = if has_limit != 0 {
        (limit.max(0) as usize).min(counts.len())
    } else {
        counts.len()
    };
    push_iteration(
        st(ctx),
        Iteration::Buckets {
            counts,
            pos: 0,
            end,
        },
    )
}

/// Moves to the next element: 1 with its keys in `ctx.keys` and its value
/// in `ctx.foreach_value`, or 0 at the end.
pub unsafe extern "C" fn utap_foreach_next(ctx: *mut HandlerContext, iter: i64) -> i64 {
    let s = st(ctx);
    let Some(Some(it)) = s.iterations.get_mut(iter as usize) else {
        return 0;
    };
    match it {
        Iteration::Buckets { counts, pos, end } => {
            if *pos >= *end {
                return 0;
            }
            unsafe {
                (*ctx).keys[0] = *pos as i64;
                (*ctx).foreach_value = counts[*pos];
            }
            *pos += 1;
            1
        }
        Iteration::Array {
            global,
            entries,
            pos,
        } => loop {
            let Some(&id) = entries.get(*pos) else {
                return 0;
            };
            *pos += 1;
            let strings = &mut s.strings;
            let (key, value) = match &s.globals.vars[*global as usize] {
                Global::LongArray(m) => (m.key(id), m.value(id).copied().unwrap_or(0)),
                Global::StrArray(m) => (m.key(id), m.value(id).map_or(0, |v| strings.make(v))),
                Global::StatArray(m, _) => (m.key(id), 0),
                _ => (None, 0),
            };
            // A stale entry (deleted during the loop) is skipped.
            let Some(key) = key else { continue };
            let mut raw = [0i64; MAX_KEYS];
            for (slot, part) in raw.iter_mut().zip(key) {
                *slot = match part {
                    KeyPart::Long(v) => *v,
                    KeyPart::Str(b) => strings.make(b),
                };
            }
            unsafe {
                (*ctx).keys = raw;
                (*ctx).foreach_value = value;
            }
            return 1;
        },
    }
}

/// Ends a `foreach` (also done for all loops at the end of a run).
pub unsafe extern "C" fn utap_foreach_end(ctx: *mut HandlerContext, iter: i64) {
    if let Some(slot) = st(ctx).iterations.get_mut(iter as usize) {
        *slot = None;
    }
}

// ---- output -------------------------------------------------------------------

/// `printf(formats[fmt], args...)`: appends to the run's output.
pub unsafe extern "C" fn utap_printf(ctx: *mut HandlerContext, fmt: i64, args: *const i64, n: i64) {
    let s = st(ctx);
    let args = unsafe { std::slice::from_raw_parts(args, n as usize) };
    if let Err(e) = super::printing::printf(s, fmt as usize, args) {
        s.raise(ctx, e);
    }
    s.flush_if_large();
}

/// `sprintf(formats[fmt], args...)`: a new string.
pub unsafe extern "C" fn utap_sprintf(
    ctx: *mut HandlerContext,
    fmt: i64,
    args: *const i64,
    n: i64,
) -> i64 {
    let s = st(ctx);
    let args = unsafe { std::slice::from_raw_parts(args, n as usize) };
    let mut out = std::mem::take(&mut s.print_scratch);
    out.clear();
    super::printing::sprintf(s, fmt as usize, args, &mut out);
    let h = s.strings.make(&out);
    s.print_scratch = out;
    h
}

/// Flags of `utap_print`.
pub const PRINT_NEWLINE: i64 = 1;
pub const PRINT_DELIM: i64 = 2;
pub const PRINT_TO_STRING: i64 = 4;

/// The print family without a format: `print println printd printdln`
/// and `sprint sprintln sprintd sprintdln`. `mask` bit i: argument i is a
/// string. Returns the string for the `s` forms, else 0.
pub unsafe extern "C" fn utap_print(
    ctx: *mut HandlerContext,
    flags: i64,
    mask: i64,
    delim: i64,
    args: *const i64,
    n: i64,
) -> i64 {
    let s = st(ctx);
    let args = unsafe { std::slice::from_raw_parts(args, n as usize) };
    let delim = (flags & PRINT_DELIM != 0).then_some(delim);
    let newline = flags & PRINT_NEWLINE != 0;
    if flags & PRINT_TO_STRING != 0 {
        let mut out = std::mem::take(&mut s.print_scratch);
        out.clear();
        super::printing::print(s, args, mask as u64, delim, newline, &mut out);
        let h = s.strings.make(&out);
        s.print_scratch = out;
        h
    } else {
        super::printing::print_out(s, args, mask as u64, delim, newline);
        s.flush_if_large();
        0
    }
}

/// Every symbol above, for the JIT's symbol table.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("utap_raise", utap_raise as *const u8),
        ("utap_catch", utap_catch as *const u8),
        ("utap_str_concat", utap_str_concat as *const u8),
        ("utap_str_cmp", utap_str_cmp as *const u8),
        ("utap_str_match", utap_str_match as *const u8),
        ("utap_gstr_get", utap_gstr_get as *const u8),
        ("utap_gstr_set", utap_gstr_set as *const u8),
        ("utap_arr_get", utap_arr_get as *const u8),
        ("utap_arr_set", utap_arr_set as *const u8),
        ("utap_arr_add", utap_arr_add as *const u8),
        ("utap_arr_exists", utap_arr_exists as *const u8),
        ("utap_arr_delete", utap_arr_delete as *const u8),
        ("utap_arr_exists_slice", utap_arr_exists_slice as *const u8),
        ("utap_arr_delete_slice", utap_arr_delete_slice as *const u8),
        ("utap_global_clear", utap_global_clear as *const u8),
        ("utap_stat_add", utap_stat_add as *const u8),
        ("utap_stat_get", utap_stat_get as *const u8),
        ("utap_hist_bucket", utap_hist_bucket as *const u8),
        ("utap_print_hist", utap_print_hist as *const u8),
        ("utap_sprint_hist", utap_sprint_hist as *const u8),
        ("utap_foreach_array", utap_foreach_array as *const u8),
        ("utap_foreach_hist", utap_foreach_hist as *const u8),
        ("utap_foreach_next", utap_foreach_next as *const u8),
        ("utap_foreach_end", utap_foreach_end as *const u8),
        ("utap_printf", utap_printf as *const u8),
        ("utap_sprintf", utap_sprintf as *const u8),
        ("utap_print", utap_print as *const u8),
    ]
}
