//! The in-process ABI: the handlers `utap_compiler::route` sends into the
//! traced program, compiled a second time by the same translator, into
//! the shared region (`utap_runtime::dataplane`), with a small runtime of
//! their own written here in Cranelift IR:
//!
//! * `utap_arr_get/set/add/exists/delete` on lock-free open-addressing
//!   tables in the region (claim a slot by compare-and-swap, publish it
//!   live; deletes leave the keys, a later insertion of them revives the
//!   slot), bounded probing, "Array overflow" past the map's limit;
//! * `utap_stat_add`: `<<<` on a statistic's slot in the same tables,
//!   with atomics (`stats`);
//! * `utap_raise`: the first error of the session goes to the region's
//!   header and stops every handler;
//! * `pid()`, `tid()` from the block the common entry passes, and
//!   `execname()`, the handle the tracer put there (`names`);
//! * `printf`, `print` and their `ln`/`d` forms as records in the
//!   block's output ring (`output`);
//! * two dispatchers, `fn(ctx) -> i64`, switching on the syscall number
//!   to the hooks of that number in the script's order (the entry's
//!   result: 0 served, 2 served with no return probe on that number, 1
//!   not a number served in process: the stub makes the call itself).
//!
//! Nothing here calls outside the region, takes a lock or makes a
//! syscall, and the same code runs in the tracer for hits it takes at a
//! stop. Long scalar globals are updated with atomic adds (see
//! `Translator::in_process`), or in the thread's own copy when the
//! handlers only add to them (`counters`).

use std::collections::HashSet;
use std::mem::offset_of;
use std::sync::{Arc, Mutex};

use cranelift_codegen::Context;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, AtomicRmwOp, Block, FuncRef, InstBuilder, MemFlagsData, Signature, Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch};
use cranelift_jit::{BranchProtection, JITBuilder, JITMemoryKind, JITMemoryProvider, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleResult};

use utap_compiler::ast::Span;
use utap_compiler::program::{FunctionDef, PointKind, ProcessEvent, Program};
use utap_compiler::route::{self, Route};
use utap_runtime::dataplane::clock::Keeper;
use utap_runtime::dataplane::image::{InProcImage, NEVER_SERVED, SYSCALL_NUMBERS};
use utap_runtime::dataplane::layout::{
    BLOCK_HITS, CODE_LEN, COMMON_LEN, DataLayout, Header, JIT_DATA_LEN, LISTS_LEN,
    RAISE_ARRAY_FULL, STOP_MASK, STOPPED, TableShape, TableSpec, stat, tag,
};
use utap_runtime::dataplane::names::Names;
use utap_runtime::dataplane::region::Region;
use utap_runtime::dataplane::strings::MAX_LEN as STRING_MAX;
use utap_runtime::script::context::{HandlerContext, ProbeValues};
use utap_runtime::script::image::{GlobalSpec, ValueType};
use utap_runtime::values::map::MapLimit;
use utap_runtime::values::stats::HistSpec;

use crate::{CodegenError, Compiler, Options, Sources, layout};

mod clock;
mod counters;
mod dwarf;
mod lookup;
mod marks;
mod names;
mod output;
mod stats;
mod user;

const I64: types::Type = types::I64;

fn mem() -> MemFlagsData {
    MemFlagsData::trusted()
}

fn err(msg: impl std::fmt::Display) -> CodegenError {
    CodegenError::new(Span::default(), format!("in-process code: {msg}"))
}

/// Where the JIT places in-process code and data: bump allocation in the
/// region's code part (executable and read-only data) and its JIT data
/// area (writable data), both already mapped here.
struct RegionMemory {
    code: std::ops::Range<u64>,
    next_code: u64,
    data: std::ops::Range<u64>,
    next_data: u64,
}

impl JITMemoryProvider for RegionMemory {
    fn allocate(
        &mut self,
        size: usize,
        align: u64,
        kind: JITMemoryKind,
    ) -> std::io::Result<*mut u8> {
        let (next, range) = match kind {
            JITMemoryKind::Writable => (&mut self.next_data, &self.data),
            JITMemoryKind::Executable | JITMemoryKind::ReadOnly => {
                (&mut self.next_code, &self.code)
            }
        };
        let at = next.div_ceil(align.max(1)) * align.max(1);
        if at + size as u64 > range.end {
            return Err(std::io::Error::other("the in-process region is full"));
        }
        *next = at + size as u64;
        Ok(at as *mut u8)
    }

    unsafe fn free_memory(&mut self) {}

    fn finalize(&mut self, _: BranchProtection) -> ModuleResult<()> {
        // Mapped rwx here, r-x in the programs: nothing to change.
        Ok(())
    }
}

/// How the in-process JIT module is set up (`crate::new_module`).
pub(crate) struct Placement {
    memory: RegionMemory,
    /// Symbols nothing in the region defines (a route rule missed a
    /// runtime call): the compile is abandoned.
    unresolved: Arc<Mutex<Vec<String>>>,
}

impl Placement {
    pub(crate) fn configure(self, jb: &mut JITBuilder) {
        jb.memory_provider(Box::new(self.memory));
        let unresolved = self.unresolved.clone();
        // Tried before dlsym: any name reaching here is not ours.
        jb.symbol_lookup_fn(Box::new(move |name| {
            unresolved
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(name.to_string());
            Some(std::ptr::dangling::<u8>())
        }));
    }
}

