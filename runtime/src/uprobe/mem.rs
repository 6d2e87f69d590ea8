//! Reading and writing a traced process's text through `/proc/PID/mem`.
//! `process_vm_writev` honours page protections and fails on r-x text;
//! the mem file writes with FOLL_FORCE (copy-on-write breaks as for a
//! debugger), which is what a breakpoint needs.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

/// Reads `buf.len()` bytes at `addr` (short at an unmapped page).
pub fn read(pid: i32, addr: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let f = std::fs::File::open(format!("/proc/{pid}/mem"))?;
    f.read_at(buf, addr)
}

/// Writes `bytes` at `addr`, all or an error.
pub fn write(pid: i32, addr: u64, bytes: &[u8]) -> std::io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/mem"))?;
    f.write_all_at(bytes, addr)
}

/// Reads one little-endian u64.
pub fn read_u64(pid: i32, addr: u64) -> std::io::Result<u64> {
    let mut b = [0; 8];
    let n = read(pid, addr, &mut b)?;
    if n < 8 {
        return Err(std::io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(u64::from_le_bytes(b))
}

/// Writes to writable memory (the stack, for an emulated push or call)
/// with one `process_vm_writev`, no file to open; falls back to the mem
/// file.
pub fn write_data(pid: i32, addr: u64, bytes: &[u8]) -> std::io::Result<()> {
    let local = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: `local` covers `bytes`, which outlives the call.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    if n == bytes.len() as isize {
        return Ok(());
    }
    write(pid, addr, bytes)
}

/// Reads one u64 of readable memory (the stack, a call's target) with one
/// `process_vm_readv`, no file to open; falls back to the mem file.
pub fn read_data_u64(pid: i32, addr: u64) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    let local = libc::iovec {
        iov_base: b.as_mut_ptr() as *mut libc::c_void,
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: `local` covers `b`, which outlives the call.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n == 8 {
        return Ok(u64::from_le_bytes(b));
    }
    read_u64(pid, addr)
}

/// One address space's `/proc/PID/mem`, opened at its first use and kept
/// with the space (`super::Space`): a `pread`/`pwrite` on it costs ≈0.4 µs
/// less than a `process_vm_readv`/`writev`, and a return probe's hijack
/// makes two such accesses per hit. The file follows the mm it was opened
/// on, not the pid: the space (and the file with it) is dropped at exec
/// and at the process's death, and a fork child's copy of the space starts
/// without one (`Clone` gives an empty `MemFile`). Should an access still
/// fail (a stale mm reads as nothing), the uncached calls above are used.
#[derive(Debug, Default)]
pub struct MemFile(Option<std::fs::File>);

impl Clone for MemFile {
    /// A copy is for another mm (a fork child's space): it opens its own.
    fn clone(&self) -> Self {
        MemFile(None)
    }
}

impl MemFile {
    /// The open file of `pid`'s memory, opened now if not yet.
    pub fn file(&mut self, pid: i32) -> Option<&std::fs::File> {
        if self.0.is_none() {
            let path = format!("/proc/{pid}/mem");
            self.0 = OpenOptions::new().read(true).write(true).open(path).ok();
        }
        self.0.as_ref()
    }

    /// Reads one little-endian u64 of `pid`'s memory.
    pub fn read_u64(&mut self, pid: i32, addr: u64) -> std::io::Result<u64> {
        read_u64_in(self.file(pid), pid, addr)
    }

    /// Writes `bytes` at `addr` in `pid`'s memory, all or an error.
    pub fn write(&mut self, pid: i32, addr: u64, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(f) = self.file(pid) {
            if f.write_at(bytes, addr).ok() == Some(bytes.len()) {
                return Ok(());
            }
        }
        write_data(pid, addr, bytes)
    }
}

/// Reads one little-endian u64 at `addr` through `file` (`pid`'s open
/// mem file, see `MemFile`), or without it when it is absent or fails.
pub fn read_u64_in(file: Option<&std::fs::File>, pid: i32, addr: u64) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    if file.is_some_and(|f| f.read_at(&mut b, addr).ok() == Some(8)) {
        return Ok(u64::from_le_bytes(b));
    }
    read_data_u64(pid, addr)
}
