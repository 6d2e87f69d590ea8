//! Named, typed arguments of the system calls utap decodes in full.
//!
//! One table drives both the strace-style argument text (`argstr`) and
//! the named variables of the `syscall.NAME` tapset aliases, so the two
//! cannot drift. Argument names are SystemTap's (tapset/linux/sysc_*.stp).
//! Calls without an entry here get a generic hex argument list.

use std::sync::OnceLock;

use super::table::{MAX_SYSCALL_NR, syscall_number};

/// How one argument is shown. `Out*` kinds are written by the kernel: they
/// show as an address at entry and decoded at exit when the call succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A C `int`, decimal.
    Int,
    /// An `unsigned int`, decimal.
    UInt,
    /// A `long` / `off_t`, decimal.
    Long,
    /// A `size_t` / `unsigned long`, decimal.
    ULong,
    /// A number shown in hex (`0` for zero).
    Hex,
    /// An address: `NULL` or `0x...`.
    Ptr,
    /// A file mode in octal: `0644`.
    Mode,
    /// A file descriptor.
    Fd,
    /// A directory descriptor of the `*at` calls (`AT_FDCWD`).
    DirFd,
    /// A file name, quoted in full.
    Path,
    /// A NUL-terminated string, cut at 32 bytes.
    Str,
    /// Data the call reads from the tracee; its length is argument N (1-based).
    InBuf(u8),
    /// Data the call writes; its length is the return value.
    OutBuf,
    /// An iovec array the call reads; its count is argument N.
    InIovec(u8),
    /// An iovec array the call fills; its count is argument N.
    OutIovec(u8),
    OpenFlags,
    /// Descriptor-creation flags with the call's prefix, without an access
    /// mode: `O_CLOEXEC`, `EPOLL_CLOEXEC`, `EFD_CLOEXEC|EFD_NONBLOCK`.
    FdFlags(&'static str),
    AtFlags,
    RenameFlags,
    AccessMode,
    Whence,
    Prot,
    MapFlags,
    Madvise,
    MremapFlags,
    CloneFlags,
    WaitOptions,
    /// A `pid_t`.
    Pid,
    /// An `int *` status filled by wait4.
    OutWaitStatus,
    Signal,
    SigHow,
    /// A signal set whose size is argument N.
    Sigset(u8),
    OutSigset(u8),
    Sigaction,
    OutSigaction,
    Family,
    SockType,
    /// accept4's `SOCK_CLOEXEC|SOCK_NONBLOCK`.
    SockFlags,
    /// A protocol number of the family in argument N.
    Protocol(u8),
    /// A socket address whose length is argument N.
    Sockaddr(u8),
    /// A socket address the call fills; its length is in the int that
    /// argument N points to (after the call).
    OutSockaddr(u8),
    MsgFlags,
    ShutdownHow,
    Timespec,
    OutTimespec,
    ClockId,
    TimerFlags,
    OutStat,
    OutStatfs,
    StatxFlags,
    StatxMask,
    OutStatx,
    Fadvise,
    /// utimensat's pair of timespecs.
    UtimensTimes,
    XattrFlags,
    /// A `loff_t *` in/out offset: `NULL` or `[4096]`.
    OffPtr,
    /// `int[2]` filled by pipe/pipe2/socketpair.
    OutFdPair,
    FcntlCmd,
    StackT,
    OutStackT,
    /// An `int` (or uid/gid) the call writes: `[0]`.
    OutIntRef,
    /// An `int` the call reads and may update (socket address lengths):
    /// `[16]`, read when the text is made.
    IntRef,
    /// A gid array of argument N entries.
    GidList(u8),
    /// getgroups' list: as many gids as the return value.
    OutGidList,
    MfdFlags,
    FlockOp,
    RwfFlags,
    SpliceFlags,
    CloseRangeFlags,
    UmountFlags,
    MlockallFlags,
    Personality,
    IdType,
    RusageWho,
    /// A `siginfo_t` the call fills (waitid).
    OutSiginfo,
    /// A `siginfo_t` the call reads (rt_sigqueueinfo).
    Siginfo,
    SchedPolicy,
    Sigevent,
    Itimerspec,
    OutItimerspec,
    Itimerval,
    OutItimerval,
    ItimerWhich,
    TimerfdFlags,
    InotifyMask,
    PrioWhich,
    Msghdr,
    OutMsghdr,
    /// select's `fd_set` of argument N descriptors (read at entry, updated
    /// by the kernel: exact at exit only with an entry snapshot).
    FdSet(u8),
    /// select's timeout (`struct timeval`, updated by the kernel).
    InOutTimeval,
    /// pselect6/ppoll's timeout (`struct timespec`, updated by the kernel).
    InOutTimespec,
    /// pselect6's `{sigmask=[...], sigsetsize=8}`.
    Pselect6Sigmask,
    /// poll's `struct pollfd` array; its length is argument N.
    PollFds(u8),
    EpollOp,
    EpollEvent,
    /// epoll_wait's events: as many as the return value.
    OutEpollEvents,
    /// getdents64's buffer (shown as an entry count).
    OutDirents,
    OutUtsname,
    RlimitResource,
    Rlimit,
    OutRlimit,
    /// getrandom's data (hex at exit).
    OutRandom,
    GrndFlags,
    SockLevel,
    /// A CPU set whose size is argument N.
    CpuSet(u8),
    /// sched_getaffinity's mask: as many bytes as the return value.
    OutCpuSet,
}

