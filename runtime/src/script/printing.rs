//! The print family at run time: turns the raw argument words native code
//! passes (longs and string handles) into the formatter's typed arguments.
//! printf-style calls know each word's type from their parsed format;
//! print/println/printd/printdln from a type mask the codegen passes.

use crate::format::{Arg, ConvKind, FormatNum, FormatPiece, PRINT_BUFFER_SIZE};

use super::state::ScriptState;

/// Types `args` by the conversions of `pieces`.
fn typed_by_format<'a>(s: &'a ScriptState, pieces: &[FormatPiece], args: &[i64]) -> Vec<Arg<'a>> {
    let mut typed = Vec::with_capacity(args.len());
    let mut next = args.iter().copied();
    for piece in pieces {
        let FormatPiece::Conv(c) = piece else {
            continue;
        };
        for n in [c.width, c.precision] {
            if n == FormatNum::Star {
                typed.push(Arg::Long(next.next().unwrap_or(0)));
            }
        }
        match c.kind {
            ConvKind::Percent => {}
            ConvKind::Str => typed.push(Arg::Str(s.strings.get(next.next().unwrap_or(0)))),
            _ => typed.push(Arg::Long(next.next().unwrap_or(0))),
        }
    }
    typed
}

/// `printf(formats[fmt], args...)` onto `out`.
pub fn printf(s: &ScriptState, fmt: usize, args: &[i64], out: &mut Vec<u8>) -> Result<(), String> {
    let pieces = &s.image.formats[fmt];
    let typed = typed_by_format(s, pieces, args);
    // SAFETY: `memory` is only set during a run (see ScriptRuntime::fire).
    let mem = s.memory.map(|m| unsafe { &*m });
    crate::format::format_into_mem(out, pieces, &typed, PRINT_BUFFER_SIZE, mem)
        .map_err(|e| e.to_string())
}

/// `sprintf(formats[fmt], args...)` onto `out` (an empty buffer).
pub fn sprintf(s: &ScriptState, fmt: usize, args: &[i64], out: &mut Vec<u8>) {
    let pieces = &s.image.formats[fmt];
    let typed = typed_by_format(s, pieces, args);
    crate::format::sprintf_into(out, pieces, &typed, s.limits.max_string_len);
}

/// `print`/`println`/`printd`/`printdln` (and their `s` forms): bit `i` of
/// `string_mask` says argument `i` is a string handle.
pub fn print(
    s: &ScriptState,
    args: &[i64],
    string_mask: u64,
    delim: Option<i64>,
    newline: bool,
    out: &mut Vec<u8>,
) {
    let typed: Vec<Arg<'_>> = args
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if i < 64 && string_mask & (1 << i) != 0 {
                Arg::Str(s.strings.get(v))
            } else {
                Arg::Long(v)
            }
        })
        .collect();
    let delim = delim.map(|d| s.strings.get(d));
    crate::format::print_args(out, &typed, delim, newline);
}
