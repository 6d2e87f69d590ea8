//! The checker's rules, each with the exact diagnostic a user sees, plus
//! golden `-p2` and `-L` outputs and the stdlib.

use utap_compiler::check::{self, CheckOptions, dump::dump, listing};
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::program::*;
use utap_compiler::source::SourceMap;

fn opts(guru: bool) -> CheckOptions {
    CheckOptions {
        guru,
        ..Default::default()
    }
}

/// Checks `src`: the program, or the rendered diagnostics.
fn check_with(src: &str, o: &CheckOptions) -> Result<Program, String> {
    let mut map = SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids)
        .map_err(|d| utap_compiler::diag::render_all(&d, &map, false))?;
    check::check(&mut map, script, o, &mut ids)
        .map(|o| o.program)
        .map_err(|d| utap_compiler::diag::render_all(&d, &map, false))
}

/// Checks `src` with `-v`: the program and the warnings.
fn check_verbose(src: &str) -> (Program, Vec<String>) {
    let mut map = SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids).unwrap();
    let o = CheckOptions {
        verbose: 1,
        ..Default::default()
    };
    let out = check::check(&mut map, script, &o, &mut ids).unwrap();
    let warnings = out.warnings.iter().map(|d| d.to_string()).collect();
    (out.program, warnings)
}

/// `-l PATTERN` (`-L` with `vars`), on an empty file set.
fn list(pattern: &str, vars: bool) -> Result<String, Vec<utap_compiler::diag::Diagnostic>> {
    let mut map = SourceMap::new();
    let mut ids = NodeIds::default();
    listing::list(&mut map, pattern, vars, &CheckOptions::default(), &mut ids)
}