/// The compiled in-process code with its region; the module owns nothing
/// but bookkeeping (the code lives in the region).
pub struct InProc {
    pub image: Arc<InProcImage>,
    _module: JITModule,
}

/// Hooks of one syscall number: (in-process probe index, point index, the
/// probe's handler).
type Hooks = Vec<(u32, u32, FuncId)>;

/// Compiles the in-process probes of `program`, if any; `None` when no
/// probe runs in process or the region cannot be made (every probe then
/// runs in the tracer, as `-v` says).
pub fn compile(
    program: &Program,
    routes: &[Route],
    sources: &dyn Sources,
    options: &Options,
) -> Result<Option<InProc>, CodegenError> {
    let chosen: Vec<usize> = (0..program.probes.len())
        .filter(|&i| routes.get(i) == Some(&Route::InProcess))
        .collect();
    if chosen.is_empty() {
        return Ok(None);
    }
    let mut sub = Program {
        globals: program.globals.clone(),
        functions: called_functions(program, &chosen),
        probes: chosen.iter().map(|&i| program.probes[i].clone()).collect(),
        guru: false,
        entry_missing: Vec::new(),
    };
    marks::load_mark_args(&mut sub);
    let maxstringlen = options.limits.max_string_len;
    // The whole program's globals: the histograms a statistic keeps are
    // the ones its readers (end probes, not compiled here) use.
    let (globals, long_slots) = layout::globals(program, maxstringlen)?;
    let touched: HashSet<u32> = sub
        .probes
        .iter()
        .flat_map(|p| route::touched(&sub, p))
        .map(|g| g.0)
        .collect();
    let arrays: Vec<TableShape> = globals
        .iter()
        .enumerate()
        .filter(|(i, _)| touched.contains(&(*i as u32)))
        .filter_map(|(i, g)| table_shape(i as u32, g, options.limits.max_map_entries))
        .collect();
    let long_globals: Vec<(u32, u32)> = globals
        .iter()
        .enumerate()
        .filter(|(i, _)| touched.contains(&(*i as u32)))
        .filter_map(|(i, g)| Some((i as u32, g.long_slot?)))
        .collect();
    let reads_strings = calls_any(&sub, route::RING_BUILTINS);
    if reads_strings && options.limits.max_string_len as u64 > STRING_MAX {
        return Ok(None);
    }
    let layout = DataLayout::new(long_slots as u64, &arrays, reads_strings);
    let Ok(region) = Region::create(layout) else {
        return Ok(None);
    };
    let code_start = region.base() + COMMON_LEN;
    // SAFETY: the first bytes of the code part, ours, placed before the
    // JIT's.
    let helpers = unsafe { clock::write_helpers(code_start) };
    let unresolved = Arc::new(Mutex::new(Vec::new()));
    let placement = Placement {
        memory: RegionMemory {
            code: code_start..region.base() + CODE_LEN - LISTS_LEN,
            next_code: code_start + clock::HELPERS_LEN,
            data: region.data_base() + region.data.jit_data
                ..region.data_base() + region.data.jit_data + JIT_DATA_LEN,
            next_data: region.data_base() + region.data.jit_data,
        },
        unresolved: unresolved.clone(),
    };
    let module = crate::new_module(Some(placement))?;
    let counted = counters::counted(&sub, &globals);
    let mut c = Compiler::new(module, sources, globals, options, true);
    c.tables.counters = counted.iter().copied().collect();
    let lookups = lookup::Lookups::new(&mut c.tables);
    let points = names::PointTexts::new(&sub, &mut c.tables);
    let header = region.header() as i64;
    let mut rt = Runtime {
        module: &mut c.module,
        ctx: &mut c.ctx,
        fctx: &mut c.fctx,
        header,
    };
    rt.define_raise()?;
    rt.define_arrays(&region, &region.data.tables, &c.tables.globals)?;
    rt.define_context("utap_bi_pid", offset_of!(ProbeValues, pid))?;
    rt.define_context("utap_bi_tid", offset_of!(ProbeValues, tid))?;
    rt.define_output(&region)?;
    rt.define_clock(helpers)?;
    rt.define_lookups(&lookups)?;
    rt.define_names()?;
    rt.define_points(&points)?;
    if reads_strings {
        rt.define_strings(&region, options.limits.max_string_len as i64)?;
    }
    if calls_any(&sub, route::LOAD_BUILTINS) {
        rt.define_user_values(&region)?;
    }
    let target_vars = dwarf::plans_read(&sub);
    if !target_vars.is_empty() {
        rt.define_target_vars(&region, &target_vars)?;
    }
    let target_texts = dwarf::texts_read(&sub);
    if !target_texts.is_empty() {
        rt.define_target_texts(&region, &target_texts)?;
    }
    let site_names = points.by_site() && calls_any(&sub, &["probefunc"]);
    let funcs = c.functions(&sub)?;
    let handlers = c.handlers(&sub, &funcs)?;
    let (entry, exit) = hooks(program, routes, &chosen, &handlers);
    let served: Vec<bool> = (0..SYSCALL_NUMBERS)
        .map(|nr| entry.served(nr) && exit.served(nr))
        .collect();
    let mut rt = Runtime {
        module: &mut c.module,
        ctx: &mut c.ctx,
        fctx: &mut c.fctx,
        header,
    };
    let limits = &options.limits;
    let returns: Vec<bool> = exit.hooks.iter().map(|h| !h.is_empty()).collect();
    let syscall_hooks = entry.hooks.iter().chain(&exit.hooks).any(|h| !h.is_empty());
    let dispatch_entry = rt.define_dispatcher(
        "utap_dispatch_entry",
        &entry.hooks,
        &served,
        &returns,
        limits.max_action,
        true,
    )?;
    let dispatch_return = rt.define_dispatcher(
        "utap_dispatch_return",
        &exit.hooks,
        &served,
        &returns,
        limits.max_action,
        false,
    )?;
    c.module.finalize_definitions().map_err(err)?;
    if let Some(name) = unresolved.lock().unwrap_or_else(|e| e.into_inner()).first() {
        return Err(err(format!("no in-process implementation of {name}")));
    }
    let held = route::held_probes(program, routes);
    let addr = |id: FuncId| c.module.get_finalized_function(id) as u64;
    let mut by_probe = vec![None; program.probes.len()];
    for (k, &i) in chosen.iter().enumerate() {
        by_probe[i] = Some((addr(handlers[k]), k as u32));
    }
    let image = InProcImage {
        dispatch_entry: addr(dispatch_entry),
        dispatch_return: addr(dispatch_return),
        handlers: by_probe,
        served,
        long_globals,
        counted,
        blocks_used: Default::default(),
        literals: c.tables.literals.clone(),
        literal_handles: c
            .tables
            .literal_index
            .iter()
            .map(|(k, &v)| (k.clone(), v))
            .collect(),
        locations: c.tables.locations.table.clone(),
        formats: c.tables.formats.clone(),
        max_action: limits.max_action,
        max_nesting: limits.max_nesting,
        max_string_len: limits.max_string_len,
        syscall_hooks,
        entry_regs: target_vars.iter().any(|(_, p)| p.reads_regs)
            || target_texts.iter().any(|(_, (_, regs))| *regs),
        entry_site: !target_vars.is_empty() || !target_texts.is_empty() || site_names,
        clock: calls_any(&sub, route::CLOCK_BUILTINS).then(|| start_clock(&region)),
        names: (calls_any(&sub, route::NAME_BUILTINS)
            || site_names
            || held_keys_strings(program, &held, &touched))
        .then(Names::default),
        held,
        region,
    };
    Ok(Some(InProc {
        image: Arc::new(image),
        _module: c.module,
    }))
}

