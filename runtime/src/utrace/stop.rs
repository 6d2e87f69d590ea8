//! What the tracer does at each kind of stop, and how a stopped thread is
//! resumed once its engines have spoken.
//!
//! * Syscall stops alternate entry/exit (`Thread::in_syscall`); a seccomp
//!   stop is an entry unless `PTRACE_SYSCALL` already reported it.
//! * `PTRACE_EVENT_STOP` carrying a stop signal is a group-stop: engines
//!   get `report_jctl`, and the thread is resumed with `PTRACE_LISTEN` so it
//!   stays stopped exactly as it would untraced (the kernel still shows a
//!   listening tracee as `t`, not `T`), until SIGCONT (which
//!   arrives as another `PTRACE_EVENT_STOP`, with SIGTRAP). Any other
//!   `PTRACE_EVENT_STOP` is our `PTRACE_INTERRUPT` (quiesce) or a
//!   notification trap.
//! * Signal-delivery-stops go to `report_signal`; the signal chosen is
//!   passed to the restarting request. A SIGTRAP after a step request is
//!   the step's completion, reported as `report_quiesce(Event::Step)`.
//! * `Interrupt` runs the injection report (`report_signal` with no
//!   signal); an injected signal is queued with `tgkill` and delivered
//!   unreported when it comes out.
//! * The kernel stops even a SIGKILLed thread at `PTRACE_EVENT_EXIT`; there
//!   every engine's `Stop` is cancelled, so SIGKILL always ends a thread
//!   promptly.

use super::control::EndReason;
use super::cx::StopKind;
use super::ptrace::{self, Status};
use super::thread::{Mode, Parkable, Run, SyscallSource, Thread};
use super::{
    CloneInfo, CloneKind, Engine, Event, ExitStatus, Jctl, ResumeAction, Signal, Tid, Tracer,
};

impl Tracer {
    /// Handles one wait status.
    pub(crate) fn on_status(&mut self, tid: Tid, status: i32) {
        if !self.core.uprobes.stepping.is_empty() && self.hold_during_step(tid, status) {
            return;
        }
        let st = ptrace::decode(status);
        self.note_shard_stop();
        if self.pass_foreign(tid, st, status) {
            return;
        }
        if !self.core.threads.contains_key(&tid) && !self.exec_took_leader(tid, st) {
            self.on_stranger(tid, st, status);
            return;
        }
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        match st {
            Status::Exited(code) => return self.on_death(tid, ExitStatus::Exited(code)),
            Status::Signaled { sig, core } => {
                return self.on_death(tid, ExitStatus::Signaled { sig, core });
            }
            Status::Continued => return,
            _ => {}
        }
        self.core.stops += 1;
        thread.stops_here = thread.stops_here.saturating_add(1);
        thread.parkable = Parkable::No;
        // Handed over by another shard: back to where it was parked.
        #[cfg(target_arch = "x86_64")]
        if let Some(parked) = thread.restore.take() {
            let _ = ptrace::set_regs(tid, &parked.0);
            crate::guardian::thread_back(tid.0);
            super::shard::note_handover(&self.core.shard, parked.1);
        }
        let first = thread.run == Run::Starting;
        thread.run = Run::Stopped;
        // Any ptrace trap clears a pending PTRACE_INTERRUPT (the kernel's
        // ptrace_stop: "any trap clears pending STOP trap"): an interrupt
        // overtaken by a syscall, exec or signal stop never arrives, and the
        // next request_stop must send a new one.
        thread.interrupted = false;
        if thread.detach_pending {
            return self.detach_stopped(tid, st);
        }
        match st {
            Status::Event {
                event: ptrace::EVENT_STOP,
                sig,
            } if first => {
                self.dataplane_new_thread(tid);
                let Some(thread) = self.core.threads.get_mut(&tid) else {
                    return;
                };
                // The kernel's first stop of a child it attached for us.
                thread.group_stopped = sig.is_stop_signal();
                if !thread.group_stopped {
                    thread.parkable = Parkable::Quiet;
                }
                self.finish_stop(tid, false);
            }
            Status::SyscallStop => self.on_syscall_stop(tid),
            Status::SignalStop(sig) => self.on_signal_stop(tid, sig),
            Status::Event { event, sig } => self.on_event(tid, event, sig),
            _ => {}
        }
    }

