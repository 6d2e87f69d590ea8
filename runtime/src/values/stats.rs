//! Statistics aggregates (`<<<`, `@count` ... `@variance`, `@hist_log`,
//! `@hist_linear`) and SystemTap's exact histogram printing.
//!
//! A [`Stat`] is created from a [`StatSpec`] the checker derives per global
//! (which histogram the script uses, and the `@variance` bit shift). The
//! arithmetic follows SystemTap's runtime (`stat-common.c`, `stat.c`) on a
//! single CPU, including its integer truncations, so the printed numbers
//! match.

use std::fmt;

/// Log histograms have 128 buckets; bucket 64 holds 0, 65.. hold 1, 2, 4,
/// ...; 63.. down hold -1, -2, -4, ...
pub const HIST_LOG_BUCKETS: usize = 128;
/// The bucket of a log histogram that counts zeros.
pub const HIST_LOG_BUCKET0: usize = 64;
/// The most buckets a linear histogram may have (SystemTap's
/// STP_MAX_BUCKETS), under- and overflow buckets included.
pub const MAX_LINEAR_BUCKETS: i64 = 128;
/// Width of a histogram bar.
pub const HIST_WIDTH: i64 = 50;
/// Default for `-DHIST_ELISION`: empty buckets kept next to non-empty ones.
pub const DEFAULT_HIST_ELISION: i64 = 2;

/// Which histogram a statistic keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistSpec {
    None,
    Log,
    /// `@hist_linear(s, start, stop, interval)`; `buckets` includes the
    /// under- and overflow buckets.
    Linear {
        start: i64,
        interval: i64,
        buckets: usize,
    },
}

impl HistSpec {
    /// Validates `@hist_linear(s, start, stop, interval)` parameters as
    /// SystemTap does (its messages, which the checker reports).
    pub fn linear(start: i64, stop: i64, interval: i64) -> Result<HistSpec, HistError> {
        if interval == 0 {
            return Err(HistError::ZeroInterval);
        }
        let buckets = (stop.wrapping_sub(start)) / interval + 3;
        if !(3..=MAX_LINEAR_BUCKETS).contains(&buckets) {
            return Err(HistError::BucketCount);
        }
        Ok(HistSpec::Linear {
            start,
            interval,
            buckets: buckets as usize,
        })
    }

    /// Number of buckets (0 without a histogram).
    pub fn buckets(&self) -> usize {
        match *self {
            HistSpec::None => 0,
            HistSpec::Log => HIST_LOG_BUCKETS,
            HistSpec::Linear { buckets, .. } => buckets,
        }
    }

    /// The bucket a value falls into.
    pub fn bucket_of(&self, val: i64) -> Option<usize> {
        match *self {
            HistSpec::None => None,
            HistSpec::Log => Some(log_bucket(val)),
            HistSpec::Linear {
                start,
                interval,
                buckets,
            } => {
                let off = val.wrapping_sub(start);
                let b = if off < 0 {
                    0
                } else {
                    // SystemTap divides as unsigned 64-bit. (A spec not made
                    // by `linear` may have a zero interval: no panic.)
                    (off as u64)
                        .checked_div(interval as u64)
                        .unwrap_or(0)
                        .saturating_add(1)
                };
                Some(b.min((buckets as u64).saturating_sub(1)) as usize)
            }
        }
    }
}

/// Invalid `@hist_linear` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistError {
    ZeroInterval,
    BucketCount,
}

impl fmt::Display for HistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistError::ZeroInterval => f.write_str("histogram: interval cannot be zero."),
            HistError::BucketCount => write!(
                f,
                "histogram: Number of buckets must be between 1 and {}\n\
                 Number_of_buckets = (stop - start) / interval.\n\
                 Please adjust your start, stop, and interval values.",
                MAX_LINEAR_BUCKETS - 2
            ),
        }
    }
}

impl std::error::Error for HistError {}

/// How a statistic is kept: its histogram and the `@variance(s, N)` shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatSpec {
    pub hist: HistSpec,
    /// Bit shift used for `@variance` (0 by default).
    pub variance_shift: u32,
}

impl StatSpec {
    pub const PLAIN: StatSpec = StatSpec {
        hist: HistSpec::None,
        variance_shift: 0,
    };
}

impl Default for StatSpec {
    fn default() -> Self {
        StatSpec::PLAIN
    }
}

