//! The probe-point catalogue: every probe-point family utap supports, in one
//! table.
//!
//! Resolution, `-l`/`-L` and the docs all read [`FAMILIES`]. A family is a
//! pattern of dotted components (each with the kind of argument it takes)
//! plus the context variables its handlers may use. Adding a family means
//! adding a row here and an engine in the runtime.
//!
//! Building a matched family dispatches to the builders (`functions`,
//! which calls `dwarf` and `marks`); what the builders share with the
//! catalogue (arguments, errors, built points) is a floor below, in
//! [`super::point`], re-exported here.

pub use super::point::{
    BuildError, Built, FunctionFamily, PointArg, SiteKind, find_executable, glob_match,
    process_target,
};
use crate::program::{ContextVar, PointKind, ProcessEvent, ProcessTarget, Type};

/// What a component's `(arg)` may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgSpec {
    /// No argument allowed.
    None,
    /// An optional number (`begin`, `begin(5)`).
    OptNum,
    /// A required number (`timer.ms(100)`).
    Num,
    /// An optional string or number (`process`, `process("ls")`, `process(42)`).
    OptStrOrNum,
    /// A required string (`function("main")`).
    Str,
    /// A required string or number (`statement(0x1234)`, `statement("f+4")`).
    StrOrNum,
    /// An optional string (`plt`, `plt("mem*")`).
    OptStr,
}

/// One dotted component of a family pattern.
#[derive(Clone, Copy, Debug)]
pub struct CompSpec {
    pub name: &'static str,
    pub arg: ArgSpec,
    /// May be left out (only trailing modifiers such as `.randomize(N)`).
    pub optional: bool,
}

/// A context (`$name`) variable of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextVarDef {
    /// Without the `$`.
    pub name: &'static str,
    pub var: ContextVar,
    pub ty: Type,
    /// Writable in guru mode (`-g`); read-only otherwise and always when false.
    pub guru_writable: bool,
    /// Can be read. False for `$return` at a syscall entry: there it can
    /// only be set (guru mode), which skips the call.
    pub readable: bool,
}

/// What a family builds once its arguments are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyKind {
    Begin,
    End,
    Error,
    Never,
    /// `prometheus`: runs when `--metrics` is scraped; `$value` is the text.
    Prometheus,
    /// A timer whose period is its argument times this many nanoseconds.
    Timer {
        unit_ns: u64,
    },
    /// `timer.hz(N)`: N times a second.
    TimerHz,
    Process(ProcessEventKind),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessEventKind {
    Begin,
    /// A thread created a process or thread (fires in the creator).
    Create,
    End,
    ThreadBegin,
    ThreadEnd,
    Syscall,
    SyscallReturn,
    Signal,
    Quiesce,
    /// `timer.profile`, `timer.profile.tick`, `timer.profile.hz(N)`.
    Profile,
    /// A function probe: which site, whether a library is named, `.return`.
    Function(FunctionFamily),
}

#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub comps: &'static [CompSpec],
    pub kind: FamilyKind,
    pub context: &'static [ContextVarDef],
    pub doc: &'static str,
}

const fn c(name: &'static str, arg: ArgSpec) -> CompSpec {
    CompSpec {
        name,
        arg,
        optional: false,
    }
}

const RANDOMIZE: CompSpec = CompSpec {
    name: "randomize",
    arg: ArgSpec::Num,
    optional: true,
};
const PROCESS: CompSpec = c("process", ArgSpec::OptStrOrNum);

const fn var(name: &'static str, var: ContextVar, guru_writable: bool) -> ContextVarDef {
    ContextVarDef {
        name,
        var,
        ty: Type::Long,
        guru_writable,
        readable: true,
    }
}

/// A guru-mode variable that can be set but not read.
const fn set_only(name: &'static str, var: ContextVar) -> ContextVarDef {
    ContextVarDef {
        name,
        var,
        ty: Type::Long,
        guru_writable: true,
        readable: false,
    }
}

