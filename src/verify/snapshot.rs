//! Workspace snapshots: every file of a workspace with its size, modification time, content hash
//! and executable bit, taken before and after each attempt to judge `scope`, `protect` and the
//! `changes` gate, and able to keep contents so that a verifier's changes can be undone byte-exact.
//!
//! What a snapshot sees, and why:
//! - Files and symlinks below the workspace, walked in parallel: on Linux by the walker in
//!   `snapshot/linux.rs`, elsewhere by the `ignore` crate's with its own filters off; both judge
//!   what is ignored with the same code (`snapshot/rules.rs`).
//!   `.gitignore` files are honoured even outside a git repository (with `.git/info/exclude`, the
//!   global git excludes file, as `git status` does, and the ignore files of the folders above the
//!   workspace), and so are `.helixflowignore` files (same syntax, higher precedence). `.ignore`
//!   files are not read: they tell search tools what to skip, not what belongs to the project.
//!   The rules read are kept with the snapshot; a later one can judge by them instead of the
//!   ignore files on disk ([`SnapshotOptions::rules`]), so that an ignore file written or changed
//!   in between hides nothing: the snapshot after an attempt judges by the one before it.
//! - Protected files ([`SnapshotOptions::protected`]) are recorded even where ignored: an ignored
//!   folder is entered only when a protected file can be in it, and then only for those.
//! - Hidden files are included (`.env` or `.github/` changed outside `scope` must be seen), but `.git`
//!   (a repository's folder, or the file a worktree or submodule has instead) and the excluded
//!   folders (the state dir) are never entered or recorded, whether ignored or not.
//! - Symlinks are not followed: a link is recorded as a file whose contents are its target path.
//! - Folders are not entries (as in git), but are remembered so that [`Snapshot::restore`] removes
//!   only the folders that were created after the snapshot.
//! - FIFOs, sockets and devices are skipped: reading one could block forever.
//! - A file that vanishes (or changes type) mid-walk is skipped, as if the walk had come a moment
//!   later; so is a folder that cannot be listed.
//! - An unreadable file (permission denied) is recorded with its size, modification time and the hash
//!   of nothing, and is compared by size and modification time only: its contents are unknown, and
//!   failing the whole snapshot for one such file would fail every attempt. It cannot be restored.
//! - A name that is not UTF-8 is recorded lossily (U+FFFD); `restore` finds the real name on disk.
//!
//! The shortcut: a file reuses the previous snapshot's hash without being read when its size,
//! modification time, inode change time and inode number are unchanged, and its inode last changed
//! more than 2 seconds before the previous snapshot began. The margin is git's "racy
//! clean" rule: timestamps are coarse, so a file stamped just before a snapshot may change again
//! within the same tick after it was read. Since every write moves the change time, which cannot
//! be set back, a same-size change whose modification time was put back is still seen; only a
//! change made while the system clock was stepped back could slip through.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[cfg(any(not(target_os = "linux"), test))]
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use serde::Serialize;

#[cfg(target_os = "linux")]
mod linux;
mod rules;

#[cfg(any(not(target_os = "linux"), test))]
use rules::Level;
pub use rules::{IgnoreRules, ProtectedPaths};
use rules::{Matchers, Outer};

/// Files stamped this close to (or after) a snapshot's start are re-read by the next snapshot even
/// when size and times match: 2 s covers the coarsest common timestamp granularity (FAT).
const RACY_MARGIN_NS: i128 = 2_000_000_000;

/// Ignore files with `.gitignore` syntax that only helixflow reads.
const HELIXFLOW_IGNORE: &str = ".helixflowignore";

/// Read buffer for hashing files whose contents are not kept.
const READ_BUFFER: usize = 64 * 1024;

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
}

/// Files of a workspace by relative path (forward slashes), honouring .gitignore.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Sorted by path. The paths are shared with the snapshots taken after this one: a file that is
    /// still there costs them no allocation.
    files: Vec<(Arc<str>, Entry)>,
    /// Every folder walked (relative, forward slashes), so `restore` knows which ones are new.
    dirs: BTreeSet<String>,
    /// Real relative paths of files whose names are not UTF-8 (their keys are lossy).
    raw_names: BTreeMap<String, PathBuf>,
    /// When the walk began, on the clock file timestamps are taken from.
    started_ns: i128,
    /// Files read and hashed by this walk rather than taken from the previous snapshot.
    hashed: usize,
    /// The ignore rules it was taken with; `None` for a snapshot not taken from disk.
    rules: Option<IgnoreRules>,
}

/// What differs between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Files that exist only afterwards.
    pub created: Vec<String>,
    /// Files whose contents, executable bit or kind (file or symlink) changed.
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
    pub fn split_off(&mut self, matches: impl Fn(&str) -> bool) -> Changes {
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
}

impl Snapshot {
    /// Walks `workspace`. `previous`: reuse a file's hash when size and mtime are unchanged (the
    /// shortcut; see the module documentation for the exact rule).
    ///
    /// # Errors
    /// When `workspace` is not a readable folder, or on an I/O error other than a file vanishing
    /// or being unreadable.
    pub fn take(
        workspace: &Path,
        options: &SnapshotOptions,
        previous: Option<&Snapshot>,
    ) -> io::Result<Snapshot> {
        Snapshot::take_with(workspace, options, previous, walk)
    }

