//! poll and epoll arguments: `struct pollfd` arrays, epoll operations and
//! `struct epoll_event`s.

use super::bytes::*;
use super::flags::{Xlat, flags_str, xlat_str};
use super::strings::{MAX_STRLEN, addr_str, read_bytes};
use crate::memory::ReadMemory;

const POLL_EVENTS: &[Xlat] = &[
    (0x1, "POLLIN"),
    (0x2, "POLLPRI"),
    (0x4, "POLLOUT"),
    (0x40, "POLLRDNORM"),
    (0x80, "POLLRDBAND"),
    (0x100, "POLLWRNORM"),
    (0x200, "POLLWRBAND"),
    (0x400, "POLLMSG"),
    (0x8, "POLLERR"),
    (0x10, "POLLHUP"),
    (0x20, "POLLNVAL"),
    (0x1000, "POLLREMOVE"),
    (0x2000, "POLLRDHUP"),
];

/// poll's array of `nfds` pollfds at entry: `[{fd=3, events=POLLIN}]`.
pub fn pollfds_str(mem: &dyn ReadMemory, addr: u64, nfds: u64) -> String {
    if nfds == 0 {
        return "[]".to_string();
    }
    if addr == 0 {
        return "NULL".to_string();
    }
    let mut items = Vec::new();
    for i in 0..nfds {
        if i == MAX_STRLEN as u64 {
            items.push("...".to_string());
            break;
        }
        let Some(b) = read_bytes(mem, addr.wrapping_add(8 * i), 8).filter(|b| b.len() == 8) else {
            if i == 0 {
                return addr_str(addr);
            }
            items.push(format!("... /* {} */", addr_str(addr.wrapping_add(8 * i))));
            break;
        };
        let fd = i32_at(&b, 0);
        let events = u16::from_ne_bytes([b[4], b[5]]);
        items.push(format!(
            "{{fd={fd}, events={}}}",
            flags_str(u64::from(events), POLL_EVENTS, "0", "POLL???")
        ));
    }
    format!("[{}]", items.join(", "))
}

/// The descriptors of an `fd_set` word list, below `nfds`: `[0 3]`.
pub fn fdset_bits_str(words: &[u64], nfds: u64) -> String {
    let fds: Vec<String> = (0..nfds.min(words.len() as u64 * 64))
        .filter(|fd| words[(fd / 64) as usize] & (1 << (fd % 64)) != 0)
        .map(|fd| fd.to_string())
        .collect();
    format!("[{}]", fds.join(" "))
}

/// select's `fd_set` of `nfds` descriptors in tracee memory.
pub fn fdset_str(mem: &dyn ReadMemory, addr: u64, nfds: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let nfds = nfds.min(1024);
    let len = nfds.div_ceil(64) as usize * 8;
    match read_exact(mem, addr, len) {
        Some(b) => {
            let words: Vec<u64> = (0..len / 8).map(|i| u64_at(&b, i * 8)).collect();
            fdset_bits_str(&words, nfds)
        }
        None => addr_str(addr),
    }
}

/// pselect6's sixth argument: `{sigmask=[USR1], sigsetsize=8}`.
pub fn pselect6_sigmask_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    match read_exact(mem, addr, 16) {
        Some(b) => {
            let (set, size) = (u64_at(&b, 0), u64_at(&b, 8));
            format!(
                "{{sigmask={}, sigsetsize={size}}}",
                super::signal::sigset_str(mem, set, size)
            )
        }
        None => addr_str(addr),
    }
}

const EPOLL_OPS: &[Xlat] = &[
    (1, "EPOLL_CTL_ADD"),
    (2, "EPOLL_CTL_DEL"),
    (3, "EPOLL_CTL_MOD"),
];

/// epoll_ctl's operation: `EPOLL_CTL_ADD`.
pub fn epoll_op_str(op: u64) -> String {
    xlat_str(op & 0xffff_ffff, EPOLL_OPS, "EPOLL_CTL_???")
}

const EPOLL_EVENTS: &[Xlat] = &[
    (0x1, "EPOLLIN"),
    (0x2, "EPOLLPRI"),
    (0x4, "EPOLLOUT"),
    (0x8, "EPOLLERR"),
    (0x10, "EPOLLHUP"),
    (0x20, "EPOLLNVAL"),
    (0x40, "EPOLLRDNORM"),
    (0x80, "EPOLLRDBAND"),
    (0x100, "EPOLLWRNORM"),
    (0x200, "EPOLLWRBAND"),
    (0x400, "EPOLLMSG"),
    (0x2000, "EPOLLRDHUP"),
    (1 << 28, "EPOLLEXCLUSIVE"),
    (1 << 29, "EPOLLWAKEUP"),
    (1 << 30, "EPOLLONESHOT"),
    (1 << 31, "EPOLLET"),
];

