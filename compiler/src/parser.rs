//! The parser: text → [`ast::Script`].
//!
//! Passes over one file: [`lexer::lex`] → [`preprocess::preprocess`]
//! (arguments, `%( %)`) → [`layout::layout`] (statement boundaries, probe
//! point components) → the lalrpop grammar (`grammar.lalrpop`) → checks that
//! SystemTap makes while parsing (duplicate globals, `return` outside a
//! function, `printf` needing a literal format, embedded code without `-g`...).

pub mod layout;

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, unused_parens, dead_code)]
    grammar
);

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::lexer::{self, Tok, Token};
use crate::preprocess::{self, PpConfig};
use crate::source::SourceMap;
use lalrpop_util::ParseError;
use std::cell::Cell;
use std::collections::HashSet;

/// How to parse: the script arguments and the session's settings that the
/// preprocessor can test.
#[derive(Clone, Debug, Default)]
pub struct ParseOptions {
    /// Script arguments (`$1`, `@1`, `$#`...).
    pub args: Vec<String>,
    /// `-g`: guru mode (`guru_mode` conditions; embedded code allowed).
    pub guru: bool,
    /// A tapset rather than the user's script: may be empty.
    pub tapset: bool,
    /// Override of `arch` (default: this machine).
    pub arch: Option<String>,
    /// Override of the kernel release for `kernel_v`/`kernel_vr`.
    pub kernel_release: Option<String>,
}

impl ParseOptions {
    /// The session a fuzzer input's first byte selects (script arguments,
    /// guru mode, tapset), shared by the fuzz target and its regression test.
    pub fn for_fuzz_input(mode: u8) -> ParseOptions {
        ParseOptions {
            args: match mode % 3 {
                0 => vec![],
                1 => vec!["1".into(), "x y".into()],
                _ => vec!["probe".into(), "$1".into(), "\"s".into()],
            },
            guru: mode & 4 != 0,
            tapset: mode & 8 != 0,
            arch: Some("x86_64".into()),
            kernel_release: Some("6.18.0".into()),
        }
    }

    fn pp_config(&self) -> PpConfig {
        let mut cfg = PpConfig::host(self.args.clone(), self.guru);
        if let Some(arch) = &self.arch {
            cfg.arch = arch.clone();
        }
        if let Some(release) = &self.kernel_release {
            cfg.kernel_vr = release.clone();
            cfg.kernel_v = release.split('-').next().unwrap_or("").to_string();
        }
        cfg
    }
}

/// Hands out expression [`NodeId`]s, unique across every file parsed with it.
#[derive(Clone, Debug, Default)]
pub struct NodeIds {
    next: u32,
}

impl NodeIds {
    pub fn fresh(&mut self) -> NodeId {
        self.next += 1;
        NodeId(self.next - 1)
    }
    /// How many ids were handed out (ids are `0..count`).
    pub fn count(&self) -> u32 {
        self.next
    }

    /// Ids for a parse beside the one using `self`: they start `room` ids
    /// past this one's next id; [`NodeIds::join`] continues after both.
    pub fn split_off(&self, room: u32) -> NodeIds {
        NodeIds {
            next: self.next.saturating_add(room),
        }
    }

    /// Continues after the ids `other` (from [`NodeIds::split_off`]) used.
    pub fn join(&mut self, other: NodeIds) {
        self.next = self.next.max(other.next);
    }
}

/// Parses one file of the map (a user script or a tapset).
pub fn parse_file(
    map: &SourceMap,
    file: FileId,
    opts: &ParseOptions,
    ids: &mut NodeIds,
) -> Result<Script, Vec<Diagnostic>> {
    let text = map.text(file);
    let result = if preprocess::may_need(text) {
        let raw = lexer::lex(text);
        if raw.is_empty() && !opts.tapset {
            return Err(vec![empty_file(map, file, "")]);
        }
        let tokens = preprocess::preprocess(raw, &opts.pp_config());
        // Layout never empties a non-empty stream, so this is the laid-out test too.
        if tokens.is_empty() && !opts.tapset {
            return Err(vec![empty_file(map, file, " after preprocessing")]);
        }
        run_grammar(layout::laid_out(tokens), file, ids)
    } else {
        // Nothing to preprocess: stream the tokens, never holding them all.
        let mut tokens = lexer::tokens(text).peekable();
        if tokens.peek().is_none() && !opts.tapset {
            return Err(vec![empty_file(map, file, "")]);
        }
        run_grammar(layout::laid_out(tokens), file, ids)
    };
    let (items, suspect) = match result {
        Ok(parsed) => parsed,
        Err(e) => {
            let at = error_offset(&e);
            let mut first = syntax_error(e, map, file, opts);
            if let Some(help) = crate::foreign::bpftrace_help(text, at) {
                first = first.with_help(help);
            }
            let mut diags = vec![first];
            report_more_errors(map, file, opts, ids, at, &mut diags);
            return Err(diags);
        }
    };
    let script = Script { file, items };
    let problems = validate(&script, opts, suspect);
    debug_assert!(
        suspect || validate(&script, opts, true).len() == problems.len(),
        "the grammar's actions missed something the body checks report"
    );
    if problems.is_empty() {
        Ok(script)
    } else {
        Err(problems)
    }
}

/// Runs the grammar over laid-out tokens.
fn run_grammar(
    tokens: impl IntoIterator<Item = Token>,
    file: FileId,
    ids: &mut NodeIds,
) -> Result<(Vec<Item>, bool), LalrError> {
    let ctx = Ctx::new(file, ids);
    let stream = tokens.into_iter().map(|t| match t.tok {
        Tok::Error(e) => Err(Fail {
            message: e.message,
            help: e.help,
            start: t.start,
            end: t.end,
        }),
        tok => Ok((t.start, tok, t.end)),
    });
    let result = grammar::ScriptParser::new().parse(&ctx, stream);
    ids.next = ctx.next_id.get();
    result.map(|items| (items, ctx.bodies_suspect()))
}

/// Where a grammar error happened (byte offset).
fn error_offset(e: &LalrError) -> usize {
    match e {
        ParseError::User { error } => error.start,
        ParseError::UnrecognizedToken { token, .. } | ParseError::ExtraToken { token } => token.0,
        ParseError::UnrecognizedEof { location, .. } | ParseError::InvalidToken { location } => {
            *location
        }
    }
}