/// One named argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg {
    /// SystemTap's variable name for it.
    pub name: &'static str,
    pub kind: Kind,
    /// SystemTap's name for the decoded text variable, when not `NAME_str`.
    pub str_var: Option<&'static str>,
}

/// How the return value reads (SystemTap's `return_str` formats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetFormat {
    Dec,
    Hex,
    Oct,
}

#[derive(Clone, Copy, Debug)]
pub struct Signature {
    pub name: &'static str,
    pub args: &'static [Arg],
    pub ret: RetFormat,
}

const fn a(name: &'static str, kind: Kind) -> Arg {
    Arg {
        name,
        kind,
        str_var: None,
    }
}

const fn a_str(name: &'static str, kind: Kind, str_var: &'static str) -> Arg {
    Arg {
        name,
        kind,
        str_var: Some(str_var),
    }
}

const fn d(name: &'static str, args: &'static [Arg]) -> Signature {
    Signature {
        name,
        args,
        ret: RetFormat::Dec,
    }
}

const fn x(name: &'static str, args: &'static [Arg]) -> Signature {
    Signature {
        name,
        args,
        ret: RetFormat::Hex,
    }
}

use Kind::*;

/// The system calls decoded in full.
pub static SIGNATURES: &[Signature] = &[
    // --- file descriptors and data
    d(
        "read",
        &[a("fd", Fd), a("buf_uaddr", OutBuf), a("count", ULong)],
    ),
    d(
        "write",
        &[a("fd", Fd), a("buf_uaddr", InBuf(3)), a("count", ULong)],
    ),
    d(
        "pread64",
        &[
            a("fd", Fd),
            a("buf_uaddr", OutBuf),
            a("count", ULong),
            a("offset", Long),
        ],
    ),
    d(
        "pwrite64",
        &[
            a("fd", Fd),
            a("buf_uaddr", InBuf(3)),
            a("count", ULong),
            a("offset", Long),
        ],
    ),
    d(
        "readv",
        &[a("fd", Fd), a("vector_uaddr", OutIovec(3)), a("count", Int)],
    ),
    d(
        "writev",
        &[a("fd", Fd), a("vector_uaddr", InIovec(3)), a("count", Int)],
    ),
    d("close", &[a("fd", Fd)]),
    d(
        "lseek",
        &[a("fildes", Fd), a("offset", Long), a("whence", Whence)],
    ),
    d("dup", &[a("oldfd", Fd)]),
    d("dup2", &[a("oldfd", Fd), a("newfd", Fd)]),
    d(
        "dup3",
        &[a("oldfd", Fd), a("newfd", Fd), a("flags", FdFlags("O_"))],
    ),
    d("pipe", &[a("fildes_uaddr", OutFdPair)]),
    d(
        "pipe2",
        &[a("fildes_uaddr", OutFdPair), a("flags", FdFlags("O_"))],
    ),
    d("fcntl", &[a("fd", Fd), a("cmd", FcntlCmd), a("arg", Long)]),
    d("ioctl", &[a("fd", Fd), a("request", Hex), a("argp", Hex)]),
    d("fsync", &[a("fd", Fd)]),
    d("fdatasync", &[a("fd", Fd)]),
    d("ftruncate", &[a("fd", Fd), a("length", Long)]),
    d(
        "getdents64",
        &[a("fd", Fd), a("dirp_uaddr", OutDirents), a("count", UInt)],
    ),
    d(
        "sendfile",
        &[
            a("out_fd", Fd),
            a("in_fd", Fd),
            a("offset_uaddr", OffPtr),
            a("count", ULong),
        ],
    ),
    // --- file names
    d(
        "open",
        &[a("filename", Path), a("flags", OpenFlags), a("mode", Mode)],
    ),
    d(
        "openat",
        &[
            a("dfd", DirFd),
            a("filename", Path),
            a("flags", OpenFlags),
            a("mode", Mode),
        ],
    ),
    d("creat", &[a("pathname", Path), a("mode", Mode)]),
    d("stat", &[a("filename", Path), a("buf_uaddr", OutStat)]),
    d("lstat", &[a("path", Path), a("buf_uaddr", OutStat)]),
    d("fstat", &[a("filedes", Fd), a("buf_uaddr", OutStat)]),
    d(
        "newfstatat",
        &[
            a("dirfd", DirFd),
            a("path", Path),
            a("buf_uaddr", OutStat),
            a("flags", AtFlags),
        ],
    ),
    d("access", &[a("pathname", Path), a("mode", AccessMode)]),
    d(
        "faccessat",
        &[
            a("dirfd", DirFd),
            a("pathname", Path),
            a("mode", AccessMode),
        ],
    ),
    d(
        "faccessat2",
        &[
            a("dirfd", DirFd),
            a("pathname", Path),
            a("mode", AccessMode),
            a("flags", AtFlags),
        ],
    ),
    d(
        "readlink",
        &[a("path", Path), a("buf_uaddr", OutBuf), a("bufsiz", Int)],
    ),
    d(
        "readlinkat",
        &[
            a("dfd", DirFd),
            a("path", Path),
            a("buf_uaddr", OutBuf),
            a("bufsiz", Int),
        ],
    ),
    d("unlink", &[a("pathname", Path)]),
    d(
        "unlinkat",
        &[a("dfd", DirFd), a("pathname", Path), a("flag", AtFlags)],
    ),
    d("mkdir", &[a("pathname", Path), a("mode", Mode)]),
    d(
        "mkdirat",
        &[a("dirfd", DirFd), a("pathname", Path), a("mode", Mode)],
    ),
    d("rmdir", &[a("pathname", Path)]),
    d("rename", &[a("oldpath", Path), a("newpath", Path)]),
    d(
        "renameat",
        &[
            a("olddfd", DirFd),
            a("oldname", Path),
            a("newdfd", DirFd),
            a("newname", Path),
        ],
    ),
    d(
        "renameat2",
        &[
            a("olddfd", DirFd),
            a("oldname", Path),
            a("newdfd", DirFd),
            a("newname", Path),
            a("flags", RenameFlags),
        ],
    ),
    d("link", &[a("oldpath", Path), a("newpath", Path)]),
    d("symlink", &[a("oldpath", Path), a("newpath", Path)]),
    d("chdir", &[a("path", Path)]),
    d("fchdir", &[a("fd", Fd)]),
    d("getcwd", &[a("buf_uaddr", OutBuf), a("size", ULong)]),
    d("chmod", &[a("path", Path), a("mode", Mode)]),
    d("fchmod", &[a("fildes", Fd), a("mode", Mode)]),
    d(
        "fchmodat",
        &[a("dirfd", DirFd), a("pathname", Path), a("mode", Mode)],
    ),
    d(
        "chown",
        &[a("path", Path), a("owner", Int), a("group", Int)],
    ),
    d("fchown", &[a("fd", Fd), a("owner", Int), a("group", Int)]),
    d(
        "lchown",
        &[a("path", Path), a("owner", Int), a("group", Int)],
    ),
    d("truncate", &[a("path", Path), a("length", Long)]),
    Signature {
        name: "umask",
        args: &[a("mask", Mode)],
        ret: RetFormat::Oct,
    },
    d("chroot", &[a("path", Path)]),
    d("statfs", &[a("path", Path), a("buf_uaddr", OutStatfs)]),
    d("fstatfs", &[a("fd", Fd), a("buf_uaddr", OutStatfs)]),
    d(
        "inotify_add_watch",
        &[a("fd", Fd), a("path", Path), a("mask", InotifyMask)],
    ),
    d(
        "statx",
        &[
            a("dfd", DirFd),
            a("filename", Path),
            a("flags", StatxFlags),
            a("mask", StatxMask),
            a("buf_uaddr", OutStatx),
        ],
    ),
    d(
        "fadvise64",
        &[
            a("fd", Fd),
            a("offset", Long),
            a("len", Long),
            a("advice", Fadvise),
        ],
    ),
    d(
        "copy_file_range",
        &[
            a("fd_in", Fd),
            a("off_in", OffPtr),
            a("fd_out", Fd),
            a("off_out", OffPtr),
            a("len", ULong),
            a("flags", UInt),
        ],
    ),
    d(
        "utimensat",
        &[
            a("dfd", DirFd),
            a("filename", Path),
            a("tsp", UtimensTimes),
            a("flags", AtFlags),
        ],
    ),
    d(
        "getxattr",
        &[
            a("path", Path),
            a("name_str", Str),
            a("value_uaddr", OutBuf),
            a("size", ULong),
        ],
    ),
    d(
        "lgetxattr",
        &[
            a("path", Path),
            a("name_str", Str),
            a("value_uaddr", OutBuf),
            a("size", ULong),
        ],
    ),
    d(
        "fgetxattr",
        &[
            a("filedes", Fd),
            a("name_str", Str),
            a("value_uaddr", OutBuf),
            a("size", ULong),
        ],
    ),
    d(
        "setxattr",
        &[
            a("path", Path),
            a("name_str", Str),
            a("value_uaddr", InBuf(4)),
            a("size", ULong),
            a("flags", XattrFlags),
        ],
    ),
    d(
        "lsetxattr",
        &[
            a("path", Path),
            a("name_str", Str),
            a("value_uaddr", InBuf(4)),
            a("size", ULong),
            a("flags", XattrFlags),
        ],
    ),
    d(
        "fsetxattr",
        &[
            a("filedes", Fd),
            a("name_str", Str),
            a("value_uaddr", InBuf(4)),
            a("size", ULong),
            a("flags", XattrFlags),
        ],
    ),
    d("removexattr", &[a("path", Path), a("name_str", Str)]),
    d("lremovexattr", &[a("path", Path), a("name_str", Str)]),
    d("fremovexattr", &[a("filedes", Fd), a("name_str", Str)]),
    // --- memory
    x(
        "mmap",
        &[
            a("start", Ptr),
            a("len", ULong),
            a("prot", Prot),
            a("flags", MapFlags),
            a("fd", Fd),
            a("pgoffset", Hex),
        ],
    ),
    d("munmap", &[a("start", Ptr), a("length", ULong)]),
    d(
        "mprotect",
        &[a("addr", Ptr), a("len", ULong), a("prot", Prot)],
    ),
    d("brk", &[a("brk", Ptr)]),
    x(
        "mremap",
        &[
            a("old_address", Ptr),
            a("old_size", ULong),
            a("new_size", ULong),
            a("flags", MremapFlags),
            a("new_address", Ptr),
        ],
    ),
    d(
        "madvise",
        &[a("start", Ptr), a("length", ULong), a("advice", Madvise)],
    ),
    d(
        "msync",
        &[a("start", Ptr), a("length", ULong), a("flags", Hex)],
    ),
    d("mlock", &[a("addr", Ptr), a("len", ULong)]),
    d("munlock", &[a("addr", Ptr), a("len", ULong)]),
    // --- processes
    d("getpid", &[]),
    d("getppid", &[]),
    d("gettid", &[]),
    d("getuid", &[]),
    d("geteuid", &[]),
    d("getgid", &[]),
    d("getegid", &[]),
    d("getpgrp", &[]),
    d("setsid", &[]),
    d("sched_yield", &[]),
    d("pause", &[]),
    d("fork", &[]),
    d("vfork", &[]),
    d("setuid", &[a("uid", Int)]),
    d("setgid", &[a("gid", Int)]),
    d("setpgid", &[a("pid", Pid), a("pgid", Pid)]),
    d("getpgid", &[a("pid", Pid)]),
    d("getsid", &[a("pid", Pid)]),
    d(
        "clone",
        &[
            a("clone_flags", CloneFlags),
            a("newsp", Ptr),
            a("parent_tid_uaddr", Ptr),
            a("child_tid_uaddr", Ptr),
            a("tls_uaddr", Ptr),
        ],
    ),
    d(
        "execve",
        &[a("filename", Path), a("args", Ptr), a("env_str", Ptr)],
    ),
    d("exit", &[a("status", Int)]),
    d("exit_group", &[a("status", Int)]),
    d(
        "wait4",
        &[
            a("pid", Pid),
            a("status_uaddr", OutWaitStatus),
            a("options", WaitOptions),
            a("rusage_uaddr", Ptr),
        ],
    ),
    d("set_tid_address", &[a("tidptr_uaddr", Ptr)]),
    d(
        "set_robust_list",
        &[a("list_head_uaddr", Ptr), a("len", ULong)],
    ),
    d(
        "prctl",
        &[
            a("option", Int),
            a("arg2", Hex),
            a("arg3", Hex),
            a("arg4", Hex),
            a("arg5", Hex),
        ],
    ),
    d("alarm", &[a("seconds", UInt)]),
    // --- signals
    d("kill", &[a("pid", Pid), a_str("sig", Signal, "sig_name")]),
    d("tkill", &[a("pid", Pid), a_str("sig", Signal, "sig_name")]),
    d("tgkill", &[a("tgid", Pid), a("pid", Pid), a("sig", Signal)]),
    d(
        "rt_sigaction",
        &[
            a("sig", Signal),
            a("act_uaddr", Sigaction),
            a("oact_uaddr", OutSigaction),
            a("sigsetsize", ULong),
        ],
    ),
    d(
        "rt_sigprocmask",
        &[
            a("how", SigHow),
            a("set_uaddr", Sigset(4)),
            a("oldset_uaddr", OutSigset(4)),
            a("sigsetsize", ULong),
        ],
    ),
    d(
        "rt_sigsuspend",
        &[a("set_uaddr", Sigset(2)), a("sigsetsize", ULong)],
    ),
    d(
        "rt_sigpending",
        &[a("set_uaddr", OutSigset(2)), a("sigsetsize", ULong)],
    ),
    // --- network
    d(
        "socket",
        &[
            a("family", Family),
            a("type", SockType),
            a("protocol", Protocol(1)),
        ],
    ),
    d(
        "socketpair",
        &[
            a("family", Family),
            a("type", SockType),
            a("protocol", Protocol(1)),
            a("sv_uaddr", OutFdPair),
        ],
    ),
    d(
        "connect",
        &[
            a("sockfd", Fd),
            a("serv_addr_uaddr", Sockaddr(3)),
            a("addrlen", UInt),
        ],
    ),
    d(
        "bind",
        &[
            a("sockfd", Fd),
            a("my_addr_uaddr", Sockaddr(3)),
            a("addrlen", UInt),
        ],
    ),
    d("listen", &[a("sockfd", Fd), a("backlog", Int)]),
    d(
        "accept",
        &[
            a("sockfd", Fd),
            a("addr_uaddr", OutSockaddr(3)),
            a("addrlen_uaddr", IntRef),
        ],
    ),
    d(
        "accept4",
        &[
            a("sockfd", Fd),
            a("addr_uaddr", OutSockaddr(3)),
            a("addrlen_uaddr", IntRef),
            a("flags", SockFlags),
        ],
    ),
    d(
        "sendto",
        &[
            a("s", Fd),
            a("buf_uaddr", InBuf(3)),
            a("len", ULong),
            a("flags", MsgFlags),
            a("to_uaddr", Sockaddr(6)),
            a("tolen", UInt),
        ],
    ),
    d(
        "recvfrom",
        &[
            a("s", Fd),
            a("buf_uaddr", OutBuf),
            a("len", ULong),
            a("flags", MsgFlags),
            a("addr_uaddr", OutSockaddr(6)),
            a("addrlen_uaddr", IntRef),
        ],
    ),
    d(
        "sendmsg",
        &[a("s", Fd), a("msg_uaddr", Msghdr), a("flags", MsgFlags)],
    ),
    d(
        "recvmsg",
        &[a("s", Fd), a("msg_uaddr", OutMsghdr), a("flags", MsgFlags)],
    ),
    d("shutdown", &[a("s", Fd), a("how", ShutdownHow)]),
    d(
        "getsockname",
        &[
            a("s", Fd),
            a("name_uaddr", OutSockaddr(3)),
            a("namelen_uaddr", IntRef),
        ],
    ),
    d(
        "getpeername",
        &[
            a("s", Fd),
            a("name_uaddr", OutSockaddr(3)),
            a("namelen_uaddr", IntRef),
        ],
    ),
    d(
        "setsockopt",
        &[
            a("fd", Fd),
            a("level", SockLevel),
            a("optname", Int),
            a("optval_uaddr", Ptr),
            a("optlen", UInt),
        ],
    ),
    d(
        "getsockopt",
        &[
            a("fd", Fd),
            a("level", SockLevel),
            a("optname", Int),
            a("optval_uaddr", Ptr),
            a("optlen_uaddr", Ptr),
        ],
    ),
    // --- polling and waiting
    d(
        "poll",
        &[
            a("ufds_uaddr", PollFds(2)),
            a("nfds", UInt),
            a("timeout", Int),
        ],
    ),
    d(
        "ppoll",
        &[
            a("fds_uaddr", PollFds(2)),
            a("nfds", UInt),
            a("tsp", InOutTimespec),
            a("sigmask", Sigset(5)),
            a("sigsetsize", ULong),
        ],
    ),
    d(
        "select",
        &[
            a("n", Int),
            a("readfds_uaddr", FdSet(1)),
            a("writefds_uaddr", FdSet(1)),
            a("exceptfds_uaddr", FdSet(1)),
            a("timeout_uaddr", InOutTimeval),
        ],
    ),
    d(
        "pselect6",
        &[
            a("nfds", Int),
            a("readfds", FdSet(1)),
            a("writefds", FdSet(1)),
            a("exceptfds", FdSet(1)),
            a("timeout", InOutTimespec),
            a("sigmask", Pselect6Sigmask),
        ],
    ),
    d("epoll_create", &[a("size", Int)]),
    d("epoll_create1", &[a("flags", FdFlags("EPOLL_"))]),
    d(
        "epoll_ctl",
        &[
            a("epfd", Fd),
            a("op", EpollOp),
            a("fd", Fd),
            a("event_uaddr", EpollEvent),
        ],
    ),
    d(
        "epoll_wait",
        &[
            a("epfd", Fd),
            a("events_uaddr", OutEpollEvents),
            a("maxevents", Int),
            a("timeout", Int),
        ],
    ),
    d(
        "epoll_pwait",
        &[
            a("epfd", Fd),
            a("events_uaddr", OutEpollEvents),
            a("maxevents", Int),
            a("timeout", Int),
            a("sigmask_uaddr", Sigset(6)),
            a("sigsetsize", ULong),
        ],
    ),
    d(
        "futex",
        &[
            a("futex_uaddr", Ptr),
            a("op", Int),
            a("val", UInt),
            a("utime_uaddr", Ptr),
            a("uaddr2_uaddr", Ptr),
            a("val3", UInt),
        ],
    ),
    d("eventfd2", &[a("count", UInt), a("flags", FdFlags("EFD_"))]),
    // --- time
    d(
        "nanosleep",
        &[a("req_uaddr", Timespec), a("rem_uaddr", OutTimespec)],
    ),
    d(
        "clock_nanosleep",
        &[
            a("clk_id", ClockId),
            a("flags", TimerFlags),
            a("req_uaddr", Timespec),
            a("rem_uaddr", OutTimespec),
        ],
    ),
    d(
        "clock_gettime",
        &[a("clk_id", ClockId), a("tp_uaddr", OutTimespec)],
    ),
    d(
        "clock_getres",
        &[a("clk_id", ClockId), a("res_uaddr", OutTimespec)],
    ),
    d("gettimeofday", &[a("tv_uaddr", Ptr), a("tz_uaddr", Ptr)]),
    d("time", &[a("t_uaddr", Ptr)]),
    // --- misc
    d("uname", &[a("name_uaddr", OutUtsname)]),
    d(
        "getrandom",
        &[
            a("buf", OutRandom),
            a("count", ULong),
            a("flags", GrndFlags),
        ],
    ),
    d("arch_prctl", &[a("code", Hex), a("addr", Hex)]),
    d(
        "prlimit64",
        &[
            a("pid", Pid),
            a("resource", RlimitResource),
            a("new_rlim_uaddr", Rlimit),
            a("old_rlim_uaddr", OutRlimit),
        ],
    ),
    d(
        "getrlimit",
        &[a("resource", RlimitResource), a("rlim_uaddr", OutRlimit)],
    ),
    d(
        "setrlimit",
        &[a("resource", RlimitResource), a("rlim_uaddr", Rlimit)],
    ),
    d("sysinfo", &[a("info_uaddr", Ptr)]),
    d("clone3", &[a("uargs", Ptr), a("size", ULong)]),
    d("flock", &[a("fd", Fd), a("operation", FlockOp)]),
    d("sched_getscheduler", &[a("pid", Pid)]),
    d("sched_getparam", &[a("pid", Pid), a("p_uaddr", OutIntRef)]),
    d("sched_setparam", &[a("pid", Pid), a("p_uaddr", IntRef)]),
    d(
        "sched_setscheduler",
        &[
            a("pid", Pid),
            a("policy", SchedPolicy),
            a("p_uaddr", IntRef),
        ],
    ),
    d("sched_get_priority_max", &[a("policy", SchedPolicy)]),
    d("sched_get_priority_min", &[a("policy", SchedPolicy)]),
    d(
        "timer_create",
        &[
            a("clockid", ClockId),
            a("evp_uaddr", Sigevent),
            a("timerid_uaddr", OutIntRef),
        ],
    ),
    d(
        "timer_settime",
        &[
            a("timerid", Int),
            a("flags", TimerFlags),
            a("value_uaddr", Itimerspec),
            a("ovalue_uaddr", OutItimerspec),
        ],
    ),
    d(
        "timer_gettime",
        &[a("timerid", Int), a("value_uaddr", OutItimerspec)],
    ),
    d("timer_getoverrun", &[a("timerid", Int)]),
    d("timer_delete", &[a("timerid", Int)]),
    d(
        "rt_sigtimedwait",
        &[
            a("uthese_uaddr", Sigset(4)),
            a("uinfo_uaddr", OutSiginfo),
            a("uts_uaddr", Timespec),
            a("sigsetsize", ULong),
        ],
    ),
    d(
        "rt_sigqueueinfo",
        &[a("pid", Pid), a("sig", Signal), a("uinfo_uaddr", Siginfo)],
    ),
    d(
        "preadv",
        &[
            a("fd", Fd),
            a("vector_uaddr", OutIovec(3)),
            a("count", Int),
            a("offset", Long),
        ],
    ),
    d(
        "pwritev",
        &[
            a("fd", Fd),
            a("vector_uaddr", InIovec(3)),
            a("count", Int),
            a("offset", Long),
        ],
    ),
    d(
        "preadv2",
        &[
            a("fd", Fd),
            a("vector_uaddr", OutIovec(3)),
            a("count", Int),
            a("offset", Long),
            a("pos_h", Hex),
            a("flags", RwfFlags),
        ],
    ),
    d(
        "pwritev2",
        &[
            a("fd", Fd),
            a("vector_uaddr", InIovec(3)),
            a("count", Int),
            a("offset", Long),
            a("pos_h", Hex),
            a("flags", RwfFlags),
        ],
    ),
    d(
        "splice",
        &[
            a("fd_in", Fd),
            a("off_in", OffPtr),
            a("fd_out", Fd),
            a("off_out", OffPtr),
            a("len", ULong),
            a("flags", SpliceFlags),
        ],
    ),
    d(
        "tee",
        &[
            a("fdin", Fd),
            a("fdout", Fd),
            a("len", ULong),
            a("flags", SpliceFlags),
        ],
    ),
    d(
        "vmsplice",
        &[
            a("fd", Fd),
            a("iov", InIovec(3)),
            a("nr_segs", ULong),
            a("flags", SpliceFlags),
        ],
    ),
    d("mlockall", &[a("flags", MlockallFlags)]),
    d("munlockall", &[]),
    d("personality", &[a("persona", Personality)]),
    d(
        "close_range",
        &[
            a("fd", UInt),
            a("max_fd", UInt),
            a("flags", CloseRangeFlags),
        ],
    ),
    d(
        "pidfd_open",
        &[a("pid", Pid), a("flags", FdFlags("PIDFD_"))],
    ),
    d(
        "pidfd_send_signal",
        &[
            a("pidfd", Fd),
            a("sig", Signal),
            a("info", Ptr),
            a("flags", UInt),
        ],
    ),
    d(
        "waitid",
        &[
            a("which", IdType),
            a("pid", Pid),
            a("infop_uaddr", OutSiginfo),
            a("options", WaitOptions),
            a("rusage_uaddr", Ptr),
        ],
    ),
    d("sync", &[]),
    d("syncfs", &[a("fd", Fd)]),
    d("getrusage", &[a("who", RusageWho), a("usage_uaddr", Ptr)]),
    d("umount2", &[a("target", Path), a("flags", UmountFlags)]),
    d(
        "sigaltstack",
        &[a("uss_uaddr", StackT), a("uoss_uaddr", OutStackT)],
    ),
    d(
        "getresuid",
        &[
            a("ruid_uaddr", OutIntRef),
            a("euid_uaddr", OutIntRef),
            a("suid_uaddr", OutIntRef),
        ],
    ),
    d(
        "getresgid",
        &[
            a("rgid_uaddr", OutIntRef),
            a("egid_uaddr", OutIntRef),
            a("sgid_uaddr", OutIntRef),
        ],
    ),
    d(
        "setresuid",
        &[a("ruid", Int), a("euid", Int), a("suid", Int)],
    ),
    d(
        "setresgid",
        &[a("rgid", Int), a("egid", Int), a("sgid", Int)],
    ),
    d("setreuid", &[a("ruid", Int), a("euid", Int)]),
    d("setregid", &[a("rgid", Int), a("egid", Int)]),
    d("getgroups", &[a("size", Int), a("list_uaddr", OutGidList)]),
    d("setgroups", &[a("size", Int), a("list_uaddr", GidList(1))]),
    d(
        "fchownat",
        &[
            a("dirfd", DirFd),
            a("pathname", Path),
            a("owner", Int),
            a("group", Int),
            a("flags", AtFlags),
        ],
    ),
    d(
        "linkat",
        &[
            a("olddirfd", DirFd),
            a("oldpath", Path),
            a("newdirfd", DirFd),
            a("newpath", Path),
            a("flags", AtFlags),
        ],
    ),
    d(
        "symlinkat",
        &[a("oldname", Path), a("newdfd", DirFd), a("newname", Path)],
    ),
    d("memfd_create", &[a("uname", Path), a("flags", MfdFlags)]),
    d(
        "timerfd_create",
        &[a("clockid", ClockId), a("flags", FdFlags("TFD_"))],
    ),
    d(
        "timerfd_settime",
        &[
            a("fd", Fd),
            a("flags", TimerfdFlags),
            a("value_uaddr", Itimerspec),
            a("ovalue_uaddr", OutItimerspec),
        ],
    ),
    d(
        "timerfd_gettime",
        &[a("fd", Fd), a("value_uaddr", OutItimerspec)],
    ),
    d(
        "signalfd4",
        &[
            a("ufd", Fd),
            a("sigmask", Sigset(3)),
            a("sizemask", ULong),
            a("flags", FdFlags("SFD_")),
        ],
    ),
    d(
        "signalfd",
        &[a("ufd", Fd), a("sigmask", Sigset(3)), a("sizemask", ULong)],
    ),
    d("inotify_init1", &[a("flags", FdFlags("IN_"))]),
    d("inotify_rm_watch", &[a("fd", Fd), a("wd", Int)]),
    d("getpriority", &[a("which", PrioWhich), a("who", Int)]),
    d(
        "setpriority",
        &[a("which", PrioWhich), a("who", Int), a("prio", Int)],
    ),
    d(
        "setitimer",
        &[
            a("which", ItimerWhich),
            a("value_uaddr", Itimerval),
            a("ovalue_uaddr", OutItimerval),
        ],
    ),
    d(
        "getitimer",
        &[a("which", ItimerWhich), a("value_uaddr", OutItimerval)],
    ),
    d(
        "sched_getaffinity",
        &[a("pid", Pid), a("len", UInt), a("mask_uaddr", OutCpuSet)],
    ),
    d(
        "sched_setaffinity",
        &[a("pid", Pid), a("len", UInt), a("mask_uaddr", CpuSet(2))],
    ),
];

