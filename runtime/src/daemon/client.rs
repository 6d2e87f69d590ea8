//! The client: an ordinary `utap` run whose session lives in the daemon.
//!
//! It sends its request, then copies the daemon's frames to its own
//! stdout (or `-o FILE`) and stderr until the `Exit` frame, and ends as it
//! says. SIGINT, SIGTERM, SIGHUP and SIGQUIT end only this session: the
//! client shuts down its writing half (the daemon sees end-of-file, runs
//! the end probes and sends the rest of the output and the verdict). A
//! client killed outright closes the socket: the daemon ends the session
//! the same way and nobody reads the output.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use super::protocol::{self, Frame, Request};
use crate::host::{TERMINATION_SIGNALS, Verdict};

/// Connects to the daemon at `path`.
pub fn connect(path: &Path) -> io::Result<UnixStream> {
    UnixStream::connect(path)
}

/// The socket, for the signal handler.
static SOCKET: AtomicI32 = AtomicI32::new(-1);

extern "C" fn hang_up(_: libc::c_int) {
    let fd = SOCKET.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: shutdown(2) is async-signal-safe.
        unsafe { libc::shutdown(fd, libc::SHUT_WR) };
    }
}

fn catch_signals(fd: i32) {
    SOCKET.store(fd, Ordering::SeqCst);
    for sig in TERMINATION_SIGNALS {
        // SAFETY: installing an async-signal-safe handler.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = hang_up as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Sends `request` and relays the answer; returns how to end. `output`
/// replaces stdout for the session's data (`-o FILE`).
pub fn run(
    mut stream: UnixStream,
    request: Request,
    mut output: Option<Box<dyn Write>>,
) -> Verdict {
    // A daemon that refuses may answer and hang up before the request is
    // written: its answer is still to be read.
    let pass_fds = matches!(
        request,
        Request::Run {
            command_io: Some(_),
            ..
        }
    );
    let mut sent = protocol::send_hello(&mut stream, request);
    if pass_fds && sent.is_ok() {
        sent = super::fds::send(&stream, [0, 1, 2]);
    }
    catch_signals(stream.as_raw_fd());
    let mut reader = io::BufReader::new(&stream);
    loop {
        let frame = match Frame::read(&mut reader) {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                eprintln!("utap: lost the daemon: {e}");
                return Verdict::Exit(1);
            }
        };
        match frame {
            Frame::Stdout(bytes) => {
                let written = match output.as_mut() {
                    Some(w) => w.write_all(&bytes),
                    None => write_fd(1, &bytes),
                };
                if let Err(e) = written {
                    // As a standalone utap: a reader gone is SIGPIPE, quietly.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    if e.kind() == io::ErrorKind::BrokenPipe {
                        return Verdict::Signal(libc::SIGPIPE);
                    }
                    eprintln!("utap: cannot write the output: {e}");
                    return Verdict::Exit(1);
                }
            }
            Frame::Stderr(bytes) => {
                let _ = write_fd(2, &bytes);
            }
            Frame::Exit(code) if code < 0 => return Verdict::Signal(-code),
            Frame::Exit(code) => return Verdict::Exit(code.clamp(0, 255) as u8),
        }
    }
    match sent {
        Err(e) => eprintln!("utap: cannot talk to the daemon: {e}"),
        Ok(()) => eprintln!("utap: the daemon ended the session without a result"),
    }
    Verdict::Exit(1)
}

/// Writes all of `bytes` to a raw descriptor (stdout unbuffered, as the
/// standalone output thread writes it).
fn write_fd(fd: i32, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writing from a live slice.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}
