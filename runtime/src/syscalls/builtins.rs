//! The functions the stdlib tapsets call as builtins, with the simple
//! signatures the native code binds to: script longs are `i64`, script
//! strings are `String` (results) or `&str` (arguments).
//!
//! Decoders of one long into text are also listed in [`LONG_TO_STRING`] so
//! they can be bound in one loop. Names follow SystemTap's tapsets
//! (tapset/linux/aux_syscalls.stp) where SystemTap has the function.

use super::decode::{file, memory, misc, network, poll, process, resource, signal, time};
use crate::memory::ReadMemory;

/// `syscall_name(nr)`: "openat", or "" for an unknown number (SystemTap's
/// table lookup yields "" too).
pub fn syscall_name(nr: i64) -> String {
    super::table::syscall_name(nr).unwrap_or("").to_string()
}

/// `syscall_num(name)`: the number, or -1 for an unknown name (SystemTap).
pub fn syscall_num(name: &str) -> i64 {
    super::table::syscall_number(name).map_or(-1, i64::from)
}

/// `errno_str(err)`: "ENOENT" for 2 or -2, "" when unknown.
pub fn errno_str(err: i64) -> String {
    super::errno::errno_str(err).to_string()
}

/// `signal_name(sig)` and SystemTap's `_signal_name(sig)`: "SIGINT".
pub fn signal_name(sig: i64) -> String {
    super::signals::signal_name(sig)
}

/// SystemTap's `signal_str(sig)`: the name without "SIG" ("INT",
/// "RTMIN+3"), "" outside 1..=64.
pub fn signal_str(sig: i64) -> String {
    if !(1..=64).contains(&sig) {
        return String::new();
    }
    let name = super::signals::signal_name(sig);
    match sig {
        29 => "IO/POLL".to_string(),
        _ => name.trim_start_matches("SIG").to_string(),
    }
}

/// `__syscall_argstr(nr)`: the current probe's six argument registers,
/// its return value in a `.return` probe (None at entry) and the tracee's
/// memory give strace's argument text.
pub fn syscall_argstr(nr: i64, args: &[u64; 6], ret: Option<i64>, mem: &dyn ReadMemory) -> String {
    super::argstr::argstr(nr, args, ret, mem)
}

/// `__syscall_retstr(nr, ret)`: SystemTap's return_str for the call.
pub fn syscall_retstr(nr: i64, ret: i64) -> String {
    super::argstr::retstr(nr, ret)
}

