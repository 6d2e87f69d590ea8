//! The checker: tapsets, probe aliases, probe-point resolution, name
//! resolution and type inference, turning an [`crate::ast::Script`] into a
//! [`crate::program::Program`].
//!
//! Entry point: [`check`]. Order of work (N.B. each step needs the one
//! before):
//! 1. index the tapset library (`tapsets`), nothing parsed yet;
//! 2. for each probe (the script's, then those of used tapsets): load the
//!    tapsets defining aliases it names, resolve its points (`alias`,
//!    `catalogue`), lower its conditions and body (`lower`), which loads
//!    tapsets for unknown functions and globals and queues functions;
//! 3. lower queued functions until no new tapset or function appears;
//! 4. solve types (`retype`), apply whole-program rules (`rules`), move
//!    `$syscall == N` guards into syscall sets (`syscalls`), elide dead
//!    alias variables (`elide`).

pub mod alias;
pub mod catalogue;
pub mod dump;
pub mod dwarf;
pub mod dwarf_entry;
pub mod elide;
pub mod entry;
pub mod error;
pub mod functions;
pub mod listing;
pub mod lower;
pub mod marks;
pub mod overload;
pub mod point;
pub mod reference;
pub mod retype;
pub mod rules;
pub mod synonyms;
pub mod syscalls;
pub mod tapsets;
pub mod types;
mod unread;
mod unset;

use rustc_hash::FxHashMap as HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use crate::ast::{self, FileId, Span};
use crate::diag::Diagnostic;
use crate::parser::{NodeIds, ParseOptions, parse_file};
use crate::program::*;
use crate::source::SourceMap;
use alias::{AliasDef, Resolved, Resolver};
use error::SemError;
use lower::{Body, FuncDecl, GlobalDecl, Lowerer, Symbols, TapsetLoader};
use tapsets::Library;
use types::Ty;

/// How to check a script.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// `-g`: allow control actions and writes to context variables.
    pub guru: bool,
    /// `-v` count: at 1 and above, elision warnings are reported.
    pub verbose: u32,
    /// `-I DIR`: extra tapset directories, searched after the stdlib.
    pub tapset_dirs: Vec<PathBuf>,
    /// Leave out the built-in stdlib (tests).
    pub no_stdlib: bool,
    /// One probe definition per resolved point, never shared (`-L` needs
    /// the locals of each alias expansion).
    pub separate_points: bool,
    /// The script's arguments: tapsets see `$#`, `@1`... too (argv.stp).
    pub args: Vec<String>,
    /// `--skip-badvars`: unresolvable context variables read as 0.
    pub skip_badvars: bool,
    /// The program of `-c CMD` (its first word through `$PATH`) or of
    /// `-x PID`: where `process.function("NAME")` (no path) finds the
    /// DWARF of its target variables.
    pub target_exe: Option<String>,
}

/// A checked script.
#[derive(Debug)]
pub struct CheckOutput {
    pub program: Program,
    /// Warnings (shown by the driver; SystemTap shows them under -v).
    pub warnings: Vec<Diagnostic>,
}

/// Resolves and type-checks a parsed script. Tapset files that are used are
/// parsed into `map` (so diagnostics can show them) with node ids from `ids`.
pub fn check(
    map: &mut SourceMap,
    script: ast::Script,
    opts: &CheckOptions,
    ids: &mut NodeIds,
) -> Result<CheckOutput, Vec<Diagnostic>> {
    let lib = Library::new(!opts.no_stdlib, &opts.tapset_dirs)
        .map_err(|e| vec![Diagnostic::semantic_error(e)])?;
    check_with_library(map, script, opts, ids, lib).map(|(out, _)| out)
}

