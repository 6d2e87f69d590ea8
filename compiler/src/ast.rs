//! The parsed script: what the parser produces and every later pass reads.
//!
//! Every node carries a [`Span`] (file + byte range) so that any pass can
//! point a diagnostic at it. Expressions also carry a [`NodeId`], unique
//! within one parse, so the checker can attach types and resolutions in side
//! tables instead of mutating the tree.
//!
//! Script arguments (`$1`, `@1`, `$#`, `@#`) and `%( %)` conditionals are
//! gone by the time an AST exists: the preprocessor substitutes them, as
//! SystemTap does, so they never appear here.

/// Index of a source file in the [`crate::source::SourceMap`].
pub type FileId = u32;

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: start as u32,
            end: end as u32,
        }
    }
    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// Identity of an expression node, unique within a parsed file set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// A name with where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// One parsed file (a user script or a tapset).
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    pub file: FileId,
    pub items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Probe(Probe),
    Alias(Alias),
    Global(Global),
    Function(Function),
    /// Top-level `%{ ... %}`: parsed so the checker can reject it clearly.
    Embedded(Embedded),
}

/// `probe P1, P2 { body }`
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub points: Vec<ProbePoint>,
    pub body: Block,
    pub private: bool,
    pub span: Span,
}

/// `probe a.b = target1, target2 { body }` (prologue) or `+=` (epilogue).
#[derive(Clone, Debug, PartialEq)]
pub struct Alias {
    /// The names this alias defines (`probe a, b = ...` defines two).
    pub names: Vec<ProbePoint>,
    pub kind: AliasKind,
    pub targets: Vec<ProbePoint>,
    pub body: Block,
    pub private: bool,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasKind {
    /// `=`: the alias body runs before the user's handler.
    Prologue,
    /// `+=`: the alias body runs after the user's handler.
    Epilogue,
}

/// `process("/bin/ls").syscall.return ?` or `timer.ms(100) if (x > 1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbePoint {
    pub components: Vec<Component>,
    /// Trailing `?`: no error if it resolves to nothing.
    pub optional: bool,
    /// Trailing `!`: stop at the first alternative that resolves.
    pub sufficient: bool,
    /// `if (expr)` guard.
    pub condition: Option<Expr>,
    pub span: Span,
}

