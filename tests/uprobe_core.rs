//! Breakpoints owned by the utrace core (runtime/src/uprobe,
//! utrace/breakpoint.rs), driven directly through the engine API on the
//! uprobe fixtures: exact hit counts with 4 threads, entry+return counts
//! through the trampoline (recursion, longjmp), the program's own SIGTRAP
//! delivered, and the original bytes back after detach.

mod support;

use std::path::Path;

use support::{Running, fixture};
use utap_runtime::elf::{ElfImage, read_maps};
use utap_runtime::utrace::{
    AttachMode, BreakpointHit, Cx, EndReason, Engine, Events, ResumeAction, SpawnCommand, Tid,
    Tracer,
};

#[derive(Default)]
struct Counter {
    entries: u64,
    returns: u64,
    hijack: bool,
    /// Return values seen, for a known call.
    last_ret: Option<u64>,
}

impl Engine for Counter {
    fn report_breakpoint(
        &mut self,
        cx: &mut Cx,
        _: ResumeAction,
        hit: &BreakpointHit,
    ) -> ResumeAction {
        if let Some(_frame) = hit.returned {
            self.returns += 1;
            self.last_ret = cx.regs().ok().map(|r| r.rax);
        } else {
            self.entries += 1;
            assert_eq!(cx.regs().unwrap().rip, hit.addr);
            if self.hijack {
                cx.hijack_return(hit.addr, 0).unwrap();
            }
        }
        ResumeAction::Resume
    }
}

/// Runs `ufuncs ARGS` (stdout to a file) with breakpoints on `funcs` of
/// the executable; returns the engine's counts and the program's output.
fn trace(args: &str, funcs: &[&str], hijack: bool) -> (Counter, String, i32) {
    let counter = Counter {
        hijack,
        ..Counter::default()
    };
    trace_with(args, funcs, counter, Events::FOLLOW)
}

/// `trace` with any engine getting the breakpoint reports (and `more`
/// events: FOLLOW, or not).
fn trace_with<E: Engine + Default + 'static>(
    args: &str,
    funcs: &[&str],
    engine: E,
    more: Events,
) -> (E, String, i32) {
    let out = std::env::temp_dir().join(format!(
        "uprobe_core_{}_{}",
        std::process::id(),
        args.replace(' ', "_")
    ));
    let cmd = SpawnCommand::command_line(&format!(
        "exec {} {args} > {}",
        fixture("ufuncs"),
        out.display()
    ))
    .unwrap();
    let mut tracer = Tracer::new().unwrap();
    let id = tracer.add_engine(engine);
    let child = tracer.spawn(&cmd, None).unwrap();
    // The shell execs the fixture: insert at its exec, from a second engine.
    struct AtExec(Vec<String>);
    impl Engine for AtExec {
        fn report_exec(&mut self, cx: &mut Cx, _: ResumeAction, _: Tid) -> ResumeAction {
            let pid = cx.pid();
            let maps = read_maps(pid.0).unwrap();
            let exe = std::fs::read_link(format!("/proc/{}/exe", pid.0)).unwrap();
            let img = ElfImage::open(&exe).unwrap();
            for f in &self.0 {
                let (name, off) = match f.split_once('+') {
                    Some((n, o)) => (n, o.parse::<u64>().unwrap()),
                    None => (f.as_str(), 0),
                };
                let sym = img.symbols.function(name).unwrap();
                let at = img.runtime_addr(&maps, sym.addr + off).unwrap();
                cx.insert_breakpoint(pid, at).unwrap();
            }
            ResumeAction::Resume
        }
    }
    let at_exec = tracer.add_engine(AtExec(funcs.iter().map(|s| s.to_string()).collect()));
    let mut ctl = tracer.ctl();
    ctl.attach(child.pid, id, AttachMode::Create, Events::BREAKPOINT | more)
        .unwrap();
    ctl.attach(child.pid, at_exec, AttachMode::Create, Events::EXEC)
        .unwrap();
    ctl.end_when_exits(child.pid);
    let why = tracer.run().unwrap();
    let code = match why {
        EndReason::ProcessExited { status, .. } => status.code(),
        other => panic!("{other:?}"),
    };
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    let engine = std::mem::take(tracer.engine_mut::<E>(id).unwrap());
    (engine, text, code)
}