/// At most this many syntax errors are reported for one file.
const MAX_ERRORS: usize = 20;

/// Like SystemTap, goes on after a syntax error from the next `probe`,
/// `global`, `function` or `private` keyword, to report later errors too.
fn report_more_errors(
    map: &SourceMap,
    file: FileId,
    opts: &ParseOptions,
    ids: &mut NodeIds,
    mut after: usize,
    diags: &mut Vec<Diagnostic>,
) {
    let tokens = preprocess::preprocess(lexer::lex(map.text(file)), &opts.pp_config());
    while diags.len() < MAX_ERRORS {
        let restart = tokens.iter().position(|t| {
            t.start > after
                && matches!(
                    t.tok,
                    Tok::Probe | Tok::Global | Tok::Function | Tok::Private
                )
        });
        let Some(i) = restart else { return };
        match run_grammar(layout::laid_out(tokens[i..].to_vec()), file, ids) {
            Ok(_) => return,
            Err(e) => {
                after = error_offset(&e).max(tokens[i].start);
                diags.push(syntax_error(e, map, file, opts));
            }
        }
    }
}

/// Parses a standalone expression (for tests and tools).
pub fn parse_expr(
    map: &SourceMap,
    file: FileId,
    ids: &mut NodeIds,
) -> Result<Expr, Vec<Diagnostic>> {
    let tokens = lexer::lex(map.text(file));
    let ctx = Ctx::new(file, ids);
    let stream = tokens.into_iter().map(|t| match t.tok {
        Tok::Error(e) => Err(Fail {
            message: e.message.clone(),
            help: e.help.clone(),
            start: t.start,
            end: t.end,
        }),
        tok => Ok((t.start, tok, t.end)),
    });
    let result = grammar::ExprParser::new().parse(&ctx, stream);
    ids.next = ctx.next_id.get();
    result
        .map(|e| *e)
        .map_err(|e| vec![syntax_error(e, map, file, &ParseOptions::default())])
}

/// A script without a single item. A file that holds only comments is not
/// "empty" (SystemTap says so; it confuses whoever wrote the comments).
fn empty_file(map: &SourceMap, file: FileId, how: &str) -> Diagnostic {
    let name = map.name(file);
    let message = if how.is_empty() && !map.text(file).trim().is_empty() {
        format!("input file '{name}' has no probes, functions or globals (only comments)")
    } else {
        format!("input file '{name}' is empty{how}")
    };
    Diagnostic::parse_error(message)
        .with_help("a script needs at least one probe, function or global")
}

// ------------------------------------------------------------ error reports

/// An error raised while parsing (from the lexer, preprocessor or a grammar action).
#[derive(Clone, Debug, PartialEq)]
pub struct Fail {
    pub message: String,
    pub help: Option<String>,
    pub start: usize,
    pub end: usize,
}

impl Fail {
    fn new(message: impl Into<String>, start: usize, end: usize) -> Fail {
        Fail {
            message: message.into(),
            help: None,
            start,
            end,
        }
    }
}

type LalrError = ParseError<usize, Tok, Fail>;

fn syntax_error(e: LalrError, map: &SourceMap, file: FileId, opts: &ParseOptions) -> Diagnostic {
    let end = map.text(file).len();
    match e {
        ParseError::User { error } => {
            let mut d = Diagnostic::parse_error(error.message)
                .with_label(Span::new(file, error.start, error.end), "here");
            if let Some(help) = error.help {
                d = d.with_help(help);
            }
            d
        }
        ParseError::UnrecognizedToken {
            token: (l, tok, r),
            expected,
        } => {
            let (found, l, r) = if tok == Tok::StmtStart {
                token_after_marker(map, file, opts, l)
            } else {
                (tok.to_string(), l, r)
            };
            Diagnostic::parse_error(format!("expected {}", describe_expected(&expected)))
                .with_label(Span::new(file, l, r), format!("found {found}"))
        }
        ParseError::UnrecognizedEof { expected, .. } => {
            Diagnostic::parse_error(format!("expected {}", describe_expected(&expected)))
                .with_label(Span::new(file, end, end), "found end of file")
        }
        ParseError::ExtraToken { token: (l, tok, r) } => {
            Diagnostic::parse_error(format!("unexpected {tok}"))
                .with_label(Span::new(file, l, r), "here")
        }
        ParseError::InvalidToken { location } => Diagnostic::parse_error("invalid token")
            .with_label(Span::new(file, location, location), ""),
    }
}

/// The real token a statement marker at `at` stands before (errors are rare,
/// so the token stream is simply made again).
fn token_after_marker(
    map: &SourceMap,
    file: FileId,
    opts: &ParseOptions,
    at: usize,
) -> (String, usize, usize) {
    let tokens = layout::layout(preprocess::preprocess(
        lexer::lex(map.text(file)),
        &opts.pp_config(),
    ));
    tokens
        .iter()
        .find(|t: &&Token| t.start >= at && t.tok != Tok::StmtStart)
        .map(|t| (t.tok.to_string(), t.start, t.end))
        .unwrap_or_else(|| ("end of file".to_string(), at, at))
}

/// Terminals that can begin an expression.
const EXPR_START: &[&str] = &[
    "identifier",
    "number",
    "string literal",
    "$target",
    "@operator",
    "(",
    "[",
    "-",
    "+",
    "!",
    "~",
    "++",
    "--",
    // `&$var`
    "&",
];

/// Binary, ternary and assignment operators.
const OPERATORS: &[&str] = &[
    "+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "&&", "||", "<", ">", "<=", ">=", "==",
    "!=", "=~", "!~", ".", "?", "=", "<<<", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=",
    "|=", ".=", "in", "++", "--", "->", "[", "(",
];

