//! `--metrics 127.0.0.1:0`: the script's numeric globals served at
//! /metrics in the Prometheus text format, on loopback, with a bounded
//! number of requests; the text is checked by `promtool check metrics`
//! and python3-prometheus-client's parser when they are installed
//! (.ci/run installs them), and the server's connection cap and client
//! timeout are tried with real sockets.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

/// One HTTP/1.0 GET; the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    request(
        addr,
        &format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n"),
    )
}

/// Sends `head` on a new connection; the status line and the body.
fn request(addr: &str, head: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// Scrapes (at most 50 times, 100 ms apart) until `done` holds of the
/// text; the last text.
fn scrape_until(addr: &str, done: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    for _ in 0..50 {
        let (status, body) = get(addr, "/metrics");
        assert!(status.ends_with("200 OK"), "{status}");
        text = body;
        if done(&text) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    text
}

/// SIGINT to utap, which must then end well.
fn stop(child: Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// `promtool check metrics` on `text` exits 0 and says nothing (a lint
/// warning is a failure); skipped, saying so, without promtool.
fn promtool(text: &str, test: &str) {
    let Ok(mut p) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("{test}: promtool missing (apt-get install prometheus), its check skipped");
        return;
    };
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.is_empty(),
        "promtool: {said}\n{text}"
    );
}

/// Every kind of exported global, with values a `begin` probe fixes: the
/// exposition is exact (HELP and TYPE per family, counters from `++`/`+=`,
/// label names from the index expressions, histogram buckets over the
/// populated range only), strings, `__` names and the tapset's `argc` are
/// left out, and promtool accepts it without a warning.
const SCRIPT: &str = r#"
global bytes, lat, lin, name, depth, readBytes, __hidden
probe begin {
  for (i = 1; i <= 1000; i++) { lat <<< i; lin <<< i % 50 }
  op = "read"
  bytes[op, 3] += 10
  bytes[op, 4] += 5
  depth = 7
  readBytes += 3
  __hidden++
  name = "strings are not metrics"
  if (argc > 5) depth = 1
}
probe timer.s(30) { exit() }
probe end { print(@hist_log(lat)); print(@hist_linear(lin, 0, 100, 10)) }
"#;

const EXPOSITION: &str = r#"# HELP bytes_total utap global bytes of <input>
# TYPE bytes_total counter
bytes_total{op="read",key2="3"} 10
bytes_total{op="read",key2="4"} 5
# HELP lat utap global lat of <input>
# TYPE lat histogram
lat_bucket{le="1"} 1
lat_bucket{le="3"} 3
lat_bucket{le="7"} 7
lat_bucket{le="15"} 15
lat_bucket{le="31"} 31
lat_bucket{le="63"} 63
lat_bucket{le="127"} 127
lat_bucket{le="255"} 255
lat_bucket{le="511"} 511
lat_bucket{le="1023"} 1000
lat_bucket{le="+Inf"} 1000
lat_sum 500500
lat_count 1000
# HELP lin utap global lin of <input>
# TYPE lin histogram
lin_bucket{le="9"} 200
lin_bucket{le="19"} 400
lin_bucket{le="29"} 600
lin_bucket{le="39"} 800
lin_bucket{le="49"} 1000
lin_bucket{le="+Inf"} 1000
lin_sum 24500
lin_count 1000
# HELP depth utap global depth of <input>
# TYPE depth gauge
depth 7
# HELP read_bytes_total utap global readBytes of <input>
# TYPE read_bytes_total counter
read_bytes_total 3
"#;

#[test]
fn globals_are_served_in_the_prometheus_text_format() {
    let (child, addr) = serving(&["-e", SCRIPT]);
    let text = scrape_until(&addr, |t| !t.is_empty());
    let (missing, _) = get(&addr, "/elsewhere");
    let (post, _) = request(&addr, "POST /metrics HTTP/1.0\r\n\r\n");
    stop(child);
    assert!(missing.ends_with("404 Not Found"), "{missing}");
    assert!(post.ends_with("405 Method Not Allowed"), "{post}");
    assert_eq!(text, EXPOSITION);
    promtool(&text, "globals_are_served_in_the_prometheus_text_format");

    let Some(families) = parse(&text, "globals_are_served_in_the_prometheus_text_format") else {
        return;
    };
    assert_eq!(
        families,
        "bytes counter 2\nlat histogram 13\nlin histogram 8\ndepth gauge 1\nread_bytes counter 1\n"
    );
}

/// A session tracing a real program, scraped while it runs: the families
/// of a typical exporter (counts per syscall name, a size histogram, a
/// gauge per descriptor) pass `promtool check metrics` with no warning,
/// and the histogram's buckets stay within the sizes written.
#[test]
fn promtool_accepts_a_scrape_of_a_traced_program() {
    let script = r#"
global calls, sizes, last_size
probe syscall.* { calls[name]++ }
probe syscall.write { sizes <<< count; last_size[fd] = count }
probe end { print(@hist_log(sizes)) }
"#;
    let cmd = format!(
        "/bin/sh -c '{}; exec sleep 20'",
        support::fixture("syscalls")
    );
    let (child, addr) = serving(&["-e", script, "-c", &cmd]);
    let text = scrape_until(&addr, |t| t.contains("calls_total{name=\"kill\"} 1\n"));
    stop(child);
    assert!(
        text.contains(
            "# HELP calls_total utap global calls of <input>\n# TYPE calls_total counter\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("# TYPE last_size gauge\nlast_size{fd=\""),
        "{text}"
    );
    // Writes of 1 to a few hundred bytes: a handful of buckets, not 128.
    let buckets = text.matches("sizes_bucket{").count();
    assert!((2..=12).contains(&buckets), "{buckets} buckets:\n{text}");
    promtool(&text, "promtool_accepts_a_scrape_of_a_traced_program");
}

#[test]
fn only_loopback_is_served() {
    let out = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(["--metrics", "0.0.0.0:9900", "-e", "probe begin { exit() }"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "utap: --metrics: 0.0.0.0:9900 is not a loopback address (use 127.0.0.1:PORT or [::1]:PORT)\n"
    );
}

/// The families python3-prometheus-client's parser finds in `text`, one
/// `NAME TYPE SAMPLES` line each; `None` (with a message naming `test`)
/// when python3 or the module is missing.
fn parse(text: &str, test: &str) -> Option<String> {
    // Debian's python3 (where python3-prometheus-client lives), not one
    // earlier on PATH.
    let python = ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .unwrap_or("python3");
    let parsed = Command::new(python)
        .args([
            "-c",
            "import sys\n\
             from prometheus_client.parser import text_string_to_metric_families as p\n\
             for f in p(sys.stdin.read()):\n    print(f.name, f.type, len(f.samples))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut py) = parsed else {
        eprintln!("{test}: python3 missing, parser check skipped");
        return None;
    };
    py.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = py.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("No module named 'prometheus_client'") {
        eprintln!("{test}: python3-prometheus-client missing, parser check skipped");
        return None;
    }
    assert!(out.status.success(), "{stderr}\n{text}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Starts utap with `--metrics 127.0.0.1:0` and `args`; the child and the
/// address it serves.
fn serving(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(["--metrics", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("utap runs");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("utap: serving metrics at http://")
        .and_then(|l| l.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    (child, addr)
}

/// examples/syscallmetrics.stp: `probe prometheus` builds the text with
/// the @prometheus_dump_array macros, afresh at each scrape, and the text
/// parses.
#[test]
fn probe_prometheus_builds_the_text_served() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/syscallmetrics.stp");
    // The fixture's calls, then time to scrape.
    let cmd = format!(
        "/bin/sh -c '{}; exec sleep 20'",
        support::fixture("syscalls")
    );
    let (mut child, addr) = serving(&[script, "-c", &cmd]);
    // Bounded: 50 scrapes, 100 ms apart, until the fixture's kill() shows.
    let mut text = String::new();
    for _ in 0..50 {
        let (status, body) = get(&addr, "/metrics");
        assert!(status.ends_with("200 OK"), "{status}");
        text = body;
        if text.contains("syscalls_total{name=\"kill\"} 1\n") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, again) = get(&addr, "/metrics");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");

    assert!(
        text.starts_with(
            "# HELP syscalls_total System calls made, by name.\n# TYPE syscalls_total counter\n"
        ),
        "{text}"
    );
    assert!(text.contains("syscalls_total{name=\"kill\"} 1\n"), "{text}");
    assert!(
        text.contains("syscall_failures_total{name=\"close\",error=\"EBADF\"} 1\n"),
        "{text}"
    );
    // Each scrape starts from an empty $value.
    assert_eq!(again.matches("# TYPE syscalls_total").count(), 1, "{again}");
    // No automatic exposition of the globals next to it.
    assert!(!text.contains("# TYPE calls"), "{text}");

    let Some(families) = parse(&text, "probe_prometheus_builds_the_text_served") else {
        return;
    };
    let lines: Vec<&str> = families.lines().collect();
    assert_eq!(lines.len(), 2, "{families}");
    assert!(lines[0].starts_with("syscalls counter "), "{families}");
    assert!(
        lines[1].starts_with("syscall_failures counter "),
        "{families}"
    );
}

/// Every macro arity, the _map and _map_unquoted forms, label escapes, and
/// exit() in the handler ending the session once it has served.
#[test]
fn prometheus_macros_label_every_key() {
    let script = r#"
global a1, a3, a8
probe begin {
  a1["say \"hi\"\n"] = 1
  a3[1, "b", 3] = 3
  a8[1, 2, 3, 4, 5, 6, 7, 8] = 8
}
function twice:string(v:long) { return sprint(2 * v) }
function q:string(k:string) { return "\"" . k . "\"" }
// Several handlers: their texts follow each other, in script order. (The
// macros' _v1.. are locals of the handler: keys of other types need
// another handler, as in SystemTap.)
probe prometheus { @prometheus_dump_array1(a1, "one", "k") }
probe prometheus {
  @prometheus_dump_array3_map(a3, "three", "x", "y", "z", twice, sprint, q, sprint)
  @prometheus_dump_array3_map_unquoted(a3, "raw", "x", "y", "z", sprint, sprint, q, sprint)
}
probe prometheus {
  @prometheus_dump_array8(a8, "eight", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8")
  exit()
}
probe end { println("ended") }
"#;
    let (child, addr) = serving(&["-e", script]);
    let (status, text) = get(&addr, "/metrics");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ended\n");
    assert!(status.ends_with("200 OK"), "{status}");
    assert_eq!(
        text,
        concat!(
            "one{k=\"say \\\"hi\\\"\\n\"} 1\n",
            "three{x=\"1\",y=\"\\\"b\\\"\",z=\"3\"} 6\n",
            "raw{x=1,y=\"b\",z=3} 3\n",
            "eight{k1=\"1\",k2=\"2\",k3=\"3\",k4=\"4\",k5=\"5\",k6=\"6\",k7=\"7\",k8=\"8\"} 8\n",
        )
    );
}

/// `-l` lists the probe; `$value` is only written (`.=`, `=`), and only in
/// `probe prometheus`.
#[test]
fn probe_prometheus_is_listed_and_value_is_write_only() {
    let utap = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_utap"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(
        utap(&["-l", "prometheus"]),
        (Some(0), "prometheus\n".into(), String::new())
    );
    let (status, _, err) = utap(&["-p2", "-e", "probe prometheus { println($value) }"]);
    assert_eq!(status, Some(1));
    assert!(
        err.contains("semantic error: '$value' of probe prometheus can only be written"),
        "{err}"
    );
    let (status, _, err) = utap(&["-p2", "-e", "probe begin { $value .= \"x\" }"]);
    assert_eq!(status, Some(1));
    assert!(
        err.contains("not a context variable of this probe"),
        "{err}"
    );
}

/// Threads of process `pid` (`Threads:` of /proc/PID/status).
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Threads line:\n{status}"))
}

/// 100 idle connections (connected, never a request) hold at most 16
/// connection threads: utap's thread count stays within its count before
/// plus 18. A scrape beside them is answered within 2 s (200, or a 503 or
/// a reset from the cap: refused, not hung), and once they close scrapes
/// are served again.
#[test]
fn idle_connections_are_capped() {
    let (child, addr) = serving(&["-e", "probe timer.s(60) { exit() }"]);
    let pid = child.id();
    // The server is up once it answers.
    scrape_until(&addr, |_| true);
    let before = threads(pid);
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = threads(pid);
    let t = Instant::now();
    let beside = std::panic::catch_unwind(|| get(&addr, "/metrics").0);
    let took = t.elapsed();
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    let (after, _) = get(&addr, "/metrics");
    stop(child);
    assert!(
        during <= before + 16 + 2,
        "{before} threads before, {during} with 100 idle connections"
    );
    if let Ok(status) = &beside {
        assert!(
            status.ends_with("200 OK") || status.ends_with("503 Service Unavailable"),
            "{status}"
        );
    }
    assert!(took < Duration::from_secs(2), "the 101st waited {took:?}");
    assert!(after.ends_with("200 OK"), "{after}");
}

/// A client that never finishes its request is cut off after the 5 s
/// timeout (not held for ever), and others are served meanwhile.
#[test]
fn a_slow_client_times_out() {
    let (child, addr) = serving(&["-e", "probe timer.s(60) { exit() }"]);
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.0\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let t = Instant::now();
    let (meanwhile, _) = get(&addr, "/metrics");
    let mut got = Vec::new();
    let read = slow.read_to_end(&mut got);
    let took = t.elapsed();
    stop(child);
    assert!(meanwhile.ends_with("200 OK"), "{meanwhile}");
    assert!(read.is_ok() && got.is_empty(), "{read:?} {got:?}");
    assert!(
        (Duration::from_millis(4500)..Duration::from_secs(8)).contains(&took),
        "cut off after {took:?}"
    );
}

/// The counter rule: only `++` and `+=` of a non-negative literal keep a
/// long a counter; `--`, `+= expr`, `-=`, `=` and `delete` make it a gauge.
/// Label names come from variables and argument-less calls.
#[test]
fn counters_are_globals_only_ever_incremented() {
    let script = r#"
global inc, dec, plus_expr, minus, set, deleted, by_call, mixed
probe begin {
  inc++; inc += 2
  dec++; dec--
  plus_expr += inc
  minus -= 0
  set = 4
  deleted[1]++; deleted[2]++; delete deleted[2]
  by_call[execname(), pid()] += 1
  k = 5
  mixed[k, 1] = 1
  mixed[k + 1, 2] = 1
}
probe timer.s(30) { exit() }
"#;
    let (child, addr) = serving(&["-e", script]);
    let text = scrape_until(&addr, |t| !t.is_empty());
    stop(child);
    let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
    assert_eq!(
        types,
        [
            "# TYPE inc_total counter",
            "# TYPE dec gauge",
            "# TYPE plus_expr gauge",
            "# TYPE minus gauge",
            "# TYPE set gauge",
            "# TYPE deleted gauge",
            "# TYPE by_call_total counter",
            "# TYPE mixed gauge",
        ],
        "{text}"
    );
    assert!(text.contains("\ninc_total 3\n"), "{text}");
    assert!(text.contains("\nby_call_total{execname=\""), "{text}");
    assert!(text.contains("\",pid=\""), "{text}");
    assert!(
        text.contains("\nmixed{key1=\"5\",key2=\"1\"} 1\n"),
        "{text}"
    );
    promtool(&text, "counters_are_globals_only_ever_incremented");
}

/// Probes that run inside the program (the data plane) under `--metrics`:
/// a scrape folds what the program's handlers keep in the shared region,
/// so it shows `loop`'s 5,000 getppid calls while the shell sleeps after
/// it, with no stop of the program per call.
#[test]
fn scrapes_read_what_handlers_in_the_program_count() {
    let script = "global calls\nprobe syscall.getppid { calls[execname()]++ }";
    let cmd = format!(
        "/bin/sh -c '{} 5000; exec sleep 20'",
        support::fixture("loop")
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(["-v", "--metrics", "127.0.0.1:0", "-e", script, "-c", &cmd])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("utap runs");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    let addr = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "{said}");
        if let Some(a) = line.trim().strip_prefix("utap: serving metrics at http://") {
            break a.strip_suffix("/metrics").unwrap().to_string();
        }
        said.push_str(&line);
    };
    assert!(
        said.contains("utap: 1 of 1 probe(s) run in the program"),
        "{said}"
    );
    let want = "calls_total{execname=\"loop\"} 5000\n";
    let text = scrape_until(&addr, |t| t.contains(want));
    // Ends the traced shell's sleep with the session.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    stop(child);
    assert!(text.contains(want), "{text}");
    promtool(&text, "scrapes_read_what_handlers_in_the_program_count");
}
