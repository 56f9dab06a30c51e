//! A snapshot of a workspace's files, and what differs between two: [`Snapshot`], [`Changes`],
//! [`SnapshotOptions`]. What a snapshot sees, and the shortcut that spares reading unchanged
//! files, are described in [the module documentation](super).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::ProtectedPaths;
use super::rules::IgnoreRules;

/// The state of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    /// Size in bytes (for a symlink: the length of its target path).
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// BLAKE3 hash of the contents (for a symlink: of its target path; unreadable: of nothing).
    pub hash: [u8; 32],
    /// Whether any execute permission bit is set (never for a symlink).
    pub executable: bool,
    /// Permission bits (`0o7777`: read, write and execute, setuid, setgid, sticky); 0 for a
    /// symlink, whose own bits mean nothing.
    pub mode: u32,
}

/// Files of a workspace by relative path (forward slashes), honouring .gitignore.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Sorted by path. The paths are shared with the snapshots taken after this one: a file that is
    /// still there costs them no allocation.
    pub(super) files: Vec<(Arc<str>, Entry)>,
    /// Every folder walked (relative, forward slashes), so `restore` knows which ones are new.
    pub(super) dirs: BTreeSet<String>,
    /// Real relative paths of files whose names are not UTF-8 (their keys are lossy).
    pub(super) raw_names: BTreeMap<String, PathBuf>,
    /// When the walk began, on the clock file timestamps are taken from.
    pub(super) started_ns: i128,
    /// A file whose inode last changed before this moment may lend its hash to a later snapshot
    /// when its metadata is unchanged: the walk's start less the racy margin (see
    /// [`SnapshotOptions::fine_timestamps`]).
    pub(super) settled_ns: i128,
    /// Files read and hashed by this walk rather than taken from the previous snapshot.
    pub(super) hashed: usize,
    /// The ignore rules it was taken with; `None` for a snapshot not taken from disk.
    pub(super) rules: Option<IgnoreRules>,
}

/// What differs between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Files that exist only afterwards.
    pub created: Vec<String>,
    /// Files whose contents, permission bits or kind (file or symlink) changed.
    pub modified: Vec<String>,
    /// Files that exist only before.
    pub deleted: Vec<String>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }

    /// Every changed path: created, then modified, then deleted.
    pub fn all(&self) -> impl Iterator<Item = &str> {
        self.created
            .iter()
            .chain(&self.modified)
            .chain(&self.deleted)
            .map(String::as_str)
    }

    /// How many paths changed.
    pub fn len(&self) -> usize {
        self.created.len() + self.modified.len() + self.deleted.len()
    }

    /// Moves the paths `matches` accepts out of these changes, into changes of their own.
    pub(crate) fn split_off(&mut self, matches: impl Fn(&str) -> bool) -> Changes {
        let split = |paths: &mut Vec<String>| {
            let (taken, kept): (Vec<String>, Vec<String>) =
                std::mem::take(paths).into_iter().partition(|p| matches(p));
            *paths = kept;
            taken
        };
        Changes {
            created: split(&mut self.created),
            modified: split(&mut self.modified),
            deleted: split(&mut self.deleted),
        }
    }
}

/// How to take a snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotOptions {
    /// Relative folders never entered, ignored or not, e.g. the state dir `.helixflow`. Absolute
    /// paths inside the workspace are accepted too; anything else excludes nothing.
    pub exclude: Vec<PathBuf>,
    /// Keep the bytes of files up to this size (inclusive), so that [`Snapshot::restore`] can
    /// rewrite them; `None` keeps nothing.
    pub keep_contents_under: Option<u64>,
    /// Files recorded whether or not ignore rules leave them out: a phase's `protect` globs.
    pub protected: Option<ProtectedPaths>,
    /// Record the files `protected` matches and nothing else, walking only the folders that can
    /// hold them.
    pub only_protected: bool,
    /// Judge what is ignored by these rules, an earlier snapshot's ([`Snapshot::ignore_rules`]),
    /// rather than by the ignore files on disk now: an ignore file added or changed since then
    /// hides nothing.
    pub rules: Option<IgnoreRules>,
    /// Trust timestamps finer than a second when the files show them: a file that last changed
    /// more than [`FINE_MARGIN_NS`](super::FINE_MARGIN_NS) (rather than 2 s) before the walk began
    /// may lend its hash to the next snapshot. Set for an attempt's worktree, whose files
    /// helixflow wrote itself and then waited that long before the first walk: the margin need
    /// only exceed the clock's tick, which the 2 s of the coarsest file systems (FAT) far
    /// exceed. A tree whose timestamps are all whole seconds keeps the 2 s.
    pub fine_timestamps: bool,
}

