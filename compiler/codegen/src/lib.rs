//! Cranelift code generation: one native function per probe handler and per
//! script function, calling into the runtime through registered symbols.
//! Handlers that differ only in constants share one function (`sharing`).
//!
//! [`compile`] turns a checked [`Program`] into a [`CompiledScript`]: the
//! JIT module that owns the machine code, plus the runtime image
//! (globals, probes with their handler pointers, literals, formats,
//! locations) that `utap_runtime::script::ScriptRuntime` runs. There is no
//! interpreter: every handler is native code.

pub mod inproc;
mod layout;
pub mod locations;
mod presets;
mod runtime_fns;
mod sharing;
mod size;
pub(crate) mod tables;
mod translate;

use std::sync::Arc;

use cranelift_codegen::Context;
use cranelift_codegen::ir::{AbiParam, Function, Inst, Signature, UserExternalNameRef, types};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module, default_libcall_names};

use utap_compiler::ast::Span;
use utap_compiler::program::{PointKind, ProbeDef, Program};
use utap_runtime::script::Limits;
use utap_runtime::script::global_locks::GlobalLock;
use utap_runtime::script::image::{HandlerFn, PointSpec, ProbeSpec, ScriptImage, Trigger};

pub use locations::{SourceList, Sources};

/// A construct the code generator cannot compile, with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodegenError {
    pub span: Span,
    pub message: String,
}

impl CodegenError {
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        CodegenError {
            span,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodegenError {}

/// What to compile for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The limits the script will run under (MAXSTRINGLEN bounds literals).
    pub limits: Limits,
    /// Keep the Cranelift IR text of every function (`-p3`).
    pub keep_ir: bool,
}

/// Size of one compiled function (`-p4`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionSize {
    pub name: String,
    pub bytes: usize,
    /// How many probes run this function (handlers that differ only in
    /// constants share one; 1 for a script function).
    pub shared_by: usize,
}

/// Native code plus the runtime image that runs it.
pub struct CompiledScript {
    pub image: Arc<ScriptImage>,
    /// The Cranelift IR, when [`Options::keep_ir`] was set.
    pub ir: String,
    pub sizes: Vec<FunctionSize>,
    /// Owns the machine code the image's handlers point into.
    _module: JITModule,
}

/// The last probe translated, which the next ones may differ from only in
/// their presets (`presets`).
struct Model {
    probe: usize,
    /// Its group and place among the members (`sharing::Grouper::add`).
    at: (usize, usize),
    /// Positions of the constants of each of its top-level presets among
    /// its `iconst.i64`s: location, literal.
    positions: Vec<(usize, usize)>,
}

/// Whether probe `b` translates to exactly the IR of probe `a` (the
/// expansions of a wildcard whose alias bodies were elided have the same
/// body, spans included): then `b` need not be translated. The IR does
/// not depend on the locals a body no longer uses (see `Translator::new`).
fn same_translation(a: &ProbeDef, b: &ProbeDef) -> bool {
    a.points.len() == b.points.len()
        && a.points
            .iter()
            .zip(&b.points)
            .all(|(x, y)| x.condition == y.condition)
        && a.body == b.body
}

/// Defines the read-only table of per-probe constants of shared handlers.
fn define_param_table(
    module: &mut JITModule,
    params: &sharing::ParamTable,
) -> Result<DataId, CodegenError> {
    let err = |e: cranelift_module::ModuleError| {
        CodegenError::new(Span::default(), format!("native code generator: {e}"))
    };
    let id = module
        .declare_data("utap_probe_params", Linkage::Local, false, false)
        .map_err(err)?;
    let mut desc = DataDescription::new();
    desc.define(params.bytes());
    desc.set_align(8);
    module.define_data(id, &desc).map_err(err)?;
    Ok(id)
}

