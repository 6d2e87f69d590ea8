//! Breakpoint stops: the core's side of `crate::uprobe`. An `int3` at one
//! of our sites arrives as a SIGTRAP signal-delivery-stop (si_code
//! SI_KERNEL, rip one past the site). The core recognises it, tells the
//! engines with `BREAKPOINT` (`report_breakpoint`, registers showing rip at
//! the site), steps over the original instruction itself (emulated, or a
//! counted single-step with the process's other threads held so none can
//! run past the restored byte), and resumes as the engines' actions say.
//! The trap never reaches the program. A return into the trampoline pops
//! the thread's shadow stack and reports the return.

use super::cx::StopKind;
use super::ptrace;
use super::{Control, Cx, Engine, Event, Tid, Tracer};
use crate::uprobe::emulate::{self, StepOver};
use crate::uprobe::{BreakpointHit, Frame, PendingHijack, StepCounts, mem, xol};

/// si_code of a trap raised by `int3`.
const SI_KERNEL: i32 = 0x80;

/// Reads the memory of a stopped process for an emulated `ret` or
/// indirect call (through the space's mem file when it has one).
struct StackOf<'a>(Option<&'a std::fs::File>, i32);
impl emulate::Stack for StackOf<'_> {
    fn read_u64(&self, addr: u64) -> Option<u64> {
        mem::read_u64_in(self.0, self.1, addr).ok()
    }
}

impl Tracer {
    /// A SIGTRAP stop: handles it and returns true if it is ours (a site,
    /// the trampoline, or a site removed while the thread was trapping).
    pub(crate) fn on_breakpoint_trap(&mut self, tid: Tid) -> bool {
        let Some(thread) = self.core.threads.get(&tid) else {
            return false;
        };
        let pid = thread.tgid;
        let Some(space) = self.core.uprobes.space(pid) else {
            return false;
        };
        let Ok(mut regs) = ptrace::get_regs(tid) else {
            return false;
        };
        let addr = regs.rip.wrapping_sub(1);
        let landing = space.landing(addr);
        // Most hits need no GETSIGINFO (see `Site::trap_is_unambiguous`).
        // Nor does a stub's return: only a trap with no frame returning
        // there asks (`jumped_to_stub`).
        let unambiguous = matches!(landing, Some(Some(_)))
            || space
                .sites
                .get(&addr)
                .is_some_and(|s| s.trap_is_unambiguous());
        if !unambiguous && !is_int3_trap(tid) {
            return false;
        }
        if let Some(stub_to) = landing {
            // Not taken at a stub: a SIGTRAP of the program's own. At the
            // trampoline with no frame returning, the program reaching its
            // entry point: ld.so runs the libraries' constructors (whose
            // calls may return through it) before it jumps there.
            if self.on_return_trap(tid, pid, regs, stub_to) {
                return true;
            }
            if stub_to.is_some() {
                return false;
            }
        }
        let Some(space) = self.core.uprobes.space(pid) else {
            return false;
        };
        if space.sites.contains_key(&addr) {
            // A function entry whose hooks all run in the program: its
            // first hit patches it, and the stub serves the hit.
            if self.dataplane_function(tid, pid, addr, &regs) {
                return true;
            }
            self.on_site_trap(tid, pid, addr, regs);
            return true;
        }
        if space.removed.contains(&addr) {
            // Trapped just before the site went away: run the original.
            regs.rip = addr;
            let _ = ptrace::set_regs(tid, &regs);
            self.clear_signal(tid);
            self.finish_stop_pub(tid);
            return true;
        }
        false
    }

    /// Writes the registers of a thread stopped at a breakpoint: only the
    /// words that differ from what the kernel holds, when that is known.
    fn write_bp_regs(&mut self, tid: Tid, regs: &super::Regs) -> super::Result<()> {
        match self.core.bp_kernel.take() {
            Some(old) => ptrace::write_changed_regs(tid, &old, regs),
            None => ptrace::set_regs(tid, regs),
        }
    }