/// [`check`] with a given tapset library; also returns, for each probe
/// definition, the name its user-level point matched (`-l`).
pub fn check_with_library(
    map: &mut SourceMap,
    script: ast::Script,
    opts: &CheckOptions,
    ids: &mut NodeIds,
    lib: Library,
) -> Result<(CheckOutput, Vec<String>), Vec<Diagnostic>> {
    let mut script = script;
    dwarf::set_target_exe(opts.target_exe.clone());
    let mut entry_notes = Vec::new();
    let mut entry_missing = Vec::new();
    let mut entry_errors =
        entry::split(&mut script, map, ids, &mut entry_notes, &mut entry_missing);
    entry_errors.extend(dwarf_entry::record(&mut script, map, ids));
    entry_errors.extend(overload::resolve(&mut script, map, ids));
    let mut loader = Loader {
        parse: ParseOptions {
            tapset: true,
            args: opts.args.clone(),
            guru: opts.guru,
            ..Default::default()
        },
        first_id: vec![None; lib.files.len()],
        canon: HashMap::default(),
        lib,
        map,
        ids,
        new_aliases: Vec::new(),
        new_probes: Vec::new(),
        errors: Vec::new(),
    };
    let mut syms = Symbols::default();
    let mut errors = Vec::new();
    let mut aliases = Vec::new();
    let mut probes = Vec::new();
    let user_file = script.file;
    add_items(
        script,
        user_file,
        &mut syms,
        &mut aliases,
        &mut probes,
        &mut errors,
    );
    let mut session = Session {
        aliases,
        by_first: HashMap::default(),
        indexed: 0,
        patterns_loaded: Default::default(),
        targets_queued: 0,
        probes_out: Vec::new(),
        probe_local_tvs: Vec::new(),
        warnings: Vec::new(),
        verbose: opts.verbose,
        separate: opts.separate_points,
        heads: Vec::new(),
        through_alias: Vec::new(),
        user_file,
    };
    if opts.verbose > 0 {
        session
            .warnings
            .extend(entry_notes.into_iter().map(|n| n.into_warning()));
    }
    errors.extend(entry_errors);
    let mut low = Lowerer::new(syms, &mut loader, opts.guru, user_file);
    low.skip_badvars = opts.skip_badvars;
    low.errors.extend(errors);
    let mut queue: std::collections::VecDeque<Rc<ast::Probe>> = probes.into();
    loop {
        if let Some(p) = queue.pop_front() {
            session.probe(&mut low, &p);
        } else if !low.func_queue.is_empty() {
            low.lower_queued_functions();
        } else {
            break;
        }
        // Tapsets loaded on the way bring their aliases and probes.
        let (new_aliases, new_probes) = low.take_loaded();
        session.aliases.extend(new_aliases);
        queue.extend(new_probes);
    }
    let (mut out, names) = finish(low, session)?;
    let program = &mut out.program;
    program.entry_missing = entry_missing
        .into_iter()
        .filter_map(|(name, what)| Some((program.global_id(&name)?, what)))
        .collect();
    // Only written by the script (not printed at exit): read by `-v`.
    for (g, _) in &program.entry_missing {
        program.globals[g.0 as usize].autoprint = false;
    }
    Ok((out, names))
}

