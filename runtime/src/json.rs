//! `--format json`: the session's messages as JSON Lines (one object per
//! line, each with a `"type"`), for programs to read. The schema is
//! versioned ([`SCHEMA_VERSION`], first line of every run) and documented
//! in docs/guide/output.md; text output is untouched by it.
//!
//! Strings come from the tracee and may hold any bytes: they are written
//! as valid JSON whatever they are (control characters escaped, bytes that
//! are not UTF-8 replaced by U+FFFD), so a reader's parser never fails.

use crate::values::autoprint::GlobalValue;
use crate::values::map::{EntryId, KeyPart, Map, Sort, SortBy, SortValue};
use crate::values::stats::{HistSpec, Stat, StatOp, log_bucket_value};

/// Version of the record layout; raised when a field changes meaning or
/// goes away (adding a field or a record type keeps it).
pub const SCHEMA_VERSION: u32 = 1;

/// The first line: `{"type":"schema","version":1,"program":"utap 0.1.0"}`.
pub fn header(out: &mut Vec<u8>) {
    out.extend_from_slice(
        format!(
            "{{\"type\":\"schema\",\"version\":{SCHEMA_VERSION},\"program\":\"utap {}\"}}\n",
            env!("CARGO_PKG_VERSION")
        )
        .as_bytes(),
    );
}

/// Appends `bytes` as a JSON string (with its quotes). serde_json does
/// the escaping (the daemon's protocol uses it too: one JSON writer);
/// bytes that are not UTF-8 become U+FFFD first, one per invalid
/// sequence. The records around the strings are still written here, into
/// the output buffer as they stream, rather than built as `Value`s: one
/// record per `printf` on the output thread, with no tree to allocate.
pub fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &*text);
}

/// `{"type":TYPE,"data":TEXT}`: printed output.
pub fn output(out: &mut Vec<u8>, text: &[u8]) {
    out.extend_from_slice(b"{\"type\":\"output\",\"data\":");
    string(out, text);
    out.extend_from_slice(b"}\n");
}

/// A line of the control stream (`WARNING: ...`, `ERROR: ...`, or other
/// text) as `{"type":"warning"|"error"|"message","message":...}`.
pub fn control(out: &mut Vec<u8>, line: &[u8]) {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let (kind, text) = if let Some(t) = line.strip_prefix(b"WARNING: ") {
        ("warning", t)
    } else if let Some(t) = line.strip_prefix(b"ERROR: ") {
        ("error", t)
    } else {
        ("message", line)
    };
    out.extend_from_slice(format!("{{\"type\":\"{kind}\",\"message\":").as_bytes());
    string(out, text);
    out.extend_from_slice(b"}\n");
}

/// `{"type":"drops","count":N,"buffer_mb":M}`: messages lost because the
/// output buffer was full.
pub fn drops(out: &mut Vec<u8>, lost: u64, buffer_bytes: usize) {
    out.extend_from_slice(
        format!(
            "{{\"type\":\"drops\",\"count\":{lost},\"buffer_mb\":{}}}\n",
            buffer_bytes >> 20
        )
        .as_bytes(),
    );
}

/// One autoprinted global: `{"type":"global",...}` for a number or a
/// string, `"stats"` for statistics, `"map"` for an array (an object keyed
/// by its keys, several keys joined with `,`, in SystemTap's order: by
/// value, largest first).
pub fn global(out: &mut Vec<u8>, name: &str, value: GlobalValue<'_>) {
    let head = |out: &mut Vec<u8>, kind: &str| {
        out.extend_from_slice(format!("{{\"type\":\"{kind}\",\"name\":").as_bytes());
        string(out, name.as_bytes());
    };
    match value {
        GlobalValue::Long(v) => {
            head(out, "global");
            out.extend_from_slice(format!(",\"value\":{v}").as_bytes());
        }
        GlobalValue::Str(s) => {
            head(out, "global");
            out.extend_from_slice(b",\"value\":");
            string(out, crate::values::strings::until_nul(s));
        }
        GlobalValue::Stat(s) => {
            head(out, "stats");
            out.push(b',');
            stat_fields(out, s);
        }
        GlobalValue::LongMap(m) => {
            head(out, "map");
            entries(out, m, |out, v| {
                out.extend_from_slice(v.to_string().as_bytes())
            });
        }
        GlobalValue::StrMap(m) => {
            head(out, "map");
            entries(out, m, |out, v| {
                string(out, crate::values::strings::until_nul(v))
            });
        }
        GlobalValue::StatMap(m) => {
            head(out, "map");
            entries(out, m, |out, s| {
                out.push(b'{');
                stat_fields(out, s);
                out.push(b'}');
            });
        }
    }
    out.extend_from_slice(b"}\n");
}

