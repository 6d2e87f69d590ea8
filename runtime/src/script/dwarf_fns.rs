//! The builtins DWARF target variables compile to: `__dwarf_long(plan,
//! i, j)` (`$var`, `$p->a[i]`) and `__dwarf_string(plan)` (`$var$`,
//! `$$parms`...). The plan (see `crate::dwarf::plan`) was built by the
//! checker for each probe site; here it is picked by the firing site
//! (module and link-time pc) and run on the thread's registers and memory.

use crate::dwarf::plan::{EvalError, Machine, Site, plan_of};

use super::builtins::st;
use super::context::HandlerContext;

/// The event's registers in DWARF order (x86_64): those the probe sees
/// (see `registers::event_regs`).
fn dwarf_regs(ctx: *mut HandlerContext) -> Option<[u64; 17]> {
    let g = super::registers::event_regs(ctx)?;
    Some([
        g.rax, g.rdx, g.rcx, g.rbx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11, g.r12,
        g.r13, g.r14, g.r15, g.rip,
    ])
}

/// Runs `f` with the plan of this site and a machine on the thread.
fn with_site<T>(
    ctx: *mut HandlerContext,
    plan: i64,
    f: impl FnOnce(&Machine, &Site) -> Result<T, EvalError>,
) -> Option<T> {
    let s = st(ctx);
    // SAFETY: as for `st`.
    let tid = unsafe { (*ctx).probe.tid } as i32;
    let Some(uf) = s.ufunc.as_ref() else {
        s.raise(
            ctx,
            "target variables are only available in function probes",
        );
        return None;
    };
    let Some(m) = uf
        .modules
        .modules
        .iter()
        .find(|m| m.start <= uf.uaddr && uf.uaddr < m.end)
    else {
        s.raise(ctx, format!("no module at {:#x}", uf.uaddr));
        return None;
    };
    let pc = uf.uaddr.wrapping_sub(m.bias);
    let access = plan_of(plan);
    let Some(site) = access.as_ref().and_then(|a| a.site(&m.image.path, pc)) else {
        let msg = format!(
            "no target variable plan for {}+{pc:#x}",
            m.image.short_name()
        );
        s.raise(ctx, msg);
        return None;
    };
    let Some(regs) = dwarf_regs(ctx) else {
        s.raise(ctx, "cannot read the thread's registers");
        return None;
    };
    let (bias, maxstringlen) = (m.bias, s.limits.max_string_len);
    let result = super::builtins::with_event_memory(ctx, tid, |mem| {
        let machine = Machine {
            regs,
            bias,
            mem,
            maxstringlen,
        };
        f(&machine, site)
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
    }
}

/// `$var`, `$p->field`, `$a[i][j]`: a number.
extern "C" fn utap_bi_dwarf_long(ctx: *mut HandlerContext, plan: i64, i: i64, j: i64) -> i64 {
    with_site(ctx, plan, |m, site| match site {
        Site::Long(c) => m.long(c, &[i, j]),
        Site::Text(_) => Err(EvalError::Unavailable),
    })
    .unwrap_or(0)
}

/// `$var$`, `$$parms`, `$$locals`, `$$vars`, `$$return`: a string.
extern "C" fn utap_bi_dwarf_string(ctx: *mut HandlerContext, plan: i64) -> i64 {
    let text = with_site(ctx, plan, |m, site| match site {
        Site::Text(p) => Ok(m.text(p)),
        Site::Long(_) => Err(EvalError::Unavailable),
    })
    .unwrap_or_default();
    st(ctx).strings.make(text.as_bytes())
}

pub(crate) fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("__dwarf_long", utap_bi_dwarf_long as *const u8),
        ("__dwarf_string", utap_bi_dwarf_string as *const u8),
    ]
}
