//! Reading a tracee's memory (for `user_string`, syscall argument decoding).
//!
//! [`ProcessMemory`] reads with `process_vm_readv` (one syscall, no stop
//! needed), page by page so a read that runs into an unmapped page returns
//! what precedes it; when that syscall is not permitted (a seccomp sandbox,
//! an old kernel) it falls back to `/proc/PID/mem`, then to
//! `PTRACE_PEEKDATA` (which needs the thread stopped under our ptrace).
//!
//! On top of [`ReadMemory`] sit the SystemTap `user_*` functions with the
//! semantics of its tapset/uconversions.stp: `user_string` faults with
//! "user string copy fault -14 at 0000000000001234 [man error::fault]",
//! `user_string_quoted` returns `0x1234` instead of faulting, `user_long`
//! and friends return 0 on a fault.

use std::cell::{Cell, OnceCell};
use std::fs::File;
use std::io::IoSliceMut;
use std::os::unix::fs::FileExt;

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use crate::values::strings::text_strn;

/// A read that failed at `addr` (SystemTap reports these as
/// "user string copy fault -14 at 0x... [man error::fault]").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub addr: u64,
    /// A positive errno value (usually EFAULT).
    pub errno: i32,
}

impl Fault {
    /// SystemTap's error for a failed string copy from `self.addr` (the
    /// start of the string), e.g.
    /// `user string copy fault -14 at 0000000000001234 [man error::fault]`.
    pub fn string_message(&self) -> String {
        format!(
            "user string copy fault -{} at {:016x} [man error::fault]",
            self.errno, self.addr
        )
    }
}

/// Something whose memory can be read: a traced process, or a buffer in tests.
pub trait ReadMemory {
    /// Copies up to `buf.len()` bytes starting at `addr`. Returns how many
    /// were copied (fewer when the range runs into an unmapped page), or a
    /// fault when not even the first byte is readable.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Fault>;
}

const PAGE: u64 = 4096;

/// How [`ProcessMemory`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `process_vm_readv`, falling back to the others when not permitted.
    Auto,
    ProcessVmReadv,
    /// `pread` on `/proc/PID/mem`.
    ProcMem,
    /// `PTRACE_PEEKDATA`, a word at a time; the thread must be in a
    /// ptrace-stop of the calling thread.
    PeekData,
}

/// The memory of a live process (or thread: any tid of it).
pub struct ProcessMemory {
    pid: i32,
    method: Cell<Method>,
    proc_mem: OnceCell<Option<File>>,
}

impl ProcessMemory {
    /// Reads `pid` with `process_vm_readv`, falling back as needed.
    pub fn new(pid: i32) -> ProcessMemory {
        ProcessMemory::with_method(pid, Method::Auto)
    }

