//! Reading a real child's memory with each method, and SystemTap's user_*
//! semantics on top.

use utap_runtime::memory::{
    Fault, Method, ProcessMemory, ReadMemory, SliceMemory, read_cstring, read_cstring_into,
    read_u8, read_u16, read_u32, read_u64, user_char, user_int, user_long, user_short, user_string,
    user_string_n, user_string_n_quoted, user_string_quoted, user_value_warning,
};

/// SystemTap 2.x's MAXSTRINGLEN, to show the clamping on short strings.
const MAXSTRINGLEN: usize = 128;

/// Calls an appending user_string function and returns what it appended.
fn string(f: impl FnOnce(&mut Vec<u8>) -> Result<(), Fault>) -> Result<Vec<u8>, Fault> {
    let mut out = b"kept:".to_vec();
    match f(&mut out) {
        Ok(()) => Ok(out[5..].to_vec()),
        Err(e) => {
            // Nothing appended on a fault.
            assert_eq!(out, b"kept:");
            Err(e)
        }
    }
}

fn quoted(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut out = Vec::new();
    f(&mut out);
    String::from_utf8(out).unwrap()
}

const PAGE: usize = 4096;

/// Memory laid out before fork, so the child has it at the same addresses:
/// one readable page followed by one that faults. The second page maps past
/// the end of a one-page memfd, so it stays reserved (no other thread's mmap
/// can land there) yet every read of it fails.
struct Layout {
    page: u64,
}

impl Layout {
    fn new() -> Layout {
        unsafe {
            let fd = libc::memfd_create(c"utap-memory-test".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, PAGE as i64), 0);
            let p = libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE,
                fd,
                0,
            );
            libc::close(fd);
            assert_ne!(p, libc::MAP_FAILED);
            Layout { page: p as u64 }
        }
    }

    fn write(&self, offset: usize, bytes: &[u8]) -> u64 {
        assert!(offset + bytes.len() <= PAGE);
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (self.page as *mut u8).add(offset),
                bytes.len(),
            );
        }
        self.page + offset as u64
    }

    fn end(&self) -> u64 {
        self.page + PAGE as u64
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.page as *mut libc::c_void, 2 * PAGE) };
    }
}

/// A forked child stopped under our ptrace (so PEEKDATA works too).
struct Child {
    pid: i32,
}

impl Child {
    fn stopped() -> Child {
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe {
                libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
                libc::raise(libc::SIGSTOP);
                libc::_exit(0);
            }
        }
        let mut status = 0;
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        assert_eq!(r, pid);
        assert!(libc::WIFSTOPPED(status));
        Child { pid }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, libc::__WALL);
        }
    }
}

const METHODS: [Method; 4] = [
    Method::Auto,
    Method::ProcessVmReadv,
    Method::ProcMem,
    Method::PeekData,
];

fn efault(addr: u64) -> Fault {
    Fault {
        addr,
        errno: libc::EFAULT,
    }
}

#[test]
fn every_method_reads_strings_and_stops_at_unmapped_pages() {
    let layout = Layout::new();
    let hello = layout.write(100, b"hello, tracee\0garbage");
    // No NUL before the unmapped page.
    let tail = layout.write(PAGE - 10, b"0123456789");
    // NUL exactly at the last byte of a mapped page.
    let layout2 = Layout::new();
    let edge = layout2.write(PAGE - 6, b"edge!\0");
    let child = Child::stopped();
    // The parent's copy changes after the fork; the child keeps the old one.
    layout.write(100, b"CHANGED");

    for method in METHODS {
        let mem = ProcessMemory::with_method(child.pid, method);
        assert_eq!(mem.pid(), child.pid);
        let m = format!("{method:?}");
        assert_eq!(
            read_cstring(&mem, hello, 100).unwrap(),
            b"hello, tracee",
            "{m}"
        );
        assert_eq!(read_cstring(&mem, hello, 5).unwrap(), b"hello", "{m}");
        assert_eq!(read_cstring(&mem, hello, 0).unwrap(), b"", "{m}");
        assert_eq!(read_cstring(&mem, edge, 100).unwrap(), b"edge!", "{m}");
        // Cut by max before the hole: fine. Running into it: a fault at the
        // string's start.
        assert_eq!(read_cstring(&mem, tail, 10).unwrap(), b"0123456789", "{m}");
        assert_eq!(read_cstring(&mem, tail, 11), Err(efault(tail)), "{m}");
        assert_eq!(
            read_cstring(&mem, layout.end(), 11),
            Err(efault(layout.end())),
            "{m}"
        );

        // A raw read spanning into the hole stops short at the page end.
        let mut buf = [0u8; 64];
        assert_eq!(mem.read(tail, &mut buf), Ok(10), "{m}");
        assert_eq!(&buf[..10], b"0123456789", "{m}");
        assert_eq!(
            mem.read(layout.end() + 8, &mut buf),
            Err(efault(layout.end() + 8)),
            "{m}"
        );
        assert_eq!(mem.read(0, &mut buf), Err(efault(0)), "{m}");
    }
    // Nothing forbids process_vm_readv here, so Auto never fell back.
    let auto = ProcessMemory::new(child.pid);
    read_cstring(&auto, hello, 10).unwrap();
    assert_eq!(auto.method(), Method::Auto);
}

