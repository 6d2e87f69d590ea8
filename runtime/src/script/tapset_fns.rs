//! Builtins behind SystemTap's process-level tapset functions that need the
//! runtime: the process's command line, parent and session ids, the probe
//! point's names, the event's arguments and return value, more of the
//! user-memory readers, clocks and time zone, and `system()`. The tapset
//! wrappers around them (`cmdline_str`, `int_arg`, `returnstr`,
//! `local_clock_us`, ...) are script code in `stdlib/`.
//!
//! Same conventions as [`super::builtins`]: one `extern "C"` function per
//! builtin, registered by script name in [`symbols`].

use std::sync::OnceLock;

use crate::memory;
use crate::syscalls;

use super::builtins::{info, st};
use super::context::{HandlerContext, ProbeValues, event};

#[inline]
fn probe<'a>(ctx: *mut HandlerContext) -> &'a ProbeValues {
    unsafe { &(*ctx).probe }
}

fn string(ctx: *mut HandlerContext, bytes: &[u8]) -> i64 {
    st(ctx).strings.make(bytes)
}

// ---- process ---------------------------------------------------------------

/// `pexecname()`: the parent's command name.
extern "C" fn utap_bi_pexecname(ctx: *mut HandlerContext) -> i64 {
    let name = info(ctx).map(|i| i.pexecname.clone()).unwrap_or_default();
    string(ctx, name.as_bytes())
}

/// `pgrp()`: the process group id.
extern "C" fn utap_bi_pgrp(ctx: *mut HandlerContext) -> i64 {
    info(ctx).map_or(0, |i| i.pgrp as i64)
}

/// `sid()`: the session id.
extern "C" fn utap_bi_sid(ctx: *mut HandlerContext) -> i64 {
    info(ctx).map_or(0, |i| i.sid as i64)
}

/// `stp_pid()`: the pid of utap itself (SystemTap: of stapio).
extern "C" fn utap_bi_stp_pid(_: *mut HandlerContext) -> i64 {
    std::process::id() as i64
}

/// The NUL-separated arguments of the event's process, from
/// `/proc/PID/cmdline` (what SystemTap reads from `mm->arg_start`).
fn cmdline(ctx: *mut HandlerContext) -> Vec<Vec<u8>> {
    let pid = probe(ctx).pid;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let raw = raw.strip_suffix(b"\0").unwrap_or(&raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|&b| b == 0).map(<[u8]>::to_vec).collect()
}

/// `cmdline_args(n, m, delim)`: arguments `n` to `m` (`m` -1: to the last;
/// 0 is the program name) joined by `delim`; "" when `n` is past the end.
extern "C" fn utap_bi_cmdline_args(ctx: *mut HandlerContext, n: i64, m: i64, delim: i64) -> i64 {
    let args = cmdline(ctx);
    let delim = st(ctx).strings.get(delim).to_vec();
    let last = if m < 0 { args.len() as i64 - 1 } else { m };
    let mut out = Vec::new();
    for i in n.max(0)..=last {
        let Some(a) = args.get(i as usize) else {
            break;
        };
        if i > n.max(0) {
            out.extend_from_slice(&delim);
        }
        out.extend_from_slice(a);
    }
    string(ctx, &out)
}

/// `cmdline_arg(n)`: argument `n` (0 is the program name), "" if none.
extern "C" fn utap_bi_cmdline_arg(ctx: *mut HandlerContext, n: i64) -> i64 {
    let args = cmdline(ctx);
    let arg = usize::try_from(n)
        .ok()
        .and_then(|i| args.get(i))
        .cloned()
        .unwrap_or_default();
    string(ctx, &arg)
}

// ---- the probe point -------------------------------------------------------------

/// `pn()`: the script-level probe point (alias name, wildcards expanded).
extern "C" fn utap_bi_pn(ctx: *mut HandlerContext) -> i64 {
    super::builtins::point_string(ctx, |p| &p.name)
}