macro_rules! long_decoder {
    ($(#[$doc:meta])* $name:ident => $f:expr) => {
        $(#[$doc])*
        pub fn $name(v: i64) -> String {
            $f(v as u64)
        }
    };
}

long_decoder!(/// `_dfd_str(fd)`: "AT_FDCWD" or the number.
    dfd_str => file::dirfd_str);
long_decoder!(/// `_open_flags_str(flags)` (SystemTap: `_sys_open_flag_str`): "O_WRONLY|O_CREAT".
    open_flag_str => file::open_flags_str);
long_decoder!(/// `_mode_str(mode)`: "0644".
    mode_str => file::mode_str);
long_decoder!(/// `_access_mode_str(mode)`: "R_OK|W_OK".
    access_mode_str => file::access_mode_str);
long_decoder!(/// `_at_flag_str(flags)`: "AT_SYMLINK_NOFOLLOW".
    at_flag_str => file::at_flags_str);
long_decoder!(/// `_renameat2_flags_str(flags)`: "RENAME_NOREPLACE".
    renameat2_flags_str => file::rename_flags_str);
long_decoder!(/// `_statx_mask_str(mask)`: "STATX_BASIC_STATS".
    statx_mask_str => file::statx_mask_str);
long_decoder!(/// `_fadvice_advice_str(advice)`: "POSIX_FADV_SEQUENTIAL".
    fadvice_advice_str => file::fadvise_str);
long_decoder!(/// `_seek_whence_str(whence)`: "SEEK_SET".
    seek_whence_str => file::whence_str);
long_decoder!(/// `_fcntl_cmd_str(cmd)`: "F_GETFL".
    fcntl_cmd_str => file::fcntl_cmd_str);
long_decoder!(/// `_mprotect_prot_str(prot)`: "PROT_READ|PROT_WRITE".
    mprotect_prot_str => memory::prot_str);
long_decoder!(/// `_mmap_flags(flags)`: "MAP_PRIVATE|MAP_ANONYMOUS".
    mmap_flags => memory::map_flags_str);
long_decoder!(/// `_madvice_advice_str(advice)`: "MADV_DONTNEED".
    madvice_advice_str => memory::madvise_str);
long_decoder!(/// `_mremap_flags(flags)`: "MREMAP_MAYMOVE".
    mremap_flags => memory::mremap_flags_str);
long_decoder!(/// `__fork_flags(flags)`: clone flags, "CLONE_VM|SIGCHLD".
    fork_flags => process::clone_flags_str);
long_decoder!(/// `_wait4_opt_str(options)`: "WNOHANG|__WALL".
    wait4_opt_str => process::wait4_options_str);
long_decoder!(/// `_sigprocmask_how_str(how)`: "SIG_BLOCK".
    sigprocmask_how_str => signal::sigprocmask_how_str);
long_decoder!(/// `_sock_family_str(family)`: "AF_INET".
    sock_family_str => network::family_str);
long_decoder!(/// `_sock_type_str(type)`: "SOCK_STREAM|SOCK_CLOEXEC".
    sock_type_str => network::socktype_str);
long_decoder!(/// `_sock_flags_str(flags)`: "SOCK_CLOEXEC|SOCK_NONBLOCK".
    sock_flags_str => network::sock_flags_str);
long_decoder!(/// `_msg_flags_str(flags)`: "MSG_DONTWAIT".
    msg_flags_str => network::msg_flags_str);
long_decoder!(/// `_shutdown_how_str(how)`: "SHUT_WR".
    shutdown_how_str => network::shutdown_how_str);
long_decoder!(/// `_get_wc_str(clock)`: "CLOCK_MONOTONIC".
    get_wc_str => time::clockid_str);
long_decoder!(/// `_futex_op_str(op)`: "FUTEX_WAIT_PRIVATE".
    futex_op_str => misc::futex_op_str);

long_decoder!(/// `_opoll_op_str(op)`: epoll_ctl's "EPOLL_CTL_ADD".
    opoll_op_str => poll::epoll_op_str);
long_decoder!(/// `_rlimit_resource_str(resource)`: "RLIMIT_NOFILE".
    rlimit_resource_str => resource::rlimit_resource_str);
long_decoder!(/// `_getrandom_flags_str(flags)`: "GRND_NONBLOCK".
    getrandom_flags_str => resource::getrandom_flags_str);
long_decoder!(/// `_sockopt_level_str(level)`: "SOL_SOCKET".
    sockopt_level_str => network::sockopt_level_str);

long_decoder!(/// `_itimer_which_str(which)`: "ITIMER_REAL".
    itimer_which_str => time::itimer_which_str);
long_decoder!(/// `_inotify_watch_mask_str(mask)`: "IN_MODIFY|IN_CREATE".
    inotify_watch_mask_str => file::inotify_mask_str);
long_decoder!(/// `_priority_which_str(which)`: "PRIO_PROCESS".
    priority_which_str => process::prio_which_str);

long_decoder!(/// `_flock_cmd_str(op)`: "LOCK_EX|LOCK_NB".
    flock_cmd_str => file::flock_op_str);
long_decoder!(/// `_mlockall_flags_str(flags)`: "MCL_CURRENT|MCL_FUTURE".
    mlockall_flags_str => memory::mlockall_flags_str);
long_decoder!(/// `_waitid_which_str(which)`: "P_PID".
    waitid_which_str => process::idtype_str);
long_decoder!(/// `_rusage_who_str(who)`: "RUSAGE_SELF".
    rusage_who_str => process::rusage_who_str);
long_decoder!(/// `_umountflags_str(flags)`: "MNT_DETACH".
    umountflags_str => file::umount_flags_str);

long_decoder!(/// `_sched_policy_str(policy)`: "SCHED_FIFO".
    sched_policy_str => process::sched_policy_str);

/// `_wait_status_str(status)`: a wait status as strace shows it inside
/// wait4: "[{WIFEXITED(s) && WEXITSTATUS(s) == 3}]".
pub fn wait_status_str(status: i64) -> String {
    process::wait_status_str(status as i32)
}

/// A builtin of type `(long) -> string`.
pub type LongDecoder = fn(i64) -> String;

/// Every builtin of type `(long) -> string`, by its script name.
pub static LONG_TO_STRING: &[(&str, LongDecoder)] = &[
    ("syscall_name", syscall_name),
    ("errno_str", errno_str),
    ("signal_name", signal_name),
    ("_signal_name", signal_name),
    ("signal_str", signal_str),
    ("_dfd_str", dfd_str),
    ("_open_flags_str", open_flag_str),
    ("_sys_open_flag_str", open_flag_str),
    ("_mode_str", mode_str),
    ("_access_mode_str", access_mode_str),
    ("_at_flag_str", at_flag_str),
    ("_renameat2_flags_str", renameat2_flags_str),
    ("_seek_whence_str", seek_whence_str),
    ("_statx_mask_str", statx_mask_str),
    ("_fadvice_advice_str", fadvice_advice_str),
    ("_fcntl_cmd_str", fcntl_cmd_str),
    ("_mprotect_prot_str", mprotect_prot_str),
    ("_mmap_flags", mmap_flags),
    ("_madvice_advice_str", madvice_advice_str),
    ("_mremap_flags", mremap_flags),
    ("__fork_flags", fork_flags),
    ("_wait4_opt_str", wait4_opt_str),
    ("_wait_status_str", wait_status_str),
    ("_sigprocmask_how_str", sigprocmask_how_str),
    ("_sock_family_str", sock_family_str),
    ("_sock_type_str", sock_type_str),
    ("_sock_flags_str", sock_flags_str),
    ("_msg_flags_str", msg_flags_str),
    ("_shutdown_how_str", shutdown_how_str),
    ("_get_wc_str", get_wc_str),
    ("_futex_op_str", futex_op_str),
    ("_opoll_op_str", opoll_op_str),
    ("_flock_cmd_str", flock_cmd_str),
    ("_mlockall_flags_str", mlockall_flags_str),
    ("_waitid_which_str", waitid_which_str),
    ("_rusage_who_str", rusage_who_str),
    ("_umountflags_str", umountflags_str),
    ("_sched_policy_str", sched_policy_str),
    ("_itimer_which_str", itimer_which_str),
    ("_inotify_watch_mask_str", inotify_watch_mask_str),
    ("_priority_which_str", priority_which_str),
    ("_rlimit_resource_str", rlimit_resource_str),
    ("_getrandom_flags_str", getrandom_flags_str),
    ("_sockopt_level_str", sockopt_level_str),
];

/// The `(long) -> string` builtin called `name`.
pub fn long_to_string(name: &str) -> Option<LongDecoder> {
    LONG_TO_STRING
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, f)| f)
}

