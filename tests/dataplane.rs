//! The data plane (issue 27): syscall probes whose handlers run inside the
//! traced program. Each test runs real programs and checks what the user
//! sees: exact counts (strace -f -c as the oracle), the same output on
//! both routes (UTAP_INPROC=0 keeps every probe in the tracer), the text
//! and maps of a program the session let go of, SystemTap's errors from a
//! handler that fails inside the program, and that the route was taken at
//! all (its `-v` counts).

mod support;

use std::collections::BTreeMap;

use support::*;

/// Counts every syscall by name: every probe runs in the program.
const COUNT: &str = "global c\nprobe syscall.* { c[name]++ }\n\
                     probe end { foreach (n in c+) printf(\"%s %d\\n\", n, c[n]) }";

fn utap_c(script: &str, cmd: &str, inproc: bool) -> Outcome {
    let mut c = utap(script, &["-v", "-c", cmd]);
    if !inproc {
        c.env("UTAP_INPROC", "0");
    }
    run(c)
}

fn counts_of(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| {
            let (n, c) = l.rsplit_once(' ')?;
            Some((n.to_string(), c.parse().ok()?))
        })
        .collect()
}

/// `[processes, failed, syscall sites, function entries, refused, moved]`
/// and `[served, skipped, invalid]` of a `-v` run.
fn plane_counts(stderr: &str) -> ([u64; 6], [u64; 3]) {
    let a = verbose_counts::<6>(stderr, "utap: data plane: ");
    let line = stderr
        .lines()
        .filter(|l| l.starts_with("utap: data plane: "))
        .nth(1)
        .unwrap_or_else(|| panic!("no second data plane line in {stderr}"));
    (a, verbose_counts::<3>(line, "utap: data plane: "))
}

/// strace's counts (the caller drops the calls that never return).
fn strace_counts(cmd: &[&str]) -> BTreeMap<String, u64> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("utap-dp-strace-{}-{run}", std::process::id());
    let out = std::env::temp_dir().join(name);
    let status = command("strace")
        .args(["-f", "-qq", "-c", "-o"])
        .arg(&out)
        .args(cmd)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run strace");
    assert!(status.success() || status.code().is_some());
    let table = std::fs::read_to_string(&out).expect("strace table");
    let _ = std::fs::remove_file(&out);
    strace_c_counts(&table)
}

/// In-process counts equal strace's on one thread, four threads (libc's
/// `syscall()`, another site shape) and a process tree with forks and an
/// exec; the hits were served in the program (few ptrace stops).
#[test]
fn counts_equal_strace_in_process() {
    if !strace_available() {
        return;
    }
    let loop_ = fixture("loop");
    let mtsys = fixture("mtsys");
    let forker = fixture("forker");
    let cases: [(&[&str], u64); 3] = [
        (&[&loop_, "20000"], 20_000),
        (&[&mtsys, "4", "20000"], 80_000),
        (&[&forker], 0),
    ];
    for (cmd, hot) in cases {
        let line = cmd.join(" ");
        let o = utap_c(COUNT, &line, true);
        assert_eq!(o.status, 0, "{line}: {}", o.stderr);
        let mut ours = counts_of(&o.stdout);
        let mut theirs = strace_counts(cmd);
        // strace tallies calls as they return: exit and exit_group never do.
        for c in ["exit", "exit_group"] {
            ours.remove(c);
            theirs.remove(c);
        }
        // How often threads wait on a futex depends on the schedule.
        if line.contains("mtsys") {
            ours.remove("futex");
            theirs.remove("futex");
        }
        // forker's wait4 may be restarted by SIGCHLD (strace_oracle.rs).
        if line.contains("forker") {
            let w = theirs.remove("wait4").unwrap_or(0);
            assert!((2..=3).contains(&w));
            assert_eq!(ours.remove("wait4"), Some(2), "{line}");
            // So may the second fork: a traced process gets the first
            // child's SIGCHLD even where it is ignored, and the kernel
            // enters the clone again; strace counts both entries, the
            // stub runs its hook once, before the syscall it restarts.
            let c = theirs.remove("clone").unwrap_or(0);
            assert!((2..=3).contains(&c), "{line}: strace counted {c} clones");
            assert_eq!(ours.remove("clone"), Some(2), "{line}");
        }
        assert_eq!(ours, theirs, "{line}: utap (left) and strace -f -c (right)");
        let ([processes, failed, sites, ..], [served, skipped, invalid]) = plane_counts(&o.stderr);
        assert!(
            processes >= 1 && failed == 0 && sites >= 1,
            "{line}: {}",
            o.stderr
        );
        assert_eq!((skipped, invalid), (0, 0), "{line}");
        assert!(
            served >= hot,
            "{line}: {served} served in process, {hot} hot calls"
        );
        assert!(
            ptrace_stops(&o.stderr) < 200,
            "{line}: the hot calls stopped: {}",
            o.stderr
        );
    }
}

/// glibc's `read` puts a 2-byte `xor %eax,%eax` before its `syscall`,
/// behind a `je` on the one-thread path and a stack load on the other:
/// both sites are patched with their run of instructions (the hot reads
/// make no ptrace stop), and the counts equal strace's, with one reading
/// thread and with four. The four start reading while the main thread
/// still makes the others, so a thread is often cloned while the region
/// is mapped: it must get a block all the same (3 of 10 runs crashed).
#[test]
fn reads_are_served_in_process_on_both_of_glibcs_paths() {
    if !strace_available() {
        return;
    }
    let reader = fixture("reader");
    for (threads, runs) in [("0", 1), ("4", 5)] {
        let cmd = [reader.as_str(), threads, "20000"];
        let line = cmd.join(" ");
        let theirs = strace_counts(&cmd).get("read").copied().unwrap_or(0);
        for _ in 0..runs {
            reads_in_process(&line, theirs, threads);
        }
    }
}

/// One run of `reads_are_served_in_process_on_both_of_glibcs_paths`:
/// `theirs` reads by strace's count.
fn reads_in_process(line: &str, theirs: u64, threads: &str) {
    let script = "global r\nprobe syscall.read { r++ }\n\
                  probe end { printf(\"read %d\\n\", r) }";
    let o = utap_c(script, line, true);
    assert_eq!(o.status, 0, "{line}: {}", o.stderr);
    let ours = counts_of(&o.stdout).get("read").copied().unwrap_or(0);
    assert_eq!(ours, theirs, "{line}: utap (left) and strace -f -c (right)");
    let hot = 20_000 * threads.parse::<u64>().unwrap().max(1);
    assert!(ours >= hot, "{line}: {ours} reads");
    let ([_, failed, sites, ..], [served, ..]) = plane_counts(&o.stderr);
    assert!(failed == 0 && sites >= 1, "{line}: {}", o.stderr);
    assert!(served >= hot, "{line}: {served} served, {hot} hot reads");
    assert!(
        ptrace_stops(&o.stderr) < 200,
        "{line}: the hot reads stopped: {}",
        o.stderr
    );
}

/// A top-like script: syscall probes count in the program, a timer
/// prints and deletes what they counted. The timer runs held (every
/// thread out of any handler, the region folded before and filled after),
/// so the syscall probes stay in the program (they went to the tracer
/// before), the intervals add up to strace's counts, a per-thread counter
/// and statistic reset by the timer lose nothing, and a key the timer
/// makes with `sprintf` (no literal of the compile) reaches the next fold.
#[test]
fn a_timer_that_prints_and_deletes_keeps_the_counts_in_the_program() {
    if !strace_available() {
        return;
    }
    let script = "global c, total, hits, ticks\n\
        probe syscall.* { c[name]++; total++; hits <<< 1 }\n\
        function dump() {\n\
          foreach (n in c) printf(\"c %s %d\\n\", n, c[n])\n\
          printf(\"total %d\\ncount %d\\n\", total, @count(hits))\n\
        }\n\
        probe timer.ms(2) {\n\
          ticks++; dump(); total = 0; delete hits; delete c\n\
          c[sprintf(\"reset%d\", ticks)] = ticks\n\
        }\n\
        probe end { dump(); printf(\"ticks %d\\n\", ticks) }";
    let mtsys = fixture("mtsys");
    let reader = fixture("reader");
    let cases: [(&[&str], u64); 2] = [
        (&[&mtsys, "4", "30000"], 120_000),
        (&[&reader, "4", "20000"], 80_000),
    ];
    for (cmd, hot) in cases {
        let line = cmd.join(" ");
        let o = utap_c(script, &line, true);
        assert_eq!(o.status, 0, "{line}: {}", o.stderr);
        assert!(
            o.stderr
                .contains("utap: 384 of 386 probe(s) run in the program"),
            "{line}: {}",
            o.stderr
        );
        let (mut ours, mut resets) = (BTreeMap::<String, u64>::new(), 0u64);
        let (mut total, mut count, mut ticks) = (0u64, 0u64, 0u64);
        for l in o.stdout.lines() {
            let w: Vec<&str> = l.split(' ').collect();
            match w[..] {
                ["c", n, v] if n.starts_with("reset") => {
                    assert_eq!(&n[5..], v, "{line}: {l}");
                    resets += 1;
                }
                ["c", n, v] => *ours.entry(n.to_string()).or_default() += v.parse::<u64>().unwrap(),
                ["total", v] => total += v.parse::<u64>().unwrap(),
                ["count", v] => count += v.parse::<u64>().unwrap(),
                ["ticks", v] => ticks = v.parse().unwrap(),
                _ => panic!("{line}: unexpected line {l}"),
            }
        }
        let all: u64 = ours.values().sum();
        assert_eq!((total, count), (all, all), "{line}: {}", o.stdout);
        assert!(ticks >= 1, "{line}: no tick: {}", o.stderr);
        assert_eq!(resets, ticks, "{line}: a key the timer made was lost");
        let mut theirs = strace_counts(cmd);
        for c in ["exit", "exit_group", "futex"] {
            ours.remove(c);
            theirs.remove(c);
        }
        assert_eq!(ours, theirs, "{line}: utap (left) and strace -f -c (right)");
        let (_, [served, ..]) = plane_counts(&o.stderr);
        assert!(served >= hot, "{line}: {served} served, {hot} hot calls");
        let held = format!("utap: data plane: {ticks} timer hit(s) ran with the program held");
        assert!(o.stderr.contains(&held), "{line}: {}", o.stderr);
        assert!(ptrace_stops(&o.stderr) < 300, "{line}: {}", o.stderr);
    }
}

