//! Probe handlers that differ only in constants share one function, and
//! those that differ only in their presets (an alias's `name = "read"`)
//! are not even translated (compiler/codegen/src/presets.rs).

mod support;

use support::*;

/// `utap -p4` on `script` with every preset-shared handler translated
/// anyway and compared with its prediction; the "probes run" line.
fn checked_p4(script: &str) -> String {
    let mut cmd = command(utap_bin());
    cmd.env("UTAP_CHECK_PRESETS", "1")
        .args(["-p4", "-e", script]);
    let out = run(cmd);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.stdout.lines().last().unwrap_or_default().to_string()
}

#[test]
fn handlers_differing_in_presets_are_those_translated_ones_predict() {
    let syscalltop = std::fs::read_to_string(format!(
        "{}/examples/syscalltop.stp",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let cases = [
        (
            syscalltop.as_str(),
            "3 functions, 2310 bytes of native code (769 probes run 3 handlers)",
        ),
        // Presets read, with other alias variables and more statements.
        (
            "probe syscall.*.return { printf(\"%s %s %s\\n\", name, argstr, retstr) }",
            "(384 probes run 1 handlers)",
        ),
        // Two presets in a row (alias chain), and expansions of two
        // wildcards, one after the other.
        (
            "global c\nprobe syscall.*.return { c[name, execname()] <<< retval }\n\
             probe syscall.open*, syscall.read* { c[name, \"x\"] <<< 1 }",
            "(395 probes run 2 handlers)",
        ),
    ];
    for (script, handlers) in cases {
        let line = checked_p4(script);
        assert!(line.ends_with(handlers), "{script}: {line}");
    }
}

/// The line of the first statement of `alias` in the stdlib's syscall
/// tapset (its `name = "..."`).
fn preset_line(alias: &str) -> usize {
    let text = std::fs::read_to_string(format!(
        "{}/stdlib/syscalls.stp",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let head = format!("probe {alias} = ");
    text.lines().position(|l| l.starts_with(&head)).unwrap() + 2
}

#[test]
fn a_shared_handler_reports_each_probes_own_preset() {
    // With MAXACTION 0 the first statement fails: the preset of the alias
    // that fired first (loop's first getppid), not that of the handler
    // that was translated.
    let script = "global n\nprobe syscall.write.return, syscall.getppid.return { n[name]++ }";
    let out = run(utap(
        script,
        &["-DMAXACTION=0", "-c", &format!("{} 3", fixture("loop"))],
    ));
    let want = format!(
        "ERROR: MAXACTION exceeded near identifier 'name' at stdlib/syscalls.stp:{}:2",
        preset_line("syscall.getppid.return")
    );
    assert!(out.stderr.starts_with(&want), "{}", out.stderr);
    assert_eq!(out.status, 1);
    // And each expansion gives its own name.
    let script = "global n\nprobe syscall.write.return, syscall.getppid.return { n[name]++ }\n\
                  probe end { foreach (k+ in n) printf(\"%s %d\\n\", k, n[k]) }";
    let out = run(utap(script, &["-c", &format!("{} 130", fixture("loop"))]));
    assert_eq!(out.stdout, "getppid 130\nwrite 3\n", "{}", out.stderr);
}
