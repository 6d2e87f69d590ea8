//! DWARF target variables of more types and forms, end to end on
//! tests/fixtures/dwarf/types.c (`dwarf_types`, `-g -O0`): enums (numbers),
//! bitfields (signed and unsigned), `float`/`double` (as SystemTap: the
//! value's IEEE-754 double bits as a long; pretty-printed as decimals),
//! `char[N]` members (strings), `@var` for globals, file statics and a
//! thread-local variable, `@cast(addr, "type")->member`, `&$var`, and
//! writing variables under `-g` (the fixture prints the results it gets,
//! so a write shows in its own output). Expected values are what the
//! fixture passes.

mod support;

use support::{fixture, run, utap};

/// The fixture's own lines.
const OWN: [&str; 5] = ["mix ", "opaque ", "bump ", "peek ", "width "];

/// Runs `script` (EXE replaced by the fixture's path) over the fixture
/// with `args`; (the script's lines, the fixture's lines).
fn trace(script: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
    trace_in("dwarf_types", script, args)
}

/// [`trace`] over the fixture built as `exe` (e.g. its -O2 build).
fn trace_in(exe: &str, script: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
    let path = fixture(exe);
    let mut all = args.to_vec();
    all.extend(["-c", &path]);
    let o = run(utap(&script.replace("EXE", &path), &all));
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    let (own, script): (Vec<String>, Vec<String>) = o
        .stdout
        .lines()
        .map(String::from)
        .partition(|l| OWN.iter().any(|p| l.starts_with(p)));
    (script, own)
}

/// A script that must not compile: its stderr.
fn refused(script: &str, args: &[&str]) -> String {
    let path = fixture("dwarf_types");
    let mut all = args.to_vec();
    all.push("-p2");
    let o = run(utap(&script.replace("EXE", &path), &all));
    assert_eq!(o.status, 1, "{}", o.stdout);
    o.stderr
}

#[test]
fn enums_bitfields_and_floats_at_entry() {
    let script = r#"
probe process("EXE").function("mix") {
    println($hue, " ", $bits->low, " ", $bits->mid, " ", $bits->top, " ", $bits->whole)
    println($ratio, " ", $share, " ", $rec->ratio, " ", $rec->share)
    println($$parms$)
    println($bits$, " ", $rec->hue, " ", $rec->name$, " ", user_string($rec->name))
}
"#;
    let (out, own) = trace(script, &[]);
    // 3.75, 2.0, -2.5 and 0.125 as doubles' bits.
    let bits = |f: f64| f.to_bits() as i64;
    assert_eq!(
        out,
        [
            "-2 6 -11 1 1000".to_string(),
            format!(
                "{} {} {} {}",
                bits(3.75),
                bits(2.0),
                bits(-2.5),
                bits(0.125)
            ),
            "ratio=3.75 share=2 hue=-2 bits={.low=6, .mid=-11, .top=1, .whole=1000} \
             rec={.name=\"local rec\", .ratio=-2.5, .share=0.125, .hue=5, .bits={...}}"
                .to_string(),
            r#"{.low=6, .mid=-11, .top=1, .whole=1000} 5 "local rec" local rec"#.to_string(),
        ]
    );
    assert_eq!(own[0], "mix 0.5");
}

