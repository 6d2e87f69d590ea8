//! Source files of one compilation session (the user script, `-e` text,
//! tapsets), addressed by [`FileId`], with byte-offset → line/column lookup
//! for diagnostics.

use crate::ast::{FileId, Span};

/// One source text and where its lines start.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    /// Byte offset of the start of every line (the first is 0).
    line_starts: Vec<usize>,
}

impl SourceFile {
    fn new(name: String, text: String) -> SourceFile {
        let mut line_starts = vec![0];
        // A byte loop: `match_indices` costs a searcher call per line, and
        // tapset texts have thousands of short lines.
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        SourceFile {
            name,
            text,
            line_starts,
        }
    }

    /// 1-based line and column (columns count characters, as editors do)
    /// of a byte offset; offsets past the end clamp to the end.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let col = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// The text of a 1-based line, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(index) = line.checked_sub(1) else {
            return "";
        };
        let start = self
            .line_starts
            .get(index)
            .copied()
            .unwrap_or(self.text.len());
        let end = self
            .line_starts
            .get(line)
            .map_or(self.text.len(), |&e| e - 1);
        self.text.get(start..end.max(start)).unwrap_or("")
    }
}

/// All files of a session. Files are only ever added, so a [`FileId`] stays valid.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        self.files.push(SourceFile::new(name.into(), text.into()));
        (self.files.len() - 1) as FileId
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id as usize]
    }

    pub fn name(&self, id: FileId) -> &str {
        &self.get(id).name
    }

    pub fn text(&self, id: FileId) -> &str {
        &self.get(id).text
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (i as FileId, f))
    }

    /// 1-based (line, column) of the start of a span.
    pub fn line_col(&self, span: Span) -> (usize, usize) {
        self.get(span.file).line_col(span.start as usize)
    }

    /// `file:line:col` of the start of a span.
    pub fn location(&self, span: Span) -> String {
        let (line, col) = self.line_col(span);
        format!("{}:{}:{}", self.name(span.file), line, col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_lookup() {
        let mut map = SourceMap::new();
        let f = map.add("a.stp", "probe begin {\n  x = 1\n}\n");
        assert_eq!(map.line_col(Span::new(f, 0, 1)), (1, 1));
        assert_eq!(map.line_col(Span::new(f, 16, 17)), (2, 3));
        assert_eq!(map.location(Span::new(f, 22, 23)), "a.stp:3:1");
        assert_eq!(map.get(f).line_text(2), "  x = 1");
        assert_eq!(map.get(f).line_text(0), "");
        assert_eq!(map.get(f).line_text(99), "");
        // Past the end clamps.
        assert_eq!(map.line_col(Span::new(f, 999, 999)), (4, 1));
    }
}
