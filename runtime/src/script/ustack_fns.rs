//! User stack and symbol builtins: `ubacktrace()`, `print_ubacktrace()`,
//! `sprint_ubacktrace()`, `print_ubacktrace_brief()`, `print_ustack(bt)`,
//! `sprint_ustack(bt)`, `ucallers(n)`, `ustack(n)`, `usymname(addr)`,
//! `usymdata(addr)`, `umodname(addr)`, in SystemTap's formats
//! (`runtime/sym.c`: ` 0xADDR : name+0xOFF/0xSIZE [module]`).
//!
//! The registers are those of the event's thread, which is in a ptrace
//! stop of the tracer thread running the handler (syscall, signal,
//! quiesce... probes); the stack is unwound by CFI (see `crate::unwind`).
//! In a probe without a stopped thread (begin, end, timer) the backtrace is
//! empty, and addresses (of stacks collected earlier) are symbolized in
//! the target process's modules, as they were when it was last unwound,
//! or else in those of any process unwound in the session (a child, an
//! image since replaced by exec: see `crate::unwind`).
//!
//! `sprint_ubacktrace_folded()` and `sprint_ustack_folded(bt)` (utap's)
//! give a stack in the "folded" form of flame graph tools
//! (`main;a;b;spin`): outermost frame first, function names only.

use super::builtins::st;
use super::context::HandlerContext;

fn ids(ctx: *mut HandlerContext) -> (i32, i32) {
    // SAFETY: as for `st`.
    let p = unsafe { &(*ctx).probe };
    (p.pid as i32, p.tid as i32)
}

/// The (rip, rsp, rbp) of the event's thread, in a ptrace stop of this thread.
fn thread_regs(ctx: *mut HandlerContext) -> Option<(u64, u64, u64)> {
    let regs = super::registers::event_regs(ctx)?;
    Some((regs.rip, regs.rsp, regs.rbp))
}

/// The event thread's stack: its pc first, then return addresses.
fn frames(ctx: *mut HandlerContext) -> Vec<u64> {
    let (pid, tid) = ids(ctx);
    let Some((ip, sp, bp)) = thread_regs(ctx) else {
        return Vec::new();
    };
    super::builtins::with_event_memory(ctx, tid, |mem| {
        st(ctx).unwind.backtrace(pid, mem, ip, sp, bp)
    })
}

/// The process whose modules symbolize addresses: the event's, or in a
/// probe without one (begin, end, timer: utap's own pid) the target's.
fn sym_pid(ctx: *mut HandlerContext) -> i32 {
    match ids(ctx).0 {
        pid if pid > 0 && pid as u32 != std::process::id() => pid,
        _ => st(ctx).target as i32,
    }
}

/// `usymdata` of `addr` in the event's process.
fn symdata(ctx: *mut HandlerContext, addr: u64) -> String {
    let pid = sym_pid(ctx);
    st(ctx).unwind.map(pid, addr).symdata(addr)
}

fn hex_list(addrs: &[u64]) -> String {
    let v: Vec<String> = addrs.iter().map(|a| format!("{a:#x}")).collect();
    v.join(" ")
}

/// One ` 0xADDR : name+0xOFF/0xSIZE [module]` line per address.
fn full_lines(ctx: *mut HandlerContext, addrs: &[u64]) -> String {
    let mut out = String::new();
    for &a in addrs {
        out.push_str(&format!(" {a:#x} : {}\n", symdata(ctx, a)));
    }
    out
}

/// The addresses of a `ubacktrace()` string.
fn parse_list(text: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(text)
        .split_whitespace()
        .filter_map(|w| {
            let h = w.strip_prefix("0x").unwrap_or(w);
            u64::from_str_radix(h, 16).ok()
        })
        .collect()
}

fn string(ctx: *mut HandlerContext, text: &str) -> i64 {
    st(ctx).strings.make(text.as_bytes())
}

fn print(ctx: *mut HandlerContext, text: &str) -> i64 {
    let s = st(ctx);
    s.out.extend(text.as_bytes());
    s.flush_if_large();
    0
}

/// `ubacktrace()`: hex addresses separated by spaces.
extern "C" fn utap_bi_ubacktrace(ctx: *mut HandlerContext) -> i64 {
    let f = frames(ctx);
    string(ctx, &hex_list(&f))
}

/// `print_ubacktrace()`.
extern "C" fn utap_bi_print_ubacktrace(ctx: *mut HandlerContext) -> i64 {
    let f = frames(ctx);
    let text = full_lines(ctx, &f);
    print(ctx, &text)
}

/// `sprint_ubacktrace()`: as `print_ubacktrace()`, into a string.
extern "C" fn utap_bi_sprint_ubacktrace(ctx: *mut HandlerContext) -> i64 {
    let f = frames(ctx);
    let text = full_lines(ctx, &f);
    string(ctx, &text)
}

/// `print_ubacktrace_brief()`: `name+0xOFF` per line (the address when
/// there is no symbol).
extern "C" fn utap_bi_print_ubacktrace_brief(ctx: *mut HandlerContext) -> i64 {
    let f = frames(ctx);
    let pid = sym_pid(ctx);
    let mut text = String::new();
    for a in f {
        let map = st(ctx).unwind.map(pid, a);
        match map.symbol_of(a) {
            Some((sym, off, _)) => text.push_str(&format!("{}+{off:#x}\n", sym.shown())),
            None => text.push_str(&format!("{a:#x}\n")),
        }
    }
    print(ctx, &text)
}

