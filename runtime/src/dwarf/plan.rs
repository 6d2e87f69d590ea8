//! Access plans for target variables, built once by the checker and
//! evaluated by the runtime at each hit with the thread's registers and
//! memory only.
//!
//! A plan is a location program (DWARF registers, constants, link-time
//! addresses plus the module's bias, loads) saying where the variable is
//! at the probe's pc, then steps (`->`: load the pointer; `.field`: add the
//! member offset; `[i]`: add the index times the element size), then a
//! final load of the value's size and signedness. The CFA and frame base
//! are folded in at build time (the CFA rule at a fixed pc is a register
//! plus an offset).

use std::sync::{Arc, RwLock};

use gimli::{EndianSlice, LittleEndian, Operation};

use super::read::{DebugInfo, Function, TypeKind, TypeRef, VarLocation, Variable};
use crate::memory::{ReadMemory, read_cstring};

/// One operation of a location program (a small stack machine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Push a DWARF register's value.
    Reg(u16),
    Const(i64),
    /// Push a link-time address plus the module's load bias.
    Addr(u64),
    Plus,
    Minus,
    Mul,
    And,
    PlusConst(i64),
    /// Replace the top with the `n`-byte value at that address.
    Deref(u8),
    /// Push the script's value number `n` (`@cast`'s address).
    Input(usize),
    /// The top is an offset in the program's TLS block, which ends at the
    /// thread pointer (`fs_base`) and is this many bytes long.
    Tls(u64),
    /// The top is an offset in the probed library's TLS block (found
    /// through the thread's DTV, see [`super::tls`]).
    ModuleTls,
}

/// Where a variable is at one pc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loc {
    /// The program computes its address.
    Memory(Vec<Op>),
    /// It is in a register.
    Register(u16),
    /// The program computes its value (`DW_OP_stack_value`).
    Value(Vec<Op>),
    /// `DW_OP_piece`s: the value's bytes, in order, each from a register,
    /// memory or a computed value (a 16-byte struct in rdi:rsi at -O2).
    Pieces(Vec<(Loc, u8)>),
    /// Optimised out here, or described in a way not handled.
    Unavailable,
}

/// A step from a place to another, for `->`, `.` and `[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The place holds a pointer: go where it points.
    Deref,
    Offset(i64),
    /// Add dynamic index number `arg` times `stride`.
    Index {
        arg: usize,
        stride: i64,
    },
    /// The place is a bitfield's storage (always the last step; the
    /// final read extracts the bits).
    Bits {
        shift: u8,
        width: u8,
    },
}

/// What to make of the final place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Final {
    Load {
        size: u8,
        signed: bool,
    },
    /// An array used as a number: its address.
    Address,
    /// A bitfield: `width` bits from bit `shift` of the place.
    Bits {
        shift: u8,
        width: u8,
        signed: bool,
    },
    /// A `float` or `double`: the bits of its value as a double
    /// (SystemTap's floating point longs, for `fp_to_string`).
    Float {
        size: u8,
    },
}

/// A variable access: location, steps, final load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    pub loc: Loc,
    pub steps: Vec<Step>,
    pub fin: Final,
}

/// How `$var$` prints a value (SystemTap's pretty-printing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    Int {
        size: u8,
        signed: bool,
    },
    Char {
        size: u8,
        signed: bool,
    },
    Pointer,
    Bits {
        shift: u8,
        width: u8,
        signed: bool,
    },
    Float {
        size: u8,
    },
    /// `char *`: the string, quoted.
    Str,
    /// A pointer to a struct or union: the pointee's members (SystemTap
    /// shows `$ptr$` as the structure it points to).
    Deref(Box<Shape>),
    Struct(Vec<(String, i64, Shape)>),
    /// An array as SystemTap prints it: its first element, `[1, ...]`.
    Array(Box<Shape>),
    /// A `char` array: the string at its start, quoted.
    Chars,
    /// A nested struct (`{...}`) or array (`[...]`) left out by `$`.
    Elided(&'static str),
    /// Floating point and other values shown as `?`.
    Unknown,
}

/// One part of a `$$parms`-like string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    /// `%#x` of a number, `?` when the chain cannot be evaluated.
    Hex(Chain),
    /// `$var$`: the value at the chain's place, pretty-printed.
    Pretty(Chain, Shape),
}

/// What one `$expression` is at one probe site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    Long(Chain),
    Text(Vec<Piece>),
}

/// A `$expression` of the script: its plan at each probe site (module
/// path, link-time pc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub sites: Vec<(String, u64, Site)>,
    /// A plan that does not depend on the site (`@cast`: types only),
    /// usable in any probe.
    pub any: Option<Site>,
}

fn registry() -> &'static RwLock<Vec<Arc<Access>>> {
    static PLANS: std::sync::OnceLock<RwLock<Vec<Arc<Access>>>> = std::sync::OnceLock::new();
    PLANS.get_or_init(Default::default)
}

/// Registers a plan; its number goes into the compiled code.
pub fn register(a: Access) -> i64 {
    let mut r = registry().write().unwrap_or_else(|e| e.into_inner());
    r.push(Arc::new(a));
    (r.len() - 1) as i64
}

/// Registered plan number `id` (shared, not copied: this runs per hit).
pub fn plan_of(id: i64) -> Option<Arc<Access>> {
    let r = registry().read().unwrap_or_else(|e| e.into_inner());
    r.get(usize::try_from(id).ok()?).cloned()
}

impl Access {
    /// The plan at `pc` of module `path`.
    pub fn site(&self, path: &str, pc: u64) -> Option<&Site> {
        self.sites
            .iter()
            .find(|(p, at, _)| p == path && *at == pc)
            .map(|(_, _, s)| s)
            .or(self.any.as_ref())
    }
}

/// The operator of a compound write to a target variable (`$var += v`,
/// `$var++`), numbered for `__dwarf_update`'s argument. SystemTap refuses
/// these ("Only the following assign operator is implemented on target
/// variables:  ="); utap reads, computes and writes back under `-g`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Shl,
    Shr,
    And,
    Or,
    Xor,
}

