//! Function probes of a session (`process("P").function("F")`, `.plt`,
//! `.statement`, `.library`, `.return`): where they are in each traced
//! process. Points are resolved against a process's modules when it is
//! adopted, when it execs, and whenever the dynamic loader reports a change
//! (a breakpoint on ld.so's `_dl_debug_state`, the r_debug `r_brk` hook,
//! whose `ret` the core emulates): libraries mapped at start-up and by
//! `dlopen` alike. The breakpoints themselves belong to the utrace core.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use crate::elf::{AddressSpaceMap, ImageCache, LoadedModule, read_maps};
use crate::glob::glob;
pub use crate::hit::UserFunction;
use crate::tid::Tid;
use crate::utrace::Control;

use super::marks::{Marker, NoteCache};
use super::points::{FunctionPoint, FunctionSite, Hook};
use super::unwinder::{self, UnwindStep};

/// Maps by pid or address looked up at every hit: the tracer core's cheap
/// hash (`TidHasher`: kernel-chosen ids and addresses, no adversary), not
/// SipHash.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<crate::tid::TidHasher>>;

/// What fires at one breakpoint address of one process. Shared (`Rc`)
/// between the table and a hit being handled, so a hit allocates nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct SiteHooks {
    pub entry: Vec<Hook>,
    pub ret: Vec<Hook>,
    /// The function's name (`probefunc()`) as the first entry and return
    /// hooks placed here named it.
    pub entry_name: Option<Rc<str>>,
    pub ret_name: Option<Rc<str>>,
    /// At a USDT marker: the marker (its arguments, name, semaphore).
    pub mark: Option<Rc<Marker>>,
}

/// The function-probe state of a session.
#[derive(Default)]
pub(crate) struct FunctionProbes {
    cache: ImageCache,
    notes: NoteCache,
    /// Per process: breakpoint address -> hooks.
    sites: IdMap<i32, IdMap<u64, Rc<SiteHooks>>>,
    /// Per process: the loader's `_dl_debug_state`.
    loader: IdMap<i32, u64>,
    /// Per process, with return probes: the unwinder's entry points.
    unwinder: IdMap<i32, IdMap<u64, UnwindStep>>,
    /// Entry arguments of live return frames, by cookie (also where
    /// `@entry` values of a return probe would be kept).
    entries: IdMap<u64, [i64; 6]>,
    next_cookie: u64,
    /// The session's modules per process, for `usymname` and friends.
    pub spaces: IdMap<i32, Rc<AddressSpaceMap>>,
}

impl FunctionProbes {
    pub fn site(&self, pid: i32, addr: u64) -> Option<&Rc<SiteHooks>> {
        self.sites.get(&pid)?.get(&addr)
    }

    pub fn is_loader(&self, pid: i32, addr: u64) -> bool {
        self.loader.get(&pid) == Some(&addr)
    }

    /// What the unwinder breakpoint at `addr` does, if it is one.
    pub fn unwind_step(&self, pid: i32, addr: u64) -> Option<UnwindStep> {
        self.unwinder.get(&pid)?.get(&addr).copied()
    }

    pub fn save_entry(&mut self, args: [i64; 6]) -> u64 {
        self.next_cookie += 1;
        self.entries.insert(self.next_cookie, args);
        self.next_cookie
    }

    pub fn take_entry(&mut self, cookie: u64) -> Option<[i64; 6]> {
        self.entries.remove(&cookie)
    }

    /// The process exec'd or ended: its breakpoints are gone with its mm.
    pub fn forget(&mut self, pid: i32) {
        self.sites.remove(&pid);
        self.loader.remove(&pid);
        self.unwinder.remove(&pid);
        self.spaces.remove(&pid);
    }

    /// Takes out every breakpoint this session placed (one use each: a
    /// site another daemon session also uses stays), for a session that
    /// ends while its processes run on.
    pub fn remove_all(&mut self, ctl: &mut Control) {
        for (pid, sites) in self.sites.drain() {
            for addr in sites.keys() {
                let _ = ctl.remove_breakpoint(Tid(pid), *addr);
            }
        }
        for (pid, addr) in self.loader.drain() {
            let _ = ctl.remove_breakpoint(Tid(pid), addr);
        }
    }