/// `probefunc()`: at a function probe the probed function's name; at a
/// syscall probe the kernel function SystemTap's probe sits on,
/// `__x64_sys_NAME` (x86_64 kernels since 4.17); "" elsewhere, as
/// SystemTap returns for probes without a function.
extern "C" fn utap_bi_probefunc(ctx: *mut HandlerContext) -> i64 {
    let p = *probe(ctx);
    let text = match p.event {
        event::FUNCTION | event::FUNCTION_RETURN => {
            let f = st(ctx).ufunc.as_ref();
            f.map(|f| f.name.to_string()).unwrap_or_default()
        }
        event::SYSCALL | event::SYSCALL_RETURN => {
            let name = syscalls::builtins::syscall_name(p.syscall);
            if name.is_empty() {
                String::new()
            } else {
                format!("__x64_sys_{name}")
            }
        }
        _ => String::new(),
    };
    string(ctx, text.as_bytes())
}

/// `__utap_arg(n)`: the event's argument `n` (1-based) as a raw 64-bit
/// register, what `int_arg`, `ulong_arg`, `pointer_arg`... truncate or
/// extend. The one place that knows where arguments are per kind of event:
/// a syscall event's are the syscall's. An event without arguments, or `n`
/// outside 1..=6, is an error.
extern "C" fn utap_bi_utap_arg(ctx: *mut HandlerContext, n: i64) -> i64 {
    let p = *probe(ctx);
    match p.event {
        event::SYSCALL | event::SYSCALL_RETURN => match usize::try_from(n - 1) {
            Ok(i) if i < p.args.len() => p.args[i],
            _ => {
                st(ctx).raise(ctx, format!("cannot access argument {n} (a syscall has 6)"));
                0
            }
        },
        // The SysV argument registers; from the 7th on the stack is not read.
        event::FUNCTION | event::FUNCTION_RETURN => match usize::try_from(n - 1) {
            Ok(i) if i < p.args.len() => p.args[i],
            _ => {
                st(ctx).raise(
                    ctx,
                    format!("cannot access argument {n} (utap reads the 6 register arguments)"),
                );
                0
            }
        },
        _ => {
            st(ctx).raise(ctx, "cannot access function arguments in this context");
            0
        }
    }
}

/// `is_return()`: 1 in a return probe (a syscall or function return), else 0.
extern "C" fn utap_bi_is_return(ctx: *mut HandlerContext) -> i64 {
    matches!(
        probe(ctx).event,
        event::SYSCALL_RETURN | event::FUNCTION_RETURN
    ) as i64
}

/// `env_var(name)`: the value of environment variable `name` in the
/// current process (from `/proc/PID/environ`: the environment it started
/// or last exec'd with), "" when unset.
extern "C" fn utap_bi_env_var(ctx: *mut HandlerContext, name: i64) -> i64 {
    let pid = probe(ctx).pid;
    let mut key = st(ctx).strings.get(name).to_vec();
    key.push(b'=');
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let value = env
        .split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(key.as_slice()))
        .unwrap_or_default()
        .to_vec();
    string(ctx, &value)
}

/// `returnval()`: the return value of the event (a syscall return's).
extern "C" fn utap_bi_returnval(ctx: *mut HandlerContext) -> i64 {
    let p = *probe(ctx);
    match p.event {
        event::SYSCALL_RETURN | event::FUNCTION_RETURN => p.ret,
        _ => {
            st(ctx).raise(ctx, "cannot access function return value in this context");
            0
        }
    }
}

// ---- user memory -------------------------------------------------------------

/// Reads the string at `addr` of the event's process, or the fault.
fn read_user_string(ctx: *mut HandlerContext, addr: i64) -> Result<Vec<u8>, memory::Fault> {
    let max = st(ctx).limits.max_string_len;
    read_user_string_n(ctx, addr, max as i64)
}

