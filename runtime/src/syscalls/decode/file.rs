//! File-family arguments: descriptors, AT_FDCWD, open flags, modes,
//! access modes, `AT_*` flags, lseek whence, fcntl commands, `struct stat`.

use super::bytes::*;
use super::flags::{Xlat, as_int, flags_str, xlat_str};
use crate::memory::ReadMemory;

pub const AT_FDCWD: i32 = -100;

/// A directory descriptor of the `*at` calls.
pub fn dirfd_str(fd: u64) -> String {
    match as_int(fd) {
        AT_FDCWD => "AT_FDCWD".to_string(),
        fd => fd.to_string(),
    }
}

const O_ACCMODE: u64 = 0o3;
const O_TMPFILE_BIT: u64 = 0o20000000;
pub const O_CREAT: u64 = 0o100;

/// Open flags other than the access mode, in strace's order.
const OPEN_FLAGS: &[Xlat] = &[
    (0o100, "O_CREAT"),
    (0o200, "O_EXCL"),
    (0o400, "O_NOCTTY"),
    (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"),
    (0o4000, "O_NONBLOCK"),
    (0o4010000, "O_SYNC"),
    (0o4000000, "__O_SYNC"),
    (0o10000, "O_DSYNC"),
    (0o40000, "O_DIRECT"),
    (0o100000, "O_LARGEFILE"),
    (0o400000, "O_NOFOLLOW"),
    (0o1000000, "O_NOATIME"),
    (0o2000000, "O_CLOEXEC"),
    (0o10000000, "O_PATH"),
    (0o20200000, "O_TMPFILE"),
    (0o20000000, "__O_TMPFILE"),
    (0o200000, "O_DIRECTORY"),
    (0o20000, "FASYNC"),
];

const ACCESS_MODES: [&str; 4] = ["O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"];

/// open/openat flags: `O_RDONLY`, `O_WRONLY|O_CREAT|O_TRUNC`, ...
pub fn open_flags_str(flags: u64) -> String {
    let flags = flags & 0xffff_ffff;
    let mode = ACCESS_MODES[(flags & O_ACCMODE) as usize];
    let rest = flags & !O_ACCMODE;
    if rest == 0 {
        mode.to_string()
    } else {
        format!("{mode}|{}", flags_str(rest, OPEN_FLAGS, "0", ""))
    }
}

/// The descriptor flags of pipe2/dup3/epoll_create1/eventfd2..., which
/// strace shows without an access mode and with the call's own prefix:
/// `O_CLOEXEC`, `EPOLL_CLOEXEC`, `EFD_CLOEXEC|EFD_NONBLOCK`, `0`.
pub fn fd_flags_str(flags: u64, prefix: &str) -> String {
    let flags = flags & 0xffff_ffff;
    let mut extra: Vec<(u64, String)> = Vec::new();
    if prefix == "EFD_" {
        extra.push((1, "EFD_SEMAPHORE".to_string()));
    }
    extra.push((0o2000000, format!("{prefix}CLOEXEC")));
    extra.push((0o4000, format!("{prefix}NONBLOCK")));
    if prefix == "O_" {
        extra.push((0o40000, "O_DIRECT".to_string()));
        extra.push((0o200000, "O_NOTIFICATION_PIPE".to_string()));
    }
    if flags == 0 {
        return "0".to_string();
    }
    let mut rest = flags;
    let mut parts = Vec::new();
    for (bit, name) in extra {
        if rest & bit != 0 {
            parts.push(name);
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

/// Whether open flags take a mode argument (O_CREAT or O_TMPFILE).
pub fn open_needs_mode(flags: u64) -> bool {
    flags & (O_CREAT | O_TMPFILE_BIT) != 0
}

/// A numeric file mode as strace prints it: `0644`, `000`, `04755`.
pub fn mode_str(mode: u64) -> String {
    format!("0{:02o}", mode & 0xffff_ffff)
}

const FILE_TYPES: &[Xlat] = &[
    (0o140000, "S_IFSOCK"),
    (0o120000, "S_IFLNK"),
    (0o100000, "S_IFREG"),
    (0o60000, "S_IFBLK"),
    (0o40000, "S_IFDIR"),
    (0o20000, "S_IFCHR"),
    (0o10000, "S_IFIFO"),
];
const S_IFMT: u64 = 0o170000;

/// A mode with its file type: `S_IFREG|0644`.
pub fn symbolic_mode_str(mode: u64) -> String {
    let perms = mode_str(mode & 0o7777);
    match super::flags::xlat_lookup(mode & S_IFMT, FILE_TYPES) {
        Some(kind) => format!("{kind}|{perms}"),
        None if mode & S_IFMT == 0 => perms,
        None => format!("{:#o}|{perms}", mode & S_IFMT),
    }
}

const ACCESS_BITS: &[Xlat] = &[(4, "R_OK"), (2, "W_OK"), (1, "X_OK")];

/// access/faccessat modes: `F_OK`, `R_OK|W_OK`.
pub fn access_mode_str(mode: u64) -> String {
    flags_str(mode & 0xffff_ffff, ACCESS_BITS, "F_OK", "?_OK")
}

const AT_FLAGS: &[Xlat] = &[
    (0x100, "AT_SYMLINK_NOFOLLOW"),
    (0x200, "AT_REMOVEDIR"),
    (0x400, "AT_SYMLINK_FOLLOW"),
    (0x800, "AT_NO_AUTOMOUNT"),
    (0x1000, "AT_EMPTY_PATH"),
    (0x8000, "AT_RECURSIVE"),
];

/// `AT_*` flags of the `*at` calls: `0`, `AT_SYMLINK_NOFOLLOW`.
pub fn at_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, AT_FLAGS, "0", "AT_???")
}

const RENAME_FLAGS: &[Xlat] = &[
    (1, "RENAME_NOREPLACE"),
    (2, "RENAME_EXCHANGE"),
    (4, "RENAME_WHITEOUT"),
];

/// renameat2's flags: `RENAME_NOREPLACE`.
pub fn rename_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, RENAME_FLAGS, "0", "RENAME_???")
}

