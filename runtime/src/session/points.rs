//! Which compiled probes a process event fires, decided once at session
//! start so that the event path only indexes tables.

use crate::utrace::Events;

/// A process probe point of the script, in runtime terms (the driver
/// translates the checker's points into these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessPoint {
    /// Index of the probe in the script image.
    pub probe: usize,
    /// Index of the point within the probe (its condition, its `pp()`).
    pub point: usize,
    pub filter: ProcessFilter,
    pub event: ProcessEvent,
}

/// `process`, `process("PATH")` or `process(PID)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessFilter {
    Any,
    /// An absolute path, compared with the process's executable.
    Path(String),
    Pid(i32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessEvent {
    Begin,
    /// A traced thread created a process or thread (its clone, fork or
    /// vfork event), in the creator's context; `args[0]`/`args[1]` are
    /// the new task's pid and tid.
    Create,
    End,
    ThreadBegin,
    ThreadEnd,
    /// `None`: every syscall.
    Syscall(Option<Vec<u32>>),
    SyscallReturn(Option<Vec<u32>>),
    Signal,
    Quiesce,
    /// `timer.profile`: every `period_ns`, each running thread is sampled
    /// (interrupted into a stop) and the probe fires in its context.
    Profile {
        period_ns: u64,
    },
    /// `.function`, `.plt`, `.statement` (+ `.return`): a breakpoint.
    Function(FunctionPoint),
}

/// A function probe point, resolved against each traced process's modules
/// when it starts, execs or loads a library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionPoint {
    /// `.library("LIB")` (a path, a file name or a soname; wildcards), or
    /// the path of a shared library given as `process("LIB")`; `None`:
    /// the process's executable.
    pub library: Option<String>,
    pub site: FunctionSite,
    /// `.return`: fires when the function returns.
    pub returning: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FunctionSite {
    /// `.function("NAME")` (wildcards) or `.statement("NAME+OFF")`.
    Function { name: String, offset: u64 },
    /// `.plt("NAME")`: the PLT stub (wildcards).
    Plt(String),
    /// `.statement(ADDR).absolute`: a run-time address.
    Absolute(u64),
    /// `.mark("NAME")` or `.provider("P").mark("NAME")`: the USDT
    /// markers of that name (wildcards) in the module.
    Mark {
        provider: Option<String>,
        name: String,
    },
}

/// One probe to fire, with the process it is limited to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hook {
    pub probe: usize,
    pub point: usize,
    pub filter: ProcessFilter,
}

/// Hooks per syscall number, each list in probe (declaration) order.
#[derive(Default)]
pub(crate) struct SyscallHooks {
    by_nr: Vec<Vec<Hook>>,
    /// Hooks on every syscall, merged into each `by_nr` list too; kept for
    /// numbers beyond the table.
    all: Vec<Hook>,
    any: bool,
}

/// Syscall numbers the table covers directly (x86_64 has < 500).
const TABLE: usize = 512;

impl SyscallHooks {
    fn add(&mut self, hook: Hook, set: &Option<Vec<u32>>) {
        if self.by_nr.is_empty() {
            self.by_nr = vec![Vec::new(); TABLE];
        }
        self.any = true;
        match set {
            None => {
                self.all.push(hook.clone());
                self.by_nr.iter_mut().for_each(|l| l.push(hook.clone()));
            }
            Some(nrs) => {
                for &nr in nrs {
                    if let Some(l) = self.by_nr.get_mut(nr as usize) {
                        l.push(hook.clone());
                    }
                }
            }
        }
    }