/// The log2 bucket of a value: 64 for 0, 64+k+1 for values in
/// [2^k, 2^(k+1)), mirrored below 64 for negative values.
pub fn log_bucket(val: i64) -> usize {
    if val == 0 {
        return HIST_LOG_BUCKET0;
    }
    let mag = val.unsigned_abs();
    let bits = 64 - mag.leading_zeros() as usize; // 1..=64
    if val < 0 {
        HIST_LOG_BUCKETS - (bits + HIST_LOG_BUCKET0)
    } else {
        (bits + HIST_LOG_BUCKET0).min(HIST_LOG_BUCKETS - 1)
    }
}

/// The label of a log bucket: 0, 1, 2, 4, ... and -1, -2, -4, ...
pub fn log_bucket_value(bucket: usize) -> i64 {
    if bucket == HIST_LOG_BUCKET0 {
        0
    } else if bucket < HIST_LOG_BUCKET0 {
        i64::MIN >> bucket
    } else {
        1i64.wrapping_shl((bucket - HIST_LOG_BUCKET0 - 1) as u32)
    }
}

/// Errors of reading an aggregate (SystemTap's runtime messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatError {
    /// `@min`, `@max`, `@avg`, `@variance`, histograms of nothing.
    Empty,
    /// `@hist_log(s)[i]` with `i` outside the buckets.
    HistIndex,
}

impl fmt::Display for StatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StatError::Empty => "empty aggregate",
            StatError::HistIndex => "histogram index out of range",
        })
    }
}

impl std::error::Error for StatError {}

/// One statistic: count, sum, min, max, running variance and histogram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    count: i64,
    sum: i64,
    min: i64,
    max: i64,
    /// Welford state, scaled by `2^shift` as SystemTap keeps it.
    avg_s: i64,
    m2: i64,
    variance_s: i64,
    shift: u32,
    hist: HistSpec,
    buckets: Box<[i64]>,
    /// An element of a statistics array (see [`Stat::variance`]).
    element: bool,
}

impl Stat {
    pub fn new(spec: StatSpec) -> Stat {
        Stat {
            count: 0,
            sum: 0,
            min: 0,
            max: 0,
            avg_s: 0,
            m2: 0,
            variance_s: 0,
            shift: spec.variance_shift,
            hist: spec.hist,
            buckets: vec![0; spec.hist.buckets()].into_boxed_slice(),
            element: false,
        }
    }

    /// A statistic of `count` values with these totals and bucket counts
    /// (the data plane's atomics keep no running variance: the compiler
    /// keeps statistics `@variance` reads off it). `None` if the parts do
    /// not fit `spec` (another number of buckets, a negative count).
    pub fn from_totals(
        spec: StatSpec,
        count: i64,
        sum: i64,
        min: i64,
        max: i64,
        buckets: &[i64],
    ) -> Option<Stat> {
        if count < 0 || buckets.len() != spec.hist.buckets() {
            return None;
        }
        let mut s = Stat::new(spec);
        if count > 0 {
            s.count = count;
            s.sum = sum;
            s.min = min;
            s.max = max;
            s.avg_s = sum.wrapping_shl(s.shift) / count;
            s.buckets.copy_from_slice(buckets);
        }
        Some(s)
    }

    /// Marks this statistic as an element of a statistics array (the map
    /// does so when it inserts one).
    pub fn mark_element(&mut self) {
        self.element = true;
    }

    /// `s <<< val`.
    pub fn add(&mut self, val: i64) {
        let scaled = val.wrapping_shl(self.shift);
        if self.count == 0 {
            self.count = 1;
            self.sum = val;
            self.min = val;
            self.max = val;
            self.avg_s = scaled;
            self.m2 = 0;
        } else {
            self.count += 1;
            self.sum = self.sum.wrapping_add(val);
            self.max = self.max.max(val);
            self.min = self.min.min(val);
            // SystemTap keeps this delta in a C `int`: keep its truncation.
            let delta = scaled.wrapping_sub(self.avg_s) as i32 as i64;
            self.avg_s = self.avg_s.wrapping_add(delta / self.count);
            self.m2 = self
                .m2
                .wrapping_add(delta.wrapping_mul(scaled.wrapping_sub(self.avg_s)));
            self.variance_s = self.m2 / (self.count - 1);
        }
        if let Some(slot) = self
            .hist
            .bucket_of(val)
            .and_then(|b| self.buckets.get_mut(b))
        {
            *slot += 1;
        }
    }