    /// With several shards, a thread of ours that exec'd takes over its
    /// process leader's id, which another shard traced: its exec stop
    /// comes under the leader's id. The thread's record takes that id
    /// here, and the other shards forget the old leader (the kernel has
    /// let it go; it reports no death).
    fn exec_took_leader(&mut self, tid: Tid, st: Status) -> bool {
        let Status::Event {
            event: ptrace::EVENT_EXEC,
            ..
        } = st
        else {
            return false;
        };
        let Some(shard) = self.core.shard.clone() else {
            return false;
        };
        let Some(former) = ptrace::event_msg(tid).ok().map(|m| Tid(m as i32)) else {
            return false;
        };
        let Some(mut t) = self.core.threads.remove(&former) else {
            return false;
        };
        t.tid = tid;
        self.core.threads.insert(tid, t);
        shard.group.forget_elsewhere(shard.index, tid);
        true
    }

    /// A stop from a thread we do not know yet: the first stop of a child
    /// whose creator has not reported the clone. Kept until it does, or
    /// until the creator's leader dies (`adopt_orphans_of`); but one
    /// already at its exit event (its process is dying: the creator will
    /// never report) is let go to die now, since the leader's death is
    /// reported only once every other thread is reaped.
    fn on_stranger(&mut self, tid: Tid, st: Status, status: i32) {
        match st {
            Status::Exited(_) | Status::Signaled { .. } => {
                self.core.orphans.remove(&tid);
            }
            Status::Event {
                event: ptrace::EVENT_EXIT,
                ..
            } => {
                self.core.orphans.remove(&tid);
                let _ = ptrace::restart(ptrace::PTRACE_CONT, tid, None);
            }
            Status::Continued => {}
            _ => {
                self.core.orphans.insert(tid, status);
            }
        }
    }

    fn on_syscall_stop(&mut self, tid: Tid) {
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        if std::mem::take(&mut thread.retrap) {
            // The entry reported before a handover, made again.
            thread.in_syscall = true;
            return self.finish_stop(tid, false);
        }
        let entry = !thread.in_syscall;
        thread.in_syscall = entry;
        if entry {
            thread.parkable = Parkable::Entry;
        } else if thread.dispatching {
            self.dispatch_done(tid);
        }
        if self.dataplane_gadget_call(tid) {
            // The stub served it: a thread on PTRACE_SYSCALL that runs a
            // patched site (not armed, or a vfork child).
            return self.finish_stop(tid, false);
        }
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        let untraced = std::mem::take(&mut thread.entered_untraced);
        if entry {
            thread.reset_exit_choices();
        }
        let reported = if untraced && !entry {
            false
        } else if entry {
            self.report(
                tid,
                Event::SyscallEntry,
                StopKind::SyscallEntry,
                Some(&mut |e: &mut dyn Engine, cx, a| e.report_syscall_entry(cx, a)),
            )
        } else {
            self.report(
                tid,
                Event::SyscallExit,
                StopKind::SyscallExit,
                Some(&mut |e: &mut dyn Engine, cx, a| e.report_syscall_exit(cx, a)),
            )
        };
        self.finish_stop(tid, reported);
    }

    fn on_seccomp(&mut self, tid: Tid) {
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        let mut reported = false;
        thread.entered_untraced = false;
        if std::mem::take(&mut thread.retrap) {
            // The entry reported before a handover, made again.
            thread.in_syscall = true;
            return self.finish_stop(tid, false);
        }
        if !thread.in_syscall {
            if let Some(nr) = thread.restarting.take()
                && ptrace::get_regs(tid).is_ok_and(|r| r.orig_rax == nr)
            {
                // The call our hold interrupted, made again: its entry
                // was reported the first time.
                thread.in_syscall = true;
                return self.finish_stop(tid, false);
            }
            if self.maybe_listen(tid) {
                return self.finish_stop(tid, false);
            }
            if self.dataplane_seccomp(tid) {
                return;
            }
            let Some(thread) = self.core.threads.get_mut(&tid) else {
                return;
            };
            thread.in_syscall = true;
            thread.parkable = Parkable::Entry;
            thread.reset_exit_choices();
            reported = self.report(
                tid,
                Event::SyscallEntry,
                StopKind::SeccompEntry,
                Some(&mut |e: &mut dyn Engine, cx, a| e.report_syscall_entry(cx, a)),
            );
        }
        self.finish_stop(tid, reported);
    }

