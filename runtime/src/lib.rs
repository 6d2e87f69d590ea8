//! utap's runtime: the utrace engine core over ptrace, the value runtime the
//! native handlers call, the output transport and tracing sessions.

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
