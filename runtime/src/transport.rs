//! The output path from probe handlers to the user.
//!
//! Handlers never write to a file descriptor: the tracer thread pushes whole
//! messages (one handler run's output, or a flushed part of it) into a bounded
//! wait-free byte ring ([`rtrb`], single producer), and a separate output
//! thread drains it to stdout or a `-o FILE`. When the ring is full the
//! message is dropped and counted, so a slow reader can never stall the
//! tracer; [`Transport::finish`] drains everything and then reports the count
//! with SystemTap's wording (see [`lost_warning`]).
//!
//! A message need not be final text: with a [`Renderer`] in the config, the
//! output thread turns each batch into text before writing it, so that
//! formatting happens there instead of on the tracer thread (the script
//! runtime queues `printf` records; see `script::output`).
//!
//! Control messages (runtime warnings and errors) take a separate unbounded
//! path to stderr and are never dropped. The same path carries the commands
//! of the script's `system(cmd)`: the output thread starts each one (with
//! `/bin/sh -c`) once everything queued before it is written, as SystemTap's
//! stapio does, so the tracer thread never forks or waits for one.
//!
//! At session end no tracee waits on the output any more, so the end probes'
//! output must not be lost: [`Producer::set_lossless`] makes a message that
//! does not fit take the unbounded path too (in order, still written to the
//! data output), however large.
//!
//! Write errors are not silent: the first one is reported on the control
//! output (`ERROR: ...`) and returned by [`Transport::finish`] (utap then
//! exits 1). A reader that went away (EPIPE, e.g. `utap ... | head -1`) is
//! not an error to report: the hook set with [`Transport::on_closed`] runs
//! once, to end the session quietly, as SIGPIPE ends other Unix tools.
//!
//! Waking the output thread costs the producer one fence and one load per
//! message: the output thread advertises that it is about to park in a flag,
//! and the producer unparks it only when that flag is set.

use std::fs::File;
use std::io::{self, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle, Thread};

/// SystemTap's default buffer size (`_stp_nsubbufs * _stp_subbuf_size` in
/// runtime/transport/transport.c: 16 MiB), in megabytes.
pub const DEFAULT_BUFFER_MB: usize = 16;

/// The largest `-s` value SystemTap accepts.
pub const MAX_BUFFER_MB: usize = 4095;

/// Parses the argument of `-s MB` into a buffer size in bytes, with
/// SystemTap's message for values outside 1..=4095.
pub fn parse_buffer_mb(arg: &str) -> Result<usize, String> {
    match arg.trim().parse::<usize>() {
        Ok(mb) if (1..=MAX_BUFFER_MB).contains(&mb) => Ok(mb << 20),
        _ => Err("Invalid buffer size (should be 1-4095).".to_string()),
    }
}

/// The warning printed at exit when messages were dropped. SystemTap's
/// runtime prints "There were %d transport failures. Try stap -s to increase
/// the buffer size from %d." (with `WARNING: ` in front); utap keeps the
/// wording and names itself.
pub fn lost_warning(lost: u64, buffer_bytes: usize) -> String {
    format!(
        "WARNING: There were {lost} transport failures. Try utap -s to increase the buffer size from {}.\n",
        buffer_bytes >> 20
    )
}

/// Where data messages go.
pub enum Output {
    /// The process's standard output (fd 1), written unbuffered in batches.
    Stdout,
    /// Any writer, e.g. a file opened for `-o FILE` ([`Output::file`]) or a
    /// pipe in tests.
    Writer(Box<dyn Write + Send>),
}

impl Output {
    /// Creates (truncates) `path` for `-o FILE`.
    pub fn file(path: &Path) -> io::Result<Output> {
        Ok(Output::Writer(Box::new(File::create(path)?)))
    }

    fn into_writer(self) -> Box<dyn Write + Send> {
        match self {
            Output::Stdout => Box::new(RawFd(1)),
            Output::Writer(w) => w,
        }
    }
}

/// Turns a batch of whole messages into the bytes to write (on the output
/// thread). Messages are pushed whole, so a batch never ends inside one.
pub type Renderer = Box<dyn FnMut(&[u8], &mut Vec<u8>) + Send>;

