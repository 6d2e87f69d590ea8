//! The runtime functions native code imports: their names, signatures and
//! the symbol table handed to the JIT.

use rustc_hash::FxHashMap as HashMap;

use cranelift_codegen::ir::{AbiParam, Signature, types};
use cranelift_jit::JITBuilder;
use cranelift_module::{FuncId, Linkage, Module};

use utap_runtime::script::{abi, builtins};

/// `(name, parameters after ctx, returns a value)` of each runtime call.
const IMPORTS: &[(&str, usize, bool)] = &[
    ("utap_raise", 1, false),
    ("utap_catch", 0, true),
    ("utap_str_concat", 2, true),
    ("utap_str_cmp", 2, true),
    ("utap_str_match", 2, true),
    ("utap_gstr_get", 1, true),
    ("utap_gstr_set", 2, false),
    ("utap_arr_get", 1, true),
    ("utap_arr_set", 2, false),
    ("utap_arr_add", 2, true),
    ("utap_arr_exists", 1, true),
    ("utap_arr_delete", 1, false),
    ("utap_arr_exists_slice", 2, true),
    ("utap_arr_delete_slice", 2, false),
    ("utap_global_clear", 1, false),
    ("utap_stat_add", 3, false),
    ("utap_stat_get", 3, true),
    ("utap_hist_bucket", 3, true),
    ("utap_print_hist", 2, false),
    ("utap_sprint_hist", 2, true),
    ("utap_foreach_array", 6, true),
    ("utap_foreach_hist", 4, true),
    ("utap_foreach_next", 1, true),
    ("utap_foreach_end", 1, false),
    ("utap_printf", 3, false),
    ("utap_sprintf", 3, true),
    ("utap_print", 5, true),
];

/// Registers every runtime symbol with the JIT (builtins under
/// `utap_bi_NAME`).
pub fn register_symbols(jb: &mut JITBuilder) {
    for (name, ptr) in abi::symbols() {
        jb.symbol(name, ptr);
    }
    for (name, ptr) in builtins::symbols() {
        jb.symbol(format!("utap_bi_{name}"), ptr);
    }
    let (name, ptr) = builtins::long_to_string_symbol();
    jb.symbol(name, ptr);
}

/// The imported functions of one module, declared on first use.
#[derive(Default)]
pub struct RuntimeFns {
    ids: HashMap<String, FuncId>,
}

impl RuntimeFns {
    fn signature<M: Module>(module: &M, params: usize, ret: bool) -> Signature {
        let mut sig = module.make_signature();
        for _ in 0..=params {
            sig.params.push(AbiParam::new(types::I64));
        }
        if ret {
            sig.returns.push(AbiParam::new(types::I64));
        }
        sig
    }

    /// A runtime helper from the table above.
    pub fn get<M: Module>(&mut self, module: &mut M, name: &str) -> FuncId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let &(_, params, ret) = IMPORTS
            .iter()
            .find(|(n, ..)| *n == name)
            .unwrap_or_else(|| panic!("unknown runtime function {name}"));
        self.declare(module, name, params, ret)
    }

    /// Any imported symbol taking `params` i64s after ctx and returning
    /// an i64 (builtins).
    pub fn declare<M: Module>(
        &mut self,
        module: &mut M,
        name: &str,
        params: usize,
        ret: bool,
    ) -> FuncId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let sig = Self::signature(module, params, ret);
        let id = module
            .declare_function(name, Linkage::Import, &sig)
            .expect("runtime import declared once with one signature");
        self.ids.insert(name.to_string(), id);
        id
    }
}
