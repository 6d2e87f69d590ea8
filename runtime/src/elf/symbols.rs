//! A module's symbol table, sorted by address: function lookup by name (for
//! probe points) and by address (for `usymname`/`usymdata`).

use std::borrow::Cow;

/// One symbol, at its link-time address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub addr: u64,
    pub size: u64,
    /// `STT_FUNC` (or `STT_GNU_IFUNC`): a probe-able function.
    pub func: bool,
    /// `STB_GLOBAL`/`STB_WEAK` rather than file-local.
    pub global: bool,
}

impl Symbol {
    /// The name as symbol output shows it (`usymname`, `usymdata`,
    /// backtraces, `probefunc()`, `-l`): a C++ name demangled with its
    /// parameters (`ns::Shape::area() const`), any other name as it is.
    pub fn shown(&self) -> Cow<'_, str> {
        match demangle(&self.name) {
            Some(d) => Cow::Owned(d.full),
            None => Cow::Borrowed(&self.name),
        }
    }

    /// Whether the function pattern `pattern` names this symbol, by
    /// `glob`: its linkage name or, for C++, its demangled name with or
    /// without the parameters (`ns::f(int)`, `ns::f`: every overload), or
    /// its unqualified name (`f`), as SystemTap matches DWARF's names.
    pub fn matches(&self, pattern: &str, glob: impl Fn(&str, &str) -> bool) -> bool {
        if glob(pattern, &self.name) {
            return true;
        }
        let Some(d) = demangle(&self.name) else {
            return false;
        };
        [&d.full, &d.short]
            .iter()
            .any(|n| glob(pattern, n) || glob(pattern, unqualified(n)))
    }
}

/// A C++ or Rust linkage name demangled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Demangled {
    /// With parameters (without a template's return type, which
    /// `c++filt` prints first); for Rust, the path without its hash.
    pub full: String,
    /// Without parameters and return type: `ns::Foo::bar`, `max<int>`.
    pub short: String,
}

