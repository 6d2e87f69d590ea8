//! The utrace core on real processes (fixtures in tests/fixtures/*.c,
//! compiled with `cc` on first use).
//!
//! This binary has its own harness: every test runs on its own thread
//! (which becomes its tracer thread) under a watchdog, and the binary
//! doubles as a helper tracer process for the tests that kill a tracer
//! (`UTRACE_HELPER=hold PID`). Tests may run in parallel: a tracer waits
//! only for its own tracees (`__WNOTHREAD`), and a test never waits for a
//! traced process from another thread while it is traced.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use utap_runtime::utrace::*;

// ---------------------------------------------------------------- harness

type TestFn = fn();

fn tests() -> Vec<(&'static str, TestFn)> {
    vec![
        (
            "two_engines_conflicting_actions",
            two_engines_conflicting_actions,
        ),
        (
            "interrupt_prevails_over_report",
            interrupt_prevails_over_report,
        ),
        ("quiesce_running_thread", quiesce_running_thread),
        ("quiesce_blocked_thread", quiesce_blocked_thread),
        ("signals_pass_through", signals_pass_through),
        (
            "signals_suppressed_and_replaced",
            signals_suppressed_and_replaced,
        ),
        (
            "signal_injected_after_interrupt",
            signal_injected_after_interrupt,
        ),
        ("follows_100_threads", follows_100_threads),
        ("follows_fork_exec_chain", follows_fork_exec_chain),
        ("follows_vfork", follows_vfork),
        ("exit_codes_unchanged", exit_codes_unchanged),
        ("job_control_stop_continue", job_control_stop_continue),
        ("sigkill_while_stopped", sigkill_while_stopped),
        (
            "tracer_sigterm_leaves_tracee_running",
            tracer_sigterm_leaves_tracee_running,
        ),
        (
            "tracer_sigint_leaves_tracee_running",
            tracer_sigint_leaves_tracee_running,
        ),
        (
            "tracer_sighup_leaves_tracee_running",
            tracer_sighup_leaves_tracee_running,
        ),
        (
            "detach_racing_a_stop_leaves_it_running",
            detach_racing_a_stop_leaves_it_running,
        ),
        ("single_and_block_steps", single_and_block_steps),
        ("syscall_return_values", syscall_return_values),
        (
            "seccomp_entries_one_stop_per_syscall",
            seccomp_entries_one_stop_per_syscall,
        ),
        (
            "exit_stops_chosen_per_syscall",
            exit_stops_chosen_per_syscall,
        ),
        (
            "colocation_moves_only_the_tracer_and_restores_it",
            colocation_moves_only_the_tracer_and_restores_it,
        ),
        (
            "ticks_run_on_the_tracer_thread",
            ticks_run_on_the_tracer_thread,
        ),
        (
            "quiesce_comes_first_and_can_enable_the_event",
            quiesce_comes_first_and_can_enable_the_event,
        ),
        (
            "panic_in_a_callback_detaches_everything",
            panic_in_a_callback_detaches_everything,
        ),
        (
            "parallel_tracers_in_one_process",
            parallel_tracers_in_one_process,
        ),
        (
            "exec_from_a_non_leader_thread",
            exec_from_a_non_leader_thread,
        ),
        ("idle_tracer_uses_no_cpu", idle_tracer_uses_no_cpu),
        ("killed_doorbell_is_replaced", killed_doorbell_is_replaced),
        (
            "stress_1000_threads_every_syscall",
            stress_1000_threads_every_syscall,
        ),
    ]
}

fn main() {
    if let Ok(mode) = std::env::var("UTRACE_HELPER") {
        helper(&mode);
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (filters, skips) = parse_filters(&args);
    let exact = args.iter().any(|a| a == "--exact");
    let matches = |name: &str, f: &String| {
        if exact {
            name == f
        } else {
            name.contains(f.as_str())
        }
    };
    let selected: Vec<_> = tests()
        .into_iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| matches(name, f)))
        .filter(|(name, _)| !skips.iter().any(|f| matches(name, f)))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return;
    }
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    let started = Instant::now();
    for (name, f) in selected.iter().copied() {
        let t0 = Instant::now();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(f);
            let _ = tx.send(r.is_ok());
        });
        let ok = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                println!("test {name} ... TIMED OUT");
                std::process::exit(1);
            });
        println!(
            "test {name} ... {} ({:.2}s)",
            if ok { "ok" } else { "FAILED" },
            t0.elapsed().as_secs_f64()
        );
        if !ok {
            failed.push(name);
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        println!("failures: {failed:?}");
        std::process::exit(101);
    }
}

/// libtest-style arguments: filters, and `--skip F` exclusions; other
/// options (and the values of those that take one) are ignored.
fn parse_filters(args: &[String]) -> (Vec<String>, Vec<String>) {
    const WITH_VALUE: [&str; 6] = [
        "--test-threads",
        "--format",
        "--color",
        "--logfile",
        "-Z",
        "--shuffle-seed",
    ];
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--skip" {
            skips.extend(it.next().cloned());
        } else if WITH_VALUE.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            filters.push(a.clone());
        }
    }
    (filters, skips)
}

// ---------------------------------------------------------------- helpers

/// Compiles tests/fixtures/NAME.c once per run; returns the binary.
fn fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("utrace-fixture-{name}"));
    let fresh = out
        .metadata()
        .and_then(|o| Ok(o.modified()? >= src.metadata()?.modified()?));
    if !fresh.unwrap_or(false) {
        let st = Command::new("cc")
            .args(["-O2", "-pthread", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("running cc");
        assert!(st.success(), "compiling {}", src.display());
    }
    built.insert(name.to_string(), out.clone());
    out
}

fn fixture_cmd(name: &str, args: &[&str]) -> SpawnCommand {
    SpawnCommand::new(fixture(name).to_str().unwrap(), args).unwrap()
}

/// Runs `f` on a fresh thread (which becomes its tracer thread).
fn on_tracer_thread<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::spawn(f)
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

fn tmpfile(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("utrace-{}-{tag}-{n}", std::process::id()))
}

/// A field of /proc/PID/task/TID/status.
fn status_field(pid: i32, tid: i32, field: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
}

/// The state letter of a thread (R, S, T, t, ...).
fn state(pid: i32, tid: i32) -> char {
    status_field(pid, tid, "State:")
        .and_then(|s| s.chars().next())
        .unwrap_or('?')
}

/// Not stopped (any way) and not dead: R, S or D.
fn is_running(state: char) -> bool {
    matches!(state, 'R' | 'S' | 'D')
}

fn tracer_pid(pid: i32, tid: i32) -> i32 {
    status_field(pid, tid, "TracerPid:")
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1)
}

