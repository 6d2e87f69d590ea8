//! Network-family arguments: address families, socket types, protocols,
//! `struct sockaddr`, message flags, shutdown's how.

use super::bytes::*;
use super::flags::{Xlat, as_int, flags_str, xlat_str};
use super::strings::{addr_str, quote, read_bytes};
use crate::memory::ReadMemory;

const FAMILIES: &[Xlat] = &[
    (0, "AF_UNSPEC"),
    (1, "AF_UNIX"),
    (2, "AF_INET"),
    (10, "AF_INET6"),
    (16, "AF_NETLINK"),
    (17, "AF_PACKET"),
    (38, "AF_ALG"),
    (40, "AF_VSOCK"),
];

/// A socket domain / address family: `AF_INET`, `0x3039 /* AF_??? */`.
pub fn family_str(family: u64) -> String {
    xlat_str(family & 0xffff_ffff, FAMILIES, "AF_???")
}

const SOCK_TYPES: &[Xlat] = &[
    (1, "SOCK_STREAM"),
    (2, "SOCK_DGRAM"),
    (3, "SOCK_RAW"),
    (4, "SOCK_RDM"),
    (5, "SOCK_SEQPACKET"),
    (6, "SOCK_DCCP"),
    (10, "SOCK_PACKET"),
];
const SOCK_FLAGS: &[Xlat] = &[(0o2000000, "SOCK_CLOEXEC"), (0o4000, "SOCK_NONBLOCK")];

/// accept4's flags: `SOCK_CLOEXEC|SOCK_NONBLOCK`, `0`.
pub fn sock_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, SOCK_FLAGS, "0", "SOCK_???")
}

/// A socket type with its flags: `SOCK_STREAM|SOCK_CLOEXEC`.
pub fn socktype_str(ty: u64) -> String {
    let ty = ty & 0xffff_ffff;
    let base = xlat_str(ty & 0xf, SOCK_TYPES, "SOCK_???");
    let rest = ty & !0xf;
    if rest == 0 {
        base
    } else {
        format!("{base}|{}", flags_str(rest, SOCK_FLAGS, "0", "SOCK_???"))
    }
}

const IP_PROTOCOLS: &[Xlat] = &[
    (0, "IPPROTO_IP"),
    (1, "IPPROTO_ICMP"),
    (6, "IPPROTO_TCP"),
    (17, "IPPROTO_UDP"),
    (58, "IPPROTO_ICMPV6"),
    (132, "IPPROTO_SCTP"),
    (255, "IPPROTO_RAW"),
];

/// socket's protocol, named for the internet families as strace does.
pub fn protocol_str(family: u64, protocol: u64) -> String {
    let p = protocol & 0xffff_ffff;
    match family & 0xffff_ffff {
        2 | 10 => xlat_str(p, IP_PROTOCOLS, "IPPROTO_???"),
        _ => as_int(p).to_string(),
    }
}

/// A socket address of `len` bytes, decoded for AF_UNIX/AF_INET/AF_INET6.
pub fn sockaddr_str(mem: &dyn ReadMemory, addr: u64, len: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let len = len.min(128) as usize;
    let Some(b) = read_bytes(mem, addr, len).filter(|b| b.len() == len && len >= 2) else {
        return addr_str(addr);
    };
    let family = u16::from_ne_bytes([b[0], b[1]]);
    let fam = family_str(u64::from(family));
    let body = &b[2..];
    match family {
        1 if body.is_empty() => format!("{{sa_family={fam}}}"),
        1 => {
            let path = if body.first() == Some(&0) && body.len() > 1 {
                format!("@{}", quote(trim_nul(&body[1..])))
            } else {
                quote(trim_nul(body))
            };
            format!("{{sa_family={fam}, sun_path={path}}}")
        }
        2 if body.len() >= 6 => {
            let port = u16::from_be_bytes([body[0], body[1]]);
            let ip = std::net::Ipv4Addr::new(body[2], body[3], body[4], body[5]);
            format!("{{sa_family={fam}, sin_port=htons({port}), sin_addr=inet_addr(\"{ip}\")}}")
        }
        10 if body.len() >= 26 => {
            let port = u16::from_be_bytes([body[0], body[1]]);
            let flow = u32::from_be_bytes(body[2..6].try_into().unwrap());
            let ip: [u8; 16] = body[6..22].try_into().unwrap();
            let ip = std::net::Ipv6Addr::from(ip);
            let scope = u32_at(body, 22);
            format!(
                "{{sa_family={fam}, sin6_port=htons({port}), sin6_flowinfo=htonl({flow}), inet_pton({fam}, \"{ip}\", &sin6_addr), sin6_scope_id={scope}}}"
            )
        }
        _ => format!("{{sa_family={fam}, sa_data={}}}", quote(body)),
    }
}

