//! `register(name)` and `u_register(name)`: the user registers of the
//! event's thread, by SystemTap's x86_64 names (`tapset/x86_64/registers.stp`):
//! the 64-bit `rax`.. `r15`, `rip`, `rsp`, `orig_rax`, `eflags`, `xcs`,
//! `xss`; the 32-bit `eax`.. `esp`; the 16-bit `ax`.. `ss`; the 8-bit `al`,
//! `ah`.. `dh`. A narrower register is sign-extended by `register()` and
//! zero-extended by `u_register()`.
//!
//! The thread is in a ptrace stop of the tracer thread running the handler
//! (function, syscall, signal... probes), so its registers are read on
//! demand with `PTRACE_GETREGS`: probes that never ask pay nothing. At a
//! function probe they are those at the probed instruction (`rip` is the
//! probe's address); at a `.return` those after the return (`rax` the
//! return value, `rip` the return address).

use super::builtins::st;
use super::context::HandlerContext;

/// The registers of thread `tid`, stopped and traced by the calling thread.
pub(super) fn thread_regs(tid: i32) -> Option<libc::user_regs_struct> {
    if tid <= 0 || tid as u32 == std::process::id() {
        return None;
    }
    let mut regs = std::mem::MaybeUninit::<libc::user_regs_struct>::zeroed();
    // SAFETY: GETREGS writes one user_regs_struct; it fails (ESRCH) unless
    // `tid` is stopped and traced by the calling thread.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGS,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            regs.as_mut_ptr(),
        )
    };
    // SAFETY: initialised by the successful call.
    (r == 0).then(|| unsafe { regs.assume_init() })
}

/// The registers of the event: those the probe sees at a breakpoint (the
/// thread's own rip is one past the `int3` until the step-over), else the
/// stopped thread's, read on demand.
pub(super) fn event_regs(ctx: *mut HandlerContext) -> Option<libc::user_regs_struct> {
    if let Some(r) = st(ctx).ufunc.as_ref().and_then(|f| f.regs) {
        return Some(r);
    }
    // SAFETY: as for `st`.
    let tid = unsafe { (*ctx).probe.tid } as i32;
    thread_regs(tid)
}

/// Where a named register lives: the 64-bit register holding it, its
/// width in bits and its bit shift (8 for `ah`..`dh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterSlot {
    pub full: &'static str,
    pub bits: u32,
    pub shift: u32,
}

/// SystemTap's x86_64 register names; None for an unknown name.
pub fn lookup(name: &str) -> Option<RegisterSlot> {
    const WIDE: &[&str] = &[
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
        "rsi", "rdi", "orig_rax", "rip", "xcs", "eflags", "rsp", "xss",
    ];
    fn slot(full: &str, bits: u32, shift: u32) -> Option<RegisterSlot> {
        Some(RegisterSlot {
            full: WIDE.iter().find(|w| **w == full).copied()?,
            bits,
            shift,
        })
    }
    if WIDE.contains(&name) {
        return slot(name, 64, 0);
    }
    match name {
        "ebp" | "ebx" | "eax" | "ecx" | "edx" | "esi" | "edi" | "esp" => {
            slot(&format!("r{}", &name[1..]), 32, 0)
        }
        "orig_eax" => slot("orig_rax", 32, 0),
        "eip" => slot("rip", 32, 0),
        "bp" | "bx" | "ax" | "cx" | "dx" | "si" | "di" | "sp" => slot(&format!("r{name}"), 16, 0),
        "orig_ax" => slot("orig_rax", 16, 0),
        "ip" => slot("rip", 16, 0),
        "cs" => slot("xcs", 16, 0),
        "flags" => slot("eflags", 16, 0),
        "ss" => slot("xss", 16, 0),
        "al" | "bl" | "cl" | "dl" => slot(&format!("r{}x", &name[..1]), 8, 0),
        "ah" | "bh" | "ch" | "dh" => slot(&format!("r{}x", &name[..1]), 8, 8),
        _ => None,
    }
}

fn full_value(r: &libc::user_regs_struct, full: &str) -> u64 {
    match full {
        "r15" => r.r15,
        "r14" => r.r14,
        "r13" => r.r13,
        "r12" => r.r12,
        "rbp" => r.rbp,
        "rbx" => r.rbx,
        "r11" => r.r11,
        "r10" => r.r10,
        "r9" => r.r9,
        "r8" => r.r8,
        "rax" => r.rax,
        "rcx" => r.rcx,
        "rdx" => r.rdx,
        "rsi" => r.rsi,
        "rdi" => r.rdi,
        "orig_rax" => r.orig_rax,
        "rip" => r.rip,
        "xcs" => r.cs,
        "eflags" => r.eflags,
        "rsp" => r.rsp,
        _ => r.ss,
    }
}

/// The value of `slot` in `regs`, sign- or zero-extended to 64 bits.
pub fn value(regs: &libc::user_regs_struct, slot: RegisterSlot, signed: bool) -> i64 {
    let raw = full_value(regs, slot.full) >> slot.shift;
    if slot.bits == 64 {
        return raw as i64;
    }
    let unused = 64 - slot.bits;
    let low = raw << unused;
    match signed {
        true => (low as i64) >> unused,
        false => (low >> unused) as i64,
    }
}

fn read(ctx: *mut HandlerContext, name: i64, signed: bool) -> i64 {
    let s = st(ctx);
    let text = String::from_utf8_lossy(s.strings.get(name)).into_owned();
    let Some(regs) = event_regs(ctx) else {
        s.raise(ctx, "cannot access CPU registers in this context");
        return 0;
    };
    match lookup(&text) {
        Some(slot) => value(&regs, slot, signed),
        None => {
            s.raise(ctx, format!("Unknown register: {text}"));
            0
        }
    }
}

/// `register(name)`: signed.
extern "C" fn utap_bi_register(ctx: *mut HandlerContext, name: i64) -> i64 {
    read(ctx, name, true)
}

/// `u_register(name)`: unsigned.
extern "C" fn utap_bi_u_register(ctx: *mut HandlerContext, name: i64) -> i64 {
    read(ctx, name, false)
}

pub fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("register", utap_bi_register as *const u8),
        ("u_register", utap_bi_u_register as *const u8),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs() -> libc::user_regs_struct {
        // SAFETY: plain integers.
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        r.rax = 0xffff_ffff_ffff_8281;
        r.rbx = 0x1234_5678_9abc_def0;
        r.rip = 0x5555_0000_1234;
        r
    }

    #[test]
    fn widths_and_extension_as_systemtap() {
        let r = regs();
        let get = |n: &str, s| value(&r, lookup(n).unwrap(), s);
        assert_eq!(get("rax", true), 0xffff_ffff_ffff_8281u64 as i64);
        assert_eq!(get("eax", true), 0xffff_8281u32 as i32 as i64);
        assert_eq!(get("eax", false), 0xffff_8281);
        assert_eq!(get("ax", true), -32127);
        assert_eq!(get("ax", false), 0x8281);
        assert_eq!(get("al", true), -127);
        assert_eq!(get("al", false), 0x81);
        assert_eq!(get("ah", false), 0x82);
        assert_eq!(get("bh", false), 0xde);
        assert_eq!(get("ebx", false), 0x9abc_def0);
        assert_eq!(get("rip", false), 0x5555_0000_1234);
        assert_eq!(get("ip", false), 0x1234);
        assert!(lookup("r8d").is_none() && lookup("xmm0").is_none());
    }
}
