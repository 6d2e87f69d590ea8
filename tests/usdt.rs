//! USDT marker probes end to end: `process(P).mark(..)` on the fixture
//! with markers of every argument form (tests/fixtures/usdt/usdt_forms.c,
//! built when <sys/sdt.h> is installed) and on Debian's python3.11; the
//! is-enabled semaphore read from /proc/PID/mem after every kind of
//! ending. Each test is skipped with a message when its program is absent.
//! (bpftrace, the other oracle, needs tracefs and kernel uprobes, which
//! this VM's container does not have: its `usdt:` comparison is not here.)

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::{Running, command, finish, fixture, run, status_field, utap};
use utap_runtime::elf::sdt::sdt_notes;
use utap_runtime::elf::{ElfImage, read_maps};

const PYTHON: &str = "/usr/bin/python3.11";

/// A command with arguments, ready for [`run`].
fn cmd(program: &str, args: &[&str]) -> std::process::Command {
    let mut c = command(program);
    c.args(args);
    c
}

fn forms() -> Option<String> {
    let path = fixture("usdt_forms");
    if Path::new(&path).exists() {
        Some(path)
    } else {
        eprintln!("skipped: usdt_forms fixture not built (install systemtap-sdt-dev)");
        None
    }
}

/// The run-time address of marker `name`'s semaphore in process `pid`.
fn semaphore_addr(pid: i32, exe: &str, name: &str) -> u64 {
    let notes = sdt_notes(&std::fs::read(exe).unwrap()).unwrap();
    let note = notes.iter().find(|n| n.name == name).expect("marker");
    assert_ne!(note.semaphore, 0, "{name} has a semaphore");
    let image = ElfImage::open(Path::new(exe)).unwrap();
    let maps = read_maps(pid).unwrap();
    let bias = image.bias(&maps).expect("mapped");
    note.semaphore.wrapping_add(bias)
}

/// The 16-bit semaphore, read from /proc/PID/mem.
fn semaphore(pid: i32, addr: u64) -> u16 {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8; 2];
    f.read_exact_at(&mut b, addr).unwrap();
    u16::from_le_bytes(b)
}

const FORMS: &str = r#"
probe process("EXE").mark("regs") {
    printf("%s %d %d %d %d %d %d %d %d %d\n", pp(), $arg1, $arg2, $arg3, $arg4,
           $arg5, $arg6, $arg7, $arg8, $arg9)
}
probe process("EXE").provider("demo").mark("memory") {
    printf("%s %s %d %d %d %d %d %d %d %d\n", $$provider, $$name, $arg1, $arg2,
           $arg3, $arg4, $arg5, $arg6, $arg7, $arg8)
}
probe process("EXE").mark("many") {
    printf("many %d %d %d %d %d %d %d %d %d %d %d %d\n", $arg1, $arg2, $arg3,
           $arg4, $arg5, $arg6, $arg7, $arg8, $arg9, $arg10, $arg11, $arg12)
    printf("%s\n", $$parms)
}
probe process.mark("guard*") { printf("%s %s %d\n", pp(), probefunc(), $arg1) }
"#;

