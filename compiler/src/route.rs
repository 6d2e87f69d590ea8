//! Where each probe handler runs: inside the traced program (the data
//! plane, `utap_runtime::dataplane`) or in the tracer at a ptrace stop.
//! This is the one pass that decides it; codegen compiles the in-process
//! handlers a second time for the in-process ABI and the runtime patches
//! syscall sites only for numbers whose every probe runs in process.
//!
//! A handler goes in process when it can run there exactly as in the
//! tracer, with nothing but the shared region (see the data plane's
//! header for why these are the rules):
//! * its points are syscall entries or returns of every process
//!   (`syscall.*`, `process.syscall`, no path or pid filter), or function
//!   entries and returns (`process("P").function("F")` and its `.return`,
//!   `.library(..)` too: the data plane patches the entry with a jump to
//!   a stub, which hijacks the return for return hooks; not `.plt`,
//!   offsets or absolute addresses), or USDT markers whose file is known
//!   before the run (the marker's `nop` is patched the same way; the
//!   stub loads `$arg1`..`$arg6` from registers and constants, and passes
//!   an argument the note keeps in memory as its address, which the
//!   handler reads through the safe load: [`mark_loads`]);
//! * it uses long arithmetic, locals, `if`, `next`, long scalar globals,
//!   arrays of longs keyed by longs and string literals (a string local
//!   only ever holds a literal, a name `syscall_name()` or
//!   `errno_str()` looks up, `execname()`, or `pp()`/`pn()` outside
//!   marker probes; such strings compare with `==` and `!=`), `$syscall`, `$argN`, `$return`, `pid()`,
//!   `tid()`, `cpu()`, `get_cycles()` and the clocks (through the time
//!   stamp counter, where the kernel's clocksource is it), calls of
//!   script functions that follow these rules, `printf`/`print` of those
//!   (records the tracer formats), `<<<` into statistics keyed as those
//!   arrays (read only by begin, end and error; one `@variance` reads
//!   stays in the tracer, its estimate depending on the order of values):
//!   `while` and `for` loops (MAXACTION bounds them, as in the tracer),
//!   target variables whose plan the program can evaluate
//!   (`utap_runtime::dataplane::plans`; through registers at function
//!   entries only, where the common entry stores them): nothing that
//!   builds strings, iterates arrays or controls a thread;
//! * it never reads a global it also writes with `=` or `delete` (no lock
//!   makes the two one step in process; `++`, `+=`, `-=` and a running
//!   maximum `if (x > m[k]) m[k] = x` are atomic, and elements keyed by
//!   `tid()` are the thread's own);
//! * the globals it touches are touched by no handler that stays in the
//!   tracer, except `begin` (before the region is filled from the
//!   script's state), `end` and `error` (after the region is folded back)
//!   and timers ([`runs_held`]: each hit holds the program's threads
//!   with no handler half done, folds the region back, runs, and fills
//!   the region again before the threads go on).
//!
//! A probe that fails a rule stays in the tracer, with the reason, which
//! `-v` prints. `UTAP_INPROC=0` keeps every probe in the tracer.

use std::cell::RefCell;
use std::collections::HashSet;

use crate::ast::{AssignOp, BinOp, StatOp};
use crate::program::{
    Block, ContextVar, Expr, ExprKind, ForeachSource, FormatPiece, GlobalId, LValue, LocalId,
    PointKind, PrintKind, ProbeDef, ProcessEvent, ProcessTarget, Program, Stmt, StmtKind, Type,
};
use crate::walk;
use utap_runtime::elf::sdt::Operand;

/// Builtins the in-process runtime implements (the clock's and `cpu()`
/// under the conditions [`builtin_reason`] checks).
pub const IN_PROCESS_BUILTINS: &[&str] = &["pid", "tid", "get_cycles"];

/// `(long) -> string` builtins that are lookups in a table of names: in
/// process, their answer is a literal.
pub const LOOKUP_BUILTINS: &[&str] = &["syscall_name", "errno_str"];

/// String builtins whose answer the tracer keeps in the thread's block:
/// in process, a canonical handle (`utap_runtime::dataplane::names`).
pub const NAME_BUILTINS: &[&str] = &["execname"];

/// String builtins whose answer goes to the block's string ring
/// (`utap_runtime::dataplane::strings`): bytes read from the program's
/// memory by the safe load, or values the tracer renders as it prints
/// (`__syscall_retstr`, the tapset's `retstr`, depends on the number and
/// the result alone; `__dwarf_string`, `$$parms`, on the numbers the
/// handler reads). Their strings can be kept in a probe's locals and
/// printed, not compared, used as keys or passed on (their handles are not
/// canonical), and not in script functions.
pub const RING_BUILTINS: &[&str] = &[
    "user_string",
    "user_string_n",
    "user_string_quoted",
    "__syscall_retstr",
    "__dwarf_string",
];

/// Builtins that load a value from the program's memory (0 when it cannot
/// be read): in process through the same safe load.
pub const LOAD_BUILTINS: &[&str] = &["user_char", "user_short", "user_int", "user_long"];

/// String builtins fixed by the point that fired (`pp()`, `pn()`): in
/// process, a literal chosen by the probe and point indexes; not in a
/// marker's probe, whose `pp()` names the marker that fired.
pub const POINT_BUILTINS: &[&str] = &["pp", "pn"];

/// What `probefunc()` answers at a point: in process, a literal (a
/// function's), a literal by syscall number (the kernel function of a
/// syscall probe, as the tracer names it), or the name the tracer wrote
/// in the site's hook list (a wildcard's entry sites, resolved at run
/// time: `utap_runtime::dataplane::function::Site`); `None` where only the
/// tracer can say (PLT stubs, offsets, addresses, markers, a wildcard's
/// returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointFunc<'a> {
    Syscall,
    Named(&'a str),
    Site,
}