/// `-p3`: which probes a shared handler serves, and the values its
/// parameter loads read for each.
fn sharing_note(program: &Program, group: &sharing::Group, rows: &[Vec<i64>]) -> String {
    if group.members.len() == 1 {
        return String::new();
    }
    let mut out = format!("; {} probes share the next function", group.members.len());
    out.push_str(if rows.is_empty() {
        ":\n"
    } else {
        " (the values of its utap_probe_params loads follow each probe):\n"
    });
    for (k, (probe, _)) in group.members.iter().enumerate() {
        let p = &program.probes[*probe];
        let points: Vec<String> = p
            .points
            .iter()
            .map(utap_compiler::check::dump::point)
            .collect();
        out.push_str(&format!(";   probe {probe} {}", points.join(", ")));
        if let Some(row) = rows.get(k) {
            let values: Vec<String> = row.iter().map(i64::to_string).collect();
            out.push_str(&format!(": {}", values.join(", ")));
        }
        out.push('\n');
    }
    out
}

/// A JIT module for the tracer's handlers, or (`inproc`) one that places
/// code and data in the shared region and resolves only the in-process
/// runtime's symbols.
fn new_module(inproc: Option<inproc::Placement>) -> Result<JITModule, CodegenError> {
    let err = |e: String| CodegenError::new(Span::default(), format!("native code generator: {e}"));
    let mut flags = settings::builder();
    // No egraph optimisation: a `syscall.*` script compiles hundreds of
    // tiny handlers, and "speed" made compiling examples/syscalltop.stp
    // 0.12–0.17 s instead of 0.08–0.09 s while the 3M-iteration handler
    // benchmark moved only from 0.10–0.14 s to 0.13–0.15 s (runtime calls
    // dominate handler time).
    // In-process code runs at every hit in the program, and is a few
    // functions at most (handlers shared by preset): optimized.
    let optimize = inproc.is_some() && std::env::var_os("UTAP_INPROC_OPT").is_some();
    flags
        .set("opt_level", if optimize { "speed" } else { "none" })
        .map_err(|e| err(e.to_string()))?;
    flags
        .set("is_pic", "false")
        .map_err(|e| err(e.to_string()))?;
    // Register allocation was the largest part of compiling a `syscall.*`
    // script (≈40% of `-p4` of examples/syscalltop.stp with the
    // backtracking allocator); handlers are short and call the runtime
    // often, so the single-pass allocator's extra moves cost little.
    flags
        .set(
            "regalloc_algorithm",
            if optimize {
                "backtracking"
            } else {
                "single_pass"
            },
        )
        .map_err(|e| err(e.to_string()))?;
    // The IR verifier costs a pass over every function of every compile
    // (a `syscall.*` script has hundreds): debug builds keep it.
    flags
        .set(
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        )
        .map_err(|e| err(e.to_string()))?;
    let isa = cranelift_native::builder()
        .map_err(|e| err(e.to_string()))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| err(e.to_string()))?;
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    match inproc {
        None => runtime_fns::register_symbols(&mut jb),
        Some(p) => p.configure(&mut jb),
    }
    Ok(JITModule::new(jb))
}

fn trigger(kind: &PointKind) -> Trigger {
    match kind {
        PointKind::Begin(n) => Trigger::Begin(*n),
        PointKind::End(n) => Trigger::End(*n),
        PointKind::Error(n) => Trigger::Error(*n),
        PointKind::Never => Trigger::Never,
        PointKind::Prometheus => Trigger::Prometheus,
        PointKind::Timer {
            period_ns,
            randomize_ns,
        } => Trigger::Timer {
            period_ns: *period_ns,
            randomize_ns: *randomize_ns,
        },
        PointKind::Process { .. } => Trigger::Process,
    }
}

