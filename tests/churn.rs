//! `-x PID` on a process that keeps creating and joining threads (the
//! `churn` fixture; issue 11, point 3): a thread that exits during the
//! attach, or that the kernel attached already through its creator's clone
//! event, is normal, never "operation not permitted". Twenty attaches in a
//! row all succeed, every thread that ends was seen beginning, and each
//! session lets the program go, running and untraced.

mod support;

use support::*;

/// Threads begun (already running at attach, or created since) and ended.
const COUNT: &str = r#"
global begun, ended
probe process.begin { println("attached") }
probe process.thread.begin { if (tid() != pid()) begun++ }
probe process.thread.end { ended++ }
probe end { printf("begun>0=%d ended>0=%d live=%d\n", begun > 0, ended > 0, begun - ended) }
"#;

/// `COUNT` ending at the second thread's end (a fixed `-T 0.2` once saw
/// none end on a loaded machine); `-T` only bounds a session that sees
/// none.
fn count_two_ends() -> String {
    COUNT.replace("{ ended++ }", "{ ended++; if (ended == 2) exit() }")
}

/// The fixture runs 4 threads at a time.
const AT_ONCE: u32 = 4;

fn check(out: &Outcome) {
    assert_eq!(out.stderr, "", "{out:?}");
    assert_eq!(out.status, 0, "{out:?}");
    let last = out.stdout.lines().last().unwrap_or_default();
    let (seen, live) = last
        .rsplit_once(" live=")
        .unwrap_or_else(|| panic!("unexpected output {:?}", out.stdout));
    assert_eq!(seen, "begun>0=1 ended>0=1", "threads not seen");
    // Every thread that ended had begun; those still running at the end
    // are at most the fixture's batch.
    let live: u32 = live
        .parse()
        .unwrap_or_else(|_| panic!("{live} threads unaccounted for"));
    assert!(live <= AT_ONCE, "{live} threads unaccounted for");
}

#[test]
fn twenty_attaches_to_a_thread_churning_program_all_succeed() {
    let churn = Running::ready("churn", &[&AT_ONCE.to_string()]);
    let pid = churn.pid().to_string();
    for _ in 0..20 {
        let script = count_two_ends();
        let out = finish(utap(&script, &["-T", "10", "-x", &pid]).spawn().unwrap());
        check(&out);
        assert_settled_untraced(churn.pid(), "");
    }
}

#[test]
fn sigint_ends_a_churning_session_promptly() {
    let churn = Running::ready("churn", &[&AT_ONCE.to_string()]);
    let live = Live::spawn(utap(COUNT, &["-x", &churn.pid().to_string()]));
    assert_eq!(live.line(), "attached");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let start = std::time::Instant::now();
    signal(live.pid(), libc::SIGINT);
    let out = live.finish();
    let took = start.elapsed();
    check(&out);
    assert!(took.as_secs_f64() < 2.0, "SIGINT took {took:?}");
    assert_settled_untraced(churn.pid(), "");
}
