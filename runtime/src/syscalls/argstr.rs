//! The text of a system call's arguments (`argstr`) and of its return value
//! (`retstr`).
//!
//! `argstr` follows strace's default output (`-s 32`, no `-y`/`-v`): what
//! is between the parentheses of `openat(AT_FDCWD, "/etc/passwd",
//! O_RDONLY|O_CLOEXEC)`. Given the return value it also decodes what the
//! kernel wrote (read's data, fstat's struct, wait4's status ...), as strace
//! prints at exit; without it those show as addresses.
//!
//! `retstr` follows SystemTap's `return_str`, not strace: a failure is
//! `-2 (ENOENT)` where strace prints `-1 ENOENT (No such file or
//! directory)`; mmap/mremap return hex (`0x7f...`), umask octal, everything
//! else decimal — also brk, which strace shows in hex.
//!
//! Where SystemTap's tapsets write an argument differently from strace,
//! argstr follows SystemTap: a plain pointer argument (brk's address,
//! mmap's hint, execve's argv...) is written as SystemTap's `%p` writes it,
//! `brk(0x0)` where strace writes `brk(NULL)`.
//!
//! Known differences from strace's argument text, all from decoding at one
//! moment instead of at both entry and exit:
//! - arguments the kernel reads and then updates show the value current
//!   when the text is made, unless an [`EntrySnapshot`] taken at entry is
//!   given to [`argstr_exit`]: then socket address lengths and file offsets
//!   read `[110 => 2]` / `[2] => [5]` as in strace (select's fd sets and
//!   timeouts are not decoded);
//! - after a successful execve the old memory is gone: make its text at
//!   entry;
//! - strace's decorations of return values (`= 1 ([{fd=3,
//!   revents=POLLIN}])`, `= 0x1 (flags FD_CLOEXEC)`) are not part of
//!   argstr, and retstr is SystemTap's bare number.

use super::decode::bytes::*;
use super::decode::strings::{addr_str, buffer_str, cstring_str, iovec_str, path_str, read_bytes};
use super::decode::{
    file, flags::as_int, memory, misc, network, poll, process, resource, signal, time,
};
use super::errno;
use super::spec::{Arg, Kind, RetFormat, Signature, signature};
use super::table::syscall_nargs;
use crate::memory::ReadMemory;

/// The calls whose arguments have a decoder of their own (`render`'s
/// special cases) rather than one text per argument kind: their plain
/// pointers may follow other rules (futex's timeout is `NULL`, as
/// SystemTap's `_struct_timespec_u` writes it).
pub const OWN_DECODERS: &[&str] = &[
    "open",
    "openat",
    "fcntl",
    "clone",
    "clone3",
    "execve",
    "ioctl",
    "futex",
    "mremap",
    "arch_prctl",
    "setsockopt",
    "getsockopt",
    "prctl",
];

/// Whether a raw return value is a failure (-4095..=-1).
pub fn is_error(ret: i64) -> bool {
    (-4095..=-1).contains(&ret)
}

/// The arguments of system call `nr` as strace shows them. `ret` is the
/// return value when the call has completed (then output arguments are
/// decoded), None at entry.
pub fn argstr(nr: i64, args: &[u64; 6], ret: Option<i64>, mem: &dyn ReadMemory) -> String {
    render(nr, args, ret, mem, None)
}

/// What a call's in/out arguments (socket address lengths, file offsets)
/// held at entry. Taken at the entry stop with [`entry_snapshot`] and
/// given to [`argstr_exit`], it lets the exit text show strace's
/// `[110 => 2]` / `[2] => [5]` for values the kernel changed. Small and
/// `Copy`, so a tracer can keep one per thread between entry and exit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntrySnapshot {
    values: [Option<i64>; 6],
}

/// Reads, at syscall entry, the in/out values [`argstr_exit`] compares.
pub fn entry_snapshot(nr: i64, args: &[u64; 6], mem: &dyn ReadMemory) -> EntrySnapshot {
    let mut snap = EntrySnapshot::default();
    if let Some(sig) = signature(nr) {
        for (i, arg) in sig.args.iter().enumerate() {
            snap.values[i] = match arg.kind {
                Kind::IntRef => read_exact(mem, args[i], 4).map(|b| i64::from(i32_at(&b, 0))),
                Kind::OffPtr => read_exact(mem, args[i], 8).map(|b| i64_at(&b, 0)),
                // An fd set fits one slot up to 64 descriptors.
                Kind::FdSet(n) if args[usize::from(n) - 1] <= 64 => {
                    read_exact(mem, args[i], 8).map(|b| i64_at(&b, 0))
                }
                Kind::InOutTimeval => read_exact(mem, args[i], 16)
                    .and_then(|b| pack_time(i64_at(&b, 0), i64_at(&b, 8), 1_000_000)),
                Kind::InOutTimespec => read_exact(mem, args[i], 16)
                    .and_then(|b| pack_time(i64_at(&b, 0), i64_at(&b, 8), 1_000_000_000)),
                _ => None,
            };
        }
    }
    snap
}

/// A time as one number of sub-second units, when it fits.
fn pack_time(sec: i64, sub: i64, per_sec: i64) -> Option<i64> {
    if !(0..per_sec).contains(&sub) {
        return None;
    }
    sec.checked_mul(per_sec)?.checked_add(sub)
}

