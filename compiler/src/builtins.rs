//! The builtin function table: every function the runtime implements in
//! Rust, with its signature.
//!
//! This is the contract between the checker (which types calls against it)
//! and the codegen/runtime (which implements each entry under the same
//! name). Keep it one static table: adding a builtin means adding a row here
//! and its implementation in the runtime, nothing else.
//!
//! The print family (`print`, `printf`, `sprintf`, `println`, `log`, ...) is
//! not here: the checker turns those calls into `ExprKind::Print` (see
//! [`PRINT_FUNCTIONS`]).

use crate::program::{PrintKind, Type};

/// One runtime-implemented function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Builtin {
    pub name: &'static str,
    /// Parameter types, in order.
    pub params: &'static [Type],
    /// How many leading parameters are required (the rest are optional,
    /// e.g. `strtol(s)` / `strtol(s, base)`).
    pub required: usize,
    pub ret: Type,
    /// Needs `-g` (guru mode): it changes what the traced program sees.
    pub guru: bool,
    /// Reads the current process (registers, memory, ids): meaningless in
    /// `begin`/`end`/`timer` probes, where the runtime reports an error.
    pub process: bool,
    /// No side effect: a call whose value is unused may be dropped (this is
    /// what lets the checker elide unused alias variables).
    pub pure_: bool,
}

use Type::{Long as L, String as S, Void as V};

const fn f(
    name: &'static str,
    params: &'static [Type],
    ret: Type,
    pure_: bool,
    process: bool,
) -> Builtin {
    Builtin {
        name,
        params,
        required: params.len(),
        ret,
        guru: false,
        process,
        pure_,
    }
}

/// A pure function of its arguments.
const fn pure(name: &'static str, params: &'static [Type], ret: Type) -> Builtin {
    f(name, params, ret, true, false)
}

/// A pure read of the current process context.
const fn ctx(name: &'static str, params: &'static [Type], ret: Type) -> Builtin {
    f(name, params, ret, true, true)
}

/// A guru-mode control action on threads.
const fn guru(name: &'static str, params: &'static [Type]) -> Builtin {
    Builtin {
        name,
        params,
        required: params.len(),
        ret: V,
        guru: true,
        process: false,
        pure_: false,
    }
}

const fn optional(mut b: Builtin, required: usize) -> Builtin {
    b.required = required;
    b
}

