//! Long globals counted per thread: a long scalar global that the
//! in-process handlers only add to, in statements whose value nothing
//! reads (`n++`, `n += $arg1`, `n -= 2`), is added to the thread's own
//! copy in its block (`layout::Block::counters`), and the fold adds every
//! copy to the shared slot. Threads calling a probed function at once
//! then write no common cache line: the atomic add on one slot cost four
//! threads more than one thread's throughput (issue 28, per-thread copies
//! folded at read).
//!
//! Any other use in process (a read, an assignment, `x = n++`, `delete`)
//! keeps the global's atomic add: its value must be the global's. Reads
//! outside the run (begin, end, error) see the folded value, as before.

use std::collections::{BTreeSet, HashSet};

use utap_compiler::program::{Block, Expr, ExprKind, LValue, Program, Stmt, StmtKind};
use utap_compiler::walk::{self, Node};
use utap_runtime::dataplane::layout::COUNTERS;
use utap_runtime::script::image::GlobalSpec;

use utap_compiler::ast::{AssignOp, IncDecOp};

/// The long slots of the globals `sub` (the in-process probes and the
/// functions they call) only adds to, each with its counter index; at
/// most [`COUNTERS`], by slot.
pub fn counted(sub: &Program, globals: &[GlobalSpec]) -> Vec<(u32, u32)> {
    let mut uses = Uses::default();
    for p in &sub.probes {
        for c in p.points.iter().filter_map(|pt| pt.condition.as_ref()) {
            walk::expr(c, &mut |e| uses.other(e));
        }
        uses.block(&p.body);
    }
    for f in &sub.functions {
        uses.block(&f.body);
    }
    let slots: BTreeSet<u32> = uses
        .added
        .difference(&uses.other)
        .filter_map(|&g| globals.get(g as usize)?.long_slot)
        .collect();
    slots
        .into_iter()
        .take(COUNTERS)
        .enumerate()
        .map(|(k, slot)| (slot, k as u32))
        .collect()
}

/// Scalar globals met as an add statement's target, and in any other way.
#[derive(Default)]
struct Uses {
    added: HashSet<u32>,
    other: HashSet<u32>,
}

impl Uses {
    fn block(&mut self, b: &Block) {
        // Statements come before their expressions: the add statements'
        // own expressions are known when they are met.
        let mut adds: HashSet<*const Expr> = HashSet::new();
        walk::nodes(b, &mut |n| match n {
            Node::Stmt(Stmt {
                kind: StmtKind::Expr(e),
                ..
            }) if added_global(e).is_some() => {
                adds.insert(e as *const Expr);
            }
            Node::Stmt(Stmt {
                kind: StmtKind::Delete(LValue::Global(g)),
                ..
            }) => {
                self.other.insert(g.0);
            }
            Node::Expr(e) => match added_global(e) {
                Some(g) if adds.contains(&(e as *const Expr)) => {
                    self.added.insert(g);
                }
                _ => self.other(e),
            },
            Node::Stmt(_) => {}
        });
    }

    /// Records the scalar global `e` names, if any, as used otherwise.
    fn other(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Load(LValue::Global(g))
            | ExprKind::Assign {
                target: LValue::Global(g),
                ..
            }
            | ExprKind::IncDec {
                target: LValue::Global(g),
                ..
            }
            | ExprKind::StatAdd {
                target: LValue::Global(g),
                ..
            }
            | ExprKind::StatGet {
                target: LValue::Global(g),
                ..
            }
            | ExprKind::Hist {
                target: LValue::Global(g),
                ..
            } => {
                self.other.insert(g.0);
            }
            _ => {}
        }
    }
}

/// The scalar global `e` adds to or subtracts from (`++`, `--`, `+=`,
/// `-=`), if it is such an expression.
fn added_global(e: &Expr) -> Option<u32> {
    match &e.kind {
        ExprKind::IncDec {
            op: IncDecOp::Inc | IncDecOp::Dec,
            target: LValue::Global(g),
            ..
        }
        | ExprKind::Assign {
            op: AssignOp::Add | AssignOp::Sub,
            target: LValue::Global(g),
            ..
        } => Some(g.0),
        _ => None,
    }
}