    fn on_signal_stop(&mut self, tid: Tid, sig: Signal) {
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        if thread.stepping && sig == Signal::TRAP {
            thread.stepping = false;
            if let Some(addr) = thread.bp_step.take() {
                self.finish_bp_step(tid, addr);
                return self.finish_stop(tid, false);
            }
            let reported = self.report(tid, Event::Step, StopKind::Other, None);
            return self.finish_stop(tid, reported);
        }
        if thread.injected == Some(sig) {
            thread.injected = None;
            thread.pending_signal = Some(sig);
            return self.finish_stop(tid, false);
        }
        if sig == Signal::TRAP && !self.core.uprobes.is_empty() && self.on_breakpoint_trap(tid) {
            return;
        }
        if sig == Signal(libc::SIGSYS) && self.on_dispatch_trap(tid) {
            return;
        }
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        thread.pending_signal = Some(sig);
        let deliver = self.report_signal(tid, Some(sig));
        if let Some(thread) = self.core.threads.get_mut(&tid) {
            thread.pending_signal = deliver;
        }
        self.finish_stop(tid, false);
    }

    fn on_event(&mut self, tid: Tid, event: i32, sig: Signal) {
        match event {
            ptrace::EVENT_STOP => self.on_event_stop(tid, sig),
            ptrace::EVENT_SECCOMP => self.on_seccomp(tid),
            ptrace::EVENT_CLONE | ptrace::EVENT_FORK | ptrace::EVENT_VFORK => {
                self.on_clone(tid, event)
            }
            ptrace::EVENT_EXEC => self.on_exec(tid),
            ptrace::EVENT_EXIT => {
                let status = ptrace::event_msg(tid).unwrap_or(0) as i32;
                let reported = self.report(
                    tid,
                    Event::Exit,
                    StopKind::Other,
                    Some(&mut |e: &mut dyn Engine, cx, a| e.report_exit(cx, a, status)),
                );
                if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL {
                    // The kernel stops even a SIGKILLed thread at its exit
                    // event; no engine may hold it there.
                    self.release(tid);
                }
                self.finish_stop(tid, reported);
            }
            _ => self.finish_stop(tid, false),
        }
    }

    /// Group-stop, SIGCONT notification, or our own interrupt.
    fn on_event_stop(&mut self, tid: Tid, sig: Signal) {
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        thread.interrupted = false;
        let jctl = if sig.is_stop_signal() {
            // A new group-stop, or our interrupt of a thread still in one.
            (!thread.group_stopped).then_some(Jctl::Stopped(sig))
        } else {
            thread.group_stopped.then_some(Jctl::Continued)
        };
        if jctl.is_none() && !thread.in_syscall && !thread.group_stopped {
            thread.parkable = Parkable::Quiet;
        }
        let mut reported = false;
        if let Some(j) = jctl {
            thread.group_stopped = matches!(j, Jctl::Stopped(_));
            reported = self.report(
                tid,
                Event::Jctl,
                StopKind::Other,
                Some(&mut |e: &mut dyn Engine, cx, a| e.report_jctl(cx, a, j)),
            );
        } else if !sig.is_stop_signal() {
            // Our interrupt, which may have cut a call short (a clone3
            // sees the pending trap and answers ERESTARTNOINTR): its
            // entry, made again, is not a second call.
            self.core.note_restart(tid);
        }
        self.finish_stop(tid, reported);
    }

    /// Cancels every engine's `Stop` on a thread that must go on.
    fn release(&mut self, tid: Tid) {
        if let Some(thread) = self.core.threads.get_mut(&tid) {
            for a in &mut thread.attachments {
                if a.action == ResumeAction::Stop {
                    a.action = ResumeAction::Resume;
                }
            }
        }
    }

    fn on_clone(&mut self, tid: Tid, event: i32) {
        let Some(info) = self.take_in_clone(tid, event) else {
            if self.core.threads.contains_key(&tid) {
                self.finish_stop(tid, false);
            }
            return;
        };
        let reported = self.report(
            tid,
            Event::Clone,
            StopKind::Other,
            Some(&mut |e: &mut dyn Engine, cx, a| e.report_clone(cx, a, &info)),
        );
        self.clone_taken_in(&info);
        self.finish_stop(tid, reported);
    }