fn finish(
    mut low: Lowerer,
    mut session: Session,
) -> Result<(CheckOutput, Vec<String>), Vec<Diagnostic>> {
    if session.probes_out.is_empty() && low.errors.is_empty() {
        low.errors
            .push(SemError::new(Span::default(), "no probes found"));
    }
    retype::solve_globals_and_functions(&mut low);
    for (p, (tvs, spans)) in session.probes_out.iter_mut().zip(&session.probe_local_tvs) {
        retype::solve_locals(&mut low, &mut p.locals, tvs, spans);
    }
    let mut loader_errors = low.loader_errors();
    let autoprintable: Vec<bool> = (0..low.globals.len())
        .map(|i| low.autoprintable(GlobalId(i as u32)))
        .collect();
    let mut program = Program {
        globals: std::mem::take(&mut low.globals),
        functions: low.functions.drain(..).flatten().collect(),
        probes: std::mem::take(&mut session.probes_out),
        guru: low.guru,
        entry_missing: Vec::new(),
    };
    let mut errors = std::mem::take(&mut low.errors);
    errors.extend(rules::apply(&mut program));
    for (g, ok) in program.globals.iter_mut().zip(autoprintable) {
        g.autoprint &= ok;
    }
    if !errors.is_empty() || !loader_errors.is_empty() {
        errors.sort_by_key(|e| (e.span.file, e.span.start));
        errors.dedup();
        loader_errors.extend(errors.into_iter().map(SemError::into_diagnostic));
        return Err(loader_errors);
    }
    let returns: Vec<Type> = program.functions.iter().map(|f| f.ret).collect();
    let env = retype::Env {
        globals: &program.globals,
        returns: &returns,
        errors: Default::default(),
    };
    let mut functions = std::mem::take(&mut program.functions);
    for f in &mut functions {
        env.block(&mut f.body, &f.locals);
    }
    let pure_fns = elide::pure_functions(&functions);
    let mut probes = std::mem::take(&mut program.probes);
    for f in &functions {
        warn_never_assigned(&mut session, &f.body, &f.locals, f.params, &[]);
    }
    let local_info = std::mem::take(&mut session.probe_local_tvs);
    let mut unset = unset::UnsetReads::default();
    for (i, (p, (_, spans))) in probes.iter_mut().zip(&local_info).enumerate() {
        env.block(&mut p.body, &p.locals);
        for pt in &mut p.points {
            if let Some(c) = &mut pt.condition {
                env.expr(c, &p.locals);
            }
        }
        unset.add_probe(
            p,
            spans,
            session.user_file,
            &session.heads[i],
            session.through_alias[i],
        );
        let elided = elide::dead_locals(&mut p.body, &pure_fns);
        if session.verbose > 0 {
            for l in elided {
                let span = spans[l.0 as usize];
                if span.file == session.user_file {
                    let name = &p.locals[l.0 as usize].name;
                    session.warnings.push(
                        SemError::new(span, format!("Eliding unused variable '{name}'"))
                            .into_warning(),
                    );
                }
            }
            if p.span.file == session.user_file && elide::block_pure(&p.body, &pure_fns) {
                session.warnings.push(
                    SemError::new(p.span, format!("side-effect-free probe '{}'", p.name))
                        .label("this handler changes nothing and prints nothing")
                        .into_warning(),
                );
            }
        }
    }
    if session.verbose > 0 {
        let mut unused: Vec<(Span, String)> = low
            .syms
            .functions
            .values()
            .flatten()
            .filter(|d| d.file == session.user_file && d.id.is_none())
            .map(|d| (d.ast.name.span, d.ast.name.name.clone()))
            .collect();
        unused.sort_by_key(|(s, _)| s.start);
        let mut globals: Vec<(Span, String)> = low
            .syms
            .globals
            .values()
            .flatten()
            .filter(|d| d.file == session.user_file && d.id.is_none())
            .map(|d| (d.ast.name.span, d.ast.name.name.clone()))
            .collect();
        globals.sort_by_key(|(s, _)| s.start);
        for (span, name) in globals {
            session.warnings.push(
                SemError::new(span, format!("Eliding unused variable '{name}'")).into_warning(),
            );
        }
        for (span, name) in unused {
            session.warnings.push(
                SemError::new(span, format!("Eliding unused function '{name}'")).into_warning(),
            );
        }
    }
    let (missing, warnings) = unset.finish();
    session.warnings.extend(warnings);
    let mut misuse = env.errors.take();
    misuse.extend(missing);
    if !misuse.is_empty() {
        return Err(misuse.into_iter().map(SemError::into_diagnostic).collect());
    }
    program.functions = functions;
    program.probes = probes;
    elide::prune_functions(&mut program);
    Ok((
        CheckOutput {
            program,
            warnings: session.warnings,
        },
        session.heads,
    ))
}