/// Compiles every function and probe handler of `program` to native code.
pub fn compile(
    program: &Program,
    sources: &dyn Sources,
    options: &Options,
) -> Result<CompiledScript, CodegenError> {
    let maxstringlen = options.limits.max_string_len;
    let (globals, long_slots) = layout::globals(program, maxstringlen)?;
    let mut c = Compiler::new(new_module(None)?, sources, globals, options, false);
    // Script functions first: handlers call them by id.
    let funcs = c.functions(program)?;
    let handlers = c.handlers(program, &funcs)?;
    c.module
        .finalize_definitions()
        .map_err(|e| CodegenError::new(Span::default(), format!("native code generator: {e}")))?;
    let lock_sets = utap_compiler::locks::probe_locks(program);
    let probes = program
        .probes
        .iter()
        .zip(&handlers)
        .zip(lock_sets)
        .map(|((p, &id), locks)| {
            let ptr = c.module.get_finalized_function(id);
            // SAFETY: the function was compiled with the handler signature
            // (one pointer argument, no result) and lives as long as
            // `module`, which the CompiledScript keeps.
            let handler: HandlerFn = unsafe { std::mem::transmute::<*const u8, HandlerFn>(ptr) };
            ProbeSpec {
                points: p
                    .points
                    .iter()
                    .map(|pt| PointSpec {
                        trigger: trigger(&pt.kind),
                        text: pt.text.clone(),
                        name: pt.head.clone(),
                    })
                    .collect(),
                handler,
                locks: locks
                    .iter()
                    .map(|l| GlobalLock {
                        global: l.global.0,
                        write: l.write,
                    })
                    .collect(),
            }
        })
        .collect();
    let image = ScriptImage {
        globals: c.tables.globals,
        probes,
        literals: c.tables.literals,
        formats: c.tables.formats,
        regexes: c.tables.regexes,
        locations: c.tables.locations.table,
        long_slots,
        autoprint_order: layout::autoprint_order(program),
        entry_missing: program
            .entry_missing
            .iter()
            .map(|(g, what)| (g.0 as usize, what.clone()))
            .collect(),
    };
    Ok(CompiledScript {
        image: Arc::new(image),
        ir: c.ir,
        sizes: c.sizes,
        _module: c.module,
    })
}

/// The state of one compilation.
struct Compiler<'a> {
    module: JITModule,
    ctx: Context,
    fctx: FunctionBuilderContext,
    rt: runtime_fns::RuntimeFns,
    tables: tables::Tables<'a>,
    options: &'a Options,
    /// `-p3` text so far.
    ir: String,
    sizes: Vec<FunctionSize>,
    /// Compiling for the program's threads (`inproc`).
    in_process: bool,
}

