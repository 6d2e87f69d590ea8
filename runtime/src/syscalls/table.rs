//! The x86_64 system call table: number, name, argument count and the
//! strace-style class of every system call the kernel defines (Linux 6.18),
//! and the i386 table that 32-bit processes use, with the mapping of its
//! numbers to x86_64's.
//!
//! Numbers and argument counts follow the kernel's
//! `arch/x86/entry/syscalls/syscall_64.tbl` and strace's
//! `linux/x86_64/syscallent.h`; the x32 range (512+) is not part of it.

/// The strace-style classes a system call belongs to (`-e trace=%file` ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Class(u16);

impl Class {
    pub const NONE: Class = Class(0);
    /// Takes a file descriptor (`%desc`).
    pub const DESC: Class = Class(1 << 0);
    /// Takes a file name (`%file`).
    pub const FILE: Class = Class(1 << 1);
    pub const NETWORK: Class = Class(1 << 2);
    pub const PROCESS: Class = Class(1 << 3);
    pub const SIGNAL: Class = Class(1 << 4);
    pub const IPC: Class = Class(1 << 5);
    pub const MEMORY: Class = Class(1 << 6);
    pub const CLOCK: Class = Class(1 << 7);
    pub const CREDS: Class = Class(1 << 8);

    /// Whether every class in `other` is also in `self`.
    pub const fn contains(self, other: Class) -> bool {
        self.0 & other.0 == other.0
    }

    const fn or(self, other: Class) -> Class {
        Class(self.0 | other.0)
    }
}