fn tids_of(pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The ticker's counter (retrying while the file is being rewritten).
fn read_counter(file: &Path) -> i64 {
    for _ in 0..1000 {
        if let Some(n) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    -1
}

/// Waits until `cond` holds (polling every 10 ms, at most `secs`).
fn wait_until(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// An untraced `ticker FILE MODE THREADS` started by this test's thread,
/// once it has its threads and has written its counter.
fn start_ticker(mode: &str, threads: usize) -> (Fixture, PathBuf) {
    let file = tmpfile("ticker");
    let child = Command::new(fixture("ticker"))
        .arg(&file)
        .arg(mode)
        .arg(threads.to_string())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let child = Fixture(child);
    assert!(wait_until(5, || tids_of(pid).len() == threads + 1
        && read_counter(&file) > 0));
    (child, file)
}

/// Kills and reaps an untraced fixture after its tracer is done (also
/// when the test fails).
struct Fixture(Child);

impl Fixture {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn finish(child: Fixture) {
    drop(child);
}

fn kill(pid: i32, sig: i32) {
    unsafe { libc::kill(pid, sig) };
}

type AddEngine = Box<dyn FnOnce(&mut Tracer) -> EngineId>;

/// Spawns `cmd` traced, attaches `engines` (in order) with `events`, runs
/// to the end of the process; returns the tracer and its end.
fn trace_command(
    cmd: &SpawnCommand,
    engines: Vec<(AddEngine, Events)>,
) -> (Tracer, EndReason, Tid) {
    let mut tracer = Tracer::new().unwrap();
    let ids: Vec<(EngineId, Events)> = engines
        .into_iter()
        .map(|(add, ev)| (add(&mut tracer), ev))
        .collect();
    let child = tracer.spawn(cmd, None).unwrap();
    let mut ctl = tracer.ctl();
    for (id, ev) in ids {
        ctl.attach(child.pid, id, AttachMode::Create, ev).unwrap();
    }
    ctl.end_when_exits(child.pid);
    let end = tracer.run().unwrap();
    (tracer, end, child.pid)
}

fn exited(pid: Tid, code: i32) -> EndReason {
    EndReason::ProcessExited {
        pid,
        status: ExitStatus::Exited(code),
    }
}

const GETPPID: i64 = libc::SYS_getppid;

// ---------------------------------------------------------------- engines

/// Records (name, syscall nr, prevailing action) for every syscall entry;
/// returns `Stop` at the `stop_at`-th getppid until released.
type Log = Rc<RefCell<Vec<(&'static str, i64, ResumeAction)>>>;

struct Recorder {
    name: &'static str,
    log: Log,
    getppids: usize,
    stop_at: Option<usize>,
}

impl Engine for Recorder {
    fn report_syscall_entry(&mut self, cx: &mut Cx, action: ResumeAction) -> ResumeAction {
        let nr = cx.syscall().unwrap().nr;
        self.log.borrow_mut().push((self.name, nr, action));
        if nr == GETPPID {
            self.getppids += 1;
            if Some(self.getppids) == self.stop_at {
                return ResumeAction::Stop;
            }
        }
        ResumeAction::Resume
    }
}

// ---------------------------------------------------------------- tests

/// STOP from one engine and RESUME from the other: the thread stays stopped
/// until both let go; callbacks come in attach order with the prevailing
/// action; detaching one engine leaves the other working.
fn two_engines_conflicting_actions() {
    on_tracer_thread(|| {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut tracer = Tracer::new().unwrap();
        let a = tracer.add_engine(Recorder {
            name: "A",
            log: log.clone(),
            getppids: 0,
            stop_at: Some(5),
        });
        let b = tracer.add_engine(Recorder {
            name: "B",
            log: log.clone(),
            getppids: 0,
            stop_at: None,
        });
        let child = tracer
            .spawn(&fixture_cmd("syscalls", &["40", "0"]), None)
            .unwrap();
        let pid = child.pid;
        let mut ctl = tracer.ctl();
        ctl.attach(pid, a, AttachMode::Create, Events::SYSCALL_ENTRY)
            .unwrap();
        ctl.attach(pid, b, AttachMode::Create, Events::SYSCALL_ENTRY)
            .unwrap();
        assert_eq!(
            ctl.attach(pid, b, AttachMode::Create, Events::SYSCALL_ENTRY),
            Ok(Attached::Existing)
        );
        assert_eq!(
            ctl.attach(pid, b, AttachMode::Exclusive, Events::SYSCALL_ENTRY),
            Err(Error::AlreadyAttached {
                tid: pid,
                engine: b
            })
        );
        assert_eq!(
            ctl.attach(pid, a, AttachMode::MatchExisting, Events::NONE),
            Ok(Attached::Existing)
        );
        assert_eq!(
            ctl.attach(
                Tid(pid.0 + 1_000_000),
                a,
                AttachMode::MatchExisting,
                Events::NONE
            ),
            Err(Error::NotAttached {
                tid: Tid(pid.0 + 1_000_000),
                engine: a
            })
        );
        assert_eq!(ctl.events(pid, b), Ok(Events::SYSCALL_ENTRY));
        ctl.end_when_exits(pid);
        // A script of checks, one per tick, 100 ms apart.
        let checks = Rc::new(RefCell::new(Vec::<String>::new()));
        let step = Rc::new(RefCell::new(0));
        let (c2, l2) = (checks.clone(), log.clone());
        ctl.add_timer(Instant::now() + Duration::from_millis(100), move |ctl| {
            let mut s = step.borrow_mut();
            *s += 1;
            let st = state(pid.0, pid.0);
            let n = l2.borrow().len();
            let mut c = c2.borrow_mut();
            match *s {
                1 => {
                    c.push(format!("stopped={:?} state={st}", ctl.is_stopped(pid)));
                    c.push(format!("{:?}", ctl.control(pid, a, ResumeAction::Stop)));
                    c.push(format!("{:?}", ctl.control(pid, b, ResumeAction::Resume)));
                }
                2 => {
                    c.push(format!(
                        "after B resume: stopped={:?} state={st}",
                        ctl.is_stopped(pid)
                    ));
                    c.push(n.to_string());
                    c.push(format!("{:?}", ctl.control(pid, a, ResumeAction::Detach)));
                    c.push(format!("{:?}", ctl.barrier(pid, a)));
                    return None;
                }
                _ => unreachable!(),
            }
            Some(Instant::now() + Duration::from_millis(100))
        });
        let end = tracer.run().unwrap();
        assert_eq!(end, exited(pid, 0));
        let log = log.borrow();
        // The stop came at A's 5th getppid; B was told A's Stop prevails.
        let getppids: Vec<_> = log.iter().filter(|(_, nr, _)| *nr == GETPPID).collect();
        assert_eq!(getppids[8], &("A", GETPPID, ResumeAction::Resume));
        assert_eq!(getppids[9], &("B", GETPPID, ResumeAction::Stop));
        // Order: A then B for every syscall while both were attached.
        for pair in log[..log.len().min(10)].chunks(2) {
            assert_eq!((pair[0].0, pair[1].0), ("A", "B"));
            assert_eq!(pair[0].1, pair[1].1);
        }
        let checks = checks.borrow();
        assert_eq!(checks[0], "stopped=Some(true) state=t");
        assert_eq!(checks[1], "Ok(AlreadyStopped)");
        assert_eq!(checks[2], "Ok(Done)");
        assert_eq!(checks[3], "after B resume: stopped=Some(true) state=t");
        let entries_when_held: usize = checks[4].parse().unwrap();
        assert_eq!(
            log[entries_when_held - 1],
            ("B", GETPPID, ResumeAction::Stop)
        );
        // After A detached, B alone saw the other 35 getppids.
        assert_eq!(checks[5], "Ok(Done)");
        assert_eq!(
            checks[6],
            format!(
                "{:?}",
                Err::<(), _>(Error::NotAttached {
                    tid: pid,
                    engine: a
                })
            )
        );
        let b_after = log[entries_when_held..]
            .iter()
            .filter(|(n, nr, _)| *n == "B" && *nr == GETPPID)
            .count();
        let a_after = log[entries_when_held..]
            .iter()
            .filter(|(n, _, _)| *n == "A")
            .count();
        assert_eq!((a_after, b_after), (0, 35));
    });
}

struct Mood {
    answer: ResumeAction,
    at: usize,
    seen: usize,
    quiesce: Vec<Event>,
    signals: Vec<Option<Signal>>,
}

impl Engine for Mood {
    fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        if cx.syscall().unwrap().nr == GETPPID {
            self.seen += 1;
            if self.seen == self.at {
                return self.answer;
            }
        }
        ResumeAction::Resume
    }
    fn report_quiesce(&mut self, _cx: &mut Cx, _: ResumeAction, event: Event) -> ResumeAction {
        if event == Event::None {
            self.quiesce.push(event);
        }
        ResumeAction::Resume
    }
    fn report_signal(
        &mut self,
        _cx: &mut Cx,
        _: ResumeAction,
        s: &mut SignalReport,
    ) -> ResumeAction {
        self.signals.push(s.original);
        ResumeAction::Resume
    }
}

/// The shipped order: one engine asks for REPORT, the other for INTERRUPT at
/// the same event; the interruption is not lost (the plan's order would
/// have let REPORT win) and the report is made too.
fn interrupt_prevails_over_report() {
    on_tracer_thread(|| {
        let mood = |answer| Mood {
            answer,
            at: 3,
            seen: 0,
            quiesce: vec![],
            signals: vec![],
        };
        let mut tracer = Tracer::new().unwrap();
        let rep = tracer.add_engine(mood(ResumeAction::Report));
        let int = tracer.add_engine(mood(ResumeAction::Interrupt));
        let child = tracer
            .spawn(&fixture_cmd("syscalls", &["6", "0"]), None)
            .unwrap();
        let ev = Events::SYSCALL_ENTRY | Events::QUIESCE | Events::SIGNAL;
        let mut ctl = tracer.ctl();
        ctl.attach(child.pid, rep, AttachMode::Create, ev).unwrap();
        ctl.attach(child.pid, int, AttachMode::Create, ev).unwrap();
        ctl.end_when_exits(child.pid);
        assert_eq!(tracer.run().unwrap(), exited(child.pid, 0));
        let r = tracer.engine::<Mood>(rep).unwrap();
        let i = tracer.engine::<Mood>(int).unwrap();
        // The injection report (no signal) went to both engines; for the
        // QUIESCE engine that asked for REPORT it stands in for
        // report_quiesce (seed 001), so no separate quiesce report follows.
        assert_eq!(r.signals, vec![None]);
        assert_eq!(i.signals, vec![None]);
        assert_eq!(r.quiesce, vec![]);
        assert_eq!(i.quiesce, vec![]);
    });
}

/// Keeps the threads it is told to hold stopped at report_quiesce.
struct Holder {
    hold: BTreeSet<Tid>,
    quiesced: Vec<(Tid, Event)>,
}

impl Engine for Holder {
    fn report_quiesce(&mut self, cx: &mut Cx, _: ResumeAction, event: Event) -> ResumeAction {
        self.quiesced.push((cx.tid(), event));
        if self.hold.contains(&cx.tid()) {
            ResumeAction::Stop
        } else {
            ResumeAction::Resume
        }
    }
}

/// A ticker (`mode`, one worker thread) traced on a thread of its own by a
/// [`Holder`] that keeps the worker when it quiesces.
struct Held {
    child: Fixture,
    file: PathBuf,
    pid: i32,
    worker: Tid,
    handle: TracerHandle,
    e: EngineId,
    /// Ends with how `run` ended and the Holder's quiesce reports.
    tracer_thread: std::thread::JoinHandle<(EndReason, Vec<(Tid, Event)>)>,
}

fn hold_worker(mode: &str) -> Held {
    let (child, file) = start_ticker(mode, 1);
    let pid = child.id() as i32;
    let worker = Tid(*tids_of(pid).iter().find(|&&t| t != pid).unwrap());
    let (tx, rx) = mpsc::channel();
    let tracer_thread = std::thread::spawn(move || {
        let mut tracer = Tracer::new().unwrap();
        let e = tracer.add_engine(Holder {
            hold: [worker].into(),
            quiesced: vec![],
        });
        let mut ctl = tracer.ctl();
        for tid in ctl.attach_process(Tid(pid)).unwrap() {
            ctl.attach(tid, e, AttachMode::Create, Events::QUIESCE)
                .unwrap();
        }
        tx.send((tracer.handle(), e)).unwrap();
        let end = tracer.run().unwrap();
        (end, tracer.engine::<Holder>(e).unwrap().quiesced.clone())
    });
    let (handle, e) = rx.recv().unwrap();
    Held {
        child,
        file,
        pid,
        worker,
        handle,
        e,
        tracer_thread,
    }
}

/// Quiesce on demand from another thread, through the TracerHandle: the
/// first STOP is "in progress", report_quiesce comes, the thread sits in a
/// tracing stop and makes no progress; a second STOP says "already
/// stopped"; RESUME lets it go on.
fn quiesce(mode: &'static str) {
    let Held {
        child,
        file,
        pid,
        worker,
        handle,
        e,
        tracer_thread,
    } = hold_worker(mode);
    assert_eq!(tracer_pid(pid, worker.0), tracer_thread_tid(pid, worker.0));
    assert_eq!(
        handle.control(worker, e, ResumeAction::Stop),
        Ok(ControlStatus::InProgress)
    );
    assert!(wait_until(5, || handle
        .call(move |c| c.is_stopped(worker))
        .unwrap()
        == Some(true)));
    assert_eq!(state(pid, worker.0), 't');
    // The main thread may still write a count it read before the stop.
    std::thread::sleep(Duration::from_millis(50));
    let c1 = read_counter(&file);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(read_counter(&file), c1, "a stopped thread made progress");
    assert_eq!(
        handle.control(worker, e, ResumeAction::Stop),
        Ok(ControlStatus::AlreadyStopped)
    );
    assert_eq!(
        handle.control(worker, e, ResumeAction::Resume),
        Ok(ControlStatus::Done)
    );
    assert!(wait_until(5, || read_counter(&file) > c1));
    handle.end().unwrap();
    let (end, quiesced) = tracer_thread.join().unwrap();
    assert_eq!(end, EndReason::Requested);
    assert_eq!(quiesced, vec![(worker, Event::None)]);
    for t in tids_of(pid) {
        assert_eq!(tracer_pid(pid, t), 0);
    }
    assert_eq!(handle.barrier(), Err(Error::TracerGone));
    finish(child);
}

/// The tracer thread of a traced thread is not known from here; any
/// nonzero TracerPid of another process than ours would be wrong.
fn tracer_thread_tid(pid: i32, tid: i32) -> i32 {
    let t = tracer_pid(pid, tid);
    assert!(t > 0 && Path::new(&format!("/proc/{}/task/{t}", std::process::id())).exists());
    t
}

fn quiesce_running_thread() {
    quiesce("spin");
}

fn quiesce_blocked_thread() {
    quiesce("block");
}

/// Rewrites signals: `map` from original to delivered (None: suppress).
struct SignalEditor {
    map: BTreeMap<i32, Option<Signal>>,
    seen: Vec<Option<Signal>>,
    inject: Option<Signal>,
}

impl Engine for SignalEditor {
    fn report_signal(
        &mut self,
        cx: &mut Cx,
        _: ResumeAction,
        s: &mut SignalReport,
    ) -> ResumeAction {
        self.seen.push(s.original);
        match s.original {
            Some(sig) => {
                // The fixture handles every signal it sends itself.
                assert_eq!(cx.disposition(sig), Ok(Disposition::Handler));
                if let Some(to) = self.map.get(&sig.0) {
                    s.deliver = *to;
                }
            }
            None => s.deliver = self.inject,
        }
        ResumeAction::Resume
    }
}

fn run_signals(map: BTreeMap<i32, Option<Signal>>) -> (String, Vec<Option<Signal>>) {
    on_tracer_thread(move || {
        let file = tmpfile("signals");
        let mut tracer = Tracer::new().unwrap();
        let e = tracer.add_engine(SignalEditor {
            map,
            seen: vec![],
            inject: None,
        });
        let child = tracer
            .spawn(
                &fixture_cmd("signals", &[file.to_str().unwrap(), "send"]),
                None,
            )
            .unwrap();
        let mut ctl = tracer.ctl();
        ctl.attach(child.pid, e, AttachMode::Create, Events::SIGNAL)
            .unwrap();
        ctl.end_when_exits(child.pid);
        assert_eq!(tracer.run().unwrap(), exited(child.pid, 0));
        let out = std::fs::read_to_string(&file).unwrap();
        (out, tracer.engine::<SignalEditor>(e).unwrap().seen.clone())
    })
}

/// A program's own handler counts are the same traced as untraced, real-time
/// signals included; the engine saw each signal.
fn signals_pass_through() {
    let file = tmpfile("signals-untraced");
    let st = Command::new(fixture("signals"))
        .arg(&file)
        .arg("send")
        .status()
        .unwrap();
    assert!(st.success());
    let untraced = std::fs::read_to_string(&file).unwrap();
    assert_eq!(untraced, "usr1=3 usr2=2 rt=2\n");
    let (traced, seen) = run_signals(BTreeMap::new());
    assert_eq!(traced, untraced);
    let rt = Signal(libc::SIGRTMIN() + 2);
    let u1 = Some(Signal::USR1);
    let u2 = Some(Signal::USR2);
    assert_eq!(seen, vec![u1, u1, u1, u2, u2, Some(rt), Some(rt)]);
}

/// An engine suppresses SIGUSR1 and replaces SIGUSR2 by SIGRTMIN+2.
fn signals_suppressed_and_replaced() {
    let rt = Signal(libc::SIGRTMIN() + 2);
    let map = BTreeMap::from([(libc::SIGUSR1, None), (libc::SIGUSR2, Some(rt))]);
    let (traced, _) = run_signals(map);
    assert_eq!(traced, "usr1=0 usr2=0 rt=4\n");
}

/// INTERRUPT, then the injection report: the engine delivers SIGUSR2 to a
/// program blocked in nanosleep; it gets exactly one, and the injected
/// signal is not reported again as an ordinary one.
fn signal_injected_after_interrupt() {
    on_tracer_thread(|| {
        let file = tmpfile("inject");
        let mut tracer = Tracer::new().unwrap();
        let e = tracer.add_engine(SignalEditor {
            map: BTreeMap::new(),
            seen: vec![],
            inject: Some(Signal::USR2),
        });
        let child = tracer
            .spawn(
                &fixture_cmd("signals", &[file.to_str().unwrap(), "wait"]),
                None,
            )
            .unwrap();
        let pid = child.pid;
        let mut ctl = tracer.ctl();
        ctl.attach(pid, e, AttachMode::Create, Events::SIGNAL)
            .unwrap();
        ctl.end_when_exits(pid);
        let answer = Rc::new(RefCell::new(None));
        let a2 = answer.clone();
        ctl.add_timer(Instant::now() + Duration::from_millis(200), move |ctl| {
            *a2.borrow_mut() = Some(ctl.control(pid, e, ResumeAction::Interrupt));
            None
        });
        assert_eq!(tracer.run().unwrap(), exited(pid, 0));
        assert_eq!(*answer.borrow(), Some(Ok(ControlStatus::InProgress)));
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "usr1=0 usr2=1 rt=0\n"
        );
        assert_eq!(tracer.engine::<SignalEditor>(e).unwrap().seen, vec![None]);
    });
}

/// Counts what happens across a process tree.
#[derive(Default)]
struct TreeCounter {
    entries: BTreeMap<Tid, Vec<i64>>,
    exits: BTreeMap<Tid, Vec<i64>>,
    clones: Vec<CloneInfo>,
    execs: Vec<Tid>,
    deaths: BTreeMap<Tid, ExitStatus>,
    reaps: usize,
    pids: BTreeSet<Tid>,
    seccomp_data: BTreeSet<u32>,
    /// cx.pid() at each death.
    death_pids: BTreeSet<Tid>,
}

impl Engine for TreeCounter {
    fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        let info = cx.syscall().unwrap();
        let nr = info.nr;
        self.seccomp_data.extend(info.seccomp_data);
        self.entries.entry(cx.tid()).or_default().push(nr);
        self.pids.insert(cx.pid());
        ResumeAction::Resume
    }
    fn report_syscall_exit(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        let nr = cx.syscall().unwrap().nr;
        self.exits.entry(cx.tid()).or_default().push(nr);
        ResumeAction::Resume
    }
    fn report_clone(&mut self, _cx: &mut Cx, _: ResumeAction, c: &CloneInfo) -> ResumeAction {
        self.clones.push(*c);
        ResumeAction::Resume
    }
    fn report_exec(&mut self, cx: &mut Cx, _: ResumeAction, _former: Tid) -> ResumeAction {
        self.execs.push(cx.tid());
        ResumeAction::Resume
    }
    fn report_death(&mut self, cx: &mut Cx, status: ExitStatus) {
        self.deaths.insert(cx.tid(), status);
        self.death_pids.insert(cx.pid());
    }
    fn report_reap(&mut self, _cx: &mut Cx) {
        self.reaps += 1;
    }
}

const TREE: Events = Events::SYSCALL_ENTRY
    .union(Events::FOLLOW)
    .union(Events::CLONE)
    .union(Events::EXEC)
    .union(Events::DEATH)
    .union(Events::REAP);

fn count_tree(cmd: SpawnCommand, events: Events) -> (TreeCounter, EndReason, Tid) {
    on_tracer_thread(move || {
        let (mut tracer, end, pid) = trace_command(
            &cmd,
            vec![(
                Box::new(|t: &mut Tracer| t.add_engine(TreeCounter::default())),
                events,
            )],
        );
        let counter = std::mem::take(tracer.engine_mut::<TreeCounter>(EngineId(0)).unwrap());
        (counter, end, pid)
    })
}

/// 100 threads are followed from their creation: each one's syscalls are
/// reported, each clone and death too; the exit code is unchanged.
fn follows_100_threads() {
    let (c, end, pid) = count_tree(fixture_cmd("threads", &["100", "100", "3"]), TREE);
    assert_eq!(end, exited(pid, 3));
    assert_eq!(c.clones.len(), 100);
    assert!(c.clones.iter().all(|k| k.kind == CloneKind::Thread));
    let workers: Vec<_> = c.entries.iter().filter(|(t, _)| **t != pid).collect();
    assert_eq!(workers.len(), 100);
    for (_, nrs) in workers {
        assert_eq!(nrs.iter().filter(|&&n| n == GETPPID).count(), 3);
    }
    assert_eq!(c.deaths.len(), 101);
    assert_eq!(c.reaps, 101);
    assert_eq!(c.deaths[&pid], ExitStatus::Exited(3));
    assert_eq!(c.pids, BTreeSet::from([pid]));
    assert_eq!(
        c.death_pids,
        BTreeSet::from([pid]),
        "a dead thread's process is known"
    );
}

/// `sh -c "exec forkexec 3"`: the shell execs the fixture, which forks and
/// execs itself three times; every process is followed and the first one's
/// exit code (7 + 3) is unchanged.
fn follows_fork_exec_chain() {
    let line = format!("exec {} 3", fixture("forkexec").display());
    let cmd = SpawnCommand::new("/bin/sh", &["-c", &line]).unwrap();
    let (c, end, pid) = count_tree(cmd, TREE);
    assert_eq!(end, exited(pid, 10));
    assert_eq!(c.clones.len(), 3);
    assert!(c.clones.iter().all(|k| k.kind == CloneKind::Fork));
    assert_eq!(c.execs.len(), 4, "sh → forkexec, then three children");
    assert_eq!(c.pids.len(), 4);
    let mut codes: Vec<i32> = c.deaths.values().map(|s| s.code()).collect();
    codes.sort();
    assert_eq!(codes, vec![7, 8, 9, 10]);
}

/// posix_spawn (a vfork: the parent waits until the child execs) is
/// followed, and both exit codes come through.
fn follows_vfork() {
    let syscalls = fixture("syscalls");
    let cmd = fixture_cmd("spawner", &[syscalls.to_str().unwrap(), "7", "40"]);
    let (c, end, pid) = count_tree(cmd, TREE);
    assert_eq!(end, exited(pid, 41));
    assert_eq!(c.clones.len(), 1);
    assert_eq!(c.clones[0].kind, CloneKind::Vfork);
    let child = c.clones[0].child;
    assert_eq!(c.execs, vec![child]);
    let getppids = c.entries[&child].iter().filter(|&&n| n == GETPPID).count();
    assert_eq!(getppids, 7);
    assert_eq!(c.deaths[&child], ExitStatus::Exited(40));
}

/// Exit codes and deaths by signal come through unchanged.
fn exit_codes_unchanged() {
    let (_, end, pid) = count_tree(fixture_cmd("syscalls", &["10", "42"]), TREE);
    assert_eq!(end, exited(pid, 42));
    let cmd = SpawnCommand::new("/bin/sh", &["-c", "kill -TERM $$"]).unwrap();
    let (_, end, pid) = count_tree(cmd, TREE);
    let status = ExitStatus::Signaled {
        sig: Signal::TERM,
        core: false,
    };
    assert_eq!(end, EndReason::ProcessExited { pid, status });
}

/// Records job-control reports.
#[derive(Default)]
struct JobWatcher {
    jctl: Vec<(Tid, Jctl)>,
}

impl Engine for JobWatcher {
    fn report_jctl(&mut self, cx: &mut Cx, _: ResumeAction, j: Jctl) -> ResumeAction {
        self.jctl.push((cx.tid(), j));
        ResumeAction::Resume
    }
}

/// `kill -STOP` stops a traced program (no progress, every thread stopped)
/// and `kill -CONT` continues it, as untraced; engines get report_jctl.
fn job_control_stop_continue() {
    let (child, file) = start_ticker("block", 2);
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    let tracer_thread = std::thread::spawn(move || {
        let mut tracer = Tracer::new().unwrap();
        let e = tracer.add_engine(JobWatcher::default());
        let mut ctl = tracer.ctl();
        for tid in ctl.attach_process(Tid(pid)).unwrap() {
            ctl.attach(
                tid,
                e,
                AttachMode::Create,
                Events::JCTL | Events::SYSCALL_ENTRY,
            )
            .unwrap();
        }
        tx.send(tracer.handle()).unwrap();
        tracer.run().unwrap();
        std::mem::take(&mut tracer.engine_mut::<JobWatcher>(e).unwrap().jctl)
    });
    let handle = rx.recv().unwrap();
    handle.barrier().unwrap();
    kill(pid, libc::SIGSTOP);
    let tids = tids_of(pid);
    // Stopped: a listening tracee shows as `t` (the kernel keeps it in
    // TASK_TRACED), untraced it would be `T`.
    assert!(wait_until(5, || tids.iter().all(|&t| state(pid, t) == 't')));
    std::thread::sleep(Duration::from_millis(50));
    let c1 = read_counter(&file);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(read_counter(&file), c1, "a stopped program made progress");
    kill(pid, libc::SIGCONT);
    assert!(wait_until(5, || read_counter(&file) > c1));
    handle.end().unwrap();
    let jctl = tracer_thread.join().unwrap();
    for &t in &tids {
        let mine: Vec<Jctl> = jctl
            .iter()
            .filter(|(x, _)| x.0 == t)
            .map(|(_, j)| *j)
            .collect();
        assert_eq!(
            mine,
            vec![Jctl::Stopped(Signal::STOP), Jctl::Continued],
            "thread {t}"
        );
        assert_eq!(tracer_pid(pid, t), 0);
    }
    let c2 = read_counter(&file);
    assert!(
        wait_until(5, || read_counter(&file) > c2),
        "runs on after detach"
    );
    finish(child);
}

/// SIGKILL ends a program promptly while an engine holds it stopped.
fn sigkill_while_stopped() {
    on_tracer_thread(|| {
        let mut tracer = Tracer::new().unwrap();
        let log = Rc::new(RefCell::new(Vec::new()));
        let e = tracer.add_engine(Recorder {
            name: "A",
            log,
            getppids: 0,
            stop_at: Some(1),
        });
        let child = tracer
            .spawn(&fixture_cmd("syscalls", &["1000000", "0"]), None)
            .unwrap();
        let pid = child.pid;
        let mut ctl = tracer.ctl();
        ctl.attach(pid, e, AttachMode::Create, Events::SYSCALL_ENTRY)
            .unwrap();
        ctl.end_when_exits(pid);
        let killed_at = Rc::new(RefCell::new(None));
        let k2 = killed_at.clone();
        ctl.add_timer(Instant::now() + Duration::from_millis(200), move |ctl| {
            assert_eq!(ctl.is_stopped(pid), Some(true));
            assert_eq!(state(pid.0, pid.0), 't');
            kill(pid.0, libc::SIGKILL);
            *k2.borrow_mut() = Some(Instant::now());
            None
        });
        let end = tracer.run().unwrap();
        let took = killed_at.borrow().unwrap().elapsed();
        let status = ExitStatus::Signaled {
            sig: Signal::KILL,
            core: false,
        };
        assert_eq!(end, EndReason::ProcessExited { pid, status });
        assert!(took < Duration::from_secs(2), "took {took:?}");
    });
}

/// The helper tracer process: attaches to PID, holds its first thread
/// that makes a syscall stopped, prints "ready" and runs until a signal.
fn helper(mode: &str) {
    assert_eq!(mode, "hold");
    let pid: i32 = std::env::args().nth(1).unwrap().parse().unwrap();
    catch_termination_signals().unwrap();
    let mut tracer = Tracer::new().unwrap();
    let log = Rc::new(RefCell::new(Vec::new()));
    let e = tracer.add_engine(HoldFirst {
        held: false,
        _log: log,
    });
    let mut ctl = tracer.ctl();
    for tid in ctl.attach_process(Tid(pid)).unwrap() {
        ctl.attach(
            tid,
            e,
            AttachMode::Create,
            Events::SYSCALL_ENTRY | Events::SYSCALL_EXIT,
        )
        .unwrap();
    }
    ctl.add_timer(Instant::now() + Duration::from_millis(100), |_| {
        println!("ready");
        None
    });
    let end = tracer.run().unwrap();
    eprintln!("helper ended: {end:?}");
    let EndReason::Signal(sig) = end else {
        std::process::exit(1)
    };
    std::process::exit(128 + sig.0);
}

struct HoldFirst {
    held: bool,
    _log: Rc<RefCell<Vec<()>>>,
}

impl Engine for HoldFirst {
    fn report_syscall_entry(&mut self, _cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        if !self.held {
            self.held = true;
            return ResumeAction::Stop;
        }
        ResumeAction::Resume
    }
}

/// A tracer process killed with `sig` mid-trace (one thread held stopped,
/// the others in syscall tracing) leaves the tracee running and untraced.
fn tracer_killed_leaves_tracee_running(sig: i32) {
    let (child, file) = start_ticker("block", 2);
    let pid = child.id() as i32;
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .arg(pid.to_string())
        .env("UTRACE_HELPER", "hold")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(helper.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "ready\n");
    let tids = tids_of(pid);
    for &t in &tids {
        assert_eq!(tracer_pid(pid, t), helper.id() as i32);
    }
    assert!(
        tids.iter().any(|&t| state(pid, t) == 't'),
        "one thread is held"
    );
    kill(helper.id() as i32, sig);
    let st = helper.wait().unwrap();
    assert_eq!(st.code(), Some(128 + sig));
    for &t in &tids {
        assert_eq!(tracer_pid(pid, t), 0);
        assert!(is_running(state(pid, t)), "thread {t} is {}", state(pid, t));
    }
    let c = read_counter(&file);
    assert!(wait_until(5, || read_counter(&file) > c));
    finish(child);
}

fn tracer_sigterm_leaves_tracee_running() {
    tracer_killed_leaves_tracee_running(libc::SIGTERM);
}

fn tracer_sigint_leaves_tracee_running() {
    tracer_killed_leaves_tracee_running(libc::SIGINT);
}

fn tracer_sighup_leaves_tracee_running() {
    tracer_killed_leaves_tracee_running(libc::SIGHUP);
}

/// Seed 002's race: STOP is on its way (the thread interrupted, its stop
/// not yet seen) when the engine detaches; the thread ends up running and
/// untraced, while the process's other thread stays traced.
fn detach_racing_a_stop_leaves_it_running() {
    let Held {
        child,
        file,
        pid,
        worker,
        handle,
        e,
        tracer_thread,
    } = hold_worker("spin");
    let (stop, detach) = handle
        .call(move |c| {
            (
                c.control(worker, e, ResumeAction::Stop),
                c.detach(worker, e),
            )
        })
        .unwrap();
    assert_eq!(stop, Ok(ControlStatus::InProgress));
    assert_eq!(detach, Ok(()));
    assert!(wait_until(5, || tracer_pid(pid, worker.0) == 0));
    assert_ne!(tracer_pid(pid, pid), 0);
    let c = read_counter(&file);
    assert!(wait_until(5, || read_counter(&file) > c));
    assert!(is_running(state(pid, worker.0)));
    handle.end().unwrap();
    assert_eq!(
        tracer_thread.join().unwrap().1,
        vec![],
        "the detached engine got no report"
    );
    finish(child);
}

/// Steps `count` times from the first getppid exit, checking the
/// instruction pointer moves, then resumes.
struct Stepper {
    how: ResumeAction,
    count: usize,
    steps: usize,
    ips: Vec<u64>,
}

impl Engine for Stepper {
    fn report_syscall_exit(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        if self.steps == 0 && cx.syscall().unwrap().nr == GETPPID {
            self.ips.push(cx.regs().unwrap().rip);
            return self.how;
        }
        ResumeAction::Resume
    }
    fn report_quiesce(&mut self, cx: &mut Cx, _: ResumeAction, event: Event) -> ResumeAction {
        if event != Event::Step {
            return ResumeAction::Resume;
        }
        self.steps += 1;
        self.ips.push(cx.regs().unwrap().rip);
        if self.steps < self.count {
            self.how
        } else {
            ResumeAction::Resume
        }
    }
}

fn single_and_block_steps() {
    for (how, count) in [
        (ResumeAction::SingleStep, 200),
        (ResumeAction::BlockStep, 20),
    ] {
        on_tracer_thread(move || {
            let mut tracer = Tracer::new().unwrap();
            let e = tracer.add_engine(Stepper {
                how,
                count,
                steps: 0,
                ips: vec![],
            });
            let child = tracer
                .spawn(&fixture_cmd("syscalls", &["3", "5"]), None)
                .unwrap();
            let mut ctl = tracer.ctl();
            ctl.attach(
                child.pid,
                e,
                AttachMode::Create,
                Events::SYSCALL_EXIT | Events::QUIESCE,
            )
            .unwrap();
            ctl.end_when_exits(child.pid);
            assert_eq!(tracer.run().unwrap(), exited(child.pid, 5));
            let s = tracer.engine::<Stepper>(e).unwrap();
            assert_eq!(s.steps, count, "{how:?}");
            let moved = s.ips.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(
                moved >= count * 9 / 10,
                "{how:?}: ip moved {moved} times in {count} steps"
            );
        });
    }
}

/// Guru-mode fault injection: skip getppid at entry with a chosen return
/// value, or replace its return value at exit.
struct Injector {
    at_entry: bool,
    value: i64,
}

impl Engine for Injector {
    fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        if self.at_entry && cx.syscall().unwrap().nr == GETPPID {
            cx.set_syscall_return(self.value).unwrap();
        }
        ResumeAction::Resume
    }
    fn report_syscall_exit(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        let s = cx.syscall().unwrap();
        if !self.at_entry && s.nr == GETPPID {
            assert_eq!(s.ret, Some(std::process::id() as i64));
            cx.set_syscall_return(self.value).unwrap();
        }
        ResumeAction::Resume
    }
}

fn syscall_return_values() {
    for at_entry in [true, false] {
        on_tracer_thread(move || {
            let mut tracer = Tracer::new().unwrap();
            let e = tracer.add_engine(Injector {
                at_entry,
                value: 4242,
            });
            let child = tracer
                .spawn(&fixture_cmd("syscalls", &["3", "9", "4242"]), None)
                .unwrap();
            let mut ctl = tracer.ctl();
            ctl.attach(
                child.pid,
                e,
                AttachMode::Create,
                Events::SYSCALL_ENTRY | Events::SYSCALL_EXIT,
            )
            .unwrap();
            ctl.end_when_exits(child.pid);
            assert_eq!(
                tracer.run().unwrap(),
                exited(child.pid, 0),
                "at_entry={at_entry}"
            );
        });
    }
    // Skipping with an error at entry: exec fails with EACCES in the shell.
    on_tracer_thread(|| {
        struct DenyExec;
        impl Engine for DenyExec {
            fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
                if cx.syscall().unwrap().nr == libc::SYS_execve {
                    cx.set_syscall_return(-libc::EACCES as i64).unwrap();
                }
                ResumeAction::Resume
            }
        }
        let mut tracer = Tracer::new().unwrap();
        let e = tracer.add_engine(DenyExec);
        let cmd = SpawnCommand::new("/bin/sh", &["-c", "/bin/true 2>/dev/null"]).unwrap();
        let child = tracer.spawn(&cmd, None).unwrap();
        let mut ctl = tracer.ctl();
        ctl.attach(
            child.pid,
            e,
            AttachMode::Create,
            Events::SYSCALL_ENTRY | Events::FOLLOW,
        )
        .unwrap();
        ctl.end_when_exits(child.pid);
        assert_eq!(tracer.run().unwrap(), exited(child.pid, 126));
    });
}