impl<'a> Compiler<'a> {
    /// A compilation into `module` of a program with `globals`, for the
    /// tracer or (`in_process`) for the program's threads.
    fn new(
        module: JITModule,
        sources: &'a dyn Sources,
        globals: Vec<utap_runtime::script::image::GlobalSpec>,
        options: &'a Options,
        in_process: bool,
    ) -> Compiler<'a> {
        Compiler {
            ctx: module.make_context(),
            module,
            rt: runtime_fns::RuntimeFns::default(),
            tables: tables::Tables::new(sources, globals, options.limits.max_string_len),
            fctx: FunctionBuilderContext::new(),
            options,
            ir: String::new(),
            sizes: Vec::new(),
            in_process,
        }
    }

    /// Declares and defines the script functions; their ids by index.
    fn functions(&mut self, program: &Program) -> Result<Vec<FuncId>, CodegenError> {
        let mut funcs: Vec<FuncId> = Vec::with_capacity(program.functions.len());
        for (i, f) in program.functions.iter().enumerate() {
            let mut sig = self.module.make_signature();
            for _ in 0..=f.params {
                sig.params.push(AbiParam::new(types::I64));
            }
            sig.returns.push(AbiParam::new(types::I64));
            let id = self
                .module
                .declare_function(&format!("utap_fn{i}_{}", f.name), Linkage::Local, &sig)
                .map_err(|e| CodegenError::new(f.span, e.to_string()))?;
            funcs.push(id);
        }
        for (i, f) in program.functions.iter().enumerate() {
            self.ctx.func.signature = self
                .module
                .declarations()
                .get_function_decl(funcs[i])
                .signature
                .clone();
            let b = cranelift_frontend::FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            let t = translate::Translator::new(
                b,
                &mut self.module,
                &mut self.rt,
                &funcs,
                &mut self.tables,
                translate::Kind::Function,
                &f.locals,
                f.params,
            );
            let mut t = t;
            t.in_process = self.in_process;
            t.finish_body(&f.body, &[])?;
            self.define(funcs[i], &format!("function {}", f.name), 1)?;
        }
        Ok(funcs)
    }

    /// Translates every probe handler, groups them (see `sharing`) and
    /// defines one function per group; the function of each probe.
    fn handlers(
        &mut self,
        program: &Program,
        funcs: &[FuncId],
    ) -> Result<Vec<FuncId>, CodegenError> {
        let mut sig = self.module.make_signature();
        sig.params.push(AbiParam::new(types::I64));
        let groups = self.translate_handlers(program, funcs, &sig)?;
        let params = sharing::ParamTable::new(&groups, program.probes.len());
        let table = if params.is_empty() {
            None
        } else {
            Some(define_param_table(&mut self.module, &params)?)
        };
        let mut ids: Vec<FuncId> = Vec::with_capacity(program.probes.len());
        let mut of_probe = vec![0; program.probes.len()];
        for (k, g) in groups.iter().enumerate() {
            let first = g.members[0].0;
            let module = &self.module;
            let (func, rows) = sharing::instantiate(g, |func| {
                module.declare_data_in_func(table.expect("some constant varies"), func)
            });
            let id = self
                .module
                .declare_function(&format!("utap_probe{first}"), Linkage::Local, &sig)
                .map_err(|e| CodegenError::new(program.probes[first].span, e.to_string()))?;
            self.ctx.func = func;
            if self.options.keep_ir {
                self.ir.push_str(&sharing_note(program, g, &rows));
            }
            let what = format!("probe {}", program.probes[first].name);
            self.define(id, &what, g.members.len())?;
            ids.push(id);
            for (probe, _) in &g.members {
                of_probe[*probe] = k;
            }
        }
        Ok(of_probe.into_iter().map(|k| ids[k]).collect())
    }

    /// The probe handlers' IR, grouped. A probe whose handler is the
    /// previous one's, or the last translated one's but for its presets
    /// (`presets`), is not translated.
    fn translate_handlers(
        &mut self,
        program: &Program,
        funcs: &[FuncId],
        sig: &Signature,
    ) -> Result<Vec<sharing::Group>, CodegenError> {
        let check = std::env::var_os("UTAP_CHECK_PRESETS").is_some_and(|v| v == "1");
        let mut grouper = sharing::Grouper::default();
        let mut func = Function::new();
        let mut model: Option<Model> = None;
        for (i, p) in program.probes.iter().enumerate() {
            if i > 0 && same_translation(&program.probes[i - 1], p) && grouper.repeat_last(i) {
                continue;
            }
            if let Some(m) = &model
                && presets::same_but_presets(&program.probes[m.probe], p)
            {
                let changes = presets::changes(&m.positions, p, &mut self.tables);
                if check {
                    self.check_presets(p, funcs, sig, &mut func, &mut grouper, m.at, &changes)?;
                }
                grouper.add_like(i, m.at, &changes);
                continue;
            }
            let made = self.translate_probe(p, funcs, sig, &mut func)?;
            let positions = presets::positions(p, &func, &made);
            let at = grouper.add(i, &mut func);
            model = positions.map(|positions| Model {
                probe: i,
                at,
                positions,
            });
        }
        Ok(grouper.finish())
    }

    /// Translates `p`'s handler into `func`; the constants its top-level
    /// presets made.
    fn translate_probe(
        &mut self,
        p: &ProbeDef,
        funcs: &[FuncId],
        sig: &Signature,
        func: &mut Function,
    ) -> Result<Vec<(Inst, Inst)>, CodegenError> {
        func.clear();
        func.signature = sig.clone();
        let b = cranelift_frontend::FunctionBuilder::new(func, &mut self.fctx);
        let t = translate::Translator::new(
            b,
            &mut self.module,
            &mut self.rt,
            funcs,
            &mut self.tables,
            translate::Kind::Probe,
            &p.locals,
            0,
        );
        let mut t = t;
        t.in_process = self.in_process;
        let conds: Vec<Option<&utap_compiler::program::Expr>> =
            p.points.iter().map(|pt| pt.condition.as_ref()).collect();
        t.finish_body(&p.body, &conds)
    }

    /// `UTAP_CHECK_PRESETS=1`: translates a probe that joins a group by its
    /// presets anyway, and fails unless its IR and constants are those the
    /// group's member at `like`, changed, predicts.
    #[allow(clippy::too_many_arguments)]
    fn check_presets(
        &mut self,
        p: &ProbeDef,
        funcs: &[FuncId],
        sig: &Signature,
        func: &mut Function,
        grouper: &mut sharing::Grouper,
        like: (usize, usize),
        changes: &[(usize, i64)],
    ) -> Result<(), CodegenError> {
        self.translate_probe(p, funcs, sig, func)?;
        let values = grouper.blanked(func);
        let (shape, model) = grouper.member(like);
        let mut predicted = model.to_vec();
        for &(at, v) in changes {
            predicted[at] = v;
        }
        if shape != &*func || predicted != values {
            return Err(CodegenError::new(
                p.span,
                format!(
                    "internal: the handler of {} is not the one its presets predict",
                    p.name
                ),
            ));
        }
        Ok(())
    }

    /// Compiles the function in `ctx` as `id`, keeping its IR for `-p3`
    /// and its size for `-p4`.
    fn define(&mut self, id: FuncId, what: &str, shared_by: usize) -> Result<(), CodegenError> {
        if self.options.keep_ir {
            let text = self.ctx.func.display().to_string();
            let named = name_callees(&self.module, &self.ctx.func, &text);
            self.ir.push_str(&format!("; {what}\n{named}\n"));
        }
        self.module
            .define_function(id, &mut self.ctx)
            .map_err(|e| {
                CodegenError::new(
                    Span::default(),
                    format!("native code generator: {e:?} in {what}"),
                )
            })?;
        let bytes = self
            .ctx
            .compiled_code()
            .map_or(0, |c| c.code_buffer().len());
        self.sizes.push(FunctionSize {
            name: what.to_string(),
            bytes,
            shared_by,
        });
        self.module.clear_context(&mut self.ctx);
        Ok(())
    }
}