/// At a syscall entry, guru code may change the arguments the call runs
/// with, and set `$return` to skip the call (the thread sees that value).
const ARGS: [ContextVarDef; 6] = [
    var("arg1", ContextVar::Arg(0), true),
    var("arg2", ContextVar::Arg(1), true),
    var("arg3", ContextVar::Arg(2), true),
    var("arg4", ContextVar::Arg(3), true),
    var("arg5", ContextVar::Arg(4), true),
    var("arg6", ContextVar::Arg(5), true),
];
const SYSCALL_VARS: &[ContextVarDef] = &[
    var("syscall", ContextVar::Syscall, false),
    ARGS[0],
    ARGS[1],
    ARGS[2],
    ARGS[3],
    ARGS[4],
    ARGS[5],
    set_only("return", ContextVar::Return),
];
const SYSCALL_RETURN_VARS: &[ContextVarDef] = &[
    var("syscall", ContextVar::Syscall, false),
    var("return", ContextVar::Return, true),
];
/// `$code` of `process.end`: the exit status (128 + N when killed by
/// signal N).
const END_VARS: &[ContextVarDef] = &[var("code", ContextVar::Code, false)];
/// `.function`/`.plt` entries: the first six integer arguments of the
/// x86_64 SysV ABI (utap's dwarfless extension; SystemTap has
/// `int_arg(n)` and friends for the same registers). Under `-g` they can
/// be set at entry, as a syscall's arguments can: the registers are
/// written before the function's first instruction runs.
const FUNCTION_VARS: &[ContextVarDef] = &ARGS;
const FUNCTION_ARGS: [ContextVarDef; 6] = [
    var("arg1", ContextVar::Arg(0), false),
    var("arg2", ContextVar::Arg(1), false),
    var("arg3", ContextVar::Arg(2), false),
    var("arg4", ContextVar::Arg(3), false),
    var("arg5", ContextVar::Arg(4), false),
    var("arg6", ContextVar::Arg(5), false),
];
/// `.return`: `$return` (rax), and the entry's arguments.
const FUNCTION_RETURN_VARS: &[ContextVarDef] = &[
    var("return", ContextVar::Return, false),
    FUNCTION_ARGS[0],
    FUNCTION_ARGS[1],
    FUNCTION_ARGS[2],
    FUNCTION_ARGS[3],
    FUNCTION_ARGS[4],
    FUNCTION_ARGS[5],
];
/// USDT markers: `$arg1`..`$arg12` decoded from each marker's argument
/// spec (how many a marker has is checked against its note, see
/// `check::marks`). Read-only.
const MARK_VARS: &[ContextVarDef] = &[
    FUNCTION_ARGS[0],
    FUNCTION_ARGS[1],
    FUNCTION_ARGS[2],
    FUNCTION_ARGS[3],
    FUNCTION_ARGS[4],
    FUNCTION_ARGS[5],
    var("arg7", ContextVar::Arg(6), false),
    var("arg8", ContextVar::Arg(7), false),
    var("arg9", ContextVar::Arg(8), false),
    var("arg10", ContextVar::Arg(9), false),
    var("arg11", ContextVar::Arg(10), false),
    var("arg12", ContextVar::Arg(11), false),
];
/// `process.create`: the new task's process and thread ids (kept in the
/// argument slots; the event has no arguments of its own).
const CREATE_VARS: &[ContextVarDef] = &[
    var("new_pid", ContextVar::Arg(0), false),
    var("new_tid", ContextVar::Arg(1), false),
];
const SIGNAL_VARS: &[ContextVarDef] = &[
    var("signal", ContextVar::Signal, true),
    var("code", ContextVar::Code, false),
];

macro_rules! timer_family {
    ($unit:literal, $ns:expr) => {
        Family {
            comps: &[c("timer", ArgSpec::None), c($unit, ArgSpec::Num), RANDOMIZE],
            kind: FamilyKind::Timer { unit_ns: $ns },
            context: &[],
            doc: concat!("every N ", $unit, ", optionally randomized by up to M"),
        }
    };
}

macro_rules! process_family {
    ([$($comp:literal),+], $kind:ident, $ctx:expr, $doc:literal) => {
        Family {
            comps: &[PROCESS, $(c($comp, ArgSpec::None)),+],
            kind: FamilyKind::Process(ProcessEventKind::$kind),
            context: $ctx,
            doc: $doc,
        }
    };
}