    /// Reads `pid` with one method only (tests, or a caller that knows).
    pub fn with_method(pid: i32, method: Method) -> ProcessMemory {
        ProcessMemory {
            pid,
            method: Cell::new(method),
            proc_mem: OnceCell::new(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The method in use (Auto until a fallback has been chosen).
    pub fn method(&self) -> Method {
        self.method.get()
    }

    /// process_vm_readv with one remote iovec per page, so the kernel stops
    /// at the first unreadable page and reports what came before it.
    fn read_vm(&self, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
        const BATCH: usize = 16;
        let mut done = 0;
        while done < buf.len() {
            let mut remote = [RemoteIoVec { base: 0, len: 0 }; BATCH];
            let mut count = 0;
            let mut span = 0;
            let mut at = addr.wrapping_add(done as u64);
            while count < BATCH && done + span < buf.len() {
                let to_page_end = (PAGE - at % PAGE) as usize;
                let len = to_page_end.min(buf.len() - done - span);
                remote[count] = RemoteIoVec {
                    base: at as usize,
                    len,
                };
                count += 1;
                span += len;
                at = at.wrapping_add(len as u64);
            }
            let mut local = [IoSliceMut::new(&mut buf[done..done + span])];
            match process_vm_readv(Pid::from_raw(self.pid), &mut local, &remote[..count]) {
                Ok(n) => {
                    done += n;
                    if n < span {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e as i32),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    /// pread on /proc/PID/mem, page by page for the same short-read rule.
    fn read_proc_mem(&self, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
        let file = self
            .proc_mem
            .get_or_init(|| File::open(format!("/proc/{}/mem", self.pid)).ok());
        let Some(file) = file else {
            return Err(libc::EPERM);
        };
        let mut done = 0;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let len = ((PAGE - at % PAGE) as usize).min(buf.len() - done);
            match file.read_at(&mut buf[done..done + len], at) {
                Ok(0) => break,
                Ok(n) => done += n,
                // The kernel reports unmapped memory here as EIO.
                Err(e) if done == 0 => {
                    let errno = e.raw_os_error().unwrap_or(libc::EIO);
                    return Err(if errno == libc::EIO {
                        libc::EFAULT
                    } else {
                        errno
                    });
                }
                Err(_) => break,
            }
        }
        Ok(done)
    }

    /// PTRACE_PEEKDATA a word at a time (aligned), copying out the bytes
    /// asked for.
    fn read_peek(&self, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
        let mut done = 0;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let word_addr = at & !7;
            let skip = (at - word_addr) as usize;
            // SAFETY: PEEKDATA only reads the tracee; errno tells failure
            // apart from a word that happens to be -1.
            let word = unsafe {
                *libc::__errno_location() = 0;
                let w = libc::ptrace(libc::PTRACE_PEEKDATA, self.pid, word_addr, 0);
                let err = *libc::__errno_location();
                if err != 0 {
                    if done == 0 {
                        return Err(if err == libc::EIO { libc::EFAULT } else { err });
                    }
                    break;
                }
                w
            };
            let bytes = word.to_ne_bytes();
            let n = (8 - skip).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&bytes[skip..skip + n]);
            done += n;
        }
        Ok(done)
    }
}

impl ReadMemory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Fault> {
        if buf.is_empty() {
            return Ok(0);
        }
        let fault = |errno| Fault { addr, errno };
        match self.method.get() {
            Method::ProcessVmReadv => self.read_vm(addr, buf).map_err(fault),
            Method::ProcMem => self.read_proc_mem(addr, buf).map_err(fault),
            Method::PeekData => self.read_peek(addr, buf).map_err(fault),
            Method::Auto => match self.read_vm(addr, buf) {
                Err(libc::EPERM | libc::ENOSYS) => {
                    // Not permitted here: use the next method from now on.
                    let next = match self.read_proc_mem(addr, buf) {
                        Err(libc::EPERM | libc::EACCES) => Method::PeekData,
                        _ => Method::ProcMem,
                    };
                    self.method.set(next);
                    self.read(addr, buf)
                }
                other => other.map_err(fault),
            },
        }
    }
}

/// A byte slice standing in for memory at `base` (tests, decoders).
pub struct SliceMemory<'a> {
    pub base: u64,
    pub bytes: &'a [u8],
}

impl ReadMemory for SliceMemory<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Fault> {
        let off = addr.wrapping_sub(self.base);
        if addr < self.base || off >= self.bytes.len() as u64 {
            return Err(Fault {
                addr,
                errno: libc::EFAULT,
            });
        }
        let src = &self.bytes[off as usize..];
        let n = src.len().min(buf.len());
        buf[..n].copy_from_slice(&src[..n]);
        Ok(n)
    }
}

/// Reads a NUL-terminated string of at most `max` bytes (the NUL is not
/// included; a string without one within `max` bytes is cut at `max`).
/// Reads page by page, so a short string costs one read. Like the kernel's
/// strncpy_from_user, running into unreadable memory before the end is a
/// fault; the fault carries the string's start address, as SystemTap
/// reports it.
pub fn read_cstring<M: ReadMemory + ?Sized>(
    mem: &M,
    addr: u64,
    max: usize,
) -> Result<Vec<u8>, Fault> {
    let mut out = Vec::new();
    read_cstring_into(&mut out, mem, addr, max)?;
    Ok(out)
}

/// [`read_cstring`] appending to `out` (left as it was on a fault), so
/// callers can reuse one buffer.
pub fn read_cstring_into<M: ReadMemory + ?Sized>(
    out: &mut Vec<u8>,
    mem: &M,
    addr: u64,
    max: usize,
) -> Result<(), Fault> {
    let start = out.len();
    let mut chunk = [0u8; PAGE as usize];
    let mut len = 0;
    while len < max {
        let at = addr.wrapping_add(len as u64);
        let want = ((PAGE - at % PAGE) as usize).min(max - len);
        let got = match mem.read(at, &mut chunk[..want]) {
            Ok(n) => n,
            Err(f) => {
                out.truncate(start);
                return Err(Fault {
                    addr,
                    errno: f.errno,
                });
            }
        };
        if got == 0 {
            out.truncate(start);
            return Err(Fault {
                addr,
                errno: libc::EFAULT,
            });
        }
        if let Some(nul) = chunk[..got].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..nul]);
            return Ok(());
        }
        out.extend_from_slice(&chunk[..got]);
        len += got;
    }
    Ok(())
}