/// The completed call's arguments like `argstr(nr, args, Some(ret), mem)`,
/// with in/out values compared against their entry values.
pub fn argstr_exit(
    nr: i64,
    args: &[u64; 6],
    ret: i64,
    mem: &dyn ReadMemory,
    entry: &EntrySnapshot,
) -> String {
    render(nr, args, Some(ret), mem, Some(entry))
}

fn render(
    nr: i64,
    args: &[u64; 6],
    ret: Option<i64>,
    mem: &dyn ReadMemory,
    entry: Option<&EntrySnapshot>,
) -> String {
    match signature(nr) {
        Some(sig) => Decoder {
            sig,
            args,
            ret,
            mem,
            entry,
        }
        .render(),
        None => generic_argstr(args, syscall_nargs(nr)),
    }
}

/// strace's fallback for calls it does not decode: every argument in hex.
pub fn generic_argstr(args: &[u64; 6], nargs: usize) -> String {
    args[..nargs.min(6)]
        .iter()
        .map(|&v| hex(v))
        .collect::<Vec<_>>()
        .join(", ")
}

/// SystemTap's `return_str` for system call `nr`.
pub fn retstr(nr: i64, ret: i64) -> String {
    let format = signature(nr).map_or(RetFormat::Dec, |s| s.ret);
    return_str(format, ret)
}

/// SystemTap's `return_str(format, ret)`: named errno failures as
/// `-2 (ENOENT)`, else decimal, `0x` hex or `0` octal.
pub fn return_str(format: RetFormat, ret: i64) -> String {
    if ret < 0 && errno::errno_p(ret) {
        return format!("{ret} ({})", errno::errno_str(ret));
    }
    match format {
        RetFormat::Dec => ret.to_string(),
        RetFormat::Hex => format!("0x{ret:x}"),
        // C's "%#o": "022", and "0" for zero.
        RetFormat::Oct if ret == 0 => "0".to_string(),
        RetFormat::Oct => format!("0{ret:o}"),
    }
}

/// A futex bitset: `FUTEX_BITSET_MATCH_ANY` for all ones.
fn bitset_str(v: u64) -> String {
    match v as u32 {
        u32::MAX => "FUTEX_BITSET_MATCH_ANY".to_string(),
        b => hex(u64::from(b)),
    }
}

fn hex(v: u64) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

struct Decoder<'a> {
    sig: &'static Signature,
    args: &'a [u64; 6],
    ret: Option<i64>,
    mem: &'a dyn ReadMemory,
    entry: Option<&'a EntrySnapshot>,
}

