//! A session's channel: its client's socket, written in frames.
//!
//! The session's output takes the same path as standalone output: handlers
//! push into the session's own transport ring (bounded, never blocking the
//! tracer thread; a full ring drops and counts), and the session's output
//! thread writes it to the client as `Stdout` frames. A client that reads
//! slowly blocks only that output thread: its ring fills and only its
//! messages are dropped; the drop count reaches that client only, as the
//! transport's usual warning. Errors and warnings take the transport's
//! never-dropped control queue and arrive as `Stderr` frames, and the
//! `Exit` frame comes last, once everything before it is written.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use super::protocol::Frame;
use crate::transport::{Config, Output};

/// One client's socket; clones share it (frames are written whole).
#[derive(Clone)]
pub struct Channel {
    sock: Arc<Mutex<UnixStream>>,
}

impl Channel {
    pub fn new(stream: UnixStream) -> Channel {
        Channel {
            sock: Arc::new(Mutex::new(stream)),
        }
    }

    /// Writes one frame (blocks while the client does not read).
    pub fn send(&self, frame: &Frame) -> io::Result<()> {
        let bytes = frame.encode();
        let mut sock = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        sock.write_all(&bytes)
    }

    /// Text for the client's stderr; a client gone is not an error here.
    pub fn stderr(&self, text: impl Into<Vec<u8>>) {
        let _ = self.send(&Frame::Stderr(text.into()));
    }

    /// The last frame: how the client ends.
    pub fn exit(&self, status: i32) {
        let _ = self.send(&Frame::Exit(status));
    }

    /// A transport writing to this client (data as `Stdout` frames,
    /// control messages as `Stderr` frames).
    pub fn transport_config(&self, buffer_bytes: usize, json: bool) -> Config {
        let mut config = Config::stdout();
        config.buffer_bytes = buffer_bytes;
        config.output = Output::Writer(Box::new(FrameWriter {
            channel: self.clone(),
            stderr: false,
        }));
        config.control = Some(Box::new(FrameWriter {
            channel: self.clone(),
            stderr: true,
        }));
        config.json = json;
        config
    }
}

/// Writes each buffer as one frame.
struct FrameWriter {
    channel: Channel,
    stderr: bool,
}

impl Write for FrameWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let frame = match self.stderr {
            true => Frame::Stderr(buf.to_vec()),
            false => Frame::Stdout(buf.to_vec()),
        };
        self.channel.send(&frame)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
