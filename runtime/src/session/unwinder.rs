//! Where a process enters and leaves the stack unwinder, for return probes
//! (see `utrace::unwinding`): a thread entering one of [`PARK`] is about to
//! walk its stack, so its hijacked return addresses are put back; a thread
//! entering one of [`REARM`] has caught the exception, so the frames that
//! survived are hijacked again. Placed only in sessions with return probes,
//! in whichever modules define them (libgcc_s and libstdc++, or a program
//! linking them statically).

use crate::elf::AddressSpaceMap;

/// What a breakpoint on an unwinder function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnwindStep {
    Park,
    Rearm,
}

/// libgcc's entry points that walk the stack: a throw, a rethrow, and a
/// forced unwind (`pthread_cancel`, `pthread_exit`).
pub(crate) const PARK: &[&str] = &[
    "_Unwind_RaiseException",
    "_Unwind_Resume_or_Rethrow",
    "_Unwind_ForcedUnwind",
];

/// The C++ runtime's start of a catch block, called by the catching frame.
pub(crate) const REARM: &[&str] = &["__cxa_begin_catch"];

/// The run-time addresses of the unwinder functions mapped in `space`.
pub(crate) fn sites(space: &AddressSpaceMap) -> super::functions::IdMap<u64, UnwindStep> {
    let mut out = super::functions::IdMap::default();
    let lists = [(PARK, UnwindStep::Park), (REARM, UnwindStep::Rearm)];
    for m in &space.modules {
        for (names, step) in lists {
            for name in names {
                if let Some(s) = m.image.symbols.function(name) {
                    out.insert(s.addr.wrapping_add(m.bias), step);
                }
            }
        }
    }
    out
}