    /// [`Snapshot::take`] with the walker `walk`.
    fn take_with(
        workspace: &Path,
        options: &SnapshotOptions,
        previous: Option<&Snapshot>,
        walk: fn(Arc<[Exclude]>, &Shared<'_>),
    ) -> io::Result<Snapshot> {
        let started_ns = file_clock_now();
        let meta = fs::metadata(workspace).map_err(|err| with_path(&err, workspace))?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                ErrorKind::NotADirectory,
                format!("{}: the workspace is not a folder", workspace.display()),
            ));
        }
        let excludes: Arc<[Exclude]> = options
            .exclude
            .iter()
            .filter_map(|exclude| relative_exclude(workspace, exclude))
            .map(|path| Exclude {
                depth: path.components().count(),
                path,
            })
            .collect();

        let outer = match (&options.rules, options.only_protected) {
            (Some(rules), _) => Arc::clone(rules.outer()),
            (None, true) => Arc::new(Outer::none()),
            (None, false) => Arc::new(Outer::read(workspace)),
        };
        let shared = Shared {
            root: workspace,
            previous,
            keep_contents_under: options.keep_contents_under,
            outer: Arc::clone(&outer),
            recorded_rules: options.rules.as_ref(),
            protected: options.protected.as_ref(),
            only_protected: options.only_protected,
            parts: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
        };
        walk(excludes, &shared);

        if let Some(err) = shared
            .failure
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(err);
        }
        let parts = shared
            .parts
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut snapshot = Snapshot {
            started_ns,
            ..Snapshot::default()
        };
        let total = parts.iter().map(|part| part.files.len()).sum();
        let mut found = Vec::with_capacity(parts.len());
        let mut folder_rules = HashMap::new();
        for part in parts {
            found.push(part.files);
            snapshot.dirs.extend(part.dirs);
            snapshot.raw_names.extend(part.raw_names);
            snapshot.hashed += part.hashed;
            folder_rules.extend(part.rules);
        }
        snapshot.rules = match &options.rules {
            Some(rules) => Some(rules.clone()),
            // Its rules are not all the workspace's: only those on the way to protected files.
            None if options.only_protected => None,
            None => Some(IgnoreRules::new(outer, folder_rules)),
        };
        let previous_files = previous.map_or(&[][..], |previous| previous.files.as_slice());
        let mut files = in_path_order(found.into_iter().flatten(), total, previous_files);
        // Two names that are not UTF-8 can read the same; keep one rather than confuse the diff.
        files.dedup_by(|a, b| a.0 == b.0);
        snapshot.files = files;
        Ok(snapshot)
    }

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

    fn entry(&self, path: &str) -> Option<&Entry> {
        let index = self
            .files
            .binary_search_by(|(key, _)| (**key).cmp(path))
            .ok()?;
        Some(&self.files[index].1)
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
    pub fn ignore_rules(&self) -> Option<IgnoreRules> {
        self.rules.clone()
    }

    /// This snapshot with only the files `protected` matches: what a snapshot taken with
    /// [`SnapshotOptions::only_protected`] would have held, to reuse hashes from.
    pub fn only_protected(&self, protected: &ProtectedPaths) -> Snapshot {
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

    /// Restores the workspace to this snapshot for the given changes: modified and deleted files
    /// rewritten byte-exact from kept contents (and their executable bit), created files removed
    /// (and now-empty folders they created). Returns the paths it could not restore (no kept
    /// contents).
    ///
    /// Every path is made as it was in this snapshot: removed when the snapshot does not have it,
    /// rewritten (contents, permission bits and modification time, atomically by rename) when it
    /// does. Removals come first, so that a created file or symlink standing where a folder must be
    /// recreated is gone before the folder is. Nothing is written through a symlinked folder (it
    /// could lead outside the workspace): such paths are returned as not restored, as are paths
    /// that are not plain relative paths and created files replaced by a folder since. A "created"
    /// file whose inode changed before this snapshot began is kept: it existed then, hidden by an
    /// ignore rule that was changed since.
    ///
    /// # Errors
    /// The first I/O error met; every other path is still tried first.
    pub fn restore(&self, workspace: &Path, changes: &Changes) -> io::Result<Vec<String>> {
        let mut outcome = Restoring::default();
        for path in changes.all().filter(|path| self.entry(path).is_none()) {
            outcome.record(path, self.remove_created(workspace, path));
        }
        for path in changes.all() {
            if let Some(entry) = self.entry(path) {
                outcome.record(path, self.write_back(workspace, path, entry));
            }
        }
        outcome.finish()
    }

    /// Removes a file this snapshot does not have, then the folders above it that it does not
    /// have either, while they are empty. `Ok(false)`: left in place.
    fn remove_created(&self, workspace: &Path, path: &str) -> io::Result<bool> {
        let Some(rel) = self.locate(workspace, path) else {
            return Ok(false);
        };
        if symlinked_folder_in(workspace, &rel)? {
            return Ok(false);
        }
        let full = workspace.join(&rel);
        match fs::symlink_metadata(&full) {
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => return Err(with_path(&err, &full)),
            Ok(meta) if meta.is_dir() => return Ok(false),
            Ok(meta) if changed_before(&meta, self.started_ns) => return Ok(true),
            Ok(_) => match fs::remove_file(&full) {
                Err(err) if err.kind() != ErrorKind::NotFound => {
                    return Err(with_path(&err, &full));
                }
                _ => {}
            },
        }
        let mut folder = rel.parent();
        while let Some(dir) = folder
            && !dir.as_os_str().is_empty()
            && !self.dirs.contains(&*key_of(dir))
        {
            match fs::remove_dir(workspace.join(dir)) {
                Ok(()) => {}
                Err(err) if err.kind() == ErrorKind::NotFound => {}
                // Not empty: other files live there, so it stays (and so do its parents).
                Err(_) => break,
            }
            folder = dir.parent();
        }
        Ok(true)
    }

    /// Rewrites a file from its kept contents. `Ok(false)`: nothing kept, or unsafe to write.
    fn write_back(&self, workspace: &Path, path: &str, entry: &Entry) -> io::Result<bool> {
        let Some(contents) = &entry.contents else {
            return Ok(false);
        };
        let Some(rel) = self.locate(workspace, path) else {
            return Ok(false);
        };
        if symlinked_folder_in(workspace, &rel)? {
            return Ok(false);
        }
        let full = workspace.join(&rel);
        let (Some(parent), Some(name)) = (full.parent(), full.file_name()) else {
            return Ok(false);
        };
        fs::create_dir_all(parent).map_err(|err| with_path(&err, parent))?;
        let temp = parent.join(format!(
            ".{}.helixflow-restore-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let written = match entry.kind {
            Kind::File => write_file(&temp, contents, entry.mode, entry.state.mtime_ns),
            Kind::Symlink => make_symlink(&temp, contents),
        };
        match written {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(err) => {
                remove_quietly(&temp);
                return Err(with_path(&err, &full));
            }
        }
        if let Err(err) = fs::rename(&temp, &full) {
            remove_quietly(&temp);
            return Err(with_path(&err, &full));
        }
        Ok(true)
    }

    /// The real relative path of `path` on disk; `None` for anything but a plain relative path.
    fn locate(&self, workspace: &Path, path: &str) -> Option<PathBuf> {
        if let Some(raw) = self.raw_names.get(path) {
            return Some(raw.clone());
        }
        let rel = Path::new(path);
        if path.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return None;
        }
        if !path.contains(char::REPLACEMENT_CHARACTER) {
            return Some(rel.to_path_buf());
        }
        // A name that is not UTF-8 was recorded lossily: look for the one that reads the same.
        let mut on_disk = PathBuf::new();
        for component in rel.components() {
            let name = component.as_os_str();
            let wanted = name.to_string_lossy();
            let found = if wanted.contains(char::REPLACEMENT_CHARACTER) {
                fs::read_dir(workspace.join(&on_disk))
                    .ok()
                    .and_then(|entries| {
                        entries
                            .filter_map(Result::ok)
                            .map(|entry| entry.file_name())
                            .find(|candidate| candidate.to_string_lossy() == wanted)
                    })
            } else {
                None
            };
            on_disk.push(found.as_deref().unwrap_or(name));
        }
        Some(on_disk)
    }
}

/// A file as a snapshot keeps it: the public state and what the shortcut and `restore` need.
#[derive(Clone)]
struct Entry {
    state: FileState,
    kind: Kind,
    /// Inode change time: a write moves it and it cannot be set back, so the shortcut trusts it.
    ctime_ns: i128,
    /// Inode number: a file replaced by another (an editor's atomic save) is read again.
    inode: u64,
    /// Permission bits, restored with the contents.
    mode: u32,
    /// False when the contents could not be read; the hash is then of nothing.
    readable: bool,
    /// Kept bytes (for a symlink: its target), shared with later snapshots that reuse them.
    contents: Option<Arc<[u8]>>,
    /// The path's index in the previous snapshot ([`NEW`] when it had none), so that the walk's
    /// findings are put in path order without comparing paths.
    order: usize,
}

/// [`Entry::order`] of a path the previous snapshot did not have.
const NEW: usize = usize::MAX;

/// The walk's findings in path order. The previous snapshot is in path order already: a file it
/// had goes to its index there, and a new file right before the first path there that sorts after
/// it, so only new files are compared by path (with one binary search each).
fn in_path_order(
    found: impl Iterator<Item = (Arc<str>, Entry)>,
    total: usize,
    previous: &[(Arc<str>, Entry)],
) -> Vec<(Arc<str>, Entry)> {
    let mut known: Vec<Option<(Arc<str>, Entry)>> = (0..previous.len()).map(|_| None).collect();
    let mut new = Vec::new();
    for (path, entry) in found {
        match known.get_mut(entry.order) {
            Some(slot) => *slot = Some((path, entry)),
            None => {
                let before = previous.partition_point(|(old, _)| *old < path);
                new.push((before, path, entry));
            }
        }
    }
    new.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut new = new.into_iter().peekable();
    let mut files = Vec::with_capacity(total);
    for (index, slot) in known.into_iter().enumerate() {
        while let Some((_, path, entry)) = new.next_if(|(before, ..)| *before <= index) {
            files.push((path, entry));
        }
        files.extend(slot);
    }
    files.extend(new.map(|(_, path, entry)| (path, entry)));
    files
}

impl Entry {
    /// Whether the file changed between this entry (before) and `after`.
    fn differs_from(&self, after: &Entry) -> bool {
        if self.kind != after.kind || self.state.executable != after.state.executable {
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
enum Kind {
    File,
    Symlink,
}

/// State shared by the walker's threads.
struct Shared<'s> {
    root: &'s Path,
    previous: Option<&'s Snapshot>,
    keep_contents_under: Option<u64>,
    /// The rules from above the workspace and the global ones.
    outer: Arc<Outer>,
    /// Rules to judge by instead of the ignore files on disk.
    recorded_rules: Option<&'s IgnoreRules>,
    /// Files recorded even where the rules leave them out.
    protected: Option<&'s ProtectedPaths>,
    /// Nothing but `protected` files is recorded: the walk starts as if the workspace itself
    /// were left out.
    only_protected: bool,
    /// Each thread's findings, added when it is done.
    parts: Mutex<Vec<Part>>,
    /// The first error that makes the snapshot fail.
    failure: Mutex<Option<io::Error>>,
}

impl Shared<'_> {
    fn fail(&self, err: io::Error) {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(err);
    }
}

/// One thread's findings.
#[derive(Default)]
struct Part {
    files: Vec<(Arc<str>, Entry)>,
    dirs: Vec<String>,
    raw_names: Vec<(String, PathBuf)>,
    hashed: usize,
    /// The ignore rules of each folder that has some, by its key with a trailing slash.
    rules: Vec<(String, Arc<Matchers>)>,
}

/// Stats, reuses or hashes the files one walker thread finds, on that thread, so hashing runs as
/// parallel as the walk.
struct Recorder<'s> {
    shared: &'s Shared<'s>,
    part: Part,
    buffer: Vec<u8>,
    nearby: Nearby<'s>,
}

/// Where a walker found a file, and how to get at it.
trait Place {
    /// `lstat` of the file.
    fn stat(&mut self) -> io::Result<Stat>;
    /// Opens it for hashing, without following a symlink, and without blocking should a FIFO
    /// have taken its place since it was listed.
    fn open(&mut self) -> io::Result<File>;
    /// Its path, for messages and for reading a symlink.
    fn path(&self) -> PathBuf;
}

/// The previous snapshot's files in one folder. A walker visits a folder's files one after
/// another, and the previous snapshot holds them (with the files of its subfolders) in one run:
/// finding the run once per folder and indexing it by name makes each lookup one hash instead of
/// a binary search over every path.
#[derive(Default)]
struct Nearby<'s> {
    /// The folder, with its trailing slash (empty for the workspace itself).
    folder: Option<String>,
    run: std::ops::Range<usize>,
    /// Index of each file directly in the folder, by name, when the run is small enough to be
    /// worth indexing; otherwise the run is binary searched.
    by_name: HashMap<&'s str, usize>,
}

