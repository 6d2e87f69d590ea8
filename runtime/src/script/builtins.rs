//! The builtin functions of the checker's table (`compiler/src/builtins.rs`),
//! one `extern "C" fn utap_bi_NAME(ctx, args...) -> i64` each. A `void`
//! builtin returns 0. [`symbols`] lists them by script name.

use crate::memory;
use crate::procinfo;
use crate::values::strings as vstr;

use super::context::HandlerContext;
use super::state::{ControlRequest, ScriptState};

#[inline]
pub(crate) fn st<'a>(ctx: *mut HandlerContext) -> &'a mut ScriptState {
    // SAFETY: see abi.rs; only the running handler's context is passed.
    unsafe { HandlerContext::state(ctx) }
}

/// Runs `f` on the memory of the event's process: the run's reader when
/// the session set one, else one on thread `tid`'s process.
pub(crate) fn with_event_memory<T>(
    ctx: *mut HandlerContext,
    tid: i32,
    f: impl FnOnce(&dyn memory::ReadMemory) -> T,
) -> T {
    match st(ctx).memory {
        // SAFETY: set by `fire` for the duration of the run.
        Some(m) => f(unsafe { &*m }),
        None => f(&memory::ProcessMemory::new(tid)),
    }
}

#[inline]
fn probe<'a>(ctx: *mut HandlerContext) -> &'a mut super::context::ProbeValues {
    unsafe { &mut (*ctx).probe }
}

/// Makes a string result with `fill` writing into the arena.
fn string_result(ctx: *mut HandlerContext, bytes: &[u8]) -> i64 {
    st(ctx).strings.make(bytes)
}

// ---- control ------------------------------------------------------------

extern "C" fn utap_bi_error(ctx: *mut HandlerContext, msg: i64) -> i64 {
    let s = st(ctx);
    let m = String::from_utf8_lossy(s.strings.get(msg)).into_owned();
    s.raise(ctx, m);
    0
}

extern "C" fn utap_bi_warn(ctx: *mut HandlerContext, msg: i64) -> i64 {
    let s = st(ctx);
    let m = String::from_utf8_lossy(s.strings.get(msg)).into_owned();
    s.diagnostics.push(format!("WARNING: {m}"));
    0
}

extern "C" fn utap_bi_exit(ctx: *mut HandlerContext) -> i64 {
    st(ctx).exit_requested = true;
    0
}

/// `stop()` (the call passes 0) holds the current thread, `stop(tid)` any.
extern "C" fn utap_bi_stop(ctx: *mut HandlerContext, tid: i64) -> i64 {
    let tid = if tid == 0 { probe(ctx).tid } else { tid };
    st(ctx).control.push(ControlRequest::Stop(tid));
    0
}

/// SystemTap's guru `raise(signo)`: the signal is sent to the current
/// thread when the handler returns (signal 0 sends nothing).
extern "C" fn utap_bi_raise(ctx: *mut HandlerContext, signo: i64) -> i64 {
    if !(0..=64).contains(&signo) {
        st(ctx).raise(ctx, format!("raise({signo}) failed"));
    } else if signo != 0 {
        let tid = probe(ctx).tid;
        st(ctx).control.push(ControlRequest::Raise { tid, signo });
    }
    0
}

/// Holds the current thread `us` microseconds after the handler returns.
fn delay(ctx: *mut HandlerContext, us: i64, what: &str) -> i64 {
    if us < 0 {
        st(ctx).raise(ctx, format!("{what}: negative delay {us}"));
    } else if us > 0 {
        let tid = probe(ctx).tid;
        st(ctx).control.push(ControlRequest::Delay { tid, us });
    }
    0
}

/// SystemTap's guru `udelay(us)`. SystemTap busy-waits in the kernel; here
/// the thread waits in a tracing stop while every other thread is served.
extern "C" fn utap_bi_udelay(ctx: *mut HandlerContext, us: i64) -> i64 {
    delay(ctx, us, "udelay")
}

