//! A warning when utap's machine-readable output (`-f json`, folded
//! stacks) goes to the same file, pipe or terminal as the traced
//! command's stdout: the command's lines would land between utap's and
//! break `jq` or a flame graph tool (issue 31 point 9).
//!
//! What is compared is the file behind fd 1 (device and inode, which a
//! pipe and a terminal have too) of utap and of each traced program as it
//! starts: the `-c` program at its exec (after the shell applied `>` of an
//! `exec prog > out`), a `-x` process at attach, and any program a traced
//! process execs later (`sh -c 'prog; other'`). Shells are not checked:
//! their redirections apply to the programs they start, which are (so
//! `sh -c './prog > out; true'` gets no warning, and a shell's own `echo`
//! goes unseen). `/dev/null` is no one's output. One warning per session,
//! on stderr.

use std::os::unix::fs::MetadataExt;

/// Programs whose stdout is where they send the programs they start.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

/// The check of one session.
#[derive(Debug)]
pub struct SharedStdout {
    /// What utap writes on its stdout, for the message (`-f json output`).
    what: String,
    /// Device and inode of utap's fd 1.
    ours: (u64, u64),
    told: bool,
}

impl SharedStdout {
    /// For a session whose `what` goes to utap's stdout; `None` when fd 1
    /// is closed or `/dev/null`.
    pub fn new(what: &str) -> Option<SharedStdout> {
        let ours = identity("/proc/self/fd/1")?;
        if identity("/dev/null") == Some(ours) {
            return None;
        }
        Some(SharedStdout {
            what: what.to_string(),
            ours,
            told: false,
        })
    }

    /// Process `pid` starts running a program (exec, attach, the `-c`
    /// command's start): warns once if its stdout is ours.
    pub fn check(&mut self, pid: i32) {
        if self.told || is_shell(pid) {
            return;
        }
        if identity(&format!("/proc/{pid}/fd/1")) == Some(self.ours) {
            self.told = true;
            eprintln!("{}", message(&self.what));
        }
    }
}

/// Whether `pid` runs a shell (by its executable's file name).
fn is_shell(pid: i32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| Some(SHELLS.contains(&p.file_name()?.to_str()?)))
        .unwrap_or(false)
}

/// Device and inode of the file a `/proc/.../fd/N` link leads to.
fn identity(link: &str) -> Option<(u64, u64)> {
    std::fs::metadata(link).ok().map(|m| (m.dev(), m.ino()))
}

/// The warning, naming the way out.
fn message(what: &str) -> String {
    format!(
        "utap: warning: {what} and the traced command's stdout are the same file: \
         their lines will mix; write utap's to a file with -o FILE, or redirect the \
         command's output (-c 'cmd > FILE')"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process (a test binary, not a shell) shares fd 1 with itself.
    #[test]
    fn a_process_is_compared_by_its_fd_1() {
        let me = std::process::id() as i32;
        assert!(!is_shell(me));
        assert_eq!(identity("/proc/self/fd/999999"), None);
        let Some(mut c) = SharedStdout::new("-f json output") else {
            return assert_eq!(identity("/proc/self/fd/1"), identity("/dev/null"));
        };
        c.check(me);
        assert!(c.told);
    }
}