/// "an expression, ';' or '}'" from lalrpop's list of expected terminals.
fn describe_expected(expected: &[String]) -> String {
    let names: Vec<&str> = expected
        .iter()
        .map(|s| s.trim_start_matches('"').trim_end_matches('"'))
        .collect();
    let has = |n: &str| names.contains(&n);
    if has("probe") && has("global") {
        return "'probe', 'global', 'private', 'function', or '%{'".to_string();
    }
    let mut items: Vec<String> = Vec::new();
    let mut covered: HashSet<&str> = HashSet::new();
    if has("statement") {
        items.push("a statement".into());
        covered.insert("statement");
    }
    if has("identifier") && has("number") && has("string literal") {
        items.push("an expression".into());
        covered.extend(EXPR_START);
    }
    let ops = names
        .iter()
        .filter(|n| OPERATORS.contains(n) && !covered.contains(*n))
        .count();
    if ops >= 6 {
        items.push("an operator".into());
        covered.extend(OPERATORS);
    }
    for n in &names {
        if covered.contains(n) {
            continue;
        }
        items.push(match *n {
            "identifier" => "an identifier".to_string(),
            "number" => "a number".to_string(),
            "string literal" => "a string literal".to_string(),
            "$target" => "a $target variable".to_string(),
            "@operator" => "an @operator".to_string(),
            "embedded code" => "embedded code".to_string(),
            "probe point" => "a probe point".to_string(),
            other => format!("'{other}'"),
        });
    }
    match items.len() {
        0 => "something else".to_string(),
        1 => items.remove(0),
        n => format!("{} or {}", items[..n - 1].join(", "), items[n - 1]),
    }
}

// ------------------------------------------------------- grammar actions

/// State the grammar's actions share: the file, the id counter, and what
/// the actions noticed for the checks after parsing.
pub struct Ctx {
    file: FileId,
    next_id: Cell<u32>,
    /// Set when a body may hold something [`validate`] reports, so that a
    /// clean file skips the walk over every statement and expression.
    suspect: Cell<bool>,
    /// Histograms built, less those in a place a bare one may stand.
    loose_hists: Cell<u32>,
    /// `return` statements since the last probe, alias or function.
    pending_returns: Cell<u32>,
}

/// A `->field` or `[index]` after a target variable or `@cast`.
pub enum Suffix {
    Field(String, usize, usize),
    Index(Box<Expr>),
    /// A `$`/`$$` after `]` or `)` (`$a[1]$`, `@cast(p, "T")$`).
    Pretty(u8, usize, usize),
}

/// An operand of a binary-operator chain: a unary expression, or the
/// `[k1, k2]` list that must be followed by `in`.
pub enum Operand {
    Expr(Box<Expr>),
    Keys(Vec<Box<Expr>>, u32, u32),
}

/// What follows an operand in a chain (with the operator's position;
/// offsets are `u32` as in [`Span`], which keeps parser symbols small).
pub enum Link {
    Binary(BinOp, u32, Operand),
    In(u32, Box<Ident>),
    Match(BinOp, u32, String, u32, u32),
}

impl Link {
    fn start(&self) -> usize {
        match self {
            Link::Binary(_, l, _) | Link::In(l, _) | Link::Match(_, l, ..) => *l as usize,
        }
    }
}

/// SystemTap's precedence over a flat chain (its parse_logical_or ...
/// parse_multiplicative), one tier per function level.
struct Climber<'c> {
    ctx: &'c Ctx,
    /// The operand to read next.
    pending: Option<Operand>,
    links: std::iter::Peekable<std::vec::IntoIter<Link>>,
}

/// The binary tiers, loosest first; `IN_TIER` and `COMPARE_TIER` are special.
const TIERS: &[&[BinOp]] = &[
    &[BinOp::Or],
    &[BinOp::And],
    &[BinOp::BitOr],
    &[BinOp::BitXor],
    &[BinOp::BitAnd],
    &[],
    &[
        BinOp::Lt,
        BinOp::Gt,
        BinOp::Le,
        BinOp::Ge,
        BinOp::Eq,
        BinOp::Ne,
    ],
    &[BinOp::Shl, BinOp::Shr, BinOp::UShr],
    &[BinOp::Concat],
    &[BinOp::Add, BinOp::Sub],
    &[BinOp::Mul, BinOp::Div, BinOp::Mod],
];
const IN_TIER: usize = 5;
const COMPARE_TIER: usize = 6;

fn span_of(e: &Expr) -> (usize, usize) {
    (e.span.start as usize, e.span.end as usize)
}

impl Climber<'_> {
    fn tier(&mut self, t: usize) -> ActionResult<Box<Expr>> {
        match t {
            IN_TIER => return self.array_in(),
            COMPARE_TIER => return self.comparison(),
            t if t >= TIERS.len() => return self.operand(),
            _ => {}
        }
        let mut lhs = self.tier(t + 1)?;
        while let Some(op) = self.next_binary(TIERS[t]) {
            let rhs = self.tier(t + 1)?;
            lhs = self.binary(op, lhs, rhs);
        }
        Ok(lhs)
    }

    /// Takes a `Binary` link whose operator is one of `ops`.
    fn next_binary(&mut self, ops: &[BinOp]) -> Option<BinOp> {
        match self.links.peek() {
            Some(Link::Binary(op, ..)) if ops.contains(op) => {}
            _ => return None,
        }
        match self.links.next() {
            Some(Link::Binary(op, _, operand)) => {
                self.pending = Some(operand);
                Some(op)
            }
            _ => None,
        }
    }

    fn binary(&self, op: BinOp, lhs: Box<Expr>, rhs: Box<Expr>) -> Box<Expr> {
        let (l, _) = span_of(&lhs);
        let (_, r) = span_of(&rhs);
        self.ctx.binary(op, lhs, rhs, l, r)
    }

    fn operand(&mut self) -> ActionResult<Box<Expr>> {
        match self.pending.take() {
            Some(Operand::Expr(e)) => Ok(e),
            Some(Operand::Keys(_, l, r)) => Err(user(
                "expected 'in' after a [key, ...] list",
                l as usize,
                r as usize,
            )),
            None => Err(user("expected an expression", 0, 0)),
        }
    }

    /// `KEY in ARRAY`, `[K1, K2] in ARRAY` (not chained), or a comparison.
    fn array_in(&mut self) -> ActionResult<Box<Expr>> {
        if let Some(Operand::Keys(..)) = self.pending {
            let Some(Operand::Keys(keys, l, r)) = self.pending.take() else {
                unreachable!("just matched")
            };
            return match self.links.next() {
                Some(Link::In(_, array)) => {
                    let end = array.span.end as usize;
                    let keys = keys.into_iter().map(|k| *k).collect();
                    let array = *array;
                    Ok(self.ctx.expr(ExprKind::In { keys, array }, l as usize, end))
                }
                _ => Err(user(
                    "expected 'in' after a [key, ...] list",
                    l as usize,
                    r as usize,
                )),
            };
        }
        let key = self.comparison()?;
        if let Some(Link::In(..)) = self.links.peek() {
            let Some(Link::In(_, array)) = self.links.next() else {
                unreachable!("just peeked")
            };
            let (l, _) = span_of(&key);
            let end = array.span.end as usize;
            return Ok(self.ctx.expr(
                ExprKind::In {
                    keys: vec![*key],
                    array: *array,
                },
                l,
                end,
            ));
        }
        Ok(key)
    }

    /// `a =~ "re"` (once), or a chain of comparisons.
    fn comparison(&mut self) -> ActionResult<Box<Expr>> {
        let mut lhs = self.tier(COMPARE_TIER + 1)?;
        if let Some(Link::Match(..)) = self.links.peek() {
            let Some(Link::Match(op, _, s, sl, r)) = self.links.next() else {
                unreachable!("just peeked")
            };
            let rhs = self.ctx.expr(ExprKind::Str(s), sl as usize, r as usize);
            return Ok(self.binary(op, lhs, rhs));
        }
        while let Some(op) = self.next_binary(TIERS[COMPARE_TIER]) {
            let rhs = self.tier(COMPARE_TIER + 1)?;
            lhs = self.binary(op, lhs, rhs);
        }
        Ok(lhs)
    }
}

