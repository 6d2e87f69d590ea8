//! The HTTP side of `--metrics`: one accepting thread and at most
//! [`MAX_CONNECTIONS`] connection threads, each with read and write
//! timeouts, so neither idle nor slow clients can pile up threads.
//!
//! Hand-written over `std::net` (a few dozen lines: only `GET`/`HEAD` of
//! `/metrics`, one request per connection, `Connection: close`) because
//! tiny_http, used before, starts a thread per connection with no cap and
//! no timeouts (500 half-open connections made 480 threads). A connection
//! over the cap is answered `503` at once and closed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{CONTENT_TYPE, Exchange, MetricSpec, MetricsRequests, Reply, exposition};

/// Connections served at once; more are answered 503.
pub const MAX_CONNECTIONS: usize = 16;
/// How long a client may take to send its request, or to take the reply.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a scrape waits for the tracer thread's snapshot.
const SCRAPE_WAIT: Duration = Duration::from_secs(5);
/// The longest request head read.
const MAX_HEAD: usize = 8192;
/// How long stopping waits for replies being written.
const DRAIN: Duration = Duration::from_secs(2);

/// What the accepting and connection threads share.
struct Shared {
    exchange: Arc<Exchange>,
    specs: Vec<MetricSpec>,
    stop: AtomicBool,
    /// Connection threads alive.
    open: AtomicUsize,
    /// Connections with a parsed request not yet fully answered.
    answering: AtomicUsize,
}

/// The server: stops (and waits for replies in progress) when dropped.
pub struct MetricsServer {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    /// The address bound (with the port chosen for `:0`).
    pub addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` (loopback only: the metrics say what a traced program
    /// does) and starts the accepting thread; `specs` say what to export.
    pub fn start(
        addr: &str,
        specs: Vec<MetricSpec>,
    ) -> Result<(MetricsServer, MetricsRequests), String> {
        let parsed: SocketAddr = addr
            .parse()
            .map_err(|_| format!("--metrics: '{addr}' is not an address:port"))?;
        if !parsed.ip().is_loopback() {
            return Err(format!(
                "--metrics: {addr} is not a loopback address (use 127.0.0.1:PORT or [::1]:PORT)"
            ));
        }
        let listener = TcpListener::bind(parsed)
            .map_err(|e| format!("--metrics: cannot listen on {addr}: {e}"))?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("--metrics: cannot listen on {addr}: {e}"))?;
        let exchange = Arc::new(Exchange::default());
        let requests = MetricsRequests {
            exchange: Arc::clone(&exchange),
            globals: specs.iter().map(|s| s.global).collect(),
        };
        let shared = Arc::new(Shared {
            exchange,
            specs,
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            answering: AtomicUsize::new(0),
        });
        let sh = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name("utap-metrics".into())
            .spawn(move || accept(&listener, &sh))
            .map_err(|e| format!("--metrics: {e}"))?;
        Ok((
            MetricsServer {
                shared,
                acceptor: Some(acceptor),
                addr: bound,
            },
            requests,
        ))
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.exchange.close();
        // Wakes the accepting thread out of accept().
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
        // A reply the tracer already handed over (a `probe prometheus`
        // that called exit()) is still written.
        let until = Instant::now() + DRAIN;
        while self.shared.answering.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = conn else {
            // Out of descriptors, most likely: let some close.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if shared.open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            shared.open.fetch_sub(1, Ordering::AcqRel);
            refuse(stream);
            continue;
        }
        let sh = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("utap-metrics-conn".into())
            .spawn(move || {
                connection(stream, &sh);
                sh.open.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            shared.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Over the cap: a 503 written without waiting (it fits the socket
/// buffer; a client that cannot take it just loses it), then closed.
fn refuse(stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let mut stream = stream;
    let _ = stream.write_all(&response(
        "503 Service Unavailable",
        "text/plain",
        b"too many connections\n",
        true,
    ));
}

fn connection(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    shared.answering.fetch_add(1, Ordering::AcqRel);
    let reply = answer(&head, shared);
    let _ = stream.write_all(&reply);
    shared.answering.fetch_sub(1, Ordering::AcqRel);
}

/// The request head (up to the blank line), read within
/// [`CLIENT_TIMEOUT`] in all; `None` if the client is too slow, closes
/// or sends more than [`MAX_HEAD`] bytes.
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !ends_head(&buf) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || buf.len() > MAX_HEAD {
            return None;
        }
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn ends_head(buf: &[u8]) -> bool {
    buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")
}

/// The whole response to a request head.
fn answer(head: &str, shared: &Shared) -> Vec<u8> {
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let with_body = method != "HEAD";
    if method != "GET" && method != "HEAD" {
        return response("405 Method Not Allowed", "text/plain", b"only GET\n", true);
    }
    if target.split('?').next() != Some("/metrics") {
        return response("404 Not Found", "text/plain", b"not found\n", with_body);
    }
    let Some(reply) = shared.exchange.fetch(SCRAPE_WAIT) else {
        return response(
            "503 Service Unavailable",
            "text/plain",
            b"the session is not answering\n",
            with_body,
        );
    };
    let text = match &*reply {
        Reply::Text(t) => t.clone(),
        Reply::Globals(values) => exposition::render(&shared.specs, values),
    };
    response("200 OK", CONTENT_TYPE, text.as_bytes(), with_body)
}

fn response(status: &str, content_type: &str, body: &[u8], with_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_served() {
        let err = MetricsServer::start("0.0.0.0:0", Vec::new()).err().unwrap();
        assert!(err.contains("not a loopback address"), "{err}");
    }

    #[test]
    fn a_request_head_ends_at_the_blank_line() {
        assert!(ends_head(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n"));
        assert!(ends_head(b"GET /metrics HTTP/1.0\n\n"));
        assert!(!ends_head(b"GET /metrics HTTP/1.0\r\nHost: x\r\n"));
    }
}