    /// What a clone or fork event of `tid` tells, before any engine hears
    /// of it: the child (`PTRACE_GETEVENTMSG`, so only at the event's
    /// stop), its text copies noted, its thread entry made. `None` when the
    /// event cannot be read or the creator is unknown.
    pub(crate) fn take_in_clone(&mut self, tid: Tid, event: i32) -> Option<CloneInfo> {
        let child = Tid(ptrace::event_msg(tid).ok()? as i32);
        let parent = self.core.threads.get_mut(&tid)?;
        if !parent.in_syscall {
            // The clone's entry was not reported (not in the seccomp
            // filter's set): engines have not chosen about its exit.
            parent.reset_exit_choices();
        }
        parent.in_syscall = true;
        let parent = &*parent;
        let kind = match event {
            ptrace::EVENT_VFORK => CloneKind::Vfork,
            ptrace::EVENT_FORK => CloneKind::Fork,
            _ if is_thread_of(parent.tgid, child) => CloneKind::Thread,
            _ => CloneKind::Fork,
        };
        if kind != CloneKind::Thread {
            let ptgid = parent.tgid;
            let vfork = kind == CloneKind::Vfork;
            if !self.core.uprobes.is_empty() {
                self.core.uprobes.cloned(tid, ptgid, child, vfork);
            }
            self.dataplane_cloned(ptgid, child, vfork);
        }
        let parent = self.core.threads.get(&tid)?;
        let tgid = if kind == CloneKind::Thread {
            parent.tgid
        } else {
            child
        };
        // A child adopted early (its creator's report never came) keeps
        // its state; otherwise it starts with the FOLLOW engines.
        let thread = parent.child(child, tgid);
        self.core.threads.entry(child).or_insert(thread);
        Some(CloneInfo { child, kind })
    }

    /// After the clone's reports: the child's first stop, if it came
    /// already, goes to the loop; an untraced fork child is let go.
    pub(crate) fn clone_taken_in(&mut self, info: &CloneInfo) {
        let child = info.child;
        if let Some(status) = self.core.orphans.remove(&child) {
            self.core.replay.push((child, status));
        }
        let untraced = self
            .core
            .threads
            .get(&child)
            .is_none_or(|t| t.attachments.is_empty() || t.detach_pending);
        if info.kind == CloneKind::Fork && untraced {
            self.core.uprobes.let_go(child);
        }
    }

    fn on_exec(&mut self, tid: Tid) {
        let former = ptrace::event_msg(tid).map(|m| Tid(m as i32)).unwrap_or(tid);
        if former != tid {
            // A non-leader thread exec'd and took over the leader's id.
            if let Some(mut t) = self.core.threads.remove(&former) {
                t.tid = tid;
                t.run = Run::Stopped;
                self.core.threads.insert(tid, t);
            }
        }
        // A new mm: none of the old breakpoints or trampolines exist.
        self.core.uprobes.forget(tid);
        self.dataplane_exec(tid, true);
        if former != tid {
            self.dataplane_exec(former, false);
        }
        if let Some(s) = &self.core.shard {
            s.group.forget_park(tid);
        }
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        thread.in_syscall = true;
        let reported = self.report(
            tid,
            Event::Exec,
            StopKind::Other,
            Some(&mut |e: &mut dyn Engine, cx, a| e.report_exec(cx, a, former)),
        );
        self.finish_stop(tid, reported);
    }

    fn on_death(&mut self, tid: Tid, status: ExitStatus) {
        let Some(thread) = self.core.threads.remove(&tid) else {
            return;
        };
        if thread.settled {
            self.core.busy = self.core.busy.saturating_sub(1);
        }
        // Died parked, before its registers were put back.
        #[cfg(target_arch = "x86_64")]
        if let Some(parked) = &thread.restore {
            super::shard::note_handover(&self.core.shard, parked.1);
        }
        if let Some(s) = self.core.shard.as_ref().filter(|_| tid == thread.tgid) {
            s.group.forget_park(tid);
        }
        self.report_death(&thread, status);
        self.dataplane_death(tid, tid == thread.tgid);
        if !self.core.uprobes.is_empty() {
            if thread.bp_step.is_some() {
                self.release_held(tid);
            }
            if let Some(space) = self.core.uprobes.space_mut(thread.tgid) {
                space.shadow.remove(&tid);
            }
            if tid == thread.tgid {
                self.core.uprobes.forget(tid);
            }
        }
        if self.core.end_on_exit == Some(tid) && thread.tgid == tid {
            self.ctl()
                .end(EndReason::ProcessExited { pid: tid, status });
        }
        if !self.core.orphans.is_empty() {
            self.adopt_orphans_of(&thread);
        }
    }

