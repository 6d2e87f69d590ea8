//! utap's compiler: SystemTap script → checked program.
//!
//! Passes, each in its own module, data flowing one way:
//! `lexer` → `preprocess` → `parser` (lalrpop) → [`ast`] → `check` → [`program`].
//! Diagnostics from every pass go through `diag`.

pub mod ast;
mod beside;
pub mod builtins;
pub mod check;
pub mod diag;
pub mod foreign;
pub mod lexer;
pub mod locks;
pub mod macros;
pub mod metrics;
pub mod parser;
pub mod preprocess;
pub mod print;
pub mod program;
pub mod route;
pub mod source;
pub mod stopless;
pub mod syntax_walk;
pub mod walk;
