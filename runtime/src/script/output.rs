//! A handler run's output, and formatting it off the tracer thread.
//!
//! Handlers run on the tracer thread while the tracee is stopped, so every
//! microsecond spent there is the tracee's. In a session whose transport
//! renders ([`RunOutput::deferred`], [`render`]), a `printf` is queued as a
//! record — the format's index and the raw argument words, strings copied —
//! and the output thread formats it; only output that cannot wait (`%m`
//! reads the tracee's memory, which may change once it runs) and output
//! already made into text (print of a histogram, autoprint) is queued as
//! text. Without a renderer (unit tests, benchmarks) the buffer holds the
//! final text, as before.
//!
//! Record layout (native byte order, never leaves the process):
//! `TEXT len:u32 bytes` | `PRINTF fmt:u32 ARGS` |
//! `PRINT newline:u8 (0 | 1 len:u32 delimiter) ARGS` | `JSON len:u32 bytes`,
//! where
//! ARGS is `argc:u32 (LONG v:i64 | STR len:u32 bytes)*`.

use crate::format::{Arg, ConvKind, FormatPiece, PRINT_BUFFER_SIZE, format_into_mem, print_args};

const TEXT: u8 = 0;
const PRINTF: u8 = 1;
const PRINT: u8 = 2;
/// JSON Lines made on the tracer thread (autoprinted globals at exit);
/// only in a `--format json` session.
const JSON: u8 = 3;
const LONG: u8 = 0;
const STR: u8 = 1;

/// The output of the current handler run: what the sink receives at its end.
#[derive(Debug, Default)]
pub struct RunOutput {
    buf: Vec<u8>,
    /// Records for the output thread to render, instead of final text.
    deferred: bool,
    /// Where the length of the TEXT record being appended to is.
    open_text: Option<usize>,
}

impl RunOutput {
    /// Whether printf records are queued for the output thread.
    pub fn deferred(&self) -> bool {
        self.deferred
    }

    pub fn new(deferred: bool) -> RunOutput {
        RunOutput {
            buf: Vec::with_capacity(4096),
            deferred,
            open_text: None,
        }
    }