/// Reads exactly `N` bytes or faults (at `addr`).
fn read_exact<M: ReadMemory + ?Sized, const N: usize>(
    mem: &M,
    addr: u64,
) -> Result<[u8; N], Fault> {
    let mut buf = [0u8; N];
    match mem.read(addr, &mut buf) {
        Ok(n) if n == N => Ok(buf),
        Ok(_) => Err(Fault {
            addr,
            errno: libc::EFAULT,
        }),
        Err(f) => Err(f),
    }
}

pub fn read_u64<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> Result<u64, Fault> {
    read_exact::<M, 8>(mem, addr).map(u64::from_ne_bytes)
}

pub fn read_u32<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> Result<u32, Fault> {
    read_exact::<M, 4>(mem, addr).map(u32::from_ne_bytes)
}

pub fn read_u16<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> Result<u16, Fault> {
    read_exact::<M, 2>(mem, addr).map(u16::from_ne_bytes)
}

pub fn read_u8<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> Result<u8, Fault> {
    read_exact::<M, 1>(mem, addr).map(|b| b[0])
}

// The user_string family appends its result to `out`, like the value
// runtime's string functions (crate::values::strings); `maxstringlen` is the
// session's MAXSTRINGLEN (default crate::values::strings::DEFAULT_MAXSTRINGLEN).

/// `user_string(addr)`: `user_string_n(addr, MAXSTRINGLEN)`.
pub fn user_string<M: ReadMemory + ?Sized>(
    out: &mut Vec<u8>,
    mem: &M,
    addr: u64,
    maxstringlen: usize,
) -> Result<(), Fault> {
    user_string_n(out, mem, addr, maxstringlen as i64, maxstringlen)
}

/// `user_string_n(addr, n)`: at most `n` bytes, and (SystemTap clamps
/// `n + 1`, the NUL included, to `1..=MAXSTRINGLEN-1`) at most
/// MAXSTRINGLEN-2 of them. On a fault the script gets
/// [`Fault::string_message`] as its error.
pub fn user_string_n<M: ReadMemory + ?Sized>(
    out: &mut Vec<u8>,
    mem: &M,
    addr: u64,
    n: i64,
    maxstringlen: usize,
) -> Result<(), Fault> {
    let len = n
        .saturating_add(1)
        .clamp(1, maxstringlen.saturating_sub(1).max(1) as i64) as usize;
    read_cstring_into(out, mem, addr, len - 1)
}