/// How to build a [`Transport`].
pub struct Config {
    /// Ring capacity in bytes (`-s MB` × 2^20).
    pub buffer_bytes: usize,
    /// Destination of data messages.
    pub output: Output,
    /// Destination of control messages; `None` means stderr (fd 2).
    pub control: Option<Box<dyn Write + Send>>,
    /// Renders messages into text; `None`: messages are the text.
    pub render: Option<Renderer>,
    /// `--format json`: control messages and the drop count are JSON
    /// records on the data output instead of text on stderr (see
    /// `crate::json`; the schema line is the creator's to write first).
    pub json: bool,
}

impl Config {
    /// The default buffer size, writing to stdout and stderr.
    pub fn stdout() -> Config {
        Config {
            buffer_bytes: DEFAULT_BUFFER_MB << 20,
            output: Output::Stdout,
            control: None,
            render: None,
            json: false,
        }
    }
}

/// What happened over a transport's life, returned by [`Transport::finish`].
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages accepted into the ring (all of them were written, unless
    /// `error` is set).
    pub messages: u64,
    /// Messages dropped because the ring was full (or larger than it).
    pub lost: u64,
    /// Bytes written to the data output.
    pub bytes_written: u64,
    /// The first error writing the data output (writing stops after it; the
    /// ring is still drained so the producer never stalls).
    pub error: Option<io::Error>,
}

/// State shared by the producer, control senders and the output thread.
struct Shared {
    /// The output thread is about to park (or parked); whoever makes work
    /// for it must unpark it.
    sleeping: AtomicBool,
    /// finish() was called: drain and exit.
    closing: AtomicBool,
    messages: AtomicU64,
    lost: AtomicU64,
    output_thread: Thread,
    /// Runs once when the data output's reader has gone away (EPIPE).
    on_closed: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Shared {
    /// Wakes the output thread if it is parking. The SeqCst fence orders our
    /// earlier publication of work before the load of `sleeping`, pairing
    /// with the fence the output thread issues between setting `sleeping`
    /// and re-checking for work.
    #[inline]
    fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            self.output_thread.unpark();
        }
    }
}

/// The tracer thread's end of the transport: owned by exactly one thread
/// (the script runtime keeps it in its context). Not `Clone` on purpose; the
/// ring has a single producer.
pub struct Producer {
    ring: rtrb::Producer<u8>,
    shared: Arc<Shared>,
    control: ControlSender,
    /// Session end: never drop (see [`Producer::set_lossless`]).
    lossless: bool,
    /// A message took the unbounded path: later ones follow it there, to
    /// stay in order.
    spilled: bool,
}