/// Appends the symbol name to each `fnN = u0:K` declaration of the IR
/// text, so `-p3` shows which runtime function or script function a call
/// goes to, and to each `gvN = symbol ... userextnameK` the data object it
/// addresses.
fn name_callees(module: &JITModule, func: &Function, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        out.push_str(line);
        let t = line.trim_start();
        let name = if t.starts_with("fn") {
            number_after(line, " u0:").and_then(|index| function_name(module, index))
        } else if t.starts_with("gv") {
            number_after(line, " userextname").and_then(|k| data_name(module, func, k))
        } else {
            None
        };
        if let Some(name) = name {
            out.push_str(&format!("  ; {name}"));
        }
        out.push('\n');
    }
    out
}

/// The number that follows `marker` in `line`.
fn number_after(line: &str, marker: &str) -> Option<u32> {
    let (_, rest) = line.split_once(marker)?;
    let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

fn function_name(module: &JITModule, index: u32) -> Option<String> {
    let id = FuncId::from_u32(index);
    let (_, decl) = module
        .declarations()
        .get_functions()
        .find(|(f, _)| *f == id)?;
    decl.name.clone()
}

/// The data object external name `k` of `func` refers to.
fn data_name(module: &JITModule, func: &Function, k: u32) -> Option<String> {
    let name = func
        .params
        .user_named_funcs()
        .get(UserExternalNameRef::from_u32(k))?;
    // cranelift-module numbers data objects in namespace 1.
    (name.namespace == 1)
        .then(|| {
            module
                .declarations()
                .get_data_decl(DataId::from_u32(name.index))
        })
        .and_then(|decl| decl.name.clone())
}
