//! An in-process handler's error (`crate::dataplane` reads it from the
//! region), reported and counted as a handler's own would be.

use super::{OutputSink, ScriptRuntime};

impl ScriptRuntime {
    /// An in-process handler failed with `message`: reported and counted
    /// as a handler's error; true if the script must stop.
    pub fn dataplane_error(&mut self, message: &str, sink: &mut dyn OutputSink) -> bool {
        let errors = self
            .tally
            .errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if !self.suppress_errors {
            sink.warn(&format!("ERROR: {message}"));
        }
        if errors as i64 > self.state.limits.max_errors {
            self.tally.set(super::Phase::Error);
        }
        true
    }
}
