//! Process-family arguments: clone flags, wait options, wait statuses.

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
}