/// One dotted component; `name` may contain `*` wildcards.
#[derive(Clone, Debug, PartialEq)]
pub struct Component {
    pub name: String,
    pub arg: Option<Literal>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Literal {
    Num(i64),
    Str(String),
}

/// `global x`, `global a[100]`, `global b%`, `global c = 5`.
#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    pub name: Ident,
    /// Declared maximum number of entries (arrays only).
    pub size: Option<i64>,
    /// `%`: a full array overwrites its oldest entry instead of failing.
    pub wrap: bool,
    pub init: Option<Literal>,
    pub private: bool,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeDecl {
    Long,
    String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: Option<TypeDecl>,
}

/// `function name:long (a:long, b) { ... }`
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: Ident,
    pub ret: Option<TypeDecl>,
    pub params: Vec<Param>,
    pub body: FunctionBody,
    pub private: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FunctionBody {
    Block(Block),
    Embedded(Embedded),
}

/// Raw `%{ ... %}` code (never run by utap; kept to report it).
#[derive(Clone, Debug, PartialEq)]
pub struct Embedded {
    pub code: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Block(Block),
    Expr(Expr),
    If {
        cond: Expr,
        then: Box<Stmt>,
        else_: Option<Box<Stmt>>,
    },
    While {
        cond: Expr,
        body: Box<Stmt>,
    },
    /// The three clauses are boxed: inline they would make every
    /// statement (and every `Vec<Stmt>` slot) three expressions larger.
    For {
        init: Option<Box<Expr>>,
        cond: Option<Box<Expr>>,
        step: Option<Box<Expr>>,
        body: Box<Stmt>,
    },
    Foreach(Box<Foreach>),
    Next,
    Break,
    Continue,
    Return(Option<Expr>),
    /// `delete a`, `delete a[k]`, `delete x`.
    Delete(Expr),
    Try {
        body: Block,
        catch_var: Option<Ident>,
        catch: Block,
    },
    /// Statement-level `%{ %}`.
    Embedded(Embedded),
    /// A lone `;`.
    Empty,
}

/// `foreach (v = [k1, k2+] in arr limit n) body`
#[derive(Clone, Debug, PartialEq)]
pub struct Foreach {
    /// `v =` binds the element's value.
    pub value: Option<Ident>,
    pub keys: Vec<Ident>,
    /// An array name, or a histogram expression (`@hist_log(s)`).
    pub source: ForeachSource,
    /// Optional key filter: `arr[*, "x"]` (None entries are `*`).
    pub slice: Option<Vec<Option<Expr>>>,
    pub sort: Option<ForeachSort>,
    pub limit: Option<Expr>,
    pub body: Box<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ForeachSource {
    Array(Ident),
    Hist(Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForeachSort {
    pub by: SortBy,
    pub descending: bool,
    /// `arr @sum-`: the aggregate to sort a statistics array by (default @count).
    pub agg: Option<StatOp>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// Zero-based key column.
    Key(usize),
    Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub id: NodeId,
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Num(i64),
    Str(String),
    /// A bare identifier: a local, a global, or an alias variable.
    Var(String),
    /// `*` as an array index or `[..] in` key: an array slice's "any key"
    /// (the checker allows it only under `delete` and `in`).
    Wildcard,
    /// `a[k1, k2]`; `base` is an array name or a histogram expression.
    Index {
        base: IndexBase,
        keys: Vec<Expr>,
    },
    /// `$name`, `$name->field[3]`, `$$vars`: context (target) variables.
    Target(TargetVar),
    /// `@cast(expr, "type" [, "module"])->path`: the memory at `expr` read
    /// as the type, from the module's DWARF (check::dwarf).
    Cast {
        expr: Box<Expr>,
        type_name: String,
        module: Option<String>,
        path: Vec<TargetComp>,
        /// Trailing `$` / `$$` pretty-print suffix count.
        pretty: u8,
    },
    /// `@var("name")`, `@entry(expr)`, `@perf("x")`… any other `@name(args)`
    /// form utap parses but the checker decides on.
    AtCall {
        name: String,
        args: Vec<Expr>,
    },
    Defined(Box<Expr>),
    Unary {
        op: UnOp,
        expr: Box<Expr>,
    },
    IncDec {
        op: IncDecOp,
        prefix: bool,
        target: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Assign {
        op: AssignOp,
        target: Box<Expr>,
        value: Box<Expr>,
    },
    Ternary {
        cond: Box<Expr>,
        then: Box<Expr>,
        else_: Box<Expr>,
    },
    /// `k in a`, `[k1, k2] in a`.
    In {
        keys: Vec<Expr>,
        array: Ident,
    },
    Call {
        name: Ident,
        args: Vec<Expr>,
    },
    /// `@count(x)`, `@variance(x, bits)`.
    Stat {
        op: StatOp,
        expr: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `@hist_log(x)`, `@hist_linear(x, lo, hi, step)`.
    Hist {
        kind: HistKind,
        expr: Box<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum IndexBase {
    Array(Ident),
    Hist(Box<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct TargetVar {
    /// Without the `$` (e.g. `syscall`, `arg1`, `$vars` for `$$vars`).
    pub name: String,
    pub path: Vec<TargetComp>,
    /// Trailing `$` / `$$` pretty-print suffix count.
    pub pretty: u8,
    /// Written `&$var`: its address.
    pub address: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TargetComp {
    Field(String),
    Index(Box<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum HistKind {
    Log,
    Linear {
        lo: Box<Expr>,
        hi: Box<Expr>,
        step: Box<Expr>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatOp {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    Variance,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Plus,
    Not,
    BitNot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncDecOp {
    Inc,
    Dec,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Shl,
    Shr,
    /// `>>>`: shift right filling with zeros.
    UShr,
    BitAnd,
    BitOr,
    BitXor,
    And,
    Or,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    /// String concatenation `.`.
    Concat,
    /// `=~`
    Match,
    /// `!~`
    NotMatch,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignOp {
    Assign,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Shl,
    Shr,
    BitAnd,
    BitOr,
    BitXor,
    Concat,
    /// `<<<`: add a value to a statistics aggregate.
    Stat,
}

impl UnOp {
    /// The operator as written.
    pub fn text(self) -> &'static str {
        match self {
            UnOp::Neg => "-",
            UnOp::Plus => "+",
            UnOp::Not => "!",
            UnOp::BitNot => "~",
        }
    }
}

impl BinOp {
    /// The operator as written.
    pub fn text(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::UShr => ">>>",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Concat => ".",
            BinOp::Match => "=~",
            BinOp::NotMatch => "!~",
        }
    }
}

impl AssignOp {
    /// The operator as written.
    pub fn text(self) -> &'static str {
        match self {
            AssignOp::Assign => "=",
            AssignOp::Add => "+=",
            AssignOp::Sub => "-=",
            AssignOp::Mul => "*=",
            AssignOp::Div => "/=",
            AssignOp::Mod => "%=",
            AssignOp::Shl => "<<=",
            AssignOp::Shr => ">>=",
            AssignOp::BitAnd => "&=",
            AssignOp::BitOr => "|=",
            AssignOp::BitXor => "^=",
            AssignOp::Concat => ".=",
            AssignOp::Stat => "<<<",
        }
    }
}

impl StatOp {
    /// The extractor's name without the `@` (`count`, `sum`, ...).
    pub fn name(self) -> &'static str {
        match self {
            StatOp::Count => "count",
            StatOp::Sum => "sum",
            StatOp::Min => "min",
            StatOp::Max => "max",
            StatOp::Avg => "avg",
            StatOp::Variance => "variance",
        }
    }
}