/// "never-assigned local variable 'x' (similar: y)" for the user's code:
/// almost always a misspelt name, which would silently read 0 or "".
fn warn_never_assigned(
    session: &mut Session,
    body: &Block,
    locals: &[LocalVar],
    params: usize,
    spans: &[Span],
) {
    for (l, span) in rules::never_assigned(body, locals, params) {
        let decl = spans.get(l.0 as usize).copied().unwrap_or(span);
        if decl.file != session.user_file {
            continue;
        }
        session.warnings.push(never_assigned_warning(
            locals,
            &locals[l.0 as usize].name,
            span,
        ));
    }
}

/// The warning for a read of `name`, which nothing assigns.
fn never_assigned_warning(locals: &[LocalVar], name: &str, span: Span) -> Diagnostic {
    let similar = locals
        .iter()
        .filter(|o| o.name != name)
        .map(|o| (strsim::levenshtein(&o.name, name), o.name.as_str()))
        .filter(|(d, o)| {
            let longest = o.len().max(name.len());
            longest >= 3 && *d <= longest / 2
        })
        .min();
    let mut message = format!("never-assigned local variable '{name}'");
    if let Some((_, s)) = similar {
        message.push_str(&format!(" (similar: {s})"));
    }
    SemError::new(span, message)
        .label("read here, never given a value")
        .into_warning()
}

/// Sorts a parsed file's items into the symbol tables.
fn add_items(
    script: ast::Script,
    file: FileId,
    syms: &mut Symbols,
    aliases: &mut Vec<AliasDef>,
    probes: &mut Vec<Rc<ast::Probe>>,
    errors: &mut Vec<SemError>,
) {
    for item in script.items {
        match item {
            ast::Item::Probe(p) => probes.push(Rc::new(p)),
            ast::Item::Alias(a) => {
                for n in &a.names {
                    if n.components.iter().any(|c| c.name.contains('*')) {
                        errors.push(
                            SemError::new(n.span, "wildcard not allowed in alias name")
                                .label("an alias defines concrete probe points"),
                        );
                    }
                }
                let names = a
                    .names
                    .iter()
                    .map(|n| n.components.iter().map(|c| c.name.clone()).collect())
                    .collect();
                aliases.push(AliasDef {
                    names,
                    ast: Rc::new(a),
                    file,
                });
            }
            ast::Item::Global(g) => {
                let list = syms.globals.entry(g.name.name.clone()).or_default();
                if let Some(prev) = list.iter().find(|d| d.file == file) {
                    errors.push(
                        SemError::new(
                            g.name.span,
                            format!("duplicate global variable '{}'", g.name.name),
                        )
                        .also(prev.ast.name.span, "first declared here"),
                    );
                    continue;
                }
                list.push(GlobalDecl {
                    ast: g,
                    file,
                    id: None,
                });
            }
            ast::Item::Function(f) => {
                let list = syms.functions.entry(f.name.name.clone()).or_default();
                if let Some(prev) = list.iter().find(|d| d.file == file) {
                    errors.push(
                        SemError::new(
                            f.name.span,
                            format!("duplicate function definition '{}'", f.name.name),
                        )
                        .also(prev.ast.name.span, "first defined here"),
                    );
                    continue;
                }
                list.push(FuncDecl {
                    ast: Rc::new(f),
                    file,
                    id: None,
                });
            }
            ast::Item::Embedded(e) => errors.push(lower::embedded_error(e.span)),
        }
    }
}

/// Parses the items of tapsets the script uses, on demand.
struct Loader<'m> {
    /// How tapsets are parsed (with the script's arguments and -g).
    parse: ParseOptions,
    lib: Library,
    map: &'m mut SourceMap,
    ids: &'m mut NodeIds,
    new_aliases: Vec<AliasDef>,
    new_probes: Vec<Rc<ast::Probe>>,
    errors: Vec<Diagnostic>,
    /// The id of each library file's first parse: every later partial
    /// parse of the file counts as the same file (for `private`).
    first_id: Vec<Option<FileId>>,
    canon: HashMap<FileId, FileId>,
}

