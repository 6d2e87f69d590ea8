//! Memory-family arguments: mmap/mprotect protections, mmap flags,
//! madvise advice, mremap flags.

use super::flags::{Xlat, flags_str, xlat_str};

const PROT: &[Xlat] = &[
    (0x1, "PROT_READ"),
    (0x2, "PROT_WRITE"),
    (0x4, "PROT_EXEC"),
    (0x8, "PROT_SEM"),
    (0x0100_0000, "PROT_GROWSDOWN"),
    (0x0200_0000, "PROT_GROWSUP"),
];

/// mmap/mprotect protection: `PROT_NONE`, `PROT_READ|PROT_WRITE`.
pub fn prot_str(prot: u64) -> String {
    flags_str(prot & 0xffff_ffff, PROT, "PROT_NONE", "PROT_???")
}

const MAP_TYPES: &[Xlat] = &[
    (0x1, "MAP_SHARED"),
    (0x2, "MAP_PRIVATE"),
    (0x3, "MAP_SHARED_VALIDATE"),
    (0x8, "MAP_DROPPABLE"),
];

const MAP_FLAGS: &[Xlat] = &[
    (0x10, "MAP_FIXED"),
    (0x20, "MAP_ANONYMOUS"),
    (0x40, "MAP_32BIT"),
    (0x80, "MAP_ABOVE4G"),
    (0x4000, "MAP_NORESERVE"),
    (0x8000, "MAP_POPULATE"),
    (0x10000, "MAP_NONBLOCK"),
    (0x100, "MAP_GROWSDOWN"),
    (0x800, "MAP_DENYWRITE"),
    (0x1000, "MAP_EXECUTABLE"),
    (0x2000, "MAP_LOCKED"),
    (0x20000, "MAP_STACK"),
    (0x40000, "MAP_HUGETLB"),
    (0x80000, "MAP_SYNC"),
    (0x4000000, "MAP_UNINITIALIZED"),
    (0x100000, "MAP_FIXED_NOREPLACE"),
];

/// mmap flags: the mapping type, then the flags: `MAP_PRIVATE|MAP_ANONYMOUS`.
pub fn map_flags_str(flags: u64) -> String {
    let flags = flags & 0xffff_ffff;
    let kind = flags & 0xf;
    let rest = flags & !0xf;
    let kind_str = if kind == 0 {
        "0".to_string()
    } else {
        xlat_str(kind, MAP_TYPES, "MAP_???")
    };
    if rest == 0 {
        kind_str
    } else {
        format!("{kind_str}|{}", flags_str(rest, MAP_FLAGS, "0", ""))
    }
}

const MADVISE: &[Xlat] = &[
    (0, "MADV_NORMAL"),
    (1, "MADV_RANDOM"),
    (2, "MADV_SEQUENTIAL"),
    (3, "MADV_WILLNEED"),
    (4, "MADV_DONTNEED"),
    (8, "MADV_FREE"),
    (9, "MADV_REMOVE"),
    (10, "MADV_DONTFORK"),
    (11, "MADV_DOFORK"),
    (12, "MADV_MERGEABLE"),
    (13, "MADV_UNMERGEABLE"),
    (14, "MADV_HUGEPAGE"),
    (15, "MADV_NOHUGEPAGE"),
    (16, "MADV_DONTDUMP"),
    (17, "MADV_DODUMP"),
    (18, "MADV_WIPEONFORK"),
    (19, "MADV_KEEPONFORK"),
    (20, "MADV_COLD"),
    (21, "MADV_PAGEOUT"),
    (22, "MADV_POPULATE_READ"),
    (23, "MADV_POPULATE_WRITE"),
    (100, "MADV_HWPOISON"),
];

/// madvise's advice: `MADV_DONTNEED` ...
pub fn madvise_str(advice: u64) -> String {
    xlat_str(advice & 0xffff_ffff, MADVISE, "MADV_???")
}

/// mlockall's flags: `MCL_CURRENT|MCL_FUTURE`.
pub fn mlockall_flags_str(flags: u64) -> String {
    const T: &[Xlat] = &[(1, "MCL_CURRENT"), (2, "MCL_FUTURE"), (4, "MCL_ONFAULT")];
    flags_str(flags & 0xffff_ffff, T, "0", "MCL_???")
}

const MREMAP: &[Xlat] = &[
    (1, "MREMAP_MAYMOVE"),
    (2, "MREMAP_FIXED"),
    (4, "MREMAP_DONTUNMAP"),
];

/// mremap flags.
pub fn mremap_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, MREMAP, "0", "MREMAP_???")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protections() {
        assert_eq!(prot_str(0), "PROT_NONE");
        assert_eq!(prot_str(3), "PROT_READ|PROT_WRITE");
        assert_eq!(prot_str(5), "PROT_READ|PROT_EXEC");
        assert_eq!(prot_str(0x11), "PROT_READ|0x10");
    }

    #[test]
    fn map_flags() {
        let f = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        assert_eq!(map_flags_str(f as u64), "MAP_PRIVATE|MAP_ANONYMOUS");
        let f = libc::MAP_PRIVATE | libc::MAP_FIXED | libc::MAP_DENYWRITE;
        assert_eq!(
            map_flags_str(f as u64),
            "MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE"
        );
        assert_eq!(map_flags_str(libc::MAP_SHARED as u64), "MAP_SHARED");
        let f = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK;
        assert_eq!(
            map_flags_str(f as u64),
            "MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK"
        );
        assert_eq!(map_flags_str(0), "0");
    }

    #[test]
    fn advice_and_mremap() {
        assert_eq!(madvise_str(4), "MADV_DONTNEED");
        assert_eq!(madvise_str(99), "0x63 /* MADV_??? */");
        assert_eq!(mremap_flags_str(1), "MREMAP_MAYMOVE");
        assert_eq!(mlockall_flags_str(3), "MCL_CURRENT|MCL_FUTURE");
    }
}
