//! The control plane's side of the data plane (`crate::dataplane`, whose
//! module doc states the invariants each step keeps): mapping the region
//! into a process, giving threads their blocks, patching a trapped site,
//! and taking everything out again. It sits here, in the utrace core, as
//! the breakpoints' control side does (`breakpoint`): the data plane is a
//! room below the core, which holds its `Plane` and drives it at stops.

use std::sync::Arc;

use iced_x86::{Code, FlowControl, Instruction};

use super::control::Core;
use super::ptrace::{self, Status};
use super::{Regs, Tid, Tracer};
use crate::dataplane::SyscallSite;
use crate::dataplane::code::{self, Resume};
use crate::dataplane::layout::{self, CODE_LEN};
use crate::dataplane::{function, site};
use crate::uprobe::{mem, xol};

/// The most code decoded for the boundary check of one function.
const MAX_FUNCTION: u64 = 64 << 10;

impl Tracer {
    /// At a seccomp stop of `tid`: if its syscall is one the data plane
    /// serves and its site can be patched, patches it (mapping the region
    /// first if this is the process's first), sends the thread back to the
    /// site with the call skipped, so the stub serves it, and resumes it.
    /// False if the stop is to be reported as usual.
    pub(crate) fn dataplane_seccomp(&mut self, tid: Tid) -> bool {
        match ptrace::get_regs(tid) {
            Ok(regs) => self.serve_trapped(tid, regs, regs.orig_rax),
            Err(_) => false,
        }
    }

