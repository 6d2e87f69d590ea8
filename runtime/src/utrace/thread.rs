//! Per-thread state: the engines attached to a thread, where the thread is
//! (running, in a ptrace-stop, listening in a group-stop), and the
//! arbitration of the engines' resume actions.

use super::ptrace::{PTRACE_CONT, PTRACE_SINGLEBLOCK, PTRACE_SINGLESTEP, PTRACE_SYSCALL};
use super::{EngineId, Events, ResumeAction, Signal, Tid};

/// One engine attached to one thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Attachment {
    pub engine: EngineId,
    pub events: Events,
    /// The engine's last word: its last callback return or `control`.
    pub action: ResumeAction,
    /// At the current syscall's entry the engine said it does not want
    /// this syscall's exit report (`Cx::want_syscall_exit(false)`); reset
    /// at every entry.
    pub skip_exit: bool,
}

/// Where a traced thread is, as far as the tracer knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Run {
    /// Resumed; its next stop will come through wait.
    Running,
    /// In a ptrace-stop: registers readable, waiting for our decision.
    Stopped,
    /// In a group-stop resumed with PTRACE_LISTEN: stopped as if untraced.
    Listening,
    /// Seized by the kernel on clone, its first stop not yet seen.
    Starting,
}

/// Whether a stop can hand the thread over (see `shard`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parkable {
    No,
    /// A syscall entry (reported): the call is skipped and made again.
    Entry,
    /// An interrupt or first stop outside any syscall.
    Quiet,
}

/// Where syscall entries come from for a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallSource {
    /// `PTRACE_SYSCALL`: an entry and an exit stop for every syscall.
    Ptrace,
    /// A seccomp filter returning RET_TRACE (installed by the caller's
    /// pre-exec hook): one stop per selected syscall, `PTRACE_CONT` between
    /// them, `PTRACE_SYSCALL` only when an engine wants the exit.
    Seccomp,
    /// Syscall User Dispatch (`dataplane::dispatch`): `PTRACE_CONT`, a
    /// SIGSYS stop at a syscall made outside the data plane's region; a
    /// call the tracer lets through runs under `PTRACE_SYSCALL` (entry
    /// and exit stops) while `dispatching`.
    Dispatch,
}

/// How a thread is resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Cont,
    Syscall,
    Step,
    Block,
    Listen,
}

