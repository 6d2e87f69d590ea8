//! `utap --daemon`: the socket, the connections and the tracer thread.
//!
//! One tracer thread owns every ptrace relationship, as in a standalone
//! utap, and runs every session's handlers. Each connection has a thread
//! of its own that checks the peer, reads the request, compiles the script
//! (through the driver's [`Prepare`]: compiling never runs on the tracer
//! thread), starts the session with one command to the tracer, and then
//! waits for its client to hang up (the session over, Ctrl-C, or the
//! client's death), which ends the session if it still runs.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::channel::Channel;
use super::protocol::{self, Frame, Request};
use super::sessions::{self, Prepared};
use super::slots::{SLOTS, Slot, SlotEngine};
use crate::utrace::command_line::CommandLine;
use crate::utrace::{Tracer, TracerHandle, catch_termination_signals};

/// Compiles a client's script: the driver's part of the daemon.
pub trait Prepare: Send + Sync + 'static {
    /// The session ready to start, and what must outlive it (the machine
    /// code its handlers point into); `None` after writing the reason
    /// (diagnostics, a usage error) to the client's stderr. `command` is
    /// the `-c` command as the client split it, if it did.
    fn prepare(
        &self,
        argv: &[String],
        script_name: &str,
        script: &str,
        colour: bool,
        command: Option<&CommandLine>,
        channel: &Channel,
    ) -> Option<(Prepared, Box<dyn std::any::Any>)>;
}

/// The peer of a Unix socket: its process and user.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
}

/// SO_PEERCRED: who connected (as of `connect`, checked by the kernel).
pub fn peer(stream: &UnixStream) -> io::Result<Peer> {
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)?;
    Ok(Peer {
        pid: cred.pid(),
        uid: cred.uid(),
    })
}

/// Whether a peer may use this daemon: only the daemon's own user.
pub fn admitted(peer: Peer, own_uid: u32) -> Result<(), String> {
    if peer.uid == own_uid {
        return Ok(());
    }
    Err(format!(
        "this utap daemon serves only its own user (uid {own_uid}); uid {} was refused \
         (start your own: utap --daemon)",
        peer.uid
    ))
}

/// Makes the socket's directory (mode 0700) and refuses a symbolic link,
/// or a directory that others could enter or that belongs to someone else
/// ([`protocol::private_dir`]).
fn private_dir(dir: &Path) -> Result<(), String> {
    let refuse = |why: String| format!("refusing the daemon's directory: {why}");
    if !protocol::private_dir(dir).map_err(refuse)? {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        protocol::private_dir(dir).map_err(refuse)?;
    }
    Ok(())
}

/// Binds the socket: a live daemon there is an error, a stale file is
/// replaced. The socket itself is 0600.
fn bind(path: &Path, default: bool) -> Result<UnixListener, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if default {
            private_dir(dir)?;
        } else if !dir.exists() {
            return Err(format!("no directory {}", dir.display()));
        }
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "a utap daemon already listens on {}",
                path.display()
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    Ok(listener)
}

/// Runs the daemon until SIGINT/SIGTERM/SIGHUP/SIGQUIT: then every session
/// ends (end probes, output, verdict), every thread is detached and the
/// socket removed. `socket` is `None` for the default path.
pub fn serve(socket: Option<PathBuf>, prepare: Arc<dyn Prepare>) -> Result<(), String> {
    let default = socket.is_none();
    let path = socket.unwrap_or_else(protocol::default_socket);
    // A client that vanished must not kill the daemon with SIGPIPE.
    // SAFETY: setting a disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let listener = bind(&path, default)?;
    catch_termination_signals().map_err(|e| format!("signal setup: {e}"))?;
    let handle = start_tracer(path.clone())?;
    eprintln!("utap: daemon listening on {}", path.display());
    // SAFETY: getuid has no memory effects.
    let own_uid = unsafe { libc::getuid() };
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let handle = handle.clone();
        let prepare = prepare.clone();
        let _ = std::thread::Builder::new()
            .name("utap-client".into())
            .spawn(move || connection(stream, &handle, &*prepare, own_uid));
    }
    Ok(())
}

