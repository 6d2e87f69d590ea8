//! The runtime's session logic with handlers written in Rust against the
//! same ABI compiled code uses.

use std::sync::Arc;

use super::abi::{RAISE_DIVISION_BY_ZERO, utap_raise};
use super::context::HandlerContext;
use super::image::{PointSpec, ProbeSpec, ScriptImage, Trigger};
use super::sink::BufferSink;
use super::{Phase, ProbeValues, RuntimeOptions, ScriptRuntime, scheduler};

fn say(ctx: *mut HandlerContext, text: &str) {
    unsafe { (*(*ctx).state).out.extend(text.as_bytes()) };
}

unsafe extern "C" fn begin_a(ctx: *mut HandlerContext) {
    say(ctx, "begin a\n");
}
unsafe extern "C" fn begin_exit(ctx: *mut HandlerContext) {
    say(ctx, "begin exit\n");
    unsafe { (*(*ctx).state).exit_requested = true };
}
unsafe extern "C" fn begin_fail(ctx: *mut HandlerContext) {
    unsafe { (*ctx).location = 1 };
    unsafe { utap_raise(ctx, RAISE_DIVISION_BY_ZERO) };
}
unsafe extern "C" fn end_h(ctx: *mut HandlerContext) {
    say(ctx, "end\n");
}
unsafe extern "C" fn error_h(ctx: *mut HandlerContext) {
    say(ctx, "error probe\n");
}
unsafe extern "C" fn process_h(ctx: *mut HandlerContext) {
    // Guru-style write to $return.
    unsafe { (*ctx).probe.ret = (*ctx).probe.args[0] * 2 };
}

fn probe(trigger: Trigger, handler: super::HandlerFn) -> ProbeSpec {
    ProbeSpec {
        points: vec![PointSpec {
            trigger,
            text: String::new(),
            name: String::new(),
        }],
        handler,
        locks: Vec::new(),
    }
}

fn runtime(probes: Vec<ProbeSpec>) -> ScriptRuntime {
    let image = ScriptImage {
        probes,
        locations: vec![String::new(), "operator '/' at t.stp:1:2".into()],
        ..ScriptImage::default()
    };
    ScriptRuntime::new(Arc::new(image), RuntimeOptions::default())
}

#[test]
fn begin_priorities_then_exit_then_end() {
    let mut rt = runtime(vec![
        probe(Trigger::End(0), end_h),
        probe(Trigger::Begin(5), begin_exit),
        probe(Trigger::Begin(0), begin_a),
        probe(Trigger::Begin(9), begin_a),
    ]);
    let mut sink = BufferSink::default();
    assert_eq!(scheduler::run(&mut rt, &mut sink, None), 0);
    assert_eq!(
        String::from_utf8(sink.out).unwrap(),
        "begin a\nbegin exit\nend\n"
    );
}

#[test]
fn an_error_skips_end_probes_and_runs_error_probes() {
    let mut rt = runtime(vec![
        probe(Trigger::Begin(0), begin_fail),
        probe(Trigger::Begin(1), begin_a),
        probe(Trigger::End(0), end_h),
        probe(Trigger::Error(0), error_h),
    ]);
    let mut sink = BufferSink::default();
    assert_eq!(scheduler::run(&mut rt, &mut sink, None), 1);
    assert_eq!(rt.phase(), Phase::Error);
    assert_eq!(String::from_utf8(sink.out).unwrap(), "error probe\n");
    assert_eq!(
        sink.err,
        [
            "ERROR: division by 0 near operator '/' at t.stp:1:2",
            "WARNING: Number of errors: 1, skipped probes: 0",
            "Pass 5: run failed.  [man error::pass5]"
        ]
    );
}

#[test]
fn suppressed_errors_are_counted_and_the_session_goes_on() {
    let image = ScriptImage {
        probes: vec![
            probe(Trigger::Begin(0), begin_fail),
            probe(Trigger::Begin(1), begin_exit),
            probe(Trigger::End(0), end_h),
        ],
        ..ScriptImage::default()
    };
    let options = RuntimeOptions {
        suppress_errors: true,
        ..RuntimeOptions::default()
    };
    let mut rt = ScriptRuntime::new(Arc::new(image), options);
    let mut sink = BufferSink::default();
    assert_eq!(scheduler::run(&mut rt, &mut sink, None), 0);
    assert_eq!(String::from_utf8(sink.out).unwrap(), "begin exit\nend\n");
    assert_eq!(
        sink.err,
        ["WARNING: Number of errors: 1, skipped probes: 0"]
    );
}

#[test]
fn fire_returns_the_values_a_guru_handler_wrote() {
    let mut rt = runtime(vec![probe(Trigger::Process, process_h)]);
    let mut sink = BufferSink::default();
    let values = ProbeValues {
        args: [21, 0, 0, 0, 0, 0],
        ..ProbeValues::default()
    };
    let outcome = rt.fire(0, &values, None, &mut sink);
    assert!(!outcome.error && !outcome.stop);
    assert_eq!(outcome.probe.ret, 42);
}