    /// A fork/vfork child has the parent's breakpoints (copied memory).
    pub fn cloned(&mut self, parent: i32, child: i32) {
        if let Some(s) = self.sites.get(&parent).cloned() {
            self.sites.insert(child, s);
        }
        if let Some(&l) = self.loader.get(&parent) {
            self.loader.insert(child, l);
        }
        if let Some(u) = self.unwinder.get(&parent).cloned() {
            self.unwinder.insert(child, u);
        }
        if let Some(s) = self.spaces.get(&parent).cloned() {
            self.spaces.insert(child, s);
        }
    }

    /// Places the points that apply to process `pid` (`applies` checks a
    /// hook's process filter) in every module now mapped; idempotent.
    pub fn place(
        &mut self,
        ctl: &mut Control,
        pid: i32,
        points: &[(Hook, FunctionPoint)],
        applies: impl Fn(&Hook) -> bool,
        in_process: impl Fn(&Hook) -> bool,
    ) {
        let Ok(maps) = read_maps(pid) else { return };
        let space = AddressSpaceMap::new(&maps, &mut self.cache);
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut wanted: Vec<(u64, Hook, Rc<str>, bool, Option<Rc<Marker>>)> = Vec::new();
        // Addresses some point reaches other than as a function's entry.
        // (A marker's `nop` is patched as an entry is: not one of them.)
        let mut not_entry: std::collections::HashSet<u64> = Default::default();
        // Each library path resolved once (a pattern over a big library
        // is thousands of points naming it).
        let mut canonical: HashMap<&str, String> = HashMap::new();
        for (hook, fp) in points.iter().filter(|(h, _)| applies(h)) {
            let lib = fp.library.as_deref().map(|l| {
                canonical
                    .entry(l)
                    .or_insert_with(|| {
                        std::fs::canonicalize(l)
                            .map(|p| p.to_string_lossy().into_owned())
                            .unwrap_or_else(|_| l.to_string())
                    })
                    .clone()
            });
            if let FunctionSite::Absolute(addr) = fp.site {
                not_entry.insert(addr);
                if fp.library.is_none() {
                    wanted.push((
                        addr,
                        hook.clone(),
                        format!("{addr:#x}").into(),
                        fp.returning,
                        None,
                    ));
                }
                continue;
            }
            for m in space
                .modules
                .iter()
                .filter(|m| module_matches(m, fp, lib.as_deref(), &exe))
            {
                if let FunctionSite::Mark { provider, name } = &fp.site {
                    for (addr, mark) in
                        super::marks::resolve(&mut self.notes, m, provider.as_deref(), name)
                    {
                        let func: Rc<str> = mark.function.as_str().into();
                        wanted.push((addr, hook.clone(), func, false, Some(mark)));
                    }
                    continue;
                }
                let entry = matches!(fp.site, FunctionSite::Function { offset: 0, .. });
                for (addr, name) in resolve(m, &fp.site, fp.returning) {
                    if !entry {
                        not_entry.insert(addr);
                    }
                    wanted.push((addr, hook.clone(), name, fp.returning, None));
                }
            }
        }
        if let Some(before) = self.spaces.get(&pid) {
            self.drop_unmapped(ctl, pid, before.clone(), &space);
        }
        let sites = self.sites.entry(pid).or_default();
        // Where the data plane patches before any thread runs (`-x`), an
        // entry whose hooks all run in process gets no int3 first: a
        // thread trapped on one would need utap alive to go on.
        let mut all_in_process: HashMap<u64, bool> = HashMap::new();
        if ctl.dataplane().is_some_and(|p| p.patches_at_attach) {
            let marks: std::collections::HashSet<u64> = wanted
                .iter()
                .filter_map(|w| w.4.as_ref().map(|_| w.0))
                .collect();
            for (addr, hook, _, returning, _) in &wanted {
                // A marker that is also a probed function's entry with a
                // return probe is not offered (`offer_entries`).
                let ok = !not_entry.contains(addr)
                    && in_process(hook)
                    && !(*returning && marks.contains(addr));
                *all_in_process.entry(*addr).or_insert(ok) &= ok;
            }
        }
        for (addr, hook, name, returning, mark) in wanted {
            if !sites.contains_key(&addr) {
                let deferred = all_in_process.get(&addr) == Some(&true);
                if !deferred && ctl.insert_breakpoint(Tid(pid), addr).is_err() {
                    continue;
                }
                sites.insert(addr, Rc::default());
            }
            let site = Rc::make_mut(sites.get_mut(&addr).expect("just inserted"));
            if let Some(mark) = mark.filter(|_| site.mark.is_none()) {
                if mark.semaphore != 0 {
                    // Is-enabled: the program takes the marker's branch
                    // only while this count is non-zero.
                    let _ = ctl.enable_semaphore(Tid(pid), mark.semaphore);
                }
                site.mark = Some(mark);
            }
            let (list, first_name) = if returning {
                (&mut site.ret, &mut site.ret_name)
            } else {
                (&mut site.entry, &mut site.entry_name)
            };
            if !list
                .iter()
                .any(|h| h.probe == hook.probe && h.point == hook.point)
            {
                list.push(hook);
                first_name.get_or_insert(name);
            }
        }
        // Go moves goroutines between threads and copies their stacks: a
        // hijacked return must be able to go on without its frame, which
        // only the tracer's per-address stubs can.
        let go = space
            .modules
            .iter()
            .any(|m| m.image.symbols.function("runtime.goexit").is_some());
        offer_entries(ctl, pid, &space, sites, &not_entry, &in_process, go);
        if !self.loader.contains_key(&pid) {
            let found = space.modules.iter().find_map(|m| {
                let s = m.image.symbols.function("_dl_debug_state")?;
                Some(s.addr.wrapping_add(m.bias))
            });
            if let Some(addr) = found {
                if ctl.insert_breakpoint(Tid(pid), addr).is_ok() {
                    self.loader.insert(pid, addr);
                }
            }
        }
        if points.iter().any(|(h, fp)| fp.returning && applies(h)) {
            self.place_unwinder(ctl, pid, &space);
        }
        self.spaces.insert(pid, Rc::new(space));
    }