#[test]
fn every_argument_form_is_decoded_exactly() {
    let Some(exe) = forms() else { return };
    let o = run(utap(
        &FORMS.replace("EXE", &exe),
        &["-c", &format!("{exe} 2")],
    ));
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    let regs = format!(
        "process(\"{exe}\").mark(\"regs\") 1234605616436508552 1432778632 30600 136 119 -2 -2 -2 -2"
    );
    let memory = "demo memory -300 1000 -300 -300 -7 -20 -1 200";
    let many = "many 1 2 3 4 -5 -6 -7 -8 9 10 11 12";
    let parms = "$arg1=0x1 $arg2=0x2 $arg3=0x3 $arg4=0x4 $arg5=0xfffffffffffffffb \
                 $arg6=0xfffffffffffffffa $arg7=0xfffffffffffffff9 $arg8=0xfffffffffffffff8 \
                 $arg9=0x9 $arg10=0xa $arg11=0xb $arg12=0xc";
    let guarded = |i| format!("process(\"{exe}\").mark(\"guarded\") main {i}");
    let mut want = String::new();
    for i in 0..2 {
        for line in [&regs, memory, many, parms, &guarded(i)] {
            want.push_str(line);
            want.push('\n');
        }
    }
    // The fixture's own line: the guarded marker ran only while enabled.
    want.push_str("guarded=2\n");
    let mut got: Vec<&str> = o.stdout.lines().collect();
    let fixture_line = got.iter().position(|l| l.starts_with("guarded=")).unwrap();
    let line = got.remove(fixture_line);
    got.push(line);
    assert_eq!(got.join("\n") + "\n", want);
}

/// An end probe run by a marker probe's `exit()` is not the marker:
/// `pp()` is its own.
#[test]
fn end_probe_after_exit_in_a_marker_probe_has_its_own_pp() {
    let Some(exe) = forms() else { return };
    let script = format!(
        "probe process(\"{exe}\").mark(\"many\") {{ printf(\"%s\\n\", pp()); exit() }}\n\
         probe end {{ printf(\"%s\\n\", pp()) }}"
    );
    let o = run(utap(&script, &["-c", &format!("{exe} 1")]));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let got: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| !l.starts_with("guarded="))
        .collect();
    assert_eq!(
        got,
        [format!("process(\"{exe}\").mark(\"many\")").as_str(), "end"]
    );
}

#[test]
fn untraced_the_guarded_marker_does_not_run() {
    let Some(exe) = forms() else { return };
    let o = run(cmd(&exe, &["3"]));
    assert_eq!(o.stdout, "guarded=0\n");
}

