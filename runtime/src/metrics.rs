//! `--metrics 127.0.0.1:PORT`: the script's numeric globals in the
//! Prometheus text exposition format (version 0.0.4), served over HTTP.
//!
//! The HTTP side runs on its own thread ([`MetricsServer`], tiny_http: a
//! small, synchronous server, enough for a scrape every few seconds, and it
//! spares us parsing HTTP by hand). It never touches script state: a
//! request is handed to the tracer thread ([`MetricsRequests`]), which
//! renders the text between events (a periodic tracer timer polls with
//! `try_recv`, never blocking) and hands it back; the HTTP thread waits for
//! it, not the tracer.
//!
//! A script with `probe prometheus` handlers serves what they build in
//! `$value` instead (SystemTap 4.x's interface; the handlers run on the
//! tracer thread too).
//!
//! Exposition: a long global is a gauge; an array of longs a gauge with
//! one label per key (`key1`, `key2`, ...); statistics are a summary
//! (`_count`, `_sum`), or a histogram (`_bucket{le=...}`, `_sum`,
//! `_count`) when they keep one. String globals are not numbers and are
//! left out.

use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::values::autoprint::GlobalValue;
use crate::values::map::{KeyPart, Map};
use crate::values::stats::{HistSpec, Stat, log_bucket_value};

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Appends global `name`'s metrics to `out`.
pub fn expose(out: &mut String, name: &str, value: GlobalValue<'_>) {
    match value {
        GlobalValue::Long(v) => {
            out.push_str(&format!("# TYPE {name} gauge\n{name} {v}\n"));
        }
        GlobalValue::Str(_) | GlobalValue::StrMap(_) => {}
        GlobalValue::Stat(s) => {
            type_line(out, name, s);
            stat(out, name, "", s);
        }
        GlobalValue::LongMap(m) => {
            out.push_str(&format!("# TYPE {name} gauge\n"));
            each(m, |labels, v| {
                out.push_str(&format!("{name}{{{labels}}} {v}\n"))
            });
        }
        GlobalValue::StatMap(m) => {
            let mut typed = false;
            each(m, |labels, s| {
                if !typed {
                    type_line(out, name, s);
                    typed = true;
                }
                stat(out, name, &labels, s);
            });
        }
    }
}

fn type_line(out: &mut String, name: &str, s: &Stat) {
    let kind = match s.hist_spec() {
        HistSpec::None => "summary",
        _ => "histogram",
    };
    out.push_str(&format!("# TYPE {name} {kind}\n"));
}

/// `key1="a",key2="3"` for each entry.
fn each<V>(map: &Map<V>, mut f: impl FnMut(String, &V)) {
    for (keys, v) in map.iter() {
        let labels: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let value = match k {
                    KeyPart::Long(n) => n.to_string(),
                    KeyPart::Str(s) => String::from_utf8_lossy(s).into_owned(),
                };
                format!("key{}=\"{}\"", i + 1, escape(&value))
            })
            .collect();
        f(labels.join(","), v);
    }
}

/// A label value's escapes: backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn stat(out: &mut String, name: &str, labels: &str, s: &Stat) {
    let spec = s.hist_spec();
    if spec != HistSpec::None {
        let mut cumulative = 0i64;
        for (i, &count) in s.buckets().iter().enumerate() {
            cumulative += count;
            let Some(le) = upper_bound(spec, i) else {
                continue;
            };
            let sep = if labels.is_empty() { "" } else { "," };
            out.push_str(&format!(
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}\n"
            ));
        }
        let sep = if labels.is_empty() { "" } else { "," };
        out.push_str(&format!(
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}\n",
            s.count()
        ));
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    out.push_str(&format!("{name}_sum{braces} {}\n", s.sum()));
    out.push_str(&format!("{name}_count{braces} {}\n", s.count()));
}

/// The largest value bucket `i` holds (Prometheus's `le`); `None` for the
/// last bucket, which `+Inf` covers.
fn upper_bound(spec: HistSpec, i: usize) -> Option<i64> {
    match spec {
        HistSpec::None => None,
        HistSpec::Log => {
            let next = i + 1;
            if next >= spec.buckets() {
                return None;
            }
            // The next bucket starts one past this one's largest value.
            let v = log_bucket_value(i);
            Some(match v {
                0 => 0,
                v if v > 0 => v.saturating_mul(2) - 1,
                v => v,
            })
        }
        HistSpec::Linear {
            start,
            interval,
            buckets,
        } => {
            if i + 1 >= buckets {
                None
            } else {
                Some(start + interval * i as i64 - 1)
            }
        }
    }
}

