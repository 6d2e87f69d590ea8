//! The builtins DWARF target variables compile to: `__dwarf_long(plan,
//! a, b)` (`$var`, `$p->a[i]`, `@var(..)`, `@cast(addr, ..)->f`),
//! `__dwarf_string(plan, a, b)` (`$var$`, `$$parms`...) and, under `-g`,
//! `__dwarf_set(plan, value, a, b)` (`$var = value`) and
//! `__dwarf_update(plan, op, value, a, b)` (`$var += value`, `$var++`). `a` and `b` are the
//! script's values the plan reads (computed indexes, `@cast`'s address).
//! The plan (see `crate::dwarf::plan`) was built by the checker for each
//! probe site; here it is picked by the firing site (module and link-time
//! pc) and run on the thread's registers and memory.

use crate::dwarf::plan::{EvalError, Final, Machine, Place, Site, UPDATE_POSTFIX, Update, plan_of};

use super::builtins::st;
use super::context::HandlerContext;

/// The event's registers in DWARF order (x86_64): those the probe sees
/// (see `registers::event_regs`), and the thread pointer.
fn dwarf_regs(ctx: *mut HandlerContext) -> Option<([u64; 17], u64)> {
    let g = super::registers::event_regs(ctx)?;
    Some((
        [
            g.rax, g.rdx, g.rcx, g.rbx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11,
            g.r12, g.r13, g.r14, g.r15, g.rip,
        ],
        g.fs_base,
    ))
}

/// The low halves of the stopped thread's xmm registers
/// (`PTRACE_GETFPREGS`; a breakpoint stop leaves them as the function
/// received them).
fn xmm_regs(tid: i32) -> Option<[u64; 16]> {
    let mut fp = std::mem::MaybeUninit::<libc::user_fpregs_struct>::zeroed();
    // SAFETY: GETFPREGS writes one user_fpregs_struct; it fails unless
    // `tid` is stopped and traced by the calling (tracer) thread.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETFPREGS,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            fp.as_mut_ptr(),
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: initialised by the successful call.
    let fp = unsafe { fp.assume_init() };
    let x = &fp.xmm_space;
    Some(std::array::from_fn(|i| {
        u64::from(x[4 * i]) | (u64::from(x[4 * i + 1]) << 32)
    }))
}

/// The plan of this site: the function probe's module and pc, or the
/// site-independent plan (`@cast`) in any probe. With the module's bias.
fn site_of(ctx: *mut HandlerContext, plan: i64) -> Result<(Site, u64), String> {
    let access = plan_of(plan).ok_or_else(|| format!("no target variable plan {plan}"))?;
    let s = st(ctx);
    let Some(uf) = s.ufunc.as_ref() else {
        return match &access.any {
            Some(site) => Ok((site.clone(), 0)),
            None => Err("target variables are only available in function probes".into()),
        };
    };
    let Some(m) = uf
        .modules
        .modules
        .iter()
        .find(|m| m.start <= uf.uaddr && uf.uaddr < m.end)
    else {
        return Err(format!("no module at {:#x}", uf.uaddr));
    };
    let pc = uf.uaddr.wrapping_sub(m.bias);
    match access.site(&m.image.path, pc) {
        Some(site) => Ok((site.clone(), m.bias)),
        None => Err(format!(
            "no target variable plan for {}+{pc:#x}",
            m.image.short_name()
        )),
    }
}

/// Runs `f` with the plan of this site and a machine on the thread.
fn with_site<T>(
    ctx: *mut HandlerContext,
    plan: i64,
    input: [i64; 3],
    f: impl FnOnce(&Machine, &Site) -> Result<T, EvalError>,
) -> Option<T> {
    let s = st(ctx);
    // SAFETY: as for `st`.
    let tid = unsafe { (*ctx).probe.tid } as i32;
    let (site, bias) = match site_of(ctx, plan) {
        Ok(x) => x,
        Err(msg) => {
            s.raise(ctx, msg);
            return None;
        }
    };
    let (regs, tp) = dwarf_regs(ctx).unwrap_or(([0; 17], 0));
    let xmm = if site.uses_xmm() { xmm_regs(tid) } else { None };
    let maxstringlen = s.limits.max_string_len;
    let modules = match (&s.ufunc, site.uses_module_tls()) {
        (Some(uf), true) => Some(uf.modules.clone()),
        _ => None,
    };
    let result = super::builtins::with_event_memory(ctx, tid, |mem| {
        let module_tls = match &modules {
            Some(m) => crate::dwarf::tls::module_block(mem, m, bias, tp),
            None => Err(crate::dwarf::tls::TlsError::Missing("thread-local lookup")),
        };
        let machine = Machine {
            regs,
            bias,
            mem,
            maxstringlen,
            tp,
            input,
            xmm,
            module_tls,
        };
        f(&machine, &site)
    });
    match result {
        Ok(v) => Some(v),
        Err(EvalError::Fault(addr)) => {
            s.raise(ctx, format!("read fault [man error::fault] at {addr:#x}"));
            None
        }
        Err(EvalError::Unavailable) => {
            s.raise(ctx, "target variable not accessible at this address");
            None
        }
        Err(EvalError::Tls(e)) => {
            s.raise(ctx, e.to_string());
            None
        }
    }
}

