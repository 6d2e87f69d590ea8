//! The checked program: the checker's output and the codegen's only input.
//!
//! Everything here is resolved and typed. Names are gone (except for
//! printing and error messages): variables are [`LocalId`]s and
//! [`GlobalId`]s, calls are [`FuncId`]s or [`Builtin`] names, probe points
//! are [`PointKind`]s from the catalogue, aliases are expanded into the probe
//! bodies, `@defined` is folded, and every expression has a [`Type`].
//!
//! printf formats are parsed by the checker into `utap_runtime::format`
//! types, shared with the runtime that executes them.
//!
//! Value representation the codegen and runtime agree on: a long is an
//! `i64`; a string is a handle (an `i64`) into the running handler's string
//! arena; statistics and arrays live in the runtime and are named by their
//! [`GlobalId`].

use crate::ast::{AssignOp, BinOp, IncDecOp, Span, StatOp, UnOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Long,
    String,
    /// A statistics aggregate (only `<<<` and `@extractors` apply).
    Stats,
    /// A histogram view of a statistic (`@hist_log(s)`): printable,
    /// indexable by bucket, iterable with foreach.
    Hist,
    /// No value (statement-only calls such as `print`).
    Void,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GlobalId(pub u32);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub u32);

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub globals: Vec<GlobalVar>,
    pub functions: Vec<FunctionDef>,
    /// Probes in declaration order (equal-priority begin/end run in this order).
    pub probes: Vec<ProbeDef>,
    /// Limits and settings from `-D` and `-g`, as the checker saw them.
    pub guru: bool,
    /// `@entry`'s counters of returns that found no entry (a long scalar
    /// global each), with the return probe's points, for `-v`.
    pub entry_missing: Vec<(GlobalId, String)>,
}

