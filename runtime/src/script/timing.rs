//! `-t`: how often each probe point fired and how long its handler ran,
//! reported at the end of the session in SystemTap's "probe hit report"
//! format. utap runs in user space, so the unit is nanoseconds (`nsecs`),
//! as in SystemTap's user-space runtime, where the kernel runtime counts
//! `cycles`:
//!
//! ```text
//! ----- probe hit report:
//! process.syscall, (t.stp:3:1), hits: 12, nsecs: 80min/160avg/610max, variance: 2500, from: syscall.read, index: 0
//! ```
//!
//! One line per probe point that fired, in probe order; the `from:` part
//! is the point as the script wrote it (before alias expansion).

use std::fmt::Write;
use std::time::Duration;

/// What the report says about one probe besides its points' texts.
#[derive(Clone, Debug, Default)]
pub struct TimingLabel {
    /// `file:line:col` of the probe.
    pub location: String,
    /// The point as written (`syscall.read`).
    pub from: String,
}

/// Hit count and handler run times of one probe point.
#[derive(Clone, Copy, Debug, Default)]
struct PointTiming {
    hits: u64,
    sum: u128,
    sum_sq: u128,
    min: u64,
    max: u64,
}

/// The counters of a session (allocated once, when `-t` is given).
#[derive(Debug)]
pub struct Timing {
    labels: Vec<TimingLabel>,
    /// Per probe, per point.
    points: Vec<Vec<PointTiming>>,
}

impl Timing {
    /// Counters for probes with `points[i]` points each.
    pub fn new(labels: Vec<TimingLabel>, points: impl Iterator<Item = usize>) -> Timing {
        Timing {
            labels,
            points: points.map(|n| vec![PointTiming::default(); n]).collect(),
        }
    }

    /// One handler run of `point` of `probe` took `took`.
    pub fn record(&mut self, probe: usize, point: usize, took: Duration) {
        let Some(t) = self.points.get_mut(probe).and_then(|p| p.get_mut(point)) else {
            return;
        };
        let ns = took.as_nanos().min(u64::MAX as u128) as u64;
        if t.hits == 0 || ns < t.min {
            t.min = ns;
        }
        t.max = t.max.max(ns);
        t.hits += 1;
        t.sum += ns as u128;
        t.sum_sq += (ns as u128) * (ns as u128);
    }

    /// The report; `text(probe, point)` is the point's canonical text.
    pub fn report(&self, text: impl Fn(usize, usize) -> String) -> String {
        let mut out = String::from("----- probe hit report: \n");
        for (i, points) in self.points.iter().enumerate() {
            let label = self.labels.get(i).cloned().unwrap_or_default();
            for (j, t) in points.iter().enumerate().filter(|(_, t)| t.hits > 0) {
                let n = t.hits as u128;
                let avg = t.sum / n;
                // Population variance, as SystemTap's @variance.
                let variance = (t.sum_sq / n).saturating_sub(avg * avg);
                let _ = writeln!(
                    out,
                    "{}, ({}), hits: {}, nsecs: {}min/{}avg/{}max, variance: {}, from: {}, index: {}",
                    text(i, j),
                    label.location,
                    t.hits,
                    t.min,
                    avg,
                    t.max,
                    variance,
                    label.from,
                    i
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lists_points_that_fired() {
        let labels = vec![
            TimingLabel {
                location: "t.stp:1:1".into(),
                from: "begin".into(),
            },
            TimingLabel {
                location: "t.stp:2:1".into(),
                from: "end".into(),
            },
        ];
        let mut t = Timing::new(labels, [1, 1].into_iter());
        t.record(0, 0, Duration::from_nanos(100));
        t.record(0, 0, Duration::from_nanos(300));
        let text = t.report(|i, _| ["begin", "end"][i].to_string());
        assert_eq!(
            text,
            "----- probe hit report: \n\
             begin, (t.stp:1:1), hits: 2, nsecs: 100min/200avg/300max, variance: 10000, from: begin, index: 0\n"
        );
    }
}