    /// Adds the values `other` collected (another tracer thread's copy of
    /// the same statistic, as SystemTap's per-CPU copies) to this one.
    /// Count, sum, min, max and histogram buckets come out exactly as if
    /// every value had been added here; the running variance is combined
    /// as SystemTap's `_stp_stat_get` combines its CPUs' (each copy's mean
    /// against the overall one, plus each copy's own variance).
    pub fn merge(&mut self, other: &Stat) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            let element = self.element;
            self.clone_from(other);
            self.element = element;
            return;
        }
        let count = self.count + other.count;
        let sum = self.sum.wrapping_add(other.sum);
        let avg_s = sum.wrapping_shl(self.shift) / count;
        let part = |s: &Stat| {
            let d = s.avg_s.wrapping_sub(avg_s);
            let s1 = s.count.wrapping_mul(d).wrapping_mul(d);
            s1.wrapping_add((s.count - 1).wrapping_mul(s.variance_s))
        };
        let spread = part(self).wrapping_add(part(other));
        self.variance_s = spread / (count - 1);
        self.m2 = self.variance_s.wrapping_mul(count - 1);
        self.avg_s = avg_s;
        self.count = count;
        self.sum = sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        for (b, o) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *b += o;
        }
    }

    /// Forgets every value (`delete s`), keeping the spec and buffers.
    pub fn clear(&mut self) {
        self.count = 0;
        self.sum = 0;
        self.min = 0;
        self.max = 0;
        self.avg_s = 0;
        self.m2 = 0;
        self.variance_s = 0;
        self.buckets.fill(0);
    }

    /// The spec this statistic was made with.
    pub fn spec(&self) -> StatSpec {
        StatSpec {
            hist: self.hist,
            variance_shift: self.shift,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// `@count` (0 when empty).
    pub fn count(&self) -> i64 {
        self.count
    }
    /// `@sum` (0 when empty).
    pub fn sum(&self) -> i64 {
        self.sum
    }
    pub fn min(&self) -> Result<i64, StatError> {
        self.nonempty().map(|s| s.min)
    }
    pub fn max(&self) -> Result<i64, StatError> {
        self.nonempty().map(|s| s.max)
    }
    /// `@avg`: truncating division.
    pub fn avg(&self) -> Result<i64, StatError> {
        self.nonempty().map(|s| s.sum.wrapping_div(s.count))
    }

    /// `@variance`: SystemTap's integer Welford estimate, scaled back by
    /// the bit shift. For a scalar statistic SystemTap then applies its
    /// cross-CPU "total variance" step (here over one CPU, which still
    /// moves the result); an array element is copied without it.
    pub fn variance(&self) -> Result<i64, StatError> {
        let s = self.nonempty()?;
        if s.element {
            return Ok(s.variance_s >> (2 * s.shift).min(63));
        }
        let agg_avg_s = s.sum.wrapping_shl(s.shift) / s.count;
        let d = s.avg_s.wrapping_sub(agg_avg_s);
        let s1 = s.count.wrapping_mul(d).wrapping_mul(d);
        let s2 = (s.count - 1).wrapping_mul(s.variance_s);
        let var_s = if s.count > 1 {
            s1.wrapping_add(s2) / (s.count - 1)
        } else {
            0
        };
        Ok(var_s >> (2 * s.shift).min(63))
    }

    /// The aggregate `op` (the codegen's `@op(s)`).
    pub fn get(&self, op: StatOp) -> Result<i64, StatError> {
        match op {
            StatOp::Count => Ok(self.count()),
            StatOp::Sum => Ok(self.sum()),
            StatOp::Min => self.min(),
            StatOp::Max => self.max(),
            StatOp::Avg => self.avg(),
            StatOp::Variance => self.variance(),
        }
    }

    /// The histogram kept by this statistic.
    pub fn hist_spec(&self) -> HistSpec {
        self.hist
    }

    /// All bucket counts (empty without a histogram).
    pub fn buckets(&self) -> &[i64] {
        &self.buckets
    }

    /// `@hist_log(s)[i]`: errors as SystemTap for an empty aggregate or an
    /// index out of range.
    pub fn bucket(&self, index: i64) -> Result<i64, StatError> {
        self.nonempty()?;
        usize::try_from(index)
            .ok()
            .and_then(|i| self.buckets.get(i).copied())
            .ok_or(StatError::HistIndex)
    }

    /// Appends the histogram as `print(@hist_...(s))` prints it.
    pub fn print_histogram(&self, out: &mut Vec<u8>, elision: i64) -> Result<(), StatError> {
        self.nonempty()?;
        write_histogram(out, self.hist, &self.buckets, elision);
        Ok(())
    }

    /// `sprint(@hist_*(s))`: the histogram as a string, cut at
    /// MAXSTRINGLEN - 1 bytes.
    pub fn sprint_histogram(
        &self,
        out: &mut Vec<u8>,
        elision: i64,
        maxstringlen: usize,
    ) -> Result<(), StatError> {
        let start = out.len();
        self.print_histogram(out, elision)?;
        out.truncate(start + (out.len() - start).min(maxstringlen.saturating_sub(1)));
        Ok(())
    }

    fn nonempty(&self) -> Result<&Stat, StatError> {
        if self.count == 0 {
            Err(StatError::Empty)
        } else {
            Ok(self)
        }
    }
}

/// The aggregate extractors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatOp {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    Variance,
}

