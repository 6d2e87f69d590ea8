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

/// One run: stops seen, wall time, the tracer thread's CPU time.
#[derive(Clone, Copy)]
struct Run {
    stops: u64,
    wall: Duration,
    cpu: Duration,
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The minimal tracer: PTRACE_SYSCALL at every stop, nothing else.
fn bare(program: &Path) -> Run {
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
        let (start, cpu0) = (Instant::now(), thread_cpu());
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
        Run {
            stops,
            wall: start.elapsed(),
            cpu: thread_cpu() - cpu0,
        }
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
fn core(program: &Path) -> Run {
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
    let (start, cpu0) = (Instant::now(), thread_cpu());
    tracer.run().unwrap();
    let (wall, cpu) = (start.elapsed(), thread_cpu() - cpu0);
    Run {
        stops: tracer.engine::<Nothing>(e).unwrap().0,
        wall,
        cpu,
    }
}

fn pin_to_cpu0() {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn measure(program: &Path, label: &str) {
    let mut bare_runs = Vec::new();
    let mut core_runs = Vec::new();
    for _ in 0..ROUNDS {
        bare_runs.push(bare(program));
        core_runs.push(core(program));
    }
    let best = |runs: &[Run]| *runs.iter().min_by_key(|r| r.wall).unwrap();
    let least_cpu = |runs: &[Run]| runs.iter().map(|r| r.cpu).min().unwrap();
    let (b, c) = (best(&bare_runs), best(&core_runs));
    let rate = |r: Run| r.stops as f64 / r.wall.as_secs_f64();
    let per_stop = |d: Duration, n: u64| d.as_secs_f64() * 1e6 / n as f64;
    for (name, r, runs) in [
        ("bare ptrace loop", b, &bare_runs),
        ("core + engine", c, &core_runs),
    ] {
        println!(
            "{label:9} {name:16} {:>7} stops in {:>6.3} s = {:>9.0} events/s; tracer CPU {:.3} us/stop",
            r.stops,
            r.wall.as_secs_f64(),
            rate(r),
            per_stop(least_cpu(runs), r.stops)
        );
    }
    let extra = per_stop(least_cpu(&core_runs), c.stops) - per_stop(least_cpu(&bare_runs), b.stops);
    println!(
        "{label:9} overhead of the core: {:+.1}% per stop (bare/core events/s = {:.3}); {:+.3} us tracer CPU per stop = {:+.1}% of a {:.2} us stop\n",
        (rate(b) / rate(c) - 1.0) * 100.0,
        rate(b) / rate(c),
        extra,
        extra / per_stop(b.wall, b.stops) * 100.0,
        per_stop(b.wall, b.stops)
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
