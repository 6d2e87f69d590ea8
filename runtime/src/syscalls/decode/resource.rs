//! Arguments about the process's resources and system: rlimits, uname,
//! directory entries, arch_prctl, getrandom, CPU affinity masks.

use super::bytes::*;
use super::flags::{Xlat, flags_str, xlat_str};
use super::strings::{MAX_STRLEN, addr_str, quote, read_bytes};
use crate::memory::ReadMemory;

const RLIMITS: &[Xlat] = &[
    (0, "RLIMIT_CPU"),
    (1, "RLIMIT_FSIZE"),
    (2, "RLIMIT_DATA"),
    (3, "RLIMIT_STACK"),
    (4, "RLIMIT_CORE"),
    (5, "RLIMIT_RSS"),
    (6, "RLIMIT_NPROC"),
    (7, "RLIMIT_NOFILE"),
    (8, "RLIMIT_MEMLOCK"),
    (9, "RLIMIT_AS"),
    (10, "RLIMIT_LOCKS"),
    (11, "RLIMIT_SIGPENDING"),
    (12, "RLIMIT_MSGQUEUE"),
    (13, "RLIMIT_NICE"),
    (14, "RLIMIT_RTPRIO"),
    (15, "RLIMIT_RTTIME"),
];

/// A resource of getrlimit/setrlimit/prlimit64: `RLIMIT_NOFILE`.
pub fn rlimit_resource_str(resource: u64) -> String {
    xlat_str(resource & 0xffff_ffff, RLIMITS, "RLIMIT_???")
}

/// One limit as strace shows it: `RLIM64_INFINITY`, `8192*1024`, `20000`.
fn rlim_value_str(v: u64) -> String {
    match v {
        u64::MAX => "RLIM64_INFINITY".to_string(),
        v if v > 1024 && v % 1024 == 0 => format!("{}*1024", v / 1024),
        v => v.to_string(),
    }
}

/// `{rlim_cur=8192*1024, rlim_max=RLIM64_INFINITY}`.
pub fn rlimit_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_exact(mem, addr, 16) {
        Some(b) => {
            let cur = u64_at(&b, 0);
            let max = u64_at(&b, 8);
            format!(
                "{{rlim_cur={}, rlim_max={}}}",
                rlim_value_str(cur),
                rlim_value_str(max)
            )
        }
        None => addr_str(addr),
    }
}

/// `struct utsname` as strace abbreviates it: `{sysname="Linux", nodename="vm", ...}`.
pub fn utsname_str(mem: &dyn ReadMemory, addr: u64) -> String {
    const FIELD: usize = 65;
    match read_bytes(mem, addr, 2 * FIELD).filter(|b| b.len() == 2 * FIELD) {
        Some(b) => {
            let field = |i: usize| {
                let f = &b[i * FIELD..(i + 1) * FIELD];
                quote(&f[..f.iter().position(|&c| c == 0).unwrap_or(FIELD)])
            };
            format!("{{sysname={}, nodename={}, ...}}", field(0), field(1))
        }
        None => addr_str(addr),
    }
}

/// getdents64's buffer after the call: `0x... /* 4 entries */`.
pub fn dirents_str(mem: &dyn ReadMemory, addr: u64, len: u64) -> String {
    let Some(b) = read_bytes(mem, addr, len.min(1 << 20) as usize) else {
        return addr_str(addr);
    };
    let mut count = 0;
    let mut off = 0usize;
    while off + 19 <= b.len() {
        let reclen = usize::from(u16::from_ne_bytes([b[off + 16], b[off + 17]]));
        if reclen == 0 {
            break;
        }
        count += 1;
        off += reclen;
    }
    let s = if count == 1 { "entry" } else { "entries" };
    format!("{} /* {count} {s} */", addr_str(addr))
}

const ARCH_PRCTL: &[Xlat] = &[
    (0x1001, "ARCH_SET_GS"),
    (0x1002, "ARCH_SET_FS"),
    (0x1003, "ARCH_GET_FS"),
    (0x1004, "ARCH_GET_GS"),
    (0x1011, "ARCH_GET_CPUID"),
    (0x1012, "ARCH_SET_CPUID"),
    (0x1021, "ARCH_GET_XCOMP_SUPP"),
    (0x1022, "ARCH_GET_XCOMP_PERM"),
    (0x1023, "ARCH_REQ_XCOMP_PERM"),
];

/// arch_prctl's code: `ARCH_SET_FS`.
pub fn arch_prctl_code_str(code: u64) -> String {
    xlat_str(code & 0xffff_ffff, ARCH_PRCTL, "ARCH_???")
}

/// Whether arch_prctl's code writes through its address (the GET codes).
pub fn arch_prctl_is_get(code: u64) -> bool {
    matches!(code & 0xffff_ffff, 0x1003 | 0x1004)
}

/// `[0x7ffff7dd2740]`: a word written by the kernel.
pub fn out_word_str(mem: &dyn ReadMemory, addr: u64) -> String {
    match read_exact(mem, addr, 8) {
        Some(b) => format!("[{:#x}]", u64_at(&b, 0)),
        None => addr_str(addr),
    }
}

/// `[3]`: an int in tracee memory (socket option values and lengths).
pub fn int_ref_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_exact(mem, addr, 4) {
        Some(b) => format!("[{}]", i32_at(&b, 0)),
        None => addr_str(addr),
    }
}

