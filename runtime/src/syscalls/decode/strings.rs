//! Strings and buffers from tracee memory, quoted as strace quotes them:
//! C escapes (`\n \t \r \v \f \" \\`), other unprintable bytes in octal
//! (three digits when an octal digit follows, else as few as needed), and
//! `...` after the closing quote when the text was cut.

use super::bytes::*;
use crate::memory::ReadMemory;

/// strace's default `-s 32`: at most this many bytes of a string or buffer.
pub const MAX_STRLEN: usize = 32;
/// strace reads paths up to PATH_MAX bytes including the NUL.
pub const PATH_MAX: usize = 4096;

/// How an address is shown when its memory cannot be read or is not shown.
pub fn addr_str(addr: u64) -> String {
    if addr == 0 {
        "NULL".to_string()
    } else {
        format!("{addr:#x}")
    }
}

/// Quotes `bytes` with strace's escapes, inside double quotes.
pub fn quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x0b => out.push_str("\\v"),
            0x20..=0x7e => out.push(c as char),
            _ => {
                let next_is_octal = matches!(bytes.get(i + 1), Some(b'0'..=b'7'));
                if next_is_octal {
                    out.push_str(&format!("\\{c:03o}"));
                } else {
                    out.push_str(&format!("\\{c:o}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// Reads up to `max` bytes at `addr`, stopping at the first NUL. Returns the
/// bytes before the NUL and whether a NUL was found, or None when not even
/// the first byte is readable.
pub fn read_cstring(mem: &dyn ReadMemory, addr: u64, max: usize) -> Option<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    while out.len() < max {
        let want = (max - out.len()).min(chunk.len());
        let cur = addr.wrapping_add(out.len() as u64);
        let got = match mem.read(cur, &mut chunk[..want]) {
            Ok(0) | Err(_) if out.is_empty() => return None,
            Ok(0) | Err(_) => return Some((out, false)),
            Ok(n) => n,
        };
        if let Some(nul) = chunk[..got].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..nul]);
            return Some((out, true));
        }
        out.extend_from_slice(&chunk[..got]);
        if got < want {
            // The range ran into an unmapped page: what we have is all.
            return Some((out, false));
        }
    }
    Some((out, false))
}

/// Reads exactly `len` bytes at `addr` (fewer if the memory ends), or None
/// when nothing is readable.
pub fn read_bytes(mem: &dyn ReadMemory, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match mem.read(addr.wrapping_add(done as u64), &mut buf[done..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    if done == 0 && len > 0 {
        return None;
    }
    buf.truncate(done);
    Some(buf)
}

/// A file name argument: the whole NUL-terminated string (strace does not
/// cut paths at `-s`), `NULL` for 0, the address when unreadable.
pub fn path_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_cstring(mem, addr, PATH_MAX) {
        Some((bytes, true)) => quote(&bytes),
        Some((bytes, false)) => {
            let cut = &bytes[..bytes.len().min(PATH_MAX - 1)];
            format!("{}...", quote(cut))
        }
        None => addr_str(addr),
    }
}

/// A NUL-terminated string argument cut at `MAX_STRLEN` bytes.
pub fn cstring_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_cstring(mem, addr, MAX_STRLEN) {
        Some((bytes, true)) => quote(&bytes),
        Some((bytes, false)) => format!("{}...", quote(&bytes)),
        None => addr_str(addr),
    }
}

/// A buffer of `len` bytes (the data of read/write): the first
/// `MAX_STRLEN` bytes quoted, `...` when there were more.
pub fn buffer_str(mem: &dyn ReadMemory, addr: u64, len: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let shown = len.min(MAX_STRLEN as u64) as usize;
    match read_bytes(mem, addr, shown) {
        Some(bytes) if bytes.len() == shown => {
            let more = if len > MAX_STRLEN as u64 { "..." } else { "" };
            format!("{}{more}", quote(&bytes))
        }
        _ => addr_str(addr),
    }
}