/// Demangles an Itanium C++ ABI name (`_Z...`) or a Rust name (legacy
/// `_ZN...17h<hash>E`, v0 `_R...`); `None` for other names.
/// cpp_demangle and rustc-demangle do the work: complete, fuzzed
/// demanglers of each scheme.
pub fn demangle(name: &str) -> Option<Demangled> {
    if let Some(d) = demangle_rust(name) {
        return Some(d);
    }
    if !name.starts_with("_Z") || is_rust_legacy(name) {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    let opts = cpp_demangle::DemangleOptions::new().no_return_type();
    let full = sym.demangle_with_options(&opts).ok()?;
    let short = sym.demangle_with_options(&opts.no_params()).ok()?;
    Some(Demangled { full, short })
}

/// A Rust name, shown as `rustfilt` does without the hash
/// (`core::fmt::write`, `<T as a::Tr>::f`). A legacy name has the C++
/// shape, so it is tried first; a `.llvm.N` clone suffix is dropped.
fn demangle_rust(name: &str) -> Option<Demangled> {
    if !name.starts_with("_R") && !is_rust_legacy(name) {
        return None;
    }
    let d = rustc_demangle::try_demangle(name).ok()?;
    let path = format!("{d:#}");
    Some(Demangled {
        full: path.clone(),
        short: path,
    })
}

/// A Rust symbol in the legacy mangling (`_ZN...17h<16 hex>E`): Itanium
/// in form, but not C++ (with a `.llvm.N` suffix too).
fn is_rust_legacy(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or(name);
    let Some(body) = base.strip_suffix('E') else {
        return false;
    };
    body.len() > 19
        && body[body.len() - 19..].starts_with("17h")
        && body[body.len() - 16..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

/// The last `::` component of a qualified name (outside template
/// arguments): `bar` of `ns::Foo<a::b>::bar`.
fn unqualified(name: &str) -> &str {
    let (mut depth, mut start) = (0i32, 0);
    let b = name.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b':' if depth == 0 && b.get(i + 1) == Some(&b':') => start = i + 2,
            _ => {}
        }
    }
    &name[start.min(name.len())..]
}

/// Symbols sorted by address; aliases at one address keep the preferred
/// name first (global, then the fewest leading underscores, then by name).
#[derive(Clone, Debug, Default)]
pub struct SymbolTable {
    syms: Vec<Symbol>,
    /// Every name a pattern without wildcards can match (linkage names
    /// and, for C++, the demangled forms [`Symbol::matches`] tries), to
    /// the symbols' indexes; built on first use. A pattern in a known
    /// module is one exact point per function, so a wildcard over a big
    /// library makes thousands of look-ups.
    names: std::sync::OnceLock<std::collections::HashMap<String, Vec<usize>>>,
}

impl SymbolTable {
    pub fn new(mut syms: Vec<Symbol>) -> SymbolTable {
        syms.retain(|s| !s.name.is_empty() && s.addr != 0);
        syms.sort_by(|a, b| {
            a.addr
                .cmp(&b.addr)
                .then(b.global.cmp(&a.global))
                .then(underscores(&a.name).cmp(&underscores(&b.name)))
                .then(a.name.cmp(&b.name))
        });
        syms.dedup_by(|b, a| a.addr == b.addr && a.name == b.name);
        SymbolTable {
            syms,
            names: Default::default(),
        }
    }

    /// The symbols `pattern` names ([`Symbol::matches`] by `glob`), in
    /// address order; through the name index when it has no wildcard.
    pub fn matching(&self, pattern: &str, glob: impl Fn(&str, &str) -> bool) -> Vec<&Symbol> {
        if pattern.contains(['*', '?']) {
            return self
                .syms
                .iter()
                .filter(|s| s.matches(pattern, &glob))
                .collect();
        }
        let names = self.names.get_or_init(|| {
            let mut names: std::collections::HashMap<String, Vec<usize>> = Default::default();
            for (i, s) in self.syms.iter().enumerate() {
                let mut add = |n: &str| {
                    let v = names.entry(n.to_string()).or_default();
                    if v.last() != Some(&i) {
                        v.push(i);
                    }
                };
                add(&s.name);
                if let Some(d) = demangle(&s.name) {
                    add(&d.full);
                    add(&d.short);
                    add(unqualified(&d.full));
                    add(unqualified(&d.short));
                }
            }
            names
        });
        names
            .get(pattern)
            .map(|v| v.iter().map(|&i| &self.syms[i]).collect())
            .unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Symbol> {
        self.syms.iter()
    }

    /// Functions, by exact name.
    pub fn function(&self, name: &str) -> Option<&Symbol> {
        self.syms.iter().find(|s| s.func && s.name == name)
    }

    /// The symbol containing `addr` (within its size, or the nearest one
    /// below for a symbol of size 0), with the offset into it.
    pub fn lookup(&self, addr: u64) -> Option<(&Symbol, u64)> {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        if i == 0 {
            return None;
        }
        let at = self.syms[i - 1].addr;
        // The first (preferred) alias at that address.
        let first = self.syms[..i].partition_point(|s| s.addr < at);
        let s = &self.syms[first..i]
            .iter()
            .find(|s| addr - s.addr < s.size.max(1))?;
        Some((s, addr - s.addr))
    }

    /// Adds symbols not already present (a separate debug file's
    /// `.symtab` on top of `.dynsym`).
    pub fn merge(&mut self, more: Vec<Symbol>) {
        let mut all = std::mem::take(&mut self.syms);
        all.extend(more);
        *self = SymbolTable::new(all);
    }
}

fn underscores(name: &str) -> usize {
    name.bytes().take_while(|&b| b == b'_').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, addr: u64, size: u64, global: bool) -> Symbol {
        Symbol {
            name: name.into(),
            addr,
            size,
            func: true,
            global,
        }
    }

    #[test]
    fn lookup_prefers_global_plain_alias() {
        let t = SymbolTable::new(vec![
            sym("__libc_malloc", 0x100, 0x40, true),
            sym("malloc", 0x100, 0x40, true),
            sym("helper", 0x100, 0x40, false),
            sym("free", 0x200, 0x10, true),
        ]);
        let (s, off) = t.lookup(0x120).unwrap();
        assert_eq!((s.name.as_str(), off), ("malloc", 0x20));
        assert_eq!(t.lookup(0x210), None);
        assert_eq!(t.lookup(0x20f).unwrap().0.name, "free");
        assert_eq!(t.lookup(0xff), None);
    }

    /// The name index finds what a scan with [`Symbol::matches`] finds.
    #[test]
    fn matching_by_index_equals_matching_by_scan() {
        let t = SymbolTable::new(vec![
            sym("_ZN2ns5Shape4areaEv", 0x10, 1, true),
            sym("_ZN2ns6Circle4areaEv", 0x20, 1, true),
            sym("area", 0x30, 1, false),
            sym("__libc_write", 0x40, 1, true),
            sym("write", 0x40, 1, true),
        ]);
        let glob = crate::glob::glob;
        for p in [
            "area",
            "area()",
            "ns::Shape::area",
            "ns::Shape::area()",
            "write",
            "__libc_write",
            "_ZN2ns6Circle4areaEv",
            "nothing",
            "ns::*",
            "*area*",
        ] {
            let scan: Vec<&Symbol> = t.iter().filter(|s| s.matches(p, glob)).collect();
            assert_eq!(t.matching(p, glob), scan, "{p}");
        }
        assert_eq!(t.matching("area", glob).len(), 3);
    }

    #[test]
    fn cxx_names_are_demangled_and_matched_like_systemtap() {
        let glob = |p: &str, t: &str| match (p.strip_prefix('*'), p.strip_suffix('*')) {
            (Some(_), Some(_)) => t.contains(&p[1..p.len() - 1]),
            (None, Some(head)) => t.starts_with(head),
            _ => p == t,
        };
        let m = sym("_ZN2ns5Shape4areaEv", 0x10, 1, true);
        assert_eq!(m.shown(), "ns::Shape::area()");
        for p in [
            "ns::Shape::area",
            "ns::Shape::area()",
            "area",
            "area()",
            "ns::*",
            "*Shape*",
            "_ZN2ns5Shape4areaEv",
        ] {
            assert!(m.matches(p, glob), "{p}");
        }
        assert!(!m.matches("Shape", glob));
        let c = sym("add", 0x20, 1, true);
        assert_eq!(c.shown(), "add");
        assert!(c.matches("add", glob) && !c.matches("ad", glob));
        assert_eq!(unqualified("ns::Box<a::b>::get"), "get");
        assert_eq!(unqualified("max<int>"), "max<int>");
    }

    #[test]
    fn rust_names_are_demangled_without_their_hash() {
        let glob = |p: &str, t: &str| match p.strip_suffix('*') {
            Some(head) => t.starts_with(head),
            None => p == t,
        };
        let legacy = sym("_ZN4core3fmt5write17h0123456789abcdefE", 0x30, 1, true);
        assert_eq!(legacy.shown(), "core::fmt::write");
        assert!(legacy.matches("core::fmt::write", glob));
        assert!(legacy.matches("write", glob) && legacy.matches("core::*", glob));
        let clone = sym("_ZN1a4deep17h0123456789abcdefE.llvm.42", 0x40, 1, false);
        assert_eq!(clone.shown(), "a::deep");
        // v0: `mycrate::main`, its crate disambiguator not shown.
        let v0 = sym("_RNvCs1234_7mycrate4main", 0x50, 1, true);
        assert_eq!(v0.shown(), "mycrate::main");
        assert!(v0.matches("main", glob) && v0.matches("mycrate::main", glob));
        let t = SymbolTable::new(vec![legacy, v0]);
        assert_eq!(t.matching("main", glob).len(), 1);
        assert_eq!(t.matching("core::fmt::write", glob).len(), 1);
    }
}
