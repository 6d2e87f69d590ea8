//! Breakpoint step-over of every kind of first instruction (the `uxol`
//! fixture, written in assembly): a RIP-relative load, a non-emulated ALU
//! op, a flags test before a branch, an indirect jump through memory, a
//! `ret` and a `push` run out of line from a slot page; direct and
//! indirect calls are emulated (pushing the original next address); a
//! `syscall` is single-stepped. The program's output is unchanged, the
//! counts equal its own, and `-v` reports each kind. The slot page is
//! inherited across fork, and 4 threads lose no hit (out of line and
//! single-stepped alike).

mod support;

use support::{Running, fixture, run, utap};

const FUNCS: [&str; 10] = [
    "x_riprel",
    "x_imul",
    "x_call",
    "x_callind",
    "x_jmp",
    "x_test",
    "x_ret",
    "x_push",
    "x_getpid",
    "x_sys",
];

/// Counts every x_* entry and the returns of four of them: a return
/// hijack's store is made with each kind of step-over (out of line:
/// x_push, x_imul; emulated call, its push and the store in one write:
/// x_call; single-stepped syscall: x_sys).
const SCRIPT: &str = r#"global n
probe process("EXE").function("x_*") { n[probefunc()]++ }
probe process("EXE").function("x_push").return { n["x_push.return"]++; if ($return != $arg1 + 5) n["bad"]++ }
probe process("EXE").function("x_imul").return { n["x_imul.return"]++ }
probe process("EXE").function("x_call").return { n["x_call.return"]++; if ($return != $arg1 * 2 + 1) n["bad"]++ }
probe process("EXE").function("x_sys").return { n["x_sys.return"]++; if ($return != pid()) n["bad"]++ }
probe end { foreach (k in n+) printf("u_%s %d\n", k, n[k]) }"#;

fn count(out: &str, name: &str) -> i64 {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no '{name} N' in {out:?}"))
}

/// `(emulated, out of line, single-stepped, slot pages)` from -v.
fn step_overs(stderr: &str) -> [u64; 4] {
    support::verbose_counts(stderr, "utap: breakpoint step-overs: ")
}