/// Installs `seccomp(RET_TRACE)` for getppid (and execve), everything else
/// allowed; an unknown architecture is traced. Async-signal-safe.
fn install_getppid_filter() -> bool {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const RET_TRACE: u32 = 0x7ff0_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let f = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let ld = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let jeq = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    let prog = [
        f(ld, 0, 0, 4),
        f(jeq, 1, 0, AUDIT_ARCH_X86_64),
        f(ret, 0, 0, RET_TRACE),
        f(ld, 0, 0, 0),
        f(jeq, 3, 0, libc::SYS_getppid as u32),
        f(jeq, 1, 0, libc::SYS_execve as u32),
        f(ret, 0, 0, RET_ALLOW),
        f(ret, 0, 0, RET_TRACE),
        f(ret, 0, 0, RET_TRACE | 0x1234),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut _,
    };
    unsafe { libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog) == 0 }
}

/// With seccomp as the entry source, an entry-only engine costs one stop per
/// selected syscall and sees only those; an exit engine still gets exits.
fn seccomp_entries_one_stop_per_syscall() {
    for events in [
        Events::SYSCALL_ENTRY,
        Events::SYSCALL_ENTRY | Events::SYSCALL_EXIT,
    ] {
        let (c, end, pid, hook_ok) = on_tracer_thread(move || {
            let mut tracer = Tracer::new().unwrap();
            let e = tracer.add_engine(TreeCounter::default());
            let mut hook = install_getppid_filter;
            let child = tracer
                .spawn(&fixture_cmd("syscalls", &["50", "4"]), Some(&mut hook))
                .unwrap();
            let mut ctl = tracer.ctl();
            ctl.set_syscall_source(child.pid, SyscallSource::Seccomp);
            ctl.attach(child.pid, e, AttachMode::Create, events)
                .unwrap();
            ctl.end_when_exits(child.pid);
            let end = tracer.run().unwrap();
            (
                std::mem::take(tracer.engine_mut::<TreeCounter>(e).unwrap()),
                end,
                child.pid,
                child.hook_ok,
            )
        });
        assert!(hook_ok);
        assert_eq!(end, exited(pid, 4));
        assert_eq!(c.entries[&pid], vec![GETPPID; 50], "{events:?}");
        assert_eq!(c.seccomp_data, BTreeSet::from([0x1234]));
        let exits = c.exits.get(&pid).cloned().unwrap_or_default();
        // The exec stop `spawn` leaves the program at is inside execve,
        // entered before tracing: its exit is not reported either.
        let want_exits = if events.contains(Events::SYSCALL_EXIT) {
            vec![GETPPID; 50]
        } else {
            vec![]
        };
        assert_eq!(exits, want_exits, "{events:?}");
    }
}

