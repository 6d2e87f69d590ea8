//! Where a handler run's output and diagnostics go: the transport queue in
//! a real session, a buffer in tests.

use crate::transport::Producer;
use crate::values::autoprint::{GlobalValue, autoprint as print_global};

use super::globals::Global;
use super::state::ScriptState;

/// Receives one message per handler run (its whole output, in order) and
/// stderr lines (`ERROR: ...`, `WARNING: ...`). Implementations must not
/// block: a tracer thread calls them.
pub trait OutputSink {
    fn push(&mut self, bytes: &[u8]);
    /// One line for stderr, without its newline.
    fn warn(&mut self, line: &str);
    /// `system(cmd)`: run `cmd` in the background once the output pushed
    /// so far is written (never here, on the tracer thread). Sinks without
    /// an output side (counting sinks in tests) drop it.
    fn system(&mut self, _cmd: &[u8]) {}

    /// The session is ending (end probes, autoprint follow): no tracee
    /// waits any more, so nothing may be dropped from now on.
    fn ending(&mut self) {}
}

impl OutputSink for Producer {
    fn push(&mut self, bytes: &[u8]) {
        // A full queue drops and counts the message; the count is reported
        // at exit.
        let _ = Producer::push(self, bytes);
    }
    fn warn(&mut self, line: &str) {
        let mut msg = line.as_bytes().to_vec();
        msg.push(b'\n');
        self.control(msg);
    }
    fn system(&mut self, cmd: &[u8]) {
        Producer::system(self, cmd);
    }

    fn ending(&mut self) {
        self.set_lossless();
    }
}

/// Collects output and stderr lines in memory (tests, benchmarks).
#[derive(Debug, Default)]
pub struct BufferSink {
    pub out: Vec<u8>,
    pub err: Vec<String>,
    /// `system()` commands, in order (not run).
    pub commands: Vec<String>,
}

impl OutputSink for BufferSink {
    fn push(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
    fn warn(&mut self, line: &str) {
        self.err.push(line.to_string());
    }
    fn system(&mut self, cmd: &[u8]) {
        self.commands
            .push(String::from_utf8_lossy(cmd).into_owned());
    }
}

/// Appends the values of the globals to print at exit, in declaration
/// order.
pub fn autoprint(state: &ScriptState, out: &mut Vec<u8>) {
    each_autoprinted(state, |name, value| print_global(out, name, value));
}

/// [`autoprint`] as JSON Lines (`--format json`).
pub fn autoprint_json(state: &ScriptState, out: &mut Vec<u8>) {
    each_autoprinted(state, |name, value| crate::json::global(out, name, value));
}

/// Copies of globals `which` for a `--metrics` scrape, taken on the tracer
/// thread and formatted elsewhere (see `crate::metrics`).
pub fn snapshot(state: &ScriptState, which: &[usize]) -> crate::metrics::Snapshot {
    use crate::metrics::Value;
    let mut out = Vec::with_capacity(which.len());
    each_global(state, which, |_, value| {
        out.push(match value {
            GlobalValue::Long(v) => Value::Long(v),
            GlobalValue::Stat(s) => Value::Stat(s.clone()),
            GlobalValue::LongMap(m) => {
                Value::LongMap(m.iter().map(|(k, v)| (k.to_vec(), *v)).collect())
            }
            GlobalValue::StatMap(m) => {
                Value::StatMap(m.iter().map(|(k, s)| (k.to_vec(), s.clone())).collect())
            }
            GlobalValue::Str(_) | GlobalValue::StrMap(_) => Value::Absent,
        })
    });
    out
}

fn each_autoprinted(state: &ScriptState, print: impl FnMut(&str, GlobalValue<'_>)) {
    each_global(state, &state.image.autoprint_order, print);
}

fn each_global(state: &ScriptState, which: &[usize], mut print: impl FnMut(&str, GlobalValue<'_>)) {
    for &i in which {
        let (spec, var) = (&state.image.globals[i], &state.globals.vars[i]);
        let value = match var {
            Global::Long(slot) => GlobalValue::Long(state.globals.longs[*slot as usize]),
            Global::Str(s) => GlobalValue::Str(s),
            Global::Stat(s) => GlobalValue::Stat(s),
            Global::LongArray(m) => GlobalValue::LongMap(m),
            Global::StrArray(m) => GlobalValue::StrMap(m),
            Global::StatArray(m, _) => GlobalValue::StatMap(m),
        };
        print(&spec.name, value);
    }
}