/// Added to an [`Update`]'s code when the expression's value is the old
/// one (`$var++`, `$var--`).
pub const UPDATE_POSTFIX: i64 = 0x100;

impl Update {
    const ALL: [Update; 10] = [
        Update::Add,
        Update::Sub,
        Update::Mul,
        Update::Div,
        Update::Mod,
        Update::Shl,
        Update::Shr,
        Update::And,
        Update::Or,
        Update::Xor,
    ];

    pub fn code(self) -> i64 {
        Update::ALL.iter().position(|u| *u == self).unwrap_or(0) as i64
    }

    pub fn from_code(code: i64) -> Option<Update> {
        Update::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// `old OP v` with the script's integer semantics (wrapping, `/` and
    /// `%` by zero an error, clamped shifts).
    pub fn apply(self, old: i64, v: i64) -> Result<i64, crate::values::arith::DivisionByZero> {
        use crate::values::arith;
        Ok(match self {
            Update::Add => old.wrapping_add(v),
            Update::Sub => old.wrapping_sub(v),
            Update::Mul => old.wrapping_mul(v),
            Update::Div => arith::div(old, v)?,
            Update::Mod => arith::rem(old, v)?,
            Update::Shl => arith::shl(old, v),
            Update::Shr => arith::shr(old, v),
            Update::And => old & v,
            Update::Or => old | v,
            Update::Xor => old ^ v,
        })
    }
}

// ----- building (checker side) -----

/// A component of `$var->a[2].b[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Comp {
    Field(String),
    /// A constant index, or `None` for the next dynamic index argument.
    Index(Option<i64>),
}

/// The error of a `$expression` that cannot be planned: a message and a
/// help line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    pub message: String,
    pub help: Option<String>,
}

fn plan_err(message: String) -> PlanError {
    PlanError {
        message,
        help: None,
    }
}

/// A function at one probe pc, with what the plans need.
pub struct Scope<'a> {
    pub info: &'a DebugInfo,
    pub function: &'a Function,
    pub pc: u64,
    pub vars: Vec<Variable>,
}

impl<'a> Scope<'a> {
    /// A scope for plans that use types only (`@cast`): no variables,
    /// any function of the module standing for the unit.
    pub fn for_types(info: &'a DebugInfo) -> Option<Scope<'a>> {
        Some(Scope {
            info,
            function: info.functions.first()?,
            pc: 0,
            vars: Vec::new(),
        })
    }

    pub fn new(info: &'a DebugInfo, function: &'a Function, pc: u64) -> Scope<'a> {
        let vars = info
            .variables(function)
            .into_iter()
            .filter(|v| {
                v.scope
                    .as_ref()
                    .is_none_or(|r| r.iter().any(|(lo, hi)| *lo <= pc && pc < *hi))
            })
            .collect();
        Scope {
            info,
            function,
            pc,
            vars,
        }
    }

    /// A local or parameter, or for `@var(NAME[@FILE])` a unit-level
    /// variable of the module.
    fn var(&self, name: &str) -> Option<Variable> {
        if let Some(spec) = name.strip_prefix("@var(").and_then(|n| n.strip_suffix(')')) {
            // `@var(NAME@FILE, MODULE)`: the module was checked by the caller.
            let spec = spec.split(", ").next().unwrap_or(spec);
            let (bare, file) = match spec.split_once('@') {
                Some((n, f)) => (n, Some(f)),
                None => (spec, None),
            };
            let found = self.info.globals_named(bare, file);
            // A file static of this function's unit wins over others.
            let mine = found
                .iter()
                .find(|g| g.decl_file == self.function.decl_file)
                .or(found.first());
            return mine.map(|g| Variable {
                name: name.to_string(),
                ..g.var.clone()
            });
        }
        // An inner block's variable shadows an outer one.
        self.vars.iter().rev().find(|v| v.name == name).cloned()
    }

    /// Whether `$name` is here an entry value that cannot be read at this
    /// pc (`DW_OP_entry_value` away from the function's entry): SystemTap
    /// records such a value with an extra probe at the entry.
    pub fn entry_valued(&self, name: &str) -> bool {
        self.var(name)
            .is_some_and(|v| self.location(&v) == Loc::Unavailable && self.needs_entry_value(&v))
    }

    /// `$name` with components: a number.
    pub fn long(&self, name: &str, comps: &[Comp]) -> Result<Chain, PlanError> {
        let v = self.var(name).ok_or_else(|| self.not_found(name))?;
        let (chain, ty) = self.walk(&v, comps)?;
        self.finish(chain, ty, &self.shown(name, comps))
    }

    /// `&$name->path`: the address of the place (an error for a value
    /// in a register, or a bitfield).
    pub fn address(&self, name: &str, comps: &[Comp]) -> Result<Chain, PlanError> {
        let v = self.var(name).ok_or_else(|| self.not_found(name))?;
        let (chain, _) = self.walk(&v, comps)?;
        let shown = self.shown(name, comps);
        let in_memory = matches!(chain.loc, Loc::Memory(_)) || chain.steps.contains(&Step::Deref);
        if !in_memory {
            return Err(plan_err(format!(
                "'{shown}' is in a register here: it has no address"
            )));
        }
        if let Some(Step::Bits { .. }) = chain.steps.last() {
            return Err(plan_err(format!(
                "cannot take the address of bitfield '{shown}'"
            )));
        }
        Ok(Chain {
            fin: Final::Address,
            ..chain
        })
    }

    /// `@cast(addr, "type")->path`: a number, reading from the address
    /// the script gives (value number 0; computed indexes follow).
    pub fn cast(&self, type_name: &str, comps: &[Comp]) -> Result<Chain, PlanError> {
        let (ty, shown) = self.cast_start(type_name)?;
        let (chain, ty) = self.walk_from(Loc::Memory(vec![Op::Input(0)]), ty, shown, comps, 1)?;
        self.finish(chain, ty, &format!("@cast(.., \"{type_name}\")"))
    }

