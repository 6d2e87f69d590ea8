//! Resume actions: what an engine wants a thread to do next.
//!
//! The order is the one utrace finally shipped (not seed 001's plan):
//! `Stop < Interrupt < Report < SingleStep < BlockStep < Resume < Detach`.
//! With the plan's order (`Report` before `Interrupt`) an engine asking only
//! for a report would win over one asking for the stronger interruption and
//! the interruption would be lost. The derived `Ord` makes "the smallest
//! action among the engines prevails" a plain `min`.

/// What an engine wants a thread to do when the current report is over.
/// Returned by every `report_*` callback and passed to `control`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResumeAction {
    /// Keep the thread in its ptrace-stop (`ps` shows `t`) until this engine
    /// asks for something else. The only persistent action.
    Stop,
    /// Hard quiescence: interrupt a blocking system call like a signal would,
    /// then give engines a `report_signal` with no signal, where they may
    /// inject one.
    Interrupt,
    /// Soft quiescence: get the thread to a `report_quiesce` soon.
    Report,
    /// Resume for one instruction.
    SingleStep,
    /// Resume until the next branch (`PTRACE_SINGLEBLOCK` where the CPU has
    /// it, single step otherwise).
    BlockStep,
    /// Let the thread run normally.
    Resume,
    /// Detach this engine from the thread (lets it run if it was stopped).
    Detach,
}

impl ResumeAction {
    /// The prevailing action of two engines' choices.
    pub fn prevail(self, other: ResumeAction) -> ResumeAction {
        self.min(other)
    }

    /// Actions that take effect when the thread resumes and are then used
    /// up. `Stop` persists until changed; the others are consumed.
    pub(crate) fn is_persistent(self) -> bool {
        self == ResumeAction::Stop
    }
}

#[cfg(test)]
mod tests {
    use super::ResumeAction::*;

    #[test]
    fn shipped_order() {
        let mut all = [
            Detach, Resume, BlockStep, SingleStep, Report, Interrupt, Stop,
        ];
        all.sort();
        assert_eq!(
            all,
            [
                Stop, Interrupt, Report, SingleStep, BlockStep, Resume, Detach
            ]
        );
    }

    #[test]
    fn interrupt_beats_report() {
        // The case the plan's order got wrong.
        assert_eq!(Report.prevail(Interrupt), Interrupt);
        assert_eq!(Interrupt.prevail(Report), Interrupt);
        assert_eq!(Resume.prevail(Stop), Stop);
        assert_eq!(BlockStep.prevail(SingleStep), SingleStep);
    }
}
