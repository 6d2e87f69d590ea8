//! The control plane's side of the data plane: mapping the region into a
//! process, giving threads their blocks, patching a trapped site, and
//! taking everything out again (see the module doc of `dataplane` for the
//! invariants each step keeps).

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction};

use super::Space;
use super::code::{self, Resume};
use super::layout::CODE_LEN;
use crate::uprobe::{mem, xol};
use crate::utrace::control::Core;
use crate::utrace::ptrace::{self, Status};
use crate::utrace::{Regs, Tid, Tracer};

/// The most code decoded for the boundary check of one function.
const MAX_FUNCTION: u64 = 64 << 10;

impl Tracer {
    /// At a seccomp stop of `tid`: if its syscall is one the data plane
    /// serves and its site can be patched, patches it (mapping the region
    /// first if this is the process's first), sends the thread back to the
    /// site with the call skipped, so the stub serves it, and resumes it.
    /// False if the stop is to be reported as usual.
    pub(crate) fn dataplane_seccomp(&mut self, tid: Tid) -> bool {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return false;
        };
        if plane.quiesced {
            return false;
        }
        let Ok(regs) = ptrace::get_regs(tid) else {
            return false;
        };
        if !plane.image.serves(regs.orig_rax as i64) {
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
        if let Some(s) = plane.spaces.get(&pid)
            && (s.refused.contains(&call) || s.stub_at(regs.rip).is_some())
        {
            return false;
        }
        let Some((site, bytes)) = self.displaceable(pid, call) else {
            self.refuse(pid, call);
            return false;
        };
        if self
            .core
            .dataplane
            .as_ref()
            .and_then(|p| p.spaces.get(&pid))
            .is_some_and(|s| s.sites.contains_key(&site))
        {
            // Patched, and still trapped here: a branch or a restart to
            // the syscall itself. Served at the stop.
            return false;
        }
        self.core.hold_for_text(pid);
        let done = self.map_into(tid, pid, &regs) && self.patch(tid, pid, site, bytes, &regs);
        self.release_text_hold();
        if !done {
            return false;
        }
        // The injected calls put `regs` back, %gs included: the block's
        // address goes in again with the rest.
        let Some(block) = self.core.dataplane.as_ref().and_then(|p| p.block_addr(tid)) else {
            return false;
        };
        let mut r = regs;
        // The call is skipped; back at the site, the jump to the stub
        // makes it again (the displaced instruction runs there first).
        r.rip = site;
        r.rax = regs.orig_rax;
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

    fn pid_of(&self, tid: Tid) -> Tid {
        self.core.threads.get(&tid).map_or(tid, |t| t.tgid)
    }

    fn refuse(&mut self, pid: Tid, site: u64) {
        if let Some(p) = self.core.dataplane.as_mut() {
            p.spaces.entry(pid).or_default().refused.insert(site);
            p.counts.sites_refused += 1;
        }
    }

    /// The instruction right before the `syscall` at `call`, if it can be
    /// displaced into a stub: the function holding it (by its symbol)
    /// decodes with it ending exactly at `call`, it is 5 bytes or more,
    /// neither a branch nor rip-relative, and no branch of the function
    /// lands inside it. Returns its address and bytes.
    fn displaceable(&mut self, pid: Tid, call: u64) -> Option<(u64, Vec<u8>)> {
        let (start, size, func) = self.function_of(pid, call)?;
        let off = call - start;
        if !func || size == 0 || size > MAX_FUNCTION || off + 2 > size {
            return None;
        }
        let mut code = vec![0u8; size as usize];
        if mem::read(pid.0, start, &mut code).ok() != Some(code.len()) {
            return None;
        }
        let insns: Vec<Instruction> = Decoder::with_ip(64, &code, start, DecoderOptions::NONE)
            .into_iter()
            .take_while(|i| i.code() != Code::INVALID)
            .collect();
        let at = insns.iter().position(|i| i.next_ip() == call)?;
        let (i, next) = (&insns[at], insns.get(at + 1)?);
        let site = i.ip();
        let ok = next.code() == Code::Syscall
            && i.len() >= 5
            && !i.is_ip_rel_memory_operand()
            && i.flow_control() == FlowControl::Next
            && !insns.iter().any(|b| {
                matches!(
                    b.flow_control(),
                    FlowControl::ConditionalBranch
                        | FlowControl::UnconditionalBranch
                        | FlowControl::Call
                ) && (site + 1..call).contains(&b.near_branch_target())
            });
        let from = (site - start) as usize;
        ok.then(|| (site, code[from..from + i.len()].to_vec()))
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
    fn map_into(&mut self, tid: Tid, pid: Tid, regs: &Regs) -> bool {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return false;
        };
        if let Some(m) = plane.spaces.get(&pid).and_then(|s| s.mapped) {
            return m && plane.blocks.contains_key(&tid);
        }
        let threads = self.core.threads_of(pid);
        let gs_free = threads.iter().all(|&t| {
            ptrace::get_regs(t).is_ok_and(|r| r.gs_base == 0 || plane.is_block(r.gs_base))
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
        let path = format!("/proc/{}/fd/{fd}\0", std::process::id());
        // Below the red zone of the stopped thread's stack.
        let at = (regs.rsp - 1024) & !15;
        if mem::write(pid.0, at, path.as_bytes()).is_err() {
            return false;
        }
        let mut call =
            |nr: i64, args: [u64; 6]| self.remote_syscall(tid, pid, regs, nr as u64, args);
        let flags = (libc::O_RDWR | libc::O_CLOEXEC) as u64;
        let Some(theirs) =
            call(libc::SYS_open, [at, flags, 0, 0, 0, 0]).filter(|&f| (f as i64) >= 0)
        else {
            return false;
        };
        let shared = (libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE) as u64;
        let rx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let code_ok = call(libc::SYS_mmap, [base, CODE_LEN, rx, shared, theirs, 0]) == Some(base);
        let data_ok = code_ok
            && call(
                libc::SYS_mmap,
                [base + CODE_LEN, data_len, rw, shared, theirs, CODE_LEN],
            ) == Some(base + CODE_LEN);
        if code_ok && !data_ok {
            call(libc::SYS_munmap, [base, CODE_LEN, 0, 0, 0, 0]);
        }
        call(libc::SYS_close, [theirs, 0, 0, 0, 0, 0]);
        data_ok
    }

    /// Gives stopped thread `tid` of `pid` a block of its own (`%gs`).
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
        r.gs_base = addr;
        if ptrace::set_regs(tid, &r).is_err() {
            plane.free_block(tid);
        }
    }

    /// Writes `site`'s stub and the jump to it; the space is held.
    fn patch(&mut self, tid: Tid, pid: Tid, site: u64, displaced: Vec<u8>, regs: &Regs) -> bool {
        let Some(slot) = self.stub_slot(tid, pid, site, regs) else {
            return false;
        };
        let Some(plane) = self.core.dataplane.as_mut() else {
            return false;
        };
        let (Some(stub), Some(jump)) = (
            code::stub(slot, site, &displaced, plane.common()),
            code::site_jump(site, slot, displaced.len()),
        ) else {
            return false;
        };
        if mem::write(pid.0, slot, &stub).is_err() || mem::write(pid.0, site, &jump).is_err() {
            return false;
        }
        plane
            .spaces
            .entry(pid)
            .or_default()
            .sites
            .insert(site, (slot, displaced));
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

    /// A new thread's first stop: a thread that inherited a block (a
    /// thread or a fork child of a process with the region) gets its own.
    pub(crate) fn dataplane_new_thread(&mut self, tid: Tid) {
        let Some(plane) = self.core.dataplane.as_ref() else {
            return;
        };
        let Ok(r) = ptrace::get_regs(tid) else {
            return;
        };
        if plane.is_block(r.gs_base) {
            let pid = self.pid_of(tid);
            self.give_block(tid, pid);
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
            let copy = Space {
                mapped: s.mapped,
                sites: s.sites.clone(),
                refused: s.refused.clone(),
                pages: s.pages.clone(),
            };
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
            let Some(tid) = self.held_thread_of(pid) else {
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
        unsafe { std::ptr::write_volatile(&mut (*plane.image.region.header()).stop, 1) };
        let pids: Vec<Tid> = plane.spaces.keys().copied().collect();
        for pid in pids {
            self.hold_space(None, pid);
            self.text_hold = true;
            let tids = self.threads_of(pid);
            for tid in tids {
                self.move_out(pid, tid);
            }
            let Some(plane) = self.dataplane.as_mut() else {
                return;
            };
            if let Some(space) = plane.spaces.get(&pid) {
                for (&site, (_, displaced)) in &space.sites {
                    let _ = mem::write(pid.0, site, displaced);
                }
            }
        }
    }

    /// Moves a held thread out of stubs and region code, and clears its
    /// `%gs` if it is one of ours.
    fn move_out(&mut self, pid: Tid, tid: Tid) {
        let Some(plane) = self.dataplane.as_mut() else {
            return;
        };
        let Ok(mut r) = ptrace::get_regs(tid) else {
            return;
        };
        // In handler or entry code: step to a gadget or back to a stub.
        let mut steps = 0u32;
        while plane.in_code(r.rip) && plane.at_gadget(r.rip).is_none() && steps < 1_000_000 {
            if !single_step(tid) {
                return;
            }
            steps += 1;
            match ptrace::get_regs(tid) {
                Ok(now) => r = now,
                Err(_) => return,
            }
        }
        let moved = if let Some(gadget) = plane.at_gadget(r.rip) {
            // At (or blocked in) the gadget's call: the program's registers
            // but for rsp; flags and the stub's return above it.
            let ret = mem::read_u64(pid.0, r.rsp).ok();
            let flags = mem::read_u64(pid.0, r.rsp + 8).ok();
            let site = ret.and_then(|ret| plane.spaces.get(&pid)?.stub_at(ret));
            match (site, flags) {
                (Some((site, _, d)), Some(flags)) => {
                    r.eflags = flags;
                    r.rsp += code::FRAME;
                    // Not made yet: the site's syscall makes it; made (or
                    // blocked, a restart due): just past it.
                    r.rip = if r.rip == gadget {
                        site + d
                    } else {
                        site + d + 2
                    };
                    true
                }
                _ => false,
            }
        } else if let Some((site, off, d)) = plane.spaces.get(&pid).and_then(|s| s.stub_at(r.rip)) {
            match code::stub_exit(off, d) {
                Some(e) => {
                    if e.pop_flags {
                        match mem::read_u64(pid.0, r.rsp) {
                            Ok(f) => r.eflags = f,
                            Err(_) => return,
                        }
                    }
                    r.rsp += e.rsp_add;
                    r.rip = match e.to {
                        Resume::Site => site,
                        Resume::Syscall => site + d,
                        Resume::After => site + d + 2,
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

/// One single-step of a held thread, waited for.
fn single_step(tid: Tid) -> bool {
    if ptrace::restart(libc::PTRACE_SINGLESTEP, tid, None).is_err() {
        return false;
    }
    matches!(ptrace::wait_for(tid.0, libc::__WALL), Ok(Some((_, st))) if libc::WIFSTOPPED(st))
}