const WHENCE: &[Xlat] = &[
    (0, "SEEK_SET"),
    (1, "SEEK_CUR"),
    (2, "SEEK_END"),
    (3, "SEEK_DATA"),
    (4, "SEEK_HOLE"),
];

/// lseek's whence: `SEEK_SET` ...
pub fn whence_str(whence: u64) -> String {
    xlat_str(whence & 0xffff_ffff, WHENCE, "SEEK_???")
}

const FCNTL_CMDS: &[Xlat] = &[
    (0, "F_DUPFD"),
    (1, "F_GETFD"),
    (2, "F_SETFD"),
    (3, "F_GETFL"),
    (4, "F_SETFL"),
    (5, "F_GETLK"),
    (6, "F_SETLK"),
    (7, "F_SETLKW"),
    (8, "F_SETOWN"),
    (9, "F_GETOWN"),
    (10, "F_SETSIG"),
    (11, "F_GETSIG"),
    (15, "F_SETOWN_EX"),
    (16, "F_GETOWN_EX"),
    (36, "F_OFD_GETLK"),
    (37, "F_OFD_SETLK"),
    (38, "F_OFD_SETLKW"),
    (1024, "F_SETLEASE"),
    (1025, "F_GETLEASE"),
    (1026, "F_NOTIFY"),
    (1030, "F_DUPFD_CLOEXEC"),
    (1031, "F_SETPIPE_SZ"),
    (1032, "F_GETPIPE_SZ"),
    (1033, "F_ADD_SEALS"),
    (1034, "F_GET_SEALS"),
];

/// fcntl's command: `F_GETFL` ...
pub fn fcntl_cmd_str(cmd: u64) -> String {
    xlat_str(cmd & 0xffff_ffff, FCNTL_CMDS, "F_???")
}