/// `$var`, `$p->field`, `$a[i][j]`, `@var(..)`, `@cast(..)->f`: a number.
extern "C" fn utap_bi_dwarf_long(ctx: *mut HandlerContext, plan: i64, a: i64, b: i64) -> i64 {
    with_site(ctx, plan, [a, b, 0], |m, site| match site {
        Site::Long(c) => m.long(c),
        Site::Text(_) => Err(EvalError::Unavailable),
    })
    .unwrap_or(0)
}

/// `$var$`, `$$parms`, `$$locals`, `$$vars`, `$$return`: a string.
extern "C" fn utap_bi_dwarf_string(ctx: *mut HandlerContext, plan: i64, a: i64, b: i64) -> i64 {
    let text = with_site(ctx, plan, [a, b, 0], |m, site| match site {
        Site::Text(p) => Ok(m.text(p)),
        Site::Long(_) => Err(EvalError::Unavailable),
    })
    .unwrap_or_default();
    st(ctx).strings.make(text.as_bytes())
}

/// The bytes to store for `value` at a chain's final place: the value's
/// low bytes, or for a bitfield its storage with the bits replaced.
fn stored(m: &Machine, fin: Final, addr: u64, value: i64) -> Result<Vec<u8>, EvalError> {
    match fin {
        Final::Load { size, .. } => Ok(value.to_le_bytes()[..size.clamp(1, 8) as usize].to_vec()),
        Final::Bits { shift, width, .. } => {
            let n = (shift as u32 + width as u32).div_ceil(8).clamp(1, 8) as usize;
            let mut buf = [0u8; 8];
            if m.mem.read(addr, &mut buf[..n]).ok() != Some(n) {
                return Err(EvalError::Fault(addr));
            }
            let old = u64::from_le_bytes(buf);
            let mask = match width {
                64.. => u64::MAX,
                w => ((1u64 << w) - 1) << shift,
            };
            let new = (old & !mask) | (((value as u64) << shift) & mask);
            Ok(new.to_le_bytes()[..n].to_vec())
        }
        _ => Err(EvalError::Unavailable),
    }
}

/// `$var = value` under `-g`: the value is stored where the variable
/// lives in memory (the checker refuses register locations); the result
/// is the value, as for any assignment.
extern "C" fn utap_bi_dwarf_set(
    ctx: *mut HandlerContext,
    plan: i64,
    value: i64,
    a: i64,
    b: i64,
) -> i64 {
    // SAFETY: as for `st`.
    let tid = unsafe { (*ctx).probe.tid } as i32;
    let target = with_site(ctx, plan, [a, b, 0], |m, site| {
        let Site::Long(c) = site else {
            return Err(EvalError::Unavailable);
        };
        match m.place(c)? {
            Place::Memory(addr) => Ok((addr, stored(m, c.fin, addr, value)?)),
            Place::Value(_) | Place::Bytes(..) => Err(EvalError::Unavailable),
        }
    });
    if let Some((addr, bytes)) = target
        && crate::uprobe::mem::write_data(tid, addr, &bytes).is_err()
    {
        let s = st(ctx);
        s.raise(ctx, format!("write fault [man error::fault] at {addr:#x}"));
    }
    value
}

/// `$var OP= value`, `$var++`, `$var--` under `-g`: the variable's value
/// is read, `OP value` applied with the script's integer semantics, and
/// the result stored where it lives in memory; the expression's value is
/// the new one, or the old one for a postfix `++`/`--` (`op` carries
/// `UPDATE_POSTFIX`).
extern "C" fn utap_bi_dwarf_update(
    ctx: *mut HandlerContext,
    plan: i64,
    op: i64,
    value: i64,
    a: i64,
    b: i64,
) -> i64 {
    // SAFETY: as for `st`.
    let tid = unsafe { (*ctx).probe.tid } as i32;
    let Some(update) = Update::from_code(op & !UPDATE_POSTFIX) else {
        st(ctx).raise(ctx, format!("no target variable update operator {op}"));
        return 0;
    };
    let target = with_site(ctx, plan, [a, b, 0], |m, site| {
        let Site::Long(c) = site else {
            return Err(EvalError::Unavailable);
        };
        let Place::Memory(addr) = m.place(c)? else {
            return Err(EvalError::Unavailable);
        };
        let old = m.long(c)?;
        Ok(match update.apply(old, value) {
            Ok(new) => Ok((addr, old, new, stored(m, c.fin, addr, new)?)),
            Err(e) => Err(e),
        })
    });
    let (addr, old, new, bytes) = match target {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            st(ctx).raise(ctx, e.to_string());
            return 0;
        }
        None => return 0,
    };
    if crate::uprobe::mem::write_data(tid, addr, &bytes).is_err() {
        let s = st(ctx);
        s.raise(ctx, format!("write fault [man error::fault] at {addr:#x}"));
    }
    if op & UPDATE_POSTFIX != 0 { old } else { new }
}

pub(crate) fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("__dwarf_long", utap_bi_dwarf_long as *const u8),
        ("__dwarf_string", utap_bi_dwarf_string as *const u8),
        ("__dwarf_set", utap_bi_dwarf_set as *const u8),
        ("__dwarf_update", utap_bi_dwarf_update as *const u8),
    ]
}