/// A parsed `foreach (...)` header, waiting for its body.
pub struct ForeachHead {
    value: Option<Ident>,
    keys: Vec<Ident>,
    source: ForeachSource,
    slice: Option<Vec<Option<Expr>>>,
    sort: Option<ForeachSort>,
    limit: Option<Expr>,
}

type ActionResult<T> = Result<T, LalrError>;

fn user(message: impl Into<String>, start: usize, end: usize) -> LalrError {
    ParseError::User {
        error: Fail::new(message, start, end),
    }
}

/// The statistics operators (`@count` ...).
pub fn stat_op(name: &str) -> Option<StatOp> {
    Some(match name {
        "count" => StatOp::Count,
        "sum" => StatOp::Sum,
        "min" => StatOp::Min,
        "max" => StatOp::Max,
        "avg" => StatOp::Avg,
        "variance" => StatOp::Variance,
        _ => return None,
    })
}

/// Most points one written probe point may expand to (brace groups).
const MAX_POINT_EXPANSION: usize = 10_000;

/// `@words` SystemTap knows besides the statistics and histogram operators.
const OTHER_AT_WORDS: &[&str] = &[
    "cast",
    "defined",
    "probewrite",
    "entry",
    "perf",
    "var",
    "const",
    "kregister",
    "uregister",
    "kderef",
    "uderef",
];

impl Ctx {
    fn new(file: FileId, ids: &NodeIds) -> Ctx {
        Ctx {
            file,
            next_id: Cell::new(ids.next),
            suspect: Cell::new(false),
            loose_hists: Cell::new(0),
            pending_returns: Cell::new(0),
        }
    }

    /// Whether [`validate`] must walk the bodies: something built may be
    /// reported there.
    fn bodies_suspect(&self) -> bool {
        self.suspect.get() || self.loose_hists.get() != 0 || self.pending_returns.get() != 0
    }

    /// Something [`validate`] may report was built.
    pub fn suspect(&self) {
        self.suspect.set(true);
    }

    /// A histogram now stands where a bare one may (a print argument, a
    /// foreach source, an indexed histogram).
    fn hist_placed(&self) {
        self.loose_hists.set(self.loose_hists.get().wrapping_sub(1));
    }

    /// `return` at statement level.
    pub fn return_stmt(&self, value: Option<Expr>, l: usize, r: usize) -> Box<Stmt> {
        self.pending_returns.set(self.pending_returns.get() + 1);
        self.stmt(StmtKind::Return(value), l, r)
    }

    /// A probe, alias or function was reduced: the `return`s since the
    /// previous one are inside it, which is fine only in a function.
    pub fn item_done(&self, function: bool) {
        if !function && self.pending_returns.get() != 0 {
            self.suspect();
        }
        self.pending_returns.set(0);
    }

    /// `name(args)`, noting a print-family call whose arguments break the
    /// rules or that holds a bare histogram.
    pub fn call(&self, name: Ident, args: Vec<Expr>, l: usize, r: usize) -> Box<Expr> {
        if let Some(print) = PrintCall::of(&name.name) {
            if print.problem(&args, self.span(l, r)).is_some() {
                self.suspect();
            }
            if print.bare_hist_ok(&args) && matches!(args[0].kind, ExprKind::Hist { .. }) {
                self.hist_placed();
            }
        }
        self.expr(ExprKind::Call { name, args }, l, r)
    }

    /// `foreach (k in @hist_log(v))`.
    pub fn hist_source(&self, h: Box<Expr>) -> ForeachSource {
        self.hist_placed();
        ForeachSource::Hist(h)
    }

    pub fn span(&self, l: usize, r: usize) -> Span {
        Span::new(self.file, l, r)
    }

    fn id(&self) -> NodeId {
        let n = self.next_id.get();
        self.next_id.set(n + 1);
        NodeId(n)
    }

    pub fn expr(&self, kind: ExprKind, l: usize, r: usize) -> Box<Expr> {
        Box::new(Expr {
            id: self.id(),
            kind,
            span: self.span(l, r),
        })
    }

    pub fn binary(
        &self,
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        l: usize,
        r: usize,
    ) -> Box<Expr> {
        self.expr(ExprKind::Binary { op, lhs, rhs }, l, r)
    }

    pub fn stmt(&self, kind: StmtKind, l: usize, r: usize) -> Box<Stmt> {
        Box::new(Stmt {
            kind,
            span: self.span(l, r),
        })
    }