/// The third argument of fcntl as strace shows it for `cmd`, or None when
/// the command takes no argument.
pub fn fcntl_arg_str(cmd: u64, arg: u64) -> Option<String> {
    match cmd & 0xffff_ffff {
        1 | 3 | 9 | 11 | 1025 | 1032 | 1034 => None,
        2 => Some(if arg & 1 != 0 {
            "FD_CLOEXEC".to_string()
        } else {
            "0".to_string()
        }),
        4 => Some(open_flags_str(arg)),
        0 | 1030 | 8 | 10 | 1031 => Some(as_int(arg).to_string()),
        _ => Some(format!("{arg:#x}")),
    }
}

/// `struct stat` as strace abbreviates it, or the address when unreadable.
pub fn stat_str(mem: &dyn ReadMemory, addr: u64) -> String {
    const SIZE: usize = 144;
    let Some(buf) = super::bytes::read_exact(mem, addr, SIZE) else {
        return super::strings::addr_str(addr);
    };
    let u64_at = |off: usize| u64_at(&buf, off);
    let mode = u64::from(u32_at(&buf, 24));
    let tail = match mode & S_IFMT {
        0o20000 | 0o60000 => format!("st_rdev={}", makedev_str(u64_at(40))),
        _ => format!("st_size={}", u64_at(48) as i64),
    };
    format!("{{st_mode={}, {tail}, ...}}", symbolic_mode_str(mode))
}

const FS_MAGIC: &[Xlat] = &[
    (0x1cd1, "DEVPTS_SUPER_MAGIC"),
    (0x6969, "NFS_SUPER_MAGIC"),
    (0x9660, "ISOFS_SUPER_MAGIC"),
    (0x9fa0, "PROC_SUPER_MAGIC"),
    (0xef53, "EXT2_SUPER_MAGIC"),
    (0x4d44, "MSDOS_SUPER_MAGIC"),
    (0x0027e0eb, "CGROUP_SUPER_MAGIC"),
    (0x63677270, "CGROUP2_SUPER_MAGIC"),
    (0x01021994, "TMPFS_MAGIC"),
    (0x01021997, "V9FS_MAGIC"),
    (0x09041934, "ANON_INODE_FS_MAGIC"),
    (0x2011bab0, "EXFAT_SUPER_MAGIC"),
    (0x2fc12fc1, "ZFS_SUPER_MAGIC"),
    (0x42494e4d, "BINFMTFS_MAGIC"),
    (0x50495045, "PIPEFS_MAGIC"),
    (0x534f434b, "SOCKFS_MAGIC"),
    (0x58465342, "XFS_SUPER_MAGIC"),
    (0x62656572, "SYSFS_MAGIC"),
    (0x64626720, "DEBUGFS_MAGIC"),
    (0x65735546, "FUSE_SUPER_MAGIC"),
    (0x73717368, "SQUASHFS_MAGIC"),
    (0x74726163, "TRACEFS_MAGIC"),
    (0x794c7630, "OVERLAYFS_SUPER_MAGIC"),
    (0x9123683e, "BTRFS_SUPER_MAGIC"),
    (0xf2f52010, "F2FS_SUPER_MAGIC"),
    (0xcafe4a11, "BPF_FS_MAGIC"),
];

const STATFS_FLAGS: &[Xlat] = &[
    (0x20, "ST_VALID"),
    (0x1, "ST_RDONLY"),
    (0x2, "ST_NOSUID"),
    (0x4, "ST_NODEV"),
    (0x8, "ST_NOEXEC"),
    (0x10, "ST_SYNCHRONOUS"),
    (0x40, "ST_MANDLOCK"),
    (0x400, "ST_NOATIME"),
    (0x800, "ST_NODIRATIME"),
    (0x1000, "ST_RELATIME"),
    (0x2000, "ST_NOSYMFOLLOW"),
];

