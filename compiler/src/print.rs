//! The canonical text of a parsed script (`utap -p1`).
//!
//! One statement per line, two-space indentation, every simple statement
//! ended by `;`, parentheses only where precedence needs them, numbers in
//! decimal, strings re-escaped. Printing a parsed script and parsing the
//! text again gives the same tree (spans and ids aside), so printing that
//! again gives the same text.

use crate::ast::*;
use crate::lexer::raw_byte;
use std::fmt::Write;

/// The canonical text of a whole script.
pub fn script(s: &Script) -> String {
    let mut p = Printer::default();
    for item in &s.items {
        p.item(item);
    }
    p.out
}

/// The canonical text of one expression.
pub fn expr(e: &Expr) -> String {
    let mut p = Printer::default();
    p.expr(e, 0);
    p.out
}

#[derive(Default)]
struct Printer {
    out: String,
    indent: usize,
}

// Precedence levels, loosest first (see grammar.lalrpop).
const ASSIGN: u8 = 1;
const TERNARY: u8 = 2;
const LOG_OR: u8 = 3;
const LOG_AND: u8 = 4;
const BIT_OR: u8 = 5;
const BIT_XOR: u8 = 6;
const BIT_AND: u8 = 7;
const IN: u8 = 8;
const REGEX: u8 = 9;
const COMPARE: u8 = 10;
const SHIFT: u8 = 11;
const CONCAT: u8 = 12;
const ADD: u8 = 13;
const MUL: u8 = 14;
const UNARY: u8 = 15;
const CREMENT: u8 = 16;
const VALUE: u8 = 17;

fn binary_level(op: BinOp) -> u8 {
    match op {
        BinOp::Or => LOG_OR,
        BinOp::And => LOG_AND,
        BinOp::BitOr => BIT_OR,
        BinOp::BitXor => BIT_XOR,
        BinOp::BitAnd => BIT_AND,
        BinOp::Match | BinOp::NotMatch => REGEX,
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => COMPARE,
        BinOp::Shl | BinOp::Shr | BinOp::UShr => SHIFT,
        BinOp::Concat => CONCAT,
        BinOp::Add | BinOp::Sub => ADD,
        BinOp::Mul | BinOp::Div | BinOp::Mod => MUL,
    }
}

/// A string literal with quotes and escapes that lex back to `s`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            c => match raw_byte(c) {
                Some(b) => {
                    let _ = write!(out, "\\{b:03o}");
                }
                None => out.push(c),
            },
        }
    }
    out.push('"');
    out
}

fn literal(l: &Literal) -> String {
    match l {
        Literal::Num(n) => n.to_string(),
        Literal::Str(s) => quote(s),
    }
}

/// Whether a statement ends in an `if` without `else` (an `else` printed
/// after it would attach to that inner `if`).
fn ends_open(s: &Stmt) -> bool {
    match &s.kind {
        StmtKind::If { else_: None, .. } => true,
        StmtKind::If { else_: Some(e), .. } => ends_open(e),
        StmtKind::While { body, .. } | StmtKind::For { body, .. } => ends_open(body),
        StmtKind::Foreach(f) => ends_open(&f.body),
        _ => false,
    }
}