    /// As `dataplane_seccomp`, for a syscall `nr` trapped (not made yet)
    /// with `regs`, rip just past its `syscall` (a seccomp stop).
    pub(crate) fn serve_trapped(&mut self, tid: Tid, regs: Regs, nr: u64) -> bool {
        let Some((site, rerun)) = self.patch_trapped(tid, &regs, nr) else {
            return false;
        };
        // The injected calls put `regs` back, %gs included: the block's
        // address goes in again with the rest.
        let Some(block) = self.core.dataplane.as_ref().and_then(|p| p.block_addr(tid)) else {
            return false;
        };
        let mut r = regs;
        // The call is skipped (an injected call may have taken its place
        // already); back at the site, the jump to the stub makes it
        // again, the displaced run going first. A run that would compute
        // something else a second time is not run again: the thread makes
        // the call at the site's own `syscall`, which traps and is served
        // at that stop.
        r.rip = if rerun { site } else { regs.rip - 2 };
        r.rax = nr;
        r.orig_rax = u64::MAX;
        r.gs_base = block;
        if ptrace::set_regs(tid, &r).is_err() {
            return false;
        }
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.in_syscall = false;
        }
        self.finish_stop_pub(tid);
        true
    }

    /// Whether the site of syscall `nr`, made by `tid` with `regs` (rip
    /// just past its `syscall`), is one to patch: a call the data plane
    /// serves, in a process ready for it, not refused or patched before.
    /// Reads only the tracer's own state.
    pub(crate) fn patchable(&self, tid: Tid, regs: &Regs, nr: u64) -> bool {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return false;
        };
        if plane.quiesced || !plane.image.serves(nr as i64) {
            return false;
        }
        let pid = self.pid_of(tid);
        let ready = match plane.spaces.get(&pid).and_then(|s| s.mapped) {
            Some(true) => plane.blocks.contains_key(&tid),
            Some(false) => false,
            None => true,
        };
        if !ready || plane.vforked.contains(&pid) {
            return false;
        }
        let call = regs.rip.wrapping_sub(2);
        !plane
            .spaces
            .get(&pid)
            .is_some_and(|s| s.refused.contains(&call) || s.stub_at(regs.rip).is_some())
    }

    /// Patches the site of syscall `nr` that `tid` (stopped, `regs`
    /// injectable) made, mapping the region first if needed; every thread
    /// of the process is held meanwhile. Returns the site (where the
    /// jump to the stub starts) and whether its run can be run again
    /// (`site::reruns_alike`). The thread's registers are `regs` again
    /// after, save on failure of an injected call.
    pub(crate) fn patch_trapped(&mut self, tid: Tid, regs: &Regs, nr: u64) -> Option<(u64, bool)> {
        if !self.patchable(tid, regs, nr) {
            return None;
        }
        let pid = self.pid_of(tid);
        let call = regs.rip.wrapping_sub(2);
        let Some((run, orig)) = self.displaceable(pid, call) else {
            self.refuse(pid, call);
            return None;
        };
        let site = run.first()?.ip();
        if self
            .core
            .dataplane
            .as_ref()
            .and_then(|p| p.spaces.get(&pid))
            .is_some_and(|s| s.sites.contains_key(&site))
        {
            // Patched, and still trapped here: a branch or a restart to
            // the syscall itself. Served at the stop.
            return None;
        }
        self.core.hold_for_text(pid);
        // A thread held inside the run would come back into the jump:
        // not now (a later trap tries again).
        let done = !self.thread_inside(pid, site + 1..call)
            && self.map_into(tid, pid, regs)
            && self.patch(tid, pid, &run, orig, regs);
        self.release_text_hold();
        done.then(|| (site, site::reruns_alike(&run)))
    }

    /// Whether a thread of `pid` (held) is stopped with its rip in `range`.
    fn thread_inside(&self, pid: Tid, range: std::ops::Range<u64>) -> bool {
        self.core
            .threads_of(pid)
            .into_iter()
            .any(|t| ptrace::get_regs(t).is_ok_and(|r| range.contains(&r.rip)))
    }

    pub(crate) fn pid_of(&self, tid: Tid) -> Tid {
        self.core.threads.get(&tid).map_or(tid, |t| t.tgid)
    }

    fn refuse(&mut self, pid: Tid, site: u64) {
        if let Some(p) = self.core.dataplane.as_mut() {
            p.spaces.entry(pid).or_default().refused.insert(site);
            p.counts.sites_refused += 1;
        }
    }

    /// The run of instructions right before the `syscall` at `call` that
    /// a stub can take over (`site::displaced_before`): the function
    /// holding it (by its symbol) decodes with it ending exactly at
    /// `call`; no branch of the module, and no return of the function's
    /// calls, lands inside it; no breakpoint or function patch lies in it.
    /// Returns the run and its bytes.
    fn displaceable(&mut self, pid: Tid, call: u64) -> Option<(Vec<Instruction>, Vec<u8>)> {
        let (start, code) = self.function_code(pid, call)?;
        if call + 2 > start + code.len() as u64 {
            return None;
        }
        let insns = function::decode_function(&code, start);
        let at = insns.iter().position(|i| i.next_ip() == call)?;
        if insns.get(at + 1)?.code() != Code::Syscall {
            return None;
        }
        let run = site::displaced_before(&insns, at)?;
        let site = run.first()?.ip();
        let ok = !function::branch_lands_in(&insns, site + 1..call)
            && !site::returns_land_in(&insns, site + 1..call)
            && !self.lands_in_module(pid, site + 1..call)
            && !self.patched_in(pid, site..call);
        let bytes = code[(site - start) as usize..(call - start) as usize].to_vec();
        ok.then_some((run, bytes))
    }

    /// Whether a breakpoint or a patched function entry of `pid` lies in
    /// `range`.
    fn patched_in(&self, pid: Tid, range: std::ops::Range<u64>) -> bool {
        let bps = self
            .core
            .uprobes
            .space(pid)
            .is_some_and(|s| s.sites.keys().any(|a| range.contains(a)));
        let entries = self
            .core
            .dataplane
            .as_ref()
            .and_then(|p| p.spaces.get(&pid))
            .is_some_and(|s| {
                s.fsites
                    .iter()
                    .any(|(&a, f)| a < range.end && range.start < a + f.orig.len() as u64)
            });
        bps || entries
    }

    /// Whether a direct branch or call anywhere in the module mapped at
    /// `range` (not only in the function: glibc's `mempcpy` jumps into
    /// `memmove` past its first instruction), or a function symbol's
    /// start, lands inside `range`. True when the module cannot be read.
    fn lands_in_module(&mut self, pid: Tid, range: std::ops::Range<u64>) -> bool {
        let Some(targets) = self.module_targets(pid, range.start) else {
            return true;
        };
        let i = targets.partition_point(|&t| t < range.start);
        targets.get(i).is_some_and(|&t| t < range.end)
    }

    /// The branch targets and symbol starts of the executable mapping of
    /// `pid` holding `addr` (see `Plane::targets`), decoded once from its
    /// bytes with our breakpoints' and patches' bytes put back.
    fn module_targets(&mut self, pid: Tid, addr: u64) -> Option<Arc<Vec<u64>>> {
        let maps = crate::elf::read_maps(pid.0).ok()?;
        let m = maps.iter().find(|m| (m.start..m.end).contains(&addr))?;
        let key = (pid, m.start, m.inode);
        if let Some(t) = self.core.dataplane.as_ref()?.targets.get(&key) {
            return Some(t.clone());
        }
        let mut bytes = vec![0u8; (m.end - m.start) as usize];
        if mem::read(pid.0, m.start, &mut bytes).ok()? != bytes.len() {
            return None;
        }
        let inside = |a: u64| {
            (m.start..m.end)
                .contains(&a)
                .then(|| (a - m.start) as usize)
        };
        if let Some(space) = self.core.uprobes.space(pid) {
            for (&a, s) in &space.sites {
                if let Some(i) = inside(a) {
                    bytes[i] = s.orig;
                }
            }
        }
        let plane = self.core.dataplane.as_mut()?;
        if let Some(space) = plane.spaces.get(&pid) {
            let origs = space.fsites.iter().map(|(&a, f)| (a, &f.orig));
            for (a, orig) in origs.chain(space.sites.iter().map(|(&a, s)| (a, &s.orig))) {
                if let Some(i) = inside(a) {
                    let n = orig.len().min(bytes.len() - i);
                    bytes[i..i + n].copy_from_slice(&orig[..n]);
                }
            }
        }
        let image = plane.cache.get(m)?;
        let bias = image.bias(&maps)?;
        let mut targets = Vec::new();
        for sym in image.symbols.iter().filter(|s| s.func && s.size > 0) {
            let start = sym.addr.wrapping_add(bias);
            let (Some(i), Some(_)) = (inside(start), inside(start + sym.size - 1)) else {
                continue;
            };
            targets.push(start);
            let code = &bytes[i..i + sym.size as usize];
            for insn in function::decode_function(code, start) {
                if matches!(
                    insn.flow_control(),
                    FlowControl::ConditionalBranch
                        | FlowControl::UnconditionalBranch
                        | FlowControl::Call
                ) {
                    targets.push(insn.near_branch_target());
                }
            }
        }
        targets.sort_unstable();
        targets.dedup();
        let targets = Arc::new(targets);
        plane.targets.insert(key, targets.clone());
        Some(targets)
    }

    /// The bytes of the function holding `addr` in `pid` (a function
    /// symbol, at most `MAX_FUNCTION` long), and its start.
    fn function_code(&mut self, pid: Tid, addr: u64) -> Option<(u64, Vec<u8>)> {
        let (start, size, func) = self.function_of(pid, addr)?;
        if !func || size == 0 || size > MAX_FUNCTION || addr >= start + size {
            return None;
        }
        let mut code = vec![0u8; size as usize];
        if mem::read(pid.0, start, &mut code).ok() != Some(code.len()) {
            return None;
        }
        Some((start, code))
    }

    /// The function holding `addr` in `pid`, by the symbols of the one
    /// module mapped there (read once per file): its start, size and
    /// whether it is a function symbol.
    fn function_of(&mut self, pid: Tid, addr: u64) -> Option<(u64, u64, bool)> {
        let plane = self.core.dataplane.as_mut()?;
        let maps = crate::elf::read_maps(pid.0).ok()?;
        let m = maps.iter().find(|m| (m.start..m.end).contains(&addr))?;
        let image = plane.cache.get(m)?;
        let bias = image.bias(&maps)?;
        let (sym, off) = image.symbols.lookup(addr.wrapping_sub(bias))?;
        Some((addr - off, sym.size, sym.func))
    }

    /// Maps the region into `pid` (run by `tid`, stopped with `regs`) and
    /// gives every thread of the process a block, once. All its threads
    /// are held.
    pub(crate) fn map_into(&mut self, tid: Tid, pid: Tid, regs: &Regs) -> bool {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return false;
        };
        if let Some(m) = plane.spaces.get(&pid).and_then(|s| s.mapped) {
            return m && plane.blocks.contains_key(&tid);
        }
        let threads = self.core.threads_of(pid);
        let leftovers = leftover_regions(pid);
        // A thread whose registers cannot be read is not at a stop yet
        // (just cloned: it runs nothing before its first stop, where it
        // gets its block like any other) or gone; its `%gs` is its
        // creator's. It refused the region for the whole process before
        // (a reader's threads starting as the first call trapped).
        let gs_free = threads.iter().all(|&t| {
            ptrace::get_regs(t).map_or(true, |r| {
                r.gs_base == 0
                    || plane.is_block(r.gs_base)
                    || leftovers.iter().any(|m| m.contains(&r.gs_base))
            })
        });
        let (base, data_len, fd) = {
            let r = &plane.image.region;
            (r.base(), r.data.len, r.fd())
        };
        let mapped = gs_free && self.remote_map(tid, pid, regs, base, data_len, fd);
        let Some(plane) = self.core.dataplane.as_mut() else {
            return false;
        };
        plane.spaces.entry(pid).or_default().mapped = Some(mapped);
        if !mapped {
            plane.counts.inject_failed += 1;
            return false;
        }
        plane.counts.processes += 1;
        for t in threads {
            self.give_block(t, pid);
        }
        self.core
            .dataplane
            .as_ref()
            .is_some_and(|p| p.blocks.contains_key(&tid))
    }

    /// Opens our memfd in `pid` (through /proc/OURPID/fd), maps its code
    /// part r-x and its data part rw- at the region's address, closes it.
    fn remote_map(
        &mut self,
        tid: Tid,
        pid: Tid,
        regs: &Regs,
        base: u64,
        data_len: u64,
        fd: i32,
    ) -> bool {
        let Some(theirs) = self.remote_fd(tid, pid, regs, fd) else {
            return false;
        };
        let mut call =
            |nr: i64, args: [u64; 6]| self.remote_syscall(tid, pid, regs, nr as u64, args);
        let shared = (libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE) as u64;
        let rx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let code_ok = call(libc::SYS_mmap, [base, CODE_LEN, rx, shared, theirs, 0]) == Some(base);
        let data_ok = code_ok
            && call(
                libc::SYS_mmap,
                [base + CODE_LEN, data_len, rw, shared, theirs, CODE_LEN],
            ) == Some(base + CODE_LEN);
        // The shadow stacks: private, so a fork child gets its own copy.
        let shadow = layout::shadow_base(base, CODE_LEN + data_len);
        let private = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
        let shadow_ok = data_ok
            && call(
                libc::SYS_mmap,
                [shadow, layout::SHADOW_AREA_LEN, rw, private, u64::MAX, 0],
            ) == Some(shadow);
        if code_ok && !shadow_ok {
            call(libc::SYS_munmap, [base, CODE_LEN + data_len, 0, 0, 0, 0]);
        }
        call(libc::SYS_close, [theirs, 0, 0, 0, 0, 0]);
        shadow_ok
    }

    /// Our memfd `fd`, opened in `pid` (run by `tid`, stopped with
    /// `regs`): taken with `pidfd_getfd`, which needs no memory of the
    /// program; else by its /proc path, written below the red zone (a
    /// stack page the thread may not have touched can be out of reach).
    fn remote_fd(&mut self, tid: Tid, pid: Tid, regs: &Regs, fd: i32) -> Option<u64> {
        let ok = |v: &u64| (*v as i64) >= 0;
        let mut call =
            |nr: i64, args: [u64; 6]| self.remote_syscall(tid, pid, regs, nr as u64, args);
        let me = std::process::id() as u64;
        if let Some(pidfd) = call(libc::SYS_pidfd_open, [me, 0, 0, 0, 0, 0]).filter(ok) {
            let got = call(libc::SYS_pidfd_getfd, [pidfd, fd as u64, 0, 0, 0, 0]);
            call(libc::SYS_close, [pidfd, 0, 0, 0, 0, 0]);
            if let Some(f) = got.filter(ok) {
                return Some(f);
            }
        }
        let path = format!("/proc/{me}/fd/{fd}\0");
        let at = (regs.rsp - 256) & !15;
        mem::write(pid.0, at, path.as_bytes()).ok()?;
        let flags = (libc::O_RDWR | libc::O_CLOEXEC) as u64;
        call(libc::SYS_open, [at, flags, 0, 0, 0, 0]).filter(ok)
    }

    /// Gives stopped thread `tid` of `pid` a block of its own (`%gs`),
    /// owned by its `%fs`, with its shadow stack: a copy of the one it
    /// inherited for a fork child's first thread (its stack is a copy, its
    /// hijacked returns with it), else empty.
    fn give_block(&mut self, tid: Tid, pid: Tid) {
        let Some(plane) = self.core.dataplane.as_mut() else {
            return;
        };
        plane.free_block(tid);
        let Some(addr) = plane.new_block(tid, pid) else {
            return;
        };
        let Ok(mut r) = ptrace::get_regs(tid) else {
            plane.free_block(tid);
            return;
        };
        let inherited = match tid == pid {
            true => plane.block_index(r.gs_base).map(|i| plane.shadow_of(i)),
            false => None,
        };
        let ours = plane.block_index(addr).map(|i| plane.shadow_of(i));
        let shadow_ok = ours.is_some_and(|to| copy_shadow(pid, inherited, to));
        // SAFETY: the new block, in our mapping; its thread is stopped.
        unsafe { (*(addr as *mut layout::Block)).owner_fs = r.fs_base };
        r.gs_base = addr;
        if !shadow_ok || ptrace::set_regs(tid, &r).is_err() {
            plane.free_block(tid);
        }
    }

    /// Writes the stub of the site `run` starts, and the jump to it over
    /// `orig`, the run's bytes; the space is held.
    fn patch(
        &mut self,
        tid: Tid,
        pid: Tid,
        run: &[Instruction],
        orig: Vec<u8>,
        regs: &Regs,
    ) -> bool {
        let Some(site) = run.first().map(|i| i.ip()) else {
            return false;
        };
        let Some(slot) = self.stub_slot(tid, pid, site, regs) else {
            return false;
        };
        let Some(plane) = self.core.dataplane.as_mut() else {
            return false;
        };
        let lens: Vec<u64> = run.iter().map(|i| i.len() as u64).collect();
        let (Some(stub), Some(jump)) = (
            code::stub(slot, run, plane.common()),
            code::site_jump(site, slot, orig.len()),
        ) else {
            return false;
        };
        if mem::write(pid.0, slot, &stub.bytes).is_err() || mem::write(pid.0, site, &jump).is_err()
        {
            return false;
        }
        let moved_len = stub.displaced_len();
        plane.spaces.entry(pid).or_default().sites.insert(
            site,
            SyscallSite {
                stub: slot,
                orig,
                offsets: stub.offsets,
                moved_len,
                lens,
            },
        );
        plane.counts.sites += 1;
        true
    }

    /// A stub slot near `site`, mapping a new page if none is left.
    fn stub_slot(&mut self, tid: Tid, pid: Tid, site: u64, regs: &Regs) -> Option<u64> {
        let plane = self.core.dataplane.as_mut()?;
        if let Some(slot) = plane.spaces.entry(pid).or_default().take_slot(site) {
            return Some(slot);
        }
        let maps = crate::elf::read_maps(pid.0).ok()?;
        let hint = xol::page_near(&maps, site)?;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
        let prot = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        let args = [hint, xol::PAGE_SIZE, prot, flags, u64::MAX, 0];
        let got = self.remote_syscall(tid, pid, regs, libc::SYS_mmap as u64, args)?;
        if got != hint {
            return None;
        }
        let space = self.core.dataplane.as_mut()?.spaces.entry(pid).or_default();
        space.pages.push((hint, 0));
        space.take_slot(site)
    }

    /// A new thread's first stop: a thread of a process with the region,
    /// or one that inherited a block (a fork child), gets its own.
    pub(crate) fn dataplane_new_thread(&mut self, tid: Tid) {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return;
        };
        let Ok(r) = ptrace::get_regs(tid) else {
            return;
        };
        let pid = self.pid_of(tid);
        // A thread cloned while the region was being mapped inherited no
        // block (its creator got one after the clone copied its
        // registers), yet runs the stubs from its first instruction.
        let mapped = !plane.quiesced && plane.spaces.get(&pid).and_then(|s| s.mapped) == Some(true);
        if plane.is_block(r.gs_base) || (mapped && !plane.blocks.contains_key(&tid)) {
            self.give_block(tid, pid);
        }
        let dispatched = self
            .core
            .threads
            .get(&tid)
            .is_some_and(|t| t.source == crate::utrace::SyscallSource::Dispatch);
        if dispatched {
            // SUD is not inherited: armed here, or PTRACE_SYSCALL.
            self.arm_thread(tid, pid);
        }
    }

    /// `child` was forked (or vforked) from `parent`'s process: it has the
    /// same stubs and patched sites; a vfork child is never patched from.
    pub(crate) fn dataplane_cloned(&mut self, parent: Tid, child: Tid, vfork: bool) {
        let Some(plane) = self.core.dataplane.as_mut() else {
            return;
        };
        if vfork {
            plane.vforked.insert(child);
            return;
        }
        if let Some(s) = plane.spaces.get(&parent) {
            let copy = s.clone();
            plane.spaces.insert(child, copy);
        }
    }

    /// `tid` exec'd (or its process is gone): the old memory and its
    /// stubs are gone with it; its block is free and `%gs` cleared.
    pub(crate) fn dataplane_exec(&mut self, tid: Tid, exec: bool) {
        let Some(plane) = self.core.dataplane.as_mut() else {
            return;
        };
        plane.free_block(tid);
        plane.spaces.remove(&tid);
        plane.vforked.remove(&tid);
        plane.targets.retain(|k, _| k.0 != tid);
        if let Some(t) = self.core.threads.get_mut(&tid)
            && t.source == crate::utrace::SyscallSource::Dispatch
        {
            // The new program runs undispatched (the kernel clears SUD at
            // exec) and without the region: PTRACE_SYSCALL from now on.
            t.source = crate::utrace::SyscallSource::Ptrace;
            t.dispatching = false;
            t.patch_at_exit = false;
        }
        if exec
            && let Ok(mut r) = ptrace::get_regs(tid)
            && r.gs_base != 0
            && plane.is_block(r.gs_base)
        {
            r.gs_base = 0;
            let _ = ptrace::set_regs(tid, &r);
        }
    }

    /// A thread died: its block is free.
    pub(crate) fn dataplane_death(&mut self, tid: Tid, leader: bool) {
        if let Some(plane) = self.core.dataplane.as_mut() {
            plane.free_block(tid);
            if leader {
                plane.spaces.remove(&tid);
                plane.vforked.remove(&tid);
                plane.targets.retain(|k, _| k.0 != tid);
            }
        }
    }

    /// The end of the session: everything taken out (see
    /// `Core::dataplane_quiesce`), then the stub pages and the region
    /// unmapped by a held thread of each process.
    pub(crate) fn dataplane_take_out(&mut self) {
        if self.core.dataplane.is_none() {
            return;
        }
        self.core.dataplane_quiesce();
        self.dataplane_unmap_quiesced();
    }

    /// After a quiesce (the threads are still held): the stub pages and
    /// the region unmapped from each process, once.
    pub(crate) fn dataplane_unmap_quiesced(&mut self) {
        let Some(plane) = self.core.dataplane.as_mut() else {
            return;
        };
        if !plane.quiesced || plane.spaces.is_empty() {
            return;
        }
        let (base, len) = (plane.image.region.base(), plane.image.region.len());
        let work: Vec<(Tid, Vec<u64>)> = plane
            .spaces
            .iter()
            .filter(|(_, s)| s.mapped == Some(true) || !s.pages.is_empty())
            .map(|(&p, s)| (p, s.pages.iter().map(|&(b, _)| b).collect()))
            .collect();
        for (pid, pages) in work {
            // A thread held at a clone or fork event is moved on to an
            // interrupt stop first (as for the slot pages).
            let owner = self.core.uprobes.owner(pid);
            // Threads at syscall stops are moved on only where SUD lets
            // calls through under PTRACE_SYSCALL (elsewhere such a stop is
            // an engine's, whose event must not be consumed here).
            let sud = self
                .core
                .dataplane
                .as_ref()
                .is_some_and(|p| p.keeper.is_some());
            let Some(tid) = self
                .held_thread_of(pid)
                .or_else(|| self.interrupt_at_event(owner))
                .or_else(|| sud.then(|| self.interrupt_at_syscall(owner)).flatten())
            else {
                continue;
            };
            let Ok(regs) = ptrace::get_regs(tid) else {
                continue;
            };
            for page in pages {
                self.remote_syscall(
                    tid,
                    pid,
                    &regs,
                    libc::SYS_munmap as u64,
                    [page, xol::PAGE_SIZE, 0, 0, 0, 0],
                );
            }
            // The region and the shadow stacks just past it.
            let len = len + layout::SHADOW_AREA_LEN;
            self.remote_syscall(
                tid,
                pid,
                &regs,
                libc::SYS_munmap as u64,
                [base, len, 0, 0, 0, 0],
            );
            if let Some(p) = self.core.dataplane.as_mut() {
                p.counts.taken_out += 1;
            }
        }
        if let Some(p) = self.core.dataplane.as_mut() {
            p.spaces.clear();
        }
    }

    /// A thread of `pid` held at our interrupt or at a signal, where an
    /// injected syscall can run.
    fn held_thread_of(&self, pid: Tid) -> Option<Tid> {
        self.core.uprobes_held.iter().find_map(|&(tid, status)| {
            let th = self.core.threads.get(&tid)?;
            let ok = match ptrace::decode(status) {
                Status::Event {
                    event: ptrace::EVENT_STOP,
                    sig,
                } => !sig.is_stop_signal(),
                Status::SignalStop(_) => true,
                _ => false,
            };
            (ok && th.tgid == pid).then_some(tid)
        })
    }
}