    fn clear_signal(&mut self, tid: Tid) {
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.pending_signal = None;
        }
    }

    fn on_site_trap(&mut self, tid: Tid, pid: Tid, addr: u64, mut regs: super::Regs) {
        self.clear_signal(tid);
        // The engines see rip at the site. The thread itself still has rip
        // one past the int3 until the step-over's single SETREGS.
        self.core.bp_kernel = Some(regs);
        regs.rip = addr;
        let hit = BreakpointHit {
            addr,
            returned: None,
        };
        self.core.bp_regs = Some(regs);
        self.core.uprobes.defer_for = Some(tid);
        self.report(
            tid,
            Event::Breakpoint,
            StopKind::Other,
            Some(&mut |e: &mut dyn Engine, cx, a| e.report_breakpoint(cx, a, &hit)),
        );
        self.core.uprobes.defer_for = None;
        // Engines may have changed registers (guru: then they were written
        // already) or asked for a return hijack (its store is pending):
        // step over from the registers as they are now.
        let regs = self.core.bp_regs.take().unwrap_or(regs);
        if regs.rip == addr {
            self.step_over(tid, pid, addr, regs);
        }
        // Whatever the step-over did not make of a hijack's store is made
        // now, before the thread runs.
        self.flush_hijack();
        self.core.bp_kernel = None;
        self.finish_stop_pub(tid);
    }

    /// Makes a pending hijack's store (`Breakpoints::pending`). Should it
    /// fail, the frames it was for are dropped, as when `hijack_return`
    /// fails at once: no return is reported for them.
    fn flush_hijack(&mut self) {
        let Some(p) = self.core.uprobes.pending.take() else {
            return;
        };
        if !self.core.threads.contains_key(&p.tid) {
            return; // let go meanwhile (the session ended)
        }
        let Some(space) = self.core.uprobes.space_mut(p.owner) else {
            return;
        };
        let bytes = p.value.to_le_bytes();
        if space.mem.write(p.owner.0, p.slot, &bytes).is_err() {
            if let Some(frames) = space.shadow.get_mut(&p.tid) {
                while frames.last().is_some_and(|f| f.slot == p.slot) {
                    frames.pop();
                }
            }
        }
    }

    /// Steps over the site's instruction (emulated, out of line, or a held
    /// single-step) and writes the registers: the hit's only SETREGS.
    fn step_over(&mut self, tid: Tid, pid: Tid, addr: u64, regs: super::Regs) {
        let owner = self.core.uprobes.owner(pid);
        let Some(site) = self
            .core
            .uprobes
            .space(pid)
            .and_then(|s| s.sites.get(&addr))
        else {
            let _ = self.write_bp_regs(tid, &regs);
            return;
        };
        let (step, orig) = (site.step, site.orig);
        self.stub_for_pending(tid, owner, addr, &regs);
        if let Some(slot) = self.hijacking_slot(tid, owner, addr, step, &regs) {
            let mut r = regs;
            r.rip = slot;
            if self.write_bp_regs(tid, &r).is_ok() {
                self.core.uprobes.pending = None;
                self.core.uprobes.counts.out_of_line += 1;
                self.core.uprobes.counts.slot_stores += 1;
                return;
            }
        }
        if let StepOver::Xol(insn) = step {
            if let Some(slot) = self.xol_slot(tid, owner, addr, &insn, &regs) {
                let mut r = regs;
                r.rip = slot;
                if self.write_bp_regs(tid, &r).is_ok() {
                    self.core.uprobes.counts.out_of_line += 1;
                    return;
                }
            }
        }
        if let StepOver::Emulate(insn) | StepOver::Xol(insn) = step {
            if emulate::can_emulate(&insn) && self.emulate(tid, owner, &insn, regs) {
                return;
            }
        }
        // Fallback: hold every other thread of the process, put the
        // original byte back, single-step, re-insert (finish_bp_step).
        let _ = self.write_bp_regs(tid, &regs);
        self.core.uprobes.counts.single_stepped += 1;
        self.core.uprobes.stepping.push((owner, tid));
        self.hold_others(tid, pid);
        let _ = mem::write(owner.0, addr, &[orig]);
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.bp_step = Some(addr);
        }
    }

    fn emulate(
        &mut self,
        tid: Tid,
        owner: Tid,
        insn: &iced_x86::Instruction,
        regs: super::Regs,
    ) -> bool {
        let mut r = regs;
        let Some(space) = self.core.uprobes.space_mut(owner) else {
            return false;
        };
        let file = space.mem.file(owner.0);
        let Some(store) = emulate::apply(insn, &mut r, &StackOf(file, owner.0)) else {
            return false;
        };
        let stored = match store {
            Some(s) => self.store_emulated(tid, owner, s),
            None => true,
        };
        if stored && self.write_bp_regs(tid, &r).is_ok() {
            self.core.uprobes.counts.emulated += 1;
            return true;
        }
        false
    }

    /// Makes an emulated instruction's store (a push or a call, at
    /// rsp - 8): with a pending hijack's store just above it (the return
    /// address at rsp), both in one write.
    fn store_emulated(&mut self, tid: Tid, owner: Tid, s: emulate::Store) -> bool {
        let above = s.addr.wrapping_add(8);
        let uprobes = &mut self.core.uprobes;
        let merged = uprobes
            .pending
            .filter(|p| p.tid == tid && p.slot == above)
            .map(|p| p.value);
        let Some(space) = uprobes.space_mut(owner) else {
            return false;
        };
        let Some(tramp) = merged else {
            return space
                .mem
                .write(owner.0, s.addr, &s.value.to_le_bytes())
                .is_ok();
        };
        let mut both = [0u8; 16];
        both[..8].copy_from_slice(&s.value.to_le_bytes());
        both[8..].copy_from_slice(&tramp.to_le_bytes());
        let ok = space.mem.write(owner.0, s.addr, &both).is_ok();
        if ok {
            self.core.uprobes.pending = None;
        }
        ok
    }

    /// When this stop's return hijack (`Breakpoints::pending`) goes
    /// through a stub: the slot that makes its store and runs the site's
    /// instruction (`xol::hijacking`), one per site and stub, made at the
    /// first such hit. `None` for the trampoline, an instruction that
    /// cannot run out of line, or a slot that could not be made.
    fn hijacking_slot(
        &mut self,
        tid: Tid,
        owner: Tid,
        addr: u64,
        step: StepOver,
        regs: &super::Regs,
    ) -> Option<u64> {
        let uprobes = &self.core.uprobes;
        let p = uprobes
            .pending
            .filter(|p| p.tid == tid && p.slot == regs.rsp)?;
        let space = uprobes.space(owner)?;
        space.stub_ret.get(&p.value)?;
        if let Some(&made) = space.hijacking.get(&(addr, p.value)) {
            return made;
        }
        let (StepOver::Xol(insn) | StepOver::Emulate(insn)) = step else {
            return None;
        };
        let frame_setup = space.sites.get(&addr)?.frame_setup;
        if space.hijacking.len() >= xol::MAX_STUBS || !xol::runnable(&insn) {
            return None;
        }
        // A frame set-up's own slot too: its traps need no siginfo once
        // it has one (`Site::trap_is_unambiguous`).
        if frame_setup {
            self.xol_slot(tid, owner, addr, &insn, regs)?;
        }
        let slot = self.take_slot_near(tid, owner, addr, regs)?;
        let code = xol::hijacking(slot, p.value, addr, &insn, frame_setup);
        let made = code.is_some_and(|c| mem::write(owner.0, slot, &c).is_ok());
        let space = self.core.uprobes.space_mut(owner)?;
        space
            .hijacking
            .insert((addr, p.value), made.then_some(slot));
        if !made {
            return None;
        }
        let copy = slot + xol::HIJACK_STORE;
        space.hijacking_sites.extend([(slot, addr), (copy, addr)]);
        Some(slot)
    }

    /// The site's out-of-line slot: made at the first hit (a slot page is
    /// mapped near the module when none is in reach, by a syscall injected
    /// into this stopped thread). `None` when that cannot be done; the
    /// site then falls back for good.
    fn xol_slot(
        &mut self,
        tid: Tid,
        owner: Tid,
        addr: u64,
        insn: &iced_x86::Instruction,
        regs: &super::Regs,
    ) -> Option<u64> {
        let space = self.core.uprobes.space_mut(owner)?;
        if let Some(slot) = space.sites.get(&addr)?.slot {
            return Some(slot);
        }
        let slot = self.take_slot_near(tid, owner, addr, regs)?;
        let frame_setup = self
            .core
            .uprobes
            .space(owner)?
            .sites
            .get(&addr)?
            .frame_setup;
        let code = if frame_setup {
            xol::relocate_frame_setup(addr, slot)
        } else {
            xol::relocate(insn, slot)
        };
        let written = code.is_some_and(|c| mem::write(owner.0, slot, &c).is_ok());
        let site = self.core.uprobes.space_mut(owner)?.sites.get_mut(&addr)?;
        if !written {
            // Not relocatable there (or not writable): never try again.
            site.frame_setup = false;
            site.step = if emulate::can_emulate(insn) {
                StepOver::Emulate(*insn)
            } else {
                StepOver::SingleStep
            };
            return None;
        }
        site.slot = Some(slot);
        Some(slot)
    }

    /// A free slot within reach of `addr` in `owner`'s space: in a page it
    /// has, or in a new one mapped by `tid` (stopped with `regs`).
    fn take_slot_near(
        &mut self,
        tid: Tid,
        owner: Tid,
        addr: u64,
        regs: &super::Regs,
    ) -> Option<u64> {
        let space = self.core.uprobes.space_mut(owner)?;
        if let Some(slot) = space.pages.iter_mut().find_map(|p| p.take_near(addr)) {
            return Some(slot);
        }
        if space.no_pages {
            return None;
        }
        let page = self.map_slot_page(tid, owner, addr, regs);
        if page.is_some() {
            self.core.uprobes.counts.slot_pages += 1;
        }
        let space = self.core.uprobes.space_mut(owner)?;
        let Some(base) = page else {
            space.no_pages = true;
            return None;
        };
        let mut page = xol::SlotPage { base, used: 0 };
        let slot = page.take_near(addr);
        space.pages.push(page);
        slot
    }

    /// Maps one r-x page within reach of `site` in `owner`'s address space
    /// (`mmap` run by `tid`, which is stopped at the site).
    fn map_slot_page(
        &mut self,
        tid: Tid,
        owner: Tid,
        site: u64,
        regs: &super::Regs,
    ) -> Option<u64> {
        let maps = crate::elf::read_maps(owner.0).ok()?;
        let hint = xol::page_near(&maps, site)?;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE;
        let args = [
            hint,
            xol::PAGE_SIZE,
            (libc::PROT_READ | libc::PROT_EXEC) as u64,
            flags as u64,
            u64::MAX,
            0,
        ];
        // The injected call rewrites the registers (and puts `regs` back).
        self.core.bp_kernel = None;
        let got = self.remote_syscall(tid, owner, regs, libc::SYS_mmap as u64, args)?;
        (got == hint).then_some(hint)
    }

    /// Interrupts the running threads sharing `pid`'s memory but `tid`
    /// (a vfork child's or parent's included) and waits for their stops,
    /// which are kept (not handled) until the step is over. A thread
    /// created meanwhile starts stopped; its first stop is held by
    /// `hold_during_step`.
    fn hold_others(&mut self, tid: Tid, pid: Tid) {
        let owner = self.core.uprobes.owner(pid);
        self.core.hold_space(Some(tid), owner);
    }

    /// The held single-step is done: re-insert the `int3` and let the
    /// other threads' stops be handled.
    pub(crate) fn finish_bp_step(&mut self, tid: Tid, addr: u64) {
        let pid = self.core.threads.get(&tid).map(|t| t.tgid).unwrap_or(tid);
        let owner = self.core.uprobes.owner(pid);
        if self
            .core
            .uprobes
            .space(pid)
            .is_some_and(|s| s.sites.contains_key(&addr))
        {
            let _ = mem::write(owner.0, addr, &[0xcc]);
        }
        self.release_held(tid);
    }

    /// `stepper`'s step is over (or it died): once no step is in
    /// progress, the held stops are handled.
    pub(crate) fn release_held(&mut self, stepper: Tid) {
        let stepping = &mut self.core.uprobes.stepping;
        stepping.retain(|&(_, t)| t != stepper);
        if stepping.is_empty() {
            let held = std::mem::take(&mut self.core.uprobes_held);
            self.core.replay.extend(held);
        }
    }

    /// During a fallback single-step, a stop of another thread of the
    /// stepping process (one not interrupted by `hold_others`: a thread
    /// created meanwhile, whose first stop comes now) is held instead of
    /// handled: resumed now, it could run past the restored byte.
    pub(crate) fn hold_during_step(&mut self, tid: Tid, status: i32) -> bool {
        if matches!(
            ptrace::decode(status),
            ptrace::Status::Exited(_) | ptrace::Status::Signaled { .. } | ptrace::Status::Continued
        ) {
            return false;
        }
        let stepping = &self.core.uprobes.stepping;
        if stepping.iter().any(|&(_, t)| t == tid) {
            return false;
        }
        let tgid = match self.core.threads.get(&tid) {
            Some(t) => Some(t.tgid),
            None => super::control::proc_tgid(tid),
        };
        let uprobes = &self.core.uprobes;
        if !tgid.is_some_and(|g| stepping.iter().any(|&(o, _)| o == uprobes.owner(g))) {
            return false;
        }
        self.core.uprobes_held.push((tid, status));
        true
    }

    /// A return into the trampoline or a stub (`stub_to`: where the stub
    /// jumps): pop the returned frame(s), report them innermost first,
    /// continue at the real return address. Through the trampoline that
    /// takes a write of rip; a stub goes on by itself.
    fn on_return_trap(
        &mut self,
        tid: Tid,
        pid: Tid,
        mut regs: super::Regs,
        stub_to: Option<u64>,
    ) -> bool {
        let slot = regs.rsp.wrapping_sub(8);
        let mut returned = std::mem::take(&mut self.core.uprobes.returned);
        self.pop_frames(tid, pid, slot, &mut returned);
        if let Some(r) = stub_to {
            // A frame at this slot returning elsewhere was left by a
            // longjmp: the program jumped to the stub (an address setjmp
            // saved while its own return was hijacked).
            returned.retain(|f| f.orig_ret == r);
        }
        let Some(&outermost) = returned.last() else {
            self.core.uprobes.returned = returned;
            return stub_to.is_some() && self.jumped_to_stub(tid);
        };
        self.clear_signal(tid);
        let kernel = regs;
        regs.rip = outermost.orig_ret;
        if stub_to == Some(regs.rip) {
            self.core.uprobes.counts.stub_returns += 1;
        } else {
            let _ = ptrace::write_changed_regs(tid, &kernel, &regs);
            self.core.uprobes.counts.trampoline_returns += 1;
        }
        for frame in returned.iter() {
            let hit = BreakpointHit {
                addr: frame.func,
                returned: Some(*frame),
            };
            self.core.bp_regs = Some(regs);
            self.report(
                tid,
                Event::Breakpoint,
                StopKind::Other,
                Some(&mut |e: &mut dyn Engine, cx, a| e.report_breakpoint(cx, a, &hit)),
            );
            regs = self.core.bp_regs.take().unwrap_or(regs);
        }
        returned.clear();
        self.core.uprobes.returned = returned;
        self.finish_stop_pub(tid);
        true
    }

    /// A stub's trap with no frame returning through it: the program
    /// jumped there (see `on_return_trap`) and goes on by the stub's own
    /// jump, as it would have without the hijack; unless the SIGTRAP is
    /// not from the `int3` (sent to a thread resumed past it): then it is
    /// the program's.
    fn jumped_to_stub(&mut self, tid: Tid) -> bool {
        if !is_int3_trap(tid) {
            return false;
        }
        self.clear_signal(tid);
        self.finish_stop_pub(tid);
        true
    }

    /// The stub of return address `ret` (see `Space::stubs`): the one it
    /// has, or one made if the space may have more, in a slot near
    /// `func`, the probed function, where its hijacking slots reach it
    /// (in a page mapped by `tid`, stopped with `regs` in the kernel, when
    /// none has room).
    fn return_stub(
        &mut self,
        tid: Tid,
        owner: Tid,
        func: u64,
        ret: u64,
        regs: &super::Regs,
    ) -> Option<u64> {
        let space = self.core.uprobes.space(owner)?;
        if let Some(&stub) = space.stubs.get(&ret) {
            return Some(stub);
        }
        if space.stubs.len() >= xol::MAX_STUBS || !xol::stubs_wanted() {
            return None;
        }
        let slot = self.take_slot_near(tid, owner, func, regs)?;
        // Undone by a nop over its int3: a return through it then just
        // jumps on (as `restore_space` does at a detach).
        crate::guardian::text_written(owner.0, slot, &[0x90]);
        mem::write(owner.0, slot, &xol::return_stub(slot, ret)).ok()?;
        let space = self.core.uprobes.space_mut(owner)?;
        space.stubs.insert(ret, slot);
        space.stub_ret.insert(slot, ret);
        Some(slot)
    }

    /// A hijack of this stop still going through the trampoline (its
    /// return address had no stub yet) gets the address's stub, made now:
    /// then even the first return goes on by itself, and an address
    /// taken from the return slot (`setjmp` saves its own return address
    /// for `longjmp`) still leads to the caller, which the trampoline
    /// cannot tell.
    fn stub_for_pending(&mut self, tid: Tid, owner: Tid, addr: u64, regs: &super::Regs) {
        let Some(p) = self.core.uprobes.pending.filter(|p| p.tid == tid) else {
            return;
        };
        let Some(space) = self.core.uprobes.space(owner) else {
            return;
        };
        let frame = space
            .shadow
            .get(&tid)
            .and_then(|f| f.iter().rev().find(|f| f.slot == p.slot));
        let Some(ret) = frame.map(|f| f.orig_ret) else {
            return;
        };
        if space.trampoline != Some(p.value) {
            return;
        }
        let Some(stub) = self.return_stub(tid, owner, addr, ret, regs) else {
            return;
        };
        let uprobes = &mut self.core.uprobes;
        if let Some(p) = uprobes.pending.as_mut() {
            p.value = stub;
        }
        let frames = uprobes
            .space_mut(owner)
            .and_then(|s| s.shadow.get_mut(&tid));
        let hijacked_here = |f: &&mut Frame| f.slot == p.slot && f.via == p.value;
        for f in frames.into_iter().flatten().filter(hijacked_here) {
            f.via = stub;
        }
    }

    /// Pops the frames of `tid` returning through `slot` (and stale ones
    /// below it: longjmp) into `returned` (cleared first), innermost
    /// first; returns the outermost, whose return address is the real one
    /// (several frames share a slot after tail calls).
    fn pop_frames(
        &mut self,
        tid: Tid,
        pid: Tid,
        slot: u64,
        returned: &mut Vec<Frame>,
    ) -> Option<Frame> {
        returned.clear();
        let space = self.core.uprobes.space_mut(pid)?;
        let frames = space.shadow.get_mut(&tid)?;
        while let Some(top) = frames.last() {
            if top.slot > slot {
                break;
            }
            let f = frames.pop().unwrap();
            if f.slot == slot {
                returned.push(f);
            }
        }
        returned.last().copied()
    }

    /// At a detach from a stop other than a signal's: a thread that ran
    /// into one of our `int3`s just before it stopped (an interrupt is
    /// reported before the trap's SIGTRAP, which stays pending) would get
    /// that SIGTRAP untraced. It is let run to the SIGTRAP's stop (the
    /// bytes are restored by then), whose status replaces the first.
    pub(crate) fn take_pending_trap(&mut self, tid: Tid, pid: Tid) -> Option<ptrace::Status> {
        let space = self.core.uprobes.space(pid)?;
        let at = ptrace::get_regs(tid).ok()?.rip.wrapping_sub(1);
        let ours =
            space.is_landing(at) || space.sites.contains_key(&at) || space.removed.contains(&at);
        if !ours || !sigtrap_pending(tid) {
            return None;
        }
        // Another interrupt may still be pending: it stops first.
        for _ in 0..3 {
            ptrace::restart(ptrace::PTRACE_CONT, tid, None).ok()?;
            let (_, status) = ptrace::wait_for(tid.0, 0).ok()??;
            let st = ptrace::decode(status);
            if !matches!(st, ptrace::Status::Event { .. }) {
                return Some(st);
            }
        }
        None
    }

    /// At a detach: a thread stopped by a trap of ours is set to continue
    /// as if nothing had been there (the bytes are restored by then).
    /// Returns true if the SIGTRAP was ours.
    pub(crate) fn undo_trap_for_detach(&mut self, tid: Tid, pid: Tid) -> bool {
        let Some(space) = self.core.uprobes.space(pid) else {
            return false;
        };
        let Ok(mut regs) = ptrace::get_regs(tid) else {
            return false;
        };
        let addr = regs.rip.wrapping_sub(1);
        let landing = space.landing(addr);
        let returned = match landing {
            Some(_) => self.pop_frames(tid, pid, regs.rsp.wrapping_sub(8), &mut Vec::new()),
            None => None,
        };
        let Some(space) = self.core.uprobes.space(pid) else {
            return false;
        };
        match (landing, returned) {
            // A stub goes to its return address (a frame returning there
            // or a jump to it: see `on_return_trap`).
            (Some(Some(r)), ret) if ret.is_some_and(|f| f.orig_ret == r) || is_int3_trap(tid) => {
                regs.rip = r
            }
            (Some(None), Some(ret)) => regs.rip = ret.orig_ret,
            // A trap at the trampoline with no frame is the program's
            // start (see `on_breakpoint_trap`): rewound as at a site.
            (Some(None) | None, _)
                if space.removed.contains(&addr) || space.sites.contains_key(&addr) =>
            {
                regs.rip = addr
            }
            _ => return false,
        }
        ptrace::set_regs(tid, &regs).is_ok()
    }
}

