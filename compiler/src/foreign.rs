//! Hints for people arriving with habits from other tools: SystemTap's
//! kernel probes and bpftrace's syntax. utap traces user space with
//! ptrace, so a kernel probe point is not a typo to correct but a thing
//! utap cannot do; saying so (and naming the nearest user-space probe)
//! beats "probe point mismatch". bpftrace programs fail to parse; the
//! parser asks [`bpftrace_help`] for the utap spelling of what it saw.

/// The headline for a kernel probe point.
pub const KERNEL_PROBES: &str = "utap traces user space (ptrace): kernel probes are not available";

/// If `names` (the dotted components of a probe point that matched
/// nothing, with its first string argument, if any) is one of
/// SystemTap's kernel probe points: the label for it and the nearest
/// user-space equivalent, if there is one.
pub fn kernel_point(names: &[&str], first_arg: Option<&str>) -> Option<(String, Option<String>)> {
    let first = *names.first()?;
    let written = names.join(".");
    let nearest = match first {
        "kernel" | "kprobe" => kernel_function(names, first_arg),
        "module" => None,
        "vfs" | "generic" => Some(vfs(names.get(1).copied())),
        "tcp" | "udp" | "socket" | "netdev" | "ipv4" | "tcpmib" | "linuxmib" => {
            Some(socket(names.get(1).copied()))
        }
        "scheduler" => scheduler(names.get(1).copied()),
        "kprocess" => scheduler(names.get(1).map(|n| match *n {
            "create" => "process_fork",
            "exec" => "process_exec",
            "exit" => "process_exit",
            other => other,
        })),
        "ioblock" | "ioscheduler" | "irq_handler" | "softirq" | "workqueue" | "vm" | "nfs"
        | "nfsd" | "sunrpc" | "perf" | "netfilter" | "scsi" | "tty" | "kernel_trace"
        | "hrtimer" | "memory" | "procfs" | "nd_syscall" | "dwarf_syscall" => {
            if first.ends_with("syscall") {
                Some(format!("syscall.{}", names[1..].join(".")))
            } else {
                None
            }
        }
        _ => return None,
    };
    let label = format!("'{written}' is a kernel probe point");
    let help = nearest.map(|n| format!("the nearest user-space probe: {n}"));
    Some((label, help))
}

/// `kernel.function("sys_openat")`, `kprobe.function("__x64_sys_read")`,
/// `kernel.trace("sys_enter")`: the system call, when the name says which.
fn kernel_function(names: &[&str], arg: Option<&str>) -> Option<String> {
    if names.get(1) == Some(&"trace") {
        return Some("syscall.* or process.syscall (system call entries and returns)".into());
    }
    let name = arg?.trim_end_matches('*');
    let name = name.split('@').next().unwrap_or(name);
    let call = [
        "__x64_sys_",
        "__se_sys_",
        "__do_sys_",
        "ksys_",
        "do_sys_",
        "sys_",
    ]
    .iter()
    .find_map(|p| name.strip_prefix(p))?;
    if call.is_empty() || !call.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let ret = if names.contains(&"return") {
        ".return"
    } else {
        ""
    };
    Some(format!("syscall.{call}{ret}"))
}

fn vfs(op: Option<&str>) -> String {
    match op {
        Some(op @ ("read" | "write" | "open" | "readv" | "writev" | "fsync")) => {
            format!("syscall.{op}")
        }
        _ => "syscall.read, syscall.write, syscall.openat ... (file system calls)".into(),
    }
}

fn socket(op: Option<&str>) -> String {
    match op {
        Some(op @ ("sendmsg" | "recvmsg" | "connect" | "accept" | "close")) => {
            format!("syscall.{op}")
        }
        Some("receive") => "syscall.recvfrom or syscall.recvmsg".into(),
        Some("send") => "syscall.sendto or syscall.sendmsg".into(),
        _ => "syscall.connect, syscall.sendmsg, syscall.recvmsg ... (socket system calls)".into(),
    }
}

fn scheduler(op: Option<&str>) -> Option<String> {
    Some(
        match op? {
            "process_exit" => "process.end",
            "process_fork" | "wakeup_new" => "process.begin and process.thread.begin",
            "process_exec" => "syscall.execve",
            "signal_send" => "signal.send",
            "process_free" => "process.end",
            _ => return None,
        }
        .into(),
    )
}

