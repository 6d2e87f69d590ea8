//! The daemon's wire protocol, version [`VERSION`].
//!
//! A client opens the daemon's Unix stream socket and sends one request:
//! one line of JSON ([`Hello`]). Everything the daemon sends back is a
//! sequence of frames: a tag byte, a 4-byte little-endian length and the
//! payload ([`Frame`]). Script output is bytes, not text (`printf("%c")`
//! may write anything), hence binary frames rather than JSON lines.
//!
//! After its request the client sends nothing more: it ends its session
//! early (Ctrl-C) by shutting down its writing half, and a client that dies
//! closes the socket; either way the daemon reads end-of-file.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::utrace::command_line::CommandLine;

/// The protocol version this utap speaks; a daemon refuses other versions.
pub const VERSION: u32 = 1;

/// The client's one request line.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Hello {
    pub version: u32,
    pub request: Request,
}

/// What a client asks for.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Run a script as a session: the client's command-line arguments (as
    /// after `utap`), and the script's text, read by the client (so that a
    /// relative path or `-` means what it means to the user).
    Run {
        argv: Vec<String>,
        script_name: String,
        script: String,
        /// Diagnostics in colour (the client's stderr is a terminal).
        colour: bool,
        /// For a `-c` command: the client's working directory and
        /// environment (`NAME=VALUE`); its stdin, stdout and stderr follow
        /// the request line (see `daemon::fds`).
        #[serde(default)]
        command_io: Option<CommandEnv>,
    },
    /// List the sessions (`utap --sessions`).
    Sessions,
    /// End a session as if its client pressed Ctrl-C (`--detach-session`).
    Detach { id: u64 },
}

/// Where a `-c` command runs: as the client would have run it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CommandEnv {
    pub cwd: String,
    pub env: Vec<String>,
    /// The command as the client split it (`utrace::command_line`): its
    /// variables, `~`, globs and PATH lookup are the client's, not the
    /// daemon's. Absent (from an older client), the daemon splits it.
    #[serde(default)]
    pub split: Option<Split>,
}

/// A split `-c` command on the wire ([`CommandLine`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Split {
    /// The program's path and argv.
    Words { program: String, argv: Vec<String> },
    /// `/bin/sh -c CMD`.
    Shell { cmd: String },
}

impl From<CommandLine> for Split {
    fn from(line: CommandLine) -> Split {
        match line {
            CommandLine::Words { program, argv } => Split::Words {
                program: program.to_string_lossy().into_owned(),
                argv,
            },
            CommandLine::Shell(cmd) => Split::Shell { cmd },
        }
    }
}

impl From<Split> for CommandLine {
    fn from(split: Split) -> CommandLine {
        match split {
            Split::Words { program, argv } => CommandLine::Words {
                program: program.into(),
                argv,
            },
            Split::Shell { cmd } => CommandLine::Shell(cmd),
        }
    }
}

/// One message from the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// For the client's standard output.
    Stdout(Vec<u8>),
    /// For the client's standard error.
    Stderr(Vec<u8>),
    /// The session is over: exit with this status (`>= 0`) or die of this
    /// signal (`< 0`, its negated number). Always the last frame.
    Exit(i32),
}

const STDOUT: u8 = b'1';
const STDERR: u8 = b'2';
const EXIT: u8 = b'X';

/// Largest payload a reader accepts (a corrupt length must not make it
/// allocate gigabytes).
const MAX_FRAME: usize = 64 << 20;

impl Frame {
    /// The frame's bytes, header included (written with one `write_all`).
    pub fn encode(&self) -> Vec<u8> {
        let exit;
        let (tag, payload): (u8, &[u8]) = match self {
            Frame::Stdout(b) => (STDOUT, b),
            Frame::Stderr(b) => (STDERR, b),
            Frame::Exit(code) => {
                exit = code.to_le_bytes();
                (EXIT, &exit)
            }
        };
        let mut out = Vec::with_capacity(5 + payload.len());
        out.push(tag);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// Reads the next frame; `Ok(None)` at a clean end of stream.
    pub fn read(r: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut header = [0u8; 5];
        match r.read_exact(&mut header[..1]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        r.read_exact(&mut header[1..])?;
        let len = u32::from_le_bytes(header[1..5].try_into().expect("4 bytes")) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "frame too large",
            ));
        }
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload)?;
        match header[0] {
            STDOUT => Ok(Some(Frame::Stdout(payload))),
            STDERR => Ok(Some(Frame::Stderr(payload))),
            EXIT if len == 4 => Ok(Some(Frame::Exit(i32::from_le_bytes(
                payload[..4].try_into().expect("4 bytes"),
            )))),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "unknown frame from the daemon",
            )),
        }
    }

    /// Writes the frame whole.
    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.encode())
    }
}

