//! What a probe hit carries into its handler besides the registers: the
//! user function it fired in ([`UserFunction`], for `probefunc()`,
//! `uaddr()`...) and the USDT marker with its argument values
//! ([`Marker`], for `$argN`, `$$name`, `$$parms`). The session makes them
//! (`session::functions`, `session::marks`) and the script runtime reads
//! them, so they live below both.

use std::rc::Rc;

use crate::elf::AddressSpaceMap;
use crate::elf::sdt::SdtArg;

/// The context of a function-probe firing, for `probefunc()`, `uaddr()`,
/// `usymname()` and friends.
#[derive(Clone, Debug)]
pub struct UserFunction {
    pub name: Rc<str>,
    pub uaddr: u64,
    pub modules: Rc<AddressSpaceMap>,
    /// The registers as the probe sees them: the thread's own rip is still
    /// one past the `int3` until the step-over writes them back, so
    /// `register()` and the unwinder must read these, not the thread.
    pub regs: Option<libc::user_regs_struct>,
}

/// One marker in one process, at run-time addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    pub provider: String,
    pub name: String,
    /// `pp()`: `process("MODULE")[.provider("P")].mark("NAME")`.
    pub pp: String,
    /// The function the marker is in (`probefunc()`), "" when unknown.
    pub function: String,
    pub args: Vec<MarkArg>,
    /// Run-time address of the semaphore, 0 without one.
    pub semaphore: u64,
}

/// One argument, ready to read at a hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkArg {
    pub spec: SdtArg,
    /// A `sym(%rip)` operand resolved to its run-time address; `None`
    /// otherwise (or when the symbol is unknown: the argument reads 0).
    pub symbol_addr: Option<u64>,
}

/// SystemTap's `$$parms` of a marker: `$arg1=0x.. $arg2=0x..` (`%#x`).
pub fn parms(values: &[i64]) -> String {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            0 => format!("$arg{}=0x0", i + 1),
            v => format!("$arg{}={:#x}", i + 1, v),
        })
        .collect::<Vec<_>>()
        .join(" ")
}