/// strace's and bpftrace's `-p PID` given to utap, whose `-p N` is stap's
/// "stop after pass N": for a number that cannot be a pass, how utap
/// attaches to that process.
pub fn pid_option(value: &str) -> Option<String> {
    let pid: u64 = value.trim().parse().ok()?;
    (pid > 5).then(|| {
        format!(
            "-p N stops after pass N (1 to 5), as in stap; \
             utap attaches to process {pid} with -x {pid}"
        )
    })
}

/// strace's `-f` (follow forks) given to utap, whose `-f` is bpftrace's
/// `--format`: what utap does anyway.
pub const FOLLOW_FORKS: &str = "-f is --format (text or json); strace's -f is what utap always \
     does: process probes cover every thread and child process of the -c command or -x process";

/// strace's `-e trace=NAMES` as a utap script (utap's `-e` takes a script):
/// the probe that prints those calls strace's way, if `text` is one.
pub fn strace_expression(text: &str) -> Option<String> {
    let text = text.trim();
    let list = text.strip_prefix("trace=")?;
    if list.is_empty() || list.contains(|c: char| c.is_whitespace() || c == '{') {
        return None;
    }
    let names: Vec<&str> = list.split(',').collect();
    let plain = names.iter().all(|n| {
        n.starts_with(|c: char| c.is_ascii_lowercase())
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && *n != "all"
    });
    let points = match plain {
        true => names
            .iter()
            .map(|n| format!("syscall.{n}"))
            .collect::<Vec<_>>()
            .join(", "),
        // Classes (%file), negations, regular expressions, `all`.
        false => "syscall.*".to_string(),
    };
    Some(format!(
        "-e takes a script, not strace's -e {text}; in utap: \
         -e 'probe {points} {{ printf(\"%s(%s)\\n\", name, argstr) }}'"
    ))
}