/// SystemTap's guru `mdelay(ms)`.
extern "C" fn utap_bi_mdelay(ctx: *mut HandlerContext, ms: i64) -> i64 {
    delay(ctx, ms.saturating_mul(1000), "mdelay")
}

extern "C" fn utap_bi_resume(ctx: *mut HandlerContext, tid: i64) -> i64 {
    st(ctx).control.push(ControlRequest::Resume(tid));
    0
}

extern "C" fn utap_bi_quiesce(ctx: *mut HandlerContext, tid: i64) -> i64 {
    st(ctx).control.push(ControlRequest::Quiesce(tid));
    0
}

// ---- numbers ---------------------------------------------------------------

extern "C" fn utap_bi_abs(_: *mut HandlerContext, v: i64) -> i64 {
    v.wrapping_abs()
}

extern "C" fn utap_bi_min(_: *mut HandlerContext, a: i64, b: i64) -> i64 {
    a.min(b)
}

extern "C" fn utap_bi_max(_: *mut HandlerContext, a: i64, b: i64) -> i64 {
    a.max(b)
}

extern "C" fn utap_bi_big_endian2(_: *mut HandlerContext, v: i64) -> i64 {
    (v as u16).swap_bytes() as i64
}

extern "C" fn utap_bi_big_endian4(_: *mut HandlerContext, v: i64) -> i64 {
    (v as u32).swap_bytes() as i64
}

extern "C" fn utap_bi_big_endian8(_: *mut HandlerContext, v: i64) -> i64 {
    v.swap_bytes()
}

/// `print_char(c)`: one byte of output.
extern "C" fn utap_bi_print_char(ctx: *mut HandlerContext, c: i64) -> i64 {
    let s = st(ctx);
    s.out.extend(&[c as u8]);
    s.flush_if_large();
    0
}

/// `randint(n)`: uniform in `0..n` (0 for `n <= 0`).
extern "C" fn utap_bi_randint(ctx: *mut HandlerContext, n: i64) -> i64 {
    if n <= 0 {
        return 0;
    }
    let s = st(ctx);
    // xorshift64*: fast and good enough for sampling decisions.
    s.rng ^= s.rng >> 12;
    s.rng ^= s.rng << 25;
    s.rng ^= s.rng >> 27;
    let r = s.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
    (r % n as u64) as i64
}

/// `ctime(epochsecs)` as SystemTap's tapset prints it (UTC, and only for
/// times a 32-bit `time_t` can hold).
pub fn ctime(t: i64) -> String {
    if t < i32::MIN as i64 {
        return "a long, long time ago...".into();
    }
    if t > i32::MAX as i64 {
        return "far far in the future...".into();
    }
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    const WDAY: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        WDAY[days.rem_euclid(7) as usize],
        MON[(month - 1) as usize],
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year
    )
}

extern "C" fn utap_bi_ctime(ctx: *mut HandlerContext, t: i64) -> i64 {
    string_result(ctx, ctime(t).as_bytes())
}

// ---- strings -------------------------------------------------------------------

extern "C" fn utap_bi_strlen(ctx: *mut HandlerContext, s: i64) -> i64 {
    vstr::strlen(st(ctx).strings.get(s))
}

extern "C" fn utap_bi_substr(ctx: *mut HandlerContext, s: i64, start: i64, len: i64) -> i64 {
    let state = st(ctx);
    let max = state.strings.maxstringlen;
    let part = vstr::substr(state.strings.get(s), start, len, max).to_vec();
    state.strings.make(&part)
}

extern "C" fn utap_bi_isinstr(ctx: *mut HandlerContext, a: i64, b: i64) -> i64 {
    let s = &st(ctx).strings;
    vstr::isinstr(s.get(a), s.get(b)) as i64
}

