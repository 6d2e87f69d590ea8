//! strace's output rewritten in SystemTap's conventions, so that utap's
//! `name(argstr) = retstr` lines can be compared with strace's line by line
//! (the oracle tests, the strace-like example).
//!
//! What is rewritten — the differences between the two conventions:
//! 1. a failure: strace `= -1 ENOENT (No such file or directory)`,
//!    SystemTap `= -2 (ENOENT)`; the kernel-internal restart codes strace
//!    shows as `= ? ERESTARTSYS (...)` are SystemTap's bare `-512`;
//! 2. brk's return value: strace hex, SystemTap decimal;
//! 3. decorated return values: strace `= 0x1 (flags FD_CLOEXEC)`,
//!    `= 1 ([{fd=3, revents=POLLIN}])`, `= 0 (Timeout)`; SystemTap the bare
//!    number, in decimal;
//! 4. octal returns (umask): strace pads to three digits (`000`), SystemTap's
//!    `%#o` does not (`0`);
//! 5. plain pointer arguments: strace `NULL`, SystemTap's `%p` `0x0`
//!    (`brk(0x0)`, `mmap(0x0, 8192, ...)`).
//!
//! Formatting only: the `PID ` prefix of `strace -f -o`, and the spaces that
//! align ` = `, are dropped; `--- SIGNAL ---` and `+++ exited +++` lines
//! are not calls.

use super::builtins::syscall_num;
use super::errno::{errno_number, errno_str};
use super::spec::{Kind, signature};

/// The kernel-internal restart codes strace names.
const RESTART_CODES: &[(&str, i64)] = &[
    ("ERESTARTSYS", 512),
    ("ERESTARTNOINTR", 513),
    ("ERESTARTNOHAND", 514),
    ("ERESTART_RESTARTBLOCK", 516),
];

/// One line of strace output as `name(args) = retstr` in SystemTap's
/// conventions; `Ok(None)` for lines that are not calls (signals, exits).
pub fn strace_line_to_systemtap(line: &str) -> Result<Option<String>, String> {
    let line = strip_pid(line);
    if line.starts_with("---") || line.starts_with("+++") {
        return Ok(None);
    }
    if line.contains("<unfinished ...>") || line.starts_with("<...") {
        return Err(format!(
            "interleaved call (run strace on one thread): {line}"
        ));
    }
    let (call, ret) = line
        .rsplit_once(" = ")
        .ok_or_else(|| format!("not a call line: {line}"))?;
    let call = systemtap_args(call.trim_end());
    let call = call.as_str();
    let ret = systemtap_return(call, ret.trim())?;
    Ok(Some(format!("{call} = {ret}")))
}

/// `strace -f` prefixes each line with the pid.
fn strip_pid(line: &str) -> &str {
    match line.split_once(' ') {
        Some((pid, rest)) if !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit()) => {
            rest.trim_start()
        }
        _ => line,
    }
}

/// `name(args)` with the plain pointer arguments strace shows as `NULL`
/// written as SystemTap's `0x0`.
fn systemtap_args(call: &str) -> String {
    let Some((name, inner)) = call
        .split_once('(')
        .and_then(|(n, rest)| Some((n, rest.strip_suffix(')')?)))
    else {
        return call.to_string();
    };
    let Some(sig) = signature(syscall_num(name)) else {
        return call.to_string();
    };
    if super::argstr::OWN_DECODERS.contains(&name) {
        return call.to_string();
    }
    let args: Vec<&str> = split_args(inner)
        .into_iter()
        .enumerate()
        .map(|(i, a)| match sig.args.get(i) {
            Some(arg) if arg.kind == Kind::Ptr && a == "NULL" => "0x0",
            _ => a,
        })
        .collect();
    format!("{name}({})", args.join(", "))
}

/// strace's arguments, split at the commas outside strings, brackets,
/// braces and parentheses.
fn split_args(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut quoted, mut escaped, mut start) = (0i32, false, false, 0);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '(' | '[' | '{' if !quoted => depth += 1,
            ')' | ']' | '}' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !text.trim().is_empty() {
        out.push(text[start..].trim());
    }
    out
}

fn parse_number(text: &str) -> Result<i64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).map(|v| v as i64),
        None => text
            .parse::<i64>()
            .or_else(|_| text.parse::<u64>().map(|v| v as i64)),
    };
    parsed.map_err(|_| format!("not a number: {text}"))
}

