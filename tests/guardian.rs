//! The guardian (issue 29 point 1, runtime/src/guardian/): when utap's
//! tracing process dies by SIGKILL under `-x`, a process outside utap's
//! session puts back what only utap could undo (int3 bytes, return stubs,
//! USDT semaphores), and after a clean end it goes at once. Real programs,
//! real kills at random moments; the seed of each loop is in its failure
//! messages.
//!
//! What the guardian cannot save (docs/internals/guardian.md): a thread
//! stopped at one of our `int3`s at the moment of the kill gets its
//! SIGTRAP from the kernel at the release. Those deaths are counted and
//! printed (`--nocapture`), not asserted away; a site left as `int3`, a
//! thread left stopped or a death by any other signal is a failure.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// The guardian's hidden mode (runtime/src/guardian/mod.rs `MODE`).
const GUARDIAN: &str = "--utap-guardian-internal";

/// A temporary directory for one test's files.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("utap-guardian-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The pids of live guardians whose environment holds `marker`.
fn guardians(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for pid in pids() {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !cmdline.split(|&b| b == 0).any(|a| a == GUARDIAN.as_bytes()) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|v| v == marker.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// The first child of `parent` (the foreground's child is the tracing
/// process, runtime/src/host.rs), waiting up to `patience` for it.
fn child_of(parent: i32, patience: Duration) -> Option<i32> {
    let start = Instant::now();
    loop {
        for pid in pids() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 2..].split(' ').nth(1)?.parse::<i32>().ok());
            if ppid == Some(parent) {
                return Some(pid);
            }
        }
        if start.elapsed() > patience {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A fixture started with its stdout piped; its first line.
fn start(name: &str, args: &[&str]) -> (Child, String) {
    let mut c = command(&fixture(name));
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().expect("spawn fixture");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    child.stdout = Some(out.into_inner());
    (child, line)
}

/// How a traced program ended: Ok(its output) when it ran to its end
/// with status 0, Err(signal) when a signal killed it.
fn outcome(mut child: Child) -> Result<String, i32> {
    let mut rest = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut rest);
    let status = wait_within_limit(&mut child);
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => Err(sig),
        None => {
            assert_eq!(status.code(), Some(0), "{rest}");
            Ok(rest)
        }
    }
}

/// Whether any thread of `pid` is stopped (`t` or `T`).
fn stopped_thread(pid: i32) -> Option<(i32, char)> {
    threads(pid)
        .into_iter()
        .map(|t| (t, state(t)))
        .find(|&(_, st)| st == 't' || st == 'T')
}

/// What a trial saw after the kill.
#[derive(Debug, Default)]
struct Trial {
    /// A site left as utap wrote it 2 s after the kill.
    text_left: Option<String>,
    /// A thread left stopped 2 s after the kill.
    stopped: Option<(i32, char)>,
    /// The signal that killed the program, if one did.
    death: Option<i32>,
    /// The guardian's restore time, when it restored anything.
    restore_us: Option<u64>,
}

