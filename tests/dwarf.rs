//! DWARF target variables end to end on the dwarf fixtures
//! (tests/fixtures/dwarf/dwarf.c, built `-g -O0`, `-g -O2`, without `-g`,
//! and with its DWARF in a separate debuglink file): parameters of base
//! types, struct fields through pointers, array elements (constant and
//! computed indexes), `$$parms`, `$var$` / `$var$$` pretty-printing, `-L`
//! with types, and the located errors for unknown variables and missing
//! debug information. Expected values are what the fixture passes (it
//! prints the same calls' results).

mod support;

use support::{fixture, run, utap};
use utap_runtime::elf::ElfImage;

/// Runs `script` (EXE replaced by the fixture's path) over the fixture;
/// the script's lines (the fixture's own `add/draw/greet N` lines left
/// out).
fn trace(exe: &str, script: &str) -> Vec<String> {
    let path = fixture(exe);
    let o = run(utap(&script.replace("EXE", &path), &["-c", &path]));
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("add 1234567955773\n"), "{}", o.stdout);
    o.stdout
        .lines()
        .filter(|l| !["add ", "draw ", "greet "].iter().any(|p| l.starts_with(p)))
        .map(String::from)
        .collect()
}

const PARAMS: &str = r#"
probe process("EXE").function("add") {
    printf("a=%d b=%d c=%d d=%d\n", $a, $b, $c, $d)
    println($$parms)
    println($$parms$)
}
"#;

const PARAMS_OUT: [&str; 3] = [
    "a=-7 b=1234567890123 c=65535 d=122",
    "a=0xfffffffffffffff9 b=0x11f71fb04cb c=0xffff d=0x7a",
    "a=-7 b=1234567890123 c=65535 d='z'",
];

#[test]
fn parameters_of_base_types_at_entry_o0() {
    assert_eq!(trace("dwarf_O0", PARAMS), PARAMS_OUT);
}

#[test]
fn parameters_of_base_types_at_entry_o2() {
    assert_eq!(trace("dwarf_O2", PARAMS), PARAMS_OUT);
}

#[test]
fn compressed_debug_sections_are_read() {
    assert_eq!(trace("dwarf_gz", PARAMS), PARAMS_OUT);
}

#[test]
fn debug_information_from_a_debuglink_file() {
    let split = fixture("dwarf_split");
    if !std::path::Path::new(&format!("{split}.debug")).exists() {
        eprintln!("skipped: dwarf_split was not split (objcopy missing when building fixtures)");
        return;
    }
    let info = utap_runtime::dwarf::debug_info(&split).expect("debug information");
    assert!(
        info.debug_path.ends_with("/dwarf_split.debug"),
        "{}",
        info.debug_path
    );
    assert_eq!(trace("dwarf_split", PARAMS), PARAMS_OUT);
}

#[test]
fn struct_fields_through_pointers_and_array_elements() {
    let script = r#"
probe process("EXE").function("draw") {
    println($s->name$, " ", $s->origin->x, " ", $s->origin->y, " ", $s->corner->y,
            " ", $s->sides[2], " ", $s->kind, " ", $s->area, " ", $scale)
    for (i = 0; i < 4; i++) printf("%d;", $s->sides[i])
    println("")
    println($s$$)
    println($s->corner$, " ", $s->sides$)
    println(@defined($s->corner->x) ? "x" : "-", @defined($s->nope) ? "n" : "-")
}
probe process("EXE").function("greet") { println($who$, " ", $times, " ", user_string($who)) }
"#;
    let out = trace("dwarf_O0", script);
    assert_eq!(
        out,
        [
            r#""square" 3 -4 20 3 113 100 2"#,
            "1;2;3;4;",
            r#"{.name="square", .origin={.x=3, .y=-4}, .corner={.x=10, .y=20}, .sides=[1, ...], .kind='q', .area=100}"#,
            // SystemTap prints an array's first element (recurse_array).
            "{.x=10, .y=20} [1, ...]",
            "x-",
            r#""world" 3 world"#,
        ]
    );
}

