//! Errno names as SystemTap's `errno_str` spells them.
//!
//! SystemTap's table (tapset/errno.stp) holds the kernel's user-visible
//! errno values 1..=131. Two spellings differ from strace: 35 is
//! "EDEADLOCK" (SystemTap's table lists EDEADLOCK after EDEADLK and the later
//! entry wins) and 95 is "EOPNOTSUPP". Values outside the table (0, 132+,
//! the kernel-internal ERESTARTSYS family) have no name: `errno_str` then
//! returns "" as SystemTap does.

/// Names indexed by errno value.
static NAMES: [Option<&str>; 132] = [
    None,                    // 0
    Some("EPERM"),           // 1
    Some("ENOENT"),          // 2
    Some("ESRCH"),           // 3
    Some("EINTR"),           // 4
    Some("EIO"),             // 5
    Some("ENXIO"),           // 6
    Some("E2BIG"),           // 7
    Some("ENOEXEC"),         // 8
    Some("EBADF"),           // 9
    Some("ECHILD"),          // 10
    Some("EAGAIN"),          // 11
    Some("ENOMEM"),          // 12
    Some("EACCES"),          // 13
    Some("EFAULT"),          // 14
    Some("ENOTBLK"),         // 15
    Some("EBUSY"),           // 16
    Some("EEXIST"),          // 17
    Some("EXDEV"),           // 18
    Some("ENODEV"),          // 19
    Some("ENOTDIR"),         // 20
    Some("EISDIR"),          // 21
    Some("EINVAL"),          // 22
    Some("ENFILE"),          // 23
    Some("EMFILE"),          // 24
    Some("ENOTTY"),          // 25
    Some("ETXTBSY"),         // 26
    Some("EFBIG"),           // 27
    Some("ENOSPC"),          // 28
    Some("ESPIPE"),          // 29
    Some("EROFS"),           // 30
    Some("EMLINK"),          // 31
    Some("EPIPE"),           // 32
    Some("EDOM"),            // 33
    Some("ERANGE"),          // 34
    Some("EDEADLOCK"),       // 35
    Some("ENAMETOOLONG"),    // 36
    Some("ENOLCK"),          // 37
    Some("ENOSYS"),          // 38
    Some("ENOTEMPTY"),       // 39
    Some("ELOOP"),           // 40
    None,                    // 41
    Some("ENOMSG"),          // 42
    Some("EIDRM"),           // 43
    Some("ECHRNG"),          // 44
    Some("EL2NSYNC"),        // 45
    Some("EL3HLT"),          // 46
    Some("EL3RST"),          // 47
    Some("ELNRNG"),          // 48
    Some("EUNATCH"),         // 49
    Some("ENOCSI"),          // 50
    Some("EL2HLT"),          // 51
    Some("EBADE"),           // 52
    Some("EBADR"),           // 53
    Some("EXFULL"),          // 54
    Some("ENOANO"),          // 55
    Some("EBADRQC"),         // 56
    Some("EBADSLT"),         // 57
    None,                    // 58
    Some("EBFONT"),          // 59
    Some("ENOSTR"),          // 60
    Some("ENODATA"),         // 61
    Some("ETIME"),           // 62
    Some("ENOSR"),           // 63
    Some("ENONET"),          // 64
    Some("ENOPKG"),          // 65
    Some("EREMOTE"),         // 66
    Some("ENOLINK"),         // 67
    Some("EADV"),            // 68
    Some("ESRMNT"),          // 69
    Some("ECOMM"),           // 70
    Some("EPROTO"),          // 71
    Some("EMULTIHOP"),       // 72
    Some("EDOTDOT"),         // 73
    Some("EBADMSG"),         // 74
    Some("EOVERFLOW"),       // 75
    Some("ENOTUNIQ"),        // 76
    Some("EBADFD"),          // 77
    Some("EREMCHG"),         // 78
    Some("ELIBACC"),         // 79
    Some("ELIBBAD"),         // 80
    Some("ELIBSCN"),         // 81
    Some("ELIBMAX"),         // 82
    Some("ELIBEXEC"),        // 83
    Some("EILSEQ"),          // 84
    Some("ERESTART"),        // 85
    Some("ESTRPIPE"),        // 86
    Some("EUSERS"),          // 87
    Some("ENOTSOCK"),        // 88
    Some("EDESTADDRREQ"),    // 89
    Some("EMSGSIZE"),        // 90
    Some("EPROTOTYPE"),      // 91
    Some("ENOPROTOOPT"),     // 92
    Some("EPROTONOSUPPORT"), // 93
    Some("ESOCKTNOSUPPORT"), // 94
    Some("EOPNOTSUPP"),      // 95
    Some("EPFNOSUPPORT"),    // 96
    Some("EAFNOSUPPORT"),    // 97
    Some("EADDRINUSE"),      // 98
    Some("EADDRNOTAVAIL"),   // 99
    Some("ENETDOWN"),        // 100
    Some("ENETUNREACH"),     // 101
    Some("ENETRESET"),       // 102
    Some("ECONNABORTED"),    // 103
    Some("ECONNRESET"),      // 104
    Some("ENOBUFS"),         // 105
    Some("EISCONN"),         // 106
    Some("ENOTCONN"),        // 107
    Some("ESHUTDOWN"),       // 108
    Some("ETOOMANYREFS"),    // 109
    Some("ETIMEDOUT"),       // 110
    Some("ECONNREFUSED"),    // 111
    Some("EHOSTDOWN"),       // 112
    Some("EHOSTUNREACH"),    // 113
    Some("EALREADY"),        // 114
    Some("EINPROGRESS"),     // 115
    Some("ESTALE"),          // 116
    Some("EUCLEAN"),         // 117
    Some("ENOTNAM"),         // 118
    Some("ENAVAIL"),         // 119
    Some("EISNAM"),          // 120
    Some("EREMOTEIO"),       // 121
    Some("EDQUOT"),          // 122
    Some("ENOMEDIUM"),       // 123
    Some("EMEDIUMTYPE"),     // 124
    Some("ECANCELED"),       // 125
    Some("ENOKEY"),          // 126
    Some("EKEYEXPIRED"),     // 127
    Some("EKEYREVOKED"),     // 128
    Some("EKEYREJECTED"),    // 129
    Some("EOWNERDEAD"),      // 130
    Some("ENOTRECOVERABLE"), // 131
];

