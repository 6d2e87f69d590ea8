//! `/proc/PID/maps`: which file is mapped where. Modules are matched by
//! device and inode, never by path (paths lie across mount namespaces and
//! after renames).

use std::io;

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// `r`, `w`, `x` bits as in the file (`p`/`s` dropped).
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// File offset of `start`.
    pub offset: u64,
    /// `st_dev` of the file in the kernel's encoding (major << 8 | minor
    /// for small numbers; compare with [`dev_of`]).
    pub dev: (u32, u32),
    pub inode: u64,
    /// The path, or `[heap]`, `[vdso]`...; empty for anonymous memory.
    pub path: String,
}

impl Mapping {
    /// Parses one maps line; `None` for a malformed one.
    pub fn parse(line: &str) -> Option<Mapping> {
        let mut it = line.splitn(6, ' ');
        let range = it.next()?;
        let perms = it.next()?.as_bytes();
        let offset = u64::from_str_radix(it.next()?, 16).ok()?;
        let dev = it.next()?;
        let inode = it.next()?.parse().ok()?;
        let path = it.next().unwrap_or("").trim_start().to_string();
        let (s, e) = range.split_once('-')?;
        let (maj, min) = dev.split_once(':')?;
        if perms.len() < 3 {
            return None;
        }
        Some(Mapping {
            start: u64::from_str_radix(s, 16).ok()?,
            end: u64::from_str_radix(e, 16).ok()?,
            read: perms[0] == b'r',
            write: perms[1] == b'w',
            exec: perms[2] == b'x',
            offset,
            dev: (
                u32::from_str_radix(maj, 16).ok()?,
                u32::from_str_radix(min, 16).ok()?,
            ),
            inode,
            path,
        })
    }

    /// Whether this mapping is of the file with this device and inode.
    pub fn is_file(&self, dev: (u32, u32), inode: u64) -> bool {
        self.inode == inode && self.inode != 0 && self.dev == dev
    }
}

/// Every mapping of process `pid`, in address order.
pub fn read_maps(pid: i32) -> io::Result<Vec<Mapping>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(text.lines().filter_map(Mapping::parse).collect())
}

/// The (major, minor) of a file's `st_dev`, as `/proc/PID/maps` prints it.
pub fn dev_of(st_dev: u64) -> (u32, u32) {
    (libc::major(st_dev), libc::minor(st_dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_and_anonymous_lines() {
        let m = Mapping::parse(
            "7f1c2a400000-7f1c2a428000 r-xp 00028000 fe:01 1835053                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(
            (m.start, m.end, m.offset),
            (0x7f1c2a400000, 0x7f1c2a428000, 0x28000)
        );
        assert!(m.read && !m.write && m.exec);
        assert_eq!(m.dev, (0xfe, 1));
        assert_eq!(m.inode, 1835053);
        assert_eq!(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let anon = Mapping::parse("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(anon.path, "");
        assert!(!anon.is_file((0, 0), 0));
    }

    #[test]
    fn own_maps_contain_own_executable() {
        let maps = read_maps(std::process::id() as i32).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let md = std::fs::metadata(&exe).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert!(
            maps.iter()
                .any(|m| m.is_file(dev_of(md.dev()), md.ino()) && m.exec)
        );
    }
}
