//! The text of a scrape, formatted from a [`Snapshot`] on the HTTP side
//! (never on the tracer thread).
//!
//! Each family gets `# HELP` and `# TYPE`; a long is a counter or a gauge
//! as its [`MetricSpec`] says, an array one sample per entry with the
//! spec's label names; a statistic is a summary (`_sum`, `_count`) or,
//! when it keeps a histogram, a histogram whose `_bucket` lines run from
//! the lowest to the highest populated bucket only (then `+Inf`): a
//! `@hist_log` has 128 buckets, nearly all empty. A family with no sample
//! yet (an empty array) is left out.

use super::{MetricSpec, Snapshot, Value};
use crate::values::map::KeyPart;
use crate::values::stats::{HistSpec, Stat, log_bucket_value};

/// The whole exposition of `values` (in `specs` order).
pub fn render(specs: &[MetricSpec], values: &Snapshot) -> String {
    let mut out = String::new();
    for (spec, value) in specs.iter().zip(values) {
        family(&mut out, spec, value);
    }
    out
}

fn family(out: &mut String, spec: &MetricSpec, value: &Value) {
    let name = &spec.name;
    match value {
        Value::Absent => {}
        Value::Long(v) => {
            header(out, spec, long_type(spec));
            out.push_str(&format!("{name} {v}\n"));
        }
        Value::LongMap(entries) if !entries.is_empty() => {
            header(out, spec, long_type(spec));
            for (keys, v) in entries {
                out.push_str(&format!("{name}{{{}}} {v}\n", labels(spec, keys)));
            }
        }
        Value::Stat(s) => {
            header(out, spec, stat_type(s));
            stat(out, name, "", s);
        }
        Value::StatMap(entries) if !entries.is_empty() => {
            header(out, spec, stat_type(&entries[0].1));
            for (keys, s) in entries {
                stat(out, name, &labels(spec, keys), s);
            }
        }
        Value::LongMap(_) | Value::StatMap(_) => {}
    }
}

fn long_type(spec: &MetricSpec) -> &'static str {
    if spec.counter { "counter" } else { "gauge" }
}

fn stat_type(s: &Stat) -> &'static str {
    match s.hist_spec() {
        HistSpec::None => "summary",
        _ => "histogram",
    }
}

fn header(out: &mut String, spec: &MetricSpec, kind: &str) {
    let help = spec.help.replace('\\', "\\\\").replace('\n', "\\n");
    out.push_str(&format!(
        "# HELP {0} {help}\n# TYPE {0} {kind}\n",
        spec.name
    ));
}

/// `op="read",fd="3"`: the spec's label names (`keyN` past them).
fn labels(spec: &MetricSpec, keys: &[KeyPart]) -> String {
    let parts: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let value = match k {
                KeyPart::Long(n) => n.to_string(),
                KeyPart::Str(s) => String::from_utf8_lossy(s).into_owned(),
            };
            let name = spec
                .labels
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("key{}", i + 1));
            format!("{name}=\"{}\"", escape(&value))
        })
        .collect();
    parts.join(",")
}

/// A label value's escapes: backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn stat(out: &mut String, name: &str, labels: &str, s: &Stat) {
    let sep = if labels.is_empty() { "" } else { "," };
    if s.hist_spec() != HistSpec::None {
        for (le, cumulative) in populated_buckets(s) {
            out.push_str(&format!(
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}\n"
            ));
        }
        out.push_str(&format!(
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}\n",
            s.count()
        ));
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    out.push_str(&format!("{name}_sum{braces} {}\n", s.sum()));
    out.push_str(&format!("{name}_count{braces} {}\n", s.count()));
}

/// `(le, cumulative count)` for the buckets from the lowest to the highest
/// non-empty one (the last bucket, open above, is `+Inf`'s).
fn populated_buckets(s: &Stat) -> Vec<(i64, i64)> {
    let counts = s.buckets();
    let (Some(first), Some(last)) = (
        counts.iter().position(|&c| c != 0),
        counts.iter().rposition(|&c| c != 0),
    ) else {
        return Vec::new();
    };
    let mut cumulative: i64 = counts[..first].iter().sum();
    let mut out = Vec::with_capacity(last - first + 1);
    for (i, &count) in counts.iter().enumerate().take(last + 1).skip(first) {
        cumulative += count;
        if let Some(le) = upper_bound(s.hist_spec(), i) {
            out.push((le, cumulative));
        }
    }
    out
}