    /// Sites in modules that are no longer mapped where they were (a
    /// library dlclosed, maybe loaded again elsewhere or at the same
    /// place with fresh bytes) are forgotten, here and in the core, so
    /// they are placed again and nothing is written back at detach.
    fn drop_unmapped(
        &mut self,
        ctl: &mut Control,
        pid: i32,
        before: Rc<AddressSpaceMap>,
        now: &AddressSpaceMap,
    ) {
        let gone = |addr: u64| match (before.module_of(addr), now.module_of(addr)) {
            (Some(b), Some(n)) => b.image.path != n.image.path || b.bias != n.bias,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let mut forget = |addr: u64| {
            let g = gone(addr);
            if g {
                ctl.forget_breakpoint(Tid(pid), addr);
            }
            !g
        };
        if let Some(sites) = self.sites.get_mut(&pid) {
            sites.retain(|&addr, _| forget(addr));
        }
        if let Some(placed) = self.unwinder.get_mut(&pid) {
            placed.retain(|&addr, _| forget(addr));
        }
    }

    /// Breakpoints on the unwinder's entry points now mapped (libraries
    /// may come later, by dlopen), so exceptions cross return probes.
    fn place_unwinder(&mut self, ctl: &mut Control, pid: i32, space: &AddressSpaceMap) {
        let placed = self.unwinder.entry(pid).or_default();
        for (addr, step) in unwinder::sites(space) {
            if !placed.contains_key(&addr) && ctl.insert_breakpoint(Tid(pid), addr).is_ok() {
                placed.insert(addr, step);
            }
        }
    }
}

/// Offers the data plane every function entry and USDT marker of `pid`
/// whose entry and return hooks all run in process (no other point
/// there): its first hit patches it with a jump instead of the `int3`,
/// and its returns are hijacked in the program (`dataplane::function`);
/// a marker's stub loads the marker's arguments first.
fn offer_entries(
    ctl: &mut Control,
    pid: i32,
    space: &AddressSpaceMap,
    sites: &IdMap<u64, Rc<SiteHooks>>,
    not_entry: &std::collections::HashSet<u64>,
    in_process: impl Fn(&Hook) -> bool,
    go: bool,
) {
    if ctl.dataplane().is_none() {
        return;
    }
    let pairs = |hooks: &[Hook]| -> Vec<(usize, usize)> {
        hooks.iter().map(|h| (h.probe, h.point)).collect()
    };
    for (&addr, site) in sites {
        let hijackable = site.ret.is_empty()
            || !go
                && !site
                    .ret_name
                    .as_deref()
                    .or(site.entry_name.as_deref())
                    .is_some_and(returns_twice_or_unwinds);
        let plain = !not_entry.contains(&addr) && hijackable;
        let hooked = !site.entry.is_empty() || !site.ret.is_empty();
        if !plain || !hooked || !site.entry.iter().chain(&site.ret).all(&in_process) {
            continue;
        }
        match &site.mark {
            Some(mark) if site.ret.is_empty() => {
                ctl.offer_mark_site(Tid(pid), addr, &pairs(&site.entry), &mark.args);
            }
            Some(_) => {}
            None => {
                // The module's load bias, for target variables at
                // link-time addresses (`dataplane::plans`).
                let bias = space
                    .modules
                    .iter()
                    .find(|m| m.start <= addr && addr < m.end)
                    .map_or(0, |m| m.bias);
                let (entry, ret) = (pairs(&site.entry), pairs(&site.ret));
                // What `probefunc()` answers there (`engine`'s hit path).
                let func = site.entry_name.as_deref().or(site.ret_name.as_deref());
                ctl.offer_function_site(Tid(pid), addr, &entry, &ret, bias, func.unwrap_or(""))
            }
        }
    }
}

/// Whether a point's module is `m`: the executable, or the library named
/// by path, file name or soname (wildcards allowed); `canon`: the
/// library's canonical path.
fn module_matches(m: &LoadedModule, fp: &FunctionPoint, canon: Option<&str>, exe: &str) -> bool {
    match &fp.library {
        None => m.image.path == exe,
        Some(lib) => {
            m.image.path == canon.unwrap_or(lib)
                || glob(lib, &m.image.path)
                || glob(lib, m.image.short_name())
                || m.image.soname.as_deref().is_some_and(|s| glob(lib, s))
        }
    }
}

/// Run-time addresses (and names) of a site in one module.
/// An entry `.function` probe goes after the prologue where the debug
/// information says so (see `crate::dwarf::entry_pc`).
fn resolve(m: &LoadedModule, site: &FunctionSite, returning: bool) -> Vec<(u64, Rc<str>)> {
    let mut out: Vec<(u64, Rc<str>)> = Vec::new();
    match site {
        FunctionSite::Function { name, offset } => {
            for s in m
                .image
                .symbols
                .matching(name, glob)
                .into_iter()
                .filter(|s| s.func)
            {
                let at = match (*offset, returning) {
                    (0, false) => crate::dwarf::entry_pc(&m.image, s.addr),
                    _ => s.addr.wrapping_add(*offset),
                };
                let addr = at.wrapping_add(m.bias);
                if !out.iter().any(|(a, _)| *a == addr) {
                    out.push((addr, s.shown().into()));
                }
            }
        }
        FunctionSite::Plt(name) => {
            for p in m.image.plt.iter().filter(|p| glob(name, &p.name)) {
                out.push((p.addr.wrapping_add(m.bias), p.name.as_str().into()));
            }
        }
        FunctionSite::Absolute(_) | FunctionSite::Mark { .. } => {}
    }
    out
}

/// Functions whose return the data plane must not hijack: they return
/// twice (a longjmp or the parent of a vfork comes back to the address
/// they saved, which would be the return stub's with its frame gone), or
/// they are the unwinder's, which reads its own return address. Their
/// return probes stay on the tracer's route, whose per-address stubs go
/// on by themselves.
fn returns_twice_or_unwinds(name: &str) -> bool {
    const TWICE: [&str; 9] = [
        "setjmp",
        "_setjmp",
        "__setjmp",
        "sigsetjmp",
        "__sigsetjmp",
        "savectx",
        "getcontext",
        "vfork",
        "__vfork",
    ];
    TWICE.contains(&name) || name.starts_with("_Unwind_")
}