/// Lines a timer prints while the program's handlers print keep the order
/// of the hits: the timer runs with every thread held, after what they
/// printed is written. Each `tick` shows the count of the last `hit`
/// line before it.
#[test]
fn a_timer_prints_in_order_with_the_program() {
    let script = "global n\nprobe syscall.getppid { n++; printf(\"hit %d\\n\", n) }\n\
                  probe timer.us(100) { printf(\"tick %d\\n\", n) }";
    let cmd = format!("{} 5000", fixture("loop"));
    let mut inner_ticks = 0;
    for _ in 0..20 {
        let o = utap_c(script, &cmd, true);
        assert_eq!(o.status, 0, "{}", o.stderr);
        assert!(
            o.stderr
                .contains("utap: 1 of 2 probe(s) run in the program"),
            "{}",
            o.stderr
        );
        let mut last = 0;
        for l in o.stdout.lines() {
            let (k, v) = l.split_once(' ').unwrap_or_else(|| panic!("line {l}"));
            let v: i64 = v.parse().unwrap();
            match k {
                "hit" => {
                    assert_eq!(v, last + 1, "hits out of order: {}", o.stdout);
                    last = v;
                }
                _ => {
                    assert_eq!(v, last, "a tick out of order with the hits: {}", o.stdout);
                    inner_ticks += (0 < v && v < 5000) as u32;
                }
            }
        }
        assert_eq!(last, 5000);
        if inner_ticks >= 3 {
            return;
        }
    }
    panic!("only {inner_ticks} ticks came while the program ran");
}

/// The same script gives the same output on both routes.
#[test]
fn both_routes_print_the_same() {
    let cmd = format!("{} 3000", fixture("loop"));
    // getppid is 110, write 1 on x86_64.
    let script = "global n, by\nprobe syscall.getppid, syscall.write { n++; by[$syscall] += 2 }\n\
                  probe syscall.write.return { by[-1] += $return }\n\
                  probe end { printf(\"%d %d %d %d\\n\", n, by[110], by[1], by[-1]) }";
    let inside = utap_c(script, &cmd, true);
    let tracer = utap_c(script, &cmd, false);
    assert_eq!(inside.status, 0, "{}", inside.stderr);
    assert_eq!(inside.stdout, "3047 6000 94 47\n");
    assert_eq!(inside.stdout, tracer.stdout);
    assert!(tracer.stderr.contains("utap: 0 of "), "{}", tracer.stderr);
}

/// A handler that fails inside the program fails as SystemTap's does, with
/// the tracer route's words, and utap exits 1.
#[test]
fn errors_in_the_program_are_systemtap_errors() {
    let cmd = format!("{} 3000", fixture("loop"));
    let cases = [
        (
            "global z, q\nprobe syscall.getppid { q = 10 / z }",
            "division by 0 near operator '/'",
        ),
        (
            "global a[3], k\nprobe syscall.getppid { a[k++] = 1 }",
            "Array overflow, check size limit (3)",
        ),
        (
            "global n, x\nfunction deep(k) { return k > 0 ? deep(k - 1) + 1 : 0 }\n\
             probe syscall.getppid { x = deep(n++) }",
            "MAXNESTING exceeded near identifier 'deep'",
        ),
        (
            "global x\nfunction w(k) { if (k == 0) return 1; return w(k - 1) + w(k - 1) }\n\
             probe syscall.getppid { x = w(9) }",
            "MAXACTION exceeded near keyword 'return'",
        ),
        (
            "global n\nprobe syscall.getppid { while (1) n++ }",
            "MAXACTION exceeded near keyword 'while'",
        ),
    ];
    for (script, want) in cases {
        let inside = utap_c(script, &cmd, true);
        let tracer = utap_c(script, &cmd, false);
        let error = |o: &Outcome| {
            // `-v` notes from the tracer thread may share the line.
            o.stderr
                .lines()
                .find_map(|l| l.find("ERROR: ").map(|at| l[at..].to_string()))
                .unwrap_or_else(|| panic!("no ERROR line in {}", o.stderr))
        };
        assert!(error(&inside).contains(want), "{}", inside.stderr);
        assert_eq!(error(&inside), error(&tracer));
        assert_eq!((inside.status, tracer.status), (1, 1));
        assert!(
            inside
                .stderr
                .contains("utap: 1 of 1 probe(s) run in the program")
        );
    }
}

/// The pid of the running fixture whose command line is exactly `argv`.
fn pid_of(argv: &[&str]) -> Option<i32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        (std::fs::read(format!("/proc/{pid}/cmdline")).ok()? == want).then_some(pid)
    })
}

/// When the script ends before the program (the time limit), the
/// program runs on with its text and maps as on disk: sites restored,
/// stubs and region unmapped; the count was folded back. (A timer that
/// reads the count would keep the syscall probe in the tracer, with it.)
#[test]
fn a_program_let_go_has_its_text_back() {
    let loop_ = fixture("loop");
    let argv = [loop_.as_str(), "400000017"];
    let script = "global n\nprobe syscall.getppid { n++ }\n\
                  probe end { printf(\"%d\\n\", n > 1000) }";
    // The tracing process stays with the command (its seccomp filter needs
    // a tracer): read the output from files, not pipes it keeps open.
    let dir = std::env::temp_dir().join(format!("utap-dp-text-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, err) = (dir.join("out"), dir.join("err"));
    let mut c = utap(script, &["-v", "-T", "2", "-c", &argv.join(" ")]);
    c.stdout(std::fs::File::create(&out).unwrap());
    c.stderr(std::fs::File::create(&err).unwrap());
    let status = c.status().expect("run utap");
    let stdout = std::fs::read_to_string(&out).unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "1\n", "{stderr}");
    let ([_, _, sites, ..], [served, ..]) = plane_counts(&stderr);
    assert!(sites >= 1 && served > 1000, "in the program: {stderr}");
    let pid = pid_of(&argv).expect("the command runs on");
    // The region's munmap is a call injected at the entry code, whose
    // bytes are put back right after it returns: wait for both.
    wait_until("the data plane is taken out", || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| !m.contains("utap-dataplane"))
            && text_differing_from_disk(pid).is_none()
    });
    assert_text_as_on_disk(pid);
    signal(pid, libc::SIGKILL);
}

/// A `read` blocked in the stub's call when the session ends (glibc's
/// `read` site: a run of three instructions) is moved back to the site's
/// own `syscall` and restarted there once the text is restored: `cat` on
/// a FIFO, let go by the time limit while it waits in the region, reads
/// the line written after utap returned, its text and maps as on disk.
#[test]
fn a_read_blocked_in_a_stub_goes_on_after_the_end() {
    let dir = std::env::temp_dir().join(format!("utap-dp-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (fifo, out, err) = (dir.join("fifo"), dir.join("out"), dir.join("err"));
    let c_fifo = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a path we own, as a C string.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap().to_string();
    let out = out.to_str().unwrap().to_string();
    let script = "global n\nprobe syscall.read { n++ }";
    let cmd = format!("sh -c 'exec cat {fifo} > {out}'");
    let mut c = utap(script, &["-v", "-T", "3", "-c", &cmd]);
    c.stdout(std::process::Stdio::null());
    c.stderr(std::fs::File::create(&err).unwrap());
    let mut child = c.spawn().expect("run utap");
    // Opening the writing end waits for cat to open the reading end.
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    use std::io::Write;
    w.write_all(b"one\n").unwrap();
    let pid = pid_of(&["cat", &fifo]).expect("cat runs");
    wait_until("cat waits in a read made by the region", || {
        blocked_in_region(pid)
    });
    let status = wait_within_limit(&mut child);
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "{stderr}");
    let ([.., moved], _) = plane_counts(&stderr);
    assert_eq!(moved, 1, "cat was moved out of the region: {stderr}");
    wait_until("the data plane is taken out", || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| !m.contains("utap-dataplane"))
    });
    assert_text_as_on_disk(pid);
    w.write_all(b"two\n").unwrap();
    drop(w);
    wait_until("cat ends", || pid_of(&["cat", &fifo]).is_none());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "one\ntwo\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether `pid` is in a `read` whose `syscall` lies in the data plane's
/// region (`/proc/PID/syscall`: the number, then the pc last).
fn blocked_in_region(pid: i32) -> bool {
    let Ok(call) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let fields: Vec<&str> = call.split_whitespace().collect();
    let pc = fields
        .last()
        .and_then(|p| u64::from_str_radix(p.trim_start_matches("0x"), 16).ok());
    let (Some(&"0"), Some(pc)) = (fields.first(), pc) else {
        return false;
    };
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter(|l| l.contains("utap-dataplane"))
        .any(|l| {
            let range = l.split_whitespace().next().unwrap_or("");
            let (a, b) = range.split_once('-').unwrap_or(("", ""));
            let (a, b) = (
                u64::from_str_radix(a, 16).unwrap_or(0),
                u64::from_str_radix(b, 16).unwrap_or(0),
            );
            (a..b).contains(&pc)
        })
}

/// A thousand threads (a hundred at a time) each get a block of their own
/// before their first instruction and lose nothing; two hundred processes
/// a shell forks and execs each get the region again.
#[test]
fn churn_and_forks_lose_nothing_in_process() {
    let script = "global n\nprobe syscall.getppid { n++ }\nprobe end { println(n) }";
    let threads = format!("{} 1000 100", fixture("threads"));
    let o = utap_c(script, &threads, true);
    assert_eq!((o.status, o.stdout.as_str()), (0, "1001\n"), "{}", o.stderr);
    let ([processes, failed, ..], [served, skipped, invalid]) = plane_counts(&o.stderr);
    assert_eq!(
        (processes, failed, skipped, invalid),
        (1, 0, 0, 0),
        "{}",
        o.stderr
    );
    assert!(served >= 1000, "{}", o.stderr);
    if !strace_available() {
        return;
    }
    let forks = ["/bin/sh", "-c", "for i in $(seq 200); do /bin/true; done"];
    let o = utap_c(COUNT, &format!("{} -c '{}'", forks[0], forks[2]), true);
    assert_eq!(o.status, 0, "{}", o.stderr);
    let mut ours = counts_of(&o.stdout);
    let mut theirs = strace_counts(&forks);
    for c in ["exit", "exit_group", "wait4", "rt_sigreturn"] {
        ours.remove(c);
        theirs.remove(c);
    }
    assert_eq!(ours, theirs, "utap (left) and strace -f -c (right)");
    let ([processes, failed, ..], _) = plane_counts(&o.stderr);
    assert!(processes > 200 && failed == 0, "{}", o.stderr);
}

/// Counts hot-function calls by thread, summed: the entry probe runs in
/// the program.
fn hot_script(path: &str) -> String {
    format!(
        "global n\nprobe process(\"{path}\").function(\"hot\") {{ n[tid()]++ }}\n\
         probe end {{ s = 0; foreach (t in n) s += n[t]; printf(\"%d\\n\", s) }}"
    )
}