fn trim_nul(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

const MSG_FLAGS: &[Xlat] = &[
    (0x1, "MSG_OOB"),
    (0x2, "MSG_PEEK"),
    (0x4, "MSG_DONTROUTE"),
    (0x8, "MSG_CTRUNC"),
    (0x10, "MSG_PROBE"),
    (0x20, "MSG_TRUNC"),
    (0x40, "MSG_DONTWAIT"),
    (0x80, "MSG_EOR"),
    (0x100, "MSG_WAITALL"),
    (0x200, "MSG_FIN"),
    (0x400, "MSG_SYN"),
    (0x800, "MSG_CONFIRM"),
    (0x1000, "MSG_RST"),
    (0x2000, "MSG_ERRQUEUE"),
    (0x4000, "MSG_NOSIGNAL"),
    (0x8000, "MSG_MORE"),
    (0x10000, "MSG_WAITFORONE"),
    (0x40000, "MSG_BATCH"),
    (0x4000000, "MSG_ZEROCOPY"),
    (0x20000000, "MSG_FASTOPEN"),
    (0x40000000, "MSG_CMSG_CLOEXEC"),
];

/// send/recv flags: `0`, `MSG_DONTWAIT|MSG_NOSIGNAL`.
pub fn msg_flags_str(flags: u64) -> String {
    flags_str(flags & 0xffff_ffff, MSG_FLAGS, "0", "MSG_???")
}

/// `struct msghdr`: `{msg_name=NULL, msg_namelen=0, msg_iov=[...],
/// msg_iovlen=1, msg_controllen=0, msg_flags=0}`. With `data_size`
/// (recvmsg's return value) the iovecs show only the received bytes.
pub fn msghdr_str(mem: &dyn ReadMemory, addr: u64, data_size: Option<u64>) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let Some(b) = read_exact(mem, addr, 56) else {
        return addr_str(addr);
    };
    let word = |i: usize| u64_at(&b, i);
    let (name, namelen) = (word(0), u64::from(u32_at(&b, 8)));
    let (iov, iovlen) = (word(16), word(24));
    let (control, controllen) = (word(32), word(40));
    let flags = u64::from(u32_at(&b, 48));
    let name_str = if name == 0 || namelen == 0 {
        addr_str(name)
    } else {
        sockaddr_str(mem, name, namelen)
    };
    let control_str = if controllen == 0 {
        String::new()
    } else {
        format!("msg_control={}, ", addr_str(control))
    };
    format!(
        "{{msg_name={name_str}, msg_namelen={namelen}, msg_iov={}, msg_iovlen={iovlen}, {control_str}msg_controllen={controllen}, msg_flags={}}}",
        super::strings::iovec_str(mem, iov, iovlen, data_size),
        msg_flags_str(flags)
    )
}

const SOCKOPT_LEVELS: &[Xlat] = &[
    (0, "SOL_IP"),
    (1, "SOL_SOCKET"),
    (6, "SOL_TCP"),
    (17, "SOL_UDP"),
    (41, "SOL_IPV6"),
];

/// A socket option level: `SOL_SOCKET`, `SOL_TCP`.
pub fn sockopt_level_str(level: u64) -> String {
    xlat_str(level & 0xffff_ffff, SOCKOPT_LEVELS, "SOL_???")
}

