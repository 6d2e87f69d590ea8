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
