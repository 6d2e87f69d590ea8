//! `utap --daemon`: several independent tracing sessions on one process.
//!
//! ptrace is exclusive: one tracer per thread, so a second `utap -x PID`
//! on a traced program fails with EPERM. The daemon is the one tracer of
//! its user's traced processes; every client connection is a *session*
//! (seed 003's ntrace model): its own compiled script, its own utrace
//! engine on the threads of its target, its own output *channel*. Sessions
//! do not know about each other; on a thread they share, their resume
//! actions are arbitrated by the utrace rule (the smallest wins), so a
//! thread one session stops stays stopped until that session lets go.
//!
//! * [`protocol`]: the request line and the frames (versioned).
//! * [`server`]: the socket (per user, SO_PEERCRED), connections, the
//!   tracer thread; [`sessions`]: starting, ending, listing sessions on
//!   the tracer thread; [`slots`]: engines for sessions that come and go.
//! * [`channel`]: a session's output path to its client (bounded ring that
//!   drops and counts, never-dropped control queue).
//! * [`client`]: the CLI's side.
//!
//! Security: a per-user daemon. Only clients of the daemon's own uid are
//! served; since the daemon is the process that attaches, the kernel
//! checks every attach against that uid exactly as for a standalone utap
//! (same uid, dumpable, Yama). There is no root daemon. The default
//! socket's directory must be the user's own, closed to others and not a
//! symbolic link ([`protocol::private_dir`]): daemon and clients refuse it
//! otherwise, since in a shared /tmp anyone can plant it first.

pub mod channel;
pub mod client;
pub mod fds;
pub mod protocol;
pub mod server;
pub mod sessions;
mod slots;

pub use sessions::Prepared;
