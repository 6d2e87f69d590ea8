//! Stops of another shard's tracee, which a shard's `waitpid` can reap.
//!
//! `__WNOTHREAD` keeps each shard to its own tracees, with one exception
//! the kernel makes: a real parent whose thread group also holds the
//! child's tracer is treated as that tracer (`wait_consider_task`: not
//! `ptrace_reparented`), so it reaps the child's ptrace-stops and death.
//! The `-c` command is shard 0's real child, and shard 0 serves it, until
//! a thread handed to another shard execs (a non-leader exec): it takes
//! over the leader's id and stays that shard's tracee, while shard 0 is
//! still its real parent. Either shard's wait may then get its stops
//! (its exec stop too) and its death. A stop taken by the wrong shard
//! cannot be answered there (ptrace requests come only from the tracer
//! thread) and would leave the program stopped; it is passed to the other
//! shards, and the one that traces the thread handles it.

use super::ptrace::{self, Status};
use super::{Tid, Tracer};

impl Tracer {
    /// True when `tid`'s wait status is another shard's, now passed on.
    pub(crate) fn pass_foreign(&mut self, tid: Tid, st: Status, status: i32) -> bool {
        let Some(shard) = self.core.shard.clone() else {
            return false;
        };
        if !shard.group.moved() {
            // No thread changed shards: every tracee is its creator's.
            return false;
        }
        let known = self.core.threads.contains_key(&tid);
        match st {
            Status::Continued => return false,
            Status::Exited(_) | Status::Signaled { .. } => {
                if known || self.core.orphans.contains_key(&tid) {
                    return false;
                }
            }
            _ => {
                let suspect = !known
                    || self.core.end_on_exit == Some(tid)
                    || matches!(
                        st,
                        Status::Event {
                            event: ptrace::EVENT_EXEC,
                            ..
                        }
                    );
                if !suspect || ptrace::event_msg(tid).is_ok() || !traced_by_another(tid) {
                    return false;
                }
                // Our record was of the leader the exec replaced.
                if let Some(t) = self.core.threads.remove(&tid)
                    && t.settled
                {
                    self.core.busy = self.core.busy.saturating_sub(1);
                }
            }
        }
        shard.group.pass_on(shard.index, tid, status);
        true
    }

    /// A wait status another shard reaped: handled here if it is ours
    /// (we trace the stopped thread, or know the dead one), else dropped.
    pub(crate) fn on_passed(&mut self, tid: Tid, status: i32) {
        let ours = match ptrace::decode(status) {
            Status::Exited(_) | Status::Signaled { .. } => self.core.threads.contains_key(&tid),
            Status::Continued => false,
            _ => ptrace::event_msg(tid).is_ok(),
        };
        if ours {
            self.on_status(tid, status);
        }
    }
}

/// Whether a tracer thread other than the calling one traces `tid`
/// (`TracerPid` in /proc; false when that cannot be read).
fn traced_by_another(tid: Tid) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{}/status", tid.0)) else {
        return false;
    };
    let tracer: i32 = text
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    // SAFETY: gettid has no memory effects.
    tracer != 0 && tracer != unsafe { libc::gettid() }
}
