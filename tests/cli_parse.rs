//! The `utap` command line around the front end: `-p1`, diagnostics and
//! exit status, script arguments, and the options not implemented yet.

use std::process::{Command, Output};

fn utap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(args)
        .output()
        .expect("utap runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn p1_prints_the_canonical_form() {
    let out = utap(&[
        "-p1",
        "-e",
        "probe begin{printf(\"%d\\n\",$1+1)exit()}",
        "41",
    ]);
    assert_eq!(text(&out.stderr), "");
    assert_eq!(
        text(&out.stdout),
        "probe begin {\n  printf(\"%d\\n\", 41 + 1);\n  exit();\n}\n"
    );
    assert!(out.status.success());
}

#[test]
fn p1_reads_a_file_and_passes_arguments() {
    let dir = std::env::temp_dir().join(format!("utap-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.stp");
    std::fs::write(&path, "global x = @1\nprobe end { println(x, $#) }\n").unwrap();
    // As with stap's getopt, options may follow the script; `--` makes the
    // rest script arguments even when they look like options.
    let out = utap(&["-p1", path.to_str().unwrap(), "hello", "--", "-x"]);
    assert_eq!(
        text(&out.stdout),
        "global x = \"hello\"\nprobe end {\n  println(x, 2);\n}\n"
    );
    assert!(out.status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parse_errors_go_to_stderr_with_location_and_exit_1() {
    let out = utap(&["-p1", "-e", "probe begin {\n  x = \n}"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        "parse error: expected an expression
   ,-[ <input>:3:1 ]
   |
 3 | }
   | |  
   | `-- found '}'
---'
"
    );
}

#[test]
fn missing_script_file() {
    let out = utap(&["-p1", "/nonexistent/x.stp"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "utap: input file '/nonexistent/x.stp' is missing\n"
    );
}

#[test]
fn version_and_help() {
    let out = utap(&["-V"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).starts_with("utap "));
    let out = utap(&["-h"]);
    assert!(out.status.success());
    for opt in [
        "-e", "-c", "-x", "-o", "-p", "-v", "-l", "-L", "-I", "-D", "-T", "-s", "-g", "-h", "-V",
    ] {
        assert!(
            text(&out.stdout).contains(&format!("  {opt}")),
            "{opt} in help"
        );
    }
    assert!(text(&out.stdout).contains("--suppress-handler-errors"));
}

#[test]
fn usage_errors() {
    let out = utap(&["-p1"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "utap: no script given (a SCRIPT.stp file or -e SCRIPT)\n"
    );
    let out = utap(&["-p", "9", "-e", "probe begin {}"]);
    assert!(!out.status.success());
    let out = utap(&["-D", "=1", "-e", "probe begin {}"]);
    assert!(!out.status.success());
}

#[test]
fn buffer_size_errors_give_the_real_range() {
    // Values clap's integer type rejected with its own u32 range before.
    for v in ["0", "4096", "99999999999", "-1", "x"] {
        let out = utap(&["-s", v, "-e", "probe begin { exit() }"]);
        assert_eq!(out.status.code(), Some(1), "-s {v}");
        assert_eq!(
            text(&out.stderr),
            "utap: Invalid buffer size (should be 1-4095).\n",
            "-s {v}"
        );
    }
    let out = utap(&["-s", "4095", "-e", "probe begin { println(1); exit() }"]);
    assert_eq!(text(&out.stdout), "1\n");
    assert!(out.status.success());
}

#[test]
fn unknown_define_names_the_known_ones() {
    let out = utap(&["-D", "MAXACTIONS=5", "-e", "probe begin { exit() }"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "utap: unknown -D name 'MAXACTIONS' (utap knows HIST_ELISION, MAXACTION, \
         MAXACTION_INTERRUPTIBLE, MAXERRORS, MAXMAPENTRIES, MAXNESTING, MAXSTRINGLEN)\n"
    );
    // SystemTap's settings of its kernel runtime are accepted, to no effect.
    let out = utap(&["-D", "STP_NO_OVERLOAD", "-e", "probe begin { exit() }"]);
    assert_eq!(text(&out.stderr), "");
    assert!(out.status.success());
}

#[test]
fn a_file_of_only_comments_is_not_called_empty() {
    let dir = std::env::temp_dir().join(format!("utap-cli-comments-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.stp");
    std::fs::write(&path, "#!/usr/bin/env utap\n# to do: probes\n").unwrap();
    let out = utap(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "parse error: input file '{}' has no probes, functions or globals (only comments)\n  \
             = help: a script needs at least one probe, function or global\n",
            path.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// stderr of `utap -p1 -e SRC` (plain: NO_COLOR and not a terminal).
fn parse_stderr(src: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(["-p1", "-e", src])
        .env("NO_COLOR", "1")
        .output()
        .expect("utap runs");
    assert_eq!(out.status.code(), Some(1));
    text(&out.stderr)
}

#[test]
fn bpftrace_tracepoints_get_the_utap_spelling() {
    assert_eq!(
        parse_stderr("tracepoint:syscalls:sys_enter_openat { @opens[comm] = count(); }"),
        "parse error: expected 'probe', 'global', 'private', 'function', or '%{'
   ,-[ <input>:1:1 ]
   |
 1 | tracepoint:syscalls:sys_enter_openat { @opens[comm] = count(); }
   | ^^^^^|^^^^  
   |      `------ found identifier 'tracepoint'
   | 
   | Help: this looks like bpftrace; in utap write `probe syscall.openat { ... }`; for the aggregation, declare `global opens`, add with `opens[comm] <<< 1` and read with `@count(opens[comm])`
---'
"
    );
}

#[test]
fn bpftrace_uprobes_become_process_function_probes() {
    let err = parse_stderr("uretprobe:/lib/x86_64-linux-gnu/libc.so.6:malloc { }");
    assert!(
        err.ends_with(
            "   | Help: this looks like bpftrace; in utap write `probe process(\"/lib/x86_64-linux-gnu/libc.so.6\").function(\"malloc\").return { ... }`\n---'\n"
        ),
        "{err}"
    );
}

#[test]
fn bpftrace_kprobes_say_kernel_probes_are_not_available() {
    let err = parse_stderr("kprobe:do_sys_openat2 { }");
    assert!(
        err.ends_with(
            "   | Help: utap traces user space (ptrace): kernel probes are not available; the nearest user-space probe: `probe syscall.openat2 { ... }`\n---'\n"
        ),
        "{err}"
    );
}

#[test]
fn bpftrace_begin_and_aggregations_inside_utap_probes() {
    let err = parse_stderr("BEGIN { printf(\"hi\\n\"); }");
    assert!(
        err.ends_with(
            "   | Help: this looks like bpftrace; in utap write `probe begin { ... }`\n---'\n"
        ),
        "{err}"
    );
    assert_eq!(
        parse_stderr("probe syscall.read { @bytes = hist($arg3); }"),
        "parse error: expected '('
   ,-[ <input>:1:29 ]
   |
 1 | probe syscall.read { @bytes = hist($arg3); }
   |                             |  
   |                             `-- found '='
   | 
   | Help: this looks like bpftrace; in utap declare `global bytes`, add with `bytes <<< $arg3` and read with `print(@hist_log(bytes))`
---'
"
    );
}

#[test]
fn verbose_prints_pass_timings_and_when_tracing_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args([
            "-v",
            "-e",
            "probe process.end { println(\"done\") }",
            "-c",
            "true",
        ])
        .output()
        .expect("utap runs");
    assert!(out.status.success());
    let err = text(&out.stderr);
    let pass = regex::Regex::new(concat!(
        r"(?m)^Pass 1: parsed user script in [0-9]+\.[0-9] ms\.\n",
        r"Pass 2: analyzed script: 1 probes, [0-9]+ functions, 0 globals in [0-9]+\.[0-9] ms\.\n",
        r"Pass 3-4: translated and compiled [0-9]+ functions into [0-9]+ bytes of native code in [0-9]+\.[0-9] ms\.$",
    ))
    .unwrap();
    assert!(pass.is_match(&err), "{err}");
    let started =
        regex::Regex::new(r"(?m)^utap: tracing started: process [0-9]+, 1 thread\(s\)$").unwrap();
    assert!(started.is_match(&err), "{err}");
    let ended =
        regex::Regex::new(r"(?m)^utap: session ended: process [0-9]+ exited with status 0$")
            .unwrap();
    assert!(ended.is_match(&err), "{err}");
    assert!(
        err.ends_with(" ms.\n") && err.contains("Pass 5: run completed in "),
        "{err}"
    );
    assert!(
        !err.contains("Tid(") && !err.contains('{'),
        "Rust debug text: {err}"
    );
}

/// Runs utap with `stdin` as its standard input.
fn utap_with_stdin(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("utap runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn dash_reads_the_script_from_stdin() {
    let out = utap_with_stdin(&["-", "x"], "probe begin { println(@1) exit() }\n");
    assert_eq!(text(&out.stdout), "x\n");
    assert!(out.status.success());
    // Messages name it as stap does.
    let out = utap_with_stdin(&["-p1", "-"], "probe begin { x = }\n");
    assert!(
        text(&out.stderr).contains("<input>:1:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn stap_options_utap_accepts() {
    // -u, -w and --compatible (both spellings) are accepted; -w silences
    // the checker's warnings.
    let script = "probe begin { x = 1; println(\"ok\") exit() }";
    let loud = utap(&["-v", "-e", script]);
    assert!(
        text(&loud.stderr).contains("warning"),
        "{}",
        text(&loud.stderr)
    );
    for args in [
        &["-w", "-u", "--compatible=1.3", "-e", script][..],
        &["-w", "--compatible", "4.0", "-e", script][..],
    ] {
        let out = utap(args);
        assert_eq!(text(&out.stdout), "ok\n");
        assert!(
            !text(&out.stderr).contains("warning"),
            "{}",
            text(&out.stderr)
        );
        assert!(out.status.success());
    }
    let out = utap(&["--compatible=one", "-e", script]);
    assert!(!out.status.success());
}

#[test]
fn unknown_stap_options_are_named() {
    for (arg, name) in [("-k", "-k"), ("--ldd", "--ldd"), ("--vp=0002", "--vp")] {
        let out = utap(&[arg, "-e", "probe begin {}"]);
        assert_eq!(out.status.code(), Some(1), "{arg}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "utap: option '{name}' is not supported by utap\n  \
                 (run 'utap --help' for the options utap has)\n"
            )
        );
    }
}

#[test]
fn skip_badvars_reads_unknown_context_variables_as_zero() {
    let script = "probe syscall.getppid { println($nosuch, \"|\", $nosuch$, \"|\") exit() }";
    let out = utap(&["-p2", "-e", script]);
    assert!(!out.status.success());
    // The shell asks for its parent's pid at start-up.
    let out = utap(&["--skip-badvars", "-e", script, "-c", "sh -c true"]);
    assert_eq!(text(&out.stdout), "0||\n", "{}", text(&out.stderr));
}

#[test]
fn t_reports_probe_hits() {
    let out = utap(&[
        "-t",
        "-e",
        "probe begin { println(1) } probe timer.ms(1) { if (++n == 3) exit() } global n",
    ]);
    let stdout = text(&out.stdout);
    let report: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(report[0], "----- probe hit report: ");
    let re = |pp: &str, col: u32, hits: u32| {
        format!(
            r"^{pp}, \(<input>:1:{col}\), hits: {hits}, nsecs: [0-9]+min/[0-9]+avg/[0-9]+max, variance: [0-9]+, from: {pp}, index: [0-9]$"
        )
    };
    for (line, (pp, col, hits)) in report[1..]
        .iter()
        .zip([("begin", 1, 1), (r"timer\.ms\(1\)", 28, 3)])
    {
        let re = regex::Regex::new(&re(pp, col, hits)).unwrap();
        assert!(re.is_match(line), "{line}");
    }
    assert_eq!(report.len(), 3, "{stdout}");
}

#[test]
fn c_given_as_one_word_with_its_value() {
    let out = utap(&[
        "-c echo traced",
        "-e",
        "probe process.end { println(\"end\") }",
    ]);
    assert_eq!(text(&out.stdout), "traced\nend\n", "{}", text(&out.stderr));
}

/// Exit status 1 and exactly `hint` on stderr for `args`.
fn hints(args: &[&str], hint: &str) {
    let out = utap(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    assert_eq!(text(&out.stderr), format!("utap: {hint}\n"), "{args:?}");
    assert_eq!(text(&out.stdout), "", "{args:?}");
}

#[test]
fn strace_and_bpftrace_habits_get_the_utap_way() {
    // strace -p PID, bpftrace -p PID: utap's -p is the pass.
    for args in [
        &["-p", "1234", "-e", "probe begin { exit() }"][..],
        &["-p1234", "script.stp"][..],
    ] {
        hints(
            args,
            "-p N stops after pass N (1 to 5), as in stap; utap attaches to process 1234 with -x 1234",
        );
    }
    // strace -e trace=...: utap's -e is the script.
    hints(
        &["-e", "trace=openat,read", "-c", "true"],
        "-e takes a script, not strace's -e trace=openat,read; in utap: \
         -e 'probe syscall.openat, syscall.read { printf(\"%s(%s)\\n\", name, argstr) }'",
    );
    hints(
        &["-e", "trace=%file", "-c", "true"],
        "-e takes a script, not strace's -e trace=%file; in utap: \
         -e 'probe syscall.* { printf(\"%s(%s)\\n\", name, argstr) }'",
    );
    // strace -f: utap's -f is the format, and it follows forks anyway.
    for args in [
        &["-f", "-c", "true", "-e", "probe begin { }"][..],
        &["-ff", "-e", "probe begin { }"][..],
        &["-f", "script.stp", "-c", "true"][..],
    ] {
        hints(
            args,
            "-f is --format (text or json); strace's -f is what utap always does: process \
             probes cover every thread and child process of the -c command or -x process",
        );
    }
    // bpftrace -l 'tracepoint:*'.
    hints(
        &["-l", "tracepoint:*"],
        "'tracepoint:*' is a bpftrace probe pattern; utap's probe points have SystemTap's \
         names: utap -l 'syscall.*' and utap -l 'process.*'",
    );
    hints(
        &["-l", "tracepoint:syscalls:sys_exit_read"],
        "'tracepoint:syscalls:sys_exit_read' is a bpftrace probe pattern; utap's probe \
         points have SystemTap's names: utap -l 'syscall.read.return'",
    );
    hints(
        &["-l", "kprobe:*"],
        "'kprobe:*' is a bpftrace kernel probe pattern: utap traces user space (ptrace): \
         kernel probes are not available; utap -l 'syscall.*' lists the system calls",
    );
    // What they name works, and utap's own uses stay as they were.
    let out = utap(&["-l", "syscall.read.return"]);
    assert_eq!(text(&out.stdout), "syscall.read.return\n");
    let out = utap(&["-p", "1", "-f", "json", "-e", "probe begin { }"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A script of `n` statements in one probe body, in a file of its own.
fn long_body(n: usize) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("utap-long-body-{}-{n}.stp", std::process::id()));
    let mut text = String::from("global x\nprobe begin {\n");
    for i in 0..n {
        text.push_str(&format!("  x = x + {i}\n"));
    }
    text.push_str("}\n");
    std::fs::write(&path, text).unwrap();
    path
}

/// `utap args` to its end: its output, and its peak resident set in KB.
fn utap_peak_rss(args: &[&str]) -> (Output, i64) {
    let child = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("utap runs");
    let pid = child.id() as libc::pid_t;
    let (mut out, mut err) = (child.stdout.unwrap(), child.stderr.unwrap());
    let read_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).unwrap();
        v
    });
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut out, &mut stdout).unwrap();
    let stderr = read_err.join().unwrap();
    let mut status = 0;
    // SAFETY: waiting for our own child into local out-parameters.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    use std::os::unix::process::ExitStatusExt;
    let out = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout,
        stderr,
    };
    (out, usage.ru_maxrss)
}

/// Issue 29, point 4: one body of 200,000 statements made `-p4` peak at
/// 0.89 GB (Cranelift holds a whole native function at once); past
/// 50,000 statements a body is refused, early and with a message.
#[test]
fn a_body_past_the_statement_cap_is_refused_with_a_message() {
    let path = long_body(200_000);
    let (out, peak_kb) = utap_peak_rss(&["-p4", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "semantic error: body too large: 200000 statements, more than the 50000 one probe \
             or function may have (compiling one body costs about 4 KB of memory per \
             statement); split it into functions"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(":50003:"),
        "points at the first statement past the cap: {stderr}"
    );
    assert_eq!(out.status.code(), Some(1));
    // Before: 0.89 GB. Now the parse and elaboration only (~0.33 GB).
    assert!(peak_kb < 500_000, "peak {peak_kb} KB");
}

#[test]
fn a_body_at_the_statement_cap_compiles_in_bounded_memory() {
    let path = long_body(50_000);
    let (out, peak_kb) = utap_peak_rss(&["-p4", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Measured 0.24 GB.
    assert!(peak_kb < 450_000, "peak {peak_kb} KB");
}
