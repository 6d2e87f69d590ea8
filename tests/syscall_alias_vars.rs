//! Every variable SystemTap's syscall aliases give is one utap's give,
//! with the same type (issue 30, point 9).
//!
//! `tests/data/stap_syscall_vars.tsv` lists, for every `syscall.NAME` and
//! `syscall.NAME.return` of SystemTap's tapsets, the variables its probes
//! set (made by `tests/tools/stap_syscall_vars.py` from a SystemTap
//! checkout; its first line names the release and commit).
//! `tests/data/stap_syscall_vars.skip` lists what utap leaves out, each
//! with its reason: whole aliases (`syscall.NAME`: calls x86-64 does not
//! have, or has under another name: `=> syscall.OTHER`, whose variables
//! are then compared) and single variables (`syscall.NAME VAR`). The test reads both
//! and `utap -L`, and fails on a variable that is neither given nor
//! listed, on a type that differs, and on a skip entry that is stale.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

const DATA: &str = include_str!("data/stap_syscall_vars.tsv");
const SKIP: &str = include_str!("data/stap_syscall_vars.skip");

type Vars = BTreeMap<String, String>;

/// `alias -> var -> type` of the data file (`var:type` words).
fn systemtap() -> BTreeMap<String, Vec<(String, String)>> {
    DATA.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (alias, vars) = l.split_once('\t').unwrap_or((l, ""));
            let vars = vars
                .split_whitespace()
                .map(|w| {
                    let (n, t) = w.split_once(':').expect("var:type");
                    (n.to_string(), t.to_string())
                })
                .collect();
            (alias.to_string(), vars)
        })
        .collect()
}

/// `utap -L` of the entry and return aliases: `alias -> var -> type`,
/// without the `$` context variables.
fn utap() -> BTreeMap<String, Vars> {
    let mut out = BTreeMap::new();
    for pattern in ["syscall.*", "syscall.*.return"] {
        let run = Command::new(env!("CARGO_BIN_EXE_utap"))
            .args(["-L", pattern])
            .output()
            .expect("run utap -L");
        assert!(run.status.success(), "utap -L {pattern}: {run:?}");
        for line in String::from_utf8(run.stdout).unwrap().lines() {
            let mut words = line.split_whitespace();
            let alias = words.next().unwrap().to_string();
            let vars = words
                .filter(|w| !w.starts_with('$'))
                .filter_map(|w| w.split_once(':'))
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect();
            out.insert(alias, vars);
        }
    }
    out
}

/// The skip entries: (alias, variable or None) -> reason.
fn skipped() -> BTreeMap<(String, Option<String>), String> {
    let mut out = BTreeMap::new();
    for line in SKIP
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (what, why) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("skip entry without a reason: {line}"));
        assert!(
            !why.trim().is_empty(),
            "skip entry without a reason: {line}"
        );
        let mut words = what.split_whitespace();
        let alias = words.next().unwrap().to_string();
        let var = words.next().map(str::to_string);
        assert!(
            out.insert((alias, var), why.to_string()).is_none(),
            "twice: {line}"
        );
    }
    out
}

#[test]
fn data_names_the_systemtap_release_it_came_from() {
    let first = DATA.lines().next().unwrap();
    assert!(
        first.starts_with("# SystemTap release-") && first.split_whitespace().count() == 4,
        "{first}"
    );
    // Sanity of the extraction: the alias the issue names, as SystemTap has it.
    let stap = systemtap();
    let names: Vec<&str> = stap["syscall.delete_module"]
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "name",
            "name_user",
            "flags",
            "flags_str",
            "argstr",
            "name_user_unquoted"
        ]
    );
    assert!(stap.len() > 700, "{} aliases", stap.len());
}

#[test]
fn aliases_give_every_variable_of_systemtaps_tapset() {
    let (stap, ours, skip) = (systemtap(), utap(), skipped());
    let mut gaps = Vec::new();
    let mut used = BTreeSet::new();
    for (alias, vars) in &stap {
        let whole = (alias.clone(), None);
        // `=> syscall.OTHER: why`: the call is utap's alias OTHER.
        let other = skip
            .get(&whole)
            .and_then(|why| why.strip_prefix("=> "))
            .and_then(|rest| rest.split(':').next());
        if let Some(why) = skip.get(&whole) {
            used.insert(whole);
            if ours.contains_key(alias) {
                gaps.push(format!("{alias}: listed as skipped, but utap has it"));
            }
            if other.is_none() {
                assert!(!why.starts_with("=>"), "{alias}: bad => entry");
                continue;
            }
        }
        let Some(have) = ours.get(other.unwrap_or(alias)) else {
            gaps.push(format!("{alias}: no such alias"));
            continue;
        };
        for (var, ty) in vars {
            let key = (alias.clone(), Some(var.clone()));
            let right = have.get(var) == Some(ty);
            if skip.contains_key(&key) {
                used.insert(key);
                if right {
                    gaps.push(format!(
                        "{alias} {var}: listed as skipped, but utap gives it"
                    ));
                }
            } else if let Some(other) = have.get(var).filter(|_| !right) {
                gaps.push(format!("{alias} {var}: {other}, SystemTap's is {ty}"));
            } else if !right {
                gaps.push(format!("{alias} {var}:{ty}: missing"));
            }
        }
    }
    for key in skip.keys().filter(|k| !used.contains(*k)) {
        gaps.push(format!("skip entry {key:?}: not in SystemTap's data"));
    }
    assert!(gaps.is_empty(), "{} gaps:\n{}", gaps.len(), gaps.join("\n"));
}