/// The script's functions as the in-process probes see them: those they
/// call, and the others with an empty body (the route pass checked only
/// the called ones; the indexes stay the script's).
fn called_functions(program: &Program, chosen: &[usize]) -> Vec<FunctionDef> {
    let mut called = HashSet::new();
    for &i in chosen {
        called.extend(route::called_functions(program, &program.probes[i]));
    }
    let mut functions = program.functions.clone();
    for (i, f) in functions.iter_mut().enumerate() {
        if !called.contains(&i) {
            f.body.stmts.clear();
        }
    }
    functions
}

/// Whether an in-process handler reads the clock: its parameters are then
/// calibrated now and kept by the tracer while the session runs.
/// Whether a probe or function of `sub` calls one of `builtins`.
/// Whether a probe that runs held may put a string key into an array the
/// region holds: a key that is none of the compile's literals then needs
/// a name handle (`utap_runtime::dataplane::names`) to be filled in.
fn held_keys_strings(program: &Program, held: &[bool], touched: &HashSet<u32>) -> bool {
    held.iter().any(|&h| h)
        && program.globals.iter().enumerate().any(|(i, g)| {
            touched.contains(&(i as u32))
                && g.keys
                    .as_ref()
                    .is_some_and(|k| k.contains(&utap_compiler::program::Type::String))
        })
}

fn calls_any(sub: &Program, builtins: &[&str]) -> bool {
    let mut found = false;
    let mut visit = |e: &utap_compiler::program::Expr| {
        if let utap_compiler::program::ExprKind::Builtin { name, .. } = &e.kind {
            found |= builtins.contains(name);
        }
    };
    for p in &sub.probes {
        utap_compiler::walk::block(&p.body, &mut visit);
    }
    for f in &sub.functions {
        utap_compiler::walk::block(&f.body, &mut visit);
    }
    found
}

fn start_clock(region: &Region) -> Mutex<Keeper> {
    let header = region.header();
    // SAFETY: the header of our live mapping of the region.
    let clock = unsafe { std::ptr::addr_of_mut!((*header).clock) };
    // SAFETY: as above; the keeper lives in the image with the region.
    Mutex::new(unsafe { Keeper::start(clock, std::time::Duration::from_millis(1)) })
}

/// The region table of global `g`, if it has one: an array of longs, or
/// a statistic (scalar: one slot, no key) with its histogram's buckets.
fn table_shape(i: u32, g: &GlobalSpec, max_map_entries: usize) -> Option<TableShape> {
    let arity = g.keys.as_ref().map_or(0, |k| k.len()) as u64;
    let limit = || MapLimit::new(g.size, g.wrap, max_map_entries).max_entries as u64;
    match (g.value, &g.keys) {
        (ValueType::Stat(spec), None) => {
            Some(TableShape::stat(i, 0, 1, spec.hist.buckets() as u64))
        }
        (ValueType::Stat(spec), Some(_)) => Some(TableShape::stat(
            i,
            arity,
            limit(),
            spec.hist.buckets() as u64,
        )),
        (_, Some(_)) => Some(TableShape::longs(i, arity, limit())),
        (_, None) => None,
    }
}

