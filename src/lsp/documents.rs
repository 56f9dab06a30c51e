//! The documents the editor has open, and a [`Loader`] that reads them before the disk, so that
//! unsaved buffers are what lint, navigation and completion see.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use lsp_types::{TextDocumentContentChangeEvent, Uri};

use super::position::LineIndex;
use super::uri;
use crate::language::kdl::tolerant::{self, Tree};
use crate::language::{FsLoader, Loader};

/// One open document.
#[derive(Debug)]
pub(crate) struct Document {
    /// The editor's name for it.
    pub(crate) uri: Uri,
    /// The file it is (for a buffer that is no file, a name made from the URI).
    pub(crate) path: PathBuf,
    /// The current text.
    pub(crate) text: Arc<str>,
    /// The editor's version of the text.
    pub(crate) version: i32,
    /// The tolerant view of the current text, read on first use.
    tree: OnceCell<Rc<Tree>>,
}

impl Document {
    /// A document as the editor opened it.
    pub(crate) fn new(uri: Uri, text: String, version: i32) -> Self {
        let path = uri::to_path(&uri).unwrap_or_else(|| PathBuf::from(uri.as_str()));
        Self {
            uri,
            path,
            text: text.into(),
            version,
            tree: OnceCell::new(),
        }
    }

    /// The tolerant view of the current text.
    pub(crate) fn tree(&self) -> Rc<Tree> {
        Rc::clone(
            self.tree
                .get_or_init(|| Rc::new(tolerant::parse(&self.text))),
        )
    }

    /// Applies the editor's changes, in order (a change without a range replaces everything).
    pub(crate) fn apply(&mut self, changes: Vec<TextDocumentContentChangeEvent>, version: i32) {
        let mut text = self.text.to_string();
        for change in changes {
            match change.range {
                None => text = change.text,
                Some(range) => {
                    let index = LineIndex::new(&text);
                    let start = index.offset(range.start);
                    let end = index.offset(range.end).max(start);
                    text.replace_range(start..end, &change.text);
                }
            }
        }
        self.text = text.into();
        self.version = version;
        self.tree = OnceCell::new();
    }
}

/// The open documents, by URI.
#[derive(Debug, Default)]
pub(crate) struct Documents {
    by_uri: HashMap<Uri, Document>,
}

impl Documents {
    /// The document with this URI.
    pub(crate) fn get(&self, uri: &Uri) -> Option<&Document> {
        self.by_uri.get(uri)
    }

    /// The document with this URI, to change it.
    pub(crate) fn get_mut(&mut self, uri: &Uri) -> Option<&mut Document> {
        self.by_uri.get_mut(uri)
    }

    /// Adds (or replaces) a document.
    pub(crate) fn open(&mut self, document: Document) {
        self.by_uri.insert(document.uri.clone(), document);
    }

    /// Removes a document.
    pub(crate) fn close(&mut self, uri: &Uri) -> Option<Document> {
        self.by_uri.remove(uri)
    }

    /// Every open document.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Document> {
        self.by_uri.values()
    }

    /// The open document that is the file `path`.
    pub(crate) fn by_path(&self, path: &Path) -> Option<&Document> {
        self.by_uri.values().find(|d| d.path == path)
    }

    /// The URI to report a file under: the editor's own URI when the file is open.
    pub(crate) fn uri_of(&self, path: &Path) -> Option<Uri> {
        self.by_path(path)
            .map(|d| d.uri.clone())
            .or_else(|| uri::from_path(path))
    }

    /// The open texts, for reading off this thread.
    pub(crate) fn overlay(&self, search_path: &[PathBuf]) -> Overlay {
        Overlay {
            files: self
                .by_uri
                .values()
                .map(|d| (d.path.clone(), Arc::clone(&d.text)))
                .collect(),
            search_path: search_path.to_vec(),
        }
    }
}

/// Reads open documents first and the disk second.
#[derive(Debug, Clone)]
pub(crate) struct Overlay {
    files: HashMap<PathBuf, Arc<str>>,
    search_path: Vec<PathBuf>,
}

impl Loader for Overlay {
    fn read(&self, path: &Path) -> io::Result<String> {
        match self.files.get(path) {
            Some(text) => Ok(text.to_string()),
            None => FsLoader.read(path),
        }
    }

    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(path) || FsLoader.is_file(path)
    }

    fn search_path(&self) -> Vec<PathBuf> {
        self.search_path.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use lsp_types::{Position, Range};

    use super::*;

    fn change(
        range: Option<((u32, u32), (u32, u32))>,
        text: &str,
    ) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: range.map(|(s, e)| Range::new(Position::new(s.0, s.1), Position::new(e.0, e.1))),
            range_length: None,
            text: text.to_owned(),
        }
    }

    #[test]
    fn applies_incremental_changes_in_utf16_positions() {
        let uri = Uri::from_str("file:///tmp/p.kdl").unwrap();
        let mut document = Document::new(uri, "a \"😀\" b\nc\n".to_owned(), 1);
        assert_eq!(document.path, PathBuf::from("/tmp/p.kdl"));
        document.apply(
            vec![
                change(Some(((0, 7), (0, 8))), "bee"),
                change(Some(((1, 0), (1, 1))), "cat"),
            ],
            2,
        );
        assert_eq!(&*document.text, "a \"😀\" bee\ncat\n");
        assert_eq!(document.version, 2);
        document.apply(vec![change(None, "new")], 3);
        assert_eq!(&*document.text, "new");
        assert_eq!(document.tree().nodes[0].name(), "new");
    }

    #[test]
    fn overlay_reads_open_documents_before_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let on_disk = dir.path().join("disk.kdl");
        std::fs::write(&on_disk, "disk").unwrap();
        let open = dir.path().join("open.kdl");
        let mut documents = Documents::default();
        let uri = uri::from_path(&open).unwrap();
        documents.open(Document::new(uri.clone(), "buffer".to_owned(), 1));
        let overlay = documents.overlay(&[]);
        assert_eq!(overlay.read(&open).unwrap(), "buffer");
        assert!(overlay.is_file(&open));
        assert_eq!(overlay.read(&on_disk).unwrap(), "disk");
        assert!(!overlay.is_file(&dir.path().join("missing.kdl")));
        assert_eq!(documents.uri_of(&open), Some(uri));
    }
}
