//! DWARF target variables read in the program (the data plane's
//! `plans`): the same scripts over the dwarf fixtures print the same
//! values on both routes, with every probe in the program unless the test
//! says otherwise, and a read that faults is the tracer's error. Values
//! are the ones the fixtures pass (tests/dwarf*.rs check them on the
//! tracer's route too).

mod support;

use support::fixture;

/// Runs `script` (EXE: the fixture) over `exe` on the route `inproc`
/// chooses ([`support::on_route`]).
fn on_route(exe: &str, script: &str, inproc: bool) -> (i32, Vec<String>, String) {
    let path = fixture(exe);
    support::on_route(&script.replace("EXE", &path), &path, inproc)
}

/// Both routes print the same; `probes` of them run in the program; the
/// script's lines (sorted) include `expected`.
fn same_on_both(exe: &str, script: &str, probes: usize, expected: &[&str]) {
    let (s0, tracer, _) = on_route(exe, script, false);
    let (s1, inproc, err) = on_route(exe, script, true);
    assert_eq!((s0, s1), (0, 0), "{err}");
    assert_eq!(tracer, inproc, "{err}");
    let want = format!("utap: {probes} of {probes} probe(s) run in the program");
    assert!(err.contains(&want), "{err}");
    for e in expected {
        assert!(inproc.iter().any(|l| l == e), "{e:?} not in {inproc:?}");
    }
}

#[test]
fn parameters_in_registers_and_on_the_stack() {
    let script = r#"
probe process("EXE").function("add") { printf("a=%d b=%d c=%d d=%d\n", $a, $b, $c, $d) }
"#;
    let want = ["a=-7 b=1234567890123 c=65535 d=122"];
    same_on_both("dwarf_O0", script, 1, &want);
    same_on_both("dwarf_O2", script, 1, &want);
}

#[test]
fn fields_through_pointers_and_elements_at_computed_indexes() {
    let script = r#"
probe process("EXE").function("draw") {
    println($s->origin->x, " ", $s->origin->y, " ", $s->corner->y, " ", $s->sides[2], " ", $s->kind, " ", $s->area, " ", $scale)
    for (i = 0; i < 4; i++) printf("%d;", $s->sides[i])
    println("")
}
"#;
    same_on_both("dwarf_O0", script, 1, &["3 -4 20 3 113 100 2", "1;2;3;4;"]);
    let o2 = r#"probe process("EXE").function("draw") { println($s->sides[2], " ", $s->sides[3], " ", $scale) }"#;
    same_on_both("dwarf_O2", o2, 1, &["3 4 2"]);
    let rows = r#"
probe process("EXE").function("pick") {
    println($rows[1][2], " ", $rows[$i][$j], " ", $b->m[1][2], " ", $b->m[$i - 1][$j - 1])
}
"#;
    same_on_both("dwarf_corners", rows, 1, &["12 23 42 42"]);
}

#[test]
fn bitfields_enums_addresses_and_casts() {
    let script = r#"
probe process("EXE").function("mix") {
    println($hue, " ", $bits->low, " ", $bits->mid, " ", $bits->top, " ", $bits->whole)
    printf("%d %d %d\n", &$rec->bits == $bits, &$rec->name[2] - $rec, &$rec->hue - &$rec->name[0])
}
probe process("EXE").function("opaque") {
    println(@cast($p, "record")->hue, " ", @cast($p, "struct record", "EXE")->bits->whole, " ", @cast($p, "struct record")->name[1])
}
"#;
    same_on_both(
        "dwarf_types",
        script,
        2,
        &["-2 6 -11 1 1000", "1 2 28", "-2 77 108"],
    );
    let chase = r#"
probe process("EXE").function("chase") {
    println(@cast($pp, "struct cell *")->v, " ", @cast($pp, "struct cell*")->next->v,
            " ", @cast($name, "char *")[1], " ", @cast($name, "char *")[$pp - $pp + 2])
}
"#;
    same_on_both("dwarf_corners", chase, 1, &["1 77 121 122"]);
}

#[test]
fn return_probes_read_the_values_their_entry_kept() {
    let script = r#"
probe process("EXE").function("add").return { println($a, " ", $d, " ", $return) }
probe process("EXE").function("draw").return { println($scale, " ", $s->sides[1], " ", $return) }
"#;
    let want = ["-7 122 1234567955773", "2 2 20"];
    // Each return probe brings its entry's: four in the program.
    same_on_both("dwarf_O0", script, 4, &want);
    same_on_both("dwarf_O2", script, 4, &want);
}