pub fn point_func(kind: &PointKind) -> Option<PointFunc<'_>> {
    use utap_runtime::session::FunctionSite;
    let PointKind::Process { event, .. } = kind else {
        return None;
    };
    match event {
        ProcessEvent::Syscall { .. } | ProcessEvent::SyscallReturn { .. } => {
            Some(PointFunc::Syscall)
        }
        ProcessEvent::Function(fp) => match &fp.site {
            FunctionSite::Function { name, offset: 0 }
                if !name.is_empty()
                    && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') =>
            {
                Some(PointFunc::Named(name))
            }
            FunctionSite::Function { offset: 0, .. } if !fp.returning => Some(PointFunc::Site),
            _ => None,
        },
        _ => None,
    }
}

/// Builtins that read the kernel's clocks: in process through the time
/// stamp counter (`utap_runtime::dataplane::clock`).
pub const CLOCK_BUILTINS: &[&str] = &[
    "gettimeofday_s",
    "gettimeofday_ms",
    "gettimeofday_us",
    "gettimeofday_ns",
    "local_clock_ns",
    "cpu_clock_ns",
];

/// Why builtin `name` cannot run in process, if it cannot.
fn builtin_reason(name: &str) -> Option<String> {
    use utap_runtime::dataplane::clock;
    if IN_PROCESS_BUILTINS.contains(&name) || LOAD_BUILTINS.contains(&name) {
        return None;
    }
    if CLOCK_BUILTINS.contains(&name) {
        return clock::usable().err().map(|why| {
            format!(
                "calls {name}(), and {why} (the program could not read the clock without a syscall)"
            )
        });
    }
    if name == "cpu" {
        return (!clock::has_rdtscp())
            .then(|| "calls cpu(), and the processor has no rdtscp".into());
    }
    Some(format!("calls {name}()"))
}

/// Where one probe's handler runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    InProcess,
    /// In the tracer, and why not in process.
    Tracer(String),
}

/// The route of every probe, by index.
pub fn routes(program: &Program) -> Vec<Route> {
    let off = std::env::var("UTAP_INPROC").is_ok_and(|v| v == "0");
    let unwinds = unwinds_user_stacks(program);
    let variance = variance_read(program);
    let mut routes: Vec<Route> = program
        .probes
        .iter()
        .map(|p| match off {
            true => Route::Tracer("UTAP_INPROC=0".into()),
            false => first_reason(program, p, unwinds)
                .or_else(|| variance_reason(program, p, &variance))
                .or_else(|| split_update_reason(program, p))
                .map_or(Route::InProcess, Route::Tracer),
        })
        .collect();
    // Globals shared with a handler that stays in the tracer keep their
    // in-process users in the tracer too, until nothing changes.
    loop {
        let tracer_globals = tracer_touched(program, &routes);
        let tracer_prints = tracer_prints(program, &routes);
        let mut changed = false;
        for (i, p) in program.probes.iter().enumerate() {
            if routes[i] != Route::InProcess {
                continue;
            }
            if tracer_prints && probe_prints(program, p) {
                routes[i] = Route::Tracer(
                    "prints, as a handler that runs in the tracer does (the program's output \
                     would come out of order with the tracer's)"
                        .into(),
                );
                changed = true;
                continue;
            }
            if let Some(g) = touched(program, p)
                .into_iter()
                .find(|g| tracer_globals.contains(g))
            {
                let name = &program.globals[g.0 as usize].name;
                routes[i] = Route::Tracer(format!(
                    "global '{name}' is also used by a handler that runs in the tracer"
                ));
                changed = true;
            }
        }
        if !changed {
            return routes;
        }
    }
}

/// Whether `b` prints (`printf`, `print` and their forms).
fn prints(b: &Block) -> bool {
    let mut found = false;
    walk::block(b, &mut |e| {
        found |= matches!(e.kind, ExprKind::Print { .. })
    });
    found
}

/// Whether a handler that runs in the tracer while the program runs (not
/// begin, end, error or a timer), or a script function one calls, prints: the
/// data plane's output is read from the program's rings every few
/// milliseconds, so lines the two routes print while the program runs
/// would not keep the order of their hits.
fn tracer_prints(program: &Program, routes: &[Route]) -> bool {
    program.probes.iter().zip(routes).any(|(p, route)| {
        *route != Route::InProcess && !outside_the_run(p) && probe_prints(program, p)
    })
}

/// Whether `p`'s handler or a script function it calls prints.
fn probe_prints(program: &Program, p: &ProbeDef) -> bool {
    prints(&p.body)
        || called_functions(program, p)
            .into_iter()
            .any(|f| prints(&program.functions[f].body))
}

/// The script functions `p`'s handler and conditions call, directly or
/// through other functions.
pub fn called_functions(program: &Program, p: &ProbeDef) -> Vec<usize> {
    let mut calls: Vec<usize> = Vec::new();
    let mut visit = |e: &Expr| called(e, &mut calls);
    for c in p.points.iter().filter_map(|pt| pt.condition.as_ref()) {
        walk::expr(c, &mut visit);
    }
    walk::block(&p.body, &mut visit);
    let mut seen = Vec::new();
    while let Some(f) = calls.pop() {
        if seen.contains(&f) || f >= program.functions.len() {
            continue;
        }
        seen.push(f);
        walk::block(&program.functions[f].body, &mut |e| called(e, &mut calls));
    }
    seen
}