/// At most `n` bytes of the string at `addr` (user_string_n's limits).
fn read_user_string_n(
    ctx: *mut HandlerContext,
    addr: i64,
    n: i64,
) -> Result<Vec<u8>, memory::Fault> {
    let max = st(ctx).limits.max_string_len;
    let fault = memory::Fault {
        addr: addr as u64,
        errno: libc::EFAULT,
    };
    let Some(m) = st(ctx).memory else {
        return Err(fault);
    };
    let mut out = Vec::new();
    // SAFETY: `fire` sets `memory` for the duration of the run only.
    memory::user_string_n(&mut out, unsafe { &*m }, addr as u64, n, max).map(|()| out)
}

/// `user_string_n2(addr, n, err_msg)`: at most `n` bytes, or `err_msg`.
extern "C" fn utap_bi_user_string_n2(ctx: *mut HandlerContext, addr: i64, n: i64, err: i64) -> i64 {
    match read_user_string_n(ctx, addr, n) {
        Ok(s) => string(ctx, &s),
        Err(_) => err,
    }
}

/// `user_string_n_warn(addr, n)`: at most `n` bytes, or "<unknown>" and a
/// warning.
extern "C" fn utap_bi_user_string_n_warn(ctx: *mut HandlerContext, addr: i64, n: i64) -> i64 {
    string_or_warning(ctx, read_user_string_n(ctx, addr, n))
}

/// The `_warn` readers' result: the string, or "<unknown>" and a warning
/// naming the fault.
fn string_or_warning(ctx: *mut HandlerContext, read: Result<Vec<u8>, memory::Fault>) -> i64 {
    match read {
        Ok(s) => string(ctx, &s),
        Err(fault) => {
            st(ctx)
                .diagnostics
                .push(format!("WARNING: {}", fault.string_message()));
            string(ctx, b"<unknown>")
        }
    }
}

/// `user_string_n_quoted(addr, inlen [, outlen])`: at most `inlen` bytes,
/// quoted, cut to `outlen` (default MAXSTRINGLEN) with `"...`; the
/// address as `0x...` when unreadable.
extern "C" fn utap_bi_user_string_n_quoted(
    ctx: *mut HandlerContext,
    addr: i64,
    inlen: i64,
    outlen: i64,
) -> i64 {
    let max = st(ctx).limits.max_string_len;
    let outlen = if outlen <= 0 { max as i64 } else { outlen };
    let out = match st(ctx).memory {
        Some(m) => {
            let mut out = Vec::new();
            // SAFETY: as in read_user_string_n.
            memory::user_string_n_quoted(&mut out, unsafe { &*m }, addr as u64, inlen, outlen, max);
            out
        }
        None => format!("0x{:x}", addr as u64).into_bytes(),
    };
    string(ctx, &out)
}

/// `user_string2(addr, err_msg)`: the string, or `err_msg` on a fault.
extern "C" fn utap_bi_user_string2(ctx: *mut HandlerContext, addr: i64, err: i64) -> i64 {
    match read_user_string(ctx, addr) {
        Ok(s) => string(ctx, &s),
        Err(_) => err,
    }
}

/// `user_string_warn(addr)`: the string, or "<unknown>" and a warning
/// with the fault on a fault.
extern "C" fn utap_bi_user_string_warn(ctx: *mut HandlerContext, addr: i64) -> i64 {
    string_or_warning(ctx, read_user_string(ctx, addr))
}