/// Characters needed to print `v` in decimal.
fn needed_space(v: i64) -> i64 {
    let mut space = if v < 0 { 1 } else { 0 };
    let mut m = v.unsigned_abs();
    if m == 0 {
        return 1;
    }
    while m != 0 {
        m /= 10;
        space += 1;
    }
    space
}

fn push_repeat(out: &mut Vec<u8>, byte: u8, n: i64) {
    if n > 0 {
        out.resize(out.len() + n as usize, byte);
    }
}

/// The label of bucket `i` and its prefix (`<` underflow, `>` overflow).
fn bucket_label(hist: HistSpec, i: usize) -> (&'static str, i64) {
    match hist {
        HistSpec::Linear {
            start,
            interval,
            buckets,
        } => {
            let i = i as i64;
            if i == 0 {
                ("<", start)
            } else if i == buckets as i64 - 1 {
                (">", start.wrapping_add((i - 2).wrapping_mul(interval)))
            } else {
                ("", start.wrapping_add((i - 1).wrapping_mul(interval)))
            }
        }
        _ => ("", log_bucket_value(i)),
    }
}

/// SystemTap's histogram layout: the value column, a 50-wide bar scaled by
/// ceil(max/50), up to two empty buckets each side of the data, runs of
/// empty buckets elided to a `~` row (HIST_ELISION; negative disables).
pub fn write_histogram(out: &mut Vec<u8>, hist: HistSpec, counts: &[i64], elision: i64) {
    let nb = counts.len() as i64;
    if nb == 0 {
        return;
    }
    let is_log = matches!(hist, HistSpec::Log);
    let mut low: i64 = -1;
    let mut high: i64 = 0;
    let mut valmax: i64 = 0;
    for (i, &c) in counts.iter().enumerate() {
        if c > 0 {
            if low == -1 {
                low = i as i64;
            }
            high = i as i64;
        }
        valmax = valmax.max(c);
    }
    for _ in 0..2 {
        if is_log {
            // Log histograms don't grow into negative buckets unless there
            // are negative values.
            if low != HIST_LOG_BUCKET0 as i64 && low > 0 {
                low -= 1;
            }
        } else if low > 0 {
            low -= 1;
        }
        if high < nb - 1 {
            high += 1;
        }
    }
    let (mut under, mut over) = (0, 0);
    if !is_log {
        if low == 0 && counts[0] == 0 {
            low += 1;
        }
        if high == nb - 1 && counts[high as usize] == 0 {
            high -= 1;
        }
        under = i64::from(low == 0);
        over = i64::from(high == nb - 1);
    }
    let scale = if valmax <= HIST_WIDTH {
        1
    } else {
        (valmax + HIST_WIDTH - 1) / HIST_WIDTH
    };
    let cnt_space = needed_space(valmax);
    let mut val_space = match hist {
        HistSpec::Linear {
            start, interval, ..
        } => (needed_space(start) + under)
            .max(needed_space(start.wrapping_add(interval.wrapping_mul(high))) + over),
        _ => needed_space(log_bucket_value(high.max(0) as usize))
            .max(needed_space(log_bucket_value(low.max(0) as usize))),
    };
    val_space = val_space.max(5);

    push_repeat(out, b' ', val_space - 5);
    out.extend_from_slice(b"value |");
    push_repeat(out, b'-', HIST_WIDTH);
    out.extend_from_slice(b" count\n");

    let max_elide = elision.min(nb);
    let mut eliding = false;
    let mut i = low;
    while i <= high {
        if elision >= 0 {
            let from = low.max(i - max_elide);
            let to = high.min(i + max_elide);
            let all_zero = (from..=to).all(|k| counts[k as usize] == 0);
            if all_zero {
                eliding = true;
                i += 1;
                continue;
            }
            if eliding {
                push_repeat(out, b' ', val_space);
                out.extend_from_slice(b" ~\n");
                eliding = false;
            }
        }
        let (prefix, val) = bucket_label(hist, i as usize);
        let label = val.to_string();
        push_repeat(
            out,
            b' ',
            val_space - needed_space(val) - prefix.len() as i64,
        );
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(label.as_bytes());
        out.extend_from_slice(b" |");
        let c = counts[i as usize];
        let bar = c / scale;
        push_repeat(out, b'@', bar);
        let count = c.to_string();
        push_repeat(
            out,
            b' ',
            HIST_WIDTH - bar + 1 + cnt_space - count.len() as i64,
        );
        out.extend_from_slice(count.as_bytes());
        out.push(b'\n');
        i += 1;
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Count, sum, min, max, average and buckets of `a` are `b`'s (the
    /// order-free parts of a statistic).
    fn assert_same_totals(a: &Stat, b: &Stat) {
        for op in [
            StatOp::Count,
            StatOp::Sum,
            StatOp::Min,
            StatOp::Max,
            StatOp::Avg,
        ] {
            assert_eq!(a.get(op), b.get(op), "{op:?}");
        }
        assert_eq!(a.buckets(), b.buckets());
    }

    #[test]
    fn log_buckets_match_systemtap() {
        assert_eq!(log_bucket(0), 64);
        assert_eq!(log_bucket(1), 65);
        assert_eq!(log_bucket(2), 66);
        assert_eq!(log_bucket(3), 66);
        assert_eq!(log_bucket(4), 67);
        assert_eq!(log_bucket(-1), 63);
        assert_eq!(log_bucket(-2), 62);
        assert_eq!(log_bucket(-3), 62);
        assert_eq!(log_bucket(i64::MAX), 127);
        assert_eq!(log_bucket(i64::MIN), 0);
        assert_eq!(log_bucket_value(0), i64::MIN);
        assert_eq!(log_bucket_value(63), -1);
        assert_eq!(log_bucket_value(127), 1 << 62);
    }

    /// Values split over two copies and merged give what one copy that saw
    /// them all gives (count, sum, extremes, buckets); a copy merged into
    /// an empty one is taken as it is, variance included.
    #[test]
    fn merged_copies_equal_one_copy() {
        let spec = StatSpec {
            hist: HistSpec::Log,
            variance_shift: 0,
        };
        let values: Vec<i64> = (0..1000).map(|i| (i * 7919) % 1013 - 300).collect();
        let mut one = Stat::new(spec);
        let (mut a, mut b) = (Stat::new(spec), Stat::new(spec));
        for (i, &v) in values.iter().enumerate() {
            one.add(v);
            if i % 3 == 0 { a.add(v) } else { b.add(v) }
        }
        let mut empty = Stat::new(spec);
        empty.merge(&b);
        assert_eq!(empty, b);
        a.merge(&b);
        assert_same_totals(&a, &one);
        // The combined variance is SystemTap's cross-CPU estimate: close
        // to the one-copy Welford figure, not bit-equal.
        let (va, v1) = (a.variance().unwrap(), one.variance().unwrap());
        assert!((va - v1).abs() <= v1 / 100, "{va} against {v1}");
    }

    #[test]
    fn linear_spec_checks_like_systemtap() {
        assert_eq!(HistSpec::linear(0, 10, 0), Err(HistError::ZeroInterval));
        assert_eq!(HistSpec::linear(0, 1000, 1), Err(HistError::BucketCount));
        assert_eq!(HistSpec::linear(10, 0, 1), Err(HistError::BucketCount));
        assert_eq!(
            HistSpec::linear(0, 1500, 50),
            Ok(HistSpec::Linear {
                start: 0,
                interval: 50,
                buckets: 33
            })
        );
    }

    #[test]
    fn hand_made_bad_specs_do_not_panic() {
        for hist in [
            HistSpec::Linear {
                start: 0,
                interval: 0,
                buckets: 5,
            },
            HistSpec::Linear {
                start: 0,
                interval: 10,
                buckets: 0,
            },
        ] {
            let mut s = Stat::new(StatSpec {
                hist,
                variance_shift: 70,
            });
            s.add(5);
            s.add(-5);
            let mut out = Vec::new();
            s.print_histogram(&mut out, 2).unwrap();
            s.variance().unwrap();
        }
    }

    #[test]
    fn aggregates() {
        let mut s = Stat::new(StatSpec::PLAIN);
        assert_eq!(s.count(), 0);
        assert_eq!(s.sum(), 0);
        assert_eq!(s.min(), Err(StatError::Empty));
        assert_eq!(s.avg().unwrap_err().to_string(), "empty aggregate");
        for v in [1, 2, 3, 4] {
            s.add(v);
        }
        assert_eq!((s.count(), s.sum()), (4, 10));
        assert_eq!((s.min(), s.max(), s.avg()), (Ok(1), Ok(4), Ok(2)));
        let mut n = Stat::new(StatSpec::PLAIN);
        n.add(-7);
        n.add(0);
        assert_eq!(n.avg(), Ok(-3));
    }

    #[test]
    fn variance_follows_systemtap_integer_math() {
        // Values 1..=5 (sample variance 2.5): without a shift SystemTap's
        // running average never moves off 1 (delta / count truncates), so
        // M2 = 30, variance_s = 7, and the total-variance step gives
        // (5*(1-3)^2 + 4*7) / 4 = 12. With 8 bits of shift it gives 2.
        let mut s = Stat::new(StatSpec::PLAIN);
        for v in 1..=5 {
            s.add(v);
        }
        assert_eq!(s.variance(), Ok(12));
        let mut one = Stat::new(StatSpec::PLAIN);
        one.add(42);
        assert_eq!(one.variance(), Ok(0));
        let mut shifted = Stat::new(StatSpec {
            hist: HistSpec::None,
            variance_shift: 8,
        });
        for v in 1..=5 {
            shifted.add(v);
        }
        assert_eq!(shifted.variance(), Ok(2));
        let mut spread = Stat::new(StatSpec::PLAIN);
        for v in [0, 10, 20, 30] {
            spread.add(v);
        }
        // Sample variance 166.67.
        assert_eq!(spread.variance(), Ok(166));
    }

    #[test]
    fn clear_and_sprint() {
        let spec = StatSpec {
            hist: HistSpec::Log,
            variance_shift: 3,
        };
        let mut s = Stat::new(spec);
        for v in [1, 2, 300] {
            s.add(v);
        }
        s.clear();
        assert_eq!(s, Stat::new(spec));
        assert_eq!(s.spec(), spec);
        s.add(1);
        let mut out = b"x".to_vec();
        s.sprint_histogram(&mut out, 2, 16).unwrap();
        assert_eq!(out, b"xvalue |--------");
        let mut full = Vec::new();
        s.print_histogram(&mut full, 2).unwrap();
        assert!(full.ends_with(b"    4 |                                                   0\n\n"));
    }

    #[test]
    fn bucket_access_errors() {
        let mut s = Stat::new(StatSpec {
            hist: HistSpec::Log,
            variance_shift: 0,
        });
        assert_eq!(s.bucket(64), Err(StatError::Empty));
        s.add(0);
        assert_eq!(s.bucket(64), Ok(1));
        assert_eq!(s.bucket(128), Err(StatError::HistIndex));
        assert_eq!(
            s.bucket(-1).unwrap_err().to_string(),
            "histogram index out of range"
        );
    }

    /// A statistic rebuilt from its totals (the data plane's fold) reads
    /// as the one that saw the values: every extractor but @variance,
    /// which the route never lets the data plane keep; parts that do not
    /// fit the spec are refused.
    #[test]
    fn totals_rebuild_the_statistic() {
        let spec = StatSpec {
            hist: HistSpec::linear(-50, 50, 10).unwrap(),
            variance_shift: 0,
        };
        let mut seen = Stat::new(spec);
        for v in (0..500).map(|i| (i * 7919) % 173 - 80) {
            seen.add(v);
        }
        let (min, max) = (seen.min().unwrap(), seen.max().unwrap());
        let s =
            Stat::from_totals(spec, seen.count(), seen.sum(), min, max, seen.buckets()).unwrap();
        assert_same_totals(&s, &seen);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        s.print_histogram(&mut a, DEFAULT_HIST_ELISION).unwrap();
        seen.print_histogram(&mut b, DEFAULT_HIST_ELISION).unwrap();
        assert_eq!(a, b);
        let empty = Stat::from_totals(
            spec,
            0,
            0,
            i64::MAX,
            i64::MIN,
            &vec![0; spec.hist.buckets()],
        );
        assert!(empty.unwrap().is_empty());
        assert!(Stat::from_totals(spec, 1, 1, 1, 1, &[0; 3]).is_none());
        assert!(Stat::from_totals(spec, -1, 0, 0, 0, seen.buckets()).is_none());
    }
}