#[test]
fn globals_statics_and_thread_locals_with_at_var() {
    let script = r#"
probe process("EXE").function("peek") {
    println(@var("counter"), " ", @var("hidden@types.c"), " ", @var("per_thread"))
    println(@var("global_rec")->name$, " ", @var("global_rec")->bits->mid, " ", @var("counter", "EXE"))
    println(@defined(@var("nope")) ? "y" : "n", @defined(@var("counter")) ? "y" : "n")
}
"#;
    let (out, _) = trace(script, &[]);
    assert_eq!(out, ["41 -9 7", r#""global" -3 41"#, "ny"]);
    let err = refused(
        r#"probe process("EXE").function("peek") { println(@var("nope@types.c")) }"#,
        &[],
    );
    assert!(
        err.contains("unable to find global 'nope@types.c' in "),
        "{err}"
    );
}

#[test]
fn cast_reads_an_address_as_a_struct_of_the_probed_program() {
    let script = r#"
probe process("EXE").function("opaque") {
    println(@cast($p, "struct record")->name$, " ", @cast($p, "record")->hue, " ", @cast($p, "struct record")->bits$)
    println(@cast($p, "struct record", "EXE")->bits->whole, " ", @cast($p, "struct record")->name[1])
}
"#;
    let (out, _) = trace(script, &[]);
    assert_eq!(
        out,
        [
            r#""global" -2 {.low=5, .mid=-3, .top=1, .whole=77}"#,
            "77 108"
        ]
    );
    let err = refused(
        r#"probe process("EXE").function("opaque") { println(@cast($p, "struct nope")->x) }"#,
        &[],
    );
    assert!(
        err.contains("type definition 'struct nope' not found in "),
        "{err}"
    );
}

#[test]
fn address_of_a_variable_and_of_members() {
    let script = r#"
probe process("EXE").function("mix") {
    printf("%d %d %d\n", &$rec->bits == $bits, &$rec->name[2] - $rec, &$rec->hue - &$rec->name[0])
    printf("%d\n", user_long(&$ratio) == $ratio)
}
"#;
    let (out, _) = trace(script, &[]);
    assert_eq!(out, ["1 2 28", "1"]);
    let err = refused(
        r#"probe process("EXE").function("mix") { println(&$bits->mid) }"#,
        &[],
    );
    assert!(
        err.contains("cannot take the address of bitfield '$bits->mid'"),
        "{err}"
    );
}

#[test]
fn guru_writes_parameters_members_bitfields_and_globals() {
    let script = r#"
probe process("EXE").function("bump") {
    $v = 100
    $bits->whole = 1
    $bits->mid = -5
    println($v, " ", $bits$)
}
probe process("EXE").function("peek") { @var("counter") = 1000 }
"#;
    let (out, own) = trace(script, &["-g"]);
    assert_eq!(out, ["100 {.low=6, .mid=-5, .top=1, .whole=1}"]);
    // bump(100) adds 100 to whole (1) and returns 101; peek reads
    // 1000 - 9 + 7.
    assert_eq!(own[2..4], ["bump 101 101", "peek 998"]);
}

#[test]
fn writing_without_guru_mode_is_systemtaps_error() {
    let err = refused(r#"probe process("EXE").function("bump") { $v = 1 }"#, &[]);
    assert!(
        err.contains("write to target variable not permitted; need utap -g"),
        "{err}"
    );
    let path = fixture("dwarf_O2");
    let o = run(utap(
        &format!("probe process(\"{path}\").function(\"add\") {{ $a = 5 }}"),
        &["-g", "-p2"],
    ));
    assert_eq!(o.status, 1);
    assert!(
        o.stderr
            .contains("'$a' is in a register here: utap writes target variables in memory only"),
        "{}",
        o.stderr
    );
}

#[test]
fn floating_point_parameters_in_xmm_registers_at_o2() {
    // -O2: `ratio` and `share` arrive in xmm0 and xmm1 (read with
    // PTRACE_GETFPREGS only for plans that use them).
    let script = "probe process(\"EXE\").function(\"mix\") { println($ratio, \" \", $share, \" \", $hue)\n\
         printf(\"%s %s\\n\", $ratio$, $share$) }";
    let (lines, _) = trace_in("dwarf_types_O2", script, &[]);
    assert_eq!(
        lines,
        [
            format!(
                "{} {} -2",
                3.75f64.to_bits() as i64,
                2.0f64.to_bits() as i64
            ),
            "3.75 2".to_string()
        ]
    );
}

#[test]
fn a_struct_passed_in_two_registers_is_read_from_its_pieces() {
    // -O2: `s` (16 bytes) is `DW_OP_reg5 DW_OP_piece 8 DW_OP_reg4
    // DW_OP_piece 8`; at -O0 it is in memory. Both read the same.
    for exe in ["dwarf_types_O2", "dwarf_types"] {
        let script = "probe process(\"EXE\").function(\"width\") { println($s->lo, \" \", $s->hi, \" \", $k, \" \", $s$, \" \", $$parms$) }";
        let (lines, own) = trace_in(exe, script, &[]);
        assert_eq!(
            lines,
            ["3 40 2 {.lo=3, .hi=40} s={.lo=3, .hi=40} k=2"],
            "{exe}"
        );
        assert!(own.iter().any(|l| l == "width 74"), "{own:?}");
    }
}
