//! `-p2`: the resolved program in SystemTap's pass-2 layout — globals with
//! types, functions with signatures and locals, probes with their concrete
//! points (and syscall sets), the point as written, and locals. Stable:
//! golden tests compare it byte for byte.

use std::fmt::Write as _;

use super::types::type_name;
use crate::ast::IncDecOp;
use crate::program::*;

fn sig(name: &str, ty: Type, keys: Option<&[Type]>) -> String {
    let mut s = format!("{name}:{}", type_name(ty));
    if let Some(keys) = keys {
        let k: Vec<&str> = keys.iter().map(|t| type_name(*t)).collect();
        let _ = write!(s, " [{}]", k.join(", "));
    }
    s
}

/// The locals after the `skip` parameters that `body` still uses: as
/// SystemTap's, the list leaves out the variables elision removed.
fn locals(out: &mut String, locals: &[LocalVar], skip: usize, body: &Block) {
    let used = super::elide::used_locals(body);
    let rest: Vec<&LocalVar> = locals
        .iter()
        .enumerate()
        .skip(skip)
        .filter(|(i, _)| used.contains(&(*i as u32)))
        .map(|(_, l)| l)
        .collect();
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
    render(program, false)
}

fn render(program: &Program, verbose: bool) -> String {
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
        let mut line = sig(&name, g.ty, g.keys.as_deref());
        match (&g.init, verbose) {
            (Some(crate::ast::Literal::Num(n)), true) => line.push_str(&format!(" = {n}")),
            (Some(crate::ast::Literal::Str(v)), true) => line.push_str(&format!(" = {v:?}")),
            _ => {}
        }
        if verbose && g.autoprint {
            line.push_str(" /* printed at exit */");
        }
        let _ = writeln!(out, "{line}");
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
        locals(&mut out, &f.locals, f.params, &f.body);
        if verbose {
            Bodies {
                program,
                out: &mut out,
            }
            .block(&f.body, &f.locals, 1);
        }
    }
    if !program.probes.is_empty() {
        out.push_str("# probes\n");
    }
    for p in &program.probes {
        let points: Vec<String> = p.points.iter().map(point).collect();
        let _ = writeln!(out, "{} /* <- {} */", points.join(", "), p.name);
        locals(&mut out, &p.locals, 0, &p.body);
        if verbose {
            let mut b = Bodies {
                program,
                out: &mut out,
            };
            for pt in &p.points {
                if let Some(c) = &pt.condition {
                    let cond = b.expr(c, &p.locals);
                    b.line(1, &format!("# condition of {}: {cond}", pt.text));
                }
            }
            b.block(&p.body, &p.locals, 1);
        }
    }
    out
}

/// `-p2 -v`: [`dump`] plus every function and probe body (and point
/// conditions), one statement a line, as SystemTap's verbose pass 2 does.
pub fn dump_verbose(program: &Program) -> String {
    render(program, true)
}

struct Bodies<'a> {
    program: &'a Program,
    out: &'a mut String,
}