/// The hooks of each syscall number, on one side (entry or return).
struct Side {
    hooks: Vec<Hooks>,
    /// Numbers with a hook of a probe that stays in the tracer.
    tracer: Vec<bool>,
}

impl Side {
    fn served(&self, nr: usize) -> bool {
        !self.tracer[nr] && !NEVER_SERVED.contains(&(nr as u32))
    }
}

/// Every syscall hook of the script, by number, in the order the tracer
/// fires them (probes in order, points in order).
fn hooks(
    program: &Program,
    routes: &[Route],
    chosen: &[usize],
    handlers: &[FuncId],
) -> (Side, Side) {
    let new = || Side {
        hooks: vec![Vec::new(); SYSCALL_NUMBERS],
        tracer: vec![false; SYSCALL_NUMBERS],
    };
    let (mut entry, mut exit) = (new(), new());
    for (i, p) in program.probes.iter().enumerate() {
        let inproc = chosen.iter().position(|&c| c == i);
        for (point, pt) in p.points.iter().enumerate() {
            let (side, nrs) = match &pt.kind {
                PointKind::Process {
                    event: ProcessEvent::Syscall { syscalls },
                    ..
                } => (&mut entry, syscalls),
                PointKind::Process {
                    event: ProcessEvent::SyscallReturn { syscalls },
                    ..
                } => (&mut exit, syscalls),
                _ => continue,
            };
            let all: Vec<u32>;
            let nrs = match nrs {
                Some(n) => n,
                None => {
                    all = (0..SYSCALL_NUMBERS as u32).collect();
                    &all
                }
            };
            for &nr in nrs.iter().filter(|&&n| (n as usize) < SYSCALL_NUMBERS) {
                match (inproc, &routes[i]) {
                    (Some(k), Route::InProcess) => {
                        side.hooks[nr as usize].push((k as u32, point as u32, handlers[k]))
                    }
                    _ => side.tracer[nr as usize] = true,
                }
            }
        }
    }
    (entry, exit)
}

/// Builds the in-process runtime's functions.
struct Runtime<'m> {
    module: &'m mut JITModule,
    ctx: &'m mut Context,
    fctx: &'m mut FunctionBuilderContext,
    header: i64,
}

fn hdr(field: usize) -> i64 {
    field as i64
}

