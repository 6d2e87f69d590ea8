//! Runtime limits and settings from `-D NAME=VALUE`, with SystemTap's
//! defaults.

/// The limits a session runs under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Statements per probe-handler run (`MAXACTION`).
    pub max_action: i64,
    /// Statements per run of a begin/end/error probe
    /// (`MAXACTION_INTERRUPTIBLE`, 10x MAXACTION unless set).
    pub max_action_interruptible: i64,
    /// Function-call depth (`MAXNESTING`).
    pub max_nesting: i64,
    /// Entries per array without a declared size (`MAXMAPENTRIES`).
    pub max_map_entries: usize,
    /// String buffer size, terminator included (`MAXSTRINGLEN`).
    pub max_string_len: usize,
    /// Empty histogram buckets shown around a `~` elision (`HIST_ELISION`).
    pub hist_elision: i64,
    /// Errors tolerated before the session stops (`MAXERRORS`).
    pub max_errors: i64,
    /// Probes skipped on lock contention tolerated before the session
    /// stops with an error (`MAXSKIPPED`).
    pub max_skipped: i64,
    /// Tries for a global's lock before a probe is skipped
    /// (`MAXTRYLOCK`), `TRYLOCKDELAY` microseconds apart.
    pub max_trylock: i64,
    pub trylock_delay_us: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_action: 1000,
            max_action_interruptible: 10_000,
            max_nesting: 10,
            max_map_entries: 2048,
            max_string_len: 512,
            hist_elision: 2,
            max_errors: 0,
            max_skipped: 100,
            // SystemTap's kernel handlers cannot be preempted while they
            // hold a lock (100 tries 10 µs apart); a tracer thread can lose
            // its CPU for a whole time slice, so utap waits up to ≈1 s.
            max_trylock: 100_000,
            trylock_delay_us: 10,
        }
    }
}

/// The `-D` names utap acts on.
pub const KNOWN: &[&str] = &[
    "HIST_ELISION",
    "MAXACTION",
    "MAXACTION_INTERRUPTIBLE",
    "MAXERRORS",
    "MAXMAPENTRIES",
    "MAXNESTING",
    "MAXSTRINGLEN",
];

/// SystemTap's `-D` settings of its kernel module (locking, overload,
/// transport, kprobes): scripts' usual command lines keep working, with no
/// effect in utap.
const SYSTEMTAP_ONLY: &[&str] = &[
    "INTERRUPTIBLE",
    "KRETACTIVE",
    "MAXBACKTRACE",
    "MAXSKIPPED",
    "MAXTRYLOCK",
    "MAXUPROBES",
    "STP_NO_BUILDID_CHECK",
    "STP_NO_OVERLOAD",
    "STP_OVERLOAD_INTERVAL",
    "STP_OVERLOAD_THRESHOLD",
    "STP_PROCFS_BUFSIZE",
    "STP_USE_RING_BUFFER",
    "TRYLOCKDELAY",
];

impl Limits {
    /// MAXTRYLOCK as a count of tries (at least one) and TRYLOCKDELAY as
    /// the pause between them: what every bounded lock wait uses.
    pub fn trylock(&self) -> (u64, std::time::Duration) {
        (
            self.max_trylock.max(1) as u64,
            std::time::Duration::from_micros(self.trylock_delay_us.max(0) as u64),
        )
    }

    /// Applies `-D` definitions (`NAME=VALUE` or `NAME`). An unknown name is
    /// an error that lists the known ones (a misspelt limit would otherwise
    /// silently not apply); SystemTap's settings of its kernel runtime are
    /// accepted and ignored. A known limit whose value is not a number is
    /// an error.
    pub fn from_defines<S: AsRef<str>>(defines: &[S]) -> Result<Limits, String> {
        let mut l = Limits::default();
        let mut interruptible_set = false;
        for d in defines {
            let d = d.as_ref();
            let (name, value) = d.split_once('=').unwrap_or((d, ""));
            let num = || -> Result<i64, String> {
                value
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("invalid value for -D {name}: '{value}'"))
            };
            match name {
                "MAXACTION" => l.max_action = num()?,
                "MAXACTION_INTERRUPTIBLE" => {
                    l.max_action_interruptible = num()?;
                    interruptible_set = true;
                }
                "MAXNESTING" => l.max_nesting = num()?,
                "MAXMAPENTRIES" => l.max_map_entries = num()?.max(1) as usize,
                "MAXSTRINGLEN" => l.max_string_len = num()?.max(1) as usize,
                "HIST_ELISION" => l.hist_elision = num()?,
                "MAXERRORS" => l.max_errors = num()?,
                "MAXSKIPPED" => l.max_skipped = num()?,
                "MAXTRYLOCK" => l.max_trylock = num()?.max(1),
                "TRYLOCKDELAY" => l.trylock_delay_us = num()?.max(0),
                _ if SYSTEMTAP_ONLY.contains(&name) => {}
                _ => {
                    return Err(format!(
                        "unknown -D name '{name}' (utap knows {})",
                        KNOWN.join(", ")
                    ));
                }
            }
        }
        if !interruptible_set {
            l.max_action_interruptible = l.max_action.saturating_mul(10);
        }
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let l =
            Limits::from_defines(&["MAXACTION=5", "MAXSTRINGLEN=20", "STP_NO_OVERLOAD"]).unwrap();
        assert_eq!(l.max_action, 5);
        assert_eq!(l.max_action_interruptible, 50);
        assert_eq!(l.max_string_len, 20);
        assert_eq!(l.max_map_entries, 2048);
        assert_eq!(
            Limits::from_defines(&["MAXNESTING=x"]).unwrap_err(),
            "invalid value for -D MAXNESTING: 'x'"
        );
    }

    #[test]
    fn unknown_names_are_errors_that_list_the_known_ones() {
        assert_eq!(
            Limits::from_defines(&["MAXACTIONS=5"]).unwrap_err(),
            "unknown -D name 'MAXACTIONS' (utap knows HIST_ELISION, MAXACTION, \
             MAXACTION_INTERRUPTIBLE, MAXERRORS, MAXMAPENTRIES, MAXNESTING, MAXSTRINGLEN)"
        );
    }
}