/// Writes the request line.
pub fn send_hello(w: &mut impl Write, request: Request) -> io::Result<()> {
    let hello = Hello {
        version: VERSION,
        request,
    };
    let mut line = serde_json::to_vec(&hello).map_err(io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)
}

/// Reads the request line (at most 64 MiB: a script and its arguments).
pub fn read_hello(r: &mut impl Read) -> Result<Hello, String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match r.read(&mut byte) {
            Ok(0) => return Err("the client sent no request".into()),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if line.len() < MAX_FRAME => line.push(byte[0]),
            Ok(_) => return Err("the request is too large".into()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read the request: {e}")),
        }
    }
    // The version first, so that a newer client gets a clear answer.
    let value: serde_json::Value =
        serde_json::from_slice(&line).map_err(|e| format!("bad request: {e}"))?;
    match value.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == VERSION as u64 => {}
        Some(v) => {
            return Err(format!(
                "the client speaks protocol version {v}, this daemon version {VERSION}: \
                 use the same utap for both"
            ));
        }
        None => return Err("bad request: no protocol version".into()),
    }
    serde_json::from_value(value).map_err(|e| format!("bad request: {e}"))
}

/// The default socket: `$XDG_RUNTIME_DIR/utap/utapd.sock`, or
/// `$TMPDIR/utap-UID/utapd.sock` (`/tmp` without TMPDIR) where
/// XDG_RUNTIME_DIR is unset. Its directory must pass [`private_dir`].
pub fn default_socket() -> PathBuf {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("utap"),
        // SAFETY: getuid has no memory effects.
        None => std::env::temp_dir().join(format!("utap-{}", unsafe { libc::getuid() })),
    };
    dir.join("utapd.sock")
}

/// Whether `dir` may hold the user's daemon socket: a real directory (not
/// a symbolic link, which anyone can plant in a shared /tmp, before or
/// after the user's daemon made its own), of this user, that no one else
/// can enter. `Err` says why not, for the daemon and the client alike.
/// `Ok(false)`: there is nothing at `dir`.
pub fn private_dir(dir: &std::path::Path) -> Result<bool, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    // SAFETY: getuid has no memory effects.
    let uid = unsafe { libc::getuid() };
    let remedy = "remove it, or set XDG_RUNTIME_DIR to a directory of yours";
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(dir)
            .map(|t| format!(" to {}", t.display()))
            .unwrap_or_default();
        return Err(format!(
            "{} is a symbolic link of uid {}{to}, not a directory: someone may have \
             planted it to take the daemon's socket ({remedy})",
            dir.display(),
            meta.uid()
        ));
    }
    if !meta.is_dir() {
        return Err(format!("{} is not a directory ({remedy})", dir.display()));
    }
    if meta.uid() != uid {
        return Err(format!(
            "{} belongs to uid {}, not to you (uid {uid}): its owner could take the \
             daemon's socket ({remedy})",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} has mode {:o}: other users can reach the daemon's socket (chmod 700 it)",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let frames = [
            Frame::Stdout(b"hello\n".to_vec()),
            Frame::Stderr(vec![0, 255, 10]),
            Frame::Stdout(Vec::new()),
            Frame::Exit(-13),
            Frame::Exit(1),
        ];
        let mut bytes = Vec::new();
        for f in &frames {
            f.write(&mut bytes).unwrap();
        }
        let mut r = &bytes[..];
        for f in &frames {
            assert_eq!(Frame::read(&mut r).unwrap().as_ref(), Some(f));
        }
        assert_eq!(Frame::read(&mut r).unwrap(), None);
    }

    #[test]
    fn requests_round_trip_and_versions_are_checked() {
        let req = Request::Run {
            argv: vec!["-x".into(), "1".into()],
            script_name: "a.stp".into(),
            script: "probe begin {}".into(),
            colour: false,
            command_io: None,
        };
        let mut line = Vec::new();
        send_hello(&mut line, req.clone()).unwrap();
        let hello = read_hello(&mut &line[..]).unwrap();
        assert_eq!(hello.request, req);
        let old = br#"{"version":99,"request":{"op":"sessions"}}
"#;
        let err = read_hello(&mut &old[..]).unwrap_err();
        assert!(err.contains("version 99"), "{err}");
    }
}