macro_rules! site_kind {
    (Mark) => {
        SiteKind::Mark { provider: false }
    };
    (ProviderMark) => {
        SiteKind::Mark { provider: true }
    };
    ($site:ident) => {
        SiteKind::$site
    };
}

macro_rules! function_family {
    ([$($comp:expr),+], $site:ident, $lib:literal, $ret:literal, $ctx:expr, $doc:literal) => {
        Family {
            comps: &[PROCESS, $($comp),+],
            kind: FamilyKind::Process(ProcessEventKind::Function(FunctionFamily {
                site: site_kind!($site),
                library: $lib,
                returning: $ret,
            })),
            context: $ctx,
            doc: $doc,
        }
    };
}
const FUNCTION: CompSpec = c("function", ArgSpec::Str);
/// `.plt` alone is `.plt("*")` (stapprobes: "every PLT entry").
const PLT: CompSpec = c("plt", ArgSpec::OptStr);
const LIBRARY: CompSpec = c("library", ArgSpec::Str);
const RETURN: CompSpec = c("return", ArgSpec::None);
const CALL: CompSpec = CompSpec {
    name: "call",
    arg: ArgSpec::None,
    optional: true,
};

/// The kernel tick the `timer.jiffies` family counts in (CONFIG_HZ=250).
pub const JIFFY_NS: u64 = 4_000_000;

/// `timer.profile`: SystemTap's runs on every CPU at each kernel tick in
/// the context of whatever runs there; utap's samples each running thread
/// of the traced processes at each tick (CONFIG_HZ, as `timer.jiffies`).
const PROFILE_DOC: &str =
    "every tick (250 Hz), in the context of each running thread of the traced processes";

