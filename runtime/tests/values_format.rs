//! printf and print against the conformance corpus: each test makes the
//! same calls as a `run/` script and compares with its `.out` byte for
//! byte.

#[path = "common/corpus.rs"]
mod corpus;
use corpus::skip_without_corpus;

use utap_runtime::format::{Arg, PRINT_BUFFER_SIZE, format_into, parse, print_args};
use utap_runtime::values::arith::{big_endian2, big_endian4, big_endian8};
use utap_runtime::values::strings;

fn expected(name: &str) -> Vec<u8> {
    std::fs::read(corpus::run_file(&format!("{name}.out"))).unwrap()
}

fn printf(out: &mut Vec<u8>, fmt: &str, args: &[Arg<'_>]) {
    format_into(out, &parse(fmt).unwrap(), args, PRINT_BUFFER_SIZE);
}

fn assert_out(got: &[u8], name: &str) {
    let want = expected(name);
    assert!(
        got == want.as_slice(),
        "{name}: got\n{}\nwant\n{}",
        String::from_utf8_lossy(got),
        String::from_utf8_lossy(&want)
    );
}

fn longs(vals: &[i64]) -> Vec<Arg<'static>> {
    vals.iter().map(|&v| Arg::Long(v)).collect()
}

#[test]
fn int1() {
    skip_without_corpus!("int1");
    let vals = longs(&[1, 10, 9000000000000, -1, -1024]);
    let sections: [&[&str]; 4] = [
        &["%d", "%2d", "%16d", "%016d", "%ld", "%#d", "%#ld"],
        &["%u", "%2u", "%16u", "%016u", "%lu", "%#u", "%#lu"],
        &[
            "%x", "%2x", "%16x", "%016x", "%16X", "%016X", "%lx", "%#x", "%#lx",
        ],
        &["%o", "%2o", "%16o", "%016o", "%lo", "%#o", "%#lo"],
    ];
    let mut out = Vec::new();
    for (i, rows) in sections.iter().enumerate() {
        if i > 0 {
            printf(&mut out, "\n", &[]);
        }
        for conv in *rows {
            printf(&mut out, &format!("{}\n", [*conv; 5].join(",")), &vals);
        }
    }
    assert_out(&out, "int1");
}

#[test]
fn ptr_compat_1_3() {
    skip_without_corpus!("ptr_compat_1_3");
    let vals = [0, 1, 0x12345678, 0x12345678abcdef00, 0x0000000012345678];
    let formats = [
        "%p\n",
        "%20pX\n",
        "%-20pX\n",
        "%.20pX\n",
        "%20.8pX\n",
        "%-20.8pX\n",
        "%8p\n",
        "%-8pX\n",
        "%.8p\n",
        "%8.20p\n",
        "%-8.20pX\n",
    ];
    let mut out = Vec::new();
    for (i, fmt) in formats.iter().enumerate() {
        if i > 0 {
            printf(&mut out, "\n", &[]);
        }
        for v in vals {
            printf(&mut out, fmt, &[Arg::Long(v)]);
        }
    }
    assert_out(&out, "ptr-1.3");
}

#[test]
fn bin1_to_bin5() {
    skip_without_corpus!("bin1_to_bin5");
    let mut out = Vec::new();
    printf(&mut out, "%1b", &[Arg::Long(0x42)]);
    assert_out(&out, "bin1");

    let mut out = Vec::new();
    let (a, b, c, d) = (0x12, 0x34, 0x56, 0x78);
    printf(&mut out, "%1b", &[Arg::Long(0x12)]);
    printf(&mut out, "%1b", &[Arg::Long(0x34)]);
    printf(&mut out, "%1b%1b", &longs(&[0x56, 0x78]));
    printf(&mut out, "%1b%1b%1b%1b", &longs(&[a, b, c, d]));
    printf(&mut out, "a=%1b b=%1b c=%1b d=%1b", &longs(&[a, b, c, d]));
    assert_out(&out, "bin2");

    let mut out = Vec::new();
    let be = big_endian2;
    printf(&mut out, "%2b", &[Arg::Long(be(0x12))]);
    printf(&mut out, "%2b", &[Arg::Long(be(0x34))]);
    printf(&mut out, "%2b%2b", &longs(&[be(0xabcd), be(0x5678)]));
    let abcd = longs(&[be(0x12345678), be(0xabcd), be(0x8888), be(0xcdef)]);
    printf(&mut out, "%2b%2b%2b%2b", &abcd);
    printf(&mut out, "a=%2b b=%2b c=%2b d=%2b", &abcd);
    assert_out(&out, "bin3");

    let mut out = Vec::new();
    let be = big_endian4;
    printf(&mut out, "%4b", &[Arg::Long(be(0x12))]);
    printf(&mut out, "%4b", &[Arg::Long(be(0x34))]);
    printf(&mut out, "%4b%4b", &longs(&[be(0xabcdef00), be(0x5678)]));
    let abcd = longs(&[
        be(0x12345678),
        be(0x11112222),
        be(0x88889999),
        be(0xcdef0000),
    ]);
    printf(&mut out, "%4b%4b%4b%4b", &abcd);
    printf(&mut out, "a=%4b b=%4b c=%4b d=%4b", &abcd);
    assert_out(&out, "bin4");

    let mut out = Vec::new();
    let be = |v: u64| big_endian8(v as i64);
    printf(&mut out, "%8b", &[Arg::Long(be(0x12))]);
    printf(&mut out, "%8b", &[Arg::Long(be(0x34))]);
    printf(
        &mut out,
        "%8b%8b",
        &longs(&[be(0xabcd000011112222), be(0x5678567856785678)]),
    );
    let abcd = longs(&[
        be(0x0012345678abcdef),
        be(0x1111222233334444),
        be(0x88889999aaaabbbb),
        be(0xcdef000011112222),
    ]);
    printf(&mut out, "%8b%8b%8b%8b", &abcd);
    printf(&mut out, "a=%8b b=%8b c=%8b d=%8b", &abcd);
    assert_out(&out, "bin5");
}

