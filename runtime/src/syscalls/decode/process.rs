//! Process-family arguments: clone flags, wait options, wait statuses.

use super::bytes::*;
use super::flags::{Xlat, as_int, flags_str};
use crate::syscalls::signals::strace_signame;

const CLONE_FLAGS: &[Xlat] = &[
    (0x100, "CLONE_VM"),
    (0x200, "CLONE_FS"),
    (0x400, "CLONE_FILES"),
    (0x800, "CLONE_SIGHAND"),
    (0x1000, "CLONE_PIDFD"),
    (0x2000, "CLONE_PTRACE"),
    (0x4000, "CLONE_VFORK"),
    (0x8000, "CLONE_PARENT"),
    (0x10000, "CLONE_THREAD"),
    (0x20000, "CLONE_NEWNS"),
    (0x40000, "CLONE_SYSVSEM"),
    (0x80000, "CLONE_SETTLS"),
    (0x100000, "CLONE_PARENT_SETTID"),
    (0x200000, "CLONE_CHILD_CLEARTID"),
    (0x800000, "CLONE_UNTRACED"),
    (0x1000000, "CLONE_CHILD_SETTID"),
    (0x2000000, "CLONE_NEWCGROUP"),
    (0x4000000, "CLONE_NEWUTS"),
    (0x8000000, "CLONE_NEWIPC"),
    (0x10000000, "CLONE_NEWUSER"),
    (0x20000000, "CLONE_NEWPID"),
    (0x40000000, "CLONE_NEWNET"),
    (0x80000000, "CLONE_IO"),
];

pub const CLONE_PIDFD: u64 = 0x1000;
pub const CLONE_SETTLS: u64 = 0x80000;
pub const CLONE_PARENT_SETTID: u64 = 0x100000;
pub const CLONE_CHILD_CLEARTID: u64 = 0x200000;
pub const CLONE_CHILD_SETTID: u64 = 0x1000000;

/// clone flags with the exit signal in the low byte:
/// `CLONE_VM|CLONE_VFORK|SIGCHLD`.
pub fn clone_flags_str(flags: u64) -> String {
    let sig = flags & 0xff;
    let rest = flags & !0xff;
    let mut out = if rest == 0 {
        String::new()
    } else {
        flags_str(rest, CLONE_FLAGS, "0", "")
    };
    if sig != 0 {
        if !out.is_empty() {
            out.push('|');
        }
        out.push_str(&strace_signame(sig as i64));
    }
    if out.is_empty() {
        out.push('0');
    }
    out
}

const WAIT_OPTIONS: &[Xlat] = &[
    (0x1, "WNOHANG"),
    (0x2, "WUNTRACED"),
    (0x4, "WEXITED"),
    (0x8, "WCONTINUED"),
    (0x0100_0000, "WNOWAIT"),
    (0x8000_0000, "__WCLONE"),
    (0x4000_0000, "__WALL"),
    (0x2000_0000, "__WNOTHREAD"),
];

/// wait4/waitid options: `0`, `WNOHANG|__WALL` (strace spells bit 2
/// `WUNTRACED` for both calls).
pub fn wait4_options_str(options: u64) -> String {
    flags_str(options & 0xffff_ffff, WAIT_OPTIONS, "0", "W???")
}

/// A wait status as strace shows it: `[{WIFEXITED(s) && WEXITSTATUS(s) == 0}]`.
pub fn wait_status_str(status: i32) -> String {
    let s = status as u32;
    let inner = if s & 0x7f == 0 {
        format!("WIFEXITED(s) && WEXITSTATUS(s) == {}", (s >> 8) & 0xff)
    } else if s & 0xff == 0x7f {
        let sig = strace_signame(i64::from((s >> 8) & 0xff));
        let event = s >> 16;
        if event != 0 {
            format!("WIFSTOPPED(s) && WSTOPSIG(s) == {sig} && s >> 16 == {event}")
        } else {
            format!("WIFSTOPPED(s) && WSTOPSIG(s) == {sig}")
        }
    } else if s == 0xffff {
        "WIFCONTINUED(s)".to_string()
    } else {
        let sig = strace_signame(i64::from(s & 0x7f));
        let core = if s & 0x80 != 0 {
            " && WCOREDUMP(s)"
        } else {
            ""
        };
        format!("WIFSIGNALED(s) && WTERMSIG(s) == {sig}{core}")
    };
    format!("[{{{inner}}}]")
}

