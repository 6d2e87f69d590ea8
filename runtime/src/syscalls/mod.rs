//! What utap knows about Linux x86_64 system calls, errno values and
//! signals, and how it shows them: the table of every system call, the
//! strace-style decoders of their arguments, and the functions the stdlib
//! tapsets (`stdlib/syscalls.stp`, `stdlib/signal.stp`) call as builtins.
//!
//! - [`table`]: every x86_64 system call (number, name, argument count,
//!   strace class);
//! - [`spec`]: the named, typed arguments of the ~210 calls decoded in
//!   full, which drive both [`argstr()`] and the tapset's named variables;
//! - [`decode`]: one module per family turning raw values and tracee
//!   memory into strace's text;
//! - [`mod@argstr`]: `argstr`/`retstr` (and the entry snapshot for values the
//!   kernel rewrites);
//! - [`errno`], [`signals`]: SystemTap's and strace's names;
//! - [`builtins`]: the functions the tapsets call, with script-friendly
//!   signatures;
//! - [`tapset`]: the generator of `stdlib/syscalls.stp`;
//! - [`strace_compat`]: strace's output in SystemTap's conventions, for
//!   tests that compare the two.

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