/// `struct statfs` (x86_64) as strace shows it.
pub fn statfs_str(mem: &dyn ReadMemory, addr: u64) -> String {
    const SIZE: usize = 120;
    let Some(b) = super::bytes::read_exact(mem, addr, SIZE) else {
        return super::strings::addr_str(addr);
    };
    let w = |i: usize| u64_at(&b, i * 8);
    let fsid0 = u32_at(&b, 56);
    let fsid1 = u32_at(&b, 60);
    format!(
        "{{f_type={}, f_bsize={}, f_blocks={}, f_bfree={}, f_bavail={}, f_files={}, f_ffree={}, f_fsid={{val=[{fsid0:#x}, {fsid1:#x}]}}, f_namelen={}, f_frsize={}, f_flags={}}}",
        xlat_str(w(0), FS_MAGIC, "???_MAGIC"),
        w(1),
        w(2),
        w(3),
        w(4),
        w(5),
        w(6),
        w(8),
        w(9),
        flags_str(w(10), STATFS_FLAGS, "0", "ST_???"),
    )
}

const STATX_SYNC: &[Xlat] = &[
    (0x2000, "AT_STATX_FORCE_SYNC"),
    (0x4000, "AT_STATX_DONT_SYNC"),
];

/// statx's flags: the sync type, then the `AT_*` flags:
/// `AT_STATX_SYNC_AS_STAT|AT_SYMLINK_NOFOLLOW`.
pub fn statx_flags_str(flags: u64) -> String {
    let flags = flags & 0xffff_ffff;
    let sync = flags & 0x6000;
    let mut out = if sync == 0 {
        "AT_STATX_SYNC_AS_STAT".to_string()
    } else {
        flags_str(sync, STATX_SYNC, "0", "")
    };
    let rest = flags & !0x6000;
    if rest != 0 {
        out.push('|');
        out.push_str(&flags_str(rest, AT_FLAGS, "0", ""));
    }
    out
}

const STATX_MASK: &[Xlat] = &[
    (0xfff, "STATX_ALL"),
    (0x7ff, "STATX_BASIC_STATS"),
    (0x1, "STATX_TYPE"),
    (0x2, "STATX_MODE"),
    (0x4, "STATX_NLINK"),
    (0x8, "STATX_UID"),
    (0x10, "STATX_GID"),
    (0x20, "STATX_ATIME"),
    (0x40, "STATX_MTIME"),
    (0x80, "STATX_CTIME"),
    (0x100, "STATX_INO"),
    (0x200, "STATX_SIZE"),
    (0x400, "STATX_BLOCKS"),
    (0x800, "STATX_BTIME"),
    (0x1000, "STATX_MNT_ID"),
    (0x2000, "STATX_DIOALIGN"),
    (0x4000, "STATX_MNT_ID_UNIQUE"),
    (0x8000, "STATX_SUBVOL"),
    (0x10000, "STATX_WRITE_ATOMIC"),
    (0x20000, "STATX_DIO_READ_ALIGN"),
];

/// statx's mask: `STATX_ALL`, `STATX_MODE|STATX_SIZE`.
pub fn statx_mask_str(mask: u64) -> String {
    flags_str(mask & 0xffff_ffff, STATX_MASK, "0", "STATX_???")
}

const STATX_ATTRS: &[Xlat] = &[
    (0x4, "STATX_ATTR_COMPRESSED"),
    (0x10, "STATX_ATTR_IMMUTABLE"),
    (0x20, "STATX_ATTR_APPEND"),
    (0x40, "STATX_ATTR_NODUMP"),
    (0x800, "STATX_ATTR_ENCRYPTED"),
    (0x1000, "STATX_ATTR_AUTOMOUNT"),
    (0x2000, "STATX_ATTR_MOUNT_ROOT"),
    (0x100000, "STATX_ATTR_VERITY"),
    (0x200000, "STATX_ATTR_DAX"),
    (0x400000, "STATX_ATTR_WRITE_ATOMIC"),
];

