//! Guru thread control (`-g`), shown by what the traced program
//! experiences: `stop()` holds a thread in a ptrace-stop (`ps` state `t`)
//! until a timer probe calls `resume(tid)`; `quiesce(tid)` makes
//! `process.quiesce` fire; SIGKILL ends a held thread at once and the
//! session then ends normally, with its end probes.

mod support;

use std::time::{Duration, Instant};

use support::*;

/// Holds the main thread at its first syscall; resumes it from a timer.
const STOP_RESUME: &str = r#"
global held, resumed
probe process.syscall
{
	if (!held && tid() == pid()) {
		held = tid()
		printf("stopped %d\n", held)
		stop()
	}
}
probe timer.ms(1000) { if (held && !resumed) { resumed = 1; println("resume"); resume(held) } }
probe timer.ms(1300) { exit() }
probe end { println("end") }
"#;

#[test]
fn stop_holds_a_thread_until_resume() {
    let sleeper = Running::ready("sleeper", &["2"]);
    let pid = sleeper.pid();
    let live = Live::spawn(utap(STOP_RESUME, &["-g", "-x", &pid.to_string()]));
    assert_eq!(live.line(), format!("stopped {pid}"));
    // Held: in a tracing stop, while its other threads go on.
    wait_until("the held thread to be in a tracing stop", || {
        state(pid) == 't'
    });
    // It stays held (the sleeper would otherwise call usleep every 20 ms),
    // while the other threads go on sleeping and waking (each briefly in a
    // syscall stop: a probe takes every syscall).
    let switches = |tid: i32| status_field(tid, "voluntary_ctxt_switches");
    let others: Vec<i32> = threads(pid).into_iter().filter(|&t| t != pid).collect();
    let before = switches(pid);
    let others_before: Vec<_> = others.iter().map(|&t| switches(t)).collect();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(state(pid), 't');
    assert_eq!(switches(pid), before, "the held thread ran");
    for (&tid, was) in others.iter().zip(others_before) {
        assert_ne!(switches(tid), was, "thread {tid} is held too");
    }
    assert_eq!(live.line(), "resume");
    // Released: it runs again and switches context at each usleep.
    wait_until("the resumed thread to run", || switches(pid) != before);
    let out = live.finish();
    assert_eq!(out.stdout, "end\n");
    assert_eq!(out.stderr, "");
    assert_eq!(out.status, 0);
    assert_running_untraced(pid);
}

#[test]
fn quiesce_makes_process_quiesce_fire() {
    let sleeper = Running::ready("sleeper", &["1"]);
    let pid = sleeper.pid().to_string();
    let script = r#"
global asked
probe timer.ms(100) { if (!asked) { asked = 1; quiesce(target()) } }
probe process.quiesce { printf("quiesce tid==target: %d\n", tid() == target()); exit() }
probe timer.s(10) { println("no quiesce"); exit() }
"#;
    let out = finish(utap(script, &["-g", "-x", &pid]).spawn().unwrap());
    assert_eq!(out.stdout, "quiesce tid==target: 1\n");
    assert_eq!(out.stderr, "");
    assert_eq!(out.status, 0);
    assert_running_untraced(sleeper.pid());
}

#[test]
fn sigkill_ends_a_held_thread_and_the_session_ends_normally() {
    let mut sleeper = Running::ready("sleeper", &["2"]);
    let pid = sleeper.pid();
    let script = r#"
global held
probe process.syscall { if (!held && tid() == pid()) { held = 1; println("stopped"); stop() } }
probe process.end { println("process.end") }
probe timer.s(10) { println("still held"); exit() }
probe end { println("end") }
"#;
    let live = Live::spawn(utap(script, &["-g", "-x", &pid.to_string()]));
    assert_eq!(live.line(), "stopped");
    wait_until("the held thread to be in a tracing stop", || {
        state(pid) == 't'
    });
    let start = Instant::now();
    signal(pid, libc::SIGKILL);
    let out = live.finish();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(out.stdout, "process.end\nend\n");
    assert_eq!(out.stderr, "");
    assert_eq!(out.status, 0);
    use std::os::unix::process::ExitStatusExt;
    let status = sleeper.child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

/// `stop(tid)` (CONTRACT.md's form) stops any traced thread, here from a
/// timer probe, where there is no current thread; `resume(tid)` lets it go.
#[test]
fn stop_tid_from_a_timer_holds_that_thread() {
    let sleeper = Running::ready("sleeper", &["1"]);
    let pid = sleeper.pid();
    let script = r#"
global n
probe timer.ms(200) {
	n++
	if (n == 1) { stop(target()); println("stopped") }
	if (n == 5) { resume(target()); println("resumed") }
	if (n == 6) exit()
}
"#;
    let live = Live::spawn(utap(script, &["-g", "-x", &pid.to_string()]));
    assert_eq!(live.line(), "stopped");
    wait_until("the thread to be in a tracing stop", || state(pid) == 't');
    let before = status_field(pid, "voluntary_ctxt_switches");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(status_field(pid, "voluntary_ctxt_switches"), before);
    assert_eq!(live.line(), "resumed");
    let out = live.finish();
    assert_eq!(out.stderr, "");
    assert_eq!(out.status, 0);
    assert_running_untraced(pid);
}