/// Waits (up to 2 s) for the program's text to be as on disk, no thread
/// stopped and no thread traced, or for the program to die.
fn settle(pid: i32, child: &mut Child) -> (Option<String>, Option<(i32, char)>) {
    let start = Instant::now();
    loop {
        let text = text_differing_from_disk(pid);
        let stopped = stopped_thread(pid);
        let traced = threads(pid)
            .iter()
            .any(|&t| !matches!(status_field(t, "TracerPid").as_deref(), Some("0") | None));
        let gone = child.try_wait().ok().flatten().is_some();
        if gone || (text.is_none() && stopped.is_none() && !traced) {
            return (None, None);
        }
        if start.elapsed() > Duration::from_secs(2) {
            return (text, stopped);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The µs of the guardian's "restored N sites in PID after utap died (T µs)".
fn restore_us(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let rest = l.strip_prefix("utap guardian: restored ")?;
        let t = rest.rsplit_once('(')?.1.strip_suffix(" µs)")?;
        t.parse().ok()
    })
}

/// Runs `utap -x PID` with `script` on the tracer route, its output to
/// files of `dir` (the guardian inherits its stderr), kills the tracing
/// process `delay` after `ready` says so, and watches the program.
fn kill_tracer_and_watch(
    dir: &std::path::Path,
    marker: &str,
    script: &str,
    pid: i32,
    child: &mut Child,
    ready: impl Fn(&std::path::Path) -> bool,
    delay: Duration,
) -> Trial {
    let (out, err) = (dir.join("out"), dir.join("err"));
    let mut c = utap(script, &["-x", &pid.to_string()]);
    c.env("UTAP_INPROC", "0").env(
        marker.split_once('=').unwrap().0,
        marker.split_once('=').unwrap().1,
    );
    c.stdout(std::fs::File::create(&out).unwrap());
    c.stderr(std::fs::File::create(&err).unwrap());
    let mut fg = c.spawn().expect("spawn utap");
    let t0 = Instant::now();
    while !ready(&out) && t0.elapsed() < LIMIT && fg.try_wait().ok().flatten().is_none() {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(delay);
    if let Some(host) = child_of(fg.id() as i32, Duration::from_secs(2)) {
        // SAFETY: kill(2) has no memory effects.
        unsafe { libc::kill(host, libc::SIGKILL) };
    }
    let _ = wait_within_limit(&mut fg);
    let (text_left, stopped) = settle(pid, child);
    wait_until("the guardian to go", || guardians(marker).is_empty());
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    Trial {
        text_left,
        stopped,
        death: None,
        restore_us: restore_us(&stderr),
    }
}

/// The figures of a loop of trials, printed (cargo test --nocapture
/// shows them), and the failures: a site left, a thread left stopped, a
/// death by another signal than our int3's SIGTRAP.
fn summary(name: &str, seed: u64, trials: &[Trial]) -> Vec<String> {
    let deaths = trials.iter().filter(|t| t.death.is_some()).count();
    let mut times: Vec<u64> = trials.iter().filter_map(|t| t.restore_us).collect();
    times.sort();
    println!(
        "{name}: seed {seed}, {} trials, {deaths} death(s) {:?}, {} restore(s), µs {:?}",
        trials.len(),
        trials.iter().filter_map(|t| t.death).collect::<Vec<_>>(),
        times.len(),
        times
    );
    trials
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            t.text_left.is_some()
                || t.stopped.is_some()
                || t.death.is_some_and(|s| s != libc::SIGTRAP)
        })
        .map(|(i, t)| format!("trial {i}: {t:?}"))
        .collect()
}