const SOL_SOCKET_OPTS: &[Xlat] = &[
    (1, "SO_DEBUG"),
    (2, "SO_REUSEADDR"),
    (3, "SO_TYPE"),
    (4, "SO_ERROR"),
    (5, "SO_DONTROUTE"),
    (6, "SO_BROADCAST"),
    (7, "SO_SNDBUF"),
    (8, "SO_RCVBUF"),
    (9, "SO_KEEPALIVE"),
    (10, "SO_OOBINLINE"),
    (11, "SO_NO_CHECK"),
    (12, "SO_PRIORITY"),
    (13, "SO_LINGER"),
    (14, "SO_BSDCOMPAT"),
    (15, "SO_REUSEPORT"),
    (16, "SO_PASSCRED"),
    (17, "SO_PEERCRED"),
    (18, "SO_RCVLOWAT"),
    (19, "SO_SNDLOWAT"),
    (20, "SO_RCVTIMEO_OLD"),
    (21, "SO_SNDTIMEO_OLD"),
    (32, "SO_SNDBUFFORCE"),
    (33, "SO_RCVBUFFORCE"),
    (38, "SO_PROTOCOL"),
    (39, "SO_DOMAIN"),
];

const SOL_TCP_OPTS: &[Xlat] = &[
    (1, "TCP_NODELAY"),
    (2, "TCP_MAXSEG"),
    (3, "TCP_CORK"),
    (4, "TCP_KEEPIDLE"),
    (5, "TCP_KEEPINTVL"),
    (6, "TCP_KEEPCNT"),
    (7, "TCP_SYNCNT"),
    (8, "TCP_LINGER2"),
    (9, "TCP_DEFER_ACCEPT"),
    (10, "TCP_WINDOW_CLAMP"),
    (11, "TCP_INFO"),
    (12, "TCP_QUICKACK"),
    (13, "TCP_CONGESTION"),
];

const SOL_IP_OPTS: &[Xlat] = &[
    (1, "IP_TOS"),
    (2, "IP_TTL"),
    (3, "IP_HDRINCL"),
    (4, "IP_OPTIONS"),
    (8, "IP_PKTINFO"),
    (10, "IP_MTU_DISCOVER"),
    (11, "IP_RECVERR"),
    (12, "IP_RECVTTL"),
    (13, "IP_RECVTOS"),
    (14, "IP_MTU"),
    (15, "IP_FREEBIND"),
    (19, "IP_TRANSPARENT"),
    (24, "IP_BIND_ADDRESS_NO_PORT"),
    (32, "IP_MULTICAST_IF"),
    (33, "IP_MULTICAST_TTL"),
    (34, "IP_MULTICAST_LOOP"),
    (35, "IP_ADD_MEMBERSHIP"),
    (36, "IP_DROP_MEMBERSHIP"),
];

const SOL_IPV6_OPTS: &[Xlat] = &[
    (16, "IPV6_UNICAST_HOPS"),
    (17, "IPV6_MULTICAST_IF"),
    (18, "IPV6_MULTICAST_HOPS"),
    (19, "IPV6_MULTICAST_LOOP"),
    (23, "IPV6_MTU_DISCOVER"),
    (24, "IPV6_MTU"),
    (25, "IPV6_RECVERR"),
    (26, "IPV6_V6ONLY"),
    (49, "IPV6_RECVPKTINFO"),
    (67, "IPV6_TCLASS"),
];

/// A socket option name at `level`: `SO_REUSEADDR`, `TCP_NODELAY`, else decimal.
pub fn sockopt_name_str(level: u64, name: u64) -> String {
    let name = name & 0xffff_ffff;
    let (table, dflt) = match level & 0xffff_ffff {
        0 => (SOL_IP_OPTS, "IP_???"),
        1 => (SOL_SOCKET_OPTS, "SO_???"),
        6 => (SOL_TCP_OPTS, "TCP_???"),
        41 => (SOL_IPV6_OPTS, "IPV6_???"),
        _ => return name.to_string(),
    };
    xlat_str(name, table, dflt)
}

const SHUT: &[Xlat] = &[(0, "SHUT_RD"), (1, "SHUT_WR"), (2, "SHUT_RDWR")];

