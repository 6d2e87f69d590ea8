//! The `#[repr(C)]` record every compiled handler receives.
//!
//! Native code reads and writes its fields directly (offsets are taken with
//! `core::mem::offset_of!` by the codegen), so the hot path needs no call:
//! the error flag is tested after each fallible runtime call, the action
//! budget is decremented per statement, long globals are loaded from
//! `long_globals`. Everything that is not plain data stays behind `state`.

use super::state::ScriptState;

/// Where a runtime error happened: an index into the compiled script's
/// location table ("operator '/' at script.stp:3:14").
pub type LocationId = u32;

/// How many key columns an array index may have.
pub const MAX_KEYS: usize = 9;

/// Context values of the probe that is firing (what the tracer knows about
/// the event). Begin/end/timer probes get the utap process's own ids.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeValues {
    pub pid: i64,
    pub tid: i64,
    /// `$syscall`
    pub syscall: i64,
    /// `$arg1`..`$arg6`
    pub args: [i64; 6],
    /// `$arg7`..`$arg12` (USDT markers have up to 12 arguments).
    pub more_args: [i64; 6],
    /// `$return`
    pub ret: i64,
    /// `$signal`
    pub signal: i64,
    /// `$code`
    pub code: i64,
    /// 1 in a syscall-return probe (`$return` is valid).
    pub returning: i64,
    /// What fired: one of [`event`]'s constants. Context functions whose
    /// meaning depends on the event (`int_arg`, `returnval`, `probefunc`)
    /// dispatch on it.
    pub event: i64,
    /// Which values a guru handler assigned ([`written`] bits): at a
    /// syscall entry, setting `$return` (to any value, even the one it
    /// had) skips the call.
    pub written: i64,
}

/// The kinds of event in [`ProbeValues::event`].
pub mod event {
    /// begin/end/timer probes, or an event without registers.
    pub const NONE: i64 = 0;
    /// A syscall entry: `args` are the syscall's arguments.
    pub const SYSCALL: i64 = 1;
    /// A syscall return: `args` as at entry, `ret` the return value.
    pub const SYSCALL_RETURN: i64 = 2;
    /// A function entry (breakpoint): `args` are the SysV argument
    /// registers.
    pub const FUNCTION: i64 = 3;
    /// A function return: `args` as at entry, `ret` the return value.
    pub const FUNCTION_RETURN: i64 = 4;
}

/// Bits of [`ProbeValues::written`], set by the compiled code on each
/// assignment to a context variable.
pub mod written {
    /// `$return`
    pub const RETURN: i64 = 1;
    /// `$arg1`..`$arg6`: bit `ARG << i`.
    pub const ARG: i64 = 2;
    /// Any of the arguments.
    pub const ARGS: i64 = 0x3f * ARG;
}

/// The record passed as the first argument of every native function.
#[repr(C)]
pub struct HandlerContext {
    /// Nonzero while a runtime error is pending (the message is in `state`).
    pub error: i64,
    /// Statements left before "MAXACTION exceeded".
    pub actions_left: i64,
    /// Current function-call depth (0 in the probe body).
    pub nesting: i64,
    /// MAXNESTING for this run.
    pub max_nesting: i64,
    /// The location a runtime error would be reported at (SystemTap's
    /// `last_stmt`): native code stores it before each fallible operation.
    pub location: i64,
    /// Long scalar globals, indexed by slot.
    pub long_globals: *mut i64,
    /// Array keys for the next array operation (longs or string handles).
    pub keys: [i64; MAX_KEYS],
    /// The value of the current `foreach` element (`v = [k] in a`).
    pub foreach_value: i64,
    /// The firing event's values; guru code may write `ret` and `signal`.
    pub probe: ProbeValues,
    /// Index of the running probe.
    pub probe_index: i64,
    /// Which of the probe's points fired (its condition and `pp()`).
    pub point_index: i64,
    /// Everything else: strings, globals, output, the tracee.
    pub state: *mut ScriptState,
}

impl HandlerContext {
    /// The state behind the raw pointer.
    ///
    /// # Safety
    /// `ctx` must come from [`super::ScriptRuntime::fire`], which keeps the
    /// state alive and exclusively borrowed for the handler run.
    #[inline]
    pub(crate) unsafe fn state<'a>(ctx: *mut HandlerContext) -> &'a mut ScriptState {
        unsafe { &mut *(*ctx).state }
    }
}