/// `user_buffer_quoted(addr, inlen, outlen)`: `inlen` bytes at `addr` (NULs
/// included) quoted and escaped as `text_str` does, cut to `outlen`
/// characters with `"...` when longer; the address as `0x...`, unquoted,
/// when unreadable.
extern "C" fn utap_bi_user_buffer_quoted(
    ctx: *mut HandlerContext,
    addr: i64,
    inlen: i64,
    outlen: i64,
) -> i64 {
    let max = st(ctx).limits.max_string_len;
    let len = inlen.clamp(0, max as i64) as usize;
    let mut raw = vec![0u8; len];
    let read = match st(ctx).memory {
        // SAFETY: as in read_user_string.
        Some(m) if len > 0 => unsafe { &*m }.read(addr as u64, &mut raw).ok(),
        Some(_) => Some(0),
        None => None,
    };
    let Some(n) = read else {
        return string(ctx, format!("0x{:x}", addr as u64).as_bytes());
    };
    raw.truncate(n);
    let out = buffer_quoted(&raw, outlen, max);
    string(ctx, &out)
}

/// The quoting of [`utap_bi_user_buffer_quoted`]: each byte escaped like
/// `text_str` (a NUL is `\000`), the whole cut to `outlen` (at most
/// MAXSTRINGLEN - 1) characters, ending in `"...` when it did not fit.
pub fn buffer_quoted(raw: &[u8], outlen: i64, maxstringlen: usize) -> Vec<u8> {
    let room = if outlen <= 0 {
        maxstringlen as i64 - 1
    } else {
        outlen.min(maxstringlen as i64 - 1)
    };
    let mut out = vec![b'"'];
    for &c in raw {
        let mut one = Vec::new();
        crate::values::strings::text_str(&mut one, &[c], maxstringlen);
        if c == 0 {
            one = b"\\000".to_vec();
        }
        out.extend_from_slice(&one);
    }
    out.push(b'"');
    if out.len() as i64 > room {
        out.truncate((room - 4).max(1) as usize);
        out.extend_from_slice(b"\"...");
    }
    out
}

// ---- time ------------------------------------------------------------------

/// `local_clock_ns()` / `cpu_clock_ns(cpu)`: nanoseconds of a monotonic
/// clock (SystemTap: the cpu's `sched_clock`; the CPUs of a machine share
/// CLOCK_MONOTONIC, so `cpu` does not change the answer).
fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

extern "C" fn utap_bi_local_clock_ns(_: *mut HandlerContext) -> i64 {
    monotonic_ns()
}

extern "C" fn utap_bi_cpu_clock_ns(_: *mut HandlerContext, _cpu: i64) -> i64 {
    monotonic_ns()
}

/// `get_cycles()`: the time stamp counter, as SystemTap's reads it.
extern "C" fn utap_bi_get_cycles(_: *mut HandlerContext) -> i64 {
    // SAFETY: rdtsc has no preconditions.
    unsafe { std::arch::x86_64::_rdtsc() as i64 }
}

/// The local time zone when the session started: (seconds west of UTC,
/// abbreviation), as staprun passes them to a SystemTap module.
pub fn time_zone() -> &'static (i64, String) {
    static TZ: OnceLock<(i64, String)> = OnceLock::new();
    TZ.get_or_init(|| {
        // SAFETY: localtime_r writes only the tm we own; tm_zone points to
        // static storage of the C library.
        unsafe {
            let now = libc::time(std::ptr::null_mut());
            let mut tm: libc::tm = std::mem::zeroed();
            if libc::localtime_r(&now, &mut tm).is_null() {
                return (0, "UTC".into());
            }
            let name = if tm.tm_zone.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(tm.tm_zone)
                    .to_string_lossy()
                    .into_owned()
            };
            (-tm.tm_gmtoff, name)
        }
    })
}

/// `tz_gmtoff()`: the local time zone's offset, in seconds west of UTC.
extern "C" fn utap_bi_tz_gmtoff(_: *mut HandlerContext) -> i64 {
    time_zone().0
}

/// `tz_name()`: the local time zone's abbreviation ("UTC", "CET").
extern "C" fn utap_bi_tz_name(ctx: *mut HandlerContext) -> i64 {
    string(ctx, time_zone().1.as_bytes())
}

// ---- system ---------------------------------------------------------------------

