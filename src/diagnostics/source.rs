//! Source files known to one compilation, and spans into them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Index of a file in [`Sources`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Span {
    /// The file the range points into.
    pub file: FileId,
    /// Byte offset of the first byte.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Span {
    /// A span in `file` from a byte offset and a length.
    pub(crate) fn new(file: FileId, offset: usize, len: usize) -> Self {
        Self { file, offset, len }
    }

    /// The byte offset one past the end.
    pub fn end(&self) -> usize {
        self.offset + self.len
    }

    /// Converts a `miette` span from the kdl crate into a span of `file`.
    pub(crate) fn from_miette(file: FileId, span: miette::SourceSpan) -> Self {
        Self::new(file, span.offset(), span.len())
    }
}

/// One file's name and text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the user named it (used in reports).
    pub path: PathBuf,
    /// The whole text.
    pub text: Arc<str>,
    line_starts: Vec<usize>,
    /// The number of characters before every [`CHECKPOINT`]th byte (at a character boundary at or
    /// before it), so a column on a long line is found without counting the line from its start.
    char_checkpoints: Vec<(usize, usize)>,
}

/// Bytes between two entries of [`SourceFile`]'s character checkpoints.
const CHECKPOINT: usize = 4096;

impl SourceFile {
    /// A file from its path and text.
    pub(crate) fn new(path: impl Into<PathBuf>, text: impl Into<Arc<str>>) -> Self {
        let text: Arc<str> = text.into();
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let mut char_checkpoints = vec![(0, 0)];
        let mut at = 0;
        let mut chars = 0;
        while at + CHECKPOINT < text.len() {
            let next = floor_char_boundary(&text, at + CHECKPOINT);
            chars += text[at..next].chars().count();
            char_checkpoints.push((next, chars));
            at = next;
        }
        Self {
            path: path.into(),
            text,
            line_starts,
            char_checkpoints,
        }
    }

    /// The 0-based line that byte `offset` is on (offsets past the end clamp).
    pub(crate) fn line_index(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        self.line_starts.partition_point(|&s| s <= offset) - 1
    }

    /// The number of lines (a final line break starts an empty last line).
    pub(crate) fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The byte range of a 0-based line, without its line break.
    pub(crate) fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let start = self.line_starts[line];
        let end = self
            .line_starts
            .get(line + 1)
            .map_or(self.text.len(), |next| next - 1);
        start..end.max(start)
    }

    /// The number of characters before byte `offset` (a character boundary).
    fn chars_before(&self, offset: usize) -> usize {
        let index = self
            .char_checkpoints
            .partition_point(|&(at, _)| at <= offset)
            - 1;
        let (at, chars) = self.char_checkpoints[index];
        chars + self.text[at..offset].chars().count()
    }

    /// 1-based line and column (in characters) of a byte offset; offsets past the end clamp.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let end = floor_char_boundary(&self.text, offset).max(start);
        let column = self.chars_before(end) - self.chars_before(start);
        (line + 1, column + 1)
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Every file read while compiling one pipeline: the pipeline, its imports and prompt files.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
    by_path: std::collections::HashMap<PathBuf, FileId>,
    bytes: usize,
}

impl Sources {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id.
    pub(crate) fn add(&mut self, path: impl Into<PathBuf>, text: impl Into<Arc<str>>) -> FileId {
        let id = FileId(u32::try_from(self.files.len()).expect("fewer than 4 billion files"));
        let file = SourceFile::new(path, text);
        self.bytes += file.text.len();
        self.by_path.entry(file.path.clone()).or_insert(id);
        self.files.push(file);
        id
    }

    /// The file with this id.
    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// The id of an already added file with this path.
    pub(crate) fn find(&self, path: &Path) -> Option<FileId> {
        self.by_path.get(path).copied()
    }

    /// The bytes of every file, together.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds every file of `other`; the result maps `other`'s spans to this table.
    pub(crate) fn append(&mut self, other: &Sources) -> Remap {
        let base = u32::try_from(self.files.len()).expect("fewer than 4 billion files");
        self.files.extend(other.files.iter().cloned());
        Remap { base }
    }

    /// All files, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }
}

/// Maps spans of one [`Sources`] table into another that it was appended to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Remap {
    base: u32,
}

impl Remap {
    /// The span in the combined table.
    pub(crate) fn span(self, span: Span) -> Span {
        Span {
            file: FileId(span.file.0 + self.base),
            ..span
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_from_one() {
        let f = SourceFile::new("a.kdl", "ab\nçd\r\nx");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (2, 1));
        assert_eq!(f.line_col(5), (2, 2));
        assert_eq!(f.line_col(100), (3, 2));
    }
}