/// Wants the exit of every other getppid (`Cx::want_syscall_exit` at
/// entry), or of none, or of all; records the exits it is told about.
struct ExitChooser {
    /// Which getppid entries (0-based) want their exit: every `every`-th;
    /// 0 = none.
    every: usize,
    getppids: usize,
    exits: Vec<i64>,
}

impl Engine for ExitChooser {
    fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        if cx.syscall().unwrap().nr == GETPPID {
            let want = self.every != 0 && self.getppids % self.every == 0;
            cx.want_syscall_exit(want);
            self.getppids += 1;
        }
        ResumeAction::Resume
    }
    fn report_syscall_exit(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        self.exits.push(cx.syscall().unwrap().nr);
        ResumeAction::Resume
    }
}

/// The exit stop is chosen per syscall at its entry: with seccomp entries a
/// declined exit costs no stop (counted with `Control::stop_count`), with
/// PTRACE_SYSCALL it still stops (inherent) but is not reported.
fn exit_stops_chosen_per_syscall() {
    let run = |source: SyscallSource, every: usize| {
        on_tracer_thread(move || {
            let mut tracer = Tracer::new().unwrap();
            let e = tracer.add_engine(ExitChooser {
                every,
                getppids: 0,
                exits: Vec::new(),
            });
            let mut hook = install_getppid_filter;
            let hook: Option<&mut dyn FnMut() -> bool> = match source {
                SyscallSource::Seccomp => Some(&mut hook),
                SyscallSource::Ptrace | SyscallSource::Dispatch => None,
            };
            let child = tracer
                .spawn(&fixture_cmd("syscalls", &["50", "4"]), hook)
                .unwrap();
            let mut ctl = tracer.ctl();
            ctl.set_syscall_source(child.pid, source);
            let events = Events::SYSCALL_ENTRY | Events::SYSCALL_EXIT;
            ctl.attach(child.pid, e, AttachMode::Create, events)
                .unwrap();
            ctl.end_when_exits(child.pid);
            assert_eq!(tracer.run().unwrap(), exited(child.pid, 4));
            let c = tracer.engine_mut::<ExitChooser>(e).unwrap();
            let getppid_exits = c.exits.iter().filter(|&&n| n == GETPPID).count();
            (c.getppids, getppid_exits, tracer.ctl().stop_count())
        })
    };
    // Seccomp: 50 entry stops; exit stops only where wanted.
    let (n, all_exits, all_stops) = run(SyscallSource::Seccomp, 1);
    assert_eq!((n, all_exits), (50, 50));
    let (n, half_exits, half_stops) = run(SyscallSource::Seccomp, 2);
    assert_eq!((n, half_exits), (50, 25));
    let (n, no_exits, no_stops) = run(SyscallSource::Seccomp, 0);
    assert_eq!((n, no_exits), (50, 0));
    assert_eq!(all_stops - half_stops, 25);
    assert_eq!(all_stops - no_stops, 50);
    // Exactly one stop per traced syscall, plus the same 2 in every run
    // (the stops around the program's start and its exit).
    assert_eq!(no_stops, 50 + 2);
    assert_eq!(all_stops, 50 + 50 + 2);
    // PTRACE_SYSCALL: every syscall stops twice; only wanted exits reported.
    let (n, exits, stops_half) = run(SyscallSource::Ptrace, 2);
    assert_eq!((n, exits), (50, 25));
    let (_, _, stops_all) = run(SyscallSource::Ptrace, 1);
    assert_eq!(stops_half, stops_all);
}

