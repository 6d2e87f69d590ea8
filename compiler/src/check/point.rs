//! What every probe-point builder shares, below the catalogue that
//! dispatches to them (`catalogue` -> `functions` -> `dwarf`, `marks` ->
//! here): a written point's arguments, why a build failed, the points
//! built, the process a point names, and which file holds a function
//! point's functions.

use utap_runtime::session::FunctionPoint;

use crate::program::{PointKind, ProcessEvent, ProcessTarget};

/// The function-probe families (`process(..).function(..)` and friends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionFamily {
    pub site: SiteKind,
    /// `.library("LIB")` follows `process(..)`.
    pub library: bool,
    pub returning: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteKind {
    Function,
    Plt,
    /// `.statement("NAME+OFF")` or `.statement(ADDR).absolute`.
    Statement,
    /// `.mark("NAME")`, or with `provider`, `.provider("P").mark("NAME")`:
    /// USDT markers.
    Mark {
        provider: bool,
    },
}

/// An argument as written in a probe point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PointArg {
    Num(i64),
    Str(String),
}

/// Why a family could not be built from matching components.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError {
    pub message: String,
    pub label: String,
    /// Index of the offending component.
    pub component: usize,
}

/// One point a family builds from a written point.
#[derive(Clone, Debug, PartialEq)]
pub struct Built {
    pub kind: PointKind,
    /// The arguments as resolved, when they differ from the written ones
    /// (`statement("acc@/src/vw.c:10")` for `statement("acc@vw.c:*")`):
    /// the point's text, `pp()`, shows them.
    pub args: Option<Vec<Option<Option<PointArg>>>>,
    /// `pp()` when it is not the text of `args`: SystemTap's derived probe
    /// names the module holding the site as its process (a library's
    /// path, not `.library(..)`), and a PLT entry by its address.
    pub pp: Option<String>,
}

impl Built {
    pub fn new(kind: PointKind) -> Built {
        Built {
            kind,
            args: None,
            pp: None,
        }
    }
}

/// What the `process` component names: `process("NAME")` a program
/// (through `$PATH`), `process(PID)` a process (not init), `process` any.
pub fn process_target(args: &[Option<Option<PointArg>>]) -> Result<ProcessTarget, BuildError> {
    Ok(match args.first() {
        Some(Some(Some(PointArg::Str(path)))) => ProcessTarget::Path(find_executable(path)),
        Some(Some(Some(PointArg::Num(pid)))) => {
            if *pid < 2 {
                return Err(BuildError {
                    message: "process pid must be greater than 1".into(),
                    label: "pid 1 (init) cannot be traced".into(),
                    component: 0,
                });
            }
            ProcessTarget::Pid(*pid)
        }
        _ => ProcessTarget::Any,
    })
}

/// SystemTap resolves a bare program name (`process("cat")`) through
/// `$PATH`; a name that is not found is kept as written.
pub fn find_executable(name: &str) -> String {
    if name.contains('/') || name.is_empty() {
        return name.to_string();
    }
    let path = std::env::var("PATH").unwrap_or_default();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = std::path::Path::new(dir).join(name);
        if candidate.is_file() {
            return candidate.to_string_lossy().into_owned();
        }
    }
    name.to_string()
}

/// Wildcards of probe-point components (`*`, `?`): the runtime's matcher,
/// so names match the same at check time and in each process.
pub use utap_runtime::glob::glob as glob_match;

/// A shared library rather than a program (by name: `lib*.so*`, `*.so`).
pub fn is_library(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so") || name.contains(".so.")
}

/// The process filter and the function point of a function probe.
pub fn function_point(kind: &PointKind) -> Option<(&ProcessTarget, &FunctionPoint)> {
    match kind {
        PointKind::Process {
            target,
            event: ProcessEvent::Function(fp),
        } => Some((target, fp)),
        _ => None,
    }
}

/// A function point and the file known at elaboration that holds its
/// functions (a library given by path, or the program); `None` for other
/// points and for `process.function` without a path.
pub fn function_file(kind: &PointKind) -> Option<(&FunctionPoint, String)> {
    let (target, fp) = function_point(kind)?;
    let file = match (&fp.library, target) {
        (Some(lib), _) if lib.starts_with('/') => lib.clone(),
        (None, ProcessTarget::Path(p)) => p.clone(),
        _ => return None,
    };
    Some((fp, file))
}