extern "C" fn utap_bi_stringat(ctx: *mut HandlerContext, s: i64, pos: i64) -> i64 {
    let state = st(ctx);
    match vstr::stringat(state.strings.get(s), pos) {
        Ok(v) => v,
        Err(e) => {
            state.raise(ctx, e.to_string());
            0
        }
    }
}

extern "C" fn utap_bi_strtol(ctx: *mut HandlerContext, s: i64, base: i64) -> i64 {
    vstr::strtol(st(ctx).strings.get(s), base)
}

extern "C" fn utap_bi_str_replace(ctx: *mut HandlerContext, s: i64, from: i64, to: i64) -> i64 {
    let state = st(ctx);
    let max = state.strings.maxstringlen;
    let (a, b, c) = (
        state.strings.get(s).to_vec(),
        state.strings.get(from).to_vec(),
        state.strings.get(to).to_vec(),
    );
    state
        .strings
        .build(|out, _| vstr::str_replace(out, &a, &b, &c, max))
}

extern "C" fn utap_bi_tokenize(ctx: *mut HandlerContext, s: i64, delim: i64) -> i64 {
    let state = st(ctx);
    let max = state.strings.maxstringlen;
    let (input, d) = (
        state.strings.get(s).to_vec(),
        state.strings.get(delim).to_vec(),
    );
    let tok = &mut state.tokenizer;
    state
        .strings
        .build(|out, _| tok.tokenize(&input, &d, out, max))
}

extern "C" fn utap_bi_text_str(ctx: *mut HandlerContext, s: i64) -> i64 {
    let state = st(ctx);
    let max = state.strings.maxstringlen;
    let input = state.strings.get(s).to_vec();
    state
        .strings
        .build(|out, _| vstr::text_str(out, &input, max))
}

extern "C" fn utap_bi_text_strn(ctx: *mut HandlerContext, s: i64, len: i64, quoted: i64) -> i64 {
    let state = st(ctx);
    let max = state.strings.maxstringlen;
    let input = state.strings.get(s).to_vec();
    state
        .strings
        .build(|out, _| vstr::text_strn(out, &input, len, quoted != 0, max))
}

// ---- process context ---------------------------------------------------------

extern "C" fn utap_bi_pid(ctx: *mut HandlerContext) -> i64 {
    probe(ctx).pid
}

extern "C" fn utap_bi_tid(ctx: *mut HandlerContext) -> i64 {
    probe(ctx).tid
}

/// The cached facts about the current event's thread (its pid, parent,
/// ids, command name); refreshed when not cached yet.
pub(crate) fn info<'a>(ctx: *mut HandlerContext) -> Option<&'a crate::procinfo::ProcInfo> {
    let tid = probe(ctx).tid as i32;
    let procs = &mut st(ctx).procs;
    if procs.get(tid).is_none() && !procs.refresh(tid) {
        return None;
    }
    procs.get(tid)
}

extern "C" fn utap_bi_ppid(ctx: *mut HandlerContext) -> i64 {
    info(ctx).map_or(0, |i| i.ppid as i64)
}

extern "C" fn utap_bi_uid(ctx: *mut HandlerContext) -> i64 {
    info(ctx).map_or(-1, |i| i.uid as i64)
}

extern "C" fn utap_bi_euid(ctx: *mut HandlerContext) -> i64 {
    info(ctx).map_or(-1, |i| i.euid as i64)
}

extern "C" fn utap_bi_gid(ctx: *mut HandlerContext) -> i64 {
    info(ctx).map_or(-1, |i| i.gid as i64)
}

extern "C" fn utap_bi_egid(ctx: *mut HandlerContext) -> i64 {
    info(ctx).map_or(-1, |i| i.egid as i64)
}

extern "C" fn utap_bi_execname(ctx: *mut HandlerContext) -> i64 {
    let name = info(ctx).map(|i| i.execname.clone()).unwrap_or_default();
    string_result(ctx, name.as_bytes())
}