impl Printer {
    fn line_start(&mut self) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Probe(p) => {
                self.out.push_str("probe ");
                self.points(&p.points);
                self.out.push(' ');
                self.block(&p.body);
            }
            Item::Alias(a) => {
                self.out.push_str("probe ");
                let op = match a.kind {
                    AliasKind::Prologue => " = ",
                    AliasKind::Epilogue => " += ",
                };
                for n in &a.names {
                    self.point(n);
                    self.out.push_str(op);
                }
                self.points(&a.targets);
                self.out.push(' ');
                self.block(&a.body);
            }
            Item::Global(g) => {
                if g.private {
                    self.out.push_str("private ");
                }
                let _ = write!(self.out, "global {}", g.name.name);
                if g.wrap {
                    self.out.push('%');
                }
                if let Some(n) = g.size {
                    let _ = write!(self.out, "[{n}]");
                }
                if let Some(init) = &g.init {
                    let _ = write!(self.out, " = {}", literal(init));
                }
            }
            Item::Function(f) => {
                if f.private {
                    self.out.push_str("private ");
                }
                let _ = write!(self.out, "function {}", f.name.name);
                self.type_decl(f.ret);
                self.out.push('(');
                for (i, p) in f.params.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.out.push_str(&p.name.name);
                    self.type_decl(p.ty);
                }
                self.out.push_str(") ");
                match &f.body {
                    FunctionBody::Block(b) => self.block(b),
                    FunctionBody::Embedded(e) => self.embedded(e),
                }
            }
            Item::Embedded(e) => self.embedded(e),
        }
        self.out.push('\n');
    }

    fn type_decl(&mut self, t: Option<TypeDecl>) {
        match t {
            Some(TypeDecl::Long) => self.out.push_str(":long"),
            Some(TypeDecl::String) => self.out.push_str(":string"),
            None => {}
        }
    }

    fn embedded(&mut self, e: &Embedded) {
        let _ = write!(self.out, "%{{{}%}}", e.code);
    }

    fn points(&mut self, points: &[ProbePoint]) {
        for (i, p) in points.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.point(p);
        }
    }

    fn point(&mut self, p: &ProbePoint) {
        for (i, c) in p.components.iter().enumerate() {
            if i > 0 {
                self.out.push('.');
            }
            self.out.push_str(&c.name);
            if let Some(arg) = &c.arg {
                let _ = write!(self.out, "({})", literal(arg));
            }
        }
        if p.sufficient {
            self.out.push('!');
        } else if p.optional {
            self.out.push('?');
        }
        if let Some(c) = &p.condition {
            self.out.push_str(" if (");
            self.expr(c, 0);
            self.out.push(')');
        }
    }

    fn block(&mut self, b: &Block) {
        self.out.push_str("{\n");
        self.indent += 1;
        for s in &b.stmts {
            self.line_start();
            self.stmt(s);
            self.out.push('\n');
        }
        self.indent -= 1;
        self.line_start();
        self.out.push('}');
    }

    /// A statement, from the current position to its end (no newline).
    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Block(b) => self.block(b),
            StmtKind::Expr(e) => {
                self.expr(e, 0);
                self.out.push(';');
            }
            StmtKind::If { cond, then, else_ } => {
                self.out.push_str("if (");
                self.expr(cond, 0);
                self.out.push_str(") ");
                match else_ {
                    Some(e) => {
                        if ends_open(then) {
                            // Only a made-up tree can have this shape.
                            self.out.push_str("{ ");
                            self.stmt(then);
                            self.out.push_str(" }");
                        } else {
                            self.stmt(then);
                        }
                        self.out.push_str(" else ");
                        self.stmt(e);
                    }
                    None => self.stmt(then),
                }
            }
            StmtKind::While { cond, body } => {
                self.out.push_str("while (");
                self.expr(cond, 0);
                self.out.push_str(") ");
                self.stmt(body);
            }
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => {
                self.out.push_str("for (");
                if let Some(e) = init {
                    self.expr(e, 0);
                }
                self.out.push_str("; ");
                if let Some(e) = cond {
                    self.expr(e, 0);
                }
                self.out.push_str("; ");
                if let Some(e) = step {
                    self.expr(e, 0);
                }
                self.out.push_str(") ");
                self.stmt(body);
            }
            StmtKind::Foreach(f) => self.foreach(f),
            StmtKind::Next => self.out.push_str("next;"),
            StmtKind::Break => self.out.push_str("break;"),
            StmtKind::Continue => self.out.push_str("continue;"),
            StmtKind::Return(e) => {
                self.out.push_str("return");
                if let Some(e) = e {
                    self.out.push(' ');
                    self.expr(e, 0);
                }
                self.out.push(';');
            }
            StmtKind::Delete(e) => {
                self.out.push_str("delete ");
                self.expr(e, 0);
                self.out.push(';');
            }
            StmtKind::Try {
                body,
                catch_var,
                catch,
            } => {
                self.out.push_str("try ");
                self.block(body);
                self.out.push_str(" catch");
                if let Some(v) = catch_var {
                    let _ = write!(self.out, "({})", v.name);
                }
                self.out.push(' ');
                self.block(catch);
            }
            StmtKind::Embedded(e) => self.embedded(e),
            StmtKind::Empty => self.out.push(';'),
        }
    }

    fn foreach(&mut self, f: &Foreach) {
        let mark = |sort: &Option<ForeachSort>, by: SortBy| match sort {
            Some(s) if s.by == by && s.agg.is_none() => {
                if s.descending {
                    "-"
                } else {
                    "+"
                }
            }
            _ => "",
        };
        self.out.push_str("foreach (");
        if let Some(v) = &f.value {
            let _ = write!(self.out, "{} = ", v.name);
        }
        let keys: Vec<String> = f
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{}{}", k.name, mark(&f.sort, SortBy::Key(i))))
            .collect();
        if keys.len() == 1 {
            self.out.push_str(&keys[0]);
        } else {
            let _ = write!(self.out, "[{}]", keys.join(", "));
        }
        self.out.push_str(" in ");
        match &f.source {
            ForeachSource::Array(a) => self.out.push_str(&a.name),
            ForeachSource::Hist(h) => self.expr(h, VALUE),
        }
        if let Some(slice) = &f.slice {
            self.out.push('[');
            for (i, k) in slice.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                match k {
                    Some(e) => self.expr(e, 0),
                    None => self.out.push('*'),
                }
            }
            self.out.push(']');
        }
        if let Some(s) = &f.sort {
            if s.by == SortBy::Value {
                if let Some(agg) = s.agg {
                    let _ = write!(self.out, " @{}", agg.name());
                }
                self.out.push_str(if s.descending { "-" } else { "+" });
            }
        }
        if let Some(l) = &f.limit {
            self.out.push_str(" limit ");
            self.expr(l, 0);
        }
        self.out.push_str(") ");
        self.stmt(&f.body);
    }

    fn args(&mut self, args: &[Expr]) {
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.expr(a, 0);
        }
    }

    /// Prints `e`, in parentheses if it binds more loosely than `min`.
    fn expr(&mut self, e: &Expr, min: u8) {
        let level = level(e);
        if level < min {
            self.out.push('(');
            self.expr_inner(e);
            self.out.push(')');
        } else {
            self.expr_inner(e);
        }
    }

    fn expr_inner(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Num(n) => {
                let _ = write!(self.out, "{}", *n as u64);
            }
            ExprKind::Str(s) => self.out.push_str(&quote(s)),
            ExprKind::Var(v) => self.out.push_str(v),
            ExprKind::Wildcard => self.out.push('*'),
            ExprKind::Index { base, keys } => {
                match base {
                    IndexBase::Array(a) => self.out.push_str(&a.name),
                    IndexBase::Hist(h) => self.expr(h, VALUE),
                }
                self.out.push('[');
                self.args(keys);
                self.out.push(']');
            }
            ExprKind::Target(t) => {
                if t.address {
                    self.out.push('&');
                }
                match t
                    .name
                    .strip_prefix("@var(")
                    .and_then(|n| n.strip_suffix(')'))
                {
                    Some(args) => {
                        let args: Vec<String> = args.split(", ").map(quote).collect();
                        let _ = write!(self.out, "@var({})", args.join(", "));
                    }
                    None => {
                        let _ = write!(self.out, "${}", t.name);
                    }
                }
                self.target_path(&t.path);
                for _ in 0..t.pretty {
                    self.out.push('$');
                }
            }
            ExprKind::Cast {
                expr,
                type_name,
                module,
                path,
                pretty,
            } => {
                self.out.push_str("@cast(");
                self.expr(expr, 0);
                let _ = write!(self.out, ", {}", quote(type_name));
                if let Some(m) = module {
                    let _ = write!(self.out, ", {}", quote(m));
                }
                self.out.push(')');
                self.target_path(path);
                for _ in 0..*pretty {
                    self.out.push('$');
                }
            }
            ExprKind::AtCall { name, args } => {
                let _ = write!(self.out, "@{name}(");
                self.args(args);
                self.out.push(')');
            }
            ExprKind::Defined(x) => {
                self.out.push_str("@defined(");
                self.expr(x, 0);
                self.out.push(')');
            }
            ExprKind::Unary { op, expr } => {
                let text = op.text();
                self.out.push_str(text);
                let mark = self.out.len();
                self.expr(expr, UNARY);
                // `- -a` must not become `--a`, nor `! ~a` become `!~a`.
                let next = self.out.as_bytes().get(mark).copied();
                if matches!(next, Some(b'-' | b'+')) || (*op == UnOp::Not && next == Some(b'~')) {
                    self.out.insert(mark, ' ');
                }
            }
            ExprKind::IncDec { op, prefix, target } => {
                let text = match op {
                    IncDecOp::Inc => "++",
                    IncDecOp::Dec => "--",
                };
                if *prefix {
                    self.out.push_str(text);
                    self.expr(target, VALUE);
                } else {
                    self.expr(target, VALUE);
                    self.out.push_str(text);
                }
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let level = binary_level(*op);
                let (lmin, rmin) = match level {
                    REGEX => (SHIFT, VALUE),
                    l => (l, l + 1),
                };
                self.expr(lhs, lmin);
                let _ = write!(self.out, " {} ", op.text());
                self.expr(rhs, rmin);
            }
            ExprKind::Assign { op, target, value } => {
                // A conditional target needs parentheses: unparenthesised,
                // the assignment would belong to its false branch.
                self.expr(target, LOG_OR);
                let _ = write!(self.out, " {} ", op.text());
                self.expr(value, ASSIGN);
            }
            ExprKind::Ternary { cond, then, else_ } => {
                self.expr(cond, LOG_OR);
                self.out.push_str(" ? ");
                self.expr(then, 0);
                self.out.push_str(" : ");
                self.expr(else_, 0);
            }
            ExprKind::In { keys, array } => {
                if keys.len() == 1 {
                    self.expr(&keys[0], REGEX);
                } else {
                    self.out.push('[');
                    for (i, k) in keys.iter().enumerate() {
                        if i > 0 {
                            self.out.push_str(", ");
                        }
                        self.expr(k, REGEX);
                    }
                    self.out.push(']');
                }
                let _ = write!(self.out, " in {}", array.name);
            }
            ExprKind::Call { name, args } => {
                let _ = write!(self.out, "{}(", name.name);
                self.args(args);
                self.out.push(')');
            }
            ExprKind::Stat { op, expr, args } => {
                let _ = write!(self.out, "@{}(", op.name());
                self.expr(expr, 0);
                for a in args {
                    self.out.push_str(", ");
                    self.expr(a, 0);
                }
                self.out.push(')');
            }
            ExprKind::Hist { kind, expr } => match kind {
                HistKind::Log => {
                    self.out.push_str("@hist_log(");
                    self.expr(expr, 0);
                    self.out.push(')');
                }
                HistKind::Linear { lo, hi, step } => {
                    self.out.push_str("@hist_linear(");
                    self.expr(expr, 0);
                    for a in [lo, hi, step] {
                        self.out.push_str(", ");
                        self.expr(a, 0);
                    }
                    self.out.push(')');
                }
            },
        }
    }

    fn target_path(&mut self, path: &[TargetComp]) {
        for c in path {
            match c {
                TargetComp::Field(f) => {
                    let _ = write!(self.out, "->{f}");
                }
                TargetComp::Index(i) => {
                    self.out.push('[');
                    self.expr(i, 0);
                    self.out.push(']');
                }
            }
        }
    }
}

