//! The debug information of one ELF file, read with `gimli`: functions
//! (name, pc range, declaration file and line), their parameters and
//! locals (types, location expressions), types (base, pointer, struct,
//! union, array, enum, through typedefs and qualifiers), the address after
//! a function's prologue, and the CFA rule at an address from `.eh_frame`.

use std::collections::HashMap;
use std::path::Path;

use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset, UnwindSection};
use object::{Object, ObjectSection};

type R = EndianSlice<'static, LittleEndian>;

/// A type in the debug information: a DIE of one unit (`None` is `void`),
/// possibly with pointer levels on top (`@cast(p, "struct s *")` names a
/// pointer type the DWARF may not have) or, for a multi-dimensional
/// array, its leading dimensions already indexed (`$grid[1]` is a row).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeRef {
    unit: usize,
    offset: usize,
    ptr: u8,
    skip: u8,
}

impl TypeRef {
    fn die(unit: usize, offset: usize) -> TypeRef {
        TypeRef {
            unit,
            offset,
            ptr: 0,
            skip: 0,
        }
    }

    /// A pointer to this type.
    pub fn pointer(self) -> TypeRef {
        TypeRef {
            ptr: self.ptr + 1,
            ..self
        }
    }
}

/// What a type is, after typedefs and qualifiers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeKind {
    Void,
    Base {
        size: u8,
        signed: bool,
        char: bool,
        float: bool,
    },
    Pointer(Option<TypeRef>),
    Struct {
        union: bool,
        members: Vec<Member>,
    },
    /// Outermost dimension first; `None` for `[]`.
    Array {
        elem: Option<TypeRef>,
        dims: Vec<Option<u64>>,
    },
    Enum {
        size: u8,
    },
    Function,
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub offset: u64,
    pub ty: Option<TypeRef>,
    /// A bitfield: its first bit counted from `offset` (little-endian,
    /// may exceed 7) and its width in bits.
    pub bits: Option<(u64, u64)>,
}

/// A variable of a compilation unit (global or file static), for
/// `@var("name@file.c")`.
#[derive(Clone, Debug)]
pub struct Global {
    pub name: String,
    pub decl_file: Option<String>,
    pub var: Variable,
}

/// Where a variable lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VarLocation {
    /// One expression valid over the whole scope.
    Expr(Vec<u8>),
    /// A location list: (begin, end, expression) by pc.
    List(Vec<(u64, u64, Vec<u8>)>),
    /// Optimised out.
    None,
}

/// A parameter or local of a function.
#[derive(Clone, Debug)]
pub struct Variable {
    pub name: String,
    pub param: bool,
    pub ty: Option<TypeRef>,
    pub location: VarLocation,
    /// The pc ranges of the lexical block declaring it (`None`: the whole
    /// function).
    pub scope: Option<Vec<(u64, u64)>>,
}

/// A function defined in the file (a `DW_TAG_subprogram` with code).
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub low_pc: u64,
    pub high_pc: u64,
    pub decl_file: Option<String>,
    pub decl_line: u64,
    unit: usize,
    offset: usize,
}

/// The DWARF of one ELF file (or of its separate debug file).
pub struct DebugInfo {
    /// The ELF file the code is in.
    pub path: String,
    /// The file the DWARF was read from.
    pub debug_path: String,
    dwarf: gimli::Dwarf<R>,
    units: Vec<gimli::Unit<R>>,
    eh_frame: Option<(gimli::EhFrame<R>, gimli::BaseAddresses)>,
    pub functions: Vec<Function>,
    by_name: HashMap<String, Vec<usize>>,
    /// The unit-level variables (globals and file statics).
    pub globals: Vec<Global>,
    /// The executable's TLS block size rounded to its alignment (x86_64
    /// variant II: the block ends at the thread pointer), when the file
    /// is a program (`PT_INTERP`) with a `PT_TLS` segment.
    pub tls_block: Option<u64>,
}

/// Keeps a file's bytes for the run: debug information is read once per
/// file (see [`super::debug_info`]) and borrowed by every plan.
fn leak(data: Vec<u8>) -> &'static [u8] {
    Box::leak(data.into_boxed_slice())
}

/// A file mapped for the run (read-only, private): only the pages the
/// debug information needs are read, and a file without DWARF costs its
/// headers. Kept like [`leak`]'s bytes (one mapping per file per run, see
/// [`super::debug_info`]).
fn map(path: &Path) -> Result<&'static [u8], String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: a private read-only mapping that is never unmapped; the
    // debug files it serves are not rewritten while utap runs.
    let m = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Box::leak(Box::new(m)))
}