/// `__syscall_entry_arg(n)`: argument `n` (1..6) the current syscall was
/// entered with, also in return probes (the socket tapset's addresses the
/// call fills); 0 outside 1..6.
extern "C" fn utap_bi_syscall_entry_arg(ctx: *mut HandlerContext, n: i64) -> i64 {
    match n {
        1..=6 => probe(ctx).args[n as usize - 1],
        _ => 0,
    }
}

/// `__get_argv(argv, first)`: an exec's arguments as SystemTap's
/// syscall.execve gives them in `args`.
extern "C" fn utap_bi_get_argv(ctx: *mut HandlerContext, argv: i64, first: i64) -> i64 {
    let max = st(ctx).limits.max_string_len;
    let text = with_memory(ctx, |m| {
        memory::argv_text(m, argv as u64, first.max(0) as usize, max)
    })
    .unwrap_or_default();
    string_result(ctx, &text)
}

/// `__count_envp(envp)`: `[/* N vars */]`, SystemTap's `env_str`.
extern "C" fn utap_bi_count_envp(ctx: *mut HandlerContext, envp: i64) -> i64 {
    let text = with_memory(ctx, |m| memory::envp_text(m, envp as u64)).unwrap_or_default();
    string_result(ctx, text.as_bytes())
}

/// `pid2execname(pid)`: the command name of another process.
extern "C" fn utap_bi_pid2execname(ctx: *mut HandlerContext, pid: i64) -> i64 {
    let name = procinfo::pid_execname(&st(ctx).procs, pid as i32);
    string_result(ctx, name.as_bytes())
}

extern "C" fn utap_bi_target(ctx: *mut HandlerContext) -> i64 {
    st(ctx).target
}

extern "C" fn utap_bi_cpu(ctx: *mut HandlerContext) -> i64 {
    let tid = probe(ctx).tid;
    if tid == unsafe { libc::gettid() } as i64 {
        return procinfo::current_cpu();
    }
    st(ctx).procs.cpu(tid as i32)
}

extern "C" fn utap_bi_gettimeofday_s(_: *mut HandlerContext) -> i64 {
    procinfo::gettimeofday_s()
}
extern "C" fn utap_bi_gettimeofday_ms(_: *mut HandlerContext) -> i64 {
    procinfo::gettimeofday_ms()
}
extern "C" fn utap_bi_gettimeofday_us(_: *mut HandlerContext) -> i64 {
    procinfo::gettimeofday_us()
}
extern "C" fn utap_bi_gettimeofday_ns(_: *mut HandlerContext) -> i64 {
    procinfo::gettimeofday_ns()
}

/// A string of the probe point being run (`pp()`, `pn()`), "" outside one.
pub(crate) fn point_string(
    ctx: *mut HandlerContext,
    field: impl Fn(&super::image::PointSpec) -> &str,
) -> i64 {
    let state = st(ctx);
    // SAFETY: the native code passes its live context.
    let (idx, point) = unsafe { ((*ctx).probe_index as usize, (*ctx).point_index as usize) };
    let text = state
        .image
        .probes
        .get(idx)
        .and_then(|p| p.points.get(point))
        .map(|p| field(p).to_owned())
        .unwrap_or_default();
    state.strings.make(text.as_bytes())
}

/// The USDT marker of the current event: none in an end probe that a
/// marker probe's `exit()` ran (its event is not the breakpoint's).
fn current_marker(
    ctx: *mut HandlerContext,
) -> Option<&'static (std::rc::Rc<crate::hit::Marker>, Vec<i64>)> {
    // SAFETY: the native code passes its live context.
    let event = unsafe { (*ctx).probe.event };
    if event != super::context::event::FUNCTION {
        return None;
    }
    st(ctx).usdt.as_ref()
}

