//! Producer-side cost of the output transport: pushes per second of a
//! typical trace line while the output thread drains to /dev/null, and of
//! the drop path when the ring is full. Run: cargo bench -p utap-runtime --bench transport

use std::time::Instant;

use utap_runtime::transport::{Config, Output, Transport};

const LINE: &[u8] = b"openat(AT_FDCWD, \"/etc/ld.so.cache\", O_RDONLY|O_CLOEXEC) = 3\n";

fn devnull() -> Output {
    Output::Writer(Box::new(std::fs::File::create("/dev/null").unwrap()))
}

fn bench_push(label: &str, buffer_bytes: usize, n: u64) {
    let (t, mut p) = Transport::start(Config {
        buffer_bytes,
        output: devnull(),
        control: Some(Box::new(std::io::sink())),
        render: None,
        json: false,
    })
    .unwrap();
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(p.push(std::hint::black_box(LINE)));
    }
    let elapsed = start.elapsed();
    let lost = p.lost();
    drop(p);
    t.finish();
    println!(
        "{label:<40} {:>6.1} M pushes/s  {:>6.1} ns/push  ({} of {n} dropped)",
        n as f64 / elapsed.as_secs_f64() / 1e6,
        elapsed.as_nanos() as f64 / n as f64,
        lost
    );
}

fn main() {
    println!("message: {} bytes", LINE.len());
    // 250,000 lines fit in 16 MiB: every push is accepted while the output
    // thread drains concurrently.
    for _ in 0..3 {
        bench_push("16 MiB ring, accepted, output draining", 16 << 20, 250_000);
    }
    // 5M lines overrun the ring: the producer outpaces write(2).
    bench_push(
        "16 MiB ring, producer outpacing output",
        16 << 20,
        5_000_000,
    );
    // A 64-byte ring is full almost always: the cost of a drop.
    bench_push("64 B ring (drop path)", 64, 5_000_000);
}