    /// Children whose creator died before its clone report (SIGKILL right
    /// after fork) would wait at their first stop forever: they get the
    /// dead creator's FOLLOW engines (or are detached, having none).
    ///
    /// Only a leader's death counts: a thread dies alone only by exiting,
    /// which it cannot do between a clone and its report (it is inside the
    /// call), while SIGKILL takes the whole process, leader included. Under
    /// thread churn, adopting a process's orphans at every thread's exit
    /// would take children from creators still about to report them (they
    /// would then be reported twice, or never begin).
    fn adopt_orphans_of(&mut self, dead: &Thread) {
        if dead.tid != dead.tgid {
            return;
        }
        let orphans: Vec<Tid> = self.core.orphans.keys().copied().collect();
        for o in orphans {
            let Some((tgid, ppid)) = proc_ids(o) else {
                continue;
            };
            if tgid != dead.tgid && ppid != dead.tgid {
                continue;
            }
            if let Some(status) = self.core.orphans.remove(&o) {
                self.core.threads.insert(o, dead.child(o, tgid));
                self.core.replay.push((o, status));
            }
        }
    }

    /// After the event's own reports: a quiesce report if one was asked
    /// for and not made yet, then arbitration.
    pub(crate) fn finish_stop_pub(&mut self, tid: Tid) {
        self.finish_stop(tid, false)
    }

    fn finish_stop(&mut self, tid: Tid, quiesced: bool) {
        self.dataplane_patch_offered(tid);
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        if std::mem::take(&mut thread.quiesce_due) && !quiesced {
            self.report(tid, Event::None, StopKind::Other, None);
        }
        self.resolve(tid);
    }

    /// Arbitration at a stop: the smallest of the engines' last words
    /// decides. `Stop` leaves the thread in its ptrace-stop; `Interrupt`
    /// and `Report` make their reports now (the thread is already stopped)
    /// and are then used up; anything else resumes it.
    pub(crate) fn resolve(&mut self, tid: Tid) {
        // Interrupt/Report reports may ask again; after two rounds they
        // count as Resume (utrace does not loop on report_quiesce either).
        for round in 0.. {
            let Some(thread) = self.core.threads.get_mut(&tid) else {
                return;
            };
            if thread.run != Run::Stopped {
                return;
            }
            if thread.attachments.is_empty()
                && !thread.detach_pending
                && self.core.uprobes.alias.contains_key(&thread.tgid)
            {
                // A vfork child nobody follows shares its parent's
                // breakpoints: the core keeps it (stepping it over them)
                // until it execs or exits, so it never meets an int3
                // untraced. Its bytes cannot be taken out: they are the
                // parent's.
                return self.resume(tid, ResumeAction::Resume);
            }
            if thread.attachments.is_empty() || thread.detach_pending {
                let sig = thread.pending_signal.take();
                let _ = ptrace::detach(tid, sig);
                self.core.threads.remove(&tid);
                return;
            }
            let action = thread.prevailing();
            match action {
                ResumeAction::Stop => return,
                ResumeAction::Interrupt | ResumeAction::Report if round < 2 => {
                    for a in &mut thread.attachments {
                        if a.action == action {
                            a.action = ResumeAction::Resume;
                        }
                    }
                    if action == ResumeAction::Interrupt {
                        self.inject(tid);
                    } else {
                        self.report(tid, Event::None, StopKind::Other, None);
                    }
                }
                // resume() treats a left-over Interrupt/Report as Resume.
                _ => {
                    if self.core.shard.is_some() && self.hand_over(tid) {
                        return;
                    }
                    return self.resume(tid, action);
                }
            }
        }
    }

    /// The report after `Interrupt`: engines may choose a signal to inject.
    fn inject(&mut self, tid: Tid) {
        let Some(sig) = self.report_signal(tid, None) else {
            return;
        };
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        // SAFETY: sending a signal to a thread we trace.
        if unsafe { libc::syscall(libc::SYS_tgkill, thread.tgid.0, tid.0, sig.0) } == 0 {
            thread.injected = Some(sig);
        }
    }

