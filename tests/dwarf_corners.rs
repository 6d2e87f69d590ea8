//! DWARF corners real programs hit, end to end on the corners fixtures
//! (tests/fixtures/dwarf/corners.c with its library libcorners.so, built
//! `-g -O0`, and entry.c at `-g -O2`): multi-dimensional arrays
//! (`$b->m[1][2]`, `@var("cube")[1][2][3]`, computed indexes, SystemTap's
//! `[first, ...]` pretty form), `@cast` to pointer types, compound writes
//! under `-g` (`+=`, `++`...), a shared library's `__thread` variable
//! (through the DTV) in two threads, `DW_OP_entry_value` parameters (read
//! at entry, and recorded there for a statement deeper in), and `$`
//! suffixes after an index or on `@var`/`@cast`.
//! The expected values are the ones the fixtures compute and print
//! themselves (their own lines are checked too).

mod support;

use support::{fixture, run, utap};

/// The corners program's own lines, untraced.
const OWN: [&str; 6] = [
    "pick 23 42 68",
    "chase 77 198",
    "tally 7246",
    "lib main 16",
    "lib main 23",
    "lib thread 111",
];

/// Runs `script` (EXE and LIB replaced by the fixture's paths) over
/// `exe` with `args`; (the script's lines, the program's lines).
fn trace(exe: &str, script: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
    trace_with(exe, script, args, "")
}

/// [`trace`] with the program's arguments.
fn trace_with(
    exe: &str,
    script: &str,
    args: &[&str],
    prog_args: &str,
) -> (Vec<String>, Vec<String>) {
    let path = fixture(exe);
    let command = format!("{path} {prog_args}");
    let mut all = args.to_vec();
    all.extend(["-c", command.trim_end()]);
    let script = script
        .replace("EXE", &path)
        .replace("LIB", &fixture("libcorners.so"));
    let o = run(utap(&script, &all));
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    let own = |l: &&str| {
        ["pick ", "chase ", "tally ", "lib ", "scale "]
            .iter()
            .any(|p| l.starts_with(p))
    };
    let (own, script): (Vec<&str>, Vec<&str>) = o.stdout.lines().partition(own);
    (
        script.into_iter().map(String::from).collect(),
        own.into_iter().map(String::from).collect(),
    )
}

/// A script that must not compile: its stderr.
fn refused(exe: &str, script: &str, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("-p2");
    let o = run(utap(&script.replace("EXE", &fixture(exe)), &all));
    assert_eq!(o.status, 1, "{}", o.stdout);
    o.stderr
}

#[test]
fn multi_dimensional_arrays_index_rows_then_elements() {
    let script = r#"
probe process("EXE").function("pick") {
    println($rows[1][2], " ", $rows[$i][$j], " ", $b->m[1][2], " ", $b->m[$i - 1][$j - 1])
    println(@var("table")[2][3], " ", @var("table")[$i][$j], " ", @var("cube")[1][2][3],
            " ", @var("cube")[$i - 1][$j - 1][3], " ", user_string(@var("names")[2]))
    println(@var("table")[1] - @var("table")[0], " ", @var("cube")[1] - @var("cube")[0])
    println($b$, " ", $b$$, " ", $b->m$)
}
probe process("EXE").statement("pick@corners.c:33") {
    println($local[1][0], " ", $local[$i - 2][1], " ", $local$, " ", $local$$)
}
"#;
    let (out, own) = trace("dwarf_corners", script, &[]);
    assert_eq!(own, OWN);
    assert_eq!(
        out,
        [
            // table[r][c] = r*10+c; b.m[1][2] = 42 (the program's sum).
            "12 23 42 42",
            // cube[a][r][c] = a*100+r*10+c; names[2] = "cat".
            "23 23 123 123 cat",
            // A row of int[3][4] is 16 bytes; of short[2][3][4], 24.
            "16 24",
            // SystemTap's recurse_array: the first element, then ", ...";
            // nested under `$` an array is `[...]`.
            r#"{.tag="bd", .m=[...]} {.tag="bd", .m=[5, ...]} [5, ...]"#,
            "3 2 [1, ...] [1, ...]",
        ]
    );
}

#[test]
fn cast_to_pointer_types_follows_the_pointer_once() {
    let script = r#"
probe process("EXE").function("chase") {
    println(@cast($pp, "struct cell *")->v, " ", @cast($pp, "struct cell*")->next->v,
            " ", @cast($pp, "struct cell *")->label$)
    println(@cast($name, "char *")[1], " ", @cast($name, "char *")[$pp - $pp + 2],
            " ", @cast($pp, "struct cell *")->next$)
    println(@cast($pp, "struct cell *")->next->v + @cast($name, "char *")[1])
}
"#;
    let (out, own) = trace("dwarf_corners", script, &[]);
    assert_eq!(own, OWN);
    assert_eq!(
        out,
        [
            r#"1 77 "head""#,
            // 'y' and 'z' of "xyz".
            r#"121 122 {.v=77, .label="tail", .next=0x0}"#,
            // What chase() returns.
            "198",
        ]
    );
}

