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
    let opts = ParseOptions::for_fuzz_input(mode);
    if let Err(broken) = check_round_trip(&text, &opts) {
        panic!("{broken}");
    }
});