impl Runtime<'_> {
    fn signature(&self, params: usize, ret: bool) -> Signature {
        let mut sig = self.module.make_signature();
        for _ in 0..params {
            sig.params.push(AbiParam::new(I64));
        }
        if ret {
            sig.returns.push(AbiParam::new(I64));
        }
        sig
    }

    /// Declares `name` (exported: the translator's imports of the same
    /// name resolve to it) and builds its body with `body`.
    fn define(
        &mut self,
        name: &str,
        params: usize,
        ret: bool,
        body: impl FnOnce(
            &mut FunctionBuilder,
            &[Value],
            &mut dyn FnMut(&mut FunctionBuilder, FuncId) -> FuncRef,
        ),
    ) -> Result<FuncId, CodegenError> {
        let sig = self.signature(params, ret);
        let id = self
            .module
            .declare_function(name, Linkage::Export, &sig)
            .map_err(err)?;
        self.ctx.func.signature = sig;
        {
            let module = &mut *self.module;
            let mut b = FunctionBuilder::new(&mut self.ctx.func, self.fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let args = b.block_params(entry).to_vec();
            let mut fref =
                |b: &mut FunctionBuilder, f: FuncId| module.declare_func_in_func(f, b.func);
            body(&mut b, &args, &mut fref);
            b.seal_all_blocks();
            let config = module.target_config();
            b.finalize(config);
        }
        self.module.define_function(id, self.ctx).map_err(err)?;
        self.module.clear_context(self.ctx);
        Ok(id)
    }

    /// `utap_raise(ctx, kind)`: the session's first error goes to the
    /// header (kind, location, probe), every handler stops.
    fn define_raise(&mut self) -> Result<(), CodegenError> {
        let header = self.header;
        self.define("utap_raise", 2, false, |b, a, _| {
            raise(b, header, a[0], a[1], None);
            b.ins().return_(&[]);
        })?;
        Ok(())
    }

    /// `pid()`, `tid()`: a field of the probe values the entry filled in.
    fn define_context(&mut self, name: &str, field: usize) -> Result<(), CodegenError> {
        let off = (offset_of!(HandlerContext, probe) + field) as i32;
        self.define(name, 1, true, |b, a, _| {
            let v = b.ins().load(I64, mem(), a[0], off);
            b.ins().return_(&[v]);
        })?;
        Ok(())
    }

    /// Every table's slot finder, then the five array operations over the
    /// arrays of longs and `<<<` over the statistics (`stats`).
    fn define_arrays(
        &mut self,
        region: &Region,
        tables: &[TableSpec],
        globals: &[GlobalSpec],
    ) -> Result<(), CodegenError> {
        let base = region.data_base() as i64;
        let mut finds = Vec::new();
        for t in tables {
            let header = self.header;
            let t = *t;
            let id = self.define(&format!("utap_ip_find{}", t.global), 2, true, |b, a, _| {
                find(b, header, base, &t, a[0], a[1]);
            })?;
            finds.push((t.global, id));
        }
        let (stats, longs): (Vec<_>, Vec<_>) = tables
            .iter()
            .zip(finds)
            .map(|(t, f)| (*t, f))
            .partition(|(t, _)| t.stat);
        let hists: Vec<HistSpec> = stats
            .iter()
            .map(
                |(t, _)| match globals.get(t.global as usize).map(|g| g.value) {
                    Some(ValueType::Stat(spec)) => spec.hist,
                    _ => HistSpec::None,
                },
            )
            .collect();
        self.define_stat_add(&stats, &hists)?;
        let (tables, finds): (Vec<TableSpec>, Vec<(u32, FuncId)>) = longs.into_iter().unzip();
        let header = self.header;
        let ops: [(&str, usize, bool); 6] = [
            ("utap_arr_get", 2, true),
            ("utap_arr_set", 3, false),
            ("utap_arr_add", 3, true),
            ("utap_arr_max", 3, false),
            ("utap_arr_exists", 2, true),
            ("utap_arr_delete", 2, false),
        ];
        for (name, params, ret) in ops {
            let finds = finds.clone();
            let tables = tables.clone();
            self.define(name, params, ret, |b, a, fref| {
                array_op(b, header, base, name, a, &finds, &tables, fref);
            })?;
        }
        Ok(())
    }

    /// A dispatcher: switch on `ctx.probe.syscall`, call the hooks of that
    /// number in order. Entry: 1 for a number not served in process.
    fn define_dispatcher(
        &mut self,
        name: &str,
        hooks: &[Hooks],
        served: &[bool],
        returns: &[bool],
        max_action: i64,
        entry: bool,
    ) -> Result<FuncId, CodegenError> {
        let header = self.header;
        self.define(name, 1, true, |b, a, fref| {
            let ctx = a[0];
            let zero = b.ins().iconst(I64, 0);
            let one = b.ins().iconst(I64, 1);
            let done = b.create_block();
            b.append_block_param(done, I64);
            let raw = b.create_block();
            let mut switch = Switch::new();
            let mut blocks = Vec::new();
            for (nr, list) in hooks.iter().enumerate() {
                if served[nr] && (entry || !list.is_empty()) {
                    let blk = b.create_block();
                    switch.set_entry(nr as u128, blk);
                    blocks.push((nr, blk, list));
                }
            }
            let nr = b.ins().load(
                I64,
                mem(),
                ctx,
                (offset_of!(HandlerContext, probe) + offset_of!(ProbeValues, syscall)) as i32,
            );
            switch.emit(b, nr, raw);
            b.switch_to_block(raw);
            let r = if entry { one } else { zero };
            b.ins().jump(done, &[r.into()]);
            for (nr, blk, list) in blocks {
                b.switch_to_block(blk);
                // Entry: 0 served, the return dispatcher to run after the
                // call; 2 served, nothing to run after it.
                let served = match entry && !returns[nr] {
                    true => b.ins().iconst(I64, 2),
                    false => zero,
                };
                if entry {
                    let hits = b.ins().load(I64, mem(), ctx, BLOCK_HITS as i32);
                    let hits = b.ins().iadd_imm_s(hits, 1);
                    b.ins().store(mem(), hits, ctx, BLOCK_HITS as i32);
                }
                for &(probe, point, handler) in list {
                    let go = b.create_block();
                    let stop = b.ins().iconst(I64, header + hdr(offset_of!(Header, stop)));
                    let word = b.ins().load(I64, mem(), stop, 0);
                    // `layout::stopped`: the tracer's flag, or the tracing
                    // thread's death in the robust word.
                    let stopped = b.ins().band_imm_s(word, STOP_MASK as i64);
                    b.ins().brif(stopped, done, &[served.into()], go, &[]);
                    b.switch_to_block(go);
                    for (field, v) in [
                        (offset_of!(HandlerContext, error), 0),
                        (offset_of!(HandlerContext, actions_left), max_action),
                        (offset_of!(HandlerContext, nesting), 0),
                        (offset_of!(HandlerContext, location), 0),
                        (offset_of!(HandlerContext, probe_index), probe as i64),
                        (offset_of!(HandlerContext, point_index), point as i64),
                    ] {
                        let v = b.ins().iconst(I64, v);
                        b.ins().store(mem(), v, ctx, field as i32);
                    }
                    let f = fref(b, handler);
                    b.ins().call(f, &[ctx]);
                }
                b.ins().jump(done, &[served.into()]);
            }
            b.switch_to_block(done);
            let r = b.block_params(done)[0];
            b.ins().return_(&[r]);
        })
    }
}

/// An operation that gave up on a slot another thread held too long:
/// counted in the header (`-v`), the operation dropped.
fn count_contended(b: &mut FunctionBuilder, header: i64) {
    let c = b
        .ins()
        .iconst(I64, header + offset_of!(Header, contended) as i64);
    let one = b.ins().iconst(I64, 1);
    b.ins().atomic_rmw(I64, mem(), AtomicRmwOp::Add, c, one);
}