/// Every family utap supports.
pub static FAMILIES: &[Family] = &[
    Family {
        comps: &[c("begin", ArgSpec::OptNum)],
        kind: FamilyKind::Begin,
        context: &[],
        doc: "at session start (lower priority runs first)",
    },
    Family {
        comps: &[c("end", ArgSpec::OptNum)],
        kind: FamilyKind::End,
        context: &[],
        doc: "at session end",
    },
    Family {
        comps: &[c("error", ArgSpec::OptNum)],
        kind: FamilyKind::Error,
        context: &[],
        doc: "when the session ends because of a runtime error",
    },
    Family {
        comps: &[c("never", ArgSpec::None)],
        kind: FamilyKind::Never,
        context: &[],
        doc: "never (the handler is still checked)",
    },
    Family {
        comps: &[c("prometheus", ArgSpec::None)],
        kind: FamilyKind::Prometheus,
        context: &[],
        doc: "each scrape of /metrics under --metrics ADDR ($value: the text served)",
    },
    timer_family!("s", 1_000_000_000),
    timer_family!("sec", 1_000_000_000),
    timer_family!("ms", 1_000_000),
    timer_family!("msec", 1_000_000),
    timer_family!("us", 1_000),
    timer_family!("usec", 1_000),
    timer_family!("ns", 1),
    timer_family!("nsec", 1),
    timer_family!("jiffies", JIFFY_NS),
    Family {
        comps: &[c("timer", ArgSpec::None), c("hz", ArgSpec::Num)],
        kind: FamilyKind::TimerHz,
        context: &[],
        doc: "N times a second",
    },
    Family {
        comps: &[c("timer", ArgSpec::None), c("profile", ArgSpec::None)],
        kind: FamilyKind::Process(ProcessEventKind::Profile),
        context: &[],
        doc: PROFILE_DOC,
    },
    Family {
        comps: &[
            c("timer", ArgSpec::None),
            c("profile", ArgSpec::None),
            c("tick", ArgSpec::None),
        ],
        kind: FamilyKind::Process(ProcessEventKind::Profile),
        context: &[],
        doc: PROFILE_DOC,
    },
    Family {
        comps: &[
            c("timer", ArgSpec::None),
            c("profile", ArgSpec::None),
            c("hz", ArgSpec::Num),
        ],
        kind: FamilyKind::Process(ProcessEventKind::Profile),
        context: &[],
        doc: "as timer.profile, N times a second (utap's; bpftrace's profile:hz:N)",
    },
    process_family!(
        ["begin"],
        Begin,
        &[],
        "a process starts (or is already running)"
    ),
    process_family!(
        ["end"],
        End,
        END_VARS,
        "a process exits ($code: its exit status)"
    ),
    process_family!(
        ["create"],
        Create,
        CREATE_VARS,
        "utap's: a thread creates a process or thread ($new_pid, $new_tid), in the creator's context (SystemTap's kprocess.create)"
    ),
    process_family!(["thread", "begin"], ThreadBegin, &[], "a thread starts"),
    process_family!(["thread", "end"], ThreadEnd, &[], "a thread exits"),
    process_family!(
        ["syscall"],
        Syscall,
        SYSCALL_VARS,
        "a system call is entered"
    ),
    process_family!(
        ["syscall", "return"],
        SyscallReturn,
        SYSCALL_RETURN_VARS,
        "a system call returns"
    ),
    process_family!(
        ["signal"],
        Signal,
        SIGNAL_VARS,
        "a signal is about to be delivered"
    ),
    process_family!(
        ["quiesce"],
        Quiesce,
        &[],
        "a thread reached a requested stop"
    ),
    function_family!(
        [FUNCTION, CALL],
        Function,
        false,
        false,
        FUNCTION_VARS,
        "a function is entered (breakpoint at its first instruction; wildcards)"
    ),
    function_family!(
        [FUNCTION, RETURN],
        Function,
        false,
        true,
        FUNCTION_RETURN_VARS,
        "a function returns ($return)"
    ),
    function_family!(
        [PLT],
        Plt,
        false,
        false,
        FUNCTION_VARS,
        "a call through the PLT stub of NAME (every stub without NAME; $$name)"
    ),
    function_family!(
        [PLT, RETURN],
        Plt,
        false,
        true,
        FUNCTION_RETURN_VARS,
        "a call through the PLT stub of NAME returns"
    ),
    function_family!(
        [LIBRARY, PLT],
        Plt,
        true,
        false,
        FUNCTION_VARS,
        "a call through a PLT stub of library LIB"
    ),
    function_family!(
        [LIBRARY, PLT, RETURN],
        Plt,
        true,
        true,
        FUNCTION_RETURN_VARS,
        "a call through a PLT stub of library LIB returns"
    ),
    function_family!(
        [LIBRARY, FUNCTION, CALL],
        Function,
        true,
        false,
        FUNCTION_VARS,
        "a function of library LIB (path, file name or soname) is entered"
    ),
    function_family!(
        [LIBRARY, FUNCTION, RETURN],
        Function,
        true,
        true,
        FUNCTION_RETURN_VARS,
        "a function of library LIB returns"
    ),
    function_family!(
        [
            c("statement", ArgSpec::StrOrNum),
            c("absolute", ArgSpec::None)
        ],
        Statement,
        false,
        false,
        FUNCTION_VARS,
        "the instruction at a run-time address"
    ),
    function_family!(
        [c("statement", ArgSpec::Str)],
        Statement,
        false,
        false,
        FUNCTION_VARS,
        "the instruction at NAME+OFFSET, or at source lines F@FILE:N (:*, :N-M, :N,M, +N)"
    ),
    function_family!(
        [c("mark", ArgSpec::Str)],
        Mark,
        false,
        false,
        MARK_VARS,
        "a USDT marker (<sys/sdt.h>) is reached ($arg1..$argN, $$name, $$provider, $$parms)"
    ),
    function_family!(
        [c("provider", ArgSpec::Str), c("mark", ArgSpec::Str)],
        ProviderMark,
        false,
        false,
        MARK_VARS,
        "a USDT marker of provider P is reached"
    ),
    function_family!(
        [LIBRARY, c("mark", ArgSpec::Str)],
        Mark,
        true,
        false,
        MARK_VARS,
        "a USDT marker of library LIB (path, file name or soname) is reached, also after dlopen"
    ),
    function_family!(
        [
            LIBRARY,
            c("provider", ArgSpec::Str),
            c("mark", ArgSpec::Str)
        ],
        ProviderMark,
        true,
        false,
        MARK_VARS,
        "a USDT marker of provider P of library LIB is reached"
    ),
];