fn has_debug_info(file: &object::File) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
}

impl DebugInfo {
    /// Reads the DWARF of `path`: from the file itself, else from its
    /// separate debug file (build-id, then debuglink). The error names
    /// every file looked for.
    pub fn open(path: &Path) -> Result<DebugInfo, String> {
        let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let bytes = map(&real)?;
        let file = object::File::parse(bytes).map_err(|e| format!("{}: {e}", real.display()))?;
        let mut looked = Vec::new();
        let separate = if has_debug_info(&file) {
            None
        } else {
            let build_id = file.build_id().ok().flatten();
            let link = file.gnu_debuglink().ok().flatten().map(|(n, _)| n.to_vec());
            let candidates = crate::elf::image::debug_file_candidates(
                &real,
                Path::new(crate::elf::image::DEBUG_ROOT),
                build_id,
                link,
            );
            let mut found = None;
            for c in candidates {
                looked.push(c.display().to_string());
                let Ok(d) = map(&c) else { continue };
                if object::File::parse(d).is_ok_and(|f| has_debug_info(&f)) {
                    found = Some((c, d));
                    break;
                }
            }
            match found {
                Some(f) => Some(f),
                None => {
                    let mut msg = format!("no debug information in {}", real.display());
                    if looked.is_empty() {
                        msg.push_str(
                            " (no build-id or .gnu_debuglink names a separate debug file)",
                        );
                    } else {
                        msg.push_str(&format!("; looked for {}", looked.join(", ")));
                    }
                    return Err(msg);
                }
            }
        };
        drop(file);
        let data = bytes;
        let (debug_path, debug_data) = match separate {
            Some((p, d)) => (p, d),
            None => (real.clone(), data),
        };
        let debug_file = object::File::parse(debug_data).map_err(|e| e.to_string())?;
        let dwarf = gimli::Dwarf::load(|id| -> Result<R, gimli::Error> {
            // Compressed sections (Debian's debug files) are inflated once
            // and kept for the run, like the file's bytes.
            let bytes: &'static [u8] = match debug_file
                .section_by_name(id.name())
                .and_then(|s| s.uncompressed_data().ok())
            {
                Some(std::borrow::Cow::Borrowed(b)) => b,
                Some(std::borrow::Cow::Owned(v)) => leak(v),
                None => &[],
            };
            Ok(EndianSlice::new(bytes, LittleEndian))
        })
        .map_err(|e| format!("{}: {e}", debug_path.display()))?;
        let main = object::File::parse(data).map_err(|e| e.to_string())?;
        let eh_frame = main.section_by_name(".eh_frame").and_then(|s| {
            let bytes = s.data().ok()?;
            let mut bases = gimli::BaseAddresses::default().set_eh_frame(s.address());
            if let Some(t) = main.section_by_name(".text") {
                bases = bases.set_text(t.address());
            }
            Some((gimli::EhFrame::new(bytes, LittleEndian), bases))
        });
        let tls_block = tls_block(data);
        let mut info = DebugInfo {
            tls_block,
            globals: Vec::new(),
            path: real.to_string_lossy().into_owned(),
            debug_path: debug_path.to_string_lossy().into_owned(),
            dwarf,
            units: Vec::new(),
            eh_frame,
            functions: Vec::new(),
            by_name: HashMap::new(),
        };
        info.index()
            .map_err(|e| format!("{}: {e}", info.debug_path))?;
        Ok(info)
    }

    /// Reads the units and indexes their functions by name.
    fn index(&mut self) -> gimli::Result<()> {
        let mut headers = self.dwarf.units();
        while let Some(h) = headers.next()? {
            self.units.push(self.dwarf.unit(h)?);
        }
        for ui in 0..self.units.len() {
            let unit = &self.units[ui];
            let mut cursor = unit.entries();
            while let Some(e) = cursor.next_dfs()? {
                if e.tag() == gimli::DW_TAG_variable && e.depth() == 1 {
                    if let Some(g) = self.global_of(ui, e) {
                        self.globals.push(g);
                    }
                    continue;
                }
                if e.tag() != gimli::DW_TAG_subprogram {
                    continue;
                }
                let Some(low) = e
                    .attr_value(gimli::DW_AT_low_pc)
                    .and_then(|v| self.dwarf.attr_address(unit, v).ok().flatten())
                else {
                    continue;
                };
                let high = match e.attr_value(gimli::DW_AT_high_pc) {
                    Some(AttributeValue::Udata(n)) => low + n,
                    Some(v) => self
                        .dwarf
                        .attr_address(unit, v)
                        .ok()
                        .flatten()
                        .unwrap_or(low),
                    None => low,
                };
                let Some(name) = self.name_of(ui, e) else {
                    continue;
                };
                let (decl_file, decl_line) = self.decl_of(ui, e);
                self.by_name
                    .entry(name.clone())
                    .or_default()
                    .push(self.functions.len());
                self.functions.push(Function {
                    name,
                    low_pc: low,
                    high_pc: high,
                    decl_file,
                    decl_line,
                    unit: ui,
                    offset: e.offset().0,
                });
            }
        }
        Ok(())
    }

