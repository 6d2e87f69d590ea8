//! Reads of variables nothing assigns, across the expansions of a probe.
//!
//! A probe through a tapset alias (`probe syscall.close { print(filename) }`)
//! that reads a variable no expansion assigns is a script expecting a
//! tapset variable the alias does not give: an error naming the alias's
//! variables, rather than a silent 0 or "" (SystemTap warns and runs). A
//! variable only some expansions assign (`probe syscall.open,
//! syscall.close { print(filename) }`) keeps SystemTap's warning, once per
//! read rather than once per expansion.

use rustc_hash::FxHashMap as HashMap;

use super::error::SemError;
use super::rules;
use crate::ast::{FileId, Span};
use crate::diag::Diagnostic;
use crate::program::{LocalVar, ProbeDef};

/// One read in the user's code of a variable some expansion never assigns.
struct Read {
    probe: Span,
    span: Span,
    name: String,
    /// The expansions (alias names) that leave it unassigned.
    heads: Vec<String>,
    /// Every one of them runs an alias's body first.
    through_alias: bool,
    /// Variables the first such alias gives.
    provided: Vec<String>,
    locals: Vec<LocalVar>,
}

#[derive(Default)]
pub struct UnsetReads {
    /// Expansions per user probe (by its span).
    expansions: HashMap<Span, usize>,
    reads: Vec<Read>,
    index: HashMap<(Span, String), usize>,
}

impl UnsetReads {
    /// Notes the unassigned reads of one expansion; `spans` are where its
    /// locals were declared (the user's file or a tapset's).
    pub fn add_probe(
        &mut self,
        p: &ProbeDef,
        spans: &[Span],
        user_file: FileId,
        head: &str,
        through_alias: bool,
    ) {
        *self.expansions.entry(p.span).or_default() += 1;
        for (l, span) in rules::never_assigned(&p.body, &p.locals, 0) {
            let decl = spans.get(l.0 as usize).copied().unwrap_or(span);
            if decl.file != user_file {
                continue;
            }
            let name = p.locals[l.0 as usize].name.clone();
            let i = *self.index.entry((span, name.clone())).or_insert_with(|| {
                self.reads.push(Read {
                    probe: p.span,
                    span,
                    name,
                    heads: Vec::new(),
                    through_alias: true,
                    provided: p
                        .locals
                        .iter()
                        .zip(spans)
                        .filter(|(_, s)| s.file != user_file)
                        .map(|(v, _)| v.name.clone())
                        .collect(),
                    locals: p.locals.clone(),
                });
                self.reads.len() - 1
            });
            let read = &mut self.reads[i];
            read.heads.push(head.to_string());
            read.through_alias &= through_alias;
        }
    }

    /// The errors (reads no expansion can satisfy) and the warnings.
    pub fn finish(self) -> (Vec<SemError>, Vec<Diagnostic>) {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        for r in self.reads {
            let all = self.expansions.get(&r.probe).copied().unwrap_or(0);
            if r.through_alias && r.heads.len() == all {
                errors.push(missing_variable(&r));
            } else {
                warnings.push(super::never_assigned_warning(&r.locals, &r.name, r.span));
            }
        }
        (errors, warnings)
    }
}

/// "'filename' is not a variable of syscall.close", with what it gives.
fn missing_variable(r: &Read) -> SemError {
    let mut heads = r.heads.clone();
    heads.dedup();
    let head = match heads.len() {
        1 => heads[0].clone(),
        n => format!("{} (and {} more)", heads[0], n - 1),
    };
    let e = SemError::new(r.span, format!("'{}' is not a variable of {head}", r.name))
        .label("no probe alias here sets it; it would always read 0 or \"\"");
    if r.provided.is_empty() {
        e.help("assign it first, or declare it global")
    } else {
        e.help(format!("{} gives: {}", heads[0], r.provided.join(", ")))
    }
}
