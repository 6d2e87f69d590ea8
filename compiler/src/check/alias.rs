//! Probe-point resolution: matching a written point against probe aliases
//! and the catalogue, expanding aliases recursively.
//!
//! An alias `probe a = t1, t2 { P }` (prologue) or `probe a += t { E }`
//! (epilogue) turns a use `probe a { U }` into one probe per target with
//! body `P U` or `U E`; chains nest (`P_inner P_outer U E_outer E_inner`).
//! Wildcards match one component each and may match several aliases and
//! families. `?` drops a point that resolves to nothing; `!` stops at the
//! first point of a list that resolves. Conditions of every level are
//! collected and and-ed by the caller.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::RefCell;
use std::rc::Rc;

use super::catalogue::{
    ArgSpec, BuildError, Built, FAMILIES, Family, FamilyKind, PointArg, ProcessEventKind,
    glob_match,
};
use super::error::SemError;
use super::synonyms;
use crate::ast::{self, FileId, Literal};
use crate::program::PointKind;

/// A probe alias the checker knows (from the script or a used tapset).
pub struct AliasDef {
    /// Component names of each name the alias defines.
    pub names: Vec<Vec<String>>,
    pub ast: Rc<ast::Alias>,
    pub file: FileId,
}

/// One concrete probe point a written point resolved to.
#[derive(Clone)]
pub struct Resolved {
    pub family: &'static Family,
    pub kind: PointKind,
    /// Canonical text, e.g. `process("/usr/bin/cat").syscall`.
    pub text: String,
    /// Alias bodies to run before the handler, outermost last.
    pub prologue: Vec<Rc<ast::Alias>>,
    /// Alias bodies to run after the handler, outermost first.
    pub epilogue: Vec<Rc<ast::Alias>>,
    /// Conditions of the point and the aliases it went through.
    pub conditions: Vec<ast::Expr>,
    /// The name the user-level point matched (alias name or point text),
    /// as `-l` lists it.
    pub head: String,
}

/// How deep alias chains may nest before we call it a loop.
const MAX_DEPTH: usize = 64;

pub struct Resolver<'a> {
    pub aliases: &'a [AliasDef],
    /// Aliases by the first component of each of their names.
    pub by_first: &'a HashMap<String, Vec<usize>>,
    /// Names of tapset aliases not loaded (for "did you mean" only).
    pub library_names: &'a [Vec<String>],
    /// What each point's components matched in the catalogue.
    pub families: RefCell<HashMap<String, Vec<Resolved>>>,
}

/// A point's component names and arguments, as a map key.
fn components_key(point: &ast::ProbePoint) -> String {
    let mut key = String::new();
    for c in &point.components {
        key.push_str(&c.name);
        match &c.arg {
            None => key.push('\u{1}'),
            Some(Literal::Num(n)) => {
                key.push('\u{2}');
                key.push_str(&n.to_string());
            }
            Some(Literal::Str(v)) => {
                key.push('\u{3}');
                key.push_str(v);
            }
        }
        key.push('\u{0}');
    }
    key
}