#[test]
fn bin6() {
    skip_without_corpus!("bin6");
    let (one, two, four, eight) = (1, 2, 4, 8);
    let d = big_endian8(0x6465616462656566);
    let mut out = Vec::new();
    let mut line = |label: &str, conv: &str, args: &[i64]| {
        let fmt = format!("Binary {label}\t:{conv}:\n");
        let mut all = longs(args);
        all.push(Arg::Long(d));
        printf(&mut out, &fmt, &all);
    };
    line("default width default precision", "%b", &[]);
    for w in ["%1b", "%2b", "%4b", "%8b"] {
        line("static width default precision", w, &[]);
    }
    for w in [one, two, four, eight] {
        line("dynamic width default precision", "%*b", &[w]);
    }
    for p in ["%.8b", "%.4b", "%.2b", "%.1b"] {
        line("default width static precision", p, &[]);
    }
    for p in [eight, four, two, one] {
        line("default width dynamic precision", "%.*b", &[p]);
    }
    for wp in ["%1.8b", "%2.4b", "%4.2b", "%8.1b"] {
        line("static width static precision", wp, &[]);
    }
    for (w, p) in [(one, eight), (two, four), (four, two), (eight, one)] {
        line("dynamic width dynamic precision", "%*.*b", &[w, p]);
    }
    assert_out(&out, "bin6");
}

#[test]
fn chars() {
    skip_without_corpus!("chars");
    let mut out = Vec::new();
    printf(&mut out, "%c", &[Arg::Long(115)]);
    printf(&mut out, "%c", &[Arg::Long(116)]);
    printf(&mut out, "%c%c", &longs(&[97, 112]));
    let ok = |i| strings::stringat(b"ok", i).unwrap();
    printf(&mut out, "%c%c", &longs(&[ok(0), ok(1)]));
    print_args(&mut out, &[Arg::Str(b"\n")], None, false);
    assert_out(&out, "char1");

    let mut out = Vec::new();
    for chars in [&b"abc-ABC 123!"[..], b"\x07\x08\x0c\n\r\t\x0b'\\"] {
        for i in 0..strings::strlen(chars) {
            let c = strings::stringat(chars, i).unwrap();
            printf(&mut out, "%#c", &[Arg::Long(c)]);
        }
        print_args(&mut out, &[Arg::Str(b"\n")], None, false);
    }
    printf(
        &mut out,
        "%#c%#c%#c%#c%#c%#c\n",
        &longs(&[0, 0o33, 0o177, 0o222, 0o333, 0o377]),
    );
    assert_out(&out, "char2");
}

#[test]
fn printd_and_printdln() {
    skip_without_corpus!("printd_and_printdln");
    let (a, c, d) = (Arg::Str(b"hello"), Arg::Str(b"world"), Arg::Long(777));
    let (foo, bar, baz) = (Arg::Str(b"foo"), Arg::Str(b"bar"), Arg::Str(b"baz"));
    let calls: [(&[u8], Vec<Arg>); 9] = [
        (b" ", vec![a, c]),
        (b"<-->", vec![a, c, d]),
        (b" *** ", vec![foo, bar]),
        (b" *** ", vec![foo, bar, baz]),
        (b",", vec![foo, Arg::Long(99)]),
        (b",", vec![Arg::Long(99), foo]),
        (b" ", longs(&[123, 456, 789])),
        (b"-", vec![a, Arg::Long(999)]),
        (b"-", vec![Arg::Long(999), a]),
    ];
    let mut printd = Vec::new();
    let mut printdln = Vec::new();
    for (delim, args) in &calls {
        print_args(&mut printd, args, Some(delim), false);
        print_args(&mut printd, &[Arg::Str(b"")], None, true);
        print_args(&mut printdln, args, Some(delim), true);
    }
    assert_out(&printd, "printd");
    assert_out(&printdln, "printdln");
}

