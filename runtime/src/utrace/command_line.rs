//! What `-c CMD` runs, decided as SystemTap decides it (staprun's
//! `start_cmd`): CMD is split into words the way the shell would split
//! them, with `wordexp(3)` (`WRDE_NOCMD | WRDE_UNDEF`: quotes, variables,
//! `~` and globs, no command substitution), and the first word is run
//! directly with the rest as its arguments. Only a CMD with shell syntax
//! that words cannot express (`|`, `&`, `;`, `<`, `>`, `(`, `)`, `{`, `}`,
//! a newline, or a command substitution) runs as `/bin/sh -c CMD`.
//!
//! So `-c 'ls -l /tmp'` traces `ls` from its first instruction, and the
//! probes see ls's own syscalls and calls, not a shell's start-up before
//! it (SystemTap: "We really want to probe a new child process, not a
//! mishmash of shell-interpreted stuff"). The program is looked up in
//! PATH here, before the fork, so that the lookup's failed `execve`s are
//! not traced either.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How a `-c` command line is run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandLine {
    /// A program (its path, found in PATH when the word had no `/`) and
    /// its argv (argv[0] as written).
    Words { program: PathBuf, argv: Vec<String> },
    /// `/bin/sh -c CMD`.
    Shell(String),
}

// glibc's <wordexp.h>.
#[repr(C)]
struct WordExp {
    we_wordc: libc::size_t,
    we_wordv: *mut *mut libc::c_char,
    we_offs: libc::size_t,
}

const WRDE_NOCMD: libc::c_int = 1 << 2;
const WRDE_UNDEF: libc::c_int = 1 << 5;
const WRDE_BADCHAR: libc::c_int = 2;
const WRDE_BADVAL: libc::c_int = 3;
const WRDE_CMDSUB: libc::c_int = 4;
const WRDE_SYNTAX: libc::c_int = 5;

unsafe extern "C" {
    fn wordexp(words: *const libc::c_char, we: *mut WordExp, flags: libc::c_int) -> libc::c_int;
    fn wordfree(we: *mut WordExp);
}

impl CommandLine {
    /// Splits `cmd` (see the module docs). Errors read as SystemTap's
    /// where it has one, naming the command otherwise.
    pub fn parse(cmd: &str) -> Result<CommandLine, String> {
        let c =
            CString::new(cmd).map_err(|_| format!("-c command contains a NUL byte: {cmd:?}"))?;
        match split(&c) {
            Ok(words) => {
                let Some(first) = words.first() else {
                    return Err("empty -c COMMAND".into());
                };
                let program = find_program(first)?;
                Ok(CommandLine::Words {
                    program,
                    argv: words,
                })
            }
            Err(WRDE_BADCHAR | WRDE_CMDSUB) => Ok(CommandLine::Shell(cmd.to_string())),
            Err(WRDE_SYNTAX) => {
                Err("wordexp: syntax error (unmatched quotes?) in -c COMMAND".into())
            }
            Err(WRDE_BADVAL) => Err(format!(
                "wordexp: undefined shell variable in -c COMMAND: {cmd}"
            )),
            Err(rc) => Err(format!("wordexp: parsing error ({rc})")),
        }
    }
}

/// The words of `cmd`, or wordexp's error code. wordexp is not
/// thread-safe (it reads the environment and IFS): call it before tracing
/// starts, as the session does.
fn split(cmd: &CStr) -> Result<Vec<String>, libc::c_int> {
    let mut we = WordExp {
        we_wordc: 0,
        we_wordv: std::ptr::null_mut(),
        we_offs: 0,
    };
    // SAFETY: a valid C string and an out struct; wordfree only after
    // success (glibc frees on failure itself).
    let rc = unsafe { wordexp(cmd.as_ptr(), &mut we, WRDE_NOCMD | WRDE_UNDEF) };
    if rc != 0 {
        return Err(rc);
    }
    let words = (0..we.we_wordc)
        .map(|i| {
            // SAFETY: wordexp set we_wordc valid C strings.
            let w = unsafe { CStr::from_ptr(*we.we_wordv.add(i)) };
            w.to_string_lossy().into_owned()
        })
        .collect();
    // SAFETY: the struct wordexp filled.
    unsafe { wordfree(&mut we) };
    Ok(words)
}

/// execvp's lookup: a word with a `/` is a path; another is looked up in
/// PATH (the C library's default when PATH is unset). The errors are the
/// shell's.
fn find_program(word: &str) -> Result<PathBuf, String> {
    if word.contains('/') {
        let path = Path::new(word);
        return match std::fs::metadata(path) {
            Err(_) => Err(format!("cannot run '{word}': no such file or directory")),
            Ok(m) if m.is_dir() || !executable(path) => {
                Err(format!("cannot run '{word}': permission denied"))
            }
            Ok(_) => Ok(path.to_path_buf()),
        };
    }
    let dirs = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&dirs)
        .map(|d| d.join(word))
        .find(|p| p.is_file() && executable(p))
        .ok_or_else(|| format!("cannot run '{word}': command not found"))
}

/// access(X_OK), as exec decides.
fn executable(path: &Path) -> bool {
    let Ok(c) = CString::new(OsStr::as_bytes(path.as_os_str())) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmd: &str) -> Vec<String> {
        match CommandLine::parse(cmd).unwrap() {
            CommandLine::Words { argv, .. } => argv,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plain_commands_run_directly_with_their_words() {
        assert_eq!(words("true"), ["true"]);
        assert_eq!(words("echo 'a b'  \"c\"d"), ["echo", "a b", "cd"]);
        let CommandLine::Words { program, .. } = CommandLine::parse("sh -c 'exit 3'").unwrap()
        else {
            panic!()
        };
        assert!(
            program.ends_with("sh") && program.is_absolute(),
            "{program:?}"
        );
    }

    #[test]
    fn shell_syntax_runs_through_the_shell() {
        for cmd in [
            "true; true",
            "echo a | cat",
            "echo $(true)",
            "true > /dev/null",
            "(true)",
        ] {
            assert_eq!(
                CommandLine::parse(cmd),
                Ok(CommandLine::Shell(cmd.into())),
                "{cmd}"
            );
        }
    }

    #[test]
    fn bad_command_lines_are_errors() {
        assert_eq!(CommandLine::parse(""), Err("empty -c COMMAND".into()));
        assert!(
            CommandLine::parse("echo 'a")
                .unwrap_err()
                .contains("unmatched quotes")
        );
        assert_eq!(
            CommandLine::parse("nosuch-utap-command x"),
            Err("cannot run 'nosuch-utap-command': command not found".into())
        );
        assert!(
            CommandLine::parse("echo $UTAP_SURELY_UNSET_VAR")
                .unwrap_err()
                .contains("undefined")
        );
    }
}
