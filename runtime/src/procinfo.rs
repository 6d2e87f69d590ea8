//! Per-thread process facts for the context functions (`execname()`,
//! `ppid()`, `uid()`, ... `cpu()`), read from /proc when the tracer first
//! sees a thread or it execs, then served from memory on the event path.
//!
//! The tracer calls [`ProcCache::refresh`] on attach, clone and exec (and
//! after a set*id syscall if it traces those), [`ProcCache::remove`] when a
//! thread is reaped; handlers call [`ProcCache::get`], which does no I/O.
//!
//! `cpu()` is the CPU the traced thread last ran on, not the tracer's. The
//! cheapest correct source is the thread's own rseq area: glibc (2.35+)
//! registers one per thread, and the kernel rewrites its `cpu_id` field
//! whenever the thread returns to user space on a different CPU. We learn
//! its address once per thread with `PTRACE_GET_RSEQ_CONFIGURATION` (the
//! thread is in a ptrace-stop whenever a handler runs) and then read 4 bytes
//! with `process_vm_readv`: one syscall, versus open+read+close and parsing
//! for field 39 of `/proc/TID/stat`, which remains the fallback (no rseq:
//! static or non-glibc programs, rseq disabled, kernels before 5.13).

use std::collections::HashMap;

use crate::memory::{ProcessMemory, read_u32};

/// What SystemTap's context functions report about a thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcInfo {
    /// The thread group (process) id: `pid()`.
    pub tgid: i32,
    /// The thread's command name (`comm`, at most 15 bytes): `execname()`.
    pub execname: String,
    pub ppid: i32,
    /// The parent's command name when the thread was refreshed:
    /// `pexecname()` (empty if the parent was already gone).
    pub pexecname: String,
    /// Process group and session ids: `pgrp()`, `sid()`.
    pub pgrp: i32,
    pub sid: i32,
    pub uid: u32,
    pub gid: u32,
    pub euid: u32,
    pub egid: u32,
}

/// Where the rseq `cpu_id` of a thread lives, once known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rseq {
    /// Not asked yet, or not registered yet (after exec glibc registers it
    /// during start-up, after the exec stop): ask again next time.
    Unknown,
    /// Address of `struct rseq.cpu_id` in the tracee.
    At(u64),
    /// The kernel cannot tell us (no PTRACE_GET_RSEQ_CONFIGURATION).
    Unavailable,
}

/// How [`ProcCache::cpu_with_source`] found the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuSource {
    /// The thread's rseq `cpu_id`.
    Rseq,
    /// Field 39 of /proc/TID/stat.
    ProcStat,
    /// Neither could be read (the thread is gone): `cpu()` returns -1.
    Unknown,
}

struct Entry {
    info: ProcInfo,
    rseq: Rseq,
}

/// The cache, owned by the tracer thread. Keyed by thread id (for a
/// single-threaded process that is its pid).
#[derive(Default)]
pub struct ProcCache {
    threads: HashMap<i32, Entry>,
}

impl ProcCache {
    pub fn new() -> ProcCache {
        ProcCache::default()
    }

    /// Re-reads a thread's facts from /proc (attach, clone, exec). Returns
    /// false if the thread no longer exists (its entry is then removed).
    pub fn refresh(&mut self, tid: i32) -> bool {
        match read_proc(tid) {
            Some(info) => {
                // An exec replaces the rseq registration; look it up again.
                self.threads.insert(
                    tid,
                    Entry {
                        info,
                        rseq: Rseq::Unknown,
                    },
                );
                true
            }
            None => {
                self.threads.remove(&tid);
                false
            }
        }
    }

    /// The cached facts, without I/O; `None` for a thread never refreshed.
    #[inline]
    pub fn get(&self, tid: i32) -> Option<&ProcInfo> {
        self.threads.get(&tid).map(|e| &e.info)
    }

    /// Forgets a thread (when it is reaped).
    pub fn remove(&mut self, tid: i32) {
        self.threads.remove(&tid);
    }

    /// The CPU `tid` last ran on, or -1 if it cannot be found out.
    pub fn cpu(&mut self, tid: i32) -> i64 {
        self.cpu_with_source(tid).0
    }

    /// [`ProcCache::cpu`] and where the answer came from. Must be called
    /// from the tracer thread while `tid` is in a ptrace-stop for the rseq
    /// lookup to succeed; otherwise it falls back to /proc.
    pub fn cpu_with_source(&mut self, tid: i32) -> (i64, CpuSource) {
        let entry = self.threads.get_mut(&tid);
        let mut rseq = entry.as_ref().map_or(Rseq::Unknown, |e| e.rseq);
        if rseq == Rseq::Unknown {
            rseq = rseq_cpu_id_addr(tid);
            if let Some(e) = entry {
                e.rseq = rseq;
            }
        }
        if let Rseq::At(addr) = rseq {
            let mem = ProcessMemory::new(tid);
            // Negative values mean "not initialised" / "registration failed".
            if let Ok(cpu) = read_u32(&mem, addr)
                && (cpu as i32) >= 0
            {
                return (cpu as i64, CpuSource::Rseq);
            }
        }
        match stat_cpu(tid) {
            Some(cpu) => (cpu, CpuSource::ProcStat),
            None => (-1, CpuSource::Unknown),
        }
    }
}