const PRIO_WHICH: &[Xlat] = &[(0, "PRIO_PROCESS"), (1, "PRIO_PGRP"), (2, "PRIO_USER")];

/// getpriority/setpriority's which: `PRIO_PROCESS`.
pub fn prio_which_str(which: u64) -> String {
    super::flags::xlat_str(which & 0xffff_ffff, PRIO_WHICH, "PRIO_???")
}

const PRCTL_OPTIONS: &[Xlat] = &[
    (1, "PR_SET_PDEATHSIG"),
    (2, "PR_GET_PDEATHSIG"),
    (3, "PR_GET_DUMPABLE"),
    (4, "PR_SET_DUMPABLE"),
    (7, "PR_GET_KEEPCAPS"),
    (8, "PR_SET_KEEPCAPS"),
    (13, "PR_GET_TIMING"),
    (14, "PR_SET_TIMING"),
    (15, "PR_SET_NAME"),
    (16, "PR_GET_NAME"),
    (21, "PR_GET_SECCOMP"),
    (22, "PR_SET_SECCOMP"),
    (23, "PR_CAPBSET_READ"),
    (24, "PR_CAPBSET_DROP"),
    (27, "PR_GET_SECUREBITS"),
    (28, "PR_SET_SECUREBITS"),
    (29, "PR_SET_TIMERSLACK"),
    (30, "PR_GET_TIMERSLACK"),
    (31, "PR_TASK_PERF_EVENTS_DISABLE"),
    (32, "PR_TASK_PERF_EVENTS_ENABLE"),
    (35, "PR_SET_MM"),
    (36, "PR_SET_CHILD_SUBREAPER"),
    (37, "PR_GET_CHILD_SUBREAPER"),
    (38, "PR_SET_NO_NEW_PRIVS"),
    (39, "PR_GET_NO_NEW_PRIVS"),
    (40, "PR_GET_TID_ADDRESS"),
    (41, "PR_SET_THP_DISABLE"),
    (42, "PR_GET_THP_DISABLE"),
    (47, "PR_CAP_AMBIENT"),
    (52, "PR_GET_SPECULATION_CTRL"),
    (53, "PR_SET_SPECULATION_CTRL"),
    (0x53564d41, "PR_SET_VMA"),
    (0x59616d61, "PR_SET_PTRACER"),
];

/// prctl's option: `PR_SET_NAME`, `0x270f /* PR_??? */`.
pub fn prctl_option_str(option: u64) -> String {
    super::flags::xlat_str(option & 0xffff_ffff, PRCTL_OPTIONS, "PR_???")
}

const CAPS: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// A capability number: `CAP_SYS_ADMIN`.
pub fn capability_str(cap: u64) -> String {
    let c = cap & 0xffff_ffff;
    CAPS.get(c as usize).map_or_else(
        || super::flags::unknown_str(c, "CAP_???"),
        |s| s.to_string(),
    )
}

const DUMPABLE: &[Xlat] = &[
    (0, "SUID_DUMP_DISABLE"),
    (1, "SUID_DUMP_USER"),
    (2, "SUID_DUMP_ROOT"),
];

/// PR_SET_DUMPABLE's value.
pub fn dumpable_str(v: u64) -> String {
    super::flags::xlat_str(v, DUMPABLE, "SUID_DUMP_???")
}

