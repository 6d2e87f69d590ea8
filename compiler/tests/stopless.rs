//! Which probe handlers the runtime may run without a ptrace stop
//! (`utap_compiler::stopless`, the seccomp-notification route of issue 16):
//! conservative — registers, stacks, symbols and guru code keep the stop.

use utap_compiler::check::{self, CheckOptions};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::stopless::stopless_probes;

fn stopless(src: &str, guru: bool) -> Vec<bool> {
    let mut map = utap_compiler::source::SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids).unwrap();
    let o = CheckOptions {
        guru,
        ..Default::default()
    };
    let program = check::check(&mut map, script, &o, &mut ids)
        .unwrap_or_else(|d| panic!("{}", utap_compiler::diag::render_all(&d, &map, false)))
        .program;
    stopless_probes(&program)
}

#[test]
fn counting_by_name_with_arguments_and_strings_needs_no_stop() {
    let src = r#"
global n
probe process.syscall { n[syscall_name($syscall), execname(), pid(), tid()] += $arg1 }
probe syscall.openat { printf("%s %s\n", user_string($arg2), argstr) }
"#;
    assert_eq!(stopless(src, false), vec![true, true]);
}

#[test]
fn registers_stacks_and_symbols_need_a_stop_also_through_functions() {
    let src = r#"
function where() { return usymname(uaddr()) }
function deeper() { return where() }
function fact(n) { return n <= 1 ? 1 : n * fact(n - 1) }
probe process.syscall { println(u_register("rip")) }
probe process.syscall { println(deeper()) }
probe process.syscall { println(sprint_ubacktrace()) }
probe process.syscall { if (ustack(0) != 0) println(1) }
probe process.syscall { println(fact(3)) }
"#;
    // A recursive function is conservatively not stopless.
    assert_eq!(stopless(src, false), vec![false; 5]);
}

#[test]
fn conditions_count_too() {
    let src = "probe process.syscall if (uaddr() != 0) { }";
    assert_eq!(stopless(src, false), vec![false]);
}

#[test]
fn guru_programs_always_stop() {
    let src = "probe process.syscall { $arg1 = 0 }\nprobe process.syscall { }";
    assert_eq!(stopless(src, true), vec![false, false]);
}
