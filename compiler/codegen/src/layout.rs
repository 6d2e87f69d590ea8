//! Where each global lives at run time and how statistics are kept,
//! derived from the checked program: long scalars get a slot native code
//! indexes directly; a statistic keeps the histogram its `@hist_*` uses
//! ask for.

use std::collections::HashMap;

use utap_compiler::ast::Literal;
use utap_compiler::program::{ExprKind, HistKind, LValue, Program, Type};
use utap_compiler::walk;
use utap_runtime::script::image::{GlobalSpec, InitValue, KeyType, ValueType};
use utap_runtime::values::stats::{HistSpec, StatSpec};

use crate::CodegenError;

/// The global a statistics lvalue names.
pub fn stat_global(lv: &LValue) -> Option<u32> {
    match lv {
        LValue::Global(g) => Some(g.0),
        LValue::Elem { array, .. } => Some(array.0),
        _ => None,
    }
}

/// The histogram each statistics global keeps (one kind per global, as
/// SystemTap requires).
fn hist_specs(p: &Program) -> Result<HashMap<u32, HistSpec>, CodegenError> {
    let mut specs: HashMap<u32, HistSpec> = HashMap::new();
    let mut err = None;
    walk::program(p, &mut |e| {
        let ExprKind::Hist { kind, target } = &e.kind else {
            return;
        };
        let Some(g) = stat_global(target) else { return };
        let spec = match kind {
            HistKind::Log => Ok(HistSpec::Log),
            HistKind::Linear { lo, hi, step } => HistSpec::linear(*lo, *hi, *step),
        };
        match spec {
            Ok(spec) => {
                let prev = specs.entry(g).or_insert(spec);
                if *prev != spec && err.is_none() {
                    err = Some(CodegenError::new(
                        e.span,
                        format!(
                            "statistic '{}' is used with two different histograms",
                            p.globals[g as usize].name
                        ),
                    ));
                }
            }
            Err(msg) => {
                if err.is_none() {
                    err = Some(CodegenError::new(e.span, msg.to_string()));
                }
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(specs),
    }
}

/// The runtime description of every global, and the number of long slots.
pub fn globals(p: &Program, maxstringlen: usize) -> Result<(Vec<GlobalSpec>, usize), CodegenError> {
    let hists = hist_specs(p)?;
    let mut long_slots = 0;
    let mut out = Vec::with_capacity(p.globals.len());
    for (i, g) in p.globals.iter().enumerate() {
        let value = match g.ty {
            Type::Long => ValueType::Long,
            Type::String => ValueType::Str,
            Type::Stats => ValueType::Stat(StatSpec {
                hist: hists.get(&(i as u32)).copied().unwrap_or(HistSpec::None),
                variance_shift: 0,
            }),
            // A global nobody gave a type: SystemTap would have rejected
            // it; treat it as a long so it still prints.
            _ => ValueType::Long,
        };
        let keys = g.keys.as_ref().map(|ks| {
            ks.iter()
                .map(|t| match t {
                    Type::String => KeyType::Str,
                    _ => KeyType::Long,
                })
                .collect()
        });
        let long_slot = (keys.is_none() && value == ValueType::Long).then(|| {
            long_slots += 1;
            long_slots as u32 - 1
        });
        let init = g.init.as_ref().map(|l| match l {
            Literal::Num(n) => InitValue::Long(*n),
            Literal::Str(s) => {
                let raw = utap_compiler::lexer::string_bytes(s);
                let b = utap_runtime::values::strings::stored(&raw, maxstringlen);
                InitValue::Str(b.to_vec())
            }
        });
        out.push(GlobalSpec {
            name: g.name.clone(),
            value,
            keys,
            size: g.size,
            wrap: g.wrap,
            init,
            autoprint: g.autoprint,
            long_slot,
        });
    }
    Ok((out, long_slots))
}

/// The globals to print at exit, in the order they were declared.
pub fn autoprint_order(p: &Program) -> Vec<usize> {
    let mut v: Vec<usize> = (0..p.globals.len())
        .filter(|&i| p.globals[i].autoprint)
        .collect();
    v.sort_by_key(|&i| (p.globals[i].span.file, p.globals[i].span.start));
    v
}
