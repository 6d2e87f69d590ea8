//! The control surface of the tracer thread: attach, set_events, control,
//! detach, timers, ending the session. [`Control`] is what callbacks (via
//! [`Cx`](super::Cx)), timer ticks and commands from other threads work
//! with; all of it runs on the tracer thread, so none of it takes a lock.

use std::time::Instant;

use super::error::{Error, Result};
use super::ptrace;
use super::thread::{Attachment, Run, SyscallSource, Thread};
use super::{EngineId, Events, ExitStatus, ResumeAction, Signal, Tid, TidMap};

/// How `attach` treats an engine that is already attached (utrace's
/// `UTRACE_ATTACH_CREATE`, `_EXCLUSIVE` and match-only lookups).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// Attach, or return the existing attachment.
    Create,
    /// Attach; fail with `AlreadyAttached` if the engine is already there.
    Exclusive,
    /// Only look up an existing attachment; fail with `NotAttached`.
    MatchExisting,
}

/// What `attach` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attached {
    New,
    Existing,
}

/// The answer of `control` (seed 002's `0` / `-EINPROGRESS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlStatus {
    /// The action was recorded and takes effect at the thread's next resume.
    Done,
    /// `Stop`: the thread already sits in a ptrace-stop; it is safe to
    /// examine now.
    AlreadyStopped,
    /// The thread is running; it was interrupted and the engine gets its
    /// `report_quiesce` (or, for `Interrupt`, `report_signal`) soon.
    InProgress,
}

/// Why `Tracer::run` returned. Every thread is detached by then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// `Control::end`/`TracerHandle::end` was called.
    Requested,
    /// The process given to `end_when_exits` ended.
    ProcessExited { pid: Tid, status: ExitStatus },
    /// SIGINT, SIGTERM or SIGHUP arrived (see `safety`).
    Signal(Signal),
}

/// For people: "process 123 exited with status 0", as `-v` prints it.
impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::Requested => f.write_str("the script ended it"),
            EndReason::ProcessExited {
                pid,
                status: ExitStatus::Exited(code),
            } => write!(f, "process {pid} exited with status {code}"),
            EndReason::ProcessExited {
                pid,
                status: ExitStatus::Signaled { sig, .. },
            } => write!(f, "process {pid} was killed by {sig}"),
            EndReason::Signal(sig) => write!(f, "utap received {sig}"),
        }
    }
}

/// Names a timer registered with `add_timer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(pub u64);

/// A periodic callback on the tracer thread: returns its next deadline, or
/// `None` to end.
pub type Tick = Box<dyn FnMut(&mut Control) -> Option<Instant>>;

pub(crate) struct Timer {
    pub id: TimerId,
    pub deadline: Instant,
    /// Taken out while it runs.
    pub tick: Option<Tick>,
}

/// State shared by the tracer loop and everything that controls it.
#[derive(Default)]
pub(crate) struct Core {
    pub threads: TidMap<Thread>,
    /// First stops of auto-attached children whose creator has not
    /// reported the clone yet (wait can deliver them in either order).
    pub orphans: TidMap<i32>,
    /// Wait statuses to handle again (adopted orphans).
    pub replay: Vec<(Tid, i32)>,
    /// Wait statuses other shards reaped that may be ours (`foreign`).
    pub passed: Vec<(Tid, i32)>,
    /// Stopped threads whose engines changed their minds.
    pub pending_resolve: Vec<Tid>,
    pub end: Option<EndReason>,
    pub end_on_exit: Option<Tid>,
    /// A termination signal kills every traced process (`kill_on_signal`).
    pub kill_on_signal: bool,
    /// A seccomp listener for each new thread (`listen`), when the
    /// session serves syscalls by notification.
    pub thread_listeners: Option<std::sync::Arc<super::ThreadListeners>>,
    pub timers: Vec<Timer>,
    pub next_timer: u64,
    pub engine_count: u32,
    /// ptrace-stops handled so far (every wait status but deaths).
    pub stops: u64,
    /// Runs once when the end is decided, before threads are detached.
    pub on_end: Option<EndHook>,
    /// Breakpoint sites, trampolines and shadow stacks (`crate::uprobe`).
    pub uprobes: crate::uprobe::Breakpoints,
    /// Wait statuses of threads held during a breakpoint single-step.
    pub uprobes_held: Vec<(Tid, i32)>,
    /// Threads are held for a text change made in the current report
    /// (`utrace::hold`): released by the loop after it.
    pub text_hold: bool,
    /// The registers of the breakpoint stop being reported: handed to the
    /// engines' `Cx` and back, so a hit costs one GETREGS.
    #[cfg(target_arch = "x86_64")]
    pub bp_regs: Option<super::Regs>,
    /// The registers the kernel holds for the thread of that stop, when
    /// known (engines' `Cx::set_regs` keep it current): the step-over then
    /// writes only what it changes (`ptrace::write_changed_regs`).
    #[cfg(target_arch = "x86_64")]
    pub bp_kernel: Option<super::Regs>,
    /// This tracer's place among the session's tracer threads (`shard`).
    pub shard: Option<super::shard::ShardRef>,
    /// Its threads that stopped often enough to count as busy (`shard`).
    pub busy: usize,
    /// Handlers that run inside the traced programs (`crate::dataplane`).
    pub dataplane: Option<Box<crate::dataplane::Plane>>,
}

