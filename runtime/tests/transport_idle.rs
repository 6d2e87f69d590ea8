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
    })
    .unwrap();
    for round in 0..20 {
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            output_thread_state(),
            'S',
            "round {round}: output thread is not sleeping"
        );
        let msg = format!("round {round}\n");
        assert!(p.push(msg.as_bytes()));
        // The message arrives without any further push or finish().
        let mut buf = vec![0; msg.len()];
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(buf, msg.as_bytes());
    }
    drop(p);
    t.finish();
}

/// The scheduler state of the thread named utap-output in this process.
fn output_thread_state() -> char {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == "utap-output" {
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            return after.chars().next().unwrap();
        }
    }
    panic!("no utap-output thread");
}