/// Runs longer than this (a folder above many others) are binary searched, not indexed.
const NEARBY_INDEX_LIMIT: usize = 1024;

impl<'s> Nearby<'s> {
    /// Looks up the files of `folder` (with its trailing slash) from now on, unless it already
    /// does.
    fn enter(&mut self, files: &'s [(Arc<str>, Entry)], folder: &str) {
        if self.folder.as_deref() == Some(folder) {
            return;
        }
        let start = files.partition_point(|(path, _)| &**path < folder);
        let len = files[start..].partition_point(|(path, _)| path.starts_with(folder));
        self.run = start..start + len;
        self.folder = Some(folder.to_owned());
        self.by_name.clear();
        if len <= NEARBY_INDEX_LIMIT {
            for (index, (path, _)) in files[self.run.clone()].iter().enumerate() {
                let file = &path[folder.len()..];
                if !file.contains('/') {
                    self.by_name.insert(file, start + index);
                }
            }
        }
    }

    /// The index in `files` of `name` in the folder entered last.
    fn find(&self, files: &'s [(Arc<str>, Entry)], name: &str) -> Option<usize> {
        if self.run.len() <= NEARBY_INDEX_LIMIT {
            return self.by_name.get(name).copied();
        }
        let skip = self.folder.as_ref().map_or(0, String::len);
        let run = &files[self.run.clone()];
        let index = run
            .binary_search_by(|(path, _)| path.as_bytes()[skip..].cmp(name.as_bytes()))
            .ok()?;
        Some(self.run.start + index)
    }
}

/// What reading a file gave.
enum Contents {
    Read {
        hash: [u8; 32],
        kept: Option<Arc<[u8]>>,
    },
    Unreadable,
    /// It vanished or changed type since it was listed.
    Gone,
}