impl Core {
    /// Stops every in-process handler for good and lets go of the program:
    /// the header's stop flag; every thread of each process with the region
    /// held (they stay held until detached, or released by the loop after
    /// the current report); each moved out of stubs and region code; site
    /// bytes and `%gs` restored. The region's contents are then final
    /// (fold them now). Idempotent.
    pub(crate) fn dataplane_quiesce(&mut self) {
        let Some(plane) = self.dataplane.as_mut() else {
            return;
        };
        if plane.quiesced {
            return;
        }
        plane.quiesced = true;
        // SAFETY: the header is in our mapping of the region.
        unsafe {
            std::ptr::write_volatile(
                &mut (*plane.image.region.header()).stop,
                crate::dataplane::layout::STOPPED,
            )
        };
        let pids: Vec<Tid> = plane.spaces.keys().copied().collect();
        for pid in pids {
            self.hold_space(None, pid);
            self.text_hold = true;
            self.dataplane_disarm(pid);
            let tids = self.threads_of(pid);
            for tid in tids {
                self.move_out(pid, tid);
            }
            self.unhijack_returns(pid);
            let Some(plane) = self.dataplane.as_mut() else {
                return;
            };
            if let Some(space) = plane.spaces.get(&pid) {
                for (&site, s) in &space.sites {
                    let _ = mem::write(pid.0, site, &s.orig);
                }
                for (&site, f) in &space.fsites {
                    let _ = mem::write(pid.0, site, &f.orig);
                }
            }
        }
    }