/// shutdown's how.
pub fn shutdown_how_str(how: u64) -> String {
    xlat_str(how & 0xffff_ffff, SHUT, "SHUT_???")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn socket_arguments() {
        assert_eq!(family_str(2), "AF_INET");
        assert_eq!(family_str(1), "AF_UNIX");
        assert_eq!(family_str(99), "0x63 /* AF_??? */");
        assert_eq!(sock_flags_str(0o2004000), "SOCK_CLOEXEC|SOCK_NONBLOCK");
        assert_eq!(sock_flags_str(0), "0");
        assert_eq!(socktype_str(1), "SOCK_STREAM");
        assert_eq!(
            socktype_str(2 | 0o2000000 | 0o4000),
            "SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK"
        );
        assert_eq!(protocol_str(2, 0), "IPPROTO_IP");
        assert_eq!(protocol_str(10, 6), "IPPROTO_TCP");
        assert_eq!(protocol_str(1, 0), "0");
        assert_eq!(msg_flags_str(0), "0");
        assert_eq!(msg_flags_str(0x4040), "MSG_DONTWAIT|MSG_NOSIGNAL");
        assert_eq!(shutdown_how_str(1), "SHUT_WR");
        assert_eq!(sockopt_level_str(1), "SOL_SOCKET");
        assert_eq!(sockopt_level_str(6), "SOL_TCP");
        assert_eq!(sockopt_name_str(1, 2), "SO_REUSEADDR");
        assert_eq!(sockopt_name_str(6, 1), "TCP_NODELAY");
        assert_eq!(sockopt_name_str(0, 11), "IP_RECVERR");
        assert_eq!(sockopt_name_str(41, 26), "IPV6_V6ONLY");
        assert_eq!(sockopt_name_str(17, 1), "1");
    }

    #[test]
    fn message_headers() {
        // msghdr at 0x1000, one iovec at 0x1040 -> "hello" at 0x1050.
        let mut b = vec![0u8; 0x60];
        b[16..24].copy_from_slice(&0x1040u64.to_ne_bytes());
        b[24..32].copy_from_slice(&1u64.to_ne_bytes());
        b[0x40..0x48].copy_from_slice(&0x1050u64.to_ne_bytes());
        b[0x48..0x50].copy_from_slice(&5u64.to_ne_bytes());
        b[0x50..0x55].copy_from_slice(b"hello");
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            msghdr_str(&mem, 0x1000, None),
            "{msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=\"hello\", iov_len=5}], msg_iovlen=1, msg_controllen=0, msg_flags=0}"
        );
        assert_eq!(
            msghdr_str(&mem, 0x1000, Some(2)),
            "{msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=\"he\", iov_len=5}], msg_iovlen=1, msg_controllen=0, msg_flags=0}"
        );
        assert_eq!(msghdr_str(&mem, 0x9000, None), "0x9000");
    }

    #[test]
    fn socket_addresses() {
        let mut b = vec![2u8, 0, 0x1f, 0x90, 127, 0, 0, 1];
        b.extend_from_slice(&[0; 8]);
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            sockaddr_str(&mem, 0x1000, 16),
            "{sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr(\"127.0.0.1\")}"
        );
        let mut b = vec![1u8, 0];
        b.extend_from_slice(b"/tmp/sock\0");
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            sockaddr_str(&mem, 0x1000, b.len() as u64),
            "{sa_family=AF_UNIX, sun_path=\"/tmp/sock\"}"
        );
        let mut b = vec![1u8, 0, 0];
        b.extend_from_slice(b"abstract");
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            sockaddr_str(&mem, 0x1000, b.len() as u64),
            "{sa_family=AF_UNIX, sun_path=@\"abstract\"}"
        );
        assert_eq!(sockaddr_str(&mem, 0x1000, 2), "{sa_family=AF_UNIX}");
        assert_eq!(sockaddr_str(&mem, 0, 16), "NULL");
        assert_eq!(sockaddr_str(&mem, 0x9000, 16), "0x9000");
    }
}