extern "C" fn utap_bi_pp(ctx: *mut HandlerContext) -> i64 {
    if let Some((m, _)) = current_marker(ctx) {
        // The marker that fired, as SystemTap names the derived probe.
        let text = m.pp.clone();
        return string_result(ctx, text.as_bytes());
    }
    point_string(ctx, |p| &p.text)
}

/// `__utap_mark(k)`: at a USDT marker, `$$name` (0), `$$provider` (1) or
/// `$$parms` (2); "" elsewhere.
extern "C" fn utap_bi_utap_mark(ctx: *mut HandlerContext, what: i64) -> i64 {
    let text = match current_marker(ctx) {
        Some((m, _)) if what == 0 => m.name.clone(),
        Some((m, _)) if what == 1 => m.provider.clone(),
        Some((_, values)) if what == 2 => crate::hit::parms(values),
        _ => String::new(),
    };
    string_result(ctx, text.as_bytes())
}

/// `uaddr()`: the user address of a function probe, 0 elsewhere.
extern "C" fn utap_bi_uaddr(ctx: *mut HandlerContext) -> i64 {
    st(ctx).ufunc.as_ref().map_or(0, |f| f.uaddr as i64)
}

/// Runs `f` on the memory of the current event's process.
fn with_memory<R>(
    ctx: *mut HandlerContext,
    f: impl FnOnce(&dyn memory::ReadMemory) -> R,
) -> Option<R> {
    let m = st(ctx).memory?;
    // SAFETY: `fire` sets `memory` for the duration of the run only.
    Some(f(unsafe { &*m }))
}

fn user_string_result(
    ctx: *mut HandlerContext,
    r: Option<Result<Vec<u8>, memory::Fault>>,
    addr: i64,
) -> i64 {
    match r {
        Some(Ok(bytes)) => string_result(ctx, &bytes),
        Some(Err(fault)) => {
            st(ctx).raise(ctx, fault.string_message());
            0
        }
        None => {
            let fault = memory::Fault {
                addr: addr as u64,
                errno: libc::EFAULT,
            };
            st(ctx).raise(ctx, fault.string_message());
            0
        }
    }
}

extern "C" fn utap_bi_user_string(ctx: *mut HandlerContext, addr: i64) -> i64 {
    let max = st(ctx).limits.max_string_len;
    let r = with_memory(ctx, |m| {
        let mut out = Vec::new();
        memory::user_string(&mut out, m, addr as u64, max).map(|()| out)
    });
    user_string_result(ctx, r, addr)
}

extern "C" fn utap_bi_user_string_n(ctx: *mut HandlerContext, addr: i64, n: i64) -> i64 {
    let max = st(ctx).limits.max_string_len;
    let r = with_memory(ctx, |m| {
        let mut out = Vec::new();
        memory::user_string_n(&mut out, m, addr as u64, n, max).map(|()| out)
    });
    user_string_result(ctx, r, addr)
}

extern "C" fn utap_bi_user_string_quoted(ctx: *mut HandlerContext, addr: i64) -> i64 {
    let max = st(ctx).limits.max_string_len;
    let r = with_memory(ctx, |m| {
        let mut out = Vec::new();
        memory::user_string_quoted(&mut out, m, addr as u64, max);
        out
    })
    .unwrap_or_else(|| format!("0x{:x}", addr as u64).into_bytes());
    string_result(ctx, &r)
}

extern "C" fn utap_bi_user_long(ctx: *mut HandlerContext, addr: i64) -> i64 {
    with_memory(ctx, |m| memory::user_long(m, addr as u64)).unwrap_or(0)
}
extern "C" fn utap_bi_user_int(ctx: *mut HandlerContext, addr: i64) -> i64 {
    with_memory(ctx, |m| memory::user_int(m, addr as u64)).unwrap_or(0)
}
extern "C" fn utap_bi_user_short(ctx: *mut HandlerContext, addr: i64) -> i64 {
    with_memory(ctx, |m| memory::user_short(m, addr as u64)).unwrap_or(0)
}
extern "C" fn utap_bi_user_char(ctx: *mut HandlerContext, addr: i64) -> i64 {
    with_memory(ctx, |m| memory::user_char(m, addr as u64)).unwrap_or(0)
}

