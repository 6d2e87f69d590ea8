//! USDT notes (runtime/src/elf/sdt.rs) against `readelf -n`: on the
//! fixture built with <sys/sdt.h> (tests/fixtures/usdt) and on Debian's
//! /usr/bin/python3.11; each is skipped with a message when absent.

mod support;

use std::path::Path;
use std::process::Command;

use support::{fixture, have};
use utap_runtime::elf::sdt::{Operand, SdtNote, notes_of, sdt_notes};

/// readelf's notes as (provider, name, pc, base, semaphore, args).
fn readelf_notes(path: &str) -> Vec<(String, String, u64, u64, u64, String)> {
    let out = Command::new("readelf")
        .args(["-n", path])
        .output()
        .expect("readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut notes = Vec::new();
    let mut cur: Option<(String, String, u64, u64, u64)> = None;
    let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap();
    for l in text.lines().map(str::trim) {
        if let Some(p) = l.strip_prefix("Provider: ") {
            cur = Some((p.into(), String::new(), 0, 0, 0));
        } else if let Some(n) = l.strip_prefix("Name: ") {
            cur.as_mut().unwrap().1 = n.into();
        } else if let Some(loc) = l.strip_prefix("Location: ") {
            let f: Vec<&str> = loc.split(", ").collect();
            let c = cur.as_mut().unwrap();
            c.2 = hex(f[0]);
            c.3 = hex(f[1].trim_start_matches("Base: "));
            c.4 = hex(f[2].trim_start_matches("Semaphore: "));
        } else if let Some(a) = l.strip_prefix("Arguments:") {
            let (p, n, pc, base, sem) = cur.take().unwrap();
            notes.push((p, n, pc, base, sem, a.trim().to_string()));
        }
    }
    notes
}

fn ours(notes: &[SdtNote]) -> Vec<(String, String, u64, u64, u64, String)> {
    notes
        .iter()
        .map(|s| {
            (
                s.provider.clone(),
                s.name.clone(),
                s.pc,
                s.base,
                s.semaphore,
                s.args.clone(),
            )
        })
        .collect()
}

fn check_against_readelf(path: &str) -> Vec<SdtNote> {
    let data = std::fs::read(path).unwrap();
    let notes = sdt_notes(&data).unwrap();
    assert!(!notes.is_empty(), "{path} has markers");
    assert_eq!(ours(&notes), readelf_notes(path), "{path}");
    // The section-by-section reader the checker and the session use
    // (start-up: no whole-file read) gives the same notes.
    let read = notes_of(path);
    assert_eq!(read.as_ref().as_ref().unwrap(), &notes, "{path}");
    for n in &notes {
        n.parsed_args()
            .unwrap_or_else(|e| panic!("{}:{} {e}", n.provider, n.name));
    }
    notes
}

#[test]
fn fixture_notes_equal_readelf() {
    let path = fixture("usdt");
    if !Path::new(&path).exists() || !have("readelf") {
        eprintln!("skipped: usdt fixture not built (install systemtap-sdt-dev) or no readelf");
        return;
    }
    let notes = check_against_readelf(&path);
    let names: Vec<&str> = notes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["work", "mixed", "ticked", "start"]);
    assert!(
        notes
            .iter()
            .all(|n| n.semaphore != 0 && n.provider == "demo")
    );
    let work = notes[0].parsed_args().unwrap();
    assert_eq!(work.len(), 2);
    assert!(work.iter().all(|a| a.signed));
    assert_eq!((work[0].size, work[1].size), (8, 4));
    assert!(matches!(work[0].operand, Operand::Reg(r) if r.name == "rdi"));
    assert!(matches!(work[1].operand, Operand::Reg(r) if r.name == "rsi" && r.width == 4));
    let mixed = notes[1].parsed_args().unwrap();
    assert_eq!(mixed.len(), 3);
    assert_eq!((mixed[0].size, mixed[0].signed), (1, true));
    assert_eq!(mixed[2].operand, Operand::Imm(-1));
    assert!(notes[3].parsed_args().unwrap().is_empty());
}

/// A note written for another `.stapsdt.base` (as after prelink) is
/// corrected by the difference: the note's base field is moved down by
/// 0x10 in a copy of the file, so pc and semaphore come out 0x10 higher.
#[test]
fn prelink_correction_moves_pc_and_semaphore() {
    let path = fixture("usdt");
    if !Path::new(&path).exists() {
        eprintln!("skipped: usdt fixture not built (install systemtap-sdt-dev)");
        return;
    }
    let mut data = std::fs::read(&path).unwrap();
    let orig = sdt_notes(&data).unwrap();
    let n = &orig[0];
    let mut pattern = n.pc.to_le_bytes().to_vec();
    pattern.extend(n.base.to_le_bytes());
    let at = data
        .windows(16)
        .position(|w| w == pattern)
        .expect("note descriptor");
    data[at + 8..at + 16].copy_from_slice(&(n.base - 0x10).to_le_bytes());
    let moved = sdt_notes(&data).unwrap();
    assert_eq!(moved[0].base, n.base - 0x10);
    assert_eq!(moved[0].pc, n.pc + 0x10);
    assert_eq!(moved[0].semaphore, n.semaphore + 0x10);
    assert_eq!(moved[1], orig[1]);
}

#[test]
fn python_notes_equal_readelf() {
    let path = "/usr/bin/python3.11";
    if !Path::new(path).exists() || !have("readelf") {
        eprintln!("skipped: {path} or readelf not installed");
        return;
    }
    let notes = check_against_readelf(path);
    assert!(notes.iter().any(|n| n.name == "function__entry"));
    assert!(
        notes
            .iter()
            .all(|n| n.provider == "python" && n.semaphore != 0)
    );
}