    /// Thread `tid` (stopped, of the space `pid`) enters the unwinder: its
    /// hijacked returns get their real addresses back (the unwinder reads
    /// them), the frames stay (`utrace::unwinding`).
    pub(crate) fn dataplane_park_returns(&mut self, pid: Tid, tid: Tid) -> usize {
        let Some((shadow, ret_stub)) = self.shadow_of_thread(tid) else {
            return 0;
        };
        let mut parked = 0;
        for f in read_shadow(pid, shadow) {
            if mem::read_u64(pid.0, f.slot).ok() == Some(ret_stub)
                && mem::write(pid.0, f.slot, &f.orig.to_le_bytes()).is_ok()
            {
                parked += 1;
            }
        }
        parked
    }

    /// At a catch (`tid` stopped with `rsp`): the frames the unwinder
    /// removed (slots at or below rsp) are dropped, the others hijacked
    /// again.
    pub(crate) fn dataplane_rearm_returns(&mut self, pid: Tid, tid: Tid, rsp: u64) -> usize {
        let Some((shadow, ret_stub)) = self.shadow_of_thread(tid) else {
            return 0;
        };
        let frames = read_shadow(pid, shadow);
        let kept = frames.iter().take_while(|f| f.slot > rsp).count();
        if kept < frames.len() && mem::write(pid.0, shadow, &(kept as u64).to_le_bytes()).is_err() {
            return 0;
        }
        let mut rearmed = 0;
        for f in &frames[..kept] {
            if mem::read_u64(pid.0, f.slot).ok() == Some(f.orig)
                && mem::write(pid.0, f.slot, &ret_stub.to_le_bytes()).is_ok()
            {
                rearmed += 1;
            }
        }
        rearmed
    }

