//! Signal-family arguments: signal numbers, signal sets, `struct sigaction`,
//! sigprocmask's how.

use super::bytes::*;
use super::flags::{Xlat, as_int, flags_str, xlat_str};
use super::strings::{addr_str, read_bytes};
use crate::memory::ReadMemory;
use crate::syscalls::signals::strace_signame;

/// A signal argument: `SIGUSR1`, `0`, `SIGRT_3`.
pub fn signal_arg_str(sig: u64) -> String {
    strace_signame(i64::from(as_int(sig)))
}

/// The name strace gives a member of a signal set: "INT", "RTMIN", "RT_3".
fn set_member_name(sig: u32) -> String {
    let name = strace_signame(i64::from(sig));
    name.strip_prefix("SIG")
        .map_or(name.clone(), str::to_string)
}

/// A 64-signal mask as strace shows it: `[]`, `[INT TERM]`, `~[KILL STOP]`
/// (inverted when two thirds or more of the bits are set).
pub fn sigmask_str(mask: u64) -> String {
    let (mask, prefix) = if mask.count_ones() >= 64 * 2 / 3 {
        (!mask, "~")
    } else {
        (mask, "")
    };
    let names: Vec<String> = (0..64)
        .filter(|bit| mask & (1u64 << bit) != 0)
        .map(|bit| set_member_name(bit + 1))
        .collect();
    format!("{prefix}[{}]", names.join(" "))
}

/// A signal set in tracee memory (`sigsetsize` bytes, at most 8 read).
pub fn sigset_str(mem: &dyn ReadMemory, addr: u64, size: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let len = size.min(8) as usize;
    match read_bytes(mem, addr, len) {
        Some(b) if b.len() == len && len > 0 => {
            let mut word = [0u8; 8];
            word[..len].copy_from_slice(&b);
            sigmask_str(u64::from_ne_bytes(word))
        }
        _ => addr_str(addr),
    }
}

const SA_FLAGS: &[Xlat] = &[
    (0x0400_0000, "SA_RESTORER"),
    (0x0800_0000, "SA_ONSTACK"),
    (0x1000_0000, "SA_RESTART"),
    (0x2000_0000, "SA_INTERRUPT"),
    (0x4000_0000, "SA_NODEFER"),
    (0x8000_0000, "SA_RESETHAND"),
    (0x4, "SA_SIGINFO"),
    (0x1, "SA_NOCLDSTOP"),
    (0x2, "SA_NOCLDWAIT"),
];
const SA_RESTORER: u64 = 0x0400_0000;

fn handler_str(handler: u64) -> String {
    match handler {
        0 => "SIG_DFL".to_string(),
        1 => "SIG_IGN".to_string(),
        u64::MAX => "SIG_ERR".to_string(),
        h => format!("{h:#x}"),
    }
}

/// The kernel's `struct sigaction` (x86_64: handler, flags, restorer, mask).
pub fn sigaction_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let Some(b) = read_exact(mem, addr, 32) else {
        return addr_str(addr);
    };
    let word = |i: usize| u64_at(&b, i * 8);
    let (handler, flags, restorer, mask) = (word(0), word(1), word(2), word(3));
    let mut out = format!(
        "{{sa_handler={}, sa_mask={}, sa_flags={}",
        handler_str(handler),
        sigmask_str(mask),
        flags_str(flags, SA_FLAGS, "0", "SA_???")
    );
    if flags & SA_RESTORER != 0 {
        out.push_str(&format!(", sa_restorer={}", addr_str(restorer)));
    }
    out.push('}');
    out
}

const SS_FLAGS: &[Xlat] = &[
    (1, "SS_ONSTACK"),
    (2, "SS_DISABLE"),
    (1 << 31, "SS_AUTODISARM"),
];

/// sigaltstack's `stack_t`: `{ss_sp=0x..., ss_flags=0, ss_size=8192}`.
pub fn stack_t_str(mem: &dyn ReadMemory, addr: u64) -> String {
    if addr == 0 {
        return "NULL".to_string();
    }
    let Some(b) = read_exact(mem, addr, 24) else {
        return addr_str(addr);
    };
    let sp = u64_at(&b, 0);
    let flags = u64::from(u32_at(&b, 8));
    let size = u64_at(&b, 16);
    format!(
        "{{ss_sp={}, ss_flags={}, ss_size={size}}}",
        addr_str(sp),
        flags_str(flags, SS_FLAGS, "0", "SS_???")
    )
}

const HOW: &[Xlat] = &[(0, "SIG_BLOCK"), (1, "SIG_UNBLOCK"), (2, "SIG_SETMASK")];

/// rt_sigprocmask's how.
pub fn sigprocmask_how_str(how: u64) -> String {
    xlat_str(how & 0xffff_ffff, HOW, "SIG_???")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    #[test]
    fn signals_and_masks() {
        assert_eq!(signal_arg_str(10), "SIGUSR1");
        assert_eq!(signal_arg_str(0), "0");
        assert_eq!(sigmask_str(0), "[]");
        assert_eq!(sigmask_str((1 << 1) | (1 << 14)), "[INT TERM]");
        assert_eq!(sigmask_str(1 << 31), "[RTMIN]");
        assert_eq!(sigmask_str(1 << 33), "[RT_2]");
        assert_eq!(sigmask_str(!((1 << 8) | (1 << 18))), "~[KILL STOP]");
        assert_eq!(sigmask_str(u64::MAX), "~[]");
    }

    #[test]
    fn sigaction_struct() {
        let mut b = Vec::new();
        for w in [
            0x401136u64,
            0x0400_0000 | 0x1000_0000,
            0x7f00_0000_1000,
            1 << 12,
        ] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            sigaction_str(&mem, 0x1000),
            "{sa_handler=0x401136, sa_mask=[PIPE], sa_flags=SA_RESTORER|SA_RESTART, sa_restorer=0x7f0000001000}"
        );
        let mut b = vec![0u8; 32];
        b[0] = 1;
        let mem = Mem::new(0x1000, &b);
        assert_eq!(
            sigaction_str(&mem, 0x1000),
            "{sa_handler=SIG_IGN, sa_mask=[], sa_flags=0}"
        );
        assert_eq!(sigaction_str(&mem, 0), "NULL");
        assert_eq!(sigaction_str(&mem, 0x5000), "0x5000");
        assert_eq!(sigset_str(&mem, 0x1000, 8), "[HUP]");
        assert_eq!(sigprocmask_how_str(0), "SIG_BLOCK");
        let mut st = 0x5000u64.to_ne_bytes().to_vec();
        st.extend_from_slice(&2u64.to_ne_bytes());
        st.extend_from_slice(&8192u64.to_ne_bytes());
        let mem = Mem::new(0x1000, &st);
        assert_eq!(
            stack_t_str(&mem, 0x1000),
            "{ss_sp=0x5000, ss_flags=SS_DISABLE, ss_size=8192}"
        );
        assert_eq!(stack_t_str(&mem, 0), "NULL");
    }
}