unsafe extern "C" fn chatty(ctx: *mut HandlerContext) {
    for _ in 0..3000 {
        say(ctx, &"x".repeat(99));
        say(ctx, "\n");
        unsafe { (*(*ctx).state).flush_if_large() };
    }
}

/// Counts the messages a run hands over.
#[derive(Default)]
struct Counting {
    pushes: usize,
    bytes: usize,
}

impl super::OutputSink for Counting {
    fn push(&mut self, bytes: &[u8]) {
        self.pushes += 1;
        self.bytes += bytes.len();
    }
    fn warn(&mut self, _: &str) {}
}

#[test]
fn large_output_is_handed_over_in_pieces_in_order() {
    let mut rt = runtime(vec![probe(Trigger::Begin(0), chatty)]);
    let mut sink = Counting::default();
    rt.fire(0, &ProbeValues::default(), None, &mut sink);
    assert_eq!(sink.bytes, 300_000);
    assert_eq!(sink.pushes, 300_000 / super::state::FLUSH_AT + 1);
}

#[test]
fn probes_skipped_on_lock_contention_are_counted_in_the_summary() {
    let mut rt = runtime(vec![probe(Trigger::Begin(0), begin_a)]);
    let mut sink = BufferSink::default();
    assert!(!rt.note_skipped(3, &mut sink));
    assert_eq!(rt.finish(&mut sink), 0);
    assert_eq!(
        sink.err,
        ["WARNING: Number of errors: 0, skipped probes: 3"]
    );
}

#[test]
fn more_skipped_probes_than_maxskipped_fail_the_session_as_systemtap() {
    let mut rt = runtime(vec![probe(Trigger::Begin(0), begin_a)]);
    let mut sink = BufferSink::default();
    assert!(!rt.note_skipped(100, &mut sink));
    assert!(rt.note_skipped(1, &mut sink));
    assert_eq!(rt.phase(), Phase::Error);
    assert_eq!(rt.finish(&mut sink), 1);
    assert_eq!(
        sink.err,
        [
            "ERROR: Skipped too many probes, check MAXSKIPPED or try again with stap -t for more details.",
            "WARNING: Number of errors: 0, skipped probes: 101",
            "Pass 5: run failed.  [man error::pass5]"
        ]
    );
}

unsafe extern "C" fn bump(ctx: *mut HandlerContext) {
    unsafe { *(*ctx).long_globals += 1 };
}

/// A script with one long global `n`, and two process probes: the first
/// writes it (write lock), the second reads it (read lock).
fn with_global_n(limits: super::Limits) -> ScriptRuntime {
    use super::global_locks::GlobalLock;
    use super::image::{GlobalSpec, ValueType};
    let lock = |write| vec![GlobalLock { global: 0, write }];
    let image = ScriptImage {
        globals: vec![GlobalSpec {
            name: "n".into(),
            value: ValueType::Long,
            keys: None,
            size: None,
            wrap: false,
            init: None,
            autoprint: false,
            long_slot: Some(0),
        }],
        probes: vec![
            ProbeSpec {
                locks: lock(true),
                ..probe(Trigger::Process, bump)
            },
            ProbeSpec {
                locks: lock(false),
                ..probe(Trigger::Process, begin_a)
            },
        ],
        long_slots: 1,
        ..ScriptImage::default()
    };
    let options = RuntimeOptions {
        limits,
        ..RuntimeOptions::default()
    };
    ScriptRuntime::new(Arc::new(image), options)
}

#[test]
fn copies_share_globals_and_a_busy_lock_skips_the_probe_as_systemtap() {
    let limits = super::Limits {
        max_trylock: 3,
        trylock_delay_us: 0,
        ..super::Limits::default()
    };
    let mut rt = with_global_n(limits);
    let mut other = rt.replica(1);
    let mut sink = BufferSink::default();
    let v = ProbeValues::default();
    // Another tracer thread's handler holds `n` shared: the writer waits
    // its MAXTRYLOCK tries, then the probe is skipped and counted; a
    // reader goes ahead.
    let held = [super::global_locks::GlobalLock {
        global: 0,
        write: false,
    }];
    let globals = rt.state.globals.clone();
    assert!(globals.lock_set(&held, 1, Default::default()));
    assert!(
        other
            .fire_point_guarded(0, 0, &v, None, &mut sink)
            .is_none()
    );
    assert!(
        other
            .fire_point_guarded(1, 0, &v, None, &mut sink)
            .is_some()
    );
    globals.unlock_set(&held);
    // Free again: the copy's run writes the global every copy sees.
    assert!(
        other
            .fire_point_guarded(0, 0, &v, None, &mut sink)
            .is_some()
    );
    assert!(rt.fire_point_guarded(0, 0, &v, None, &mut sink).is_some());
    assert_eq!(rt.state.globals.longs[0], 2);
    assert_eq!(rt.finish(&mut sink), 0);
    assert_eq!(
        sink.err,
        ["WARNING: Number of errors: 0, skipped probes: 1"]
    );
}