impl std::ops::BitOr for Class {
    type Output = Class;
    fn bitor(self, rhs: Class) -> Class {
        self.or(rhs)
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallEntry {
    pub nr: u32,
    pub name: &'static str,
    /// How many of the six argument registers the call uses.
    pub nargs: u8,
    pub class: Class,
}

const fn s(nr: u32, name: &'static str, nargs: u8, class: Class) -> SyscallEntry {
    SyscallEntry {
        nr,
        name,
        nargs,
        class,
    }
}

// `|` is not const on a user type: these helpers spell the unions the table needs.
const NONE: Class = Class::NONE;
const DESC: Class = Class::DESC;
const FILE: Class = Class::FILE;
const NETWORK: Class = Class::NETWORK;
const PROCESS: Class = Class::PROCESS;
const SIGNAL: Class = Class::SIGNAL;
const IPC: Class = Class::IPC;
const MEMORY: Class = Class::MEMORY;
const CLOCK: Class = Class::CLOCK;
const CREDS: Class = Class::CREDS;

/// Every x86_64 system call, sorted by number.
pub static SYSCALLS: &[SyscallEntry] = &[
    s(0, "read", 3, DESC),
    s(1, "write", 3, DESC),
    s(2, "open", 3, DESC.or(FILE)),
    s(3, "close", 1, DESC),
    s(4, "stat", 2, FILE),
    s(5, "fstat", 2, DESC),
    s(6, "lstat", 2, FILE),
    s(7, "poll", 3, DESC),
    s(8, "lseek", 3, DESC),
    s(9, "mmap", 6, DESC.or(MEMORY)),
    s(10, "mprotect", 3, MEMORY),
    s(11, "munmap", 2, MEMORY),
    s(12, "brk", 1, MEMORY),
    s(13, "rt_sigaction", 4, SIGNAL),
    s(14, "rt_sigprocmask", 4, SIGNAL),
    s(15, "rt_sigreturn", 0, SIGNAL),
    s(16, "ioctl", 3, DESC),
    s(17, "pread64", 4, DESC),
    s(18, "pwrite64", 4, DESC),
    s(19, "readv", 3, DESC),
    s(20, "writev", 3, DESC),
    s(21, "access", 2, FILE),
    s(22, "pipe", 1, DESC),
    s(23, "select", 5, DESC),
    s(24, "sched_yield", 0, NONE),
    s(25, "mremap", 5, MEMORY),
    s(26, "msync", 3, MEMORY),
    s(27, "mincore", 3, MEMORY),
    s(28, "madvise", 3, MEMORY),
    s(29, "shmget", 3, IPC),
    s(30, "shmat", 3, IPC.or(MEMORY)),
    s(31, "shmctl", 3, IPC),
    s(32, "dup", 1, DESC),
    s(33, "dup2", 2, DESC),
    s(34, "pause", 0, SIGNAL),
    s(35, "nanosleep", 2, NONE),
    s(36, "getitimer", 2, NONE),
    s(37, "alarm", 1, NONE),
    s(38, "setitimer", 3, NONE),
    s(39, "getpid", 0, NONE),
    s(40, "sendfile", 4, DESC.or(NETWORK)),
    s(41, "socket", 3, NETWORK),
    s(42, "connect", 3, NETWORK),
    s(43, "accept", 3, NETWORK),
    s(44, "sendto", 6, NETWORK),
    s(45, "recvfrom", 6, NETWORK),
    s(46, "sendmsg", 3, NETWORK),
    s(47, "recvmsg", 3, NETWORK),
    s(48, "shutdown", 2, NETWORK),
    s(49, "bind", 3, NETWORK),
    s(50, "listen", 2, NETWORK),
    s(51, "getsockname", 3, NETWORK),
    s(52, "getpeername", 3, NETWORK),
    s(53, "socketpair", 4, NETWORK),
    s(54, "setsockopt", 5, NETWORK),
    s(55, "getsockopt", 5, NETWORK),
    s(56, "clone", 5, PROCESS),
    s(57, "fork", 0, PROCESS),
    s(58, "vfork", 0, PROCESS),
    s(59, "execve", 3, FILE.or(PROCESS)),
    s(60, "exit", 1, PROCESS),
    s(61, "wait4", 4, PROCESS),
    s(62, "kill", 2, SIGNAL.or(PROCESS)),
    s(63, "uname", 1, NONE),
    s(64, "semget", 3, IPC),
    s(65, "semop", 3, IPC),
    s(66, "semctl", 4, IPC),
    s(67, "shmdt", 1, IPC.or(MEMORY)),
    s(68, "msgget", 2, IPC),
    s(69, "msgsnd", 4, IPC),
    s(70, "msgrcv", 5, IPC),
    s(71, "msgctl", 3, IPC),
    s(72, "fcntl", 3, DESC),
    s(73, "flock", 2, DESC),
    s(74, "fsync", 1, DESC),
    s(75, "fdatasync", 1, DESC),
    s(76, "truncate", 2, FILE),
    s(77, "ftruncate", 2, DESC),
    s(78, "getdents", 3, DESC),
    s(79, "getcwd", 2, FILE),
    s(80, "chdir", 1, FILE),
    s(81, "fchdir", 1, DESC),
    s(82, "rename", 2, FILE),
    s(83, "mkdir", 2, FILE),
    s(84, "rmdir", 1, FILE),
    s(85, "creat", 2, DESC.or(FILE)),
    s(86, "link", 2, FILE),
    s(87, "unlink", 1, FILE),
    s(88, "symlink", 2, FILE),
    s(89, "readlink", 3, FILE),
    s(90, "chmod", 2, FILE),
    s(91, "fchmod", 2, DESC),
    s(92, "chown", 3, FILE),
    s(93, "fchown", 3, DESC),
    s(94, "lchown", 3, FILE),
    s(95, "umask", 1, NONE),
    s(96, "gettimeofday", 2, CLOCK),
    s(97, "getrlimit", 2, NONE),
    s(98, "getrusage", 2, NONE),
    s(99, "sysinfo", 1, NONE),
    s(100, "times", 1, NONE),
    s(101, "ptrace", 4, NONE),
    s(102, "getuid", 0, CREDS),
    s(103, "syslog", 3, NONE),
    s(104, "getgid", 0, CREDS),
    s(105, "setuid", 1, CREDS),
    s(106, "setgid", 1, CREDS),
    s(107, "geteuid", 0, CREDS),
    s(108, "getegid", 0, CREDS),
    s(109, "setpgid", 2, NONE),
    s(110, "getppid", 0, NONE),
    s(111, "getpgrp", 0, NONE),
    s(112, "setsid", 0, NONE),
    s(113, "setreuid", 2, CREDS),
    s(114, "setregid", 2, CREDS),
    s(115, "getgroups", 2, CREDS),
    s(116, "setgroups", 2, CREDS),
    s(117, "setresuid", 3, CREDS),
    s(118, "getresuid", 3, CREDS),
    s(119, "setresgid", 3, CREDS),
    s(120, "getresgid", 3, CREDS),
    s(121, "getpgid", 1, NONE),
    s(122, "setfsuid", 1, CREDS),
    s(123, "setfsgid", 1, CREDS),
    s(124, "getsid", 1, NONE),
    s(125, "capget", 2, CREDS),
    s(126, "capset", 2, CREDS),
    s(127, "rt_sigpending", 2, SIGNAL),
    s(128, "rt_sigtimedwait", 4, SIGNAL),
    s(129, "rt_sigqueueinfo", 3, SIGNAL.or(PROCESS)),
    s(130, "rt_sigsuspend", 2, SIGNAL),
    s(131, "sigaltstack", 2, SIGNAL),
    s(132, "utime", 2, FILE),
    s(133, "mknod", 3, FILE),
    s(134, "uselib", 1, FILE),
    s(135, "personality", 1, NONE),
    s(136, "ustat", 2, NONE),
    s(137, "statfs", 2, FILE),
    s(138, "fstatfs", 2, DESC),
    s(139, "sysfs", 3, NONE),
    s(140, "getpriority", 2, NONE),
    s(141, "setpriority", 3, NONE),
    s(142, "sched_setparam", 2, NONE),
    s(143, "sched_getparam", 2, NONE),
    s(144, "sched_setscheduler", 3, NONE),
    s(145, "sched_getscheduler", 1, NONE),
    s(146, "sched_get_priority_max", 1, NONE),
    s(147, "sched_get_priority_min", 1, NONE),
    s(148, "sched_rr_get_interval", 2, NONE),
    s(149, "mlock", 2, MEMORY),
    s(150, "munlock", 2, MEMORY),
    s(151, "mlockall", 1, MEMORY),
    s(152, "munlockall", 0, MEMORY),
    s(153, "vhangup", 0, NONE),
    s(154, "modify_ldt", 3, NONE),
    s(155, "pivot_root", 2, FILE),
    s(156, "_sysctl", 1, NONE),
    s(157, "prctl", 5, CREDS),
    s(158, "arch_prctl", 2, NONE),
    s(159, "adjtimex", 1, CLOCK),
    s(160, "setrlimit", 2, NONE),
    s(161, "chroot", 1, FILE),
    s(162, "sync", 0, NONE),
    s(163, "acct", 1, FILE),
    s(164, "settimeofday", 2, CLOCK),
    s(165, "mount", 5, FILE),
    s(166, "umount2", 2, FILE),
    s(167, "swapon", 2, FILE),
    s(168, "swapoff", 1, FILE),
    s(169, "reboot", 4, NONE),
    s(170, "sethostname", 2, NONE),
    s(171, "setdomainname", 2, NONE),
    s(172, "iopl", 1, NONE),
    s(173, "ioperm", 3, NONE),
    s(174, "create_module", 2, NONE),
    s(175, "init_module", 3, NONE),
    s(176, "delete_module", 2, NONE),
    s(177, "get_kernel_syms", 1, NONE),
    s(178, "query_module", 5, NONE),
    s(179, "quotactl", 4, FILE),
    s(180, "nfsservctl", 3, NONE),
    s(181, "getpmsg", 5, NETWORK),
    s(182, "putpmsg", 5, NETWORK),
    s(183, "afs_syscall", 5, NONE),
    s(184, "tuxcall", 3, NONE),
    s(185, "security", 3, NONE),
    s(186, "gettid", 0, NONE),
    s(187, "readahead", 3, DESC),
    s(188, "setxattr", 5, FILE),
    s(189, "lsetxattr", 5, FILE),
    s(190, "fsetxattr", 5, DESC),
    s(191, "getxattr", 4, FILE),
    s(192, "lgetxattr", 4, FILE),
    s(193, "fgetxattr", 4, DESC),
    s(194, "listxattr", 3, FILE),
    s(195, "llistxattr", 3, FILE),
    s(196, "flistxattr", 3, DESC),
    s(197, "removexattr", 2, FILE),
    s(198, "lremovexattr", 2, FILE),
    s(199, "fremovexattr", 2, DESC),
    s(200, "tkill", 2, SIGNAL.or(PROCESS)),
    s(201, "time", 1, CLOCK),
    s(202, "futex", 6, NONE),
    s(203, "sched_setaffinity", 3, NONE),
    s(204, "sched_getaffinity", 3, NONE),
    s(205, "set_thread_area", 1, NONE),
    s(206, "io_setup", 2, MEMORY),
    s(207, "io_destroy", 1, MEMORY),
    s(208, "io_getevents", 5, NONE),
    s(209, "io_submit", 3, NONE),
    s(210, "io_cancel", 3, NONE),
    s(211, "get_thread_area", 1, NONE),
    s(212, "lookup_dcookie", 3, NONE),
    s(213, "epoll_create", 1, DESC),
    s(214, "epoll_ctl_old", 4, NONE),
    s(215, "epoll_wait_old", 4, NONE),
    s(216, "remap_file_pages", 5, MEMORY),
    s(217, "getdents64", 3, DESC),
    s(218, "set_tid_address", 1, NONE),
    s(219, "restart_syscall", 0, NONE),
    s(220, "semtimedop", 4, IPC),
    s(221, "fadvise64", 4, DESC),
    s(222, "timer_create", 3, NONE),
    s(223, "timer_settime", 4, NONE),
    s(224, "timer_gettime", 2, NONE),
    s(225, "timer_getoverrun", 1, NONE),
    s(226, "timer_delete", 1, NONE),
    s(227, "clock_settime", 2, CLOCK),
    s(228, "clock_gettime", 2, CLOCK),
    s(229, "clock_getres", 2, CLOCK),
    s(230, "clock_nanosleep", 4, NONE),
    s(231, "exit_group", 1, PROCESS),
    s(232, "epoll_wait", 4, DESC),
    s(233, "epoll_ctl", 4, DESC),
    s(234, "tgkill", 3, SIGNAL.or(PROCESS)),
    s(235, "utimes", 2, FILE),
    s(236, "vserver", 5, NONE),
    s(237, "mbind", 6, MEMORY),
    s(238, "set_mempolicy", 3, MEMORY),
    s(239, "get_mempolicy", 5, MEMORY),
    s(240, "mq_open", 4, DESC),
    s(241, "mq_unlink", 1, NONE),
    s(242, "mq_timedsend", 5, DESC),
    s(243, "mq_timedreceive", 5, DESC),
    s(244, "mq_notify", 2, DESC),
    s(245, "mq_getsetattr", 3, DESC),
    s(246, "kexec_load", 4, NONE),
    s(247, "waitid", 5, PROCESS),
    s(248, "add_key", 5, NONE),
    s(249, "request_key", 4, NONE),
    s(250, "keyctl", 5, NONE),
    s(251, "ioprio_set", 3, NONE),
    s(252, "ioprio_get", 2, NONE),
    s(253, "inotify_init", 0, DESC),
    s(254, "inotify_add_watch", 3, DESC.or(FILE)),
    s(255, "inotify_rm_watch", 2, DESC),
    s(256, "migrate_pages", 4, MEMORY),
    s(257, "openat", 4, DESC.or(FILE)),
    s(258, "mkdirat", 3, DESC.or(FILE)),
    s(259, "mknodat", 4, DESC.or(FILE)),
    s(260, "fchownat", 5, DESC.or(FILE)),
    s(261, "futimesat", 3, DESC.or(FILE)),
    s(262, "newfstatat", 4, DESC.or(FILE)),
    s(263, "unlinkat", 3, DESC.or(FILE)),
    s(264, "renameat", 4, DESC.or(FILE)),
    s(265, "linkat", 5, DESC.or(FILE)),
    s(266, "symlinkat", 3, DESC.or(FILE)),
    s(267, "readlinkat", 4, DESC.or(FILE)),
    s(268, "fchmodat", 3, DESC.or(FILE)),
    s(269, "faccessat", 3, DESC.or(FILE)),
    s(270, "pselect6", 6, DESC),
    s(271, "ppoll", 5, DESC),
    s(272, "unshare", 1, NONE),
    s(273, "set_robust_list", 2, NONE),
    s(274, "get_robust_list", 3, NONE),
    s(275, "splice", 6, DESC),
    s(276, "tee", 4, DESC),
    s(277, "sync_file_range", 4, DESC),
    s(278, "vmsplice", 4, DESC),
    s(279, "move_pages", 6, MEMORY),
    s(280, "utimensat", 4, DESC.or(FILE)),
    s(281, "epoll_pwait", 6, DESC),
    s(282, "signalfd", 3, DESC.or(SIGNAL)),
    s(283, "timerfd_create", 2, DESC),
    s(284, "eventfd", 1, DESC),
    s(285, "fallocate", 4, DESC),
    s(286, "timerfd_settime", 4, DESC),
    s(287, "timerfd_gettime", 2, DESC),
    s(288, "accept4", 4, NETWORK),
    s(289, "signalfd4", 4, DESC.or(SIGNAL)),
    s(290, "eventfd2", 2, DESC),
    s(291, "epoll_create1", 1, DESC),
    s(292, "dup3", 3, DESC),
    s(293, "pipe2", 2, DESC),
    s(294, "inotify_init1", 1, DESC),
    s(295, "preadv", 4, DESC),
    s(296, "pwritev", 4, DESC),
    s(297, "rt_tgsigqueueinfo", 4, PROCESS.or(SIGNAL)),
    s(298, "perf_event_open", 5, DESC),
    s(299, "recvmmsg", 5, NETWORK),
    s(300, "fanotify_init", 2, DESC),
    s(301, "fanotify_mark", 5, DESC.or(FILE)),
    s(302, "prlimit64", 4, NONE),
    s(303, "name_to_handle_at", 5, DESC.or(FILE)),
    s(304, "open_by_handle_at", 3, DESC),
    s(305, "clock_adjtime", 2, CLOCK),
    s(306, "syncfs", 1, DESC),
    s(307, "sendmmsg", 4, NETWORK),
    s(308, "setns", 2, DESC),
    s(309, "getcpu", 3, NONE),
    s(310, "process_vm_readv", 6, NONE),
    s(311, "process_vm_writev", 6, NONE),
    s(312, "kcmp", 5, NONE),
    s(313, "finit_module", 3, DESC),
    s(314, "sched_setattr", 3, NONE),
    s(315, "sched_getattr", 4, NONE),
    s(316, "renameat2", 5, DESC.or(FILE)),
    s(317, "seccomp", 3, NONE),
    s(318, "getrandom", 3, NONE),
    s(319, "memfd_create", 2, DESC),
    s(320, "kexec_file_load", 5, DESC),
    s(321, "bpf", 3, DESC),
    s(322, "execveat", 5, DESC.or(FILE).or(PROCESS)),
    s(323, "userfaultfd", 1, DESC),
    s(324, "membarrier", 3, NONE),
    s(325, "mlock2", 3, MEMORY),
    s(326, "copy_file_range", 6, DESC),
    s(327, "preadv2", 6, DESC),
    s(328, "pwritev2", 6, DESC),
    s(329, "pkey_mprotect", 4, MEMORY),
    s(330, "pkey_alloc", 2, NONE),
    s(331, "pkey_free", 1, NONE),
    s(332, "statx", 5, DESC.or(FILE)),
    s(333, "io_pgetevents", 6, NONE),
    s(334, "rseq", 4, NONE),
    s(335, "uretprobe", 0, NONE),
    s(424, "pidfd_send_signal", 4, DESC.or(SIGNAL).or(PROCESS)),
    s(425, "io_uring_setup", 2, DESC),
    s(426, "io_uring_enter", 6, DESC.or(SIGNAL)),
    s(427, "io_uring_register", 4, DESC.or(MEMORY)),
    s(428, "open_tree", 3, DESC.or(FILE)),
    s(429, "move_mount", 5, DESC.or(FILE)),
    s(430, "fsopen", 2, DESC),
    s(431, "fsconfig", 5, DESC.or(FILE)),
    s(432, "fsmount", 3, DESC),
    s(433, "fspick", 3, DESC.or(FILE)),
    s(434, "pidfd_open", 2, DESC),
    s(435, "clone3", 2, PROCESS),
    s(436, "close_range", 3, NONE),
    s(437, "openat2", 4, DESC.or(FILE)),
    s(438, "pidfd_getfd", 3, DESC),
    s(439, "faccessat2", 4, DESC.or(FILE)),
    s(440, "process_madvise", 5, DESC),
    s(441, "epoll_pwait2", 6, DESC),
    s(442, "mount_setattr", 5, DESC.or(FILE)),
    s(443, "quotactl_fd", 4, DESC),
    s(444, "landlock_create_ruleset", 3, DESC),
    s(445, "landlock_add_rule", 4, DESC),
    s(446, "landlock_restrict_self", 2, DESC),
    s(447, "memfd_secret", 1, DESC),
    s(448, "process_mrelease", 2, DESC),
    s(449, "futex_waitv", 5, NONE),
    s(450, "set_mempolicy_home_node", 4, MEMORY),
    s(451, "cachestat", 4, DESC),
    s(452, "fchmodat2", 4, DESC.or(FILE)),
    s(453, "map_shadow_stack", 3, MEMORY),
    s(454, "futex_wake", 4, NONE),
    s(455, "futex_wait", 6, NONE),
    s(456, "futex_requeue", 4, NONE),
    s(457, "statmount", 4, NONE),
    s(458, "listmount", 4, NONE),
    s(459, "lsm_get_self_attr", 4, NONE),
    s(460, "lsm_set_self_attr", 4, NONE),
    s(461, "lsm_list_modules", 3, NONE),
    s(462, "mseal", 3, MEMORY),
    s(463, "setxattrat", 6, DESC.or(FILE)),
    s(464, "getxattrat", 6, DESC.or(FILE)),
    s(465, "listxattrat", 5, DESC.or(FILE)),
    s(466, "removexattrat", 4, DESC.or(FILE)),
    s(467, "open_tree_attr", 5, DESC.or(FILE)),
    s(468, "file_getattr", 5, DESC.or(FILE)),
    s(469, "file_setattr", 5, DESC.or(FILE)),
    s(470, "listns", 4, NONE),
    s(471, "rseq_slice_yield", 0, NONE),
];

/// The highest system call number in the table.
pub const MAX_SYSCALL_NR: u32 = 471;

/// The table row for `nr`, if the kernel defines that number.
pub fn entry(nr: i64) -> Option<&'static SyscallEntry> {
    let nr = u32::try_from(nr).ok()?;
    SYSCALLS
        .binary_search_by_key(&nr, |e| e.nr)
        .ok()
        .map(|i| &SYSCALLS[i])
}

/// The name of system call `nr` ("openat"), or None for an unknown number.
pub fn syscall_name(nr: i64) -> Option<&'static str> {
    entry(nr).map(|e| e.name)
}

