//! The seccomp filter under a real tracer: a forked child installs it,
//! execs a fixture (this same binary, in fixture mode) making N getppid and
//! M write calls, and the tracer counts PTRACE_EVENT_SECCOMP stops.
//!
//! A custom harness (harness = false): the fixture must be this binary's
//! main thread, with no test-runner threads or output around it.

use std::ffi::CString;
use std::panic::{AssertUnwindSafe, catch_unwind};

use utap_runtime::seccomp::{BuildError, Filter, Privileges, install, needs_no_new_privs};

const SYS_GETPPID: u32 = 110;
const SYS_WRITE: u32 = 1;
const SYS_EXECVE: u64 = 59;
const SYS_GETPID: u32 = 39;
const SYS_CLOSE_RANGE: u32 = 436;
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// The fixture writes to this fd so its writes are told apart.
const FIXTURE_FD: i32 = 100;
/// The fixture's exit code when every syscall returned what it should.
const FIXTURE_OK: i32 = 7;

fn main() {
    if let Ok(mode) = std::env::var("UTAP_SECCOMP_FIXTURE") {
        fixture(&mode);
    }
    let tests: &[(&str, fn())] = &[
        ("getppid_set_stops_exactly_on_getppid_and_exec", getppid_set),
        ("empty_set_stops_only_on_exec", empty_set),
        ("write_set_ignores_getppid", write_set),
        ("large_sets_use_a_bounded_program", large_set),
        ("other_architectures_and_x32_are_traced", other_abis),
        ("unfiltered_child_runs_the_same", unfiltered),
        ("bad_numbers_are_rejected", bad_numbers),
        ("install_reports_privileges", install_privileges),
        ("programs_disassemble", disassembly),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    let mut ran = 0;
    for (name, test) in tests {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let ok = catch_unwind(AssertUnwindSafe(test)).is_ok();
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        failed += usize::from(!ok);
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        ran - failed
    );
    std::process::exit(i32::from(failed > 0));
}

/// The traced program: getppid N times (each must return the real parent),
/// write M times, optional foreign-ABI calls, then exit FIXTURE_OK.
fn fixture(mode: &str) -> ! {
    let num = |k: &str| std::env::var(k).unwrap().parse::<i64>().unwrap();
    let (n, m, ppid) = (num("FIXTURE_N"), num("FIXTURE_M"), num("FIXTURE_PPID"));
    let mut ok = true;
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        ok &= libc::dup2(null, FIXTURE_FD) == FIXTURE_FD;
        for _ in 0..n {
            ok &= libc::syscall(libc::SYS_getppid) == ppid;
        }
        for _ in 0..m {
            ok &= libc::write(FIXTURE_FD, b"x".as_ptr().cast(), 1) == 1;
        }
        if mode.contains("high") {
            // close_range (436) on no open fd: past any bitmask word in use.
            ok &= libc::syscall(SYS_CLOSE_RANGE as i64, 1000, 1000, 0) == 0;
        }
        if mode.contains("i386") {
            // The i386 getpid (20) through the 32-bit entry point.
            let ret: i64;
            std::arch::asm!("int 0x80", inlateout("rax") 20i64 => ret);
            ok &= ret == libc::getpid() as i64;
        }
        if mode.contains("x32") {
            // getpid with the x32 bit: the pid, or ENOSYS without x32 support.
            let r = libc::syscall(0x4000_0000 | SYS_GETPID as i64);
            let errno = *libc::__errno_location();
            ok &= r == libc::getpid() as i64 || (r == -1 && errno == libc::ENOSYS);
        }
        libc::_exit(if ok { FIXTURE_OK } else { 3 });
    }
}

/// One seccomp stop: the architecture, syscall number and first argument.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stop {
    arch: u32,
    nr: u64,
    arg0: u64,
}

struct Run {
    stops: Vec<Stop>,
    exec_events: usize,
    exit_code: i32,
}

impl Run {
    fn count(&self, nr: u32) -> usize {
        self.stops
            .iter()
            .filter(|s| s.arch == AUDIT_ARCH_X86_64 && s.nr == nr as u64)
            .count()
    }
}

