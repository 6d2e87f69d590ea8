//! `(long) -> string` builtins that are plain lookups (`syscall_name`,
//! `errno_str`: `utap_runtime::syscalls::builtins::lookup_table`) in
//! in-process handlers: every name is a literal of the compile, so the
//! answer is a literal handle chosen by a switch, "" for anything else,
//! as the tracer's decoder answers. `utap_compiler::route` lets no other
//! decoder into the program.

use std::collections::BTreeMap;

use cranelift_codegen::ir::{Block, InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Switch};
use utap_runtime::script::builtins::long_to_string_index;
use utap_runtime::script::strings::EMPTY;
use utap_runtime::syscalls::builtins::lookup_table;

use super::{I64, Runtime};
use crate::CodegenError;
use crate::tables::Tables;

/// The decoders in process: (index among the `(long) -> string`
/// builtins, handle by input).
pub(super) struct Lookups(Vec<(usize, BTreeMap<i64, i64>)>);

impl Lookups {
    /// Makes every name a literal of `tables`.
    pub(super) fn new(tables: &mut Tables<'_>) -> Lookups {
        let mut out = Vec::new();
        for name in utap_compiler::route::LOOKUP_BUILTINS {
            let (Some(index), Some(table)) = (long_to_string_index(name), lookup_table(name))
            else {
                continue;
            };
            let handles = table
                .into_iter()
                .map(|(v, text)| (v, tables.literal(text)))
                .collect();
            out.push((index, handles));
        }
        Lookups(out)
    }
}

impl Runtime<'_> {
    /// `utap_bi_long_to_string(ctx, decoder, value)`.
    pub(super) fn define_lookups(&mut self, lookups: &Lookups) -> Result<(), CodegenError> {
        let table: Vec<(u128, Vec<(u128, i64)>)> = lookups
            .0
            .iter()
            .map(|(index, handles)| {
                let by_value = handles.iter().map(|(&v, &h)| (v as u64 as u128, h));
                (*index as u128, by_value.collect())
            })
            .collect();
        self.define("utap_bi_long_to_string", 3, true, |b, a, _| {
            return_from_table(b, a[1], a[2], &table)
        })?;
        Ok(())
    }
}

/// Returns the handle `table[outer][inner]` (a switch on `outer`, then on
/// `inner`), or the empty string's for a pair the table lacks.
pub(super) fn return_from_table(
    b: &mut FunctionBuilder,
    outer: Value,
    inner: Value,
    table: &[(u128, Vec<(u128, i64)>)],
) {
    let unknown = b.create_block();
    return_from_table_or(b, outer, inner, table, unknown);
    b.switch_to_block(unknown);
    let empty = b.ins().iconst(I64, EMPTY);
    b.ins().return_(&[empty]);
}

/// Returns the handle `table[outer][inner]`, or goes on at `missing` (an
/// empty block the caller fills) for a pair the table lacks.
pub(super) fn return_from_table_or(
    b: &mut FunctionBuilder,
    outer: Value,
    inner: Value,
    table: &[(u128, Vec<(u128, i64)>)],
    missing: Block,
) {
    let mut by_outer = Switch::new();
    let mut rows = Vec::new();
    for (key, row) in table {
        let blk = b.create_block();
        by_outer.set_entry(*key, blk);
        rows.push((blk, row));
    }
    by_outer.emit(b, outer, missing);
    for (blk, row) in rows {
        b.switch_to_block(blk);
        let mut by_inner = Switch::new();
        let mut answers = Vec::new();
        for &(key, h) in row {
            let ans = b.create_block();
            by_inner.set_entry(key, ans);
            answers.push((ans, h));
        }
        by_inner.emit(b, inner, missing);
        for (ans, h) in answers {
            b.switch_to_block(ans);
            let h = b.ins().iconst(I64, h);
            b.ins().return_(&[h]);
        }
    }
}
