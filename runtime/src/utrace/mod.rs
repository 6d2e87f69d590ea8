//! The utrace engine core, in user space, over ptrace.
//!
//! utrace was a kernel layer (never merged) on which several tracing
//! *engines* share a thread: each subscribes to events with an event mask,
//! answers every callback with a resume action, and the smallest action
//! prevails (seeds 001 and 002 in `shared/seeds`). This module gives utap
//! the same model with ptrace as its only kernel interface.
//!
//! # Using it
//!
//! ```no_run
//! use utap_runtime::utrace::*;
//!
//! struct Count(u64);
//! impl Engine for Count {
//!     fn report_syscall_entry(&mut self, cx: &mut Cx, _: ResumeAction) -> ResumeAction {
//!         let _nr = cx.syscall().map(|s| s.nr);
//!         self.0 += 1;
//!         ResumeAction::Resume
//!     }
//! }
//!
//! let mut tracer = Tracer::new()?;                 // on the tracer thread
//! let engine = tracer.add_engine(Count(0));
//! let child = tracer.spawn(&SpawnCommand::command_line("ls")?, None)?;
//! let mut ctl = tracer.ctl();
//! ctl.attach(child.pid, engine, AttachMode::Create, Events::SYSCALL_ENTRY | Events::FOLLOW)?;
//! ctl.end_when_exits(child.pid);
//! let why = tracer.run()?;                         // every thread detached on return
//! println!("{why:?}: {} syscalls", tracer.engine::<Count>(engine).unwrap().0);
//! # Ok::<(), utap_runtime::utrace::Error>(())
//! ```
//!
//! # API at a glance
//!
//! * [`Tracer`] — created on the thread that will trace (it is not `Send`):
//!   `new`, `add_engine(E) -> EngineId`, `engine::<E>(id)` /
//!   `engine_mut` (read results back), `ctl()` (the [`Control`] below, before
//!   `run`), `handle()` (a [`TracerHandle`] for other threads),
//!   `spawn(&SpawnCommand, hook) -> Spawned` (`-c`), `set_colocation`
//!   (where the tracer thread runs: [`colocate`]), and `run() ->
//!   EndReason`, which returns only after every thread is detached.
//! * [`Control`] — the same surface for code outside `run`, for callbacks
//!   (a [`Cx`] derefs to it), ticks and commands: `attach(tid, engine,
//!   AttachMode, Events)`, `attach_process(pid) -> tids` (`-x`: seizes
//!   every thread), `set_events`, `events`, `control(tid, engine,
//!   ResumeAction) -> ControlStatus`, `detach`, `threads`, `process_of`,
//!   `is_stopped`, `barrier`, `set_syscall_source(pid, SyscallSource::Seccomp)` (entries
//!   from the caller's seccomp filter), `end(EndReason)`,
//!   `end_when_exits(pid)`, `kill_on_signal()` (SIGINT/SIGTERM/SIGHUP/SIGQUIT
//!   kill the tracees instead of detaching them: for commands under a
//!   seccomp RET_TRACE filter), `on_end(hook)` (runs once the end is
//!   decided, before any thread is detached: what the user waits for need
//!   not wait for detaching), `add_timer(deadline, tick) -> TimerId`,
//!   `cancel_timer`, `resume_at(tid, engine, when)` (an engine that
//!   returned `Stop` holds a thread for a while: delay injection),
//!   `send_signal(tid, sig)` (a traced thread only), `stop_count()`
//!   (ptrace-stops so far: what tracing cost the tracees).
//! * [`Engine`] — implement the `report_*` callbacks you need (defaults
//!   say `Resume`); each gets `&mut Cx` and the prevailing action, and
//!   returns its own. [`Cx`] has the reported thread (`tid`, `pid`,
//!   `engine`), `syscall()` ([`SyscallInfo`]: number, arguments, return
//!   value, seccomp data), `regs`/`set_regs`, `set_syscall_return(v)` (at
//!   entry: skip the call; at exit: replace the value),
//!   `set_syscall_args(args)` (at entry: the call runs with these),
//!   `want_syscall_exit(bool)` (at an entry: whether this engine wants
//!   this syscall's exit; see *Costs* below), `siginfo`,
//!   `disposition(sig)`, `memory()` (a `ReadMemory`).
//! * Ticks: `add_timer(first, |ctl| -> Option<Instant>)` runs the closure on
//!   the tracer thread at `first` and then at each deadline it returns
//!   (`None` stops it): with one tracer thread, timer probes share the
//!   handlers' thread. The doorbell's timerfd wakes the loop; an idle loop
//!   costs nothing.
//! * Several tracer threads: `enable_shards(n, factory)` (see *Many traced
//!   threads*), `Control::shard_stats`, `shard_index`.
//! * The loop ends on `Control::end` / `TracerHandle::end` (e.g. Ctrl-C
//!   from another thread), when the `end_when_exits` process dies
//!   (`EndReason::ProcessExited` with its status), or on
//!   SIGINT/SIGTERM/SIGHUP/SIGQUIT once [`catch_termination_signals`] is
//!   installed, or [`end_sessions`] (e.g. SIGPIPE when the output's reader
//!   went away) (`EndReason::Signal`; with `kill_on_signal` every traced
//!   process is SIGKILLed first). `also_on_termination(f)` adds an
//!   async-signal-safe call to the signal handler (utap: the interrupt flag
//!   that stops a handler looping on the tracer thread).
//! * `attach_process` seizes a process whose threads come and go: threads
//!   exiting meanwhile, or already ours through a clone event, are skipped;
//!   each thread is interrupted as soon as it is seized.
//!
//! # Costs: what a stop is paid for
//!
//! A ptrace-stop is two context switches, ≈3 µs when tracer and tracee
//! share a CPU and up to ≈45 µs when it wakes an idle one. So:
//!
//! * With [`SyscallSource::Seccomp`] a syscall the caller's filter allows
//!   costs nothing; a traced one costs one stop (`PTRACE_CONT` after it).
//! * Its exit costs a second stop only if an engine with `SYSCALL_EXIT`
//!   still wants it: an engine declines per syscall with
//!   `Cx::want_syscall_exit(false)` in `report_syscall_entry` (the script
//!   engine does so for every syscall without a return probe). Under
//!   `PTRACE_SYSCALL` the exit stop is inherent; a declined exit is then
//!   only not reported.
//! * Syscall details cost one `PTRACE_GET_SYSCALL_INFO` at an entry and
//!   one `PTRACE_GETREGS` at an exit, fetched on first use and cached.
//! * A ptrace request on a stopped thread costs 1–2 µs on the 2-vCPU VM,
//!   most of it `ptrace_check_attach` (a plain syscall: 0.2–0.5 µs);
//!   GETREGS ≈1.8x and SETREGS ≈2.6x a POKEUSER (`ptrace_requests`
//!   fixture). No request is cheaper than `PTRACE_GET_SYSCALL_INFO` for the
//!   number (GETEVENTMSG with `SECCOMP_RET_TRACE | nr` costs the same), so
//!   a ptrace tracer counting by name pays wait + fetch + restart; only a
//!   seccomp user notification brings the number with the event
//!   (`notifyfloor` fixture: below even the bare `PTRACE_CONT` floor).
//!   The script session uses one for entry-only probes that need no stop
//!   (`crate::session::notify`, outside this core: those entries never
//!   reach the engines' `report_syscall_entry`): `loop 100000` counted by
//!   name in 0.63x the bare ptrace floor's time at load 7–9 (0.98x through
//!   ptrace stops in the same run), 1.03–1.11x at load 3–5 (1.31–2.43x
//!   through ptrace stops), start-up included (`tests/bench/scale.py
//!   --floor-only`).
//! * A breakpoint hit costs GETREGS, the registers the step-over changes
//!   (POKEUSER each: rip out of line, rip and rsp for an emulated push;
//!   SETREGS past two) and the restart; GETSIGINFO only where rip - 1 may
//!   be reached without the `int3` (`uprobe::Site::trap_is_unambiguous`).
//! * `Control::stop_count` counts the stops (utap prints it under `-v`).
//! * Where the tracer thread runs: [`colocate`] (by default it follows its
//!   tracee's CPU in `SCHED_IDLE`: 4–12x faster stops on an idle machine).
//!
//! # Invariants
//!
//! * **One tracer thread per tracee** owns its ptrace relationship and
//!   runs its callbacks; without `enable_shards` that is one thread for
//!   every tracee, tick and command, so engine state needs no locks (see
//!   *Many traced threads* below for what several change). Other
//!   threads use a [`TracerHandle`] (commands + doorbell wake-up); an idle
//!   tracer sleeps in `waitpid` and uses no CPU.
//! * **Callbacks never block** (seed 000). To keep a thread stopped an
//!   engine returns [`ResumeAction::Stop`]; the thread then sits in a real
//!   ptrace-stop (`ps` shows `t`) and SIGKILL still ends it at once.
//! * **Smallest action wins**, in the shipped order `Stop < Interrupt <
//!   Report < SingleStep < BlockStep < Resume < Detach`. Each callback gets
//!   the prevailing action of the engines before it; an engine's own return
//!   value replaces its earlier wishes and is never overridden by a
//!   `control` call of another thread (commands run between reports).
//! * **Signals pass through unchanged** unless an engine changes them;
//!   job-control stops behave as untraced (`PTRACE_LISTEN`).
//! * **Always detached**: `run` returning, a `Tracer` dropped (also by a
//!   panic), and SIGINT/SIGTERM/SIGHUP (with [`catch_termination_signals`])
//!   all detach every thread; none is left stopped or traced. A thread
//!   exiting during any operation is normal (`Error::Gone`), never a crash.
//! * **Wait only for our own**: the tracer waits with `__WALL |
//!   __WNOTHREAD`, so several tracers in one process (tests) never take each
//!   other's children or stops. Do not `waitpid` a traced process from
//!   another thread of the same process while it is traced: Linux lets any
//!   thread of the tracer's process take its ptrace stops.
//!
//! # Many traced threads: a tracer thread per CPU
//!
//! Issue 16 asks for traced threads on different CPUs to be served in
//! parallel. What was measured (`tests/bench/scale.py`, whose floor tracer
//! `tests/fixtures/floor.c` is bare ptrace with no utap code at all):
//! with one tracer thread even the floor tracer takes ≈2x one thread's
//! time for two traced threads (every stop of every thread waits for the
//! one tracer), while a tracer thread per CPU (`floor -p -j k`) runs two
//! tracees in about the time of one. utap's own code is ≈3% of its tracer
//! thread's samples; the rest is the kernel's switch and wake-up paths. So
//! the remedy is several tracer threads, each one this loop.
//!
//! **Shards (built, `shard`).** [`Tracer::enable_shards`] starts `n - 1`
//! more tracer loops ("shards"), each on its own thread with its own
//! `Core`, doorbell, colocation and engines (from a factory, at the same
//! ids; `prepare_shards(n)` may start the threads earlier, so that their
//! set-up overlaps with spawning the command); each waits with
//! `__WALL | __WNOTHREAD` and so reaps only the
//! stops of its own tracees, except those of a real child that another
//! shard traces (after a non-leader exec), passed on by `foreign`. The kernel makes an auto-attached clone a
//! tracee of its creator's tracer thread; at its 64th stop there (a
//! thread that keeps stopping; short-lived ones never move) it is handed to
//! the shard with the fewest busy threads, if that has fewer. ptrace
//! cannot pass a tracee on: the owner saves its registers, points its
//! instruction pointer at a `jmp .` (`eb fe`) written over the program's
//! entry code (AT_ENTRY, through /proc/PID/mem: `_start` never runs again;
//! put back at the end), sets `orig_rax` to -1 (at a syscall entry the call
//! is skipped, and made again after the handover without a second report),
//! detaches, and sends the `Thread` record (attachments, actions, syscall
//! source, EXITKILL) to the new shard's command queue; the new owner seizes
//! the spinning thread, interrupts it and, at that stop, restores its
//! registers and resumes it without a report. A thread moves once; each
//! shard's colocation follows its own tracees (the issue's "keep the owner
//! and move the owner's affinity"), so migration needs no further handover.
//! Measured cost of a handover and the policy: see docs/internals/performance.md ("Tracing many
//! threads").
//!
//! **The model stays exact.** A thread's reports all come from its owner,
//! one after another, and the handover happens at a stop already reported
//! and arbitrated, so per-thread callback order holds. Only a thread with
//! nothing pending moves (no group-stop, signal, quiesce, step, `Stop`;
//! never a process leader, never in a tracer with breakpoints), and a
//! thread in flight is either adopted by its new owner or, if that one has
//! closed its queue (the session ending), taken back by its sender.
//! Commands and `Control` calls stay per shard: a command reaches shard
//! 0's threads only (the sessions that control other threads are not
//! sharded).
//!
//! **Ending.** Any shard's end (`Control::end`, the watched process's exit,
//! a termination signal) ends the group: every doorbell is rung, each
//! shard detaches its own tracees (only it may), closes its queue and
//! detaches what a last handover brought; shard 0 waits (bounded) for the
//! others to finish the event they were handling before its end hook (end
//! probes after every report), then joins them and restores the entry
//! code. A `Tracer` dropped (a panic) does the same; a shard thread that
//! panics ends the group.
//!
//! **Engines and script state.** Callbacks of different shards run at
//! once, so each shard has its own engine objects, and what they share is
//! theirs to lock. The script engine (`crate::session`) keeps the script
//! state behind one lock with SystemTap's bounded try-lock and skipped-
//! probe count; output goes through the one transport producer under that
//! lock, so messages stay whole and in handler order. Timer and end probes
//! run on shard 0.