/// Records the first error (kind, the context's location and probe, and
/// for an overflow its global) and stops every handler; sets `ctx.error`.
fn raise(b: &mut FunctionBuilder, header: i64, ctx: Value, kind: Value, global: Option<i64>) {
    let global = global.map(|g| b.ins().iconst(I64, g));
    raise_with(b, header, ctx, kind, global);
}

/// [`raise`] with the header's `error_global` word (the array of an
/// overflow, the address of a string read that faulted) computed.
fn raise_with(
    b: &mut FunctionBuilder,
    header: i64,
    ctx: Value,
    kind: Value,
    global: Option<Value>,
) {
    let at = |b: &mut FunctionBuilder, f: usize| b.ins().iconst(I64, header + f as i64);
    let kind_addr = at(b, offset_of!(Header, error_kind));
    let zero = b.ins().iconst(I64, 0);
    let old = b.ins().atomic_cas(mem(), kind_addr, zero, kind);
    let first = b.create_block();
    let after = b.create_block();
    b.ins().brif(old, after, &[], first, &[]);
    b.switch_to_block(first);
    let loc = b
        .ins()
        .load(I64, mem(), ctx, offset_of!(HandlerContext, location) as i32);
    let probe = b.ins().load(
        I64,
        mem(),
        ctx,
        offset_of!(HandlerContext, probe_index) as i32,
    );
    let a = at(b, offset_of!(Header, error_location));
    b.ins().store(mem(), loc, a, 0);
    let a = at(b, offset_of!(Header, error_probe));
    b.ins().store(mem(), probe, a, 0);
    if let Some(g) = global {
        let a = at(b, offset_of!(Header, error_global));
        b.ins().store(mem(), g, a, 0);
    }
    b.ins().jump(after, &[]);
    b.switch_to_block(after);
    let one = b.ins().iconst(I64, 1);
    let stopped = b.ins().iconst(I64, STOPPED as i64);
    let stop = at(b, offset_of!(Header, stop));
    b.ins().atomic_store(mem(), stopped, stop);
    b.ins()
        .store(mem(), one, ctx, offset_of!(HandlerContext, error) as i32);
}

/// Spins before a slot held by another thread counts as contended.
const SPINS: i64 = 1 << 14;

