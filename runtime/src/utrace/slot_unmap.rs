//! Taking the out-of-line slot pages (`uprobe::xol`) out of a process the
//! tracer lets go: a detached program keeps no mapping of ours. At the
//! end, with every thread of the space held (`utrace::hold`), a thread
//! still inside a slot is moved out of it first: at a slot's start (the
//! relocated instruction not run yet) back to the site, whose original
//! byte is back by then; at a return stub's `int3`, to its return address;
//! just past a stub's `int3` with its trap unhandled, the trap is undone
//! first (`settle_stub_trap`);
//! at a hijacking slot's start or its instruction's copy, to the site (its
//! store over the return address was made or not, and the detach put the
//! return address back); at the slot's `jmp` back, to its target. Then one
//! held thread runs an injected `munmap` (`remote_syscall`), as the page
//! was mapped. A thread anywhere else in a page (inside a relocated
//! branch's expansion), or no thread at a stop that can run the syscall,
//! leaves the page mapped, which is harmless.

use iced_x86::{Code, Decoder, DecoderOptions};

/// The wait status of a PTRACE_INTERRUPT stop, and of a SIGTRAP
/// signal-delivery-stop (see `Tracer::settle_stub_trap`).
const INTERRUPTED: i32 = ((libc::SIGTRAP | (ptrace::EVENT_STOP << 8)) << 8) | 0x7f;
const TRAPPED: i32 = (libc::SIGTRAP << 8) | 0x7f;

use super::breakpoint::sigtrap_pending;
use super::ptrace::{self, Status};
use super::thread::Run;
use super::{Signal, Tid, Tracer};
use crate::uprobe::{mem, xol};

impl Tracer {
    /// Unmaps the slot pages of every space whose threads can all be
    /// moved out of them (see the module doc). Called with every space
    /// held, after the bytes are restored (`Space::slot_sites` tells each
    /// slot's site).
    pub(crate) fn unmap_slot_pages(&mut self) {
        let owners: Vec<Tid> = self
            .core
            .uprobes
            .spaces
            .iter()
            .filter(|(_, s)| !s.pages.is_empty())
            .map(|(&o, _)| o)
            .collect();
        for owner in owners {
            if self.move_out_of_slots(owner) {
                self.unmap_pages_of(owner);
            }
        }
    }

    /// Moves every thread of `owner`'s space out of the slot pages;
    /// false if one cannot be.
    fn move_out_of_slots(&mut self, owner: Tid) -> bool {
        let Some(space) = self.core.uprobes.space(owner) else {
            return false;
        };
        let pages: Vec<u64> = space.pages.iter().map(|p| p.base).collect();
        let in_pages = |rip: u64| {
            pages
                .iter()
                .any(|&b| (b..b + xol::PAGE_SIZE).contains(&rip))
        };
        let mut site_of: Vec<(u64, u64)> = space
            .sites
            .iter()
            .filter_map(|(&addr, s)| Some((s.slot?, addr)))
            .collect();
        site_of.extend(&space.slot_sites);
        // A thread that returned into a stub and has not trapped yet goes
        // straight to the stub's return address.
        site_of.extend(space.stub_ret.iter().map(|(&stub, &ret)| (stub, ret)));
        site_of.extend(&space.hijacking_sites);
        let stubs: Vec<u64> = space.stub_ret.keys().copied().collect();
        let tids: Vec<Tid> = self
            .core
            .threads
            .values()
            .filter(|t| self.core.uprobes.owner(t.tgid) == owner && t.run != Run::Starting)
            .map(|t| t.tid)
            .collect();
        for tid in tids {
            let Ok(mut regs) = ptrace::get_regs(tid) else {
                return false;
            };
            if !in_pages(regs.rip) {
                continue;
            }
            if stubs.contains(&regs.rip.wrapping_sub(1)) {
                if !self.settle_stub_trap(tid, owner) {
                    return false;
                }
                match ptrace::get_regs(tid) {
                    Ok(r) if !in_pages(r.rip) => continue,
                    Ok(r) => regs = r,
                    Err(_) => return false,
                }
            }
            let target = match site_of.iter().find(|&&(slot, _)| slot == regs.rip) {
                Some(&(_, site)) => Some(site),
                None => jump_back_target(owner, regs.rip).filter(|&t| !in_pages(t)),
            };
            let Some(target) = target else {
                return false;
            };
            regs.rip = target;
            if ptrace::set_regs(tid, &regs).is_err() {
                return false;
            }
        }
        true
    }