impl Bodies<'_> {
    fn line(&mut self, depth: usize, text: &str) {
        let _ = writeln!(self.out, "{}{text}", "  ".repeat(depth));
    }

    fn block(&mut self, b: &Block, locals: &[LocalVar], depth: usize) {
        self.line(depth, "{");
        for s in &b.stmts {
            self.stmt(s, locals, depth + 1);
        }
        self.line(depth, "}");
    }

    fn stmt(&mut self, s: &Stmt, locals: &[LocalVar], d: usize) {
        match &s.kind {
            StmtKind::Expr(e) => {
                let t = self.expr(e, locals);
                self.line(d, &t);
            }
            StmtKind::Block(b) => self.block(b, locals, d),
            StmtKind::If { cond, then, else_ } => {
                let c = self.expr(cond, locals);
                self.line(d, &format!("if ({c})"));
                self.stmt(then, locals, d + 1);
                if let Some(e) = else_ {
                    self.line(d, "else");
                    self.stmt(e, locals, d + 1);
                }
            }
            StmtKind::While { cond, body } => {
                let c = self.expr(cond, locals);
                self.line(d, &format!("while ({c})"));
                self.stmt(body, locals, d + 1);
            }
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => {
                let part = |b: &mut Self, e: &Option<Expr>| {
                    e.as_ref().map(|e| b.expr(e, locals)).unwrap_or_default()
                };
                let (i, c, s2) = (part(self, init), part(self, cond), part(self, step));
                self.line(d, &format!("for ({i}; {c}; {s2})"));
                self.stmt(body, locals, d + 1);
            }
            StmtKind::Foreach(f) => {
                let sign = |desc: bool| if desc { "-" } else { "+" };
                let keys: Vec<String> = f
                    .keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| match f.sort {
                        Some(s) if s.by == crate::ast::SortBy::Key(i) => {
                            format!("{}{}", local_name(locals, *k), sign(s.descending))
                        }
                        _ => local_name(locals, *k).to_string(),
                    })
                    .collect();
                let mut src = match &f.source {
                    ForeachSource::Array(g) => self.global(*g).to_string(),
                    ForeachSource::Hist(h) => self.expr(h, locals),
                };
                if let Some(s) = f.sort.filter(|s| s.by == crate::ast::SortBy::Value) {
                    src.push_str(sign(s.descending));
                }
                let value = f
                    .value
                    .map(|v| format!("{} = ", local_name(locals, v)))
                    .unwrap_or_default();
                let limit = f
                    .limit
                    .as_ref()
                    .map(|l| format!(" limit {}", self.expr(l, locals)))
                    .unwrap_or_default();
                self.line(
                    d,
                    &format!("foreach ({value}[{}] in {src}{limit})", keys.join(", ")),
                );
                self.stmt(&f.body, locals, d + 1);
            }
            StmtKind::Next => self.line(d, "next"),
            StmtKind::Break => self.line(d, "break"),
            StmtKind::Continue => self.line(d, "continue"),
            StmtKind::Return(e) => {
                let t = e
                    .as_ref()
                    .map(|e| format!("return {}", self.expr(e, locals)))
                    .unwrap_or("return".into());
                self.line(d, &t);
            }
            StmtKind::Delete(lv) => {
                let t = self.lvalue(lv, locals);
                self.line(d, &format!("delete {t}"));
            }
            StmtKind::Try {
                body,
                catch_var,
                catch,
            } => {
                self.line(d, "try");
                self.block(body, locals, d);
                let var = catch_var
                    .map(|v| format!(" ({})", local_name(locals, v)))
                    .unwrap_or_default();
                self.line(d, &format!("catch{var}"));
                self.block(catch, locals, d);
            }
        }
    }

    fn global(&self, g: GlobalId) -> &str {
        self.program
            .globals
            .get(g.0 as usize)
            .map_or("?", |g| g.name.as_str())
    }

    fn lvalue(&self, lv: &LValue, locals: &[LocalVar]) -> String {
        match lv {
            LValue::Local(l) => local_name(locals, *l).to_string(),
            LValue::Global(g) => self.global(*g).to_string(),
            LValue::Elem { array, keys } => {
                let k: Vec<String> = keys.iter().map(|k| self.expr(k, locals)).collect();
                format!("{}[{}]", self.global(*array), k.join(", "))
            }
            LValue::Context(c) => context_name(*c),
        }
    }

    fn expr(&self, e: &Expr, locals: &[LocalVar]) -> String {
        let args = |a: &[Expr]| {
            a.iter()
                .map(|x| self.expr(x, locals))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match &e.kind {
            ExprKind::Long(n) => n.to_string(),
            ExprKind::Wildcard => "*".to_string(),
            ExprKind::Str(s) => format!("{s:?}"),
            ExprKind::Load(lv) => self.lvalue(lv, locals),
            ExprKind::Context(c) => context_name(*c),
            ExprKind::Unary { op, expr } => {
                let o = op.text();
                format!("{o}({})", self.expr(expr, locals))
            }
            ExprKind::Binary { op, lhs, rhs } => {
                format!(
                    "({} {} {})",
                    self.expr(lhs, locals),
                    op.text(),
                    self.expr(rhs, locals)
                )
            }
            ExprKind::Ternary { cond, then, else_ } => format!(
                "({} ? {} : {})",
                self.expr(cond, locals),
                self.expr(then, locals),
                self.expr(else_, locals)
            ),
            ExprKind::Assign { op, target, value } => {
                format!(
                    "{} {} {}",
                    self.lvalue(target, locals),
                    op.text(),
                    self.expr(value, locals)
                )
            }
            ExprKind::IncDec { op, prefix, target } => {
                let o = if *op == IncDecOp::Inc { "++" } else { "--" };
                let t = self.lvalue(target, locals);
                if *prefix {
                    format!("{o}{t}")
                } else {
                    format!("{t}{o}")
                }
            }
            ExprKind::StatAdd { target, value } => {
                format!(
                    "{} <<< {}",
                    self.lvalue(target, locals),
                    self.expr(value, locals)
                )
            }
            ExprKind::StatGet { op, target } => {
                format!("@{}({})", op.name(), self.lvalue(target, locals))
            }
            ExprKind::Hist { kind, target } => match kind {
                HistKind::Log => format!("@hist_log({})", self.lvalue(target, locals)),
                HistKind::Linear { lo, hi, step } => {
                    format!(
                        "@hist_linear({}, {lo}, {hi}, {step})",
                        self.lvalue(target, locals)
                    )
                }
            },
            ExprKind::HistBucket { hist, index } => {
                format!("{}[{}]", self.expr(hist, locals), self.expr(index, locals))
            }
            ExprKind::In { array, keys } => format!("[{}] in {}", args(keys), self.global(*array)),
            ExprKind::Call { func, args: a } => {
                let name = self
                    .program
                    .functions
                    .get(func.0 as usize)
                    .map_or("?", |f| f.name.as_str());
                format!("{name}({})", args(a))
            }
            ExprKind::Builtin { name, args: a } => format!("{name}({})", args(a)),
            ExprKind::Print {
                kind,
                format,
                args: a,
            } => {
                let name = format!("{kind:?}").to_lowercase();
                match format {
                    Some(pieces) => {
                        let f = format_text(pieces);
                        if a.is_empty() {
                            format!("{name}({f:?})")
                        } else {
                            format!("{name}({f:?}, {})", args(a))
                        }
                    }
                    None => format!("{name}({})", args(a)),
                }
            }
        }
    }
}

