//! Helpers shared by the end-to-end session tests (strace oracle, attach,
//! guru control): running utap and the fixtures with a time limit, and
//! reading a process's state from /proc.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long any one utap run or wait may take before the test fails.
pub const LIMIT: Duration = Duration::from_secs(20);

/// The compiled fixture `name` (tests/fixtures/).
pub fn fixture(name: &str) -> String {
    format!("{}/{name}", env!("UTAP_FIXTURES"))
}

pub fn utap_bin() -> &'static str {
    env!("CARGO_BIN_EXE_utap")
}

/// A command without cargo's LD_LIBRARY_PATH (a traced program would
/// search every build directory for each library it loads).
pub fn command(program: &str) -> Command {
    let mut c = Command::new(program);
    c.env_remove("LD_LIBRARY_PATH");
    c.stdin(Stdio::null());
    c
}

/// `utap` with a script given as text (`-e`), its output piped.
pub fn utap(script: &str, args: &[&str]) -> Command {
    let mut c = command(utap_bin());
    c.args(args).arg("-e").arg(script);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// What a finished process left.
#[derive(Debug)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    /// The exit status, or 128+signal.
    pub status: i32,
}

/// Waits for `child` (its stdout and stderr piped) at most [`LIMIT`],
/// killing it then and failing the test.
pub fn finish(mut child: Child) -> Outcome {
    let out = child.stdout.take().expect("stdout piped");
    let err = child.stderr.take().expect("stderr piped");
    let read = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Bytes, then text: output that is not UTF-8 (a program's raw
            // bytes printed) is compared with U+FFFD in their place, not
            // lost whole.
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            let _ = tx.send(String::from_utf8_lossy(&b).into_owned());
        });
        rx
    };
    let (t_out, t_err) = (read(Box::new(out)), read(Box::new(err)));
    let status = wait_within_limit(&mut child);
    // Whatever still holds the pipes after utap ended (a tracing process
    // or a command that outlived it, hung) fails the test, not hangs it.
    let text = |rx: std::sync::mpsc::Receiver<String>, what: &str| {
        rx.recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("{what} still open {LIMIT:?} after utap ended"))
    };
    use std::os::unix::process::ExitStatusExt;
    Outcome {
        stdout: text(t_out, "stdout"),
        stderr: text(t_err, "stderr"),
        status: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
    }
}

/// Runs `cmd` to the end.
pub fn run(mut cmd: Command) -> Outcome {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    finish(cmd.spawn().expect("spawn"))
}

/// A running fixture that is killed when dropped.
pub struct Running {
    pub child: Child,
}

