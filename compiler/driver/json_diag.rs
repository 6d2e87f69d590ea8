//! `--format json` before the session starts: diagnostics and one-line
//! failures as JSON records on stdout (the session's own records are
//! written by the runtime's transport; see `utap_runtime::json`).

use utap_compiler::diag::{Diagnostic, Severity};
use utap_compiler::source::SourceMap;
use utap_runtime::json;

/// Prints the schema line (first, before any pass runs).
pub fn header() {
    let mut out = Vec::new();
    json::header(&mut out);
    emit(&out);
}

/// Prints one record per diagnostic:
/// `{"type":"error"|"warning","message":"semantic error: ...","file":...,
/// "line":N,"column":N,"label":...,"notes":[...],"help":...}`.
pub fn print(diags: &[Diagnostic], map: &SourceMap) {
    let mut out = Vec::new();
    for d in diags {
        record(&mut out, d, map);
    }
    emit(&out);
}

/// Prints `{"type":"error","message":...}`.
pub fn print_message(message: &str) {
    let mut out = Vec::new();
    json::control(&mut out, format!("ERROR: {message}").as_bytes());
    emit(&out);
}

fn record(out: &mut Vec<u8>, d: &Diagnostic, map: &SourceMap) {
    let kind = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    out.extend_from_slice(format!("{{\"type\":\"{kind}\",\"message\":").as_bytes());
    json::string(out, d.to_string().as_bytes());
    if let Some((span, label)) = d.labels.first() {
        let (line, col) = map.line_col(*span);
        out.extend_from_slice(b",\"file\":");
        json::string(out, map.name(span.file).as_bytes());
        out.extend_from_slice(format!(",\"line\":{line},\"column\":{col},\"label\":").as_bytes());
        json::string(out, label.as_bytes());
    }
    out.extend_from_slice(b",\"notes\":[");
    for (i, n) in d.notes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::string(out, n.as_bytes());
    }
    out.push(b']');
    if let Some(h) = &d.help {
        out.extend_from_slice(b",\"help\":");
        json::string(out, h.as_bytes());
    }
    out.extend_from_slice(b"}\n");
}

fn emit(bytes: &[u8]) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(bytes);
}