/// `find(ctx, insert) -> slot`: the slot of `ctx.keys` in table `t`
/// (inserting it when `insert`); 0 when absent (or no room: the caller
/// raises), 1 when another thread held the slot too long.
fn find(b: &mut FunctionBuilder, header: i64, base: i64, t: &TableSpec, ctx: Value, insert: Value) {
    let _ = header;
    let key = |b: &mut FunctionBuilder, i: u64| {
        b.ins().load(
            I64,
            mem(),
            ctx,
            (offset_of!(HandlerContext, keys) + 8 * i as usize) as i32,
        )
    };
    // FxHash-style mix of the key words.
    let mut h = b.ins().iconst(I64, 0x9e37_79b9_7f4a_7c15u64 as i64);
    for i in 0..t.arity {
        let k = key(b, i);
        let r = b.ins().rotl_imm_s(h, 5);
        let x = b.ins().bxor(r, k);
        h = b.ins().imul_imm_s(x, 0x517c_c1b7_2722_0a95u64 as i64);
    }
    let hi = b.ins().ushr_imm_s(h, 29);
    let h = b.ins().bxor(h, hi);
    let mask = (t.capacity - 1) as i64;
    let idx0 = b.ins().band_imm_s(h, mask);
    let zero = b.ins().iconst(I64, 0);
    let one = b.ins().iconst(I64, 1);

    // loop(idx, probes, spins)
    let lp = b.create_block();
    for _ in 0..3 {
        b.append_block_param(lp, I64);
    }
    let ret = b.create_block();
    b.append_block_param(ret, I64);
    b.ins().jump(lp, &[idx0.into(), zero.into(), zero.into()]);
    b.switch_to_block(lp);
    let (idx, probes, spins) = {
        let p = b.block_params(lp);
        (p[0], p[1], p[2])
    };
    let slot_len = t.slot_len() as i64;
    let off = b.ins().imul_imm_s(idx, slot_len);
    let e = b.ins().iadd_imm_s(off, base + t.offset as i64);
    let tg = b.ins().atomic_load(I64, mem(), e);

    let empty = b.create_block();
    let nonempty = b.create_block();
    b.append_block_param(nonempty, I64);
    let is_empty = b.ins().icmp_imm_s(IntCC::Equal, tg, tag::EMPTY as i64);
    b.ins().brif(is_empty, empty, &[], nonempty, &[tg.into()]);

    // Empty: absent, or claim it.
    b.switch_to_block(empty);
    let claim = b.create_block();
    b.ins().brif(insert, claim, &[], ret, &[zero.into()]);
    b.switch_to_block(claim);
    let claimed = b.ins().iconst(I64, tag::CLAIMED as i64);
    let old = b.ins().atomic_cas(mem(), e, zero, claimed);
    let won = b.create_block();
    let was_empty = b.ins().icmp_imm_s(IntCC::Equal, old, 0);
    b.ins().brif(was_empty, won, &[], nonempty, &[old.into()]);
    b.switch_to_block(won);
    let room = count_up(b, base, t, e, tag::EMPTY, ret);
    b.switch_to_block(room);
    for i in 0..t.arity {
        let k = key(b, i);
        b.ins().store(mem(), k, e, (8 + 8 * i) as i32);
    }
    publish(b, e, t, base, idx);
    b.ins().jump(ret, &[e.into()]);

    // Held by a writer: spin on the same slot, then give up.
    b.switch_to_block(nonempty);
    let tg = b.block_params(nonempty)[0];
    let settled = b.create_block();
    let busy = b.create_block();
    let c1 = b.ins().icmp_imm_s(IntCC::Equal, tg, tag::CLAIMED as i64);
    let c2 = b.ins().icmp_imm_s(IntCC::Equal, tg, tag::REVIVING as i64);
    let held = b.ins().bor(c1, c2);
    b.ins().brif(held, busy, &[], settled, &[]);
    b.switch_to_block(busy);
    let spins1 = b.ins().iadd_imm_s(spins, 1);
    let again = b.create_block();
    let too_long = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, spins1, SPINS);
    b.ins().brif(too_long, ret, &[one.into()], again, &[]);
    b.switch_to_block(again);
    b.ins()
        .jump(lp, &[idx.into(), probes.into(), spins1.into()]);

    // Live or deleted: the keys are stable; compare them.
    b.switch_to_block(settled);
    let mut same = b.ins().iconst(types::I8, 1);
    for i in 0..t.arity {
        let k = key(b, i);
        let s = b.ins().load(I64, mem(), e, (8 + 8 * i) as i32);
        let eq = b.ins().icmp(IntCC::Equal, k, s);
        same = b.ins().band(same, eq);
    }
    let found = b.create_block();
    let next = b.create_block();
    b.ins().brif(same, found, &[], next, &[]);
    b.switch_to_block(next);
    let idx1 = b.ins().iadd_imm_s(idx, 1);
    let idx1 = b.ins().band_imm_s(idx1, mask);
    let probes1 = b.ins().iadd_imm_s(probes, 1);
    let full = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, probes1, mask);
    let go = b.create_block();
    b.ins().brif(full, ret, &[zero.into()], go, &[]);
    b.switch_to_block(go);
    b.ins()
        .jump(lp, &[idx1.into(), probes1.into(), zero.into()]);

    b.switch_to_block(found);
    let live = b.ins().icmp_imm_s(IntCC::Equal, tg, tag::LIVE as i64);
    let dead = b.create_block();
    b.ins().brif(live, ret, &[e.into()], dead, &[]);
    b.switch_to_block(dead);
    let revive = b.create_block();
    b.ins().brif(insert, revive, &[], ret, &[zero.into()]);
    b.switch_to_block(revive);
    let deleted = b.ins().iconst(I64, tag::DELETED as i64);
    let reviving = b.ins().iconst(I64, tag::REVIVING as i64);
    let old = b.ins().atomic_cas(mem(), e, deleted, reviving);
    let mine = b.create_block();
    let was_deleted = b.ins().icmp_imm_s(IntCC::Equal, old, tag::DELETED as i64);
    b.ins().brif(
        was_deleted,
        mine,
        &[],
        lp,
        &[idx.into(), probes.into(), spins.into()],
    );
    b.switch_to_block(mine);
    let room = count_up(b, base, t, e, tag::DELETED, ret);
    b.switch_to_block(room);
    publish(b, e, t, base, idx);
    b.ins().jump(ret, &[e.into()]);

    b.switch_to_block(ret);
    let r = b.block_params(ret)[0];
    b.ins().return_(&[r]);
}

/// Counts a new live entry; past the limit, puts the slot's tag back to
/// `undo` and returns 0 through `ret`. Returns the block to go on in.
fn count_up(
    b: &mut FunctionBuilder,
    base: i64,
    t: &TableSpec,
    e: Value,
    undo: u64,
    ret: Block,
) -> Block {
    let count = b.ins().iconst(I64, base + t.count_offset as i64);
    let one = b.ins().iconst(I64, 1);
    let n = b.ins().atomic_rmw(I64, mem(), AtomicRmwOp::Add, count, one);
    let over = b
        .ins()
        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, t.max_entries as i64);
    let room = b.create_block();
    let full = b.create_block();
    b.ins().brif(over, full, &[], room, &[]);
    b.switch_to_block(full);
    let minus = b.ins().iconst(I64, -1);
    b.ins()
        .atomic_rmw(I64, mem(), AtomicRmwOp::Add, count, minus);
    let back = b.ins().iconst(I64, undo as i64);
    b.ins().atomic_store(mem(), back, e);
    let zero = b.ins().iconst(I64, 0);
    b.ins().jump(ret, &[zero.into()]);
    room
}