/// Reads comm, tgid, ppid, the parent's comm, pgrp, sid and the uids and
/// gids of a thread.
fn read_proc(tid: i32) -> Option<ProcInfo> {
    let comm = std::fs::read(format!("/proc/{tid}/comm")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| -> Option<Vec<u32>> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..]
            .split_whitespace()
            .map(|v| v.parse().ok())
            .collect()
    };
    let uids = field("Uid:")?;
    let gids = field("Gid:")?;
    let ppid = *field("PPid:")?.first()? as i32;
    Some(ProcInfo {
        tgid: *field("Tgid:")?.first()? as i32,
        execname: comm_string(&comm),
        ppid,
        pexecname: std::fs::read(format!("/proc/{ppid}/comm"))
            .map(|c| comm_string(&c))
            .unwrap_or_default(),
        // As seen from our pid namespace, like Tgid and PPid.
        pgrp: *field("NSpgid:")?.first()? as i32,
        sid: *field("NSsid:")?.first()? as i32,
        uid: *uids.first()?,
        euid: *uids.get(1)?,
        gid: *gids.first()?,
        egid: *gids.get(1)?,
    })
}

/// The command name of any process (SystemTap's `pid2execname`): the
/// cached one for a traced thread, else `/proc/PID/comm`; "" when there
/// is no such process.
pub fn pid_execname(cache: &ProcCache, pid: i32) -> String {
    if let Some(info) = cache.get(pid) {
        return info.execname.clone();
    }
    if pid <= 0 {
        return String::new();
    }
    std::fs::read(format!("/proc/{pid}/comm"))
        .map(|c| comm_string(&c))
        .unwrap_or_default()
}

/// The contents of a `comm` file without its newline.
fn comm_string(comm: &[u8]) -> String {
    let comm = comm.strip_suffix(b"\n").unwrap_or(comm);
    String::from_utf8_lossy(comm).into_owned()
}

/// `struct ptrace_rseq_configuration` (linux/ptrace.h).
#[repr(C)]
#[derive(Default)]
struct RseqConfiguration {
    rseq_abi_pointer: u64,
    rseq_abi_size: u32,
    signature: u32,
    flags: u32,
    pad: u32,
}

/// Offset of `cpu_id` in `struct rseq` (after `cpu_id_start`).
const RSEQ_CPU_ID_OFFSET: u64 = 4;

fn rseq_cpu_id_addr(tid: i32) -> Rseq {
    let mut conf = RseqConfiguration::default();
    let size = std::mem::size_of::<RseqConfiguration>();
    // SAFETY: the kernel writes at most `size` bytes into `conf`.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GET_RSEQ_CONFIGURATION,
            tid,
            size,
            &mut conf as *mut RseqConfiguration,
        )
    };
    if r < 0 {
        let errno = unsafe { *libc::__errno_location() };
        // EIO: the request does not exist. ESRCH: not stopped under us
        // right now, which may change.
        return if errno == libc::EIO {
            Rseq::Unavailable
        } else {
            Rseq::Unknown
        };
    }
    match conf.rseq_abi_pointer {
        0 => Rseq::Unknown,
        p => Rseq::At(p + RSEQ_CPU_ID_OFFSET),
    }
}

/// Field 39 (`processor`) of /proc/TID/stat, counted after the `(comm)`
/// field, which may itself contain spaces and parentheses.
fn stat_cpu(tid: i32) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // Fields 3.. follow the comm; `processor` is field 39.
    after_comm.split_whitespace().nth(39 - 3)?.parse().ok()
}

/// The CPU the calling thread runs on (handlers running on the tracer's
/// own behalf, e.g. `begin`/`end`/timer probes).
pub fn current_cpu() -> i64 {
    unsafe { libc::sched_getcpu() as i64 }
}

/// CLOCK_REALTIME through the vDSO (no system call).
fn realtime() -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts
}

/// `gettimeofday_s()`: seconds since the epoch.
pub fn gettimeofday_s() -> i64 {
    realtime().tv_sec
}

/// `gettimeofday_ms()`: milliseconds since the epoch.
pub fn gettimeofday_ms() -> i64 {
    let ts = realtime();
    ts.tv_sec * 1_000 + ts.tv_nsec / 1_000_000
}

/// `gettimeofday_us()`: microseconds since the epoch.
pub fn gettimeofday_us() -> i64 {
    let ts = realtime();
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1_000
}

/// `gettimeofday_ns()`: nanoseconds since the epoch.
pub fn gettimeofday_ns() -> i64 {
    let ts = realtime();
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}
