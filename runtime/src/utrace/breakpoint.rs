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
use super::thread::Run;
use super::{Control, Cx, Engine, Event, Tid, Tracer};
use crate::uprobe::emulate::{self, StepOver};
use crate::uprobe::{BreakpointHit, Frame, StepCounts, mem};

/// si_code of a trap raised by `int3`.
const SI_KERNEL: i32 = 0x80;

/// Reads the stack of a stopped process for emulated `ret`.
struct StackOf(i32);
impl emulate::Stack for StackOf {
    fn read_u64(&self, addr: u64) -> Option<u64> {
        mem::read_u64(self.0, addr).ok()
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
        match ptrace::siginfo(tid) {
            Ok(info) if info.si_code == SI_KERNEL => {}
            _ => return false,
        }
        let Ok(mut regs) = ptrace::get_regs(tid) else {
            return false;
        };
        let addr = regs.rip.wrapping_sub(1);
        if space.trampoline == Some(addr) {
            return self.on_return_trap(tid, pid, regs);
        }
        if space.sites.contains_key(&addr) {
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

    fn clear_signal(&mut self, tid: Tid) {
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.pending_signal = None;
        }
    }

    fn on_site_trap(&mut self, tid: Tid, pid: Tid, addr: u64, mut regs: super::Regs) {
        self.clear_signal(tid);
        regs.rip = addr;
        let _ = ptrace::set_regs(tid, &regs);
        let hit = BreakpointHit {
            addr,
            returned: None,
        };
        self.report(
            tid,
            Event::Breakpoint,
            StopKind::Other,
            Some(&mut |e: &mut dyn Engine, cx, a| e.report_breakpoint(cx, a, &hit)),
        );
        // Engines may have changed registers (guru) or memory (a return
        // hijack): step over from the thread's registers as they are now.
        let Ok(mut regs) = ptrace::get_regs(tid) else {
            return self.finish_stop_pub(tid);
        };
        if regs.rip == addr {
            self.step_over(tid, pid, addr, &mut regs);
        }
        self.finish_stop_pub(tid);
    }

    /// Emulates the site's instruction, or arranges a held single-step.
    fn step_over(&mut self, tid: Tid, pid: Tid, addr: u64, regs: &mut super::Regs) {
        let owner = self.core.uprobes.owner(pid);
        let Some(site) = self
            .core
            .uprobes
            .space(pid)
            .and_then(|s| s.sites.get(&addr))
        else {
            return;
        };
        let (step, orig) = (site.step, site.orig);
        if let StepOver::Emulate(insn) = step {
            let mut r = *regs;
            if let Some(store) = emulate::apply(&insn, &mut r, &StackOf(owner.0)) {
                let stored = match store {
                    Some(s) => mem::write_data(owner.0, s.addr, &s.value.to_le_bytes()).is_ok(),
                    None => true,
                };
                if stored && ptrace::set_regs(tid, &r).is_ok() {
                    self.core.uprobes.counts.emulated += 1;
                    return;
                }
            }
        }
        // Fallback: hold every other thread of the process, put the
        // original byte back, single-step, re-insert (finish_bp_step).
        self.core.uprobes.counts.single_stepped += 1;
        self.hold_others(tid, pid);
        let _ = mem::write(owner.0, addr, &[orig]);
        if let Some(t) = self.core.threads.get_mut(&tid) {
            t.bp_step = Some(addr);
        }
    }

    /// Interrupts the running threads of `pid` but `tid` and waits for
    /// their stops, which are kept (not handled) until the step is over.
    /// Known gap: a thread created so recently that its first stop has not
    /// been seen is not held, and may run past the site during the step
    /// (missed hits, never wrong execution).
    fn hold_others(&mut self, tid: Tid, pid: Tid) {
        // Stops already taken but not yet handled (waiting in `replay`)
        // are held as they are: waiting for those threads would hang.
        let core = &mut self.core;
        let of_pid = |t: Tid| core.threads.get(&t).is_some_and(|th| th.tgid == pid);
        let (held, rest): (Vec<_>, Vec<_>) = core
            .replay
            .drain(..)
            .partition(|&(t, _)| t != tid && of_pid(t));
        core.replay = rest;
        core.uprobes_held.extend(held);
        let pending: Vec<Tid> = core.uprobes_held.iter().map(|&(t, _)| t).collect();
        let others: Vec<Tid> = core
            .threads
            .values()
            .filter(|t| t.tgid == pid && t.tid != tid && t.run == Run::Running)
            .filter(|t| !pending.contains(&t.tid))
            .map(|t| t.tid)
            .collect();
        for t in others {
            if let Some(th) = self.core.threads.get_mut(&t) {
                if super::control::request_stop(th, false).is_err() {
                    continue;
                }
            }
            if let Ok(Some(status)) = ptrace::wait_for(t.0, 0) {
                self.core.uprobes_held.push(status);
            }
        }
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
        self.release_held();
    }

    pub(crate) fn release_held(&mut self) {
        let held = std::mem::take(&mut self.core.uprobes_held);
        self.core.replay.extend(held);
    }

    /// A return into the trampoline: pop the returned frame(s), report
    /// them innermost first, continue at the real return address.
    fn on_return_trap(&mut self, tid: Tid, pid: Tid, mut regs: super::Regs) -> bool {
        let slot = regs.rsp.wrapping_sub(8);
        let Some(returned) = self.pop_frames(tid, pid, slot) else {
            return false;
        };
        self.clear_signal(tid);
        regs.rip = returned[0].orig_ret;
        let _ = ptrace::set_regs(tid, &regs);
        for frame in returned.iter().rev() {
            let hit = BreakpointHit {
                addr: frame.func,
                returned: Some(*frame),
            };
            self.report(
                tid,
                Event::Breakpoint,
                StopKind::Other,
                Some(&mut |e: &mut dyn Engine, cx, a| e.report_breakpoint(cx, a, &hit)),
            );
        }
        self.finish_stop_pub(tid);
        true
    }

    /// Pops the frames of `tid` returning through `slot` (and stale ones
    /// below it: longjmp); the returned ones outermost first.
    fn pop_frames(&mut self, tid: Tid, pid: Tid, slot: u64) -> Option<Vec<Frame>> {
        let space = self.core.uprobes.space_mut(pid)?;
        let frames = space.shadow.get_mut(&tid)?;
        let mut returned = Vec::new();
        while let Some(top) = frames.last() {
            if top.slot > slot {
                break;
            }
            let f = frames.pop().unwrap();
            if f.slot == slot {
                returned.insert(0, f);
            }
        }
        (!returned.is_empty()).then_some(returned)
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
        if space.trampoline == Some(addr) {
            let Some(ret) = self.pop_frames(tid, pid, regs.rsp.wrapping_sub(8)) else {
                return false;
            };
            regs.rip = ret[0].orig_ret;
        } else if space.removed.contains(&addr) || space.sites.contains_key(&addr) {
            regs.rip = addr;
        } else {
            return false;
        }
        ptrace::set_regs(tid, &regs).is_ok()
    }
}

impl Control<'_> {
    /// Inserts a breakpoint at `addr` in process `pid` (shared and counted
    /// with other users of the same address). Engines with `BREAKPOINT`
    /// get `report_breakpoint` at each hit.
    pub fn insert_breakpoint(&mut self, pid: Tid, addr: u64) -> super::Result<()> {
        self.core
            .uprobes
            .insert(pid, addr)
            .map_err(|e| super::Error::os("insert breakpoint", pid, e.raw_os_error().unwrap_or(0)))
    }