/// Every builtin, sorted by name (checked by a test; lookup is a binary
/// search).
pub static BUILTINS: &[Builtin] = &[
    // execve's `env_str` and `args` (SystemTap's __count_envp, __get_argv).
    ctx("__count_envp", &[L], S),
    // DWARF target variables: a plan number (see utap_runtime::dwarf) and
    // the dynamic array indexes.
    ctx("__dwarf_long", &[L, L, L], L),
    // `$var = v` under -g: plan number, value, the plan's two values.
    f("__dwarf_set", &[L, L, L, L], L, false, true),
    ctx("__dwarf_string", &[L, L, L], S),
    pure("__fork_flags", &[L], S),
    ctx("__get_argv", &[L, L], S),
    // `$value .= s` and `$value = s` in `probe prometheus` (check::lower).
    f("__prometheus_append", &[S], V, false, false),
    f("__prometheus_set", &[S], V, false, false),
    // Syscall argument decoders the syscall tapset calls (runtime/decode).
    pure("__syscall_argstr", &[L], S),
    // The syscall's entry arguments, in return probes too (tapsets only).
    ctx("__syscall_entry_arg", &[L], L),
    pure("__syscall_retstr", &[L, L], S),
    // The event's Nth argument register (int_arg & co. in stdlib/context.stp).
    ctx("__utap_arg", &[L], L),
    // A return found no `@entry` values (see check::entry); counted for -v.
    f("__utap_entry_missing", &[S], V, false, false),
    // `$$name`, `$$provider`, `$$parms` of a USDT marker (0, 1, 2).
    ctx("__utap_mark", &[L], S),
    pure("_access_mode_str", &[L], S),
    pure("_at_flag_str", &[L], S),
    pure("_dfd_str", &[L], S),
    pure("_fadvice_advice_str", &[L], S),
    pure("_fcntl_cmd_str", &[L], S),
    pure("_futex_op_str", &[L], S),
    pure("_get_wc_str", &[L], S),
    pure("_getrandom_flags_str", &[L], S),
    pure("_inotify_watch_mask_str", &[L], S),
    pure("_itimer_which_str", &[L], S),
    pure("_madvice_advice_str", &[L], S),
    pure("_mmap_flags", &[L], S),
    pure("_mode_str", &[L], S),
    pure("_mprotect_prot_str", &[L], S),
    pure("_mremap_flags", &[L], S),
    pure("_msg_flags_str", &[L], S),
    pure("_open_flags_str", &[L], S),
    pure("_opoll_op_str", &[L], S),
    pure("_priority_which_str", &[L], S),
    pure("_renameat2_flags_str", &[L], S),
    pure("_rlimit_resource_str", &[L], S),
    pure("_seek_whence_str", &[L], S),
    pure("_shutdown_how_str", &[L], S),
    pure("_signal_name", &[L], S),
    pure("_sigprocmask_how_str", &[L], S),
    pure("_sock_family_str", &[L], S),
    pure("_sock_flags_str", &[L], S),
    pure("_sock_type_str", &[L], S),
    pure("_sockopt_level_str", &[L], S),
    pure("_statx_mask_str", &[L], S),
    pure("_sys_open_flag_str", &[L], S),
    pure("_wait4_opt_str", &[L], S),
    pure("_wait_status_str", &[L], S),
    pure("abs", &[L], L),
    pure("big_endian2", &[L], L),
    pure("big_endian4", &[L], L),
    pure("big_endian8", &[L], L),
    ctx("cmdline_arg", &[L], S),
    ctx("cmdline_args", &[L, L, S], S),
    ctx("cpu", &[], L),
    f("cpu_clock_ns", &[L], L, true, false),
    // SystemTap's ctime(epochsecs): "Thu Jan  1 00:00:00 1970".
    // `ctime()` without an argument: the current time.
    optional(f("ctime", &[L], S, true, false), 0),
    ctx("egid", &[], L),
    ctx("env_var", &[S], S),
    // errno_num("ENOSPC") == 28: errors by name, for `$return = -errno_num("...")`.
    pure("errno_num", &[S], L),
    pure("errno_str", &[L], S),
    f("error", &[S], V, false, false),
    ctx("euid", &[], L),
    ctx("execname", &[], S),
    f("exit", &[], V, false, false),
    ctx("gettimeofday_ms", &[], L),
    ctx("gettimeofday_ns", &[], L),
    ctx("gettimeofday_s", &[], L),
    ctx("gettimeofday_us", &[], L),
    ctx("gid", &[], L),
    ctx("is_return", &[], L),
    pure("isinstr", &[S, S], L),
    f("local_clock_ns", &[], L, true, false),
    pure("max", &[L, L], L),
    // Holds the current thread for N ms (SystemTap's guru-delay tapset).
    guru("mdelay", &[L]),
    pure("min", &[L, L], L),
    ctx("pexecname", &[], S),
    ctx("pgrp", &[], L),
    ctx("pid", &[], L),
    // SystemTap's pid2execname(pid): another process's command name.
    ctx("pid2execname", &[L], S),
    ctx("pn", &[], S),
    // The probe point being run, as written in the script.
    ctx("pp", &[], S),
    ctx("ppid", &[], L),
    // Writes one byte (the low 8 bits) to the output.
    f("print_char", &[L], V, false, false),
    // User stacks unwound by CFI (runtime/src/unwind); not pure: output.
    f("print_ubacktrace", &[], V, false, true),
    f("print_ubacktrace_brief", &[], V, false, true),
    f("print_ustack", &[S], V, false, true),
    ctx("probefunc", &[], S),
    guru("quiesce", &[L]),
    // Sends signal N to the current thread (SystemTap's guru-signal tapset).
    guru("raise", &[L]),
    // A random number in 0..n; draws from the generator: not pure.
    f("randint", &[L], L, false, false),
    // A user register by SystemTap's x86_64 name (runtime/src/script/registers.rs).
    ctx("register", &[S], L),
    guru("resume", &[L]),
    ctx("returnval", &[], L),
    ctx("sid", &[], L),
    pure("signal_name", &[L], S),
    pure("signal_str", &[L], S),
    ctx("sprint_ubacktrace", &[], S),
    ctx("sprint_ubacktrace_folded", &[], S),
    ctx("sprint_ustack", &[S], S),
    ctx("sprint_ustack_folded", &[S], S),
    // stop() holds the current thread, stop(tid) any traced thread.
    optional(guru("stop", &[L]), 0),
    pure("stp_pid", &[], L),
    pure("str_replace", &[S, S, S], S),
    pure("stringat", &[S, L], L),
    pure("strlen", &[S], L),
    optional(pure("strtol", &[S, L], L), 1),
    pure("substr", &[S, L, L], S),
    pure("syscall_name", &[L], S),
    pure("syscall_num", &[S], L),
    // Runs a command from the output side, after the output so far.
    f("system", &[S], V, false, false),
    ctx("target", &[], L),
    pure("text_str", &[S], S),
    pure("text_strn", &[S, L, L], S),
    ctx("tid", &[], L),
    // `tokenize` keeps its position between calls: not pure.
    f("tokenize", &[S, S], S, false, false),
    pure("tz_gmtoff", &[], L),
    pure("tz_name", &[], S),
    ctx("u_register", &[S], L),
    ctx("uaddr", &[], L),
    ctx("ubacktrace", &[], S),
    ctx("ucallers", &[L], S),
    // Holds the current thread for N µs (SystemTap's guru-delay tapset).
    guru("udelay", &[L]),
    ctx("uid", &[], L),
    // Raises "module cannot be found": not pure.
    f("umodname", &[L], S, false, true),
    ctx("user_buffer_quoted", &[L, L, L], S),
    ctx("user_char", &[L], L),
    ctx("user_int", &[L], L),
    ctx("user_long", &[L], L),
    ctx("user_short", &[L], L),
    ctx("user_string", &[L], S),
    ctx("user_string2", &[L, S], S),
    ctx("user_string_n", &[L, L], S),
    ctx("user_string_n2", &[L, L, S], S),
    optional(ctx("user_string_n_quoted", &[L, L, L], S), 2),
    f("user_string_n_warn", &[L, L], S, false, true),
    ctx("user_string_quoted", &[L], S),
    // Warns (not pure): "<unknown>" and a warning on a fault.
    f("user_string_warn", &[L], S, false, true),
    ctx("ustack", &[L], L),
    ctx("usymdata", &[L], S),
    ctx("usymname", &[L], S),
    f("warn", &[S], V, false, false),
];