    /// `@cast(addr, "type")->path$`: pretty-printed.
    pub fn cast_pretty(
        &self,
        type_name: &str,
        comps: &[Comp],
        deep: bool,
    ) -> Result<Vec<Piece>, PlanError> {
        let (ty, shown) = self.cast_start(type_name)?;
        let (chain, ty) = self.walk_from(Loc::Memory(vec![Op::Input(0)]), ty, shown, comps, 1)?;
        Ok(vec![self.pretty_piece(chain, ty, deep)])
    }

    /// The type `@cast` names, as the place's type (the address points to
    /// it). `"T *"` names a pointer (SystemTap's `@cast(pp, "struct s
    /// *")->f` reads the pointer at `pp` and follows it once), made here
    /// when the DWARF has no such pointer type.
    fn cast_start(&self, type_name: &str) -> Result<(Option<TypeRef>, String), PlanError> {
        let bare = type_name.trim_end_matches(['*', ' ']);
        let mut ty = self.info.type_named(bare).ok_or_else(|| PlanError {
            message: format!(
                "type definition '{type_name}' not found in {}",
                self.info.path
            ),
            help: Some("name a struct, union or typedef of the module (\"struct point\")".into()),
        })?;
        for _ in type_name[bare.len()..].matches('*') {
            ty = ty.pointer();
        }
        Ok((Some(ty), format!("@cast(.., \"{type_name}\")")))
    }

    /// The final read of a chain that ends at a value of type `ty`.
    fn finish(&self, chain: Chain, ty: Option<TypeRef>, shown: &str) -> Result<Chain, PlanError> {
        let name = shown;
        let comps: &[Comp] = &[];
        if let Some(Step::Bits { .. }) = chain.steps.last() {
            let mut chain = chain;
            let Some(Step::Bits { shift, width }) = chain.steps.pop() else {
                unreachable!()
            };
            let signed = matches!(self.info.kind(ty), TypeKind::Base { signed: true, .. });
            return Ok(Chain {
                fin: Final::Bits {
                    shift,
                    width,
                    signed,
                },
                ..chain
            });
        }
        let fin = match self.info.kind(ty) {
            TypeKind::Base {
                size, float: true, ..
            } => Final::Float { size },
            TypeKind::Base { size, signed, .. } => Final::Load { size, signed },
            TypeKind::Enum { size } => Final::Load { size, signed: true },
            TypeKind::Pointer(_) => Final::Load {
                size: 8,
                signed: false,
            },
            TypeKind::Array { .. } => Final::Address,
            TypeKind::Struct { union, .. } => {
                let what = if union { "union" } else { "struct" };
                let _ = comps;
                return Err(PlanError {
                    message: format!("'{name}' is a {what}, not a number"),
                    help: Some(format!("print it with {name}$ or read a member with ->")),
                });
            }
            _ => {
                return Err(plan_err(format!(
                    "'{name}' has type {}, not a number",
                    self.info.type_name(ty)
                )));
            }
        };
        Ok(Chain { fin, ..chain })
    }

    /// `$name$` / `$name$$` with components: the pretty-printed text.
    pub fn pretty(&self, name: &str, comps: &[Comp], deep: bool) -> Result<Vec<Piece>, PlanError> {
        let v = self.var(name).ok_or_else(|| self.not_found(name))?;
        let (chain, ty) = self.walk(&v, comps)?;
        Ok(vec![self.pretty_piece(chain, ty, deep)])
    }

    /// The pretty-printing of the value a chain ends at.
    fn pretty_piece(&self, mut chain: Chain, ty: Option<TypeRef>, deep: bool) -> Piece {
        if let Some(Step::Bits { shift, width }) = chain.steps.last().cloned() {
            chain.steps.pop();
            let signed = matches!(self.info.kind(ty), TypeKind::Base { signed: true, .. });
            let shape = Shape::Bits {
                shift,
                width,
                signed,
            };
            return Piece::Pretty(chain, shape);
        }
        let shape = self.shape(ty, if deep { 8 } else { 1 }, true);
        Piece::Pretty(chain, shape)
    }

    /// `$$parms`, `$$locals`, `$$vars` (with `$` / `$$`: pretty).
    pub fn all(&self, which: &str, pretty: u8) -> Vec<Piece> {
        let mut out = Vec::new();
        for v in &self.vars {
            let wanted = match which {
                "$parms" => v.param,
                "$locals" => !v.param,
                _ => true,
            };
            if !wanted {
                continue;
            }
            let sep = if out.is_empty() { "" } else { " " };
            out.push(Piece::Text(format!("{sep}{}=", v.name)));
            if pretty > 0 {
                match self.pretty(&v.name, &[], pretty > 1) {
                    Ok(p) => out.extend(p),
                    Err(_) => out.push(Piece::Text("?".into())),
                }
            } else {
                match self.long(&v.name, &[]) {
                    Ok(c) if c.fin != Final::Address => out.push(Piece::Hex(c)),
                    _ => out.push(Piece::Text("?".into())),
                }
            }
        }
        out
    }

    fn shown(&self, name: &str, comps: &[Comp]) -> String {
        let mut s = match name.starts_with('@') {
            true => name.replace("@var(", "@var(\"").replace(')', "\")"),
            false => format!("${name}"),
        };
        for c in comps {
            match c {
                Comp::Field(f) => s.push_str(&format!("->{f}")),
                Comp::Index(Some(i)) => s.push_str(&format!("[{i}]")),
                Comp::Index(None) => s.push_str("[...]"),
            }
        }
        s
    }

    /// SystemTap's "unable to find local", with the alternatives.
    fn not_found(&self, name: &str) -> PlanError {
        if let Some(spec) = name.strip_prefix("@var(").and_then(|n| n.strip_suffix(')')) {
            return PlanError {
                message: format!("unable to find global '{spec}' in {}", self.info.path),
                help: Some(
                    "@var names a global or file static: \"name\" or \"name@file.c\"".into(),
                ),
            };
        }
        let alts: Vec<String> = self.vars.iter().map(|v| format!("${}", v.name)).collect();
        PlanError {
            message: format!(
                "unable to find local '{name}' near pc {:#x} in {}",
                self.pc, self.function.name
            ),
            help: Some(if alts.is_empty() {
                "this function has no parameters or locals here".into()
            } else {
                format!("alternatives: {}", alts.join(" "))
            }),
        }
    }