/// The fixture's own lines, untraced and traced (sorted: a forked child
/// and its parent write in either order), and the traced run's stderr.
fn traced(args: &str) -> (Vec<String>, Vec<String>, String, String) {
    let exe = fixture("uxol");
    let plain = std::process::Command::new(&exe)
        .args(args.split(' '))
        .output()
        .unwrap();
    let mut own: Vec<String> = String::from_utf8_lossy(&plain.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    own.sort();
    let o = run(utap(
        &SCRIPT.replace("EXE", &exe),
        &["-v", "-c", &format!("{exe} {args}")],
    ));
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    let mut lines: Vec<String> = o
        .stdout
        .lines()
        .filter(|l| !l.starts_with("u_"))
        .map(str::to_owned)
        .collect();
    lines.sort();
    (own, lines, o.stdout, o.stderr)
}

#[test]
fn each_kind_of_first_instruction_steps_over_correctly() {
    let n = 40;
    let (own, lines, out, stderr) = traced(&format!("basic {n}"));
    assert_eq!(lines, own, "{out}");
    for f in FUNCS {
        assert_eq!(count(&out, &format!("u_{f}")), n, "{f}: {out}");
    }
    assert_eq!(count(&out, "u_x_push.return"), n, "{out}");
    assert_eq!(count(&out, "u_x_imul.return"), n, "{out}");
    assert_eq!(count(&out, "u_x_call.return"), n, "{out}");
    assert_eq!(count(&out, "u_x_sys.return"), n, "{out}");
    assert!(!out.contains("u_bad"), "{out}");
    let [emulated, xol, stepped, pages] = step_overs(&stderr);
    // Out of line: riprel, imul, jmp, test, ret, push, getpid's mov imm.
    assert!(xol >= 7 * n as u64, "{stderr}");
    // Emulated: the two calls.
    assert!(emulated >= 2 * n as u64, "{stderr}");
    // Only the syscall is single-stepped.
    assert_eq!(stepped, n as u64, "{stderr}");
    assert!(pages >= 1, "{stderr}");
}

#[test]
fn fork_child_inherits_the_slot_page() {
    let n = 15;
    let (own, lines, out, stderr) = traced(&format!("fork {n}"));
    assert_eq!(lines, own, "{out}");
    for f in FUNCS {
        // Once each before the fork (x_riprel excepted), then in both.
        let warm = i64::from(f != "x_riprel");
        assert_eq!(count(&out, &format!("u_{f}")), 2 * n + warm, "{f}: {out}");
    }
    assert_eq!(count(&out, "u_x_push.return"), 2 * n + 1, "{out}");
    let [_, xol, _, pages] = step_overs(&stderr);
    assert!(xol >= 14 * n as u64, "{stderr}");
    // The child runs from the slots it inherited: no page of its own,
    // as many pages as the same run without the fork.
    let (_, _, _, alone) = traced(&format!("basic {n}"));
    assert_eq!(pages, step_overs(&alone)[3], "{stderr}{alone}");
}

#[test]
fn four_threads_lose_no_hit_out_of_line_or_stepped() {
    let n: i64 = 4000;
    let exe = fixture("uxol");
    let script = r#"global n
probe process("EXE").function("x_imul") { n["x_imul"]++ }
probe process("EXE").function("x_sys") { n["x_sys"]++ }
probe end { foreach (k in n+) printf("u_%s %d\n", k, n[k]) }"#
        .replace("EXE", &exe);
    let o = run(utap(&script, &["-c", &format!("{exe} threads {n}")]));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let getpids = 4 * ((n + 7) / 8);
    assert_eq!(
        count(&o.stdout, "threads_ok"),
        4 * n + getpids,
        "{}",
        o.stdout
    );
    assert_eq!(count(&o.stdout, "u_x_imul"), 4 * n, "{}", o.stdout);
    assert_eq!(count(&o.stdout, "u_x_sys"), getpids, "{}", o.stdout);
}

/// Anonymous executable mappings of `pid` (a slot page is one).
fn anonymous_exec_pages(pid: i32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 5 && f[1].contains('x')
        })
        .map(str::to_owned)
        .collect()
}

/// The slot page mapped in an attached (-x) process is unmapped when the
/// session lets it go (issue 13): /proc/PID/maps shows no mapping of ours
/// afterwards, and the program runs on (its loop checks x_imul's result
/// and aborts on a wrong one) untraced.
#[test]
fn attached_process_keeps_no_slot_page_after_the_session() {
    let mut p = Running::ready("uxol", &["loop"]);
    let pid = p.pid();
    assert_eq!(anonymous_exec_pages(pid), Vec::<String>::new());
    let exe = fixture("uxol");
    let script = r#"global n
probe process("EXE").function("x_imul") { n++ }
probe process("EXE").function("x_riprel") { n++ }
probe timer.ms(300) { printf("hits %d\n", n > 0); exit() }"#
        .replace("EXE", &exe);
    let o = run(utap(&script, &["-v", "-x", &pid.to_string()]));
    assert_eq!(
        (o.status, o.stdout.as_str()),
        (0, "hits 1\n"),
        "{}",
        o.stderr
    );
    assert!(
        step_overs(&o.stderr)[3] >= 1,
        "no slot page was mapped: {}",
        o.stderr
    );
    assert_eq!(
        anonymous_exec_pages(pid),
        Vec::<String>::new(),
        "{}",
        o.stderr
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let ended = p.child.try_wait().unwrap();
    assert!(
        ended.is_none(),
        "the program ended: {ended:?}\n{}",
        o.stderr
    );
    support::assert_running_untraced(pid);
}