/// A timer probe (`timer.s(N)`, `timer.ms(N)`, `timer.hz(N)`...): it
/// runs in the tracer, between the program's steps. Where it touches a
/// global the in-process handlers touch, or prints, each hit holds every
/// thread of the program out of any handler, prints what the program
/// printed so far, folds the region into the script's state, runs, and
/// fills the region from that state again (`utap_runtime::dataplane`'s
/// held runs): the handlers on both sides then see one state, and the
/// output keeps the order of the hits. Its writes need no rule: what the
/// fill cannot key by a literal gets a name handle.
pub fn runs_held(p: &ProbeDef) -> bool {
    !p.points.is_empty()
        && p.points
            .iter()
            .all(|pt| matches!(pt.kind, PointKind::Timer { .. }))
}

/// By probe: whether its hits must run held ([`runs_held`]) because it
/// touches a global an in-process handler touches, or prints while
/// in-process handlers print.
pub fn held_probes(program: &Program, routes: &[Route]) -> Vec<bool> {
    let mut shared = HashSet::new();
    let mut inside_prints = false;
    for (p, route) in program.probes.iter().zip(routes) {
        if *route == Route::InProcess {
            shared.extend(touched(program, p));
            inside_prints |= probe_prints(program, p);
        }
    }
    program
        .probes
        .iter()
        .map(|p| {
            runs_held(p)
                && (touched(program, p).iter().any(|g| shared.contains(g))
                    || (inside_prints && probe_prints(program, p)))
        })
        .collect()
}

/// A begin, end or error probe: it runs before the region is filled or
/// after it is folded back and its output drained; or a timer, which
/// runs held (see [`runs_held`]).
fn outside_the_run(p: &ProbeDef) -> bool {
    if runs_held(p) {
        return true;
    }
    p.points.iter().all(|pt| {
        matches!(
            pt.kind,
            PointKind::Begin(_) | PointKind::End(_) | PointKind::Error(_) | PointKind::Never
        )
    })
}

/// Whether any handler or function of the script unwinds a user stack
/// (`ubacktrace()`, `print_ustack()`...): the unwinder sees through the
/// tracer's hijacked returns, not the data plane's return stub, so return
/// probes then stay in the tracer.
fn unwinds_user_stacks(program: &Program) -> bool {
    let mut found = false;
    let mut visit = |e: &Expr| {
        if let ExprKind::Builtin { name, .. } = &e.kind {
            found |= ["ubacktrace", "ustack", "ucallers"]
                .iter()
                .any(|w| name.contains(w));
        }
    };
    for p in &program.probes {
        walk::block(&p.body, &mut visit);
    }
    for f in &program.functions {
        walk::block(&f.body, &mut visit);
    }
    found
}

/// Why `p` cannot run in process, if it cannot.
fn first_reason(program: &Program, p: &ProbeDef, unwinds: bool) -> Option<String> {
    if program.guru {
        return Some("guru mode (-g)".into());
    }
    let returns = p.points.iter().any(|pt| {
        matches!(&pt.kind, PointKind::Process { event: ProcessEvent::Function(fp), .. } if fp.returning)
    });
    if unwinds && returns {
        return Some(
            "the script unwinds user stacks, which see through the tracer's returns only".into(),
        );
    }
    for pt in &p.points {
        let ok = match &pt.kind {
            PointKind::Process {
                target: ProcessTarget::Any,
                event: ProcessEvent::Syscall { .. } | ProcessEvent::SyscallReturn { .. },
            } => true,
            PointKind::Process {
                event: ProcessEvent::Function(fp),
                ..
            } => function_entry(fp) || is_mark(fp),
            _ => false,
        };
        if !ok {
            return Some(format!(
                "{} is neither a syscall probe of every process nor a function's entry or marker",
                pt.text
            ));
        }
        if let PointKind::Process {
            event: ProcessEvent::Function(fp),
            ..
        } = &pt.kind
            && is_mark(fp)
            && let Some(why) = mark_reason(&pt.kind, &pt.text)
        {
            return Some(why);
        }
    }
    if let Err(why) = mark_loads(p) {
        return Some(why);
    }
    let mut why = None;
    let rules = Rules {
        program,
        read_locals: read_locals(p),
        visiting: RefCell::new(Vec::new()),
        marks: p.points.iter().any(|pt| {
            matches!(&pt.kind, PointKind::Process { event: ProcessEvent::Function(fp), .. } if is_mark(fp))
        }),
        funcs: p.points.iter().all(|pt| point_func(&pt.kind).is_some()),
        entries: p.points.iter().all(|pt| {
            matches!(&pt.kind, PointKind::Process { event: ProcessEvent::Function(fp), .. } if function_entry(fp) && !fp.returning)
        }),
    };
    for c in p.points.iter().filter_map(|pt| pt.condition.as_ref()) {
        expr_reason(&rules, c, &mut why);
    }
    block_reason(&rules, &p.body, &mut why);
    why
}

/// The program, and the script functions whose bodies are being checked
/// (a recursive call is as good as the function: MAXNESTING bounds it in
/// process as in the tracer).
struct Rules<'a> {
    program: &'a Program,
    /// The probe's locals that may hold a string read from the program.
    read_locals: HashSet<LocalId>,
    visiting: RefCell<Vec<usize>>,
    /// The probe has marker points (see [`POINT_BUILTINS`]).
    marks: bool,
    /// Every point of the probe fixes `probefunc()` ([`point_func`]).
    funcs: bool,
    /// Every point is a function's entry (its registers are stored for
    /// target variables, see [`target_var_reason`]).
    entries: bool,
}