    /// Thread `tid`'s shadow stack and the return stub's address, if it
    /// has a block.
    fn shadow_of_thread(&self, tid: Tid) -> Option<(u64, u64)> {
        let plane = self.dataplane.as_ref()?;
        let i = *plane.blocks.get(&tid)?;
        Some((plane.shadow_of(i), plane.ret_stub()))
    }

    /// Every hijacked return of `pid`'s threads (held, moved out of
    /// region code) gets its real address back in its slot.
    fn unhijack_returns(&mut self, pid: Tid) {
        for tid in self.threads_of(pid) {
            self.dataplane_park_returns(pid, tid);
        }
    }

    /// Holds every thread of each process with the region, each out of
    /// any handler (`leave_handlers`), so that the region's tables are
    /// whole and nothing changes them: for a probe that runs held
    /// (`crate::dataplane::globals::refill`). The threads go on after the
    /// current report, as after a text change. False when the plane is
    /// off or taken out already (nothing to hold).
    pub(crate) fn dataplane_hold_still(&mut self) -> bool {
        let Some(plane) = self.dataplane.as_ref() else {
            return false;
        };
        if plane.quiesced {
            return false;
        }
        let pids: Vec<Tid> = plane.spaces.keys().copied().collect();
        for &pid in &pids {
            self.hold_space(None, pid);
        }
        self.text_hold = true;
        let inside = self.leave_handlers(&pids);
        if let Some(plane) = self.dataplane.as_mut() {
            plane.counts.held_runs += 1;
            plane.counts.held_inside += inside as u64;
        }
        true
    }

    /// Lets those of the held threads `tids` that are inside a handler
    /// (their block claimed, not at a gadget) run on a moment and holds
    /// them again, until none is, at most [`LEAVE_ROUNDS`] times; returns
    /// how many are still inside (a handler that is most of a hot loop,
    /// or one a signal handler interrupted). Such a thread's update in
    /// flight may land in a slot the fill gave another key: the script's
    /// numbers, never the program. Never a single-step: a thread stepped
    /// when utap dies keeps the trap flag (the kernel's release of
    /// tracees does not clear it) and dies of SIGTRAP at its next
    /// instruction (1 of 30 trials with stepping as a last resort).
    fn leave_handlers(&mut self, pids: &[Tid]) -> usize {
        let tids: Vec<Tid> = pids.iter().flat_map(|&p| self.threads_of(p)).collect();
        let mut inside: Vec<Tid> = tids.into_iter().filter(|&t| self.in_handler(t)).collect();
        for _ in 0..LEAVE_ROUNDS {
            let mut let_go = false;
            for &t in &inside {
                let Some(at) = self.uprobes_held.iter().position(|&(h, _)| h == t) else {
                    continue;
                };
                // Only an interrupt's stop: any other must reach the loop.
                let st = self.uprobes_held[at].1;
                let ours = matches!(ptrace::decode(st), Status::Event { event: ptrace::EVENT_STOP, sig } if !sig.is_stop_signal());
                let Some(th) = self.threads.get(&t) else {
                    continue;
                };
                if ours && ptrace::restart(th.mode.request(), t, None).is_ok() {
                    self.uprobes_held.remove(at);
                    let_go = true;
                }
            }
            if !let_go {
                break;
            }
            std::thread::sleep(LEAVE_RUN);
            // Those let go are the spaces' only running threads now.
            for &pid in pids {
                self.hold_space(None, pid);
            }
            inside.retain(|&t| self.in_handler(t));
            if inside.is_empty() {
                break;
            }
        }
        inside.len()
    }

    /// Whether held thread `tid` is inside a handler: its block claimed
    /// (`Block::busy`, read from our mapping) and not at a gadget (whose
    /// entry hooks are done).
    fn in_handler(&self, tid: Tid) -> bool {
        let Some(plane) = self.dataplane.as_ref() else {
            return false;
        };
        let Some(block) = plane.block_addr(tid) else {
            return false;
        };
        // SAFETY: the block lies in our mapping of the region; any value
        // is a valid word.
        let busy = unsafe { std::ptr::read_volatile((block + layout::BLOCK_BUSY) as *const u64) };
        busy != 0 && ptrace::get_regs(tid).is_ok_and(|r| plane.at_gadget(r.rip).is_none())
    }

