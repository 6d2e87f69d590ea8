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

use super::decode::strings::{addr_str, buffer_str, cstring_str, iovec_str, path_str, read_bytes};
use super::decode::{file, flags::as_int, memory, misc, network, process, signal, time};
use super::errno;
use super::spec::{Arg, Kind, RetFormat, Signature, signature};
use super::table::syscall_nargs;
use crate::memory::ReadMemory;

/// Whether a raw return value is a failure (-4095..=-1).
pub fn is_error(ret: i64) -> bool {
    (-4095..=-1).contains(&ret)
}

/// The arguments of system call `nr` as strace shows them. `ret` is the
/// return value when the call has completed (then output arguments are
/// decoded), None at entry.
pub fn argstr(nr: i64, args: &[u64; 6], ret: Option<i64>, mem: &dyn ReadMemory) -> String {
    match signature(nr) {
        Some(sig) => Decoder {
            sig,
            args,
            ret,
            mem,
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
}

impl Decoder<'_> {
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
            "execve" => self.execve(),
            "ioctl" => self.ioctl(),
            "futex" => self.futex(),
            "mremap" => self.mremap(),
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
        let b = read_bytes(self.mem, addr, 8).filter(|b| b.len() == 8)?;
        Some(u64::from_ne_bytes(b.try_into().unwrap()))
    }

    /// A NULL-terminated array of strings, at most 32 shown.
    fn string_array(&self, addr: u64) -> String {
        if addr == 0 {
            return "NULL".to_string();
        }
        let mut items = Vec::new();
        for i in 0.. {
            let Some(p) = self.pointer_at(addr + 8 * i) else {
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

    fn count_pointers(&self, addr: u64) -> Option<usize> {
        if addr == 0 {
            return None;
        }
        (0..4096).find_map(|i| match self.pointer_at(addr + 8 * i as u64) {
            Some(0) => Some(Some(i)),
            Some(_) => None,
            None => Some(None),
        })?
    }

    fn ioctl(&self) -> Vec<String> {
        let mut parts = vec![
            as_int(self.arg(0)).to_string(),
            misc::ioctl_request_str(self.arg(1)),
        ];
        if !misc::ioctl_without_arg(self.arg(1)) {
            parts.push(addr_str(self.arg(2)));
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
            Kind::Ptr => addr_str(v),
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
            Kind::PipeFlags => file::fd_flags_str(v, "O_"),
            Kind::EpollFlags => file::fd_flags_str(v, "EPOLL_"),
            Kind::EfdFlags => file::fd_flags_str(v, "EFD_"),
            Kind::AtFlags => file::at_flags_str(v),
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
                match read_bytes(self.mem, v, 4).filter(|b| b.len() == 4) {
                    Some(b) => process::wait_status_str(i32::from_ne_bytes(b.try_into().unwrap())),
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
            Kind::OutFdPair if out_ok => {
                match read_bytes(self.mem, v, 8).filter(|b| b.len() == 8) {
                    Some(b) => {
                        let a = i32::from_ne_bytes(b[0..4].try_into().unwrap());
                        let c = i32::from_ne_bytes(b[4..8].try_into().unwrap());
                        format!("[{a}, {c}]")
                    }
                    None => addr_str(v),
                }
            }
            Kind::OutFdPair => addr_str(v),
        }
    }
}