#[test]
fn parms_and_vars_texts_are_made_in_the_program() {
    // The handler keeps the numbers; the tracer writes the text as it
    // prints, `?` for what is optimised out (`a` and `b` of scale are not
    // computed yet at its entry in the -O2 fixture).
    let script = r#"
probe process("EXE").function("add") { p = $$parms; println(p) }
probe process("EXE").function("add") { printf("add(%s)\n", $$parms) }
"#;
    let want = [
        "a=0xfffffffffffffff9 b=0x11f71fb04cb c=0xffff d=0x7a",
        "add(a=0xfffffffffffffff9 b=0x11f71fb04cb c=0xffff d=0x7a)",
    ];
    same_on_both("dwarf_O0", script, 2, &want);
    same_on_both("dwarf_O2", script, 2, &want);
    let vars = r#"probe process("EXE").function("scale") { println($$vars) }"#;
    same_on_both("dwarf_entry", vars, 1, &["x=0x7 unused=0xe a=? b=?"]);
    // Pretty-printing reads structures: the tracer's, with the reason.
    let pretty = r#"probe process("EXE").function("add") { println($$parms$) }"#;
    let (status, lines, err) = on_route("dwarf_O0", pretty, true);
    assert_eq!(status, 0, "{err}");
    assert!(
        lines
            .iter()
            .any(|l| l == "a=-7 b=1234567890123 c=65535 d='z'"),
        "{lines:?}"
    );
    assert!(
        err.contains("is pretty-printed (`$`), which reads structures"),
        "{err}"
    );
}

#[test]
fn a_site_left_on_its_int3_reads_the_registers_of_the_stop() {
    // `inc` is too short to patch: its hits run the in-process handler
    // at the tracer's stop, with the registers the stop gives.
    let script = r#"probe process("EXE").function("inc") { println("inc ", $x, " ", $x * 2) }"#;
    same_on_both(
        "dwarf_short",
        script,
        1,
        &["inc -20 -40", "inc 0 0", "inc 20 40", "short 5"],
    );
    let (_, _, err) = on_route("dwarf_short", script, true);
    assert!(
        err.contains("0 function entries patched (1 refused)"),
        "{err}"
    );
    assert!(err.contains("5 hit(s) served by in-process code"), "{err}");
}

#[test]
fn a_null_pointer_followed_is_the_tracers_read_fault() {
    // chase(&head): head.next->next is NULL, its `v` at offset 0.
    let script = r#"
probe process("EXE").function("chase") { println(@cast($pp, "struct cell*")->next->next->v) }
"#;
    let errors = |inproc: bool| {
        let (status, _, err) = on_route("dwarf_corners", script, inproc);
        assert_eq!(status, 1, "{err}");
        let lines: Vec<String> = err
            .lines()
            .filter(|l| l.starts_with("ERROR:"))
            .map(String::from)
            .collect();
        (lines, err)
    };
    let (tracer, _) = errors(false);
    let (inproc, err) = errors(true);
    assert_eq!(tracer, inproc, "{err}");
    assert_eq!(inproc.len(), 1, "{err}");
    assert!(
        inproc[0]
            .starts_with("ERROR: read fault [man error::fault] at 0x0 near operator '@cast' at "),
        "{err}"
    );
    assert!(err.contains("1 of 1 probe(s) run in the program"), "{err}");
}

#[test]
fn globals_and_statics_add_the_modules_load_bias() {
    // PIE fixtures: a link-time address is right only with the bias the
    // site's hook list carries.
    let script = r#"
probe process("EXE").function("peek") {
    println(@var("counter"), " ", @var("hidden@types.c"), " ", @var("global_rec")->bits->mid, " ", @var("counter", "EXE"))
}
"#;
    same_on_both("dwarf_types", script, 1, &["41 -9 -3 41"]);
    let arrays = r#"
probe process("EXE").function("pick") {
    println(@var("table")[2][3], " ", @var("table")[$i][$j], " ", @var("cube")[1][2][3],
            " ", @var("cube")[$i - 1][$j - 1][3], " ", user_string(@var("names")[2]))
}
"#;
    same_on_both("dwarf_corners", arrays, 1, &["23 23 123 123 cat"]);
}

#[test]
fn what_the_program_cannot_evaluate_stays_in_the_tracer_and_says_why() {
    // A thread-local lives at the thread pointer, which the program's
    // handler does not read.
    let script = r#"probe process("EXE").function("peek") { println(@var("per_thread")) }"#;
    let (status, lines, err) = on_route("dwarf_types", script, true);
    assert_eq!(status, 0, "{err}");
    assert!(lines.iter().any(|l| l == "7"), "{lines:?}");
    assert!(err.contains("0 of 1 probe(s) run in the program"), "{err}");
    assert!(
        err.contains("reads a target variable that is thread-local"),
        "{err}"
    );
}