/// The calling thread's CPU mask (as a list) and scheduling policy.
fn placement() -> (Vec<usize>, i32) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set);
        let cpus = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        (cpus, libc::sched_getscheduler(0))
    }
}

/// Every co-location mode traces correctly, and the tracer thread's own
/// affinity and policy are back as they were when `run` returns.
fn colocation_moves_only_the_tracer_and_restores_it() {
    for mode in [
        Colocation::Off,
        Colocation::Pin,
        Colocation::Idle,
        Colocation::Poll,
    ] {
        let (entries, before, after) = on_tracer_thread(move || {
            let before = placement();
            let mut tracer = Tracer::new().unwrap();
            tracer.set_colocation(mode);
            let e = tracer.add_engine(TreeCounter::default());
            let child = tracer
                .spawn(&fixture_cmd("syscalls", &["500", "4"]), None)
                .unwrap();
            let mut ctl = tracer.ctl();
            ctl.attach(child.pid, e, AttachMode::Create, Events::SYSCALL_ENTRY)
                .unwrap();
            ctl.end_when_exits(child.pid);
            assert_eq!(tracer.run().unwrap(), exited(child.pid, 4));
            let c = tracer.engine::<TreeCounter>(e).unwrap();
            let getppids = c.entries[&child.pid]
                .iter()
                .filter(|&&n| n == GETPPID)
                .count();
            (getppids, before, placement())
        });
        assert_eq!(entries, 500, "{mode:?}");
        assert_eq!(before, after, "{mode:?}");
    }
}

