//! The one diagnostic reporter every pass uses.
//!
//! A pass builds [`Diagnostic`]s (headline, labelled spans, notes, a hint)
//! and the driver renders them with [`render`], which draws the source lines
//! with ariadne. The headline follows SystemTap's wording: `parse error:
//! expected ...` from the front end, `semantic error: ...` from the checker.
//! Rendering without colour gives stable plain text for golden tests.

use crate::ast::{FileId, Span};
use crate::source::SourceMap;
use ariadne::{CharSet, Color, Config, IndexType, Label, Report, ReportKind, Source};
use std::collections::HashMap;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One message about the user's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The headline's prefix: "parse error", "semantic error", "warning"...
    pub category: String,
    pub message: String,
    /// Spans with what to say at each; the first is the primary location.
    pub labels: Vec<(Span, String)>,
    pub notes: Vec<String>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(
        severity: Severity,
        category: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity,
            category: category.into(),
            message: message.into(),
            labels: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// `parse error: MESSAGE` (lexer, preprocessor, parser).
    pub fn parse_error(message: impl Into<String>) -> Self {
        Diagnostic::new(Severity::Error, "parse error", message)
    }

    /// `semantic error: MESSAGE` (resolution and type checking).
    pub fn semantic_error(message: impl Into<String>) -> Self {
        Diagnostic::new(Severity::Error, "semantic error", message)
    }

    /// `warning: MESSAGE`.
    pub fn warning(message: impl Into<String>) -> Self {
        Diagnostic::new(Severity::Warning, "warning", message)
    }

    pub fn with_label(mut self, span: Span, text: impl Into<String>) -> Self {
        self.labels.push((span, text.into()));
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The primary span, if the diagnostic points anywhere.
    pub fn span(&self) -> Option<Span> {
        self.labels.first().map(|(s, _)| *s)
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// The headline only (`parse error: expected ';'`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.category, self.message)
    }
}

/// ariadne's view of the session's files.
struct MapCache<'a> {
    map: &'a SourceMap,
    sources: HashMap<FileId, Source<&'a str>>,
}

impl<'a> ariadne::Cache<FileId> for MapCache<'a> {
    type Storage = &'a str;

    fn fetch(&mut self, id: &FileId) -> Result<&Source<&'a str>, impl fmt::Debug> {
        let text = self.map.text(*id);
        Ok::<_, String>(
            self.sources
                .entry(*id)
                .or_insert_with(|| Source::from(text)),
        )
    }

    fn display<'b>(&self, id: &'b FileId) -> Option<impl fmt::Display + 'b> {
        Some(self.map.name(*id).to_string())
    }
}

/// Renders a diagnostic: headline, `file:line:col`, the source lines with
/// the labelled spans, notes and help. `colour` only when writing to a terminal.
pub fn render(diag: &Diagnostic, map: &SourceMap, colour: bool) -> String {
    let Some(primary) = diag.span() else {
        return render_plain(diag);
    };
    let colour_of = |sev| match sev {
        Severity::Error => Color::Red,
        Severity::Warning => Color::Yellow,
    };
    let clamp = |s: Span| {
        let len = map.text(s.file).len();
        let start = (s.start as usize).min(len);
        start..(s.end as usize).clamp(start, len)
    };
    // Config first: labels take their colours when they are added.
    let config = Config::default()
        .with_color(colour)
        .with_index_type(IndexType::Byte)
        .with_char_set(if colour {
            CharSet::Unicode
        } else {
            CharSet::Ascii
        });
    let mut report = Report::build(
        ReportKind::Custom(&diag.category, colour_of(diag.severity)),
        (primary.file, clamp(primary)),
    )
    .with_config(config)
    .with_message(&diag.message);
    for (i, (span, text)) in diag.labels.iter().enumerate() {
        let mut label = Label::new((span.file, clamp(*span))).with_order(i as i32);
        if !text.is_empty() {
            label = label.with_message(text);
        }
        if colour {
            label = label.with_color(if i == 0 {
                colour_of(diag.severity)
            } else {
                Color::Blue
            });
        }
        report = report.with_label(label);
    }
    for note in &diag.notes {
        report = report.with_note(note);
    }
    if let Some(help) = &diag.help {
        report = report.with_help(help);
    }
    let mut cache = MapCache {
        map,
        sources: HashMap::new(),
    };
    let mut out = Vec::new();
    if report.finish().write(&mut cache, &mut out).is_err() {
        return render_plain(diag);
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    if colour { text } else { strip_ansi(&text) }
}

/// Removes colour escapes (ariadne colours a custom headline regardless of
/// its config).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A diagnostic that points nowhere: headline, notes and help as text.
fn render_plain(diag: &Diagnostic) -> String {
    let mut out = format!("{diag}\n");
    for note in &diag.notes {
        out.push_str(&format!("  = note: {note}\n"));
    }
    if let Some(help) = &diag.help {
        out.push_str(&format!("  = help: {help}\n"));
    }
    out
}

/// Renders several diagnostics, one after the other.
pub fn render_all(diags: &[Diagnostic], map: &SourceMap, colour: bool) -> String {
    diags.iter().map(|d| render(d, map, colour)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_plain_text_with_location() {
        let mut map = SourceMap::new();
        let f = map.add("t.stp", "probe begin {\n  x = \n}\n");
        let d = Diagnostic::parse_error("expected an expression")
            .with_label(Span::new(f, 21, 22), "found '}'")
            .with_help("finish the assignment");
        let text = render(&d, &map, false);
        assert!(
            text.starts_with("parse error: expected an expression\n"),
            "{text}"
        );
        assert!(text.contains("t.stp:3:1"), "{text}");
        assert!(text.contains("found '}'"), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
    }

    #[test]
    fn renders_without_span() {
        let map = SourceMap::new();
        let d = Diagnostic::semantic_error("no probes").with_note("add one");
        assert_eq!(
            render(&d, &map, false),
            "semantic error: no probes\n  = note: add one\n"
        );
    }
}