/// An array of `count` iovecs as strace shows it:
/// `[{iov_base="abc", iov_len=3}, ...]`. With `data_size` (readv's return
/// value) the buffers show only the bytes the kernel filled.
pub fn iovec_str(mem: &dyn ReadMemory, addr: u64, count: u64, data_size: Option<u64>) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let mut remaining = data_size;
    let mut items = Vec::new();
    for i in 0..count {
        if i == MAX_STRLEN as u64 {
            items.push("...".to_string());
            break;
        }
        let Some(raw) = read_bytes(mem, addr.wrapping_add(16 * i), 16).filter(|b| b.len() == 16)
        else {
            if i == 0 {
                return addr_str(addr);
            }
            items.push(format!("... /* {} */", addr_str(addr.wrapping_add(16 * i))));
            break;
        };
        let base = u64_at(&raw, 0);
        let len = u64_at(&raw, 8);
        let shown = match remaining.as_mut() {
            Some(rem) => {
                let n = len.min(*rem);
                *rem -= n;
                n
            }
            None => len,
        };
        items.push(format!(
            "{{iov_base={}, iov_len={len}}}",
            buffer_str(mem, base, shown)
        ));
    }
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn quoting_escapes() {
        assert_eq!(quote(b"hello\n"), r#""hello\n""#);
        assert_eq!(quote(b"a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote(b"\t\r\x0b\x0c"), r#""\t\r\v\f""#);
        assert_eq!(quote(b"\x00x"), r#""\0x""#);
        assert_eq!(quote(b"\x001"), r#""\0001""#);
        assert_eq!(quote(b"\x1b[0m"), r#""\33[0m""#);
        assert_eq!(quote(b"\xff\xfe"), r#""\377\376""#);
        assert_eq!(quote(b"\x7f8"), r#""\1778""#);
        assert_eq!(quote(b"\x019"), r#""\19""#);
    }

    #[test]
    fn paths_and_strings() {
        let mem = Mem::new(
            0x1000,
            b"/etc/passwd\0abcdefghijklmnopqrstuvwxyz0123456789\0",
        );
        assert_eq!(path_str(&mem, 0x1000), r#""/etc/passwd""#);
        assert_eq!(path_str(&mem, 0), "NULL");
        assert_eq!(path_str(&mem, 0x9000), "0x9000");
        assert_eq!(
            cstring_str(&mem, 0x100c),
            r#""abcdefghijklmnopqrstuvwxyz012345"..."#
        );
        assert_eq!(cstring_str(&mem, 0x1005), r#""passwd""#);
        // A string running into the end of readable memory is cut.
        let mem = Mem::new(0x1000, b"abc");
        assert_eq!(path_str(&mem, 0x1000), r#""abc"..."#);
    }

    #[test]
    fn iovecs() {
        // Two iovecs at 0x1000 pointing at "abc" (0x1020) and "defg" (0x1023).
        let mut b = Vec::new();
        for (base, len) in [(0x1020u64, 3u64), (0x1023, 4)] {
            b.extend_from_slice(&base.to_ne_bytes());
            b.extend_from_slice(&len.to_ne_bytes());
        }
        b.extend_from_slice(b"abcdefg");
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            iovec_str(&mem, 0x1000, 2, None),
            r#"[{iov_base="abc", iov_len=3}, {iov_base="defg", iov_len=4}]"#
        );
        assert_eq!(
            iovec_str(&mem, 0x1000, 2, Some(5)),
            r#"[{iov_base="abc", iov_len=3}, {iov_base="de", iov_len=4}]"#
        );
        assert_eq!(
            iovec_str(&mem, 0x1000, 2, Some(0)),
            r#"[{iov_base="", iov_len=3}, {iov_base="", iov_len=4}]"#
        );
        assert_eq!(iovec_str(&mem, 0x1000, 0, None), "[]");
        assert_eq!(iovec_str(&mem, 0, 2, None), "NULL");
        assert_eq!(iovec_str(&mem, 0x8000, 2, None), "0x8000");
    }

    #[test]
    fn raw_reads() {
        let mem = Mem::new(0x1000, b"abc\0def");
        assert_eq!(
            read_cstring(&mem, 0x1000, 100),
            Some((b"abc".to_vec(), true))
        );
        assert_eq!(read_cstring(&mem, 0x1000, 2), Some((b"ab".to_vec(), false)));
        assert_eq!(
            read_cstring(&mem, 0x1004, 100),
            Some((b"def".to_vec(), false))
        );
        assert_eq!(read_cstring(&mem, 0x2000, 100), None);
        assert_eq!(read_bytes(&mem, 0x1005, 10), Some(b"ef".to_vec()));
        assert_eq!(read_bytes(&mem, 0x2000, 1), None);
        assert_eq!(read_bytes(&mem, 0x2000, 0), Some(Vec::new()));
        assert_eq!(addr_str(0), "NULL");
        assert_eq!(addr_str(0x7fff_0000), "0x7fff0000");
    }

    #[test]
    fn buffers() {
        let mem = Mem::new(0x1000, &[b'x'; 100]);
        assert_eq!(buffer_str(&mem, 0x1000, 3), r#""xxx""#);
        assert_eq!(buffer_str(&mem, 0x1000, 0), r#""""#);
        let xs = "x".repeat(32);
        assert_eq!(buffer_str(&mem, 0x1000, 32), format!("\"{xs}\""));
        assert_eq!(buffer_str(&mem, 0x1000, 33), format!("\"{xs}\"..."));
        assert_eq!(buffer_str(&mem, 0x1000, 1 << 40), format!("\"{xs}\"..."));
        assert_eq!(buffer_str(&mem, 0x5000, 3), "0x5000");
        assert_eq!(buffer_str(&mem, 0, 3), "NULL");
        let mem = Mem::new(0x1000, b"a\0b\n");
        assert_eq!(buffer_str(&mem, 0x1000, 4), r#""a\0b\n""#);
    }
}