// ---- decoders from the syscall knowledge base --------------------------------

/// Every `(long) -> string` decoder (`syscall_name`, `errno_str`,
/// `_dfd_str`, ...): the codegen passes the decoder's index in
/// [`crate::syscalls::builtins::LONG_TO_STRING`].
extern "C" fn utap_bi_long_to_string(ctx: *mut HandlerContext, index: i64, v: i64) -> i64 {
    let text = crate::syscalls::builtins::LONG_TO_STRING
        .get(index as usize)
        .map(|(_, f)| f(v))
        .unwrap_or_default();
    string_result(ctx, text.as_bytes())
}

/// The index of a `(long) -> string` decoder for `utap_bi_long_to_string`.
pub fn long_to_string_index(name: &str) -> Option<usize> {
    crate::syscalls::builtins::LONG_TO_STRING
        .iter()
        .position(|(n, _)| *n == name)
}

extern "C" fn utap_bi_syscall_argstr(ctx: *mut HandlerContext, nr: i64) -> i64 {
    let p = *probe(ctx);
    let args = p.args.map(|a| a as u64);
    let ret = (p.returning != 0).then_some(p.ret);
    let text = with_memory(ctx, |m| {
        crate::syscalls::builtins::syscall_argstr(nr, &args, ret, m)
    })
    .unwrap_or_else(|| {
        let none = crate::memory::SliceMemory {
            base: 0,
            bytes: &[],
        };
        crate::syscalls::builtins::syscall_argstr(nr, &args, ret, &none)
    });
    string_result(ctx, text.as_bytes())
}

/// `syscall_num(name)`: the number, or -1.
extern "C" fn utap_bi_syscall_num(ctx: *mut HandlerContext, name: i64) -> i64 {
    let name = String::from_utf8_lossy(st(ctx).strings.get(name)).into_owned();
    crate::syscalls::builtins::syscall_num(&name)
}

/// `errno_num("ENOSPC")`: 28 (the positive value; an unknown name is an
/// error).
extern "C" fn utap_bi_errno_num(ctx: *mut HandlerContext, name: i64) -> i64 {
    let s = st(ctx);
    let name = String::from_utf8_lossy(s.strings.get(name)).into_owned();
    match crate::syscalls::errno::errno_number(&name) {
        Some(n) => n,
        None => {
            s.raise(ctx, format!("errno_num: unknown errno name '{name}'"));
            0
        }
    }
}

extern "C" fn utap_bi_syscall_retstr(ctx: *mut HandlerContext, nr: i64, ret: i64) -> i64 {
    let text = crate::syscalls::builtins::syscall_retstr(nr, ret);
    string_result(ctx, text.as_bytes())
}

