//! The tracer thread: owns every ptrace relationship, waits for stops,
//! runs the engines' callbacks, arbitrates their resume actions, and takes
//! commands from other threads.
//!
//! A [`Tracer`] is created on the thread that will run it and cannot move
//! (ptrace ties each tracee to the thread that attached it). Other threads
//! talk to it through a [`TracerHandle`]: a channel of closures that run on
//! the tracer thread, plus a ring of the doorbell (see `doorbell`) so the
//! tracer wakes from `waitpid` at once.

use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::sync::{Arc, mpsc};
use std::time::Instant;

use super::colocate::{Colocation, Colocator};
use super::control::{Core, EndReason};
use super::cx::{StopData, StopKind};
use super::doorbell::{self, Doorbell};
use super::error::{Error, Result};
use super::ptrace::{self, Status};
use super::thread::Attachment;
use super::{
    Control, ControlStatus, Cx, Engine, EngineId, Event, Events, ExitStatus, ResumeAction, Signal,
    Tid, safety,
};

/// Work sent from another thread; runs on the tracer thread.
pub(crate) type Command = Box<dyn FnOnce(&mut Control<'_>) + Send>;

/// One engine's event callback, given the prevailing action so far.
pub(crate) type Callback<'c> =
    &'c mut dyn FnMut(&mut dyn Engine, &mut Cx, ResumeAction) -> ResumeAction;

/// The tracer. See the module docs of `utrace` for the model.
pub struct Tracer {
    pub(crate) core: Core,
    pub(crate) engines: Vec<Box<dyn Engine>>,
    pub(crate) doorbell: Doorbell,
    commands: mpsc::Receiver<Command>,
    pub(crate) sender: mpsc::Sender<Command>,
    /// The other tracer threads this one started (`shard`).
    pub(crate) shards: super::shard::Shards,
    /// Reused list of the engines of the thread being reported.
    scratch: Vec<EngineId>,
    /// Brings the tracer thread to its tracees' CPU (see `colocate`).
    colocator: Colocator,
    /// ptrace relationships belong to this thread: not Send.
    _not_send: PhantomData<*const ()>,
}

impl Tracer {
    /// Creates a tracer owned by the calling thread.
    pub fn new() -> Result<Tracer> {
        let doorbell = Doorbell::new()?;
        safety::register(doorbell.ring.as_raw_fd());
        let (sender, commands) = mpsc::channel();
        Ok(Tracer {
            core: Core::default(),
            engines: Vec::new(),
            doorbell,
            commands,
            sender,
            shards: Default::default(),
            scratch: Vec::new(),
            colocator: Colocator::new(Colocation::from_env()),
            _not_send: PhantomData,
        })
    }

    /// Registers an engine; attach it to threads with `ctl().attach`.
    pub fn add_engine<E: Engine>(&mut self, engine: E) -> EngineId {
        self.engines.push(Box::new(engine));
        self.core.engine_count = self.engines.len() as u32;
        EngineId(self.engines.len() as u32 - 1)
    }

    /// The engine registered as `id`, if it is an `E`.
    pub fn engine<E: Engine>(&self, id: EngineId) -> Option<&E> {
        let e: &dyn std::any::Any = &**self.engines.get(id.0 as usize)?;
        e.downcast_ref()
    }

    /// The engine registered as `id`, mutably, if it is an `E`.
    pub fn engine_mut<E: Engine>(&mut self, id: EngineId) -> Option<&mut E> {
        let e: &mut dyn std::any::Any = &mut **self.engines.get_mut(id.0 as usize)?;
        e.downcast_mut()
    }

    /// The controls (attach, control, timers, ...) outside of callbacks.
    pub fn ctl(&mut self) -> Control<'_> {
        Control {
            core: &mut self.core,
        }
    }

    /// Gives the busy threads seccomp listeners of their own (see
    /// `listen`); before `enable_shards`.
    pub fn listen_in_threads(&mut self, listeners: super::ThreadListeners) {
        self.core.thread_listeners = Some(std::sync::Arc::new(listeners));
    }

    /// How the tracer thread places itself during `run` (default: from
    /// `UTAP_COLOCATE`, else [`colocate::DEFAULT`](super::colocate::DEFAULT)).
    pub fn set_colocation(&mut self, mode: Colocation) {
        self.colocator.set_mode(mode);
    }

    /// A handle for other threads.
    pub fn handle(&self) -> TracerHandle {
        TracerHandle {
            tx: self.sender.clone(),
            ring: Arc::clone(&self.doorbell.ring),
        }
    }

    /// Runs the event loop until the session ends (`Control::end`, the
    /// `end_when_exits` process exiting, or a termination signal), then
    /// detaches every thread and returns why it ended.
    pub fn run(&mut self) -> Result<EndReason> {
        self.drain_commands();
        let reason = loop {
            self.catch_up();
            if let Some(end) = self.core.end.take() {
                break self.end_group(end);
            }
            if let Some(sig) = safety::termination_signal() {
                crate::endtrace::mark("tracer saw the signal");
                if self.core.kill_on_signal {
                    self.kill_all();
                }
                break self.end_group(EndReason::Signal(sig));
            }
            // Another shard ended the session (after the signal check: a
            // signal's killing is every shard's to do for its tracees).
            if let Some(end) = self.core.shard.as_ref().and_then(|s| s.group.ended()) {
                if matches!(end, EndReason::Signal(_)) && self.core.kill_on_signal {
                    self.kill_all();
                }
                break end;
            }
            self.doorbell.set_deadline(self.next_deadline());
            let (tid, status) = match self.colocator.wait() {
                Ok(Some(w)) => w,
                Ok(None) => continue,
                Err(errno) => {
                    self.colocator.restore();
                    self.detach_all();
                    self.close_shard();
                    return Err(Error::Os {
                        op: "waitpid",
                        tid: Tid(-1),
                        errno,
                    });
                }
            };
            if tid == self.doorbell.pid {
                if let Err(e) = self.on_doorbell(status) {
                    self.colocator.restore();
                    self.detach_all();
                    self.close_shard();
                    return Err(e);
                }
            } else {
                if libc::WIFSTOPPED(status) {
                    self.colocator.at_stop(tid);
                }
                self.on_status(tid, status);
            }
        };
        crate::endtrace::mark("tracer loop ended");
        self.loop_ended();
        if let Some(hook) = self.core.on_end.take() {
            hook(
                &mut Control {
                    core: &mut self.core,
                },
                reason,
            );
        }
        self.colocator.restore();
        self.detach_all();
        self.close_shard();
        crate::endtrace::mark("all detached");
        // Commands that came too late still get their answers.
        self.drain_commands();
        Ok(reason)
    }

    /// SIGKILLs every traced process (and auto-attached children not yet
    /// reported), while still traced: they die without running untraced.
    fn kill_all(&mut self) {
        let tids = self.core.threads.values().map(|t| t.tgid);
        let orphans = self.core.orphans.keys().copied();
        for pid in tids.chain(orphans) {
            // SAFETY: kill(2) has no memory effects.
            unsafe { libc::kill(pid.0, libc::SIGKILL) };
        }
    }

    /// Deferred work: adopted orphans, re-arbitration, due ticks.
    fn catch_up(&mut self) {
        self.run_timers();
        loop {
            self.dataplane_unmap_quiesced();
            self.release_text_hold();
            if let Some((tid, status)) = self.core.replay.pop() {
                self.on_status(tid, status);
            } else if let Some((tid, status)) = self.core.passed.pop() {
                self.on_passed(tid, status);
            } else if let Some(tid) = self.core.pending_resolve.pop() {
                self.resolve(tid);
            } else {
                break;
            }
        }
    }

    fn on_doorbell(&mut self, status: i32) -> Result<()> {
        match ptrace::decode(status) {
            Status::SignalStop(_) | Status::Event { .. } => {
                self.doorbell.timer_fired();
                self.doorbell.rearm();
                self.drain_commands();
            }
            // Somebody killed it: a new child on the same eventfd, so
            // existing handles keep working.
            Status::Exited(_) | Status::Signaled { .. } => self.doorbell.respawn()?,
            _ => {}
        }
        Ok(())
    }

    /// This tracer's end is every shard's end (`shard`).
    fn end_group(&self, why: EndReason) -> EndReason {
        match &self.core.shard {
            Some(s) => s.group.end(why),
            None => why,
        }
    }

    pub(crate) fn drain_commands(&mut self) {
        while let Ok(cmd) = self.commands.try_recv() {
            cmd(&mut Control {
                core: &mut self.core,
            });
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.core.timers.iter().map(|t| t.deadline).min()
    }

    fn run_timers(&mut self) {
        if self.core.timers.is_empty() {
            return;
        }
        let now = Instant::now();
        let due: Vec<_> = self
            .core
            .timers
            .iter()
            .filter(|t| t.deadline <= now)
            .map(|t| t.id)
            .collect();
        for id in due {
            let Some(t) = self.core.timers.iter_mut().find(|t| t.id == id) else {
                continue;
            };
            let Some(mut tick) = t.tick.take() else {
                continue;
            };
            let next = tick(&mut Control {
                core: &mut self.core,
            });
            let pos = self.core.timers.iter().position(|t| t.id == id);
            match (pos, next) {
                (Some(p), Some(at)) => {
                    self.core.timers[p].deadline = at;
                    self.core.timers[p].tick = Some(tick);
                }
                (Some(p), None) => {
                    self.core.timers.remove(p);
                }
                (None, _) => {}
            }
        }
    }

    /// Calls back the engines of `tid` for one event, in attach order:
    /// `report_quiesce` first for engines that asked for QUIESCE, then
    /// `call` for engines whose mask intersects `wanted`. Each callback gets
    /// the prevailing action so far; each answer replaces that engine's last
    /// word. Returns whether quiesce reports were made. Nothing is called
    /// when no engine wants the event (the fast path).
    pub(crate) fn report(
        &mut self,
        tid: Tid,
        event: Event,
        kind: StopKind,
        mut call: Option<Callback>,
    ) -> bool {
        let wanted = event.mask();
        let Tracer {
            core,
            engines,
            scratch,
            ..
        } = self;
        let Some(thread) = core.threads.get(&tid) else {
            return false;
        };
        let explicit = wanted.is_empty();
        let exit = event == Event::SyscallExit;
        let wants = if exit {
            thread.wants_exit()
        } else {
            thread.wants(wanted)
        };
        if !explicit && !wants {
            return false;
        }
        scratch.clear();
        scratch.extend(thread.attachments.iter().map(|a| a.engine));
        let mut stop = StopData::new(kind, thread.tgid);
        #[cfg(target_arch = "x86_64")]
        if event == Event::Breakpoint {
            stop.regs = core.bp_regs.take();
        }
        let mut prevailing = ResumeAction::Resume;
        let mut quiesced = false;
        for &id in scratch.iter() {
            let Some(events) = attached_events(core, tid, id) else {
                continue;
            };
            if events.contains(Events::QUIESCE) {
                let engine = &mut *engines[id.0 as usize];
                let mut cx = Cx {
                    ctl: Control { core: &mut *core },
                    tid,
                    engine: id,
                    stop: &mut stop,
                };
                let a = engine.report_quiesce(&mut cx, prevailing, event);
                prevailing = record(core, tid, id, a, prevailing);
                quiesced = true;
            }
            let Some(call) = call.as_mut() else { continue };
            let Some(a) = attachment_of(core, tid, id) else {
                continue;
            };
            // An engine that declined this syscall's exit is not told.
            if !explicit && a.events.intersects(wanted) && !(exit && a.skip_exit) {
                let engine = &mut *engines[id.0 as usize];
                let mut cx = Cx {
                    ctl: Control { core: &mut *core },
                    tid,
                    engine: id,
                    stop: &mut stop,
                };
                let a = call(engine, &mut cx, prevailing);
                prevailing = record(core, tid, id, a, prevailing);
            }
        }
        #[cfg(target_arch = "x86_64")]
        if event == Event::Breakpoint {
            core.bp_regs = stop.regs;
        }
        quiesced
    }

    /// The signal report for engines with SIGNAL (or, for the injection
    /// report after an Interrupt, QUIESCE). Returns the signal to deliver.
    pub(crate) fn report_signal(&mut self, tid: Tid, original: Option<Signal>) -> Option<Signal> {
        let mut deliver = original;
        let Tracer {
            core,
            engines,
            scratch,
            ..
        } = self;
        let Some(thread) = core.threads.get(&tid) else {
            return original;
        };
        let wanted = if original.is_some() {
            Events::SIGNAL
        } else {
            Events::SIGNAL | Events::QUIESCE
        };
        if !thread.wants(wanted) {
            return original;
        }
        scratch.clear();
        scratch.extend(thread.attachments.iter().map(|a| a.engine));
        let mut stop = StopData::new(StopKind::Other, thread.tgid);
        let mut prevailing = ResumeAction::Resume;
        for &id in scratch.iter() {
            let Some(events) = attached_events(core, tid, id) else {
                continue;
            };
            if original.is_some() && events.contains(Events::QUIESCE) {
                let engine = &mut *engines[id.0 as usize];
                let mut cx = Cx {
                    ctl: Control { core: &mut *core },
                    tid,
                    engine: id,
                    stop: &mut stop,
                };
                let a = engine.report_quiesce(&mut cx, prevailing, Event::Signal);
                prevailing = record(core, tid, id, a, prevailing);
            }
            let Some(events) = attached_events(core, tid, id) else {
                continue;
            };
            if events.intersects(wanted) {
                let engine = &mut *engines[id.0 as usize];
                let mut cx = Cx {
                    ctl: Control { core: &mut *core },
                    tid,
                    engine: id,
                    stop: &mut stop,
                };
                let mut report = super::SignalReport { original, deliver };
                let a = engine.report_signal(&mut cx, prevailing, &mut report);
                deliver = report.deliver;
                prevailing = record(core, tid, id, a, prevailing);
            }
        }
        deliver
    }

    /// Post-mortem reports: death then reap, to engines that asked.
    pub(crate) fn report_death(&mut self, thread: &super::thread::Thread, status: ExitStatus) {
        let mut stop = StopData::new(StopKind::Dead, thread.tgid);
        for a in &thread.attachments {
            let engine = &mut *self.engines[a.engine.0 as usize];
            let mut cx = Cx {
                ctl: Control {
                    core: &mut self.core,
                },
                tid: thread.tid,
                engine: a.engine,
                stop: &mut stop,
            };
            if a.events.contains(Events::DEATH) {
                engine.report_death(&mut cx, status);
            }
            if a.events.contains(Events::REAP) {
                engine.report_reap(&mut cx);
            }
        }
    }
}

fn attached_events(core: &Core, tid: Tid, id: EngineId) -> Option<Events> {
    attachment_of(core, tid, id).map(|a| a.events)
}

fn attachment_of(core: &Core, tid: Tid, id: EngineId) -> Option<Attachment> {
    core.threads
        .get(&tid)?
        .attachments
        .iter()
        .find(|a| a.engine == id)
        .copied()
}

/// Records an engine's answer; `Detach` removes the engine from the thread.
fn record(
    core: &mut Core,
    tid: Tid,
    id: EngineId,
    action: ResumeAction,
    prevailing: ResumeAction,
) -> ResumeAction {
    let Some(thread) = core.threads.get_mut(&tid) else {
        return prevailing;
    };
    if action == ResumeAction::Detach {
        thread.attachments.retain(|a| a.engine != id);
        return prevailing;
    }
    if let Some(a) = thread.attachment(id) {
        a.action = action;
    }
    prevailing.prevail(action)
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if !self.core.threads.is_empty() || !self.core.orphans.is_empty() {
            self.detach_all();
        }
        self.close_shard();
        safety::unregister(self.doorbell.ring.as_raw_fd());
    }
}