    /// Builds the tree of a binary-operator chain (`key`: a `[k, ...] in`
    /// key, which may be a comparison at most).
    pub fn climb(&self, first: Operand, rest: Vec<Link>, key: bool) -> ActionResult<Box<Expr>> {
        if rest.is_empty()
            && let Operand::Expr(e) = first
        {
            return Ok(e);
        }
        let mut c = Climber {
            ctx: self,
            pending: Some(first),
            links: rest.into_iter().peekable(),
        };
        let e = if key {
            c.tier(COMPARE_TIER)?
        } else {
            c.tier(0)?
        };
        match c.links.next() {
            None => Ok(e),
            Some(link) => {
                let at = link.start();
                let what = match link {
                    Link::In(..) => "'in'".to_string(),
                    Link::Match(op, ..) => format!("'{}'", op.text()),
                    Link::Binary(op, ..) => format!("'{}'", op.text()),
                };
                let message = if key {
                    format!("expected ',' or ']', found {what}")
                } else {
                    format!("{what} cannot continue this expression here; use parentheses")
                };
                Err(user(message, at, at + 1))
            }
        }
    }

    /// `-N` in a literal: SystemTap allows down to -2^63.
    pub fn negative_literal(&self, n: u64, l: usize, r: usize) -> ActionResult<i64> {
        if n > 1 << 63 {
            return Err(user("number invalid or out of range", l, r));
        }
        Ok((n as i64).wrapping_neg())
    }

    /// The points a written point with brace groups expands to.
    pub fn probe_points(
        &self,
        paths: Vec<Vec<Component>>,
        mark: Option<(bool, bool)>,
        condition: Option<Box<Expr>>,
        l: usize,
        r: usize,
    ) -> ActionResult<Vec<ProbePoint>> {
        let (optional, sufficient) = mark.unwrap_or((false, false));
        let condition = condition.map(|c| *c);
        Ok(paths
            .into_iter()
            .map(|components| ProbePoint {
                components,
                optional,
                sufficient,
                condition: condition.clone(),
                span: self.span(l, r),
            })
            .collect())
    }

    /// Every combination of the alternatives of `parts` (each part a list
    /// of component sequences), the first part varying slowest.
    pub fn point_product(
        &self,
        parts: Vec<Vec<Vec<Component>>>,
        l: usize,
        r: usize,
    ) -> ActionResult<Vec<Vec<Component>>> {
        if parts.iter().all(|alts| alts.len() == 1) {
            // No braces (nearly every point): one point, nothing to copy.
            return Ok(vec![parts.into_iter().flatten().flatten().collect()]);
        }
        let mut out: Vec<Vec<Component>> = vec![Vec::new()];
        for alts in parts {
            if out.len().saturating_mul(alts.len()) > MAX_POINT_EXPANSION {
                return Err(user(
                    format!(
                        "probe point brace expansion gives more than {MAX_POINT_EXPANSION} points"
                    ),
                    l,
                    r,
                ));
            }
            out = out
                .iter()
                .flat_map(|head| {
                    alts.iter().map(move |alt| {
                        let mut v = head.clone();
                        v.extend(alt.iter().cloned());
                        v
                    })
                })
                .collect();
        }
        Ok(out)
    }

    pub fn alias(
        &self,
        names: Vec<(ProbePoint, AliasKind)>,
        targets: Vec<ProbePoint>,
        body: Block,
        l: usize,
        r: usize,
    ) -> ActionResult<Vec<Item>> {
        self.item_done(false);
        let mut kind = AliasKind::Prologue;
        let mut points = Vec::with_capacity(names.len());
        for (p, k) in names {
            if p.optional || p.sufficient {
                let s = p.span;
                return Err(user(
                    "probe point alias name cannot be optional nor sufficient",
                    s.start as usize,
                    s.end as usize,
                ));
            }
            if k == AliasKind::Epilogue {
                kind = AliasKind::Epilogue;
            }
            points.push(p);
        }
        Ok(vec![Item::Alias(Alias {
            names: points,
            kind,
            targets,
            body,
            private: false,
            span: self.span(l, r),
        })])
    }

    pub fn global(
        &self,
        name: Ident,
        wrap: bool,
        size: Option<(i64, usize, usize)>,
        init: Option<Literal>,
        l: usize,
        r: usize,
    ) -> ActionResult<Global> {
        if let Some((n, sl, sr)) = size {
            if n <= 0 || n > i32::MAX as i64 {
                return Err(user("array size out of range", sl, sr));
            }
            if init.is_some() {
                return Err(user("only scalar globals can be initialized", l, r));
            }
        }
        Ok(Global {
            name,
            size: size.map(|s| s.0),
            wrap,
            init,
            private: false,
            span: self.span(l, r),
        })
    }

    pub fn globals(&self, vars: Vec<Box<Global>>, private: bool) -> Vec<Item> {
        vars.into_iter()
            .map(|mut g| {
                g.private = private;
                Item::Global(*g)
            })
            .collect()
    }

