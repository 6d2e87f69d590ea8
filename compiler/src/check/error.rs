//! The checker's problems, before they become shared diagnostics.
//!
//! Every rule reports a [`SemError`]: SystemTap's message (without the
//! "semantic error: " prefix, which the reporter adds), the span it is
//! about, extra labelled spans (e.g. where a type was first inferred) and
//! an optional help line. [`SemError::into_diagnostic`] is the one place
//! that converts them.

use crate::ast::Span;
use crate::diag::Diagnostic;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemError {
    pub message: String,
    pub span: Span,
    /// The label under the main span.
    pub label: String,
    pub others: Vec<(Span, String)>,
    pub notes: Vec<String>,
    pub help: Option<String>,
}

impl SemError {
    pub fn new(span: Span, message: impl Into<String>) -> SemError {
        SemError {
            message: message.into(),
            span,
            label: String::new(),
            others: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    pub fn label(mut self, label: impl Into<String>) -> SemError {
        self.label = label.into();
        self
    }

    pub fn also(mut self, span: Span, label: impl Into<String>) -> SemError {
        self.others.push((span, label.into()));
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> SemError {
        self.notes.push(note.into());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> SemError {
        self.help = Some(help.into());
        self
    }

    /// An error diagnostic, worded "semantic error: MESSAGE".
    pub fn into_diagnostic(self) -> Diagnostic {
        self.build(Diagnostic::semantic_error(self.message.clone()))
    }

    /// A warning diagnostic.
    pub fn into_warning(self) -> Diagnostic {
        self.build(Diagnostic::warning(self.message.clone()))
    }

    fn build(&self, mut d: Diagnostic) -> Diagnostic {
        d = d.with_label(self.span, self.label.clone());
        for (span, label) in &self.others {
            d = d.with_label(*span, label.clone());
        }
        for note in &self.notes {
            d = d.with_note(note.clone());
        }
        if let Some(help) = &self.help {
            d = d.with_help(help.clone());
        }
        d
    }
}
