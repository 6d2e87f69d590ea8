//! The shared region: one memfd, mapped in the tracer (read, write and
//! execute) and at the same address in every traced program (code r-x,
//! data rw-), so compiled code and its absolute addresses are valid on
//! both sides, and the tracer can run an in-process handler itself at a
//! stop that the data plane cannot serve (one state, whichever route).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::layout::{CODE_LEN, DataLayout, Header};

/// Where the region is asked for first: far from where the kernel puts
/// libraries and heaps, so the same address is free in the programs too.
const HINT: u64 = 0x3f00_0000_0000;

/// This process's hint: one of 256 slots 4 GiB apart, by pid, so that a
/// session attaching to a program a dead session left its region in
/// (which stays mapped there: see `dataplane`) most likely finds its own
/// address free. The pid is hashed: `-x` hosts steer their pids to ones
/// with a byte equal to 1 (`host::split`), so its low byte alone would
/// give every such session the same slot.
fn hint() -> u64 {
    HINT + (slot(std::process::id()) << 32)
}

/// One of 256 slots for process id `pid` (Fibonacci hashing: all its
/// bytes count).
fn slot(pid: u32) -> u64 {
    u64::from(pid.wrapping_mul(0x9e37_79b1) >> 24)
}

pub struct Region {
    fd: OwnedFd,
    base: u64,
    pub data: DataLayout,
}

impl Region {
    /// Creates the memfd and maps it here.
    pub fn create(data: DataLayout) -> std::io::Result<Region> {
        let name = c"utap-dataplane";
        // SAFETY: a plain syscall; the fd is owned below.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: just created, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = CODE_LEN + data.len;
        // SAFETY: resizing our own memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let prot = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        let map = |addr: u64, flags: libc::c_int| {
            // SAFETY: a new shared mapping of our memfd; NOREPLACE keeps
            // whatever is mapped at the hint.
            unsafe {
                libc::mmap(
                    addr as *mut libc::c_void,
                    len as usize,
                    prot,
                    libc::MAP_SHARED | flags,
                    fd.as_raw_fd(),
                    0,
                )
            }
        };
        let mut p = map(hint(), libc::MAP_FIXED_NOREPLACE);
        if p == libc::MAP_FAILED {
            p = map(0, 0);
        }
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // The filter compares the gadget's address in two 32-bit words:
        // the code part must not cross a 4 GiB line.
        let (start, end) = (p as u64, p as u64 + CODE_LEN - 1);
        if start >> 32 != end >> 32 {
            // SAFETY: the mapping just made.
            unsafe { libc::munmap(p, len as usize) };
            return Err(std::io::Error::other("the region would cross a 4 GiB line"));
        }
        Ok(Region {
            fd,
            base: p as u64,
            data,
        })
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    /// The code part: `[base, base + CODE_LEN)`.
    pub fn code(&self) -> std::ops::Range<u64> {
        self.base..self.base + CODE_LEN
    }

    /// The data part's start.
    pub fn data_base(&self) -> u64 {
        self.base + CODE_LEN
    }

    pub fn len(&self) -> u64 {
        CODE_LEN + self.data.len
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    pub fn header(&self) -> *mut Header {
        self.data_base() as *mut Header
    }

    /// A pointer to `len` bytes at data offset `off`, if inside the region.
    pub fn data_ptr(&self, off: u64, len: u64) -> Option<*mut u8> {
        (off.checked_add(len)? <= self.data.len).then(|| (self.data_base() + off) as *mut u8)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: our own mapping; nothing of ours runs from it any more
        // (programs keep their own mappings of the memfd).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len() as usize) };
    }
}