/// `user_string_quoted(addr)`: `string_quoted(user_string(addr))` (the
/// quoting of the value runtime's `text_strn(s, 0, 1)`), or `0x<hex addr>`
/// without quotes when the memory cannot be read, NULL included.
pub fn user_string_quoted<M: ReadMemory + ?Sized>(
    out: &mut Vec<u8>,
    mem: &M,
    addr: u64,
    maxstringlen: usize,
) {
    let mut raw = Vec::new();
    match user_string(&mut raw, mem, addr, maxstringlen) {
        Ok(()) => text_strn(out, &raw, 0, true, maxstringlen),
        Err(_) => out.extend_from_slice(format!("0x{addr:x}").as_bytes()),
    }
}

/// `user_string_n_quoted(addr, inlen, outlen)`: reads at most `inlen`
/// bytes, quotes them, and cuts a result longer than `outlen - 2` to
/// `outlen - 4` bytes followed by `"...`; `0x<hex addr>` on a fault.
pub fn user_string_n_quoted<M: ReadMemory + ?Sized>(
    out: &mut Vec<u8>,
    mem: &M,
    addr: u64,
    inlen: i64,
    outlen: i64,
    maxstringlen: usize,
) {
    let mut raw = Vec::new();
    if user_string_n(&mut raw, mem, addr, inlen, maxstringlen).is_err() {
        out.extend_from_slice(format!("0x{addr:x}").as_bytes());
        return;
    }
    let start = out.len();
    text_strn(out, &raw, 0, true, maxstringlen);
    if (out.len() - start) as i64 > outlen - 2 {
        out.truncate(start + (outlen - 4).max(0) as usize);
        out.extend_from_slice(b"\"...");
    }
}

/// `user_long(addr)`: the 8-byte value, or 0 when unreadable.
pub fn user_long<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> i64 {
    read_u64(mem, addr).map_or(0, |v| v as i64)
}

/// `user_int(addr)`: the sign-extended 4-byte value, or 0.
pub fn user_int<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> i64 {
    read_u32(mem, addr).map_or(0, |v| v as i32 as i64)
}

/// `user_short(addr)`: the sign-extended 2-byte value, or 0.
pub fn user_short<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> i64 {
    read_u16(mem, addr).map_or(0, |v| v as i16 as i64)
}

/// `user_char(addr)`: the sign-extended byte (char is signed on x86), or 0.
pub fn user_char<M: ReadMemory + ?Sized>(mem: &M, addr: u64) -> i64 {
    read_u8(mem, addr).map_or(0, |v| v as i8 as i64)
}

/// The warning of `user_long_warn` and friends: `kind` is "long", "int",
/// "short", "char", "unsigned short"...; SystemTap formats the address with
/// `%p`, e.g. `user int copy fault 0x0000000000001234 [man error::fault]`.
pub fn user_value_warning(kind: &str, addr: u64) -> String {
    format!("user {kind} copy fault 0x{addr:016x} [man error::fault]")
}

/// SystemTap's text for an exec's argument vector (its `__get_argv`): the
/// strings of the NULL-terminated array at `argv` from index `first` on,
/// each quoted, separated by spaces (`"ls" "-l"`), cut with " ..." once
/// longer than `max` bytes; "" for a NULL array.
pub fn argv_text<M: ReadMemory + ?Sized>(mem: &M, argv: u64, first: usize, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    if argv == 0 {
        return out;
    }
    for i in 0.. {
        let p = user_long(mem, argv + 8 * i as u64) as u64;
        if p == 0 {
            break;
        }
        if i < first {
            continue;
        }
        if out.len() >= max {
            out.extend_from_slice(b" ...");
            break;
        }
        if !out.is_empty() {
            out.push(b' ');
        }
        user_string_quoted(&mut out, mem, p, max);
    }
    out
}

/// SystemTap's text for an exec's environment (its `__count_envp`):
/// `[/* 20 vars */]`, the number of entries of the NULL-terminated array.
pub fn envp_text<M: ReadMemory + ?Sized>(mem: &M, envp: u64) -> String {
    let mut n = 0u64;
    while envp != 0 && user_long(mem, envp + 8 * n) != 0 {
        n += 1;
    }
    format!("[/* {n} var{} */]", if n == 1 { "" } else { "s" })
}
