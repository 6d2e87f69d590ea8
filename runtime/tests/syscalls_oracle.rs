//! Oracle test: the `name(argstr) = retstr` lines utap's decoders produce
//! for a deterministic fixture must equal strace's lines for the same
//! fixture, adapted only where SystemTap's conventions differ from strace.
//!
//! The fixture (fixtures/syscalls_fixture.c) is compiled with `cc` and run
//! twice with ASLR off: under `strace -f -qq -e trace=...`, and under a
//! minimal PTRACE_SYSCALL loop written here that decodes every call of the
//! same set with `utap_runtime::syscalls::{argstr_exit, retstr}` (taking
//! an `entry_snapshot` at each entry stop, as a tracer does).
//!
//! strace's lines are rewritten in SystemTap's conventions by
//! `utap_runtime::syscalls::strace_compat` (failures as `-2 (ENOENT)`,
//! brk's decimal return, bare decorated return values, umask's octal
//! without padding), which lists and tests each difference.
//!
//! Specific to this test: the pids differ between the two runs, so
//! getpid's and set_tid_address's results and the first argument of kill
//! and pidfd_open read `PID`, and the child's pid (clone's result, wait4's
//! argument and result) reads `CHILD`, in both outputs. Signal deliveries
//! (strace's `--- SIGUSR1 ... ---`) are not calls: utap reports them through
//! process.signal.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use utap_runtime::memory::{Fault, ReadMemory};
use utap_runtime::syscalls::strace_compat::strace_line_to_systemtap;
use utap_runtime::syscalls::table::{i386_syscall_name, i386_to_x86_64};
use utap_runtime::syscalls::{
    EntrySnapshot, argstr, argstr_exit, entry_snapshot, retstr, syscall_name, syscall_number,
};

/// The system calls compared (the oracle set of issue 5 plus the loader's
/// and the fixture's other calls).
const TRACED: &[&str] = &[
    "openat",
    "close",
    "read",
    "write",
    "lseek",
    "getpid",
    "kill",
    "pread64",
    "fstat",
    "newfstatat",
    "access",
    "rt_sigaction",
    "rt_sigprocmask",
    "pipe2",
    "nanosleep",
    "mmap",
    "munmap",
    "mprotect",
    "brk",
    "clock_nanosleep",
    "clock_getres",
    "rename",
    "mkdir",
    "rmdir",
    "mkdirat",
    "unlinkat",
    "symlink",
    "readlink",
    "lstat",
    "stat",
    "unlink",
    "chmod",
    "truncate",
    "faccessat",
    "umask",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "ftruncate",
    "fchmod",
    "pwrite64",
    "writev",
    "readv",
    "fsync",
    "fdatasync",
    "ioctl",
    "socket",
    "bind",
    "listen",
    "connect",
    "accept4",
    "sendto",
    "recvfrom",
    "shutdown",
    "socketpair",
    "madvise",
    "mremap",
    "wait4",
    "getuid",
    "getgid",
    "sched_yield",
    "clone",
    "execve",
    "futex",
    "getcwd",
    "alarm",
    "epoll_create1",
    "eventfd2",
    "pipe",
    "poll",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "getdents64",
    "uname",
    "getrlimit",
    "setrlimit",
    "prlimit64",
    "arch_prctl",
    "sched_getaffinity",
    "setsockopt",
    "getsockopt",
    "set_tid_address",
    "set_robust_list",
    "rseq",
    "sigaltstack",
    "getresuid",
    "getgroups",
    "fchownat",
    "linkat",
    "symlinkat",
    "memfd_create",
    "timerfd_create",
    "timerfd_settime",
    "signalfd4",
    "inotify_init1",
    "inotify_add_watch",
    "inotify_rm_watch",
    "getpriority",
    "setpriority",
    "setitimer",
    "getitimer",
    "sendmsg",
    "recvmsg",
    "prctl",
    "getsockname",
    "getpeername",
    "flock",
    "preadv",
    "preadv2",
    "pwritev",
    "sendfile",
    "splice",
    "syncfs",
    "personality",
    "close_range",
    "pidfd_open",
    "waitid",
    "getrusage",
    "umount2",
    "mlockall",
    "accept",
    "select",
    "pselect6",
    "ppoll",
    "sched_getscheduler",
    "sched_getparam",
    "sched_setscheduler",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "timer_create",
    "timer_settime",
    "timer_getoverrun",
    "timer_delete",
    "rt_sigtimedwait",
    "munlockall",
];

