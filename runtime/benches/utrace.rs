//! Events per second through the utrace core with a do-nothing engine,
//! against a bare ptrace loop (the minimal tracer below), side by side in
//! one run: the cost the core adds to a stop.
//!
//! Both trace the same fixture (200,000 getppid calls, an entry and an exit
//! stop each) started the same way (fork, SIGSTOP, PTRACE_SEIZE, SIGCONT,
//! exec). Each variant runs several times, alternating, and the best run
//! counts. It is measured twice: unpinned (tracer and tracee on any CPU:
//! each stop may wake an idle CPU) and pinned (both on CPU 0: the per-stop
//! CPU cost, where the core's own overhead shows most).
//!
//! `cargo bench -p utap-runtime --bench utrace`

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use utap_runtime::utrace::*;

const CALLS: &str = "200000";
const ROUNDS: usize = 5;

fn fixture() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/syscalls.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("utrace-bench-syscalls");
    let st = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("cc");
    assert!(st.success());
    out
}

/// The minimal tracer: PTRACE_SYSCALL at every stop, nothing else.
fn bare(program: &Path) -> (u64, Duration) {
    let prog = CString::new(program.to_str().unwrap()).unwrap();
    let count = CString::new(CALLS).unwrap();
    let argv = [prog.as_ptr(), count.as_ptr(), std::ptr::null()];
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::raise(libc::SIGSTOP);
            libc::execv(argv[0], argv.as_ptr());
            libc::_exit(127);
        }
        let mut st = 0;
        libc::waitpid(pid, &mut st, libc::WUNTRACED | libc::__WALL);
        let opts = 0x01 | 0x10 | 0x10_0000; // TRACESYSGOOD | TRACEEXEC | EXITKILL
        assert_eq!(libc::ptrace(libc::PTRACE_SEIZE, pid, 0, opts), 0);
        libc::kill(pid, libc::SIGCONT);
        let start = Instant::now();
        let mut stops = 0u64;
        loop {
            libc::waitpid(pid, &mut st, libc::__WALL);
            if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
                break;
            }
            let sig = libc::WSTOPSIG(st);
            let deliver = if sig == libc::SIGTRAP | 0x80 {
                stops += 1;
                0
            } else if (st >> 16) != 0 || sig == libc::SIGCONT {
                0
            } else {
                sig
            };
            libc::ptrace(libc::PTRACE_SYSCALL, pid, 0, deliver);
        }
        (stops, start.elapsed())
    }
}

struct Nothing(u64);

impl Engine for Nothing {
    fn report_syscall_entry(&mut self, _cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        self.0 += 1;
        ResumeAction::Resume
    }
    fn report_syscall_exit(&mut self, _cx: &mut Cx, _: ResumeAction) -> ResumeAction {
        self.0 += 1;
        ResumeAction::Resume
    }
}

/// The same program through the core with a do-nothing engine.
fn core(program: &Path) -> (u64, Duration) {
    let mut tracer = Tracer::new().unwrap();
    let e = tracer.add_engine(Nothing(0));
    let cmd = SpawnCommand::new(program.to_str().unwrap(), &[CALLS]).unwrap();
    let child = tracer.spawn(&cmd, None).unwrap();
    let mut ctl = tracer.ctl();
    ctl.attach(
        child.pid,
        e,
        AttachMode::Create,
        Events::SYSCALL_ENTRY | Events::SYSCALL_EXIT,
    )
    .unwrap();
    ctl.end_when_exits(child.pid);
    let start = Instant::now();
    tracer.run().unwrap();
    let elapsed = start.elapsed();
    (tracer.engine::<Nothing>(e).unwrap().0, elapsed)
}

fn pin_to_cpu0() {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn measure(program: &Path, label: &str) {
    let mut best_bare = (0, Duration::MAX);
    let mut best_core = (0, Duration::MAX);
    for _ in 0..ROUNDS {
        let b = bare(program);
        if b.1 < best_bare.1 {
            best_bare = b;
        }
        let c = core(program);
        if c.1 < best_core.1 {
            best_core = c;
        }
    }
    let rate = |(n, d): (u64, Duration)| n as f64 / d.as_secs_f64();
    let (rb, rc) = (rate(best_bare), rate(best_core));
    println!(
        "{label:9} bare ptrace loop: {:>7} stops in {:>6.3} s = {:>9.0} events/s",
        best_bare.0,
        best_bare.1.as_secs_f64(),
        rb
    );
    println!(
        "{label:9} core + engine:    {:>7} stops in {:>6.3} s = {:>9.0} events/s",
        best_core.0,
        best_core.1.as_secs_f64(),
        rc
    );
    println!(
        "{label:9} overhead of the core per stop: {:+.1}% (ratio bare/core events/s = {:.3})\n",
        (rb / rc - 1.0) * 100.0,
        rb / rc
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("utrace_events_per_second: benchmark");
        return;
    }
    let program = fixture();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "utrace core vs bare ptrace, best of {ROUNDS} (loadavg at start: {})",
        load.trim()
    );
    std::thread::spawn(move || {
        measure(&program, "unpinned");
        pin_to_cpu0();
        measure(&program, "pinned");
    })
    .join()
    .unwrap();
}
