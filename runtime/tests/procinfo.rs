//! The per-thread info cache and cpu() against real children.

use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use utap_runtime::procinfo::{
    CpuSource, ProcCache, ProcInfo, current_cpu, gettimeofday_ms, gettimeofday_ns, gettimeofday_s,
    gettimeofday_us,
};

/// A forked child that runs `setup` (async-signal-safe calls only), then
/// stops under our ptrace (PTRACE_TRACEME + SIGSTOP).
struct Child {
    pid: i32,
}

impl Child {
    fn stopped(setup: impl FnOnce()) -> Child {
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
            setup();
            unsafe {
                libc::raise(libc::SIGSTOP);
                libc::_exit(0);
            }
        }
        let mut status = 0;
        assert_eq!(
            unsafe { libc::waitpid(pid, &mut status, libc::__WALL) },
            pid
        );
        assert!(libc::WIFSTOPPED(status), "child did not stop: {status:#x}");
        Child { pid }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, libc::__WALL);
        }
    }
}

fn ncpus() -> usize {
    std::thread::available_parallelism().unwrap().get()
}

#[test]
fn refresh_reads_names_parent_and_ids() {
    let child = Child::stopped(|| unsafe {
        libc::prctl(libc::PR_SET_NAME, c"utap (child) x".as_ptr());
        libc::setsid();
        // Distinct real and effective ids (gid first, while still root).
        if libc::setresgid(100, 200, 200) != 0 || libc::setresuid(1000, 2000, 2000) != 0 {
            libc::_exit(9);
        }
    });
    let our_comm = std::fs::read_to_string("/proc/self/comm")
        .unwrap()
        .trim_end()
        .to_string();
    let mut cache = ProcCache::new();
    assert_eq!(cache.get(child.pid), None);
    assert!(cache.refresh(child.pid));
    assert_eq!(
        cache.get(child.pid),
        Some(&ProcInfo {
            tgid: child.pid,
            execname: "utap (child) x".to_string(),
            ppid: std::process::id() as i32,
            pexecname: our_comm,
            pgrp: child.pid,
            sid: child.pid,
            uid: 1000,
            gid: 100,
            euid: 2000,
            egid: 200,
        })
    );
}

#[test]
fn exec_changes_execname_and_exit_forgets() {
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = sleeper.id() as i32;
    let mut cache = ProcCache::new();
    // Right after spawn the child may still be between fork and exec:
    // refresh until the name changes, as the tracer does at the exec event.
    let mut name = String::new();
    for _ in 0..1000 {
        assert!(cache.refresh(pid));
        name = cache.get(pid).unwrap().execname.clone();
        if name == "sleep" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(name, "sleep");
    let info = cache.get(pid).unwrap();
    assert_eq!(info.ppid, std::process::id() as i32);
    assert_eq!(info.tgid, pid);
    assert_eq!(info.uid, unsafe { libc::getuid() });
    assert_eq!(info.egid, unsafe { libc::getegid() });
    assert_eq!(info.pgrp, unsafe { libc::getpgrp() });
    assert_eq!(info.sid, unsafe { libc::getsid(0) });

    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // Reaped: refresh reports it and drops the stale entry.
    assert!(!cache.refresh(pid));
    assert_eq!(cache.get(pid), None);
    assert_eq!(cache.cpu_with_source(pid), (-1, CpuSource::Unknown));

    assert!(cache.refresh(std::process::id() as i32));
    cache.remove(std::process::id() as i32);
    assert_eq!(cache.get(std::process::id() as i32), None);
}

#[test]
fn cpu_of_a_stopped_tracee_comes_from_rseq_and_matches_proc() {
    for cpu in 0..ncpus() {
        let child = Child::stopped(|| unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                libc::_exit(9);
            }
            // Run a little on the new CPU so the kernel has updated rseq.
            for _ in 0..100 {
                libc::syscall(libc::SYS_getppid);
            }
        });
        let mut cache = ProcCache::new();
        assert!(cache.refresh(child.pid));
        assert_eq!(
            cache.cpu_with_source(child.pid),
            (cpu as i64, CpuSource::Rseq)
        );
        // Cached address, same answer; and an unrefreshed thread works too.
        assert_eq!(cache.cpu(child.pid), cpu as i64);
        assert_eq!(
            ProcCache::new().cpu_with_source(child.pid),
            (cpu as i64, CpuSource::Rseq)
        );
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.pid)).unwrap();
        let field39 = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .nth(36)
            .unwrap();
        assert_eq!(field39, cpu.to_string());
    }
}

#[test]
fn cpu_of_an_untraced_process_falls_back_to_proc() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id() as i32;
    let mut cache = ProcCache::new();
    let (cpu, source) = cache.cpu_with_source(pid);
    assert_eq!(source, CpuSource::ProcStat);
    assert!((0..ncpus() as i64).contains(&cpu));
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!((0..ncpus() as i64).contains(&current_cpu()));
}

#[test]
fn gettimeofday_family_agrees_with_the_system_clock() {
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let (s, ms, us, ns) = (
        gettimeofday_s(),
        gettimeofday_ms(),
        gettimeofday_us(),
        gettimeofday_ns(),
    );
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    assert!(before <= ns && ns <= after);
    assert!(before / 1_000_000_000 <= s && s <= after / 1_000_000_000);
    assert!(before / 1_000_000 <= ms && ms <= after / 1_000_000);
    assert!(before / 1_000 <= us && us <= after / 1_000);
    assert!(s <= ms / 1000 && ms <= us / 1000 && us <= ns / 1000);
}