/// Talks to a tracer from any thread. Commands run on the tracer thread
/// between reports, while `run` is running.
#[derive(Clone)]
pub struct TracerHandle {
    tx: mpsc::Sender<Command>,
    ring: Arc<std::os::fd::OwnedFd>,
}

impl TracerHandle {
    /// Runs `f` on the tracer thread without waiting for it.
    pub fn send(&self, f: impl FnOnce(&mut Control<'_>) + Send + 'static) -> Result<()> {
        self.tx.send(Box::new(f)).map_err(|_| Error::TracerGone)?;
        doorbell::ring(self.ring.as_raw_fd());
        Ok(())
    }

    /// Runs `f` on the tracer thread and waits for its result.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Control<'_>) -> R + Send + 'static,
    ) -> Result<R> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.send(move |ctl| {
            let _ = reply.send(f(ctl));
        })?;
        answer.recv().map_err(|_| Error::TracerGone)
    }

    /// `Control::control` from another thread.
    pub fn control(
        &self,
        tid: Tid,
        engine: EngineId,
        action: ResumeAction,
    ) -> Result<ControlStatus> {
        self.call(move |c| c.control(tid, engine, action))?
    }

    /// `Control::detach` from another thread.
    pub fn detach(&self, tid: Tid, engine: EngineId) -> Result<()> {
        self.call(move |c| c.detach(tid, engine))?
    }

    /// Returns once every callback and command that started before it has
    /// finished (utrace_barrier).
    pub fn barrier(&self) -> Result<()> {
        self.call(|_| ())
    }

    /// Asks the tracer to end the session (e.g. on Ctrl-C).
    pub fn end(&self) -> Result<()> {
        self.send(|c| c.end(EndReason::Requested))
    }
}
