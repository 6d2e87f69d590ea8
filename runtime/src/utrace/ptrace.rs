//! Raw ptrace and wait calls.
//!
//! Everything goes through `libc` directly: nix's wrappers take its
//! `Signal` enum (no real-time signals) and its `waitpid` consumes and loses
//! a stop on `SIGRTMIN+n`. Statuses are decoded here, once.

use super::error::{Error, Result};
use super::{Signal, Tid};

// Requests, options and events as the C library names them (libc's
// constants, checked against the kernel headers there).
pub(crate) use libc::{
    PTRACE_CONT, PTRACE_DETACH, PTRACE_GET_SYSCALL_INFO, PTRACE_GETEVENTMSG, PTRACE_GETREGS,
    PTRACE_GETSIGINFO, PTRACE_INTERRUPT, PTRACE_LISTEN, PTRACE_POKEUSER, PTRACE_SEIZE,
    PTRACE_SETOPTIONS, PTRACE_SETREGS, PTRACE_SINGLESTEP, PTRACE_SYSCALL,
};
pub(crate) use libc::{
    PTRACE_EVENT_CLONE as EVENT_CLONE, PTRACE_EVENT_EXEC as EVENT_EXEC,
    PTRACE_EVENT_EXIT as EVENT_EXIT, PTRACE_EVENT_FORK as EVENT_FORK,
    PTRACE_EVENT_SECCOMP as EVENT_SECCOMP, PTRACE_EVENT_STOP as EVENT_STOP,
    PTRACE_EVENT_VFORK as EVENT_VFORK,
};

/// x86 only; in neither nix nor libc (glibc's sys/ptrace.h has it).
pub(crate) const PTRACE_SINGLEBLOCK: u32 = 33;

/// The command dies with the tracer (the data of `PTRACE_SEIZE`).
pub(crate) const O_EXITKILL: usize = libc::PTRACE_O_EXITKILL as usize;

/// Options every traced thread gets: syscall stops marked with 0x80, follow
/// clone/fork/vfork/exec, an exit event, and seccomp RET_TRACE stops.
pub(crate) const OPTIONS: usize = (libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACEEXIT
    | libc::PTRACE_O_TRACESECCOMP) as usize;

/// One ptrace request; `Err(errno)` on failure.
pub(crate) fn raw(
    request: u32,
    tid: Tid,
    addr: usize,
    data: usize,
) -> std::result::Result<i64, i32> {
    // SAFETY: the requests used by this module pass addr/data as integers or
    // as pointers to live, correctly sized buffers.
    let r = unsafe { libc::ptrace(request as _, tid.0, addr, data) };
    if r == -1 { Err(errno()) } else { Ok(r as i64) }
}

pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn check(op: &'static str, tid: Tid, r: std::result::Result<i64, i32>) -> Result<()> {
    r.map(|_| ()).map_err(|e| Error::os(op, tid, e))
}

fn sig_data(sig: Option<Signal>) -> usize {
    sig.map_or(0, |s| s.0 as usize)
}