impl Producer {
    /// Queues one whole message. Never blocks: if the ring lacks room for
    /// all of `msg`, the message is dropped, counted, and `false` returned.
    /// Empty messages are accepted and cost nothing.
    #[inline]
    pub fn push(&mut self, msg: &[u8]) -> bool {
        if msg.is_empty() {
            return true;
        }
        if self.spilled {
            return self.spill(msg);
        }
        // Single writer: a relaxed load+store is enough for the counters.
        if self.ring.push_entire_slice(msg).is_err() {
            if self.lossless {
                return self.spill(msg);
            }
            let lost = &self.shared.lost;
            lost.store(lost.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            return false;
        }
        let n = &self.shared.messages;
        n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.shared.notify();
        true
    }

    /// Counts `n` messages lost before they reached this queue (records
    /// a full output ring of the data plane dropped), for the warning at
    /// exit.
    pub fn add_lost(&mut self, n: u64) {
        let lost = &self.shared.lost;
        lost.store(lost.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Messages dropped so far.
    pub fn lost(&self) -> u64 {
        self.shared.lost.load(Ordering::Relaxed)
    }

    /// From now on no message is dropped: one that does not fit in the ring
    /// (even one larger than the whole ring) is handed to the output thread
    /// through the unbounded queue, after everything queued before it. For
    /// the session's end (end probes, autoprint), when no tracee waits.
    pub fn set_lossless(&mut self) {
        self.lossless = true;
    }

    fn spill(&mut self, msg: &[u8]) -> bool {
        self.spilled = true;
        let n = &self.shared.messages;
        n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.control.send_msg(ControlMsg::Data(msg.to_vec()));
        true
    }

    /// Sends a control message (written to stderr, never dropped).
    pub fn control(&self, msg: impl Into<Vec<u8>>) {
        self.control.send(msg);
    }

    /// A handle other threads can use to send control messages.
    pub fn control_sender(&self) -> ControlSender {
        self.control.clone()
    }

    /// Queues `system(cmd)`: the output thread runs `cmd` once the output
    /// queued before it is written.
    pub fn system(&self, cmd: &[u8]) {
        self.control.send_msg(ControlMsg::System(cmd.to_vec()));
    }
}

/// What travels on the control path.
enum ControlMsg {
    /// Text for the control output (stderr).
    Stderr(Vec<u8>),
    /// A command to run in the background (`system()`).
    System(Vec<u8>),
    /// A data message that must not be dropped (lossless mode: the ring
    /// had no room), written in its turn after the data queued before it.
    Data(Vec<u8>),
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.shared.notify();
    }
}

/// Sends control messages (warnings, errors) to the control output. They go
/// through an unbounded queue: never dropped, never blocking the sender.
#[derive(Clone)]
pub struct ControlSender {
    tx: mpsc::Sender<ControlMsg>,
    shared: Arc<Shared>,
}

impl ControlSender {
    /// Queues `msg` for the control output (stderr).
    pub fn send(&self, msg: impl Into<Vec<u8>>) {
        self.send_msg(ControlMsg::Stderr(msg.into()));
    }

    fn send_msg(&self, msg: ControlMsg) {
        // The receiver lives until the output thread ends, which only
        // happens in finish(); a message sent after that has nowhere to go.
        if self.tx.send(msg).is_ok() {
            self.shared.notify();
        }
    }
}

/// The output side: owns the output thread. Call [`Transport::finish`] at
/// exit (and on Ctrl-C) to drain everything; dropping it finishes too.
pub struct Transport {
    shared: Arc<Shared>,
    control: ControlSender,
    buffer_bytes: usize,
    /// The output thread reports drops itself (as a JSON record).
    json: bool,
    thread: Option<JoinHandle<Drained>>,
}

/// What the output thread hands back when it ends.
struct Drained {
    control: Box<dyn Write + Send>,
    bytes_written: u64,
    error: Option<io::Error>,
}

impl Transport {
    /// Allocates the ring and starts the output thread.
    pub fn start(config: Config) -> io::Result<(Transport, Producer)> {
        let capacity = config.buffer_bytes.max(1);
        let (ring_tx, ring_rx) = rtrb::RingBuffer::<u8>::new(capacity);
        let (ctl_tx, ctl_rx) = mpsc::channel();
        let output = config.output.into_writer();
        let control = config.control.unwrap_or_else(|| Box::new(RawFd(2)));
        let render = config.render;
        let json = config.json;
        let buffer_bytes = capacity;

        // The thread needs `Shared` and `Shared` needs the thread's handle:
        // hand the Arc over through a channel once it exists.
        let (shared_tx, shared_rx) = mpsc::channel::<Arc<Shared>>();
        let thread = thread::Builder::new()
            .name("utap-output".into())
            .spawn(move || {
                let shared = shared_rx.recv().expect("transport shared state");
                OutputLoop {
                    ring: ring_rx,
                    control_rx: ctl_rx,
                    output,
                    control,
                    shared,
                    render,
                    json,
                    buffer_bytes,
                    scratch: Vec::new(),
                    text: Vec::new(),
                    bytes_written: 0,
                    error: None,
                    commands: Vec::new(),
                }
                .run()
            })?;
        let shared = Arc::new(Shared {
            sleeping: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            messages: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            output_thread: thread.thread().clone(),
            on_closed: OnceLock::new(),
        });
        // The thread is blocked in recv() until this arrives.
        let _ = shared_tx.send(shared.clone());
        let control = ControlSender {
            tx: ctl_tx,
            shared: shared.clone(),
        };
        let producer = Producer {
            ring: ring_tx,
            shared: shared.clone(),
            control: control.clone(),
            lossless: false,
            spilled: false,
        };
        let transport = Transport {
            shared,
            control,
            buffer_bytes: capacity,
            json,
            thread: Some(thread),
        };
        Ok((transport, producer))
    }

    /// A handle other threads can use to send control messages.
    pub fn control_sender(&self) -> ControlSender {
        self.control.clone()
    }

    /// Messages dropped so far.
    pub fn lost(&self) -> u64 {
        self.shared.lost.load(Ordering::Relaxed)
    }

    /// Sets what to do, once, when the data output's reader goes away
    /// (EPIPE): typically end the session. Called on the output thread.
    pub fn on_closed(&self, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.shared.on_closed.set(Box::new(hook));
    }

    /// Drains every message pushed before this call to the output, writes
    /// the lost-messages warning to the control output if any were dropped,
    /// stops the output thread and returns the totals. Call it once the
    /// tracer has stopped pushing (after the end probes ran): a push that
    /// races with it may not be written. Blocks while the output does (a
    /// reader that never reads keeps utap from exiting, as with stapio).
    pub fn finish(mut self) -> Stats {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> Stats {
        let Some(thread) = self.thread.take() else {
            return Stats::default();
        };
        self.shared.closing.store(true, Ordering::Release);
        self.shared.notify();
        let joined = thread.join();
        let mut stats = Stats {
            messages: self.shared.messages.load(Ordering::Relaxed),
            lost: self.shared.lost.load(Ordering::Relaxed),
            ..Stats::default()
        };
        match joined {
            Ok(mut drained) => {
                if stats.lost > 0 && !self.json {
                    let warning = lost_warning(stats.lost, self.buffer_bytes);
                    let _ = drained.control.write_all(warning.as_bytes());
                }
                let _ = drained.control.flush();
                stats.bytes_written = drained.bytes_written;
                stats.error = drained.error;
            }
            Err(_) => stats.error = Some(io::Error::other("the output thread panicked")),
        }
        stats
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.finish_inner();
    }
}

/// The output thread's state.
struct OutputLoop {
    ring: rtrb::Consumer<u8>,
    control_rx: mpsc::Receiver<ControlMsg>,
    output: Box<dyn Write + Send>,
    control: Box<dyn Write + Send>,
    shared: Arc<Shared>,
    render: Option<Renderer>,
    json: bool,
    buffer_bytes: usize,
    /// A batch that wrapped around the ring, made contiguous for `render`.
    scratch: Vec<u8>,
    /// Rendered text of a batch.
    text: Vec<u8>,
    bytes_written: u64,
    error: Option<io::Error>,
    /// `system()` commands started and not yet reaped.
    commands: Vec<std::process::Child>,
}

/// How long the end of a session waits for `system()` commands still
/// running before leaving them to finish on their own.
const COMMAND_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

impl OutputLoop {
    fn run(mut self) -> Drained {
        loop {
            let mut worked = self.drain_data();
            worked |= self.drain_control();
            if worked {
                continue;
            }
            if self.shared.closing.load(Ordering::Acquire) {
                // closing was set after the last push we must deliver;
                // one more pass picks up anything that raced with it.
                if !self.drain_data() && !self.drain_control() {
                    break;
                }
                continue;
            }
            self.park();
        }
        let lost = self.shared.lost.load(Ordering::Relaxed);
        if self.json && lost > 0 {
            let mut record = Vec::new();
            crate::json::drops(&mut record, lost, self.buffer_bytes);
            self.write_data(&record);
        }
        let _ = self.output.flush();
        self.wait_commands();
        Drained {
            control: self.control,
            bytes_written: self.bytes_written,
            error: self.error,
        }
    }

    /// Parks until a producer, control sender or finish() makes work.
    fn park(&mut self) {
        self.shared.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let idle = self.ring.is_empty() && !self.shared.closing.load(Ordering::Acquire);
        if idle {
            match self.control_rx.try_recv() {
                Ok(item) => {
                    self.shared.sleeping.store(false, Ordering::Relaxed);
                    self.write_item(item);
                    return;
                }
                Err(_) => thread::park(),
            }
        }
        self.shared.sleeping.store(false, Ordering::Relaxed);
    }

    /// Writes everything in the ring; returns whether there was anything.
    fn drain_data(&mut self) -> bool {
        let n = self.ring.slots();
        if n == 0 {
            return false;
        }
        let Ok(chunk) = self.ring.read_chunk(n) else {
            return false;
        };
        let (a, b) = chunk.as_slices();
        let mut result = None;
        if self.error.is_none() {
            result = Some(match &mut self.render {
                None => write_both(&mut self.output, a, b).map(|()| n),
                Some(render) => {
                    let batch = if b.is_empty() {
                        a
                    } else {
                        self.scratch.clear();
                        self.scratch.extend_from_slice(a);
                        self.scratch.extend_from_slice(b);
                        &self.scratch
                    };
                    self.text.clear();
                    render(batch, &mut self.text);
                    self.output.write_all(&self.text).map(|()| self.text.len())
                }
            });
        }
        chunk.commit_all();
        if let Some(result) = result {
            self.account(result);
        }
        true
    }

    /// A message from the unbounded path (lossless mode), after everything
    /// the ring holds (which was queued before it).
    fn write_spilled(&mut self, msg: &[u8]) {
        self.drain_data();
        if self.error.is_some() {
            return;
        }
        let result = match &mut self.render {
            None => self.output.write_all(msg).map(|()| msg.len()),
            Some(render) => {
                self.text.clear();
                render(msg, &mut self.text);
                self.output.write_all(&self.text).map(|()| self.text.len())
            }
        };
        self.account(result);
    }

    /// Counts written bytes; the first error stops writing and is reported
    /// once (a closed pipe quietly, through the `on_closed` hook).
    fn account(&mut self, result: io::Result<usize>) {
        match result {
            Ok(written) => self.bytes_written += written as u64,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.error = Some(e);
                if let Some(hook) = self.shared.on_closed.get() {
                    hook();
                }
            }
            Err(e) => {
                let msg = format!("ERROR: cannot write the output: {}\n", describe(&e));
                let _ = self.control.write_all(msg.as_bytes());
                let _ = self.control.flush();
                self.error = Some(e);
            }
        }
    }

    fn drain_control(&mut self) -> bool {
        let mut any = false;
        while let Ok(item) = self.control_rx.try_recv() {
            self.write_item(item);
            any = true;
        }
        any
    }

    fn write_item(&mut self, msg: ControlMsg) {
        match msg {
            ControlMsg::Data(data) => self.write_spilled(&data),
            msg => self.write_control(&msg),
        }
    }

    fn write_control(&mut self, msg: &ControlMsg) {
        // Data queued before a control message should appear first.
        self.drain_data();
        match msg {
            ControlMsg::Stderr(text) if self.json => {
                let mut record = Vec::new();
                for line in text.split_inclusive(|&b| b == b'\n') {
                    crate::json::control(&mut record, line);
                }
                self.write_data(&record);
            }
            ControlMsg::Stderr(text) => {
                let _ = self.output.flush();
                let _ = self.control.write_all(text);
                let _ = self.control.flush();
            }
            ControlMsg::System(cmd) => {
                let _ = self.output.flush();
                self.run_command(cmd)
            }
            ControlMsg::Data(data) => self.write_spilled(data),
        }
    }

    /// Starts `system(cmd)` in the background: `/bin/sh -c cmd` with
    /// utap's stdout and stderr, stdin closed. A command that cannot be
    /// started gets a warning on the control output.
    fn run_command(&mut self, cmd: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;
        self.commands
            .retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        let mut command = std::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(std::ffi::OsStr::from_bytes(cmd))
            .stdin(std::process::Stdio::null());
        // SAFETY: restore_in_child is async-signal-safe.
        let spawned = unsafe {
            command.pre_exec(|| {
                crate::priority::restore_in_child();
                Ok(())
            })
        }
        .spawn();
        match spawned {
            Ok(child) => self.commands.push(child),
            Err(e) => {
                let msg = format!(
                    "WARNING: system(\"{}\") failed: {e}\n",
                    String::from_utf8_lossy(cmd)
                );
                let _ = self.control.write_all(msg.as_bytes());
            }
        }
    }

    /// Reaps the `system()` commands, waiting up to [`COMMAND_GRACE`] for
    /// those still running (their output belongs to the session's).
    fn wait_commands(&mut self) {
        let deadline = std::time::Instant::now() + COMMAND_GRACE;
        while !self.commands.is_empty() && std::time::Instant::now() < deadline {
            self.commands
                .retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_)) | Err(_)));
            if !self.commands.is_empty() {
                thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}

impl OutputLoop {
    /// Writes bytes that are not from the ring to the data output.
    fn write_data(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        match self.output.write_all(bytes) {
            Ok(()) => self.bytes_written += bytes.len() as u64,
            Err(e) => self.error = Some(e),
        }
    }
}

/// An I/O error as a person reads it: "No space left on device", without
/// Rust's " (os error 28)".
pub fn describe(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn write_both(out: &mut dyn Write, a: &[u8], b: &[u8]) -> io::Result<()> {
    out.write_all(a)?;
    out.write_all(b)
}

/// An unbuffered writer on a file descriptor we do not own (stdout/stderr):
/// the output thread already writes in large batches.
struct RawFd(i32);

impl Write for RawFd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: fd 1 or 2 stays open for the life of the process; the
        // ManuallyDrop keeps us from closing it.
        let mut file = ManuallyDrop::new(unsafe { File::from_raw_fd(self.0) });
        file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