impl Rules<'_> {
    /// Whether `e` is a string read from the program: a read builtin, or
    /// a local of the probe's body that may hold one (in a function's
    /// body, whose locals are its own, neither is allowed).
    fn read_string(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Builtin { name, .. } => RING_BUILTINS.contains(name),
            ExprKind::Load(LValue::Local(l)) => {
                self.visiting.borrow().is_empty() && self.read_locals.contains(l)
            }
            _ => false,
        }
    }
}

/// The locals of `p`'s body assigned a string read from the program, or
/// another such local (to a fixed point).
fn read_locals(p: &ProbeDef) -> HashSet<LocalId> {
    let mut out: HashSet<LocalId> = HashSet::new();
    loop {
        let before = out.len();
        walk::block(&p.body, &mut |e| {
            if let ExprKind::Assign {
                op: AssignOp::Assign,
                target: LValue::Local(l),
                value,
            } = &e.kind
            {
                let read = match &value.kind {
                    ExprKind::Builtin { name, .. } => RING_BUILTINS.contains(name),
                    ExprKind::Load(LValue::Local(m)) => out.contains(m),
                    _ => false,
                };
                if read {
                    out.insert(*l);
                }
            }
        });
        if out.len() == before {
            return out;
        }
    }
}

/// A string where a read one may go (a local's value, a printed value):
/// a read builtin's arguments are longs; any other string is as for a
/// key.
fn string_value_reason(program: &Rules, e: &Expr, why: &mut Option<String>) {
    if !program.read_string(e) {
        return literal_reason(program, e, why);
    }
    if let ExprKind::Builtin { name, args } = &e.kind {
        if *name == "__dwarf_string"
            && let Some(r) = target_text_reason(program, args)
        {
            *why = Some(r);
            return;
        }
        args.iter().for_each(|a| expr_reason(program, a, why));
    }
}

/// Why a target variable's text (`$$parms`, `$$vars`:
/// `__dwarf_string(plan, a, b)`) cannot be made in process: as for a
/// number ([`target_var_reason`]), by `utap_runtime::dataplane::plans::text`.
fn target_text_reason(program: &Rules, args: &[Expr]) -> Option<String> {
    use utap_runtime::dataplane::plans;
    let Some(ExprKind::Long(id)) = args.first().map(|a| &a.kind) else {
        return Some("prints a target variable with no plan".into());
    };
    match plans::text(*id) {
        Err(why) => Some(format!("prints a target variable's text that {why}")),
        Ok((_, regs)) if regs && !program.entries => {
            Some("prints a target variable's registers outside a function's entry".into())
        }
        Ok(_) => None,
    }
}

impl std::ops::Deref for Rules<'_> {
    type Target = Program;
    fn deref(&self) -> &Program {
        self.program
    }
}

/// Why script function `f` cannot run in process, if it cannot: its body
/// follows a handler's rules (a `return` of a long, or of a string that
/// can only be a literal).
fn function_reason(rules: &Rules, f: usize, why: &mut Option<String>) {
    if rules.visiting.borrow().contains(&f) {
        return;
    }
    let Some(func) = rules.program.functions.get(f) else {
        *why = Some("calls a script function it cannot find".into());
        return;
    };
    rules.visiting.borrow_mut().push(f);
    block_reason(rules, &func.body, why);
    rules.visiting.borrow_mut().pop();
    if let Some(w) = why.take() {
        *why = Some(format!("calls {}(), which {w}", func.name));
    }
}

/// A function's entry or return (`.function("F")`, `.return`, also
/// through `.library`), which the data plane can serve with a jump at the
/// entry; not a marker, a PLT entry, an offset or an absolute address.
fn function_entry(fp: &utap_runtime::session::FunctionPoint) -> bool {
    use utap_runtime::session::FunctionSite;
    matches!(fp.site, FunctionSite::Function { offset: 0, .. })
}

fn is_mark(fp: &utap_runtime::session::FunctionPoint) -> bool {
    matches!(fp.site, utap_runtime::session::FunctionSite::Mark { .. })
}

/// Why a marker point's hits cannot be served in process: its file is
/// known only at run time (`process.mark`, a library named without its
/// path). Its arguments are [`mark_loads`]'s, over the whole probe.
fn mark_reason(kind: &PointKind, text: &str) -> Option<String> {
    crate::check::marks::operands(kind)
        .is_none()
        .then(|| format!("{text}: the marker's file is known only at run time"))
}

/// The arguments `p`'s handler reads (0-based) that its markers keep in
/// memory (`disp(base, index, scale)` or `sym(%rip)`), with the size and
/// signedness to load: the data plane's marker entry passes such an
/// argument's address, and the in-process handler reads it through the
/// safe load (`$argN` becomes `user_int($argN)` and the like). An
/// argument some marker keeps in memory and another in a register, or in
/// memory of another size, cannot be compiled one way: an error saying
/// which.
pub fn mark_loads(p: &ProbeDef) -> Result<Vec<(usize, u8, bool)>, String> {
    let read = args_read(p);
    let mut out = Vec::new();
    for &n in &read {
        let mut kinds = HashSet::new();
        for pt in &p.points {
            for (_, args) in crate::check::marks::operands(&pt.kind).unwrap_or_default() {
                let kind = match args.get(n).map(|a| (&a.operand, a.size, a.signed)) {
                    Some((Operand::Mem { .. } | Operand::Symbol { .. }, size, signed)) => {
                        Some((size, signed))
                    }
                    _ => None,
                };
                kinds.insert(kind);
            }
        }
        match kinds.len() {
            0 | 1 => {}
            _ => {
                return Err(format!(
                    "reads $arg{}, which its markers keep in different places",
                    n + 1
                ));
            }
        }
        if let Some(Some((size, signed))) = kinds.into_iter().next() {
            out.push((n, size, signed));
        }
    }
    let all_marks = p.points.iter().all(|pt| {
        matches!(&pt.kind, PointKind::Process { event: ProcessEvent::Function(fp), .. } if is_mark(fp))
    });
    if let Some((n, ..)) = out.first()
        && !all_marks
    {
        return Err(format!(
            "reads $arg{}, which a marker keeps in memory, beside points that are not markers",
            n + 1
        ));
    }
    Ok(out)
}

