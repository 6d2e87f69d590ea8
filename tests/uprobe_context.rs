//! Context of function probes beyond the arguments: `register()` and
//! `u_register()` by SystemTap's x86_64 names in function, `.return`,
//! `.plt` and syscall probes (checked against the calls the fixture
//! makes: `add(3, 6)` returns 9), SystemTap's errors for an unknown
//! register and for a probe without registers, and `$$name`,
//! `probefunc()` and `ppfunc()` in `.plt` probes.

mod support;

use support::{fixture, run, utap};

/// Runs `script` (EXE replaced by the fixture) over `ufuncs basic 4`.
fn trace(script: &str) -> support::Outcome {
    let path = fixture("ufuncs");
    let script = script.replace("EXE", &path);
    run(utap(&script, &["-c", &format!("{path} basic 4")]))
}

fn lines_with<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn registers_at_entry_return_and_syscall() {
    let o = trace(
        r#"
probe process("EXE").function("add") {
    if ($arg1 == 3)
        printf("entry %d %d %d %d %d\n", register("rdi"), register("esi"), u_register("di"),
               u_register("rip") == uaddr(), u_register("rsp") % 16)
}
probe process("EXE").function("add").return {
    if ($arg1 == 3) printf("return %d %d %d\n", register("rax"), u_register("eax"), register("al"))
}
probe process("EXE").plt("malloc") {
    if (!m++) printf("plt %d %d\n", u_register("rdi") == $arg1, u_register("rip") == uaddr())
}
probe process("EXE").syscall {
    if ($syscall == 1 && !w++) printf("syscall %d %d\n", register("orig_rax"), register("rdi"))
}
global m, w
"#,
    );
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    // At the first instruction rsp points at the return address: 8 mod 16.
    assert_eq!(
        lines_with(&o.stdout, "entry "),
        ["entry 3 6 3 1 8"],
        "{}",
        o.stdout
    );
    assert_eq!(
        lines_with(&o.stdout, "return "),
        ["return 9 9 9"],
        "{}",
        o.stdout
    );
    assert_eq!(lines_with(&o.stdout, "plt "), ["plt 1 1"], "{}", o.stdout);
    // write(1, ...) of the fixture's first line.
    assert_eq!(
        lines_with(&o.stdout, "syscall "),
        ["syscall 1 1"],
        "{}",
        o.stdout
    );
}

#[test]
fn narrow_registers_sign_extend_in_register_only() {
    // rsp's low 16 and 32 bits: register() sign-extends them, u_register()
    // does not (SystemTap's _stp_register).
    let o = trace(
        r#"
probe process("EXE").function("add") {
    if ($arg1 == 1) {
        sp = u_register("rsp")
        printf("sp %d %d %d %d\n", register("sp") == ((sp & 0xffff) ^ 0x8000) - 0x8000,
               u_register("sp") == (sp & 0xffff),
               register("esp") == ((sp & 0xffffffff) ^ 0x80000000) - 0x80000000,
               u_register("esp") == (sp & 0xffffffff))
    }
}
"#,
    );
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    assert_eq!(lines_with(&o.stdout, "sp "), ["sp 1 1 1 1"], "{}", o.stdout);
}