impl Control<'_> {
    /// Inserts a breakpoint at `addr` in process `pid` (shared and counted
    /// with other users of the same address). Engines with `BREAKPOINT`
    /// get `report_breakpoint` at each hit.
    /// The other threads sharing the memory are held while the byte
    /// changes (`utrace::hold`).
    pub fn insert_breakpoint(&mut self, pid: Tid, addr: u64) -> super::Result<()> {
        if !self
            .core
            .uprobes
            .space(pid)
            .is_some_and(|s| s.sites.contains_key(&addr))
        {
            self.core.hold_for_text(pid);
        }
        self.core
            .uprobes
            .insert(pid, addr)
            .map_err(|e| super::Error::os("insert breakpoint", pid, e.raw_os_error().unwrap_or(0)))
    }

    /// Drops one use of the breakpoint at `addr`; the last restores the
    /// original byte.
    pub fn remove_breakpoint(&mut self, pid: Tid, addr: u64) -> super::Result<()> {
        let site = self
            .core
            .uprobes
            .space(pid)
            .and_then(|s| s.sites.get(&addr));
        if site.is_some_and(|s| s.refs == 1) {
            self.core.hold_for_text(pid);
        }
        self.core
            .uprobes
            .remove(pid, addr)
            .map_err(|e| super::Error::os("remove breakpoint", pid, e.raw_os_error().unwrap_or(0)))
    }

    /// Forgets the breakpoint at `addr` of `pid` whose module was
    /// unmapped (every use of it: the byte is gone with the mapping).
    pub fn forget_breakpoint(&mut self, pid: Tid, addr: u64) {
        self.core.uprobes.unmapped(pid, addr);
        if let Some(p) = self.core.dataplane.as_mut() {
            p.forget_site(pid, addr);
        }
    }

    /// Offers function entry `addr` of `pid`, whose entry and return
    /// hooks `(probe, point)` all run in process, to the data plane: its
    /// first hit patches it (`Tracer::dataplane_function`).
    pub fn offer_function_site(
        &mut self,
        pid: Tid,
        addr: u64,
        entry: &[(usize, usize)],
        ret: &[(usize, usize)],
        bias: u64,
        func: &str,
    ) {
        if let Some(p) = self.core.dataplane.as_mut() {
            p.offer(pid, addr, entry, ret, bias, func);
        }
    }

    /// Offers USDT marker `addr` of `pid` (its `nop`), whose hooks all
    /// run in process, to the data plane with the marker's arguments:
    /// patched as a function entry is (`Plane::offer_mark`).
    pub fn offer_mark_site(
        &mut self,
        pid: Tid,
        addr: u64,
        hooks: &[(usize, usize)],
        args: &[crate::hit::MarkArg],
    ) {
        if let Some(p) = self.core.dataplane.as_mut() {
            p.offer_mark(pid, addr, hooks, args);
        }
    }

    /// Increments the USDT semaphore at `addr` in process `pid`; every
    /// detach takes the increment back (as it restores breakpoint bytes).
    pub fn enable_semaphore(&mut self, pid: Tid, addr: u64) -> super::Result<()> {
        self.core
            .uprobes
            .enable_semaphore(pid, addr)
            .map_err(|e| super::Error::os("enable semaphore", pid, e.raw_os_error().unwrap_or(0)))
    }

    /// The shadow stack (outermost first) of thread `tid` when some of
    /// its return addresses are hijacked: what an unwinder needs to show
    /// the real callers instead of the trampoline or stubs.
    pub fn hijacked_returns(&self, tid: Tid) -> Option<&[Frame]> {
        let pid = self.core.threads.get(&tid)?.tgid;
        let space = self.core.uprobes.space(pid)?;
        space
            .shadow
            .get(&tid)
            .filter(|f| !f.is_empty())
            .map(|f| f.as_slice())
    }

    /// Breakpoint hits stepped over by emulation and by single-step.
    pub fn step_counts(&self) -> StepCounts {
        self.core.uprobes.counts
    }
}