/// Forks a child that waits to be seized, installs `filter` (if any) and
/// execs the fixture; traces it to its end with PTRACE_CONT only.
fn trace(filter: Option<&Filter>, mode: &str, n: u32, m: u32) -> Run {
    let exe = CString::new(
        std::env::current_exe()
            .unwrap()
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    let env = [
        format!("UTAP_SECCOMP_FIXTURE={mode}"),
        format!("FIXTURE_N={n}"),
        format!("FIXTURE_M={m}"),
        format!("FIXTURE_PPID={}", std::process::id()),
    ];
    let env: Vec<CString> = env.into_iter().map(|e| CString::new(e).unwrap()).collect();
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let argv = [exe.as_ptr(), std::ptr::null()];

    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // Only async-signal-safe calls from here on.
        unsafe {
            libc::raise(libc::SIGSTOP);
            if let Some(filter) = filter
                && install(filter).is_err()
            {
                libc::_exit(99);
            }
            libc::execve(exe.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(98);
        }
    }
    let mut status = 0;
    assert_eq!(
        unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) },
        pid
    );
    assert!(libc::WIFSTOPPED(status));
    let options = libc::PTRACE_O_TRACESECCOMP
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_TRACESYSGOOD
        | libc::PTRACE_O_EXITKILL;
    unsafe {
        assert_eq!(
            libc::ptrace(libc::PTRACE_SEIZE, pid, 0, options as libc::c_ulong),
            0
        );
        libc::kill(pid, libc::SIGCONT);
    }

    let mut run = Run {
        stops: Vec::new(),
        exec_events: 0,
        exit_code: -1,
    };
    loop {
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        assert_eq!(r, pid);
        if libc::WIFEXITED(status) {
            run.exit_code = libc::WEXITSTATUS(status);
            break;
        }
        assert!(
            !libc::WIFSIGNALED(status),
            "fixture killed by signal {}",
            libc::WTERMSIG(status)
        );
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        let mut deliver = 0;
        match event {
            libc::PTRACE_EVENT_SECCOMP => run.stops.push(seccomp_stop(pid)),
            libc::PTRACE_EVENT_EXEC => run.exec_events += 1,
            libc::PTRACE_EVENT_STOP => {}
            0 if sig != libc::SIGSTOP => deliver = sig,
            _ => {}
        }
        unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, deliver as libc::c_ulong) };
    }
    run
}

fn seccomp_stop(pid: i32) -> Stop {
    let mut info: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GET_SYSCALL_INFO,
            pid,
            size,
            &mut info as *mut _,
        )
    };
    assert!(r > 0);
    assert_eq!(info.op, libc::PTRACE_SYSCALL_INFO_SECCOMP);
    let seccomp = unsafe { info.u.seccomp };
    Stop {
        arch: info.arch,
        nr: seccomp.nr,
        arg0: seccomp.args[0],
    }
}

fn getppid_set() {
    let filter = Filter::new([SYS_GETPPID]).unwrap();
    let run = trace(Some(&filter), "", 1000, 50);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.count(SYS_GETPPID), 1000);
    assert_eq!(run.count(SYS_EXECVE as u32), 1);
    assert_eq!(run.stops.len(), 1001, "unexpected stops: {:?}", run.stops);
    // The exec itself is the first stop.
    assert_eq!(run.stops[0].nr, SYS_EXECVE);
    assert_eq!(run.exec_events, 1);
}

fn empty_set() {
    let filter = Filter::new([]).unwrap();
    let run = trace(Some(&filter), "", 1000, 50);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.stops.len(), 1);
    assert_eq!(run.stops[0].nr, SYS_EXECVE);
    assert_eq!(run.exec_events, 1);
}

fn write_set() {
    let filter = Filter::new([SYS_WRITE]).unwrap();
    let run = trace(Some(&filter), "", 300, 64);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.count(SYS_GETPPID), 0);
    let fixture_writes = run
        .stops
        .iter()
        .filter(|s| s.nr == SYS_WRITE as u64 && s.arg0 == FIXTURE_FD as u64)
        .count();
    assert_eq!(fixture_writes, 64);
}

/// Whether the kernel's seccomp action cache can evaluate the program per
/// syscall number (kernel/seccomp.c seccomp_is_const_allow: loads of nr or
/// arch, ALU AND, JA, JEQ/JGE/JGT/JSET with constants, RET with constants).
fn cache_friendly(filter: &Filter) -> bool {
    const OK: [u16; 9] = [0x20, 0x54, 0x05, 0x15, 0x35, 0x25, 0x45, 0x06, 0x16];
    filter
        .program()
        .iter()
        .all(|i| OK.contains(&i.code) && (i.code != 0x20 || i.k == 0 || i.k == 4))
}

