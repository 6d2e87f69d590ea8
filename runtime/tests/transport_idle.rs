//! The output thread sleeps while idle and wakes for each message (its own
//! test binary, so no other transport's thread shares the name).

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use utap_runtime::transport::{Config, Output, Transport};

fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    unsafe {
        (
            File::from(OwnedFd::from_raw_fd(fds[0])),
            File::from(OwnedFd::from_raw_fd(fds[1])),
        )
    }
}

#[test]
fn idle_output_thread_sleeps_and_wakes_for_each_message() {
    let (mut reader, writer) = pipe();
    let (t, mut p) = Transport::start(Config {
        buffer_bytes: 4096,
        output: Output::Writer(Box::new(writer)),
        control: None,
        render: None,
        json: false,
    })
    .unwrap();
    for round in 0..20 {
        wait_until_sleeping(round);
        let msg = format!("round {round}\n");
        assert!(p.push(msg.as_bytes()));
        // The message arrives without any further push or finish().
        let mut buf = vec![0; msg.len()];
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(buf, msg.as_bytes());
    }
    // Idle means no CPU at all: no polling loop.
    wait_until_sleeping(20);
    let before = output_thread_stat().unwrap().1;
    std::thread::sleep(Duration::from_millis(300));
    let after = output_thread_stat().unwrap().1;
    assert!(
        after - before <= 1,
        "output thread used {} ticks while idle",
        after - before
    );
    drop(p);
    t.finish();
}

/// Waits (up to 10 s, for a loaded machine) until the output thread sleeps.
fn wait_until_sleeping(round: usize) {
    for _ in 0..10_000 {
        // The thread names itself once it runs: until then it is not found.
        if output_thread_stat().is_some_and(|(state, _)| state == 'S') {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("round {round}: the output thread never went to sleep");
}

/// The scheduler state and CPU time (utime + stime, in ticks) of the thread
/// named utap-output in this process.
fn output_thread_stat() -> Option<(char, u64)> {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == "utap-output" {
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
            let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
            // Fields from 3 (state); utime and stime are 14 and 15.
            let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
            return Some((fields[0].chars().next().unwrap(), ticks));
        }
    }
    None
}