impl Loader<'_> {
    /// Parses the given items (those not parsed yet) and adds them.
    fn load(&mut self, syms: &mut Symbols, items: &[tapsets::ItemRef]) -> bool {
        let mut files: Vec<usize> = items.iter().map(|(f, _)| *f).collect();
        files.sort_unstable();
        files.dedup();
        let mut any = false;
        for file in files {
            let wanted: Vec<usize> = items
                .iter()
                .filter(|(f, _)| *f == file)
                .map(|(_, i)| *i)
                .collect();
            let Some(taken) = self.lib.take(file, &wanted) else {
                continue;
            };
            let parsed = match taken {
                tapsets::Taken::Items(items) if items.len() >= PARALLEL_ITEMS => {
                    self.parse_halves(file, &items)
                }
                tapsets::Taken::Items(items) => {
                    let text = self.lib.items_text(file, &items);
                    self.parse_text(file, text)
                }
                tapsets::Taken::Whole => {
                    let text = self.lib.files[file].text.to_string();
                    self.parse_text(file, text)
                }
            };
            match parsed {
                Ok(scripts) => {
                    for (script, canon) in scripts {
                        self.add_loaded(script, canon, syms);
                    }
                    any = true;
                }
                Err(diags) => self.errors.extend(diags),
            }
        }
        any
    }

    /// Adds a text of library file `file` to the map (as the same file as
    /// its first parse); its id and the id it counts as.
    fn add_text(&mut self, file: usize, text: String) -> (FileId, FileId) {
        let id = self.map.add(self.lib.files[file].name.clone(), text);
        let canon = *self.first_id[file].get_or_insert(id);
        self.canon.insert(id, canon);
        (id, canon)
    }

    /// Parses one text of library file `file`.
    fn parse_text(&mut self, file: usize, text: String) -> Parsed {
        let (id, canon) = self.add_text(file, text);
        parse_file(self.map, id, &self.parse, self.ids).map(|s| vec![(s, canon)])
    }

    /// Parses many items of `file` as two texts on two threads (half the
    /// parse time when a CPU is free: `syscall.*` needs 400 aliases). The
    /// halves are cut in file order, so their items are added in the order
    /// of one parse. A half that does not parse gives way to one parse of
    /// them all: the diagnostics are those of one text.
    fn parse_halves(&mut self, file: usize, items: &[usize]) -> Parsed {
        let (first, second) = items.split_at(items.len() / 2);
        let (a, canon) = self.add_text(file, self.lib.items_text(file, first));
        let (b, _) = self.add_text(file, self.lib.items_text(file, second));
        let map: &SourceMap = self.map;
        let opts = &self.parse;
        // Ids of the second half start past any the first half can use
        // (fewer expressions than bytes).
        let room = u32::try_from(map.text(a).len()).unwrap_or(u32::MAX / 2);
        let mut second_ids = self.ids.split_off(room);
        let ids = &mut *self.ids;
        let (ra, rb) = crate::beside::beside(
            "utap-parse",
            || parse_file(map, a, opts, ids),
            || parse_file(map, b, opts, &mut second_ids),
        );
        self.ids.join(second_ids);
        match (ra, rb) {
            (Ok(sa), Ok(sb)) => Ok(vec![(sa, canon), (sb, canon)]),
            _ => self.parse_text(file, self.lib.items_text(file, items)),
        }
    }

    /// Sorts a parsed library text's items into the symbol tables.
    fn add_loaded(&mut self, script: ast::Script, canon: FileId, syms: &mut Symbols) {
        let mut errors = Vec::new();
        let mut probes = Vec::new();
        add_items(
            script,
            canon,
            syms,
            &mut self.new_aliases,
            &mut probes,
            &mut errors,
        );
        self.new_probes.extend(probes);
        self.errors
            .extend(errors.into_iter().map(SemError::into_diagnostic));
    }
}

/// A library text parsed: its items, with the file they count as.
type Parsed = Result<Vec<(ast::Script, FileId)>, Vec<Diagnostic>>;

/// Loads of at least this many items of one file are parsed on two
/// threads (a thread costs about what parsing 10 aliases does).
const PARALLEL_ITEMS: usize = 64;