    /// The variable's location then the components' steps.
    fn walk(&self, v: &Variable, comps: &[Comp]) -> Result<(Chain, Option<TypeRef>), PlanError> {
        let loc = self.location(v);
        if loc == Loc::Unavailable && self.needs_entry_value(v) {
            // SystemTap's loc2stap text for an entry value it cannot find.
            return Err(PlanError {
                message: format!(
                    "'{}' at pc {:#x}: DW_OP entry_value unable to resolve value",
                    self.shown(&v.name, &[]),
                    self.pc
                ),
                help: Some(format!(
                    "here its value is the one it had on entry to '{}', which utap knows only at the function's entry: read it in a .function probe (or @entry in .return)",
                    self.function.name
                )),
            });
        }
        if loc == Loc::Unavailable {
            return Err(PlanError {
                message: format!(
                    "'{}' is not accessible at this address (pc: {:#x})",
                    self.shown(&v.name, &[]),
                    self.pc
                ),
                help: Some("it is optimised out here; @defined() is false for it".into()),
            });
        }
        self.walk_from(loc, v.ty, self.shown(&v.name, &[]), comps, 0)
    }

    /// The steps of `comps` from a place of type `ty`; computed indexes
    /// are value numbers `args`, `args + 1`.
    fn walk_from(
        &self,
        loc: Loc,
        ty: Option<TypeRef>,
        mut shown: String,
        comps: &[Comp],
        mut args: usize,
    ) -> Result<(Chain, Option<TypeRef>), PlanError> {
        let mut steps = Vec::new();
        let mut ty = ty;
        for c in comps {
            if let Some(Step::Bits { .. }) = steps.last() {
                return Err(plan_err(format!("'{shown}' is a bitfield")));
            }
            match c {
                Comp::Field(f) => {
                    let mut kind = self.info.kind(ty);
                    if let TypeKind::Pointer(to) = kind {
                        steps.push(Step::Deref);
                        ty = to;
                        kind = self.info.kind(ty);
                    }
                    let TypeKind::Struct { members, .. } = kind else {
                        return Err(plan_err(format!(
                            "'{shown}' has type {}: no member '{f}'",
                            self.info.type_name(ty)
                        )));
                    };
                    let m = find_member(self.info, &members, f, &mut steps).ok_or_else(|| {
                        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                        PlanError {
                            message: format!(
                                "unable to find member '{f}' for {}",
                                self.info.type_name(ty)
                            ),
                            help: Some(format!("alternatives: {}", names.join(" "))),
                        }
                    })?;
                    ty = m;
                    shown.push_str(&format!("->{f}"));
                }
                Comp::Index(i) => {
                    let (elem, stride) = match self.info.kind(ty) {
                        TypeKind::Pointer(to) => {
                            steps.push(Step::Deref);
                            (to, self.info.size_of(to) as i64)
                        }
                        TypeKind::Array { elem, dims } => {
                            // Inner dimensions make the stride; indexing
                            // `int[3][4]` gives a row, `int[4]`.
                            let inner: u64 = dims.iter().skip(1).map(|d| d.unwrap_or(0)).product();
                            let stride = (self.info.size_of(elem) * inner.max(1)) as i64;
                            match dims.len() {
                                0 | 1 => (elem, stride),
                                _ => (self.info.row(ty), stride),
                            }
                        }
                        _ => {
                            return Err(plan_err(format!(
                                "'{shown}' has type {}: it cannot be indexed",
                                self.info.type_name(ty)
                            )));
                        }
                    };
                    match i {
                        Some(k) => steps.push(Step::Offset(k * stride)),
                        None => {
                            steps.push(Step::Index { arg: args, stride });
                            args += 1;
                        }
                    }
                    ty = elem;
                    shown.push_str("[]");
                }
            }
        }
        Ok((
            Chain {
                loc,
                steps,
                fin: Final::Address,
            },
            ty,
        ))
    }

    /// The variable's location at this scope's pc, as a program.
    fn location(&self, v: &Variable) -> Loc {
        let expr = match &v.location {
            VarLocation::Expr(e) => e.as_slice(),
            VarLocation::List(l) => {
                match l.iter().find(|(lo, hi, _)| *lo <= self.pc && self.pc < *hi) {
                    Some((_, _, e)) => e.as_slice(),
                    None => return Loc::Unavailable,
                }
            }
            VarLocation::None => return Loc::Unavailable,
        };
        self.translate(expr, true).unwrap_or(Loc::Unavailable)
    }