    /// The hooks for syscall `nr`.
    pub fn get(&self, nr: i64) -> &[Hook] {
        match usize::try_from(nr).ok().and_then(|i| self.by_nr.get(i)) {
            Some(l) => l,
            None => &self.all,
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.any
    }
}

/// Which syscalls the script's probes need to stop on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallNeed<'a> {
    /// No syscall probe: no filter at all (a filter always traps execve,
    /// which would fail with ENOSYS once the command runs untraced).
    Nothing,
    Some(&'a [u32]),
    All,
}

/// Every process hook of a script, by event.
#[derive(Default)]
pub(crate) struct Dispatch {
    pub begin: Vec<Hook>,
    /// The `process("PATH").begin` hooks, which also fire when a process
    /// execs PATH.
    pub exec_begin: Vec<Hook>,
    pub end: Vec<Hook>,
    pub create: Vec<Hook>,
    pub thread_begin: Vec<Hook>,
    pub thread_end: Vec<Hook>,
    pub signal: Vec<Hook>,
    pub quiesce: Vec<Hook>,
    /// `timer.profile` hooks, grouped by sampling period.
    pub profile: Vec<(u64, Vec<Hook>)>,
    pub entry: SyscallHooks,
    pub exit: SyscallHooks,
    /// The union of the syscall sets, `None` when some probe takes all.
    syscalls: Option<Vec<u32>>,
    /// Some probe is limited to `process("PATH")`: executables must be known.
    pub path_filters: bool,
    /// Function probes, in probe order.
    pub functions: Vec<(Hook, FunctionPoint)>,
}

impl Dispatch {
    pub fn new(points: &[ProcessPoint]) -> Dispatch {
        let mut d = Dispatch {
            syscalls: Some(Vec::new()),
            ..Dispatch::default()
        };
        let mut sorted: Vec<&ProcessPoint> = points.iter().collect();
        sorted.sort_by_key(|p| (p.probe, p.point));
        for p in sorted {
            let hook = Hook {
                probe: p.probe,
                point: p.point,
                filter: p.filter.clone(),
            };
            let by_path = matches!(p.filter, ProcessFilter::Path(_));
            d.path_filters |= by_path;
            match &p.event {
                ProcessEvent::Begin if by_path => {
                    d.exec_begin.push(hook.clone());
                    d.begin.push(hook);
                }
                ProcessEvent::Begin => d.begin.push(hook),
                ProcessEvent::End => d.end.push(hook),
                ProcessEvent::Create => d.create.push(hook),
                ProcessEvent::ThreadBegin => d.thread_begin.push(hook),
                ProcessEvent::ThreadEnd => d.thread_end.push(hook),
                ProcessEvent::Signal => d.signal.push(hook),
                ProcessEvent::Quiesce => d.quiesce.push(hook),
                ProcessEvent::Profile { period_ns } => {
                    match d.profile.iter_mut().find(|(p, _)| p == period_ns) {
                        Some((_, hooks)) => hooks.push(hook),
                        None => d.profile.push((*period_ns, vec![hook])),
                    }
                }
                ProcessEvent::Function(f) => d.functions.push((hook, f.clone())),
                ProcessEvent::Syscall(set) => {
                    d.note_syscalls(set);
                    d.entry.add(hook, set);
                }
                ProcessEvent::SyscallReturn(set) => {
                    d.note_syscalls(set);
                    d.exit.add(hook, set);
                }
            }
        }
        if let Some(s) = &mut d.syscalls {
            s.sort_unstable();
            s.dedup();
        }
        d
    }

    fn note_syscalls(&mut self, set: &Option<Vec<u32>>) {
        match (set, &mut self.syscalls) {
            (Some(nrs), Some(all)) => all.extend(nrs),
            _ => self.syscalls = None,
        }
    }

    /// The syscalls any probe can fire on: what a seccomp filter must stop
    /// on.
    pub fn syscall_need(&self) -> SyscallNeed<'_> {
        match &self.syscalls {
            _ if self.entry.is_empty() && self.exit.is_empty() => SyscallNeed::Nothing,
            Some(set) => SyscallNeed::Some(set),
            None => SyscallNeed::All,
        }
    }

    /// The utrace events the script's engine needs on every thread.
    pub fn events(&self) -> Events {
        // Lifecycle events are always wanted: they keep the process
        // facts (execname, thread counts for process.end) current.
        let mut e = Events::CLONE | Events::EXEC | Events::DEATH | Events::FOLLOW;
        if !self.entry.is_empty() {
            e |= Events::SYSCALL_ENTRY;
        }
        if !self.exit.is_empty() {
            // The entry stop records the arguments the return probe sees.
            e |= Events::SYSCALL_ENTRY | Events::SYSCALL_EXIT;
        }
        if !self.signal.is_empty() {
            e |= Events::SIGNAL;
        }
        if !self.quiesce.is_empty() || !self.profile.is_empty() {
            e |= Events::QUIESCE;
        }
        if !self.functions.is_empty() {
            e |= Events::BREAKPOINT;
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(probe: usize, event: ProcessEvent) -> ProcessPoint {
        ProcessPoint {
            probe,
            point: 0,
            filter: ProcessFilter::Any,
            event,
        }
    }

    #[test]
    fn syscall_hooks_are_indexed_by_number_in_probe_order() {
        let d = Dispatch::new(&[
            point(2, ProcessEvent::Syscall(Some(vec![1]))),
            point(0, ProcessEvent::Syscall(None)),
            point(1, ProcessEvent::Syscall(Some(vec![1, 0]))),
        ]);
        let probes = |nr| d.entry.get(nr).iter().map(|h| h.probe).collect::<Vec<_>>();
        assert_eq!(probes(1), vec![0, 1, 2]);
        assert_eq!(probes(0), vec![0, 1]);
        assert_eq!(probes(7), vec![0]);
        assert_eq!(probes(100_000), vec![0]);
        assert_eq!(d.syscall_need(), SyscallNeed::All);
    }

    #[test]
    fn the_syscall_set_is_the_union_of_entry_and_return_sets() {
        let d = Dispatch::new(&[
            point(0, ProcessEvent::Syscall(Some(vec![257]))),
            point(1, ProcessEvent::SyscallReturn(Some(vec![1, 257]))),
            point(2, ProcessEvent::Begin),
        ]);
        assert_eq!(d.syscall_need(), SyscallNeed::Some(&[1, 257]));
        assert!(d.events().contains(Events::SYSCALL_EXIT));
        assert!(!d.events().contains(Events::SIGNAL));
    }
}
