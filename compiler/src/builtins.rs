//! The builtin function table: every function the runtime implements in
//! Rust, with its signature.
//!
//! This is the contract between the checker (which types calls against it)
//! and the codegen/runtime (which implements each entry under the same
//! name). Keep it one static table: adding a builtin means adding a row here
//! (with its description: the table is also the function reference's
//! source) and its implementation in the runtime, nothing else.
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
    /// The parameters' names, for the reference's signatures (SystemTap's
    /// names where it has the function); empty for internal builtins,
    /// whose signatures say `arg1`, `arg2` ...
    pub names: &'static [&'static str],
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
    /// What it does, for `utap --help-function` and docs/reference.md
    /// (`check::reference`): one to three sentences, in the sense of
    /// SystemTap's tapset documentation of the same-named function. Empty
    /// only for internal names (a leading `_`); a test holds the rest to it.
    pub doc: &'static str,
}

use Type::{Long as L, String as S, Void as V};

const fn f(
    name: &'static str,
    params: &'static [Type],
    names: &'static [&'static str],
    ret: Type,
    pure_: bool,
    process: bool,
    doc: &'static str,
) -> Builtin {
    Builtin {
        name,
        params,
        names,
        required: params.len(),
        ret,
        guru: false,
        process,
        pure_,
        doc,
    }
}

/// A pure function of its arguments.
const fn pure(
    name: &'static str,
    params: &'static [Type],
    names: &'static [&'static str],
    ret: Type,
    doc: &'static str,
) -> Builtin {
    f(name, params, names, ret, true, false, doc)
}

/// A pure read of the current process context.
const fn ctx(
    name: &'static str,
    params: &'static [Type],
    names: &'static [&'static str],
    ret: Type,
    doc: &'static str,
) -> Builtin {
    f(name, params, names, ret, true, true, doc)
}