/// Why a target variable (`__dwarf_long(plan, a, b)`) cannot be read in
/// process: its plan is one the program cannot evaluate
/// (`utap_runtime::dataplane::plans`), or it reads registers outside a
/// function's entry (the function common entry stores them; a return
/// or a marker does not).
fn target_var_reason(program: &Rules, args: &[Expr]) -> Option<String> {
    use utap_runtime::dataplane::plans;
    let Some(ExprKind::Long(id)) = args.first().map(|a| &a.kind) else {
        return Some("reads a target variable with no plan".into());
    };
    match plans::plan(*id) {
        Err(why) => Some(format!("reads a target variable that {why}")),
        Ok(p) if p.reads_regs && !program.entries => {
            Some("reads a target variable's registers outside a function's entry".into())
        }
        Ok(_) => None,
    }
}

/// The `$argN` (0-based) a probe's handler and conditions read.
fn args_read(p: &ProbeDef) -> Vec<usize> {
    let mut out = Vec::new();
    let mut visit = |e: &Expr| {
        if let ExprKind::Context(ContextVar::Arg(n)) = e.kind
            && !out.contains(&usize::from(n))
        {
            out.push(usize::from(n));
        }
    };
    for c in p.points.iter().filter_map(|pt| pt.condition.as_ref()) {
        walk::expr(c, &mut visit);
    }
    walk::block(&p.body, &mut visit);
    out
}

fn block_reason(program: &Rules, b: &Block, why: &mut Option<String>) {
    for s in &b.stmts {
        stmt_reason(program, s, why);
    }
}

fn stmt_reason(program: &Rules, s: &Stmt, why: &mut Option<String>) {
    if why.is_some() {
        return;
    }
    match &s.kind {
        StmtKind::Expr(e) => expr_reason(program, e, why),
        StmtKind::Block(b) => block_reason(program, b, why),
        StmtKind::If { cond, then, else_ } => {
            expr_reason(program, cond, why);
            stmt_reason(program, then, why);
            if let Some(e) = else_ {
                stmt_reason(program, e, why);
            }
        }
        StmtKind::Next => {}
        StmtKind::Delete(lv) => match lv {
            LValue::Elem { array, keys } if long_array(program, *array) => {
                keys.iter().for_each(|k| key_reason(program, k, why))
            }
            _ => *why = Some("deletes something other than an element of an array of longs".into()),
        },
        // Bounded by MAXACTION, counted at each back-edge as in the tracer.
        StmtKind::While { cond, body } => {
            expr_reason(program, cond, why);
            stmt_reason(program, body, why);
        }
        StmtKind::For {
            init,
            cond,
            step,
            body,
        } => {
            for e in [init, cond, step].into_iter().flatten() {
                expr_reason(program, e, why);
            }
            stmt_reason(program, body, why);
        }
        StmtKind::Foreach(_) => *why = Some("has a foreach loop".into()),
        StmtKind::Try { .. } => *why = Some("has try/catch".into()),
        // Only in functions (the parser refuses it in a probe).
        StmtKind::Return(value) => {
            if let Some(v) = value {
                key_reason(program, v, why);
            }
        }
        StmtKind::Break | StmtKind::Continue => {}
    }
}

fn is_long_scalar(program: &Program, g: GlobalId) -> bool {
    let v = &program.globals[g.0 as usize];
    v.keys.is_none() && v.ty == Type::Long
}

fn long_array(program: &Program, g: GlobalId) -> bool {
    let v = &program.globals[g.0 as usize];
    v.keys.is_some() && v.ty == Type::Long && !v.wrap
}

/// A key: a long, or a string that can only be a literal.
fn key_reason(program: &Rules, k: &Expr, why: &mut Option<String>) {
    match k.ty {
        Type::String => literal_reason(program, k, why),
        _ => expr_reason(program, k, why),
    }
}

/// String values in process are literals only (their handles are the
/// literal table's, which the tracer reads back).
/// A lookup's answer is one of its names, each a literal of the compile.
fn literal_reason(program: &Rules, e: &Expr, why: &mut Option<String>) {
    if program.read_string(e) {
        *why = Some(
            "compares, keys or passes on a string read from the program (in process such strings are only kept in the probe's locals and printed)"
                .into(),
        );
        return;
    }
    match &e.kind {
        ExprKind::Str(_) | ExprKind::Load(LValue::Local(_)) => {}
        ExprKind::Builtin { name, args } if LOOKUP_BUILTINS.contains(name) => {
            args.iter().for_each(|a| expr_reason(program, a, why))
        }
        ExprKind::Builtin { name, .. } if NAME_BUILTINS.contains(name) => {}
        ExprKind::Builtin { name, .. } if POINT_BUILTINS.contains(name) && !program.marks => {}
        ExprKind::Builtin { name, .. } if *name == "probefunc" && program.funcs => {}
        _ => *why = Some("makes a string that is not a literal".into()),
    }
}