impl<'s> Recorder<'s> {
    fn new(shared: &'s Shared<'s>) -> Recorder<'s> {
        // Each thread may find nearly every file: reserving that much up front costs address space,
        // not memory, and saves copying large vectors as they grow.
        let expected = shared.previous.map_or(0, Snapshot::len);
        Recorder {
            shared,
            part: Part {
                files: Vec::with_capacity(expected),
                ..Part::default()
            },
            buffer: Vec::new(),
            nearby: Nearby::default(),
        }
    }

    /// Hands this thread's findings over.
    fn finish(self) {
        self.shared
            .parts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.part);
    }

    /// The previous snapshot's files of this folder (with its trailing slash) are looked up next.
    fn enter(&mut self, folder: &str) {
        if let Some(previous) = self.shared.previous {
            self.nearby.enter(&previous.files, folder);
        }
    }

    /// The previous snapshot's file `name` in the folder entered last, with its index there.
    fn previous_entry(&self, name: &str) -> Option<(usize, &'s (Arc<str>, Entry))> {
        let files = &self.shared.previous?.files;
        let index = self.nearby.find(files, name)?;
        Some((index, &files[index]))
    }

    /// Records the file at `place`, found by the name `name` in the folder entered last; `key`
    /// makes its key when the previous snapshot does not have one to share. Nothing is recorded
    /// when it vanished or is not a file or symlink.
    fn record(
        &mut self,
        place: &mut impl Place,
        name: &str,
        key: impl FnOnce() -> Arc<str>,
    ) -> io::Result<()> {
        let stat = match place.stat() {
            Ok(stat) => stat,
            Err(err) if skippable(&err) => return Ok(()),
            Err(err) => return Err(with_path(&err, &place.path())),
        };
        let Some(kind) = stat.kind else {
            return Ok(());
        };
        let (size, mode) = (stat.size, stat.mode);
        let keep = self
            .shared
            .keep_contents_under
            .is_some_and(|limit| size <= limit);
        let mut entry = Entry {
            state: FileState {
                size,
                mtime_ns: stat.mtime_ns,
                hash: [0; 32],
                executable: kind == Kind::File && mode & 0o111 != 0,
            },
            kind,
            ctime_ns: stat.ctime_ns,
            inode: stat.inode,
            mode,
            readable: true,
            contents: None,
            order: NEW,
        };
        let old = self.previous_entry(name);
        let key = match old {
            Some((index, (old_key, _))) => {
                entry.order = index;
                Arc::clone(old_key)
            }
            None => key(),
        };
        if let Some((_, (_, previous))) = old
            && self.reusable(previous, &entry)
            && (!keep || previous.contents.is_some())
        {
            entry.state.hash = previous.state.hash;
            entry.contents = if keep {
                previous.contents.clone()
            } else {
                None
            };
            self.part.files.push((key, entry));
            return Ok(());
        }
        let contents = match kind {
            Kind::Symlink => read_link(&place.path(), keep)?,
            Kind::File => self.read_file(place, size, keep)?,
        };
        match contents {
            Contents::Read { hash, kept } => {
                self.part.hashed += 1;
                entry.state.hash = hash;
                entry.contents = kept;
            }
            Contents::Unreadable => {
                entry.state.hash = *blake3::hash(&[]).as_bytes();
                entry.readable = false;
            }
            Contents::Gone => return Ok(()),
        }
        self.part.files.push((key, entry));
        Ok(())
    }

    /// Whether the previous snapshot's entry `old` may lend its hash to `entry`.
    fn reusable(&self, old: &Entry, entry: &Entry) -> bool {
        let Some(previous) = self.shared.previous else {
            return false;
        };
        let settled =
            entry.state.mtime_ns.max(entry.ctime_ns) < previous.started_ns - RACY_MARGIN_NS;
        let same = old.readable
            && old.kind == entry.kind
            && old.state.size == entry.state.size
            && old.state.mtime_ns == entry.state.mtime_ns
            && old.ctime_ns == entry.ctime_ns
            && old.inode == entry.inode;
        same && settled
    }

    /// Hashes a regular file, keeping its bytes when asked.
    fn read_file(&mut self, place: &mut impl Place, size: u64, keep: bool) -> io::Result<Contents> {
        let mut file = match place.open() {
            Ok(file) => file,
            Err(err) => return unread(&err, &place.path()),
        };
        if keep {
            let capacity = usize::try_from(size).unwrap_or(0).saturating_add(1);
            let mut bytes = Vec::with_capacity(capacity);
            if let Err(err) = file.read_to_end(&mut bytes) {
                return unread(&err, &place.path());
            }
            let hash = *blake3::hash(&bytes).as_bytes();
            return Ok(Contents::Read {
                hash,
                kept: Some(Arc::from(bytes)),
            });
        }
        if self.buffer.is_empty() {
            self.buffer = vec![0; READ_BUFFER];
        }
        let mut hasher = blake3::Hasher::new();
        loop {
            match file.read(&mut self.buffer) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&self.buffer[..n]);
                }
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => return unread(&err, &place.path()),
            }
        }
        Ok(Contents::Read {
            hash: *hasher.finalize().as_bytes(),
            kept: None,
        })
    }
}

/// The walk: the crate's own on Linux (see [`linux`]).
#[cfg(target_os = "linux")]
fn walk(excludes: Arc<[Exclude]>, shared: &Shared<'_>) {
    linux::walk(&excludes, shared);
}

/// The walk elsewhere: see [`walk_portable`].
#[cfg(not(target_os = "linux"))]
fn walk(excludes: Arc<[Exclude]>, shared: &Shared<'_>) {
    walk_portable(excludes, shared);
}

/// Walks with the `ignore` crate's parallel walker with its own filters off: what is left out,
/// and what is recorded all the same, is judged in its `filter_entry` by [`rules`], as the Linux
/// walker judges it. The crate's own ignore handling cannot judge by an earlier snapshot's rules,
/// nor record protected files it ignores.
#[cfg(any(not(target_os = "linux"), test))]
fn walk_portable(excludes: Arc<[Exclude]>, shared: &Shared<'_>) {
    let judge = Arc::new(Judge {
        root: shared.root.to_path_buf(),
        excludes,
        outer: Arc::clone(&shared.outer),
        recorded_rules: shared.recorded_rules.cloned(),
        protected: shared.protected.cloned(),
        only_protected: shared.only_protected,
        folders: std::sync::RwLock::new(HashMap::new()),
        found: Mutex::new(Vec::new()),
    });
    let mut builder = WalkBuilder::new(shared.root);
    builder.standard_filters(false).follow_links(false);
    let filter = Arc::clone(&judge);
    builder.filter_entry(move |entry| filter.keeps(entry));
    builder.build_parallel().visit(&mut Collectors { shared });
    let found = std::mem::take(&mut *judge.found.lock().unwrap_or_else(PoisonError::into_inner));
    shared
        .parts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Part {
            rules: found,
            ..Part::default()
        });
}

/// Decides, for [`walk_portable`], which entries are walked.
#[cfg(any(not(target_os = "linux"), test))]
struct Judge {
    root: PathBuf,
    excludes: Arc<[Exclude]>,
    outer: Arc<Outer>,
    recorded_rules: Option<IgnoreRules>,
    protected: Option<ProtectedPaths>,
    only_protected: bool,
    /// What holds for the entries of each folder met so far, by its path.
    folders: std::sync::RwLock<HashMap<PathBuf, FolderRules>>,
    /// Each folder's own ignore rules, by its key with a trailing slash.
    found: Mutex<Vec<(String, Arc<Matchers>)>>,
}

/// What holds for the entries of one folder.
#[cfg(any(not(target_os = "linux"), test))]
#[derive(Clone)]
enum FolderRules {
    /// They are matched against these rules (`None`: none from the workspace's folders).
    Matched(Option<Arc<Level>>),
    /// The folder is left out: only protected files in it are recorded.
    LeftOut,
}