/// Attaches to a running fixture, ends the session in the given way, and
/// checks the semaphore went 0 -> (probed) -> 0 and the program runs on
/// untraced.
fn semaphore_restored(ending: &str, script_tail: &str, extra: &[&str]) {
    let Some(exe) = forms() else { return };
    let mut prog = Running::ready("usdt_forms", &["0", "5"]);
    let pid = prog.pid();
    let addr = semaphore_addr(pid, &exe, "guarded");
    assert_eq!(semaphore(pid, addr), 0, "before tracing");
    let script = format!(
        "global n\nprobe process(\"{exe}\").mark(\"guarded\") {{ n++; {script_tail} }}\n\
         probe end {{ printf(\"hits>=3 %d\\n\", n >= 3) }}"
    );
    let mut args = vec!["-x".to_string(), pid.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = utap(&script, &argv).spawn().unwrap();
    let utap_pid = child.id() as i32;
    if ending == "SIGINT" {
        // Wait until the semaphore is enabled (the session attached and
        // placed the probe), let a few hits happen, then interrupt.
        let start = Instant::now();
        while semaphore(pid, addr) == 0 && start.elapsed() < support::LIMIT {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(semaphore(pid, addr), 1, "enabled while traced");
        std::thread::sleep(Duration::from_millis(200));
        unsafe { libc::kill(utap_pid, libc::SIGINT) };
    }
    let o = finish(child);
    if ending == "error" {
        assert!(o.stderr.contains("ERROR: enough"), "{}", o.stderr);
    } else {
        assert!(
            o.stdout.contains("hits>=3 1"),
            "{ending}: {}{}",
            o.stdout,
            o.stderr
        );
    }
    assert_eq!(semaphore(pid, addr), 0, "{ending}: back to 0 after detach");
    assert!(prog.exited().is_none(), "{ending}: the program runs on");
    assert_eq!(status_field(pid, "TracerPid").as_deref(), Some("0"));
    assert_ne!(support::state(pid), 't', "{ending}: not left stopped");
}

#[test]
fn semaphore_is_back_after_exit() {
    semaphore_restored("exit", "if (n == 3) exit()", &[]);
}

#[test]
fn semaphore_is_back_after_an_error() {
    semaphore_restored("error", "if (n == 3) error(\"enough\")", &[]);
}

#[test]
fn semaphore_is_back_after_the_time_limit() {
    semaphore_restored("-T", "", &["-T", "1"]);
}

#[test]
fn semaphore_is_back_after_sigint() {
    semaphore_restored("SIGINT", "", &[]);
}

#[test]
fn listing_shows_each_marker_and_its_arguments() {
    let Some(exe) = forms() else { return };
    let o = run(cmd(
        support::utap_bin(),
        &["-L", &format!("process(\"{exe}\").mark(\"*\")")],
    ));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let args = |n: usize| {
        (1..=n)
            .map(|i| format!(" $arg{i}:long"))
            .collect::<String>()
    };
    let want: String = [("guarded", 1), ("many", 12), ("memory", 8), ("regs", 9)]
        .iter()
        .map(|(m, n)| format!("process(\"{exe}\").mark(\"{m}\"){}\n", args(*n)))
        .collect();
    assert_eq!(o.stdout, want);
    let o = run(cmd(
        support::utap_bin(),
        &[
            "-l",
            &format!("process(\"{exe}\").provider(\"demo\").mark(\"m*\")"),
        ],
    ));
    assert_eq!(
        o.stdout,
        format!(
            "process(\"{exe}\").provider(\"demo\").mark(\"many\")\n\
             process(\"{exe}\").provider(\"demo\").mark(\"memory\")\n"
        )
    );
}

#[test]
fn bad_marker_points_and_arguments_are_located_errors() {
    let Some(exe) = forms() else { return };
    let o = run(utap(
        &format!("probe process(\"{exe}\").mark(\"guardd\") {{ }}"),
        &["-p2"],
    ));
    assert_eq!(o.status, 1);
    assert!(
        o.stderr.contains("no match for mark 'guardd'"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("did you mean 'guarded'?"), "{}", o.stderr);
    let o = run(utap(
        &format!("probe process(\"{exe}\").mark(\"guarded\") {{ print($arg2) }}"),
        &["-p2"],
    ));
    assert_eq!(o.status, 1);
    assert!(
        o.stderr.contains("target-symbol requires debuginfo"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("the marker has 1 argument ($arg1)"),
        "{}",
        o.stderr
    );
}

/// A marker in a library loaded by dlopen, in the program and in its fork
/// child (which inherits the enabled semaphore and is traced too).
#[test]
fn library_markers_apply_after_dlopen_and_in_fork_children() {
    let Some(_) = forms() else { return };
    let lib = fixture("libusdt_lib.so");
    assert_library_ticks_counted(&format!(r#"process("{lib}").mark("libtick")"#));
}

/// Runs `usdt_dl` (parent and fork child each fire the library's marker
/// three times) with `point` counted per process: both are seen, with
/// their arguments.
fn assert_library_ticks_counted(point: &str) {
    let (exe, lib) = (fixture("usdt_dl"), fixture("libusdt_lib.so"));
    let script = format!(
        "global n, s\nprobe {point} {{\n\
         w = pid() == target() ? \"parent\" : \"child\"; n[w]++; s[w] += $arg1 }}\n\
         probe end {{ foreach (k in n-) printf(\"utap %s %d %d\\n\", k, n[k], s[k]) }}"
    );
    let o = run(utap(&script, &["-c", &format!("{exe} {lib} 3")]));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let mut lines: Vec<&str> = o.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "child fired=3",
            "parent fired=3",
            "utap child 3 303",
            "utap parent 3 3"
        ]
    );
}

/// `process("EXE").library("LIB").mark(..)`: a library's markers in the
/// processes of one program, with LIB as a file name (matched at run
/// time, the library is dlopened after exec) or as a path (its markers are
/// checked at elaboration, with "did you mean").
#[test]
fn library_markers_of_one_program_by_file_name_or_path() {
    let Some(_) = forms() else { return };
    let (exe, lib) = (fixture("usdt_dl"), fixture("libusdt_lib.so"));
    assert_library_ticks_counted(&format!(
        r#"process("{exe}").library("libusdt_lib.so").provider("demo").mark("lib*")"#
    ));
    let bad = format!("probe process(\"{exe}\").library(\"{lib}\").mark(\"libtic\") {{ }}");
    let o = run(utap(&bad, &["-p2"]));
    assert_eq!(o.status, 1, "{}", o.stdout);
    assert!(
        o.stderr
            .contains(&format!("no match for mark 'libtic' in {lib}")),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("did you mean 'libtick'?"), "{}", o.stderr);
}

/// CPython 3.11 fires `function__entry` only on its tracing path (a
/// profile or trace function set), so the script sets a no-op profiler.
const PY_SCRIPT: &str = "import sys
sys.setprofile(lambda *a: None)
def greet(n):
    return n + 1
def main():
    for i in range(3):
        greet(i)
main()
";

const PY_PROBE: &str = r#"
probe process("/usr/bin/python3.11").mark("function__entry") {
    file = user_string($arg1)
    if (isinstr(file, "usdt_calls.py"))
        printf("%s %s:%d\n", user_string($arg2), file, $arg3)
}
"#;

#[test]
fn python_function_entry_markers_print_the_calls() {
    if !Path::new(PYTHON).exists() {
        eprintln!("skipped: {PYTHON} absent");
        return;
    }
    let dir = std::env::temp_dir().join(format!("utap-usdt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let py = dir.join("usdt_calls.py");
    std::fs::write(&py, PY_SCRIPT).unwrap();
    let py = py.to_string_lossy().into_owned();
    let o = run(utap(PY_PROBE, &["-c", &format!("{PYTHON} {py}")]));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status, 0, "{}", o.stderr);
    let want = format!("main {py}:5\ngreet {py}:3\ngreet {py}:3\ngreet {py}:3\n");
    assert_eq!(o.stdout, want);
}

#[test]
fn python_semaphore_is_back_to_zero_after_detach() {
    if !Path::new(PYTHON).exists() {
        eprintln!("skipped: {PYTHON} absent");
        return;
    }
    let code = "import sys, time\nsys.setprofile(lambda *a: None)\nprint('ready', flush=True)\n\
                def tick():\n    time.sleep(0.005)\nwhile True:\n    tick()\n";
    let mut c = command(PYTHON);
    c.args(["-c", code]).stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let prog = Running { child };
    let pid = prog.pid();
    let addr = semaphore_addr(pid, PYTHON, "function__entry");
    assert_eq!(
        semaphore(pid, addr),
        0,
        "untraced, python's markers are off"
    );
    let script = r#"global n
probe process("/usr/bin/python3.11").mark("function__entry") {
    if (user_string($arg2) == "tick" && ++n == 5) exit()
}
probe end { printf("ticks %d\n", n) }"#;
    let o = finish(utap(script, &["-x", &pid.to_string()]).spawn().unwrap());
    assert_eq!(o.stdout, "ticks 5\n", "{}", o.stderr);
    assert_eq!(semaphore(pid, addr), 0, "back to 0 after detach");
    assert_eq!(status_field(pid, "TracerPid").as_deref(), Some("0"));
}

/// Runs `script` (EXE: the fixture `exe`) on `cmdline` (EXE too) on the
/// route `inproc` chooses ([`support::on_route`]).
fn on_route(exe: &str, script: &str, cmdline: &str, inproc: bool) -> (i32, Vec<String>, String) {
    let path = fixture(exe);
    let script = script.replace("EXE", &path);
    support::on_route(&script, &cmdline.replace("EXE", &path), inproc)
}

/// The script prints the same on both routes, in the program on the
/// data plane's; its sorted lines.
fn same_in_the_program(exe: &str, script: &str, cmdline: &str) -> (Vec<String>, String) {
    let (s0, tracer, e0) = on_route(exe, script, cmdline, false);
    let (s1, inproc, err) = on_route(exe, script, cmdline, true);
    assert_eq!((s0, s1), (0, 0), "{e0}{err}");
    assert_eq!(tracer, inproc, "{err}");
    assert!(
        err.contains("utap: 1 of 1 probe(s) run in the program"),
        "{err}"
    );
    (inproc, err)
}

#[test]
fn memory_operands_are_read_in_the_program_as_at_a_stop() {
    if forms().is_none() {
        return;
    }
    // base+disp of both signs and sizes, base+index*scale: the marker
    // entry passes each address, the handler reads it (safe load).
    let script = r#"
probe process("EXE").provider("demo").mark("memory") { printf("m %d %d %d %d\n", $arg1, $arg2, $arg3, $arg4) }
"#;
    let (lines, err) = same_in_the_program("usdt_forms", script, "EXE 3");
    assert_eq!(
        lines
            .iter()
            .filter(|l| *l == "m -300 1000 -300 -300")
            .count(),
        3
    );
    assert!(
        err.contains("1 function entries patched (0 refused)"),
        "{err}"
    );
    let mixed = r#"probe process("EXE").provider("demo").mark("mixed") { printf("mixed %d %d\n", $arg2, $arg3) }"#;
    let (lines, _) = same_in_the_program("usdt", mixed, "EXE");
    assert!(lines.iter().any(|l| l == "mixed 10 -1"), "{lines:?}");
}

#[test]
fn a_marker_left_on_its_int3_gives_in_process_handlers_the_address() {
    // A branch lands after usdt_tight's `nop`: the site is refused and
    // the in-process handler runs at the tracer's stop.
    let path = fixture("usdt_tight");
    if !Path::new(&path).exists() {
        eprintln!("skipped: usdt_tight fixture not built (install systemtap-sdt-dev)");
        return;
    }
    let script = r#"probe process("EXE").mark("tight") { println("tight ", $arg1) }"#;
    let (lines, err) = same_in_the_program("usdt_tight", script, "EXE 5");
    assert_eq!(
        lines,
        [
            "tight -10",
            "tight -3",
            "tight 11",
            "tight 18",
            "tight 4",
            "tight sum 20"
        ]
    );
    assert!(
        err.contains("0 function entries patched (1 refused)"),
        "{err}"
    );
    assert!(err.contains("5 hit(s) served by in-process code"), "{err}");
}

#[test]
fn arguments_at_symbols_are_read_in_the_program() {
    if forms().is_none() {
        return;
    }
    // `-4@negative(%rip)` and `-8@table+8(%rip)`: the tracer resolves the
    // symbols with the module's bias when it offers the site.
    let script = r#"probe process("EXE").provider("demo").mark("memory") { printf("sym %d %d\n", $arg5, $arg6) }"#;
    let (lines, _) = same_in_the_program("usdt_forms", script, "EXE 2");
    assert_eq!(
        lines.iter().filter(|l| *l == "sym -7 -20").count(),
        2,
        "{lines:?}"
    );
}

#[test]
fn an_argument_kept_differently_by_two_markers_keeps_its_probe_in_the_tracer() {
    if forms().is_none() {
        return;
    }
    // regs' $arg1 is %rbx, memory's is 8(%rsp): one handler cannot read
    // both the same way.
    let script =
        r#"probe process("EXE").mark("regs"), process("EXE").mark("memory") { println($arg1) }"#;
    let (status, lines, err) = on_route("usdt_forms", script, "EXE 1", true);
    assert_eq!(status, 0, "{err}");
    assert!(lines.iter().any(|l| l == "-300"), "{lines:?}");
    assert!(
        err.contains("reads $arg1, which its markers keep in different places"),
        "{err}"
    );
}