impl Mode {
    pub fn request(self) -> u32 {
        match self {
            Mode::Cont | Mode::Listen => PTRACE_CONT,
            Mode::Syscall => PTRACE_SYSCALL,
            Mode::Step => PTRACE_SINGLESTEP,
            Mode::Block => PTRACE_SINGLEBLOCK,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Thread {
    pub tid: Tid,
    /// The process (thread group) id.
    pub tgid: Tid,
    pub attachments: Vec<Attachment>,
    pub run: Run,
    /// The next syscall-stop is an exit stop.
    pub in_syscall: bool,
    /// The syscall being exited was entered before tracing began (the
    /// execve that started a spawned command): its exit is not reported,
    /// so that no engine sees a return without its entry.
    pub entered_untraced: bool,
    pub source: SyscallSource,
    /// The mode the thread was last resumed with.
    pub mode: Mode,
    /// PTRACE_INTERRUPT sent; a PTRACE_EVENT_STOP trap is on its way.
    pub interrupted: bool,
    /// Held (`hold`) inside this syscall, whose entry was reported: the
    /// kernel makes it again when the thread goes on (ERESTART*), and that
    /// second entry is not a second call.
    pub restarting: Option<u64>,
    /// An engine asked for a quiesce report at the next stop.
    pub quiesce_due: bool,
    /// The thread is in a group-stop (resume with PTRACE_LISTEN).
    pub group_stopped: bool,
    /// Detach at the next stop (no engine left, or the session ends).
    pub detach_pending: bool,
    /// The signal of the current signal-delivery-stop, delivered on resume.
    pub pending_signal: Option<Signal>,
    /// A signal an engine injected: delivered unreported when it arrives.
    pub injected: Option<Signal>,
    /// A step was requested; the next SIGTRAP is its completion.
    pub stepping: bool,
    /// The real PTRACE_SINGLEBLOCK failed once: use single steps.
    pub no_blockstep: bool,
    /// Single-stepping the original instruction of this breakpoint site
    /// (the fallback step-over); the int3 goes back when it completes.
    pub bp_step: Option<u64>,
    /// Stops here (this shard) so far: a thread that keeps stopping is
    /// worth moving to a less busy shard (`shard`), one that stops a few
    /// times and exits is not.
    pub stops_here: u32,
    /// Counted among its shard's busy threads.
    pub settled: bool,
    /// Where the current stop may park the thread for a handover.
    pub parkable: Parkable,
    /// Parked at a syscall entry already reported: the call is made again
    /// after the handover, and that entry stop is not reported.
    pub retrap: bool,
    /// Under `SyscallSource::Dispatch`: between a SIGSYS stop the tracer
    /// let through and that call's exit stop (the selector reads ALLOW).
    pub dispatching: bool,
    /// The call let through is to have its site patched at its exit stop.
    pub patch_at_exit: bool,
    /// Seized with PTRACE_O_EXITKILL (a spawned command and what it
    /// creates): a handed-over thread is seized again the same way.
    pub exitkill: bool,
    /// Whether its seccomp filter chain has a listener (`listen`), and
    /// its seccomp stops so far (until it has).
    pub listening: super::listen::Listening,
    pub seccomp_stops: u32,
    /// Handed over by another shard (`shard`): its registers before it
    /// was parked, put back at its first stop here, and when it was parked.
    #[cfg(target_arch = "x86_64")]
    pub restore: Option<Box<(super::Regs, std::time::Instant)>>,
}

impl Thread {
    pub fn new(tid: Tid, tgid: Tid, run: Run) -> Thread {
        Thread {
            tid,
            tgid,
            attachments: Vec::new(),
            run,
            in_syscall: false,
            entered_untraced: false,
            source: SyscallSource::Ptrace,
            mode: Mode::Cont,
            interrupted: false,
            restarting: None,
            quiesce_due: false,
            group_stopped: false,
            detach_pending: false,
            pending_signal: None,
            injected: None,
            stepping: false,
            no_blockstep: false,
            bp_step: None,
            stops_here: 0,
            settled: false,
            parkable: Parkable::No,
            retrap: false,
            dispatching: false,
            patch_at_exit: false,
            exitkill: false,
            listening: Default::default(),
            seccomp_stops: 0,
            #[cfg(target_arch = "x86_64")]
            restore: None,
        }
    }

    /// A thread or process this one created: traced by the kernel's
    /// auto-attach, with this thread's FOLLOW engines and syscall source.
    pub fn child(&self, tid: Tid, tgid: Tid) -> Thread {
        let mut child = Thread::new(tid, tgid, Run::Starting);
        child.source = self.source;
        child.exitkill = self.exitkill;
        // Filters are inherited, and with them a listener.
        child.listening = self.listening;
        child.attachments = self
            .attachments
            .iter()
            .filter(|a| a.events.contains(Events::FOLLOW))
            .map(|a| Attachment {
                action: ResumeAction::Resume,
                skip_exit: false,
                ..*a
            })
            .collect();
        child
    }

    pub fn attachment(&mut self, engine: EngineId) -> Option<&mut Attachment> {
        self.attachments.iter_mut().find(|a| a.engine == engine)
    }

    /// The union of the engines' event masks.
    pub fn events(&self) -> Events {
        self.attachments
            .iter()
            .fold(Events::NONE, |m, a| m | a.events)
    }

    pub fn wants(&self, events: Events) -> bool {
        self.attachments.iter().any(|a| a.events.intersects(events))
    }

    /// Some engine wants the exit report of the syscall the thread is in:
    /// it subscribed SYSCALL_EXIT and did not decline this syscall's exit
    /// at its entry.
    pub fn wants_exit(&self) -> bool {
        self.attachments
            .iter()
            .any(|a| a.events.contains(Events::SYSCALL_EXIT) && !a.skip_exit)
    }

    /// A new syscall entry: every engine's exit choice starts over.
    pub fn reset_exit_choices(&mut self) {
        self.attachments
            .iter_mut()
            .for_each(|a| a.skip_exit = false);
    }

    /// The prevailing action: the smallest of the engines' last words.
    pub fn prevailing(&self) -> ResumeAction {
        self.attachments
            .iter()
            .map(|a| a.action)
            .min()
            .unwrap_or(ResumeAction::Resume)
    }

    /// After the thread resumes, only `Stop` would have survived, and a
    /// resuming thread has none.
    pub fn consume_actions(&mut self) {
        for a in &mut self.attachments {
            if !a.action.is_persistent() {
                a.action = ResumeAction::Resume;
            }
        }
    }

    /// How to resume for this action and the engines' masks.
    pub fn mode_for(&self, action: ResumeAction) -> Mode {
        if self.bp_step.is_some() {
            return Mode::Step;
        }
        if self.group_stopped {
            return Mode::Listen;
        }
        match action {
            ResumeAction::SingleStep => return Mode::Step,
            ResumeAction::BlockStep if self.no_blockstep || !cfg!(target_arch = "x86_64") => {
                return Mode::Step;
            }
            ResumeAction::BlockStep => return Mode::Block,
            _ => {}
        }
        self.syscall_mode()
    }

    /// Cont or Syscall, from the engines' masks and the syscall source.
    /// Under seccomp the exit stop is taken only for a syscall some engine
    /// still wants the exit of (per-syscall choice at its entry); under
    /// `PTRACE_SYSCALL` entry and exit always both stop.
    pub fn syscall_mode(&self) -> Mode {
        let syscall = match self.source {
            SyscallSource::Seccomp => self.in_syscall && self.wants_exit(),
            SyscallSource::Ptrace => self
                .events()
                .intersects(Events::SYSCALL_ENTRY | Events::SYSCALL_EXIT),
            SyscallSource::Dispatch => self.dispatching,
        };
        if syscall { Mode::Syscall } else { Mode::Cont }
    }
}