/// A function's entry probe runs in the program: four threads hammering
/// it, and `$arg1`-keyed counts of another, print what the tracer's route
/// prints, exactly, with the hits served in the program (almost no ptrace
/// stops) from one patched entry each.
#[test]
fn function_entries_count_exactly_in_process() {
    let ufuncs = fixture("ufuncs");
    let by_arg = format!(
        "global a\nprobe process(\"{ufuncs}\").function(\"add\") {{ a[$arg1 % 5] += $arg2 }}\n\
         probe end {{ foreach (k+ in a) printf(\"%d %d\\n\", k, a[k]) }}"
    );
    let cases = [
        (
            hot_script(&ufuncs),
            format!("{ufuncs} threads 50000"),
            200_000,
        ),
        (by_arg, format!("{ufuncs} basic 30000"), 30_000),
    ];
    for (script, cmd, hits) in cases {
        let inproc = utap_c(&script, &cmd, true);
        let tracer = utap_c(&script, &cmd, false);
        assert_eq!(inproc.status, 0, "{cmd}: {}", inproc.stderr);
        assert_eq!(
            inproc.stdout, tracer.stdout,
            "{cmd}: in process (left), tracer"
        );
        let ([_, failed, _, entries, ..], [served, skipped, invalid]) =
            plane_counts(&inproc.stderr);
        assert_eq!((failed, skipped, invalid), (0, 0, 0), "{cmd}");
        assert!(entries >= 1 && served >= hits, "{cmd}: {}", inproc.stderr);
        assert!(
            ptrace_stops(&inproc.stderr) < 100,
            "{cmd}: {}",
            inproc.stderr
        );
    }
    let o = utap_c(
        &hot_script(&ufuncs),
        &format!("{ufuncs} threads 50000"),
        true,
    );
    // The program's own line, then the script's sum.
    assert_eq!(o.stdout, "hot 200000\n200000\n");
}

/// The globals a handler only adds to (`n++`, `s += $arg1`, `m -= 2`)
/// are counted in each thread's copy and folded before `end`: exact with
/// four threads hammering the entry, with what `begin` and the
/// declaration set, beside a global the handler also reads (kept on the
/// shared slot), and across fork and vfork (the vfork child's hits are
/// served at stops, in the tracer's block); the tracer's route prints the
/// same. `-v` says how many are counted per thread.
#[test]
fn globals_only_added_to_are_counted_per_thread_exactly() {
    let ufuncs = fixture("ufuncs");
    let counting = |func: &str| {
        format!(
            "global n = 5, m, s, r\nprobe begin {{ m = 100 }}\n\
             probe process(\"{ufuncs}\").function(\"{func}\") {{\n\
               n++; m -= 2; s += $arg1; r++; if (r < 0) println(r)\n}}\n\
             probe end {{ printf(\"%d %d %d %d\\n\", n, m, s, r) }}"
        )
    };
    // 4 threads x hot(0..49999); fork/vfork: add(0..1999) three times.
    let cases = [
        (
            counting("hot"),
            format!("{ufuncs} threads 50000"),
            200_000,
            4 * 1_249_975_000i64,
        ),
        (
            counting("add"),
            format!("{ufuncs} fork 2000"),
            6000,
            3 * 1_999_000,
        ),
        (
            counting("add"),
            format!("{ufuncs} vfork 2000"),
            6000,
            3 * 1_999_000,
        ),
    ];
    for (script, cmd, hits, sum) in cases {
        let want = format!("{} {} {sum} {hits}", 5 + hits, 100 - 2 * hits);
        let (a, b) = (utap_c(&script, &cmd, true), utap_c(&script, &cmd, false));
        assert_eq!(a.status, 0, "{cmd}: {}", a.stderr);
        // The script's line comes after the programs' own.
        let (ours, theirs) = (a.stdout.lines().last(), b.stdout.lines().last());
        assert_eq!(ours, Some(want.as_str()), "{cmd}: {}", a.stdout);
        assert_eq!(ours, theirs, "{cmd}: in process (left), tracer");
        assert!(
            a.stderr
                .contains("utap: data plane: 3 global(s) counted per thread"),
            "{cmd}: {}",
            a.stderr
        );
    }
}