#[test]
fn sprint_values() {
    skip_without_corpus!("sprint_values");
    let mut out = Vec::new();
    let sprint = |arg: Arg<'_>| {
        let mut s = Vec::new();
        print_args(&mut s, &[arg], None, false);
        s
    };
    let mut hw = Vec::new();
    strings::concat(&mut hw, b"hello", b"world", 512);
    let c = sprint(Arg::Long(12345678));
    for s in [
        sprint(Arg::Str(b"hello")),
        sprint(Arg::Str(&hw)),
        c,
        sprint(Arg::Long(0)),
        sprint(Arg::Long(100)),
        sprint(Arg::Long(-42)),
        sprint(Arg::Long(0x42)),
    ] {
        let mut line = Vec::new();
        strings::concat(&mut line, &s, b"\n", 512);
        print_args(&mut out, &[Arg::Str(&line)], None, false);
    }
    assert_out(&out, "sprint");
}

#[test]
fn str_replace_results() {
    skip_without_corpus!("str_replace_results");
    let long_str1 = b"hello system tap";
    let long_str2 = &b"Here I am, on the road again. there I am, up on the stage, Here I go, playing star again. There I go, turn the page.- Bob Seger"[..];
    let calls: [(&[u8], &[u8], &[u8]); 10] = [
        (long_str1, b"system", b"pointer"),
        (long_str1, b"hello", b"pointer"),
        (long_str1, b"tap", b"pointer"),
        (long_str2, b"road", b"bored"),
        (long_str2, b"Here", b"here"),
        (long_str2, b"Bob Seger", b"Metallica"),
        (long_str1, b"system", b"\0"),
        (long_str1, b"\0", b"pointer"),
        (b"\0", b"\0", b"pointer"),
        (b"\0", b"\0", b"\0"),
    ];
    // -DMAXSTRINGLEN=128: long_str2 is exactly 127 bytes, so replacing
    // "road" by "bored" loses its last byte.
    let max = 128;
    let mut out = Vec::new();
    for (s, search, repl) in calls {
        let mut r = Vec::new();
        strings::str_replace(&mut r, strings::stored(s, max), search, repl, max);
        printf(&mut out, "Result = %s\n", &[Arg::Str(&r)]);
    }
    assert_out(&out, "str_replace");
}

#[test]
fn strlen_with_maxstringlen_64() {
    skip_without_corpus!("strlen_with_maxstringlen_64");
    let max = 64;
    let long = "0123456789".repeat(25);
    let mut out = Vec::new();
    for a in ["", "1", "0123456789", long.as_str()] {
        let mut s = Vec::new();
        strings::assign(&mut s, a.as_bytes(), max);
        printf(
            &mut out,
            "strlen(\"%s\") = %d\n",
            &[Arg::Str(&s), Arg::Long(strings::strlen(&s))],
        );
    }
    assert_out(&out, "strlen");
}

#[test]
fn text_str_file() {
    skip_without_corpus!("text_str_file");
    let mut out = Vec::new();
    let mut section = |title: &str, a: &[u8], b: &[u8], c: &[u8], f: &dyn Fn(&[u8]) -> Vec<u8>| {
        if !title.is_empty() {
            printf(&mut out, &format!("----- {title} -----\n"), &[]);
        }
        for (name, v) in [("a", a), ("b", b), ("c", c)] {
            printf(&mut out, &format!("{name}=%s\n"), &[Arg::Str(&f(v))]);
        }
    };
    let plain = |v: &[u8]| v.to_vec();
    let text_str = |v: &[u8]| {
        let mut o = Vec::new();
        strings::text_str(&mut o, v, 512);
        o
    };
    let strn = |len: i64, quoted: bool| {
        move |v: &[u8]| {
            let mut o = Vec::new();
            strings::text_strn(&mut o, v, len, quoted, 512);
            o
        }
    };
    let a = b"1234567890".to_vec();
    let b = [&a[..], &a[..]].concat();
    let c = [&a[..], &b[..]].concat();
    section("", &a, &b, &c, &plain);
    section("Using text_str", &a, &b, &c, &text_str);
    section("Using text_strn", &a, &b, &c, &strn(0, false));
    section("Using text_strn len = 10", &a, &b, &c, &strn(10, false));
    section("Using text_strn quoted", &a, &b, &c, &strn(0, true));
    section(
        "Using text_strn len=10, quoted",
        &a,
        &b,
        &c,
        &strn(10, true),
    );
    section(
        "Using text_strn len=12, quoted",
        &a,
        &b,
        &c,
        &strn(12, true),
    );
    let a = b"\n\nXYZZY\x19".to_vec();
    let b = b"\x3f\x99\x07\n\n\r\n".to_vec();
    let c = [&a[..], &b[..]].concat();
    section("Using text_str", &a, &b, &c, &text_str);
    section("Using text_strn", &a, &b, &c, &strn(0, false));
    section("Using text_strn len = 10", &a, &b, &c, &strn(10, false));
    section("Using text_strn len = 12", &a, &b, &c, &strn(12, false));
    section("Using text_strn quoted", &a, &b, &c, &strn(0, true));
    section(
        "Using text_strn len=10, quoted",
        &a,
        &b,
        &c,
        &strn(10, true),
    );
    section(
        "Using text_strn len=15, quoted",
        &a,
        &b,
        &c,
        &strn(15, true),
    );
    assert_out(&out, "text_str");
}