pub(crate) fn seize(tid: Tid, options: usize) -> Result<()> {
    check("PTRACE_SEIZE", tid, raw(PTRACE_SEIZE, tid, 0, options))
}
/// Replaces the options of a thread in a ptrace-stop.
pub(crate) fn set_options(tid: Tid, options: usize) -> Result<()> {
    check(
        "PTRACE_SETOPTIONS",
        tid,
        raw(PTRACE_SETOPTIONS, tid, 0, options),
    )
}
pub(crate) fn interrupt(tid: Tid) -> Result<()> {
    check("PTRACE_INTERRUPT", tid, raw(PTRACE_INTERRUPT, tid, 0, 0))
}
pub(crate) fn listen(tid: Tid) -> Result<()> {
    check("PTRACE_LISTEN", tid, raw(PTRACE_LISTEN, tid, 0, 0))
}
pub(crate) fn detach(tid: Tid, sig: Option<Signal>) -> Result<()> {
    check(
        "PTRACE_DETACH",
        tid,
        raw(PTRACE_DETACH, tid, 0, sig_data(sig)),
    )
}
pub(crate) fn restart(request: u32, tid: Tid, sig: Option<Signal>) -> Result<()> {
    check("ptrace restart", tid, raw(request, tid, 0, sig_data(sig)))
}
pub(crate) fn event_msg(tid: Tid) -> Result<u64> {
    let mut msg: libc::c_ulong = 0;
    let r = raw(PTRACE_GETEVENTMSG, tid, 0, &mut msg as *mut _ as usize);
    check("PTRACE_GETEVENTMSG", tid, r).map(|()| msg as u64)
}
pub(crate) fn siginfo(tid: Tid) -> Result<libc::siginfo_t> {
    // SAFETY: siginfo_t is plain data; all-zero is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = raw(PTRACE_GETSIGINFO, tid, 0, &mut info as *mut _ as usize);
    check("PTRACE_GETSIGINFO", tid, r).map(|()| info)
}
pub(crate) fn syscall_info(tid: Tid) -> Result<libc::ptrace_syscall_info> {
    // SAFETY: plain data, all-zero is valid.
    let mut info: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    let r = raw(
        PTRACE_GET_SYSCALL_INFO,
        tid,
        size,
        &mut info as *mut _ as usize,
    );
    check("PTRACE_GET_SYSCALL_INFO", tid, r).map(|()| info)
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn get_regs(tid: Tid) -> Result<libc::user_regs_struct> {
    // SAFETY: plain data, all-zero is valid.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let r = raw(PTRACE_GETREGS, tid, 0, &mut regs as *mut _ as usize);
    check("PTRACE_GETREGS", tid, r).map(|()| regs)
}
/// The registers that make the syscall `regs` (of `tid`, at its entry)
/// was entered with again: rip back on its `syscall` instruction, the
/// number in rax. `None` unless that instruction is the 2-byte `syscall`
/// (0f 05), the only one known to be made again so.
#[cfg(target_arch = "x86_64")]
pub(crate) fn call_again(
    tid: Tid,
    regs: &libc::user_regs_struct,
) -> Option<libc::user_regs_struct> {
    let at = regs.rip.checked_sub(2)?;
    let word = raw(libc::PTRACE_PEEKTEXT as u32, tid, at as usize, 0).ok()?;
    if word as u64 & 0xffff != 0x050f {
        return None;
    }
    let mut again = *regs;
    again.rip = at;
    again.rax = regs.orig_rax;
    Some(again)
}
#[cfg(target_arch = "x86_64")]
pub(crate) fn set_regs(tid: Tid, regs: &libc::user_regs_struct) -> Result<()> {
    check(
        "PTRACE_SETREGS",
        tid,
        raw(PTRACE_SETREGS, tid, 0, regs as *const _ as usize),
    )
}

/// Writes `new` over `old` (the registers the kernel holds for the
/// thread), touching only the words that differ: one `PTRACE_POKEUSER`
/// each when at most two differ, else one `PTRACE_SETREGS`. A SETREGS
/// rewrites every register, segment and base register included, and costs
/// about 2.6 POKEUSERs on x86_64 (`tests/bench/ptrace_requests.c`); a
/// breakpoint's step-over changes only rip (out of line) or rip and rsp
/// (an emulated push).
#[cfg(target_arch = "x86_64")]
pub(crate) fn write_changed_regs(
    tid: Tid,
    old: &libc::user_regs_struct,
    new: &libc::user_regs_struct,
) -> Result<()> {
    let (old, new) = (reg_words(old), reg_words(new));
    let changed = || (0..REG_WORDS).filter(|&i| old[i] != new[i]);
    if changed().count() > 2 {
        // SAFETY: `new` came from a user_regs_struct of the same size.
        let regs: libc::user_regs_struct = unsafe { std::mem::transmute(new) };
        return set_regs(tid, &regs);
    }
    for i in changed() {
        let r = raw(PTRACE_POKEUSER, tid, i * 8, new[i] as usize);
        check("PTRACE_POKEUSER", tid, r)?;
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
const REG_WORDS: usize = std::mem::size_of::<libc::user_regs_struct>() / 8;

/// The registers as the words of the user area (`user_regs_struct` is 27
/// u64 fields, at the offsets POKEUSER takes).
#[cfg(target_arch = "x86_64")]
fn reg_words(r: &libc::user_regs_struct) -> [u64; REG_WORDS] {
    // SAFETY: user_regs_struct is REG_WORDS plain u64 fields.
    unsafe { std::mem::transmute(*r) }
}

/// A decoded wait status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Exited(i32),
    Signaled {
        sig: Signal,
        core: bool,
    },
    /// Syscall-entry or -exit stop (SIGTRAP|0x80 with TRACESYSGOOD).
    SyscallStop,
    /// `PTRACE_EVENT_*` stop; `sig` is WSTOPSIG (for EVENT_STOP it tells a
    /// group-stop from a trap).
    Event {
        event: i32,
        sig: Signal,
    },
    /// Signal-delivery-stop (or the stop of an untraced child).
    SignalStop(Signal),
    Continued,
}

pub(crate) fn decode(status: i32) -> Status {
    if libc::WIFEXITED(status) {
        Status::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Status::Signaled {
            sig: Signal(libc::WTERMSIG(status)),
            core: libc::WCOREDUMP(status),
        }
    } else if libc::WIFSTOPPED(status) {
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        if sig == (libc::SIGTRAP | 0x80) {
            Status::SyscallStop
        } else if event != 0 {
            Status::Event {
                event,
                sig: Signal(sig),
            }
        } else {
            Status::SignalStop(Signal(sig))
        }
    } else {
        Status::Continued
    }
}

/// Waits for any child or tracee of *this thread only* (`__WNOTHREAD`), so
/// that several tracers in one process (tests) never take each other's
/// events. Retries on EINTR.
pub(crate) fn wait_any(flags: i32) -> std::result::Result<Option<(Tid, i32)>, i32> {
    wait_for(-1, flags | libc::__WNOTHREAD)
}

/// `waitpid(pid, __WALL | flags)`; `Ok(None)` when WNOHANG found nothing.
pub(crate) fn wait_for(pid: i32, flags: i32) -> std::result::Result<Option<(Tid, i32)>, i32> {
    loop {
        let mut status = 0;
        // SAFETY: status is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL | flags) };
        if r > 0 {
            return Ok(Some((Tid(r), status)));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// A child stopped in a signal-delivery-stop under our ptrace.
    fn stopped_child() -> Tid {
        // SAFETY: the child only raises SIGSTOP and exits (async-signal-safe).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                libc::raise(libc::SIGSTOP);
                libc::_exit(0)
            }
        }
        let tid = Tid(pid);
        seize(tid, 0).unwrap();
        // Seized before its SIGSTOP (a signal-delivery-stop) or after (the
        // group-stop is then reported as PTRACE_EVENT_STOP): a ptrace-stop
        // either way.
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        assert!(libc::WIFSTOPPED(status), "{status:#x}");
        tid
    }

    #[test]
    fn only_the_changed_registers_are_written() {
        let tid = stopped_child();
        let old = get_regs(tid).unwrap();
        let mut one = old;
        one.rip += 1;
        one.rsp -= 8;
        write_changed_regs(tid, &old, &one).unwrap();
        assert_eq!(get_regs(tid).unwrap(), one);
        let mut many = one;
        (many.rax, many.rbx, many.r12) = (1, 2, 3);
        write_changed_regs(tid, &one, &many).unwrap();
        assert_eq!(get_regs(tid).unwrap(), many);
        write_changed_regs(tid, &many, &many).unwrap();
        assert_eq!(get_regs(tid).unwrap(), many);
        // SAFETY: our own child.
        unsafe {
            libc::kill(tid.0, libc::SIGKILL);
            libc::waitpid(tid.0, std::ptr::null_mut(), libc::__WALL);
        }
    }
}