const ADDR_NO_RANDOMIZE: libc::c_ulong = 0x0040000;

fn work_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("syscalls_oracle");
    std::fs::create_dir_all(dir.join("data")).expect("create work dir");
    dir
}

fn build_fixture(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/syscalls_fixture.c");
    let bin = dir.join("syscalls_fixture");
    let status = Command::new("cc")
        .args(["-O0", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed on {}", src.display());
    bin
}

/// strace's lines for the fixture, adapted to utap's conventions.
/// The lines with the fixture's pid replaced by `PID` (in getpid's result
/// and kill's first argument) and its child's by `CHILD` (clone's result,
/// wait4's first argument and result).
fn hide_pids(lines: Vec<String>, pid: &str) -> Vec<String> {
    let mut child = None;
    lines
        .into_iter()
        .map(|line| {
            if line.starts_with("getpid() = ") || line.starts_with("set_tid_address(") {
                return line.replacen(&format!(" = {pid}"), " = PID", 1);
            }
            for call in ["kill", "pidfd_open"] {
                if let Some(rest) = line.strip_prefix(&format!("{call}({pid}, ")) {
                    return format!("{call}(PID, {rest}");
                }
            }
            if line.starts_with("clone(") {
                let (call, ret) = line.rsplit_once(" = ").unwrap();
                child = Some(ret.to_string());
                return format!("{call} = CHILD");
            }
            match &child {
                Some(c) if line.starts_with(&format!("wait4({c}, ")) => line
                    .replacen(&format!("wait4({c}, "), "wait4(CHILD, ", 1)
                    .replace(&format!(" = {c}"), " = CHILD"),
                _ => line,
            }
        })
        .collect()
}

/// strace's lines for `argv` (program path first), limited to `traced`.
fn strace_lines(argv: &[&Path], traced: &[&str], out: &Path) -> Vec<String> {
    let bin = argv[0];
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o"])
        .arg(out)
        .arg(format!("-etrace={}", traced.join(",")))
        .args(argv)
        .stdout(Stdio::null());
    // SAFETY: personality(2) is async-signal-safe; it only affects the child.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::personality(ADDR_NO_RANDOMIZE);
            Ok(())
        });
    }
    let status = cmd.status().expect("run strace");
    assert!(status.success(), "strace failed");
    let text = std::fs::read_to_string(out).expect("strace output");
    let pid = text.split_whitespace().next().unwrap_or("").to_string();
    // strace also shows the exec that starts the fixture; the tracer here
    // starts tracing after it.
    let own_exec = format!("execve(\"{}\", ", bin.display());
    let lines = text
        .lines()
        .filter_map(|l| strace_line_to_systemtap(l).expect("a strace line"))
        .skip_while(|l| l.starts_with(&own_exec))
        .collect();
    hide_pids(lines, &pid)
}

/// Tracee memory through /proc/PID/mem.
struct ProcMem(File);

impl ReadMemory for ProcMem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<usize, Fault> {
        let fault = Fault {
            addr,
            errno: libc::EFAULT,
        };
        match self.0.read_at(buf, addr) {
            Ok(0) => Err(fault),
            Ok(n) => Ok(n),
            Err(_) => Err(fault),
        }
    }
}

/// What PTRACE_GET_SYSCALL_INFO says about a syscall stop.
enum Stop {
    Entry { arch: u32, nr: i64, args: [u64; 6] },
    Exit { ret: i64 },
    Other,
}

