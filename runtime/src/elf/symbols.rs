//! A module's symbol table, sorted by address: function lookup by name (for
//! probe points) and by address (for `usymname`/`usymdata`).

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

/// Symbols sorted by address; aliases at one address keep the preferred
/// name first (global, then the fewest leading underscores, then by name).
#[derive(Clone, Debug, Default)]
pub struct SymbolTable {
    syms: Vec<Symbol>,
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
        SymbolTable { syms }
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
}