//! # utrace → ptrace, as implemented
//!
//! | utrace | here |
//! | --- | --- |
//! | attach engine (create / exclusive / match) | [`Control::attach`] with [`AttachMode`]; the first engine on a thread `PTRACE_SEIZE`s it with TRACESYSGOOD, TRACECLONE/FORK/VFORK, TRACEEXEC, TRACEEXIT, TRACESECCOMP (+ EXITKILL for spawned commands, kept only under a seccomp filter) |
//! | `utrace_set_events` | [`Control::set_events`]; the union of the masks picks the resume request: `PTRACE_SYSCALL` only if some engine wants syscall events (with seccomp as the entry source: `PTRACE_CONT`, and `PTRACE_SYSCALL` after an entry only if an exit is wanted) |
//! | `utrace_control(STOP)` → 0 / -EINPROGRESS | [`Control::control`] → `AlreadyStopped` if in a ptrace-stop, else `PTRACE_INTERRUPT` and `InProgress`; `report_quiesce(Event::None)` at the resulting stop |
//! | `INTERRUPT`, signal injection | `PTRACE_INTERRUPT`, then `report_signal` with no signal; an injected signal is queued with `tgkill` and delivered unreported |
//! | `REPORT` | `PTRACE_INTERRUPT` (ptrace has no softer way), then `report_quiesce` |
//! | `SINGLESTEP` / `BLOCKSTEP` | `PTRACE_SINGLESTEP` / `PTRACE_SINGLEBLOCK` (33, x86; single step where refused); completion is `report_quiesce(Event::Step)` |
//! | `DETACH` | engine removed; the last one gone, `PTRACE_DETACH` (a running thread is interrupted first, and detached at whatever stop comes: seed 002's race ends with it running), pending signal passed on |
//! | `utrace_barrier` | callbacks are synchronous on the tracer thread; from elsewhere [`TracerHandle::barrier`] is a round trip through the queue |
//! | report_quiesce | before the event's own report, for engines with `QUIESCE`, at every stop some engine is told about |
//! | report_signal | signal-delivery-stop; `SignalReport::deliver` is passed to the restart (same, other, or none) |
//! | report_syscall_entry/exit | syscall-stops (entry/exit told apart by alternation) or `PTRACE_EVENT_SECCOMP`; details from `PTRACE_GET_SYSCALL_INFO` |
//! | report_clone | `PTRACE_EVENT_CLONE/FORK/VFORK`; the child is already seized; engines with `FOLLOW` are attached, others may attach; unwanted children are detached |
//! | report_exec | `PTRACE_EVENT_EXEC` (a non-leader exec moves the thread to the leader's id) |
//! | report_exit | `PTRACE_EVENT_EXIT` (a SIGKILLed thread is never held there) |
//! | report_death, report_reap | the thread's exit status from `waitpid`, then it is forgotten |
//! | report_jctl | `PTRACE_EVENT_STOP` with a stop signal (group-stop; resumed with `PTRACE_LISTEN`), and the trap after SIGCONT |
//! | uprobes' handler (`BREAKPOINT`, an extension) | `report_breakpoint`: an `int3` the core inserted (`Control::insert_breakpoint`) trapped, or a hijacked return (`Cx::hijack_return`) came back; the core steps over and restores every byte at detach (`crate::uprobe`) |
//!
//! # Limits (ptrace's, mostly)
//!
//! * `Report` cannot be softer than `Interrupt`: both are a
//!   `PTRACE_INTERRUPT`, which makes a blocking syscall restart
//!   transparently (as a stop signal would).
//! * A listening group-stopped tracee shows as `t` in `ps`, not `T`.
//! * Entry and exit syscall-stops are told apart by alternation (no extra
//!   syscall per stop); `spawn` leaves a program inside `execve`, so an exit
//!   engine's first report is execve's return.
//! * Registers, `set_syscall_return` and `BlockStep` are x86_64 (elsewhere:
//!   `Error::Unsupported`, single step).
//! * A child whose creator was SIGKILLed between fork and its clone report
//!   is adopted with the creator's FOLLOW engines when the creator's death
//!   is seen (found through /proc).