impl Running {
    /// Starts fixture `name` with `args` and waits for its "ready" line.
    pub fn ready(name: &str, args: &[&str]) -> Running {
        let mut c = command(&fixture(name));
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = c.spawn().expect("spawn fixture");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        out.read_line(&mut line).expect("read ready");
        assert_eq!(line, "ready\n");
        Running { child }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether it has exited (and is reaped).
    pub fn exited(&mut self) -> Option<i32> {
        self.child
            .try_wait()
            .ok()
            .flatten()
            .map(|s| s.code().unwrap_or(-1))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of `field` in /proc/TID/status (e.g. "State", "TracerPid").
pub fn status_field(tid: i32, field: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// The state letter of a thread (R, S, t, T, Z...).
pub fn state(tid: i32) -> char {
    status_field(tid, "State")
        .and_then(|s| s.chars().next())
        .unwrap_or('?')
}

/// The threads of process `pid`.
pub fn threads(pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Asserts that every thread of `pid` runs untraced and is not stopped.
pub fn assert_running_untraced(pid: i32) {
    let tids = threads(pid);
    assert!(!tids.is_empty(), "process {pid} is gone");
    for tid in tids {
        let st = state(tid);
        assert!(
            st != 't' && st != 'T',
            "thread {tid} of {pid} is stopped ({st})"
        );
        assert_eq!(
            status_field(tid, "TracerPid").as_deref(),
            Some("0"),
            "thread {tid} of {pid} is still traced"
        );
    }
}

/// Threads come and go: asserts, once none of `pid`'s threads is traced
/// any more (a thread being detached when utap returned is let go at
/// once), that none of those there now is stopped. `when` ends the
/// message (e.g. " after 20 ms").
pub fn assert_settled_untraced(pid: i32, when: &str) {
    wait_until("every thread untraced", || {
        threads(pid)
            .iter()
            .all(|&t| matches!(status_field(t, "TracerPid").as_deref(), Some("0") | None))
    });
    for t in threads(pid) {
        let st = state(t);
        assert!(
            st != 't' && st != 'T',
            "thread {t} of {pid} is stopped ({st}){when}"
        );
    }
}

/// Whether strace is installed; says that the oracle test is skipped
/// when not.
pub fn strace_available() -> bool {
    if have("strace") {
        return true;
    }
    println!("strace is not installed: oracle test skipped");
    false
}

/// The `calls` column of a `strace -c` table per syscall name.
pub fn strace_c_counts(table: &str) -> std::collections::BTreeMap<String, u64> {
    table
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            // % time, seconds, usecs/call, calls, [errors,] syscall
            if cols.len() < 5 || !cols[0].contains('.') || cols.last() == Some(&"total") {
                return None;
            }
            Some((cols.last()?.to_string(), cols[3].parse().ok()?))
        })
        .collect()
}

/// `utap: N ptrace stops` of a `-v` run's stderr.
pub fn ptrace_stops(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("utap: ")?
                .strip_suffix(" ptrace stops")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no stop count in {stderr}"))
}

/// The numbers of the `-v` line of stderr that starts with `prefix`
/// (e.g. `"utap: returns: "`), in order; N of them or the test fails.
pub fn verbose_counts<const N: usize>(stderr: &str, prefix: &str) -> [u64; N] {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {stderr}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    nums.try_into().unwrap_or_else(|_| panic!("{line}"))
}

/// Waits until `cond` holds (at most [`LIMIT`]).
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LIMIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `program` can be run (e.g. strace).
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Sends `sig` to `pid`.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

/// A running utap whose stdout is read line by line as it comes.
pub struct Live {
    child: Option<Child>,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Live {
    /// Spawns `cmd` (its stdout and stderr piped).
    pub fn spawn(mut cmd: Command) -> Live {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn utap");
        let out = BufReader::new(child.stdout.take().expect("piped"));
        let mut err = child.stderr.take().expect("piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Live {
            child: Some(child),
            lines,
            stderr: Some(stderr),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// The next line of stdout (within [`LIMIT`]).
    pub fn line(&self) -> String {
        self.line_within(LIMIT)
    }

    /// The next line of stdout, within `limit`.
    pub fn line_within(&self, limit: Duration) -> String {
        self.lines
            .recv_timeout(limit)
            .unwrap_or_else(|e| panic!("no line from utap within {limit:?}: {e}"))
    }

    /// Waits for the end (within [`LIMIT`]): the rest of stdout, stderr,
    /// the status.
    pub fn finish(mut self) -> Outcome {
        let mut child = self.child.take().expect("running");
        let status = wait_within_limit(&mut child);
        let mut stdout = String::new();
        while let Ok(l) = self.lines.recv_timeout(LIMIT) {
            stdout.push_str(&l);
            stdout.push('\n');
        }
        use std::os::unix::process::ExitStatusExt;
        Outcome {
            stdout,
            stderr: self.stderr.take().unwrap().join().unwrap(),
            status: status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// CPU time (user + system, clock ticks) process `pid` has used.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which ends with the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the whole line.
    num(11) + num(12)
}

/// Process `pid` uses (almost) no CPU over 300 ms: a sleeping program that
/// is not spinning on failing syscalls.
pub fn assert_idle(pid: i32) {
    let before = cpu_ticks(pid);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let used = cpu_ticks(pid) - before;
    assert!(
        used < 10,
        "process {pid} used {used} ticks of CPU in 300 ms"
    );
}

/// Waits for `child` to end; kills it and fails the test if it takes
/// longer than [`LIMIT`].
pub fn wait_within_limit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("utap did not end within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether bpftrace runs here (root, BPF allowed, tracefs), for the tests
/// that take it as an oracle; says so when it does not.
pub fn bpftrace_usable() -> bool {
    let ok = Command::new("timeout")
        .args(["30", "bpftrace", "-e", "BEGIN { exit(); }"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: bpftrace is missing or cannot load BPF programs here (root, tracefs)");
    }
    ok
}

/// Every executable file mapping of `pid` holds the file's bytes, and
/// nothing of the data plane nor any anonymous executable page is mapped.
pub fn assert_text_as_on_disk(pid: i32) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(!maps.contains("utap-dataplane"), "{maps}");
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(
            f.len() < 6 || !f[1].contains('x') || f[5].starts_with('/') || f[5].starts_with('['),
            "an anonymous executable mapping is left: {line}"
        );
    }
    if let Some(differs) = text_differing_from_disk(pid) {
        panic!("{differs}");
    }
}

/// The first executable file mapping of `pid` whose bytes differ from its
/// file (an `int3` left at a probe site), said with the first differing
/// address and bytes; None when all are as on disk.
pub fn text_differing_from_disk(pid: i32) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
            continue;
        }
        let (lo, hi) = f[0].split_once('-').unwrap();
        let lo = u64::from_str_radix(lo, 16).unwrap();
        let hi = u64::from_str_radix(hi, 16).unwrap();
        let off = u64::from_str_radix(f[2], 16).unwrap();
        let mut live = vec![0u8; (hi - lo) as usize];
        mem.read_exact_at(&mut live, lo).ok()?;
        let file = std::fs::File::open(f[5]).unwrap();
        let len = file
            .metadata()
            .unwrap()
            .len()
            .saturating_sub(off)
            .min(hi - lo) as usize;
        let mut disk = vec![0u8; len];
        file.read_exact_at(&mut disk, off).unwrap();
        if let Some(i) = (0..len).find(|&i| live[i] != disk[i]) {
            return Some(format!(
                "{} differs from its file at {:#x}: {:#04x} instead of {:#04x}",
                f[5],
                lo + i as u64,
                live[i],
                disk[i]
            ));
        }
    }
    None
}

/// The ids of every process now in /proc.
pub fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A small xorshift generator of delays, seeded from the clock (the seed
/// is in every failure message, to replay a trial).
pub struct Delays(pub u64);

impl Default for Delays {
    fn default() -> Delays {
        Delays::new()
    }
}

impl Delays {
    pub fn new() -> Delays {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Delays(nanos | 1)
    }

    /// The next delay in 0..max_ms.
    pub fn next(&mut self, max_ms: u64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(self.0 % max_ms)
    }
}

/// Runs `script` with `-v` on the `-c` command `cmd`, in the program where
/// the route pass allows (`inproc`) or wholly in the tracer
/// (`UTAP_INPROC=0`): its status, its stdout lines sorted (a program's
/// own lines interleave with the script's as output is drained) and its
/// stderr.
pub fn on_route(script: &str, cmd: &str, inproc: bool) -> (i32, Vec<String>, String) {
    let mut c = utap(script, &["-v", "-c", cmd]);
    if !inproc {
        c.env("UTAP_INPROC", "0");
    }
    let o = run(c);
    let mut lines: Vec<String> = o.stdout.lines().map(String::from).collect();
    lines.sort();
    (o.status, lines, o.stderr)
}