    /// Whether the variable's expression at this pc uses
    /// `DW_OP_entry_value` (or GNU's 0xf3).
    fn needs_entry_value(&self, v: &Variable) -> bool {
        let expr = match &v.location {
            VarLocation::Expr(e) => e.as_slice(),
            VarLocation::List(l) => {
                match l.iter().find(|(lo, hi, _)| *lo <= self.pc && self.pc < *hi) {
                    Some((_, _, e)) => e.as_slice(),
                    None => return false,
                }
            }
            VarLocation::None => return false,
        };
        let enc = self.info.encoding(self.function);
        let mut input = EndianSlice::new(expr, LittleEndian);
        while !input.is_empty() {
            match Operation::parse(&mut input, enc) {
                Ok(Operation::EntryValue { .. }) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// A DWARF expression as a program; `None` for what is not handled
    /// (pieces, entry values, implicit pointers...).
    fn translate(&self, expr: &[u8], allow_fb: bool) -> Option<Loc> {
        let enc = self.info.encoding(self.function);
        let mut input = EndianSlice::new(expr, LittleEndian);
        let mut ops = Vec::new();
        let mut value = false;
        let mut reg: Option<u16> = None;
        let mut pieces: Vec<(Loc, u8)> = Vec::new();
        while !input.is_empty() {
            let op = Operation::parse(&mut input, enc).ok()?;
            if reg.is_some() && !matches!(op, Operation::Piece { .. }) {
                // Only a piece may follow DW_OP_regN.
                return None;
            }
            match op {
                Operation::Register { register } => reg = Some(register.0),
                Operation::Piece {
                    size_in_bits,
                    bit_offset: None,
                } if size_in_bits % 8 == 0 && size_in_bits <= 8 * 32 => {
                    let loc = match (reg.take(), ops.is_empty(), value) {
                        (Some(r), _, _) => Loc::Register(r),
                        (None, true, _) => Loc::Unavailable,
                        (None, false, true) => Loc::Value(std::mem::take(&mut ops)),
                        (None, false, false) => Loc::Memory(std::mem::take(&mut ops)),
                    };
                    value = false;
                    pieces.push((loc, (size_in_bits / 8) as u8));
                }
                Operation::RegisterOffset {
                    register, offset, ..
                } => ops.extend([Op::Reg(register.0), Op::PlusConst(offset)]),
                Operation::FrameOffset { offset } => {
                    if !allow_fb {
                        return None;
                    }
                    let fb = self.info.frame_base(self.function)?;
                    match self.translate(&fb, false)? {
                        Loc::Memory(p) => ops.extend(p),
                        // DW_OP_reg6 as frame base: the register's value.
                        Loc::Register(r) => ops.push(Op::Reg(r)),
                        _ => return None,
                    }
                    ops.push(Op::PlusConst(offset));
                }
                Operation::CallFrameCFA => {
                    let (r, off) = self.info.cfa_rule(self.pc)?;
                    ops.extend([Op::Reg(r), Op::PlusConst(off)]);
                }
                Operation::Address { address } => ops.push(Op::Addr(address)),
                Operation::TLS => ops.push(match self.info.tls_block {
                    Some(block) => Op::Tls(block),
                    None => Op::ModuleTls,
                }),
                Operation::UnsignedConstant { value } => ops.push(Op::Const(value as i64)),
                Operation::SignedConstant { value } => ops.push(Op::Const(value)),
                Operation::PlusConstant { value } => ops.push(Op::PlusConst(value as i64)),
                Operation::Plus => ops.push(Op::Plus),
                Operation::Minus => ops.push(Op::Minus),
                Operation::Mul => ops.push(Op::Mul),
                Operation::And => ops.push(Op::And),
                Operation::Deref {
                    size, space: false, ..
                } => ops.push(Op::Deref(size)),
                Operation::EntryValue { expression } => {
                    // The value the expression (a register, usually) had
                    // on entry: known only when the probe is at the
                    // function's first instruction.
                    if self.pc != self.function.low_pc {
                        return None;
                    }
                    match self.translate(expression.slice(), false)? {
                        Loc::Register(r) => ops.push(Op::Reg(r)),
                        Loc::Memory(p) => ops.extend(p),
                        _ => return None,
                    }
                }
                Operation::StackValue => value = true,
                Operation::Nop => {}
                _ => return None,
            }
        }
        if !pieces.is_empty() {
            let total: usize = pieces.iter().map(|(_, n)| *n as usize).sum();
            let complete = reg.is_none() && ops.is_empty() && total <= 32;
            return complete.then_some(Loc::Pieces(pieces));
        }
        if let Some(r) = reg {
            return Some(Loc::Register(r));
        }
        if ops.is_empty() {
            return None;
        }
        Some(if value {
            Loc::Value(ops)
        } else {
            Loc::Memory(ops)
        })
    }

    /// The pretty-printing shape of a type, `depth` levels of nested
    /// aggregates deep (`$`: 1, `$$`: all).
    fn shape(&self, ty: Option<TypeRef>, depth: usize, top: bool) -> Shape {
        match self.info.kind(ty) {
            TypeKind::Base {
                size,
                signed,
                char,
                float,
            } => match (char, float) {
                (_, true) => Shape::Float { size },
                (true, _) => Shape::Char { size, signed },
                _ => Shape::Int { size, signed },
            },
            TypeKind::Enum { size } => Shape::Int { size, signed: true },
            TypeKind::Pointer(to) => match self.info.kind(to) {
                TypeKind::Base { char: true, .. } => Shape::Str,
                TypeKind::Struct { .. } if top || depth > 1 => {
                    Shape::Deref(Box::new(self.shape(to, depth, top)))
                }
                _ => Shape::Pointer,
            },
            TypeKind::Struct { members, .. } => {
                if depth == 0 && !top {
                    return Shape::Elided("{...}");
                }
                Shape::Struct(
                    members
                        .iter()
                        .map(|m| {
                            let shape = match m.bits {
                                Some((shift, width)) => Shape::Bits {
                                    shift: shift as u8,
                                    width: width as u8,
                                    signed: matches!(
                                        self.info.kind(m.ty),
                                        TypeKind::Base { signed: true, .. }
                                    ),
                                },
                                None => self.shape(m.ty, depth.saturating_sub(1), false),
                            };
                            (m.name.clone(), m.offset as i64, shape)
                        })
                        .collect(),
                )
            }
            TypeKind::Array { elem, .. } => {
                // SystemTap's recurse_array: a char array (of any rank) is
                // the string at its start, at any depth; else `[...]` when
                // nested under `$`, and otherwise the first element of the
                // element type (a multi-dimensional array's too: `[g00,
                // ...]`) followed by ", ..." (it does not read the size).
                if matches!(
                    self.info.kind(elem),
                    TypeKind::Base {
                        char: true,
                        size: 1,
                        ..
                    }
                ) {
                    return Shape::Chars;
                }
                if depth == 0 && !top {
                    return Shape::Elided("[...]");
                }
                Shape::Array(Box::new(self.shape(elem, depth.saturating_sub(1), false)))
            }
            _ => Shape::Unknown,
        }
    }
}

/// A member by name, looking into anonymous structs and unions; adds its
/// offset to `steps`.
fn find_member(
    info: &DebugInfo,
    members: &[super::read::Member],
    name: &str,
    steps: &mut Vec<Step>,
) -> Option<Option<TypeRef>> {
    if let Some(m) = members.iter().find(|m| m.name == name) {
        steps.push(Step::Offset(m.offset as i64));
        if let Some((shift, width)) = m.bits {
            steps.push(Step::Bits {
                shift: shift as u8,
                width: width as u8,
            });
        }
        return Some(m.ty);
    }
    for m in members.iter().filter(|m| m.name.is_empty()) {
        if let TypeKind::Struct { members: inner, .. } = info.kind(m.ty) {
            let mut sub = vec![Step::Offset(m.offset as i64)];
            if let Some(t) = find_member(info, &inner, name, &mut sub) {
                steps.extend(sub);
                return Some(t);
            }
        }
    }
    None
}

// ----- evaluation (runtime side) -----

/// What the evaluation needs from the stopped thread.
pub struct Machine<'a> {
    /// Registers by DWARF number (x86_64: rax rdx rcx rbx rsi rdi rbp rsp
    /// r8..r15 rip).
    pub regs: [u64; 17],
    pub bias: u64,
    pub mem: &'a dyn ReadMemory,
    pub maxstringlen: usize,
    /// The thread pointer (`fs_base`), for thread-local variables.
    pub tp: u64,
    /// The script's values a plan reads (`@cast`'s address, computed
    /// indexes).
    pub input: [i64; 3],
    /// The low 64 bits of xmm0..xmm15 (DWARF 17..32: `double` and `float`
    /// values at `-O2`), read only for plans that use them.
    pub xmm: Option<[u64; 16]>,
    /// The probed library's TLS block in this thread, looked up only for
    /// plans that use it ([`Site::uses_module_tls`]).
    pub module_tls: Result<u64, super::tls::TlsError>,
}

/// DWARF's number of xmm0 on x86_64.
const XMM0: usize = 17;

impl Site {
    /// Whether the plan reads a library's thread-local variable.
    pub fn uses_module_tls(&self) -> bool {
        fn loc(l: &Loc) -> bool {
            match l {
                Loc::Memory(ops) | Loc::Value(ops) => ops.contains(&Op::ModuleTls),
                Loc::Pieces(p) => p.iter().any(|(l, _)| loc(l)),
                Loc::Register(_) | Loc::Unavailable => false,
            }
        }
        match self {
            Site::Long(c) => loc(&c.loc),
            Site::Text(pieces) => pieces.iter().any(|p| match p {
                Piece::Hex(c) | Piece::Pretty(c, _) => loc(&c.loc),
                Piece::Text(_) => false,
            }),
        }
    }

    /// Whether the plan reads an xmm register (the caller then fetches
    /// the floating point registers).
    pub fn uses_xmm(&self) -> bool {
        fn loc(l: &Loc) -> bool {
            match l {
                Loc::Register(r) => *r as usize >= XMM0,
                Loc::Memory(ops) | Loc::Value(ops) => ops
                    .iter()
                    .any(|o| matches!(o, Op::Reg(r) if *r as usize >= XMM0)),
                Loc::Pieces(p) => p.iter().any(|(l, _)| loc(l)),
                Loc::Unavailable => false,
            }
        }
        let chain = |c: &Chain| loc(&c.loc);
        match self {
            Site::Long(c) => chain(c),
            Site::Text(pieces) => pieces.iter().any(|p| match p {
                Piece::Hex(c) | Piece::Pretty(c, _) => chain(c),
                Piece::Text(_) => false,
            }),
        }
    }
}

/// Where a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Memory(u64),
    Value(u64),
    /// A value assembled from `DW_OP_piece`s: its first `len` bytes.
    Bytes([u8; 32], u8),
}

impl Place {
    /// The place `off` bytes further (a member of a struct).
    fn at(self, off: u64) -> Option<Place> {
        match self {
            Place::Memory(a) => Some(Place::Memory(a.wrapping_add(off))),
            Place::Bytes(b, len) if off < len as u64 => {
                let mut out = [0u8; 32];
                let rest = &b[off as usize..len as usize];
                out[..rest.len()].copy_from_slice(rest);
                Some(Place::Bytes(out, rest.len() as u8))
            }
            _ => None,
        }
    }
}

/// The first `n` (≤ 8) bytes of an assembled value, little-endian.
fn low_bytes(b: &[u8; 32], len: u8, n: usize) -> u64 {
    let mut buf = [0u8; 8];
    let n = n.min(8).min(len as usize);
    buf[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(buf)
}

/// Why a value could not be read: optimised out, or a memory fault at
/// an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    Unavailable,
    Fault(u64),
    /// A library's thread-local block was not found.
    Tls(super::tls::TlsError),
}

impl Machine<'_> {
    fn reg(&self, r: u16) -> Result<u64, EvalError> {
        if let Some(i) = (r as usize).checked_sub(XMM0) {
            return self
                .xmm
                .and_then(|x| x.get(i).copied())
                .ok_or(EvalError::Unavailable);
        }
        self.regs
            .get(r as usize)
            .copied()
            .ok_or(EvalError::Unavailable)
    }

