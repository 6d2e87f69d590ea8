//! utap(1): clap renders the title, NAME, SYNOPSIS and OPTIONS from the
//! one command-line definition; the sections a man page reader looks for
//! and clap cannot know (what utap is, examples, exit status, environment,
//! files, related pages) are written here in roff. tests/docs.rs renders
//! the page with man(1), checks each section, and checks that every
//! `UTAP_*` variable the code reads is described under ENVIRONMENT.

use clap::CommandFactory;

use crate::cli::Options;

const DESCRIPTION: &str = r#".SH DESCRIPTION
utap runs a SystemTap script (a \fB.stp\fR file, or \fB\-e\fR text) against
Linux processes: a command it starts (\fB\-c\fR) or a running process
(\fB\-x\fR), with every thread, fork and exec of it. Probes fire on system
calls, signals, process and thread events, timers, function entries and
returns in programs and libraries, USDT markers and sampled stacks; their
handlers, compiled to native code, count, time, print, and under \fB\-g\fR
change what the program experiences (skipped calls, forged results, delays,
signals).
.PP
utap needs no kernel module, no BPF and no root: it traces with ptrace, as
strace does, so it can trace the processes the user could debug. A second
tool on an already traced process goes through \fButap \-\-daemon\fR.
.PP
When a session ends (the command exits, \fB\-T\fR, \fBexit()\fR, an error,
SIGINT, SIGTERM, SIGHUP or SIGQUIT) the end probes run, the output is
written and utap returns at once. A \fB\-x\fR process, or a \fB\-c\fR
command without a seccomp filter, is detached and runs on untraced. A
\fB\-c\fR command under the filter (a script naming its system calls) runs
on served by utap's tracing process after \fB\-T\fR, \fBexit()\fR or an
error, and is killed by a signal to utap, as under strace \-\-seccomp\-bpf.
"#;

const EXAMPLES: &str = r#".SH EXAMPLES
Which system calls \fBls\fR makes, how often and for how long:
.PP
.nf
.RS
utap /usr/share/doc/utap/examples/syscalltop.stp \-c 'ls /usr'
.RE
.fi
.PP
Every file a running process opens, with the result:
.PP
.nf
.RS
utap /usr/share/doc/utap/examples/opensnoop.stp \-x $(pgrep \-n myserver)
.RE
.fi
.PP
Fail every third write with ENOSPC (guru mode):
.PP
.nf
.RS
utap \-g /usr/share/doc/utap/examples/faultinject.stp \-c 'dd if=/dev/zero of=F bs=1 count=6'
.RE
.fi
.PP
A one-liner, its result as JSON Lines:
.PP
.nf
.RS
utap \-f json \-e 'global n; probe syscall.openat { n[execname()]++ }' \-c 'make'
.RE
.fi
.PP
Probe points matching a pattern, with their variables; a function's description:
.PP
.nf
.RS
utap \-L 'syscall.open*'
utap \-l 'process("/bin/ls").function("*")'
utap \-\-help\-function execname
.RE
.fi
.PP
Two tools on one process, through the per-user daemon:
.PP
.nf
.RS
utap \-\-daemon &
utap latency.stp \-x PID
utap \-g inject.stp \-x PID
utap \-\-sessions
.RE
.fi
.PP
Golden tests of one's own tapsets: each NAME.stp of a directory run and
compared with its NAME.out, NAME.err and NAME.exit; \-\-bless writes them
(see \fIdocs/guide/testing.md\fR):
.PP
.nf
.RS
utap \-\-test \-\-bless tests
utap \-\-test tests
.RE
.fi
"#;

const EXIT_STATUS: &str = r#".SH EXIT STATUS
.TP
.B 0
The session ran and ended normally: the command exited, \fBexit()\fR,
\fB\-T\fR, or Ctrl\-C (as SystemTap).
.TP
.B 1
A usage, parse, semantic, compile, runtime or output error (an option utap
does not have, a script that does not compile, a handler error that ends
the session, an output that cannot be written).
.TP
.B 1 \fR(\fB\-\-test\fR)
A case failed, or a directory holds no case.
.TP
.I status of the command
With \fB\-\-exit\-status\fR and \fB\-c\fR, when the command's exit ends the
session: its exit code, or 128+N when signal N killed it, as a shell
reports it. A utap error still exits 1.
"#;