/// Ticks run at their deadlines on the tracer thread, between reports, and
/// can end the session.
fn ticks_run_on_the_tracer_thread() {
    on_tracer_thread(|| {
        let me = std::thread::current().id();
        let mut tracer = Tracer::new().unwrap();
        let start = Instant::now();
        let times = Rc::new(RefCell::new(Vec::new()));
        let t2 = times.clone();
        let mut ctl = tracer.ctl();
        ctl.add_timer(start + Duration::from_millis(50), move |ctl| {
            assert_eq!(std::thread::current().id(), me);
            t2.borrow_mut().push(start.elapsed());
            if t2.borrow().len() == 5 {
                ctl.end(EndReason::Requested);
                return None;
            }
            Some(start + Duration::from_millis(50) * (t2.borrow().len() as u32 + 1))
        });
        assert_eq!(tracer.run().unwrap(), EndReason::Requested);
        let times = times.borrow();
        assert_eq!(times.len(), 5);
        for (i, t) in times.iter().enumerate() {
            let due = Duration::from_millis(50) * (i as u32 + 1);
            assert!(
                *t >= due && *t < due + Duration::from_millis(250),
                "tick {i} at {t:?}"
            );
        }
    });
}

/// 1,000 short-lived threads, every syscall reported at entry and exit:
/// every thread seen, none of its getppids lost, every entry matched by an
/// exit (but exit's, and for the main thread plus the execve it was
/// attached in), no hang, exit code unchanged.
fn stress_1000_threads_every_syscall() {
    let (c, end, pid) = count_tree(
        fixture_cmd("threads", &["1000", "8", "5"]),
        TREE | Events::SYSCALL_EXIT,
    );
    assert_eq!(end, exited(pid, 5));
    assert_eq!(c.clones.len(), 1000);
    assert_eq!(c.deaths.len(), 1001);
    assert_eq!(c.entries.len(), 1001);
    for (tid, nrs) in &c.entries {
        if *tid != pid {
            assert_eq!(
                nrs.iter().filter(|&&n| n == GETPPID).count(),
                3,
                "thread {tid}"
            );
        }
        let exits = c.exits.get(tid).cloned().unwrap_or_default();
        // spawn's execve was entered before tracing: no exit without entry.
        assert_ne!(exits.first(), Some(&libc::SYS_execve), "thread {tid}");
        let finished: Vec<i64> = nrs
            .iter()
            .copied()
            .filter(|&n| n != libc::SYS_exit && n != libc::SYS_exit_group)
            .collect();
        assert!(
            exits == finished,
            "thread {tid}: {} entries, {} exits",
            nrs.len(),
            exits.len()
        );
    }
}

