//! What the guardian does once utap is gone: per journaled process (still
//! the same one: pid and start time), the text bytes back first (the
//! sooner they are, the fewer threads meet an `int3` untraced), except
//! where a moved thread stands; the semaphores decremented; then each
//! moved thread seized, given its own registers back if it is still at its
//! site, and detached; then the bytes at those sites. Nothing here signals
//! or kills the program; a failure skips that step.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::journal::{Journal, Text, Thread};

/// How long a seize may fail with EPERM while the kernel is still letting
/// the dead tracer's tracees go.
const SEIZE_PATIENCE: Duration = Duration::from_secs(2);

/// Restores every journaled process; one line on stderr per process.
pub fn all(j: &Journal) {
    let t0 = Instant::now();
    let mut pids: BTreeMap<i32, u64> = BTreeMap::new();
    for t in j.live_texts() {
        pids.insert(
            t.pid.load(Ordering::Relaxed),
            t.start.load(Ordering::Relaxed),
        );
    }
    for s in j.live_semaphores() {
        pids.insert(
            s.pid.load(Ordering::Relaxed),
            s.start.load(Ordering::Relaxed),
        );
    }
    for t in j.live_threads() {
        pids.insert(
            t.pid.load(Ordering::Relaxed),
            t.start.load(Ordering::Relaxed),
        );
    }
    for (pid, start) in pids {
        if super::stat_start(pid) != Some(start) {
            continue;
        }
        let n = process(j, pid);
        eprintln!(
            "utap guardian: restored {n} sites in {pid} after utap died ({} µs)",
            t0.elapsed().as_micros()
        );
    }
}

/// Restores process `pid`; returns how many text sites were put back.
fn process(j: &Journal, pid: i32) -> usize {
    let Ok(mem) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
    else {
        return 0;
    };
    let mine = |p: &std::sync::atomic::AtomicI32| p.load(Ordering::Relaxed) == pid;
    let threads: Vec<&Thread> = j.live_threads().filter(|t| mine(&t.pid)).collect();
    let under_thread = |t: &Text| {
        let a = t.addr.load(Ordering::Relaxed);
        threads.iter().any(|th| {
            let s = th.site.load(Ordering::Relaxed);
            a >= s && a < s + u64::from(th.len.load(Ordering::Relaxed).max(1))
        })
    };
    let texts: Vec<&Text> = j.live_texts().filter(|t| mine(&t.pid)).collect();
    let mut n = 0;
    for t in texts.iter().filter(|t| !under_thread(t)) {
        n += usize::from(
            mem.write_all_at(&t.bytes(), t.addr.load(Ordering::Relaxed))
                .is_ok(),
        );
    }
    for s in j.live_semaphores().filter(|s| mine(&s.pid)) {
        decrement(
            &mem,
            s.addr.load(Ordering::Relaxed),
            s.count.load(Ordering::Relaxed),
        );
    }
    for th in &threads {
        put_back(th);
    }
    for t in texts.iter().filter(|t| under_thread(t)) {
        n += usize::from(
            mem.write_all_at(&t.bytes(), t.addr.load(Ordering::Relaxed))
                .is_ok(),
        );
    }
    n
}

/// Takes `count` off the 16-bit counter at `addr` (never below 0).
fn decrement(mem: &std::fs::File, addr: u64, count: u32) {
    let mut b = [0u8; 2];
    if mem.read_exact_at(&mut b, addr).is_ok() {
        let v = u32::from(u16::from_le_bytes(b)).saturating_sub(count) as u16;
        let _ = mem.write_all_at(&v.to_le_bytes(), addr);
    }
}

/// Seizes the moved thread, stops it, gives it its own registers back if
/// it still runs at its site, and lets it go.
fn put_back(th: &Thread) {
    let tid = th.tid.load(Ordering::Relaxed);
    if !seize(tid) {
        return;
    }
    let status = stopped(tid);
    let site = th.site.load(Ordering::Relaxed);
    let end = site + u64::from(th.len.load(Ordering::Relaxed));
    let mut deliver = 0;
    // SAFETY: regs is a valid out struct; PTRACE_GETREGS/SETREGS on a
    // thread we hold stopped.
    unsafe {
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        let got = libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs) == 0;
        let at_site = got && regs.rip >= site && regs.rip <= end;
        if let Some(st) = status
            && libc::WIFSTOPPED(st)
            && st >> 16 == 0
        {
            // A signal-delivery-stop: the program's signal goes on,
            // except the SIGTRAP of our own stub's int3.
            let sig = libc::WSTOPSIG(st);
            if !(at_site && sig == libc::SIGTRAP) {
                deliver = sig;
            }
        }
        if at_site {
            let saved = th.saved();
            libc::ptrace(libc::PTRACE_SETREGS, tid, 0, &saved);
        }
        libc::ptrace(libc::PTRACE_DETACH, tid, 0, deliver as libc::c_long);
    }
}

/// PTRACE_SEIZE + PTRACE_INTERRUPT, retried on EPERM while the dead
/// tracer still holds the thread.
fn seize(tid: i32) -> bool {
    let until = Instant::now() + SEIZE_PATIENCE;
    loop {
        // SAFETY: plain ptrace requests.
        if unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) } == 0 {
            // SAFETY: as above.
            return unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) } == 0;
        }
        let e = std::io::Error::last_os_error().raw_os_error();
        if e != Some(libc::EPERM) || Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits for the stop of a seized thread; its status.
fn stopped(tid: i32) -> Option<i32> {
    let mut st = 0;
    loop {
        // SAFETY: st is a valid out int.
        let r = unsafe { libc::waitpid(tid, &mut st, libc::__WALL) };
        if r == tid {
            return libc::WIFSTOPPED(st).then_some(st);
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}
