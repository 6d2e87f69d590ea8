//! User stack traces by CFI on a fixture without frame pointers
//! (tests/fixtures/ustack, -O2 -fomit-frame-pointer): from a syscall entry
//! stop inside libc and through a signal handler, `print_ubacktrace()`
//! lists the exact caller chain up to `main`; gdb's `bt` is the oracle
//! where gdb is installed.

mod support;

use support::{fixture, have, run, utap};

/// The frames of the block after the line `title` in `print_ubacktrace`
/// output: (address, name, module) per ` 0xADDR : name+0xOFF/0xSIZE [mod]`.
fn block(out: &str, title: &str) -> Vec<(String, String, String)> {
    let mut lines = out.lines().skip_while(|l| *l != title).skip(1);
    let mut frames = Vec::new();
    for l in lines.by_ref() {
        let Some(rest) = l.strip_prefix(' ') else {
            break;
        };
        let (addr, data) = rest.split_once(" : ").expect("frame line");
        let (sym, module) = data.rsplit_once(" [").expect("module");
        let name = sym.split('+').next().unwrap().to_string();
        frames.push((
            addr.to_string(),
            name,
            module.trim_end_matches(']').to_string(),
        ));
    }
    frames
}

/// Names of the frames in the fixture itself, in order, up to `main`.
fn fixture_chain(frames: &[(String, String, String)]) -> Vec<String> {
    let exe = std::fs::canonicalize(fixture("ustack")).unwrap();
    let mut names = Vec::new();
    for (_, name, module) in frames {
        if std::path::Path::new(module) == exe {
            names.push(name.clone());
            if name == "main" {
                break;
            }
        }
    }
    names
}

const SCRIPT: &str = r#"
probe syscall.getppid {
  if (execname() == "ustack") {
    println("getppid"); print_ubacktrace()
    bt = ubacktrace()
    println("ustack"); print_ustack(bt)
    printf("sprint %d\n", sprint_ubacktrace() == sprint_ustack(bt))
    printf("bt %s\n", bt)
    printf("callers %s\n", ucallers(2))
    printf("sym %s %s %s\n", usymname(ustack(1)), umodname(ustack(1)), usymdata(ustack(1)))
    println("brief"); print_ubacktrace_brief()
  }
}
probe syscall.getuid {
  if (execname() == "ustack") { println("getuid"); print_ubacktrace() }
}
"#;

fn traced() -> String {
    let out = run(utap(SCRIPT, &["-c", &fixture("ustack")]));
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.stdout
}

#[test]
fn syscall_entry_backtrace_lists_callers_up_to_main() {
    let out = traced();
    let frames = block(&out, "getppid");
    assert!(frames[0].2.contains("libc"), "first frame in libc: {out}");
    assert_eq!(
        fixture_chain(&frames),
        ["level3", "level2", "level1", "main"],
        "{out}"
    );
    // The same stack through every function.
    assert_eq!(block(&out, "ustack"), frames, "{out}");
    assert!(out.contains("sprint 1\n"), "{out}");
    let addrs: Vec<&str> = frames.iter().map(|f| f.0.as_str()).collect();
    assert!(out.contains(&format!("bt {}\n", addrs.join(" "))), "{out}");
    assert!(
        out.contains(&format!("callers {} {}\n", addrs[1], addrs[2])),
        "{out}"
    );
    let data = "level3+0x";
    let sym_line = out.lines().find(|l| l.starts_with("sym ")).unwrap();
    assert!(
        sym_line.starts_with(&format!("sym level3 ustack {data}")),
        "{sym_line}"
    );
    let brief: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "brief")
        .skip(1)
        .take(frames.len())
        .collect();
    assert!(brief[1].starts_with("level3+0x"), "{out}");
    assert!(brief.iter().any(|l| l.starts_with("main+0x")), "{out}");
}

#[test]
fn backtrace_goes_through_a_signal_frame() {
    let out = traced();
    let frames = block(&out, "getuid");
    let names: Vec<&str> = frames.iter().map(|f| f.1.as_str()).collect();
    assert_eq!(
        fixture_chain(&frames),
        ["handler_leaf", "handler", "sig2", "sig1", "main"],
        "{out}"
    );
    // Between the handler and the code the signal interrupted: the signal
    // trampoline in libc.
    let h = names.iter().position(|n| *n == "handler").unwrap();
    assert!(frames[h + 1].2.contains("libc"), "{out}");
}

/// gdb's `bt` at the same syscall stops: the frames of the fixture (those
/// without source, from no library) in the same order.
#[test]
fn backtraces_equal_gdbs() {
    if !have("gdb") {
        eprintln!("skipped: gdb not installed (the chain is still checked by name)");
        return;
    }
    let gdb = support::command("gdb")
        .args(["-batch", "-nx", "-ex", "handle SIGUSR1 nostop noprint pass"])
        .args(["-ex", "catch syscall getppid", "-ex", "run", "-ex", "bt"])
        .args([
            "-ex",
            "delete",
            "-ex",
            "catch syscall getuid",
            "-ex",
            "continue",
        ])
        .args(["-ex", "bt", "-ex", "kill"])
        .arg(fixture("ustack"))
        .output()
        .expect("gdb");
    let text = String::from_utf8_lossy(&gdb.stdout);
    let mut stacks: Vec<Vec<String>> = Vec::new();
    for l in text.lines().filter(|l| l.starts_with('#')) {
        if l.starts_with("#0 ") {
            stacks.push(Vec::new());
        }
        if l.contains(" at ") || l.contains(" from ") || l.contains("<signal handler") {
            continue;
        }
        let name = l
            .split(" in ")
            .nth(1)
            .unwrap_or(l.split_whitespace().nth(1).unwrap());
        stacks
            .last_mut()
            .unwrap()
            .push(name.split_whitespace().next().unwrap().to_string());
    }
    assert_eq!(stacks.len(), 2, "gdb output: {text}");
    let out = traced();
    assert_eq!(fixture_chain(&block(&out, "getppid")), stacks[0], "{text}");
    assert_eq!(fixture_chain(&block(&out, "getuid")), stacks[1], "{text}");
}

/// A thread sampled inside `clock_gettime`'s vDSO code: the vDSO (no
/// file; read from the process's memory) gives the innermost frame its
/// symbol and its CFI, so the stack continues through libc to `main`.
#[test]
fn vdso_frames_are_named_and_unwound_through() {
    let exe = fixture("vdso_spin");
    let script = "probe timer.profile { s = sprint_ubacktrace()\n\
                  if (isinstr(s, \"[vdso]\")) { print(s); println(\"--\"); exit() } }";
    let o = run(utap(script, &["-c", &format!("{exe} 3")]));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let frames = block(&format!("vdso\n{}", o.stdout), "vdso");
    let names: Vec<&str> = frames.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(frames[0].2, "vdso", "{}", o.stdout);
    assert!(names[0].contains("clock_gettime"), "{}", o.stdout);
    let spin = names.iter().position(|n| *n == "spin");
    assert!(
        spin.is_some() && names[spin.unwrap() + 1] == "main",
        "{}",
        o.stdout
    );
}