#[test]
fn large_reads_cross_many_pages() {
    let len = 40 * PAGE + 123;
    let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    let addr = data.as_ptr() as u64;
    let child = Child::stopped();
    for method in METHODS {
        let mem = ProcessMemory::with_method(child.pid, method);
        let mut buf = vec![0u8; len];
        assert_eq!(mem.read(addr, &mut buf), Ok(len), "{method:?}");
        assert!(buf == data, "{method:?}");
    }
}

#[test]
fn integers_of_each_width() {
    let values: [u64; 2] = [0x1122_3344_5566_7788, 0xffff_ffff_ffff_fff6];
    let addr = values.as_ptr() as u64;
    let child = Child::stopped();
    let mem = ProcessMemory::new(child.pid);
    assert_eq!(read_u64(&mem, addr), Ok(0x1122_3344_5566_7788));
    assert_eq!(read_u32(&mem, addr), Ok(0x5566_7788));
    assert_eq!(read_u16(&mem, addr + 2), Ok(0x5566));
    assert_eq!(read_u8(&mem, addr + 7), Ok(0x11));
    assert_eq!(read_u64(&mem, 8), Err(efault(8)));

    let neg = addr + 8;
    assert_eq!(user_long(&mem, neg), -10);
    assert_eq!(user_int(&mem, neg), -10);
    assert_eq!(user_short(&mem, neg), -10);
    assert_eq!(user_char(&mem, neg), -10);
    assert_eq!(user_int(&mem, addr), 0x5566_7788);
    // Unreadable: 0, no error.
    assert_eq!(user_long(&mem, 16), 0);
    assert_eq!(user_char(&mem, 0), 0);
    assert_eq!(
        user_value_warning("int", 0x1234),
        "user int copy fault 0x0000000000001234 [man error::fault]"
    );
}