impl TapsetLoader for Loader<'_> {
    fn load_function(&mut self, syms: &mut Symbols, name: &str) -> bool {
        let items = self.lib.function_items(name).to_vec();
        self.load(syms, &items)
    }

    fn load_global(&mut self, syms: &mut Symbols, name: &str) -> bool {
        let items = self.lib.global_items(name).to_vec();
        self.load(syms, &items)
    }

    fn load_aliases_for(&mut self, syms: &mut Symbols, pattern: &[&str]) -> bool {
        let items = self.lib.alias_items(pattern);
        self.load(syms, &items)
    }

    fn take_loaded(&mut self) -> (Vec<AliasDef>, Vec<Rc<ast::Probe>>) {
        (
            std::mem::take(&mut self.new_aliases),
            std::mem::take(&mut self.new_probes),
        )
    }

    fn take_errors(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.errors)
    }

    fn alias_names(&self) -> Vec<Vec<String>> {
        self.lib.all_aliases().map(|n| n.to_vec()).collect()
    }

    fn canonical(&self, file: FileId) -> FileId {
        self.canon.get(&file).copied().unwrap_or(file)
    }

    fn tapset_declares_global(&self, name: &str) -> bool {
        self.lib.global_items(name).iter().any(|&(f, _)| {
            self.lib.files[f]
                .defs
                .globals
                .iter()
                .any(|(g, private)| g == name && !private)
        })
    }
}

/// The probes being built.
struct Session {
    aliases: Vec<AliasDef>,
    /// Point patterns whose tapset aliases are loaded.
    patterns_loaded: rustc_hash::FxHashSet<Vec<String>>,
    /// `aliases[..targets_queued]` have had their targets' aliases loaded.
    targets_queued: usize,
    /// Index of `aliases[..indexed]` by first name component.
    by_first: HashMap<String, Vec<usize>>,
    indexed: usize,
    probes_out: Vec<ProbeDef>,
    probe_local_tvs: Vec<(Vec<usize>, Vec<Span>)>,
    warnings: Vec<Diagnostic>,
    verbose: u32,
    separate: bool,
    heads: Vec<String>,
    /// Whether each probe of `probes_out` runs an alias's body first.
    through_alias: Vec<bool>,
    /// The user's script (warnings are about its code only).
    user_file: FileId,
}

impl Session {
    /// Loads the tapsets defining aliases these points (and, transitively,
    /// those aliases' targets) may name.
    fn load_aliases(&mut self, low: &mut Lowerer, points: &[ast::ProbePoint]) {
        let mut work: Vec<Vec<String>> = points
            .iter()
            .map(|p| {
                synonyms::canonical_names(p.components.iter().map(|c| c.name.clone()).collect())
            })
            .collect();
        let mut seen: Vec<Vec<String>> = Vec::new();
        loop {
            // Targets of aliases not looked at yet may name tapset aliases.
            for a in &self.aliases[self.targets_queued..] {
                for t in &a.ast.targets {
                    work.push(synonyms::canonical_names(
                        t.components.iter().map(|c| c.name.clone()).collect(),
                    ));
                }
            }
            self.targets_queued = self.aliases.len();
            let Some(pattern) = work.pop() else {
                // An alias used with a suffix (`myio.return`) resolves its
                // targets with the suffix (`syscall.read.return`), which
                // may name tapset aliases of their own.
                work = self.suffixed_targets(&seen);
                if work.is_empty() {
                    break;
                }
                continue;
            };
            if !seen.contains(&pattern) {
                seen.push(pattern.clone());
            }
            if self.patterns_loaded.contains(&pattern) {
                continue;
            }
            let refs: Vec<&str> = pattern.iter().map(|s| s.as_str()).collect();
            if low.load_aliases(&refs) {
                let (aliases, probes) = low.take_loaded();
                self.aliases.extend(aliases);
                low.requeue_probes(probes);
            }
            self.patterns_loaded.insert(pattern);
        }
    }