#[derive(Clone, Debug)]
pub struct GlobalVar {
    pub name: String,
    /// The value type (Stats for aggregates).
    pub ty: Type,
    /// Key types for arrays; `None` for scalars.
    pub keys: Option<Vec<Type>>,
    /// Declared maximum entries (`global a[100]`), else MAXMAPENTRIES.
    pub size: Option<i64>,
    /// `global a%`: wrap-around array.
    pub wrap: bool,
    pub init: Option<crate::ast::Literal>,
    /// Written but never read: printed at exit as SystemTap does.
    pub autoprint: bool,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct LocalVar {
    pub name: String,
    pub ty: Type,
}

#[derive(Clone, Debug)]
pub struct FunctionDef {
    pub name: String,
    /// The first `params` locals are the parameters, in order.
    pub params: usize,
    pub locals: Vec<LocalVar>,
    pub ret: Type,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct ProbeDef {
    /// Where this probe fires (one handler may serve several points).
    pub points: Vec<ProbePoint>,
    pub locals: Vec<LocalVar>,
    /// Alias prologues, the user's body and epilogues, already spliced.
    pub body: Block,
    /// The point text as written by the user, for messages and `-p2`.
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct ProbePoint {
    pub kind: PointKind,
    /// `if (expr)` guards from the point and the aliases it went through,
    /// and-ed together; evaluated before the body.
    pub condition: Option<Expr>,
    /// Canonical text, e.g. `process("/bin/ls").syscall.return`.
    pub text: String,
    /// The script-level name it was reached by: the outermost alias name
    /// as matched (`syscall.openat` for `syscall.open*`), else `text`.
    pub head: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PointKind {
    Begin(i64),
    End(i64),
    Error(i64),
    Never,
    /// `prometheus`: a scrape of `--metrics`.
    Prometheus,
    /// `timer.s/ms/us/ns(N)`, `timer.hz(N)` converted to a period.
    Timer {
        period_ns: u64,
        randomize_ns: u64,
    },
    Process {
        target: ProcessTarget,
        event: ProcessEvent,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessTarget {
    /// Unqualified `process`: every process of the session.
    Any,
    Path(String),
    Pid(i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessEvent {
    Begin,
    /// A thread created a process or thread: fires in the creator's
    /// context, the new task's ids as `$new_pid`/`$new_tid`.
    Create,
    End,
    ThreadBegin,
    ThreadEnd,
    /// `syscalls`: the syscall numbers this probe can fire on, when the
    /// checker can prove it (feeds the seccomp filter); `None` = all.
    Syscall {
        syscalls: Option<Vec<u32>>,
    },
    SyscallReturn {
        syscalls: Option<Vec<u32>>,
    },
    Signal,
    Quiesce,
    /// `timer.profile`: every `period_ns`, each running thread of the
    /// traced processes is sampled in its own context.
    Profile {
        period_ns: u64,
    },
    /// `.function`, `.plt`, `.statement`, `.library(..)...` (+ `.return`).
    Function(utap_runtime::session::FunctionPoint),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Expr(Expr),
    Block(Block),
    If {
        cond: Expr,
        then: Box<Stmt>,
        else_: Option<Box<Stmt>>,
    },
    While {
        cond: Expr,
        body: Box<Stmt>,
    },
    For {
        init: Option<Expr>,
        cond: Option<Expr>,
        step: Option<Expr>,
        body: Box<Stmt>,
    },
    Foreach(Box<Foreach>),
    Next,
    Break,
    Continue,
    Return(Option<Expr>),
    /// Delete a whole array / a scalar (reset) / one element.
    Delete(LValue),
    Try {
        body: Block,
        catch_var: Option<LocalId>,
        catch: Block,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Foreach {
    pub source: ForeachSource,
    /// Locals receiving the keys (one per key column; for a histogram, one:
    /// the bucket index).
    pub keys: Vec<LocalId>,
    pub value: Option<LocalId>,
    /// Key filter `arr[*, "x"]`.
    pub slice: Option<Vec<Option<Expr>>>,
    pub sort: Option<crate::ast::ForeachSort>,
    pub limit: Option<Expr>,
    pub body: Box<Stmt>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ForeachSource {
    Array(GlobalId),
    Hist(Box<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Type,
    pub span: Span,
}

/// Something that can be assigned, incremented, deleted or `<<<`-ed.
#[derive(Clone, Debug, PartialEq)]
pub enum LValue {
    Local(LocalId),
    Global(GlobalId),
    /// An element; under `delete` some keys may be `Wildcard` (a slice).
    Elem {
        array: GlobalId,
        keys: Vec<Expr>,
    },
    /// Guru mode only: `$return = V`, `$signal = N`.
    Context(ContextVar),
}

/// Context variables provided by the probe family (see the catalogue).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContextVar {
    Syscall,
    /// `$arg1`..`$arg6`, and to `$arg12` at USDT markers (0-based index
    /// here).
    Arg(u8),
    Return,
    Signal,
    Code,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Long(i64),
    Str(String),
    Load(LValue),
    Context(ContextVar),
    Unary {
        op: UnOp,
        expr: Box<Expr>,
    },
    /// Arithmetic, comparison (long or string, by operand type), concat,
    /// regex match. `&&` and `||` short-circuit.
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Ternary {
        cond: Box<Expr>,
        then: Box<Expr>,
        else_: Box<Expr>,
    },
    /// `op` is never `AssignOp::Stat` (see `StatAdd`).
    Assign {
        op: AssignOp,
        target: LValue,
        value: Box<Expr>,
    },
    IncDec {
        op: IncDecOp,
        prefix: bool,
        target: LValue,
    },
    /// `target <<< value`
    StatAdd {
        target: LValue,
        value: Box<Expr>,
    },
    /// `@count(target)` etc.; `target` is a Stats global or element.
    StatGet {
        op: StatOp,
        target: LValue,
    },
    Hist {
        kind: HistKind,
        target: LValue,
    },
    /// `@hist_log(s)[bucket]`
    HistBucket {
        hist: Box<Expr>,
        index: Box<Expr>,
    },
    /// `*`, only as a key of `[k1, *] in array` or `delete a[k1, *]` (an
    /// array slice: any value of that key column matches).
    Wildcard,
    /// `[k1, k2] in array`; a slice when some keys are `Wildcard`.
    In {
        array: GlobalId,
        keys: Vec<Expr>,
    },
    Call {
        func: FuncId,
        args: Vec<Expr>,
    },
    /// A function the runtime implements (see `crate::builtins`).
    Builtin {
        name: &'static str,
        args: Vec<Expr>,
    },
    /// `print`, `printf`, `sprintf`, `println`, `printd`, … with the format
    /// already parsed and checked against the arguments.
    Print {
        kind: PrintKind,
        format: Option<Vec<FormatPiece>>,
        args: Vec<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistKind {
    Log,
    Linear { lo: i64, hi: i64, step: i64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintKind {
    Print,
    Println,
    Printf,
    Printd,
    Printdln,
    Sprint,
    Sprintln,
    Sprintf,
    Sprintd,
    Sprintdln,
}

pub use utap_runtime::format::{ConvKind, Conversion, FormatFlags, FormatNum, FormatPiece};

/// Which system calls the probes of one kind (entry or return) can fire
/// on: what the seccomp filter must trace (issue 6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyscallNeed {
    /// No probe of this kind.
    Nothing,
    /// Only these numbers (sorted, unique).
    Some(Vec<u32>),
    /// Every system call.
    All,
}

impl Program {
    /// The global named `name`.
    pub fn global_id(&self, name: &str) -> Option<GlobalId> {
        let i = self.globals.iter().position(|g| g.name == name)?;
        Some(GlobalId(i as u32))
    }

    /// The union of the syscall sets of every `process.syscall`
    /// (`returns == false`) or `process.syscall.return` probe point.
    pub fn syscall_need(&self, returns: bool) -> SyscallNeed {
        let mut set: Vec<u32> = Vec::new();
        let mut any = false;
        for point in self.probes.iter().flat_map(|p| &p.points) {
            let syscalls = match (&point.kind, returns) {
                (
                    PointKind::Process {
                        event: ProcessEvent::Syscall { syscalls },
                        ..
                    },
                    false,
                )
                | (
                    PointKind::Process {
                        event: ProcessEvent::SyscallReturn { syscalls },
                        ..
                    },
                    true,
                ) => syscalls,
                _ => continue,
            };
            any = true;
            match syscalls {
                None => return SyscallNeed::All,
                Some(s) => set.extend(s),
            }
        }
        if !any {
            return SyscallNeed::Nothing;
        }
        set.sort_unstable();
        set.dedup();
        SyscallNeed::Some(set)
    }
}