/// Indexes aliases `from..` by first name component into `index`.
pub fn index_aliases(aliases: &[AliasDef], from: usize, index: &mut HashMap<String, Vec<usize>>) {
    for (i, a) in aliases.iter().enumerate().skip(from) {
        for n in &a.names {
            if let Some(first) = n.first() {
                let v = index.entry(first.clone()).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
        }
    }
}

impl Resolver<'_> {
    /// Resolves a list of points (`probe a, b ?, c !`) as SystemTap does.
    pub fn resolve_list(&self, points: &[ast::ProbePoint]) -> Result<Vec<Resolved>, SemError> {
        let mut out = Vec::new();
        for p in points {
            let found = self.resolve(p, &mut Vec::new())?;
            let done = p.sufficient && !found.is_empty();
            out.extend(found);
            if done {
                break;
            }
        }
        Ok(out)
    }

    /// Resolves one written point; `stack` holds the aliases being expanded
    /// (to detect loops).
    pub fn resolve(
        &self,
        point: &ast::ProbePoint,
        stack: &mut Vec<*const ast::Alias>,
    ) -> Result<Vec<Resolved>, SemError> {
        match self.resolve_inner(point, stack) {
            // An alias whose targets are all optional may expand to nothing
            // (SystemTap's `syscall.send` on x86_64): no error.
            Ok(v) if v.is_empty() && !point.optional && !self.names_alias(point) => {
                Err(self.mismatch(point))
            }
            Ok(v) => Ok(v),
            Err(_) if point.optional => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn resolve_inner(
        &self,
        point: &ast::ProbePoint,
        stack: &mut Vec<*const ast::Alias>,
    ) -> Result<Vec<Resolved>, SemError> {
        if let Some(canon) = synonyms::canonical(point) {
            let mut out = self.resolve_inner(&canon, stack)?;
            for r in &mut out {
                r.head = synonyms::written_head(&r.head, &point.components[0].name);
            }
            return Ok(out);
        }
        let names: Vec<&str> = point.components.iter().map(|c| c.name.as_str()).collect();
        let mut out = Vec::new();
        let candidates: Vec<usize> = match names.first() {
            Some(first) if !first.contains('*') => {
                self.by_first.get(*first).cloned().unwrap_or_default()
            }
            _ => (0..self.aliases.len()).collect(),
        };
        for &i in &candidates {
            let alias = &self.aliases[i];
            let Some(name) = alias.names.iter().find(|n| matches(&names, n)) else {
                continue;
            };
            if point.components.iter().any(|c| c.arg.is_some()) {
                continue;
            }
            let head = name.join(".");
            out.extend(self.expand_alias(alias, &head, point, &[], stack)?);
        }
        for (alias, k) in self.suffix_matches(&names, point, &candidates) {
            let head = names[..k].join(".");
            let suffix = &point.components[k..];
            out.extend(self.expand_alias(&self.aliases[alias], &head, point, suffix, stack)?);
        }
        out.extend(self.match_families(point)?);
        for r in &mut out {
            if let Some(c) = &point.condition {
                r.conditions.push(c.clone());
            }
        }
        Ok(out)
    }

    /// The families a point matches. Remembered by the point's components:
    /// the 400 aliases `syscall.*` expands to all target `process.syscall`.
    fn match_families(&self, point: &ast::ProbePoint) -> Result<Vec<Resolved>, SemError> {
        let key = components_key(point);
        if let Some(found) = self.families.borrow().get(&key) {
            return Ok(found.clone());
        }
        let mut out = Vec::new();
        for family in FAMILIES {
            out.extend(match_family(family, point)?);
        }
        self.families.borrow_mut().insert(key, out.clone());
        Ok(out)
    }

    /// Aliases used with a suffix (SystemTap 2.0): `myio.return` where only
    /// `myio` is an alias resolves to `.return` of each of its targets.
    /// Returns `(alias, k)`: the alias names the first `k` components.
    /// A longer alias name that also matches wins (`syscall.read.return` is
    /// its own alias, not `syscall.read` plus a suffix), so wildcards over
    /// aliases never match one event twice.
    fn suffix_matches(
        &self,
        names: &[&str],
        point: &ast::ProbePoint,
        candidates: &[usize],
    ) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        // Only a name shorter than the point can be used with a suffix.
        if names.len() < 2 {
            return found;
        }
        // The proper prefixes of every candidate name that the point's
        // first components match: a name here has a longer alias matching
        // too. One pass, not one per name (`syscall.*.return` looks at
        // 700 aliases).
        let mut longer: HashSet<&[String]> = HashSet::default();
        for &j in candidates {
            for n in &self.aliases[j].names {
                if n.len() > 1 && n.len() <= names.len() && matches(&names[..n.len()], n) {
                    longer.extend((1..n.len()).map(|k| &n[..k]));
                }
            }
        }
        for &i in candidates {
            let alias = &self.aliases[i];
            for name in &alias.names {
                let k = name.len();
                if k == 0
                    || k >= names.len()
                    || !matches(&names[..k], name)
                    || point.components[..k].iter().any(|c| c.arg.is_some())
                {
                    continue;
                }
                if !longer.contains(&name[..]) && !found.contains(&(i, k)) {
                    found.push((i, k));
                }
            }
        }
        found
    }

    /// Whether some alias is named by this point (after synonyms).
    fn names_alias(&self, point: &ast::ProbePoint) -> bool {
        let canon = synonyms::canonical(point);
        let point = canon.as_ref().unwrap_or(point);
        if point.components.iter().any(|c| c.arg.is_some()) {
            return false;
        }
        let names: Vec<&str> = point.components.iter().map(|c| c.name.as_str()).collect();
        self.aliases
            .iter()
            .any(|a| a.names.iter().any(|n| matches(&names, n)))
    }

    fn expand_alias(
        &self,
        alias: &AliasDef,
        head: &str,
        point: &ast::ProbePoint,
        suffix: &[ast::Component],
        stack: &mut Vec<*const ast::Alias>,
    ) -> Result<Vec<Resolved>, SemError> {
        let key = Rc::as_ptr(&alias.ast);
        if stack.contains(&key) || stack.len() > MAX_DEPTH {
            return Err(SemError::new(
                point.span,
                format!("Recursive loop in alias expansion of {head}"),
            )
            .label("this alias expands to itself")
            .also(alias.ast.span, "alias defined here"));
        }
        stack.push(key);
        let mut out = Vec::new();
        let mut result = Ok(());
        for target in &alias.ast.targets {
            let suffixed;
            let target = if suffix.is_empty() {
                target
            } else {
                let mut t = target.clone();
                t.components.extend(suffix.iter().cloned());
                // An alias used with a suffix may match nothing through
                // some of its targets (SystemTap: optional by default).
                t.optional = true;
                suffixed = t;
                &suffixed
            };
            match self.resolve(target, stack) {
                Ok(found) => {
                    let done = target.sufficient && !found.is_empty();
                    out.extend(found);
                    if done {
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        stack.pop();
        result?;
        for r in &mut out {
            match alias.ast.kind {
                ast::AliasKind::Prologue => r.prologue.push(alias.ast.clone()),
                ast::AliasKind::Epilogue => r.epilogue.insert(0, alias.ast.clone()),
            }
            r.head = head.to_string();
        }
        Ok(out)
    }

    /// "probe point mismatch" with the alternatives at the first component
    /// that matches nothing, and a "did you mean" for the closest name.
    fn mismatch(&self, point: &ast::ProbePoint) -> SemError {
        let names: Vec<&str> = point.components.iter().map(|c| c.name.as_str()).collect();
        let first_arg = point.components.iter().find_map(|c| match &c.arg {
            Some(ast::Literal::Str(s)) => Some(s.as_str()),
            _ => None,
        });
        if let Some((label, help)) = crate::foreign::kernel_point(&names, first_arg) {
            let e = SemError::new(point.span, crate::foreign::KERNEL_PROBES).label(label);
            return match help {
                Some(h) => e.help(h),
                None => e.note("utap has no user-space equivalent of this probe point"),
            };
        }
        let known = self.known_names();
        let mut pos = 0;
        while pos < names.len()
            && known.iter().any(|k| {
                k.len() > pos && k[..=pos].iter().zip(&names).all(|(a, b)| glob_match(b, a))
            })
        {
            pos += 1;
        }
        let pos = pos.min(names.len().saturating_sub(1));
        let mut alternatives: Vec<&str> = known
            .iter()
            .filter(|k| k.len() > pos && k[..pos].iter().zip(&names).all(|(a, b)| glob_match(b, a)))
            .map(|k| k[pos].as_str())
            .collect();
        alternatives.sort();
        alternatives.dedup();
        let mut message = format!("probe point mismatch at position {}", pos + 1);
        if !alternatives.is_empty() && alternatives.len() <= 20 {
            message.push_str(&format!(" (alternatives: {})", alternatives.join(" ")));
        }
        let written = names.join(".");
        let span = point.components.get(pos).map_or(point.span, |c| c.span);
        let mut e =
            SemError::new(span, message).label(format!("no probe point matches '{written}'"));
        let best = known
            .iter()
            .map(|k| k.join("."))
            .map(|k| (strsim::levenshtein(&k, &written), k))
            .min();
        if let Some((d, k)) = best
            && d > 0
            && d <= written.len().max(3) / 2
        {
            e = e.help(format!("did you mean '{k}'?"));
        }
        e
    }

    fn known_names(&self) -> Vec<Vec<String>> {
        let mut v: Vec<Vec<String>> = FAMILIES
            .iter()
            .map(|f| {
                f.comps
                    .iter()
                    .filter(|c| !c.optional)
                    .map(|c| c.name.to_string())
                    .collect()
            })
            .collect();
        v.extend(self.aliases.iter().flat_map(|a| a.names.iter().cloned()));
        v.extend(self.library_names.iter().cloned());
        v
    }
}

fn matches(pattern: &[&str], name: &[String]) -> bool {
    pattern.len() == name.len() && pattern.iter().zip(name).all(|(p, n)| glob_match(p, n))
}

/// Matches a point against one family: component names (with wildcards),
/// optional trailing components, and arguments of the right kind. A
/// function-probe point whose process path has wildcards resolves to one
/// point per file the path names (see [`expand_process_glob`]).
fn match_family(
    family: &'static Family,
    point: &ast::ProbePoint,
) -> Result<Vec<Resolved>, SemError> {
    let comps = &point.components;
    let mut args: Vec<Option<Option<PointArg>>> = Vec::new();
    let mut i = 0;
    for spec in family.comps {
        let Some(comp) = comps.get(i) else {
            if spec.optional {
                args.push(None);
                continue;
            }
            return Ok(Vec::new());
        };
        if !glob_match(&comp.name, spec.name) {
            if spec.optional {
                args.push(None);
                continue;
            }
            return Ok(Vec::new());
        }
        let arg = match (&comp.arg, spec.arg) {
            (None, ArgSpec::None | ArgSpec::OptNum | ArgSpec::OptStrOrNum | ArgSpec::OptStr) => {
                None
            }
            (Some(Literal::Num(n)), ArgSpec::OptNum | ArgSpec::Num | ArgSpec::OptStrOrNum) => {
                Some(PointArg::Num(*n))
            }
            (
                Some(Literal::Str(s)),
                ArgSpec::OptStrOrNum | ArgSpec::Str | ArgSpec::StrOrNum | ArgSpec::OptStr,
            ) => Some(PointArg::Str(s.clone())),
            (Some(Literal::Num(n)), ArgSpec::StrOrNum) => Some(PointArg::Num(*n)),
            _ => return Ok(Vec::new()),
        };
        args.push(Some(arg));
        i += 1;
    }
    if i != comps.len() {
        return Ok(Vec::new());
    }
    let error = |e: BuildError| {
        let span = comps.get(e.component).map_or(point.span, |c| c.span);
        SemError::new(span, e.message).label(e.label)
    };
    if let FamilyKind::Process(ProcessEventKind::Function(_)) = family.kind
        && let Some(Some(Some(PointArg::Str(path)))) = args.first()
        && utap_runtime::glob::has_wildcards(path)
    {
        return expand_process_glob(family, &args, path).map_err(error);
    }
    let built = family.build(&args).map_err(error)?;
    Ok(built
        .into_iter()
        .map(|b| resolved(family, b, &args))
        .collect())
}

/// A built point with its text: the resolved arguments where the family
/// gave them, else the written ones.
fn resolved(family: &'static Family, built: Built, args: &[Option<Option<PointArg>>]) -> Resolved {
    let head = canonical_text(family, built.args.as_deref().unwrap_or(args));
    Resolved {
        family,
        kind: built.kind,
        text: built.pp.unwrap_or_else(|| head.clone()),
        head,
        prologue: Vec::new(),
        epilogue: Vec::new(),
        conditions: Vec::new(),
    }
}

/// `process("/lib/x86_64*/libc.so*").function("free")`: as SystemTap
/// (stapprobes: "standard globbing is performed to find all matching
/// paths"; tapsets.cxx, PR6456), one point per regular file the pattern
/// names, by its canonical path. Each is optional, as if written with
/// `?`: a file without the function (or not an ELF file, such as the
/// linker script `libc.so`) is left out; the point is an error only when
/// no file gives a probe.
fn expand_process_glob(
    family: &'static Family,
    args: &[Option<Option<PointArg>>],
    pattern: &str,
) -> Result<Vec<Resolved>, BuildError> {
    let files = utap_runtime::glob::files(pattern).map_err(|_| BuildError {
        message: format!("no file matches '{pattern}'"),
        label: "process paths with wildcards are expanded by glob(3)".into(),
        component: 0,
    })?;
    let mut out = Vec::new();
    let mut first_error: Option<BuildError> = None;
    for file in files {
        let mut args = args.to_vec();
        args[0] = Some(Some(PointArg::Str(file)));
        match family.build(&args) {
            Ok(built) => out.extend(built.into_iter().map(|b| resolved(family, b, &args))),
            // A file that has functions but not this one says more than
            // one that is not an ELF file.
            Err(e) => {
                let no_match = |e: &BuildError| e.message.starts_with("no match");
                if first_error
                    .as_ref()
                    .is_none_or(|f| !no_match(f) && no_match(&e))
                {
                    first_error = Some(e);
                }
            }
        }
    }
    match (out.is_empty(), first_error) {
        (true, Some(e)) => Err(e),
        (true, None) => Err(BuildError {
            message: format!("no regular file matches '{pattern}'"),
            label: "process paths with wildcards name executables and libraries".into(),
            component: 0,
        }),
        _ => Ok(out),
    }
}

/// `process("/usr/bin/cat").syscall`, `timer.ms(10)`, `begin`.
fn canonical_text(family: &Family, args: &[Option<Option<PointArg>>]) -> String {
    let mut parts = Vec::new();
    for (spec, arg) in family.comps.iter().zip(args) {
        let Some(arg) = arg else { continue };
        parts.push(match arg {
            None => spec.name.to_string(),
            Some(PointArg::Num(n)) => format!("{}({n})", spec.name),
            // Only a program name goes through $PATH: `function("write")`
            // stays `write`, not /usr/bin/write.
            Some(PointArg::Str(s)) if spec.name == "process" => format!(
                "{}(\"{}\")",
                spec.name,
                super::catalogue::find_executable(s)
            ),
            Some(PointArg::Str(s)) => format!("{}(\"{s}\")", spec.name),
        });
    }
    parts.join(".")
}
