//! `--metrics 127.0.0.1:0`: the script's numeric globals served at
//! /metrics in the Prometheus text format, on loopback, with a bounded
//! number of requests; the text is checked by python3-prometheus-client's
//! parser when it is installed (.ci/run installs it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

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
        eprintln!(
            "globals_are_served_in_the_prometheus_text_format: python3 missing, parser check skipped"
        );
        return;
    };
    py.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = py.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("No module named 'prometheus_client'") {
        eprintln!(
            "globals_are_served_in_the_prometheus_text_format: python3-prometheus-client missing, parser check skipped"
        );
        return;
    }
    assert!(out.status.success(), "{stderr}\n{text}");
    let families = String::from_utf8_lossy(&out.stdout);
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
