//! Which globals each probe handler uses, and whether it needs them
//! shared (read) or exclusive (write): SystemTap's per-probe lock set,
//! which its translator emits as the probe's `locks[]` and its runtime
//! takes in one global order before the handler runs.
//!
//! The set covers the probe's conditions, its body and every function it
//! calls, transitively (recursion included). The rules are SystemTap's:
//! a global only read takes a read lock, one written (assigned,
//! incremented, deleted) a write lock, except statistics, whose locks are
//! flipped: `<<<` adds to the CPU's own copy and so needs only a read
//! lock, while reading one (`@count`, `@hist_log`, `foreach`) aggregates
//! the copies and needs the write lock. `delete` of a statistic is a write
//! too (it clears every copy).
//!
//! The codegen carries each set into the script image (`ProbeSpec::locks`);
//! the runtime takes it (`runtime::script::global_locks`).

use std::collections::BTreeMap;

use crate::program::{ExprKind, ForeachSource, FuncId, GlobalId, LValue, Program, StmtKind, Type};
use crate::walk::{self, Node};

/// One global of a probe's lock set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lock {
    pub global: GlobalId,
    /// Exclusive; else shared.
    pub write: bool,
}

/// How a handler (or function) uses one global, before the stats flip.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Use {
    read: bool,
    written: bool,
    deleted: bool,
}

impl Use {
    fn union(self, o: Use) -> Use {
        Use {
            read: self.read || o.read,
            written: self.written || o.written,
            deleted: self.deleted || o.deleted,
        }
    }
}

/// What one body uses directly, and the functions it calls.
#[derive(Default)]
struct Uses {
    globals: BTreeMap<GlobalId, Use>,
    calls: Vec<FuncId>,
}

impl Uses {
    fn note(&mut self, g: GlobalId, u: Use) {
        let e = self.globals.entry(g).or_default();
        *e = e.union(u);
    }

    fn lvalue(&mut self, lv: &LValue, u: Use) {
        if let LValue::Global(g) | LValue::Elem { array: g, .. } = lv {
            self.note(*g, u);
        }
    }

    fn node(&mut self, n: Node<'_>) {
        const READ: Use = Use {
            read: true,
            written: false,
            deleted: false,
        };
        const WRITTEN: Use = Use {
            read: false,
            written: true,
            deleted: false,
        };
        match n {
            Node::Stmt(s) => match &s.kind {
                StmtKind::Delete(lv) => self.lvalue(
                    lv,
                    Use {
                        written: true,
                        deleted: true,
                        ..Use::default()
                    },
                ),
                StmtKind::Foreach(fe) => {
                    if let ForeachSource::Array(g) = fe.source {
                        self.note(g, READ);
                    }
                }
                _ => {}
            },
            Node::Expr(e) => match &e.kind {
                ExprKind::Load(lv) | ExprKind::StatGet { target: lv, .. } => self.lvalue(lv, READ),
                ExprKind::Hist { target, .. } => self.lvalue(target, READ),
                ExprKind::Assign { op, target, .. } => {
                    let compound = *op != crate::ast::AssignOp::Assign;
                    self.lvalue(
                        target,
                        Use {
                            read: compound,
                            ..WRITTEN
                        },
                    );
                }
                ExprKind::IncDec { target, .. } => self.lvalue(target, READ.union(WRITTEN)),
                ExprKind::StatAdd { target, .. } => self.lvalue(target, WRITTEN),
                ExprKind::In { array, .. } => self.note(*array, READ),
                ExprKind::Call { func, .. } => self.calls.push(*func),
                _ => {}
            },
        }
    }
}

fn block_uses(b: &crate::program::Block, uses: &mut Uses) {
    walk::nodes(b, &mut |n| uses.node(n));
}

/// Per probe of `p` (in order), its lock set sorted by global index: the
/// order locks are taken in, so that no two handlers can deadlock.
pub fn probe_locks(p: &Program) -> Vec<Vec<Lock>> {
    let functions = function_closure(p);
    p.probes
        .iter()
        .map(|probe| {
            let mut uses = Uses::default();
            for c in probe.points.iter().filter_map(|pt| pt.condition.as_ref()) {
                walk::expr(c, &mut |e| uses.node(Node::Expr(e)));
            }
            block_uses(&probe.body, &mut uses);
            for f in std::mem::take(&mut uses.calls) {
                for (&g, &u) in &functions[f.0 as usize] {
                    uses.note(g, u);
                }
            }
            locks(p, &uses.globals)
        })
        .collect()
}

/// Every function's uses with those of the functions it calls (a fixpoint,
/// so recursion and mutual recursion are covered).
fn function_closure(p: &Program) -> Vec<BTreeMap<GlobalId, Use>> {
    let direct: Vec<Uses> = p
        .functions
        .iter()
        .map(|f| {
            let mut uses = Uses::default();
            block_uses(&f.body, &mut uses);
            uses
        })
        .collect();
    let mut all: Vec<BTreeMap<GlobalId, Use>> = direct.iter().map(|u| u.globals.clone()).collect();
    loop {
        let mut changed = false;
        for (i, d) in direct.iter().enumerate() {
            for callee in &d.calls {
                let theirs = all[callee.0 as usize].clone();
                for (g, u) in theirs {
                    let e = all[i].entry(g).or_default();
                    let merged = e.union(u);
                    changed |= merged != *e;
                    *e = merged;
                }
            }
        }
        if !changed {
            return all;
        }
    }
}

/// The lock kind of each used global (SystemTap's flip for statistics).
fn locks(p: &Program, uses: &BTreeMap<GlobalId, Use>) -> Vec<Lock> {
    uses.iter()
        .map(|(&global, u)| {
            let stats = p.globals[global.0 as usize].ty == Type::Stats;
            let write = match stats {
                true => u.read || u.deleted,
                false => u.written,
            };
            Lock { global, write }
        })
        .collect()
}