/// The number of the system call called `name`, or None.
pub fn syscall_number(name: &str) -> Option<u32> {
    SYSCALLS.iter().find(|e| e.name == name).map(|e| e.nr)
}

/// How many arguments system call `nr` takes; 6 for unknown numbers, so
/// that a generic decoder shows everything that might matter.
pub fn syscall_nargs(nr: i64) -> usize {
    entry(nr).map_or(6, |e| usize::from(e.nargs))
}

/// The first number every architecture shares (pidfd_send_signal, Linux
/// 5.1): from here on the kernel gives each new call one number on all
/// architectures, so i386 calls from this number on are [`SYSCALLS`]' rows.
const FIRST_SHARED_NR: i64 = 424;

/// The i386 system calls a 32-bit process makes (through `int $0x80` or
/// `sysenter`) below [`FIRST_SHARED_NR`], sorted by number: a tracer sees
/// these numbers when PTRACE_GET_SYSCALL_INFO reports AUDIT_ARCH_I386.
pub static I386_SYSCALLS: &[SyscallEntry] = &[
    s(0, "restart_syscall", 0, NONE),
    s(1, "exit", 1, PROCESS),
    s(2, "fork", 0, PROCESS),
    s(3, "read", 3, DESC),
    s(4, "write", 3, DESC),
    s(5, "open", 3, DESC.or(FILE)),
    s(6, "close", 1, DESC),
    s(7, "waitpid", 3, PROCESS),
    s(8, "creat", 2, DESC.or(FILE)),
    s(9, "link", 2, FILE),
    s(10, "unlink", 1, FILE),
    s(11, "execve", 3, FILE.or(PROCESS)),
    s(12, "chdir", 1, FILE),
    s(13, "time", 1, CLOCK),
    s(14, "mknod", 3, FILE),
    s(15, "chmod", 2, FILE),
    s(16, "lchown", 3, FILE),
    s(17, "break", 0, MEMORY),
    s(18, "oldstat", 2, FILE),
    s(19, "lseek", 3, DESC),
    s(20, "getpid", 0, NONE),
    s(21, "mount", 5, FILE),
    s(22, "umount", 1, FILE),
    s(23, "setuid", 1, CREDS),
    s(24, "getuid", 0, CREDS),
    s(25, "stime", 1, NONE),
    s(26, "ptrace", 4, NONE),
    s(27, "alarm", 1, NONE),
    s(28, "oldfstat", 2, DESC),
    s(29, "pause", 0, SIGNAL),
    s(30, "utime", 2, FILE),
    s(31, "stty", 2, NONE),
    s(32, "gtty", 2, NONE),
    s(33, "access", 2, FILE),
    s(34, "nice", 1, NONE),
    s(35, "ftime", 0, NONE),
    s(36, "sync", 0, NONE),
    s(37, "kill", 2, SIGNAL.or(PROCESS)),
    s(38, "rename", 2, FILE),
    s(39, "mkdir", 2, FILE),
    s(40, "rmdir", 1, FILE),
    s(41, "dup", 1, DESC),
    s(42, "pipe", 1, DESC),
    s(43, "times", 1, NONE),
    s(44, "prof", 0, NONE),
    s(45, "brk", 1, MEMORY),
    s(46, "setgid", 1, CREDS),
    s(47, "getgid", 0, CREDS),
    s(48, "signal", 2, SIGNAL),
    s(49, "geteuid", 0, CREDS),
    s(50, "getegid", 0, CREDS),
    s(51, "acct", 1, FILE),
    s(52, "umount2", 2, FILE),
    s(53, "lock", 0, NONE),
    s(54, "ioctl", 3, DESC),
    s(55, "fcntl", 3, DESC),
    s(56, "mpx", 0, NONE),
    s(57, "setpgid", 2, NONE),
    s(58, "ulimit", 2, NONE),
    s(59, "oldolduname", 1, NONE),
    s(60, "umask", 1, NONE),
    s(61, "chroot", 1, FILE),
    s(62, "ustat", 2, NONE),
    s(63, "dup2", 2, DESC),
    s(64, "getppid", 0, NONE),
    s(65, "getpgrp", 0, NONE),
    s(66, "setsid", 0, NONE),
    s(67, "sigaction", 3, SIGNAL),
    s(68, "sgetmask", 0, SIGNAL),
    s(69, "ssetmask", 1, SIGNAL),
    s(70, "setreuid", 2, CREDS),
    s(71, "setregid", 2, CREDS),
    s(72, "sigsuspend", 3, SIGNAL),
    s(73, "sigpending", 1, SIGNAL),
    s(74, "sethostname", 2, NONE),
    s(75, "setrlimit", 2, NONE),
    s(76, "getrlimit", 2, NONE),
    s(77, "getrusage", 2, NONE),
    s(78, "gettimeofday", 2, CLOCK),
    s(79, "settimeofday", 2, CLOCK),
    s(80, "getgroups", 2, CREDS),
    s(81, "setgroups", 2, CREDS),
    s(82, "select", 1, DESC),
    s(83, "symlink", 2, FILE),
    s(84, "oldlstat", 2, FILE),
    s(85, "readlink", 3, FILE),
    s(86, "uselib", 1, FILE),
    s(87, "swapon", 2, FILE),
    s(88, "reboot", 4, NONE),
    s(89, "readdir", 3, DESC),
    s(90, "mmap", 1, DESC.or(MEMORY)),
    s(91, "munmap", 2, MEMORY),
    s(92, "truncate", 2, FILE),
    s(93, "ftruncate", 2, DESC),
    s(94, "fchmod", 2, DESC),
    s(95, "fchown", 3, DESC),
    s(96, "getpriority", 2, NONE),
    s(97, "setpriority", 3, NONE),
    s(98, "profil", 4, NONE),
    s(99, "statfs", 2, FILE),
    s(100, "fstatfs", 2, DESC),
    s(101, "ioperm", 3, NONE),
    s(102, "socketcall", 2, DESC),
    s(103, "syslog", 3, NONE),
    s(104, "setitimer", 3, NONE),
    s(105, "getitimer", 2, NONE),
    s(106, "stat", 2, FILE),
    s(107, "lstat", 2, FILE),
    s(108, "fstat", 2, DESC),
    s(109, "olduname", 1, NONE),
    s(110, "iopl", 1, NONE),
    s(111, "vhangup", 0, NONE),
    s(112, "idle", 0, NONE),
    s(113, "vm86old", 1, NONE),
    s(114, "wait4", 4, PROCESS),
    s(115, "swapoff", 1, FILE),
    s(116, "sysinfo", 1, NONE),
    s(117, "ipc", 6, IPC),
    s(118, "fsync", 1, DESC),
    s(119, "sigreturn", 0, SIGNAL),
    s(120, "clone", 5, PROCESS),
    s(121, "setdomainname", 2, NONE),
    s(122, "uname", 1, NONE),
    s(123, "modify_ldt", 3, NONE),
    s(124, "adjtimex", 1, CLOCK),
    s(125, "mprotect", 3, MEMORY),
    s(126, "sigprocmask", 3, SIGNAL),
    s(127, "create_module", 2, NONE),
    s(128, "init_module", 3, NONE),
    s(129, "delete_module", 2, NONE),
    s(130, "get_kernel_syms", 1, NONE),
    s(131, "quotactl", 4, FILE),
    s(132, "getpgid", 1, NONE),
    s(133, "fchdir", 1, DESC),
    s(134, "bdflush", 2, NONE),
    s(135, "sysfs", 3, NONE),
    s(136, "personality", 1, NONE),
    s(137, "afs_syscall", 5, NONE),
    s(138, "setfsuid", 1, CREDS),
    s(139, "setfsgid", 1, CREDS),
    s(140, "_llseek", 5, DESC),
    s(141, "getdents", 3, DESC),
    s(142, "_newselect", 5, DESC),
    s(143, "flock", 2, DESC),
    s(144, "msync", 3, MEMORY),
    s(145, "readv", 3, DESC),
    s(146, "writev", 3, DESC),
    s(147, "getsid", 1, NONE),
    s(148, "fdatasync", 1, DESC),
    s(149, "_sysctl", 1, NONE),
    s(150, "mlock", 2, MEMORY),
    s(151, "munlock", 2, MEMORY),
    s(152, "mlockall", 1, MEMORY),
    s(153, "munlockall", 0, MEMORY),
    s(154, "sched_setparam", 2, NONE),
    s(155, "sched_getparam", 2, NONE),
    s(156, "sched_setscheduler", 3, NONE),
    s(157, "sched_getscheduler", 1, NONE),
    s(158, "sched_yield", 0, NONE),
    s(159, "sched_get_priority_max", 1, NONE),
    s(160, "sched_get_priority_min", 1, NONE),
    s(161, "sched_rr_get_interval", 2, NONE),
    s(162, "nanosleep", 2, NONE),
    s(163, "mremap", 5, MEMORY),
    s(164, "setresuid", 3, CREDS),
    s(165, "getresuid", 3, CREDS),
    s(166, "vm86", 5, NONE),
    s(167, "query_module", 5, NONE),
    s(168, "poll", 3, DESC),
    s(169, "nfsservctl", 3, NONE),
    s(170, "setresgid", 3, CREDS),
    s(171, "getresgid", 3, CREDS),
    s(172, "prctl", 5, CREDS),
    s(173, "rt_sigreturn", 0, SIGNAL),
    s(174, "rt_sigaction", 4, SIGNAL),
    s(175, "rt_sigprocmask", 4, SIGNAL),
    s(176, "rt_sigpending", 2, SIGNAL),
    s(177, "rt_sigtimedwait", 4, SIGNAL),
    s(178, "rt_sigqueueinfo", 3, SIGNAL.or(PROCESS)),
    s(179, "rt_sigsuspend", 2, SIGNAL),
    s(180, "pread64", 5, DESC),
    s(181, "pwrite64", 5, DESC),
    s(182, "chown", 3, FILE),
    s(183, "getcwd", 2, FILE),
    s(184, "capget", 2, CREDS),
    s(185, "capset", 2, CREDS),
    s(186, "sigaltstack", 2, SIGNAL),
    s(187, "sendfile", 4, DESC.or(NETWORK)),
    s(188, "getpmsg", 5, NETWORK),
    s(189, "putpmsg", 5, NETWORK),
    s(190, "vfork", 0, PROCESS),
    s(191, "ugetrlimit", 2, NONE),
    s(192, "mmap2", 6, DESC.or(MEMORY)),
    s(193, "truncate64", 3, FILE),
    s(194, "ftruncate64", 3, DESC),
    s(195, "stat64", 2, FILE),
    s(196, "lstat64", 2, FILE),
    s(197, "fstat64", 2, DESC),
    s(198, "lchown32", 3, FILE),
    s(199, "getuid32", 0, CREDS),
    s(200, "getgid32", 0, CREDS),
    s(201, "geteuid32", 0, CREDS),
    s(202, "getegid32", 0, CREDS),
    s(203, "setreuid32", 2, CREDS),
    s(204, "setregid32", 2, CREDS),
    s(205, "getgroups32", 2, CREDS),
    s(206, "setgroups32", 2, CREDS),
    s(207, "fchown32", 3, DESC),
    s(208, "setresuid32", 3, CREDS),
    s(209, "getresuid32", 3, CREDS),
    s(210, "setresgid32", 3, CREDS),
    s(211, "getresgid32", 3, CREDS),
    s(212, "chown32", 3, FILE),
    s(213, "setuid32", 1, CREDS),
    s(214, "setgid32", 1, CREDS),
    s(215, "setfsuid32", 1, CREDS),
    s(216, "setfsgid32", 1, CREDS),
    s(217, "pivot_root", 2, FILE),
    s(218, "mincore", 3, MEMORY),
    s(219, "madvise", 3, MEMORY),
    s(220, "getdents64", 3, DESC),
    s(221, "fcntl64", 3, DESC),
    s(224, "gettid", 0, NONE),
    s(225, "readahead", 4, DESC),
    s(226, "setxattr", 5, FILE),
    s(227, "lsetxattr", 5, FILE),
    s(228, "fsetxattr", 5, DESC),
    s(229, "getxattr", 4, FILE),
    s(230, "lgetxattr", 4, FILE),
    s(231, "fgetxattr", 4, DESC),
    s(232, "listxattr", 3, FILE),
    s(233, "llistxattr", 3, FILE),
    s(234, "flistxattr", 3, DESC),
    s(235, "removexattr", 2, FILE),
    s(236, "lremovexattr", 2, FILE),
    s(237, "fremovexattr", 2, DESC),
    s(238, "tkill", 2, SIGNAL.or(PROCESS)),
    s(239, "sendfile64", 4, DESC.or(NETWORK)),
    s(240, "futex", 6, NONE),
    s(241, "sched_setaffinity", 3, NONE),
    s(242, "sched_getaffinity", 3, NONE),
    s(243, "set_thread_area", 1, NONE),
    s(244, "get_thread_area", 1, NONE),
    s(245, "io_setup", 2, MEMORY),
    s(246, "io_destroy", 1, MEMORY),
    s(247, "io_getevents", 5, NONE),
    s(248, "io_submit", 3, NONE),
    s(249, "io_cancel", 3, NONE),
    s(250, "fadvise64", 5, DESC),
    s(252, "exit_group", 1, PROCESS),
    s(253, "lookup_dcookie", 4, NONE),
    s(254, "epoll_create", 1, DESC),
    s(255, "epoll_ctl", 4, DESC),
    s(256, "epoll_wait", 4, DESC),
    s(257, "remap_file_pages", 5, MEMORY),
    s(258, "set_tid_address", 1, NONE),
    s(259, "timer_create", 3, NONE),
    s(260, "timer_settime", 4, NONE),
    s(261, "timer_gettime", 2, NONE),
    s(262, "timer_getoverrun", 1, NONE),
    s(263, "timer_delete", 1, NONE),
    s(264, "clock_settime", 2, CLOCK),
    s(265, "clock_gettime", 2, CLOCK),
    s(266, "clock_getres", 2, CLOCK),
    s(267, "clock_nanosleep", 4, NONE),
    s(268, "statfs64", 3, FILE),
    s(269, "fstatfs64", 3, DESC),
    s(270, "tgkill", 3, SIGNAL.or(PROCESS)),
    s(271, "utimes", 2, FILE),
    s(272, "fadvise64_64", 6, DESC),
    s(273, "vserver", 5, NONE),
    s(274, "mbind", 6, MEMORY),
    s(275, "get_mempolicy", 5, MEMORY),
    s(276, "set_mempolicy", 3, MEMORY),
    s(277, "mq_open", 4, DESC),
    s(278, "mq_unlink", 1, NONE),
    s(279, "mq_timedsend", 5, DESC),
    s(280, "mq_timedreceive", 5, DESC),
    s(281, "mq_notify", 2, DESC),
    s(282, "mq_getsetattr", 3, DESC),
    s(283, "kexec_load", 4, NONE),
    s(284, "waitid", 5, PROCESS),
    s(286, "add_key", 5, NONE),
    s(287, "request_key", 4, NONE),
    s(288, "keyctl", 5, NONE),
    s(289, "ioprio_set", 3, NONE),
    s(290, "ioprio_get", 2, NONE),
    s(291, "inotify_init", 0, DESC),
    s(292, "inotify_add_watch", 3, DESC.or(FILE)),
    s(293, "inotify_rm_watch", 2, DESC),
    s(294, "migrate_pages", 4, MEMORY),
    s(295, "openat", 4, DESC.or(FILE)),
    s(296, "mkdirat", 3, DESC.or(FILE)),
    s(297, "mknodat", 4, DESC.or(FILE)),
    s(298, "fchownat", 5, DESC.or(FILE)),
    s(299, "futimesat", 3, DESC.or(FILE)),
    s(300, "fstatat64", 4, DESC.or(FILE)),
    s(301, "unlinkat", 3, DESC.or(FILE)),
    s(302, "renameat", 4, DESC.or(FILE)),
    s(303, "linkat", 5, DESC.or(FILE)),
    s(304, "symlinkat", 3, DESC.or(FILE)),
    s(305, "readlinkat", 4, DESC.or(FILE)),
    s(306, "fchmodat", 3, DESC.or(FILE)),
    s(307, "faccessat", 3, DESC.or(FILE)),
    s(308, "pselect6", 6, DESC),
    s(309, "ppoll", 5, DESC),
    s(310, "unshare", 1, NONE),
    s(311, "set_robust_list", 2, NONE),
    s(312, "get_robust_list", 3, NONE),
    s(313, "splice", 6, DESC),
    s(314, "sync_file_range", 6, DESC),
    s(315, "tee", 4, DESC),
    s(316, "vmsplice", 4, DESC),
    s(317, "move_pages", 6, MEMORY),
    s(318, "getcpu", 3, NONE),
    s(319, "epoll_pwait", 6, DESC),
    s(320, "utimensat", 4, DESC.or(FILE)),
    s(321, "signalfd", 3, DESC.or(SIGNAL)),
    s(322, "timerfd_create", 2, DESC),
    s(323, "eventfd", 1, DESC),
    s(324, "fallocate", 6, DESC),
    s(325, "timerfd_settime", 4, DESC),
    s(326, "timerfd_gettime", 2, DESC),
    s(327, "signalfd4", 4, DESC.or(SIGNAL)),
    s(328, "eventfd2", 2, DESC),
    s(329, "epoll_create1", 1, DESC),
    s(330, "dup3", 3, DESC),
    s(331, "pipe2", 2, DESC),
    s(332, "inotify_init1", 1, DESC),
    s(333, "preadv", 5, DESC),
    s(334, "pwritev", 5, DESC),
    s(335, "rt_tgsigqueueinfo", 4, PROCESS.or(SIGNAL)),
    s(336, "perf_event_open", 5, DESC),
    s(337, "recvmmsg", 5, NETWORK),
    s(338, "fanotify_init", 2, DESC),
    s(339, "fanotify_mark", 6, DESC.or(FILE)),
    s(340, "prlimit64", 4, NONE),
    s(341, "name_to_handle_at", 5, DESC.or(FILE)),
    s(342, "open_by_handle_at", 3, DESC),
    s(343, "clock_adjtime", 2, CLOCK),
    s(344, "syncfs", 1, DESC),
    s(345, "sendmmsg", 4, NETWORK),
    s(346, "setns", 2, DESC),
    s(347, "process_vm_readv", 6, NONE),
    s(348, "process_vm_writev", 6, NONE),
    s(349, "kcmp", 5, NONE),
    s(350, "finit_module", 3, DESC),
    s(351, "sched_setattr", 3, NONE),
    s(352, "sched_getattr", 4, NONE),
    s(353, "renameat2", 5, DESC.or(FILE)),
    s(354, "seccomp", 3, NONE),
    s(355, "getrandom", 3, NONE),
    s(356, "memfd_create", 2, DESC),
    s(357, "bpf", 3, DESC),
    s(358, "execveat", 5, DESC.or(FILE).or(PROCESS)),
    s(359, "socket", 3, NETWORK),
    s(360, "socketpair", 4, NETWORK),
    s(361, "bind", 3, NETWORK),
    s(362, "connect", 3, NETWORK),
    s(363, "listen", 2, NETWORK),
    s(364, "accept4", 4, NETWORK),
    s(365, "getsockopt", 5, NETWORK),
    s(366, "setsockopt", 5, NETWORK),
    s(367, "getsockname", 3, NETWORK),
    s(368, "getpeername", 3, NETWORK),
    s(369, "sendto", 6, NETWORK),
    s(370, "sendmsg", 3, NETWORK),
    s(371, "recvfrom", 6, NETWORK),
    s(372, "recvmsg", 3, NETWORK),
    s(373, "shutdown", 2, NETWORK),
    s(374, "userfaultfd", 1, DESC),
    s(375, "membarrier", 3, NONE),
    s(376, "mlock2", 3, MEMORY),
    s(377, "copy_file_range", 6, DESC),
    s(378, "preadv2", 6, DESC),
    s(379, "pwritev2", 6, DESC),
    s(380, "pkey_mprotect", 4, MEMORY),
    s(381, "pkey_alloc", 2, NONE),
    s(382, "pkey_free", 1, NONE),
    s(383, "statx", 5, DESC.or(FILE)),
    s(384, "arch_prctl", 2, NONE),
    s(385, "io_pgetevents", 6, NONE),
    s(386, "rseq", 4, NONE),
    s(393, "semget", 3, IPC),
    s(394, "semctl", 4, IPC),
    s(395, "shmget", 3, IPC),
    s(396, "shmctl", 3, IPC),
    s(397, "shmat", 3, IPC.or(MEMORY)),
    s(398, "shmdt", 1, IPC.or(MEMORY)),
    s(399, "msgget", 2, IPC),
    s(400, "msgsnd", 4, IPC),
    s(401, "msgrcv", 5, IPC),
    s(402, "msgctl", 3, IPC),
    s(403, "clock_gettime64", 2, CLOCK),
    s(404, "clock_settime64", 2, CLOCK),
    s(405, "clock_adjtime64", 2, CLOCK),
    s(406, "clock_getres_time64", 2, CLOCK),
    s(407, "clock_nanosleep_time64", 4, NONE),
    s(408, "timer_gettime64", 2, NONE),
    s(409, "timer_settime64", 4, NONE),
    s(410, "timerfd_gettime64", 2, DESC),
    s(411, "timerfd_settime64", 4, DESC),
    s(412, "utimensat_time64", 4, DESC.or(FILE)),
    s(413, "pselect6_time64", 6, DESC),
    s(414, "ppoll_time64", 5, DESC),
    s(416, "io_pgetevents_time64", 6, NONE),
    s(417, "recvmmsg_time64", 5, NETWORK),
    s(418, "mq_timedsend_time64", 5, DESC),
    s(419, "mq_timedreceive_time64", 5, DESC),
    s(420, "semtimedop_time64", 4, IPC),
    s(421, "rt_sigtimedwait_time64", 4, SIGNAL),
    s(422, "futex_time64", 6, NONE),
    s(423, "sched_rr_get_interval_time64", 2, NONE),
];