    pub fn for_loop(
        &self,
        head: Box<(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>)>,
        body: Box<Stmt>,
        l: usize,
        r: usize,
    ) -> Box<Stmt> {
        let (init, cond, step) = *head;
        self.stmt(
            StmtKind::For {
                init,
                cond,
                step,
                body,
            },
            l,
            r,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub fn foreach_head(
        &self,
        value: Option<(Ident, Option<bool>)>,
        keys: Vec<(Ident, Option<bool>)>,
        source: ForeachSource,
        slice: Option<Vec<Option<Expr>>>,
        array_sort: Option<(Option<(String, usize, usize)>, bool)>,
        limit: Option<Expr>,
        l: usize,
        r: usize,
    ) -> ActionResult<Box<ForeachHead>> {
        let mut sort: Option<ForeachSort> = None;
        let mut add = |by, descending, agg| {
            if sort.is_some() {
                return Err(user("multiple sort directives", l, r));
            }
            sort = Some(ForeachSort {
                by,
                descending,
                agg,
            });
            Ok(())
        };
        let value = match value {
            Some((v, mark)) => {
                if let Some(d) = mark {
                    add(SortBy::Value, d, None)?;
                }
                Some(v)
            }
            None => None,
        };
        let mut key_names = Vec::with_capacity(keys.len());
        for (i, (k, mark)) in keys.into_iter().enumerate() {
            if let Some(d) = mark {
                add(SortBy::Key(i), d, None)?;
            }
            key_names.push(k);
        }
        if let Some((agg, d)) = array_sort {
            let agg = match agg {
                Some((name, al, ar)) => match stat_op(&name) {
                    Some(op) => Some(op),
                    None => return Err(user("expected statistical operation", al, ar)),
                },
                None => None,
            };
            add(SortBy::Value, d, agg)?;
        }
        Ok(Box::new(ForeachHead {
            value,
            keys: key_names,
            source,
            slice,
            sort,
            limit,
        }))
    }

    pub fn foreach(&self, h: Box<ForeachHead>, body: Box<Stmt>, l: usize, r: usize) -> Box<Stmt> {
        let span = self.span(l, r);
        self.stmt(
            StmtKind::Foreach(Box::new(Foreach {
                value: h.value,
                keys: h.keys,
                source: h.source,
                slice: h.slice,
                sort: h.sort,
                limit: h.limit,
                body,
                span,
            })),
            l,
            r,
        )
    }

    /// `$name`, `$name->a[1]`, `$name$`, `$$vars`.
    pub fn target(
        &self,
        name: String,
        path: Vec<Suffix>,
        l: usize,
        r: usize,
    ) -> ActionResult<Box<Expr>> {
        let (name, mut pretty) = split_pretty(&name);
        if pretty > 0 && !path.is_empty() {
            return Err(user(
                "-> and [ are not accepted for a pretty-printing variable",
                l,
                r,
            ));
        }
        let path = self.target_path(path, &mut pretty)?;
        Ok(self.expr(
            ExprKind::Target(TargetVar {
                name,
                path,
                pretty,
                address: false,
            }),
            l,
            r,
        ))
    }

    /// The `->field` / `[index]` path; a trailing `$` on the last field
    /// sets `pretty`.
    fn target_path(&self, path: Vec<Suffix>, pretty: &mut u8) -> ActionResult<Vec<TargetComp>> {
        let last = path.len().saturating_sub(1);
        let mut comps = Vec::with_capacity(path.len());
        for (i, s) in path.into_iter().enumerate() {
            match s {
                Suffix::Field(f, fl, fr) => {
                    let (f, p) = split_pretty(&f);
                    if p > 0 {
                        if i != last {
                            return Err(user(
                                "-> and [ are not accepted for a pretty-printing variable",
                                fl,
                                fr,
                            ));
                        }
                        *pretty = p;
                    }
                    comps.push(TargetComp::Field(f));
                }
                Suffix::Index(e) => comps.push(TargetComp::Index(e)),
                Suffix::Pretty(n, pl, pr) => {
                    if i != last {
                        return Err(user(
                            "-> and [ are not accepted for a pretty-printing variable",
                            pl,
                            pr,
                        ));
                    }
                    *pretty = n;
                }
            }
        }
        Ok(comps)
    }

    /// `@name(args)` possibly followed by `->x` / `[i]`.
    pub fn at_operator(
        &self,
        name: String,
        mut args: Vec<Expr>,
        path: Vec<Suffix>,
        l: usize,
        r: usize,
    ) -> ActionResult<Box<Expr>> {
        if name == "cast" {
            return self.cast(args, path, l, r);
        }
        if name == "var" {
            return self.at_var(args, path, l, r);
        }
        if name.starts_with("hist_") {
            let hist = self.histogram(name, args, l, r)?;
            let mut path = path.into_iter();
            return match (path.next(), path.next()) {
                (None, _) => Ok(hist),
                (Some(Suffix::Index(key)), None) => Ok({
                    self.hist_placed();
                    self.expr(
                        ExprKind::Index {
                            base: IndexBase::Hist(hist),
                            keys: vec![*key],
                        },
                        l,
                        r,
                    )
                }),
                _ => Err(user("a histogram takes one [bucket] index", l, r)),
            };
        }
        if !path.is_empty() {
            return Err(user(
                format!("'@{name}' cannot be followed by -> or ["),
                l,
                r,
            ));
        }
        if let Some(op) = stat_op(&name) {
            if args.is_empty() {
                return Err(user(format!("'@{name}' needs a statistics value"), l, r));
            }
            let max = if op == StatOp::Variance { 2 } else { 1 };
            if args.len() > max {
                let what = if max == 1 { "parameter" } else { "parameters" };
                return Err(user(format!("not more than {max} {what} allowed"), l, r));
            }
            for a in &args[1..] {
                if !is_number_literal(a) {
                    let s = a.span;
                    return Err(user("expected number", s.start as usize, s.end as usize));
                }
            }
            let expr = Box::new(args.remove(0));
            return Ok(self.expr(ExprKind::Stat { op, expr, args }, l, r));
        }
        match name.as_str() {
            "defined" => {
                if args.len() != 1 {
                    return Err(user("'@defined' takes one expression", l, r));
                }
                Ok(self.expr(ExprKind::Defined(Box::new(args.remove(0))), l, r))
            }
            n if OTHER_AT_WORDS.contains(&n) => {
                Ok(self.expr(ExprKind::AtCall { name, args }, l, r))
            }
            _ => Err(user(format!("unknown operator @{name}"), l, r)),
        }
    }

    fn cast(
        &self,
        mut args: Vec<Expr>,
        path: Vec<Suffix>,
        l: usize,
        r: usize,
    ) -> ActionResult<Box<Expr>> {
        let string_arg = |e: Option<&Expr>| match e.map(|e| &e.kind) {
            Some(ExprKind::Str(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        };
        if !(2..=3).contains(&args.len()) {
            return Err(user(
                "'@cast' takes (expression, \"type\" [, \"module\"])",
                l,
                r,
            ));
        }
        let Some(type_name) = string_arg(args.get(1)) else {
            return Err(user("expected non-empty string", l, r));
        };
        let module = match args.get(2) {
            Some(_) => match string_arg(args.get(2)) {
                Some(m) => Some(m),
                None => return Err(user("expected non-empty string", l, r)),
            },
            None => None,
        };
        let mut pretty = 0;
        let path = self.target_path(path, &mut pretty)?;
        let expr = Box::new(args.remove(0));
        Ok(self.expr(
            ExprKind::Cast {
                expr,
                type_name,
                module,
                path,
                pretty,
            },
            l,
            r,
        ))
    }

    /// `&$var`, `&$p->field`, `&@var("g")`: the address of a target
    /// variable (nothing else has one in the script language).
    pub fn address_of(&self, mut e: Box<Expr>, l: usize, r: usize) -> ActionResult<Box<Expr>> {
        match &mut e.kind {
            ExprKind::Target(t) if t.pretty == 0 && !t.address => {
                t.address = true;
                e.span = self.span(l, r);
                Ok(e)
            }
            _ => Err(user("'&' takes a target variable ($var, $p->field)", l, r)),
        }
    }

    /// `@var("name[@file.c]" [, "module"])` possibly followed by `->x` /
    /// `[i]`: a target variable of the probed module's globals, named
    /// `@var(NAME[@FILE][, MODULE])` (no script identifier has `@`).
    fn at_var(
        &self,
        args: Vec<Expr>,
        path: Vec<Suffix>,
        l: usize,
        r: usize,
    ) -> ActionResult<Box<Expr>> {
        let strings: Vec<&str> = args
            .iter()
            .filter_map(|a| match &a.kind {
                ExprKind::Str(s) if !s.is_empty() => Some(s.as_str()),
                _ => None,
            })
            .collect();
        if !(1..=2).contains(&args.len()) || strings.len() != args.len() {
            return Err(user("'@var' takes (\"name[@file]\" [, \"module\"])", l, r));
        }
        let mut pretty = 0;
        let path = self.target_path(path, &mut pretty)?;
        let name = format!("@var({})", strings.join(", "));
        Ok(self.expr(
            ExprKind::Target(TargetVar {
                name,
                path,
                pretty,
                address: false,
            }),
            l,
            r,
        ))
    }

    /// `@hist_log(v)` / `@hist_linear(v, lo, hi, step)`.
    pub fn histogram(
        &self,
        name: String,
        mut args: Vec<Expr>,
        l: usize,
        r: usize,
    ) -> ActionResult<Box<Expr>> {
        let kind = match (name.as_str(), args.len()) {
            ("hist_log", 1) => HistKind::Log,
            ("hist_linear", 4) => {
                for a in &args[1..] {
                    if !is_number_literal(a) {
                        let s = a.span;
                        return Err(user("expected number", s.start as usize, s.end as usize));
                    }
                }
                let step = Box::new(args.pop().expect("4 args"));
                let hi = Box::new(args.pop().expect("4 args"));
                let lo = Box::new(args.pop().expect("4 args"));
                HistKind::Linear { lo, hi, step }
            }
            ("hist_log", _) => return Err(user("'@hist_log' takes one value", l, r)),
            ("hist_linear", _) => {
                return Err(user("'@hist_linear' takes (value, low, high, width)", l, r));
            }
            _ => return Err(user("expected @hist_log or @hist_linear", l, r)),
        };
        let expr = Box::new(args.remove(0));
        self.loose_hists.set(self.loose_hists.get().wrapping_add(1));
        Ok(self.expr(ExprKind::Hist { kind, expr }, l, r))
    }
}

/// `name$$` → ("name", 2); an all-`$` name keeps its text.
fn split_pretty(name: &str) -> (String, u8) {
    let base = name.trim_end_matches('$');
    if base.is_empty() || base == name {
        return (name.to_string(), 0);
    }
    let n = (name.len() - base.len()).min(u8::MAX as usize) as u8;
    (base.to_string(), n)
}

/// A number literal, possibly negated (`5`, `-5`).
fn is_number_literal(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Num(_) => true,
        ExprKind::Unary {
            op: UnOp::Neg,
            expr,
        } => matches!(expr.kind, ExprKind::Num(_)),
        _ => false,
    }
}

// ------------------------------------------------------------- validation

/// The checks SystemTap makes while parsing, on the finished tree. The
/// bodies (statements, expressions, probe-point conditions) are walked only
/// when the grammar's actions saw something there that may be reported
/// (`bodies`): a clean large file is not walked twice.
fn validate(script: &Script, opts: &ParseOptions, bodies: bool) -> Vec<Diagnostic> {
    let mut v = Validator {
        guru: opts.guru,
        in_function: false,
        bodies,
        problems: Vec::new(),
    };
    let mut globals: HashSet<&str> = HashSet::new();
    for item in &script.items {
        match item {
            Item::Global(g) => {
                if !globals.insert(&g.name.name) {
                    v.error("duplicate global name", g.name.span);
                }
            }
            Item::Embedded(e) => v.embedded(e),
            Item::Probe(p) => {
                v.in_function = false;
                for pp in &p.points {
                    v.probe_point(pp);
                }
                v.block(&p.body);
            }
            Item::Alias(a) => {
                v.in_function = false;
                for pp in a.names.iter().chain(&a.targets) {
                    v.probe_point(pp);
                }
                v.block(&a.body);
            }
            Item::Function(f) => {
                v.in_function = true;
                for_each_repeat(f.params.iter().map(|p| &p.name), |name| {
                    v.error("duplicate parameter names", name.span)
                });
                match &f.body {
                    FunctionBody::Block(b) => v.block(b),
                    FunctionBody::Embedded(e) => v.embedded(e),
                }
            }
        }
    }
    v.problems
}

/// Calls `repeat` for each name equal to an earlier one, in order: a
/// linear scan for the few parameters a function usually has (no hashing,
/// no allocation), a set beyond that.
fn for_each_repeat<'a>(
    names: impl ExactSizeIterator<Item = &'a Ident>,
    mut repeat: impl FnMut(&'a Ident),
) {
    if names.len() <= 8 {
        let mut seen: [&str; 8] = [""; 8];
        for (i, name) in names.enumerate() {
            if seen[..i].contains(&name.name.as_str()) {
                repeat(name);
            }
            seen[i] = &name.name;
        }
    } else {
        let mut seen = HashSet::new();
        for name in names {
            if !seen.insert(&name.name) {
                repeat(name);
            }
        }
    }
}

struct Validator {
    guru: bool,
    in_function: bool,
    /// Walk statements and expressions (see [`validate`]).
    bodies: bool,
    problems: Vec<Diagnostic>,
}

const PRINT_FUNCTIONS: &[&str] = &[
    "print",
    "println",
    "printf",
    "printd",
    "printdln",
    "sprint",
    "sprintln",
    "sprintf",
    "sprintd",
    "sprintdln",
];

impl Validator {
    fn error(&mut self, message: &str, span: Span) {
        self.problems
            .push(Diagnostic::parse_error(message).with_label(span, "here"));
    }

    fn embedded(&mut self, e: &Embedded) {
        if !self.guru {
            self.problems.push(
                Diagnostic::parse_error("embedded code in unprivileged script; need utap -g")
                    .with_label(e.span, "here")
                    .with_note("utap runs no embedded C; guru mode only lets the checker say so"),
            );
        }
    }

    fn probe_point(&mut self, p: &ProbePoint) {
        if !self.bodies {
            return;
        }
        if let Some(c) = &p.condition {
            self.expr(c, false);
        }
    }

    fn block(&mut self, b: &Block) {
        if !self.bodies {
            return;
        }
        for s in &b.stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Block(b) => self.block(b),
            StmtKind::Expr(e) | StmtKind::Delete(e) => self.expr(e, false),
            StmtKind::If { cond, then, else_ } => {
                self.expr(cond, false);
                self.stmt(then);
                if let Some(e) = else_ {
                    self.stmt(e);
                }
            }
            StmtKind::While { cond, body } => {
                self.expr(cond, false);
                self.stmt(body);
            }
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => {
                for e in [init, cond, step].into_iter().flatten() {
                    self.expr(e, false);
                }
                self.stmt(body);
            }
            StmtKind::Foreach(f) => {
                if let ForeachSource::Hist(h) = &f.source {
                    self.expr(h, true);
                }
                for e in f.slice.iter().flatten().flatten() {
                    self.expr(e, false);
                }
                if let Some(e) = &f.limit {
                    self.expr(e, false);
                }
                self.stmt(&f.body);
            }
            StmtKind::Return(e) => {
                if !self.in_function {
                    self.error("found 'return' not in function context", s.span);
                }
                if let Some(e) = e {
                    self.expr(e, false);
                }
            }
            StmtKind::Try { body, catch, .. } => {
                self.block(body);
                self.block(catch);
            }
            StmtKind::Embedded(e) => self.embedded(e),
            StmtKind::Next | StmtKind::Break | StmtKind::Continue | StmtKind::Empty => {}
        }
    }

    /// `hist_ok`: a bare histogram may stand here (print argument, foreach source).
    fn expr(&mut self, e: &Expr, hist_ok: bool) {
        match &e.kind {
            ExprKind::Num(_) | ExprKind::Str(_) | ExprKind::Var(_) | ExprKind::Wildcard => {}
            ExprKind::Hist { expr, .. } => {
                if !hist_ok {
                    self.error("base histogram operator where expression expected", e.span);
                }
                self.expr(expr, false);
            }
            ExprKind::Index { base, keys } => {
                if let IndexBase::Hist(h) = base {
                    self.expr(h, true);
                }
                for k in keys {
                    self.expr(k, false);
                }
            }
            ExprKind::Target(t) => self.target_path(&t.path),
            ExprKind::Cast { expr, path, .. } => {
                self.expr(expr, false);
                self.target_path(path);
            }
            ExprKind::AtCall { args, .. } => {
                for a in args {
                    self.expr(a, false);
                }
            }
            ExprKind::Defined(x) => self.expr(x, false),
            ExprKind::Unary { expr, .. } => self.expr(expr, false),
            ExprKind::IncDec { target, .. } => self.expr(target, false),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs, false);
                self.expr(rhs, false);
            }
            ExprKind::Assign { target, value, .. } => {
                self.expr(target, false);
                self.expr(value, false);
            }
            ExprKind::Ternary { cond, then, else_ } => {
                self.expr(cond, false);
                self.expr(then, false);
                self.expr(else_, false);
            }
            ExprKind::In { keys, .. } => {
                for k in keys {
                    self.expr(k, false);
                }
            }
            ExprKind::Call { name, args } => {
                let print = PrintCall::of(&name.name);
                if let Some(problem) = print.and_then(|p| p.problem(args, e.span)) {
                    self.problems.push(problem);
                }
                let bare_hist_ok = print.is_some_and(|p| p.bare_hist_ok(args));
                for a in args {
                    self.expr(a, bare_hist_ok);
                }
            }
            ExprKind::Stat { expr, args, .. } => {
                self.expr(expr, false);
                for a in args {
                    self.expr(a, false);
                }
            }
        }
    }

