//! The output transport: order, drops with a stalled reader, drain at
//! finish, `-o FILE`, control messages, and an output thread that sleeps.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use utap_runtime::transport::{
    Config, DEFAULT_BUFFER_MB, Output, Transport, lost_warning, parse_buffer_mb,
};

/// A writer the test can read back (stands in for stderr).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

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

/// Fills a pipe until a write would block, then makes it blocking again, so
/// the output thread's next write blocks until the test reads.
fn fill_pipe(w: &File) -> usize {
    use std::os::fd::AsRawFd;
    let fd = w.as_raw_fd();
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    let block = [b'#'; 4096];
    let mut total = 0;
    loop {
        let n = unsafe { libc::write(fd, block.as_ptr().cast(), block.len()) };
        if n <= 0 {
            break;
        }
        total += n as usize;
    }
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
    total
}

fn config(buffer_bytes: usize, output: Output, control: &Captured) -> Config {
    Config {
        buffer_bytes,
        output,
        control: Some(Box::new(control.clone())),
        render: None,
        json: false,
    }
}

#[test]
fn messages_arrive_whole_and_in_order() {
    let dir = tempdir();
    let path = dir.join("order.out");
    let ctl = Captured::default();
    let (t, mut p) = Transport::start(config(1 << 20, Output::file(&path).unwrap(), &ctl)).unwrap();
    let mut expected = String::new();
    for i in 0..200_000 {
        let msg = format!("message {i}\n");
        // A 1 MiB ring may fill while the output thread writes: retry, so
        // the test checks order and not the drop path.
        while !p.push(msg.as_bytes()) {
            std::thread::yield_now();
        }
        expected.push_str(&msg);
    }
    let lost = p.lost();
    drop(p);
    let stats = t.finish();
    assert_eq!(stats.messages, 200_000);
    assert_eq!(stats.lost, lost);
    assert_eq!(stats.bytes_written, expected.len() as u64);
    assert!(stats.error.is_none());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    // Retried pushes were counted as lost, and the warning says so.
    if lost > 0 {
        assert_eq!(ctl.text(), lost_warning(lost, 1 << 20));
    } else {
        assert_eq!(ctl.text(), "");
    }
}

/// A renderer sees whole messages only, also when they wrap around the
/// end of the ring, and what it makes is what gets written.
#[test]
fn renderer_gets_whole_messages_across_the_ring_end() {
    let dir = tempdir();
    let path = dir.join("render.out");
    let ctl = Captured::default();
    let mut cfg = config(61, Output::file(&path).unwrap(), &ctl);
    // Messages are "<len byte><lowercase text>"; rendered upper-cased.
    cfg.render = Some(Box::new(|mut batch: &[u8], text: &mut Vec<u8>| {
        while let Some((&n, rest)) = batch.split_first() {
            let (msg, rest) = rest.split_at(n as usize);
            text.extend(msg.iter().map(u8::to_ascii_uppercase));
            batch = rest;
        }
    }));
    let (t, mut p) = Transport::start(cfg).unwrap();
    let mut expected = String::new();
    for i in 0..20_000u32 {
        let body = format!("m{}-", i % 997);
        let mut msg = vec![body.len() as u8];
        msg.extend_from_slice(body.as_bytes());
        while !p.push(&msg) {
            std::thread::yield_now();
        }
        expected.push_str(&body.to_uppercase());
    }
    drop(p);
    let stats = t.finish();
    assert!(stats.error.is_none(), "{:?}", stats.error);
    assert_eq!(stats.bytes_written, expected.len() as u64);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
}

