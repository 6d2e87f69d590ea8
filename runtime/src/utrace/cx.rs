//! What a callback can do with the stopped thread it is told about:
//! syscall details (`PTRACE_GET_SYSCALL_INFO`), registers, the syscall's
//! return value, siginfo, memory. Everything is fetched lazily and cached
//! for the stop, so an engine that looks at nothing costs nothing.

use std::ops::{Deref, DerefMut};

use super::error::{Error, Result};
use super::{Control, EngineId, Tid, ptrace};
use crate::memory::{Fault, ReadMemory};

/// The kind of stop a callback is made at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopKind {
    SyscallEntry,
    SyscallExit,
    /// Syscall entry reported by a seccomp RET_TRACE stop.
    SeccompEntry,
    Other,
    /// The thread is dead: nothing can be read.
    Dead,
}

/// Per-stop cache.
pub(crate) struct StopData {
    pub kind: StopKind,
    /// The reported thread's process (known even after its death).
    pid: Tid,
    #[cfg(target_arch = "x86_64")]
    pub(crate) regs: Option<Regs>,
    syscall: Option<SyscallInfo>,
}

impl StopData {
    pub fn new(kind: StopKind, pid: Tid) -> StopData {
        StopData {
            kind,
            pid,
            #[cfg(target_arch = "x86_64")]
            regs: None,
            syscall: None,
        }
    }
}

/// The registers of a stopped thread (x86_64 `user_regs_struct`).
#[cfg(target_arch = "x86_64")]
pub type Regs = libc::user_regs_struct;

/// A system call as seen at its entry or exit stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallInfo {
    /// The syscall number (-1 when unknown).
    pub nr: i64,
    pub args: [u64; 6],
    /// The return value, at exit stops.
    pub ret: Option<i64>,
    /// AUDIT_ARCH_* of the calling convention.
    pub arch: u32,
    pub instruction_pointer: u64,
    pub stack_pointer: u64,
    /// At a seccomp stop: the 16 data bits of the filter's RET_TRACE.
    pub seccomp_data: Option<u32>,
}

/// The context of one callback: the reported thread, the calling engine,
/// and (through `Deref`) the tracer's [`Control`].
pub struct Cx<'a> {
    pub(crate) ctl: Control<'a>,
    pub(crate) tid: Tid,
    pub(crate) engine: EngineId,
    pub(crate) stop: &'a mut StopData,
}

impl<'a> Deref for Cx<'a> {
    type Target = Control<'a>;
    fn deref(&self) -> &Control<'a> {
        &self.ctl
    }
}

impl<'a> DerefMut for Cx<'a> {
    fn deref_mut(&mut self) -> &mut Control<'a> {
        &mut self.ctl
    }
}

