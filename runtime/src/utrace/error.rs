//! Errors of the utrace core. A thread that exits during an operation is an
//! ordinary outcome (`Gone`), never a crash.

use std::fmt;

use super::{EngineId, Tid};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The thread is not traced by this tracer (never was, or is gone).
    NoSuchThread(Tid),
    /// The thread exited while the operation was under way (ESRCH).
    Gone(Tid),
    /// The engine is not attached to the thread (utrace's -ESRCH/-ENOENT).
    NotAttached { tid: Tid, engine: EngineId },
    /// `AttachMode::Exclusive` found the engine already attached (-EEXIST).
    AlreadyAttached { tid: Tid, engine: EngineId },
    /// The thread is not in a ptrace-stop, so its registers cannot be used.
    NotStopped(Tid),
    /// A system call failed.
    Os {
        op: &'static str,
        tid: Tid,
        errno: i32,
    },
    /// The tracer thread has ended; commands are no longer accepted.
    TracerGone,
    /// The operation needs something this CPU or kernel lacks.
    Unsupported(&'static str),
    /// A traced command could not be started.
    Spawn(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Maps a failed ptrace/wait call: ESRCH means the thread went away.
    pub(crate) fn os(op: &'static str, tid: Tid, errno: i32) -> Error {
        if errno == libc::ESRCH {
            Error::Gone(tid)
        } else {
            Error::Os { op, tid, errno }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoSuchThread(t) => write!(f, "thread {t} is not traced"),
            Error::Gone(t) => write!(f, "thread {t} has exited"),
            Error::NotAttached { tid, engine } => {
                write!(f, "engine {} is not attached to thread {tid}", engine.0)
            }
            Error::AlreadyAttached { tid, engine } => {
                write!(f, "engine {} is already attached to thread {tid}", engine.0)
            }
            Error::NotStopped(t) => write!(f, "thread {t} is not stopped"),
            Error::Os { op, tid, errno } => write!(
                f,
                "{op} on thread {tid}: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            Error::TracerGone => write!(f, "the tracer thread has ended"),
            Error::Unsupported(what) => write!(f, "not supported: {what}"),
            Error::Spawn(msg) => write!(f, "cannot start command: {msg}"),
        }
    }
}

impl std::error::Error for Error {}