/// Starts a slot's value (a long: 0; a statistic: empty, see
/// `layout::stat`), numbers the insertion and makes it live.
fn publish(b: &mut FunctionBuilder, e: Value, t: &TableSpec, base: i64, idx: Value) {
    let zero = b.ins().iconst(I64, 0);
    let at = |w: u64| (t.value_at() + 8 * w) as i32;
    if t.stat {
        let lo = b.ins().iconst(I64, i64::MAX);
        let hi = b.ins().iconst(I64, i64::MIN);
        for w in 0..t.values {
            let v = match w {
                stat::MIN => lo,
                stat::MAX => hi,
                _ => zero,
            };
            b.ins().store(mem(), v, e, at(w));
        }
    } else {
        b.ins().store(mem(), zero, e, at(0));
    }
    let counter = b.ins().iconst(I64, base + t.order_counter() as i64);
    let one = b.ins().iconst(I64, 1);
    let n = b
        .ins()
        .atomic_rmw(I64, mem(), AtomicRmwOp::Add, counter, one);
    let at = b.ins().imul_imm_s(idx, 8);
    let at = b.ins().iadd_imm_s(at, base + t.order_offset as i64);
    b.ins().store(mem(), n, at, 0);
    let live = b.ins().iconst(I64, tag::LIVE as i64);
    b.ins().atomic_store(mem(), live, e);
}

/// One array operation: switch on the global, find the slot, act.
#[allow(clippy::too_many_arguments)]
fn array_op(
    b: &mut FunctionBuilder,
    header: i64,
    base: i64,
    name: &str,
    a: &[Value],
    finds: &[(u32, FuncId)],
    tables: &[TableSpec],
    fref: &mut dyn FnMut(&mut FunctionBuilder, FuncId) -> FuncRef,
) {
    let (ctx, gid) = (a[0], a[1]);
    let ret_value = matches!(name, "utap_arr_get" | "utap_arr_add" | "utap_arr_exists");
    let done = b.create_block();
    b.append_block_param(done, I64);
    let none = b.create_block();
    let mut switch = Switch::new();
    let mut cases = Vec::new();
    for (t, &(g, find_id)) in tables.iter().zip(finds) {
        let blk = b.create_block();
        switch.set_entry(g as u128, blk);
        cases.push((blk, *t, find_id));
    }
    switch.emit(b, gid, none);
    b.switch_to_block(none);
    let zero = b.ins().iconst(I64, 0);
    b.ins().jump(done, &[zero.into()]);
    let _ = base;
    for (blk, t, find_id) in cases {
        b.switch_to_block(blk);
        let insert = insert_op(name) as i64;
        let insert = b.ins().iconst(I64, insert);
        let f = fref(b, find_id);
        let call = b.ins().call(f, &[ctx, insert]);
        let e = b.inst_results(call)[0];
        let zero = b.ins().iconst(I64, 0);
        let missing = b.create_block();
        let contended = b.create_block();
        let have = b.create_block();
        let is_zero = b.ins().icmp_imm_s(IntCC::Equal, e, 0);
        let is_one = b.ins().icmp_imm_s(IntCC::Equal, e, 1);
        let not_zero = b.create_block();
        b.ins().brif(is_zero, missing, &[], not_zero, &[]);
        b.switch_to_block(not_zero);
        b.ins().brif(is_one, contended, &[], have, &[]);
        // Absent: reads give 0; an insertion found no room.
        b.switch_to_block(missing);
        if insert_op(name) {
            let kind = b.ins().iconst(I64, RAISE_ARRAY_FULL);
            raise(b, header, ctx, kind, Some(t.global as i64));
        }
        b.ins().jump(done, &[zero.into()]);
        // Contended: counted, the operation is dropped.
        b.switch_to_block(contended);
        count_contended(b, header);
        b.ins().jump(done, &[zero.into()]);
        b.switch_to_block(have);
        let value_off = (8 + 8 * t.arity) as i32;
        let value = b.ins().iadd_imm_s(e, value_off as i64);
        let r = match name {
            "utap_arr_get" => b.ins().atomic_load(I64, mem(), value),
            "utap_arr_set" => {
                b.ins().atomic_store(mem(), a[2], value);
                zero
            }
            "utap_arr_add" => {
                let old = b
                    .ins()
                    .atomic_rmw(I64, mem(), AtomicRmwOp::Add, value, a[2]);
                b.ins().iadd(old, a[2])
            }
            "utap_arr_max" => {
                b.ins()
                    .atomic_rmw(I64, mem(), AtomicRmwOp::Smax, value, a[2]);
                zero
            }
            "utap_arr_exists" => b.ins().iconst(I64, 1),
            _ => {
                // delete: live → deleted, one fewer entry.
                let live = b.ins().iconst(I64, tag::LIVE as i64);
                let deleted = b.ins().iconst(I64, tag::DELETED as i64);
                let old = b.ins().atomic_cas(mem(), e, live, deleted);
                let was = b.ins().icmp_imm_s(IntCC::Equal, old, tag::LIVE as i64);
                let dec = b.create_block();
                b.ins().brif(was, dec, &[], done, &[zero.into()]);
                b.switch_to_block(dec);
                let count = b.ins().iconst(I64, base + t.count_offset as i64);
                let minus = b.ins().iconst(I64, -1);
                b.ins()
                    .atomic_rmw(I64, mem(), AtomicRmwOp::Add, count, minus);
                zero
            }
        };
        b.ins().jump(done, &[r.into()]);
    }
    b.switch_to_block(done);
    let r = b.block_params(done)[0];
    if ret_value {
        b.ins().return_(&[r]);
    } else {
        b.ins().return_(&[]);
    }
}

fn insert_op(name: &str) -> bool {
    matches!(name, "utap_arr_set" | "utap_arr_add" | "utap_arr_max")
}