/// `struct statx` as strace abbreviates it:
/// `{stx_mask=STATX_ALL, stx_attributes=0, stx_mode=S_IFREG|0644, stx_size=3, ...}`.
pub fn statx_str(mem: &dyn ReadMemory, addr: u64) -> String {
    let Some(b) = read_exact(mem, addr, 48) else {
        return super::strings::addr_str(addr);
    };
    let mask = u64::from(u32_at(&b, 0));
    let attrs = u64_at(&b, 8);
    let mut out = format!(
        "{{stx_mask={}, stx_attributes={}",
        statx_mask_str(mask),
        flags_str(attrs, STATX_ATTRS, "0", "STATX_ATTR_???")
    );
    if mask & 0x3 != 0 {
        let mode = u64::from(u16::from_ne_bytes([b[28], b[29]]));
        out.push_str(&format!(", stx_mode={}", symbolic_mode_str(mode)));
    }
    if mask & 0x200 != 0 {
        let size = u64_at(&b, 40);
        out.push_str(&format!(", stx_size={size}"));
    }
    out.push_str(", ...}");
    out
}

const FADVISE: &[Xlat] = &[
    (0, "POSIX_FADV_NORMAL"),
    (1, "POSIX_FADV_RANDOM"),
    (2, "POSIX_FADV_SEQUENTIAL"),
    (3, "POSIX_FADV_WILLNEED"),
    (4, "POSIX_FADV_DONTNEED"),
    (5, "POSIX_FADV_NOREUSE"),
];

/// fadvise64's advice: `POSIX_FADV_SEQUENTIAL`.
pub fn fadvise_str(advice: u64) -> String {
    xlat_str(advice & 0xffff_ffff, FADVISE, "POSIX_FADV_???")
}

const INOTIFY_MASK: &[Xlat] = &[
    (0x1, "IN_ACCESS"),
    (0x2, "IN_MODIFY"),
    (0x4, "IN_ATTRIB"),
    (0x8, "IN_CLOSE_WRITE"),
    (0x10, "IN_CLOSE_NOWRITE"),
    (0x20, "IN_OPEN"),
    (0x40, "IN_MOVED_FROM"),
    (0x80, "IN_MOVED_TO"),
    (0x100, "IN_CREATE"),
    (0x200, "IN_DELETE"),
    (0x400, "IN_DELETE_SELF"),
    (0x800, "IN_MOVE_SELF"),
    (0x2000, "IN_UNMOUNT"),
    (0x4000, "IN_Q_OVERFLOW"),
    (0x8000, "IN_IGNORED"),
    (0x0100_0000, "IN_ONLYDIR"),
    (0x0200_0000, "IN_DONT_FOLLOW"),
    (0x0400_0000, "IN_EXCL_UNLINK"),
    (0x1000_0000, "IN_MASK_CREATE"),
    (0x2000_0000, "IN_MASK_ADD"),
    (0x4000_0000, "IN_ISDIR"),
    (0x8000_0000, "IN_ONESHOT"),
];

/// inotify_add_watch's mask: `IN_MODIFY|IN_CREATE`.
pub fn inotify_mask_str(mask: u64) -> String {
    flags_str(mask & 0xffff_ffff, INOTIFY_MASK, "0", "IN_???")
}

const MFD_FLAGS: &[Xlat] = &[
    (1, "MFD_CLOEXEC"),
    (2, "MFD_ALLOW_SEALING"),
    (4, "MFD_HUGETLB"),
    (8, "MFD_NOEXEC_SEAL"),
    (0x10, "MFD_EXEC"),
];

/// memfd_create's flags: `MFD_CLOEXEC|MFD_ALLOW_SEALING`.
pub fn memfd_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, MFD_FLAGS, "0", "MFD_???")
}

/// A bit set with its strace default comment, for small flag arguments.
fn small_flags(v: u64, table: &[Xlat], unknown: &str) -> String {
    flags_str(v & 0xffff_ffff, table, "0", unknown)
}