/// Starts the tracer thread, with its slot engines; returns its handle.
/// When the tracer ends (a termination signal) the daemon exits.
fn start_tracer(path: PathBuf) -> Result<TracerHandle, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("utap-tracer".into())
        .spawn(move || {
            let mut tracer = match Tracer::new() {
                Ok(t) => t,
                Err(e) => {
                    let _ = tx.send(Err(format!("cannot start the tracer: {e}")));
                    return;
                }
            };
            let slots: Vec<(Slot, _)> = (0..SLOTS)
                .map(|_| {
                    let slot = Slot::default();
                    let id = tracer.add_engine(SlotEngine(slot.clone()));
                    (slot, id)
                })
                .collect();
            sessions::install(slots);
            tracer.ctl().on_end(|ctl, _| sessions::end_all(ctl));
            let _ = tx.send(Ok(tracer.handle()));
            let result = tracer.run();
            drop(tracer);
            // The sessions' clients get their output and verdicts.
            let deadline = Instant::now() + Duration::from_secs(2);
            while sessions::CONCLUDING.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = std::fs::remove_file(&path);
            if let Err(e) = result {
                eprintln!("utap: daemon: {e}");
                std::process::exit(1);
            }
            std::process::exit(0);
        })
        .map_err(|e| format!("cannot start the tracer thread: {e}"))?;
    rx.recv()
        .map_err(|_| "the tracer thread failed".to_string())?
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// Serves one client connection.
fn connection(stream: UnixStream, handle: &TracerHandle, prepare: &dyn Prepare, own_uid: u32) {
    let Ok(mut reader) = stream.try_clone() else {
        return;
    };
    let channel = Channel::new(stream);
    let refuse = |msg: String| {
        channel.stderr(format!("utap: {msg}\n"));
        channel.exit(1);
    };
    match peer(&reader)
        .map_err(|e| e.to_string())
        .and_then(|p| admitted(p, own_uid))
    {
        Ok(()) => {}
        Err(msg) => return refuse(msg),
    }
    let hello = match protocol::read_hello(&mut reader) {
        Ok(h) => h,
        Err(msg) => return refuse(msg),
    };
    match hello.request {
        Request::Sessions => match handle.call(sessions::list) {
            Ok(text) => {
                let _ = channel.send(&Frame::Stdout(text.into_bytes()));
                channel.exit(0);
            }
            Err(e) => refuse(e.to_string()),
        },
        Request::Detach { id } => match handle.call(move |ctl| sessions::end(ctl, id)) {
            Ok(true) => channel.exit(0),
            Ok(false) => refuse(format!("no session {id}")),
            Err(e) => refuse(e.to_string()),
        },
        Request::Run {
            argv,
            script_name,
            script,
            colour,
            command_io,
        } => {
            let io = match command_io {
                Some(env) => match super::fds::receive(&reader) {
                    Ok(fds) => Some(sessions::CommandIo {
                        fds,
                        cwd: env.cwd,
                        env: env.env,
                        line: env.split.map(CommandLine::from),
                    }),
                    Err(e) => return refuse(e.to_string()),
                },
                None => None,
            };
            let line = io.as_ref().and_then(|io| io.line.as_ref());
            let Some((mut prepared, code)) =
                prepare.prepare(&argv, &script_name, &script, colour, line, &channel)
            else {
                return channel.exit(1);
            };
            prepared.io = io;
            run(reader, channel, handle, prepared);
            // Only now may the machine code go: the session is released.
            drop(code);
        }
    }
}

/// Runs a prepared session until its client hangs up, then makes sure it
/// has ended and its slot is free.
fn run(mut reader: UnixStream, channel: Channel, handle: &TracerHandle, prepared: Prepared) {
    let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    let (done_tx, done_rx) = mpsc::channel();
    let ch = channel.clone();
    match handle.call(move |ctl| sessions::start(ctl, id, prepared, ch, done_tx)) {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => {
            channel.stderr(format!("utap: {msg}\n"));
            return channel.exit(1);
        }
        Err(e) => {
            channel.stderr(format!("utap: {e}\n"));
            return channel.exit(1);
        }
    }
    // The client sends nothing more: end of file is its hang-up.
    let mut sink = [0u8; 256];
    loop {
        match io::Read::read(&mut reader, &mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = handle.call(move |ctl| sessions::end(ctl, id));
    let _ = done_rx.recv();
    let _ = handle.call(move |ctl| sessions::release(ctl, id));
}
