//! Passing a client's standard descriptors to the daemon (SCM_RIGHTS), so
//! that a `-c` command the daemon starts reads and writes the client's
//! terminal, pipes or files, as it would under a standalone utap.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// How many descriptors travel: stdin, stdout, stderr.
pub const COUNT: usize = 3;

const SPACE: usize = unsafe { libc::CMSG_SPACE((COUNT * size_of::<i32>()) as u32) } as usize;

/// Sends `fds` with one byte of data.
pub fn send(sock: &UnixStream, fds: [i32; COUNT]) -> io::Result<()> {
    let mut byte = [b'F'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u8; SPACE];
    // SAFETY: msghdr points at live local buffers of the sizes given; the
    // CMSG macros stay within `control`.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = SPACE as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN((COUNT * size_of::<i32>()) as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), COUNT);
        if libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives the descriptors [`send`] sent (closed on drop).
pub fn receive(sock: &UnixStream) -> io::Result<Vec<OwnedFd>> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u8; SPACE];
    let mut fds = Vec::new();
    // SAFETY: as in `send`; each received descriptor is owned once.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = SPACE as _;
        if libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) != 1 {
            return Err(io::Error::other("the client sent no descriptors"));
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let n = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / size_of::<i32>();
                let data: *const i32 = libc::CMSG_DATA(cmsg).cast();
                for i in 0..n {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if fds.len() != COUNT {
        return Err(io::Error::other("the client sent no descriptors"));
    }
    Ok(fds)
}
