//! utap's runtime: the utrace engine core over ptrace, the value runtime the
//! native handlers call, the output transport and tracing sessions.

/// `eprintln!` in one write. The transport writes stderr from its own
/// thread, unsynchronized with std's lock, and `eprintln!` writes each piece
/// of its format apart: one of the transport's lines (an ERROR) could land
/// inside a `-v` line.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        let line = format!("{}\n", format_args!($($t)*));
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }};
}

pub mod daemon;
pub mod dataplane;
pub mod dwarf;
pub mod elf;
pub mod endtrace;
pub mod format;
pub mod glob;
pub mod guardian;
pub mod harness;
pub mod hit;
pub mod host;
pub mod hurry;
pub mod json;
pub mod listener;
pub mod memory;
pub mod metrics;
pub mod priority;
pub mod procinfo;
pub mod script;
pub mod seccomp;
pub mod session;
pub mod syscalls;
pub mod tid;
pub mod transport;
pub mod unwind;
pub mod uprobe;
pub mod utrace;
pub mod values;