impl Core {
    /// The traced threads of process `pid`.
    pub(crate) fn threads_of(&self, pid: Tid) -> Vec<Tid> {
        self.threads
            .values()
            .filter(|t| t.tgid == pid)
            .map(|t| t.tid)
            .collect()
    }
}

/// See [`Control::on_end`].
pub type EndHook = Box<dyn FnOnce(&mut Control, EndReason)>;

/// The tracer's controls, lent to callbacks, ticks and commands.
pub struct Control<'a> {
    pub(crate) core: &'a mut Core,
}

impl Control<'_> {
    /// Attaches `engine` to thread `tid` with `events`. A thread not yet
    /// traced is seized (`PTRACE_SEIZE`); it must be a thread this user may
    /// trace.
    pub fn attach(
        &mut self,
        tid: Tid,
        engine: EngineId,
        mode: AttachMode,
        events: Events,
    ) -> Result<Attached> {
        if engine.0 >= self.core.engine_count {
            return Err(Error::NotAttached { tid, engine });
        }
        if !self.core.threads.contains_key(&tid) {
            if mode == AttachMode::MatchExisting {
                return Err(Error::NotAttached { tid, engine });
            }
            self.seize(tid)?;
        }
        let thread = self
            .core
            .threads
            .get_mut(&tid)
            .ok_or(Error::NoSuchThread(tid))?;
        if thread.attachment(engine).is_some() {
            return match mode {
                AttachMode::Exclusive => Err(Error::AlreadyAttached { tid, engine }),
                _ => Ok(Attached::Existing),
            };
        }
        if mode == AttachMode::MatchExisting {
            return Err(Error::NotAttached { tid, engine });
        }
        thread.attachments.push(Attachment {
            engine,
            events,
            action: ResumeAction::Resume,
            skip_exit: false,
        });
        thread.detach_pending = false;
        self.mode_changed(tid);
        Ok(Attached::New)
    }

    /// Seizes every thread of process `pid` (repeating until no new thread
    /// appears) and returns their ids. Attach engines to them afterwards;
    /// threads they create later are followed by engines with `FOLLOW`.
    ///
    /// A process that keeps creating threads is normal: a thread that
    /// exits meanwhile is skipped, and one created by a thread already
    /// seized is ours already (the kernel attached it; it is reported
    /// through its creator's clone event once `run` starts), so neither
    /// is an error. EPERM is an error only for a live thread that some
    /// other tracer holds or that we may not trace.
    ///
    /// Every thread is interrupted as soon as it is seized, so a process
    /// of many busy threads stops competing with the tracer for the CPU
    /// as the attach proceeds (they are resumed at their first stop once
    /// `run` starts), and the tracer thread asks for a higher priority
    /// meanwhile (granted only to privileged users): with a thousand
    /// runnable threads a tracer at normal priority waits for a whole
    /// round of them between two seizes.
    pub fn attach_process(&mut self, pid: Tid) -> Result<Vec<Tid>> {
        let _boost = Boost::new();
        loop {
            let mut new = 0;
            for tid in process_threads(pid)? {
                if !self.core.threads.contains_key(&tid) {
                    // Listed in /proc/PID/task: a thread of `pid`, no need
                    // to read its status (one syscall less per thread
                    // counts when a thousand busy threads compete).
                    match self.seize_in(tid, pid) {
                        Ok(()) => {
                            new += 1;
                            if let Some(t) = self.core.threads.get_mut(&tid) {
                                let _ = request_stop(t, false);
                            }
                        }
                        Err(Error::Gone(_)) => {}
                        Err(Error::Os {
                            errno: libc::EPERM, ..
                        }) if tid != pid && !foreign(tid) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            if new == 0 {
                break;
            }
        }
        let mut tids = self.core.threads_of(pid);
        tids.sort();
        Ok(tids)
    }

    fn seize(&mut self, tid: Tid) -> Result<()> {
        let tgid = proc_tgid(tid).ok_or(Error::Gone(tid))?;
        self.seize_in(tid, tgid)
    }

    /// Seizes `tid`, a thread of process `tgid`.
    fn seize_in(&mut self, tid: Tid, tgid: Tid) -> Result<()> {
        ptrace::seize(tid, ptrace::OPTIONS)?;
        self.core
            .threads
            .insert(tid, Thread::new(tid, tgid, Run::Running));
        Ok(())
    }

    /// Replaces `engine`'s event mask on `tid`. If the thread must now be
    /// resumed differently (syscall stops on or off) it is interrupted once
    /// to switch.
    pub fn set_events(&mut self, tid: Tid, engine: EngineId, events: Events) -> Result<()> {
        let thread = self
            .core
            .threads
            .get_mut(&tid)
            .ok_or(Error::NoSuchThread(tid))?;
        thread
            .attachment(engine)
            .ok_or(Error::NotAttached { tid, engine })?
            .events = events;
        self.mode_changed(tid);
        Ok(())
    }

    /// The events `engine` asked for on `tid`.
    pub fn events(&self, tid: Tid, engine: EngineId) -> Result<Events> {
        let thread = self
            .core
            .threads
            .get(&tid)
            .ok_or(Error::NoSuchThread(tid))?;
        let a = thread.attachments.iter().find(|a| a.engine == engine);
        a.map(|a| a.events)
            .ok_or(Error::NotAttached { tid, engine })
    }

    /// A running thread whose resume mode no longer fits its engines' masks
    /// gets one PTRACE_INTERRUPT so the next resume uses the right mode.
    fn mode_changed(&mut self, tid: Tid) {
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        if thread.run == Run::Running && thread.syscall_mode() != thread.mode {
            let _ = request_stop(thread, false);
        }
    }

    /// utrace_control: records `engine`'s wish for `tid`.
    pub fn control(
        &mut self,
        tid: Tid,
        engine: EngineId,
        action: ResumeAction,
    ) -> Result<ControlStatus> {
        let thread = self
            .core
            .threads
            .get_mut(&tid)
            .ok_or(Error::NoSuchThread(tid))?;
        let att = thread
            .attachment(engine)
            .ok_or(Error::NotAttached { tid, engine })?;
        if action == ResumeAction::Detach {
            return self.detach(tid, engine).map(|()| ControlStatus::Done);
        }
        att.action = action;
        match (thread.run, action) {
            (Run::Stopped, ResumeAction::Stop) => Ok(ControlStatus::AlreadyStopped),
            (Run::Stopped, _) => {
                self.core.pending_resolve.push(tid);
                Ok(ControlStatus::Done)
            }
            (_, ResumeAction::Stop | ResumeAction::Interrupt | ResumeAction::Report) => {
                request_stop(thread, true)?;
                Ok(ControlStatus::InProgress)
            }
            _ => Ok(ControlStatus::Done),
        }
    }

    /// Detaches `engine` from `tid`. The last engine gone, the thread is
    /// detached from ptrace at once if stopped, else interrupted and
    /// detached at its next stop: a thread on its way to a stop still ends
    /// up running (seed 002's race).
    pub fn detach(&mut self, tid: Tid, engine: EngineId) -> Result<()> {
        let thread = self
            .core
            .threads
            .get_mut(&tid)
            .ok_or(Error::NoSuchThread(tid))?;
        let before = thread.attachments.len();
        thread.attachments.retain(|a| a.engine != engine);
        if thread.attachments.len() == before {
            return Err(Error::NotAttached { tid, engine });
        }
        if thread.run == Run::Stopped {
            self.core.pending_resolve.push(tid);
        } else if thread.attachments.is_empty() {
            thread.detach_pending = true;
            if thread.run != Run::Starting {
                let _ = request_stop(thread, false);
            }
        }
        Ok(())
    }

    /// utrace_barrier on the tracer thread: callbacks run synchronously
    /// here, so every effect of `engine`'s earlier answers on `tid` is
    /// already applied. Fails if the engine is no longer attached (it
    /// detached, or the thread is gone), like utrace's -ESRCH.
    pub fn barrier(&self, tid: Tid, engine: EngineId) -> Result<()> {
        self.events(tid, engine).map(|_| ())
    }

    /// Threads currently traced, sorted.
    pub fn threads(&self) -> Vec<Tid> {
        let mut v: Vec<Tid> = self.core.threads.keys().copied().collect();
        v.sort();
        v
    }

    /// The process of a traced thread.
    pub fn process_of(&self, tid: Tid) -> Option<Tid> {
        self.core.threads.get(&tid).map(|t| t.tgid)
    }

    /// Whether a traced thread sits in a ptrace-stop right now.
    pub fn is_stopped(&self, tid: Tid) -> Option<bool> {
        self.core.threads.get(&tid).map(|t| t.run == Run::Stopped)
    }

    /// Tells the core where syscall entries of process `pid` (and of the
    /// processes it creates later) come from.
    pub fn set_syscall_source(&mut self, pid: Tid, source: SyscallSource) {
        for t in self.core.threads.values_mut().filter(|t| t.tgid == pid) {
            t.source = source;
        }
    }

    /// Lets the spawned command `pid`, stopped at its exec stop and under
    /// no seccomp filter, outlive the tracer: its `PTRACE_O_EXITKILL` goes
    /// (threads and processes it creates inherit the options), so a
    /// `kill -9` of utap detaches it as it detaches an attached process.
    /// Under a RET_TRACE filter it must keep it: untraced, the calls the
    /// filter traps would fail with ENOSYS.
    pub fn outlive_tracer(&mut self, pid: Tid) -> Result<()> {
        ptrace::set_options(pid, ptrace::OPTIONS)?;
        for t in self.core.threads.values_mut().filter(|t| t.tgid == pid) {
            t.exitkill = false;
        }
        Ok(())
    }

    /// How many ptrace-stops the tracer has handled so far (syscall,
    /// seccomp, signal, event and interrupt stops; deaths are not stops).
    /// What tracing has cost the tracees, for `-v` and the tests.
    pub fn stop_count(&self) -> u64 {
        match &self.core.shard {
            Some(s) => {
                let stats = s.group.stats();
                let others: u64 = stats.iter().map(|x| x.stops).sum::<u64>() - stats[s.index].stops;
                others + self.core.stops
            }
            None => self.core.stops,
        }
    }

    /// Per tracer thread of the session (`Tracer::enable_shards`): its
    /// stops and the threads handed over to it; empty with one tracer
    /// thread.
    pub fn shard_stats(&self) -> Vec<super::ShardStats> {
        self.core
            .shard
            .as_ref()
            .map_or_else(Vec::new, |s| s.group.stats())
    }

    /// Which of the session's tracer threads this is (0: the one that
    /// started the session, which runs its timers and end hook).
    pub fn shard_index(&self) -> usize {
        self.core.shard.as_ref().map_or(0, |s| s.index)
    }

    /// Ends `run` after the current report; every thread is detached.
    pub fn end(&mut self, reason: EndReason) {
        self.core.end.get_or_insert(reason);
    }

    /// Runs `hook` on the tracer thread once the session's end is decided
    /// (any [`EndReason`]), before any thread is detached: what the user
    /// waits for (end probes, output) need not wait for detaching many
    /// threads. Under `kill_on_signal` the processes are already killed.
    pub fn on_end(&mut self, hook: impl FnOnce(&mut Control, EndReason) + 'static) {
        self.core.on_end = Some(Box::new(hook));
    }

    /// Ends `run` when process `pid` has exited.
    pub fn end_when_exits(&mut self, pid: Tid) {
        self.core.end_on_exit = Some(pid);
    }

    /// On SIGINT/SIGTERM/SIGHUP (with `catch_termination_signals`), kill
    /// every traced process instead of leaving it running untraced, as
    /// strace's `--kill-on-exit` (implied by its `--seccomp-bpf`): a
    /// process under a seccomp RET_TRACE filter cannot run untraced (the
    /// calls the filter traps fail with ENOSYS).
    pub fn kill_on_signal(&mut self) {
        self.core.kill_on_signal = true;
    }

    /// Calls `tick` on the tracer thread at `first`, then at each deadline
    /// it returns. Ticks run between reports, never during one.
    pub fn add_timer(
        &mut self,
        first: Instant,
        tick: impl FnMut(&mut Control) -> Option<Instant> + 'static,
    ) -> TimerId {
        let id = TimerId(self.core.next_timer);
        self.core.next_timer += 1;
        self.core.timers.push(super::control::Timer {
            id,
            deadline: first,
            tick: Some(Box::new(tick)),
        });
        id
    }

    /// Resumes `tid` (as `control(tid, engine, Resume)`) at `at`: an engine
    /// that returned `Stop` holds a thread for a while without blocking
    /// anyone (delay injection). The tracer thread never sleeps for it; a
    /// thread gone by then is no error.
    pub fn resume_at(&mut self, tid: Tid, engine: EngineId, at: Instant) -> TimerId {
        self.add_timer(at, move |ctl| {
            let _ = ctl.control(tid, engine, ResumeAction::Resume);
            None
        })
    }

    /// Sends `sig` to the traced thread `tid` (`tgkill`); it is reported
    /// at its delivery like any signal. Only traced threads: never the
    /// tracer itself.
    pub fn send_signal(&mut self, tid: Tid, sig: Signal) -> Result<()> {
        let tgid = self.process_of(tid).ok_or(Error::NoSuchThread(tid))?;
        // SAFETY: a plain syscall on integers.
        if unsafe { libc::syscall(libc::SYS_tgkill, tgid.0, tid.0, sig.0) } == 0 {
            Ok(())
        } else {
            Err(Error::os("tgkill", tid, ptrace::errno()))
        }
    }

    /// Removes a timer (also from inside its own tick).
    /// Serves the syscall probes `image` compiled for the program in the
    /// program (`crate::dataplane`), at the sites its seccomp stops show.
    pub fn enable_dataplane(
        &mut self,
        image: std::sync::Arc<crate::dataplane::InProcImage>,
        patches_at_attach: bool,
    ) {
        let mut plane = crate::dataplane::Plane::new(image);
        plane.patches_at_attach = patches_at_attach;
        self.core.dataplane = Some(Box::new(plane));
    }

    /// See `Core::dataplane_hold_still`.
    pub fn dataplane_hold_still(&mut self) -> bool {
        self.core.dataplane_hold_still()
    }

    /// Stops every in-process handler and takes the data plane out of
    /// the programs (threads held until detached or the current report
    /// ends): the region then holds the final values to fold.
    pub fn dataplane_quiesce(&mut self) {
        self.core.dataplane_quiesce();
    }

    /// The data plane, if on.
    pub fn dataplane(&self) -> Option<&crate::dataplane::Plane> {
        self.core.dataplane.as_deref()
    }

    pub fn cancel_timer(&mut self, id: TimerId) {
        self.core.timers.retain(|t| t.id != id);
    }
}

/// Sends one PTRACE_INTERRUPT to a running or listening thread (not twice);
/// `quiesce` asks for a quiesce report at the resulting stop.
pub(crate) fn request_stop(thread: &mut Thread, quiesce: bool) -> Result<()> {
    thread.quiesce_due |= quiesce;
    if matches!(thread.run, Run::Running | Run::Listening) && !thread.interrupted {
        match ptrace::interrupt(thread.tid) {
            Ok(()) | Err(Error::Gone(_)) => thread.interrupted = true,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The calling thread at nice -20 while it lives, if allowed (root or
/// CAP_SYS_NICE); its former nice value afterwards.
struct Boost(Option<libc::c_int>);

impl Boost {
    fn new() -> Boost {
        // SAFETY: get/setpriority on the calling thread only.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            *libc::__errno_location() = 0;
            let old = libc::getpriority(libc::PRIO_PROCESS, tid);
            if *libc::__errno_location() != 0 {
                return Boost(None);
            }
            match libc::setpriority(libc::PRIO_PROCESS, tid, -20) {
                0 => Boost(Some(old)),
                _ => Boost(None),
            }
        }
    }
}

impl Drop for Boost {
    fn drop(&mut self) {
        if let Some(old) = self.0 {
            // SAFETY: as in new().
            unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, old) };
        }
    }
}

/// Whether `tid` is a live thread traced by someone else (or by nobody,
/// when the kernel refused us): not one that is exiting (ptrace refuses
/// those with EPERM too) or that we trace through its creator's clone.
fn foreign(tid: Tid) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", tid.0)) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("")
    };
    let exiting = matches!(field("State:").chars().next(), Some('Z' | 'X'));
    // SAFETY: getpid has no memory effects.
    let ours = field("TracerPid:") == unsafe { libc::getpid() }.to_string();
    !exiting && !ours
}

/// The process a thread belongs to, from /proc (None if it is gone).
pub(crate) fn proc_tgid(tid: Tid) -> Option<Tid> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", tid.0)).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Tgid:"))?;
    line.trim().parse().ok().map(Tid)
}

fn process_threads(pid: Tid) -> Result<Vec<Tid>> {
    let dir = std::fs::read_dir(format!("/proc/{}/task", pid.0)).map_err(|e| {
        Error::os(
            "reading /proc/PID/task",
            pid,
            e.raw_os_error().unwrap_or(libc::ESRCH),
        )
    })?;
    Ok(dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .map(Tid)
        .collect())
}