/// clone3's `struct clone_args` (at least its first 64 bytes) as strace
/// shows it; with `exited` the kernel's writes follow as
/// ` => {parent_tid=[123]}`.
pub fn clone_args_str(
    mem: &dyn crate::memory::ReadMemory,
    addr: u64,
    size: u64,
    exited: bool,
) -> String {
    use super::strings::{addr_str, read_bytes};
    let len = size.min(88) as usize;
    let Some(b) = read_bytes(mem, addr, len).filter(|b| b.len() == len && len >= 64) else {
        return addr_str(addr);
    };
    let w = |i: usize| u64_at(&b, i * 8);
    let flags = w(0);
    let mut fields = vec![format!(
        "flags={}",
        flags_str(flags, CLONE_FLAGS, "0", "CLONE_???")
    )];
    if flags & CLONE_PIDFD != 0 {
        fields.push(format!("pidfd={}", addr_str(w(1))));
    }
    if flags & (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID) != 0 {
        fields.push(format!("child_tid={}", addr_str(w(2))));
    }
    if flags & CLONE_PARENT_SETTID != 0 {
        fields.push(format!("parent_tid={}", addr_str(w(3))));
    }
    let sig = w(4);
    fields.push(format!(
        "exit_signal={}",
        if sig == 0 {
            "0".to_string()
        } else {
            strace_signame(sig as i64)
        }
    ));
    fields.push(format!("stack={}", addr_str(w(5))));
    fields.push(format!("stack_size={:#x}", w(6)));
    if flags & CLONE_SETTLS != 0 {
        fields.push(format!("tls={}", addr_str(w(7))));
    }
    let mut out = format!("{{{}}}", fields.join(", "));
    if exited && flags & (CLONE_PARENT_SETTID | CLONE_PIDFD) != 0 {
        let int_at = |p: u64| {
            read_exact(mem, p, 4).map_or_else(|| addr_str(p), |b| format!("[{}]", i32_at(&b, 0)))
        };
        let mut written = Vec::new();
        if flags & CLONE_PIDFD != 0 {
            written.push(format!("pidfd={}", int_at(w(1))));
        }
        if flags & CLONE_PARENT_SETTID != 0 {
            written.push(format!("parent_tid={}", int_at(w(3))));
        }
        out.push_str(&format!(" => {{{}}}", written.join(", ")));
    }
    out
}

/// personality's persona: `PER_LINUX`, `PER_LINUX|ADDR_NO_RANDOMIZE`, and
/// the query value `0xffffffff` as is.
pub fn personality_str(persona: u64) -> String {
    const FLAGS: &[Xlat] = &[
        (0x0020000, "UNAME26"),
        (0x0040000, "ADDR_NO_RANDOMIZE"),
        (0x0080000, "FDPIC_FUNCPTRS"),
        (0x0100000, "MMAP_PAGE_ZERO"),
        (0x0200000, "ADDR_COMPAT_LAYOUT"),
        (0x0400000, "READ_IMPLIES_EXEC"),
        (0x0800000, "ADDR_LIMIT_32BIT"),
        (0x1000000, "SHORT_INODE"),
        (0x2000000, "WHOLE_SECONDS"),
        (0x4000000, "STICKY_TIMEOUTS"),
        (0x8000000, "ADDR_LIMIT_3GB"),
    ];
    let p = persona & 0xffff_ffff;
    if p == 0xffff_ffff || p & 0xff != 0 {
        return format!("{p:#x}");
    }
    let flags = p & !0xff;
    if flags == 0 {
        "PER_LINUX".to_string()
    } else {
        format!("PER_LINUX|{}", flags_str(flags, FLAGS, "0", ""))
    }
}

/// waitid's idtype: `P_PID`.
pub fn idtype_str(which: u64) -> String {
    const T: &[Xlat] = &[(0, "P_ALL"), (1, "P_PID"), (2, "P_PGID"), (3, "P_PIDFD")];
    super::flags::xlat_str(which & 0xffff_ffff, T, "P_???")
}

