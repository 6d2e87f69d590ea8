//! What the runtime needs to know about a compiled script, in runtime
//! terms (the runtime never depends on the compiler): the globals and
//! their storage, the probes and their native handlers, the literal pool,
//! printf formats, regular expressions and error locations. The codegen
//! builds one of these next to the native code.

use crate::format::FormatPiece;
use crate::values::stats::StatSpec;

use super::context::HandlerContext;

/// A compiled probe handler or the entry of a script function run as one.
pub type HandlerFn = unsafe extern "C" fn(*mut HandlerContext);

/// A key column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    Long,
    Str,
}

/// A global's value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    Long,
    Str,
    Stat(StatSpec),
}

/// Initial value of a scalar global (`global x = 5`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitValue {
    Long(i64),
    Str(Vec<u8>),
}

/// One global variable.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalSpec {
    pub name: String,
    pub value: ValueType,
    /// Key types for an array; `None` for a scalar.
    pub keys: Option<Vec<KeyType>>,
    /// Declared size (`global a[100]`).
    pub size: Option<i64>,
    /// `global a%`.
    pub wrap: bool,
    pub init: Option<InitValue>,
    /// Printed at exit (written, never read).
    pub autoprint: bool,
    /// For a long scalar: its slot in `HandlerContext::long_globals`.
    pub long_slot: Option<u32>,
}

/// When a probe fires, for the probes this runtime schedules itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    Begin(i64),
    End(i64),
    Error(i64),
    Never,
    /// `probe prometheus`: run on each `--metrics` scrape.
    Prometheus,
    Timer {
        period_ns: u64,
        randomize_ns: u64,
    },
    /// A process event: fired by the process session through
    /// [`super::ScriptRuntime::fire`].
    Process,
}

/// One probe point of a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointSpec {
    pub trigger: Trigger,
    /// The canonical point, what aliases expand to (`process.syscall`):
    /// `pp()`, SystemTap's "fully-resolved probe point".
    pub text: String,
    /// The script-level point that resolved to it: the alias name as
    /// matched (wildcards expanded, `syscall.openat`), else `text`: `pn()`.
    pub name: String,
}

/// One probe (one handler, possibly several points).
#[derive(Clone, Debug)]
pub struct ProbeSpec {
    pub points: Vec<PointSpec>,
    pub handler: HandlerFn,
    /// The globals the handler uses (transitively), sorted by global:
    /// the locks a run beside other handlers takes (`global_locks`).
    pub locks: Vec<super::global_locks::GlobalLock>,
}

/// Everything the runtime needs besides native code.
#[derive(Clone, Debug, Default)]
pub struct ScriptImage {
    pub globals: Vec<GlobalSpec>,
    pub probes: Vec<ProbeSpec>,
    /// Bytes of every string literal; handles point into it.
    pub literals: Vec<u8>,
    /// printf formats, by index.
    pub formats: Vec<Vec<FormatPiece>>,
    /// Regular expressions of `=~` / `!~`, by index.
    pub regexes: Vec<String>,
    /// Error locations ("operator '/' at script.stp:3:14"), by index.
    pub locations: Vec<String>,
    /// Number of long scalar slots.
    pub long_slots: usize,
    /// The globals printed at exit, in declaration order.
    pub autoprint_order: Vec<usize>,
    /// `@entry`'s long globals counting returns that found no entry,
    /// with the return probe's points (reported under `-v`).
    pub entry_missing: Vec<(usize, String)>,
}