fn expr_reason(program: &Rules, e: &Expr, why: &mut Option<String>) {
    if why.is_some() {
        return;
    }
    if e.ty == Type::String {
        match &e.kind {
            ExprKind::Assign {
                op: AssignOp::Assign,
                target: LValue::Local(_),
                value,
            } => string_value_reason(program, value, why),
            _ => literal_reason(program, e, why),
        }
        return;
    }
    if !matches!(e.ty, Type::Long | Type::Void) {
        *why = Some("uses statistics or histograms".into());
        return;
    }
    match &e.kind {
        ExprKind::Long(_) => {}
        ExprKind::Str(_) => {}
        ExprKind::Context(cv) => {
            if !matches!(
                cv,
                ContextVar::Syscall | ContextVar::Arg(0..=5) | ContextVar::Return
            ) {
                *why = Some("reads a context variable the data plane does not have".into());
            }
        }
        ExprKind::Load(lv) => lvalue_reason(program, lv, false, why),
        ExprKind::Unary { expr, .. } => expr_reason(program, expr, why),
        ExprKind::Binary { op, lhs, rhs } => {
            if lhs.ty == Type::String && matches!(op, BinOp::Eq | BinOp::Ne) {
                // Handles are canonical: equal strings, equal words.
                literal_reason(program, lhs, why);
                literal_reason(program, rhs, why);
                return;
            }
            if lhs.ty == Type::String || rhs.ty == Type::String || *op == BinOp::Concat {
                *why = Some("orders or joins strings".into());
                return;
            }
            expr_reason(program, lhs, why);
            expr_reason(program, rhs, why);
        }
        ExprKind::Ternary { cond, then, else_ } => {
            for x in [cond, then, else_] {
                expr_reason(program, x, why);
            }
        }
        ExprKind::Assign { op, target, value } => {
            let array_add = matches!(target, LValue::Elem { .. }) && *op == AssignOp::Add;
            let scalar_add =
                matches!(target, LValue::Global(_)) && matches!(op, AssignOp::Add | AssignOp::Sub);
            if *op != AssignOp::Assign
                && !array_add
                && !scalar_add
                && !matches!(target, LValue::Local(_))
            {
                *why = Some("updates a global with an operator other than =, += or -=".into());
                return;
            }
            lvalue_reason(program, target, true, why);
            expr_reason(program, value, why);
        }
        ExprKind::IncDec { target, .. } => lvalue_reason(program, target, true, why),
        ExprKind::In { array, keys } => {
            if !long_array(program, *array) {
                *why = Some("tests membership of an array that is not of longs".into());
                return;
            }
            keys.iter().for_each(|k| key_reason(program, k, why));
        }
        ExprKind::Builtin { name, args } if *name == "__dwarf_long" => {
            if let Some(r) = target_var_reason(program, args) {
                *why = Some(r);
                return;
            }
            args.iter().for_each(|a| expr_reason(program, a, why));
        }
        ExprKind::Builtin { name, args } => {
            if let Some(r) = builtin_reason(name) {
                *why = Some(r);
                return;
            }
            args.iter().for_each(|a| expr_reason(program, a, why));
        }
        ExprKind::Call { func, args } => {
            args.iter().for_each(|a| key_reason(program, a, why));
            function_reason(program, func.0 as usize, why);
        }
        ExprKind::Wildcard => *why = Some("uses an array slice".into()),
        ExprKind::Print { kind, format, args } => {
            let delimited = matches!(kind, PrintKind::Printd | PrintKind::Printdln);
            print_reason(program, format.as_deref(), delimited, args, why)
        }
        ExprKind::StatAdd { target, value } => {
            stat_target_reason(program, target, why);
            expr_reason(program, value, why);
        }
        ExprKind::StatGet { .. } | ExprKind::Hist { .. } | ExprKind::HistBucket { .. } => {
            *why = Some("reads statistics while the program runs".into())
        }
    }
}

/// `s <<< v` and `a[k] <<< v`: a statistic global, keyed as arrays of
/// longs are.
fn stat_target_reason(program: &Rules, lv: &LValue, why: &mut Option<String>) {
    match lv {
        LValue::Global(g) if program.globals[g.0 as usize].ty == Type::Stats => {}
        LValue::Elem { array, keys } if program.globals[array.0 as usize].ty == Type::Stats => {
            keys.iter().for_each(|k| key_reason(program, k, why))
        }
        _ => *why = Some("adds to something other than a statistic global".into()),
    }
}

/// Statistics some handler or function reads with `@variance`: SystemTap's
/// running estimate depends on the order the values came in, which
/// threads adding in the program at once do not have, so their adders
/// stay in the tracer (count, sum, min, max and histograms do not depend
/// on the order).
fn variance_read(program: &Program) -> HashSet<GlobalId> {
    let mut out = HashSet::new();
    walk::program(program, &mut |e| {
        if let ExprKind::StatGet {
            op: StatOp::Variance,
            target: LValue::Global(g) | LValue::Elem { array: g, .. },
        } = &e.kind
        {
            out.insert(*g);
        }
    });
    out
}

/// Why `p` cannot add in process to the statistics in `variance`.
fn variance_reason(
    program: &Program,
    p: &ProbeDef,
    variance: &HashSet<GlobalId>,
) -> Option<String> {
    let mut found = None;
    walk::block(&p.body, &mut |e| {
        if let ExprKind::StatAdd {
            target: LValue::Global(g) | LValue::Elem { array: g, .. },
            ..
        } = &e.kind
            && variance.contains(g)
            && found.is_none()
        {
            found = Some(format!(
                "adds to statistic '{}', which @variance reads (its estimate depends on the \
                 order of the values)",
                program.globals[g.0 as usize].name
            ));
        }
    });
    found
}