#[test]
fn compound_writes_read_compute_and_store_under_guru_mode() {
    let script = r#"
probe process("EXE").function("tally") {
    println($count += 5, " ", $step++, " ", ++$step, " ", $small--, " ", $mask <<= 2, " ", $mask |= 1)
    $count *= 3; $count -= 1; $small += 100
    println($count, " ", $step, " ", $small, " ", $mask)
}
"#;
    let (out, own) = trace("dwarf_corners", script, &["-g"]);
    assert_eq!(
        out,
        [
            // 7+5; step++ gives 3; ++step 5; small-- gives 200; 16<<2; 64|1.
            "12 3 5 200 64 65",
            // 12*3-1; 199+100 in an unsigned char is 43.
            "35 5 43 65",
        ]
    );
    // tally(35, 5, 43, 65) = 35*1000 + 5*10 + 43 + 65.
    assert!(own.contains(&"tally 35158".to_string()), "{own:?}");
}

#[test]
fn compound_writes_need_guru_mode_and_divide_by_zero_is_an_error() {
    for write in ["$count += 5", "$count++", "--$step"] {
        let script = format!(r#"probe process("EXE").function("tally") {{ {write} }}"#);
        let err = refused("dwarf_corners", &script, &[]);
        assert!(
            err.contains("write to target variable not permitted; need utap -g"),
            "{write}: {err}"
        );
    }
    let path = fixture("dwarf_corners");
    let script = format!(r#"probe process("{path}").function("tally") {{ $step /= 0 }}"#);
    let o = run(utap(&script, &["-g", "-c", &path]));
    assert_eq!(o.status, 1, "{}", o.stdout);
    assert!(
        o.stderr
            .contains("ERROR: division by 0 near identifier '$step'"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_shared_librarys_thread_local_variable_in_each_thread() {
    let script = r#"
probe process("EXE").library("LIB").function("lib_touch") {
    println(@var("lib_tls"), " ", $add, " ", tid() == pid() ? "main" : "thread")
}
probe process("LIB").statement("lib_touch@corners_lib.c:8") {
    println("ret ", @var("lib_tls"), " ", $add)
}
"#;
    let (out, own) = trace("dwarf_corners", script, &[]);
    assert_eq!(own, OWN);
    assert_eq!(
        out,
        [
            // Each thread's own copy, before and after lib_touch adds.
            "11 5 main",
            "ret 16 5",
            "16 7 main",
            "ret 23 7",
            "11 100 thread",
            "ret 111 100",
        ]
    );
}

#[test]
fn a_shared_librarys_thread_local_variable_can_be_written() {
    let script = r#"
probe process("LIB").function("lib_touch") { if (tid() != pid()) @var("lib_tls") += 1000 }
"#;
    let (out, own) = trace("dwarf_corners", script, &["-g"]);
    assert!(out.is_empty(), "{out:?}");
    // The thread's copy only: the main thread's lines are unchanged.
    assert_eq!(
        own,
        [
            "pick 23 42 68",
            "chase 77 198",
            "tally 7246",
            "lib main 16",
            "lib main 23",
            "lib thread 1111",
        ]
    );
}

#[test]
fn entry_values_are_read_at_entry_and_recorded_there_for_statements() {
    let script = r#"
probe process("EXE").function("scale") { println("entry ", $x, " ", $unused, " ", $$parms) }
probe process("EXE").statement("scale@entry.c:17") {
    println("line17 ", $x, " ", $x * 2, " ", $unused, " ", @defined($x), " ", $$parms)
}
probe process("EXE").function("scale").return { println("return ", $x, " ", $return) }
"#;
    let (out, own) = trace_with("dwarf_entry", script, &[], "12");
    assert_eq!(own, ["scale 12 156"]);
    assert_eq!(
        out,
        [
            "entry 12 24 x=0xc unused=0x18",
            // After the first call x is DW_OP_entry_value(DW_OP_reg5):
            // `$x` is the value recorded at scale's entry (SystemTap's
            // extra entry probe); `$$parms` still cannot read it.
            "line17 12 24 24 1 x=? unused=0x18",
            "return 12 156",
        ]
    );
    // Pretty-printed, it is SystemTap's error.
    let err = refused(
        "dwarf_entry",
        r#"probe process("EXE").statement("scale@entry.c:17") { println($x$) }"#,
        &[],
    );
    assert!(
        err.contains("'$x' at pc 0x")
            && err.contains(": DW_OP entry_value unable to resolve value"),
        "{err}"
    );
}

#[test]
fn pretty_suffixes_after_an_index_or_an_operator() {
    // SystemTap's parser takes a separate `$`/`$$` token after `]` and
    // `)` (parse_target_symbol_components: "$foo[i]$ and @cast(...)$").
    let script = r#"
probe process("EXE").function("pick") {
    println($b->m[1]$, " ", @var("table")[2]$, " ", @var("names")$, " ", @var("cube")[1][2] $$)
}
probe process("EXE").function("chase") {
    println(@cast($pp, "struct cell *")$, " ", @cast($name, "char *")$)
}
"#;
    let (out, own) = trace("dwarf_corners", script, &[]);
    assert_eq!(own, OWN);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0], r#"[8, ...] [20, ...] "ant" [120, ...]"#);
    // The head cell: its `next` is a pointer (an address) one level down.
    assert!(
        out[1].starts_with(r#"{.v=1, .label="head", .next=0x"#) && out[1].ends_with(r#"} "xyz""#),
        "{}",
        out[1]
    );
}
