//! Hurrying the end: once a session's end is decided, every thread of
//! utap's process leaves `SCHED_IDLE` and goes to nice -20 (when allowed).
//!
//! Ending needs the tracer thread (end probes, detaching), the output
//! thread (writing the end output) and the hand-over (the verdict for the
//! foreground). On a target with a thousand runnable threads each of ours
//! got about a thousandth of a CPU (the tracer thread, in `SCHED_IDLE`
//! next to its tracee, none at all): `-T 1` took 10–16 s. At nice -20 a
//! thread weighs as much as 87 nice-0 threads.
//!
//! [`now`] makes only async-signal-safe system calls (open, getdents64,
//! setpriority, sched_setscheduler, close), so the termination-signal
//! handler may call it.

/// Boosts every thread of the calling process (see module docs).
pub fn now() {
    // SAFETY: raw system calls on a stack buffer and our own descriptor.
    unsafe {
        let fd = libc::open(
            c"/proc/self/task".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            boost(libc::gettid());
            return;
        }
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                if let Some(tid) = parse_tid(&buf[off + 19..off + reclen]) {
                    boost(tid);
                }
                off += reclen;
            }
        }
        libc::close(fd);
    }
}

/// The decimal number a NUL-terminated directory entry name spells.
fn parse_tid(name: &[u8]) -> Option<libc::pid_t> {
    let mut tid: libc::pid_t = 0;
    let mut digits = 0;
    for &b in name.iter().take_while(|&&b| b != 0) {
        if !b.is_ascii_digit() {
            return None;
        }
        tid = tid
            .checked_mul(10)?
            .checked_add((b - b'0') as libc::pid_t)?;
        digits += 1;
    }
    (digits > 0).then_some(tid)
}

/// One thread: out of `SCHED_IDLE`/`SCHED_BATCH` into `SCHED_OTHER`, nice
/// -20 (either may be refused without CAP_SYS_NICE; then it stays).
fn boost(tid: libc::pid_t) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain scheduling calls on one thread of ours.
    unsafe {
        if libc::sched_getscheduler(tid) != libc::SCHED_OTHER {
            libc::sched_setscheduler(tid, libc::SCHED_OTHER, &param);
        }
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_threads() {
        assert_eq!(parse_tid(b"1234\0\0"), Some(1234));
        assert_eq!(parse_tid(b".\0"), None);
        assert_eq!(parse_tid(b"..\0"), None);
        assert_eq!(parse_tid(b"\0"), None);
    }
}