/// flock's operation: `LOCK_EX|LOCK_NB`.
pub fn flock_op_str(op: u64) -> String {
    const T: &[Xlat] = &[
        (1, "LOCK_SH"),
        (2, "LOCK_EX"),
        (4, "LOCK_NB"),
        (8, "LOCK_UN"),
        (32, "LOCK_MAND"),
        (64, "LOCK_READ"),
        (128, "LOCK_WRITE"),
    ];
    small_flags(op, T, "LOCK_???")
}

/// preadv2/pwritev2's flags: `RWF_HIPRI`.
pub fn rwf_flags_str(flags: u64) -> String {
    const T: &[Xlat] = &[
        (1, "RWF_HIPRI"),
        (2, "RWF_DSYNC"),
        (4, "RWF_SYNC"),
        (8, "RWF_NOWAIT"),
        (0x10, "RWF_APPEND"),
        (0x20, "RWF_NOAPPEND"),
        (0x40, "RWF_ATOMIC"),
        (0x80, "RWF_DONTCACHE"),
    ];
    small_flags(flags, T, "RWF_???")
}

/// splice/tee/vmsplice flags: `SPLICE_F_NONBLOCK`.
pub fn splice_flags_str(flags: u64) -> String {
    const T: &[Xlat] = &[
        (1, "SPLICE_F_MOVE"),
        (2, "SPLICE_F_NONBLOCK"),
        (4, "SPLICE_F_MORE"),
        (8, "SPLICE_F_GIFT"),
    ];
    small_flags(flags, T, "SPLICE_F_???")
}

/// close_range's flags: `CLOSE_RANGE_CLOEXEC`.
pub fn close_range_flags_str(flags: u64) -> String {
    const T: &[Xlat] = &[(2, "CLOSE_RANGE_UNSHARE"), (4, "CLOSE_RANGE_CLOEXEC")];
    small_flags(flags, T, "CLOSE_RANGE_???")
}

/// umount2's flags: `MNT_DETACH`.
pub fn umount_flags_str(flags: u64) -> String {
    const T: &[Xlat] = &[
        (1, "MNT_FORCE"),
        (2, "MNT_DETACH"),
        (4, "MNT_EXPIRE"),
        (8, "UMOUNT_NOFOLLOW"),
    ];
    small_flags(flags, T, "MNT_???")
}

const XATTR_FLAGS: &[Xlat] = &[(1, "XATTR_CREATE"), (2, "XATTR_REPLACE")];

/// setxattr's flags: `0`, `XATTR_CREATE`.
pub fn xattr_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, XATTR_FLAGS, "0", "XATTR_???")
}

