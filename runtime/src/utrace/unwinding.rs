//! Return probes and stack unwinders (C++ exceptions, `pthread_cancel`,
//! Rust panics): an unwinder reads each frame's return address to find its
//! unwind information, and a hijacked slot holds the trampoline, which has
//! none that leads anywhere: the exception would end in `std::terminate`.
//!
//! So the engine calls [`Cx::park_returns`] when a thread enters the
//! unwinder (`_Unwind_RaiseException` and friends): every hijacked slot of
//! that thread gets its real return address back, and its frames stay on
//! the shadow stack, "parked" (a parked slot no longer holds the
//! trampoline or stub). When the exception is caught
//! (`__cxa_begin_catch`, called from the catching frame),
//! [`Cx::rearm_returns`] drops the frames below the catcher (they were
//! unwound: their return probes do not fire, as a function left by an
//! exception does not return) and hijacks the slots of the surviving
//! frames again. A thread that never reaches a catch keeps
//! its parked frames until the stack-pointer cleanup drops them: their
//! return probes are missed, the program is unaffected. Returns hijacked
//! in the program (the data plane's shadow stacks) are parked and re-armed
//! alike, at the same stops.

use super::{Cx, Result};
use crate::uprobe::mem;

impl Cx<'_> {
    /// Puts the real return address back in every hijacked slot of this
    /// thread (see the module doc); returns how many were restored.
    pub fn park_returns(&mut self) -> Result<usize> {
        let (pid, tid) = (self.pid(), self.tid());
        let owner = self.ctl.core.uprobes.owner(pid);
        let mut restored = self.ctl.core.dataplane_park_returns(owner, tid);
        let Some(space) = self.ctl.core.uprobes.space(pid) else {
            return Ok(restored);
        };
        let Some(frames) = space.shadow.get(&tid) else {
            return Ok(restored);
        };
        for f in frames {
            if mem::read_u64(owner.0, f.slot).ok() == Some(f.via)
                && mem::write(owner.0, f.slot, &f.orig_ret.to_le_bytes()).is_ok()
            {
                restored += 1;
            }
        }
        Ok(restored)
    }

    /// At a catch: drops the frames the unwinder removed (slots below the
    /// stack pointer) and hijacks again the parked slots of the frames
    /// that survive; returns how many were re-armed.
    pub fn rearm_returns(&mut self) -> Result<usize> {
        let rsp = self.regs()?.rsp;
        let (pid, tid) = (self.pid(), self.tid());
        let owner = self.ctl.core.uprobes.owner(pid);
        let mut rearmed = self.ctl.core.dataplane_rearm_returns(owner, tid, rsp);
        let Some(space) = self.ctl.core.uprobes.space_mut(pid) else {
            return Ok(rearmed);
        };
        let Some(frames) = space.shadow.get_mut(&tid) else {
            return Ok(rearmed);
        };
        // Innermost last: pop what lies at or below the stack pointer.
        while frames.last().is_some_and(|f| f.slot <= rsp) {
            frames.pop();
        }
        for f in frames.iter() {
            if mem::read_u64(owner.0, f.slot).ok() == Some(f.orig_ret)
                && mem::write(owner.0, f.slot, &f.via.to_le_bytes()).is_ok()
            {
                rearmed += 1;
            }
        }
        Ok(rearmed)
    }
}