#[cfg(any(not(target_os = "linux"), test))]
impl Judge {
    /// Whether the walk records `entry` and, for a folder, enters it.
    fn keeps(&self, entry: &DirEntry) -> bool {
        if !entered(entry, &self.root, &self.excludes) {
            return false;
        }
        let path = entry.path();
        let (Some(folder), Some(rel)) = (path.parent(), below(path, &self.root)) else {
            return true;
        };
        let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
        let left_out = match self.folder(folder) {
            FolderRules::LeftOut => true,
            FolderRules::Matched(level) => {
                (level.is_some() || self.outer.any()) && {
                    let from_above = if self.outer.has_above() {
                        self.outer.canonical.join(rel)
                    } else {
                        PathBuf::new()
                    };
                    self.outer
                        .ignored(level.as_deref(), path, &from_above, is_dir)
                }
            }
        };
        if !left_out {
            return true;
        }
        let Some(protected) = &self.protected else {
            return false;
        };
        if !is_dir {
            return protected.matches(rel);
        }
        let kept = protected.may_hold(key_of(rel).as_bytes());
        if kept {
            self.folders
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(path.to_path_buf(), FolderRules::LeftOut);
        }
        kept
    }

    /// What holds for the entries of the folder `dir`, worked out when its first one is judged.
    fn folder(&self, dir: &Path) -> FolderRules {
        let known = self
            .folders
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(dir)
            .cloned();
        if let Some(known) = known {
            return known;
        }
        let judged = if dir == self.root {
            if self.only_protected {
                FolderRules::LeftOut
            } else {
                self.rules_of(dir, None)
            }
        } else {
            match dir.parent().map(|parent| self.folder(parent)) {
                Some(FolderRules::Matched(parent)) => self.rules_of(dir, parent.as_ref()),
                _ => FolderRules::LeftOut,
            }
        };
        self.folders
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dir.to_path_buf(), judged.clone());
        judged
    }

    /// The rules for the entries of `dir`, a folder that is not left out, whose parent's rules
    /// are `parent`: those an earlier snapshot recorded, or else those of its ignore files.
    fn rules_of(&self, dir: &Path, parent: Option<&Arc<Level>>) -> FolderRules {
        let mut key = below(dir, &self.root)
            .map(|rel| key_of(rel).into_owned())
            .unwrap_or_default();
        if !key.is_empty() {
            key.push('/');
        }
        if let Some(recorded) = &self.recorded_rules {
            return FolderRules::Matched(Level::recorded(recorded, &key, parent));
        }
        let has = |name: &str| fs::symlink_metadata(dir.join(name)).is_ok();
        let (level, own) = Level::read(
            dir,
            (has(HELIXFLOW_IGNORE), has(".gitignore"), has(".git")),
            parent,
        );
        if let Some(own) = own {
            self.found
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((key, own));
        }
        FolderRules::Matched(level)
    }
}

/// Walks with the `ignore` crate's parallel walker, configured for the rules in the module
/// documentation: the reference both walkers are compared with in the tests.
#[cfg(all(target_os = "linux", test))]
fn walk_with_ignore(excludes: Arc<[Exclude]>, shared: &Shared<'_>) {
    let workspace = shared.root;
    let mut builder = WalkBuilder::new(workspace);
    builder
        .hidden(false)
        .ignore(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .add_custom_ignore_filename(HELIXFLOW_IGNORE);
    let root = workspace.to_path_buf();
    builder.filter_entry(move |entry| entered(entry, &root, &excludes));
    builder.build_parallel().visit(&mut Collectors { shared });
}

/// Makes one [`Collector`] per walker thread.
#[cfg(any(not(target_os = "linux"), test))]
struct Collectors<'s> {
    shared: &'s Shared<'s>,
}

#[cfg(any(not(target_os = "linux"), test))]
impl<'s> ParallelVisitorBuilder<'s> for Collectors<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Collector {
            recorder: Some(Recorder::new(self.shared)),
        })
    }
}

/// Records what one thread of the `ignore` crate's walker visits.
#[cfg(any(not(target_os = "linux"), test))]
struct Collector<'s> {
    /// `None` once handed over.
    recorder: Option<Recorder<'s>>,
}

/// A file found by the `ignore` crate's walker, reached by its whole path.
#[cfg(any(not(target_os = "linux"), test))]
struct ByPath<'p>(&'p Path);

#[cfg(any(not(target_os = "linux"), test))]
impl Place for ByPath<'_> {
    fn stat(&mut self) -> io::Result<Stat> {
        fs::symlink_metadata(self.0).map(|meta| Stat::of(&meta))
    }

    fn open(&mut self) -> io::Result<File> {
        open_no_follow(self.0)
    }

    fn path(&self) -> PathBuf {
        self.0.to_path_buf()
    }
}

#[cfg(any(not(target_os = "linux"), test))]
impl ParallelVisitor for Collector<'_> {
    fn visit(&mut self, result: Result<DirEntry, ignore::Error>) -> WalkState {
        let Some(recorder) = self.recorder.as_mut() else {
            return WalkState::Quit;
        };
        let entry = match result {
            Ok(entry) => entry,
            Err(err) => return walk_error(recorder.shared, &err),
        };
        if entry.depth() == 0 {
            return WalkState::Continue;
        }
        let Some(file_type) = entry.file_type() else {
            return WalkState::Continue;
        };
        let Some(rel) = below(entry.path(), recorder.shared.root) else {
            return WalkState::Continue;
        };
        let key = key_of(rel);
        if file_type.is_dir() {
            recorder.part.dirs.push(key.into_owned());
            return WalkState::Continue;
        }
        if !file_type.is_file() && !file_type.is_symlink() {
            return WalkState::Continue;
        }
        let split = key.rfind('/').map_or(0, |slash| slash + 1);
        recorder.enter(&key[..split]);
        let found = recorder.part.files.len();
        match recorder.record(&mut ByPath(entry.path()), &key[split..], || {
            Arc::from(&*key)
        }) {
            Ok(()) => {
                if recorder.part.files.len() > found && rel.to_str().is_none() {
                    recorder
                        .part
                        .raw_names
                        .push((key.into_owned(), rel.to_path_buf()));
                }
                WalkState::Continue
            }
            Err(err) => {
                recorder.shared.fail(err);
                WalkState::Quit
            }
        }
    }
}

#[cfg(any(not(target_os = "linux"), test))]
impl Drop for Collector<'_> {
    fn drop(&mut self) {
        if let Some(recorder) = self.recorder.take() {
            recorder.finish();
        }
    }
}

/// Vanished files and unlistable folders are skipped; other I/O errors fail the snapshot. Errors
/// without I/O (a bad pattern in an ignore file) are skipped, as git skips such lines.
#[cfg(any(not(target_os = "linux"), test))]
fn walk_error(shared: &Shared<'_>, err: &ignore::Error) -> WalkState {
    match err.io_error() {
        Some(io_err) if !skippable(io_err) => {
            shared.fail(io::Error::new(io_err.kind(), err.to_string()));
            WalkState::Quit
        }
        _ => WalkState::Continue,
    }
}