#[test]
fn a_pointer_to_a_struct_prints_its_members_one_level_deep() {
    let out = trace(
        "dwarf_O0",
        r#"probe process("EXE").function("draw") { println($s$) }"#,
    );
    let line = &out[0];
    assert!(line.starts_with(r#"{.name="square", .origin=0x"#), "{line}");
    assert!(
        line.ends_with(", .corner={...}, .sides=[...], .kind='q', .area=100}"),
        "{line}"
    );
}

#[test]
fn optimised_code_reads_what_the_function_uses() {
    // -O2: `s` and `scale` live in registers; main stores only the
    // fields draw reads.
    let out = trace(
        "dwarf_O2",
        r#"probe process("EXE").function("draw") { println($s->sides[2], " ", $s->sides[3], " ", $scale) }"#,
    );
    assert_eq!(out, ["3 4 2"]);
}

#[test]
fn listing_shows_the_variables_with_types() {
    let path = fixture("dwarf_O0");
    let o = run(utap(
        "",
        &["-L", &format!("process(\"{path}\").function(\"draw\")")],
    ));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let line = o.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        line.ends_with(" $s:struct shape* $scale:int $total:int"),
        "{line}"
    );
    let o = run(utap(
        "",
        &["-L", &format!("process(\"{path}\").function(\"g*\")")],
    ));
    assert!(
        o.stdout.contains(" $who:char const* $times:int $n:int\n"),
        "{}",
        o.stdout
    );
}

#[test]
fn an_unknown_variable_is_a_located_error_with_alternatives() {
    let path = fixture("dwarf_O0");
    let script = format!("probe process(\"{path}\").function(\"add\") {{ println($nope) }}");
    let o = run(utap(&script, &["-p2"]));
    assert_eq!(o.status, 1, "{}", o.stdout);
    assert!(
        o.stderr.contains("unable to find local 'nope' near pc 0x"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("alternatives: $a $b $c $d"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("<input>:1:"), "{}", o.stderr);
}

#[test]
fn without_debug_information_the_error_names_the_files_looked_for() {
    let path = fixture("dwarf_nodebug");
    let image = ElfImage::open(std::path::Path::new(&path)).unwrap();
    let script = format!("probe process(\"{path}\").function(\"add\") {{ println($a) }}");
    let o = run(utap(&script, &["-p2"]));
    assert_eq!(o.status, 1, "{}", o.stdout);
    let looked = match &image.build_id {
        Some(id) => {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            format!(
                "; looked for /usr/lib/debug/.build-id/{}/{}.debug",
                &hex[..2],
                &hex[2..]
            )
        }
        None => " (no build-id or .gnu_debuglink names a separate debug file)".into(),
    };
    let expected = format!(
        "semantic error: unable to find local 'a': no debug information in {}{looked}",
        image.path
    );
    assert!(
        o.stderr.starts_with(&expected),
        "{}\n---\n{expected}",
        o.stderr
    );
    assert!(
        o.stderr
            .contains("Help: without it, read the arguments with $arg1..$arg6 or int_arg(n)"),
        "{}",
        o.stderr
    );
}

#[test]
fn statements_by_line_see_the_locals_in_scope() {
    let script = r#"
probe process("EXE").statement("*@dwarf.c:34") { println($$locals, " ", $total, " ", $s->sides[3]) }
probe process("EXE").statement("greet@fixtures/dwarf/dwarf.c:40") { println($$locals, " ", $$parms$) }
probe process("EXE").function("draw@dwarf.c") { println("fn ", ppfunc(), " ", $scale) }
probe process("EXE").function("greet@dwarf.c:37") { println("fn ", ppfunc(), " ", $times) }
"#;
    assert_eq!(
        trace("dwarf_O0", script),
        [
            "fn draw 2",
            "total=0x14 20 4",
            "fn greet 3",
            r#"n=0xf who="world" times=3"#,
        ]
    );
}

#[test]
fn a_line_without_code_is_a_located_error() {
    let path = fixture("dwarf_O0");
    let script = format!("probe process(\"{path}\").statement(\"*@dwarf.c:3\") {{ }}");
    let o = run(utap(&script, &["-p2"]));
    assert_eq!(o.status, 1, "{}", o.stdout);
    assert!(
        o.stderr.contains("no line records for dwarf.c:3"),
        "{}",
        o.stderr
    );
}

#[test]
fn return_probes_read_the_return_value_and_entry_values() {
    let script = r#"
probe process("EXE").function("add").return { println($$return, " ", @entry($a)) }
"#;
    assert_eq!(trace("dwarf_O0", script), ["return=0x11f71fc053d -7"]);
}

#[test]
fn return_probes_read_parameters_at_entry_implicitly() {
    // SystemTap: in a .return probe `$var` is the value at entry (an
    // implicit @entry), `$$parms` too; `@defined` answers as at entry.
    let script = r#"
probe process("EXE").function("add").return {
    println($a, " ", $d, " ", $$parms, " ", $$return)
    println($$parms$, " ", @defined($b) ? "b" : "-", @defined($nope) ? "n" : "-")
}
probe process("EXE").function("draw").return { println($scale, " ", $s->sides[1], " ", $return) }
"#;
    let expected = [
        "-7 122 a=0xfffffffffffffff9 b=0x11f71fb04cb c=0xffff d=0x7a return=0x11f71fc053d",
        "a=-7 b=1234567890123 c=65535 d='z' b-",
        "2 2 20",
    ];
    assert_eq!(trace("dwarf_O0", script), expected);
    assert_eq!(trace("dwarf_O2", script), expected);
}

#[test]
fn a_parameter_cannot_be_written_in_a_return_probe() {
    let path = fixture("dwarf_O0");
    let bad = format!("probe process(\"{path}\").function(\"add\").return {{ $a = 1 }}");
    let o = run(utap(&bad, &["-g", "-p2"]));
    assert_eq!(o.status, 1, "{}", o.stdout);
    assert!(
        o.stderr
            .contains("'$a' cannot be written in a .return probe"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_bare_process_function_reads_the_dwarf_of_the_c_program() {
    // `process.function(..)` without a path: the program of -c.
    let script = r#"
probe process.function("draw") { println($s->name$, " ", $scale, " ", $s->sides[3]) }
probe process.function("add").return { println($a, " ", $$return) }
"#;
    assert_eq!(
        trace("dwarf_O0", script),
        ["-7 return=0x11f71fc053d", r#""square" 2 4"#]
    );
    // Without debug information, $$parms keeps its register form.
    let path = fixture("dwarf_nodebug");
    let o = run(utap(
        r#"probe process.function("add") { println($$parms) }"#,
        &["-c", &path],
    ));
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("$arg1=0xfffffff9 $arg2=0x11f71fb04cb"),
        "{}",
        o.stdout
    );
}