/// `print_ustack(bt)`: a `ubacktrace()` string, one full line per address.
extern "C" fn utap_bi_print_ustack(ctx: *mut HandlerContext, bt: i64) -> i64 {
    let addrs = parse_list(st(ctx).strings.get(bt));
    let text = full_lines(ctx, &addrs);
    print(ctx, &text)
}

/// `sprint_ustack(bt)`: as `print_ustack`, into a string.
extern "C" fn utap_bi_sprint_ustack(ctx: *mut HandlerContext, bt: i64) -> i64 {
    let addrs = parse_list(st(ctx).strings.get(bt));
    let text = full_lines(ctx, &addrs);
    string(ctx, &text)
}

/// `ucallers(n)`: the first `n` callers (the frames after the current
/// one), `-1` for all.
extern "C" fn utap_bi_ucallers(ctx: *mut HandlerContext, n: i64) -> i64 {
    let f = frames(ctx);
    let callers = f.get(1..).unwrap_or(&[]);
    let take = if n < 0 {
        callers.len()
    } else {
        callers.len().min(n as usize)
    };
    string(ctx, &hex_list(&callers[..take]))
}

/// `ustack(n)`: element `n` of the backtrace (0: the pc), 0 past the end.
extern "C" fn utap_bi_ustack(ctx: *mut HandlerContext, n: i64) -> i64 {
    let f = frames(ctx);
    usize::try_from(n)
        .ok()
        .and_then(|i| f.get(i))
        .map_or(0, |&a| a as i64)
}

/// `usymname(addr)`: the symbol's name, else the address in hex.
extern "C" fn utap_bi_usymname(ctx: *mut HandlerContext, addr: i64) -> i64 {
    let pid = sym_pid(ctx);
    let name = st(ctx).unwind.map(pid, addr as u64).symname(addr as u64);
    string(ctx, &name)
}

/// `usymdata(addr)`: `name+0xOFF/0xSIZE [module]`.
extern "C" fn utap_bi_usymdata(ctx: *mut HandlerContext, addr: i64) -> i64 {
    let text = symdata(ctx, addr as u64);
    string(ctx, &text)
}

/// `umodname(addr)`: the short name of the module holding `addr`; an
/// error "module cannot be found" outside every module.
extern "C" fn utap_bi_umodname(ctx: *mut HandlerContext, addr: i64) -> i64 {
    let pid = sym_pid(ctx);
    let name = st(ctx)
        .unwind
        .map(pid, addr as u64)
        .module_of(addr as u64)
        .map(|m| m.image.short_name().to_string());
    match name {
        Some(n) => string(ctx, &n),
        None => {
            st(ctx).raise(ctx, "module cannot be found");
            0
        }
    }
}

/// The folded form of a stack (innermost first in `addrs`): names
/// outermost first, joined by `;`. Return addresses (all but the first)
/// are looked up one byte back, inside their call instruction, so that a
/// call ending a function (to a noreturn one) names the caller.
fn folded(ctx: *mut HandlerContext, addrs: &[u64]) -> String {
    let pid = sym_pid(ctx);
    let names: Vec<String> = addrs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &a)| {
            let at = if i == 0 { a } else { a.wrapping_sub(1) };
            match st(ctx).unwind.map(pid, at).symbol_of(at) {
                Some((sym, _, _)) => sym.shown().into_owned(),
                None => format!("{a:#x}"),
            }
        })
        .collect();
    names.join(";")
}

/// `sprint_ubacktrace_folded()`: the current stack, folded.
extern "C" fn utap_bi_sprint_ubacktrace_folded(ctx: *mut HandlerContext) -> i64 {
    let f = frames(ctx);
    let text = folded(ctx, &f);
    string(ctx, &text)
}

/// `sprint_ustack_folded(bt)`: a `ubacktrace()` string, folded.
extern "C" fn utap_bi_sprint_ustack_folded(ctx: *mut HandlerContext, bt: i64) -> i64 {
    let addrs = parse_list(st(ctx).strings.get(bt));
    let text = folded(ctx, &addrs);
    string(ctx, &text)
}

/// The builtins of this file, by script name.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("print_ubacktrace", utap_bi_print_ubacktrace as *const u8),
        (
            "print_ubacktrace_brief",
            utap_bi_print_ubacktrace_brief as *const u8,
        ),
        ("print_ustack", utap_bi_print_ustack as *const u8),
        ("sprint_ubacktrace", utap_bi_sprint_ubacktrace as *const u8),
        ("sprint_ustack", utap_bi_sprint_ustack as *const u8),
        (
            "sprint_ubacktrace_folded",
            utap_bi_sprint_ubacktrace_folded as *const u8,
        ),
        (
            "sprint_ustack_folded",
            utap_bi_sprint_ustack_folded as *const u8,
        ),
        ("ubacktrace", utap_bi_ubacktrace as *const u8),
        ("ucallers", utap_bi_ucallers as *const u8),
        ("umodname", utap_bi_umodname as *const u8),
        ("ustack", utap_bi_ustack as *const u8),
        ("usymdata", utap_bi_usymdata as *const u8),
        ("usymname", utap_bi_usymname as *const u8),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backtrace_strings_round_trip() {
        let a = [0x401136u64, 0x7f0011223344, 0x1];
        let text = hex_list(&a);
        assert_eq!(text, "0x401136 0x7f0011223344 0x1");
        assert_eq!(parse_list(text.as_bytes()), a);
        assert_eq!(parse_list(b""), Vec::<u64>::new());
    }
}
