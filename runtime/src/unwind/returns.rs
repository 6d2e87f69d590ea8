//! Return-probe trampolines in backtraces. A `.return` probe replaces the
//! return address of the probed function's frame with the trampoline (an
//! `int3` at the executable's entry point) or that address's stub (an
//! `int3; jmp` in a slot page), and keeps the real one on the thread's
//! shadow stack (`crate::uprobe::Frame`, whose `via` says which). An
//! unwind that meets one asks the shadow stack for the real return
//! address, both to report it and to go on unwinding from the real caller
//! (the trampoline's own CFI, `_start`'s, would end or derail the walk; a
//! stub has none).

use crate::uprobe::Frame;

/// The hijacked returns of the thread being unwound.
#[derive(Clone, Debug, Default)]
pub struct HijackedReturns {
    /// The shadow stack, outermost first.
    pub frames: Vec<Frame>,
}

impl HijackedReturns {
    /// Replaces the thread's shadow stack (none: `frames` empty).
    pub fn set(&mut self, frames: &[Frame]) {
        self.frames.clear();
        self.frames.extend_from_slice(frames);
    }

    pub fn clear(&mut self) {
        self.set(&[]);
    }

    /// The real return address for `ret`, read from stack slot `slot`;
    /// `nth` counts the hijacked returns met so far in this unwind
    /// (innermost first), which picks the frame when no slot matches (a
    /// frame found by the frame-pointer fallback at another offset).
    pub fn real(&self, ret: u64, slot: u64, nth: usize) -> u64 {
        let hijacked_by = |f: &&Frame| f.via == ret;
        let mut innermost_first = self.frames.iter().rev();
        let by_slot = innermost_first.clone().find(|f| f.slot == slot);
        by_slot
            .or_else(|| innermost_first.nth(nth))
            .filter(hijacked_by)
            .map_or(ret, |f| f.orig_ret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(slot: u64, orig_ret: u64) -> Frame {
        Frame {
            func: 0x1000,
            slot,
            orig_ret,
            cookie: 0,
            via: 0x4000,
        }
    }

    #[test]
    fn trampoline_addresses_become_the_real_returns() {
        let mut r = HijackedReturns::default();
        r.set(&[frame(0x7f00, 0x1111), frame(0x7e00, 0x2222)]);
        assert_eq!(r.real(0x5555, 0x7e00, 0), 0x5555, "not the trampoline");
        assert_eq!(r.real(0x4000, 0x7e00, 0), 0x2222);
        assert_eq!(r.real(0x4000, 0x7f00, 1), 0x1111);
        // No slot matches: by order, innermost first.
        assert_eq!(r.real(0x4000, 0x1, 0), 0x2222);
        assert_eq!(r.real(0x4000, 0x1, 1), 0x1111);
        assert_eq!(
            r.real(0x4000, 0x1, 2),
            0x4000,
            "more trampolines than frames"
        );
        r.clear();
        assert_eq!(r.real(0x4000, 0x7e00, 0), 0x4000);
    }

    #[test]
    fn stub_addresses_become_their_frames_return() {
        let mut r = HijackedReturns::default();
        let stubbed = Frame {
            via: 0x9000,
            ..frame(0x7e00, 0x2222)
        };
        r.set(&[frame(0x7f00, 0x1111), stubbed]);
        assert_eq!(r.real(0x9000, 0x7e00, 0), 0x2222);
        assert_eq!(
            r.real(0x9000, 0x7f00, 1),
            0x9000,
            "that frame went by the trampoline"
        );
        assert_eq!(r.real(0x4000, 0x7f00, 1), 0x1111);
    }
}