impl Cx<'_> {
    /// At an entry breakpoint (before the function's first instruction):
    /// make the function return into the trampoline (or its return
    /// address's stub, `Space::stubs`), so that the engines
    /// get a `report_breakpoint` with `returned` set when it returns.
    /// `cookie` comes back in the frame (e.g. an index to `@entry` values).
    pub fn hijack_return(&mut self, func: u64, cookie: u64) -> super::Result<()> {
        let regs = self.regs()?;
        let pid = self.pid();
        let tid = self.tid();
        let owner = self.ctl.core.uprobes.owner(pid);
        let tramp = self.trampoline(pid)?;
        let slot = regs.rsp;
        let os = |e: std::io::Error| {
            super::Error::os("hijack return", tid, e.raw_os_error().unwrap_or(0))
        };
        let uprobes = &mut self.ctl.core.uprobes;
        // At a breakpoint stop of this thread, the store waits for the
        // step-over (see `Breakpoints::pending`).
        let defer = uprobes.defer_for == Some(tid)
            && uprobes
                .pending
                .is_none_or(|p| p.tid == tid && p.slot == slot);
        let space = uprobes.space_mut(pid).ok_or(super::Error::Gone(tid))?;
        let mut orig_ret = space.mem.read_u64(owner.0, slot).map_err(os)?;
        let store = !space.is_landing(orig_ret);
        let via = if store {
            // The return address's stub once it has one; else the
            // trampoline, which the step-over replaces with a stub made
            // then (`stub_for_pending`).
            space.stubs.get(&orig_ret).copied().unwrap_or(tramp)
        } else {
            orig_ret
        };
        let frames = space.shadow.entry(tid).or_default();
        while frames.last().is_some_and(|f| f.slot < slot) {
            frames.pop();
        }
        if !store {
            // A tail call from a hijacked function: same slot, same return.
            match frames.iter().rev().find(|f| f.slot == slot) {
                Some(f) => orig_ret = f.orig_ret,
                None => return Err(super::Error::Unsupported("return slot already hijacked")),
            }
        } else if !defer {
            space
                .mem
                .write(owner.0, slot, &via.to_le_bytes())
                .map_err(os)?;
        }
        frames.push(Frame {
            func,
            slot,
            orig_ret,
            cookie,
            via,
        });
        if defer && store {
            self.ctl.core.uprobes.pending = Some(PendingHijack {
                tid,
                owner,
                slot,
                value: via,
            });
        }
        Ok(())
    }

    /// The trampoline of `pid`'s space: an `int3` at the executable's
    /// entry point (AT_ENTRY), placed on first use.
    fn trampoline(&mut self, pid: Tid) -> super::Result<u64> {
        if let Some(t) = self.ctl.core.uprobes.space(pid).and_then(|s| s.trampoline) {
            return Ok(t);
        }
        let owner = self.ctl.core.uprobes.owner(pid);
        let entry = auxv_entry(owner.0).ok_or(super::Error::Unsupported("no AT_ENTRY"))?;
        self.ctl.insert_breakpoint(pid, entry)?;
        if let Some(space) = self.ctl.core.uprobes.space_mut(pid) {
            space.trampoline = Some(entry);
        }
        Ok(entry)
    }
}

/// Whether the SIGTRAP `tid` is stopped with was raised by an `int3`.
fn is_int3_trap(tid: Tid) -> bool {
    ptrace::siginfo(tid).is_ok_and(|info| info.si_code == SI_KERNEL)
}

/// AT_ENTRY from /proc/PID/auxv.
pub(super) fn auxv_entry(pid: i32) -> Option<u64> {
    let data = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    data.chunks_exact(16).find_map(|c| {
        let key = u64::from_ne_bytes(c[..8].try_into().ok()?);
        (key == libc::AT_ENTRY).then(|| u64::from_ne_bytes(c[8..].try_into().unwrap()))
    })
}

/// Whether SIGTRAP is pending for thread `tid` (its own pending set).
pub(super) fn sigtrap_pending(tid: Tid) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", tid.0)) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigPnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (libc::SIGTRAP - 1)) != 0)
}
