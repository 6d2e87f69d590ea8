//! `(long) -> string` builtins that are plain lookups (`syscall_name`,
//! `errno_str`: `utap_runtime::syscalls::builtins::lookup_table`) in
//! in-process handlers: every name is a literal of the compile, so the
//! answer is a literal handle chosen by a switch, "" for anything else,
//! as the tracer's decoder answers. `utap_compiler::route` lets no other
//! decoder into the program.

use std::collections::BTreeMap;

use cranelift_codegen::ir::InstBuilder;
use cranelift_frontend::Switch;
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
        self.define("utap_bi_long_to_string", 3, true, |b, a, _| {
            let (decoder, value) = (a[1], a[2]);
            let unknown = b.create_block();
            let mut by_decoder = Switch::new();
            let mut inner = Vec::new();
            for (index, handles) in &lookups.0 {
                let blk = b.create_block();
                by_decoder.set_entry(*index as u128, blk);
                inner.push((blk, handles));
            }
            by_decoder.emit(b, decoder, unknown);
            for (blk, handles) in inner {
                b.switch_to_block(blk);
                let mut by_value = Switch::new();
                let mut answers = Vec::new();
                for (&v, &h) in handles {
                    let ans = b.create_block();
                    by_value.set_entry(v as u64 as u128, ans);
                    answers.push((ans, h));
                }
                by_value.emit(b, value, unknown);
                for (ans, h) in answers {
                    b.switch_to_block(ans);
                    let h = b.ins().iconst(I64, h);
                    b.ins().return_(&[h]);
                }
            }
            b.switch_to_block(unknown);
            let empty = b.ins().iconst(I64, EMPTY);
            b.ins().return_(&[empty]);
        })?;
        Ok(())
    }
}