    fn target_path(&mut self, path: &[TargetComp]) {
        for c in path {
            if let TargetComp::Index(i) = c {
                self.expr(i, false);
            }
        }
    }
}

/// A call to one of the print family, whose arguments SystemTap's parser checks.
#[derive(Clone, Copy)]
struct PrintCall<'n> {
    name: &'n str,
}

impl<'n> PrintCall<'n> {
    fn of(name: &'n str) -> Option<PrintCall<'n>> {
        PRINT_FUNCTIONS
            .contains(&name)
            .then_some(PrintCall { name })
    }

    /// A bare histogram may be the one argument of `print`-style calls.
    fn bare_hist_ok(self, args: &[Expr]) -> bool {
        matches!(self.name, "print" | "println" | "sprint" | "sprintln") && args.len() == 1
    }

    /// The broken argument rule, as SystemTap's parser has them.
    fn problem(self, args: &[Expr], span: Span) -> Option<Diagnostic> {
        let name = self.name;
        let first_is_literal = matches!(args.first().map(|a| &a.kind), Some(ExprKind::Str(_)));
        let at = args.first().map_or(span, |a| a.span);
        if name.ends_with('f') {
            if !first_is_literal {
                return Some(
                    Diagnostic::parse_error("expected literal string")
                        .with_label(at, "the format must be a string literal")
                        .with_help(format!("{name}(\"format\", values...)")),
                );
            }
        } else if name.contains("printd") {
            if !first_is_literal {
                return Some(
                    Diagnostic::parse_error("expected literal string")
                        .with_label(at, "the delimiter must be a string literal")
                        .with_help(format!("{name}(\"delimiter\", value1, value2...)")),
                );
            } else if args.len() < 3 {
                return Some(
                    Diagnostic::parse_error(format!(
                        "{name} needs at least two values after the delimiter"
                    ))
                    .with_label(span, "here"),
                );
            }
        } else if !name.ends_with("ln") && args.is_empty() {
            return Some(
                Diagnostic::parse_error(format!("{name} needs at least one value"))
                    .with_label(span, "here"),
            );
        }
        None
    }
}
