//! Cost of one `ubacktrace()` unwind of a 20-frame stack, tables cached:
//! the stack copy (one `process_vm_readv` of up to 64 KiB) and the CFI
//! unwind. The stack is this benchmark's own, 20 calls deep (a Rust
//! release build: no frame pointers), read through process_vm_readv of its
//! own pid exactly as a tracee's would be. Goal: ≤ 20 µs.
//!
//! `cargo bench -p utap-runtime --bench unwind`

use std::hint::black_box;
use std::time::Instant;

use utap_runtime::memory::ProcessMemory;
use utap_runtime::unwind::UnwindState;

const DEPTH: u32 = 20;
const ROUNDS: u32 = 20_000;

#[inline(never)]
fn recurse(n: u32, state: &mut UnwindState) -> usize {
    if n == 0 {
        return measure(state);
    }
    let r = recurse(black_box(n - 1), state);
    black_box(r)
}

#[inline(never)]
fn measure(state: &mut UnwindState) -> usize {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads rip, rsp and rbp into registers; no memory access.
    unsafe {
        std::arch::asm!("lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp",
            ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp);
    }
    let pid = std::process::id() as i32;
    let mem = ProcessMemory::new(pid);
    let frames = state.backtrace(pid, &mem, ip, sp, bp);
    if std::env::var_os("UNWIND_BENCH_SHOW").is_some() {
        println!("ip {ip:#x} measure {:#x} sp {sp:#x}", measure as usize);
        for &f in &frames {
            println!("{}", state.map(pid, f).symdata(f));
        }
    }
    assert!(
        frames.len() > DEPTH as usize,
        "only {} frames unwound",
        frames.len()
    );
    let start = Instant::now();
    let mut total = 0;
    for _ in 0..ROUNDS {
        total += black_box(state.backtrace(pid, &mem, ip, sp, bp)).len();
    }
    let per = start.elapsed() / ROUNDS;
    println!(
        "ubacktrace unwind of {} frames: {:.2} µs per unwind (goal ≤ 20 µs)",
        frames.len(),
        per.as_secs_f64() * 1e6
    );
    total
}

fn main() {
    let mut state = UnwindState::default();
    black_box(recurse(DEPTH, &mut state));
}