/// Finds a builtin by name: a row of [`BUILTINS`], else one of the
/// runtime's `(long) -> string` syscall decoders
/// (`utap_runtime::syscalls::builtins::LONG_TO_STRING`), so that a decoder
/// the syscall tapset starts using needs no change here.
pub fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS
        .binary_search_by(|b| b.name.cmp(name))
        .ok()
        .map(|i| &BUILTINS[i])
        .or_else(|| decoders().iter().find(|b| b.name == name))
}

/// The runtime's decoders as builtins (built once).
fn decoders() -> &'static [Builtin] {
    static DECODERS: std::sync::OnceLock<Vec<Builtin>> = std::sync::OnceLock::new();
    DECODERS.get_or_init(|| {
        utap_runtime::syscalls::builtins::LONG_TO_STRING
            .iter()
            .map(|(name, _)| pure(name, &[L], S))
            .collect()
    })
}

/// The print family: the name a script calls and the [`PrintKind`] it
/// becomes. `log(msg)` is `println(msg)` (same output).
pub static PRINT_FUNCTIONS: &[(&str, PrintKind)] = &[
    ("log", PrintKind::Println),
    ("print", PrintKind::Print),
    ("printd", PrintKind::Printd),
    ("printdln", PrintKind::Printdln),
    ("printf", PrintKind::Printf),
    ("println", PrintKind::Println),
    ("sprint", PrintKind::Sprint),
    ("sprintd", PrintKind::Sprintd),
    ("sprintdln", PrintKind::Sprintdln),
    ("sprintf", PrintKind::Sprintf),
    ("sprintln", PrintKind::Sprintln),
];

/// The [`PrintKind`] of a print-family name.
pub fn print_kind(name: &str) -> Option<PrintKind> {
    PRINT_FUNCTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        for w in BUILTINS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn lookup_finds_every_row_and_nothing_else() {
        for b in BUILTINS {
            assert_eq!(lookup(b.name), Some(b));
        }
        assert_eq!(lookup("no_such_builtin"), None);
        assert_eq!(lookup("_dfd_str").map(|b| b.ret), Some(Type::String));
        assert_eq!(lookup("printf"), None);
    }

    #[test]
    fn every_runtime_decoder_is_a_builtin() {
        for (name, _) in utap_runtime::syscalls::builtins::LONG_TO_STRING {
            let b = lookup(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(
                (b.params, b.ret),
                (&[Type::Long][..], Type::String),
                "{name}"
            );
        }
    }

    #[test]
    fn strtol_takes_one_or_two_arguments() {
        let b = lookup("strtol").unwrap();
        assert_eq!((b.required, b.params.len()), (1, 2));
    }

    #[test]
    fn control_actions_need_guru_mode() {
        for name in ["stop", "resume", "quiesce", "raise", "udelay", "mdelay"] {
            assert!(lookup(name).unwrap().guru, "{name}");
        }
        assert!(!lookup("pid").unwrap().guru);
    }

    #[test]
    fn print_family_maps_to_print_kinds() {
        assert_eq!(print_kind("log"), Some(PrintKind::Println));
        assert_eq!(print_kind("sprintf"), Some(PrintKind::Sprintf));
        assert_eq!(print_kind("pid"), None);
    }
}