#[test]
fn unknown_register_is_systemtaps_error() {
    // `spl` is not one of SystemTap's x86_64 names.
    let o = trace(r#"probe process("EXE").function("add") { println(register("spl")) }"#);
    assert_eq!(o.status, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("ERROR: Unknown register: spl"),
        "{}",
        o.stderr
    );
}

#[test]
fn no_registers_in_begin() {
    let o = run(utap(r#"probe begin { println(register("rax")) }"#, &[]));
    assert_eq!(o.status, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("ERROR: cannot access CPU registers in this context"),
        "{}",
        o.stderr
    );
}

#[test]
fn plt_name_probefunc_and_ppfunc() {
    let o = trace(
        r#"
global n
probe process("EXE").plt("*alloc"), process("EXE").plt("free") { n[$$name, probefunc(), ppfunc()]++ }
probe end { foreach ([a, b, c] in n+) printf("plt %s %s %s %d\n", a, b, c, n[a, b, c]) }
"#,
    );
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    let malloc = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("malloc "))
        .expect("fixture's malloc count");
    assert!(
        lines_with(&o.stdout, "plt ")
            .contains(&format!("plt malloc malloc malloc {malloc}").as_str()),
        "{}",
        o.stdout
    );
    assert!(
        lines_with(&o.stdout, "plt ").contains(&format!("plt free free free {malloc}").as_str()),
        "{}",
        o.stdout
    );
}

#[test]
fn plt_name_is_only_in_plt_probes() {
    let script = r#"probe process("EXE").function("add") { println($$name) }"#;
    let o = run(utap(&script.replace("EXE", &fixture("ufuncs")), &["-p2"]));
    assert_ne!(o.status, 0, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("unknown target variable '$$name'"),
        "{}",
        o.stderr
    );
}

#[test]
fn arguments_can_be_set_at_entry_under_guru_mode() {
    // add(2, 4) becomes add(2, 100): the fixture's sum grows by 96, and the
    // return probe sees the arguments the function got.
    let path = fixture("ufuncs");
    let script = r#"
probe process("EXE").function("add") { if ($arg1 == 2) $arg2 = 100 }
probe process("EXE").function("add").return { if ($arg1 == 2) printf("ret %d %d\n", $arg2, $return) }
"#
    .replace("EXE", &path);
    let o = run(utap(&script, &["-g", "-c", &format!("{path} basic 4")]));
    assert_eq!(o.status, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("sum 183\n"), "{}", o.stdout);
    assert_eq!(
        lines_with(&o.stdout, "ret "),
        ["ret 100 102"],
        "{}",
        o.stdout
    );
    // Without -g the write is refused.
    let o = run(utap(&script, &["-c", &format!("{path} basic 4")]));
    assert_ne!(o.status, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("need utap -g"), "{}", o.stderr);
}

#[test]
fn a_function_named_like_a_program_keeps_its_name_in_pp() {
    // `write` is also /usr/bin/write: only process("NAME") goes through $PATH.
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    if !std::path::Path::new(libc).exists() {
        eprintln!("skipped: no {libc}");
        return;
    }
    let script = format!(
        r#"probe process("{libc}").function("write") {{ if (!n++) println(pp()) }} global n"#
    );
    let o = run(utap(&script, &["-c", "echo hi"]));
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert_eq!(
        lines_with(&o.stdout, "process("),
        // As SystemTap: the file by its canonical path, and `write` by
        // its symbol's name (its DWARF name is glibc's `__libc_write`).
        [format!(
            r#"process("{}").function("write")"#,
            std::fs::canonicalize(libc).unwrap().display()
        )
        .as_str()],
        "{}",
        o.stdout
    );
}

/// `pp()` is the point as resolved, SystemTap's derived probe
/// (tapsets.cxx, `dwarf_derived_probe`): the module by its canonical path,
/// the matched function as `NAME@FILE:LINE` from the debug information
/// (the name alone without it), `.call`/`.return` kept; a library's site
/// names the library as the process; a PLT entry is its statement
/// address. `pn()` and `-l` give the well-formed point (`.library(..)`
/// and `.plt("NAME")` kept). A tapset alias gives its underlying point.
#[test]
fn pp_is_the_resolved_point() {
    let vw = fixture("vw");
    let dir = std::path::Path::new(&vw).parent().unwrap().to_path_buf();
    let src = format!("{}/tests/fixtures/uprobe/vw.c", env!("CARGO_MANIFEST_DIR"));
    let script = r#"global seen
probe process("./vw").function("ac?") { if (!seen[pp()]++) printf("%s | %s\n", pp(), pn()) }
probe process("./vw").function("acc").call { if (!seen[pp()]++) println(pp()) }
probe process("./vw").function("acc").return { if (!seen[pp()]++) println(pp()) }
probe syscall.getppid { if (execname() == "vw") printf("%s | %s\n", pp(), pn()) }"#;
    let mut c = utap(script, &["-c", "./vw"]);
    c.current_dir(&dir);
    let o = run(c);
    assert_eq!(o.status, 0, "{}", o.stderr);
    let acc = format!(r#"process("{vw}").function("acc@{src}:6")"#);
    let mut got: Vec<&str> = o.stdout.lines().collect();
    got.sort();
    let mut want = vec![
        format!("{acc} | {acc}"),
        format!("{acc}.call"),
        format!("{acc}.return"),
        "process.syscall | syscall.getppid".to_string(),
    ];
    want.sort();
    assert_eq!(got, want, "{}", o.stderr);
    let mut c = support::command(support::utap_bin());
    c.args(["-l", r#"process("./vw").function("ac*")"#])
        .current_dir(&dir);
    assert_eq!(run(c).stdout, format!("{acc}\n"));

    // Without debug information, a PLT entry, a library's function.
    let exe = fixture("uplt");
    let lib = fixture("libuplt.so");
    let image = utap_runtime::elf::ElfImage::open(std::path::Path::new(&exe)).unwrap();
    let strlen = image.plt.iter().find(|p| p.name == "strlen").unwrap().addr;
    let script = format!(
        r#"global seen
probe process("{exe}").plt("str*"), process("{exe}").library("{lib}").function("uplt_*") {{
    if (!seen[pp()]++) printf("%s | %s\n", pp(), pn())
}}"#
    );
    let o = run(utap(&script, &["-c", &exe]));
    assert_eq!(o.status, 0, "{}", o.stderr);
    let mut got: Vec<&str> = o.stdout.lines().filter(|l| l.contains(" | ")).collect();
    got.sort();
    let mut want = vec![
        format!(r#"process("{exe}").statement({strlen:#x}) | process("{exe}").plt("strlen")"#),
        format!(
            r#"process("{lib}").function("uplt_len") | process("{exe}").library("{lib}").function("uplt_len")"#
        ),
    ];
    want.sort();
    assert_eq!(got, want, "{}", o.stderr);
}