/// Logs its reports; at the 3rd getppid its report_quiesce subscribes to
/// syscall entries, whose report must then follow at once (seed 001).
struct Eager {
    name: &'static str,
    log: Rc<RefCell<Vec<String>>>,
    getppids: usize,
}

impl Engine for Eager {
    fn report_quiesce(&mut self, cx: &mut Cx, _: ResumeAction, event: Event) -> ResumeAction {
        if event == Event::SyscallEntry && cx.syscall().unwrap().nr == GETPPID {
            self.getppids += 1;
            self.log
                .borrow_mut()
                .push(format!("{} quiesce {event:?}", self.name));
            if self.getppids == 3 {
                let (tid, me) = (cx.tid(), cx.engine());
                cx.set_events(tid, me, Events::QUIESCE | Events::SYSCALL_ENTRY)
                    .unwrap();
            }
        }
        ResumeAction::Resume
    }
    fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        if cx.syscall().unwrap().nr == GETPPID {
            self.log.borrow_mut().push(format!("{} entry", self.name));
        }
        ResumeAction::Resume
    }
}

fn quiesce_comes_first_and_can_enable_the_event() {
    let log = on_tracer_thread(|| {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut tracer = Tracer::new().unwrap();
        let q = tracer.add_engine(Eager {
            name: "Q",
            log: log.clone(),
            getppids: 0,
        });
        let s = tracer.add_engine(Eager {
            name: "S",
            log: log.clone(),
            getppids: 0,
        });
        let child = tracer
            .spawn(&fixture_cmd("syscalls", &["4", "0"]), None)
            .unwrap();
        let mut ctl = tracer.ctl();
        ctl.attach(child.pid, q, AttachMode::Create, Events::QUIESCE)
            .unwrap();
        ctl.attach(child.pid, s, AttachMode::Create, Events::SYSCALL_ENTRY)
            .unwrap();
        ctl.end_when_exits(child.pid);
        assert_eq!(tracer.run().unwrap(), exited(child.pid, 0));
        log.take()
    });
    let want = [
        "Q quiesce SyscallEntry",
        "S entry",
        "Q quiesce SyscallEntry",
        "S entry",
        "Q quiesce SyscallEntry",
        "Q entry",
        "S entry",
        "Q quiesce SyscallEntry",
        "Q entry",
        "S entry",
    ];
    assert_eq!(log, want);
}