/// A guru-mode control action on threads.
const fn guru(
    name: &'static str,
    params: &'static [Type],
    names: &'static [&'static str],
    doc: &'static str,
) -> Builtin {
    Builtin {
        name,
        params,
        names,
        required: params.len(),
        ret: V,
        guru: true,
        process: false,
        pure_: false,
        doc,
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
    ctx("__count_envp", &[L], &[], S, ""),
    // DWARF target variables: a plan number (see utap_runtime::dwarf) and
    // the dynamic array indexes.
    ctx("__dwarf_long", &[L, L, L], &[], L, ""),
    // `$var = v` under -g: plan number, value, the plan's two values.
    f("__dwarf_set", &[L, L, L, L], &[], L, false, true, ""),
    ctx("__dwarf_string", &[L, L, L], &[], S, ""),
    // `$var += v`, `$var++` under -g: plan number, operator, value, the
    // plan's two values.
    f("__dwarf_update", &[L, L, L, L, L], &[], L, false, true, ""),
    pure("__fork_flags", &[L], &[], S, ""),
    ctx("__get_argv", &[L, L], &[], S, ""),
    // `$value .= s` and `$value = s` in `probe prometheus` (check::lower).
    f("__prometheus_append", &[S], &[], V, false, false, ""),
    f("__prometheus_set", &[S], &[], V, false, false, ""),
    // Syscall argument decoders the syscall tapset calls (runtime/decode).
    pure("__syscall_argstr", &[L], &[], S, ""),
    // The syscall's entry arguments, in return probes too (tapsets only).
    ctx("__syscall_entry_arg", &[L], &[], L, ""),
    pure("__syscall_retstr", &[L, L], &[], S, ""),
    // The event's Nth argument register (int_arg & co. in stdlib/context.stp).
    ctx("__utap_arg", &[L], &[], L, ""),
    // A return found no `@entry` values (see check::entry); counted for -v.
    // `$$name`, `$$provider`, `$$parms` of a USDT marker (0, 1, 2).
    ctx("__utap_mark", &[L], &[], S, ""),
    pure("_access_mode_str", &[L], &[], S, ""),
    pure("_at_flag_str", &[L], &[], S, ""),
    pure("_dfd_str", &[L], &[], S, ""),
    pure("_fadvice_advice_str", &[L], &[], S, ""),
    pure("_fcntl_cmd_str", &[L], &[], S, ""),
    pure("_futex_op_str", &[L], &[], S, ""),
    pure("_get_wc_str", &[L], &[], S, ""),
    pure("_getrandom_flags_str", &[L], &[], S, ""),
    pure("_inotify_watch_mask_str", &[L], &[], S, ""),
    pure("_itimer_which_str", &[L], &[], S, ""),
    pure("_madvice_advice_str", &[L], &[], S, ""),
    pure("_mmap_flags", &[L], &[], S, ""),
    pure("_mode_str", &[L], &[], S, ""),
    pure("_mprotect_prot_str", &[L], &[], S, ""),
    pure("_mremap_flags", &[L], &[], S, ""),
    pure("_msg_flags_str", &[L], &[], S, ""),
    pure("_open_flags_str", &[L], &[], S, ""),
    pure("_opoll_op_str", &[L], &[], S, ""),
    pure("_priority_which_str", &[L], &[], S, ""),
    pure("_renameat2_flags_str", &[L], &[], S, ""),
    pure("_rlimit_resource_str", &[L], &[], S, ""),
    pure("_seek_whence_str", &[L], &[], S, ""),
    pure("_shutdown_how_str", &[L], &[], S, ""),
    pure("_signal_name", &[L], &[], S, ""),
    pure("_sigprocmask_how_str", &[L], &[], S, ""),
    pure("_sock_family_str", &[L], &[], S, ""),
    pure("_sock_flags_str", &[L], &[], S, ""),
    pure("_sock_type_str", &[L], &[], S, ""),
    pure("_sockopt_level_str", &[L], &[], S, ""),
    pure("_statx_mask_str", &[L], &[], S, ""),
    pure("_sys_open_flag_str", &[L], &[], S, ""),
    pure("_wait4_opt_str", &[L], &[], S, ""),
    pure("_wait_status_str", &[L], &[], S, ""),
    pure(
        "abs",
        &[L],
        &["n"],
        L,
        "The absolute value of the number: abs(-5) is 5.",
    ),
    pure(
        "big_endian2",
        &[L],
        &["val"],
        L,
        "The number's low 16 bits with their two bytes swapped: converts between host (little-endian) and big-endian (network) order. big_endian2(0x1234) is 0x3412.",
    ),
    pure(
        "big_endian4",
        &[L],
        &["val"],
        L,
        "The number's low 32 bits with their four bytes reversed: converts between host (little-endian) and big-endian (network) order.",
    ),
    pure(
        "big_endian8",
        &[L],
        &["val"],
        L,
        "The number's eight bytes reversed: converts a 64-bit value between host (little-endian) and big-endian order.",
    ),
    ctx(
        "cmdline_arg",
        &[L],
        &["n"],
        S,
        "Argument n of the current process's command line, 0 being the program name; \"\" when there is no such argument.",
    ),
    ctx(
        "cmdline_args",
        &[L, L, S],
        &["n", "m", "delim"],
        S,
        "Arguments n to m of the current process's command line (0 is the program name; m of -1 means up to the last), joined by delim; \"\" when n is past the end. cmdline_args(1, -1, \" \") is every argument after the program name.",
    ),
    ctx(
        "cpu",
        &[],
        &[],
        L,
        "The number of the processor the current thread runs on.",
    ),
    f(
        "cpu_clock_ns",
        &[L],
        &["cpu"],
        L,
        true,
        false,
        "Nanoseconds on the given processor's clock; utap's processors share one monotonic clock (CLOCK_MONOTONIC), so this is local_clock_ns() for any processor. For measuring intervals, not the time of day.",
    ),
    // SystemTap's ctime(epochsecs): "Thu Jan  1 00:00:00 1970".
    // `ctime()` without an argument: the current time.
    optional(
        f(
            "ctime",
            &[L],
            &["epochsecs"],
            S,
            true,
            false,
            "Converts seconds since the epoch (as gettimeofday_s() returns) to a UTC date and time string like \"Thu Jan  1 00:00:00 1970\"; without an argument, the current time.",
        ),
        0,
    ),
    ctx(
        "egid",
        &[],
        &[],
        L,
        "The effective group id of the current process.",
    ),
    ctx(
        "env_var",
        &[S],
        &["name"],
        S,
        "The value of the named environment variable in the current process, as it started or was last exec'd with (the process's own later setenv calls are not seen); \"\" when unset. env_var(\"HOME\")",
    ),
    // errno_num("ENOSPC") == 28: errors by name, for `$return = -errno_num("...")`.
    pure(
        "errno_num",
        &[S],
        &["name"],
        L,
        "The number of the errno named by the string: errno_num(\"ENOSPC\") is 28; an unknown name is a runtime error. Lets a guru-mode return probe say which error to fail with: `$return = -errno_num(\"ENOSPC\")`.",
    ),
    pure(
        "errno_str",
        &[L],
        &["err"],
        S,
        "The symbolic name of an errno value, of either sign: errno_str(-2) and errno_str(2) are \"ENOENT\"; \"\" for a number with no name.",
    ),
    f(
        "error",
        &[S],
        &["msg"],
        V,
        false,
        false,
        "Raises a runtime error with the given message: the current probe handler is abandoned and the error is reported (the script ends unless --suppress-handler-errors is given).",
    ),
    ctx(
        "euid",
        &[],
        &[],
        L,
        "The effective user id of the current process.",
    ),
    ctx(
        "execname",
        &[],
        &[],
        S,
        "The name of the current process's executable (its command name, as in /proc/PID/comm).",
    ),
    f(
        "exit",
        &[],
        &[],
        V,
        false,
        false,
        "Asks the script to end: the running handler completes, then end probes run and utap exits. Probes already firing may still run before the end.",
    ),
    ctx(
        "get_cycles",
        &[],
        &[],
        L,
        "The processor's cycle counter (the time stamp counter on x86-64): a cheap, fine-grained count for comparing intervals on one machine, not a time.",
    ),
    ctx(
        "gettimeofday_ms",
        &[],
        &[],
        L,
        "The wall-clock time in milliseconds since the epoch (1970-01-01 UTC).",
    ),
    ctx(
        "gettimeofday_ns",
        &[],
        &[],
        L,
        "The wall-clock time in nanoseconds since the epoch (1970-01-01 UTC).",
    ),
    ctx(
        "gettimeofday_s",
        &[],
        &[],
        L,
        "The wall-clock time in seconds since the epoch (1970-01-01 UTC).",
    ),
    ctx(
        "gettimeofday_us",
        &[],
        &[],
        L,
        "The wall-clock time in microseconds since the epoch (1970-01-01 UTC).",
    ),
    ctx(
        "gid",
        &[],
        &[],
        L,
        "The real group id of the current process.",
    ),
    ctx(
        "is_return",
        &[],
        &[],
        L,
        "1 when the probe being run is a return probe (a .return point), else 0.",
    ),
    pure(
        "isinstr",
        &[S, S],
        &["s1", "s2"],
        L,
        "1 when s2 occurs in s1, else 0: isinstr(\"foobar\", \"oba\") is 1.",
    ),
    f(
        "local_clock_ns",
        &[],
        &[],
        L,
        true,
        false,
        "Nanoseconds on a monotonic clock (CLOCK_MONOTONIC): for measuring intervals, not the time of day.",
    ),
    pure(
        "max",
        &[L, L],
        &["a", "b"],
        L,
        "The larger of the two numbers.",
    ),
    // Holds the current thread for N ms (SystemTap's guru-delay tapset).
    guru(
        "mdelay",
        &[L],
        &["ms"],
        "Guru mode: holds the current thread for the given number of milliseconds after the handler returns (SystemTap busy-waits in the kernel; utap keeps the thread in a tracing stop while other threads run on).",
    ),
    pure(
        "min",
        &[L, L],
        &["a", "b"],
        L,
        "The smaller of the two numbers.",
    ),
    ctx(
        "pexecname",
        &[],
        &[],
        S,
        "The executable name of the current process's parent.",
    ),
    ctx(
        "pgrp",
        &[],
        &[],
        L,
        "The process group id of the current process.",
    ),
    ctx(
        "pid",
        &[],
        &[],
        L,
        "The process id (thread group id) of the current thread.",
    ),
    // SystemTap's pid2execname(pid): another process's command name.
    ctx(
        "pid2execname",
        &[L],
        &["pid"],
        S,
        "The executable name (command name) of the process with the given pid; \"\" when there is no such process.",
    ),
    ctx(
        "pn",
        &[],
        &[],
        S,
        "The probe point as the script named it: the alias name (\"syscall.read\") where pp() gives the point it expands to, with wildcards expanded.",
    ),
    // The probe point being run, as written in the script.
    ctx(
        "pp",
        &[],
        &[],
        S,
        "The probe point being run, as a string: process(\"/bin/ls\").function(\"main\"), begin, timer.s(1) ...",
    ),
    ctx(
        "ppid",
        &[],
        &[],
        L,
        "The process id of the current process's parent.",
    ),
    // Writes one byte (the low 8 bits) to the output.
    f(
        "print_char",
        &[L],
        &["ch"],
        V,
        false,
        false,
        "Writes one byte, the low 8 bits of the number, to the output: print_char(10) writes a newline.",
    ),
    // User stacks unwound by CFI (runtime/src/unwind); not pure: output.
    f(
        "print_ubacktrace",
        &[],
        &[],
        V,
        false,
        true,
        "Prints the current thread's user-space backtrace, one line per frame with its address, symbol, offset and module (unwound with the binaries' call frame information).",
    ),
    f(
        "print_ubacktrace_brief",
        &[],
        &[],
        V,
        false,
        true,
        "Prints the current thread's user-space backtrace, one line per frame with only the symbol and offset (the brief form of print_ubacktrace()).",
    ),
    f(
        "print_ustack",
        &[S],
        &["stk"],
        V,
        false,
        true,
        "Prints a backtrace string made by ubacktrace(), one full line (address, symbol, offset, module) per address. Keeping the ubacktrace() string and printing it later is cheaper than printing at once: print_ustack(ubacktrace()).",
    ),
    ctx(
        "probefunc",
        &[],
        &[],
        S,
        "The name of the function being probed, as far as the probe point tells it (the function of a .function probe, the system call of a syscall probe); \"\" when unknown.",
    ),
    guru(
        "quiesce",
        &[L],
        &["tid"],
        "Guru mode: makes the process.quiesce probe fire for the thread with the given tid.",
    ),
    // Sends signal N to the current thread (SystemTap's guru-signal tapset).
    guru(
        "raise",
        &[L],
        &["signo"],
        "Guru mode: sends the given signal to the current thread when the handler returns (signal 0 sends nothing; an invalid number is the error \"raise(N) failed\"). At a system call entry, a blocking call is interrupted as by any signal.",
    ),
    // A random number in 0..n; draws from the generator: not pure.
    f(
        "randint",
        &[L],
        &["n"],
        L,
        false,
        false,
        "A random number from 0 to n-1, n being the argument (uniformly drawn; 0 when n is 0 or less).",
    ),
    // A user register by SystemTap's x86_64 name (runtime/src/script/registers.rs).
    ctx(
        "register",
        &[S],
        &["name"],
        L,
        "The value of a user register of the current thread, by its SystemTap x86_64 name (\"rax\", \"rdi\", \"rip\", \"eax\" ...), read as a signed number.",
    ),
    guru(
        "resume",
        &[L],
        &["tid"],
        "Guru mode: lets a thread held by stop() run again; the argument is its tid.",
    ),
    ctx(
        "returnval",
        &[],
        &[],
        L,
        "The value the probed function or system call is returning, in a return probe (the raw return register).",
    ),
    ctx("sid", &[], &[], L, "The session id of the current process."),
    pure(
        "signal_name",
        &[L],
        &["sig"],
        S,
        "The name of a signal number: signal_name(9) is \"SIGKILL\".",
    ),
    pure(
        "signal_str",
        &[L],
        &["sig"],
        S,
        "The short name of a signal, as SystemTap's signal_str writes it in argument strings: signal_str(9) is \"KILL\"; \"\" outside 1 to 64.",
    ),
    ctx(
        "sprint_ubacktrace",
        &[],
        &[],
        S,
        "The current thread's user-space backtrace as a string, one line per frame with symbol, offset and module (what print_ubacktrace() prints).",
    ),
    ctx(
        "sprint_ubacktrace_folded",
        &[],
        &[],
        S,
        "The current thread's user-space backtrace as one line of function names, outermost first, joined by \";\": the \"folded\" format flame graph tools read.",
    ),
    ctx(
        "sprint_ustack",
        &[S],
        &["stk"],
        S,
        "A backtrace string made by ubacktrace() turned into text, one full line (address, symbol, offset, module) per address: what print_ustack() prints, as a string.",
    ),
    ctx(
        "sprint_ustack_folded",
        &[S],
        &["stk"],
        S,
        "A backtrace string made by ubacktrace() turned into one line of function names, outermost first, joined by \";\" (the flame graph \"folded\" format). Count them in an array and print it at the end: `stacks[sprint_ustack_folded(ubacktrace())]++`.",
    ),
    // stop() holds the current thread, stop(tid) any traced thread.
    optional(
        guru(
            "stop",
            &[L],
            &["tid"],
            "Guru mode: holds a thread (in a tracing stop) until resume(tid) is called for it: stop() holds the current thread, stop(tid) any traced thread, also from a timer probe.",
        ),
        0,
    ),
    pure(
        "stp_pid",
        &[],
        &[],
        L,
        "The process id of utap itself (SystemTap: of its stapio process), e.g. to leave utap's own activity out of a trace.",
    ),
    pure(
        "str_replace",
        &[S, S, S],
        &["str", "search", "replace"],
        S,
        "str with every occurrence of search replaced by replace: str_replace(\"a-b-c\", \"-\", \"+\") is \"a+b+c\".",
    ),
    pure(
        "stringat",
        &[S, L],
        &["str", "pos"],
        L,
        "The character (its byte value) at the given 0-based position of the string: stringat(\"abc\", 1) is 98 ('b'); a position outside the string is a runtime error.",
    ),
    pure(
        "strlen",
        &[S],
        &["s"],
        L,
        "The length of the string, in bytes.",
    ),
    optional(
        pure(
            "strtol",
            &[S, L],
            &["str", "base"],
            L,
            "The number str spells in the given base (2 to 36, or 0 to follow a 0x or 0 prefix); base defaults to 10. strtol(\"ff\", 16) is 255.",
        ),
        1,
    ),
    pure(
        "substr",
        &[S, L, L],
        &["str", "start", "length"],
        S,
        "The part of str starting at 0-based position start, at most length bytes long: substr(\"utap\", 1, 2) is \"ta\".",
    ),
    pure(
        "syscall_name",
        &[L],
        &["nr"],
        S,
        "The name of the x86_64 system call with the given number: syscall_name(0) is \"read\".",
    ),
    pure(
        "syscall_num",
        &[S],
        &["name"],
        L,
        "The number of the x86_64 system call with the given name: syscall_num(\"read\") is 0.",
    ),
    // Runs a command from the output side, after the output so far.
    f(
        "system",
        &[S],
        &["cmd"],
        V,
        false,
        false,
        "Runs the command with /bin/sh -c from utap's output side, in the background, after the output printed so far; the script does not wait for it.",
    ),
    ctx(
        "target",
        &[],
        &[],
        L,
        "The process id given with -x, or of the command started with -c: the target process.",
    ),
    pure(
        "text_str",
        &[S],
        &["input"],
        S,
        "The string with its non-printable characters, double quotes and backslashes written as C-style escape sequences (\"\\n\", \"\\\\\", \"\\x1b\"), for printing text that may hold anything.",
    ),
    pure(
        "text_strn",
        &[S, L, L],
        &["input", "len", "quoted"],
        S,
        "As text_str() with a maximum length len (0 or less: the longest string utap keeps) and, when quoted is nonzero, the result between double quotes, cut with \"...\" when longer.",
    ),
    ctx("tid", &[], &[], L, "The id of the current thread."),
    // `tokenize` keeps its position between calls: not pure.
    f(
        "tokenize",
        &[S, S],
        &["input", "delim"],
        S,
        false,
        false,
        "Splits a string into tokens: tokenize(s, delim) returns the first token of s separated by any of the characters in delim, then tokenize(\"\", delim) the following ones, \"\" when none is left.",
    ),
    pure(
        "tz_gmtoff",
        &[],
        &[],
        L,
        "The local time zone's offset from UTC, in seconds west of it (as in SystemTap: -3600 in Central European Time).",
    ),
    pure(
        "tz_name",
        &[],
        &[],
        S,
        "The name of the local time zone (\"CET\", \"UTC\" ...).",
    ),
    ctx(
        "u_register",
        &[S],
        &["name"],
        L,
        "The value of a user register of the current thread by its SystemTap x86_64 name (see register()), read as an unsigned number: a 32-bit register such as \"eax\" is not sign-extended.",
    ),
    ctx(
        "uaddr",
        &[],
        &[],
        L,
        "The user-space address of the probe point being run (the probed instruction of a function probe); 0 where there is none.",
    ),
    ctx(
        "ubacktrace",
        &[],
        &[],
        S,
        "The current thread's user-space backtrace as a compact string of hex addresses, for print_ustack(), sprint_ustack() and sprint_ustack_folded() to turn into text later.",
    ),
    ctx(
        "ucallers",
        &[L],
        &["n"],
        S,
        "A backtrace string (as ubacktrace() makes) of the first n callers of the current function, leaving out the current frame; n of -1 gives them all.",
    ),
    // Holds the current thread for N µs (SystemTap's guru-delay tapset).
    guru(
        "udelay",
        &[L],
        &["us"],
        "Guru mode: holds the current thread for the given number of microseconds after the handler returns (SystemTap busy-waits in the kernel; utap keeps the thread in a tracing stop while other threads run on).",
    ),
    ctx(
        "uid",
        &[],
        &[],
        L,
        "The real user id of the current process.",
    ),
    // Raises "module cannot be found": not pure.
    f(
        "umodname",
        &[L],
        &["addr"],
        S,
        false,
        true,
        "The short name of the module (executable or shared library) holding the given user address; an address outside every module is the error \"module cannot be found\".",
    ),
    ctx(
        "user_buffer_quoted",
        &[L, L, L],
        &["addr", "inlen", "outlen"],
        S,
        "The inlen bytes at user address addr, NULs included, quoted and escaped as text_str() does and cut to outlen characters with \"...\"; the address in hex, unquoted, when it cannot be read. For printing the data a system call reads or writes.",
    ),
    ctx(
        "user_char",
        &[L],
        &["addr"],
        L,
        "The byte at the user address, as a signed char; 0 when it cannot be read.",
    ),
    ctx(
        "user_int",
        &[L],
        &["addr"],
        L,
        "The C int (4 bytes, signed) at the user address; 0 when it cannot be read.",
    ),
    ctx(
        "user_long",
        &[L],
        &["addr"],
        L,
        "The C long (8 bytes on x86_64, signed) at the user address; 0 when it cannot be read.",
    ),
    ctx(
        "user_short",
        &[L],
        &["addr"],
        L,
        "The C short (2 bytes, signed) at the user address; 0 when it cannot be read.",
    ),
    ctx(
        "user_string",
        &[L],
        &["addr"],
        S,
        "The NUL-terminated string at the user address; a read fault is a runtime error. user_string(pointer_arg(1))",
    ),
    ctx(
        "user_string2",
        &[L, S],
        &["addr", "err_msg"],
        S,
        "The NUL-terminated string at the user address, or err_msg when it cannot be read.",
    ),
    ctx(
        "user_string_n",
        &[L, L],
        &["addr", "n"],
        S,
        "At most n bytes of the NUL-terminated string at the user address; a read fault is a runtime error.",
    ),
    ctx(
        "user_string_n2",
        &[L, L, S],
        &["addr", "n", "err_msg"],
        S,
        "At most n bytes of the string at the user address, or err_msg when it cannot be read.",
    ),
    optional(
        ctx(
            "user_string_n_quoted",
            &[L, L, L],
            &["addr", "inlen", "outlen"],
            S,
            "At most inlen bytes of the string at the user address, between double quotes with special characters escaped, \"...\" added when cut; \"NULL\" for address 0 and the address in hex when it cannot be read. The optional outlen, when positive, caps the output length.",
        ),
        2,
    ),
    f(
        "user_string_n_warn",
        &[L, L],
        &["addr", "n"],
        S,
        false,
        true,
        "At most n bytes of the string at the user address; when it cannot be read, \"<unknown>\" and a warning instead of an error.",
    ),
    ctx(
        "user_string_quoted",
        &[L],
        &["addr"],
        S,
        "The string at the user address between double quotes with special characters escaped; \"NULL\" for address 0 and the address in hex when it cannot be read. Useful for syscall arguments that may be bad pointers.",
    ),
    // Warns (not pure): "<unknown>" and a warning on a fault.
    f(
        "user_string_warn",
        &[L],
        &["addr"],
        S,
        false,
        true,
        "The string at the user address; when it cannot be read, \"<unknown>\" and a warning instead of an error.",
    ),
    ctx(
        "ustack",
        &[L],
        &["n"],
        L,
        "Element n of the current thread's user backtrace as an address: ustack(0) is the program counter, ustack(1) the return address into the caller; 0 past the end of the stack.",
    ),
    ctx(
        "usymdata",
        &[L],
        &["addr"],
        S,
        "The symbol containing the given user address, as \"name+0xOFFSET/0xSIZE [module]\": for data addresses as well as code.",
    ),
    ctx(
        "usymname",
        &[L],
        &["addr"],
        S,
        "The name of the function (symbol) containing the given user address in the traced process, or the address in hex when no symbol covers it.",
    ),
    f(
        "warn",
        &[S],
        &["msg"],
        V,
        false,
        false,
        "Prints the message as a warning (on standard error, prefixed \"WARNING:\") and carries on.",
    ),
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
            .map(|(name, _)| pure(name, &[L], &[], S, ""))
            .collect()
    })
}