    /// Steps held thread `tid` out of handler and entry code, to a gadget
    /// or back to a stub: its registers then. None if it could not be
    /// stepped. A `pushfq` stepped over saved the trap
    /// flag, and its `popfq` set it for good (the program would trap at
    /// its next instruction): cleared in the registers returned, which
    /// the caller must set.
    fn finish_hooks(&self, tid: Tid) -> Option<Regs> {
        let plane = self.dataplane.as_ref()?;
        let tgid = self.threads.get(&tid).map_or(tid, |t| t.tgid);
        let mut r = ptrace::get_regs(tid).ok()?;
        let mut steps = 0u32;
        let mut kept = Vec::new();
        let mut stepped = true;
        while plane.in_code(r.rip) && plane.at_gadget(r.rip).is_none() && steps < 1_000_000 {
            stepped =
                single_step(tid, &mut kept) && ptrace::get_regs(tid).map(|now| r = now).is_ok();
            if !stepped {
                break;
            }
            steps += 1;
        }
        requeue(tgid, tid, &kept);
        if steps > 0 {
            r.eflags &= !TRAP_FLAG;
        }
        stepped.then_some(r)
    }

    /// Moves a held thread out of stubs and region code, and clears its
    /// `%gs` if it is one of ours.
    fn move_out(&mut self, pid: Tid, tid: Tid) {
        let Some(mut r) = self.finish_hooks(tid) else {
            return;
        };
        let Some(plane) = self.dataplane.as_mut() else {
            return;
        };
        let moved = if let Some(gadget) = plane.at_gadget(r.rip) {
            // At (or blocked in) the gadget's call: the program's registers
            // but for rsp; flags and the stub's return above it.
            let ret = mem::read_u64(pid.0, r.rsp).ok();
            let flags = mem::read_u64(pid.0, r.rsp + 8).ok();
            let site = ret.and_then(|ret| plane.spaces.get(&pid)?.stub_at(ret));
            match (site, flags) {
                (Some((site, _, s)), Some(flags)) => {
                    r.eflags = flags;
                    r.rsp += code::FRAME;
                    // Not made yet: the site's syscall makes it; made (or
                    // blocked, a restart due): just past it.
                    let call = site + s.call_off();
                    r.rip = if r.rip == gadget { call } else { call + 2 };
                    true
                }
                _ => false,
            }
        } else if let Some((site, off, f)) = plane.spaces.get(&pid).and_then(|s| s.fstub_at(r.rip))
        {
            match function::stub_exit(off, &f.offsets, &f.lens) {
                Some(e) => {
                    if let Some(at) = e.rax_at {
                        match mem::read_u64(pid.0, r.rsp + at) {
                            Ok(v) => r.rax = v,
                            Err(_) => return,
                        }
                    }
                    r.rsp += e.rsp_add;
                    r.rip = site + e.site_off;
                    true
                }
                None => false,
            }
        } else if let Some((site, off, s)) = plane.spaces.get(&pid).and_then(|s| s.stub_at(r.rip)) {
            let call = site + s.call_off();
            match code::stub_exit(off, &s.offsets, &s.lens, s.moved_len) {
                Some(e) => {
                    if e.pop_flags {
                        match mem::read_u64(pid.0, r.rsp) {
                            Ok(f) => r.eflags = f,
                            Err(_) => return,
                        }
                    }
                    r.rsp += e.rsp_add;
                    r.rip = match e.to {
                        Resume::Displaced(n) => site + n,
                        Resume::Syscall => call,
                        Resume::After => call + 2,
                    };
                    true
                }
                None => false,
            }
        } else {
            false
        };
        if moved {
            plane.counts.threads_moved += 1;
        }
        if plane.is_block(r.gs_base) {
            r.gs_base = 0;
        }
        let _ = ptrace::set_regs(tid, &r);
    }
}

/// Whether a thread stopped with `r` can run injected calls and go on
/// as it was: outside any syscall (a signal or interrupt stop, orig_rax
/// -1), or interrupted in one the kernel restarts (ERESTART*: the
/// restart is decided from the registers put back). Not at a syscall
/// entry or exit stop, whose call the injection would lose.
pub(crate) fn injectable(r: &Regs) -> bool {
    r.orig_rax == u64::MAX || matches!(r.rax as i64, -512 | -513 | -514 | -516)
}

/// `len` bytes at `addr` in `pid` as the file mapped there has them.
fn file_bytes(pid: Tid, addr: u64, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let maps = crate::elf::read_maps(pid.0).ok()?;
    let m = maps.iter().find(|m| (m.start..m.end).contains(&addr))?;
    let f = std::fs::File::open(format!(
        "/proc/{}/map_files/{:x}-{:x}",
        pid.0, m.start, m.end
    ))
    .ok()?;
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, m.offset + (addr - m.start)).ok()?;
    Some(b)
}

/// The regions (and shadow areas) of earlier sessions that died while
/// tracing `pid`: they stay mapped (their stubs and pending returns need
/// them), and their blocks' `%gs` may be replaced by ours.
fn leftover_regions(pid: Tid) -> Vec<std::ops::Range<u64>> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{}/maps", pid.0)) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| l.contains("memfd:utap-dataplane"))
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some(u64::from_str_radix(a, 16).ok()?..u64::from_str_radix(b, 16).ok()?)
        })
        .collect()
}

/// The frames of the shadow stack at `at` in `pid` (untrusted: the
/// program could have written anything there; the depth is bounded).
fn read_shadow(pid: Tid, at: u64) -> Vec<layout::ShadowFrame> {
    let Ok(depth) = mem::read_u64(pid.0, at) else {
        return Vec::new();
    };
    let depth = depth.min(layout::SHADOW_FRAMES) as usize;
    let mut bytes = vec![0u8; depth * layout::SHADOW_FRAME_LEN as usize];
    if mem::read(pid.0, at + 16, &mut bytes).ok() != Some(bytes.len()) {
        return Vec::new();
    }
    bytes
        .chunks_exact(layout::SHADOW_FRAME_LEN as usize)
        .map(|c| {
            let w =
                |i: usize| u64::from_le_bytes(c[8 * i..8 * i + 8].try_into().unwrap_or_default());
            layout::ShadowFrame {
                slot: w(0),
                orig: w(1),
                list: w(2),
                args: [w(3), w(4), w(5), w(6), w(7), w(8)],
                pad: 0,
            }
        })
        .collect()
}