/// A bpftrace probe pattern given to `-l` (`tracepoint:*`,
/// `uprobe:/bin/bash:*`): the utap listing that answers it.
pub fn bpftrace_listing(pattern: &str) -> Option<String> {
    let (kind, rest) = pattern.trim().split_once(':')?;
    if !BPFTRACE_PROBES.contains(&kind) {
        return None;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    let utap = match (kind, parts.as_slice()) {
        ("tracepoint" | "t", ["syscalls", tp]) => {
            if let Some(call) = tp.strip_prefix("sys_enter_") {
                format!("syscall.{call}")
            } else if let Some(call) = tp.strip_prefix("sys_exit_") {
                format!("syscall.{call}.return")
            } else {
                "syscall.*".into()
            }
        }
        ("tracepoint" | "t", _) => "syscall.*' and utap -l 'process.*".into(),
        ("uprobe" | "u" | "uretprobe" | "ur", [path @ .., func]) if !path.is_empty() => {
            let ret = if kind.starts_with("ur") {
                ".return"
            } else {
                ""
            };
            format!(
                "process(\"{}\").function(\"{}\"){ret}",
                path.join(":"),
                if func.is_empty() { "*" } else { func }
            )
        }
        ("usdt" | "U", [path, ..]) if !path.is_empty() && *path != "*" => {
            format!("process(\"{path}\").mark(\"*\")")
        }
        ("kprobe" | "k" | "kretprobe" | "kr" | "kfunc" | "kretfunc" | "fentry" | "fexit", _) => {
            return Some(format!(
                "'{pattern}' is a bpftrace kernel probe pattern: {KERNEL_PROBES}; \
                 utap -l 'syscall.*' lists the system calls"
            ));
        }
        ("interval" | "i" | "profile" | "p", _) => "timer.*".into(),
        _ => "**".into(),
    };
    Some(format!(
        "'{pattern}' is a bpftrace probe pattern; utap's probe points have SystemTap's \
         names: utap -l '{utap}'"
    ))
}

/// bpftrace's probe types, and what the `type:` prefix is in utap.
const BPFTRACE_PROBES: &[&str] = &[
    "tracepoint",
    "t",
    "uprobe",
    "u",
    "uretprobe",
    "ur",
    "kprobe",
    "k",
    "kretprobe",
    "kr",
    "kfunc",
    "kretfunc",
    "fentry",
    "fexit",
    "rawtracepoint",
    "usdt",
    "U",
    "interval",
    "i",
    "profile",
    "p",
    "software",
    "hardware",
    "watchpoint",
];

/// The utap spelling of bpftrace syntax at byte `at` of `text` (where a
/// parse error was found), if what is there looks like bpftrace.
pub fn bpftrace_help(text: &str, at: usize) -> Option<String> {
    let at = at.min(text.len());
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = &text[line_start..line_end];
    let probe = probe_head(line);
    let agg = aggregation(line);
    match (probe, agg) {
        (Some(p), Some(a)) => Some(format!("{p}; for the aggregation, {a}")),
        (None, Some(a)) => Some(format!("this looks like bpftrace; in utap {a}")),
        (p, None) => p,
    }
}

/// `BEGIN`, `tracepoint:...`, `uprobe:...` at the start of `line`.
fn probe_head(line: &str) -> Option<String> {
    let head = line.trim_start();
    let word: &str = head
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .next()?;
    if word == "BEGIN" || word == "END" {
        return Some(format!(
            "this looks like bpftrace; in utap write `probe {} {{ ... }}`",
            word.to_ascii_lowercase()
        ));
    }
    let spec = head
        .split(|c: char| c.is_whitespace() || c == '{' || c == ',')
        .next()?;
    let (kind, rest) = spec.split_once(':')?;
    if !BPFTRACE_PROBES.contains(&kind) {
        return None;
    }
    probe_spelling(kind, rest)
}

/// `tracepoint:syscalls:sys_enter_openat` → "... write `probe syscall.openat`", ...
fn probe_spelling(kind: &str, rest: &str) -> Option<String> {
    let parts: Vec<&str> = rest.split(':').collect();
    let utap = match (kind, parts.as_slice()) {
        ("tracepoint" | "t", ["syscalls", tp]) => {
            if let Some(call) = tp.strip_prefix("sys_enter_") {
                format!("probe syscall.{call} {{ ... }}")
            } else if let Some(call) = tp.strip_prefix("sys_exit_") {
                format!("probe syscall.{call}.return {{ ... }}")
            } else {
                "probe syscall.* { ... }".into()
            }
        }
        ("tracepoint" | "t", ["raw_syscalls", "sys_enter"]) => {
            "probe process.syscall { ... }".into()
        }
        ("tracepoint" | "t", ["raw_syscalls", "sys_exit"]) => {
            "probe process.syscall.return { ... }".into()
        }
        ("tracepoint" | "t", ["sched", "sched_process_exit"]) => "probe process.end { ... }".into(),
        ("tracepoint" | "t", ["sched", "sched_process_fork"]) => {
            "probe process.thread.begin { ... }".into()
        }
        ("tracepoint" | "t", ["signal", "signal_deliver"]) => "probe process.signal { ... }".into(),
        ("uprobe" | "u", [path @ .., func]) if !path.is_empty() => {
            format!(
                "probe process(\"{}\").function(\"{func}\") {{ ... }}",
                path.join(":")
            )
        }
        ("uretprobe" | "ur", [path @ .., func]) if !path.is_empty() => format!(
            "probe process(\"{}\").function(\"{func}\").return {{ ... }}",
            path.join(":")
        ),
        ("usdt" | "U", [path, provider, name]) => {
            format!("probe process(\"{path}\").mark(\"{provider}:{name}\") {{ ... }}")
        }
        ("interval" | "i", [unit @ ("s" | "ms" | "us" | "hz"), n]) => {
            format!("probe timer.{unit}({n}) {{ ... }}")
        }
        ("profile" | "p", ["hz", n]) => format!("probe timer.profile.hz({n}) {{ ... }}"),
        ("kprobe" | "k" | "kretprobe" | "kr" | "kfunc" | "kretfunc" | "fentry" | "fexit", _) => {
            let call = parts
                .last()
                .and_then(|f| kernel_function(&["kernel"], Some(f)));
            let nearest = call.unwrap_or_else(|| "syscall.NAME".into());
            return Some(format!(
                "{KERNEL_PROBES}; the nearest user-space probe: `probe {nearest} {{ ... }}`"
            ));
        }
        _ => return None,
    };
    Some(format!("this looks like bpftrace; in utap write `{utap}`"))
}

/// `@x = count()`, `@x[k] = hist(v)`, ...: bpftrace aggregations, as
/// "declare `global x`, add with ... and read with ...".
fn aggregation(line: &str) -> Option<String> {
    let at = line.find('@')?;
    let rest = &line[at + 1..];
    let name_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let name = if name_len == 0 {
        "x"
    } else {
        &rest[..name_len]
    };
    let mut rest = rest[name_len..].trim_start();
    let mut index = "";
    if rest.starts_with('[') {
        let close = rest.find(']')?;
        index = &rest[..=close];
        rest = rest[close + 1..].trim_start();
    }
    let rest = rest.strip_prefix('=')?.trim_start();
    let func_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
    let (func, args) = rest.split_at(func_len);
    let args = args.strip_prefix('(')?;
    let arg = args[..args.find(')')?].trim();
    let arg = if arg.is_empty() { "VALUE" } else { arg };
    let (add, read) = match func {
        "count" => ("1".to_string(), format!("@count({name}{index})")),
        "sum" | "avg" | "min" | "max" => (arg.to_string(), format!("@{func}({name}{index})")),
        "hist" => (arg.to_string(), format!("print(@hist_log({name}{index}))")),
        "lhist" => {
            let first = arg.split(',').next().unwrap_or(arg).trim();
            (
                first.to_string(),
                format!("print(@hist_linear({name}{index}, ...))"),
            )
        }
        "stats" => (arg.to_string(), format!("@count/@sum/@avg({name}{index})")),
        _ => return None,
    };
    Some(format!(
        "declare `global {name}`, add with `{name}{index} <<< {add}` and read with `{read}`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_functions_name_their_system_call() {
        let (_, help) = kernel_point(&["kernel", "function"], Some("__x64_sys_openat")).unwrap();
        assert_eq!(
            help.unwrap(),
            "the nearest user-space probe: syscall.openat"
        );
        let (_, help) = kernel_point(&["kernel", "function", "return"], Some("sys_read")).unwrap();
        assert_eq!(
            help.unwrap(),
            "the nearest user-space probe: syscall.read.return"
        );
        assert!(
            kernel_point(&["kernel", "function"], Some("schedule"))
                .unwrap()
                .1
                .is_none()
        );
        assert!(kernel_point(&["begin"], None).is_none());
        assert!(kernel_point(&["timer", "ms"], None).is_none());
        // utap samples threads itself (a process probe, see the catalogue).
        assert!(kernel_point(&["timer", "profile"], None).is_none());
    }

    #[test]
    fn strace_and_bpftrace_options_get_the_utap_way() {
        assert_eq!(pid_option("3"), None);
        assert_eq!(
            pid_option("1234").unwrap(),
            "-p N stops after pass N (1 to 5), as in stap; utap attaches to process 1234 with -x 1234"
        );
        assert_eq!(
            strace_expression("trace=openat,read").unwrap(),
            "-e takes a script, not strace's -e trace=openat,read; in utap: -e 'probe syscall.openat, syscall.read { printf(\"%s(%s)\\n\", name, argstr) }'"
        );
        assert!(
            strace_expression("trace=%file")
                .unwrap()
                .contains("'probe syscall.* {")
        );
        assert_eq!(strace_expression("probe begin { trace=1 }"), None);
        assert_eq!(
            bpftrace_listing("tracepoint:syscalls:sys_enter_open*").unwrap(),
            "'tracepoint:syscalls:sys_enter_open*' is a bpftrace probe pattern; utap's probe points have SystemTap's names: utap -l 'syscall.open*'"
        );
        assert_eq!(
            bpftrace_listing("uprobe:/bin/bash:*").unwrap(),
            "'uprobe:/bin/bash:*' is a bpftrace probe pattern; utap's probe points have SystemTap's names: utap -l 'process(\"/bin/bash\").function(\"*\")'"
        );
        assert_eq!(bpftrace_listing("syscall.*"), None);
        assert_eq!(bpftrace_listing("process(\"a:b\").function(\"*\")"), None);
    }

    #[test]
    fn bpftrace_aggregations_get_the_stats_spelling() {
        assert_eq!(
            bpftrace_help("@x[comm] = count();", 9).unwrap(),
            "this looks like bpftrace; in utap declare `global x`, add with `x[comm] <<< 1` and read with `@count(x[comm])`"
        );
        assert!(bpftrace_help("x = count();", 2).is_none());
    }
}