/// The print family: the name a script calls, the [`PrintKind`] it
/// becomes, and for the function reference (`check::reference`) its
/// signature (any number of values: these take no fixed parameter list)
/// and what it does. `log(msg)` is `println(msg)` (same output).
pub static PRINT_FUNCTIONS: &[(&str, PrintKind, &str, &str)] = &[
    (
        "log",
        PrintKind::Println,
        "log(msg:string)",
        "Writes the message and a newline to the output: the same as println(msg).",
    ),
    (
        "print",
        PrintKind::Print,
        "print(value, ...)",
        "Writes its arguments to the output one after another, without separators or a newline; numbers in decimal. A statistics histogram prints as a chart: print(@hist_log(lat)).",
    ),
    (
        "printd",
        PrintKind::Printd,
        "printd(delim:string, value, ...)",
        "Writes the values after the first argument to the output, separated by it: printd(\",\", pid(), execname()) writes \"42,ls\".",
    ),
    (
        "printdln",
        PrintKind::Printdln,
        "printdln(delim:string, value, ...)",
        "As printd(), followed by a newline.",
    ),
    (
        "printf",
        PrintKind::Printf,
        "printf(fmt:string, value, ...)",
        "Writes the values formatted by the format string, as C's printf: %d %u %x %o %s %c %p, widths, precisions and flags, %b for a number's raw bytes, %m and %M for the memory at an address (as is, in hex), %% for a percent sign. printf(\"%s[%d] %s\\n\", execname(), pid(), ppfunc())",
    ),
    (
        "println",
        PrintKind::Println,
        "println(value, ...)",
        "Writes its arguments to the output one after another, without separators, then a newline.",
    ),
    (
        "sprint",
        PrintKind::Sprint,
        "sprint:string(value, ...)",
        "What print() would write, returned as a string.",
    ),
    (
        "sprintd",
        PrintKind::Sprintd,
        "sprintd:string(delim:string, value, ...)",
        "What printd() would write, returned as a string.",
    ),
    (
        "sprintdln",
        PrintKind::Sprintdln,
        "sprintdln:string(delim:string, value, ...)",
        "What printdln() would write, returned as a string.",
    ),
    (
        "sprintf",
        PrintKind::Sprintf,
        "sprintf:string(fmt:string, value, ...)",
        "What printf() would write, returned as a string: sprintf(\"%#x\", 255) is \"0xff\".",
    ),
    (
        "sprintln",
        PrintKind::Sprintln,
        "sprintln:string(value, ...)",
        "What println() would write, returned as a string.",
    ),
];

/// The [`PrintKind`] of a print-family name.
pub fn print_kind(name: &str) -> Option<PrintKind> {
    PRINT_FUNCTIONS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|(_, k, ..)| *k)
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
    fn parameter_names_match_the_parameters() {
        for b in BUILTINS {
            assert!(
                b.names.len() == b.params.len() || b.names.is_empty() && b.name.starts_with('_'),
                "{}: {:?}",
                b.name,
                b.names
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
