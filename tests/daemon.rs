//! `utap --daemon` (issue 17): several clients' sessions on one process.
//! Each test starts its own daemon on a socket in a fresh directory and
//! stops it at the end; the target is the `gate` fixture, which makes its
//! getppid calls only when the test says, so that every client is attached
//! first and the counts are exact.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use support::*;

/// getppid on x86_64.
const GETPPID: i32 = 110;

/// Calls per phase of the gate.
const CALLS: usize = 2000;

/// Counts getppid calls; says when it is attached.
fn counting() -> String {
    format!(
        r#"
global n
probe process.begin {{ println("attached") }}
probe process.syscall {{ if ($syscall == {GETPPID}) n++ }}
probe end {{ printf("getppid=%d\n", n) }}
"#
    )
}

/// A daemon on its own socket, stopped (SIGTERM) when dropped.
struct Daemon {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Daemon {
    fn start() -> Daemon {
        Daemon::start_with(false)
    }

    /// A daemon on the default socket of a fresh XDG_RUNTIME_DIR (its
    /// `dir`): pass the directory to clients as [`Daemon::users`].
    fn start_default() -> Daemon {
        Daemon::start_with(true)
    }

    fn start_with(default: bool) -> Daemon {
        static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("utap-daemon-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = command(utap_bin());
        c.arg("--daemon")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let socket = match default {
            true => {
                c.env("XDG_RUNTIME_DIR", &dir);
                dir.join("utap").join("utapd.sock")
            }
            false => {
                c.arg("--socket").arg(dir.join("utapd.sock"));
                dir.join("utapd.sock")
            }
        };
        let child = c.spawn().expect("start the daemon");
        let daemon = Daemon { child, dir, socket };
        wait_until("the daemon's socket", || {
            std::os::unix::net::UnixStream::connect(&daemon.socket).is_ok()
        });
        daemon
    }

    /// `cmd` as a user of the daemon started by [`Daemon::start_default`].
    fn users(&self, mut cmd: std::process::Command) -> std::process::Command {
        cmd.env("XDG_RUNTIME_DIR", &self.dir);
        cmd
    }

    fn socket(&self) -> String {
        self.socket.to_string_lossy().into_owned()
    }

    fn connect_arg(&self) -> String {
        format!("--connect={}", self.socket())
    }

    /// A client running `script` on `pid`.
    fn client(&self, script: &str, pid: i32, extra: &[&str]) -> Live {
        let connect = self.connect_arg();
        let pid = pid.to_string();
        let mut args = vec![connect.as_str(), "-x", pid.as_str()];
        args.extend_from_slice(extra);
        Live::spawn(utap(script, &args))
    }

    /// `utap --sessions`: the data lines, split into columns.
    fn sessions(&self) -> Vec<Vec<String>> {
        let out = run({
            let mut c = command(utap_bin());
            c.arg("--sessions").arg(self.connect_arg());
            c
        });
        assert_eq!(out.status, 0, "{}", out.stderr);
        let mut lines = out.stdout.lines();
        assert!(lines.next().unwrap().starts_with("ID\tPID\tTHREADS\tDROPS"));
        lines
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        signal(self.child.id() as i32, libc::SIGTERM);
        let _ = wait_within_limit(&mut self.child);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The gate fixture: a phase of getppid calls per line on its stdin.
struct Gate {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
}

impl Gate {
    fn start() -> Gate {
        let mut child = command(&fixture("gate"))
            .arg(CALLS.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gate");
        let stdin = child.stdin.take();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        Gate { child, stdin, out }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Runs one phase; returns what the gate printed ("done R").
    fn phase(&mut self) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    /// Ends the gate (end of its input); its exit status.
    fn close(&mut self) -> i32 {
        drop(self.stdin.take());
        wait_within_limit(&mut self.child).code().unwrap_or(-1)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The count a standalone utap gets for two phases.
fn standalone_count() -> String {
    let mut gate = Gate::start();
    let pid = gate.pid().to_string();
    let live = Live::spawn(utap(&counting(), &["--no-daemon", "-x", &pid]));
    assert_eq!(live.line(), "attached");
    gate.phase();
    gate.phase();
    assert_eq!(gate.close(), 0);
    let out = live.finish();
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.stdout
}

#[test]
fn two_clients_each_count_what_a_standalone_run_counts() {
    let expected = format!("attached\ngetppid={}\n", 2 * CALLS);
    assert_eq!(
        standalone_count(),
        format!("getppid={}\n", 2 * CALLS),
        "standalone"
    );
    let daemon = Daemon::start();
    let mut gate = Gate::start();
    let a = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(a.line(), "attached");
    let b = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(b.line(), "attached");
    let listed = daemon.sessions();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|s| s[1] == gate.pid().to_string()));
    gate.phase();
    gate.phase();
    assert_eq!(gate.close(), 0);
    for client in [a, b] {
        let out = client.finish();
        assert_eq!(out.stderr, "");
        assert_eq!(format!("attached\n{}", out.stdout), expected);
        assert_eq!(out.status, 0);
    }
    wait_until("no sessions left", || daemon.sessions().is_empty());
}

#[test]
fn a_client_killed_mid_trace_ends_only_its_session() {
    let daemon = Daemon::start();
    let mut gate = Gate::start();
    let a = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(a.line(), "attached");
    let b = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(b.line(), "attached");
    gate.phase();
    signal(a.pid(), libc::SIGKILL);
    let killed = a.finish();
    assert_eq!(killed.status, 128 + libc::SIGKILL);
    wait_until("A's session gone", || daemon.sessions().len() == 1);
    gate.phase();
    gate.phase();
    // B still traces; Ctrl-C ends it: end probes, then the gate is let go.
    signal(b.pid(), libc::SIGINT);
    let out = b.finish();
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, format!("getppid={}\n", 3 * CALLS));
    assert_eq!(out.status, 0);
    wait_until("no sessions left", || daemon.sessions().is_empty());
    assert_running_untraced(gate.pid());
    // Unharmed: it still answers, untraced, and exits normally.
    assert_eq!(gate.phase(), format!("done {}", std::process::id()));
    assert_eq!(gate.close(), 0);
}

/// Makes every getppid return 4242 without running it (guru).
const INJECT: &str = r#"
probe process.begin { println("attached") }
probe process.syscall { if ($syscall == 110) $return = 4242 }
"#;

#[test]
fn one_guru_session_per_process_and_observers_beside_it() {
    let daemon = Daemon::start();
    let mut gate = Gate::start();
    let guru = daemon.client(INJECT, gate.pid(), &["-g"]);
    assert_eq!(guru.line(), "attached");
    let observer = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(observer.line(), "attached");
    let second = daemon.client(INJECT, gate.pid(), &["-g"]);
    let refused = second.finish();
    assert_eq!(refused.status, 1);
    assert!(
        refused
            .stderr
            .contains("only one guru (-g) session per process"),
        "{}",
        refused.stderr
    );
    assert_eq!(gate.phase(), "done 4242");
    // The guru leaves; its change goes with it; the observer stays.
    signal(guru.pid(), libc::SIGINT);
    assert_eq!(guru.finish().status, 0);
    assert_eq!(gate.phase(), format!("done {}", std::process::id()));
    assert_eq!(gate.close(), 0);
    let out = observer.finish();
    // Engines see what the engines before them did (utrace): a call the
    // guru session skipped shows to the observer as syscall -1, so it
    // counts only the second phase's.
    assert_eq!(out.stdout, format!("getppid={CALLS}\n"));
    assert_eq!(out.status, 0);
}

/// 25 kB of output per getppid call.
const VERBOSE: &str = r#"
global s
probe process.begin { s = sprintf("%500d", 1); println("attached") }
probe process.syscall { if ($syscall == 110) for (i = 0; i < 50; i++) printf("%s\n", s) }
"#;

#[test]
fn a_client_that_never_reads_only_raises_its_own_drop_count() {
    let daemon = Daemon::start();
    let mut gate = Gate::start();
    // Its stdout is a pipe nobody reads: the client blocks writing it and
    // stops reading the socket; the daemon's ring for it fills.
    let mut silent = command(utap_bin());
    silent
        .arg(daemon.connect_arg())
        .args(["-s", "1", "-x", &gate.pid().to_string(), "-e", VERBOSE])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut silent = silent.spawn().unwrap();
    wait_until("the silent session", || daemon.sessions().len() == 1);
    let counter = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(counter.line(), "attached");
    for _ in 0..5 {
        gate.phase();
    }
    let listed = daemon.sessions();
    let drops: Vec<u64> = listed.iter().map(|s| s[3].parse().unwrap()).collect();
    assert!(drops[0] > 0, "the silent client's drops: {listed:?}");
    assert_eq!(drops[1], 0, "the reading client's drops: {listed:?}");
    let _ = silent.kill();
    let _ = silent.wait();
    assert_eq!(gate.close(), 0);
    let out = counter.finish();
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, format!("getppid={}\n", 5 * CALLS));
}

#[test]
fn a_client_of_another_user_is_refused() {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run a client as another user");
        return;
    }
    use std::os::unix::process::CommandExt;
    let runs = command(utap_bin())
        .arg("--version")
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !runs {
        eprintln!("skipped: uid 65534 cannot run {} here", utap_bin());
        return;
    }
    let daemon = Daemon::start();
    // Let anyone reach the socket: the daemon itself must refuse.
    use std::os::unix::fs::PermissionsExt;
    let open = std::fs::Permissions::from_mode(0o777);
    std::fs::set_permissions(&daemon.dir, open.clone()).unwrap();
    std::fs::set_permissions(daemon.socket(), open).unwrap();
    let mut c = command(utap_bin());
    c.arg("--sessions")
        .arg(daemon.connect_arg())
        .uid(65534)
        .gid(65534);
    let out = run(c);
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("serves only its own user (uid 0); uid 65534 was refused"),
        "{}",
        out.stderr
    );
}

#[test]
fn standalone_utap_on_a_process_the_daemon_traces_points_to_the_daemon() {
    let daemon = Daemon::start();
    let gate = Gate::start();
    let a = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(a.line(), "attached");
    let pid = gate.pid().to_string();
    let out = run(utap(&counting(), &["--no-daemon", "-x", &pid]));
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("utap --connect"), "{}", out.stderr);
    signal(a.pid(), libc::SIGTERM);
    assert_eq!(a.finish().status, 0);
    wait_until("no sessions left", || daemon.sessions().is_empty());
    assert_running_untraced(gate.pid());
}

#[test]
fn a_command_started_through_the_daemon_is_the_clients_and_can_be_shared() {
    let daemon = Daemon::start();
    let dir = daemon.dir.join("cwd");
    std::fs::create_dir_all(&dir).unwrap();
    // Counts the gate's calls only (not those of the shells before it).
    let script = format!(
        r#"
global n
probe process.begin {{ printf("attached %d\n", pid()) }}
probe process.syscall {{ if ($syscall == {GETPPID} && execname() == "gate") n++ }}
probe end {{ printf("getppid=%d\n", n) }}
"#
    );
    let cmd = format!(
        "sh -c 'echo \"$UTAP_TEST_VAR $PWD\"; exec {} {CALLS}'",
        fixture("gate")
    );
    let mut a = command(utap_bin())
        .arg(daemon.connect_arg())
        .args(["-e", &script, "-c", &cmd])
        .current_dir(&dir)
        .env("UTAP_TEST_VAR", "from-the-client")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = a.stdin.take();
    let mut out = BufReader::new(a.stdout.take().unwrap());
    let mut line = || {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        l.trim_end().to_string()
    };
    // The command's own output and the script's share the client's stdout.
    let mut first: Vec<String> = (0..3).map(|_| line()).collect();
    first.sort();
    let pid: i32 = first[0].strip_prefix("attached ").unwrap().parse().unwrap();
    assert_eq!(
        first,
        [
            format!("attached {pid}"),
            format!("from-the-client {}", dir.display()),
            "ready".to_string()
        ]
    );
    let b = daemon.client(&counting(), pid, &[]);
    assert_eq!(b.line(), "attached");
    let input = stdin.as_mut().unwrap();
    input.write_all(b"\n").unwrap();
    input.flush().unwrap();
    // Its parent is the daemon, which started it.
    assert_eq!(line(), format!("done {}", daemon.child.id()));
    drop(stdin.take());
    assert_eq!(line(), format!("getppid={CALLS}"));
    assert!(wait_within_limit(&mut a).success());
    let out = b.finish();
    assert_eq!(out.stdout, format!("getppid={CALLS}\n"));
    assert_eq!(out.status, 0);
}

/// Holds the thread at its first getppid (guru `stop()`), until its
/// session ends.
const HOLD: &str = r#"
global held
probe process.begin { println("attached") }
probe process.syscall { if ($syscall == 110 && !held) { held = 1; println("stopped"); stop() } }
probe end { println("end") }
"#;

#[test]
fn a_stop_from_one_session_holds_the_thread_until_that_session_lets_go() {
    let daemon = Daemon::start();
    let mut gate = Gate::start();
    let holder = daemon.client(HOLD, gate.pid(), &["-g"]);
    assert_eq!(holder.line(), "attached");
    let counter = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(counter.line(), "attached");
    let stdin = gate.stdin.as_mut().unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(holder.line(), "stopped");
    // The counter's engine says Resume; the holder's Stop prevails.
    wait_until("the held thread to be in a tracing stop", || {
        state(gate.pid()) == 't'
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(state(gate.pid()), 't');
    let listed = daemon.sessions();
    let id = &listed.iter().find(|s| s[5] == "guru").unwrap()[0];
    let out = run({
        let mut c = command(utap_bin());
        c.arg(daemon.connect_arg()).args(["--detach-session", id]);
        c
    });
    assert_eq!(out.status, 0, "{}", out.stderr);
    let held = holder.finish();
    assert_eq!(held.stdout, "end\n");
    assert_eq!(held.status, 0);
    // Let go: the phase completes, under the counter's eyes.
    let mut done = String::new();
    gate.out.read_line(&mut done).unwrap();
    assert_eq!(done, format!("done {}\n", std::process::id()));
    assert_eq!(gate.close(), 0);
    let out = counter.finish();
    assert_eq!(out.stdout, format!("getppid={CALLS}\n"));
    assert_eq!(out.status, 0);
}

#[test]
fn detaching_an_unknown_session_is_an_error() {
    let daemon = Daemon::start();
    let out = run({
        let mut c = command(utap_bin());
        c.arg(daemon.connect_arg()).args(["--detach-session", "99"]);
        c
    });
    assert_eq!(out.status, 1);
    assert_eq!(out.stderr, "utap: no session 99\n");
}

/// Fails at the first getppid: a runtime error ends the session.
const FAILING: &str = r#"
global zero
probe process.begin { println("attached") }
probe process.syscall { if ($syscall == 110) println(1 / zero) }
"#;

#[test]
fn a_runtime_error_ends_only_its_own_session() {
    let daemon = Daemon::start();
    let mut gate = Gate::start();
    let failing = daemon.client(FAILING, gate.pid(), &[]);
    assert_eq!(failing.line(), "attached");
    let counter = daemon.client(&counting(), gate.pid(), &[]);
    assert_eq!(counter.line(), "attached");
    gate.phase();
    let out = failing.finish();
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("ERROR: division by 0"),
        "{}",
        out.stderr
    );
    gate.phase();
    assert_eq!(gate.close(), 0);
    let out = counter.finish();
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, format!("getppid={}\n", 2 * CALLS));
    assert_eq!(out.status, 0);
}

#[test]
fn kill_9_of_the_daemon_leaves_its_command_running_untraced() {
    let daemon = Daemon::start();
    let script =
        "probe process.begin { if (pid() == target()) printf(\"target %d\\n\", target()) }";
    let cmd = format!("exec {} 2 >/dev/null 2>&1", fixture("sleeper"));
    let client = Live::spawn(utap(script, &[&daemon.connect_arg(), "-c", &cmd]));
    let pid: i32 = client
        .line()
        .strip_prefix("target ")
        .unwrap()
        .parse()
        .unwrap();
    wait_until("the command's threads", || threads(pid).len() == 3);
    signal(daemon.child.id() as i32, libc::SIGKILL);
    let out = client.finish();
    assert_eq!(out.status, 1);
    assert_eq!(
        out.stderr,
        "utap: the daemon ended the session without a result\n"
    );
    // Under no seccomp filter it needs no tracer. Before, it kept the
    // PTRACE_O_EXITKILL it was seized with, and died with the daemon.
    assert_settled_untraced(pid, " after kill -9 of the daemon");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(threads(pid).len(), 3, "the command lost threads");
    assert_running_untraced(pid);
    signal(pid, libc::SIGKILL);
}

#[test]
fn exit_status_through_the_daemon_is_the_commands() {
    let daemon = Daemon::start();
    let connect = daemon.connect_arg();
    let script = "probe process.begin { }";
    for (extra, cmd, status) in [
        (&[][..], "sh -c 'exit 3'", 0),
        (&["--exit-status"][..], "sh -c 'exit 3'", 3),
        (
            &["--exit-status"][..],
            "sh -c 'kill -TERM $$'",
            128 + libc::SIGTERM,
        ),
    ] {
        let mut args = vec![connect.as_str(), "-c", cmd];
        args.extend_from_slice(extra);
        let out = run(utap(script, &args));
        assert_eq!(
            (out.status, out.stderr.as_str()),
            (status, ""),
            "{extra:?} {cmd}"
        );
    }
}

/// Without XDG_RUNTIME_DIR the default socket is `$TMPDIR/utap-UID/`: a
/// fresh TMPDIR where someone planted a symbolic link at that name (to a
/// directory of ours with mode 0700, which passed every check before);
/// the link is another user's where the test can make it so (root).
struct Planted {
    tmp: PathBuf,
    link: PathBuf,
    target: PathBuf,
}

impl Planted {
    fn new() -> Planted {
        static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = std::env::temp_dir().join(format!("utap-planted-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let target = tmp.join("theirs");
        std::fs::create_dir_all(&target).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
        // SAFETY: getuid has no memory effects.
        let link = tmp.join(format!("utap-{}", unsafe { libc::getuid() }));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let _ = std::os::unix::fs::lchown(&link, Some(65534), Some(65534));
        Planted { tmp, link, target }
    }

    /// utap with TMPDIR here and no XDG_RUNTIME_DIR.
    fn utap(&self, args: &[&str]) -> std::process::Command {
        let mut c = command(utap_bin());
        c.args(args)
            .env("TMPDIR", &self.tmp)
            .env_remove("XDG_RUNTIME_DIR")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// The refusal, as daemon and client word it.
    fn refusal(&self) -> String {
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::symlink_metadata(&self.link).unwrap().uid();
        format!(
            "utap: refusing the daemon's directory: {} is a symbolic link of uid {owner} to {}, \
             not a directory: someone may have planted it to take the daemon's socket (remove \
             it, or set XDG_RUNTIME_DIR to a directory of yours)",
            self.link.display(),
            self.target.display()
        )
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

#[test]
fn the_daemon_refuses_a_planted_symbolic_link_for_its_directory() {
    let planted = Planted::new();
    let mut daemon = planted.utap(&["--daemon"]).spawn().unwrap();
    // Before, it followed the link and listened in the planted target.
    let socket = planted.target.join("utapd.sock");
    wait_until("the daemon to exit or listen", || {
        socket.exists() || daemon.try_wait().unwrap().is_some()
    });
    let _ = daemon.kill();
    let out = finish(daemon);
    assert_eq!(out.stderr, format!("{}\n", planted.refusal()));
    assert_eq!(out.status, 1);
    assert!(!socket.exists());
}

#[test]
fn clients_refuse_a_planted_symbolic_link_for_the_daemons_directory() {
    let planted = Planted::new();
    // Asked for a daemon: an error.
    for args in [&["--sessions"][..], &["--detach-session", "1"][..]] {
        let out = run(planted.utap(args));
        assert_eq!(out.stderr, format!("{}\n", planted.refusal()), "{args:?}");
        assert_eq!(out.status, 1, "{args:?}");
    }
    let gate = Gate::start();
    let pid = gate.pid().to_string();
    let script = "probe process.begin { println(\"attached\"); exit() }";
    let out = run(planted.utap(&["--connect", "-x", &pid, "-e", script]));
    assert_eq!(out.stderr, format!("{}\n", planted.refusal()));
    assert_eq!((out.status, out.stdout.as_str()), (1, ""));
    // -x uses a daemon only if one runs: it says why not, and traces alone.
    let out = run(planted.utap(&["-x", &pid, "-e", script]));
    assert_eq!(
        out.stderr,
        format!("{}; tracing without the daemon\n", planted.refusal())
    );
    assert_eq!((out.status, out.stdout.as_str()), (0, "attached\n"));
}

#[test]
fn the_daemon_refuses_a_directory_others_can_enter_or_own() {
    let planted = Planted::new();
    std::fs::remove_file(&planted.link).unwrap();
    std::fs::create_dir(&planted.link).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&planted.link, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(planted.utap(&["--daemon"]));
    assert_eq!(
        out.stderr,
        format!(
            "utap: refusing the daemon's directory: {} has mode 755: other users can reach the \
             daemon's socket (chmod 700 it)\n",
            planted.link.display()
        )
    );
    assert_eq!(out.status, 1);
    let out = run(planted.utap(&["--sessions"]));
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("has mode 755"), "{}", out.stderr);
    // Mode 0700 but another user's (only root can give it away).
    std::fs::set_permissions(&planted.link, std::fs::Permissions::from_mode(0o700)).unwrap();
    if std::os::unix::fs::lchown(&planted.link, Some(65534), None).is_err() {
        eprintln!("skipped the other owner's directory: needs root");
        return;
    }
    let out = run(planted.utap(&["--daemon"]));
    assert_eq!(
        out.stderr,
        format!(
            "utap: refusing the daemon's directory: {} belongs to uid 65534, not to you (uid \
             {}): its owner could take the daemon's socket (remove it, or set XDG_RUNTIME_DIR \
             to a directory of yours)\n",
            planted.link.display(),
            // SAFETY: getuid has no memory effects.
            unsafe { libc::getuid() }
        )
    );
    assert_eq!(out.status, 1);
}

/// Prints the parent of the target: the daemon, or utap's own tracing
/// process.
const PARENT: &str =
    "probe process.begin { if (pid() == target()) printf(\"parent %d\\n\", ppid()) }";

#[test]
fn a_running_daemon_serves_x_runs_and_leaves_c_runs_standalone() {
    let daemon = Daemon::start_default();
    let daemon_pid = daemon.child.id() as i32;
    // -c without --connect: standalone (before, the daemon took it over).
    let out = run(daemon.users(utap(PARENT, &["-c", "echo hello"])));
    assert_eq!((out.status, out.stderr.as_str()), (0, ""));
    let parent: i32 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("parent "))
        .unwrap_or_else(|| panic!("{}", out.stdout))
        .parse()
        .unwrap();
    assert_ne!(parent, daemon_pid, "the daemon ran the -c command");
    assert!(out.stdout.contains("hello\n"), "{}", out.stdout);
    // --connect: the daemon's.
    let out = run(daemon.users(utap(PARENT, &["--connect", "-c", "echo hello"])));
    // The command writes to the client's stdout itself, beside the script.
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["hello".to_string(), format!("parent {daemon_pid}")]);
    // -x: the daemon's when it runs, as docs/guide/daemon.md says.
    let gate = Gate::start();
    let x = Live::spawn(daemon.users(utap(&counting(), &["-x", &gate.pid().to_string()])));
    assert_eq!(x.line(), "attached");
    let listed = run({
        let mut c = command(utap_bin());
        c.arg("--sessions");
        daemon.users(c)
    });
    assert_eq!(listed.stdout.lines().count(), 2, "{}", listed.stdout);
    signal(x.pid(), libc::SIGINT);
    assert_eq!(x.finish().status, 0);
}

#[test]
fn a_command_through_connect_expands_in_the_clients_environment() {
    let daemon = Daemon::start();
    let connect = daemon.connect_arg();
    // The variable is the client's only.
    let mut c = utap(
        "probe process.begin { }",
        &[&connect, "-c", "$UTAP_CLIENT_ONLY from-the-client"],
    );
    c.env("UTAP_CLIENT_ONLY", "echo");
    let out = run(c);
    assert_eq!(out.stderr, "");
    assert_eq!((out.status, out.stdout.as_str()), (0, "from-the-client\n"));
    // An error is the client's, worded as standalone.
    let cmd = "$UTAP_UNDEFINED_VAR x";
    let alone = run(utap("probe process.begin { }", &["--no-daemon", "-c", cmd]));
    assert_eq!(
        alone.stderr,
        "utap: wordexp: undefined shell variable in -c COMMAND: $UTAP_UNDEFINED_VAR x\n"
    );
    let out = run(utap("probe process.begin { }", &[&connect, "-c", cmd]));
    assert_eq!(
        (out.status, out.stderr.as_str()),
        (1, alone.stderr.as_str())
    );
}

#[test]
fn an_attach_failure_reaches_the_client_worded_as_standalone() {
    let daemon = Daemon::start();
    let connect = daemon.connect_arg();
    // A pid without a process: a child of ours, reaped.
    let mut gone = command("true").spawn().unwrap();
    let gone_pid = gone.id().to_string();
    gone.wait().unwrap();
    // A process another (standalone) utap traces: EPERM.
    let gate = Gate::start();
    let traced_pid = gate.pid().to_string();
    let holder = Live::spawn(utap(&counting(), &["--no-daemon", "-x", &traced_pid]));
    assert_eq!(holder.line(), "attached");
    for (pid, why) in [
        (&gone_pid, "no such process"),
        (&traced_pid, "it is traced by another utap"),
    ] {
        let alone = run(utap(&counting(), &["--no-daemon", "-x", pid]));
        assert_eq!(alone.status, 1);
        assert!(
            alone
                .stderr
                .starts_with(&format!("utap: cannot attach to process {pid}: {why}")),
            "{}",
            alone.stderr
        );
        let through = run(utap(&counting(), &[&connect, "-x", pid]));
        assert_eq!(
            (through.status, through.stderr.as_str()),
            (1, alone.stderr.as_str())
        );
        assert_eq!(through.stdout, "");
    }
    signal(holder.pid(), libc::SIGINT);
    assert_eq!(holder.finish().status, 0);
}