/// The largest value bucket `i` holds (Prometheus's `le`); `None` for the
/// last bucket, which `+Inf` covers.
fn upper_bound(spec: HistSpec, i: usize) -> Option<i64> {
    if i + 1 >= spec.buckets() {
        return None;
    }
    match spec {
        HistSpec::None => None,
        // The next bucket starts one past this one's largest value; a
        // negative bucket's label is its largest value.
        HistSpec::Log => Some(match log_bucket_value(i) {
            v if v > 0 => v.saturating_mul(2) - 1,
            v => v,
        }),
        HistSpec::Linear {
            start, interval, ..
        } => Some(start + interval * i as i64 - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::stats::StatSpec;

    fn spec(name: &str, counter: bool, labels: &[&str]) -> MetricSpec {
        MetricSpec {
            global: 0,
            name: name.into(),
            counter,
            labels: labels.iter().map(|s| s.to_string()).collect(),
            help: format!("utap global {name} of t.stp"),
        }
    }

    fn log_stat(values: &[i64]) -> Stat {
        let mut s = Stat::new(StatSpec {
            hist: HistSpec::Log,
            variance_shift: 0,
        });
        values.iter().for_each(|&v| s.add(v));
        s
    }

    #[test]
    fn a_log_histogram_has_buckets_only_over_its_populated_range() {
        let s = log_stat(&[0, 1, 3, 3, 100]);
        let text = render(&[spec("lat", false, &[])], &vec![Value::Stat(s)]);
        assert_eq!(
            text,
            concat!(
                "# HELP lat utap global lat of t.stp\n",
                "# TYPE lat histogram\n",
                "lat_bucket{le=\"0\"} 1\n",
                "lat_bucket{le=\"1\"} 2\n",
                "lat_bucket{le=\"3\"} 4\n",
                "lat_bucket{le=\"7\"} 4\n",
                "lat_bucket{le=\"15\"} 4\n",
                "lat_bucket{le=\"31\"} 4\n",
                "lat_bucket{le=\"63\"} 4\n",
                "lat_bucket{le=\"127\"} 5\n",
                "lat_bucket{le=\"+Inf\"} 5\n",
                "lat_sum 107\n",
                "lat_count 5\n",
            )
        );
    }

    #[test]
    fn negative_values_and_an_empty_histogram() {
        let s = log_stat(&[-5, -1]);
        let text = render(&[spec("d", false, &[])], &vec![Value::Stat(s)]);
        assert!(
            text.contains("d_bucket{le=\"-4\"} 1\nd_bucket{le=\"-2\"} 1\nd_bucket{le=\"-1\"} 2\nd_bucket{le=\"+Inf\"} 2\n"),
            "{text}"
        );
        let empty = render(&[spec("e", false, &[])], &vec![Value::Stat(log_stat(&[]))]);
        assert!(
            empty.contains("# TYPE e histogram\ne_bucket{le=\"+Inf\"} 0\ne_sum 0\ne_count 0\n"),
            "{empty}"
        );
    }

    #[test]
    fn counters_gauges_and_labels() {
        let keys = vec![KeyPart::Str(b"a\"b".to_vec().into()), KeyPart::Long(3)];
        let text = render(
            &[
                spec("calls_total", true, &["name"]),
                spec("depth", false, &["name"]),
            ],
            &vec![
                Value::LongMap(vec![(keys.clone(), 7)]),
                Value::LongMap(Vec::new()),
            ],
        );
        assert_eq!(
            text,
            concat!(
                "# HELP calls_total utap global calls_total of t.stp\n",
                "# TYPE calls_total counter\n",
                "calls_total{name=\"a\\\"b\",key2=\"3\"} 7\n",
            )
        );
    }
}