/// An array of `count` uids/gids: `[0, 4, 27]`.
pub fn id_list_str(mem: &dyn ReadMemory, addr: u64, count: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let shown = count.min(MAX_STRLEN as u64) as usize;
    match read_bytes(mem, addr, shown * 4).filter(|b| b.len() == shown * 4) {
        Some(b) => {
            let mut ids: Vec<String> = b.chunks(4).map(|c| u32_at(c, 0).to_string()).collect();
            if count > shown as u64 {
                ids.push("...".to_string());
            }
            format!("[{}]", ids.join(", "))
        }
        None => addr_str(addr),
    }
}

/// getrandom's data: every byte in hex, as strace forces for it.
pub fn hex_buffer_str(mem: &dyn ReadMemory, addr: u64, len: u64) -> String {
    let shown = len.min(MAX_STRLEN as u64) as usize;
    match read_bytes(mem, addr, shown).filter(|b| b.len() == shown) {
        Some(b) => {
            let body: String = b.iter().map(|c| format!("\\x{c:02x}")).collect();
            let more = if len > MAX_STRLEN as u64 { "..." } else { "" };
            format!("\"{body}\"{more}")
        }
        None => addr_str(addr),
    }
}

const GRND: &[Xlat] = &[
    (1, "GRND_NONBLOCK"),
    (2, "GRND_RANDOM"),
    (4, "GRND_INSECURE"),
];

/// getrandom's flags.
pub fn getrandom_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, GRND, "0", "GRND_???")
}

/// A CPU set of `len` bytes: `[0 1]`.
pub fn cpuset_str(mem: &dyn ReadMemory, addr: u64, len: u64) -> String {
    match read_bytes(mem, addr, len.min(1024) as usize) {
        Some(b) => {
            let cpus: Vec<String> = (0..b.len() * 8)
                .filter(|i| b[i / 8] & (1 << (i % 8)) != 0)
                .map(|i| i.to_string())
                .collect();
            format!("[{}]", cpus.join(" "))
        }
        None => addr_str(addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn rlimits() {
        assert_eq!(rlimit_resource_str(3), "RLIMIT_STACK");
        let mut b = (8192u64 * 1024).to_ne_bytes().to_vec();
        b.extend_from_slice(&u64::MAX.to_ne_bytes());
        b.extend_from_slice(&20000u64.to_ne_bytes());
        b.extend_from_slice(&0u64.to_ne_bytes());
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            rlimit_str(&mem, 0x1000),
            "{rlim_cur=8192*1024, rlim_max=RLIM64_INFINITY}"
        );
        assert_eq!(rlimit_str(&mem, 0x1010), "{rlim_cur=20000, rlim_max=0}");
        assert_eq!(rlimit_str(&mem, 0), "NULL");
        assert_eq!(rlim_value_str(1024), "1024");
        assert_eq!(rlim_value_str(2048), "2*1024");
    }

    #[test]
    fn uname_and_dirents() {
        let mut b = vec![0u8; 65 * 6];
        b[..5].copy_from_slice(b"Linux");
        b[65..67].copy_from_slice(b"vm");
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            utsname_str(&mem, 0x1000),
            "{sysname=\"Linux\", nodename=\"vm\", ...}"
        );
        let mut d = vec![0u8; 48];
        d[16..18].copy_from_slice(&24u16.to_ne_bytes());
        d[24 + 16..24 + 18].copy_from_slice(&24u16.to_ne_bytes());
        let mem = Mem::new(0x2000, &d);
        assert_eq!(dirents_str(&mem, 0x2000, 48), "0x2000 /* 2 entries */");
        assert_eq!(dirents_str(&mem, 0x2000, 24), "0x2000 /* 1 entry */");
        assert_eq!(dirents_str(&mem, 0x2000, 0), "0x2000 /* 0 entries */");
    }

    #[test]
    fn id_lists() {
        let mut b = Vec::new();
        for id in [0u32, 4, 27] {
            b.extend_from_slice(&id.to_ne_bytes());
        }
        let mem = Mem::new(0x1000, &b);
        assert_eq!(id_list_str(&mem, 0x1000, 3), "[0, 4, 27]");
        assert_eq!(id_list_str(&mem, 0x1000, 0), "[]");
        assert_eq!(id_list_str(&mem, 0, 3), "NULL");
        assert_eq!(id_list_str(&mem, 0x1000, 4), "0x1000");
    }

    #[test]
    fn small_outputs() {
        let mut b = 0x7fff_f7dd_2740u64.to_ne_bytes().to_vec();
        b.extend_from_slice(&[0x7c, 0x35, 3, 0]);
        let mem = Mem::new(0x1000, &b);
        assert_eq!(arch_prctl_code_str(0x1002), "ARCH_SET_FS");
        assert!(arch_prctl_is_get(0x1003));
        assert_eq!(out_word_str(&mem, 0x1000), "[0x7ffff7dd2740]");
        assert_eq!(int_ref_str(&mem, 0x1008), "[210300]");
        assert_eq!(hex_buffer_str(&mem, 0x1008, 2), "\"\\x7c\\x35\"");
        assert_eq!(getrandom_flags_str(1), "GRND_NONBLOCK");
        assert_eq!(cpuset_str(&mem, 0x100a, 1), "[0 1]");
    }
}