/// The most text one scrape may be served (`$value .= ...` beyond it is
/// dropped): a runaway handler must not eat the tracer's memory.
const PROMETHEUS_MAX: usize = 16 << 20;

/// `$value .= s` in `probe prometheus`.
extern "C" fn utap_bi_prometheus_append(ctx: *mut HandlerContext, s: i64) -> i64 {
    let state = st(ctx);
    let room = PROMETHEUS_MAX.saturating_sub(state.prometheus.len());
    let text = state.strings.get(s);
    let text = &text[..text.len().min(room)];
    state.prometheus.extend_from_slice(text);
    0
}

/// `$value = s` in `probe prometheus`.
extern "C" fn utap_bi_prometheus_set(ctx: *mut HandlerContext, s: i64) -> i64 {
    st(ctx).prometheus.clear();
    utap_bi_prometheus_append(ctx, s)
}

/// `system(cmd)`: hands `cmd` to the output side, after this run's output
/// so far, to be run there in the background with `/bin/sh -c`.
extern "C" fn utap_bi_system(ctx: *mut HandlerContext, cmd: i64) -> i64 {
    let state = st(ctx);
    let cmd = state.strings.get(cmd).to_vec();
    if let Some(sink) = state.sink {
        // SAFETY: `sink` is set by `fire_point` for the run, from a live
        // exclusive borrow.
        let sink = unsafe { &mut *sink };
        if !state.out.is_empty() {
            sink.push(state.out.as_bytes());
            state.out.clear();
        }
        sink.system(&cmd);
    }
    0
}

/// Every builtin implemented here, by script name.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("__utap_arg", utap_bi_utap_arg as *const u8),
        ("cmdline_arg", utap_bi_cmdline_arg as *const u8),
        ("cmdline_args", utap_bi_cmdline_args as *const u8),
        ("cpu_clock_ns", utap_bi_cpu_clock_ns as *const u8),
        ("env_var", utap_bi_env_var as *const u8),
        ("get_cycles", utap_bi_get_cycles as *const u8),
        ("is_return", utap_bi_is_return as *const u8),
        ("local_clock_ns", utap_bi_local_clock_ns as *const u8),
        ("pexecname", utap_bi_pexecname as *const u8),
        ("pgrp", utap_bi_pgrp as *const u8),
        ("pn", utap_bi_pn as *const u8),
        ("probefunc", utap_bi_probefunc as *const u8),
        ("returnval", utap_bi_returnval as *const u8),
        ("sid", utap_bi_sid as *const u8),
        ("stp_pid", utap_bi_stp_pid as *const u8),
        ("system", utap_bi_system as *const u8),
        (
            "__prometheus_append",
            utap_bi_prometheus_append as *const u8,
        ),
        ("__prometheus_set", utap_bi_prometheus_set as *const u8),
        ("tz_gmtoff", utap_bi_tz_gmtoff as *const u8),
        ("tz_name", utap_bi_tz_name as *const u8),
        (
            "user_buffer_quoted",
            utap_bi_user_buffer_quoted as *const u8,
        ),
        ("user_string2", utap_bi_user_string2 as *const u8),
        ("user_string_n2", utap_bi_user_string_n2 as *const u8),
        (
            "user_string_n_quoted",
            utap_bi_user_string_n_quoted as *const u8,
        ),
        (
            "user_string_n_warn",
            utap_bi_user_string_n_warn as *const u8,
        ),
        ("user_string_warn", utap_bi_user_string_warn as *const u8),
    ]
}

#[cfg(test)]
mod tests {
    use super::buffer_quoted;

    #[test]
    fn buffers_are_quoted_with_their_nuls_and_cut() {
        assert_eq!(buffer_quoted(b"ab\0c\n", 50, 512), b"\"ab\\000c\\n\"");
        assert_eq!(buffer_quoted(b"abcdefghij", 8, 512), b"\"abc\"...");
        assert_eq!(buffer_quoted(b"", 8, 512), b"\"\"");
    }
}