fn count(output: &str, name: &str) -> u64 {
    output
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {output:?}"))
}

#[test]
fn four_threads_lose_no_hit() {
    let (c, out, code) = trace("threads 20000", &["hot"], false);
    assert_eq!(code, 0, "{out}");
    assert_eq!(count(&out, "hot"), 80000);
    assert_eq!(c.entries, 80000);
}

/// `add+4` is `mov %rdi,-0x8(%rbp)` (-O0): not emulated, so each hit is
/// single-stepped (the counted fallback) and the program computes the same.
#[test]
fn single_step_fallback() {
    let (c, out, code) = trace("basic 50", &["add+4"], false);
    assert_eq!(code, 0, "{out}");
    assert_eq!((count(&out, "add"), c.entries), (50, 50), "{out}");
    assert_eq!(count(&out, "sum"), 44155);
}

#[test]
fn recursion_entries_and_returns() {
    let (c, out, code) = trace("basic 5", &["fib", "add"], true);
    assert_eq!(code, 0);
    let expect = count(&out, "fib") + count(&out, "add");
    assert_eq!(c.entries, expect);
    assert_eq!(c.returns, expect);
    // fib(10) = 55 is the last return.
    assert_eq!(c.last_ret, Some(55));
}

#[test]
fn longjmp_skips_returns_without_breaking_the_program() {
    let (c, out, code) = trace("longjmp 50", &["jumper", "deep"], true);
    assert_eq!(code, 0);
    assert_eq!(out, "jumper 50\ndeep 200\nsum 350\n");
    assert_eq!(c.entries, 250);
    // Only jumper returns; deep's frames are unwound by longjmp.
    assert_eq!(c.returns, 50);
}

#[test]
fn programs_own_sigtrap_is_delivered() {
    let (c, out, code) = trace("trap", &["add"], false);
    assert_eq!((code, out.as_str(), c.entries), (0, "traps 1\n", 0));
}

#[test]
fn detach_restores_original_bytes() {
    let p = Running::ready("ufuncs", &["wait"]);
    let pid = Tid(p.pid());
    let img = ElfImage::open(Path::new(&fixture("ufuncs"))).unwrap();
    let maps = read_maps(pid.0).unwrap();
    let addrs: Vec<u64> = ["add", "fib", "main"]
        .iter()
        .map(|f| {
            img.runtime_addr(&maps, img.symbols.function(f).unwrap().addr)
                .unwrap()
        })
        .collect();
    let read = |a: u64| {
        let mut b = [0u8; 1];
        utap_runtime::uprobe::mem::read(pid.0, a, &mut b).unwrap();
        b[0]
    };
    let before: Vec<u8> = addrs.iter().map(|&a| read(a)).collect();
    {
        let mut tracer = Tracer::new().unwrap();
        let id = tracer.add_engine(Counter::default());
        let mut ctl = tracer.ctl();
        for t in ctl.attach_process(pid).unwrap() {
            ctl.attach(t, id, AttachMode::Create, Events::BREAKPOINT)
                .unwrap();
        }
        for &a in &addrs {
            ctl.insert_breakpoint(pid, a).unwrap();
            ctl.insert_breakpoint(pid, a).unwrap(); // shared: counted
        }
        ctl.remove_breakpoint(pid, addrs[0]).unwrap();
        assert!(addrs.iter().all(|&a| read(a) == 0xcc));
        ctl.add_timer(
            std::time::Instant::now() + std::time::Duration::from_millis(100),
            |c| {
                c.end(EndReason::Requested);
                None
            },
        );
        tracer.run().unwrap();
    }
    let after: Vec<u8> = addrs.iter().map(|&a| read(a)).collect();
    assert_eq!(before, after);
    assert!(!before.contains(&0xcc));
    support::assert_running_untraced(pid.0);
}