const ENVIRONMENT: &str = r#".SH ENVIRONMENT
.TP
.B NO_COLOR
When set and not empty, diagnostics on a terminal are not coloured.
.TP
.B XDG_RUNTIME_DIR, TMPDIR
Where the daemon's socket lives: \fI$XDG_RUNTIME_DIR/utap/utapd.sock\fR,
else \fI$TMPDIR/utap\-UID/utapd.sock\fR, else \fI/tmp/utap\-UID/utapd.sock\fR.
.PP
The \fBUTAP_*\fR variables tune the runtime; the defaults are the measured
best, so they serve measurements, comparisons and work-arounds.
.TP
.B UTAP_SHARDS=N
Tracer threads serving a session (default: one per CPU, at most 64;
sessions with function, marker or \fB.return\fR breakpoints,
\fBtimer.profile\fR, \fBprocess.quiesce\fR or \fB\-g\fR use one).
.TP
.B UTAP_SHARD_SETTLE=N
A thread is handed to a less busy tracer thread at its Nth stop (default 64).
.TP
.B UTAP_COLOCATE=off|pin|idle|poll
How a tracer thread follows its tracee's CPU: not at all, pinned, pinned in
SCHED_IDLE while the machine is otherwise idle (the default), or polling
waitpid before sleeping. A profiling session uses \fBoff\fR unless set.
.TP
.B UTAP_NOTIFY=0
No seccomp user notification route: syscall entry probes of a \fB\-c\fR
command are all served by ptrace stops.
.TP
.B UTAP_THREAD_LISTENERS=0
One notification listener and server thread for the whole command, from its
first call, instead of one per busy thread.
.TP
.B UTAP_PLACE_SERVERS=0
Notification server threads are left to the scheduler instead of each on a
CPU of its own with the thread it serves.
.TP
.B UTAP_INPROC=0
Every probe handler runs in the tracer; none inside the traced program (the
data plane).
.TP
.B UTAP_INPROC_OPT
When set, handlers that run inside the program are compiled with
Cranelift's optimizer (slower start-up, no measured gain per call).
.TP
.B UTAP_SUD=1
Under
.BR \-x ,
syscall probes whose handlers run in the program are served there through
Syscall User Dispatch, armed per thread (opt-in; otherwise an attached
program's syscalls stop in the tracer as before).
.TP
.B UTAP_RETURN_STUBS=0
Return probes go through the shared trampoline instead of per-caller stubs.
.TP
.B UTAP_HUGEPAGES=0
utap's heap is not asked to use transparent huge pages.
.TP
.B UTAP_DETACH_BUDGET_MS=N
How long utap waits at the end for the traced threads to be let go before
it returns to the shell (default 50; detaching goes on behind it).
.TP
.B UTAP_END_TRACE
When set, timestamps of the steps that end a session are printed on stderr.
.TP
.B UTAP_CHECK_PRESETS=1
Handlers that would share another's translation are translated anyway and
compared (a self-check of the compiler; fails on a difference).
"#;

const FILES: &str = r#".SH FILES
.TP
.I /usr/share/utap/stdlib/
The tapsets (\fBsyscall.*\fR, \fBsignal.*\fR, the functions) as installed by
the Debian package, for reading: utap has the same files compiled in and
does not read them. \fB\-I DIR\fR adds a directory of the user's tapsets.
.TP
.I /usr/share/doc/utap/examples/
The example scripts.
.TP
.I $XDG_RUNTIME_DIR/utap/utapd.sock
The socket of \fButap \-\-daemon\fR (mode 0600, in a 0700 directory of the
user; see ENVIRONMENT for the fallbacks).
.TP
.I /usr/lib/debug/
Separate debug files (by build-id or \fB.gnu_debuglink\fR) for function
probes and DWARF target variables.
.TP
.I /proc/PID/mem, /proc/PID/maps, /proc/PID/task/
How utap reads and writes a traced process's memory and finds its modules
and threads.
.TP
.I /proc/sys/kernel/yama/ptrace_scope
Whether \fB\-x\fR may attach to a process that is not utap's child.
"#;

const SEE_ALSO: &str = r#".SH SEE ALSO
.BR stap (1),
.BR stapprobes (3stap),
.BR error::pass5 (7stap),
.BR error::fault (7stap),
.BR strace (1),
.BR ltrace (1),
.BR bpftrace (8),
.BR ptrace (2),
.BR seccomp (2).
.PP
The user guide and reference: \fI/usr/share/doc/utap/\fR, or \fIdocs/\fR in
the source tree.
"#;

/// The whole page, in roff.
pub fn render() -> std::io::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(Options::command());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    out.extend_from_slice(DESCRIPTION.as_bytes());
    man.render_options_section(&mut out)?;
    for section in [EXAMPLES, EXIT_STATUS, ENVIRONMENT, FILES, SEE_ALSO] {
        out.extend_from_slice(section.as_bytes());
    }
    man.render_version_section(&mut out)?;
    Ok(out)
}