/// Under `-x`, an `exit()` from a timer ends the session normally: its
/// guardian, armed to be woken at the tracing thread's exit, goes within
/// 200 ms of utap's exit, and the program runs on to its end.
#[test]
fn the_guardian_goes_with_a_clean_end() {
    let exe = fixture("ticker");
    let (child, line) = start("ticker", &["5", "200"]);
    assert_eq!(line, "ready\n");
    let pid = child.id() as i32;
    let marker = format!("UTAP_GUARDIAN_TRIAL={}-clean", std::process::id());
    let script = format!(
        "global n\nprobe process(\"{exe}\").function(\"tick\") {{ n++ }}\n\
         probe process(\"{exe}\").function(\"tick\").return {{ n++ }}\n\
         probe timer.ms(200) {{ exit() }}\nprobe end {{ printf(\"%d\\n\", n > 0) }}"
    );
    let mut c = utap(&script, &["-v", "-x", &pid.to_string()]);
    c.env("UTAP_INPROC", "0");
    c.env(
        marker.split_once('=').unwrap().0,
        marker.split_once('=').unwrap().1,
    );
    // stderr to a file: the guardian inherits it, a pipe would wait for it.
    let dir = tempdir("clean");
    let err_file = dir.join("err");
    c.stderr(std::fs::File::create(&err_file).unwrap());
    c.stdout(std::fs::File::create(dir.join("out")).unwrap());
    let mut fg = c.spawn().unwrap();
    // From the foreground's exit: what the shell waits for.
    let status = wait_within_limit(&mut fg);
    let left = Instant::now();
    let err = std::fs::read_to_string(&err_file).unwrap();
    let stdout = std::fs::read_to_string(dir.join("out")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{err}");
    assert_eq!(stdout, "1\n", "{err}");
    assert!(err.contains("utap: guardian armed: pid "), "{err}");
    // Woken by the kernel at the tracing thread's exit (a robust futex),
    // before the tracees are let go: not by the pipe's EOF, which comes
    // with the last thread (runtime/src/guardian/death.rs).
    assert!(err.contains("'s exit\n"), "{err}");
    while !guardians(&marker).is_empty() {
        assert!(
            left.elapsed() < Duration::from_millis(200),
            "a guardian is left 200 ms after the end: {:?}",
            guardians(&marker)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(text_differing_from_disk(pid), None);
    let out = outcome(child).expect("the program runs on");
    assert_eq!(out, "done 40200 80400\n");
}

/// SIGKILL of the tracing process of `-x` sessions with a printing entry
/// probe and a return probe on the tracer route (int3 sites and return
/// stubs), at random moments 0–400 ms from utap's start (even trials,
/// attach included) or from the first hit (odd trials): within 2 s every
/// site is back, no thread is stopped, and the program runs on to its
/// correct end unless a thread was in its int3 stop at the kill (SIGTRAP,
/// counted, not asserted: under a load average of 600 most kills land
/// there, see docs/internals/guardian.md). Some program killed after a hit
/// runs on: without the guardian none does (the int3 stays, the next hit
/// kills it), which is how this test fails on a utap without one.
#[test]
fn sigkill_of_the_tracing_process_leaves_the_program_whole() {
    let exe = fixture("ticker");
    let script = format!(
        "probe process(\"{exe}\").function(\"tick\") {{ printf(\"hit %d\\n\", tid()) }}\n\
         probe process(\"{exe}\").function(\"tick\").return {{ }}"
    );
    let dir = tempdir("func");
    let mut delays = Delays::new();
    let seed = delays.0;
    let mut trials = Vec::new();
    for trial in 0..20 {
        let (mut child, line) = start("ticker", &["5", "200"]);
        assert_eq!(line, "ready\n");
        let pid = child.id() as i32;
        let marker = format!("UTAP_GUARDIAN_TRIAL={}-f{trial}", std::process::id());
        let after_hit = trial % 2 == 1;
        let ready = |out: &std::path::Path| {
            !after_hit || std::fs::read_to_string(out).is_ok_and(|s| s.contains("hit "))
        };
        let delay = delays.next(if after_hit { 200 } else { 400 });
        let mut t = kill_tracer_and_watch(&dir, &marker, &script, pid, &mut child, ready, delay);
        match outcome(child) {
            Ok(out) => assert_eq!(out, "done 40200 80400\n", "trial {trial}"),
            Err(sig) => t.death = Some(sig),
        }
        trials.push(t);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let bad = summary("function probes", seed, &trials);
    assert!(bad.is_empty(), "seed {seed}: {bad:#?}");
    let saved = trials
        .iter()
        .skip(1)
        .step_by(2)
        .filter(|t| t.death.is_none())
        .count();
    assert!(
        saved > 0,
        "seed {seed}: no program killed after a hit ran on: {trials:#?}"
    );
}

/// The 16-bit semaphore at `addr` of `pid`.
fn semaphore(pid: i32, addr: u64) -> Option<u16> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut b = [0u8; 2];
    mem.read_exact_at(&mut b, addr).ok()?;
    Some(u16::from_le_bytes(b))
}

/// SIGKILL of the tracing process of a `-x` session on a USDT marker with
/// a semaphore: the semaphore is back to 0 and the marker's byte restored
/// within 2 s, and the program runs on (or died in the int3 window);
/// some do run on (none without a guardian).
#[test]
fn sigkill_of_the_tracing_process_puts_back_a_usdt_semaphore() {
    let exe = fixture("usdt_sem");
    if !std::path::Path::new(&exe).exists() {
        eprintln!("skipped: usdt_sem fixture not built (install systemtap-sdt-dev)");
        return;
    }
    let script =
        format!("probe process(\"{exe}\").mark(\"beat\") {{ printf(\"beat %d\\n\", $arg1) }}");
    let dir = tempdir("usdt");
    let mut delays = Delays::new();
    let seed = delays.0;
    let mut trials = Vec::new();
    let mut failures = Vec::new();
    for trial in 0..12 {
        let (mut child, line) = start("usdt_sem", &["5", "200"]);
        let addr = line
            .strip_prefix("ready 0x")
            .and_then(|a| u64::from_str_radix(a.trim(), 16).ok())
            .unwrap_or_else(|| panic!("{line}"));
        let pid = child.id() as i32;
        assert_eq!(semaphore(pid, addr), Some(0), "before tracing");
        let marker = format!("UTAP_GUARDIAN_TRIAL={}-u{trial}", std::process::id());
        let ready =
            |out: &std::path::Path| std::fs::read_to_string(out).is_ok_and(|s| s.contains("beat "));
        let delay = delays.next(200);
        let mut t = kill_tracer_and_watch(&dir, &marker, &script, pid, &mut child, ready, delay);
        let sem = semaphore(pid, addr);
        if child.try_wait().ok().flatten().is_none() && sem != Some(0) {
            failures.push(format!("trial {trial}: semaphore {sem:?} after the kill"));
        }
        match outcome(child) {
            Ok(out) => assert_eq!(out, "done 200\n", "trial {trial}"),
            Err(sig) => t.death = Some(sig),
        }
        trials.push(t);
    }
    let _ = std::fs::remove_dir_all(&dir);
    failures.extend(summary("usdt marker", seed, &trials));
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
    let saved = trials.iter().filter(|t| t.death.is_none()).count();
    assert!(saved > 0, "seed {seed}: no program ran on: {trials:#?}");
}