impl Decoder<'_> {
    /// Argument `i`'s in/out value at entry, when the call completed and
    /// a snapshot was taken.
    fn entry_value(&self, i: usize) -> Option<i64> {
        self.ret?;
        self.entry?.values[i]
    }

    /// The call succeeded and its outputs can be decoded.
    fn succeeded(&self) -> bool {
        self.ret.is_some_and(|r| !is_error(r))
    }

    fn arg(&self, i: usize) -> u64 {
        self.args[i]
    }

    fn render(&self) -> String {
        let parts: Vec<String> = match self.sig.name {
            "open" | "openat" => self.open_like(),
            "fcntl" => self.fcntl(),
            "clone" => self.clone(),
            "clone3" => vec![
                process::clone_args_str(self.mem, self.arg(0), self.arg(1), self.succeeded()),
                self.arg(1).to_string(),
            ],
            "execve" => self.execve(),
            "ioctl" => self.ioctl(),
            "futex" => self.futex(),
            "mremap" => self.mremap(),
            "arch_prctl" => self.arch_prctl(),
            "setsockopt" | "getsockopt" => self.sockopt(),
            "prctl" => self.prctl(),
            // The high half of the offset is not shown on 64-bit.
            "preadv2" | "pwritev2" => {
                let mut parts = self.all();
                parts.remove(4);
                parts
            }
            _ => self
                .sig
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| self.one(i, a))
                .collect(),
        };
        parts.join(", ")
    }

    fn all(&self) -> Vec<String> {
        self.sig
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| self.one(i, a))
            .collect()
    }

    /// open/openat show their mode only when the flags create a file.
    fn open_like(&self) -> Vec<String> {
        let mut parts = self.all();
        let flags = self.arg(parts.len() - 2);
        if !file::open_needs_mode(flags) {
            parts.pop();
        }
        parts
    }

    fn fcntl(&self) -> Vec<String> {
        let mut parts = vec![
            as_int(self.arg(0)).to_string(),
            file::fcntl_cmd_str(self.arg(1)),
        ];
        parts.extend(file::fcntl_arg_str(self.arg(1), self.arg(2)));
        parts
    }

    /// strace names clone's arguments; x86_64 order is flags, stack,
    /// parent_tid, child_tid, tls.
    fn clone(&self) -> Vec<String> {
        let flags = self.arg(0);
        let mut parts = vec![
            format!("child_stack={}", addr_str(self.arg(1))),
            format!("flags={}", process::clone_flags_str(flags)),
        ];
        if flags & (process::CLONE_PARENT_SETTID | process::CLONE_PIDFD) != 0 {
            parts.push(format!("parent_tid={}", addr_str(self.arg(2))));
        }
        if flags & (process::CLONE_CHILD_SETTID | process::CLONE_CHILD_CLEARTID) != 0 {
            parts.push(format!("child_tidptr={}", addr_str(self.arg(3))));
        }
        if flags & process::CLONE_SETTLS != 0 {
            parts.push(format!("tls={}", addr_str(self.arg(4))));
        }
        parts
    }

    /// `execve("/bin/ls", ["ls", "-l"], 0x7ffd... /* 20 vars */)`. Only
    /// meaningful at entry: after a successful exec the old memory is gone.
    fn execve(&self) -> Vec<String> {
        let argv = self.string_array(self.arg(1));
        let envp = self.arg(2);
        let env = match self.count_pointers(envp) {
            Some(n) => format!(
                "{} /* {n} var{} */",
                addr_str(envp),
                if n == 1 { "" } else { "s" }
            ),
            None => addr_str(envp),
        };
        vec![path_str(self.mem, self.arg(0)), argv, env]
    }

    fn pointer_at(&self, addr: u64) -> Option<u64> {
        let b = read_exact(self.mem, addr, 8)?;
        Some(u64_at(&b, 0))
    }

    /// A NULL-terminated array of strings, at most 32 shown.
    fn string_array(&self, addr: u64) -> String {
        if addr == 0 {
            return "NULL".to_string();
        }
        let mut items = Vec::new();
        for i in 0.. {
            let Some(p) = self.pointer_at(addr.wrapping_add(8 * i)) else {
                return if i == 0 {
                    addr_str(addr)
                } else {
                    format!("[{}, ...]", items.join(", "))
                };
            };
            if p == 0 {
                break;
            }
            if i == 32 {
                items.push("...".to_string());
                break;
            }
            items.push(cstring_str(self.mem, p));
        }
        format!("[{}]", items.join(", "))
    }

    /// How many pointers precede the NULL that ends the array at `addr`
    /// (execve's environment), reading 64 pointers at a time.
    fn count_pointers(&self, addr: u64) -> Option<usize> {
        const BLOCK: usize = 64;
        if addr == 0 {
            return None;
        }
        let mut count = 0;
        while count < 65536 {
            let at = addr.wrapping_add(8 * count as u64);
            let block = read_bytes(self.mem, at, BLOCK * 8).filter(|b| b.len() >= 8)?;
            for chunk in block.chunks_exact(8) {
                if u64_at(chunk, 0) == 0 {
                    return Some(count);
                }
                count += 1;
            }
            if block.len() < BLOCK * 8 {
                // The array runs into unreadable memory before its NULL.
                return None;
            }
        }
        None
    }

    fn ioctl(&self) -> Vec<String> {
        let mut parts = vec![
            as_int(self.arg(0)).to_string(),
            misc::ioctl_request_str(self.arg(1)),
        ];
        let arg = self.arg(2);
        let out_ok = self.succeeded();
        match misc::ioctl_arg(self.arg(1)) {
            misc::IoctlArg::None => {}
            misc::IoctlArg::Int => parts.push(as_int(arg).to_string()),
            misc::IoctlArg::InInt => parts.push(resource::int_ref_str(self.mem, arg)),
            misc::IoctlArg::OutInt if out_ok => parts.push(resource::int_ref_str(self.mem, arg)),
            misc::IoctlArg::InWinsize => parts.push(misc::winsize_str(self.mem, arg)),
            misc::IoctlArg::InTermios => parts.push(misc::termios_str(self.mem, arg)),
            misc::IoctlArg::OutTermios if out_ok => parts.push(misc::termios_str(self.mem, arg)),
            misc::IoctlArg::OutWinsize if out_ok => parts.push(misc::winsize_str(self.mem, arg)),
            _ => parts.push(addr_str(arg)),
        }
        parts
    }

    /// arch_prctl's GET codes write the value through the address.
    fn arch_prctl(&self) -> Vec<String> {
        let (code, addr) = (self.arg(0), self.arg(1));
        let value = if resource::arch_prctl_is_get(code) && self.succeeded() {
            resource::out_word_str(self.mem, addr)
        } else {
            addr_str(addr)
        };
        vec![resource::arch_prctl_code_str(code), value]
    }

    /// Socket options: the name depends on the level; an int-sized value
    /// shows as `[1]` (getsockopt's after the call, with its length).
    fn sockopt(&self) -> Vec<String> {
        let (level, name, val, len) = (self.arg(1), self.arg(2), self.arg(3), self.arg(4));
        let mut parts = vec![
            as_int(self.arg(0)).to_string(),
            network::sockopt_level_str(level),
            network::sockopt_name_str(level, name),
        ];
        if self.sig.name == "setsockopt" {
            parts.push(if len == 4 {
                resource::int_ref_str(self.mem, val)
            } else {
                addr_str(val)
            });
            parts.push((len as u32).to_string());
        } else if self.succeeded() {
            let len_str = resource::int_ref_str(self.mem, len);
            parts.push(if len_str == "[4]" {
                resource::int_ref_str(self.mem, val)
            } else {
                addr_str(val)
            });
            parts.push(len_str);
        } else {
            parts.push(addr_str(val));
            parts.push(resource::int_ref_str(self.mem, len));
        }
        parts
    }

    /// prctl shows the arguments each option uses; others as strace's
    /// generic hex.
    fn prctl(&self) -> Vec<String> {
        let option = self.arg(0) & 0xffff_ffff;
        let mut parts = vec![process::prctl_option_str(option)];
        let rest_hex = |from: usize| (from..5).map(|i| hex(self.arg(i))).collect::<Vec<_>>();
        match option {
            // Options without arguments.
            3 | 7 | 13 | 21 | 27 | 30 | 31 | 32 | 37 => {}
            1 => parts.push(signal::signal_arg_str(self.arg(1))),
            4 => parts.push(process::dumpable_str(self.arg(1))),
            15 => parts.push(cstring_str(self.mem, self.arg(1))),
            16 if self.succeeded() => parts.push(cstring_str(self.mem, self.arg(1))),
            16 => parts.push(addr_str(self.arg(1))),
            23 | 24 => parts.push(process::capability_str(self.arg(1))),
            38 => {
                parts.push(self.arg(1).to_string());
                parts.extend(rest_hex(2));
            }
            _ => parts.extend(rest_hex(1)),
        }
        parts
    }

    /// mremap's fifth argument only matters with MREMAP_FIXED.
    fn mremap(&self) -> Vec<String> {
        let mut parts = self.all();
        if self.arg(3) & 2 == 0 {
            parts.pop();
        }
        parts
    }

    /// futex shows as many arguments as the operation uses.
    fn futex(&self) -> Vec<String> {
        let op = self.arg(1);
        let mut parts = vec![
            addr_str(self.arg(0)),
            misc::futex_op_str(op),
            self.arg(2).to_string(),
        ];
        match misc::futex_cmd(op) {
            1 | 7 | 8 => {}
            0 => parts.push(time::timespec_str(self.mem, self.arg(3))),
            9 => {
                parts.push(time::timespec_str(self.mem, self.arg(3)));
                parts.push(bitset_str(self.arg(5)));
            }
            10 => {
                parts.push(addr_str(self.arg(3)));
                parts.push(bitset_str(self.arg(5)));
            }
            _ => {
                parts.push(addr_str(self.arg(3)));
                parts.push(addr_str(self.arg(4)));
                parts.push((self.arg(5) as u32).to_string());
            }
        }
        parts
    }

    /// One argument by its kind.
    fn one(&self, i: usize, arg: &Arg) -> String {
        let v = self.arg(i);
        let by_index = |n: u8| self.args[usize::from(n) - 1];
        let out_ok = self.succeeded() && v != 0;
        match arg.kind {
            Kind::Int | Kind::Fd | Kind::Pid => as_int(v).to_string(),
            Kind::UInt => (v as u32).to_string(),
            Kind::Long => (v as i64).to_string(),
            Kind::ULong => v.to_string(),
            Kind::Hex => hex(v),
            Kind::Ptr => format!("{v:#x}"),
            Kind::Mode => file::mode_str(v),
            Kind::DirFd => file::dirfd_str(v),
            Kind::Path => path_str(self.mem, v),
            Kind::Str => cstring_str(self.mem, v),
            Kind::InBuf(n) => buffer_str(self.mem, v, by_index(n)),
            Kind::OutBuf if out_ok && self.sig.name == "getcwd" => path_str(self.mem, v),
            Kind::OutBuf if out_ok => buffer_str(self.mem, v, self.ret.unwrap_or(0) as u64),
            Kind::OutBuf => addr_str(v),
            Kind::InIovec(n) => iovec_str(self.mem, v, by_index(n), None),
            Kind::OutIovec(n) if out_ok => {
                iovec_str(self.mem, v, by_index(n), self.ret.map(|r| r as u64))
            }
            Kind::OutIovec(_) => addr_str(v),
            Kind::OpenFlags => file::open_flags_str(v),
            Kind::FdFlags(prefix) => file::fd_flags_str(v, prefix),
            Kind::AtFlags => file::at_flags_str(v),
            Kind::RenameFlags => file::rename_flags_str(v),
            Kind::AccessMode => file::access_mode_str(v),
            Kind::Whence => file::whence_str(v),
            Kind::FcntlCmd => file::fcntl_cmd_str(v),
            Kind::Prot => memory::prot_str(v),
            Kind::MapFlags => memory::map_flags_str(v),
            Kind::Madvise => memory::madvise_str(v),
            Kind::MremapFlags => memory::mremap_flags_str(v),
            Kind::CloneFlags => process::clone_flags_str(v),
            Kind::WaitOptions => process::wait4_options_str(v),
            Kind::OutWaitStatus if out_ok && self.ret.unwrap_or(0) > 0 => {
                match read_exact(self.mem, v, 4) {
                    Some(b) => process::wait_status_str(i32_at(&b, 0)),
                    None => addr_str(v),
                }
            }
            Kind::OutWaitStatus => addr_str(v),
            Kind::Signal => signal::signal_arg_str(v),
            Kind::SigHow => signal::sigprocmask_how_str(v),
            Kind::Sigset(n) => signal::sigset_str(self.mem, v, by_index(n)),
            Kind::OutSigset(n) if out_ok => signal::sigset_str(self.mem, v, by_index(n)),
            Kind::OutSigset(_) => addr_str(v),
            Kind::Sigaction => signal::sigaction_str(self.mem, v),
            Kind::OutSigaction if out_ok => signal::sigaction_str(self.mem, v),
            Kind::OutSigaction => addr_str(v),
            Kind::Family => network::family_str(v),
            Kind::SockType => network::socktype_str(v),
            Kind::SockFlags => network::sock_flags_str(v),
            Kind::Protocol(n) => network::protocol_str(by_index(n), v),
            Kind::Sockaddr(n) => network::sockaddr_str(self.mem, v, by_index(n)),
            Kind::OutSockaddr(n) if out_ok => {
                match read_bytes(self.mem, by_index(n), 4).filter(|b| b.len() == 4) {
                    Some(b) => {
                        let len = u32_at(&b, 0);
                        network::sockaddr_str(self.mem, v, u64::from(len))
                    }
                    None => addr_str(v),
                }
            }
            Kind::OutSockaddr(_) => addr_str(v),
            Kind::MsgFlags => network::msg_flags_str(v),
            Kind::ShutdownHow => network::shutdown_how_str(v),
            Kind::Timespec => time::timespec_str(self.mem, v),
            // A remaining-time output is only filled when the sleep was interrupted.
            Kind::OutTimespec if arg.name.starts_with("rem") => {
                if self.ret == Some(-i64::from(libc::EINTR)) && v != 0 {
                    time::timespec_str(self.mem, v)
                } else {
                    addr_str(v)
                }
            }
            Kind::OutTimespec if out_ok => time::timespec_str(self.mem, v),
            Kind::OutTimespec => addr_str(v),
            Kind::ClockId => time::clockid_str(v),
            Kind::TimerFlags => time::timer_flags_str(v),
            Kind::OutStat if out_ok => file::stat_str(self.mem, v),
            Kind::OutStat => addr_str(v),
            Kind::OutStatfs if out_ok => file::statfs_str(self.mem, v),
            Kind::OutStatfs => addr_str(v),
            Kind::StackT => signal::stack_t_str(self.mem, v),
            Kind::OutStackT if out_ok => signal::stack_t_str(self.mem, v),
            Kind::OutStackT => addr_str(v),
            Kind::OutIntRef if out_ok => resource::int_ref_str(self.mem, v),
            Kind::OutIntRef => addr_str(v),
            Kind::IntRef => match (self.entry_value(i), read_exact(self.mem, v, 4)) {
                (Some(old), Some(b)) if old != i64::from(i32_at(&b, 0)) => {
                    format!("[{old} => {}]", i32_at(&b, 0))
                }
                _ => resource::int_ref_str(self.mem, v),
            },
            Kind::GidList(n) => resource::id_list_str(self.mem, v, by_index(n)),
            Kind::OutGidList if out_ok => {
                resource::id_list_str(self.mem, v, self.ret.unwrap_or(0) as u64)
            }
            Kind::OutGidList => addr_str(v),
            Kind::MfdFlags => file::memfd_flags_str(v),
            Kind::FlockOp => file::flock_op_str(v),
            Kind::RwfFlags => file::rwf_flags_str(v),
            Kind::SpliceFlags => file::splice_flags_str(v),
            Kind::CloseRangeFlags => file::close_range_flags_str(v),
            Kind::UmountFlags => file::umount_flags_str(v),
            Kind::MlockallFlags => memory::mlockall_flags_str(v),
            Kind::Personality => process::personality_str(v),
            Kind::IdType => process::idtype_str(v),
            Kind::RusageWho => process::rusage_who_str(v),
            Kind::OutSiginfo if out_ok => process::siginfo_str(self.mem, v),
            Kind::OutSiginfo => addr_str(v),
            Kind::Siginfo => process::siginfo_str(self.mem, v),
            Kind::SchedPolicy => process::sched_policy_str(v),
            Kind::Sigevent => process::sigevent_str(self.mem, v),
            Kind::Itimerspec => time::itimerspec_str(self.mem, v),
            Kind::OutItimerspec if out_ok => time::itimerspec_str(self.mem, v),
            Kind::OutItimerspec => addr_str(v),
            Kind::Itimerval => time::itimerval_str(self.mem, v),
            Kind::OutItimerval if out_ok => time::itimerval_str(self.mem, v),
            Kind::OutItimerval => addr_str(v),
            Kind::ItimerWhich => time::itimer_which_str(v),
            Kind::TimerfdFlags => time::timerfd_flags_str(v),
            Kind::InotifyMask => file::inotify_mask_str(v),
            Kind::PrioWhich => process::prio_which_str(v),
            Kind::Msghdr => network::msghdr_str(self.mem, v, None),
            Kind::OutMsghdr if out_ok => {
                network::msghdr_str(self.mem, v, self.ret.map(|r| r as u64))
            }
            Kind::OutMsghdr => addr_str(v),
            Kind::StatxFlags => file::statx_flags_str(v),
            Kind::StatxMask => file::statx_mask_str(v),
            Kind::OutStatx if out_ok => file::statx_str(self.mem, v),
            Kind::OutStatx => addr_str(v),
            Kind::Fadvise => file::fadvise_str(v),
            Kind::UtimensTimes => time::utimens_str(self.mem, v),
            Kind::XattrFlags => file::xattr_flags_str(v),
            Kind::OffPtr if v == 0 => "NULL".to_string(),
            Kind::OffPtr => match (self.entry_value(i), read_exact(self.mem, v, 8)) {
                (Some(old), Some(b)) if old != i64_at(&b, 0) => {
                    format!("[{old}] => [{}]", i64_at(&b, 0))
                }
                (_, Some(b)) => format!("[{}]", i64_at(&b, 0)),
                (_, None) => addr_str(v),
            },
            Kind::OutFdPair if out_ok => match read_exact(self.mem, v, 8) {
                Some(b) => {
                    let a = i32_at(&b, 0);
                    let c = i32_at(&b, 4);
                    format!("[{a}, {c}]")
                }
                None => addr_str(v),
            },
            Kind::OutFdPair => addr_str(v),
            Kind::FdSet(n) => match self.entry_value(i) {
                Some(word) if v != 0 => poll::fdset_bits_str(&[word as u64], by_index(n)),
                _ => poll::fdset_str(self.mem, v, by_index(n)),
            },
            Kind::InOutTimeval => match self.entry_value(i) {
                Some(t) if v != 0 => {
                    format!("{{tv_sec={}, tv_usec={}}}", t / 1_000_000, t % 1_000_000)
                }
                _ => time::timeval_str(self.mem, v),
            },
            Kind::InOutTimespec => match self.entry_value(i) {
                Some(t) if v != 0 => format!(
                    "{{tv_sec={}, tv_nsec={}}}",
                    t / 1_000_000_000,
                    t % 1_000_000_000
                ),
                _ => time::timespec_str(self.mem, v),
            },
            Kind::Pselect6Sigmask => poll::pselect6_sigmask_str(self.mem, v),
            Kind::PollFds(n) => poll::pollfds_str(self.mem, v, by_index(n)),
            Kind::EpollOp => poll::epoll_op_str(v),
            Kind::EpollEvent => poll::epoll_event_str(self.mem, v),
            Kind::OutEpollEvents if out_ok => {
                poll::epoll_events_str(self.mem, v, self.ret.unwrap_or(0) as u64)
            }
            Kind::OutEpollEvents => addr_str(v),
            Kind::OutDirents if out_ok => {
                resource::dirents_str(self.mem, v, self.ret.unwrap_or(0) as u64)
            }
            Kind::OutDirents => addr_str(v),
            Kind::OutUtsname if out_ok => resource::utsname_str(self.mem, v),
            Kind::OutUtsname => addr_str(v),
            Kind::RlimitResource => resource::rlimit_resource_str(v),
            Kind::Rlimit => resource::rlimit_str(self.mem, v),
            Kind::OutRlimit if out_ok => resource::rlimit_str(self.mem, v),
            Kind::OutRlimit => addr_str(v),
            Kind::OutRandom if out_ok => {
                resource::hex_buffer_str(self.mem, v, self.ret.unwrap_or(0) as u64)
            }
            Kind::OutRandom => addr_str(v),
            Kind::GrndFlags => resource::getrandom_flags_str(v),
            Kind::SockLevel => network::sockopt_level_str(v),
            Kind::CpuSet(n) => resource::cpuset_str(self.mem, v, by_index(n)),
            Kind::OutCpuSet if out_ok => {
                resource::cpuset_str(self.mem, v, self.ret.unwrap_or(0) as u64)
            }
            Kind::OutCpuSet => addr_str(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::testmem::Mem;

    fn nr(name: &str) -> i64 {
        i64::from(crate::syscalls::syscall_number(name).unwrap())
    }

    fn args(v: &[u64]) -> [u64; 6] {
        let mut a = [0u64; 6];
        a[..v.len()].copy_from_slice(v);
        a
    }

    #[test]
    fn outputs_show_at_exit_only_on_success() {
        let mem = Mem::new(0x1000, b"hello world");
        let a = args(&[3, 0x1000, 100]);
        assert_eq!(argstr(nr("read"), &a, None, &mem), "3, 0x1000, 100");
        assert_eq!(argstr(nr("read"), &a, Some(5), &mem), "3, \"hello\", 100");
        assert_eq!(argstr(nr("read"), &a, Some(-9), &mem), "3, 0x1000, 100");
        // Input buffers show at entry already.
        assert_eq!(
            argstr(nr("write"), &args(&[1, 0x1000, 5]), None, &mem),
            "1, \"hello\", 5"
        );
    }

    #[test]
    fn open_shows_mode_only_when_creating() {
        let mem = Mem::new(0x1000, b"f\0");
        let at = (-100i64) as u64;
        let a = args(&[at, 0x1000, 0, 0o777]);
        assert_eq!(
            argstr(nr("openat"), &a, None, &mem),
            "AT_FDCWD, \"f\", O_RDONLY"
        );
        let a = args(&[at, 0x1000, 0o1101, 0o644]);
        assert_eq!(
            argstr(nr("openat"), &a, None, &mem),
            "AT_FDCWD, \"f\", O_WRONLY|O_CREAT|O_TRUNC, 0644"
        );
        let a = args(&[0x1000, 0o100, 0]);
        assert_eq!(
            argstr(nr("open"), &a, None, &mem),
            "\"f\", O_RDONLY|O_CREAT, 000"
        );
    }

    #[test]
    fn special_calls() {
        let mem = Mem::none();
        assert_eq!(
            argstr(nr("fcntl"), &args(&[3, 1]), None, &mem),
            "3, F_GETFD"
        );
        assert_eq!(
            argstr(nr("fcntl"), &args(&[3, 2, 1]), None, &mem),
            "3, F_SETFD, FD_CLOEXEC"
        );
        assert_eq!(
            argstr(nr("clone"), &args(&[0x11, 0, 0, 0, 0]), None, &mem),
            "child_stack=NULL, flags=SIGCHLD"
        );
        assert_eq!(
            argstr(
                nr("clone"),
                &args(&[0x3d0f00, 0x7000, 0x8000, 0x8000, 0x9000]),
                None,
                &mem
            ),
            "child_stack=0x7000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, parent_tid=0x8000, child_tidptr=0x8000, tls=0x9000"
        );
        assert_eq!(
            argstr(nr("ioctl"), &args(&[1, 0x5401, 0x7000]), None, &mem),
            "1, TCGETS, 0x7000"
        );
        assert_eq!(
            argstr(nr("ioctl"), &args(&[3, 0x5451, 0]), None, &mem),
            "3, FIOCLEX"
        );
        assert_eq!(
            argstr(nr("futex"), &args(&[0x5000, 129, 1]), None, &mem),
            "0x5000, FUTEX_WAKE_PRIVATE, 1"
        );
        assert_eq!(
            argstr(
                nr("futex"),
                &args(&[0x5000, 137, 2, 0, 0, u32::MAX as u64]),
                None,
                &mem
            ),
            "0x5000, FUTEX_WAIT_BITSET_PRIVATE, 2, NULL, FUTEX_BITSET_MATCH_ANY"
        );
        assert_eq!(
            argstr(
                nr("mremap"),
                &args(&[0x1000, 4096, 8192, 1, 0x9000]),
                None,
                &mem
            ),
            "0x1000, 4096, 8192, MREMAP_MAYMOVE"
        );
    }

    #[test]
    fn execve_argv_and_environment() {
        // argv at 0x1000: [0x1100, 0x1110, NULL]; envp at 0x1020: [0x1100, NULL]
        let mut m = vec![0u8; 0x120];
        m[0..8].copy_from_slice(&0x1100u64.to_ne_bytes());
        m[8..16].copy_from_slice(&0x1110u64.to_ne_bytes());
        m[0x20..0x28].copy_from_slice(&0x1100u64.to_ne_bytes());
        m[0x100..0x108].copy_from_slice(b"/bin/ls\0");
        m[0x110..0x113].copy_from_slice(b"-l\0");
        let mem = Mem::new(0x1000, &m);
        assert_eq!(
            argstr(nr("execve"), &args(&[0x1100, 0x1000, 0x1020]), None, &mem),
            "\"/bin/ls\", [\"/bin/ls\", \"-l\"], 0x1020 /* 1 var */"
        );
        assert_eq!(
            argstr(nr("execve"), &args(&[0x1100, 0, 0x9000]), None, &mem),
            "\"/bin/ls\", NULL, 0x9000"
        );
    }

    #[test]
    fn plain_pointers_as_systemtap_writes_them() {
        let mem = Mem::new(0x1000, &[]);
        assert_eq!(argstr(nr("brk"), &args(&[0]), None, &mem), "0x0");
        assert_eq!(
            argstr(nr("brk"), &args(&[0x5555_5555_a000]), None, &mem),
            "0x55555555a000"
        );
    }

    #[test]
    fn wait4_status_and_pipe_fds_at_exit() {
        let mut m = (3i32 << 8).to_ne_bytes().to_vec();
        m.extend_from_slice(&5i32.to_ne_bytes());
        m.extend_from_slice(&6i32.to_ne_bytes());
        let mem = Mem::new(0x1000, &m);
        let a = args(&[u64::MAX, 0x1000, 1, 0]);
        assert_eq!(
            argstr(nr("wait4"), &a, None, &mem),
            "-1, 0x1000, WNOHANG, 0x0"
        );
        assert_eq!(
            argstr(nr("wait4"), &a, Some(42), &mem),
            "-1, [{WIFEXITED(s) && WEXITSTATUS(s) == 3}], WNOHANG, 0x0"
        );
        assert_eq!(
            argstr(nr("wait4"), &a, Some(0), &mem),
            "-1, 0x1000, WNOHANG, 0x0"
        );
        let a = args(&[0x1004, 0o2000000]);
        assert_eq!(argstr(nr("pipe2"), &a, Some(0), &mem), "[5, 6], O_CLOEXEC");
        assert_eq!(
            argstr(nr("pipe2"), &a, Some(-24), &mem),
            "0x1004, O_CLOEXEC"
        );
    }

    #[test]
    fn entry_snapshots_show_changed_in_out_values() {
        // addrlen at 0x1000: 110 at entry, 2 after accept.
        let before = Mem::new(0x1000, &110i32.to_ne_bytes());
        let after = Mem::new(0x1000, &2i32.to_ne_bytes());
        let a = args(&[3, 0, 0x1000, 0]);
        let snap = entry_snapshot(nr("accept4"), &a, &before);
        assert_eq!(
            argstr_exit(nr("accept4"), &a, 5, &after, &snap),
            "3, NULL, [110 => 2], 0"
        );
        assert_eq!(
            argstr(nr("accept4"), &a, Some(5), &after),
            "3, NULL, [2], 0"
        );
        assert_eq!(
            argstr_exit(nr("accept4"), &a, 5, &before, &snap),
            "3, NULL, [110], 0"
        );
        // sendfile's offset: 2 at entry, 5 after.
        let before = Mem::new(0x1000, &2i64.to_ne_bytes());
        let after = Mem::new(0x1000, &5i64.to_ne_bytes());
        let a = args(&[1, 3, 0x1000, 3]);
        let snap = entry_snapshot(nr("sendfile"), &a, &before);
        assert_eq!(
            argstr_exit(nr("sendfile"), &a, 3, &after, &snap),
            "1, 3, [2] => [5], 3"
        );
        assert_eq!(
            entry_snapshot(nr("getpid"), &a, &before),
            EntrySnapshot::default()
        );
        // select's fd set and timeout: the kernel rewrites both.
        let mut m = vec![0u8; 0x20];
        m[0..8].copy_from_slice(&0b11_0000u64.to_ne_bytes());
        m[0x10..0x18].copy_from_slice(&1i64.to_ne_bytes());
        let before = Mem::new(0x1000, &m);
        m[0..8].copy_from_slice(&0b01_0000u64.to_ne_bytes());
        m[0x10..0x18].copy_from_slice(&0i64.to_ne_bytes());
        m[0x18..0x20].copy_from_slice(&999_000i64.to_ne_bytes());
        let after = Mem::new(0x1000, &m);
        let a = args(&[6, 0x1000, 0, 0, 0x1010]);
        let snap = entry_snapshot(nr("select"), &a, &before);
        assert_eq!(
            argstr_exit(nr("select"), &a, 1, &after, &snap),
            "6, [4 5], NULL, NULL, {tv_sec=1, tv_usec=0}"
        );
        assert_eq!(
            argstr(nr("select"), &a, Some(1), &after),
            "6, [4], NULL, NULL, {tv_sec=0, tv_usec=999000}"
        );
    }

    #[test]
    fn generic_arguments_for_undecoded_and_unknown_calls() {
        let mem = Mem::none();
        let a = args(&[0, 1, 0xdead, 3, 4, 5]);
        assert_eq!(argstr(nr("io_uring_setup"), &a, None, &mem), "0, 0x1");
        assert_eq!(argstr(400, &a, None, &mem), "0, 0x1, 0xdead, 0x3, 0x4, 0x5");
        assert_eq!(argstr(-1, &a, None, &mem), "0, 0x1, 0xdead, 0x3, 0x4, 0x5");
        assert_eq!(argstr(nr("getpid"), &a, None, &mem), "");
    }

    #[test]
    fn return_values_as_systemtap() {
        assert_eq!(retstr(nr("openat"), 3), "3");
        assert_eq!(retstr(nr("openat"), -2), "-2 (ENOENT)");
        assert_eq!(retstr(nr("read"), -512), "-512");
        assert_eq!(retstr(nr("mmap"), 0x7fff_0000), "0x7fff0000");
        assert_eq!(retstr(nr("mmap"), -12), "-12 (ENOMEM)");
        assert_eq!(retstr(nr("brk"), 0x5555_0000), "1431633920");
        assert_eq!(retstr(nr("umask"), 0o22), "022");
        assert_eq!(retstr(nr("umask"), 0), "0");
        assert_eq!(retstr(9999, -1), "-1 (EPERM)");
        assert_eq!(retstr(nr("lseek"), i64::MIN), i64::MIN.to_string());
        assert!(is_error(-4095) && !is_error(-4096) && !is_error(0));
    }
}

#[cfg(test)]
mod robustness {
    use super::*;
    use crate::syscalls::table::SYSCALLS;
    use crate::syscalls::testmem::Mem;

    /// Hostile inputs never panic: every call, with extreme argument values,
    /// unreadable or garbage memory, at entry and at exit.
    #[test]
    fn every_syscall_with_extreme_arguments() {
        let garbage = Mem::new(0x1000, &[0xff; 4096]);
        let zeros = Mem::new(0x1000, &[0; 4096]);
        let none = Mem::none();
        let patterns: [[u64; 6]; 5] = [
            [0; 6],
            [u64::MAX; 6],
            [0x1000; 6],
            [0x1ff8, 0x1000, 0x7fff_ffff, u64::MAX - 7, 0x1001, 3],
            [i64::MIN as u64, 0x1000, 1 << 40, 0x1000, 0, u32::MAX as u64],
        ];
        let rets = [
            None,
            Some(0),
            Some(-14),
            Some(4096),
            Some(i64::MAX),
            Some(i64::MIN),
        ];
        let mut nrs: Vec<i64> = SYSCALLS.iter().map(|e| i64::from(e.nr)).collect();
        nrs.extend([-1, 400, 472, 100_000, i64::MIN, i64::MAX]);
        for nr in nrs {
            for args in &patterns {
                for ret in rets {
                    for mem in [&garbage as &dyn ReadMemory, &zeros, &none] {
                        let _ = argstr(nr, args, ret, mem);
                    }
                }
            }
            for ret in rets.iter().flatten() {
                let _ = retstr(nr, *ret);
            }
        }
    }
}