/// A new shadow stack at `to` in `pid`: a copy of the one at `from`, or
/// empty.
fn copy_shadow(pid: Tid, from: Option<u64>, to: u64) -> bool {
    let mut bytes = 0u64.to_le_bytes().to_vec();
    if let Some(from) = from.filter(|&f| f != to)
        && let Ok(depth) = mem::read_u64(pid.0, from)
    {
        let depth = depth.min(layout::SHADOW_FRAMES);
        let mut all = vec![0u8; (16 + depth * layout::SHADOW_FRAME_LEN) as usize];
        if mem::read(pid.0, from, &mut all).ok() == Some(all.len()) {
            all[..8].copy_from_slice(&depth.to_le_bytes());
            bytes = all;
        }
    }
    mem::write(pid.0, to, &bytes).is_ok()
}

/// EFLAGS.TF.
const TRAP_FLAG: u64 = 0x100;

/// How many times a hold lets threads inside a handler run on, and for
/// how long each time.
const LEAVE_ROUNDS: usize = 40;
const LEAVE_RUN: std::time::Duration = std::time::Duration::from_micros(50);

/// One single-step of a held thread, waited for. A signal that stops it
/// first (its delivery stop: the step has not run yet) is kept in `kept`
/// and the step made again: resuming with no signal discards it, so the
/// caller queues it again once the thread is out ([`requeue`]).
fn single_step(tid: Tid, kept: &mut Vec<libc::siginfo_t>) -> bool {
    for _ in 0..64 {
        if ptrace::restart(libc::PTRACE_SINGLESTEP, tid, None).is_err() {
            return false;
        }
        match ptrace::wait_for(tid.0, libc::__WALL) {
            Ok(Some((_, st))) if libc::WIFSTOPPED(st) => {
                if libc::WSTOPSIG(st) == libc::SIGTRAP || st >> 16 != 0 {
                    return true;
                }
                if let Ok(info) = ptrace::siginfo(tid) {
                    kept.push(info);
                }
            }
            _ => return false,
        }
    }
    false
}

/// Queues again for thread `tid` of `pid` the signals its steps took:
/// with their own siginfo where the kernel allows it (a signal a process
/// sent), else as a signal from us.
fn requeue(pid: Tid, tid: Tid, kept: &[libc::siginfo_t]) {
    for info in kept {
        // SAFETY: the siginfo is a copy the kernel filled; both calls only
        // queue a signal.
        unsafe {
            let sent = libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                pid.0,
                tid.0,
                info.si_signo,
                info as *const libc::siginfo_t,
            );
            if sent != 0 {
                libc::syscall(libc::SYS_tgkill, pid.0, tid.0, info.si_signo);
            }
        }
    }
}

impl Tracer {
    /// Before stopped thread `tid` goes on: the offered function entries
    /// of its process are patched now, so that no thread of it ever traps
    /// on their `int3` (a thread trapped there needs the tracer alive to
    /// go on). Only from a stop where injected calls disturb nothing
    /// (`injectable`); otherwise they wait for such a stop or their first
    /// hit.
    pub(crate) fn dataplane_patch_offered(&mut self, tid: Tid) {
        self.patch_offered_from(tid, false);
    }