/// Hashes a symlink's target path, keeping it when asked.
fn read_link(path: &Path, keep: bool) -> io::Result<Contents> {
    match fs::read_link(path) {
        Ok(target) => {
            let bytes = target.as_os_str().as_encoded_bytes();
            let hash = *blake3::hash(bytes).as_bytes();
            Ok(Contents::Read {
                hash,
                kept: keep.then(|| Arc::from(bytes)),
            })
        }
        // No longer a symlink.
        Err(err) if err.kind() == ErrorKind::InvalidInput => Ok(Contents::Gone),
        Err(err) => unread(&err, path),
    }
}

/// Sorts a failed open or read: gone, unreadable, or a real error.
fn unread(err: &io::Error, path: &Path) -> io::Result<Contents> {
    if err.kind() == ErrorKind::PermissionDenied {
        Ok(Contents::Unreadable)
    } else if changed_underfoot(err) {
        Ok(Contents::Gone)
    } else {
        Err(with_path(err, path))
    }
}

/// Errors meaning the file or folder vanished, or changed type, since it was listed.
fn changed_underfoot(err: &io::Error) -> bool {
    #[cfg(unix)]
    if err.raw_os_error() == Some(libc::ELOOP) {
        // O_NOFOLLOW met a symlink where a file was listed.
        return true;
    }
    matches!(
        err.kind(),
        ErrorKind::NotFound
            | ErrorKind::NotADirectory
            | ErrorKind::IsADirectory
            | ErrorKind::WouldBlock
    )
}

/// Errors the walk skips: vanished entries and folders that cannot be listed.
fn skippable(err: &io::Error) -> bool {
    err.kind() == ErrorKind::PermissionDenied || changed_underfoot(err)
}

/// Opens a file for hashing without following a symlink, and without blocking should a FIFO have
/// taken its place since it was listed.
#[cfg(any(not(target_os = "linux"), test))]
fn open_no_follow(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options.open(path)
}

/// Whether the walker enters or records `entry`: never `.git`, never an excluded folder.
#[cfg(any(not(target_os = "linux"), test))]
fn entered(entry: &DirEntry, root: &Path, excludes: &[Exclude]) -> bool {
    let name = name_of(entry);
    if name == ".git" {
        return false;
    }
    // Depth and name first: the path comparison is needed for few entries, if any.
    !excludes.iter().any(|exclude| {
        exclude.depth == entry.depth()
            && exclude.path.file_name() == Some(name)
            && below(entry.path(), root) == Some(exclude.path.as_path())
    })
}

/// The entry's file name. The walker's paths never end in a separator, so the bytes after the last
/// one are the name: cheaper than `file_name`, which parses components.
#[cfg(all(unix, any(not(target_os = "linux"), test)))]
fn name_of(entry: &DirEntry) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    let bytes = entry.path().as_os_str().as_bytes();
    let name = bytes.rsplit(|&byte| byte == b'/').next().unwrap_or(bytes);
    std::ffi::OsStr::from_bytes(name)
}

/// The entry's file name.
#[cfg(not(unix))]
fn name_of(entry: &DirEntry) -> &std::ffi::OsStr {
    entry.file_name()
}

/// A folder the walk never enters.
struct Exclude {
    /// Relative, without `.` or `..`.
    path: PathBuf,
    /// Its number of components: the walker's depth for it.
    depth: usize,
}

/// An excluded folder as a plain relative path, or `None` when it cannot be inside the workspace.
fn relative_exclude(workspace: &Path, exclude: &Path) -> Option<PathBuf> {
    let rel = if exclude.is_absolute() {
        match exclude.strip_prefix(workspace) {
            Ok(rel) => rel.to_path_buf(),
            Err(_) => exclude
                .strip_prefix(fs::canonicalize(workspace).ok()?)
                .ok()?
                .to_path_buf(),
        }
    } else {
        exclude.to_path_buf()
    };
    let mut clean = PathBuf::new();
    for component in rel.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!clean.as_os_str().is_empty()).then_some(clean)
}

/// `path` relative to `root`. The walker builds every path by joining names onto the root, so
/// cutting off the root's bytes is enough, and much cheaper than comparing components.
#[cfg(all(unix, any(not(target_os = "linux"), test)))]
fn below<'p>(path: &'p Path, root: &Path) -> Option<&'p Path> {
    use std::os::unix::ffi::OsStrExt;
    let prefix = root.as_os_str().as_bytes();
    let rest = path
        .as_os_str()
        .as_bytes()
        .strip_prefix(prefix)
        .and_then(|rest| match rest {
            [b'/', tail @ ..] => Some(tail),
            _ if prefix.ends_with(b"/") => Some(rest),
            _ => None,
        });
    match rest {
        Some(rest) => Some(Path::new(std::ffi::OsStr::from_bytes(rest))),
        None => path.strip_prefix(root).ok(),
    }
}

/// `path` relative to `root`.
#[cfg(not(unix))]
fn below<'p>(path: &'p Path, root: &Path) -> Option<&'p Path> {
    path.strip_prefix(root).ok()
}

/// A relative path as snapshots write it: forward slashes, lossy where not UTF-8.
fn key_of(rel: &Path) -> Cow<'_, str> {
    // `to_str` first: `to_string_lossy` takes a slower path even for valid UTF-8.
    let text = match rel.to_str() {
        Some(text) => Cow::Borrowed(text),
        None => rel.to_string_lossy(),
    };
    if std::path::MAIN_SEPARATOR == '/' {
        text
    } else {
        Cow::Owned(text.replace('\\', "/"))
    }
}

/// What `lstat` says about a file.
struct Stat {
    /// `None` for anything but a regular file or a symlink.
    kind: Option<Kind>,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    inode: u64,
    mode: u32,
}

impl Stat {
    #[cfg(unix)]
    fn of(meta: &Metadata) -> Stat {
        use std::os::unix::fs::MetadataExt;
        Stat {
            kind: kind_of(meta),
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            inode: meta.ino(),
            mode: meta.mode(),
        }
    }

    #[cfg(not(unix))]
    fn of(meta: &Metadata) -> Stat {
        Stat {
            kind: kind_of(meta),
            size: meta.len(),
            mtime_ns: meta.modified().map_or(0, nanos_since_epoch),
            ctime_ns: 0,
            inode: 0,
            mode: if meta.permissions().readonly() {
                0o444
            } else {
                0o644
            },
        }
    }

    #[cfg(target_os = "linux")]
    #[allow(
        clippy::useless_conversion,
        reason = "the field types differ between 32- and 64-bit targets"
    )]
    fn of_raw(raw: &libc::stat) -> Stat {
        let kind = match raw.st_mode & libc::S_IFMT {
            libc::S_IFREG => Some(Kind::File),
            libc::S_IFLNK => Some(Kind::Symlink),
            _ => None,
        };
        Stat {
            kind,
            size: u64::try_from(raw.st_size).unwrap_or(0),
            mtime_ns: i128::from(raw.st_mtime) * 1_000_000_000 + i128::from(raw.st_mtime_nsec),
            ctime_ns: i128::from(raw.st_ctime) * 1_000_000_000 + i128::from(raw.st_ctime_nsec),
            inode: u64::from(raw.st_ino),
            mode: u32::from(raw.st_mode),
        }
    }
}