    fn load(&self, addr: u64, size: u8) -> Result<u64, EvalError> {
        let mut buf = [0u8; 8];
        let n = (size as usize).clamp(1, 8);
        match self.mem.read(addr, &mut buf[..n]) {
            Ok(got) if got == n => Ok(u64::from_le_bytes(buf)),
            _ => Err(EvalError::Fault(addr)),
        }
    }

    fn run(&self, ops: &[Op]) -> Result<u64, EvalError> {
        let mut st: Vec<u64> = Vec::with_capacity(4);
        for op in ops {
            match op {
                Op::Reg(r) => st.push(self.reg(*r)?),
                Op::Const(c) => st.push(*c as u64),
                Op::Addr(a) => st.push(a.wrapping_add(self.bias)),
                Op::Input(k) => st.push(self.input.get(*k).copied().unwrap_or(0) as u64),
                Op::Tls(block) => {
                    let off = st.pop().ok_or(EvalError::Unavailable)?;
                    st.push(self.tp.wrapping_sub(*block).wrapping_add(off));
                }
                Op::ModuleTls => {
                    let off = st.pop().ok_or(EvalError::Unavailable)?;
                    let block = self.module_tls.map_err(EvalError::Tls)?;
                    st.push(block.wrapping_add(off));
                }
                Op::PlusConst(c) => {
                    let t = st.pop().ok_or(EvalError::Unavailable)?;
                    st.push(t.wrapping_add(*c as u64));
                }
                Op::Deref(n) => {
                    let t = st.pop().ok_or(EvalError::Unavailable)?;
                    st.push(self.load(t, *n)?);
                }
                Op::Plus | Op::Minus | Op::Mul | Op::And => {
                    let b = st.pop().ok_or(EvalError::Unavailable)?;
                    let a = st.pop().ok_or(EvalError::Unavailable)?;
                    st.push(match op {
                        Op::Plus => a.wrapping_add(b),
                        Op::Minus => a.wrapping_sub(b),
                        Op::Mul => a.wrapping_mul(b),
                        _ => a & b,
                    });
                }
            }
        }
        st.pop().ok_or(EvalError::Unavailable)
    }