/// Why `p` cannot update a global in process, if it reads one it also
/// writes by a plain `=` or `delete`. The tracer runs such a handler
/// under the global's lock, as SystemTap does; in process there is no
/// lock (a thread preempted holding one would stall the others), so
/// another thread could update the global between the read and the
/// write, and an update would be lost. `++`, `+=` and `-=` are one atomic
/// step in process and do not count; nor do elements keyed by `tid()`
/// (or a local holding only it), which only the thread itself touches.
fn split_update_reason(program: &Program, p: &ProbeDef) -> Option<String> {
    let (mut reads, mut writes) = (HashSet::new(), HashSet::new());
    let conditions = p.points.iter().filter_map(|pt| pt.condition.as_ref());
    note_accesses(&p.body, conditions, &mut reads, &mut writes);
    for f in called_functions(program, p) {
        note_accesses(&program.functions[f].body, None, &mut reads, &mut writes);
    }
    let mut both: Vec<GlobalId> = reads.intersection(&writes).copied().collect();
    both.sort_by_key(|g| g.0);
    both.first().map(|g| {
        format!(
            "reads global '{}' and writes it with = or delete, which the data plane cannot do \
             as one step (another thread could update it in between)",
            program.globals[g.0 as usize].name
        )
    })
}

/// Notes the globals body `b` (and the conditions of its probe's points)
/// reads and those it writes in a step of its own, leaving out the writes
/// of running maxima ([`max_update`]).
fn note_accesses<'a>(
    b: &'a Block,
    conditions: impl IntoIterator<Item = &'a Expr>,
    reads: &mut HashSet<GlobalId>,
    writes: &mut HashSet<GlobalId>,
) {
    let mine = tid_locals(b);
    let mut maxes: HashSet<*const Expr> = HashSet::new();
    let mut visit = |n: walk::Node| {
        match n {
            walk::Node::Stmt(st) => {
                if let Some(m) = max_update(st) {
                    maxes.insert(m.assign);
                }
            }
            walk::Node::Expr(e) if maxes.contains(&(e as *const Expr)) => return,
            walk::Node::Expr(_) => {}
        }
        access(n, &mine, reads, writes)
    };
    for c in conditions {
        walk::expr(c, &mut |e| visit(walk::Node::Expr(e)));
    }
    walk::nodes(b, &mut visit);
}

/// Notes the globals node `n` reads and those it writes in a step of its
/// own (see [`split_update_reason`]).
fn access(
    n: walk::Node,
    mine: &HashSet<LocalId>,
    reads: &mut HashSet<GlobalId>,
    writes: &mut HashSet<GlobalId>,
) {
    let is_tid = |k: &Expr| {
        is_tid(k) || matches!(&k.kind, ExprKind::Load(LValue::Local(l)) if mine.contains(l))
    };
    let shared = |lv: &LValue| match lv {
        LValue::Global(g) => Some(*g),
        LValue::Elem { array, keys } if !keys.iter().any(is_tid) => Some(*array),
        _ => None,
    };
    match n {
        walk::Node::Stmt(Stmt {
            kind: StmtKind::Delete(lv),
            ..
        }) => writes.extend(shared(lv)),
        walk::Node::Expr(e) => match &e.kind {
            ExprKind::Load(lv) => reads.extend(shared(lv)),
            ExprKind::In { array, keys } if !keys.iter().any(is_tid) => {
                reads.insert(*array);
            }
            ExprKind::Assign {
                op: AssignOp::Assign,
                target,
                ..
            } => writes.extend(shared(target)),
            _ => {}
        },
        _ => {}
    }
}

/// `if (X > G) G = X` (or `G < X`): a running maximum, which the data
/// plane makes one atomic step (the write only raises `G`, so two
/// threads racing leave the larger). `X` and `G`'s keys are locals or
/// literals, so both mentions are the same values.
pub struct MaxUpdate<'a> {
    /// The test, `X > G` or `G < X`.
    pub cond: &'a Expr,
    pub target: &'a LValue,
    pub value: &'a Expr,
    /// The `G = X` inside.
    pub assign: &'a Expr,
}

/// The running maximum statement `s` is, if it is one.
pub fn max_update(s: &Stmt) -> Option<MaxUpdate<'_>> {
    let StmtKind::If {
        cond,
        then,
        else_: None,
    } = &s.kind
    else {
        return None;
    };
    let (x, g) = match &cond.kind {
        ExprKind::Binary {
            op: BinOp::Gt,
            lhs,
            rhs,
        } => (&**lhs, &**rhs),
        ExprKind::Binary {
            op: BinOp::Lt,
            lhs,
            rhs,
        } => (&**rhs, &**lhs),
        _ => return None,
    };
    let ExprKind::Load(target) = &g.kind else {
        return None;
    };
    let then = match &then.kind {
        StmtKind::Block(b) if b.stmts.len() == 1 => &b.stmts[0],
        _ => &**then,
    };
    let StmtKind::Expr(assign) = &then.kind else {
        return None;
    };
    let ExprKind::Assign {
        op: AssignOp::Assign,
        target: written,
        value,
    } = &assign.kind
    else {
        return None;
    };
    let keys_same = match (target, written) {
        (LValue::Global(a), LValue::Global(b)) => a == b,
        (LValue::Elem { array: a, keys: ka }, LValue::Elem { array: b, keys: kb }) => {
            a == b && ka.len() == kb.len() && ka.iter().zip(kb).all(|(x, y)| same_plain(x, y))
        }
        _ => false,
    };
    (x.ty == Type::Long && keys_same && same_plain(x, value)).then_some(MaxUpdate {
        cond,
        target: written,
        value,
        assign,
    })
}

/// Whether `a` and `b` are the same local or the same literal.
fn same_plain(a: &Expr, b: &Expr) -> bool {
    match (&a.kind, &b.kind) {
        (ExprKind::Load(LValue::Local(x)), ExprKind::Load(LValue::Local(y))) => x == y,
        (ExprKind::Long(x), ExprKind::Long(y)) => x == y,
        (ExprKind::Str(x), ExprKind::Str(y)) => x == y,
        _ => false,
    }
}

