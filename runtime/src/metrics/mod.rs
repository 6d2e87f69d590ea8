//! `--metrics 127.0.0.1:PORT`: the script's numeric globals in the
//! Prometheus text exposition format (version 0.0.4), served over HTTP.
//!
//! A scrape must cost the traced program nothing, so the tracer thread does
//! as little as it can: when a scrape is waiting (one atomic flag, looked
//! at between events by a periodic tracer timer) it copies the exported
//! globals into a [`Snapshot`] and hands it over ([`MetricsRequests`]);
//! the text is formatted and written on the HTTP side ([`http`]), which
//! caps its connections and times out slow clients. Scrapes waiting at
//! once share one snapshot.
//!
//! A script with `probe prometheus` handlers serves what they build in
//! `$value` instead (SystemTap 4.x's interface): those handlers are script
//! code, so they run on the tracer thread, once per scrape.
//!
//! What is exported and how (the compiler decides, see
//! `utap_compiler::metrics`, and says so in [`MetricSpec`]): the long and
//! statistics globals of the user's script (strings are not numbers;
//! `__`-prefixed and tapset globals are internals), each with a HELP line;
//! a long only ever incremented is a counter (`NAME_total`), other longs
//! gauges; statistics a summary (`_sum`, `_count`) or a histogram whose
//! buckets span only the populated range ([`exposition`]).

pub mod exposition;
pub mod http;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::values::map::KeyPart;
use crate::values::stats::Stat;

pub use http::MetricsServer;

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How one global is exported: decided by the compiler, which sees every
/// operation on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricSpec {
    /// Index of the global in the script image.
    pub global: usize,
    /// The metric family name (`_total` already added to a counter).
    pub name: String,
    /// Only ever incremented (`++`, `+=` of a non-negative literal).
    pub counter: bool,
    /// One label name per array key.
    pub labels: Vec<String>,
    /// The `# HELP` text.
    pub help: String,
}

/// A copy of one exported global, taken on the tracer thread.
#[derive(Clone, Debug)]
pub enum Value {
    Long(i64),
    LongMap(Vec<(Vec<KeyPart>, i64)>),
    Stat(Stat),
    StatMap(Vec<(Vec<KeyPart>, Stat)>),
    /// A global whose type has no metric (a string): nothing to say.
    Absent,
}

/// The values of the exported globals, in [`MetricSpec`] order.
pub type Snapshot = Vec<Value>;

/// What the tracer hands over for a scrape.
#[derive(Debug)]
pub enum Reply {
    /// The globals, formatted by the HTTP side.
    Globals(Snapshot),
    /// The text `probe prometheus` handlers built.
    Text(String),
}

/// The meeting point of scrapes and the tracer thread.
#[derive(Debug, Default)]
struct Exchange {
    /// A scrape is waiting: the tracer looks at this flag only.
    wanted: AtomicBool,
    slot: Mutex<Slot>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct Slot {
    /// Bumped at each reply: a waiter takes the first one after it asked.
    generation: u64,
    reply: Option<Arc<Reply>>,
    /// The session stopped answering.
    closed: bool,
}

impl Exchange {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks for a reply and waits for it, at most `wait`; `None` when the
    /// session is not answering.
    fn fetch(&self, wait: Duration) -> Option<Arc<Reply>> {
        let deadline = Instant::now() + wait;
        let mut slot = self.slot();
        let asked = slot.generation;
        self.wanted.store(true, Ordering::Release);
        while slot.generation == asked && !slot.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            slot = self
                .ready
                .wait_timeout(slot, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        (slot.generation != asked)
            .then(|| slot.reply.clone())
            .flatten()
    }

    fn publish(&self, reply: Reply) {
        let mut slot = self.slot();
        slot.generation += 1;
        slot.reply = Some(Arc::new(reply));
        self.ready.notify_all();
    }

    fn close(&self) {
        self.slot().closed = true;
        self.ready.notify_all();
    }
}

/// The tracer thread's end: answers waiting scrapes without blocking.
#[derive(Debug)]
pub struct MetricsRequests {
    exchange: Arc<Exchange>,
    /// The globals to copy into a snapshot.
    globals: Vec<usize>,
}

impl MetricsRequests {
    /// Whether a scrape waits (one atomic load: the tracer's only cost
    /// when nobody scrapes).
    pub fn wanted(&self) -> bool {
        self.exchange.wanted.load(Ordering::Acquire)
    }

    /// The globals a snapshot holds, in order.
    pub fn globals(&self) -> &[usize] {
        &self.globals
    }

    /// Answers every waiting scrape with one `render()`; never blocks on
    /// a client.
    pub fn serve(&self, render: impl FnOnce() -> Reply) {
        if self.exchange.wanted.swap(false, Ordering::AcqRel) {
            self.exchange.publish(render());
        }
    }
}

impl Drop for MetricsRequests {
    fn drop(&mut self) {
        self.exchange.close();
    }
}