    /// Where a chain ends: an address, or a value (register, computed).
    pub fn place(&self, c: &Chain) -> Result<Place, EvalError> {
        let mut p = match &c.loc {
            Loc::Memory(ops) => Place::Memory(self.run(ops)?),
            Loc::Value(ops) => Place::Value(self.run(ops)?),
            Loc::Register(r) => Place::Value(self.reg(*r)?),
            Loc::Pieces(pieces) => self.assemble(pieces)?,
            Loc::Unavailable => return Err(EvalError::Unavailable),
        };
        for s in &c.steps {
            p = match (s, p) {
                (Step::Deref, Place::Memory(a)) => Place::Memory(self.load(a, 8)?),
                (Step::Deref, Place::Value(v)) => Place::Memory(v),
                (Step::Deref, Place::Bytes(b, len)) => Place::Memory(low_bytes(&b, len, 8)),
                (Step::Offset(o), p @ Place::Bytes(..)) => {
                    p.at(*o as u64).ok_or(EvalError::Unavailable)?
                }
                (Step::Offset(o), Place::Memory(a)) => Place::Memory(a.wrapping_add(*o as u64)),
                (Step::Bits { .. }, p) => p,
                (Step::Index { arg, stride }, Place::Memory(a)) => {
                    let i = self.input.get(*arg).copied().unwrap_or(0);
                    Place::Memory(a.wrapping_add(i.wrapping_mul(*stride) as u64))
                }
                _ => return Err(EvalError::Unavailable),
            };
        }
        Ok(p)
    }

    /// The bytes of a value in pieces.
    fn assemble(&self, pieces: &[(Loc, u8)]) -> Result<Place, EvalError> {
        let mut buf = [0u8; 32];
        let mut at = 0usize;
        for (loc, n) in pieces {
            let n = *n as usize;
            if at + n > buf.len() {
                return Err(EvalError::Unavailable);
            }
            match loc {
                Loc::Register(r) => {
                    let v = self.reg(*r)?.to_le_bytes();
                    buf[at..at + n.min(8)].copy_from_slice(&v[..n.min(8)]);
                }
                Loc::Value(ops) => {
                    let v = self.run(ops)?.to_le_bytes();
                    buf[at..at + n.min(8)].copy_from_slice(&v[..n.min(8)]);
                }
                Loc::Memory(ops) => {
                    let a = self.run(ops)?;
                    match self.mem.read(a, &mut buf[at..at + n]) {
                        Ok(got) if got == n => {}
                        _ => return Err(EvalError::Fault(a)),
                    }
                }
                _ => return Err(EvalError::Unavailable),
            }
            at += n;
        }
        Ok(Place::Bytes(buf, at as u8))
    }

    /// The number a chain gives.
    pub fn long(&self, c: &Chain) -> Result<i64, EvalError> {
        let p = self.place(c)?;
        match (c.fin, p) {
            (Final::Address, Place::Memory(a)) => Ok(a as i64),
            (
                Final::Bits {
                    shift,
                    width,
                    signed,
                },
                p,
            ) => {
                let v = self.bits(p, shift, width)?;
                Ok(extend_bits(v, width, signed))
            }
            (Final::Float { size }, p) => {
                let raw = match p {
                    Place::Memory(a) => self.load(a, size)?,
                    Place::Value(v) => v,
                    Place::Bytes(b, len) => low_bytes(&b, len, size as usize),
                };
                Ok(float_bits(raw, size) as i64)
            }
            (Final::Load { size, signed }, Place::Memory(a)) => {
                Ok(extend(self.load(a, size)?, size, signed))
            }
            (Final::Load { size, signed }, Place::Value(v)) => Ok(extend(v, size, signed)),
            (Final::Load { size, signed }, Place::Bytes(b, len)) => {
                Ok(extend(low_bytes(&b, len, size as usize), size, signed))
            }
            _ => Err(EvalError::Unavailable),
        }
    }