    /// As `dataplane_patch_offered`; `at_attach`: `tid` is at its attach
    /// stop (an interrupt: a call it was in has returned or will restart,
    /// so injected calls lose nothing whatever its registers say).
    fn patch_offered_from(&mut self, tid: Tid, at_attach: bool) {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return;
        };
        if plane.pending.is_empty() || plane.quiesced {
            return;
        }
        let pid = self.pid_of(tid);
        if !plane.pending.iter().any(|&(p, _)| p == pid) || plane.vforked.contains(&pid) {
            return;
        }
        let Ok(regs) = ptrace::get_regs(tid) else {
            return;
        };
        if !at_attach && !injectable(&regs) {
            return;
        }
        let Some(plane) = self.core.dataplane.as_mut() else {
            return;
        };
        let (mine, rest): (Vec<_>, Vec<_>) = plane.pending.drain(..).partition(|&(p, _)| p == pid);
        plane.pending = rest;
        self.core.hold_for_text(pid);
        for (_, site) in mine {
            self.patch_offered(tid, pid, site, &regs);
        }
        self.release_text_hold();
        // Patching may have moved this thread into a stub: its registers
        // now, not `regs`, get the block.
        if let Some(block) = self.core.dataplane.as_ref().and_then(|p| p.block_addr(tid))
            && let Ok(mut r) = ptrace::get_regs(tid)
            && r.gs_base != block
        {
            r.gs_base = block;
            let _ = ptrace::set_regs(tid, &r);
        }
    }

    /// After an attach (`-x`): the offered function entries of every
    /// process are patched before any of its threads runs again, from a
    /// thread still at its attach stop.
    pub fn dataplane_patch_attached(&mut self) {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return;
        };
        let mut pids: Vec<Tid> = plane.pending.iter().map(|&(p, _)| p).collect();
        pids.dedup();
        for pid in pids {
            // Registers can be read only from a thread in a ptrace-stop,
            // and a thread just seized may not be in its first one yet
            // (under load). One outside a syscall is the plainest to borrow.
            self.core.await_attach_stops(pid);
            let threads = self.core.threads_of(pid);
            let plain = threads
                .iter()
                .copied()
                .find(|&t| ptrace::get_regs(t).is_ok_and(|r| injectable(&r)));
            let stopped = plain.or_else(|| {
                threads
                    .iter()
                    .copied()
                    .find(|&t| ptrace::get_regs(t).is_ok())
            });
            if let Some(tid) = stopped {
                self.patch_offered_from(tid, true);
            }
        }
    }

    /// Patches offered function entry `site` of `pid` (held, `tid` stopped
    /// with `regs`), if it still is an `int3` of ours that can be.
    fn patch_offered(&mut self, tid: Tid, pid: Tid, site: u64, regs: &Regs) -> bool {
        let Some(hooks) = self
            .core
            .dataplane
            .as_ref()
            .and_then(|p| p.spaces.get(&pid))
            .filter(|s| !s.refused.contains(&site) && !s.fsites.contains_key(&site))
            .and_then(|s| s.offers.get(&site).cloned())
        else {
            return false;
        };
        let int3 = self
            .core
            .uprobes
            .space(pid)
            .and_then(|s| s.sites.get(&site))
            .map(|s| s.orig);
        let first = match int3 {
            Some(orig) => orig,
            // Offered with no int3 (`Plane::patches_at_attach`).
            None => {
                let mut b = [0u8; 1];
                if mem::read(pid.0, site, &mut b).ok() != Some(1) || b[0] == 0xcc {
                    return false;
                }
                if b[0] == 0xe9 {
                    self.undo_leftover_jump(pid, site);
                    if mem::read(pid.0, site, &mut b).ok() != Some(1) {
                        return false;
                    }
                }
                b[0]
            }
        };
        let Some(insns) = self.function_entry(pid, site, first) else {
            self.refuse(pid, site);
            if int3.is_none() {
                let _ = self.core.uprobes.insert(pid, site);
            }
            return false;
        };
        if int3.is_some() {
            // The int3 goes first: should the tracer die while it maps and
            // patches, no thread meets a trap only it could take.
            if mem::write(pid.0, site, &[first]).is_err() {
                return false;
            }
            self.core.uprobes.take_over(pid, site);
        }
        let done = self.map_into(tid, pid, regs)
            && self.patch_function(
                tid,
                pid,
                site,
                &insns,
                &hooks,
                (first, int3.is_some()),
                regs,
            );
        if !done {
            self.refuse(pid, site);
            let _ = self.core.uprobes.insert(pid, site);
            return false;
        }
        true
    }

    /// A `jmp` at function entry `site` of `pid` (held) that the file does
    /// not have: a dead session's patch (its stub and region stay mapped).
    /// The function's first bytes are put back as the file has them, so it
    /// can be patched for this session; a thread still in the old stub
    /// jumps back to an instruction boundary of the same bytes.
    fn undo_leftover_jump(&mut self, pid: Tid, site: u64) {
        let Some((start, code)) = self.function_code(pid, site) else {
            return;
        };
        let end = start + code.len() as u64;
        let len = (end - site).min(function::MAX_DISPLACED) as usize;
        let Some(file) = file_bytes(pid, site, len) else {
            return;
        };
        if file.first() == Some(&0xe9) {
            return;
        }
        let _ = mem::write(pid.0, site, &file);
    }

    /// At the first `int3` hit of a function entry the session offered
    /// (every hook in process): patches it with a jump to its stub
    /// (mapping the region first if this is the process's first), hands
    /// the breakpoint over, sends the thread back to the site so the stub
    /// serves this hit, and resumes it. False: the hit is reported as
    /// usual (the site stays an `int3`, its hooks run here).
    pub(crate) fn dataplane_function(
        &mut self,
        tid: Tid,
        pid: Tid,
        addr: u64,
        regs: &Regs,
    ) -> bool {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return false;
        };
        if plane.quiesced || plane.vforked.contains(&pid) {
            return false;
        }
        let Some(space) = plane.spaces.get(&pid) else {
            return false;
        };
        let ready = match space.mapped {
            Some(true) => plane.blocks.contains_key(&tid),
            Some(false) => false,
            None => true,
        };
        if !ready || !space.offers.contains_key(&addr) || space.refused.contains(&addr) {
            return false;
        }
        self.core.hold_for_text(pid);
        let done = self.patch_offered(tid, pid, addr, regs);
        self.release_text_hold();
        if !done {
            return false;
        }
        // The int3 is gone: back to the site, where the jump is now.
        let mut r = *regs;
        r.rip = addr;
        if let Some(block) = self.core.dataplane.as_ref().and_then(|p| p.block_addr(tid)) {
            r.gs_base = block;
        }
        let _ = ptrace::set_regs(tid, &r);
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.pending_signal = None;
        }
        self.finish_stop_pub(tid);
        true
    }

    /// The instructions a jump at function entry `addr` of `pid` would
    /// displace (`function::displaced`), read with every breakpoint byte
    /// of the function put back; `None` when the breakpoint there is
    /// shared or another one lies inside them.
    fn function_entry(&mut self, pid: Tid, addr: u64, first: u8) -> Option<Vec<Instruction>> {
        let (start, mut code) = self.function_code(pid, addr)?;
        let size = code.len() as u64;
        let empty = crate::uprobe::AddrMap::default();
        let bps = self.core.uprobes.space(pid).map_or(&empty, |s| &s.sites);
        if bps.get(&addr).is_some_and(|s| s.refs != 1) {
            return None;
        }
        for (&a, s) in bps.iter() {
            if (start..start + size).contains(&a) {
                code[(a - start) as usize] = s.orig;
            }
        }
        code[(addr - start) as usize] = first;
        let insns = function::displaced(&code, start, addr)?;
        let end = insns.last()?.next_ip();
        if self.lands_in_module(pid, addr + 1..end) {
            return None;
        }
        let bps = self.core.uprobes.space(pid).map_or(&empty, |s| &s.sites);
        let plane = self.core.dataplane.as_ref()?;
        let taken = |a: &u64| (addr + 1..end).contains(a);
        let clash = bps.keys().any(taken)
            || plane
                .spaces
                .get(&pid)
                .is_some_and(|s| s.sites.keys().any(taken) || s.fsites.keys().any(taken));
        (!clash && end <= start + size).then_some(insns)
    }

    /// Writes function site `site`'s stub and the jump to it; the space is
    /// held.
    fn patch_function(
        &mut self,
        tid: Tid,
        pid: Tid,
        site: u64,
        insns: &[Instruction],
        hooks: &crate::dataplane::SiteHookList,
        (first, had_int3): (u8, bool),
        regs: &Regs,
    ) -> bool {
        let d: u64 = insns.iter().map(|i| i.len() as u64).sum();
        let Some(slot) = self.stub_slot(tid, pid, site, regs) else {
            return false;
        };
        let Some(plane) = self.core.dataplane.as_mut() else {
            return false;
        };
        let Some(list) = plane.site_list(hooks) else {
            return false;
        };
        let Some(entry) = plane.site_entry(hooks, site) else {
            return false;
        };
        let Some((stub, offsets)) = function::stub(slot, insns, list, entry) else {
            return false;
        };
        let Some(jump) = code::site_jump(site, slot, d as usize) else {
            return false;
        };
        let mut orig = vec![0u8; d as usize];
        if mem::read(pid.0, site, &mut orig).ok() != Some(orig.len()) {
            return false;
        }
        orig[0] = first;
        if mem::write(pid.0, slot, &stub).is_err() {
            return false;
        }
        // A thread held between two of the displaced instructions goes on
        // from their copy in the stub. Where our int3 was, one at site + 1
        // trapped there (the frame set-up's step-over never leaves one
        // there): it is rewound to the site, where the jump now is.
        let trapped = if had_int3 { site + 1 } else { site };
        for t in self.core.threads_of(pid) {
            let Ok(mut r) = ptrace::get_regs(t) else {
                continue;
            };
            if r.rip != trapped && (site + 1..site + d).contains(&r.rip) {
                let Some(k) = insns.iter().position(|i| i.ip() == r.rip) else {
                    return false;
                };
                r.rip = slot + offsets[k];
                if ptrace::set_regs(t, &r).is_err() {
                    return false;
                }
            }
        }
        if mem::write(pid.0, site, &jump).is_err() {
            return false;
        }
        let Some(plane) = self.core.dataplane.as_mut() else {
            return false;
        };
        let lens = insns.iter().map(|i| i.len() as u64).collect();
        plane.spaces.entry(pid).or_default().fsites.insert(
            site,
            crate::dataplane::FunctionSite {
                stub: slot,
                orig,
                offsets,
                lens,
            },
        );
        plane.counts.function_sites += 1;
        plane.counts.mark_sites += u64::from(hooks.mark.is_some());
        true
    }
}