fn large_set() {
    // Every even number up to 460: 231 ranges, searched as a binary tree of
    // range tests, which the kernel's action cache understands.
    let evens: Vec<u32> = (0..=460).step_by(2).collect();
    let filter = Filter::new(evens.iter().copied()).unwrap();
    assert!(cache_friendly(&filter), "{filter}");
    assert!(
        filter.program().len() < 400,
        "{} instructions",
        filter.program().len()
    );
    let run = trace(Some(&filter), "", 200, 20);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.count(SYS_GETPPID), 200);
    assert!(
        run.stops
            .iter()
            .all(|s| s.nr % 2 == 0 || s.nr == SYS_EXECVE || s.nr == 322)
    );
    assert_eq!(run.count(SYS_WRITE), 0);

    // Numbers past the highest traced one are allowed: getppid (110) when
    // only 0..40 are traced.
    let small_evens: Vec<u32> = (0..=40).step_by(2).collect();
    let filter = Filter::new(small_evens).unwrap();
    let run = trace(Some(&filter), "high", 200, 20);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.count(SYS_GETPPID), 0);
    assert_eq!(run.count(SYS_CLOSE_RANGE), 0);
    assert!(
        run.stops
            .iter()
            .all(|s| s.nr % 2 == 0 && s.nr <= 40 || s.nr == SYS_EXECVE)
    );
    // ...and traced when asked for.
    let run = trace(Some(&Filter::new([SYS_CLOSE_RANGE]).unwrap()), "high", 0, 0);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.count(SYS_CLOSE_RANGE), 1);

    // More ranges than a search can jump over (1001 numbers): the bitmask
    // fallback, which still traces exactly the set.
    let wide: Vec<u32> = (0..=2000).step_by(2).collect();
    let filter = Filter::new(wide).unwrap();
    assert!(!cache_friendly(&filter), "expected the bitmask: {filter}");
    let run = trace(Some(&filter), "high", 200, 20);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.count(SYS_GETPPID), 200);
    assert_eq!(run.count(SYS_CLOSE_RANGE), 1);
    assert_eq!(run.count(SYS_WRITE), 0);

    // Everything but getppid: two ranges.
    let all_but: Vec<u32> = (0..=460).filter(|&n| n != SYS_GETPPID).collect();
    let filter = Filter::new(all_but).unwrap();
    assert!(
        filter.program().len() <= 12,
        "{} instructions",
        filter.program().len()
    );
    let run = trace(Some(&filter), "", 200, 20);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert_eq!(run.count(SYS_GETPPID), 0);
    assert_eq!(
        run.stops
            .iter()
            .filter(|s| s.nr == SYS_WRITE as u64 && s.arg0 == FIXTURE_FD as u64)
            .count(),
        20
    );
}

fn other_abis() {
    let filter = Filter::new([]).unwrap();
    let run = trace(Some(&filter), "i386,x32", 10, 0);
    assert_eq!(run.exit_code, FIXTURE_OK);
    let i386: Vec<_> = run
        .stops
        .iter()
        .filter(|s| s.arch == AUDIT_ARCH_I386)
        .collect();
    assert_eq!(i386.len(), 1, "{:?}", run.stops);
    assert_eq!(i386[0].nr, 20);
    let x32: Vec<_> = run
        .stops
        .iter()
        .filter(|s| s.nr == (0x4000_0000 | SYS_GETPID) as u64)
        .collect();
    assert_eq!(x32.len(), 1, "{:?}", run.stops);
    assert_eq!(run.stops.len(), 3);
}

fn unfiltered() {
    // Without a filter there are no seccomp stops at all, and the fixture
    // behaves the same as under the filters above.
    let run = trace(None, "", 100, 10);
    assert_eq!(run.exit_code, FIXTURE_OK);
    assert!(run.stops.is_empty());
    assert_eq!(run.exec_events, 1);
}

fn bad_numbers() {
    assert_eq!(
        Filter::new([0x4000_0000]).unwrap_err(),
        BuildError::BadSyscall(0x4000_0000)
    );
    assert_eq!(
        Filter::new([1, u32::MAX]).unwrap_err().to_string(),
        format!("no x86_64 syscall has number {}", u32::MAX)
    );
    // Large but valid numbers build (ranges keep the program short).
    let f = Filter::new([0x3fff_fffe, 0x3fff_ffff]).unwrap();
    assert!(f.program().len() < 16);
}

fn install_privileges() {
    // Run in a forked child so this process keeps no filter.
    let expect_nnp = needs_no_new_privs();
    let filter = Filter::new([SYS_GETPPID]).unwrap();
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match install(&filter) {
            Ok(Privileges::Kept) => 10,
            Ok(Privileges::NoNewPrivs) => 11,
            Err(_) => 12,
        };
        // No tracer: a traced syscall fails with ENOSYS, others work.
        let r = unsafe { libc::syscall(libc::SYS_getppid) };
        let errno = unsafe { *libc::__errno_location() };
        let ok = r == -1 && errno == libc::ENOSYS && unsafe { libc::getpid() } > 0;
        unsafe { libc::_exit(if ok { code } else { 13 }) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    let expected = if expect_nnp { 11 } else { 10 };
    assert_eq!(libc::WEXITSTATUS(status), expected);
}

fn disassembly() {
    // write (1), getppid..getpgrp (110-111), execve, execveat: 4 range tests.
    let filter = Filter::new([1, 110, 111]).unwrap();
    let expected = "\
0: ld [arch]
1: jeq #0xc000003e jt 1 jf 0
2: ret TRACE
3: ld [nr]
4: jge #0x40000000 jt 0 jf 1
5: ret TRACE
6: jeq #0x1 jt 5 jf 0
7: jeq #0x3b jt 4 jf 0
8: jge #0x6e jt 0 jf 1
9: jge #0x70 jt 0 jf 2
10: jeq #0x142 jt 1 jf 0
11: ret ALLOW
12: ret TRACE
";
    assert_eq!(filter.to_string(), expected);
}