#[test]
fn full_ring_drops_and_counts_without_blocking() {
    let (mut reader, writer) = pipe();
    let prefill = fill_pipe(&writer);
    let ctl = Captured::default();
    // A 1000-byte ring holds exactly 10 messages of 100 bytes while the
    // output thread is stuck writing to the full pipe.
    let (t, mut p) =
        Transport::start(config(1000, Output::Writer(Box::new(writer)), &ctl)).unwrap();
    let mut accepted = Vec::new();
    let mut dropped = 0;
    for i in 0..50u8 {
        let msg = vec![b'a' + (i % 26); 100];
        if p.push(&msg) {
            accepted.push(msg);
        } else {
            dropped += 1;
        }
    }
    assert_eq!(accepted.len(), 10);
    assert_eq!(dropped, 40);
    assert_eq!(p.lost(), 40);
    // A message larger than the whole ring is dropped too.
    assert!(!p.push(&[b'x'; 1001]));
    // Control messages are never dropped, even with the ring full.
    for i in 0..100 {
        p.control(format!("WARNING: control {i}\n"));
    }

    // Unstall the reader, then finish: everything accepted is delivered.
    let reading = std::thread::spawn(move || {
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        all
    });
    drop(p);
    let stats = t.finish();
    let all = reading.join().unwrap();
    assert_eq!(stats.lost, 41);
    assert_eq!(stats.messages, 10);
    assert_eq!(stats.bytes_written, 1000);
    assert_eq!(all.len(), prefill + 1000);
    assert!(all[..prefill].iter().all(|&b| b == b'#'));
    assert_eq!(all[prefill..], accepted.concat()[..]);

    let mut expected: String = (0..100)
        .map(|i| format!("WARNING: control {i}\n"))
        .collect();
    expected.push_str(
        "WARNING: There were 41 transport failures. Try utap -s to increase the buffer size from 0.\n",
    );
    assert_eq!(ctl.text(), expected);
}

#[test]
fn finish_drains_everything_pushed() {
    let (mut reader, writer) = pipe();
    let ctl = Captured::default();
    let (t, mut p) =
        Transport::start(config(8 << 20, Output::Writer(Box::new(writer)), &ctl)).unwrap();
    let reading = std::thread::spawn(move || {
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        all
    });
    let mut expected = Vec::new();
    for i in 0..100_000u32 {
        let msg = format!("{i:08}\n");
        assert!(p.push(msg.as_bytes()));
        expected.extend_from_slice(msg.as_bytes());
    }
    // finish() right after the last push, producer still alive.
    let stats = t.finish();
    assert_eq!(stats.lost, 0);
    assert_eq!(ctl.text(), "");
    assert_eq!(reading.join().unwrap(), expected);
    drop(p);
}

#[test]
fn output_file_option_truncates_and_writes() {
    let dir = tempdir();
    let path = dir.join("o.txt");
    std::fs::write(&path, "old contents that must go away\n").unwrap();
    let ctl = Captured::default();
    let (t, mut p) = Transport::start(config(4096, Output::file(&path).unwrap(), &ctl)).unwrap();
    assert!(p.push(b"hello "));
    assert!(p.push(b""));
    assert!(p.push(b"world\n"));
    let stats = t.finish();
    assert_eq!(stats.messages, 2);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello world\n");
    assert!(Output::file(&dir.join("missing-dir/x")).is_err());
}

#[test]
fn control_messages_follow_earlier_data_and_come_from_any_thread() {
    let dir = tempdir();
    let path = dir.join("c.txt");
    let ctl = Captured::default();
    let (t, mut p) = Transport::start(config(4096, Output::file(&path).unwrap(), &ctl)).unwrap();
    let sender = t.control_sender();
    let other = std::thread::spawn(move || sender.send("ERROR: from another thread\n"));
    other.join().unwrap();
    assert!(p.push(b"data\n"));
    p.control_sender().send(b"WARNING: w\n".to_vec());
    drop(p);
    t.finish();
    assert_eq!(ctl.text(), "ERROR: from another thread\nWARNING: w\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "data\n");
}

#[test]
fn buffer_size_option() {
    assert_eq!(parse_buffer_mb("1"), Ok(1 << 20));
    assert_eq!(parse_buffer_mb("4095"), Ok(4095 << 20));
    for bad in ["0", "4096", "-1", "x", ""] {
        assert_eq!(
            parse_buffer_mb(bad),
            Err("Invalid buffer size (should be 1-4095).".to_string())
        );
    }
    assert_eq!(DEFAULT_BUFFER_MB, 16);
    assert_eq!(
        lost_warning(3, 16 << 20),
        "WARNING: There were 3 transport failures. Try utap -s to increase the buffer size from 16.\n"
    );
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "utap-transport-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
