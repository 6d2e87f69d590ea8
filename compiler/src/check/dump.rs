//! `-p2`: the resolved program in SystemTap's pass-2 layout — globals with
//! types, functions with signatures and locals, probes with their concrete
//! points (and syscall sets), the point as written, and locals. Stable:
//! golden tests compare it byte for byte.

use std::fmt::Write as _;

use super::types::type_name;
use crate::program::*;

fn sig(name: &str, ty: Type, keys: Option<&[Type]>) -> String {
    let mut s = format!("{name}:{}", type_name(ty));
    if let Some(keys) = keys {
        let k: Vec<&str> = keys.iter().map(|t| type_name(*t)).collect();
        let _ = write!(s, " [{}]", k.join(", "));
    }
    s
}

fn locals(out: &mut String, locals: &[LocalVar], skip: usize) {
    let rest = &locals[skip.min(locals.len())..];
    if rest.is_empty() {
        return;
    }
    out.push_str("  # locals\n");
    for l in rest {
        let _ = writeln!(out, "  {}", sig(&l.name, l.ty, None));
    }
}

/// The text of one concrete point, with its syscall set if known.
pub fn point(p: &ProbePoint) -> String {
    let mut s = p.text.clone();
    if let PointKind::Process {
        event:
            ProcessEvent::Syscall {
                syscalls: Some(set),
            }
            | ProcessEvent::SyscallReturn {
                syscalls: Some(set),
            },
        ..
    } = &p.kind
    {
        let nrs: Vec<String> = set.iter().map(|n| n.to_string()).collect();
        let _ = write!(s, " /* syscalls {} */", nrs.join(","));
    }
    if p.condition.is_some() {
        s.push_str(" if (...)");
    }
    s
}

/// Renders the program.
pub fn dump(program: &Program) -> String {
    let mut out = String::new();
    if !program.globals.is_empty() {
        out.push_str("# globals\n");
    }
    for g in &program.globals {
        let mut name = g.name.clone();
        if g.wrap {
            name.push('%');
        }
        if let Some(size) = g.size {
            let _ = write!(name, "[{size}]");
        }
        let _ = writeln!(out, "{}", sig(&name, g.ty, g.keys.as_deref()));
    }
    let mut functions: Vec<&FunctionDef> = program.functions.iter().collect();
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    if !functions.is_empty() {
        out.push_str("# functions\n");
    }
    for f in functions {
        let params: Vec<String> = f.locals[..f.params.min(f.locals.len())]
            .iter()
            .map(|l| sig(&l.name, l.ty, None))
            .collect();
        let _ = writeln!(
            out,
            "{}:{} ({})",
            f.name,
            type_name(f.ret),
            params.join(", ")
        );
        locals(&mut out, &f.locals, f.params);
    }
    if !program.probes.is_empty() {
        out.push_str("# probes\n");
    }
    for p in &program.probes {
        let points: Vec<String> = p.points.iter().map(point).collect();
        let _ = writeln!(out, "{} /* <- {} */", points.join(", "), p.name);
        locals(&mut out, &p.locals, 0);
    }
    out
}
