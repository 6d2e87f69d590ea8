//! The ELF side of function probes (runtime/src/elf) against binutils on
//! the uprobe fixtures: symbols equal `nm`'s, PLT stubs equal `objdump`'s
//! `name@plt` labels, and run-time addresses computed from /proc/PID/maps
//! hold the file's bytes (PIE, non-PIE, a shared library, libc).

mod support;

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use support::{Running, fixture, have};
use utap_runtime::elf::{AddressSpaceMap, ElfImage, ImageCache, read_maps};

/// `nm` function symbols (T/t/W/w/i) as (name, addr).
fn nm_functions(path: &str, dynamic: bool) -> BTreeSet<(String, u64)> {
    let mut c = Command::new("nm");
    c.arg("--defined-only");
    if dynamic {
        c.arg("-D");
    }
    let out = c.arg(path).output().expect("nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let kind = f.next()?;
            let name = f.next()?;
            matches!(kind, "T" | "t" | "W" | "i")
                .then(|| (name.split('@').next().unwrap().to_string(), addr))
        })
        .filter(|(_, a)| *a != 0)
        .collect()
}

/// nm's `W` also covers weak data (`data_start`): keep code addresses.
fn code_only(image: &ElfImage, set: BTreeSet<(String, u64)>) -> BTreeSet<(String, u64)> {
    set.into_iter().filter(|(_, a)| image.is_code(*a)).collect()
}

fn our_functions(image: &ElfImage) -> BTreeSet<(String, u64)> {
    image
        .symbols
        .iter()
        .filter(|s| s.func)
        .map(|s| (s.name.clone(), s.addr))
        .collect()
}

fn image(path: &str) -> ElfImage {
    ElfImage::open(Path::new(path)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn function_symbols_equal_nm() {
    if !have("nm") {
        eprintln!("skipped: nm (binutils) not installed");
        return;
    }
    for name in ["ufuncs", "ufuncs_nopie", "libufix.so"] {
        let path = fixture(name);
        let img = image(&path);
        let ours = our_functions(&img);
        let mut nm = nm_functions(&path, false);
        nm.extend(nm_functions(&path, true));
        assert_eq!(ours, code_only(&img, nm), "{name}");
        assert!(ours.iter().any(|(n, _)| n == "add" || n == "ulib_square"));
    }
    // Stripped: .dynsym only (the fixture exports its functions).
    let path = fixture("ufuncs_stripped");
    let img = image(&path);
    assert_eq!(
        our_functions(&img),
        code_only(&img, nm_functions(&path, true))
    );
    assert!(img.symbols.function("fib").is_some());
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    if Path::new(libc).exists() {
        let img = image(libc);
        let mut nm = nm_functions(libc, true);
        nm.extend(nm_functions(libc, false));
        // A separate debug file (libc6-dbg) adds its .symtab.
        if let Some(debug) = &img.debug_file {
            nm.extend(nm_functions(&debug.to_string_lossy(), false));
        }
        assert_eq!(our_functions(&img), code_only(&img, nm), "libc");
        assert!(img.symbols.function("malloc").is_some());
    }
}

/// `objdump -d` labels `ADDR <name@plt>:` as (name, addr).
fn objdump_plt(path: &str) -> BTreeSet<(String, u64)> {
    let out = Command::new("objdump")
        .args(["-d", path])
        .output()
        .expect("objdump");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix("@plt>:")?;
            Some((name.to_string(), u64::from_str_radix(addr.trim(), 16).ok()?))
        })
        .collect()
}

#[test]
fn plt_stubs_equal_objdump() {
    if !have("objdump") {
        eprintln!("skipped: objdump (binutils) not installed");
        return;
    }
    for name in ["ufuncs", "ufuncs_nopie", "ufuncs_stripped"] {
        let path = fixture(name);
        let ours: BTreeSet<(String, u64)> = image(&path)
            .plt
            .iter()
            .map(|p| (p.name.clone(), p.addr))
            .collect();
        let theirs = objdump_plt(&path);
        assert_eq!(ours, theirs, "{name}");
        assert!(ours.iter().any(|(n, _)| n == "malloc"), "{name}: {ours:?}");
    }
}

/// The bytes of `image` at link address `vaddr`, from the file.
fn file_bytes(image: &ElfImage, vaddr: u64) -> [u8; 16] {
    let off = image.file_offset(vaddr).unwrap();
    let mut b = [0; 16];
    std::fs::File::open(&image.path)
        .unwrap()
        .read_exact_at(&mut b, off)
        .unwrap();
    b
}

fn mem_bytes(pid: i32, addr: u64) -> [u8; 16] {
    let mut b = [0; 16];
    std::fs::File::open(format!("/proc/{pid}/mem"))
        .unwrap()
        .read_exact_at(&mut b, addr)
        .unwrap();
    b
}

#[test]
fn runtime_addresses_from_maps_hold_the_files_bytes() {
    for (name, pie) in [("ufuncs", true), ("ufuncs_nopie", false)] {
        let p = Running::ready(name, &["wait"]);
        let maps = read_maps(p.pid()).unwrap();
        let exe = image(&fixture(name));
        assert_eq!(exe.relocatable, pie);
        let bias = exe.bias(&maps).unwrap();
        assert_eq!(bias == 0, !pie, "{name}: bias {bias:#x}");
        let lib = image(&fixture("libufix.so"));
        let mut checked = 0;
        for (img, func) in [(&exe, "add"), (&exe, "fib"), (&lib, "ulib_square")] {
            let sym = img.symbols.function(func).unwrap();
            let at = img.runtime_addr(&maps, sym.addr).unwrap();
            assert_eq!(
                mem_bytes(p.pid(), at),
                file_bytes(img, sym.addr),
                "{name} {func}"
            );
            checked += 1;
        }
        let mut cache = ImageCache::default();
        let space = AddressSpaceMap::new(&maps, &mut cache);
        let add = exe.symbols.function("add").unwrap();
        let at = exe.runtime_addr(&maps, add.addr).unwrap();
        assert_eq!(space.symname(at + 1), "add");
        assert_eq!(
            space.symdata(at + 1),
            format!("add+0x1/{:#x} [{}]", add.size, exe.path)
        );
        assert_eq!(space.modname(at), Some(exe.path.as_str()));
        let libc = space
            .modules
            .iter()
            .find(|m| m.image.symbols.function("malloc").is_some())
            .expect("libc mapped");
        let malloc = libc.image.symbols.function("malloc").unwrap();
        let at = libc.image.runtime_addr(&maps, malloc.addr).unwrap();
        assert_eq!(at, malloc.addr + libc.bias);
        assert_eq!(mem_bytes(p.pid(), at), file_bytes(&libc.image, malloc.addr));
        assert_eq!(checked, 3);
    }
}