/// getrusage's who: `RUSAGE_SELF`.
pub fn rusage_who_str(who: u64) -> String {
    match as_int(who) {
        0 => "RUSAGE_SELF".to_string(),
        -1 => "RUSAGE_CHILDREN".to_string(),
        1 => "RUSAGE_THREAD".to_string(),
        w => super::flags::unknown_str(w as u32 as u64, "RUSAGE_???"),
    }
}

/// A `siginfo_t` as strace shows it for SIGCHLD and for user-sent
/// signals; `{}` when the kernel left it zeroed (waitid with WNOHANG).
pub fn siginfo_str(mem: &dyn crate::memory::ReadMemory, addr: u64) -> String {
    use super::strings::addr_str;
    let Some(b) = read_exact(mem, addr, 48) else {
        return addr_str(addr);
    };
    let i32_at = |o: usize| i32_at(&b, o);
    let i64_at = |o: usize| i64_at(&b, o);
    let (signo, code) = (i32_at(0), i32_at(8));
    if signo == 0 {
        return "{}".to_string();
    }
    let sig = strace_signame(i64::from(signo));
    let (pid, uid) = (i32_at(16), i32_at(20) as u32);
    if signo == 17 {
        const CLD: [&str; 7] = [
            "",
            "CLD_EXITED",
            "CLD_KILLED",
            "CLD_DUMPED",
            "CLD_TRAPPED",
            "CLD_STOPPED",
            "CLD_CONTINUED",
        ];
        if let Some(name) = CLD.get(code as usize).filter(|n| !n.is_empty()) {
            let status = i32_at(24);
            let status = if code == 1 {
                status.to_string()
            } else {
                strace_signame(i64::from(status))
            };
            return format!(
                "{{si_signo={sig}, si_code={name}, si_pid={pid}, si_uid={uid}, si_status={status}, si_utime={}, si_stime={}}}",
                i64_at(32),
                i64_at(40)
            );
        }
    }
    match code {
        0 => format!("{{si_signo={sig}, si_code=SI_USER, si_pid={pid}, si_uid={uid}}}"),
        -6 => format!("{{si_signo={sig}, si_code=SI_TKILL, si_pid={pid}, si_uid={uid}}}"),
        0x80 => format!("{{si_signo={sig}, si_code=SI_KERNEL}}"),
        _ => format!("{{si_signo={sig}, si_code={code}}}"),
    }
}

/// A scheduling policy: `SCHED_OTHER`, `SCHED_FIFO|SCHED_RESET_ON_FORK`.
pub fn sched_policy_str(policy: u64) -> String {
    const T: &[Xlat] = &[
        (0, "SCHED_OTHER"),
        (1, "SCHED_FIFO"),
        (2, "SCHED_RR"),
        (3, "SCHED_BATCH"),
        (4, "SCHED_ISO"),
        (5, "SCHED_IDLE"),
        (6, "SCHED_DEADLINE"),
        (7, "SCHED_EXT"),
    ];
    let p = policy & 0xffff_ffff;
    let base = super::flags::xlat_str(p & !0x4000_0000, T, "SCHED_???");
    if p & 0x4000_0000 != 0 {
        format!("{base}|SCHED_RESET_ON_FORK")
    } else {
        base
    }
}

/// `struct sigevent`: `{sigev_value={sival_int=7, sival_ptr=0x7},
/// sigev_signo=SIGALRM, sigev_notify=SIGEV_SIGNAL}`.
pub fn sigevent_str(mem: &dyn crate::memory::ReadMemory, addr: u64) -> String {
    use super::strings::addr_str;
    if addr == 0 {
        return "NULL".to_string();
    }
    let Some(b) = read_exact(mem, addr, 32) else {
        return addr_str(addr);
    };
    let value = u64_at(&b, 0);
    let (signo, notify) = (i32_at(&b, 8), i32_at(&b, 12));
    let head = format!(
        "{{sigev_value={{sival_int={}, sival_ptr={}}}, sigev_signo={}",
        value as u32 as i32,
        addr_str(value),
        strace_signame(i64::from(signo))
    );
    let tail = match notify {
        0 => "sigev_notify=SIGEV_SIGNAL".to_string(),
        1 => "sigev_notify=SIGEV_NONE".to_string(),
        2 => format!(
            "sigev_notify=SIGEV_THREAD, sigev_notify_function={}, sigev_notify_attributes={}",
            addr_str(u64_at(&b, 16)),
            addr_str(u64_at(&b, 24))
        ),
        4 => format!(
            "sigev_notify=SIGEV_THREAD_ID, sigev_notify_thread_id={}",
            i32_at(&b, 16)
        ),
        n => format!(
            "sigev_notify={}",
            super::flags::unknown_str(n as u32 as u64, "SIGEV_???")
        ),
    };
    format!("{head}, {tail}}}")
}