    /// A unit-level variable with a location (a definition; a declaration
    /// without one is the `extern` of another unit).
    fn global_of(&self, ui: usize, e: &gimli::DebuggingInformationEntry<R>) -> Option<Global> {
        let location = self.location_of(ui, e);
        if location == VarLocation::None {
            return None;
        }
        let name = self.name_of(ui, e)?;
        let ty = match self.attr_of(ui, e, gimli::DW_AT_type) {
            Some(AttributeValue::UnitRef(o)) => Some(TypeRef::die(ui, o.0)),
            _ => None,
        };
        let (decl_file, _) = self.decl_of(ui, e);
        Some(Global {
            name: name.clone(),
            decl_file,
            var: Variable {
                name,
                param: false,
                ty,
                location,
                scope: None,
            },
        })
    }

    /// The unit-level variables named `name`, from `file` when given
    /// (matched by suffix as for functions).
    pub fn globals_named(&self, name: &str, file: Option<&str>) -> Vec<&Global> {
        self.globals
            .iter()
            .filter(|g| g.name == name)
            .filter(|g| {
                file.is_none_or(|f| g.decl_file.as_deref().is_some_and(|d| file_matches(f, d)))
            })
            .collect()
    }

    /// The encoding of the unit a type or variable belongs to.
    pub fn unit_encoding(&self, t: TypeRef) -> gimli::Encoding {
        self.units[t.unit].encoding()
    }

    /// A named struct, union, enum, typedef or base type, for `@cast`
    /// (`"struct point"`, `"point"`, `"point_t"`); a trailing `*` makes a
    /// pointer (handled by the caller).
    pub fn type_named(&self, name: &str) -> Option<TypeRef> {
        let (tag, bare) = match name.split_once(' ') {
            Some(("struct", n)) => (Some(gimli::DW_TAG_structure_type), n.trim()),
            Some(("union", n)) => (Some(gimli::DW_TAG_union_type), n.trim()),
            Some(("enum", n)) => (Some(gimli::DW_TAG_enumeration_type), n.trim()),
            Some(("class", n)) => (Some(gimli::DW_TAG_class_type), n.trim()),
            _ => (None, name.trim()),
        };
        for (ui, unit) in self.units.iter().enumerate() {
            let mut cursor = unit.entries();
            while let Ok(Some(e)) = cursor.next_dfs() {
                let fits = match tag {
                    Some(t) => e.tag() == t,
                    None => matches!(
                        e.tag(),
                        gimli::DW_TAG_structure_type
                            | gimli::DW_TAG_union_type
                            | gimli::DW_TAG_class_type
                            | gimli::DW_TAG_typedef
                            | gimli::DW_TAG_base_type
                            | gimli::DW_TAG_enumeration_type
                    ),
                };
                // A declaration (`struct x;`) has no members.
                if !fits || e.attr_value(gimli::DW_AT_declaration).is_some() {
                    continue;
                }
                if self.name_of(ui, e).as_deref() == Some(bare) {
                    return Some(TypeRef::die(ui, e.offset().0));
                }
            }
        }
        None
    }

