//! The sampling profiler (`timer.profile`, examples/profile.stp) and
//! backtraces through return-probe trampolines.

mod support;

use support::{fixture, run, utap};

fn example() -> String {
    format!("{}/examples/profile.stp", env!("CARGO_MANIFEST_DIR"))
}

/// Runs examples/profile.stp on `cmd`; its folded lines as (stack, count).
fn profile(cmd: &str) -> Vec<(String, u64)> {
    let mut c = support::command(support::utap_bin());
    c.arg(example()).args(["-c", cmd]);
    let out = run(c);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.stdout
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect("`stack count`");
            assert!(!stack.contains(' '), "frames joined by ';': {l}");
            (stack.to_string(), n.parse().expect("a count"))
        })
        .collect()
}

/// The stack from `from` on (the frames above it are the C library's
/// start-up, which differ between systems).
fn from(stack: &str, from: &str) -> Option<String> {
    let frames: Vec<&str> = stack.split(';').collect();
    let at = frames.iter().position(|f| *f == from)?;
    Some(frames[at..].join(";"))
}

#[test]
fn folded_stacks_put_the_hot_chain_first() {
    let lines = profile(&format!("{} 800", fixture("profile")));
    assert!(!lines.is_empty(), "no samples");
    let (top, n) = &lines[0];
    assert_eq!(
        from(top, "main").as_deref(),
        Some("main;a;b;spin"),
        "{lines:#?}"
    );
    assert!(*n > 5, "{lines:#?}");
    let counts: Vec<u64> = lines.iter().map(|l| l.1).collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{lines:#?}");
    // Each stack once: samples at different pcs of a function fold together.
    let mut stacks: Vec<&str> = lines.iter().map(|l| l.0.as_str()).collect();
    stacks.dedup();
    assert_eq!(stacks.len(), lines.len(), "{lines:#?}");
}

/// The stacks kept until the end probe come from a child of the shell
/// that exec'd the program and is gone by then: they are named from the
/// program's modules, not left as hex for want of the shell's.
#[test]
fn stacks_of_a_command_run_through_a_shell_are_named() {
    let cmd = format!("sh -c '{} 800 > /dev/null; true'", fixture("profile"));
    let lines = profile(&cmd);
    assert!(!lines.is_empty(), "no samples");
    assert_eq!(
        from(&lines[0].0, "main").as_deref(),
        Some("main;a;b;spin"),
        "{lines:#?}"
    );
}

#[test]
fn every_running_thread_is_sampled_in_its_own_context() {
    let lines = profile(&format!("{} 800 1", fixture("profile")));
    let top: Vec<Option<String>> = lines
        .iter()
        .take(2)
        .map(|(s, _)| from(s, "main").or(from(s, "worker")))
        .collect();
    assert!(top.contains(&Some("main;a;b;spin".into())), "{lines:#?}");
    assert!(top.contains(&Some("worker;a;b;spin".into())), "{lines:#?}");
}

/// A sleeping process is not sampled (an on-CPU profile), and sampling
/// never disturbs its sleep.
#[test]
fn sleeping_threads_are_skipped() {
    let script = "global n probe timer.profile.hz(200) { n++ } probe end { printf(\"%d\\n\", n) }";
    let started = std::time::Instant::now();
    let out = run(utap(script, &["-c", "sleep 1"]));
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(started.elapsed().as_secs_f64() >= 1.0);
    let n: u64 = out.stdout.trim().parse().expect("count");
    // 200 over the second if it were sampled; only its start-up runs.
    assert!(n < 40, "{n} samples of a sleeping process");
}

/// As above, through a stub: level1 runs twice from one call site (one
/// stub, made at the first call). Both backtraces from getppid show main
/// as without the probe.
#[test]
fn backtraces_see_through_return_stubs() {
    let exe = fixture("ustack");
    let twice = format!("{exe} twice");
    let bt = "probe syscall.getppid { if (execname() == \"ustack\") print_ubacktrace() }";
    let plain = run(utap(bt, &["-c", &twice]));
    assert_eq!(plain.status, 0, "{}", plain.stderr);
    let with_return = format!(
        "{bt}\nprobe process(\"{exe}\").function(\"level1\").return {{ println(\"returned\") }}"
    );
    let hijacked = run(utap(&with_return, &["-v", "-c", &twice]));
    assert_eq!(hijacked.status, 0, "{}", hijacked.stderr);
    assert!(
        hijacked
            .stderr
            .contains("utap: returns: 2 through their stubs, 0 through the trampoline"),
        "{}",
        hijacked.stderr
    );
    let expected = frame_names(&plain.stdout);
    let main_calls = expected.windows(2).filter(|w| w == &["level1", "main"]);
    assert_eq!(main_calls.count(), 2, "{}", plain.stdout);
    assert_eq!(
        frame_names(&hijacked.stdout),
        expected,
        "{}",
        hijacked.stdout
    );
}

fn frame_names(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix(' '))
        .map(|l| {
            let data = l.split_once(" : ").expect("frame line").1;
            data.split('+').next().unwrap().to_string()
        })
        .collect()
}

/// With a `.return` probe on level1, level1's return address on the
/// stack is the trampoline; a backtrace from a syscall below it must
/// still show main (and beyond) as without the probe.
#[test]
fn backtraces_see_through_return_trampolines() {
    let exe = fixture("ustack");
    let bt = "probe syscall.getppid { if (execname() == \"ustack\") print_ubacktrace() }";
    let plain = run(utap(bt, &["-c", &exe]));
    assert_eq!(plain.status, 0, "{}", plain.stderr);
    let with_return = format!(
        "{bt}\nprobe process(\"{exe}\").function(\"level1\").return {{ println(\"returned\") }}"
    );
    // The trampoline itself, not the return address's stub.
    let mut cmd = utap(&with_return, &["-c", &exe]);
    cmd.env("UTAP_RETURN_STUBS", "0");
    let hijacked = run(cmd);
    assert_eq!(hijacked.status, 0, "{}", hijacked.stderr);
    assert!(
        hijacked.stdout.ends_with("returned\n"),
        "{}",
        hijacked.stdout
    );
    let expected = frame_names(&plain.stdout);
    assert!(
        expected.windows(2).any(|w| w == ["level1", "main"]),
        "{}",
        plain.stdout
    );
    assert_eq!(
        frame_names(&hijacked.stdout),
        expected,
        "{}",
        hijacked.stdout
    );
}