    /// A thread of `owner` held just past a stub's `int3`: if its SIGTRAP
    /// is being reported or still pending, the trap is undone now (rip to
    /// the return address, the frame popped), while rip still shows the
    /// stub, and the thread stays held as if interrupted, with no signal
    /// to pass on. False if that cannot be done.
    fn settle_stub_trap(&mut self, tid: Tid, owner: Tid) -> bool {
        let Some(i) = self.core.uprobes_held.iter().position(|&(t, _)| t == tid) else {
            return false;
        };
        match ptrace::decode(self.core.uprobes_held[i].1) {
            Status::SignalStop(Signal::TRAP) => {}
            _ if !sigtrap_pending(tid) => return true, // its trap was handled
            Status::SignalStop(_) => return false,
            _ => match self.take_pending_trap(tid, owner) {
                Some(Status::SignalStop(Signal::TRAP)) => {}
                _ => return false,
            },
        }
        let undone = self.undo_trap_for_detach(tid, owner);
        self.core.uprobes_held[i].1 = if undone { INTERRUPTED } else { TRAPPED };
        undone
    }

    /// Runs `munmap` of each slot page in a held thread of `owner`'s
    /// space that stopped for our interrupt or at a signal.
    fn unmap_pages_of(&mut self, owner: Tid) {
        let uprobes = &self.core.uprobes;
        let threads = &self.core.threads;
        let pick = |want_interrupt: bool| {
            self.core.uprobes_held.iter().find_map(|&(tid, status)| {
                let th = threads.get(&tid)?;
                let ok = match ptrace::decode(status) {
                    // Our PTRACE_INTERRUPT (a group-stop carries its stop
                    // signal and must stay stopped). Not one that hit an
                    // int3 of ours just before: running the syscall would
                    // consume that SIGTRAP, which detach_stopped could then
                    // neither see pending nor undo (the thread would be let
                    // go one byte past the site, the SIGTRAP delivered).
                    Status::Event {
                        event: ptrace::EVENT_STOP,
                        sig,
                    } => want_interrupt && !sig.is_stop_signal() && !sigtrap_pending(tid),
                    Status::SignalStop(_) => !want_interrupt,
                    _ => false,
                };
                (ok && uprobes.owner(th.tgid) == owner).then_some(tid)
            })
        };
        let found = pick(true).or_else(|| pick(false));
        let Some(tid) = found.or_else(|| self.interrupt_at_event(owner)) else {
            return;
        };
        let Ok(regs) = ptrace::get_regs(tid) else {
            return;
        };
        let pages: Vec<u64> = match self.core.uprobes.space(owner) {
            Some(s) => s.pages.iter().map(|p| p.base).collect(),
            None => return,
        };
        for base in pages {
            let args = [base, xol::PAGE_SIZE, 0, 0, 0, 0];
            let done = self.remote_syscall(tid, owner, &regs, libc::SYS_munmap as u64, args);
            if done != Some(0) {
                return;
            }
            if let Some(space) = self.core.uprobes.space_mut(owner) {
                space.pages.retain(|p| p.base != base);
                for site in space.sites.values_mut() {
                    site.slot = None;
                }
                let gone = |a: u64| (base..base + xol::PAGE_SIZE).contains(&a);
                space.stub_ret.retain(|&stub, _| !gone(stub));
                space.stubs.retain(|_, &mut stub| !gone(stub));
                space.hijacking.retain(|_, slot| !slot.is_some_and(gone));
            }
            self.core.uprobes.counts.slot_pages_unmapped += 1;
        }
    }
}