fn kind_of(meta: &Metadata) -> Option<Kind> {
    if meta.file_type().is_symlink() {
        Some(Kind::Symlink)
    } else if meta.is_file() {
        Some(Kind::File)
    } else {
        None
    }
}

/// Whether the file's inode last changed before `started_ns`: it existed before the snapshot.
#[cfg(unix)]
fn changed_before(meta: &Metadata, started_ns: i128) -> bool {
    Stat::of(meta).ctime_ns < started_ns
}

/// Without an inode change time, no file can be shown to predate the snapshot.
#[cfg(not(unix))]
fn changed_before(_meta: &Metadata, _started_ns: i128) -> bool {
    false
}

/// Now, on the clock the kernel stamps files with. Linux stamps files from the coarse clock, which
/// can lag the precise one by a tick: a file written just after the snapshot began must not look
/// older than the snapshot.
fn file_clock_now() -> i128 {
    #[cfg(target_os = "linux")]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec and the clock id is a constant Linux knows.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &raw mut now) } == 0 {
            return i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec);
        }
    }
    nanos_since_epoch(SystemTime::now())
}

fn nanos_since_epoch(time: SystemTime) -> i128 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).unwrap_or(i128::MAX),
        Err(before) => -i128::try_from(before.duration().as_nanos()).unwrap_or(i128::MAX),
    }
}

fn system_time(nanos: i128) -> Option<SystemTime> {
    let magnitude = u64::try_from(nanos.unsigned_abs() / 1_000_000_000).ok()?;
    let rest = u32::try_from(nanos.unsigned_abs() % 1_000_000_000).ok()?;
    let offset = Duration::new(magnitude, rest);
    if nanos >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
}

/// Whether a folder on the way to `rel` (not `rel` itself) is a symlink.
fn symlinked_folder_in(workspace: &Path, rel: &Path) -> io::Result<bool> {
    let mut current = workspace.to_path_buf();
    let Some(parent) = rel.parent() else {
        return Ok(false);
    };
    for component in parent.components() {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => return Ok(true),
            Ok(_) => {}
            Err(err) if changed_underfoot(&err) => return Ok(false),
            Err(err) => return Err(with_path(&err, &current)),
        }
    }
    Ok(false)
}

/// Writes a new file with these bytes, permission bits and modification time. `Ok(true)`: written.
fn write_file(path: &Path, bytes: &[u8], mode: u32, mtime_ns: i128) -> io::Result<bool> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = match options.open(path) {
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            // Left behind by a restore that was interrupted.
            fs::remove_file(path)?;
            options.open(path)?
        }
        other => other?,
    };
    file.write_all(bytes)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(mode & 0o7777))?;
    }
    #[cfg(not(unix))]
    {
        let mut permissions = file.metadata()?.permissions();
        permissions.set_readonly(mode & 0o222 == 0);
        file.set_permissions(permissions)?;
    }
    if let Some(time) = system_time(mtime_ns) {
        file.set_modified(time)?;
    }
    Ok(true)
}

/// Creates a symlink to the kept target. `Ok(false)`: symlinks cannot be made on this platform.
#[cfg(unix)]
fn make_symlink(path: &Path, target: &[u8]) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::OsStr::from_bytes(target);
    match std::os::unix::fs::symlink(target, path) {
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            fs::remove_file(path)?;
            std::os::unix::fs::symlink(target, path)?;
        }
        other => other?,
    }
    Ok(true)
}

/// Creates a symlink to the kept target. `Ok(false)`: symlinks cannot be made on this platform.
#[cfg(not(unix))]
fn make_symlink(_path: &Path, _target: &[u8]) -> io::Result<bool> {
    Ok(false)
}

/// Removes a temporary file after a failure; the failure itself is what gets reported.
fn remove_quietly(path: &Path) {
    // The original error matters more than a failure to tidy up after it.
    let _ = fs::remove_file(path);
}

fn with_path(err: &io::Error, path: &Path) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

/// Collects what `restore` could not do.
#[derive(Default)]
struct Restoring {
    not_restored: Vec<String>,
    failure: Option<io::Error>,
}

impl Restoring {
    fn record(&mut self, path: &str, result: io::Result<bool>) {
        match result {
            Ok(true) => {}
            Ok(false) => self.not_restored.push(path.to_owned()),
            Err(err) => {
                self.not_restored.push(path.to_owned());
                self.failure.get_or_insert(err);
            }
        }
    }

    fn finish(mut self) -> io::Result<Vec<String>> {
        if let Some(err) = self.failure {
            return Err(err);
        }
        self.not_restored.sort_unstable();
        self.not_restored.dedup();
        Ok(self.not_restored)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    //! The crate's walkers against the `ignore` crate's, which defines the rules: all must find
    //! the same files, folders and names on disk. Judging by an earlier snapshot's rules, and
    //! recording protected files that are ignored, are the crate's own: there the Linux walker and
    //! the portable one must agree with each other.

    use proptest::prelude::*;

    use super::*;

    /// A snapshot taken with the `ignore` crate's walker.
    fn take_with_ignore(workspace: &Path, options: &SnapshotOptions) -> Snapshot {
        Snapshot::take_with(workspace, options, None, walk_with_ignore).expect("snapshot")
    }

    /// A snapshot taken with the walker other systems use.
    fn take_portable(workspace: &Path, options: &SnapshotOptions) -> Snapshot {
        Snapshot::take_with(workspace, options, None, walk_portable).expect("snapshot")
    }

    /// Everything a walk decides: files (with all that is recorded of them), folders, real names.
    type Summary<'s> = (
        Vec<(&'s str, String)>,
        &'s BTreeSet<String>,
        &'s BTreeMap<String, PathBuf>,
    );

    fn summary(snapshot: &Snapshot) -> Summary<'_> {
        (
            snapshot
                .files
                .iter()
                .map(|(path, entry)| (&**path, format!("{entry:?}")))
                .collect(),
            &snapshot.dirs,
            &snapshot.raw_names,
        )
    }

    /// Files (path and contents) in folders named to meet the rules, and ignore files with rules
    /// that often contradict each other.
    fn tree() -> impl Strategy<Value = Vec<(String, String)>> {
        let part = prop::sample::select(vec!["a", "b", "build", ".hidden", "keep", "x.log", "c"]);
        let file =
            prop::sample::select(vec!["f.txt", "keep.txt", "x.log", "keep.log", "c", ".env"]);
        let files = prop::collection::vec((prop::collection::vec(part, 0..3), file), 1..24);
        let folder = prop::sample::select(vec!["", "a/", "a/b/", "b/", "build/", "keep/", "c/"]);
        let name = prop::sample::select(vec![".gitignore", ".helixflowignore"]);
        let rules =
            prop::collection::vec((folder, name, prop::collection::vec(rule(), 1..4)), 0..6);
        (files, rules).prop_map(|(files, rules)| {
            let mut tree: Vec<(String, String)> = files
                .into_iter()
                .map(|(folders, file)| {
                    let mut path = folders.join("/");
                    if !path.is_empty() {
                        path.push('/');
                    }
                    path.push_str(file);
                    (path, "contents".to_owned())
                })
                .collect();
            tree.extend(
                rules
                    .into_iter()
                    .map(|(folder, name, rules)| (format!("{folder}{name}"), rules.join("\n"))),
            );
            tree
        })
    }

