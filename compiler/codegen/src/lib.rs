//! Cranelift code generation: one native function per probe handler and per
//! script function, calling into the runtime through registered symbols.