impl Family {
    /// The context variable `name` (without `$`) of this family.
    pub fn context_var(&self, name: &str) -> Option<&'static ContextVarDef> {
        self.context.iter().find(|v| v.name == name)
    }

    /// Builds the points of the arguments of the matched components (one
    /// entry per pattern component, `None` for an optional one left out):
    /// one, except for statements of several source lines.
    pub fn build(&self, args: &[Option<Option<PointArg>>]) -> Result<Vec<Built>, BuildError> {
        if let FamilyKind::Process(ProcessEventKind::Function(ff)) = self.kind {
            return super::functions::build(ff, args);
        }
        self.build_one(args).map(|kind| vec![Built::new(kind)])
    }

    fn build_one(&self, args: &[Option<Option<PointArg>>]) -> Result<PointKind, BuildError> {
        let num = |i: usize| match args.get(i) {
            Some(Some(Some(PointArg::Num(n)))) => Some(*n),
            _ => None,
        };
        let positive = |i: usize, what: &str| -> Result<u64, BuildError> {
            match num(i) {
                Some(n) if n > 0 => Ok(n as u64),
                _ => Err(BuildError {
                    message: format!("{what} must be positive"),
                    label: "a number greater than 0".into(),
                    component: i,
                }),
            }
        };
        Ok(match self.kind {
            FamilyKind::Begin => PointKind::Begin(num(0).unwrap_or(0)),
            FamilyKind::End => PointKind::End(num(0).unwrap_or(0)),
            FamilyKind::Error => PointKind::Error(num(0).unwrap_or(0)),
            FamilyKind::Never => PointKind::Never,
            FamilyKind::Prometheus => PointKind::Prometheus,
            FamilyKind::Timer { unit_ns } => {
                let n = positive(1, "timer period")?;
                let randomize = match args.get(2) {
                    Some(Some(_)) => num(2).unwrap_or(0).max(0) as u64,
                    _ => 0,
                };
                PointKind::Timer {
                    period_ns: n.saturating_mul(unit_ns),
                    randomize_ns: randomize.saturating_mul(unit_ns),
                }
            }
            FamilyKind::TimerHz => {
                let n = positive(1, "timer frequency")?;
                PointKind::Timer {
                    period_ns: (1_000_000_000 / n).max(1),
                    randomize_ns: 0,
                }
            }
            FamilyKind::Process(ProcessEventKind::Function(_)) => {
                unreachable!("function families build in build()")
            }
            FamilyKind::Process(ProcessEventKind::Profile) => PointKind::Process {
                target: ProcessTarget::Any,
                event: ProcessEvent::Profile {
                    // `.hz(N)`; `.tick` (or nothing) is one jiffy.
                    period_ns: match num(2) {
                        Some(_) => (1_000_000_000 / positive(2, "sampling frequency")?).max(1),
                        None => JIFFY_NS,
                    },
                },
            },
            FamilyKind::Process(kind) => PointKind::Process {
                target: process_target(args)?,
                event: kind.event(),
            },
        })
    }

    /// Whether a built point belongs to this family.
    pub fn has_kind(&self, kind: &PointKind) -> bool {
        match (self.kind, kind) {
            (FamilyKind::Begin, PointKind::Begin(_))
            | (FamilyKind::End, PointKind::End(_))
            | (FamilyKind::Error, PointKind::Error(_))
            | (FamilyKind::Never, PointKind::Never)
            | (FamilyKind::Prometheus, PointKind::Prometheus)
            | (FamilyKind::Timer { .. } | FamilyKind::TimerHz, PointKind::Timer { .. }) => true,
            (
                FamilyKind::Process(ProcessEventKind::Function(ff)),
                PointKind::Process {
                    event: ProcessEvent::Function(fp),
                    ..
                },
            ) => {
                let mark = match &fp.site {
                    utap_runtime::session::FunctionSite::Mark { provider, .. } => {
                        Some(provider.is_some())
                    }
                    _ => None,
                };
                let family_mark = match ff.site {
                    SiteKind::Mark { provider } => Some(provider),
                    _ => None,
                };
                ff.returning == fp.returning && mark == family_mark
            }
            (FamilyKind::Process(k), PointKind::Process { event, .. }) => {
                std::mem::discriminant(&k.event()) == std::mem::discriminant(event)
            }
            _ => false,
        }
    }

    /// The pattern as `-l` shows a family, e.g. `process("PATH").syscall`.
    pub fn pattern_text(&self, qualifier: &str) -> String {
        let mut out = String::new();
        for (i, comp) in self.comps.iter().enumerate() {
            if i > 0 {
                out.push('.');
            }
            out.push_str(comp.name);
            match comp.arg {
                ArgSpec::None => {}
                ArgSpec::OptNum | ArgSpec::Num => out.push_str("(N)"),
                ArgSpec::OptStrOrNum => out.push_str(qualifier),
                ArgSpec::Str | ArgSpec::StrOrNum => out.push_str("(\"NAME\")"),
                ArgSpec::OptStr => out.push_str("[(\"NAME\")]"),
            }
        }
        out
    }
}

