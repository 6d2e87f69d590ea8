//! Per-probe lock sets (issue 16, point 2): which globals each probe
//! handler locks, read or write, by SystemTap's rules (see
//! `utap_compiler::locks`).

use utap_compiler::check::{self, CheckOptions};
use utap_compiler::locks::probe_locks;
use utap_compiler::parser::{NodeIds, ParseOptions, parse_file};
use utap_compiler::program::Program;
use utap_compiler::source::SourceMap;

fn program(src: &str) -> Program {
    let mut map = SourceMap::new();
    let file = map.add("t.stp", src);
    let mut ids = NodeIds::default();
    let script = parse_file(&map, file, &ParseOptions::default(), &mut ids).unwrap();
    check::check(&mut map, script, &CheckOptions::default(), &mut ids)
        .unwrap_or_else(|d| panic!("{}", utap_compiler::diag::render_all(&d, &map, false)))
        .program
}

/// Per probe: "name:r" / "name:w" sorted by name. Each set must be in
/// global-index order (the order locks are taken in).
fn locks(src: &str) -> Vec<Vec<String>> {
    let p = program(src);
    probe_locks(&p)
        .iter()
        .map(|set| {
            assert!(set.windows(2).all(|w| w[0].global < w[1].global), "{set:?}");
            let mut names: Vec<String> = set
                .iter()
                .map(|l| {
                    let name = &p.globals[l.global.0 as usize].name;
                    format!("{name}:{}", if l.write { "w" } else { "r" })
                })
                .collect();
            names.sort();
            names
        })
        .collect()
}

#[test]
fn scalars_and_arrays_read_or_written() {
    let got = locks(
        "global a, b, c, d
         probe begin { a = 1; println(b); c[1]++ }
         probe end { if ([1] in c) println(d[2]); b += 1 }
         probe timer.s(1) { d[1] = 2 }",
    );
    assert_eq!(
        got,
        [
            vec!["a:w", "b:r", "c:w"],
            vec!["b:w", "c:r", "d:r"],
            vec!["d:w"]
        ]
    );
}

#[test]
fn statistics_take_a_read_lock_to_add_and_a_write_lock_to_read() {
    let got = locks(
        "global s, t, h, e, z
         probe begin { s <<< 1; t[1] <<< 2 }
         probe end { println(@count(s)); foreach (k in t) println(k) }
         probe timer.s(1) { print(@hist_log(h)); e[1] <<< 1; println(@sum(e[1])) }
         probe never { delete z; z <<< 1 }",
    );
    assert_eq!(
        got,
        [
            vec!["s:r", "t:r"],
            vec!["s:w", "t:w"],
            vec!["e:w", "h:w"],
            vec!["z:w"]
        ]
    );
}

#[test]
fn functions_add_their_globals_transitively_and_recursion_ends() {
    let got = locks(
        "global n, m = 1, s
         function inner() { s <<< 1; return m }
         function outer(k) { if (k > 0) return outer(k - 1); return inner() }
         function count() { n++ }
         probe begin { count(); println(outer(3)) }
         probe end { println(m) }",
    );
    assert_eq!(got, [vec!["m:r", "n:w", "s:r"], vec!["m:r"]]);
}

#[test]
fn conditions_and_foreach_keys_count() {
    let got = locks(
        "global on = 1, a, lim = 2
         probe begin if (on) { foreach (k in a limit lim) println(k) }
         probe end { a[1] = 1 }",
    );
    assert_eq!(got, [vec!["a:r", "lim:r", "on:r"], vec!["a:w"]]);
}