    /// A DIE's name, through `DW_AT_abstract_origin` / `DW_AT_specification`.
    fn name_of(&self, ui: usize, e: &gimli::DebuggingInformationEntry<R>) -> Option<String> {
        let unit = &self.units[ui];
        if let Some(v) = e.attr_value(gimli::DW_AT_name) {
            let s = self.dwarf.attr_string(unit, v).ok()?;
            return Some(String::from_utf8_lossy(s.slice()).into_owned());
        }
        for at in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
            if let Some(AttributeValue::UnitRef(o)) = e.attr_value(at) {
                let origin = unit.entry(o).ok()?;
                return self.name_of(ui, &origin);
            }
        }
        None
    }

    fn attr_of(
        &self,
        ui: usize,
        e: &gimli::DebuggingInformationEntry<R>,
        at: gimli::DwAt,
    ) -> Option<AttributeValue<R>> {
        if let Some(v) = e.attr_value(at) {
            return Some(v);
        }
        for link in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
            if let Some(AttributeValue::UnitRef(o)) = e.attr_value(link) {
                let origin = self.units[ui].entry(o).ok()?;
                return self.attr_of(ui, &origin, at);
            }
        }
        None
    }

    /// The declaration's file name and line.
    fn decl_of(&self, ui: usize, e: &gimli::DebuggingInformationEntry<R>) -> (Option<String>, u64) {
        let line = match self.attr_of(ui, e, gimli::DW_AT_decl_line) {
            Some(AttributeValue::Udata(n)) => n,
            Some(AttributeValue::Data1(n)) => n as u64,
            Some(AttributeValue::Data2(n)) => n as u64,
            Some(AttributeValue::Data4(n)) => n as u64,
            _ => 0,
        };
        let file = match self.attr_of(ui, e, gimli::DW_AT_decl_file) {
            Some(AttributeValue::FileIndex(i)) => self.file_name(ui, i),
            Some(AttributeValue::Udata(i)) => self.file_name(ui, i),
            Some(AttributeValue::Data1(i)) => self.file_name(ui, i as u64),
            _ => None,
        };
        (file, line)
    }

    /// The path of file `index` of unit `ui`'s line program, as written
    /// in the compilation (directory joined when relative).
    fn file_name(&self, ui: usize, index: u64) -> Option<String> {
        let unit = &self.units[ui];
        let lp = unit.line_program.as_ref()?;
        let header = lp.header();
        let fe = header.file(index)?;
        let name = self.dwarf.attr_string(unit, fe.path_name()).ok()?;
        let name = String::from_utf8_lossy(name.slice()).into_owned();
        if name.starts_with('/') {
            return Some(name);
        }
        let dir = fe
            .directory(header)
            .and_then(|d| self.dwarf.attr_string(unit, d).ok())
            .map(|d| String::from_utf8_lossy(d.slice()).into_owned());
        Some(match dir {
            Some(d) if !d.is_empty() => format!("{d}/{name}"),
            _ => name,
        })
    }

    /// The functions named `name` (several when static functions of
    /// different files share it).
    pub fn functions_named(&self, name: &str) -> Vec<&Function> {
        self.by_name
            .get(name)
            .map(|v| v.iter().map(|&i| &self.functions[i]).collect())
            .unwrap_or_default()
    }

    /// The function whose code starts at `low_pc`.
    pub fn function_at(&self, low_pc: u64) -> Option<&Function> {
        self.functions.iter().find(|f| f.low_pc == low_pc)
    }

    /// The parameters and locals of `f`, in declaration order (parameters
    /// first, as the DWARF lists them), with the lexical blocks' ranges.
    pub fn variables(&self, f: &Function) -> Vec<Variable> {
        let mut out = Vec::new();
        let _ = self.collect_vars(f, &mut out);
        out
    }

    fn collect_vars(&self, f: &Function, out: &mut Vec<Variable>) -> gimli::Result<()> {
        let unit = &self.units[f.unit];
        let mut cursor = unit.entries_at_offset(UnitOffset(f.offset))?;
        let Some(top) = cursor.next_dfs()? else {
            return Ok(());
        };
        let base = top.depth();
        // Lexical block ranges by depth.
        let mut blocks: Vec<(isize, Vec<(u64, u64)>)> = Vec::new();
        while let Some(e) = cursor.next_dfs()? {
            let depth = e.depth();
            if depth <= base {
                break;
            }
            blocks.retain(|(d, _)| *d < depth);
            match e.tag() {
                gimli::DW_TAG_lexical_block => {
                    let mut ranges = Vec::new();
                    if let Ok(mut it) = self.dwarf.die_ranges(unit, e) {
                        while let Ok(Some(r)) = it.next() {
                            ranges.push((r.begin, r.end));
                        }
                    }
                    blocks.push((depth, ranges));
                }
                gimli::DW_TAG_formal_parameter | gimli::DW_TAG_variable => {
                    // Only the function's own (not those of nested inlined
                    // calls or nested functions).
                    if depth != base + 1 && blocks.last().is_none_or(|(d, _)| *d != depth - 1) {
                        continue;
                    }
                    let Some(name) = self.name_of(f.unit, e) else {
                        continue;
                    };
                    let ty = match self.attr_of(f.unit, e, gimli::DW_AT_type) {
                        Some(AttributeValue::UnitRef(o)) => Some(TypeRef::die(f.unit, o.0)),
                        _ => None,
                    };
                    let location = self.location_of(f.unit, e);
                    // A local without location nor constant value that is
                    // only a declaration (extern) is not a local.
                    if e.tag() == gimli::DW_TAG_variable
                        && e.attr_value(gimli::DW_AT_declaration).is_some()
                    {
                        continue;
                    }
                    let scope = (depth != base + 1)
                        .then(|| blocks.last().map(|(_, r)| r.clone()).unwrap_or_default());
                    out.push(Variable {
                        name,
                        param: e.tag() == gimli::DW_TAG_formal_parameter,
                        ty,
                        location,
                        scope,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn location_of(&self, ui: usize, e: &gimli::DebuggingInformationEntry<R>) -> VarLocation {
        let unit = &self.units[ui];
        let Some(v) = e.attr_value(gimli::DW_AT_location) else {
            return VarLocation::None;
        };
        if let Some(expr) = v.exprloc_value() {
            return VarLocation::Expr(expr.0.slice().to_vec());
        }
        let Ok(Some(mut it)) = self.dwarf.attr_locations(unit, v) else {
            return VarLocation::None;
        };
        let mut list = Vec::new();
        while let Ok(Some(entry)) = it.next() {
            list.push((
                entry.range.begin,
                entry.range.end,
                entry.data.0.slice().to_vec(),
            ));
        }
        VarLocation::List(list)
    }

    /// The function's `DW_AT_frame_base` expression.
    pub fn frame_base(&self, f: &Function) -> Option<Vec<u8>> {
        let unit = &self.units[f.unit];
        let e = unit.entry(UnitOffset(f.offset)).ok()?;
        match e.attr_value(gimli::DW_AT_frame_base)? {
            AttributeValue::Exprloc(x) => Some(x.0.slice().to_vec()),
            _ => None,
        }
    }

    /// The encoding expressions of `f`'s unit are parsed with.
    pub fn encoding(&self, f: &Function) -> gimli::Encoding {
        self.units[f.unit].encoding()
    }

    /// Where `.function` puts its probe in the function starting at
    /// `low_pc`: after the prologue (the second line-table address of the
    /// function) when no variable of it has a location list, that is
    /// unoptimised code, where parameters reach their stack slots in the
    /// prologue; else `low_pc`.
    pub fn probe_pc(&self, low_pc: u64) -> Option<u64> {
        let f = self.function_at(low_pc)?;
        let vars = self.variables(f);
        if vars
            .iter()
            .any(|v| matches!(v.location, VarLocation::List(_)))
        {
            return Some(low_pc);
        }
        Some(self.after_prologue(f).unwrap_or(low_pc))
    }

    /// The first line-table row of `f` after its first address.
    fn after_prologue(&self, f: &Function) -> Option<u64> {
        let unit = &self.units[f.unit];
        let lp = unit.line_program.clone()?;
        let mut rows = lp.rows();
        let mut best: Option<u64> = None;
        while let Ok(Some((_, row))) = rows.next_row() {
            let a = row.address();
            if row.end_sequence() || !row.is_stmt() || a <= f.low_pc || a >= f.high_pc {
                continue;
            }
            best = Some(best.map_or(a, |b: u64| b.min(a)));
        }
        best
    }

    /// Statement addresses of `file:line` (file matched by suffix, as
    /// SystemTap's implicit `*/`): the lowest address of each run of rows.
    pub fn line_addresses(&self, file: &str, line: u64) -> Vec<u64> {
        let mut out = Vec::new();
        for (ui, unit) in self.units.iter().enumerate() {
            let Some(lp) = unit.line_program.clone() else {
                continue;
            };
            let mut rows = lp.rows();
            let mut prev_match = false;
            while let Ok(Some((_, row))) = rows.next_row() {
                let hit = !row.end_sequence()
                    && row.is_stmt()
                    && row.line().map(|l| l.get()) == Some(line)
                    && self
                        .file_name(ui, row.file_index())
                        .is_some_and(|n| file_matches(file, &n));
                if hit && !prev_match {
                    out.push(row.address());
                }
                prev_match = hit;
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The statement rows `(line, address)` of `f`'s compilation unit
    /// in source file `file` (matched as [`file_matches`]), in table
    /// order: every row of the unit, not only `f`'s, since SystemTap's
    /// `:*` walks the unit's line numbers from `f`'s first line until one
    /// has no row in `f`.
    pub fn unit_lines(&self, f: &Function, file: &str) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let Some(lp) = self.units[f.unit].line_program.clone() else {
            return out;
        };
        let mut rows = lp.rows();
        while let Ok(Some((_, row))) = rows.next_row() {
            if row.end_sequence() || !row.is_stmt() {
                continue;
            }
            let Some(line) = row.line().map(|l| l.get()) else {
                continue;
            };
            if self
                .file_name(f.unit, row.file_index())
                .is_some_and(|n| file_matches(file, &n))
            {
                out.push((line, row.address()));
            }
        }
        out
    }

    /// The function containing `pc`.
    pub fn function_containing(&self, pc: u64) -> Option<&Function> {
        self.functions
            .iter()
            .filter(|f| f.low_pc <= pc && pc < f.high_pc)
            .min_by_key(|f| f.high_pc - f.low_pc)
    }

    /// The CFA at `pc` as (DWARF register, offset), from `.eh_frame`.
    pub fn cfa_rule(&self, pc: u64) -> Option<(u16, i64)> {
        let (eh, bases) = self.eh_frame.as_ref()?;
        let mut ctx = Box::new(gimli::UnwindContext::new());
        let row = eh
            .unwind_info_for_address(bases, &mut ctx, pc, gimli::EhFrame::cie_from_offset)
            .ok()?;
        match row.cfa() {
            gimli::CfaRule::RegisterAndOffset { register, offset } => Some((register.0, *offset)),
            gimli::CfaRule::Expression(_) => None,
        }
    }

    /// The type behind typedefs and qualifiers, and its size.
    pub fn kind(&self, t: Option<TypeRef>) -> TypeKind {
        if let Some(r) = t
            && r.ptr > 0
        {
            return TypeKind::Pointer(Some(TypeRef {
                ptr: r.ptr - 1,
                ..r
            }));
        }
        let Some(t) = self.strip(t) else {
            return TypeKind::Void;
        };
        let unit = &self.units[t.unit];
        let Ok(e) = unit.entry(UnitOffset(t.offset)) else {
            return TypeKind::Unknown;
        };
        let size = byte_size(&e);
        let sub = |e: &gimli::DebuggingInformationEntry<R>| match e.attr_value(gimli::DW_AT_type) {
            Some(AttributeValue::UnitRef(o)) => Some(TypeRef::die(t.unit, o.0)),
            _ => None,
        };
        match e.tag() {
            gimli::DW_TAG_base_type => {
                let enc = match e.attr_value(gimli::DW_AT_encoding) {
                    Some(AttributeValue::Encoding(x)) => x,
                    _ => gimli::DW_ATE_signed,
                };
                TypeKind::Base {
                    size: size.unwrap_or(0) as u8,
                    signed: matches!(enc, gimli::DW_ATE_signed | gimli::DW_ATE_signed_char),
                    char: matches!(enc, gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char),
                    float: matches!(enc, gimli::DW_ATE_float | gimli::DW_ATE_complex_float),
                }
            }
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => TypeKind::Pointer(sub(&e)),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type | gimli::DW_TAG_class_type => {
                TypeKind::Struct {
                    union: e.tag() == gimli::DW_TAG_union_type,
                    members: self.members(t).unwrap_or_default(),
                }
            }
            gimli::DW_TAG_array_type => TypeKind::Array {
                elem: sub(&e),
                dims: self
                    .dims(t)
                    .unwrap_or_default()
                    .into_iter()
                    .skip(t.skip as usize)
                    .collect(),
            },
            gimli::DW_TAG_enumeration_type => TypeKind::Enum {
                size: size.unwrap_or(4) as u8,
            },
            gimli::DW_TAG_subroutine_type => TypeKind::Function,
            _ => TypeKind::Unknown,
        }
    }

    /// A row of a multi-dimensional array type: the array with its first
    /// dimension indexed (`int[3][4]` gives `int[4]`).
    pub fn row(&self, t: Option<TypeRef>) -> Option<TypeRef> {
        let r = self.strip(t)?;
        Some(TypeRef {
            skip: r.skip + 1,
            ..r
        })
    }

    /// Follows typedefs and qualifiers (not under added pointer levels).
    fn strip(&self, mut t: Option<TypeRef>) -> Option<TypeRef> {
        for _ in 0..32 {
            let r = t?;
            if r.ptr > 0 || r.skip > 0 {
                return Some(r);
            }
            let e = self.units[r.unit].entry(UnitOffset(r.offset)).ok()?;
            match e.tag() {
                gimli::DW_TAG_typedef
                | gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type => {
                    t = match e.attr_value(gimli::DW_AT_type) {
                        Some(AttributeValue::UnitRef(o)) => Some(TypeRef::die(r.unit, o.0)),
                        _ => None,
                    }
                }
                _ => return Some(r),
            }
        }
        None
    }

    /// The size in bytes of a type (pointers 8).
    pub fn size_of(&self, t: Option<TypeRef>) -> u64 {
        match self.kind(t) {
            TypeKind::Pointer(_) => 8,
            TypeKind::Array { elem, dims } => {
                dims.iter().map(|d| d.unwrap_or(0)).product::<u64>() * self.size_of(elem)
            }
            TypeKind::Void => 1,
            _ => self
                .strip(t)
                .and_then(|r| self.units[r.unit].entry(UnitOffset(r.offset)).ok())
                .and_then(|e| byte_size(&e))
                .unwrap_or(0),
        }
    }

    fn children_of(
        &self,
        t: TypeRef,
        mut f: impl FnMut(&gimli::DebuggingInformationEntry<R>),
    ) -> gimli::Result<()> {
        let unit = &self.units[t.unit];
        let mut cursor = unit.entries_at_offset(UnitOffset(t.offset))?;
        let Some(top) = cursor.next_dfs()? else {
            return Ok(());
        };
        let base = top.depth();
        while let Some(e) = cursor.next_dfs()? {
            if e.depth() <= base {
                break;
            }
            if e.depth() == base + 1 {
                f(e);
            }
        }
        Ok(())
    }

    fn members(&self, t: TypeRef) -> gimli::Result<Vec<Member>> {
        let mut out = Vec::new();
        self.children_of(t, |e| {
            if e.tag() != gimli::DW_TAG_member {
                return;
            }
            let offset = match e.attr_value(gimli::DW_AT_data_member_location) {
                Some(AttributeValue::Udata(n)) => n,
                Some(AttributeValue::Data1(n)) => n as u64,
                Some(AttributeValue::Data2(n)) => n as u64,
                Some(AttributeValue::Data4(n)) => n as u64,
                Some(AttributeValue::Sdata(n)) => n as u64,
                _ => 0,
            };
            let name = self.name_of(t.unit, e).unwrap_or_default();
            let ty = match e.attr_value(gimli::DW_AT_type) {
                Some(AttributeValue::UnitRef(o)) => Some(TypeRef::die(t.unit, o.0)),
                _ => None,
            };
            let (offset, bits) = bitfield(e, offset);
            out.push(Member {
                name,
                offset,
                ty,
                bits,
            });
        })?;
        Ok(out)
    }

    fn dims(&self, t: TypeRef) -> gimli::Result<Vec<Option<u64>>> {
        let mut out = Vec::new();
        self.children_of(t, |e| {
            if e.tag() != gimli::DW_TAG_subrange_type {
                return;
            }
            let n = |v: Option<AttributeValue<R>>| match v {
                Some(AttributeValue::Udata(n)) => Some(n),
                Some(AttributeValue::Data1(n)) => Some(n as u64),
                Some(AttributeValue::Data2(n)) => Some(n as u64),
                Some(AttributeValue::Data4(n)) => Some(n as u64),
                Some(AttributeValue::Data8(n)) => Some(n),
                Some(AttributeValue::Sdata(n)) if n >= 0 => Some(n as u64),
                _ => None,
            };
            let count = n(e.attr_value(gimli::DW_AT_count))
                .or_else(|| n(e.attr_value(gimli::DW_AT_upper_bound)).map(|u| u + 1));
            out.push(count);
        })?;
        Ok(out)
    }

    /// A type's name as SystemTap prints it (`int`, `char const*`,
    /// `struct point*`, `int[4]`).
    pub fn type_name(&self, t: Option<TypeRef>) -> String {
        self.type_name_depth(t, 0)
    }

    fn type_name_depth(&self, t: Option<TypeRef>, depth: usize) -> String {
        let Some(r) = t else {
            return "void".into();
        };
        if depth > 16 {
            return "?".into();
        }
        if r.ptr > 0 {
            let to = TypeRef {
                ptr: r.ptr - 1,
                ..r
            };
            return format!("{}*", self.type_name_depth(Some(to), depth + 1));
        }
        let Ok(e) = self.units[r.unit].entry(UnitOffset(r.offset)) else {
            return "?".into();
        };
        let sub = match e.attr_value(gimli::DW_AT_type) {
            Some(AttributeValue::UnitRef(o)) => Some(TypeRef::die(r.unit, o.0)),
            _ => None,
        };
        let name = || self.name_of(r.unit, &e);
        let inner = || self.type_name_depth(sub, depth + 1);
        match e.tag() {
            gimli::DW_TAG_base_type | gimli::DW_TAG_typedef => name().unwrap_or_else(|| "?".into()),
            gimli::DW_TAG_structure_type => format!("struct {}", name().unwrap_or_default()),
            gimli::DW_TAG_union_type => format!("union {}", name().unwrap_or_default()),
            gimli::DW_TAG_class_type => format!("class {}", name().unwrap_or_default()),
            gimli::DW_TAG_enumeration_type => format!("enum {}", name().unwrap_or_default()),
            gimli::DW_TAG_pointer_type => format!("{}*", inner()),
            gimli::DW_TAG_reference_type => format!("{}&", inner()),
            gimli::DW_TAG_const_type => format!("{} const", inner()),
            gimli::DW_TAG_volatile_type => format!("{} volatile", inner()),
            gimli::DW_TAG_restrict_type => format!("{} restrict", inner()),
            gimli::DW_TAG_array_type => format!("{}[]", inner()),
            gimli::DW_TAG_subroutine_type => format!("{}(*)()", inner()),
            _ => "?".into(),
        }
    }
}

fn udata(v: Option<AttributeValue<R>>) -> Option<u64> {
    match v? {
        AttributeValue::Udata(n) => Some(n),
        AttributeValue::Data1(n) => Some(n as u64),
        AttributeValue::Data2(n) => Some(n as u64),
        AttributeValue::Data4(n) => Some(n as u64),
        AttributeValue::Data8(n) => Some(n),
        AttributeValue::Sdata(n) if n >= 0 => Some(n as u64),
        _ => None,
    }
}

/// A member's byte offset and, for a bitfield, (first bit from that
/// byte, width): from `DW_AT_data_bit_offset` (DWARF 4+, what gcc writes)
/// or the older big-endian-counted `DW_AT_bit_offset` with its storage
/// unit's `DW_AT_byte_size`.
fn bitfield(e: &gimli::DebuggingInformationEntry<R>, offset: u64) -> (u64, Option<(u64, u64)>) {
    let Some(width) = udata(e.attr_value(gimli::DW_AT_bit_size)) else {
        return (offset, None);
    };
    let first = match udata(e.attr_value(gimli::DW_AT_data_bit_offset)) {
        Some(b) => b,
        None => {
            let storage = byte_size(e).unwrap_or(4) * 8;
            let old = udata(e.attr_value(gimli::DW_AT_bit_offset)).unwrap_or(0);
            offset * 8 + storage.saturating_sub(old + width)
        }
    };
    (first / 8, Some((first % 8, width)))
}

/// The rounded size of the `PT_TLS` segment of an ELF file's bytes.
fn tls_block(data: &[u8]) -> Option<u64> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let header = object::elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let phdrs = header.program_headers(endian, data).ok()?;
    // Only the program's block is at a fixed place below the thread
    // pointer; a library's is found through the DTV.
    if !phdrs
        .iter()
        .any(|p| p.p_type(endian) == object::elf::PT_INTERP)
    {
        return None;
    }
    let tls = phdrs
        .iter()
        .find(|p| p.p_type(endian) == object::elf::PT_TLS)?;
    let align = tls.p_align(endian).max(1);
    Some(tls.p_memsz(endian).div_ceil(align) * align)
}

fn byte_size(e: &gimli::DebuggingInformationEntry<R>) -> Option<u64> {
    match e.attr_value(gimli::DW_AT_byte_size)? {
        AttributeValue::Udata(n) => Some(n),
        AttributeValue::Data1(n) => Some(n as u64),
        AttributeValue::Data2(n) => Some(n as u64),
        AttributeValue::Data4(n) => Some(n as u64),
        AttributeValue::Data8(n) => Some(n),
        _ => None,
    }
}

/// `file` matches `path` exactly or as a suffix after a `/` (SystemTap:
/// "an implicit `*/` is optionally added before the pattern").
pub fn file_matches(file: &str, path: &str) -> bool {
    path == file || path.ends_with(&format!("/{file}"))
}
