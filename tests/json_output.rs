//! `-f json` / `--format json`: every line utap writes is one JSON object
//! with a "type", whatever the script prints (binary bytes, huge arrays),
//! and text output is unchanged without the option. Lines are parsed with
//! serde_json (and with python3's json.tool when it is installed).

use std::process::{Command, Output};

use serde_json::Value;

fn utap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_utap"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("utap runs")
}

/// Parses every line of `out` as one JSON object with a string "type".
fn records(out: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(out).expect("JSON output is UTF-8");
    text.lines()
        .map(|line| {
            let v: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            assert!(v["type"].is_string(), "no type: {line}");
            v
        })
        .collect()
}

fn of_type<'a>(rs: &'a [Value], t: &str) -> Vec<&'a Value> {
    rs.iter().filter(|r| r["type"] == t).collect()
}

const SCRIPT: &str = r#"
global hits, names, total, last, s
probe begin {
  printf("bytes:%s|\n", "\001\002\033[1m\"q\"\\\377\376end")
  print("tab\there")
  for (i = 0; i < 20000; i++) { hits[i, sprint("k", i)] = i }
  names["x\377y"] = "v\001"
  total <<< 3; total <<< 5
  s = "str"
  last = -7
  warn("careful")
  exit()
}
"#;

#[test]
fn every_line_is_a_typed_json_object() {
    let out = utap(&[
        "-f",
        "json",
        "-D",
        "MAXMAPENTRIES=30000",
        "-D",
        "MAXACTION=1000000",
        "-e",
        SCRIPT,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let rs = records(&out.stdout);
    assert_eq!(rs[0]["type"], "schema");
    assert_eq!(rs[0]["version"], 1);
    let outputs = of_type(&rs, "output");
    assert_eq!(
        outputs[0]["data"],
        "bytes:\u{1}\u{2}\u{1b}[1m\"q\"\\\u{fffd}\u{fffd}end|\n"
    );
    assert_eq!(outputs[1]["data"], "tab\there");
    let warning = of_type(&rs, "warning");
    assert_eq!(warning[0]["message"], "careful");
    let maps = of_type(&rs, "map");
    let hits = maps.iter().find(|m| m["name"] == "hits").unwrap();
    let data = hits["data"].as_object().unwrap();
    assert_eq!(data.len(), 20000);
    assert_eq!(data["19999,k19999"], 19999);
    let names = maps.iter().find(|m| m["name"] == "names").unwrap();
    assert_eq!(names["data"]["x\u{fffd}y"], "v\u{1}");
    let stats = of_type(&rs, "stats");
    assert_eq!(stats[0]["name"], "total");
    for (k, v) in [("count", 2), ("sum", 8), ("min", 3), ("max", 5), ("avg", 4)] {
        assert_eq!(stats[0][k], v, "{k}");
    }
    let globals = of_type(&rs, "global");
    assert_eq!(globals[0]["name"], "last");
    assert_eq!(globals[0]["value"], -7);
    assert_eq!(globals[1]["value"], "str");
}

#[test]
fn without_the_option_output_is_text() {
    let out = utap(&[
        "-e",
        "global n probe begin { n = 3; println(\"hi\"); exit() }",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\nn=0x3\n");
}

#[test]
fn runtime_errors_and_compile_errors_are_records() {
    let out = utap(&["--format", "json", "-e", "probe begin { error(\"boom\") }"]);
    assert_eq!(out.status.code(), Some(1));
    let rs = records(&out.stdout);
    let errors = of_type(&rs, "error");
    assert!(
        errors[0]["message"].as_str().unwrap().starts_with("boom"),
        "{errors:?}"
    );

    let out = utap(&["-f", "json", "-e", "probe begin { x = }"]);
    assert_eq!(out.status.code(), Some(1));
    let rs = records(&out.stdout);
    assert_eq!(rs[1]["type"], "error");
    assert_eq!(rs[1]["message"], "parse error: expected an expression");
    assert_eq!(rs[1]["file"], "<input>");
    assert_eq!(rs[1]["line"], 1);
}

#[test]
fn dropped_messages_are_counted_in_a_record() {
    // A reader that waits while the script prints 8 MB through a 1 MB
    // buffer: the pipe fills, then the buffer, and messages are dropped.
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_utap"))
        .args([
            "-f",
            "json",
            "-s",
            "1",
            "-D",
            "MAXACTION=10000000",
            "-e",
            "probe begin { for (i = 0; i < 160000; i++) printf(\"%050d\\n\", i); exit() }",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("utap runs");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    assert!(child.wait().unwrap().success());
    let rs = records(&out);
    let drops = of_type(&rs, "drops");
    assert_eq!(drops.len(), 1);
    assert!(drops[0]["count"].as_u64().unwrap() >= 1, "{:?}", drops[0]);
    assert_eq!(drops[0]["buffer_mb"], 1);
    assert_eq!(rs.last().unwrap()["type"], "drops");
}

#[test]
fn python_json_tool_reads_the_stream() {
    let Ok(status) = Command::new("python3")
        .arg("-c")
        .arg("import json")
        .status()
    else {
        eprintln!("python_json_tool_reads_the_stream: skipped, python3 not installed");
        return;
    };
    assert!(status.success());
    let out = utap(&[
        "-f",
        "json",
        "-e",
        SCRIPT,
        "-D",
        "MAXMAPENTRIES=30000",
        "-D",
        "MAXACTION=1000000",
    ]);
    let path = std::env::temp_dir().join(format!("utap-json-{}.jsonl", std::process::id()));
    std::fs::write(&path, &out.stdout).unwrap();
    let tool = Command::new("python3")
        .args(["-m", "json.tool", "--json-lines"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        tool.status.success(),
        "{}",
        String::from_utf8_lossy(&tool.stderr)
    );
}

const SHARED: &str = "and the traced command's stdout are the same file";

fn warned(args: &[&str]) -> bool {
    let o = utap(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.matches(SHARED).count() <= 1, "{stderr}");
    stderr.contains(SHARED) && stderr.contains("-o FILE")
}

/// JSON on the pipe the command also writes to: one warning on stderr
/// naming `-o`; none when utap's output goes to `-o FILE`, when the
/// program's stdout is redirected (by the shell before its exec), or when
/// only a shell (whose redirections apply to what it starts) shares it.
#[test]
fn machine_output_shared_with_the_command_is_warned_about() {
    let script = "probe syscall.write { n++ } global n";
    let json = |cmd: &str| warned(&["-f", "json", "-e", script, "-c", cmd]);
    assert!(json("echo hi"));
    assert!(json("sh -c '/bin/echo hi; true'"));
    assert!(!json("sh -c '/bin/echo hi > /dev/null; true'"));
    assert!(!json("exec /bin/echo hi >/dev/null"));
    let file = std::env::temp_dir().join(format!("utap-shared-{}.json", std::process::id()));
    let f = file.to_str().unwrap();
    assert!(!warned(&[
        "-f", "json", "-o", f, "-e", script, "-c", "echo hi"
    ]));
    let _ = std::fs::remove_file(&file);
    // Text output is for people: no warning.
    assert!(!warned(&["-e", script, "-c", "echo hi"]));
}

/// Folded stacks (examples/profile.stp) are machine output too.
#[test]
fn folded_stacks_shared_with_the_command_are_warned_about() {
    let example = format!("{}/examples/profile.stp", env!("CARGO_MANIFEST_DIR"));
    assert!(warned(&[&example, "-c", "echo hi"]));
}