/// Every builtin implemented here and in [`super::tapset_fns`], by script
/// name.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    let mut v = super::tapset_fns::symbols();
    v.extend(super::ustack_fns::symbols());
    v.extend(super::registers::symbols());
    v.extend(super::dwarf_fns::symbols());
    v.extend([
        ("__count_envp", utap_bi_count_envp as *const u8),
        ("__get_argv", utap_bi_get_argv as *const u8),
        ("__syscall_argstr", utap_bi_syscall_argstr as *const u8),
        ("__syscall_retstr", utap_bi_syscall_retstr as *const u8),
        (
            "__syscall_entry_arg",
            utap_bi_syscall_entry_arg as *const u8,
        ),
        ("abs", utap_bi_abs as *const u8),
        ("big_endian2", utap_bi_big_endian2 as *const u8),
        ("big_endian4", utap_bi_big_endian4 as *const u8),
        ("big_endian8", utap_bi_big_endian8 as *const u8),
        ("cpu", utap_bi_cpu as *const u8),
        ("ctime", utap_bi_ctime as *const u8),
        ("egid", utap_bi_egid as *const u8),
        ("euid", utap_bi_euid as *const u8),
        ("execname", utap_bi_execname as *const u8),
        ("gid", utap_bi_gid as *const u8),
        ("ppid", utap_bi_ppid as *const u8),
        ("uid", utap_bi_uid as *const u8),
        ("errno_num", utap_bi_errno_num as *const u8),
        ("error", utap_bi_error as *const u8),
        ("exit", utap_bi_exit as *const u8),
        ("gettimeofday_ms", utap_bi_gettimeofday_ms as *const u8),
        ("gettimeofday_ns", utap_bi_gettimeofday_ns as *const u8),
        ("gettimeofday_s", utap_bi_gettimeofday_s as *const u8),
        ("gettimeofday_us", utap_bi_gettimeofday_us as *const u8),
        ("isinstr", utap_bi_isinstr as *const u8),
        ("max", utap_bi_max as *const u8),
        ("min", utap_bi_min as *const u8),
        ("mdelay", utap_bi_mdelay as *const u8),
        ("pid", utap_bi_pid as *const u8),
        ("pid2execname", utap_bi_pid2execname as *const u8),
        ("pp", utap_bi_pp as *const u8),
        ("__utap_mark", utap_bi_utap_mark as *const u8),
        ("uaddr", utap_bi_uaddr as *const u8),
        ("print_char", utap_bi_print_char as *const u8),
        ("quiesce", utap_bi_quiesce as *const u8),
        ("raise", utap_bi_raise as *const u8),
        ("randint", utap_bi_randint as *const u8),
        ("resume", utap_bi_resume as *const u8),
        ("stop", utap_bi_stop as *const u8),
        ("str_replace", utap_bi_str_replace as *const u8),
        ("stringat", utap_bi_stringat as *const u8),
        ("strlen", utap_bi_strlen as *const u8),
        ("strtol", utap_bi_strtol as *const u8),
        ("substr", utap_bi_substr as *const u8),
        ("syscall_num", utap_bi_syscall_num as *const u8),
        ("target", utap_bi_target as *const u8),
        ("text_str", utap_bi_text_str as *const u8),
        ("text_strn", utap_bi_text_strn as *const u8),
        ("tid", utap_bi_tid as *const u8),
        ("tokenize", utap_bi_tokenize as *const u8),
        ("udelay", utap_bi_udelay as *const u8),
        ("user_char", utap_bi_user_char as *const u8),
        ("user_int", utap_bi_user_int as *const u8),
        ("user_long", utap_bi_user_long as *const u8),
        ("user_short", utap_bi_user_short as *const u8),
        ("user_string", utap_bi_user_string as *const u8),
        ("user_string_n", utap_bi_user_string_n as *const u8),
        (
            "user_string_quoted",
            utap_bi_user_string_quoted as *const u8,
        ),
        ("warn", utap_bi_warn as *const u8),
    ]);
    v
}

/// The shared entry of every `(long) -> string` decoder.
pub fn long_to_string_symbol() -> (&'static str, *const u8) {
    (
        "utap_bi_long_to_string",
        utap_bi_long_to_string as *const u8,
    )
}

#[cfg(test)]
mod tests {
    use super::ctime;

    #[test]
    fn ctime_as_systemtap() {
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime(-1), "Wed Dec 31 23:59:59 1969");
        assert_eq!(ctime(1234567890), "Fri Feb 13 23:31:30 2009");
        assert_eq!(ctime(-2147483648), "Fri Dec 13 20:45:52 1901");
        assert_eq!(ctime(-2147483649), "a long, long time ago...");
        assert_eq!(ctime(2147483647), "Tue Jan 19 03:14:07 2038");
        assert_eq!(ctime(2147483648), "far far in the future...");
    }
}
