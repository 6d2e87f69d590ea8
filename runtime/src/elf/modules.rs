//! The ELF modules mapped in one address space, with their bias: turns any
//! address of a traced process into a symbol (`usymname`, `usymdata`,
//! `umodname`). Images are shared through an [`ImageCache`] keyed by device
//! and inode, so libc is read once per session.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::image::ElfImage;
use super::maps::Mapping;
use super::symbols::Symbol;

/// ELF images by (device, inode); a file that is not ELF is remembered as
/// `None` so it is not read again.
#[derive(Default)]
pub struct ImageCache {
    images: HashMap<((u32, u32), u64), Option<Arc<ElfImage>>>,
}

impl ImageCache {
    /// The image of a mapped file (read on first use).
    pub fn get(&mut self, m: &Mapping) -> Option<Arc<ElfImage>> {
        if m.inode == 0 || !m.path.starts_with('/') {
            return None;
        }
        self.images
            .entry((m.dev, m.inode))
            .or_insert_with(|| {
                ElfImage::open(Path::new(&m.path))
                    .ok()
                    .filter(|i| i.dev == m.dev && i.inode == m.inode)
                    .map(Arc::new)
            })
            .clone()
    }
}

/// One module mapped in a process.
#[derive(Clone, Debug)]
pub struct LoadedModule {
    pub image: Arc<ElfImage>,
    pub bias: u64,
    /// The run-time range of its mappings.
    pub start: u64,
    pub end: u64,
}

/// The modules of one address space.
#[derive(Clone, Debug, Default)]
pub struct AddressSpaceMap {
    pub modules: Vec<LoadedModule>,
}

impl AddressSpaceMap {
    /// From a process's mappings; files that are not ELF are skipped.
    pub fn new(maps: &[Mapping], cache: &mut ImageCache) -> AddressSpaceMap {
        let mut modules: Vec<LoadedModule> = Vec::new();
        for m in maps {
            if let Some(found) = modules
                .iter_mut()
                .find(|x| x.image.dev == m.dev && x.image.inode == m.inode && m.inode != 0)
            {
                found.start = found.start.min(m.start);
                found.end = found.end.max(m.end);
                continue;
            }
            let Some(image) = cache.get(m) else { continue };
            let Some(bias) = image.bias(maps) else {
                continue;
            };
            modules.push(LoadedModule {
                image,
                bias,
                start: m.start,
                end: m.end,
            });
        }
        AddressSpaceMap { modules }
    }

    /// The module holding run-time address `addr`.
    pub fn module_of(&self, addr: u64) -> Option<&LoadedModule> {
        self.modules
            .iter()
            .find(|m| addr >= m.start && addr < m.end)
    }

    /// The symbol holding `addr`, its offset, and the module.
    pub fn symbol_of(&self, addr: u64) -> Option<(&Symbol, u64, &LoadedModule)> {
        let m = self.module_of(addr)?;
        let (s, off) = m.image.symbols.lookup(addr.wrapping_sub(m.bias))?;
        Some((s, off, m))
    }

    /// `usymname`: the symbol's name, else the address in hex.
    pub fn symname(&self, addr: u64) -> String {
        match self.symbol_of(addr) {
            Some((s, _, _)) => s.shown().into_owned(),
            None => format!("{addr:#x}"),
        }
    }

    /// `usymdata`: `name+0xOFF/0xSIZE [module]`, or without a symbol
    /// `0xADDR [module+0xOFF/0xSIZE]`, or just the address.
    pub fn symdata(&self, addr: u64) -> String {
        if let Some((s, off, m)) = self.symbol_of(addr) {
            return format!("{}+{off:#x}/{:#x} [{}]", s.shown(), s.size, m.image.path);
        }
        match self.module_of(addr) {
            Some(m) => format!(
                "{addr:#x} [{}+{:#x}/{:#x}]",
                m.image.path,
                addr - m.start,
                m.end - m.start
            ),
            None => format!("{addr:#x}"),
        }
    }

    /// `umodname`: the module's path.
    pub fn modname(&self, addr: u64) -> Option<&str> {
        self.module_of(addr).map(|m| m.image.path.as_str())
    }
}