impl ProcessEventKind {
    fn event(self) -> ProcessEvent {
        match self {
            ProcessEventKind::Begin => ProcessEvent::Begin,
            ProcessEventKind::Create => ProcessEvent::Create,
            ProcessEventKind::End => ProcessEvent::End,
            ProcessEventKind::ThreadBegin => ProcessEvent::ThreadBegin,
            ProcessEventKind::ThreadEnd => ProcessEvent::ThreadEnd,
            ProcessEventKind::Syscall => ProcessEvent::Syscall { syscalls: None },
            ProcessEventKind::SyscallReturn => ProcessEvent::SyscallReturn { syscalls: None },
            ProcessEventKind::Signal => ProcessEvent::Signal,
            ProcessEventKind::Quiesce => ProcessEvent::Quiesce,
            ProcessEventKind::Profile => ProcessEvent::Profile { period_ns: 0 },
            ProcessEventKind::Function(f) => {
                ProcessEvent::Function(utap_runtime::session::FunctionPoint {
                    library: f.library.then(String::new),
                    site: utap_runtime::session::FunctionSite::Absolute(0),
                    returning: f.returning,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_hz_becomes_a_period() {
        let hz = FAMILIES
            .iter()
            .find(|f| f.kind == FamilyKind::TimerHz)
            .unwrap();
        let kind = hz
            .build(&[Some(None), Some(Some(PointArg::Num(100)))])
            .unwrap()
            .remove(0)
            .kind;
        assert_eq!(
            kind,
            PointKind::Timer {
                period_ns: 10_000_000,
                randomize_ns: 0
            }
        );
    }

    #[test]
    fn process_pid_must_exceed_one() {
        let f = FAMILIES
            .iter()
            .find(|f| f.kind == FamilyKind::Process(ProcessEventKind::Begin))
            .unwrap();
        let err = f
            .build(&[Some(Some(PointArg::Num(1))), Some(None)])
            .unwrap_err();
        assert_eq!(err.message, "process pid must be greater than 1");
    }

    #[test]
    fn writable_context_variables_are_entry_arguments_return_and_signal() {
        let writable = |f: &Family| -> Vec<(&str, bool)> {
            f.context
                .iter()
                .filter(|v| v.guru_writable)
                .map(|v| (v.name, v.readable))
                .collect()
        };
        let args = ["arg1", "arg2", "arg3", "arg4", "arg5", "arg6"].map(|a| (a, true));
        let mut rest = Vec::new();
        for f in FAMILIES {
            match f.kind {
                // Function entries: the argument registers; returns and
                // USDT markers (arguments may live in memory): nothing.
                FamilyKind::Process(ProcessEventKind::Function(ff)) => {
                    let marker = matches!(ff.site, SiteKind::Mark { .. });
                    let want = if ff.returning || marker {
                        &[][..]
                    } else {
                        &args[..]
                    };
                    assert_eq!(writable(f), want, "{}", f.doc);
                }
                _ => rest.extend(writable(f)),
            }
        }
        let others = [("return", false), ("return", true), ("signal", true)];
        assert_eq!(rest, [&args[..], &others[..]].concat());
    }
}