impl Snapshot {
    /// Every file, in path order.
    pub fn files(&self) -> impl Iterator<Item = (&str, &FileState)> {
        self.files
            .iter()
            .map(|(path, entry)| (&**path, &entry.state))
    }

    /// The file at this relative path (forward slashes).
    pub fn get(&self, path: &str) -> Option<&FileState> {
        self.entry(path).map(|entry| &entry.state)
    }

    pub(super) fn entry(&self, path: &str) -> Option<&Entry> {
        let index = self
            .files
            .binary_search_by(|(key, _)| (**key).cmp(path))
            .ok()?;
        Some(&self.files[index].1)
    }

    /// Whether the entry at this path is a symlink.
    pub(crate) fn is_symlink(&self, path: &str) -> bool {
        self.entry(path)
            .is_some_and(|entry| entry.kind == Kind::Symlink)
    }

    /// How many files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the snapshot holds no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// How many files this snapshot read and hashed; the others reused the previous snapshot's hash.
    pub fn files_hashed(&self) -> usize {
        self.hashed
    }

    /// The ignore rules this snapshot was taken with, for a later one to judge by
    /// ([`SnapshotOptions::rules`]); `None` when it was not taken from disk, or holds only
    /// protected files.
    pub(crate) fn ignore_rules(&self) -> Option<IgnoreRules> {
        self.rules.clone()
    }

    /// This snapshot with only the files `protected` matches: what a snapshot taken with
    /// [`SnapshotOptions::only_protected`] would have held, to reuse hashes from.
    pub(crate) fn only_protected(&self, protected: &ProtectedPaths) -> Snapshot {
        let files: Vec<(Arc<str>, Entry)> = self
            .files
            .iter()
            .filter(|(path, _)| protected.matches(&**path))
            .cloned()
            .collect();
        let raw_names = self
            .raw_names
            .iter()
            .filter(|(path, _)| protected.matches(path.as_str()))
            .map(|(path, raw)| (path.clone(), raw.clone()))
            .collect();
        Snapshot {
            files,
            dirs: BTreeSet::new(),
            raw_names,
            started_ns: self.started_ns,
            settled_ns: self.settled_ns,
            hashed: 0,
            rules: None,
        }
    }

    /// What changed from `self` (before) to `after`.
    pub fn diff(&self, after: &Snapshot) -> Changes {
        let mut changes = Changes::default();
        let mut before_files = self.files.iter();
        let mut after_files = after.files.iter();
        let (mut before, mut later) = (before_files.next(), after_files.next());
        loop {
            match (before, later) {
                (None, None) => break,
                (Some((path, _)), None) => {
                    changes.deleted.push(path.to_string());
                    before = before_files.next();
                }
                (None, Some((path, _))) => {
                    changes.created.push(path.to_string());
                    later = after_files.next();
                }
                (Some((before_path, old)), Some((after_path, new))) => {
                    match before_path.cmp(after_path) {
                        Ordering::Less => {
                            changes.deleted.push(before_path.to_string());
                            before = before_files.next();
                        }
                        Ordering::Greater => {
                            changes.created.push(after_path.to_string());
                            later = after_files.next();
                        }
                        Ordering::Equal => {
                            if old.differs_from(new) {
                                changes.modified.push(before_path.to_string());
                            }
                            before = before_files.next();
                            later = after_files.next();
                        }
                    }
                }
            }
        }
        changes
    }
}

