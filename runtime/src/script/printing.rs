//! The print family at run time: turns the raw argument words native code
//! passes (longs and string handles) into the formatter's typed arguments.
//! printf-style calls know each word's type from their parsed format;
//! print/println/printd/printdln from a type mask the codegen passes.

use crate::format::{Arg, ConvKind, FormatNum, FormatPiece, PRINT_BUFFER_SIZE};

use super::state::ScriptState;

/// Typed arguments, on the stack for the usual handful (no allocation per
/// print on the hot path).
struct Typed<'a> {
    inline: [Arg<'a>; 16],
    len: usize,
    spill: Vec<Arg<'a>>,
}

impl<'a> Typed<'a> {
    fn new(n: usize) -> Self {
        Typed {
            inline: [Arg::Long(0); 16],
            len: 0,
            spill: if n > 16 {
                Vec::with_capacity(n)
            } else {
                Vec::new()
            },
        }
    }
    fn push(&mut self, a: Arg<'a>) {
        if self.spill.capacity() > 0 {
            self.spill.push(a);
        } else if self.len < self.inline.len() {
            self.inline[self.len] = a;
            self.len += 1;
        }
    }
    fn as_slice(&self) -> &[Arg<'a>] {
        if self.spill.capacity() > 0 {
            &self.spill
        } else {
            &self.inline[..self.len]
        }
    }
}

/// Types `args` by the conversions of `pieces`.
fn typed_by_format<'a>(s: &'a ScriptState, pieces: &[FormatPiece], args: &[i64]) -> Typed<'a> {
    let mut typed = Typed::new(args.len());
    each_by_format(pieces, args, |h| s.strings.get(h), |a| typed.push(a));
    typed
}

/// Hands `push` each argument of a `printf` typed by the conversions of
/// `pieces` (a `*` width or precision takes a long first), strings looked
/// up by `text`: the tracer's string handles, or the data plane's
/// literal handles (`session::inproc`).
pub(crate) fn each_by_format<'a>(
    pieces: &[FormatPiece],
    args: &[i64],
    text: impl Fn(i64) -> &'a [u8],
    mut push: impl FnMut(Arg<'a>),
) {
    let mut next = args.iter().copied();
    for piece in pieces {
        let FormatPiece::Conv(c) = piece else {
            continue;
        };
        for n in [c.width, c.precision] {
            if n == FormatNum::Star {
                push(Arg::Long(next.next().unwrap_or(0)));
            }
        }
        match c.kind {
            ConvKind::Percent => {}
            ConvKind::Str => push(Arg::Str(text(next.next().unwrap_or(0)))),
            _ => push(Arg::Long(next.next().unwrap_or(0))),
        }
    }
}

/// `printf(formats[fmt], args...)` onto the run's output: queued as a
/// record for the output thread when the output is deferred and the format
/// does not read memory, formatted here otherwise.
pub fn printf(s: &mut ScriptState, fmt: usize, args: &[i64]) -> Result<(), String> {
    let mut out = std::mem::take(&mut s.out);
    let r = {
        let s: &ScriptState = s;
        let pieces = &s.image.formats[fmt];
        let typed = typed_by_format(s, pieces, args);
        if out.is_deferred() && super::output::can_defer(pieces) {
            out.printf_record(fmt, typed.as_slice());
            Ok(())
        } else {
            // SAFETY: `memory` is only set during a run (see ScriptRuntime::fire).
            let mem = s.memory.map(|m| unsafe { &*m });
            out.text(|b| {
                crate::format::format_into_mem(b, pieces, typed.as_slice(), PRINT_BUFFER_SIZE, mem)
            })
            .map_err(|e| e.to_string())
        }
    };
    s.out = out;
    r
}

/// `sprintf(formats[fmt], args...)` onto `out` (an empty buffer).
pub fn sprintf(s: &ScriptState, fmt: usize, args: &[i64], out: &mut Vec<u8>) {
    let pieces = &s.image.formats[fmt];
    let typed = typed_by_format(s, pieces, args);
    crate::format::sprintf_into(out, pieces, typed.as_slice(), s.limits.max_string_len);
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
    let typed = typed_by_mask(s, args, string_mask);
    let delim = delim.map(|d| s.strings.get(d));
    crate::format::print_args(out, typed.as_slice(), delim, newline);
}

/// [`print`] onto the run's output: queued as a record for the output
/// thread when the output is deferred.
pub fn print_out(
    s: &mut ScriptState,
    args: &[i64],
    string_mask: u64,
    delim: Option<i64>,
    newline: bool,
) {
    let mut out = std::mem::take(&mut s.out);
    {
        let s: &ScriptState = s;
        if out.is_deferred() {
            let typed = typed_by_mask(s, args, string_mask);
            let delim = delim.map(|d| s.strings.get(d));
            out.print_record(typed.as_slice(), delim, newline);
        } else {
            out.text(|b| print(s, args, string_mask, delim, newline, b));
        }
    }
    s.out = out;
}

fn typed_by_mask<'a>(s: &'a ScriptState, args: &[i64], string_mask: u64) -> Typed<'a> {
    let mut typed = Typed::new(args.len());
    each_by_mask(args, string_mask, |h| s.strings.get(h), |a| typed.push(a));
    typed
}

/// Hands `push` each argument of a `print*`: bit `i` of `string_mask`
/// says argument `i` is a string, looked up by `text`.
pub(crate) fn each_by_mask<'a>(
    args: &[i64],
    string_mask: u64,
    text: impl Fn(i64) -> &'a [u8],
    mut push: impl FnMut(Arg<'a>),
) {
    for (i, &v) in args.iter().enumerate() {
        push(if i < 64 && string_mask & (1 << i) != 0 {
            Arg::Str(text(v))
        } else {
            Arg::Long(v)
        });
    }
}