/// A pid argument (an `int`, negative for process groups).
pub fn pid_str(pid: u64) -> String {
    as_int(pid).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_flags() {
        let f = 0x1200000 | libc::SIGCHLD as u64;
        assert_eq!(
            clone_flags_str(f),
            "CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD"
        );
        let f = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64;
        assert_eq!(clone_flags_str(f), "CLONE_VM|CLONE_VFORK|SIGCHLD");
        assert_eq!(clone_flags_str(libc::SIGCHLD as u64), "SIGCHLD");
        assert_eq!(clone_flags_str(0), "0");
        assert_eq!(clone_flags_str(0x100), "CLONE_VM");
    }

    #[test]
    fn wait_options() {
        assert_eq!(wait4_options_str(0), "0");
        assert_eq!(wait4_options_str(1), "WNOHANG");
        assert_eq!(wait4_options_str(3), "WNOHANG|WUNTRACED");
        assert_eq!(wait4_options_str(0x4000_0001), "WNOHANG|__WALL");
        assert_eq!(wait4_options_str(4), "WEXITED");
    }

    #[test]
    fn wait_statuses() {
        assert_eq!(
            wait_status_str(0),
            "[{WIFEXITED(s) && WEXITSTATUS(s) == 0}]"
        );
        assert_eq!(
            wait_status_str(3 << 8),
            "[{WIFEXITED(s) && WEXITSTATUS(s) == 3}]"
        );
        assert_eq!(
            wait_status_str(9),
            "[{WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL}]"
        );
        assert_eq!(
            wait_status_str(0x80 | 11),
            "[{WIFSIGNALED(s) && WTERMSIG(s) == SIGSEGV && WCOREDUMP(s)}]"
        );
        assert_eq!(
            wait_status_str(0x137f),
            "[{WIFSTOPPED(s) && WSTOPSIG(s) == SIGSTOP}]"
        );
        assert_eq!(wait_status_str(0xffff), "[{WIFCONTINUED(s)}]");
        assert_eq!(pid_str(0xffff_ffff), "-1");
    }

    #[test]
    fn clone3_arguments() {
        // clone_args at 0x8000; parent_tid and child_tid point at 0x8100.
        let mut region = vec![0u8; 0x200];
        let words = [
            (0usize, 0x3d0f00u64),
            (2, 0x8100),
            (3, 0x8100),
            (5, 0x7000),
            (6, 0x7fff80),
            (7, 0x6000),
        ];
        for (i, v) in words {
            region[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        }
        region[0x100..0x104].copy_from_slice(&77i32.to_ne_bytes());
        let mem = crate::syscalls::testmem::Mem::new(0x8000, &region);
        let entry = "{flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x8100, parent_tid=0x8100, exit_signal=0, stack=0x7000, stack_size=0x7fff80, tls=0x6000}";
        assert_eq!(clone_args_str(&mem, 0x8000, 88, false), entry);
        assert_eq!(
            clone_args_str(&mem, 0x8000, 88, true),
            format!("{entry} => {{parent_tid=[77]}}")
        );
        assert_eq!(clone_args_str(&mem, 0x100, 88, false), "0x100");
        assert_eq!(clone_args_str(&mem, 0x8000, 32, false), "0x8000");
    }

    #[test]
    fn personalities_and_siginfo() {
        assert_eq!(personality_str(0xffff_ffff), "0xffffffff");
        assert_eq!(personality_str(0), "PER_LINUX");
        assert_eq!(personality_str(0x40000), "PER_LINUX|ADDR_NO_RANDOMIZE");
        assert_eq!(idtype_str(1), "P_PID");
        assert_eq!(rusage_who_str(0), "RUSAGE_SELF");
        assert_eq!(rusage_who_str(u64::MAX), "RUSAGE_CHILDREN");
        let mut b = [0u8; 48];
        b[0..4].copy_from_slice(&17i32.to_ne_bytes());
        b[8..12].copy_from_slice(&1i32.to_ne_bytes());
        b[16..20].copy_from_slice(&42i32.to_ne_bytes());
        b[24..28].copy_from_slice(&3i32.to_ne_bytes());
        let mem = crate::syscalls::testmem::Mem::new(0x1000, &b);
        assert_eq!(
            siginfo_str(&mem, 0x1000),
            "{si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=42, si_uid=0, si_status=3, si_utime=0, si_stime=0}"
        );
        b[8..12].copy_from_slice(&2i32.to_ne_bytes());
        b[24..28].copy_from_slice(&9i32.to_ne_bytes());
        let mem = crate::syscalls::testmem::Mem::new(0x1000, &b);
        assert!(
            siginfo_str(&mem, 0x1000)
                .contains("si_code=CLD_KILLED, si_pid=42, si_uid=0, si_status=SIGKILL")
        );
        b[0..4].copy_from_slice(&10i32.to_ne_bytes());
        b[8..12].copy_from_slice(&0i32.to_ne_bytes());
        let mem = crate::syscalls::testmem::Mem::new(0x1000, &b);
        assert_eq!(
            siginfo_str(&mem, 0x1000),
            "{si_signo=SIGUSR1, si_code=SI_USER, si_pid=42, si_uid=0}"
        );
        let mem = crate::syscalls::testmem::Mem::new(0x1000, &[0; 48]);
        assert_eq!(siginfo_str(&mem, 0x1000), "{}");
    }

    #[test]
    fn scheduling_and_sigevents() {
        assert_eq!(sched_policy_str(0), "SCHED_OTHER");
        assert_eq!(
            sched_policy_str(0x4000_0001),
            "SCHED_FIFO|SCHED_RESET_ON_FORK"
        );
        assert_eq!(sched_policy_str(9), "0x9 /* SCHED_??? */");
        let mut b = [0u8; 32];
        b[0..8].copy_from_slice(&7u64.to_ne_bytes());
        b[8..12].copy_from_slice(&14i32.to_ne_bytes());
        let mem = crate::syscalls::testmem::Mem::new(0x1000, &b);
        assert_eq!(
            sigevent_str(&mem, 0x1000),
            "{sigev_value={sival_int=7, sival_ptr=0x7}, sigev_signo=SIGALRM, sigev_notify=SIGEV_SIGNAL}"
        );
        b[12..16].copy_from_slice(&4i32.to_ne_bytes());
        b[16..20].copy_from_slice(&99i32.to_ne_bytes());
        let mem = crate::syscalls::testmem::Mem::new(0x1000, &b);
        assert!(
            sigevent_str(&mem, 0x1000)
                .ends_with("sigev_notify=SIGEV_THREAD_ID, sigev_notify_thread_id=99}")
        );
        assert_eq!(sigevent_str(&mem, 0), "NULL");
    }

    #[test]
    fn prctl_and_priorities() {
        assert_eq!(prio_which_str(0), "PRIO_PROCESS");
        assert_eq!(prctl_option_str(15), "PR_SET_NAME");
        assert_eq!(prctl_option_str(9999), "0x270f /* PR_??? */");
        assert_eq!(capability_str(21), "CAP_SYS_ADMIN");
        assert_eq!(capability_str(99), "0x63 /* CAP_??? */");
        assert_eq!(dumpable_str(1), "SUID_DUMP_USER");
    }
}