/// The table row for i386 system call `nr`.
pub fn i386_entry(nr: i64) -> Option<&'static SyscallEntry> {
    if nr >= FIRST_SHARED_NR {
        return entry(nr);
    }
    let nr = u32::try_from(nr).ok()?;
    I386_SYSCALLS
        .binary_search_by_key(&nr, |e| e.nr)
        .ok()
        .map(|i| &I386_SYSCALLS[i])
}

/// The name of i386 system call `nr` ("write" for 4).
pub fn i386_syscall_name(nr: i64) -> Option<&'static str> {
    i386_entry(nr).map(|e| e.name)
}

/// The x86_64 number of the call a 32-bit process made as i386 `nr`, when
/// x86_64 has a call of the same name (write: 4 -> 1). None for the
/// 32-bit-only calls (socketcall, mmap2, _llseek, the *_time64 family...),
/// whose arguments differ. Lets a tracer give `$syscall` and the
/// `syscall.NAME` aliases one numbering for both kinds of process.
pub fn i386_to_x86_64(nr: i64) -> Option<u32> {
    syscall_number(i386_syscall_name(nr)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        for w in SYSCALLS.windows(2) {
            assert!(w[0].nr < w[1].nr, "{} then {}", w[0].name, w[1].name);
        }
        let mut names: Vec<_> = SYSCALLS.iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SYSCALLS.len());
        assert_eq!(SYSCALLS.last().unwrap().nr, MAX_SYSCALL_NR);
    }

    #[test]
    fn numbers_match_the_host_libc() {
        assert_eq!(syscall_number("read"), Some(libc::SYS_read as u32));
        assert_eq!(syscall_number("openat"), Some(libc::SYS_openat as u32));
        assert_eq!(syscall_number("clone3"), Some(libc::SYS_clone3 as u32));
        assert_eq!(
            syscall_number("exit_group"),
            Some(libc::SYS_exit_group as u32)
        );
        assert_eq!(syscall_name(libc::SYS_kill), Some("kill"));
        assert_eq!(syscall_name(libc::SYS_pread64), Some("pread64"));
        assert_eq!(syscall_name(libc::SYS_newfstatat), Some("newfstatat"));
        assert_eq!(syscall_name(libc::SYS_faccessat2), Some("faccessat2"));
    }

    #[test]
    fn unknown_numbers_and_names() {
        assert_eq!(syscall_name(-1), None);
        assert_eq!(syscall_name(400), None);
        assert_eq!(syscall_name(1 << 40), None);
        assert_eq!(syscall_number("no_such_call"), None);
        assert_eq!(syscall_nargs(9999), 6);
        assert_eq!(syscall_nargs(libc::SYS_mmap), 6);
        assert_eq!(syscall_nargs(libc::SYS_getpid), 0);
    }

    #[test]
    fn i386_numbers() {
        for w in I386_SYSCALLS.windows(2) {
            assert!(w[0].nr < w[1].nr, "{} then {}", w[0].name, w[1].name);
        }
        assert_eq!(i386_syscall_name(1), Some("exit"));
        assert_eq!(i386_syscall_name(4), Some("write"));
        assert_eq!(i386_syscall_name(20), Some("getpid"));
        assert_eq!(i386_syscall_name(102), Some("socketcall"));
        assert_eq!(i386_syscall_name(295), Some("openat"));
        assert_eq!(i386_syscall_name(-1), None);
        assert_eq!(i386_to_x86_64(4), Some(1));
        assert_eq!(i386_to_x86_64(1), Some(60));
        assert_eq!(i386_to_x86_64(295), Some(257));
        assert_eq!(i386_to_x86_64(102), None);
        assert_eq!(i386_to_x86_64(192), None);
        assert_eq!(i386_entry(4).unwrap().nargs, 3);
        // The shared numbers come from the x86_64 table.
        assert!(I386_SYSCALLS.last().unwrap().nr < FIRST_SHARED_NR as u32);
        assert_eq!(i386_syscall_name(423), Some("sched_rr_get_interval_time64"));
        assert_eq!(i386_syscall_name(435), Some("clone3"));
        assert_eq!(i386_to_x86_64(435), Some(435));
        assert_eq!(i386_syscall_name(471), Some("rseq_slice_yield"));
        assert_eq!(i386_syscall_name(472), None);
    }

    #[test]
    fn classes() {
        let openat = entry(libc::SYS_openat).unwrap();
        assert!(openat.class.contains(Class::FILE | Class::DESC));
        assert!(!openat.class.contains(Class::NETWORK));
        assert_eq!(entry(libc::SYS_getpid).unwrap().class, Class::NONE);
    }
}