/// How tightly an expression binds (see the constants above).
fn level(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Assign { .. } => ASSIGN,
        ExprKind::Ternary { .. } => TERNARY,
        ExprKind::Binary { op, .. } => binary_level(*op),
        ExprKind::In { .. } => IN,
        ExprKind::Unary { .. } => UNARY,
        ExprKind::IncDec { .. } => CREMENT,
        _ => VALUE,
    }
}

/// The printer's promise, checked by the fuzzer and the regression tests:
/// if `text` parses, its canonical text parses too and prints identically;
/// if it does not, its diagnostics render. Returns what broke the promise.
pub fn check_round_trip(text: &str, opts: &crate::parser::ParseOptions) -> Result<(), String> {
    use crate::parser::{NodeIds, parse_file};
    let mut map = crate::source::SourceMap::new();
    let file = map.add("input.stp", text);
    let mut ids = NodeIds::default();
    let parsed = match parse_file(&map, file, opts, &mut ids) {
        Ok(s) => s,
        Err(diags) => {
            let text = crate::diag::render_all(&diags, &map, false);
            return match diags.is_empty() || text.is_empty() {
                true => Err("rejected without a diagnostic".into()),
                false => Ok(()),
            };
        }
    };
    let first = script(&parsed);
    let again = map.add("canonical.stp", first.clone());
    // The canonical text has no arguments or conditionals left.
    let plain = crate::parser::ParseOptions {
        guru: opts.guru,
        tapset: opts.tapset,
        ..Default::default()
    };
    match parse_file(&map, again, &plain, &mut ids) {
        Ok(s) => {
            let second = script(&s);
            if second == first {
                Ok(())
            } else {
                Err(format!("printing is not stable:\n{first}\n---\n{second}"))
            }
        }
        Err(d) => Err(format!(
            "canonical text does not parse:\n{first}\n{}",
            crate::diag::render_all(&d, &map, false)
        )),
    }
}