fn ok(src: &str) -> Program {
    check_with(src, &opts(false)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn whole_stdlib_checks() {
    let p = ok(
        "probe syscall.*, syscall.*.return { println(name, argstr) } probe signal.* { println(name) }",
    );
    assert!(p.probes.len() > 600, "{}", p.probes.len());
}

/// The first diagnostic as `headline` then `line:col label` per label.
fn first_diag(src: &str, guru: bool) -> Vec<String> {
    let mut map = SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let popts = ParseOptions {
        guru,
        ..Default::default()
    };
    let script = parse_file(&map, file, &popts, &mut ids)
        .unwrap_or_else(|d| panic!("{}", utap_compiler::diag::render_all(&d, &map, false)));
    let diags = match check::check(&mut map, script, &opts(guru), &mut ids) {
        Ok(_) => panic!("accepted: {src}"),
        Err(d) => d,
    };
    let d = &diags[0];
    let mut out = vec![d.to_string()];
    for (span, label) in &d.labels {
        let (l, c) = map.get(span.file).line_col(span.start as usize);
        out.push(format!("{l}:{c} {label}"));
    }
    if let Some(h) = &d.help {
        out.push(format!("help: {h}"));
    }
    out
}

macro_rules! diag_test {
    ($name:ident, $guru:expr, $src:expr, [$($line:expr),* $(,)?]) => {
        #[test]
        fn $name() {
            assert_eq!(first_diag($src, $guru), vec![$($line.to_string()),*]);
        }
    };
}

diag_test!(
    unknown_function_suggests_a_name,
    false,
    "probe begin { eexit() }",
    [
        "semantic error: unresolved function (similar: exit)",
        "1:15 no function 'eexit'",
        "help: did you mean 'exit'?"
    ]
);

diag_test!(
    wrong_arity,
    false,
    "function f(a) { return a }\nprobe begin { f(1, 2) }",
    [
        "semantic error: unresolved arity-2 function",
        "2:15 'f' takes 1 argument(s), given 2",
        "1:10 defined here"
    ]
);

diag_test!(
    builtin_wrong_arity,
    false,
    "probe begin { println(strlen()) }",
    [
        "semantic error: unresolved arity-0 function",
        "1:23 'strlen' takes 1 argument(s), given 0"
    ]
);

diag_test!(
    type_conflict_labels_both_sites,
    false,
    "global x\nprobe begin { x = 1 }\nprobe end { x = \"s\" }",
    [
        "semantic error: type mismatch (string vs. long)",
        "3:17 used as string here",
        "2:19 type was first inferred here (long)"
    ]
);

diag_test!(
    unknown_probe_point_did_you_mean,
    false,
    "probe process.syscal { }",
    [
        "semantic error: probe point mismatch at position 2 (alternatives: begin create end function library mark plt provider quiesce signal statement syscall thread)",
        "1:15 no probe point matches 'process.syscal'",
        "help: did you mean 'process.syscall'?"
    ]
);

diag_test!(
    context_variable_in_the_wrong_probe,
    false,
    "probe process.syscall { println($signal) }",
    [
        "semantic error: only \"process(PATH_OR_PID).signal\" supports $signal",
        "1:33 not available in this probe"
    ]
);

diag_test!(
    context_variable_in_begin,
    false,
    "probe begin { println($syscall) }",
    [
        "semantic error: only \"process(PATH_OR_PID).syscall\" and \"process(PATH_OR_PID).syscall.return\" support $syscall",
        "1:23 not available in this probe"
    ]
);

diag_test!(
    write_to_context_variable_needs_guru,
    false,
    "probe process.syscall.return { $return = -28 }",
    [
        "semantic error: write to target variable not permitted; need utap -g",
        "1:32 writing '$return' changes what the traced program sees"
    ]
);

diag_test!(
    read_only_context_variable,
    true,
    "probe process.syscall { $syscall = 0 }",
    [
        "semantic error: utrace '$syscall' variable is read-only",
        "1:25 '$syscall' can be read, not written"
    ]
);

diag_test!(
    return_at_a_syscall_entry_can_be_set_not_read,
    true,
    "probe process.syscall { x = $return }",
    [
        "semantic error: utrace '$return' variable is not available at a syscall entry",
        "1:29 '$return' can be set here (utap -g) to skip the call, not read",
        "help: read it in a .return probe"
    ]
);

diag_test!(
    arguments_at_a_syscall_entry_need_guru,
    false,
    "probe process.syscall { $arg3 = 2 }",
    [
        "semantic error: write to target variable not permitted; need utap -g",
        "1:25 writing '$arg3' changes what the traced program sees"
    ]
);

diag_test!(
    unknown_errno_name,
    false,
    "probe begin { println(errno_num(\"ENOSAPC\")) }",
    [
        "semantic error: unknown errno name 'ENOSAPC'",
        "1:33 errno_str() prints no such name",
        "help: names are upper case, as in errno(3): \"ENOSPC\""
    ]
);

diag_test!(
    lone_percent_at_the_end_of_a_format,
    false,
    "probe begin { printf(\"100%\") }",
    [
        "semantic error: trailing incomplete print format conversion",
        "1:22 ",
        "help: a percent sign is written %%"
    ]
);

#[test]
fn guru_writes_at_a_syscall_entry_are_accepted() {
    check_with(
        "probe process.syscall { $return = -1; $arg1 = $arg2 } probe syscall.write { $return = -errno_num(\"ENOSPC\") }",
        &opts(true),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    check_with(
        "probe process.syscall { stop(); stop(tid()); udelay(10); mdelay(1); raise(10) }",
        &opts(true),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

diag_test!(
    format_argument_count,
    false,
    "probe begin { printf(\"%d %s\\n\", 1) }",
    [
        "semantic error: Wrong number of args to formatted print operator",
        "1:15 the format takes 2 argument(s), given 1"
    ]
);

diag_test!(
    format_argument_type,
    false,
    "probe begin { printf(\"%d\\n\", \"one\") }",
    [
        "semantic error: type mismatch (string vs. long)",
        "1:30 used as string here"
    ]
);

diag_test!(
    assignment_to_stats,
    false,
    "global s\nprobe begin { s <<< 1; s = 2 }",
    [
        "semantic error: invalid type stat",
        "2:24 a statistics variable",
        "help: statistics only take values with <<< and are read with @count, @sum, @min, @max, @avg, @hist_*"
    ]
);

diag_test!(
    string_into_stats,
    false,
    "global s\nprobe begin { s <<< \"x\" }",
    [
        "semantic error: type mismatch (string vs. long)",
        "2:21 only numbers can be aggregated with <<<"
    ]
);

diag_test!(
    foreach_over_a_scalar,
    false,
    "global x\nprobe begin { x = 1; foreach (k in x) println(k) }",
    [
        "semantic error: inconsistent arity (1 vs 0)",
        "2:36 'x' used with 1 index(es) here",
        "2:15 arity 0 first inferred here"
    ]
);

diag_test!(
    array_without_global,
    false,
    "probe begin { a[1] = 1 }",
    [
        "semantic error: unresolved arity-1 global array a, missing global declaration?",
        "1:15 arrays must be declared global"
    ]
);

diag_test!(
    stats_local,
    false,
    "probe begin { s <<< 1 }",
    [
        "semantic error: stat locals not supported, missing global declaration?",
        "1:15 's' is used as statistics"
    ]
);

diag_test!(
    control_action_needs_guru,
    false,
    "probe process.syscall { stop() }",
    [
        "semantic error: function 'stop' is a control action; need utap -g",
        "1:25 changes what the traced program does"
    ]
);

diag_test!(
    embedded_c_is_rejected,
    true,
    "function f() %{ return 1; %}\nprobe begin { f() }",
    [
        "semantic error: embedded C code is not supported by utap",
        "1:14 %{ ... %} blocks run kernel C code in SystemTap"
    ]
);

diag_test!(
    cast_without_a_module_is_located,
    false,
    "probe begin { println(@cast(0, \"task_struct\")->pid) }",
    [
        "semantic error: @cast(.., \"task_struct\") needs a module",
        "1:23 in the module's debug information",
        "help: give the program or library as the third argument, or use @cast in a function probe of it"
    ]
);

diag_test!(
    dwarf_variable_is_rejected,
    false,
    "probe process.syscall { println($task->pid) }",
    [
        "semantic error: target variable '$task' is not supported by utap",
        "1:33 DWARF variables need kernel debug information",
        "help: utap's context variables are $syscall, $arg1..$arg6, $return, $signal, $code"
    ]
);

diag_test!(
    array_modified_in_foreach,
    false,
    "global a\nprobe begin { a[1] = 1; foreach (k in a) delete a[k] }",
    [
        "semantic error: variable 'a' modified during 'foreach' iteration",
        "2:49 modified here"
    ]
);

diag_test!(
    invalid_syscall_argument,
    false,
    "probe process.syscall { println($arg7) }",
    [
        "semantic error: invalid syscall argument number (1-6)",
        "1:33 the arguments are $arg1 .. $arg6"
    ]
);

diag_test!(
    unresolved_type,
    false,
    "global a, b\nprobe begin { a = b }",
    [
        "semantic error: unresolved type",
        "1:8 the type of global 'a' cannot be inferred"
    ]
);

diag_test!(
    alias_loop,
    false,
    "probe a = b { }\nprobe b = a { }\nprobe a { }",
    [
        "semantic error: Recursive loop in alias expansion of a",
        "2:11 this alias expands to itself",
        "1:1 alias defined here"
    ]
);

diag_test!(
    pid_one_is_rejected,
    false,
    "probe process(1).begin { }",
    [
        "semantic error: process pid must be greater than 1",
        "1:7 pid 1 (init) cannot be traced"
    ]
);

diag_test!(
    probe_condition_calls_function,
    false,
    "function f() { return 1 }\nprobe begin if (f()) { }",
    [
        "semantic error: probe condition must not reference function",
        "2:17 conditions may call only side-effect-free builtins"
    ]
);

/// Every builtin called anywhere in the program.
fn builtins_called(p: &Program) -> Vec<&'static str> {
    fn walk(e: &Expr, out: &mut Vec<&'static str>) {
        match &e.kind {
            ExprKind::Builtin { name, args } => {
                out.push(name);
                args.iter().for_each(|a| walk(a, out));
            }
            ExprKind::Assign { value, .. } => walk(value, out),
            ExprKind::Call { args, .. } | ExprKind::Print { args, .. } => {
                args.iter().for_each(|a| walk(a, out))
            }
            ExprKind::Binary { lhs, rhs, .. } => {
                walk(lhs, out);
                walk(rhs, out);
            }
            ExprKind::IncDec {
                target: LValue::Elem { keys, .. },
                ..
            }
            | ExprKind::Load(LValue::Elem { keys, .. }) => keys.iter().for_each(|k| walk(k, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for pr in &p.probes {
        for s in &pr.body.stmts {
            if let StmtKind::Expr(e) = &s.kind {
                walk(e, &mut out);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn syscall_alias_guards_become_syscall_sets() {
    let p = ok("probe syscall.openat, syscall.close.return { println(name) }");
    let kinds: Vec<_> = p
        .probes
        .iter()
        .map(|p| (p.points[0].kind.clone(), p.points[0].condition.is_some()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (
                PointKind::Process {
                    target: ProcessTarget::Any,
                    event: ProcessEvent::Syscall {
                        syscalls: Some(vec![257])
                    }
                },
                false
            ),
            (
                PointKind::Process {
                    target: ProcessTarget::Any,
                    event: ProcessEvent::SyscallReturn {
                        syscalls: Some(vec![3])
                    }
                },
                false
            ),
        ]
    );
}

#[test]
fn syscall_comparisons_in_the_users_condition_become_a_set() {
    let p =
        ok("global on = 1\nprobe process.syscall if (($syscall == 1 || $syscall == 0) && on) { }");
    let pt = &p.probes[0].points[0];
    assert_eq!(
        pt.kind,
        PointKind::Process {
            target: ProcessTarget::Any,
            event: ProcessEvent::Syscall {
                syscalls: Some(vec![0, 1])
            }
        }
    );
    // `on` stays a run-time condition.
    assert!(matches!(
        pt.condition.as_ref().unwrap().kind,
        ExprKind::Load(LValue::Global(_))
    ));
}

#[test]
fn unguarded_syscall_probe_fires_on_every_syscall() {
    let p = ok("probe process.syscall { }");
    assert_eq!(
        p.probes[0].points[0].kind,
        PointKind::Process {
            target: ProcessTarget::Any,
            event: ProcessEvent::Syscall { syscalls: None }
        }
    );
}

#[test]
fn unused_alias_variables_cost_nothing() {
    let p = ok("global n\nprobe syscall.* { n[name]++ }");
    assert!(p.probes.len() > 300);
    assert_eq!(builtins_called(&p), Vec::<&str>::new());
    assert!(
        p.functions.is_empty(),
        "{:?}",
        p.functions.iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    let p = ok("probe syscall.write { println(argstr) }");
    assert_eq!(builtins_called(&p), vec!["__syscall_argstr"]);
}

#[test]
fn alias_bodies_run_around_the_handler_in_order() {
    let p = ok(
        "probe a = begin { x = 1 }\nprobe b = a { y = x + 1 }\nprobe c += b { z = y }\nprobe c { println(y) }",
    );
    let names: Vec<&str> = p.probes[0].locals.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["x", "y", "z"]);
    assert_eq!(
        p.probes[0].body.stmts.len(),
        3,
        "x = 1; y = x + 1; println(y) (z elided)"
    );
}

#[test]
fn defined_folds_and_skips_the_untaken_branch() {
    let p = ok(
        "probe process.syscall { println(@defined($arg1) ? $arg1 : $nosuch) }\nprobe begin { println(@defined($arg1) ? $arg1 : 0) }",
    );
    let arg = |i: usize| match &p.probes[i].body.stmts[0].kind {
        StmtKind::Expr(Expr {
            kind: ExprKind::Print { args, .. },
            ..
        }) => args[0].kind.clone(),
        _ => panic!(),
    };
    assert!(matches!(arg(0), ExprKind::Context(ContextVar::Arg(0))));
    assert!(matches!(arg(1), ExprKind::Long(0)));
}

#[test]
fn written_but_unread_globals_are_autoprinted() {
    let p = ok("global a, b, c\nprobe begin { a = 1; b++; c = 2; println(c) }");
    let auto: Vec<(&str, bool)> = p
        .globals
        .iter()
        .map(|g| (g.name.as_str(), g.autoprint))
        .collect();
    assert_eq!(auto, [("a", true), ("b", true), ("c", false)]);
}

#[test]
fn guru_mode_allows_context_writes_and_control() {
    let p = check_with(
        "probe process.syscall.return { $return = -28 } probe process.signal { $signal = 0; stop() }",
        &opts(true),
    )
    .unwrap();
    assert!(p.guru);
    assert!(matches!(
        &p.probes[0].body.stmts[0].kind,
        StmtKind::Expr(Expr {
            kind: ExprKind::Assign {
                target: LValue::Context(ContextVar::Return),
                ..
            },
            ..
        })
    ));
}

#[test]
fn optional_and_sufficient_points() {
    let p = ok("probe nosuch ?, process(\"/no/such\").syscall !, begin { }");
    assert_eq!(p.probes.len(), 1);
    assert_eq!(p.probes[0].points[0].text, "process(\"/no/such\").syscall");
}

#[test]
fn timers_and_priorities() {
    let p = ok("probe timer.hz(100), timer.ms(5).randomize(2) { } probe begin(-5) { }");
    assert_eq!(
        p.probes[..2]
            .iter()
            .map(|p| p.points[0].kind.clone())
            .collect::<Vec<_>>(),
        vec![
            PointKind::Timer {
                period_ns: 10_000_000,
                randomize_ns: 0
            },
            PointKind::Timer {
                period_ns: 5_000_000,
                randomize_ns: 2_000_000
            },
        ]
    );
    assert_eq!(p.probes[2].points[0].kind, PointKind::Begin(-5));
}

#[test]
fn printf_formats_are_parsed_and_typed() {
    let p = ok("probe begin { printf(\"%s=%5d\\n\", \"x\", 3) }");
    let StmtKind::Expr(Expr {
        kind: ExprKind::Print { kind, format, args },
        ..
    }) = &p.probes[0].body.stmts[0].kind
    else {
        panic!()
    };
    assert_eq!(*kind, PrintKind::Printf);
    assert_eq!(format.as_ref().unwrap().len(), 4);
    assert_eq!(
        args.iter().map(|a| a.ty).collect::<Vec<_>>(),
        [Type::String, Type::Long]
    );
}

#[test]
fn script_functions_shadow_tapset_ones_and_recursion_works() {
    let p = ok(
        "function fib(n) { return n < 2 ? n : fib(n-1) + fib(n-2) }\nprobe begin { println(fib(10)) }",
    );
    assert_eq!(p.functions.len(), 1);
    assert_eq!(p.functions[0].ret, Type::Long);
}

#[test]
fn p2_dump_is_stable() {
    let p = ok(r#"global count%[100], total, s
function label:string (n:long) { prefix = "n="; return prefix . sprint(n) }
probe begin { total = 0 }
probe syscall.openat, process("/bin/true").syscall.return if ($syscall == 3) {
    count[label(1), 2] += 1
    s <<< 1
}
probe timer.s(1) { println(@count(s), total) }
probe syscall.close { total += fd }
"#);
    // As SystemTap's, the locals leave out what elision removed: of the
    // variables syscall.openat and syscall.close set, only the read `fd`.
    assert_eq!(
        dump(&p),
        r#"# globals
total:long
count%[100]:long [string, long]
s:stat
# functions
__sc_int32:long (v:long)
label:string (n:long)
  # locals
  prefix:string
# probes
begin /* <- begin */
process.syscall /* syscalls 257 */ /* <- syscall.openat, process("/bin/true").syscall.return */
process("/bin/true").syscall.return /* syscalls 3 */ /* <- syscall.openat, process("/bin/true").syscall.return */
timer.s(1) /* <- timer.s(1) */
process.syscall /* syscalls 3 */ /* <- syscall.close */
  # locals
  fd:long
"#
    );
}

#[test]
fn listing_process_points_with_variables() {
    let text = list("process.*", true).unwrap();
    assert_eq!(
        text,
        "process.begin
process.create $new_pid:long $new_tid:long
process.end $code:long
process.plt $arg1:long $arg2:long $arg3:long $arg4:long $arg5:long $arg6:long
process.quiesce
process.signal $signal:long $code:long
process.syscall $syscall:long $arg1:long $arg2:long $arg3:long $arg4:long $arg5:long $arg6:long
"
    );
    let text = list("process.*.*", false).unwrap();
    assert_eq!(
        text,
        "process.plt.return\nprocess.syscall.return\nprocess.thread.begin\nprocess.thread.end\n"
    );
}

#[test]
fn listing_aliases_shows_their_variables() {
    let text = list("syscall.close", true).unwrap();
    assert_eq!(
        text,
        "syscall.close name:string argstr:string fd:long $syscall:long $arg1:long $arg2:long $arg3:long $arg4:long $arg5:long $arg6:long\n"
    );
}

#[test]
fn dead_code_warnings_under_verbose() {
    let src =
        "global g\nfunction unused() { return 1 }\nprobe begin { x = 1 }\nprobe end { println(1) }";
    let (_, w) = check_verbose(src);
    assert_eq!(
        w,
        [
            "warning: Eliding unused variable 'x'",
            "warning: side-effect-free probe 'begin'",
            "warning: Eliding unused variable 'g'",
            "warning: Eliding unused function 'unused'"
        ]
    );
    let quiet = check_with(src, &opts(false));
    assert!(quiet.is_ok());
}

/// What counts as reading a local for dead-code elision: `+=`, `delete`,
/// foreach and catch variables do; a plain `=` does not.
#[test]
fn elision_knows_which_statements_read_a_local() {
    let src = "global arr\nprobe begin { a = 1; a += 2; b = 1; b = 2; c = 1; delete c; \
               d = 1; foreach (d in arr) {}; e = \"\"; try { error(\"x\") } catch (e) {}; \
               k = 1; arr[k] = 1 }";
    let (program, w) = check_verbose(src);
    assert_eq!(w, ["warning: Eliding unused variable 'b'"]);
    assert_eq!(program.probes[0].body.stmts.len(), 10);
}

diag_test!(
    stats_printed_before_they_are_known_as_stats,
    false,
    "global s\nprobe begin { println(s) }\nprobe end { s <<< 1 }",
    [
        "semantic error: invalid type stat",
        "2:23 statistics are read with @count, @sum, @min, @max, @avg, @hist_*"
    ]
);

#[test]
fn p2_verbose_dump_shows_bodies() {
    let p = ok(r#"global s, names, greeting = "hi", total
function twice(x) { return x * 2 }
probe process.syscall if ($syscall == 1 || $syscall == 0) {
    names[tid()] = sprintf("%s:%-5d", execname(), twice($arg1))
    s <<< $arg3
    foreach ([t] in names- limit 3) { if (t > 0) println(t) else next }
}
probe end { print(@hist_log(s)); println(greeting); total++ }
"#);
    assert_eq!(
        check::dump::dump_verbose(&p),
        r#"# globals
names:string [long]
s:stat
greeting:string = "hi"
total:long /* printed at exit */
# functions
twice:long (x:long)
  {
    return (x * 2)
  }
# probes
process.syscall /* syscalls 0,1 */ /* <- process.syscall */
  # locals
  t:long
  {
    names[tid()] = sprintf("%s:%-5d", execname(), twice($arg1))
    s <<< $arg3
    foreach ([t] in names- limit 3)
      {
        if ((t > 0))
          println(t)
        else
          next
      }
  }
end /* <- end */
  {
    print(@hist_log(s))
    println(greeting)
    total++
  }
"#
    );
}

#[test]
fn syscall_need_unions_the_probes_sets() {
    let p = ok("probe syscall.write, syscall.read { } probe syscall.close.return { }");
    assert_eq!(p.syscall_need(false), SyscallNeed::Some(vec![0, 1]));
    assert_eq!(p.syscall_need(true), SyscallNeed::Some(vec![3]));
    let p = ok("probe syscall.write { } probe process.syscall { }");
    assert_eq!(p.syscall_need(false), SyscallNeed::All);
    assert_eq!(p.syscall_need(true), SyscallNeed::Nothing);
}

/// A fresh tapset directory with the given files.
fn tapset_dir(name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("utap-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
    }
    dir
}

#[test]
fn include_dirs_private_names_and_used_files() {
    let dir = tapset_dir(
        "lib",
        &[
            (
                "mylib.stp",
                "global mylib_calls\nprivate function helper(x) { return x + 1 }\n\
                 function visible(x) { mylib_calls++; return helper(x) }\n\
                 probe begin { mylib_calls = 0 }\n",
            ),
            (
                "unused.stp",
                "probe begin { println(\"never included\") }\n",
            ),
        ],
    );
    let o = CheckOptions {
        tapset_dirs: vec![dir.clone()],
        ..Default::default()
    };
    // Using a function pulls in its file, including the file's begin probe;
    // the unused file costs nothing.
    let p = check_with("probe end { println(visible(1)) }", &o).unwrap();
    assert_eq!(p.probes.len(), 2);
    assert_eq!(p.probes[1].name, "begin");
    let mut names: Vec<&str> = p.functions.iter().map(|f| f.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["helper", "visible"]);
    // A private function is not visible outside its file.
    let e = check_with("probe end { println(helper(1)) }", &o).unwrap_err();
    assert!(e.starts_with("semantic error: unresolved function"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn missing_include_dir_is_a_clear_error() {
    let o = CheckOptions {
        tapset_dirs: vec!["/no/such/tapsets".into()],
        ..Default::default()
    };
    let e = check_with("probe begin { }", &o).unwrap_err();
    assert!(
        e.starts_with("semantic error: cannot read tapset directory '/no/such/tapsets'"),
        "{e}"
    );
}

diag_test!(
    misspelled_syscall_alias_suggests_the_tapset_name,
    false,
    "probe syscall.opnat { }",
    [
        "semantic error: probe point mismatch at position 2",
        "1:15 no probe point matches 'syscall.opnat'",
        "help: did you mean 'syscall.openat'?"
    ]
);

#[test]
fn misspelt_local_is_warned_about() {
    let src = "function f(a) { return b + a }\nprobe begin { name = \"x\"; printf(\"%s\\n\", nmae); f(1) }";
    let mut map = SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids).unwrap();
    let out = check::check(&mut map, script, &CheckOptions::default(), &mut ids).unwrap();
    let w: Vec<String> = out.warnings.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        w,
        [
            "warning: never-assigned local variable 'b'",
            "warning: never-assigned local variable 'nmae' (similar: name)"
        ]
    );
}

#[test]
fn parms_expands_to_the_six_arguments() {
    let p = ok("probe process.syscall { println($$parms) }");
    let dump = check::dump::dump_verbose(&p);
    assert!(
        dump.contains(r#"println(sprintf("$arg1=%#x $arg2=%#x $arg3=%#x $arg4=%#x $arg5=%#x $arg6=%#x", $arg1, $arg2, $arg3, $arg4, $arg5, $arg6))"#),
        "{dump}"
    );
}

#[test]
fn side_effect_free_statements_are_dropped() {
    let p = ok("global g\nprobe begin { \"text\"; g + 1; strlen(\"x\"); g = 2; println(g) }");
    assert_eq!(p.probes[0].body.stmts.len(), 2, "g = 2; println(g)");
}

#[test]
fn recursive_calls_are_kept() {
    let p = ok(
        "function r(n) { return r(n + 1) }\nfunction one() { return 1 }\nprobe begin { r(0); one() }",
    );
    assert_eq!(p.probes[0].body.stmts.len(), 1, "r(0) stays, one() goes");
}

diag_test!(
    value_of_a_statement_only_call,
    false,
    "probe begin { x = print(1) }",
    [
        "semantic error: unresolved type",
        "1:15 'x' is given the value of something that has none"
    ]
);

diag_test!(
    foreach_key_filter_types,
    false,
    "global a\nprobe begin { a[1, \"x\"] = 1; foreach ([i, j] in a[\"y\", *]) println(i) }",
    [
        "semantic error: type mismatch (string vs. long)",
        "2:51 used as string here",
        "2:17 type was first inferred here (long)"
    ]
);

// People arriving from other tools (kernel SystemTap, bpftrace habits).

diag_test!(
    kernel_function_names_its_system_call,
    false,
    "probe kernel.function(\"__x64_sys_openat\") { }",
    [
        "semantic error: utap traces user space (ptrace): kernel probes are not available",
        "1:7 'kernel.function' is a kernel probe point",
        "help: the nearest user-space probe: syscall.openat",
    ]
);

diag_test!(
    kprobe_return_names_the_system_call_return,
    false,
    "probe kprobe.function(\"sys_read\").return { }",
    [
        "semantic error: utap traces user space (ptrace): kernel probes are not available",
        "1:7 'kprobe.function.return' is a kernel probe point",
        "help: the nearest user-space probe: syscall.read.return",
    ]
);

diag_test!(
    module_probes_have_no_equivalent,
    false,
    "probe module(\"ext4\").function(\"*\") { }",
    [
        "semantic error: utap traces user space (ptrace): kernel probes are not available",
        "1:7 'module.function' is a kernel probe point",
    ]
);

diag_test!(
    vfs_probes_point_at_file_system_calls,
    false,
    "probe vfs.read { }",
    [
        "semantic error: utap traces user space (ptrace): kernel probes are not available",
        "1:7 'vfs.read' is a kernel probe point",
        "help: the nearest user-space probe: syscall.read",
    ]
);

diag_test!(
    tcp_probes_point_at_socket_calls,
    false,
    "probe tcp.sendmsg { }",
    [
        "semantic error: utap traces user space (ptrace): kernel probes are not available",
        "1:7 'tcp.sendmsg' is a kernel probe point",
        "help: the nearest user-space probe: syscall.sendmsg",
    ]
);

diag_test!(
    scheduler_process_exit_is_process_end,
    false,
    "probe scheduler.process_exit { }",
    [
        "semantic error: utap traces user space (ptrace): kernel probes are not available",
        "1:7 'scheduler.process_exit' is a kernel probe point",
        "help: the nearest user-space probe: process.end",
    ]
);

diag_test!(
    timer_profile_needs_a_positive_frequency,
    false,
    "probe timer.profile.hz(0) { }",
    [
        "semantic error: sampling frequency must be positive",
        "1:21 a number greater than 0",
    ]
);

diag_test!(
    optional_kernel_probes_stay_quiet,
    false,
    "probe vfs.read ?, begin { x = 1 }\nprobe end { y }",
    [
        "semantic error: unresolved type",
        "2:13 the type of 'y' cannot be inferred",
    ]
);

diag_test!(
    dollar_on_a_tapset_variable_suggests_the_variable,
    false,
    "probe syscall.close { println($fd) }",
    [
        "semantic error: unknown target variable '$fd'",
        "1:31 'fd' is a variable of this probe's tapset",
        "help: write 'fd' without the '$' ('$' names DWARF target variables)",
    ]
);

diag_test!(
    misspelled_tapset_variable_gets_did_you_mean,
    false,
    "probe syscall.openat { println(filname) }",
    [
        "semantic error: unresolved type",
        "1:32 the type of 'filname' cannot be inferred",
        "help: did you mean 'filename'?",
    ]
);

#[test]
fn listing_everything_covers_every_family_and_alias() {
    let text = list("**", false).unwrap();
    for line in [
        "begin",
        "process.syscall.return",
        "process.thread.end",
        "syscall.close.return",
        "signal.send",
        "timer.ms(number)",
        "timer.hz(number)",
        "timer.profile",
        "timer.profile.tick",
        "timer.profile.hz(number)",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing");
    }
    assert!(text.lines().count() > 800, "{}", text.lines().count());
}

#[test]
fn listing_timers_shows_their_argument() {
    assert_eq!(
        list("timer.*", false).unwrap(),
        "timer.hz(number)\ntimer.jiffies(number)\ntimer.ms(number)\ntimer.msec(number)\n\
         timer.ns(number)\ntimer.nsec(number)\ntimer.profile\ntimer.s(number)\ntimer.sec(number)\n\
         timer.us(number)\ntimer.usec(number)\n"
    );
}

#[test]
fn listing_nothing_says_so() {
    let d = list("nosuch.*", false).unwrap_err();
    assert_eq!(
        d[0].to_string(),
        "semantic error: no probe point matches 'nosuch.*'"
    );
    assert_eq!(
        d[0].help.as_deref(),
        Some("`utap -l '**'` lists every probe point utap has")
    );
}

#[test]
fn alias_used_with_a_suffix_resolves_the_suffix_on_each_target() {
    // SystemTap 2.0: `myio.return` is `syscall.read.return` and
    // `syscall.write.return`, with myio's body run before the handler.
    let p = ok("probe myio = syscall.read, syscall.write { x = 1 }\n\
         probe myio.return { println(x, retval) }");
    let events: Vec<_> = p.probes.iter().map(|p| p.points[0].kind.clone()).collect();
    let ret = |n| PointKind::Process {
        target: ProcessTarget::Any,
        event: ProcessEvent::SyscallReturn {
            syscalls: Some(vec![n]),
        },
    };
    assert_eq!(events, vec![ret(0), ret(1)]);
    // Wildcards over aliases never match one event twice through a
    // shorter alias plus a suffix.
    let all = ok("global n probe syscall.*.return { n++ } probe end { print(n) }");
    let exact = ok(
        "global n probe syscall.read.return, syscall.openat.return { n++ } probe end { print(n) }",
    );
    assert_eq!(exact.probes.len(), 3);
    let mut seen = std::collections::HashSet::new();
    for pr in &all.probes {
        if let PointKind::Process {
            event: ProcessEvent::SyscallReturn { syscalls: Some(s) },
            ..
        } = &pr.points[0].kind
        {
            for n in s {
                assert!(seen.insert(*n), "syscall {n} matched twice");
            }
        }
    }
}

#[test]
fn entry_values_come_from_an_entry_probe_on_the_same_syscalls() {
    // The split-off entry probe is an ordinary probe: the seccomp filter
    // and the exit-stop choice see the syscall's entry and its return.
    let p = ok("probe syscall.read.return { println(retval - @entry($arg3)) }");
    let events: Vec<_> = p
        .probes
        .iter()
        .map(|p| match &p.points[0].kind {
            PointKind::Process { event, .. } => event.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        events,
        vec![
            ProcessEvent::SyscallReturn {
                syscalls: Some(vec![0])
            },
            ProcessEvent::Syscall {
                syscalls: Some(vec![0])
            },
        ]
    );
    // Not in a probe that is not a return.
    assert_eq!(
        first_diag("probe syscall.read { println(@entry($arg1)) }", false)[0],
        "semantic error: @entry is allowed only in .return probes"
    );
}

/// The statements of a probe's body that assign `what`.
fn assignments_to(p: &ProbeDef, what: impl Fn(&LValue) -> bool) -> usize {
    let mut n = 0;
    utap_compiler::walk::block(&p.body, &mut |e| {
        if let ExprKind::Assign { target, .. } = &e.kind
            && what(target)
        {
            n += 1;
        }
    });
    n
}

#[test]
fn alias_assignments_with_effects_are_kept() {
    // A tapset whose alias writes its own global and calls a function
    // that prints: both are effects, which elision must keep.
    let dir = tapset_dir(
        "effects",
        &[(
            "effects.stp",
            "global opened\nfunction noisy:long () { println(\"x\"); return 1 }\n\
             probe my.open = process.syscall if ($syscall == 257) {\n\
             \topened = 1\n\tunused = $arg1\n\tloud = noisy()\n}\n",
        )],
    );
    let o = CheckOptions {
        tapset_dirs: vec![dir.clone()],
        ..Default::default()
    };
    let p = check_with("probe my.open { }", &o).unwrap();
    let body = &p.probes[0];
    assert_eq!(assignments_to(body, |t| matches!(t, LValue::Global(_))), 1);
    assert_eq!(assignments_to(body, |t| matches!(t, LValue::Local(_))), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn alias_variables_the_handler_reads_are_assigned_and_the_rest_elided() {
    let p = ok("probe syscall.openat { printf(\"%s %d\\n\", filename, flags) }");
    let body = &p.probes[0];
    let names: Vec<&str> = body.locals.iter().map(|l| l.name.as_str()).collect();
    // Every variable the alias sets is still a local (diagnostics list
    // them), typed as the alias types it...
    for v in [
        "name",
        "argstr",
        "dfd",
        "filename",
        "flags",
        "flags_str",
        "mode",
    ] {
        assert!(names.contains(&v), "{v} missing from {names:?}");
    }
    let ty = |n: &str| body.locals.iter().find(|l| l.name == n).unwrap().ty;
    assert_eq!(ty("argstr"), Type::String);
    assert_eq!(ty("flags"), Type::Long);
    // ...but only the two read are assigned.
    assert_eq!(assignments_to(body, |t| matches!(t, LValue::Local(_))), 2);
}