/// A `-pg` build: `hot()`'s first bytes end with its mcount call, which
/// the stub emulates (the program's own return address pushed), so the
/// entry is patched, entry and return probes count exactly in the
/// program, and uftrace recording the same run (its mcount called from
/// our stub) counts every call too.
#[test]
fn an_mcount_call_at_the_entry_is_emulated() {
    let exe = fixture("hot_pg");
    let script = format!(
        "global n, s\nprobe process(\"{exe}\").function(\"hot\") {{ n++ }}\n\
         probe process(\"{exe}\").function(\"hot\").return {{ s += $return }}\n\
         probe end {{ printf(\"%d %d\\n\", n, s) }}"
    );
    // gmon.out goes to the working directory.
    let dir = std::env::temp_dir().join(format!("utap-pg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = utap(&script, &["-v", "-c", &format!("{exe} 30000")]);
    c.current_dir(&dir);
    let o = run(c);
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "450015000\n30000 450015000\n");
    let ([_, failed, _, entries, refused, _], [served, skipped, _]) = plane_counts(&o.stderr);
    assert_eq!(
        (failed, entries, refused, skipped),
        (0, 1, 0, 0),
        "{}",
        o.stderr
    );
    assert_eq!(served, 60_000, "{}", o.stderr);
    if have("uftrace") {
        let data = dir.join("uftrace.data");
        let rec = format!("uftrace record -d {} {exe} 3000", data.display());
        let mut c = utap(&script, &["-v", "-c", &rec]);
        c.current_dir(&dir);
        let o = run(c);
        assert_eq!(o.status, 0, "{}", o.stderr);
        assert!(o.stdout.ends_with("3000 4501500\n"), "{}", o.stdout);
        let report = command("uftrace")
            .args(["report", "-d"])
            .arg(&data)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&report.stdout);
        let calls = report
            .lines()
            .find(|l| l.split_whitespace().last() == Some("hot"))
            .and_then(|l| l.split_whitespace().rev().nth(1)?.parse::<u64>().ok());
        assert_eq!(calls, Some(3000), "{report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// fork (the child shares the patched entry), vfork (a child in the
/// parent's memory is served at stops) and exec (patched again): the
/// counts per process are the tracer route's.
#[test]
fn function_entries_across_fork_vfork_and_exec() {
    let ufuncs = fixture("ufuncs");
    let script = format!(
        "global n\nprobe process(\"{ufuncs}\").function(\"add\") {{ n[pid()]++ }}\n\
         probe end {{ foreach (p in n) println(n[p]) }}"
    );
    for mode in ["fork", "vfork"] {
        let cmd = format!("{ufuncs} {mode} 2000");
        // The script's lines (the programs print words too).
        let (a, b) = (utap_c(&script, &cmd, true), utap_c(&script, &cmd, false));
        assert_eq!(a.status, 0, "{mode}: {}", a.stderr);
        assert_eq!(
            numbers(&a),
            numbers(&b),
            "{mode}: in process (left), tracer"
        );
        assert_eq!(numbers(&a), ["2000", "4000"], "{mode}");
    }
}

/// Starts `ufuncs threads N` and waits until it runs its threads.
fn start_hot(n: &str) -> (std::process::Child, i32) {
    let child = command(&fixture("ufuncs"))
        .args(["threads", n])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start ufuncs");
    let pid = child.id() as i32;
    wait_until("the threads run", || threads(pid).len() >= 5);
    (child, pid)
}

/// `-x`: the entry is patched at attach; after SIGINT the program runs on
/// with its text and maps as on disk, and ends with the right answer.
#[test]
fn an_attached_program_let_go_has_its_text_back() {
    let ufuncs = fixture("ufuncs");
    let (child, pid) = start_hot("30000000");
    let mut u = utap(&hot_script(&ufuncs), &["-v", "-x", &pid.to_string()]);
    u.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let tracer = u.spawn().expect("start utap");
    wait_until("the entry is patched", || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| m.contains("utap-dataplane"))
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    signal(tracer.id() as i32, libc::SIGINT);
    let o = finish(tracer);
    assert_eq!(o.status, 0, "{}", o.stderr);
    let n: u64 = o.stdout.trim().parse().expect("a count");
    assert!(n > 0, "{}", o.stderr);
    let ([processes, failed, _, entries, ..], _) = plane_counts(&o.stderr);
    assert_eq!((processes, failed, entries), (1, 0, 1), "{}", o.stderr);
    assert_text_as_on_disk(pid);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hot 120000000\n");
}

/// SIGKILL of utap at random moments of an `-x` session with the entry
/// in the program, attach included: the program never traps or hangs and
/// ends with the right answer (the patched entry jumps into a region that
/// needs no tracer).
#[test]
fn sigkill_of_utap_never_harms_an_attached_program() {
    let ufuncs = fixture("ufuncs");
    let script = hot_script(&ufuncs);
    // 0 to 360 ms: attach, patching, and the program's hot loop.
    sigkill_trials(&script, "30000000", |trial| trial * 40);
}

/// Ten trials of `-x` with `script` on `ufuncs threads HOT`, utap's
/// foreground SIGKILLed `kill_at(trial)` ms in (the tracing process gets
/// SIGKILL too, as its parent-death signal): the program must finish
/// with the right answer.
fn sigkill_trials(script: &str, hot: &str, kill_at: impl Fn(u64) -> u64) {
    let want = format!("hot {}\n", 4 * hot.parse::<u64>().unwrap());
    let mut failed = Vec::new();
    for trial in 0..10u64 {
        let (child, pid) = start_hot(hot);
        let mut u = utap(script, &["-x", &pid.to_string()]);
        u.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut tracer = u.spawn().expect("start utap");
        std::thread::sleep(std::time::Duration::from_millis(kill_at(trial)));
        let _ = tracer.kill();
        let _ = tracer.wait();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || stdout != want {
            failed.push(format!("trial {trial}: {:?} {stdout:?}", out.status));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The same with a timer that runs held every 5 ms (threads interrupted,
/// let out of their handlers, the region emptied and filled): SIGKILL of
/// utap at any moment, a hold included, leaves the program to finish
/// with the right answer. A hold that single-stepped every thread found
/// in a handler left the trap flag set in a thread utap died stepping:
/// the program died of SIGTRAP in 10 of 10 trials.
#[test]
fn sigkill_of_utap_during_held_timers_never_harms_an_attached_program() {
    let ufuncs = fixture("ufuncs");
    let script = format!(
        "global n, s\nprobe process(\"{ufuncs}\").function(\"hot\") {{ n[tid()]++ }}\n\
         probe timer.ms(5) {{ foreach (t in n) s += n[t]; delete n }}"
    );
    sigkill_trials(&script, "10000000", |trial| 100 + trial * 30);
}

/// Ctrl-C during a session whose timer runs held every 5 ms (a hold
/// takes a while, so the signal often comes during one): the timer does
/// not run on with its loops interrupted (SystemTap's "interrupted"
/// error, exit 1, in every trial before), utap exits 0 and the program
/// ends with the right answer.
#[test]
fn sigint_during_held_timers_ends_cleanly() {
    let ufuncs = fixture("ufuncs");
    let script = format!(
        "global n, s\nprobe process(\"{ufuncs}\").function(\"hot\") {{ n[tid()]++ }}\n\
         probe timer.ms(5) {{ foreach (t in n) s += n[t]; delete n }}\n\
         probe end {{ foreach (t in n) s += n[t]; printf(\"%d\\n\", s > 0) }}"
    );
    for trial in 0..5u64 {
        // 0.55 s untraced: long enough to be seen running and attached
        // to on a loaded machine (10,000,000 calls, 0.14 s, were not).
        let (child, pid) = start_hot("40000000");
        let u = utap(&script, &["-x", &pid.to_string()])
            .spawn()
            .expect("start utap");
        std::thread::sleep(std::time::Duration::from_millis(200 + 40 * trial));
        // SAFETY: kill(2) has no memory effects.
        unsafe { libc::kill(u.id() as i32, libc::SIGINT) };
        let o = finish(u);
        assert_eq!(
            (o.status, o.stdout.as_str()),
            (0, "1\n"),
            "trial {trial}: {}",
            o.stderr
        );
        assert!(!o.stderr.contains("ERROR"), "trial {trial}: {}", o.stderr);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "trial {trial}: {:?}", out.status);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hot 160000000\n");
    }
}

/// The region's data part in `pid`'s memory: its first `len` bytes (the
/// header, the long slots, the tables) read through /proc.
fn region_data(pid: i32, len: usize) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let line = maps
        .lines()
        .find(|l| l.contains("utap-dataplane") && l.contains("rw-"))?;
    let start = u64::from_str_radix(line.split('-').next()?, 16).ok()?;
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    mem.seek(SeekFrom::Start(start)).ok()?;
    let mut b = vec![0u8; len];
    mem.read_exact(&mut b).ok()?;
    Some(b)
}

/// Each thread of `pid`: the CPU time it has run (ns, from schedstat) and
/// whether it sleeps (a thread asleep in a syscall is in no handler).
fn run_times(pid: i32) -> BTreeMap<i32, (u64, bool)> {
    let field = |tid: i32| -> Option<(u64, bool)> {
        let ns = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
        let state = stat.rsplit(')').next()?.split_whitespace().next()?;
        Some((ns.split_whitespace().next()?.parse().ok()?, state == "S"))
    };
    threads(pid)
        .into_iter()
        .filter_map(|t| Some((t, field(t)?)))
        .collect()
}

/// The session's stop word is on the tracing thread's robust futex list:
/// SIGKILL of the tracing process makes the kernel mark it, so every hook
/// left in the program stops at once and writes nothing of the region
/// (before, a dead session's hooks ran on, and a process forked after
/// utap's death raced its parent for one block: 80 times slower).
#[test]
fn a_dead_sessions_hooks_stop_at_once() {
    use utap_runtime::dataplane::layout::stopped;
    let ufuncs = fixture("ufuncs");
    let (mut child, pid) = start_hot("2000000000");
    let mut u = utap(&hot_script(&ufuncs), &["-x", &pid.to_string()]);
    u.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut fg = u.spawn().expect("start utap");
    wait_until("the region", || regions_in(pid) >= 1);
    let snap = || region_data(pid, 256 << 10).expect("read the region");
    let word = |b: &[u8]| u64::from_le_bytes(b[..8].try_into().unwrap());
    // Alive: the word holds the tracing thread's id, the hooks count.
    let mut before = snap();
    wait_until("a count", || {
        let now = snap();
        let moved = now[64..] != before[64..];
        before = now;
        moved
    });
    assert!(!stopped(word(&before)), "{:#x}", word(&before));
    let tracing = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", fg.id()))
        .expect("children of the foreground");
    let tracing: i32 = tracing.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: kill(2) has no memory effects.
    unsafe { libc::kill(tracing, libc::SIGKILL) };
    let _ = fg.kill();
    let _ = fg.wait();
    wait_until("the word marked", || stopped(word(&snap())));
    // Every thread of the tracing process gone (a tracer thread serving a
    // hit at a stop writes the region too).
    wait_until("the tracing process gone", || {
        !std::path::Path::new(&format!("/proc/{tracing}")).exists()
    });
    // A thread that had passed the test when the word was marked (or was
    // preempted or stopped inside a handler) finishes that one hit: wait
    // until every thread that can run has run a while since.
    let ran = run_times(pid);
    wait_until("each running thread ran on", || {
        let now = run_times(pid);
        ran.iter().all(|(t, &ns)| {
            now.get(t)
                .is_none_or(|&(n, sleeps)| sleeps || n > ns.0 + 1_000_000)
        })
    });
    let dead = snap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(snap() == dead, "a hook wrote the region after utap died");
    assert_eq!(word(&dead) & 0x7fff_ffff, 0x4000_0000, "FUTEX_OWNER_DIED");
    let _ = child.kill();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the program ran on until killed"
    );
}

/// Entry and return probes on the same functions, all in the program:
/// `$return` sums, a recursive function's returns, four threads, and a
/// longjmp out of probed frames (their returns never come, and the
/// shadow stack drops them) print what the tracer's route prints, with
/// the hits served in the program.
#[test]
fn function_returns_count_exactly_in_process() {
    let u = fixture("ufuncs");
    let basic = format!(
        "global e, r, s, f\nprobe process(\"{u}\").function(\"add\") {{ e++ }}\n\
         probe process(\"{u}\").function(\"add\").return {{ r++; s += $return + $arg2 }}\n\
         probe process(\"{u}\").function(\"fib\").return {{ f[$arg1] += $return }}\n\
         probe end {{ printf(\"%d %d %d\\n\", e, r, s); foreach (k+ in f) printf(\"%d %d\\n\", k, f[k]) }}"
    );
    let threads = format!(
        "global n, s\nprobe process(\"{u}\").function(\"hot\").return {{ n[tid()]++; s += $return - $arg1 }}\n\
         probe end {{ t = 0; foreach (k in n) t += n[k]; printf(\"%d %d\\n\", t, s) }}"
    );
    let longjmp = format!(
        "global e, r, j\nprobe process(\"{u}\").function(\"deep\") {{ e++ }}\n\
         probe process(\"{u}\").function(\"deep\").return {{ r++ }}\n\
         probe process(\"{u}\").function(\"jumper\").return {{ j += $return }}\n\
         probe end {{ printf(\"%d %d %d\\n\", e, r, j) }}"
    );
    let cases = [
        (basic, format!("{u} basic 20000"), "20000 20000 999950000\n"),
        (threads, format!("{u} threads 50000"), "200000 200000\n"),
        (longjmp, format!("{u} longjmp 5000"), "20000 0 35000\n"),
    ];
    for (script, cmd, want) in cases {
        let inproc = utap_c(&script, &cmd, true);
        let tracer = utap_c(&script, &cmd, false);
        assert_eq!(inproc.status, 0, "{cmd}: {}", inproc.stderr);
        assert_eq!(
            inproc.stdout, tracer.stdout,
            "{cmd}: in process (left), tracer"
        );
        assert!(inproc.stdout.contains(want), "{cmd}: {}", inproc.stdout);
        let ([_, failed, _, entries, refused, _], [_, skipped, invalid]) =
            plane_counts(&inproc.stderr);
        assert_eq!((failed, refused, skipped, invalid), (0, 0, 0, 0), "{cmd}");
        assert!(entries >= 1, "{cmd}: {}", inproc.stderr);
        assert!(
            ptrace_stops(&inproc.stderr) < 100,
            "{cmd}: {}",
            inproc.stderr
        );
    }
}

/// fork (the child's stack and shadow stack are copies, its returns come
/// through its own copy) and vfork: sums of `$return` per process are the
/// tracer route's.
#[test]
fn function_returns_across_fork_and_vfork() {
    let u = fixture("ufuncs");
    let script = format!(
        "global n\nprobe process(\"{u}\").function(\"add\").return {{ n[pid()] += $return }}\n\
         probe end {{ foreach (p in n) println(n[p]) }}"
    );
    for mode in ["fork", "vfork"] {
        let cmd = format!("{u} {mode} 2000");
        let inproc = utap_c(&script, &cmd, true);
        let tracer = utap_c(&script, &cmd, false);
        assert_eq!(inproc.status, 0, "{cmd}: {}", inproc.stderr);
        assert_eq!(
            numbers(&inproc),
            numbers(&tracer),
            "{cmd}: {}",
            inproc.stderr
        );
        assert_eq!(numbers(&inproc), ["3998000", "9995000"], "{cmd}");
    }
}

/// A session that ends while every thread is inside a function whose
/// return is hijacked (the threads' start routine): the real return
/// addresses are put back, the program runs on to the right answer with
/// its text and maps as on disk.
#[test]
fn pending_returns_are_put_back_when_the_session_ends() {
    let u = fixture("ufuncs");
    let dir = std::env::temp_dir().join(format!("utap-dp-ret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, prog) = (dir.join("out"), dir.join("prog"));
    let argv = [u.as_str(), "threads", "200000000"];
    let script = format!(
        "global n, w\nprobe process(\"{u}\").function(\"hot\") {{ n++ }}\n\
         probe process(\"{u}\").function(\"worker\").return {{ w++ }}\n\
         probe timer.ms(100) {{ if (n > 1000) exit() }}\n\
         probe end {{ printf(\"%d %d\\n\", n > 0, w) }}"
    );
    let cmd = format!("sh -c 'exec {} > {}'", argv.join(" "), prog.display());
    // The command keeps what utap's stderr was open: a file, not a pipe.
    let err = dir.join("err");
    let mut c = utap(&script, &["-v", "-o", out.to_str().unwrap(), "-c", &cmd]);
    c.stdout(std::process::Stdio::null());
    c.stderr(std::fs::File::create(&err).unwrap());
    let status = c.status().expect("run utap");
    let o = Outcome {
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        status: status.code().unwrap_or(-1),
    };
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "1 0\n", "{}", o.stderr);
    let Some(pid) = pid_of(&argv) else {
        panic!("the command was not let go: {}", o.stderr)
    };
    wait_until("the data plane is taken out", || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| !m.contains("utap-dataplane"))
    });
    assert_text_as_on_disk(pid);
    // The workers return through their real addresses: the program ends
    // with the right answer.
    wait_until("the program ends", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    });
    let printed = std::fs::read_to_string(&prog).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(printed, "hot 800000000\n", "{}", o.stderr);
}

/// SIGKILL of utap at random moments (0–300 ms after its region is
/// mapped) of `-x` sessions with entry and return probes in the program,
/// five sessions in a row on one program
/// (each later one finds the dead ones' patches, regions and pending
/// returns): the program never traps or hangs and ends with the right
/// answer.
#[test]
fn sigkill_of_utap_with_return_probes_never_harms_an_attached_program() {
    let ufuncs = fixture("ufuncs");
    let script = format!(
        "global n, s\nprobe process(\"{ufuncs}\").function(\"hot\") {{ n++ }}\n\
         probe process(\"{ufuncs}\").function(\"hot\").return {{ s += $return }}\n\
         probe end {{ printf(\"%d\\n\", n) }}"
    );
    let mut failed = Vec::new();
    for round in 0..4u64 {
        let (child, pid) = start_hot("20000000");
        for trial in 0..5u64 {
            let mut u = utap(&script, &["-x", &pid.to_string()]);
            u.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let regions = regions_in(pid);
            let mut tracer = u.spawn().expect("start utap");
            // Once this session's region is in (the attach's own window,
            // a thread inside an injected call, is issue 29's guardian's).
            wait_until("the region is mapped", || {
                regions_in(pid) > regions || tracer.try_wait().ok().flatten().is_some()
            });
            let ms = (round * 5 + trial) * 37 % 300;
            std::thread::sleep(std::time::Duration::from_millis(ms));
            let _ = tracer.kill();
            let _ = tracer.wait();
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || stdout != "hot 80000000\n" {
            failed.push(format!("round {round}: {:?} {stdout:?}", out.status));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// How many data-plane regions `pid` has mapped (a dead session's stay).
fn regions_in(pid: i32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).map_or(0, |m| {
        m.lines()
            .filter(|l| l.contains("utap-dataplane") && l.contains("r-x"))
            .count()
    })
}

/// The script's lines of a run whose programs print words too: the
/// numbers, sorted (processes end in any order).
fn numbers(o: &Outcome) -> Vec<String> {
    let mut l: Vec<String> = o
        .stdout
        .lines()
        .filter(|l| l.parse::<u64>().is_ok())
        .map(str::to_string)
        .collect();
    l.sort();
    l
}

/// `printf`, `print` and their `ln`/`d` forms run in the program: their
/// records come out formatted as the tracer's route prints them, in the
/// order they were made, before `end`'s output; `-v` counts them.
#[test]
fn prints_in_the_program_as_the_tracer_does() {
    let cmd = format!("{} 3000", fixture("loop"));
    // getppid is 110 on x86_64; loop writes 1 byte every 64th call.
    let script = "global n\n\
        probe syscall.getppid { if (++n % 1000 == 0) printf(\"%s %d|%-5d|%x|%c|%5s|\\n\", \"ppid\", n, $syscall, 255, 65, \"ab\") }\n\
        probe syscall.write { println(\"w\", $arg3); print(1, \"a\"); printdln(\",\", 1, \"x\", $arg3) }\n\
        probe syscall.write.return { printf(\"%*d.\\n\", 4, $return) }\n\
        probe end { println(\"end \", n) }";
    let inside = utap_c(script, &cmd, true);
    let tracer = utap_c(script, &cmd, false);
    assert_eq!(inside.status, 0, "{}", inside.stderr);
    assert_eq!(inside.stdout, tracer.stdout, "in process (left), tracer");
    let write = "w1\n1a1,x,1\n   1.\n";
    let ppid = |k: u64| format!("ppid {k}|110  |ff|A|   ab|\n");
    let mut want = String::new();
    for i in 0..3000u64 {
        if i % 64 == 0 {
            want += write;
        }
        if (i + 1) % 1000 == 0 {
            want += &ppid(i + 1);
        }
    }
    want += "end 3000\n";
    assert_eq!(inside.stdout, want);
    let line = inside
        .stderr
        .lines()
        .find(|l| l.contains("record(s) printed from the program"))
        .unwrap_or_else(|| panic!("no record line in {}", inside.stderr));
    assert_eq!(
        line,
        "utap: data plane: 191 record(s) printed from the program, 0 dropped (ring full), 0 lost (a string they print overwritten), 0 ring(s) with bad records"
    );
}

/// `-v -o FILE -c cmd`, in process or not: the file's text and the run.
fn utap_o(script: &str, cmd: &str, inproc: bool, tag: &str) -> (String, Outcome) {
    let path = std::env::temp_dir().join(format!("utap-dp-{tag}-{}-{inproc}", std::process::id()));
    let mut c = utap(script, &["-v", "-o", path.to_str().unwrap(), "-c", cmd]);
    if !inproc {
        c.env("UTAP_INPROC", "0");
    }
    let o = run(c);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    (text, o)
}

/// Function entry and return probes that print run in the program and
/// print what the tracer's route prints, in call order.
#[test]
fn function_probes_print_in_the_program() {
    let ufuncs = fixture("ufuncs");
    let script = format!(
        "probe process(\"{ufuncs}\").function(\"add\") {{ printf(\"add(%d, %d)\\n\", $arg1, $arg2) }}\n\
         probe process(\"{ufuncs}\").function(\"add\").return {{ println(\"= \", $return) }}"
    );
    let cmd = format!("{ufuncs} basic 300");
    let (inside, o) = utap_o(&script, &cmd, true, "fprint");
    let (tracer, _) = utap_o(&script, &cmd, false, "fprint");
    assert_eq!(o.status, 0, "{}", o.stderr);
    let want: String = (0..300)
        .map(|i| format!("add({i}, {})\n= {}\n", 2 * i, 3 * i))
        .collect();
    assert_eq!(inside, want, "{}", o.stderr);
    assert_eq!(tracer, want);
    assert!(
        o.stderr
            .contains("utap: data plane: 600 record(s) printed from the program, 0 dropped"),
        "{}",
        o.stderr
    );
    assert!(ptrace_stops(&o.stderr) < 100, "{}", o.stderr);
}

/// A thread printing faster than the tracer reads drops records when its
/// ring is full, never waits: every hit is either printed or counted in
/// the transport's warning at exit.
#[test]
fn a_full_output_ring_drops_and_counts() {
    let cmd = format!("{} 1000000", fixture("loop"));
    let script = "probe syscall.getppid { printf(\"%d\\n\", $syscall) }";
    let (text, o) = utap_o(script, &cmd, true, "drops");
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert!(text.lines().all(|l| l == "110"), "not all lines are 110");
    let dropped: u64 = o
        .stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("WARNING: There were ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert_eq!(
        text.lines().count() as u64 + dropped,
        1_000_000,
        "{}",
        o.stderr
    );
    let line = format!(", {dropped} dropped (ring full)");
    assert!(o.stderr.contains(&line), "{}", o.stderr);
}

/// The `gate` fixture (a round of getppid calls per line it reads; `args`:
/// the calls, and the threads making them), started and ready: the child,
/// its pid, its stdin and its stdout.
fn start_gate(
    args: &[&str],
) -> (
    std::process::Child,
    i32,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let mut child = command(&fixture("gate"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start gate");
    let stdin = child.stdin.take().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let pid = child.id() as i32;
    (child, pid, stdin, out)
}

/// One round of the gate: its "done" line.
fn gate_round(
    stdin: &mut std::process::ChildStdin,
    out: &mut std::io::BufReader<std::process::ChildStdout>,
) -> String {
    use std::io::{BufRead, Write};
    stdin.write_all(b"\n").unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line
}

/// What every gate round prints (the tests are its parent).
fn gate_done() -> String {
    format!("done {}\n", std::process::id())
}

/// Counts getppid and write by name.
const GATE_COUNT: &str = "global c\nprobe syscall.getppid, syscall.write { c[name]++ }\n\
                          probe end { foreach (n+ in c) printf(\"%s %d\\n\", n, c[n]) }";

/// One `-v -x` session of `GATE_COUNT` on a gate started with `args`:
/// waits for the region (the arming maps it), runs `rounds` rounds, ends
/// utap with SIGINT, checks the text is as on disk and that one more
/// round runs after (no SUD left: a call would trap with nobody to serve
/// it, or fault on the unmapped selector), and returns utap's outcome.
fn gate_session(args: &[&str], rounds: usize, sud: bool) -> Outcome {
    let (mut child, pid, mut stdin, mut out) = start_gate(args);
    let mut u = utap(GATE_COUNT, &["-v", "-x", &pid.to_string()]);
    if sud {
        u.env("UTAP_SUD", "1");
    }
    u.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let tracer = u.spawn().expect("start utap");
    // Armed: the region is mapped; else: traced, with no region.
    let ready = || match sud {
        true => regions_in(pid) > 0,
        false => traced(pid) && regions_in(pid) == 0,
    };
    let start = std::time::Instant::now();
    while !ready() && start.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if !ready() {
        signal(tracer.id() as i32, libc::SIGINT);
        panic!("not ready (sud {sud}): {}", finish(tracer).stderr);
    }
    for _ in 0..rounds {
        assert_eq!(gate_round(&mut stdin, &mut out), gate_done());
    }
    signal(tracer.id() as i32, libc::SIGINT);
    let o = finish(tracer);
    // utap returns to the shell after UTAP_DETACH_BUDGET_MS; the data plane
    // is taken out before the last thread is let go.
    assert_settled_untraced(pid, " after the session");
    assert_text_as_on_disk(pid);
    assert_eq!(gate_round(&mut stdin, &mut out), gate_done());
    drop(stdin);
    assert!(child.wait().unwrap().success());
    o
}

/// Whether `pid` has a tracer.
fn traced(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("TracerPid:") && l.split_whitespace().nth(1) != Some("0"))
    })
}

/// The `-v` figures of SUD: threads armed, left on PTRACE_SYSCALL.
fn armed(stderr: &str) -> (u64, u64) {
    let [armed, left, _] =
        verbose_counts::<3>(stderr, "utap: data plane: syscall user dispatch armed in ");
    (armed, left)
}

/// `-x` with syscall probes in the program and `UTAP_SUD=1`: the attached
/// threads are armed with Syscall User Dispatch (no seccomp filter can be taken out
/// of a running program), the sites its SIGSYS shows are patched, and
/// the counts are exact with a handful of ptrace stops; at the end the
/// program runs on with its text as on disk.
#[test]
fn attached_syscalls_are_served_through_dispatch() {
    let o = gate_session(&["100000"], 2, true);
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "getppid 200000\nwrite 2\n", "{}", o.stderr);
    assert_eq!(armed(&o.stderr), (1, 0), "{}", o.stderr);
    assert!(ptrace_stops(&o.stderr) < 200, "{}", o.stderr);
}

/// Without `UTAP_SUD=1` nothing is armed: `-x` syscall probes stay on
/// `PTRACE_SYSCALL` (a stop per call), exact as before.
#[test]
fn attached_syscalls_stay_on_ptrace_without_the_knob() {
    let o = gate_session(&["20000"], 2, false);
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "getppid 40000\nwrite 2\n", "{}", o.stderr);
    assert!(!o.stderr.contains("syscall user dispatch"), "{}", o.stderr);
    assert!(ptrace_stops(&o.stderr) >= 80000, "{}", o.stderr);
}

/// The hot USDT fixture (tests/fixtures/usdt/usdt_hot.c), or `None` with
/// a message when <sys/sdt.h> was missing at build time.
fn usdt_hot() -> Option<String> {
    let path = fixture("usdt_hot");
    if std::path::Path::new(&path).exists() {
        return Some(path);
    }
    eprintln!("skipped: usdt_hot fixture not built (install systemtap-sdt-dev)");
    None
}

/// Counts the `tick` marker's hits and sums its four arguments (a live
/// register, two the stub saves, a constant), as the fixture prints them.
fn ticks_script(exe: &str) -> String {
    format!(
        "global n, a, b, c, d\n\
         probe process(\"{exe}\").mark(\"tick\") {{ n++; a += $arg1; b += $arg2; c += $arg3; d += $arg4 }}\n\
         probe end {{ printf(\"ticks %d sums %d %d %d\\n\", n, a, b, c); printf(\"const %d\\n\", d) }}"
    )
}

/// What `usdt_hot THREADS N` prints: the hits and the sums of `i`,
/// `(int)-i` and `(unsigned char)(i + k)` over its threads `k`.
fn ticks_line(threads: i64, n: i64) -> String {
    let s1 = threads * (n * (n - 1) / 2);
    let s3: i64 = (0..threads)
        .map(|k| (0..n).map(|i| (i + k) & 0xff).sum::<i64>())
        .sum();
    format!("ticks {} sums {s1} {} {s3}", threads * n, -s1)
}

/// A USDT marker in a loop (its `nop` mid-function, the loop's branch
/// landing on it) runs its probe in the program: the count and the
/// argument sums from one and four threads are the fixture's own and the
/// tracer route's, the marker was patched (`-v`) and the hits took almost
/// no ptrace stops.
#[test]
fn markers_count_exactly_in_process() {
    let Some(exe) = usdt_hot() else { return };
    let script = ticks_script(&exe);
    for (threads, n) in [(1i64, 100_000i64), (4, 50_000)] {
        let cmd = format!("{exe} {threads} {n}");
        let inproc = utap_c(&script, &cmd, true);
        let tracer = utap_c(&script, &cmd, false);
        assert_eq!(inproc.status, 0, "{cmd}: {}", inproc.stderr);
        let line = ticks_line(threads, n);
        let want = format!("{line}\n{line}\nconst {}\n", -7 * threads * n);
        assert_eq!(inproc.stdout, want, "{cmd}: {}", inproc.stderr);
        assert_eq!(tracer.stdout, want, "{cmd}: the tracer's route");
        let ([_, failed, _, entries, ..], [served, skipped, invalid]) =
            plane_counts(&inproc.stderr);
        assert_eq!((failed, entries, skipped, invalid), (0, 1, 0, 0), "{cmd}");
        assert!(served >= (threads * n) as u64, "{cmd}: {}", inproc.stderr);
        assert!(
            inproc
                .stderr
                .contains("utap: data plane: 1 of the patched function entries are USDT markers"),
            "{cmd}: {}",
            inproc.stderr
        );
        assert!(
            inproc
                .stderr
                .contains("utap: 1 of 2 probe(s) run in the program"),
            "{cmd}: {}",
            inproc.stderr
        );
        assert!(
            ptrace_stops(&inproc.stderr) < 100,
            "{cmd}: {}",
            inproc.stderr
        );
    }
}

/// Marker probes that read an argument the note keeps at a symbol
/// (`-1@small(%rip)`, resolved with the module's bias) or in memory at a
/// register's address run in the program (the marker entry passes the
/// address, the handler reads it), and print the fixture's values.
#[test]
fn marker_arguments_in_memory_run_in_the_program() {
    let exe = fixture("usdt");
    if !std::path::Path::new(&exe).exists() {
        eprintln!("skipped: usdt fixture not built (install systemtap-sdt-dev)");
        return;
    }
    let sym = format!(
        "global s\nprobe process(\"{exe}\").mark(\"mixed\") {{ s += $arg1 }}\n\
         probe end {{ println(s) }}"
    );
    for (script, want) in [
        (sym.clone(), "-9\n"),
        (sym.replace("$arg1", "$arg2"), "60\n"),
    ] {
        let o = utap_c(&script, &exe, true);
        assert_eq!((o.status, o.stdout.as_str()), (0, want), "{}", o.stderr);
        assert!(
            o.stderr
                .contains("utap: 1 of 2 probe(s) run in the program"),
            "{}",
            o.stderr
        );
    }
}

/// Starts `usdt_hot 4 N 1000` (about N/1000 ms) and waits until its
/// threads run.
fn start_ticks(exe: &str, n: i64) -> (std::process::Child, i32) {
    let child = command(exe)
        .args(["4", &n.to_string(), "1000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start usdt_hot");
    let pid = child.id() as i32;
    wait_until("the threads run", || threads(pid).len() >= 5);
    (child, pid)
}

/// `-x` with the marker in the program: after SIGINT the program runs on
/// with its text and maps as on disk (the marker's bytes back, a thread
/// held in the displaced instructions moved out) and prints its exact
/// line; the script saw hits.
#[test]
fn an_attached_program_with_a_marker_let_go_has_its_text_back() {
    let Some(exe) = usdt_hot() else { return };
    let (child, pid) = start_ticks(&exe, 3_000_000);
    let mut u = utap(&ticks_script(&exe), &["-v", "-x", &pid.to_string()]);
    u.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let tracer = u.spawn().expect("start utap");
    wait_until("the marker is patched", || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| m.contains("utap-dataplane"))
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    signal(tracer.id() as i32, libc::SIGINT);
    let o = finish(tracer);
    assert_eq!(o.status, 0, "{}", o.stderr);
    let n: u64 = o
        .stdout
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count in {}", o.stdout));
    assert!(n > 0, "{}", o.stderr);
    let ([processes, failed, _, entries, ..], _) = plane_counts(&o.stderr);
    assert_eq!((processes, failed, entries), (1, 0, 1), "{}", o.stderr);
    assert_text_as_on_disk(pid);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let want = format!("{}\n", ticks_line(4, 3_000_000));
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

/// SIGKILL of utap at random moments of an `-x` session once the marker
/// is in the program (the attach's own window, a thread inside an
/// injected call, is issue 29's guardian's): the program never traps or
/// hangs and prints its exact line (the patched marker jumps into a
/// region that needs no tracer).
#[test]
fn sigkill_of_utap_never_harms_a_program_with_a_marker_in_process() {
    let Some(exe) = usdt_hot() else { return };
    let script = ticks_script(&exe);
    let want = format!("{}\n", ticks_line(4, 1_500_000));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.subsec_nanos() as u64 | 1);
    let mut failed = Vec::new();
    for trial in 0..10u64 {
        // 0 to 599 ms of the threads' loops with the marker patched.
        let r = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(trial.wrapping_mul(1442695040888963407));
        let ms = (r >> 33) % 600;
        let (child, pid) = start_ticks(&exe, 1_500_000);
        let mut u = utap(&script, &["-x", &pid.to_string()]);
        u.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut tracer = u.spawn().expect("start utap");
        wait_until("the region is mapped", || {
            regions_in(pid) > 0 || tracer.try_wait().ok().flatten().is_some()
        });
        std::thread::sleep(std::time::Duration::from_millis(ms));
        let _ = tracer.kill();
        let _ = tracer.wait();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || stdout != want {
            failed.push(format!(
                "trial {trial} ({ms} ms): {:?} {stdout:?}",
                out.status
            ));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Script functions (the script's and the tapsets') run in the program
/// when their bodies could: recursion, several calls, the same numbers
/// as on the tracer route.
#[test]
fn script_functions_run_in_the_program() {
    let cmd = format!("{} 3000", fixture("loop"));
    let script = "global n, r, by\n\
                  function fib(k) { if (k < 2) return k; return fib(k - 1) + fib(k - 2) }\n\
                  function deep(k) { return k > 0 ? deep(k - 1) + 1 : 0 }\n\
                  function note(k) { by[k % 3] += k }\n\
                  probe syscall.getppid { n++; r += fib(7) + deep(n % 8); note(n) }\n\
                  probe end { printf(\"%d %d %d %d %d\\n\", n, r, by[0], by[1], by[2]) }";
    let inside = utap_c(script, &cmd, true);
    let tracer = utap_c(script, &cmd, false);
    assert_eq!(inside.status, 0, "{}", inside.stderr);
    // fib(7) = 13; deep(k) = k, summing 0..7 over 375 rounds.
    assert_eq!(inside.stdout, "3000 49500 1501500 1499500 1500500\n");
    assert_eq!(inside.stdout, tracer.stdout);
    assert!(
        inside
            .stderr
            .contains("utap: 1 of 2 probe(s) run in the program"),
        "{}",
        inside.stderr
    );
}

/// The clock in the program (the time stamp counter, scaled by what the
/// tracer samples): an interval measured there with the tapset's
/// `local_clock_us()` is the program's sleep, the time of day is the
/// tracer's (`dataplane::clock`'s unit test bounds the difference
/// closely), and four threads never see their clock go back.
#[test]
fn the_clock_reads_in_the_program() {
    if let Err(why) = utap_runtime::dataplane::clock::usable() {
        eprintln!("skipped: {why}: clock reads stay in the tracer");
        return;
    }
    let slept = "global start, total, calls\n\
                 probe syscall.clock_nanosleep { start[tid()] = local_clock_us() }\n\
                 probe syscall.clock_nanosleep.return { total += local_clock_us() - start[tid()]; calls++ }\n\
                 probe end { printf(\"%d %d\\n\", calls, total) }";
    let o = utap_c(slept, "sleep 0.3", true);
    assert!(
        o.stderr
            .contains("utap: 2 of 3 probe(s) run in the program"),
        "{}",
        o.stderr
    );
    let (calls, total) = two_numbers(&o.stdout);
    assert_eq!(calls, 1, "{}", o.stdout);
    assert!(
        // Not less than the sleep; more when a loaded machine wakes the
        // program late.
        (300_000..1_000_000).contains(&total),
        "slept {total} µs: {}",
        o.stdout
    );

    // The last hit's time of day, read in the program, against the
    // tracer's in the end probe just after the program's exit.
    let day = "global t\nprobe syscall.getppid { t = gettimeofday_us() }\n\
               probe end { d = gettimeofday_us() - t; printf(\"%d\\n\", d >= 0 && d < 1000000) }";
    let o = utap_c(day, &format!("{} 200000", fixture("loop")), true);
    assert!(
        o.stderr
            .contains("utap: 1 of 2 probe(s) run in the program"),
        "{}",
        o.stderr
    );
    assert_eq!(o.stdout, "1\n", "{}", o.stderr);

    let monotonic = "global n, back, last\n\
                     probe syscall.getppid { t = local_clock_ns(); if (t < last[tid()]) back++; last[tid()] = t; n++ }\n\
                     probe end { printf(\"%d %d\\n\", n, back) }";
    let o = utap_c(monotonic, &format!("{} 4 50000", fixture("mtsys")), true);
    assert_eq!(o.stdout, "200000 0\n", "{}", o.stderr);
}

fn two_numbers(s: &str) -> (i64, i64) {
    let mut it = s.split_whitespace().map(|w| w.parse::<i64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// `foreach` over an array the program filled breaks ties in the order
/// the keys were first inserted, as on the tracer route (the fold keeps
/// each slot's insertion number).
#[test]
fn ties_sort_in_insertion_order_on_both_routes() {
    let script = "global c\nprobe syscall.* { c[name]++ }\n\
                  probe end { foreach (n in c- limit 12) printf(\"%s %d\\n\", n, c[n]) }";
    let cmd = format!("{} 5", fixture("loop"));
    let inside = utap_c(script, &cmd, true);
    let tracer = utap_c(script, &cmd, false);
    assert!(
        inside
            .stderr
            .contains("utap: 384 of 385 probe(s) run in the program"),
        "{}",
        inside.stderr
    );
    assert_eq!(inside.stdout.lines().count(), 12, "{}", inside.stdout);
    assert_eq!(inside.stdout, tracer.stdout);
}

/// `syscall_name()` and `errno_str()` answer in the program from their
/// tables (a literal per name), as the tracer's decoders answer.
#[test]
fn syscall_and_errno_names_are_looked_up_in_the_program() {
    let script = "global c, e\n\
                  probe process.syscall.return { c[syscall_name($syscall)]++; if ($return < 0) e[errno_str($return)]++ }\n\
                  probe end { foreach (n in c- limit 5) printf(\"%s %d\\n\", n, c[n]); foreach (n in e-) printf(\"%s %d\\n\", n, e[n]) }";
    let cmd = "ls /nonexistent-utap-test";
    let inside = utap_c(script, cmd, true);
    let tracer = utap_c(script, cmd, false);
    assert!(
        inside
            .stderr
            .contains("utap: 1 of 2 probe(s) run in the program"),
        "{}",
        inside.stderr
    );
    assert!(inside.stdout.contains("\nENOENT "), "{}", inside.stdout);
    assert!(
        inside.stdout.starts_with("openat ") || inside.stdout.starts_with("mmap "),
        "{}",
        inside.stdout
    );
    assert_eq!(inside.stdout, tracer.stdout);
}

/// `execname()` answers in the program from the name the tracer put in
/// each thread's block: as a key, compared with `==`/`!=`, printed (also
/// from a probe the tracer runs at a stop), across a shell that forks and
/// execs, the same on both routes.
#[test]
fn execname_answers_in_the_program() {
    let lp = fixture("loop");
    let script = "global c, mine, others\n\
                  probe syscall.getppid, syscall.read, syscall.write { c[execname(), name]++; if (execname() == \"loop\") mine++; if (execname() != \"loop\") others++ }\n\
                  probe syscall.exit_group { printf(\"bye %s\\n\", execname()) }\n\
                  probe end { foreach ([e, n] in c) printf(\"%s %s %d\\n\", e, n, c[e, n]); printf(\"loop %d others %d\\n\", mine, others) }";
    let cmd = format!("sh -c '{lp} 3000; {lp} 2000 | cat >/dev/null; echo done >/dev/null'");
    let inside = utap_c(script, &cmd, true);
    let tracer = utap_c(script, &cmd, false);
    assert_eq!(inside.status, 0, "{}", inside.stderr);
    assert!(
        inside
            .stderr
            .contains("utap: 4 of 5 probe(s) run in the program"),
        "{}",
        inside.stderr
    );
    let sorted = |s: &str| {
        let mut l: Vec<&str> = s.lines().collect();
        l.sort();
        l.join("\n")
    };
    let got = sorted(&inside.stdout);
    assert!(got.contains("loop getppid 5000\n"), "{got}");
    let loops: u64 = got
        .lines()
        .filter_map(|l| {
            l.strip_prefix("loop ")?
                .split_once(' ')?
                .1
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert!(got.contains(&format!("loop {loops} others ")), "{got}");
    assert!(
        got.contains("bye cat\n") && got.contains("bye sh\n"),
        "{got}"
    );
    assert_eq!(got, sorted(&tracer.stdout));
}

/// A handler that reads a global and writes it back with `=` stays in
/// the tracer, whose lock makes the two one step; in process another
/// thread could update it in between and an update would be lost (8
/// threads lost 15% of them before). `++` and elements keyed by `tid()`
/// stay in process, and all three count every call.
#[test]
fn updates_in_several_steps_stay_in_the_tracer() {
    let mtsys = fixture("mtsys");
    let script = "global c, d, start, seen\n\
                  probe syscall.getppid { if (execname() == \"mtsys\") c = c + 1 }\n\
                  probe syscall.getppid { if (execname() == \"mtsys\") d++ }\n\
                  probe syscall.getppid { if (execname() == \"mtsys\") { start[tid()] = 1; if (tid() in start) seen++; delete start[tid()] } }\n\
                  probe end { printf(\"%d %d %d\\n\", c, d, seen) }";
    let o = utap_c(script, &format!("{mtsys} 8 20000"), true);
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "160000 160000 160000\n", "{}", o.stderr);
    for why in [
        "utap: 2 of 4 probe(s) run in the program",
        "utap:   1 in the tracer (syscall.getppid...): reads global 'c' and writes it with = or delete",
    ] {
        assert!(o.stderr.contains(why), "no {why:?} in {}", o.stderr);
    }
}

/// A running maximum (`if (x > m) m = x`, of a scalar or an element)
/// runs in the program as one atomic step: four threads racing, each
/// hit's number from one atomic counter, leave the largest number, the
/// count of calls, on both routes.
#[test]
fn running_maxima_run_in_the_program() {
    let mtsys = fixture("mtsys");
    let script = "global seq, top, most\n\
                  probe syscall.getppid { if (execname() == \"mtsys\") { k = ++seq; if (k > top) top = k; if (most[1] < k) most[1] = k } }\n\
                  probe end { printf(\"%d %d %d\\n\", seq, top, most[1]) }";
    for inproc in [true, false] {
        let o = utap_c(script, &format!("{mtsys} 4 20000"), inproc);
        assert_eq!(o.status, 0, "{}", o.stderr);
        assert_eq!(o.stdout, "80000 80000 80000\n", "{}", o.stderr);
        let want = if inproc {
            "utap: 1 of 2 probe(s) run in the program"
        } else {
            "utap: 0 of 2"
        };
        assert!(o.stderr.contains(want), "{}", o.stderr);
    }
}

/// `@entry` in a syscall's return probe runs in the program: its entry
/// probe keeps the values per thread in arrays keyed by `tid()`, and a
/// return that finds none counts in a global. Four threads: every return
/// finds its own entry's time.
#[test]
fn entry_values_are_kept_in_the_program() {
    let mtsys = fixture("mtsys");
    let script = "global calls, bad\n\
                  probe syscall.getppid.return { if (execname() == \"mtsys\") { t = @entry(gettimeofday_ns()); if (!t || gettimeofday_ns() < t) bad++; calls++ } }\n\
                  probe end { printf(\"%d %d\\n\", calls, bad) }";
    let o = utap_c(script, &format!("{mtsys} 4 5000"), true);
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "20000 0\n", "{}", o.stderr);
    assert!(
        o.stderr
            .contains("utap: 2 of 3 probe(s) run in the program"),
        "{}",
        o.stderr
    );
}

/// `pp()` and `pn()` answer in the program (a literal per probe and
/// point): syscall probes through aliases and function probes by name and
/// by wildcard give the same keys and counts on both routes.
#[test]
fn probe_points_are_named_in_the_program() {
    let ufuncs = fixture("ufuncs");
    let lp = fixture("loop");
    let script = format!(
        "global c\n\
         probe syscall.getppid, syscall.write {{ c[pp(), pn()]++ }}\n\
         probe process(\"{ufuncs}\").function(\"add\"), process(\"{ufuncs}\").function(\"f*\") {{ c[pp(), pn()]++; if (pp() == pn()) c[\"same\", \"\"]++ }}\n\
         probe end {{ foreach ([a, b] in c) printf(\"%s | %s %d\\n\", a, b, c[a, b]) }}"
    );
    let cmd = format!("sh -c '{lp} 300; {ufuncs} basic 300'");
    let inside = utap_c(&script, &cmd, true);
    let tracer = utap_c(&script, &cmd, false);
    assert_eq!(inside.status, 0, "{}", inside.stderr);
    assert!(
        inside
            .stderr
            .contains("utap: 3 of 4 probe(s) run in the program"),
        "{}",
        inside.stderr
    );
    let sorted = |s: &str| {
        let mut l: Vec<&str> = s.lines().collect();
        l.sort();
        l.join("\n")
    };
    let got = sorted(&inside.stdout);
    assert!(got.contains(" | syscall.getppid 3"), "{got}");
    assert!(got.contains(".function(\"add\") 300\n"), "{got}");
    assert_eq!(got, sorted(&tracer.stdout));
}

/// `probefunc()` runs in the program where the point fixes it: a function
/// named without wildcards (entry or return; a pattern is expanded into
/// such points) and a syscall probe's kernel function, by number; the
/// output is the tracer's.
#[test]
fn probefunc_answers_in_the_program() {
    let ufuncs = fixture("ufuncs");
    let script = format!(
        "global c, s\n\
         probe process(\"{ufuncs}\").function(\"f*\"), process(\"{ufuncs}\").function(\"add\").return {{ c[probefunc()]++ }}\n\
         probe syscall.getppid, syscall.write.return {{ s[probefunc()]++ }}\n\
         probe end {{ foreach (k in c) printf(\"%s %d\\n\", k, c[k]); foreach (k in s) printf(\"%s %d\\n\", k, s[k]) }}"
    );
    let cmd = format!("{ufuncs} basic 30");
    let inside = utap_c(&script, &cmd, true);
    let tracer = utap_c(&script, &cmd, false);
    assert_eq!(inside.status, 0, "{}", inside.stderr);
    let ran = "utap: 4 of 5 probe(s) run in the program";
    assert!(
        inside.stderr.contains(ran),
        "all but end: {}",
        inside.stderr
    );
    for want in ["add 30\n", "fib ", "__x64_sys_write "] {
        assert!(inside.stdout.contains(want), "{want}: {}", inside.stdout);
    }
    assert_eq!(inside.stdout, tracer.stdout);
}

/// `while` and `for` loops with `break` and `continue` run in the program
/// (MAXACTION bounds them as in the tracer: see the errors test), with the
/// tracer's results.
#[test]
fn loops_run_in_the_program() {
    let script = "global s, n\n\
                  probe syscall.getppid { i = 0; t = 0; while (i < 10) { i++; if (i == 3) continue; t += i; if (i == 8) break }\n\
                  for (j = 0; j < 3; j++) t += j; s += t; n++ }\n\
                  probe end { printf(\"%d %d\\n\", n, s) }";
    let cmd = format!("{} 1000", fixture("loop"));
    let inside = utap_c(script, &cmd, true);
    let tracer = utap_c(script, &cmd, false);
    assert!(
        inside
            .stderr
            .contains("utap: 1 of 2 probe(s) run in the program"),
        "{}",
        inside.stderr
    );
    // 1+2+4+5+6+7+8 in the while, 0+1+2 in the for, each call.
    assert_eq!(inside.stdout, "1000 36000\n", "{}", inside.stderr);
    assert_eq!(inside.stdout, tracer.stdout);
}

/// Scripts that read the program's memory: `filename` (the tapset's
/// `user_string_quoted`), `user_string`, `user_string_n`, the values (0
/// where they cannot be read whole); and `retstr`, rendered by the tracer
/// from the number and result the handler kept.
const READS: [(&str, &str); 5] = [
    (
        "quoted",
        "probe syscall.openat { if (execname() == \"strpages\") printf(\"%s\\n\", filename) }",
    ),
    (
        "raw",
        "probe syscall.openat { if (execname() == \"strpages\") { s = user_string($arg2); printf(\"[%s] %d\\n\", s, $arg3) } }",
    ),
    (
        "n",
        "probe syscall.openat { if (execname() == \"strpages\") print(user_string_n($arg2, 4), \"\\n\") }",
    ),
    (
        "values",
        "probe syscall.openat { if (execname() == \"strpages\") printf(\"%d %d %d %d %d\\n\", \
         user_char($arg2), user_short($arg2), user_int($arg2), user_long($arg2), user_long($arg2 + 12)) }",
    ),
    (
        "retstr",
        "probe syscall.openat.return { if (execname() == \"strpages\") printf(\"%s = %s\\n\", name, retstr) }",
    ),
];

/// The outcome with the program's addresses (ASLR) made one.
fn without_addresses(o: &Outcome) -> String {
    let re = regex::Regex::new(r"0x7[0-9a-f]{11}|00007[0-9a-f]{11}").unwrap();
    let err: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| !l.starts_with("utap:") && !l.starts_with("Pass "))
        .collect();
    let text = format!("{}exit {}\n{}", o.stdout, o.status, err.join("\n"));
    re.replace_all(&text, "ADDR").into_owned()
}

/// Strings and values read in the program, at the edges of mapped memory
/// (a NUL on a page's last byte before an unmapped one, a string across
/// two pages, bytes to quote, a read that faults midway, a value that
/// runs into an unmapped page, a bad address), in two threads: what the tracer's route prints, to the byte, the same
/// SystemTap error where it stops (exit 1), and every hit served in the
/// program.
#[test]
fn strings_read_in_the_program_print_what_the_tracer_prints() {
    let cmd = format!("{} 2", fixture("strpages"));
    for (what, script) in READS {
        let ours = utap_c(script, &cmd, true);
        let theirs = utap_c(script, &cmd, false);
        assert!(
            ours.stderr
                .contains("utap: 1 of 1 probe(s) run in the program"),
            "{what}: {}",
            ours.stderr
        );
        let (_, [served, _, _]) = plane_counts(&ours.stderr);
        assert!(served >= 6, "{what}: {}", ours.stderr);
        assert_eq!(
            without_addresses(&ours),
            without_addresses(&theirs),
            "{what}"
        );
    }
    let quoted = utap_c(READS[0].1, &cmd, true);
    let want = "\"/nonexistent/edge\"\n\"/nonexistent/".to_string()
        + &"x".repeat(40)
        + "\"\n\"/nonexistent/t\\tn\\nq\\\"b\\\\\\377\"\nADDR\n0x1\n";
    assert!(
        without_addresses(&quoted).contains(&(want.clone() + &want)),
        "{}",
        quoted.stdout
    );
    let raw = utap_c(READS[1].1, &cmd, true);
    assert_eq!(raw.status, 1);
    assert!(
        raw.stdout
            .contains("[/nonexistent/edge] 0\n[/nonexistent/xxxx"),
        "{}",
        raw.stdout
    );
    assert!(
        without_addresses(&raw).contains(
            "ERROR: user string copy fault -14 at ADDR [man error::fault] near identifier 'user_string'"
        ),
        "{}",
        raw.stderr
    );
}

/// A bad pointer read in the program under `-x`: SystemTap's error, exit
/// 1, and the program runs on to its right answer, untraced.
#[test]
fn a_bad_pointer_read_in_the_program_leaves_an_attached_program_unharmed() {
    let (child, pid) = start_hot("30000000");
    let ufuncs = fixture("ufuncs");
    let script = format!(
        "probe process(\"{ufuncs}\").function(\"hot\") {{ printf(\"%s\\n\", user_string($arg1 * 0 + 1)) }}"
    );
    let o = run(utap(&script, &["-v", "-x", &pid.to_string()]));
    assert_eq!(o.status, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("utap: 1 of 1 probe(s) run in the program"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains(
            "ERROR: user string copy fault -14 at 0000000000000001 [man error::fault] near identifier 'user_string'"
        ),
        "{}",
        o.stderr
    );
    assert_running_untraced(pid);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hot 120000000\n");
}

/// A handler's error in the program while the command's only thread is
/// creating another: the error ends the script, the command (shepherded
/// under its filter) runs on and ends, and so does utap. Before, the
/// unmap of the region moved the creator past its clone event unread,
/// and the new thread stayed stopped for as long as the tracing process
/// lived, which waited for the command: a hang in 1 of 4 runs.
#[test]
fn an_error_as_a_thread_is_born_leaves_the_command_to_finish() {
    let cmd = format!("{} 2; echo finished", fixture("strpages"));
    for trial in 0..12 {
        let o = utap_c(READS[2].1, &format!("sh -c '{cmd}'"), true);
        assert_eq!(o.status, 1, "trial {trial}: {}", o.stderr);
        assert!(
            o.stderr.contains("user string copy fault"),
            "trial {trial}: {}",
            o.stderr
        );
        assert!(
            o.stdout.contains("finished\n"),
            "trial {trial}: {}",
            o.stdout
        );
    }
}

/// `probefunc()` at a wildcard's entry sites runs in the program: the
/// tracer writes each site's function name (a name handle) in its hook
/// list and the function entry copies it to the block; a site left on
/// its `int3` gets it from the tracer. Counts keyed by it are the ptrace
/// route's, libc's `str*`/`mem*` under `ls -lR` and every function of a
/// small program (some too short to patch) alike.
#[test]
fn probefunc_at_a_wildcards_sites_runs_in_the_program() {
    let exe = fixture("dwarf_O0");
    let mine = format!(
        "global calls\nprobe process(\"{exe}\").function(\"*\") {{ calls[probefunc()]++ }}\n\
         probe end {{ foreach (f in calls+) printf(\"%s %d\\n\", f, calls[f]) }}"
    );
    let tracer = utap_c(&mine, &exe, false);
    let inproc = utap_c(&mine, &exe, true);
    assert_eq!(inproc.status, 0, "{}", inproc.stderr);
    assert_eq!(tracer.stdout, inproc.stdout, "{}", inproc.stderr);
    for f in ["main 1", "add 1", "draw 1", "greet 1"] {
        assert!(
            inproc.stdout.lines().any(|l| l == f),
            "{f}: {}",
            inproc.stdout
        );
    }
    assert!(
        inproc
            .stderr
            .contains("utap: 1 of 2 probe(s) run in the program"),
        "{}",
        inproc.stderr
    );
    let ([_, _, _, patched, refused, _], _) = plane_counts(&inproc.stderr);
    assert!(patched > 0 && refused > 0, "{}", inproc.stderr);

    let libc = our_libc();
    let lib = format!(
        "global calls\nprobe process(\"{libc}\").function(\"str*\"), process(\"{libc}\").function(\"mem*\") {{ calls[probefunc()]++ }}\n\
         probe end {{ foreach (f in calls-) printf(\"%s %d\\n\", f, calls[f]) }}"
    );
    let cmd = "ls -lR /usr/include/linux";
    let own = |o: &Outcome| -> Vec<String> {
        o.stdout
            .lines()
            .filter(|l| {
                l.split(' ').count() == 2 && l.rsplit(' ').next().unwrap().parse::<u64>().is_ok()
            })
            .filter(|l| !l.starts_with("total "))
            .map(String::from)
            .collect()
    };
    let tracer = utap_c(&lib, cmd, false);
    let inproc = utap_c(&lib, cmd, true);
    assert_eq!(inproc.status, 0, "{}", inproc.stderr);
    assert_eq!(own(&tracer), own(&inproc), "{}", inproc.stderr);
    assert!(
        own(&inproc)
            .iter()
            .any(|l| l.starts_with("strlen ") || l.starts_with("memcpy ")),
        "{:?}",
        own(&inproc)
    );
    assert!(
        inproc
            .stderr
            .contains("utap: 1 of 2 probe(s) run in the program"),
        "{}",
        inproc.stderr
    );
}

/// Issue 28's real programs: with every libc function probed on entry
/// and return (in the program where the site can be patched, at an
/// `int3` elsewhere), `ls -lR`, `sort`, `bash -c`, `python3` and `perl`
/// print exactly what they print untraced.
#[test]
fn every_libc_function_probed_leaves_real_programs_output_unchanged() {
    let libc = our_libc();
    let script = format!(
        "global n, r\nprobe process(\"{libc}\").function(\"*\") {{ n++ }}\n\
         probe process(\"{libc}\").function(\"*\").return {{ r++ }}\n\
         probe end {{ printf(\"calls %d returns %d\\n\", n, r) }}"
    );
    let dir = std::env::temp_dir().join(format!("utap-libc-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let words = dir.join("words");
    let text: String = (0..2000)
        .map(|i| format!("w{}\n", (i * 7919) % 2003))
        .collect();
    std::fs::write(&words, text).unwrap();
    let words = words.to_str().unwrap().to_string();
    let commands = [
        "ls -lR /usr/include/linux".to_string(),
        format!("sort {words}"),
        "bash -c 'for i in 3 1 2; do echo $i; done | sort; echo done'".to_string(),
        // Debian's, not a version manager's shim (a shell script).
        "/usr/bin/python3 -c 'import json; print(json.dumps({\"s\": sum(range(100000))}))'"
            .to_string(),
        "perl -e 'print join(\",\", sort { $a <=> $b } map { $_ * 7 % 13 } 1..20), \"\\n\"'"
            .to_string(),
    ];
    for cmd in &commands {
        let program = cmd.split(' ').next().unwrap_or_default();
        if program.starts_with('/') && !std::path::Path::new(program).exists() {
            eprintln!("skipped {cmd}: no {program}");
            continue;
        }
        let plain = run({
            let mut c = command("sh");
            c.args(["-c", cmd]);
            c
        });
        assert_eq!(plain.status, 0, "{cmd}: {}", plain.stderr);
        let traced = utap_c(&script, cmd, true);
        assert_eq!(traced.status, 0, "{cmd}: {}", traced.stderr);
        let (own, tally): (Vec<&str>, Vec<&str>) = traced
            .stdout
            .lines()
            .partition(|l| !l.starts_with("calls "));
        let want: Vec<&str> = plain.stdout.lines().collect();
        assert_eq!(own, want, "{cmd}: {}", traced.stderr);
        assert_eq!(tally.len(), 1, "{cmd}: {}", traced.stdout);
        assert!(!tally[0].starts_with("calls 0 "), "{cmd}: {}", tally[0]);
        assert!(
            traced
                .stderr
                .contains("utap: 2 of 3 probe(s) run in the program"),
            "{cmd}: {}",
            traced.stderr
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The libc this test process maps (the one the programs it runs map).
fn our_libc() -> String {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
        .map(String::from)
        .expect("no libc in our own maps")
}