/// A file as a snapshot keeps it: the public state and what the shortcut and `restore` need.
#[derive(Clone)]
pub(super) struct Entry {
    pub(super) state: FileState,
    pub(super) kind: Kind,
    /// Inode change time: a write moves it and it cannot be set back, so the shortcut trusts it.
    pub(super) ctime_ns: i128,
    /// Inode number: a file replaced by another (an editor's atomic save) is read again.
    pub(super) inode: u64,
    /// Permission bits, restored with the contents.
    pub(super) mode: u32,
    /// False when the contents could not be read; the hash is then of nothing.
    pub(super) readable: bool,
    /// Kept bytes (for a symlink: its target), shared with later snapshots that reuse them.
    pub(super) contents: Option<Arc<[u8]>>,
    /// The path's index in the previous snapshot ([`NEW`] when it had none), so that the walk's
    /// findings are put in path order without comparing paths.
    pub(super) order: usize,
}

/// [`Entry::order`] of a path the previous snapshot did not have.
pub(super) const NEW: usize = usize::MAX;

impl Entry {
    /// Whether the file changed between this entry (before) and `after`.
    fn differs_from(&self, after: &Entry) -> bool {
        // Any permission bit counts: a protected file made world-writable, setuid or unreadable
        // (`chmod 666`, `u+s`, `000`) changed as surely as one rewritten.
        if self.kind != after.kind || self.state.mode != after.state.mode {
            return true;
        }
        if self.readable && after.readable {
            self.state.hash != after.state.hash
        } else {
            self.state.size != after.state.size || self.state.mtime_ns != after.state.mtime_ns
        }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The contents can be megabytes; their length says enough.
        f.debug_struct("Entry")
            .field("state", &self.state)
            .field("kind", &self.kind)
            .field("ctime_ns", &self.ctime_ns)
            .field("inode", &self.inode)
            .field("mode", &format_args!("{:o}", self.mode))
            .field("readable", &self.readable)
            .field("kept_bytes", &self.contents.as_ref().map(|c| c.len()))
            .finish_non_exhaustive()
    }
}

/// What a snapshot entry is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Symlink,
}

/// A file of a snapshot as it is written down for a later run: enough to tell what changed since
/// (`Snapshot::diff`), not to restore it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct ListedFile {
    pub path: String,
    pub symlink: bool,
    pub size: u64,
    pub mtime_ns: i128,
    /// BLAKE3, hex.
    pub hash: String,
    pub mode: u32,
    pub readable: bool,
}

impl Snapshot {
    /// Every file, written down (see [`ListedFile`]).
    pub(crate) fn listing(&self) -> Vec<ListedFile> {
        self.files
            .iter()
            .map(|(path, entry)| ListedFile {
                path: path.to_string(),
                symlink: entry.kind == Kind::Symlink,
                size: entry.state.size,
                mtime_ns: entry.state.mtime_ns,
                hash: blake3::Hash::from(entry.state.hash).to_hex().to_string(),
                mode: entry.state.mode,
                readable: entry.readable,
            })
            .collect()
    }

    /// A snapshot from a listing: it diffs as the snapshot listed did, keeps no contents and no
    /// ignore rules, and lends no hash to a later walk (no inode or change time is known).
    pub(crate) fn from_listing(mut listing: Vec<ListedFile>) -> Snapshot {
        listing.sort_by(|a, b| a.path.cmp(&b.path));
        listing.dedup_by(|a, b| a.path == b.path);
        let files = listing
            .into_iter()
            .filter_map(|file| {
                let hash = blake3::Hash::from_hex(&file.hash).ok()?;
                let entry = Entry {
                    state: FileState {
                        size: file.size,
                        mtime_ns: file.mtime_ns,
                        hash: *hash.as_bytes(),
                        executable: !file.symlink && file.mode & 0o111 != 0,
                        mode: file.mode,
                    },
                    kind: if file.symlink {
                        Kind::Symlink
                    } else {
                        Kind::File
                    },
                    ctime_ns: 0,
                    inode: 0,
                    mode: file.mode,
                    readable: file.readable,
                    contents: None,
                    order: NEW,
                };
                Some((Arc::from(file.path.as_str()), entry))
            })
            .collect();
        Snapshot {
            files,
            ..Snapshot::default()
        }
    }
}