    /// Ignore rules that often contradict each other.
    fn rule() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "*.log",
            "!keep.log",
            "build/",
            "/a",
            "a/b",
            "*.txt",
            "!*.txt",
            "b",
            "**/c",
            ".hidden",
            "!keep",
            "keep/",
            "!build/",
            "#x",
            "",
            "[",
            "\\!x",
            "c/",
            "/b/",
            "x.log/",
            "!f.txt",
            "!c",
            "!x.log",
            "*",
        ])
    }

    /// Lays `entries` out in `dir/workspace`, under an ignore file that holds for it from above,
    /// with rules in git's exclude files when `exclude_info`; returns the workspace.
    fn lay_out(dir: &Path, entries: &[(String, String)], exclude_info: bool) -> PathBuf {
        let root = dir.join("workspace");
        fs::create_dir(&root).unwrap();
        fs::write(dir.join(".gitignore"), "workspace/a/x.log\n").unwrap();
        for (path, text) in entries {
            let path = root.join(path);
            // A path already taken by a file or folder stays what it is.
            if fs::create_dir_all(path.parent().unwrap()).is_ok() {
                let _ = fs::write(&path, text);
            }
        }
        if exclude_info {
            fs::create_dir_all(root.join(".git/info")).unwrap();
            fs::write(root.join(".git/info/exclude"), "*.txt\n!keep.txt\n").unwrap();
            fs::create_dir_all(root.join("b/.git/info")).unwrap();
            fs::write(root.join("b/.git/info/exclude"), "f.txt\nc\n").unwrap();
        }
        root
    }

    /// Every file below `root` but in `.git` and the excluded folders, ignored or not.
    fn every_file(root: &Path, rel: &str, excluded: &[&str], found: &mut Vec<String>) {
        for entry in fs::read_dir(root.join(rel)).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if name == ".git" || excluded.contains(&path.as_str()) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                every_file(root, &path, excluded, found);
            } else {
                found.push(path);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_walker_finds_the_same(entries in tree(), exclude_info in any::<bool>()) {
            let dir = tempfile::tempdir().unwrap();
            let root = lay_out(dir.path(), &entries, exclude_info);
            let options = SnapshotOptions {
                exclude: vec![PathBuf::from("build/c"), PathBuf::from(".hidden")],
                ..SnapshotOptions::default()
            };
            let ours = Snapshot::take(&root, &options, None).unwrap();
            let reference = take_with_ignore(&root, &options);
            prop_assert_eq!(summary(&ours), summary(&reference));
            let portable = take_portable(&root, &options);
            prop_assert_eq!(summary(&ours), summary(&portable));
        }

        #[test]
        fn earlier_rules_hide_nothing_and_protected_files_are_always_seen(
            entries in tree(),
            exclude_info in any::<bool>(),
            protect in prop::collection::vec(
                prop::sample::select(vec![
                    "*.log", "build/**", "**/c", "keep/*.txt", ".env", "a/**/x.log", "b/f.txt",
                ]),
                0..3,
            ),
            rewritten in prop::collection::vec(
                (
                    prop::sample::select(vec!["", "a/", "a/b/", "b/", "build/", "keep/", "c/"]),
                    prop::sample::select(vec![".gitignore", ".helixflowignore", ".git/info/exclude"]),
                    prop::collection::vec(rule(), 1..4),
                ),
                1..4,
            ),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = lay_out(dir.path(), &entries, exclude_info);
            let protect: Vec<String> = protect.into_iter().map(str::to_owned).collect();
            let options = SnapshotOptions {
                exclude: vec![PathBuf::from("build/c"), PathBuf::from(".hidden")],
                protected: ProtectedPaths::new(&protect).unwrap(),
                ..SnapshotOptions::default()
            };
            let before = Snapshot::take(&root, &options, None).unwrap();
            let portable = take_portable(&root, &options);
            prop_assert_eq!(summary(&before), summary(&portable));
            let mut on_disk = Vec::new();
            every_file(&root, "", &["build/c", ".hidden"], &mut on_disk);
            let protected = |path: &str| {
                protect.iter().any(|glob| {
                    let glob = crate::language::compile_glob(glob).unwrap();
                    glob.compile_matcher().is_match(path)
                })
            };
            for path in on_disk.iter().filter(|path| protected(path)) {
                prop_assert!(before.get(path).is_some(), "protected `{}` is not recorded", path);
            }
            let only = SnapshotOptions { only_protected: true, ..options.clone() };
            let only = Snapshot::take(&root, &only, None).unwrap();
            let expected: Vec<&str> =
                before.files().map(|(path, _)| path).filter(|path| protected(path)).collect();
            prop_assert_eq!(only.files().map(|(path, _)| path).collect::<Vec<_>>(), expected);

            let judged = SnapshotOptions { rules: before.ignore_rules(), ..options.clone() };
            let unchanged = Snapshot::take(&root, &judged, Some(&before)).unwrap();
            prop_assert_eq!(summary(&unchanged), summary(&before));

            // The rules change; the snapshot judged by the earlier ones loses no file.
            for (folder, name, rules) in &rewritten {
                let path = root.join(folder).join(name);
                if root.join(folder).is_dir() && fs::create_dir_all(path.parent().unwrap()).is_ok() {
                    let _ = fs::write(&path, rules.join("\n"));
                }
            }
            let after = Snapshot::take(&root, &judged, Some(&before)).unwrap();
            let portable = take_portable(&root, &judged);
            prop_assert_eq!(summary(&after), summary(&portable));
            let changes = before.diff(&after);
            prop_assert!(changes.deleted.is_empty(), "{:?}", changes);
            for path in changes.created.iter().chain(&changes.modified) {
                prop_assert!(
                    path.ends_with(".gitignore") || path.ends_with(".helixflowignore"),
                    "`{}` changed", path
                );
            }
        }
    }

    #[test]
    fn both_walkers_agree_on_names_that_are_not_utf8_and_symlinks() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let odd = root.join(std::ffi::OsStr::from_bytes(b"dir-\xff"));
        fs::create_dir_all(odd.join("sub")).unwrap();
        fs::write(
            odd.join("sub")
                .join(std::ffi::OsStr::from_bytes(b"a-\xfe.txt")),
            "a",
        )
        .unwrap();
        fs::write(odd.join(std::ffi::OsStr::from_bytes(b"b-\xfe.txt")), "b").unwrap();
        fs::write(odd.join(".gitignore"), "*.log\n").unwrap();
        fs::write(odd.join("c.log"), "c").unwrap();
        std::os::unix::fs::symlink("dir-\u{FFFD}", root.join("link")).unwrap();
        let options = SnapshotOptions::default();
        let ours = Snapshot::take(root, &options, None).unwrap();
        let reference = take_with_ignore(root, &options);
        assert_eq!(summary(&ours), summary(&reference));
        assert_eq!(summary(&ours), summary(&take_portable(root, &options)));
        assert_eq!(ours.len(), 4);
    }
}