    /// Whether `printf` may queue records (the sink renders them).
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// The message to hand to the sink.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.open_text = None;
    }

    /// Appends text that `write` appends to the buffer it is given.
    #[inline]
    pub fn text<R>(&mut self, write: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        if !self.deferred {
            return write(&mut self.buf);
        }
        let at = match self.open_text {
            Some(at) => at,
            None => {
                self.buf.push(TEXT);
                self.buf.extend_from_slice(&0u32.to_ne_bytes());
                let at = self.buf.len() - 4;
                self.open_text = Some(at);
                at
            }
        };
        let r = write(&mut self.buf);
        let len = (self.buf.len() - at - 4) as u32;
        self.buf[at..at + 4].copy_from_slice(&len.to_ne_bytes());
        r
    }

    /// Appends `bytes` as text.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.text(|b| b.extend_from_slice(bytes));
    }

    /// Appends JSON lines that `write` appends to the buffer it is given,
    /// passed through as they are by [`render_json`].
    pub fn json(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        self.open_text = None;
        self.buf.push(JSON);
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        let at = self.buf.len() - 4;
        write(&mut self.buf);
        let len = (self.buf.len() - at - 4) as u32;
        self.buf[at..at + 4].copy_from_slice(&len.to_ne_bytes());
    }

    /// Queues `printf(formats[fmt], args)` for the output thread. The
    /// caller checks [`can_defer`] and [`RunOutput::is_deferred`] first.
    pub fn printf_record(&mut self, fmt: usize, args: &[Arg<'_>]) {
        self.open_text = None;
        self.buf.push(PRINTF);
        self.buf.extend_from_slice(&(fmt as u32).to_ne_bytes());
        self.args(args);
    }

    /// Queues `print*(args)` (with `delim` between values, and a newline)
    /// for the output thread. The caller checks [`RunOutput::is_deferred`].
    pub fn print_record(&mut self, args: &[Arg<'_>], delim: Option<&[u8]>, newline: bool) {
        self.open_text = None;
        self.buf.extend_from_slice(&[PRINT, newline as u8]);
        match delim {
            None => self.buf.push(0),
            Some(d) => {
                self.buf.push(1);
                self.bytes(d);
            }
        }
        self.args(args);
    }

    fn args(&mut self, args: &[Arg<'_>]) {
        self.buf
            .extend_from_slice(&(args.len() as u32).to_ne_bytes());
        for a in args {
            match *a {
                Arg::Long(v) => {
                    self.buf.push(LONG);
                    self.buf.extend_from_slice(&v.to_ne_bytes());
                }
                Arg::Str(s) => {
                    self.buf.push(STR);
                    self.bytes(s);
                }
            }
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(&(b.len() as u32).to_ne_bytes());
        self.buf.extend_from_slice(b);
    }
}

/// Whether a format can be rendered later: not when it reads the tracee's
/// memory (`%m`, `%M`), which must happen while the event is current.
pub fn can_defer(pieces: &[FormatPiece]) -> bool {
    !pieces.iter().any(|p| {
        matches!(p, FormatPiece::Conv(c) if matches!(c.kind, ConvKind::Memory | ConvKind::MemoryHex))
    })
}

/// Turns queued records into text (the output thread's side). Malformed
/// input (which only a bug could make) ends rendering of the message.
pub fn render(formats: &[Vec<FormatPiece>], mut input: &[u8], out: &mut Vec<u8>) {
    let mut args: Vec<Arg<'_>> = Vec::new();
    while let Some((&tag, rest)) = input.split_first() {
        input = rest;
        let ok = match tag {
            TEXT | JSON => take_str(&mut input).map(|t| out.extend_from_slice(t)),
            PRINTF => render_printf(formats, &mut input, &mut args, out),
            PRINT => render_print(&mut input, &mut args, out),
            _ => None,
        };
        if ok.is_none() {
            return;
        }
    }
}

/// Like [`render`], as JSON Lines: each printed piece (a `printf`, a
/// `print`, a run of text) becomes `{"type":"output","data":...}`, and
/// JSON records pass through.
pub fn render_json(formats: &[Vec<FormatPiece>], mut input: &[u8], out: &mut Vec<u8>) {
    let mut args: Vec<Arg<'_>> = Vec::new();
    let mut text = Vec::new();
    while let Some((&tag, rest)) = input.split_first() {
        input = rest;
        text.clear();
        let ok = match tag {
            TEXT => take_str(&mut input).map(|t| text.extend_from_slice(t)),
            PRINTF => render_printf(formats, &mut input, &mut args, &mut text),
            PRINT => render_print(&mut input, &mut args, &mut text),
            JSON => take_str(&mut input).map(|j| out.extend_from_slice(j)),
            _ => None,
        };
        if ok.is_none() {
            return;
        }
        if !text.is_empty() {
            crate::json::output(out, &text);
        }
    }
}

fn render_printf<'a>(
    formats: &[Vec<FormatPiece>],
    input: &mut &'a [u8],
    args: &mut Vec<Arg<'a>>,
    out: &mut Vec<u8>,
) -> Option<()> {
    let pieces = formats.get(take_u32(input)? as usize)?;
    take_args(input, args)?;
    // Without memory to read (deferred formats have no %m) this cannot fail.
    let _ = format_into_mem(out, pieces, args, PRINT_BUFFER_SIZE, None);
    Some(())
}

fn render_print<'a>(
    input: &mut &'a [u8],
    args: &mut Vec<Arg<'a>>,
    out: &mut Vec<u8>,
) -> Option<()> {
    let head = take(input, 2)?;
    let delim = match head[1] {
        0 => None,
        _ => Some(take_str(input)?),
    };
    take_args(input, args)?;
    print_args(out, args, delim, head[0] != 0);
    Some(())
}

fn take_args<'a>(input: &mut &'a [u8], args: &mut Vec<Arg<'a>>) -> Option<()> {
    let argc = take_u32(input)?;
    args.clear();
    for _ in 0..argc {
        let (&tag, rest) = input.split_first()?;
        *input = rest;
        args.push(match tag {
            LONG => Arg::Long(i64::from_ne_bytes(take(input, 8)?.try_into().ok()?)),
            STR => Arg::Str(take_str(input)?),
            _ => return None,
        });
    }
    Some(())
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if input.len() < n {
        return None;
    }
    let (head, rest) = input.split_at(n);
    *input = rest;
    Some(head)
}

fn take_u32(input: &mut &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(take(input, 4)?.try_into().ok()?))
}