/// Inserts and removes a breakpoint (on `fib`, which the threads never
/// call) from inside hits of `hot`, and looks at every thread of the
/// process right after: each must be in a ptrace stop (state `t`), none
/// running or sleeping, while the byte changes (issue 13: text changes
/// only with the whole address space quiescent).
#[derive(Default)]
struct Changer {
    hits: u64,
    fib: Option<u64>,
    /// Per change: the threads not in a tracing stop right after it.
    seen_running: Vec<Vec<String>>,
}

impl Engine for Changer {
    fn report_breakpoint(
        &mut self,
        cx: &mut Cx,
        _: ResumeAction,
        _: &BreakpointHit,
    ) -> ResumeAction {
        self.hits += 1;
        let pid = cx.pid();
        if self.hits % 500 != 0 {
            return ResumeAction::Resume;
        }
        let fib = *self.fib.get_or_insert_with(|| {
            let exe = std::fs::read_link(format!("/proc/{}/exe", pid.0)).unwrap();
            let img = ElfImage::open(&exe).unwrap();
            let maps = read_maps(pid.0).unwrap();
            img.runtime_addr(&maps, img.symbols.function("fib").unwrap().addr)
                .unwrap()
        });
        if (self.hits / 500) % 2 == 1 {
            cx.insert_breakpoint(pid, fib).unwrap();
        } else {
            cx.remove_breakpoint(pid, fib).unwrap();
        }
        self.seen_running.push(not_in_tracing_stop(pid.0));
        ResumeAction::Resume
    }
}

/// Threads of `pid` whose state is not `t` (tracing stop), with it.
fn not_in_tracing_stop(pid: i32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").map(|(_, r)| &r[..1]).unwrap_or("?");
        if state != "t" && state != "X" && state != "Z" {
            out.push(format!("{}:{state}", e.file_name().to_string_lossy()));
        }
    }
    out
}

#[test]
fn text_changes_with_every_thread_stopped() {
    let (c, out, code) = trace_with("threads 5000", &["hot"], Changer::default(), Events::FOLLOW);
    assert_eq!(code, 0, "{out}");
    assert_eq!(count(&out, "hot"), 20000);
    assert_eq!(c.hits, 20000);
    assert_eq!(c.seen_running.len(), 40);
    let running: Vec<_> = c.seen_running.iter().filter(|r| !r.is_empty()).collect();
    assert!(
        running.is_empty(),
        "threads ran while text changed: {running:?}"
    );
}

/// A fork child no engine follows is let go with the parent's breakpoint
/// bytes taken out of its copy of the memory: it calls `add` N times
/// untraced (on main it died of SIGTRAP at the first), then execs
/// `ufuncs basic N`, whose output shows it ran on.
#[test]
fn unfollowed_fork_child_runs_without_our_bytes() {
    let (c, out, code) = trace_with("fork 7", &["add"], Counter::default(), Events::NONE);
    assert_eq!(code, 0, "{out}");
    assert_eq!(count(&out, "parent add"), 7, "{out}");
    // The child's exec'd program: add 7 times, then fib and the rest.
    assert_eq!(count(&out, "add"), 7, "{out}");
    assert_eq!(count(&out, "fib"), 177, "{out}");
    // Only the parent's calls hit.
    assert_eq!(c.entries, 7);
}

/// A vfork child no engine follows runs in the parent's memory, int3
/// bytes included: the core keeps it traced until it execs, stepping it
/// over the sites (`add+4` is single-stepped, the parent held meanwhile),
/// so it calls `add` N times and execs (on main it died of SIGTRAP). Only
/// the parent's hits are reported; its count shows the child's calls.
#[test]
fn unfollowed_vfork_child_steps_over_the_shared_bytes() {
    for site in ["add", "add+4"] {
        let (c, out, code) = trace_with("vfork 6", &[site], Counter::default(), Events::NONE);
        assert_eq!(code, 0, "{site}: {out}");
        assert_eq!(count(&out, "parent add"), 12, "{site}: {out}");
        assert_eq!(count(&out, "add"), 6, "{site}: {out}");
        assert_eq!(count(&out, "fib"), 177, "{site}: {out}");
        assert_eq!(c.entries, 6, "{site}");
    }
}