/// Every input `(long) -> string` builtin `name` has a name for, when it
/// is a plain lookup that gives "" for any other input (`syscall_name`,
/// `errno_str`): the data plane then answers it from a table of literals.
pub fn lookup_table(name: &str) -> Option<Vec<(i64, &'static str)>> {
    match name {
        "syscall_name" => Some(
            super::table::SYSCALLS
                .iter()
                .map(|e| (i64::from(e.nr), e.name))
                .collect(),
        ),
        "errno_str" => Some(
            super::errno::named()
                .flat_map(|(e, n)| [(e, n), (-e, n)])
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn lookup_tables_are_the_decoders() {
        for name in ["syscall_name", "errno_str"] {
            let f = long_to_string(name).unwrap();
            let table: std::collections::HashMap<i64, &str> =
                lookup_table(name).unwrap().into_iter().collect();
            for v in (-5000..5000).chain([i64::MIN, i64::MAX, 1 << 40]) {
                assert_eq!(f(v), table.get(&v).copied().unwrap_or(""), "{name}({v})");
            }
        }
    }

    #[test]
    fn names() {
        assert_eq!(syscall_name(257), "openat");
        assert_eq!(syscall_name(-5), "");
        assert_eq!(syscall_num("openat"), 257);
        assert_eq!(syscall_num("nope"), -1);
        assert_eq!(errno_str(-2), "ENOENT");
        assert_eq!(signal_name(2), "SIGINT");
        assert_eq!(signal_str(2), "INT");
        assert_eq!(signal_str(29), "IO/POLL");
        assert_eq!(signal_str(35), "RTMIN+3");
        assert_eq!(signal_str(0), "");
    }

    #[test]
    fn decoders_by_name() {
        let f = long_to_string("_sys_open_flag_str").unwrap();
        assert_eq!(f(0o2000000), "O_RDONLY|O_CLOEXEC");
        assert_eq!(long_to_string("_dfd_str").unwrap()(-100), "AT_FDCWD");
        assert_eq!(long_to_string("_mode_str").unwrap()(0o644), "0644");
        assert_eq!(long_to_string("__fork_flags").unwrap()(17), "SIGCHLD");
        assert_eq!(long_to_string("_get_wc_str").unwrap()(1), "CLOCK_MONOTONIC");
        assert!(long_to_string("_nope").is_none());
        let mut names: Vec<_> = LONG_TO_STRING.iter().map(|(n, _)| n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LONG_TO_STRING.len());
    }

    #[test]
    fn argstr_and_retstr() {
        let mem = Mem::new(0x1000, b"/etc/hosts\0");
        let args = [(-100i64) as u64, 0x1000, 0o2000000, 0, 0, 0];
        assert_eq!(
            syscall_argstr(257, &args, None, &mem),
            "AT_FDCWD, \"/etc/hosts\", O_RDONLY|O_CLOEXEC"
        );
        assert_eq!(syscall_retstr(257, -2), "-2 (ENOENT)");
        assert_eq!(syscall_retstr(257, 3), "3");
    }
}
