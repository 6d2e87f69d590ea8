//! Probe handlers that translate to the same code share one native
//! function.
//!
//! A wildcard such as `syscall.*` expands into one probe per syscall, and
//! their handlers are usually the same IR except for a few constants (the
//! `name` string literal of the alias, the location of its assignment).
//! Compiling each one costs most of the start-up of such a script
//! (examples/syscalltop.stp: 768 handlers), so handlers are grouped by
//! their IR with every 64-bit constant blanked out. A group is compiled
//! once: constants all its members agree on stay immediates; the others
//! become loads from the firing probe's row of a parameter table, found
//! through `HandlerContext::probe_index`. Comparing the IR itself (not the
//! checked program) keeps this exact: whatever the translator embeds — a
//! literal handle, a location index, a global slot — either is an
//! immediate that gets its per-probe value, or is part of the compared
//! structure.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::mem::offset_of;

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::immediates::Imm64;
use cranelift_codegen::ir::{
    Function, GlobalValue, Inst, InstBuilder, InstructionData, MemFlagsData, Opcode, types,
};

use rustc_hash::FxHasher;
use utap_runtime::script::context::HandlerContext;

/// The `iconst.i64` instructions of `func` in layout order.
fn i64_consts(func: &Function) -> impl Iterator<Item = Inst> + '_ {
    func.layout
        .blocks()
        .flat_map(|block| func.layout.block_insts(block))
        .filter(|&inst| {
            func.dfg.insts[inst].opcode() == Opcode::Iconst
                && func.dfg.ctrl_typevar(inst) == types::I64
        })
}

/// Blanks every `iconst.i64` of `func` (to 0); appends the instructions
/// and their values to `consts`.
fn blank(func: &mut Function, consts: &mut Vec<(Inst, i64)>) {
    consts.clear();
    consts.extend(i64_consts(func).map(|inst| (inst, 0)));
    for (inst, value) in consts.iter_mut() {
        if let InstructionData::UnaryImm { imm, .. } = &mut func.dfg.insts[*inst] {
            *value = imm.bits();
            *imm = Imm64::new(0);
        }
    }
}

/// The positions of `insts` among the `iconst.i64` instructions of
/// `func` in layout order (as [`Grouper::add`] numbers its constants);
/// None if one is not such an instruction.
pub fn const_positions(func: &Function, insts: &[Inst]) -> Option<Vec<usize>> {
    let order: Vec<Inst> = i64_consts(func).collect();
    insts
        .iter()
        .map(|i| order.iter().position(|o| o == i))
        .collect()
}

fn shape_hash(func: &Function) -> u64 {
    let mut h = FxHasher::default();
    func.stencil.hash(&mut h);
    // Which function each external reference names lives outside the
    // stencil.
    for (_, name) in func.params.user_named_funcs() {
        name.hash(&mut h);
    }
    h.finish()
}

/// Handlers with the same blanked IR.
pub struct Group {
    /// The first member's IR, blanked.
    shape: Function,
    /// The blanked `iconst.i64` instructions of `shape`, in layout order.
    consts: Vec<Inst>,
    /// Probe indexes of the members and their constants (in the order of
    /// `consts`).
    pub members: Vec<(usize, Vec<i64>)>,
}

impl Group {
    /// Positions (in `consts`) whose value differs between members.
    fn varying(&self) -> Vec<usize> {
        let first = &self.members[0].1;
        (0..first.len())
            .filter(|&j| self.members.iter().any(|(_, c)| c[j] != first[j]))
            .collect()
    }
}

/// Groups probe handlers as they are translated.
#[derive(Default)]
pub struct Grouper {
    groups: Vec<Group>,
    by_hash: HashMap<u64, Vec<usize>, BuildHasherDefault<FxHasher>>,
    consts: Vec<(Inst, i64)>,
    /// The group of the handler added last.
    last: Option<usize>,
}

impl Grouper {
    /// Adds the handler of `probe`. `func` is blanked; when it starts a new
    /// group it is taken (left empty), otherwise it can be reused. Returns
    /// where the probe is: its group and its place among the members.
    pub fn add(&mut self, probe: usize, func: &mut Function) -> (usize, usize) {
        blank(func, &mut self.consts);
        let values: Vec<i64> = self.consts.iter().map(|&(_, v)| v).collect();
        // Expansions of one wildcard come one after the other: try the
        // last group before hashing.
        if let Some(g) = self.last
            && self.groups[g].shape == *func
        {
            self.groups[g].members.push((probe, values));
            return (g, self.groups[g].members.len() - 1);
        }
        let candidates = self.by_hash.entry(shape_hash(func)).or_default();
        let groups = &mut self.groups;
        let g = match candidates.iter().find(|&&g| groups[g].shape == *func) {
            Some(&g) => {
                groups[g].members.push((probe, values));
                g
            }
            None => {
                candidates.push(groups.len());
                groups.push(Group {
                    shape: std::mem::replace(func, Function::new()),
                    consts: self.consts.iter().map(|&(inst, _)| inst).collect(),
                    members: vec![(probe, values)],
                });
                groups.len() - 1
            }
        };
        self.last = Some(g);
        (g, self.groups[g].members.len() - 1)
    }