fn entries<V: SortValue>(out: &mut Vec<u8>, map: &Map<V>, mut value: impl FnMut(&mut Vec<u8>, &V)) {
    let mut ids: Vec<EntryId> = Vec::with_capacity(map.len());
    let sort = Sort {
        by: SortBy::Value(StatOp::Count),
        descending: true,
    };
    map.select(None, Some(sort), None, &mut ids);
    out.extend_from_slice(b",\"data\":{");
    let mut key = Vec::new();
    let mut first = true;
    for id in ids {
        let (Some(keys), Some(v)) = (map.key(id), map.value(id)) else {
            continue;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        key.clear();
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                key.push(b',');
            }
            match k {
                KeyPart::Long(n) => key.extend_from_slice(n.to_string().as_bytes()),
                KeyPart::Str(s) => key.extend_from_slice(crate::values::strings::until_nul(s)),
            }
        }
        string(out, &key);
        out.push(b':');
        value(out, v);
    }
    out.push(b'}');
}

/// `"count":..,"sum":..` and, when not empty, `"min"`, `"max"`, `"avg"`,
/// and a histogram's non-empty `"buckets"` (`min`..`max` inclusive).
fn stat_fields(out: &mut Vec<u8>, s: &Stat) {
    out.extend_from_slice(format!("\"count\":{},\"sum\":{}", s.count(), s.sum()).as_bytes());
    for (label, op) in [
        ("min", StatOp::Min),
        ("max", StatOp::Max),
        ("avg", StatOp::Avg),
    ] {
        if let Ok(v) = s.get(op) {
            out.extend_from_slice(format!(",\"{label}\":{v}").as_bytes());
        }
    }
    let spec = s.hist_spec();
    if spec == HistSpec::None {
        return;
    }
    out.extend_from_slice(b",\"buckets\":[");
    let mut first = true;
    for (i, &count) in s.buckets().iter().enumerate() {
        if count == 0 {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        let (min, max) = bucket_range(spec, i);
        let num = |v: Option<i64>| v.map_or("null".to_string(), |v| v.to_string());
        out.extend_from_slice(
            format!(
                "{{\"min\":{},\"max\":{},\"count\":{count}}}",
                num(min),
                num(max)
            )
            .as_bytes(),
        );
    }
    out.push(b']');
}

/// The values bucket `i` holds, inclusive; `None` for an open end (the
/// under- and overflow buckets of a linear histogram).
fn bucket_range(spec: HistSpec, i: usize) -> (Option<i64>, Option<i64>) {
    match spec {
        HistSpec::None => (None, None),
        HistSpec::Log => {
            // Buckets hold magnitudes in [2^k, 2^(k+1)), labelled 2^k or -2^k.
            let v = log_bucket_value(i);
            match v {
                0 => (Some(0), Some(0)),
                v if v > 0 => (Some(v), Some(v.wrapping_mul(2).wrapping_sub(1).max(v))),
                v => (Some(v.saturating_mul(2).saturating_add(1).min(v)), Some(v)),
            }
        }
        HistSpec::Linear {
            start,
            interval,
            buckets,
        } => {
            if i == 0 {
                (None, Some(start - 1))
            } else if i + 1 == buckets {
                let lo = start + interval * (i as i64 - 1);
                (Some(lo), None)
            } else {
                let lo = start + interval * (i as i64 - 1);
                (Some(lo), Some(lo + interval - 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        string(&mut out, bytes);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn any_bytes_make_a_valid_string() {
        assert_eq!(s(b"a\"b\\c\n\x01\x1b"), r#""a\"b\\c\n\u0001\u001b""#);
        assert_eq!(
            s(b"caf\xc3\xa9 \xff\xfe!"),
            "\"caf\u{e9} \u{fffd}\u{fffd}!\""
        );
    }

    #[test]
    fn log_buckets_cover_their_powers_of_two() {
        use crate::values::stats::log_bucket;
        for v in [-9i64, -2, -1, 0, 1, 2, 3, 4, 7, 8, 1000, i64::MAX] {
            let (lo, hi) = bucket_range(HistSpec::Log, log_bucket(v));
            assert!(lo.unwrap() <= v && v <= hi.unwrap(), "{v}: {lo:?}..{hi:?}");
        }
    }
}
