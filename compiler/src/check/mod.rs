//! The checker: tapsets, probe aliases, probe-point resolution, name
//! resolution and type inference, turning an [`crate::ast::Script`] into a
//! [`crate::program::Program`].

pub mod catalogue;