#[test]
fn user_string_family_on_a_child() {
    let layout = Layout::new();
    let long: Vec<u8> = (0..200).map(|i| b'a' + (i % 26) as u8).chain([0]).collect();
    let long_addr = layout.write(0, &long);
    let quoted_addr = layout.write(1000, b"a\"b\n\x01\xc3\xa9\\\0");
    let last = layout.write(PAGE - 1, b"x");
    let child = Child::stopped();
    let mem = ProcessMemory::new(child.pid);

    // user_string keeps MAXSTRINGLEN-2 characters (n+1 clamped to 127).
    let us = |addr, max| string(|o| user_string(o, &mem, addr, max));
    let usn = |addr, n, max| string(|o| user_string_n(o, &mem, addr, n, max));
    assert_eq!(us(long_addr, MAXSTRINGLEN).unwrap(), &long[..126]);
    assert_eq!(usn(long_addr, 5, MAXSTRINGLEN).unwrap(), b"abcde");
    assert_eq!(usn(long_addr, 0, MAXSTRINGLEN).unwrap(), b"");
    assert_eq!(usn(long_addr, -3, MAXSTRINGLEN).unwrap(), b"");
    assert_eq!(usn(long_addr, 1000, 512).unwrap(), &long[..200]);

    let err = us(0x1234, MAXSTRINGLEN).unwrap_err();
    assert_eq!(
        err.string_message(),
        "user string copy fault -14 at 0000000000001234 [man error::fault]"
    );
    assert_eq!(
        us(last, MAXSTRINGLEN).unwrap_err().string_message(),
        format!("user string copy fault -14 at {last:016x} [man error::fault]")
    );

    let usq = |addr| quoted(|o| user_string_quoted(o, &mem, addr, MAXSTRINGLEN));
    assert_eq!(usq(quoted_addr), r#""a\"b\n\001\303\251\\""#);
    assert_eq!(usq(0), "0x0");
    assert_eq!(usq(0x1234), "0x1234");
    // 126 characters do not fit the 125 a quoted string keeps.
    assert_eq!(
        usq(long_addr),
        format!(
            "\"{}\"...",
            String::from_utf8(long[..122].to_vec()).unwrap()
        )
    );
    let usnq = |addr, inlen, outlen| {
        quoted(|o| user_string_n_quoted(o, &mem, addr, inlen, outlen, MAXSTRINGLEN))
    };
    assert_eq!(usnq(long_addr, 10, 8), "\"abc\"...");
    assert_eq!(usnq(long_addr, 3, 50), "\"abc\"");
    assert_eq!(usnq(0x10, 3, 50), "0x10");
}

#[test]
fn exited_process_is_a_fault_not_a_panic() {
    let x = 5u64;
    let pid = {
        let child = Child::stopped();
        child.pid
    };
    let mem = ProcessMemory::new(pid);
    let f = read_u64(&mem, &x as *const u64 as u64).unwrap_err();
    assert_eq!(f.errno, libc::ESRCH);
}

#[test]
fn slice_memory_for_decoders() {
    let mem = SliceMemory {
        base: 0x1000,
        bytes: b"abc\0def",
    };
    assert_eq!(read_cstring(&mem, 0x1000, 100).unwrap(), b"abc");
    assert_eq!(read_cstring(&mem, 0x1004, 100), Err(efault(0x1004)));
    assert_eq!(read_cstring(&mem, 0xfff, 100), Err(efault(0xfff)));
    let mut out = b"x".to_vec();
    read_cstring_into(&mut out, &mem, 0x1000, 2).unwrap();
    assert_eq!(out, b"xab");
}

/// Runs `body` in a forked child whose seccomp filter makes
/// process_vm_readv fail with EPERM and, with `block_open`, openat fail with
/// EACCES (so /proc/PID/mem cannot be opened); returns its exit code.
fn in_restricted_child(block_open: bool, body: impl FnOnce() -> i32) -> i32 {
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let open_nr = if block_open { 257 } else { u32::MAX };
    let insn = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let program = [
        insn(0x20, 0, 0, 0),         // A = nr
        insn(0x15, 2, 0, 310),       // process_vm_readv → EPERM
        insn(0x15, 2, 0, open_nr),   // openat → EACCES
        insn(0x06, 0, 0, RET_ALLOW), //
        insn(0x06, 0, 0, RET_ERRNO | libc::EPERM as u32),
        insn(0x06, 0, 0, RET_ERRNO | libc::EACCES as u32),
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0 {
                libc::_exit(90);
            }
        }
        let code = body();
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "status {status:#x}");
    libc::WEXITSTATUS(status)
}

#[test]
fn auto_falls_back_when_process_vm_readv_is_not_permitted() {
    static HELLO: &[u8] = b"fallback works\0";
    let addr = HELLO.as_ptr() as u64;
    for (block_open, expected) in [(false, Method::ProcMem), (true, Method::PeekData)] {
        let code = in_restricted_child(block_open, || {
            // The target is this child's own stopped child (PEEKDATA needs
            // us to be its tracer).
            let target = Child::stopped();
            let mem = ProcessMemory::new(target.pid);
            let Ok(s) = read_cstring(&mem, addr, 100) else {
                return 1;
            };
            if s != b"fallback works" {
                return 2;
            }
            if mem.method() != expected {
                return 3;
            }
            // The fallback still reports faults as faults.
            if read_cstring(&mem, 0x10, 100) != Err(efault(0x10)) {
                return 4;
            }
            0
        });
        assert_eq!(code, 0, "fallback to {expected:?}");
    }
}
