//! Passing a client's standard descriptors to the daemon (SCM_RIGHTS), so
//! that a `-c` command the daemon starts reads and writes the client's
//! terminal, pipes or files, as it would under a standalone utap. nix's
//! socket module builds and walks the control messages.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, UnixAddr, recvmsg, sendmsg};

/// How many descriptors travel: stdin, stdout, stderr.
pub const COUNT: usize = 3;

/// Sends `fds` with one byte of data.
pub fn send(sock: &UnixStream, fds: [i32; COUNT]) -> io::Result<()> {
    let data = [IoSlice::new(b"F")];
    let rights = [ControlMessage::ScmRights(&fds)];
    let sent = sendmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &data,
        &rights,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if sent != 1 {
        return Err(io::Error::other("the descriptors were not sent"));
    }
    Ok(())
}

/// Receives the descriptors [`send`] sent (closed on drop).
pub fn receive(sock: &UnixStream) -> io::Result<Vec<OwnedFd>> {
    let none = || io::Error::other("the client sent no descriptors");
    let mut byte = [0u8];
    let mut data = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; COUNT]);
    let msg = recvmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &mut data,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|_| none())?;
    let mut fds = Vec::new();
    let received = msg.bytes;
    for c in msg.cmsgs().map_err(|_| none())? {
        if let ControlMessageOwned::ScmRights(raw) = c {
            // SAFETY: each descriptor the kernel installed is owned once.
            fds.extend(
                raw.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    if received != 1 || fds.len() != COUNT {
        return Err(none());
    }
    Ok(fds)
}
