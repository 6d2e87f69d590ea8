//! `--metrics 127.0.0.1:0`: the script's numeric globals served at
//! /metrics in the Prometheus text format, on loopback, with a bounded
//! number of requests; the text is checked by python3-prometheus-client's
//! parser when it is installed (.ci/run installs it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

mod support;

/// One HTTP/1.0 GET; the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

const SCRIPT: &str = r#"
global ticks, bytes, lat, name
probe timer.ms(5) {
  ticks++
  bytes["read", ticks % 2] += 10
  lat <<< ticks
  name = "strings are not metrics"
}
probe timer.s(2) { print(@hist_log(lat)); exit() }
"#;

#[test]
fn globals_are_served_in_the_prometheus_text_format() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(["--metrics", "127.0.0.1:0", "-e", SCRIPT])
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
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, text) = get(&addr, "/metrics");
    let (missing, _) = get(&addr, "/elsewhere");
    assert!(child.wait().unwrap().success());
    assert!(status.ends_with("200 OK"), "{status}");
    assert!(missing.ends_with("404 Not Found"), "{missing}");

    assert!(text.starts_with("# TYPE ticks gauge\nticks "), "{text}");
    assert!(
        text.contains("# TYPE bytes gauge\nbytes{key1=\"read\",key2=\""),
        "{text}"
    );
    assert!(text.contains("# TYPE lat histogram\n"), "{text}");
    assert!(text.contains("lat_bucket{le=\"+Inf\"} "), "{text}");
    assert!(
        text.contains("\nlat_count ") && text.contains("\nlat_sum "),
        "{text}"
    );
    assert!(!text.contains("name"), "{text}");

    let Some(families) = parse(&text, "globals_are_served_in_the_prometheus_text_format") else {
        return;
    };
    let lines: Vec<&str> = families.lines().collect();
    assert_eq!(lines[0], "ticks gauge 1", "{families}");
    assert_eq!(lines[1], "bytes gauge 2", "{families}");
    assert!(lines[2].starts_with("lat histogram "), "{families}");
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
        std::thread::sleep(std::time::Duration::from_millis(100));
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