fn local_name(locals: &[LocalVar], l: LocalId) -> &str {
    locals.get(l.0 as usize).map_or("?", |l| l.name.as_str())
}

fn context_name(c: ContextVar) -> String {
    match c {
        ContextVar::Syscall => "$syscall".into(),
        ContextVar::Arg(i) => format!("$arg{}", i + 1),
        ContextVar::Return => "$return".into(),
        ContextVar::Signal => "$signal".into(),
        ContextVar::Code => "$code".into(),
    }
}

/// A parsed format back as text.
fn format_text(pieces: &[FormatPiece]) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            FormatPiece::Text(t) => s.push_str(&t.replace('%', "%%")),
            FormatPiece::Conv(c) => {
                s.push('%');
                for (on, ch) in [
                    (c.flags.left, '-'),
                    (c.flags.plus, '+'),
                    (c.flags.space, ' '),
                    (c.flags.alt, '#'),
                    (c.flags.zero, '0'),
                ] {
                    if on {
                        s.push(ch);
                    }
                }
                match c.width {
                    FormatNum::Fixed(n) => s.push_str(&n.to_string()),
                    FormatNum::Star => s.push('*'),
                    FormatNum::None => {}
                }
                match c.precision {
                    FormatNum::Fixed(n) => s.push_str(&format!(".{n}")),
                    FormatNum::Star => s.push_str(".*"),
                    FormatNum::None => {}
                }
                s.push(match c.kind {
                    ConvKind::Signed => 'd',
                    ConvKind::Unsigned => 'u',
                    ConvKind::Octal => 'o',
                    ConvKind::HexLower => 'x',
                    ConvKind::HexUpper => 'X',
                    ConvKind::Str => 's',
                    ConvKind::Char => 'c',
                    ConvKind::Pointer => 'p',
                    ConvKind::Binary => 'b',
                    ConvKind::Memory => 'm',
                    ConvKind::MemoryHex => 'M',
                    ConvKind::Percent => '%',
                });
            }
        }
    }
    s
}