fn syscall_info(pid: libc::pid_t) -> Stop {
    let mut raw = [0u64; 16];
    // SAFETY: the buffer is larger than struct ptrace_syscall_info.
    let n = unsafe {
        libc::ptrace(
            libc::PTRACE_GET_SYSCALL_INFO,
            pid,
            std::mem::size_of_val(&raw),
            raw.as_mut_ptr(),
        )
    };
    assert!(
        n > 0,
        "PTRACE_GET_SYSCALL_INFO: {}",
        std::io::Error::last_os_error()
    );
    let op = raw[0] & 0xff;
    match op {
        1 => Stop::Entry {
            arch: (raw[0] >> 32) as u32,
            nr: raw[3] as i64,
            args: raw[4..10].try_into().unwrap(),
        },
        2 => Stop::Exit { ret: raw[3] as i64 },
        _ => Stop::Other,
    }
}

/// Starts `argv` (program path first) traced from its exec, stdout to
/// /dev/null, ASLR off; returns its pid, stopped after the exec.
fn spawn_traced(argv: &[&Path]) -> libc::pid_t {
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_os_str().as_encoded_bytes()).unwrap())
        .collect();
    let prog = &cargs[0];
    let mut argv: Vec<*const libc::c_char> = cargs.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let devnull = CString::new("/dev/null").unwrap();

    // SAFETY: the child only makes async-signal-safe calls before exec.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        unsafe {
            libc::personality(ADDR_NO_RANDOMIZE);
            // As std's Command does: the test harness ignores SIGPIPE.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let null = libc::open(devnull.as_ptr(), libc::O_WRONLY);
            libc::dup2(null, 1);
            libc::close(null);
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::execv(prog.as_ptr(), argv.as_ptr());
            libc::_exit(127);
        }
    }

    let mut status = 0;
    // The stop after execve.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFSTOPPED(status), "fixture did not stop after exec");
    let opts = libc::PTRACE_O_TRACESYSGOOD | libc::PTRACE_O_EXITKILL;
    unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, opts) };
    pid
}

/// Runs `argv` (program path first) under a minimal PTRACE_SYSCALL tracer
/// and decodes every call of `traced` with utap's decoders.
fn utap_lines(argv: &[&Path], traced: &[&str]) -> Vec<String> {
    let traced: Vec<i64> = traced
        .iter()
        .map(|n| i64::from(syscall_number(n).expect("known syscall")))
        .collect();
    let pid = spawn_traced(argv);
    let mut status = 0;
    let mem = ProcMem(File::open(format!("/proc/{pid}/mem")).expect("open /proc/PID/mem"));

    let mut lines = Vec::new();
    let mut pending: Option<(i64, [u64; 6], EntrySnapshot)> = None;
    let mut deliver = 0;
    loop {
        unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, 0, deliver) };
        deliver = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            break;
        }
        let sig = libc::WSTOPSIG(status);
        if sig != (libc::SIGTRAP | 0x80) {
            // A signal-delivery-stop: pass the signal on.
            deliver = sig;
            continue;
        }
        match syscall_info(pid) {
            Stop::Entry { nr, args, .. } => {
                pending = Some((nr, args, entry_snapshot(nr, &args, &mem)));
            }
            Stop::Exit { ret } => {
                let Some((nr, args, entry)) = pending.take() else {
                    continue;
                };
                if traced.contains(&nr) {
                    let name = syscall_name(nr).unwrap();
                    let args_text = argstr_exit(nr, &args, ret, &mem, &entry);
                    lines.push(format!("{name}({args_text}) = {}", retstr(nr, ret)));
                }
            }
            Stop::Other => {}
        }
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "fixture failed: status {status:#x}"
    );
    hide_pids(lines, &pid.to_string())
}

#[test]
fn decoded_lines_equal_strace() {
    let dir = work_dir();
    let bin = build_fixture(&dir);
    let data = dir.join("data");
    let argv = [bin.as_path(), data.as_path()];
    let expected = strace_lines(&argv, TRACED, &dir.join("strace.out"));
    let actual = utap_lines(&argv, TRACED);

    // The fixture's own calls must all be there (the loader's vary by libc).
    for needle in [
        "openat(AT_FDCWD, \"/nonexistent/file\", O_RDONLY) = -2 (ENOENT)",
        "close(-1) = -9 (EBADF)",
        "kill(2147483647, SIGTERM) = -3 (ESRCH)",
        "write(1, \"fixture: done\\n\", 14) = 14",
    ] {
        assert!(
            expected.iter().any(|l| l == needle),
            "strace lacks {needle}"
        );
    }
    assert_same_lines(&expected, &actual);
}