/// One packed `struct epoll_event` (12 bytes on x86_64).
fn epoll_event_at(mem: &dyn ReadMemory, addr: u64) -> Option<String> {
    let b = read_exact(mem, addr, 12)?;
    let events = u32_at(&b, 0);
    let data = u64_at(&b, 4);
    Some(format!(
        "{{events={}, data={{u32={}, u64={data}}}}}",
        flags_str(u64::from(events), EPOLL_EVENTS, "0", "EPOLL???"),
        data as u32
    ))
}

/// epoll_ctl's event: `{events=EPOLLIN|EPOLLET, data={u32=7, u64=7}}`.
pub fn epoll_event_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    epoll_event_at(mem, addr).unwrap_or_else(|| addr_str(addr))
}

/// epoll_wait's `count` returned events: `[{events=EPOLLIN, data=...}]`.
pub fn epoll_events_str(mem: &dyn ReadMemory, addr: u64, count: u64) -> String {
    let mut items = Vec::new();
    for i in 0..count {
        if i == MAX_STRLEN as u64 {
            items.push("...".to_string());
            break;
        }
        match epoll_event_at(mem, addr.wrapping_add(12 * i)) {
            Some(e) => items.push(e),
            None if i == 0 => return addr_str(addr),
            None => break,
        }
    }
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn pollfds() {
        let mut b = Vec::new();
        b.extend_from_slice(&3i32.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&4i32.to_ne_bytes());
        b.extend_from_slice(&0xcu16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            pollfds_str(&mem, 0x1000, 2),
            "[{fd=3, events=POLLIN}, {fd=4, events=POLLOUT|POLLERR}]"
        );
        assert_eq!(pollfds_str(&mem, 0x1000, 0), "[]");
        assert_eq!(pollfds_str(&mem, 0x5000, 1), "0x5000");
    }

    #[test]
    fn fd_sets() {
        let mem = Mem::new(0x1000, &((1u64 << 3) | 1 | (1 << 40)).to_ne_bytes());
        assert_eq!(fdset_str(&mem, 0x1000, 5), "[0 3]");
        assert_eq!(fdset_str(&mem, 0x1000, 64), "[0 3 40]");
        assert_eq!(fdset_str(&mem, 0, 5), "NULL");
        assert_eq!(fdset_str(&mem, 0x1000, 0), "[]");
        assert_eq!(fdset_str(&mem, 0x1000, 100), "0x1000");
        assert_eq!(fdset_bits_str(&[0b101, 1], 66), "[0 2 64]");
        assert_eq!(fdset_bits_str(&[0b101, 1], 2), "[0]");
        let mut b = 0x2000u64.to_ne_bytes().to_vec();
        b.extend_from_slice(&8u64.to_ne_bytes());
        let mut m = vec![0u8; 0x1010];
        m[..16].copy_from_slice(&b);
        m[0x1000..0x1008].copy_from_slice(&(1u64 << 9).to_ne_bytes());
        let mem = Mem::new(0x1000, &m);
        assert_eq!(
            pselect6_sigmask_str(&mem, 0x1000),
            "{sigmask=[USR1], sigsetsize=8}"
        );
    }

    #[test]
    fn epoll() {
        assert_eq!(epoll_op_str(1), "EPOLL_CTL_ADD");
        assert_eq!(epoll_op_str(9), "0x9 /* EPOLL_CTL_??? */");
        let mut b = (0x8000_0001u32).to_ne_bytes().to_vec();
        b.extend_from_slice(&7u64.to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&(1u64 << 32 | 5).to_ne_bytes());
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            epoll_event_str(&mem, 0x1000),
            "{events=EPOLLIN|EPOLLET, data={u32=7, u64=7}}"
        );
        assert_eq!(epoll_event_str(&mem, 0), "NULL");
        assert_eq!(
            epoll_events_str(&mem, 0x1000, 2),
            "[{events=EPOLLIN|EPOLLET, data={u32=7, u64=7}}, {events=EPOLLIN, data={u32=5, u64=4294967301}}]"
        );
        assert_eq!(epoll_events_str(&mem, 0x1000, 0), "[]");
    }
}