/// The full signature of system call `nr`, if utap decodes it in full.
pub fn signature(nr: i64) -> Option<&'static Signature> {
    static BY_NR: OnceLock<Vec<Option<&'static Signature>>> = OnceLock::new();
    let table = BY_NR.get_or_init(|| {
        let mut v = vec![None; MAX_SYSCALL_NR as usize + 1];
        for s in SIGNATURES {
            if let Some(nr) = syscall_number(s.name) {
                v[nr as usize] = Some(s);
            }
        }
        v
    });
    table.get(usize::try_from(nr).ok()?).copied().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::table::{entry, syscall_nargs};

    #[test]
    fn every_signature_names_a_real_syscall_with_its_argument_count() {
        let mut seen = std::collections::HashSet::new();
        for s in SIGNATURES {
            assert!(seen.insert(s.name), "{} twice", s.name);
            let nr = syscall_number(s.name).unwrap_or_else(|| panic!("no syscall {}", s.name));
            assert_eq!(s.args.len(), syscall_nargs(nr as i64), "{}", s.name);
            assert!(entry(nr as i64).is_some());
            for arg in s.args {
                let refs = match arg.kind {
                    InBuf(n) | InIovec(n) | OutIovec(n) | Sigset(n) | OutSigset(n) | PollFds(n)
                    | CpuSet(n) | GidList(n) | Protocol(n) | Sockaddr(n) => Some(n),
                    _ => None,
                };
                if let Some(n) = refs {
                    assert!((1..=s.args.len()).contains(&(n as usize)), "{}", s.name);
                }
            }
        }
        assert!(SIGNATURES.len() >= 80, "only {} decoded", SIGNATURES.len());
    }

    #[test]
    fn lookup_by_number() {
        assert_eq!(signature(libc::SYS_openat).unwrap().name, "openat");
        assert_eq!(signature(libc::SYS_mmap).unwrap().ret, RetFormat::Hex);
        assert!(signature(libc::SYS_io_uring_setup).is_none());
        assert!(signature(-1).is_none());
        assert!(signature(100_000).is_none());
    }
}