mod action;
mod breakpoint;
pub mod colocate;
pub mod command_line;
pub(crate) mod control;
mod cx;
mod dataplane;
mod dispatch;
mod doorbell;
mod engine;
mod error;
mod events;
mod foreign;
mod hold;
pub mod listen;
pub(crate) mod ptrace;
mod remote;
mod safety;
mod shard;
mod signal;
mod slot_unmap;
mod spawn;
mod stop;
mod thread;
mod tracer;
mod unwinding;

pub(crate) use crate::tid::TidMap;
pub use crate::uprobe::{BreakpointHit, Frame, StepCounts};
pub use action::ResumeAction;
pub use colocate::Colocation;
pub use control::{
    AttachMode, Attached, Control, ControlStatus, EndHook, EndReason, Tick, TimerId,
};
#[cfg(target_arch = "x86_64")]
pub use cx::Regs;
pub use cx::{Cx, ProcessMemory, SyscallInfo};
pub use engine::{CloneInfo, CloneKind, Engine, EngineId, ExitStatus, Jctl, SignalReport};
pub use error::{Error, Result};
pub use events::{Event, Events};
pub use listen::ThreadListeners;
pub use safety::{
    also_on_termination, catch_termination_signals, end_sessions, termination_signal,
};
pub use shard::{EngineFactory, ShardStats};
pub use signal::{Disposition, Signal};
pub use spawn::{SpawnCommand, Spawned, inherited_ignored};
pub use thread::SyscallSource;
pub use tracer::{Tracer, TracerHandle};

pub use crate::tid::Tid;