/// The tracer thread's end: scrape requests, each with where to send the
/// text.
#[derive(Debug)]
pub struct MetricsRequests {
    rx: Receiver<SyncSender<String>>,
}

impl MetricsRequests {
    /// Answers the waiting requests with `render()`'s text; never blocks.
    pub fn serve(&self, mut render: impl FnMut() -> String) {
        while let Ok(reply) = self.rx.try_recv() {
            let _ = reply.try_send(render());
        }
    }
}

/// The HTTP thread serving `/metrics`.
pub struct MetricsServer {
    server: std::sync::Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    /// The address bound (with the port chosen for `:0`).
    pub addr: SocketAddr,
}

/// How long a scrape waits for the tracer thread.
const SCRAPE_WAIT: Duration = Duration::from_secs(5);

impl MetricsServer {
    /// Binds `addr` (loopback only: the metrics say what a traced program
    /// does) and starts the thread.
    pub fn start(addr: &str) -> Result<(MetricsServer, MetricsRequests), String> {
        let parsed: SocketAddr = addr
            .parse()
            .map_err(|_| format!("--metrics: '{addr}' is not an address:port"))?;
        if !parsed.ip().is_loopback() {
            return Err(format!(
                "--metrics: {addr} is not a loopback address (use 127.0.0.1:PORT or [::1]:PORT)"
            ));
        }
        let server = tiny_http::Server::http(parsed)
            .map_err(|e| format!("--metrics: cannot listen on {addr}: {e}"))?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| format!("--metrics: cannot listen on {addr}"))?;
        let server = std::sync::Arc::new(server);
        let (tx, rx) = mpsc::channel();
        let srv = server.clone();
        let thread = std::thread::Builder::new()
            .name("utap-metrics".into())
            .spawn(move || serve_http(&srv, &tx))
            .map_err(|e| format!("--metrics: {e}"))?;
        Ok((
            MetricsServer {
                server,
                thread: Some(thread),
                addr: bound,
            },
            MetricsRequests { rx },
        ))
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_http(server: &tiny_http::Server, requests: &Sender<SyncSender<String>>) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("");
        if path != "/metrics" {
            let _ = request
                .respond(tiny_http::Response::from_string("not found\n").with_status_code(404));
            continue;
        }
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let text = match requests.send(reply_tx) {
            Ok(()) => reply_rx.recv_timeout(SCRAPE_WAIT).ok(),
            Err(_) => None,
        };
        let response = match text {
            Some(text) => {
                let header = tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE)
                    .expect("a valid header");
                tiny_http::Response::from_string(text).with_header(header)
            }
            None => tiny_http::Response::from_string("the session is not answering\n")
                .with_status_code(503),
        };
        let _ = request.respond(response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::stats::StatSpec;

    #[test]
    fn stats_with_a_log_histogram_are_a_prometheus_histogram() {
        let mut s = Stat::new(StatSpec {
            hist: HistSpec::Log,
            variance_shift: 0,
        });
        for v in [0, 1, 3, 3, 100] {
            s.add(v);
        }
        let mut out = String::new();
        expose(&mut out, "lat", GlobalValue::Stat(&s));
        assert!(out.starts_with("# TYPE lat histogram\n"), "{out}");
        assert!(out.contains("lat_bucket{le=\"0\"} 1\n"), "{out}");
        assert!(out.contains("lat_bucket{le=\"1\"} 2\n"), "{out}");
        assert!(out.contains("lat_bucket{le=\"3\"} 4\n"), "{out}");
        assert!(out.contains("lat_bucket{le=\"127\"} 5\n"), "{out}");
        assert!(
            out.ends_with("lat_bucket{le=\"+Inf\"} 5\nlat_sum 107\nlat_count 5\n"),
            "{out}"
        );
    }

    #[test]
    fn only_loopback_addresses_are_served() {
        let err = MetricsServer::start("0.0.0.0:0").err().unwrap();
        assert!(err.contains("not a loopback address"), "{err}");
    }
}
