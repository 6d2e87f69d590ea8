//! Decoders that turn raw system call arguments (and tracee memory) into
//! strace's text, one module per family.

pub mod bytes;
pub mod file;
pub mod flags;
pub mod memory;
pub mod misc;
pub mod network;
pub mod poll;
pub mod process;
pub mod resource;
pub mod signal;
pub mod strings;
pub mod time;