/// Line-by-line equality with a readable report of every difference.
fn assert_same_lines(expected: &[String], actual: &[String]) {
    let diffs: Vec<String> = expected
        .iter()
        .zip(actual)
        .enumerate()
        .filter(|(_, (e, a))| e != a)
        .map(|(i, (e, a))| format!("line {}:\n  strace: {e}\n  utap:   {a}", i + 1))
        .collect();
    assert!(
        diffs.is_empty(),
        "{} lines differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    assert_eq!(
        expected.len(),
        actual.len(),
        "strace: {expected:#?}\nutap: {actual:#?}"
    );
}

/// Every fully decoded call except those whose text is not reproducible
/// between two runs (random data, clocks, free blocks of the file system,
/// clone3's parent_tid which a finished thread clears) or that never return.
fn all_decoded() -> Vec<&'static str> {
    utap_runtime::syscalls::spec::SIGNATURES
        .iter()
        .map(|s| s.name)
        .filter(|n| {
            !matches!(
                *n,
                "getrandom"
                    | "statfs"
                    | "clone3"
                    | "fstatfs"
                    | "clock_gettime"
                    | "gettimeofday"
                    | "time"
                    | "sysinfo"
                    | "exit"
                    | "exit_group"
                    | "execve"
            )
        })
        .collect()
}