impl Tracer {
    /// No held thread of `owner` can run the `munmap`: one held at a
    /// clone or fork event (a thread being created when the end came; its
    /// registers are not yet the syscall's result) is moved on to an
    /// interrupt stop, before it runs an instruction of its own: the
    /// interrupt is queued first, then it is resumed. Issue 29: a `-c`
    /// program whose only thread was starting a second one kept its slot
    /// page after SIGINT (4 of 25 trials).
    pub(crate) fn interrupt_at_event(&mut self, owner: Tid) -> Option<Tid> {
        self.interrupt_held(owner, |st| {
            matches!(st, Status::Event { event, .. }
                if event == ptrace::EVENT_CLONE || event == ptrace::EVENT_FORK)
        })
    }

    /// At the ending only (no engine waits for the call's exit any more):
    /// a thread of `owner` held at a syscall stop (under `PTRACE_SYSCALL`,
    /// as a thread a SUD trap let through is) is moved on to an interrupt
    /// stop as [`Self::interrupt_at_event`] moves a creating one; a call
    /// it blocks in is cut short and made again once it is let go.
    pub(crate) fn interrupt_at_syscall(&mut self, owner: Tid) -> Option<Tid> {
        self.interrupt_held(owner, |st| matches!(st, Status::SyscallStop))
    }

    /// Moves the first thread of `owner` held at a stop `movable` accepts
    /// on to an interrupt stop; the thread if that stop can run an
    /// injected call.
    fn interrupt_held(&mut self, owner: Tid, movable: impl Fn(Status) -> bool) -> Option<Tid> {
        let i = self.core.uprobes_held.iter().position(|&(tid, status)| {
            movable(ptrace::decode(status))
                && self
                    .core
                    .threads
                    .get(&tid)
                    .is_some_and(|t| self.core.uprobes.owner(t.tgid) == owner)
        })?;
        let (tid, held) = self.core.uprobes_held[i];
        // A creator's event is taken in first (its child noted and, once
        // at its first stop, let go by the loop), as the loop would: moved
        // past unread, it would leave the child stopped for as long as
        // this tracer lives (a `-c` command shepherded after an error,
        // waiting to join that thread, hung).
        if let Status::Event { event, .. } = ptrace::decode(held)
            && matches!(
                event,
                ptrace::EVENT_CLONE | ptrace::EVENT_FORK | ptrace::EVENT_VFORK
            )
            && let Some(info) = self.take_in_clone(tid, event)
        {
            self.clone_taken_in(&info);
        }
        ptrace::interrupt(tid).ok()?;
        ptrace::restart(ptrace::PTRACE_CONT, tid, None).ok()?;
        let status = match ptrace::wait_for(tid.0, 0) {
            Ok(Some((_, status))) => status,
            _ => return None,
        };
        self.core.uprobes_held[i].1 = status;
        match ptrace::decode(status) {
            Status::Event {
                event: ptrace::EVENT_STOP,
                sig,
            } if !sig.is_stop_signal() && !sigtrap_pending(tid) => Some(tid),
            Status::Exited(_) | Status::Signaled { .. } => {
                self.core.uprobes_held.remove(i);
                self.core.threads.remove(&tid);
                None
            }
            _ => None,
        }
    }
}

/// Where the slot instruction at `rip` jumps back to, if it is the slot's
/// final `jmp rel32` (or a return stub's `jmp *[rip+N]`).
fn jump_back_target(owner: Tid, rip: u64) -> Option<u64> {
    let mut code = [0u8; 16];
    let n = mem::read(owner.0, rip, &mut code).ok()?;
    let insn = Decoder::with_ip(64, &code[..n], rip, DecoderOptions::NONE).decode();
    match insn.code() {
        Code::Jmp_rel32_64 | Code::Jmp_rel8_64 => Some(insn.near_branch64()),
        Code::Jmp_rm64 if insn.is_ip_rel_memory_operand() => {
            mem::read_u64(owner.0, insn.ip_rel_memory_address()).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_traps_read_as_an_interrupt_or_a_sigtrap() {
        let interrupt = ptrace::decode(INTERRUPTED);
        assert!(
            matches!(interrupt, Status::Event { event: ptrace::EVENT_STOP, sig } if sig == Signal::TRAP),
            "{interrupt:?}"
        );
        assert!(matches!(
            ptrace::decode(TRAPPED),
            Status::SignalStop(Signal::TRAP)
        ));
    }
}