/// A device number: `makedev(0x88, 0x1)`.
pub fn makedev_str(dev: u64) -> String {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    format!("makedev({major:#x}, {minor:#x})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn open_flags() {
        assert_eq!(open_flags_str(0), "O_RDONLY");
        assert_eq!(
            open_flags_str(libc::O_RDONLY as u64 | libc::O_CLOEXEC as u64),
            "O_RDONLY|O_CLOEXEC"
        );
        let f = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
        assert_eq!(open_flags_str(f as u64), "O_WRONLY|O_CREAT|O_TRUNC");
        let f = libc::O_RDWR | libc::O_APPEND | libc::O_NONBLOCK | libc::O_EXCL;
        assert_eq!(
            open_flags_str(f as u64),
            "O_RDWR|O_EXCL|O_APPEND|O_NONBLOCK"
        );
        assert_eq!(open_flags_str(libc::O_SYNC as u64), "O_RDONLY|O_SYNC");
        assert_eq!(open_flags_str(libc::O_DSYNC as u64), "O_RDONLY|O_DSYNC");
        let f = libc::O_RDWR | libc::O_TMPFILE;
        assert_eq!(open_flags_str(f as u64), "O_RDWR|O_TMPFILE");
        let f = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        assert_eq!(open_flags_str(f as u64), "O_RDONLY|O_NOFOLLOW|O_DIRECTORY");
        assert_eq!(open_flags_str(0x8000_0001), "O_WRONLY|0x80000000");
        assert_eq!(open_flags_str(3), "O_ACCMODE");
        assert!(open_needs_mode(libc::O_CREAT as u64));
        assert!(open_needs_mode(libc::O_TMPFILE as u64));
        assert!(!open_needs_mode(libc::O_TRUNC as u64));
    }

    #[test]
    fn descriptor_flags() {
        assert_eq!(fd_flags_str(0, "O_"), "0");
        assert_eq!(fd_flags_str(libc::O_CLOEXEC as u64, "O_"), "O_CLOEXEC");
        let f = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
        assert_eq!(fd_flags_str(f, "O_"), "O_CLOEXEC|O_NONBLOCK");
        assert_eq!(
            fd_flags_str(libc::EPOLL_CLOEXEC as u64, "EPOLL_"),
            "EPOLL_CLOEXEC"
        );
        let f = (libc::EFD_SEMAPHORE | libc::EFD_NONBLOCK) as u64;
        assert_eq!(fd_flags_str(f, "EFD_"), "EFD_SEMAPHORE|EFD_NONBLOCK");
        assert_eq!(fd_flags_str(0x1_0000_0001, "O_"), "0x1");
    }

    #[test]
    fn modes() {
        assert_eq!(mode_str(0o644), "0644");
        assert_eq!(mode_str(0), "000");
        assert_eq!(mode_str(0o4755), "04755");
        assert_eq!(mode_str(7), "007");
        assert_eq!(symbolic_mode_str(0o100644), "S_IFREG|0644");
        assert_eq!(symbolic_mode_str(0o40755), "S_IFDIR|0755");
        assert_eq!(symbolic_mode_str(0o20620), "S_IFCHR|0620");
    }

    #[test]
    fn fds_access_at_whence() {
        assert_eq!(dirfd_str(libc::AT_FDCWD as u64), "AT_FDCWD");
        assert_eq!(dirfd_str(0xffff_ff9c), "AT_FDCWD");
        assert_eq!(dirfd_str(3), "3");
        assert_eq!(access_mode_str(0), "F_OK");
        assert_eq!(access_mode_str(6), "R_OK|W_OK");
        assert_eq!(access_mode_str(0x11), "X_OK|0x10");
        assert_eq!(at_flags_str(0), "0");
        assert_eq!(at_flags_str(0x100), "AT_SYMLINK_NOFOLLOW");
        assert_eq!(at_flags_str(0x1100), "AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH");
        assert_eq!(rename_flags_str(1), "RENAME_NOREPLACE");
        assert_eq!(rename_flags_str(0), "0");
        assert_eq!(whence_str(0), "SEEK_SET");
        assert_eq!(whence_str(2), "SEEK_END");
        assert_eq!(whence_str(7), "0x7 /* SEEK_??? */");
    }

    #[test]
    fn fcntl() {
        assert_eq!(fcntl_cmd_str(3), "F_GETFL");
        assert_eq!(fcntl_cmd_str(1030), "F_DUPFD_CLOEXEC");
        assert_eq!(fcntl_arg_str(3, 0), None);
        assert_eq!(fcntl_arg_str(2, 1).as_deref(), Some("FD_CLOEXEC"));
        assert_eq!(
            fcntl_arg_str(4, 0o4000).as_deref(),
            Some("O_RDONLY|O_NONBLOCK")
        );
        assert_eq!(fcntl_arg_str(1030, 10).as_deref(), Some("10"));
    }

    #[test]
    fn statfs_struct() {
        let mut b = [0u8; 120];
        let words: [(usize, u64); 10] = [
            (0, 0xef53),
            (1, 4096),
            (2, 100),
            (3, 50),
            (4, 40),
            (5, 1000),
            (6, 900),
            (8, 255),
            (9, 4096),
            (10, 0x1020),
        ];
        for (i, v) in words {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        }
        b[56..60].copy_from_slice(&0xe501_6237u32.to_ne_bytes());
        b[60..64].copy_from_slice(&0x3976_3444u32.to_ne_bytes());
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            statfs_str(&mem, 0x1000),
            "{f_type=EXT2_SUPER_MAGIC, f_bsize=4096, f_blocks=100, f_bfree=50, f_bavail=40, f_files=1000, f_ffree=900, f_fsid={val=[0xe5016237, 0x39763444]}, f_namelen=255, f_frsize=4096, f_flags=ST_VALID|ST_RELATIME}"
        );
        assert_eq!(statfs_str(&mem, 0x1008), "0x1008");
    }

    #[test]
    fn statx() {
        assert_eq!(
            statx_flags_str(0x900),
            "AT_STATX_SYNC_AS_STAT|AT_SYMLINK_NOFOLLOW|AT_NO_AUTOMOUNT"
        );
        assert_eq!(statx_flags_str(0x4000), "AT_STATX_DONT_SYNC");
        assert_eq!(statx_mask_str(0xfff), "STATX_ALL");
        assert_eq!(statx_mask_str(0x1fff), "STATX_ALL|STATX_MNT_ID");
        assert_eq!(
            statx_mask_str(0x25e),
            "STATX_MODE|STATX_NLINK|STATX_UID|STATX_GID|STATX_MTIME|STATX_SIZE"
        );
        let mut b = [0u8; 48];
        b[0..4].copy_from_slice(&0x17ffu32.to_ne_bytes());
        b[28..30].copy_from_slice(&0o100755u16.to_ne_bytes());
        b[40..48].copy_from_slice(&3u64.to_ne_bytes());
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            statx_str(&mem, 0x1000),
            "{stx_mask=STATX_BASIC_STATS|STATX_MNT_ID, stx_attributes=0, stx_mode=S_IFREG|0755, stx_size=3, ...}"
        );
        assert_eq!(fadvise_str(2), "POSIX_FADV_SEQUENTIAL");
        assert_eq!(xattr_flags_str(1), "XATTR_CREATE");
        assert_eq!(inotify_mask_str(0x102), "IN_MODIFY|IN_CREATE");
        assert_eq!(memfd_flags_str(3), "MFD_CLOEXEC|MFD_ALLOW_SEALING");
        assert_eq!(flock_op_str(6), "LOCK_EX|LOCK_NB");
        assert_eq!(flock_op_str(8), "LOCK_UN");
        assert_eq!(rwf_flags_str(1), "RWF_HIPRI");
        assert_eq!(splice_flags_str(2), "SPLICE_F_NONBLOCK");
        assert_eq!(close_range_flags_str(4), "CLOSE_RANGE_CLOEXEC");
        assert_eq!(umount_flags_str(2), "MNT_DETACH");
        assert_eq!(umount_flags_str(0x40), "0x40 /* MNT_??? */");
    }

    #[test]
    fn stat_struct() {
        let mut st = [0u8; 144];
        st[24..28].copy_from_slice(&0o100644u32.to_ne_bytes());
        st[48..56].copy_from_slice(&1234i64.to_ne_bytes());
        let mem = Mem::new(0x2000, &st);
        assert_eq!(
            stat_str(&mem, 0x2000),
            "{st_mode=S_IFREG|0644, st_size=1234, ...}"
        );
        st[24..28].copy_from_slice(&0o20620u32.to_ne_bytes());
        st[40..48].copy_from_slice(&libc::makedev(136, 3).to_ne_bytes());
        let mem = Mem::new(0x2000, &st);
        assert_eq!(
            stat_str(&mem, 0x2000),
            "{st_mode=S_IFCHR|0620, st_rdev=makedev(0x88, 0x3), ...}"
        );
        assert_eq!(stat_str(&mem, 0x3000), "0x3000");
        assert_eq!(makedev_str(libc::makedev(8, 1)), "makedev(0x8, 0x1)");
        assert_eq!(
            makedev_str(libc::makedev(259, 65537)),
            "makedev(0x103, 0x10001)"
        );
        assert_eq!(stat_str(&mem, 0), "NULL");
    }
}