impl Cx<'_> {
    /// The reported thread.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// Its process (thread group) id.
    pub fn pid(&self) -> Tid {
        self.stop.pid
    }

    /// The engine this callback belongs to.
    pub fn engine(&self) -> EngineId {
        self.engine
    }

    fn alive(&self) -> Result<()> {
        if self.stop.kind == StopKind::Dead {
            Err(Error::Gone(self.tid))
        } else {
            Ok(())
        }
    }

    /// The current syscall: number and arguments at entry, plus the return
    /// value at exit. Only at syscall stops.
    pub fn syscall(&mut self) -> Result<SyscallInfo> {
        if let Some(s) = self.stop.syscall {
            return Ok(s);
        }
        if !matches!(
            self.stop.kind,
            StopKind::SyscallEntry | StopKind::SyscallExit | StopKind::SeccompEntry
        ) {
            return Err(Error::Unsupported("syscall details outside a syscall stop"));
        }
        #[cfg(target_arch = "x86_64")]
        if self.stop.kind == StopKind::SyscallExit {
            // One PTRACE_GETREGS has it all (GET_SYSCALL_INFO at an exit
            // gives only the return value, and the number would need the
            // registers anyway).
            let info = exit_from_regs(&self.regs()?);
            self.stop.syscall = Some(info);
            return Ok(info);
        }
        let raw = ptrace::syscall_info(self.tid)?;
        let mut info = SyscallInfo {
            nr: -1,
            args: [0; 6],
            ret: None,
            arch: raw.arch,
            instruction_pointer: raw.instruction_pointer,
            stack_pointer: raw.stack_pointer,
            seccomp_data: None,
        };
        // SAFETY: `op` says which member of the union the kernel filled.
        unsafe {
            match raw.op {
                libc::PTRACE_SYSCALL_INFO_ENTRY => {
                    info.nr = raw.u.entry.nr as i64;
                    info.args = raw.u.entry.args;
                }
                libc::PTRACE_SYSCALL_INFO_SECCOMP => {
                    info.nr = raw.u.seccomp.nr as i64;
                    info.args = raw.u.seccomp.args;
                    info.seccomp_data = Some(raw.u.seccomp.ret_data);
                }
                libc::PTRACE_SYSCALL_INFO_EXIT => {
                    info.ret = Some(raw.u.exit.sval);
                    self.exit_number_and_args(&mut info)?;
                }
                _ => {}
            }
        }
        self.stop.syscall = Some(info);
        Ok(info)
    }

    /// At an exit stop the kernel gives only the return value; the number
    /// and the (preserved) argument registers come from the registers.
    #[cfg(target_arch = "x86_64")]
    fn exit_number_and_args(&mut self, info: &mut SyscallInfo) -> Result<()> {
        let r = self.regs()?;
        info.nr = r.orig_rax as i64;
        info.args = [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9];
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    fn exit_number_and_args(&mut self, _info: &mut SyscallInfo) -> Result<()> {
        Ok(())
    }

    /// At a syscall entry: whether this engine wants the exit report of
    /// this syscall (by default it does when it subscribed SYSCALL_EXIT).
    /// `false` declines it: the engine is not told of this exit, and when
    /// no engine wants it and entries come from seccomp, the thread goes
    /// on with `PTRACE_CONT` and the exit costs no stop at all. The choice
    /// holds for the current syscall only (utrace engines did the same by
    /// changing their event mask at entry and back at the next one).
    /// Ignored outside syscall-entry reports.
    pub fn want_syscall_exit(&mut self, want: bool) {
        if !matches!(
            self.stop.kind,
            StopKind::SyscallEntry | StopKind::SeccompEntry
        ) {
            return;
        }
        let (tid, engine) = (self.tid, self.engine);
        if let Some(a) = self
            .ctl
            .core
            .threads
            .get_mut(&tid)
            .and_then(|t| t.attachment(engine))
        {
            a.skip_exit = !want;
        }
    }

    /// The thread's registers.
    #[cfg(target_arch = "x86_64")]
    pub fn regs(&mut self) -> Result<Regs> {
        self.alive()?;
        if let Some(r) = self.stop.regs {
            return Ok(r);
        }
        let r = ptrace::get_regs(self.tid)?;
        self.stop.regs = Some(r);
        Ok(r)
    }

    /// Writes the thread's registers.
    #[cfg(target_arch = "x86_64")]
    pub fn set_regs(&mut self, regs: &Regs) -> Result<()> {
        self.alive()?;
        ptrace::set_regs(self.tid, regs)?;
        if let Some(k) = self.ctl.core.bp_kernel.as_mut() {
            *k = *regs;
        }
        self.stop.regs = Some(*regs);
        self.stop.syscall = None;
        Ok(())
    }

    /// At a syscall entry: skip the call and make it return `value` (e.g.
    /// `-libc::EPERM`). At a syscall exit: replace the return value.
    #[cfg(target_arch = "x86_64")]
    pub fn set_syscall_return(&mut self, value: i64) -> Result<()> {
        let mut r = self.regs()?;
        match self.stop.kind {
            StopKind::SyscallEntry | StopKind::SeccompEntry => r.orig_rax = u64::MAX,
            StopKind::SyscallExit => {}
            _ => {
                return Err(Error::Unsupported(
                    "setting a return value outside a syscall stop",
                ));
            }
        }
        r.rax = value as u64;
        self.set_regs(&r)
    }
    /// At a syscall entry: the call runs with these arguments instead (the
    /// argument registers of the thread's calling convention).
    #[cfg(target_arch = "x86_64")]
    pub fn set_syscall_args(&mut self, args: [u64; 6]) -> Result<()> {
        if !matches!(
            self.stop.kind,
            StopKind::SyscallEntry | StopKind::SeccompEntry
        ) {
            return Err(Error::Unsupported(
                "setting syscall arguments outside a syscall entry",
            ));
        }
        let mut r = self.regs()?;
        let [a, b, c, d, e, f] = args;
        if r.cs == COMPAT_CS {
            (r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp) = (a, b, c, d, e, f);
        } else {
            (r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9) = (a, b, c, d, e, f);
        }
        self.set_regs(&r)
    }
    #[cfg(not(target_arch = "x86_64"))]
    pub fn set_syscall_args(&mut self, _args: [u64; 6]) -> Result<()> {
        Err(Error::Unsupported("syscall arguments on this architecture"))
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn set_syscall_return(&mut self, _value: i64) -> Result<()> {
        Err(Error::Unsupported(
            "syscall return values on this architecture",
        ))
    }

    /// The siginfo of the current signal-delivery-stop.
    pub fn siginfo(&mut self) -> Result<libc::siginfo_t> {
        self.alive()?;
        ptrace::siginfo(self.tid)
    }

    /// What delivering `sig` to this thread would do now.
    pub fn disposition(&self, sig: super::Signal) -> Result<super::Disposition> {
        sig.disposition_in(self.tid).ok_or(Error::Gone(self.tid))
    }

    /// The thread's memory, for `user_string` and friends.
    pub fn memory(&self) -> ProcessMemory {
        ProcessMemory { pid: self.tid }
    }
}

/// The code segment a 32-bit (compat) task runs with.
#[cfg(target_arch = "x86_64")]
const COMPAT_CS: u64 = 0x23;

/// A syscall at its exit stop, from the registers: the number in
/// `orig_rax`, the preserved argument registers, the result in `rax`.
#[cfg(target_arch = "x86_64")]
fn exit_from_regs(r: &Regs) -> SyscallInfo {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_I386: u32 = 0x4000_0003;
    let compat = r.cs == COMPAT_CS;
    let (arch, args) = if compat {
        (
            AUDIT_ARCH_I386,
            [r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp].map(|a| a as u32 as u64),
        )
    } else {
        (AUDIT_ARCH_X86_64, [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9])
    };
    SyscallInfo {
        nr: r.orig_rax as i64,
        args,
        ret: Some(if compat {
            r.rax as u32 as i32 as i64
        } else {
            r.rax as i64
        }),
        arch,
        instruction_pointer: r.rip,
        stack_pointer: r.rsp,
        seccomp_data: None,
    }
}

/// Reads a traced process's memory with `process_vm_readv`.
#[derive(Clone, Copy, Debug)]
pub struct ProcessMemory {
    pub pid: Tid,
}

impl ReadMemory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> std::result::Result<usize, Fault> {
        if buf.is_empty() {
            return Ok(0);
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` covers `buf`, which outlives the call.
        let n = unsafe { libc::process_vm_readv(self.pid.0, &local, 1, &remote, 1, 0) };
        if n > 0 {
            Ok(n as usize)
        } else {
            let errno = if n == 0 {
                libc::EFAULT
            } else {
                ptrace::errno()
            };
            Err(Fault { addr, errno })
        }
    }
}
