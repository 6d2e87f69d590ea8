//! The end-of-session printing of globals that the script writes but never
//! reads. SystemTap adds a synthetic `end` probe per such global, after
//! the user's end probes, in declaration order, printing:
//!
//! - a long: `name=%#x`; a string: `name="%#s"`;
//! - statistics: `name @count=%#d @min=%#d @max=%#d @sum=%#d @avg=%#d`, or
//!   `name @count=0x0` when empty;
//! - an array: one line per entry, sorted by value descending (statistics
//!   by `@count`), keys as `[%#d,"%#s"]`, then the value as above.

use super::map::{EntryId, KeyPart, LongMap, Map, Sort, SortBy, SortValue, StatMap, StrMap};
use super::stats::{Stat, StatOp};
use crate::format::{ConvKind, Conversion, FormatFlags, FormatNum, FormatPiece, PRINT_BUFFER_SIZE};

/// A global's value, as the session holds it.
#[derive(Clone, Copy, Debug)]
pub enum GlobalValue<'a> {
    Long(i64),
    Str(&'a [u8]),
    Stat(&'a Stat),
    LongMap(&'a LongMap),
    StrMap(&'a StrMap),
    StatMap(&'a StatMap),
}

/// Appends what SystemTap prints at exit for the global `name`.
pub fn autoprint(out: &mut Vec<u8>, name: &str, value: GlobalValue<'_>) {
    match value {
        GlobalValue::Long(v) => {
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            hex(out, v);
            out.push(b'\n');
        }
        GlobalValue::Str(s) => {
            out.extend_from_slice(name.as_bytes());
            quoted(out, s);
            out.push(b'\n');
        }
        GlobalValue::Stat(s) => {
            out.extend_from_slice(name.as_bytes());
            if s.is_empty() {
                out.extend_from_slice(b" @count=0x0\n");
            } else {
                stat_fields(out, s);
            }
        }
        GlobalValue::LongMap(m) => each_by_value(out, name, m, |out, v| {
            out.push(b'=');
            hex(out, *v);
            out.push(b'\n');
        }),
        GlobalValue::StrMap(m) => each_by_value(out, name, m, |out, v| {
            quoted(out, v);
            out.push(b'\n');
        }),
        GlobalValue::StatMap(m) => each_by_value(out, name, m, stat_fields),
    }
}

fn each_by_value<V: SortValue>(
    out: &mut Vec<u8>,
    name: &str,
    map: &Map<V>,
    mut value: impl FnMut(&mut Vec<u8>, &V),
) {
    let mut ids: Vec<EntryId> = Vec::with_capacity(map.len());
    let sort = Sort {
        by: SortBy::Value(StatOp::Count),
        descending: true,
    };
    map.select(None, Some(sort), None, &mut ids);
    for id in ids {
        let (Some(keys), Some(v)) = (map.key(id), map.value(id)) else {
            continue;
        };
        out.extend_from_slice(name.as_bytes());
        out.push(b'[');
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match k {
                KeyPart::Long(n) => out.extend_from_slice(n.to_string().as_bytes()),
                KeyPart::Str(s) => {
                    out.push(b'"');
                    out.extend_from_slice(s);
                    out.push(b'"');
                }
            }
        }
        out.push(b']');
        value(out, v);
    }
}

fn quoted(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(b"=\"");
    out.extend_from_slice(super::strings::until_nul(s));
    out.push(b'"');
}

/// `%#x`.
fn hex(out: &mut Vec<u8>, v: i64) {
    let piece = FormatPiece::Conv(Conversion {
        flags: FormatFlags {
            alt: true,
            ..FormatFlags::default()
        },
        width: FormatNum::None,
        precision: FormatNum::None,
        kind: ConvKind::HexLower,
    });
    crate::format::format_into(
        out,
        std::slice::from_ref(&piece),
        &[crate::format::Arg::Long(v)],
        PRINT_BUFFER_SIZE,
    );
}

fn stat_fields(out: &mut Vec<u8>, s: &Stat) {
    let fields = [
        ("@count", StatOp::Count),
        ("@min", StatOp::Min),
        ("@max", StatOp::Max),
        ("@sum", StatOp::Sum),
        ("@avg", StatOp::Avg),
    ];
    for (label, op) in fields {
        out.push(b' ');
        out.extend_from_slice(label.as_bytes());
        out.push(b'=');
        out.extend_from_slice(s.get(op).unwrap_or(0).to_string().as_bytes());
    }
    out.push(b'\n');
}