    /// The targets, with the suffix, of aliases that `patterns` use with a
    /// suffix, not looked at yet.
    fn suffixed_targets(&self, patterns: &[Vec<String>]) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for p in patterns {
            for a in &self.aliases {
                for n in &a.names {
                    let k = n.len();
                    if k == 0
                        || k >= p.len()
                        || !p[..k]
                            .iter()
                            .zip(n)
                            .all(|(w, n)| catalogue::glob_match(w, n))
                    {
                        continue;
                    }
                    for t in &a.ast.targets {
                        let mut v: Vec<String> =
                            t.components.iter().map(|c| c.name.clone()).collect();
                        v.extend(p[k..].iter().cloned());
                        if !patterns.contains(&v) && !out.contains(&v) {
                            out.push(v);
                        }
                    }
                }
            }
        }
        out
    }

    /// Resolves and lowers one written probe into probe definitions.
    fn probe(&mut self, low: &mut Lowerer, p: &Rc<ast::Probe>) {
        self.load_aliases(low, &p.points);
        let from = self.indexed;
        alias::index_aliases(&self.aliases, from, &mut self.by_first);
        self.indexed = self.aliases.len();
        let resolver = Resolver {
            aliases: &self.aliases,
            by_first: &self.by_first,
            library_names: &[],
            families: Default::default(),
        };
        let resolved = match resolver.resolve_list(&p.points) {
            Ok(r) => r,
            Err(e) if e.message.starts_with("probe point mismatch") => {
                // Again, with every tapset alias name for the suggestion.
                let names = low.library_alias_names();
                let resolver = Resolver {
                    library_names: &names,
                    ..resolver
                };
                low.errors
                    .push(resolver.resolve_list(&p.points).err().unwrap_or(e));
                return;
            }
            Err(e) => {
                low.errors.push(e);
                return;
            }
        };
        let name = p
            .points
            .iter()
            .map(point_text)
            .collect::<Vec<_>>()
            .join(", ");
        // Points without alias bodies and of the same family share one
        // handler; each alias expansion gets its own.
        let mut groups: Vec<Vec<Resolved>> = Vec::new();
        for r in resolved {
            let shared = r.prologue.is_empty() && r.epilogue.is_empty() && !self.separate;
            match groups.last_mut() {
                Some(g)
                    if shared
                        && g[0].prologue.is_empty()
                        && g[0].epilogue.is_empty()
                        && std::ptr::eq(g[0].family, r.family) =>
                {
                    g.push(r)
                }
                _ => groups.push(vec![r]),
            }
        }
        let mentions = unread::Mentions::of_block(&p.body);
        for group in groups {
            self.lower_group(low, p, &name, group, &mentions);
        }
    }

    fn lower_group(
        &mut self,
        low: &mut Lowerer,
        p: &ast::Probe,
        name: &str,
        group: Vec<Resolved>,
        mentions: &unread::Mentions,
    ) {
        let families = group.iter().map(|r| r.family).collect();
        let mut body = Body::new(low.canon(p.span.file), families, None);
        body.mark_args = group.iter().filter_map(|r| marks::arg_count(&r.kind)).min();
        let kinds: Vec<&PointKind> = group.iter().map(|r| &r.kind).collect();
        body.dwarf = dwarf::sites_of(&kinds).map(std::rc::Rc::new);
        let mut points = Vec::new();
        for r in &group {
            let mut conds = Vec::new();
            for c in &r.conditions {
                if let Some(e) = check_condition(low, c, &mut body) {
                    conds.push(e);
                }
            }
            let cond = syscalls::and_all(conds);
            let mut kind = r.kind.clone();
            let cond = match &mut kind {
                PointKind::Process {
                    event:
                        ProcessEvent::Syscall { syscalls } | ProcessEvent::SyscallReturn { syscalls },
                    ..
                } => {
                    let (set, rest) = syscalls::split(cond);
                    *syscalls = set;
                    rest
                }
                _ => cond,
            };
            points.push(ProbePoint {
                kind,
                condition: cond,
                text: r.text.clone(),
                head: r.head.clone(),
            });
        }
        let first = &group[0];
        self.heads.push(first.head.clone());
        self.through_alias.push(!first.prologue.is_empty());
        let aliases: Vec<&Rc<ast::Alias>> = first.prologue.iter().chain(&first.epilogue).collect();
        let unread = unread::unread(low, mentions, &aliases, &body.families, self.user_file);
        let (before, after) = unread.split_at(first.prologue.len());
        let mut stmts = Vec::new();
        for (a, unread) in first.prologue.iter().zip(before) {
            body.file = low.canon(a.span.file);
            stmts.extend(low.lower_alias_body(&a.body, unread, &mut body));
        }
        body.file = low.canon(p.span.file);
        stmts.extend(low.lower_block(&p.body, &mut body).stmts);
        for (a, unread) in first.epilogue.iter().zip(after) {
            body.file = low.canon(a.span.file);
            stmts.extend(low.lower_alias_body(&a.body, unread, &mut body));
        }
        self.probe_local_tvs.push((body.tvs, body.spans));
        self.probes_out.push(ProbeDef {
            points,
            locals: body.locals,
            body: Block { stmts },
            name: name.to_string(),
            span: p.span,
        });
    }
}