    fn resume(&mut self, tid: Tid, action: ResumeAction) {
        let Some(thread) = self.core.threads.get_mut(&tid) else {
            return;
        };
        let mut mode = thread.mode_for(action);
        if thread.retrap && !matches!(mode, Mode::Step | Mode::Block | Mode::Listen) {
            // On to the syscall made again: under seccomp its filter stops
            // it (a syscall-entry stop first would look like an exit).
            mode = match thread.source {
                SyscallSource::Seccomp => Mode::Cont,
                SyscallSource::Ptrace => Mode::Syscall,
                SyscallSource::Dispatch => thread.syscall_mode(),
            };
        }
        let sig = thread.pending_signal.take();
        let result = match mode {
            Mode::Listen => {
                ptrace::listen(tid).or_else(|_| ptrace::restart(Mode::Cont.request(), tid, sig))
            }
            Mode::Block => ptrace::restart(mode.request(), tid, sig).or_else(|_| {
                thread.no_blockstep = true;
                mode = Mode::Step;
                ptrace::restart(mode.request(), tid, sig)
            }),
            _ => ptrace::restart(mode.request(), tid, sig),
        };
        // ESRCH: killed meanwhile; its death comes through wait.
        let _ = result;
        thread.mode = mode;
        if mode != Mode::Syscall && !thread.retrap {
            thread.in_syscall = false;
        }
        thread.stepping = matches!(mode, Mode::Step | Mode::Block);
        thread.run = if mode == Mode::Listen {
            Run::Listening
        } else {
            Run::Running
        };
        thread.consume_actions();
    }

    /// Detaches a thread that stopped with no engine left: the signal of a
    /// signal-delivery-stop is passed on; a child it was creating is let go
    /// too.
    pub(crate) fn detach_stopped(&mut self, tid: Tid, mut st: Status) {
        let Some(thread) = self.core.threads.get(&tid) else {
            return;
        };
        if !matches!(st, Status::SignalStop(_)) && !self.core.uprobes.is_empty() {
            match self.take_pending_trap(tid, thread.tgid) {
                Some(Status::Exited(_) | Status::Signaled { .. }) => {
                    self.core.threads.remove(&tid);
                    return;
                }
                Some(taken) => st = taken,
                None => {}
            }
        }
        let Some(thread) = self.core.threads.remove(&tid) else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        if let Some(parked) = &thread.restore {
            let _ = ptrace::set_regs(tid, &parked.0);
        }
        let ours = matches!(st, Status::SignalStop(Signal::TRAP))
            && !thread.stepping
            && self.undo_trap_for_detach(tid, thread.tgid);
        let sig = match st {
            // A step's SIGTRAP is ours, not the program's.
            Status::SignalStop(Signal::TRAP) if thread.stepping => None,
            // So is a breakpoint's, undone above.
            Status::SignalStop(Signal::TRAP) if ours => None,
            Status::SignalStop(s) => Some(s),
            _ => thread.pending_signal,
        };
        let msg = || ptrace::event_msg(tid).ok().map(|m| Tid(m as i32));
        match st {
            Status::Event {
                event: ptrace::EVENT_CLONE | ptrace::EVENT_FORK | ptrace::EVENT_VFORK,
                ..
            } => {
                if let Some(child) = msg() {
                    self.disown(child);
                }
            }
            Status::Event {
                event: ptrace::EVENT_EXEC,
                ..
            } => {
                if let Some(former) = msg().filter(|&f| f != tid) {
                    self.core.threads.remove(&former);
                }
            }
            _ => {}
        }
        let _ = ptrace::detach(tid, sig);
    }

    /// A child the kernel attached for us that nobody wants: detach it at
    /// its first stop (now, if that already came).
    pub(crate) fn disown(&mut self, child: Tid) {
        if self.core.orphans.remove(&child).is_some() {
            let _ = ptrace::detach(child, None);
        } else {
            self.core.threads.entry(child).or_insert_with(|| {
                let mut t = Thread::new(child, child, Run::Starting);
                t.detach_pending = true;
                t
            });
        }
    }
}

/// Tgid and PPid of a thread, from /proc.
fn proc_ids(tid: Tid) -> Option<(Tid, Tid)> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", tid.0)).ok()?;
    let field = |name: &str| -> Option<Tid> {
        let v = status.lines().find_map(|l| l.strip_prefix(name))?;
        v.trim().parse().ok().map(Tid)
    };
    Some((field("Tgid:")?, field("PPid:")?))
}

fn is_thread_of(tgid: Tid, child: Tid) -> bool {
    std::path::Path::new(&format!("/proc/{}/task/{}", tgid.0, child.0)).exists()
}