/// The locals of body `b` that only ever hold `tid()` (`t = tid()`, as
/// scripts and the `@entry` pass write it).
fn tid_locals(b: &Block) -> HashSet<LocalId> {
    let (mut tids, mut others) = (HashSet::new(), HashSet::new());
    walk::nodes(b, &mut |n| {
        let walk::Node::Expr(e) = n else { return };
        match &e.kind {
            ExprKind::Assign {
                op: AssignOp::Assign,
                target: LValue::Local(l),
                value,
            } if is_tid(value) => {
                tids.insert(*l);
            }
            ExprKind::Assign {
                target: LValue::Local(l),
                ..
            }
            | ExprKind::IncDec {
                target: LValue::Local(l),
                ..
            } => {
                others.insert(*l);
            }
            _ => {}
        }
    });
    tids.retain(|l| !others.contains(l));
    tids
}

/// `tid()`: a key only the calling thread uses.
fn is_tid(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Builtin { name, args } if *name == "tid" && args.is_empty())
}

/// `printf`, `print` and their `ln`/`d` forms become records of the
/// thread's output ring, formatted by the tracer: longs and literal
/// strings only, and no `%m` (memory must be read at the hit).
fn print_reason(
    program: &Rules,
    format: Option<&[FormatPiece]>,
    delimited: bool,
    args: &[Expr],
    why: &mut Option<String>,
) {
    if format.is_some_and(|f| !utap_runtime::script::output::can_defer(f)) {
        *why = Some("prints program memory (%m)".into());
        return;
    }
    if args.len() as u64 > utap_runtime::dataplane::layout::record::MAX_ARGS {
        *why = Some("prints more values than an output record holds".into());
        return;
    }
    for (i, a) in args.iter().enumerate() {
        match a.ty {
            // printd's delimiter travels apart from the values.
            Type::String if i == 0 && delimited => key_reason(program, a, why),
            Type::String => string_value_reason(program, a, why),
            _ => expr_reason(program, a, why),
        }
    }
}

fn lvalue_reason(program: &Rules, lv: &LValue, write: bool, why: &mut Option<String>) {
    match lv {
        LValue::Local(_) => {}
        LValue::Global(g) if is_long_scalar(program, *g) => {}
        LValue::Elem { array, keys } if long_array(program, *array) => {
            keys.iter().for_each(|k| key_reason(program, k, why))
        }
        LValue::Context(_) => *why = Some("writes a context variable".into()),
        _ if write => *why = Some("writes a global that is not a long or an array of longs".into()),
        _ => *why = Some("reads a global that is not a long or an array of longs".into()),
    }
}

/// The globals a probe's handler (conditions and body) and the script
/// functions it calls name.
pub fn touched(program: &Program, p: &ProbeDef) -> HashSet<GlobalId> {
    let mut out = HashSet::new();
    let mut visit = |e: &Expr| globals_of(e, &mut out);
    for c in p.points.iter().filter_map(|pt| pt.condition.as_ref()) {
        walk::expr(c, &mut visit);
    }
    walk::block(&p.body, &mut visit);
    statement_globals(&p.body, &mut out);
    for f in called_functions(program, p) {
        let body = &program.functions[f].body;
        walk::block(body, &mut |e| globals_of(e, &mut out));
        statement_globals(body, &mut out);
    }
    out
}

/// The globals statements of `b` name outside any expression: `delete`
/// and `foreach` (a tracer handler iterating an array reads it).
fn statement_globals(b: &Block, out: &mut HashSet<GlobalId>) {
    walk::nodes(b, &mut |n| match n {
        walk::Node::Stmt(Stmt {
            kind: StmtKind::Delete(lv),
            ..
        }) => lvalue_global(lv, out),
        walk::Node::Stmt(Stmt {
            kind: StmtKind::Foreach(fe),
            ..
        }) => {
            if let ForeachSource::Array(g) = fe.source {
                out.insert(g);
            }
        }
        _ => {}
    });
}

fn lvalue_global(lv: &LValue, out: &mut HashSet<GlobalId>) {
    match lv {
        LValue::Global(g) | LValue::Elem { array: g, .. } => {
            out.insert(*g);
        }
        _ => {}
    }
}

fn globals_of(e: &Expr, out: &mut HashSet<GlobalId>) {
    match &e.kind {
        ExprKind::Load(lv)
        | ExprKind::Assign { target: lv, .. }
        | ExprKind::IncDec { target: lv, .. }
        | ExprKind::StatAdd { target: lv, .. }
        | ExprKind::StatGet { target: lv, .. }
        | ExprKind::Hist { target: lv, .. } => lvalue_global(lv, out),
        ExprKind::In { array, .. } => {
            out.insert(*array);
        }
        _ => {}
    }
}

/// Globals named by a handler that runs in the tracer while the program
/// runs, or by a script function it calls (in-process handlers call none):
/// begin, end and error probes run before the region is filled or after
/// it is folded back, and timers run held, so they do not count.
fn tracer_touched(program: &Program, routes: &[Route]) -> HashSet<GlobalId> {
    let mut out = HashSet::new();
    for (p, route) in program.probes.iter().zip(routes) {
        if *route != Route::InProcess && !outside_the_run(p) {
            out.extend(touched(program, p));
        }
    }
    out
}

fn called(e: &Expr, calls: &mut Vec<usize>) {
    if let ExprKind::Call { func, .. } = &e.kind {
        calls.push(func.0 as usize);
    }
}