    /// The text of `$$parms`-like pieces.
    pub fn text(&self, pieces: &[Piece]) -> String {
        let mut out = String::new();
        for p in pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Hex(c) => match self.long(c) {
                    Ok(v) => out.push_str(&format!("{:#x}", v as u64)),
                    Err(_) => out.push('?'),
                },
                Piece::Pretty(c, shape) => match self.place(c) {
                    Ok(place) => self.pretty(&mut out, place, shape),
                    Err(_) => out.push('?'),
                },
            }
        }
        out
    }

    /// The raw `width` bits from bit `shift` of a place.
    fn bits(&self, p: Place, shift: u8, width: u8) -> Result<u64, EvalError> {
        let raw = match p {
            Place::Memory(a) => {
                let bytes = (shift as u32 + width as u32).div_ceil(8).clamp(1, 8) as u8;
                self.load(a, bytes)?
            }
            Place::Value(v) => v,
            Place::Bytes(b, len) => low_bytes(&b, len, 8),
        };
        let v = raw >> shift;
        Ok(match width {
            64.. => v,
            w => v & ((1u64 << w) - 1),
        })
    }

    fn scalar(&self, place: Place, size: u8) -> Option<u64> {
        match place {
            Place::Memory(a) => self.load(a, size).ok(),
            Place::Value(v) => Some(v),
            Place::Bytes(b, len) => Some(low_bytes(&b, len, size as usize)),
        }
    }

    fn pretty(&self, out: &mut String, place: Place, shape: &Shape) {
        match shape {
            Shape::Int { size, signed } => match self.scalar(place, *size) {
                Some(v) if *signed => out.push_str(&extend(v, *size, true).to_string()),
                Some(v) => out.push_str(&(extend(v, *size, false) as u64).to_string()),
                None => out.push('?'),
            },
            Shape::Char { size, .. } => match self.scalar(place, *size) {
                Some(v) => out.push_str(&quote_char(v as u8)),
                None => out.push('?'),
            },
            Shape::Bits {
                shift,
                width,
                signed,
            } => match self.bits(place, *shift, *width) {
                Ok(v) if *signed => out.push_str(&extend_bits(v, *width, true).to_string()),
                Ok(v) => out.push_str(&v.to_string()),
                Err(_) => out.push('?'),
            },
            Shape::Float { size } => match self.scalar(place, *size) {
                Some(v) => out.push_str(&f64::from_bits(float_bits(v, *size)).to_string()),
                None => out.push('?'),
            },
            Shape::Pointer => match self.scalar(place, 8) {
                Some(v) => out.push_str(&format!("{v:#x}")),
                None => out.push('?'),
            },
            Shape::Str => match self.scalar(place, 8) {
                Some(v) => self.quoted(out, v),
                None => out.push('?'),
            },
            Shape::Struct(members) => {
                if let Place::Value(_) = place {
                    out.push('?');
                    return;
                }
                out.push('{');
                for (i, (name, off, s)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    if !name.is_empty() {
                        out.push('.');
                        out.push_str(name);
                        out.push('=');
                    }
                    match place.at(*off as u64) {
                        Some(p) => self.pretty(out, p, s),
                        None => out.push('?'),
                    }
                }
                out.push('}');
            }
            Shape::Chars => match place {
                Place::Memory(base) => self.quoted(out, base),
                _ => out.push('?'),
            },
            Shape::Array(elem) => {
                let Place::Memory(base) = place else {
                    out.push('?');
                    return;
                };
                out.push('[');
                self.pretty(out, Place::Memory(base), elem);
                out.push_str(", ...]");
            }
            Shape::Deref(inner) => match self.scalar(place, 8) {
                Some(0) => out.push_str("0x0"),
                Some(p) => self.pretty(out, Place::Memory(p), inner),
                None => out.push('?'),
            },
            Shape::Elided(text) => out.push_str(text),
            Shape::Unknown => out.push('?'),
        }
    }

    fn quoted(&self, out: &mut String, addr: u64) {
        match read_cstring(self.mem, addr, self.maxstringlen) {
            Ok(raw) => {
                let mut q = Vec::new();
                crate::values::strings::text_strn(&mut q, &raw, 0, true, self.maxstringlen);
                out.push_str(&String::from_utf8_lossy(&q));
            }
            Err(_) => out.push_str(&format!("{addr:#x}")),
        }
    }
}

/// Sign- or zero-extends the low `width` bits.
fn extend_bits(v: u64, width: u8, signed: bool) -> i64 {
    if width == 0 || width >= 64 || !signed {
        return v as i64;
    }
    let sh = 64 - width as u32;
    ((v << sh) as i64) >> sh
}

/// The bits of a `float` (4 bytes) or `double` as a double.
fn float_bits(raw: u64, size: u8) -> u64 {
    match size {
        4 => (f32::from_bits(raw as u32) as f64).to_bits(),
        _ => raw,
    }
}

/// Sign- or zero-extends the low `size` bytes.
fn extend(v: u64, size: u8, signed: bool) -> i64 {
    if size >= 8 || size == 0 {
        return v as i64;
    }
    let bits = size as u32 * 8;
    let low = v & ((1u64 << bits) - 1);
    if signed {
        ((low << (64 - bits)) as i64) >> (64 - bits)
    } else {
        low as i64
    }
}

/// A character as SystemTap's `'%#c'` prints it.
fn quote_char(c: u8) -> String {
    match c {
        b'\n' => "'\\n'".into(),
        b'\t' => "'\\t'".into(),
        b'\r' => "'\\r'".into(),
        b'\\' => "'\\\\'".into(),
        b'\'' => "'\\''".into(),
        0x20..=0x7e => format!("'{}'", c as char),
        _ => format!("'\\{c:03o}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension() {
        assert_eq!(extend(0xffff_fffe, 4, true), -2);
        assert_eq!(extend(0xffff_fffe, 4, false), 0xffff_fffe);
        assert_eq!(extend(0x80, 1, true), -128);
        assert_eq!(extend(u64::MAX, 8, false), -1);
    }

    #[test]
    fn chars() {
        assert_eq!(quote_char(b'a'), "'a'");
        assert_eq!(quote_char(0), "'\\000'");
        assert_eq!(quote_char(b'\n'), "'\\n'");
    }

    #[test]
    fn update_codes_round_trip_and_compute() {
        for u in Update::ALL {
            assert_eq!(Update::from_code(u.code()), Some(u));
        }
        assert_eq!(Update::from_code(10), None);
        assert_eq!(Update::Sub.apply(5, 7), Ok(-2));
        assert_eq!(Update::Shr.apply(-8, 1), Ok(-4));
        assert!(Update::Div.apply(1, 0).is_err());
        assert_eq!(Update::Mod.apply(-7, 3), Ok(-1));
    }
}
