//! What utap knows about Linux x86_64 system calls, errno values and
//! signals, and how it shows them: the table of every system call, the
//! strace-style decoders of their arguments, and the functions the stdlib
//! tapsets (`stdlib/syscalls.stp`, `stdlib/signal.stp`) call as builtins.

pub mod argstr;
pub mod builtins;
pub mod decode;
pub mod errno;
pub mod signals;
pub mod spec;
pub mod strace_compat;
pub mod table;
pub mod tapset;
#[cfg(test)]
mod testmem;

pub use argstr::{EntrySnapshot, argstr, argstr_exit, entry_snapshot, retstr};
pub use errno::errno_str;
pub use signals::signal_name;
pub use table::{syscall_name, syscall_number};