/// The symbolic name of errno `err` (either sign: -2 and 2 are both
/// "ENOENT"), or None when SystemTap's table has no name for it.
pub fn errno_name(err: i64) -> Option<&'static str> {
    let e = usize::try_from(err.unsigned_abs()).ok()?;
    NAMES.get(e).copied().flatten()
}

/// Every errno with a name, positive (`builtins::lookup_table`).
pub fn named() -> impl Iterator<Item = (i64, &'static str)> {
    NAMES
        .iter()
        .enumerate()
        .filter_map(|(e, n)| n.map(|n| (e as i64, n)))
}

/// SystemTap's `errno_str(err)`: the symbolic name, or "" when unknown.
pub fn errno_str(err: i64) -> &'static str {
    errno_name(err).unwrap_or("")
}

/// SystemTap's `errno_p(err)`: whether `err` (either sign) has a name.
pub fn errno_p(err: i64) -> bool {
    errno_name(err).is_some()
}

/// The positive errno value called `name`; accepts the aliases strace
/// prints (EDEADLK, ENOTSUP, EWOULDBLOCK) too.
pub fn errno_number(name: &str) -> Option<i64> {
    match name {
        "EDEADLK" => return Some(35),
        "ENOTSUP" => return Some(95),
        "EWOULDBLOCK" => return Some(11),
        _ => {}
    }
    NAMES
        .iter()
        .position(|n| *n == Some(name))
        .map(|i| i as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_common_errors() {
        assert_eq!(errno_str(2), "ENOENT");
        assert_eq!(errno_str(-2), "ENOENT");
        assert_eq!(errno_str(-13), "EACCES");
        assert_eq!(errno_str(9), "EBADF");
        assert_eq!(errno_str(28), "ENOSPC");
        assert_eq!(errno_str(-110), "ETIMEDOUT");
        assert_eq!(errno_str(131), "ENOTRECOVERABLE");
    }

    #[test]
    fn systemtap_spellings() {
        assert_eq!(errno_str(35), "EDEADLOCK");
        assert_eq!(errno_str(95), "EOPNOTSUPP");
        assert_eq!(errno_number("EDEADLK"), Some(35));
        assert_eq!(errno_number("ENOENT"), Some(2));
        assert_eq!(errno_number("EBOGUS"), None);
    }

    #[test]
    fn unknown_values_have_no_name() {
        assert_eq!(errno_str(0), "");
        assert_eq!(errno_str(41), "");
        assert_eq!(errno_str(58), "");
        assert_eq!(errno_str(132), "");
        assert_eq!(errno_str(-512), "");
        assert_eq!(errno_str(i64::MIN), "");
        assert!(!errno_p(3333));
        assert!(errno_p(-1));
    }

    #[test]
    fn every_name_matches_libc() {
        // Our table against the host's C library messages: a name exists
        // exactly where strerror knows the value.
        for e in 1..=131 {
            let known = !matches!(e, 41 | 58);
            assert_eq!(errno_p(e), known, "errno {e}");
        }
        assert_eq!(errno_number("EAGAIN"), Some(libc::EAGAIN as i64));
        assert_eq!(
            errno_number("ECONNREFUSED"),
            Some(libc::ECONNREFUSED as i64)
        );
    }
}