    /// Adds `probe`, whose handler is known to be that of the member at
    /// `like` (from [`Self::add`]) with the constants at the given
    /// positions changed (without translating it).
    pub fn add_like(&mut self, probe: usize, like: (usize, usize), changes: &[(usize, i64)]) {
        let (g, m) = like;
        let mut values = self.groups[g].members[m].1.clone();
        for &(at, v) in changes {
            values[at] = v;
        }
        self.groups[g].members.push((probe, values));
        self.last = Some(g);
    }

    /// The blanked IR and constants of the member at `at`, to compare a
    /// handler translated anyway with (`UTAP_CHECK_PRESETS`).
    pub fn member(&self, at: (usize, usize)) -> (&Function, &[i64]) {
        let g = &self.groups[at.0];
        (&g.shape, &g.members[at.1].1)
    }

    /// Blanks `func` as [`Self::add`] would; its constants.
    pub fn blanked(&mut self, func: &mut Function) -> Vec<i64> {
        blank(func, &mut self.consts);
        self.consts.iter().map(|&(_, v)| v).collect()
    }

    /// Adds `probe`, whose handler is known to translate exactly as the
    /// one added last (without translating it). False when nothing was
    /// added yet.
    pub fn repeat_last(&mut self, probe: usize) -> bool {
        let Some(g) = self.last else { return false };
        let members = &mut self.groups[g].members;
        let values = members.last().expect("a group has members").1.clone();
        members.push((probe, values));
        true
    }

    /// The groups, in order of their first member.
    pub fn finish(self) -> Vec<Group> {
        self.groups
    }
}

/// Per-probe values of the varying constants, as one read-only table:
/// `n_probes` words giving the byte offset of each probe's row from the
/// table's start, then the rows.
#[derive(Default)]
pub struct ParamTable {
    words: Vec<i64>,
}

impl ParamTable {
    /// The table for `groups` (probes outside a parameterised group get
    /// offset 0 and are never read).
    pub fn new(groups: &[Group], n_probes: usize) -> ParamTable {
        let mut words = vec![0; n_probes];
        for g in groups {
            let varying = g.varying();
            if varying.is_empty() {
                continue;
            }
            for (probe, values) in &g.members {
                words[*probe] = (words.len() * 8) as i64;
                words.extend(varying.iter().map(|&j| values[j]));
            }
        }
        ParamTable { words }
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The table's bytes (native endianness, as the loads read them).
    pub fn bytes(&self) -> Box<[u8]> {
        self.words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }
}

/// The function to compile for `group`: its shape with agreed constants
/// restored and varying ones loaded from the probe's row of the table at
/// global value `table` (declared in the function by `declare_table`, only
/// called when some constant varies). Returns the function and, per
/// member, the values of the varying constants (for `-p3`).
pub fn instantiate(
    group: &Group,
    declare_table: impl FnOnce(&mut Function) -> GlobalValue,
) -> (Function, Vec<Vec<i64>>) {
    let mut func = group.shape.clone();
    let first = &group.members[0].1;
    for (&inst, &v) in group.consts.iter().zip(first) {
        if let InstructionData::UnaryImm { imm, .. } = &mut func.dfg.insts[inst] {
            *imm = Imm64::new(v);
        }
    }
    let varying = group.varying();
    if varying.is_empty() {
        return (func, Vec::new());
    }
    let table = declare_table(&mut func);
    let row = load_row(&mut func, table);
    let flags = MemFlagsData::trusted().with_readonly();
    for (k, &j) in varying.iter().enumerate() {
        let inst = group.consts[j];
        func.replace(inst)
            .load(types::I64, flags, row, (8 * k) as i32);
    }
    let rows = group
        .members
        .iter()
        .map(|(_, c)| varying.iter().map(|&j| c[j]).collect())
        .collect();
    (func, rows)
}

/// Emits, at the top of the entry block, the address of the firing
/// probe's row: `table + table[ctx.probe_index]`.
fn load_row(func: &mut Function, table: GlobalValue) -> cranelift_codegen::ir::Value {
    let entry = func.layout.entry_block().expect("a handler has a body");
    let ctx = func.dfg.block_params(entry)[0];
    let flags = MemFlagsData::trusted().with_readonly();
    let mut pos = FuncCursor::new(func).at_first_insertion_point(entry);
    let base = pos.ins().symbol_value(types::I64, table);
    let index = pos.ins().load(
        types::I64,
        flags,
        ctx,
        offset_of!(HandlerContext, probe_index) as i32,
    );
    let slot = pos.ins().ishl_imm_u(index, 3);
    let slot = pos.ins().iadd(base, slot);
    let offset = pos.ins().load(types::I64, flags, slot, 0);
    pos.ins().iadd(base, offset)
}