    /// Drops one use of the breakpoint at `addr`; the last restores the
    /// original byte.
    pub fn remove_breakpoint(&mut self, pid: Tid, addr: u64) -> super::Result<()> {
        self.core
            .uprobes
            .remove(pid, addr)
            .map_err(|e| super::Error::os("remove breakpoint", pid, e.raw_os_error().unwrap_or(0)))
    }

    /// The trampoline and shadow stack (outermost first) of thread `tid`
    /// when some of its return addresses are hijacked: what an unwinder
    /// needs to show the real callers instead of the trampoline.
    pub fn hijacked_returns(&self, tid: Tid) -> Option<(u64, &[Frame])> {
        let pid = self.core.threads.get(&tid)?.tgid;
        let space = self.core.uprobes.space(pid)?;
        let frames = space.shadow.get(&tid).filter(|f| !f.is_empty())?;
        Some((space.trampoline?, frames))
    }

    /// Breakpoint hits stepped over by emulation and by single-step.
    pub fn step_counts(&self) -> StepCounts {
        self.core.uprobes.counts
    }
}

impl Cx<'_> {
    /// At an entry breakpoint (before the function's first instruction):
    /// make the function return into the trampoline, so that the engines
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
        let space = self
            .ctl
            .core
            .uprobes
            .space_mut(pid)
            .ok_or(super::Error::Gone(tid))?;
        let frames = space.shadow.entry(tid).or_default();
        while frames.last().is_some_and(|f| f.slot < slot) {
            frames.pop();
        }
        let mut orig_ret = mem::read_u64(owner.0, slot).map_err(os)?;
        if orig_ret == tramp {
            // A tail call from a hijacked function: same slot, same return.
            match frames.iter().rev().find(|f| f.slot == slot) {
                Some(f) => orig_ret = f.orig_ret,
                None => return Err(super::Error::Unsupported("return slot already hijacked")),
            }
        } else {
            mem::write(owner.0, slot, &tramp.to_le_bytes()).map_err(os)?;
        }
        frames.push(Frame {
            func,
            slot,
            orig_ret,
            cookie,
        });
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

/// AT_ENTRY from /proc/PID/auxv.
fn auxv_entry(pid: i32) -> Option<u64> {
    let data = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    data.chunks_exact(16).find_map(|c| {
        let key = u64::from_ne_bytes(c[..8].try_into().ok()?);
        (key == libc::AT_ENTRY).then(|| u64::from_ne_bytes(c[8..].try_into().unwrap()))
    })
}
