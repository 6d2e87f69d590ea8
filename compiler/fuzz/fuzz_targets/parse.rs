//! Any input: the front end must not panic, must explain every rejection,
//! and must print what it accepts in a form that parses back identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use utap_compiler::parser::ParseOptions;
use utap_compiler::print::check_round_trip;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the session: arguments (for $N/@N) and guru mode.
    let (mode, text) = data.split_first().map_or((0, &[][..]), |(m, t)| (*m, t));
    let text = String::from_utf8_lossy(text);
    let opts = ParseOptions {
        args: match mode % 3 {
            0 => vec![],
            1 => vec!["1".into(), "x y".into()],
            _ => vec!["probe".into(), "$1".into(), "\"s".into()],
        },
        guru: mode & 4 != 0,
        tapset: mode & 8 != 0,
        arch: Some("x86_64".into()),
        kernel_release: Some("6.18.0".into()),
    };
    if let Err(broken) = check_round_trip(&text, &opts) {
        panic!("{broken}");
    }
});