/// A directory for tools that change files, recreated before every run so
/// that strace and the tracer see the same state.
fn fresh_scratch(dir: &Path) -> PathBuf {
    let scratch = dir.join("scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("file.txt"), "scratch data\n").unwrap();
    scratch
}

/// Common single-process tools, traced for every call utap decodes in
/// full: their lines must equal strace's too.
#[test]
fn system_tools_decode_as_strace() {
    let dir = work_dir();
    let tools = dir.join("tools");
    if !tools.join("file.txt").exists() {
        std::fs::create_dir_all(tools.join("sub")).unwrap();
        std::fs::write(
            tools.join("file.txt"),
            "some text\n\twith a tab\nzzz\naaa\n",
        )
        .unwrap();
    }
    let t = tools.display().to_string();
    let f = format!("{t}/file.txt");
    let s = dir.join("scratch").display().to_string();
    let traced = all_decoded();
    let cases: Vec<(Vec<String>, bool)> = [
        (vec!["/bin/ls", "-la", &t], false),
        (vec!["/bin/cat", &f], false),
        (vec!["/usr/bin/head", "-c", "5", &f], false),
        (vec!["/usr/bin/wc", &f], false),
        (vec!["/usr/bin/sort", &f], false),
        (vec!["/usr/bin/du", "-s", &t], false),
        (vec!["/usr/bin/find", &t], false),
        (vec!["/usr/bin/id"], false),
        (vec!["/bin/uname", "-a"], false),
        (vec!["/bin/date", "-u", "-d", "@0"], false),
        (vec!["/usr/bin/gzip", "-c", "-n", &f], false),
        (vec!["/usr/bin/sleep", "0.001"], false),
        (
            vec![
                "/usr/bin/cp",
                &format!("{s}/file.txt"),
                &format!("{s}/copy"),
            ],
            true,
        ),
        (
            vec![
                "/usr/bin/mv",
                &format!("{s}/file.txt"),
                &format!("{s}/moved"),
            ],
            true,
        ),
        (
            vec!["/usr/bin/ln", "-s", "file.txt", &format!("{s}/link")],
            true,
        ),
        (vec!["/usr/bin/mkdir", "-p", &format!("{s}/a/b")], true),
        (vec!["/usr/bin/rm", "-r", &format!("{s}/file.txt")], true),
        (vec!["/usr/bin/stat", &f], false),
        (vec!["/bin/ls", "-l", &f], false),
        (vec!["/usr/bin/touch", &format!("{s}/file.txt")], true),
        (
            vec!["/usr/bin/touch", "-d", "@5", &format!("{s}/file.txt")],
            true,
        ),
        (
            vec!["/usr/bin/touch", "-d", "@1234567890.5", &format!("{s}/new")],
            true,
        ),
    ]
    .into_iter()
    .map(|(argv, mutates)| (argv.into_iter().map(String::from).collect(), mutates))
    .collect();
    let mut ran = 0;
    for (argv, mutates) in &cases {
        let argv: Vec<&Path> = argv.iter().map(Path::new).collect();
        // A minimal system may lack a tool; most must be there.
        if !argv[0].exists() {
            continue;
        }
        ran += 1;
        if *mutates {
            fresh_scratch(&dir);
        }
        let expected = strace_lines(&argv, &traced, &dir.join("tools.strace"));
        if *mutates {
            fresh_scratch(&dir);
        }
        let actual = utap_lines(&argv, &traced);
        assert!(!expected.is_empty(), "{argv:?}: no strace lines");
        assert_same_lines(&expected, &actual);
    }
    assert!(ran >= cases.len() - 3, "only {ran} of the tools exist");
}

const AUDIT_ARCH_I386: u32 = 0x4000_0003;

/// A 32-bit process's calls come with i386 numbers: the i386 table names
/// them as strace does, and maps them to x86_64's numbers.
#[test]
fn i386_calls_are_named_as_strace_names_them() {
    let dir = work_dir();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/syscalls_fixture32.c");
    let bin = dir.join("syscalls_fixture32");
    let status = Command::new("cc")
        .args(["-m32", "-nostdlib", "-static", "-fno-pie", "-no-pie", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc -m32 failed on {}", src.display());

    // Our names from the entry stops, and the lines of the calls that
    // return, decoded with the x86_64 decoders under the mapped numbers
    // (right for calls without structures, whose layouts differ).
    let pid = spawn_traced(&[bin.as_path()]);
    let mem = ProcMem(File::open(format!("/proc/{pid}/mem")).unwrap());
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    let mut pending = None;
    let mut status = 0;
    loop {
        unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, 0, 0) };
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            break;
        }
        match syscall_info(pid) {
            Stop::Entry { arch, nr, args } => {
                entries.push((arch, nr));
                pending = Some((nr, args));
            }
            Stop::Exit { ret } => {
                let (nr, args) = pending.take().unwrap();
                let nr = i64::from(i386_to_x86_64(nr).unwrap());
                let text = argstr(nr, &args, Some(ret), &mem);
                let name = syscall_name(nr).unwrap();
                lines.push(format!("{name}({text}) = {}", retstr(nr, ret)));
            }
            Stop::Other => {}
        }
    }
    assert!(
        entries.iter().all(|&(arch, _)| arch == AUDIT_ARCH_I386),
        "{entries:x?}"
    );
    let names: Vec<&str> = entries
        .iter()
        .map(|&(_, nr)| i386_syscall_name(nr).expect("a known i386 call"))
        .collect();
    assert_eq!(names, ["write", "getpid", "open", "close", "exit"]);
    let mapped: Vec<Option<u32>> = entries.iter().map(|&(_, nr)| i386_to_x86_64(nr)).collect();
    assert_eq!(mapped, [Some(1), Some(39), Some(2), Some(3), Some(60)]);

    // strace's names for the same run.
    let out = dir.join("fixture32.strace");
    let status = Command::new("strace")
        .args(["-qq", "-o"])
        .arg(&out)
        .arg(&bin)
        .stdout(Stdio::null())
        .status()
        .expect("run strace");
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let strace_calls: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("execve(") && !l.starts_with('['))
        .collect();
    let strace_names: Vec<&str> = strace_calls
        .iter()
        .filter_map(|l| l.split('(').next())
        .collect();
    assert_eq!(strace_names, names, "{text}");
    let expected: Vec<String> = strace_calls
        .iter()
        .filter_map(|l| strace_line_to_systemtap(l).unwrap())
        .filter(|l| !l.ends_with(" = ?"))
        .collect();
    // The two runs have different pids: compare getpid's result as PID.
    let hide = |l: &String| match l.strip_prefix("getpid() = ") {
        Some(_) => "getpid() = PID".to_string(),
        None => l.clone(),
    };
    let expected: Vec<String> = expected.iter().map(hide).collect();
    let lines: Vec<String> = lines.iter().map(hide).collect();
    assert_same_lines(&expected, &lines);
}