fn systemtap_return(call: &str, ret: &str) -> Result<String, String> {
    let (value, detail) = match ret.split_once(' ') {
        Some((v, d)) => (v, Some(d)),
        None => (ret, None),
    };
    match (value, detail) {
        ("-1", Some(detail)) => {
            let name = detail.split(' ').next().unwrap_or("");
            let n = errno_number(name).ok_or_else(|| format!("unknown errno {name}"))?;
            Ok(format!("{} ({})", -n, errno_str(n)))
        }
        ("?", Some(detail)) => {
            let name = detail.split(' ').next().unwrap_or("");
            match RESTART_CODES.iter().find(|(n, _)| *n == name) {
                Some((_, code)) => Ok((-code).to_string()),
                None => Ok("?".to_string()),
            }
        }
        ("?", None) => Ok("?".to_string()),
        (v, Some(_)) => Ok(parse_number(v)?.to_string()),
        (v, None) if call.starts_with("umask(") => {
            let mode = i64::from_str_radix(v, 8).map_err(|_| format!("not octal: {v}"))?;
            Ok(if mode == 0 {
                "0".to_string()
            } else {
                format!("0{mode:o}")
            })
        }
        (v, None) if call.starts_with("brk(") => Ok(parse_number(v)?.to_string()),
        (v, None) => Ok(v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(line: &str) -> Option<String> {
        strace_line_to_systemtap(line).unwrap()
    }

    #[test]
    fn failures_and_restarts() {
        assert_eq!(
            conv("123 openat(AT_FDCWD, \"x\", O_RDONLY)   = -1 ENOENT (No such file or directory)"),
            Some("openat(AT_FDCWD, \"x\", O_RDONLY) = -2 (ENOENT)".to_string())
        );
        assert_eq!(
            conv("read(0, 0x7ffd, 10) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)"),
            Some("read(0, 0x7ffd, 10) = -512".to_string())
        );
        assert_eq!(
            conv("exit_group(0)                     = ?"),
            Some("exit_group(0) = ?".to_string())
        );
    }

    #[test]
    fn return_value_conventions() {
        assert_eq!(
            conv("brk(NULL)                         = 0x55555555a000"),
            Some("brk(0x0) = 93824992256000".to_string())
        );
        assert_eq!(
            conv("fcntl(3, F_GETFD) = 0x1 (flags FD_CLOEXEC)"),
            Some("fcntl(3, F_GETFD) = 1".to_string())
        );
        assert_eq!(
            conv("poll([{fd=3, events=POLLIN}], 1, 0) = 1 ([{fd=3, revents=POLLIN}])"),
            Some("poll([{fd=3, events=POLLIN}], 1, 0) = 1".to_string())
        );
        assert_eq!(
            conv("poll([], 0, 0) = 0 (Timeout)"),
            Some("poll([], 0, 0) = 0".to_string())
        );
        assert_eq!(conv("umask(022) = 000"), Some("umask(022) = 0".to_string()));
        assert_eq!(
            conv("umask(077) = 022"),
            Some("umask(077) = 022".to_string())
        );
        assert_eq!(
            conv("mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7ffff7fc0000"),
            Some("mmap(0x0, 8192, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7ffff7fc0000".to_string())
        );
    }

    #[test]
    fn formatting_and_non_calls() {
        assert_eq!(conv("123 --- SIGUSR1 {si_signo=SIGUSR1} ---"), None);
        assert_eq!(conv("+++ exited with 0 +++"), None);
        assert_eq!(
            conv("write(1, \"a = b\", 5) = 5"),
            Some("write(1, \"a = b\", 5) = 5".to_string())
        );
    }

    #[test]
    fn bad_lines_are_errors() {
        assert!(strace_line_to_systemtap("garbage").is_err());
        assert!(strace_line_to_systemtap("read(3 <unfinished ...>").is_err());
        assert!(strace_line_to_systemtap("read(3) = -1 EBOGUS (x)").is_err());
        assert!(strace_line_to_systemtap("brk(NULL) = zz").is_err());
        assert_eq!(
            strace_line_to_systemtap(""),
            Err("not a call line: ".to_string())
        );
    }
}