/// Runs `f`, catching its panic; a panic whose message has `expected` in
/// it is not printed (the default hook would print it, with a backtrace
/// under RUST_BACKTRACE, into a passing run). Whether it panicked.
fn quiet_panics(expected: &'static str, f: impl FnOnce() + std::panic::UnwindSafe) -> bool {
    let previous = std::sync::Arc::new(std::panic::take_hook());
    let fallback = previous.clone();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload_as_str().is_some_and(|m| m.contains(expected)) {
            fallback(info);
        }
    }));
    let panicked = std::panic::catch_unwind(f).is_err();
    std::panic::set_hook(Box::new(move |info| previous(info)));
    panicked
}

/// A panic in a callback unwinds out of `run`; dropping the tracer detaches
/// every thread, which runs on untraced.
fn panic_in_a_callback_detaches_everything() {
    struct Panicky(usize);
    impl Engine for Panicky {
        fn report_syscall_entry(&mut self, _cx: &mut Cx, _: ResumeAction) -> ResumeAction {
            self.0 += 1;
            assert!(
                self.0 < 20,
                "an intentional engine bug: this test expects the panic"
            );
            ResumeAction::Resume
        }
    }
    let (child, file) = start_ticker("block", 2);
    let pid = child.id() as i32;
    let outcome = std::thread::spawn(move || {
        quiet_panics("an intentional engine bug", || {
            let mut tracer = Tracer::new().unwrap();
            let e = tracer.add_engine(Panicky(0));
            let mut ctl = tracer.ctl();
            for tid in ctl.attach_process(Tid(pid)).unwrap() {
                ctl.attach(tid, e, AttachMode::Create, Events::SYSCALL_ENTRY)
                    .unwrap();
            }
            let _ = tracer.run();
        })
    })
    .join()
    .unwrap();
    assert!(outcome, "the engine panicked");
    for t in tids_of(pid) {
        assert_eq!(tracer_pid(pid, t), 0);
        assert!(is_running(state(pid, t)));
    }
    let c = read_counter(&file);
    assert!(wait_until(5, || read_counter(&file) > c));
    finish(child);
}

/// Several tracer threads in one process, and an untraced child waited for
/// by yet another thread, all at once: each tracer sees exactly its own
/// process (it waits with __WNOTHREAD) and nobody loses a child.
fn parallel_tracers_in_one_process() {
    let tracers: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let code = (20 + i).to_string();
                let (c, end, pid) = count_tree(fixture_cmd("syscalls", &["3000", &code]), TREE);
                assert_eq!(end, exited(pid, 20 + i));
                assert_eq!(c.pids, BTreeSet::from([pid]));
                c.entries[&pid].iter().filter(|&&n| n == GETPPID).count()
            })
        })
        .collect();
    let plain = std::thread::spawn(|| {
        let st = Command::new(fixture("syscalls"))
            .args(["100000", "33"])
            .status()
            .unwrap();
        st.code()
    });
    for t in tracers {
        assert_eq!(t.join().unwrap(), 3000);
    }
    assert_eq!(plain.join().unwrap(), Some(33));
}

/// A non-leader thread execs: it takes over the process id; the engines
/// follow it (report_exec with the former id) and the new program's exit
/// code comes through.
fn exec_from_a_non_leader_thread() {
    let syscalls = fixture("syscalls");
    let cmd = fixture_cmd("threadexec", &[syscalls.to_str().unwrap(), "5", "12"]);
    let (c, end, pid) = count_tree(cmd, TREE);
    assert_eq!(end, exited(pid, 12));
    assert_eq!(c.execs, vec![pid]);
    assert_eq!(c.clones.len(), 1);
    let thread = c.clones[0].child;
    // Before the exec the thread made syscalls under its own id; after it,
    // the new program's getppids are reported under the process id.
    assert!(c.entries[&thread].contains(&libc::SYS_execve));
    let after: Vec<_> = c.entries[&pid].iter().filter(|&&n| n == GETPPID).collect();
    assert_eq!(after.len(), 5);
    assert_eq!(c.deaths.get(&pid), Some(&ExitStatus::Exited(12)));
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A tracer whose tracee makes no event it must report sleeps: over half a
/// second it spends (almost) no CPU time, while the tracee runs on.
fn idle_tracer_uses_no_cpu() {
    let (child, file) = start_ticker("block", 1);
    let pid = child.id() as i32;
    let used = on_tracer_thread(move || {
        let mut tracer = Tracer::new().unwrap();
        let e = tracer.add_engine(JobWatcher::default());
        let mut ctl = tracer.ctl();
        for tid in ctl.attach_process(Tid(pid)).unwrap() {
            ctl.attach(tid, e, AttachMode::Create, Events::JCTL | Events::EXEC)
                .unwrap();
        }
        let start = Rc::new(RefCell::new(None));
        let used = Rc::new(RefCell::new(Duration::ZERO));
        let (s2, u2) = (start.clone(), used.clone());
        ctl.add_timer(Instant::now() + Duration::from_millis(50), move |ctl| {
            let mut s = s2.borrow_mut();
            match *s {
                None => {
                    *s = Some(thread_cpu_time());
                    Some(Instant::now() + Duration::from_millis(500))
                }
                Some(t0) => {
                    *u2.borrow_mut() = thread_cpu_time() - t0;
                    ctl.end(EndReason::Requested);
                    None
                }
            }
        });
        tracer.run().unwrap();
        used.take()
    });
    assert!(
        used < Duration::from_millis(5),
        "the idle tracer used {used:?}"
    );
    let c = read_counter(&file);
    assert!(wait_until(5, || read_counter(&file) > c));
    finish(child);
}

/// The doorbell (the tracer thread's wake-up child) killed by somebody: the
/// tracer starts another, and existing handles still reach it.
fn killed_doorbell_is_replaced() {
    let (tx, rx) = mpsc::channel();
    let tracer_thread = std::thread::spawn(move || {
        let mut tracer = Tracer::new().unwrap();
        let me = unsafe { libc::gettid() };
        let children = std::fs::read_to_string(format!("/proc/self/task/{me}/children")).unwrap();
        let doorbell: i32 = children.trim().parse().unwrap();
        tx.send((tracer.handle(), doorbell)).unwrap();
        tracer.run().unwrap()
    });
    let (handle, doorbell) = rx.recv().unwrap();
    assert_eq!(handle.call(|c| c.threads().len()), Ok(0));
    kill(doorbell, libc::SIGKILL);
    for _ in 0..3 {
        assert_eq!(handle.call(|c| c.threads().len()), Ok(0));
    }
    handle.end().unwrap();
    assert_eq!(tracer_thread.join().unwrap(), EndReason::Requested);
}