/// Lowers a probe condition, which may read only globals and context
/// variables and call no function (SystemTap's rule; utap also allows
/// context variables, which its syscall aliases use).
fn check_condition(low: &mut Lowerer, c: &ast::Expr, body: &mut Body) -> Option<Expr> {
    let mut problems = Vec::new();
    condition_problems(low, c, &mut problems);
    if !problems.is_empty() {
        low.errors.extend(problems);
        return None;
    }
    let (e, t) = low.lower_expr(c, body);
    if let Err(err) = low.types.unify(t, Ty::Known(Type::Long), c.span) {
        low.errors.push(err);
    }
    Some(e)
}

fn condition_problems(low: &mut Lowerer, e: &ast::Expr, out: &mut Vec<SemError>) {
    use ast::ExprKind as K;
    match &e.kind {
        K::Assign { .. } | K::IncDec { .. } => out.push(
            SemError::new(e.span, "probe condition must not modify any variables")
                .label("a condition is evaluated to enable the probe"),
        ),
        K::Call { name, args } => {
            let builtin_pure = crate::builtins::lookup(&name.name).is_some_and(|b| b.pure_);
            if !builtin_pure {
                out.push(
                    SemError::new(e.span, "probe condition must not reference function")
                        .label("conditions may call only side-effect-free builtins"),
                );
            }
            for a in args {
                condition_problems(low, a, out);
            }
        }
        K::Var(name) => {
            let file = low.canon(e.span.file);
            if !low.has_global(name, file) {
                out.push(
                    SemError::new(
                        e.span,
                        "probe condition must not reference undeclared global",
                    )
                    .label(format!("'{name}' is not a global")),
                );
            }
        }
        K::Unary { expr, .. } => condition_problems(low, expr, out),
        K::Binary { lhs, rhs, .. } => {
            condition_problems(low, lhs, out);
            condition_problems(low, rhs, out);
        }
        K::Ternary { cond, then, else_ } => {
            condition_problems(low, cond, out);
            condition_problems(low, then, out);
            condition_problems(low, else_, out);
        }
        K::Index { keys, .. } => keys.iter().for_each(|k| condition_problems(low, k, out)),
        _ => {}
    }
}

/// A probe point as written (for messages and `ProbeDef::name`).
pub fn point_text(p: &ast::ProbePoint) -> String {
    let mut s = p
        .components
        .iter()
        .map(|c| match &c.arg {
            None => c.name.clone(),
            Some(ast::Literal::Num(n)) => format!("{}({n})", c.name),
            Some(ast::Literal::Str(v)) => format!("{}({v:?})", c.name),
        })
        .collect::<Vec<_>>()
        .join(".");
    if p.optional {
        s.push('?');
    }
    if p.sufficient {
        s.push('!');
    }
    s
}
