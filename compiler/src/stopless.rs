//! Which probe handlers can run while their thread is *not* in a ptrace
//! stop: the runtime serves syscall entry probes whose handlers all pass
//! through a seccomp user notification instead of a stop (issue 16; see
//! `utap_runtime::session::notify`). A notification carries the syscall
//! number, its six arguments and the thread id; the thread waits in the
//! kernel, so its memory can be read; the process facts (`pid()`,
//! `execname()`, `uid()`...) come from the runtime's caches. What it cannot
//! give is the thread's registers or any steering of it.
//!
//! The decision is conservative: a handler qualifies only if neither it
//! nor any function it calls (transitively, tapset functions included)
//! calls a builtin that reads registers or the stack (`register`,
//! `uaddr`, `ubacktrace`, `ustack`, DWARF target variables...), resolves
//! code addresses (`usymname` & co.), or controls threads (every guru
//! builtin: `stop`, `raise`, `udelay`...); a `-g` program never qualifies
//! (guru code may write `$argN` or `$return`, which needs the stop).

use crate::builtins;
use crate::program::{Block, ExprKind, Program};
use crate::walk;

/// Builtins that need the thread in a ptrace stop (besides every guru
/// builtin): they read its registers or unwind its stack, or belong to
/// function and marker probes, whose context is set from the stop.
const NEEDS_STOP: &[&str] = &[
    "__dwarf_long",
    "__dwarf_set",
    "__dwarf_string",
    "__utap_mark",
    "print_ubacktrace",
    "print_ubacktrace_brief",
    "print_ustack",
    "probefunc",
    "register",
    "sprint_ubacktrace",
    "sprint_ubacktrace_folded",
    "sprint_ustack",
    "sprint_ustack_folded",
    "u_register",
    "uaddr",
    "ubacktrace",
    "ucallers",
    "umodname",
    "ustack",
    "usymdata",
    "usymname",
];

/// Per probe (by index): true when its handler (conditions, body and every
/// function it calls) can run without a ptrace stop.
pub fn stopless_probes(program: &Program) -> Vec<bool> {
    let mut functions: Vec<Option<bool>> = vec![None; program.functions.len()];
    program
        .probes
        .iter()
        .map(|p| {
            !program.guru
                && p.points
                    .iter()
                    .filter_map(|pt| pt.condition.as_ref())
                    .all(|c| {
                        let mut ok = true;
                        walk::expr(c, &mut |e| ok &= expr_ok(program, &mut functions, &e.kind));
                        ok
                    })
                && block_ok(program, &mut functions, &p.body)
        })
        .collect()
}

fn block_ok(program: &Program, functions: &mut Vec<Option<bool>>, b: &Block) -> bool {
    let mut ok = true;
    walk::block(b, &mut |e| ok &= expr_ok(program, functions, &e.kind));
    ok
}

fn expr_ok(program: &Program, functions: &mut Vec<Option<bool>>, e: &ExprKind) -> bool {
    match e {
        ExprKind::Builtin { name, .. } => builtin_ok(name),
        ExprKind::Call { func, .. } => function_ok(program, functions, func.0 as usize),
        _ => true,
    }
}

fn builtin_ok(name: &str) -> bool {
    let guru = builtins::lookup(name).is_none_or(|b| b.guru);
    !guru && !NEEDS_STOP.contains(&name)
}

/// A function qualifies if its body does; a function being decided (a
/// recursive call) does not, which is conservative.
fn function_ok(program: &Program, functions: &mut Vec<Option<bool>>, id: usize) -> bool {
    if let Some(known) = functions.get(id).copied().flatten() {
        return known;
    }
    let Some(f) = program.functions.get(id) else {
        return false;
    };
    functions[id] = Some(false);
    let ok = block_ok(program, functions, &f.body);
    functions[id] = Some(ok);
    ok
}