fn take_str<'a>(input: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = take_u32(input)? as usize;
    take(input, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse;

    fn formats() -> Vec<Vec<FormatPiece>> {
        vec![
            parse("%s=%d\n").unwrap(),
            parse("[%-5s|%5x|%c]").unwrap(),
            parse("%m").unwrap(),
        ]
    }

    /// The same calls, immediate and deferred, give the same text.
    #[test]
    fn deferred_records_render_like_immediate_output() {
        let f = formats();
        let calls: [(usize, Vec<Arg>); 3] = [
            (0, vec![Arg::Str(b"open"), Arg::Long(-3)]),
            (1, vec![Arg::Str(b"ab"), Arg::Long(255), Arg::Long(65)]),
            (0, vec![Arg::Str(b""), Arg::Long(i64::MIN)]),
        ];
        let mut now = RunOutput::new(false);
        let mut later = RunOutput::new(true);
        for (i, (fmt, args)) in calls.iter().enumerate() {
            now.text(|b| format_into_mem(b, &f[*fmt], args, PRINT_BUFFER_SIZE, None))
                .unwrap();
            later.printf_record(*fmt, args);
            if i == 1 {
                now.extend(b"<text>");
                later.extend(b"<te");
                later.extend(b"xt>");
            }
            now.text(|b| print_args(b, args, Some(b", "), i == 0));
            later.print_record(args, Some(b", "), i == 0);
        }
        now.text(|b| print_args(b, &[Arg::Long(7)], None, false));
        later.print_record(&[Arg::Long(7)], None, false);
        let mut rendered = Vec::new();
        render(&f, later.as_bytes(), &mut rendered);
        assert_eq!(
            String::from_utf8(rendered).unwrap(),
            String::from_utf8(now.as_bytes().to_vec()).unwrap()
        );
        assert_eq!(
            now.as_bytes(),
            b"open=-3\nopen, -3\n[ab   |   ff|A]<text>ab, 255, 65=-9223372036854775808\n, -92233720368547758087"
        );
    }

    /// Every line the JSON renderer makes parses, for any record cut
    /// short and any bytes in the strings.
    #[test]
    fn json_rendering_gives_json_lines_even_for_truncated_records() {
        let f = formats();
        let mut later = RunOutput::new(true);
        later.extend(b"text \xff\x00\n");
        later.printf_record(0, &[Arg::Str(b"\x80\"\\"), Arg::Long(-1)]);
        later.print_record(&[Arg::Str(b"\x1b[0m"), Arg::Long(2)], Some(b"\t"), true);
        later.json(|b| b.extend_from_slice(b"{\"type\":\"global\",\"name\":\"x\",\"value\":1}\n"));
        let bytes = later.as_bytes();
        for cut in 0..=bytes.len() {
            let mut out = Vec::new();
            render_json(&f, &bytes[..cut], &mut out);
            let text = String::from_utf8(out).unwrap();
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert!(v["type"].is_string(), "{line}");
            }
            if cut == bytes.len() {
                assert_eq!(
                    text,
                    "{\"type\":\"output\",\"data\":\"text \u{fffd}\\u0000\\n\"}\n\
                     {\"type\":\"output\",\"data\":\"\u{fffd}\\\"\\\\=-1\\n\"}\n\
                     {\"type\":\"output\",\"data\":\"\\u001b[0m\\t2\\n\"}\n\
                     {\"type\":\"global\",\"name\":\"x\",\"value\":1}\n"
                );
            }
        }
    }

    #[test]
    fn memory_formats_are_not_deferred() {
        let f = formats();
        assert!(can_defer(&f[0]) && can_defer(&f[1]));
        assert!(!can_defer(&f[2]));
    }

    #[test]
    fn truncated_records_end_rendering_without_panic() {
        let f = formats();
        let mut later = RunOutput::new(true);
        later.extend(b"ok ");
        later.printf_record(0, &[Arg::Str(b"x"), Arg::Long(1)]);
        let bytes = later.as_bytes();
        for cut in 0..bytes.len() {
            let mut out = Vec::new();
            render(&f, &bytes[..cut], &mut out);
            assert!(out.len() <= 7, "{out:?}");
        }
        let mut out = Vec::new();
        render(&f, &[9, 1, 2], &mut out);
        assert!(out.is_empty());
    }
}
