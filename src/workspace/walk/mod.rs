//! The walk that finds a workspace's files, and what is recorded of each. The walker is chosen
//! here, once: on Linux the crate's own (`linux.rs`), elsewhere the `ignore` crate's
//! (`portable.rs`), which the tests also run on Linux to compare the two. Both hand each file they
//! find, as a [`Place`], to a [`Recorder`] on the same thread, which stats it, reuses the previous
//! snapshot's hash or reads it, and collects the findings into [`Shared::parts`].

use std::collections::HashMap;
use std::fs::{self, File, Metadata};
use std::io::{self, ErrorKind, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::rules::{Matchers, Outer};
use super::snapshot::{Entry, Kind, NEW};
use super::{FileState, IgnoreRules, ProtectedPaths, Snapshot, changed_underfoot, os, with_path};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(any(not(target_os = "linux"), test))]
mod portable;
#[cfg(all(test, target_os = "linux"))]
mod tests;

/// The walk: the crate's own on Linux.
#[cfg(target_os = "linux")]
pub(super) use linux::walk;
/// The walk elsewhere: the `ignore` crate's.
#[cfg(not(target_os = "linux"))]
pub(super) use portable::walk;

/// Read buffer for hashing files whose contents are not kept.
const READ_BUFFER: usize = 64 * 1024;

/// State shared by the walker's threads.
pub(super) struct Shared<'s> {
    pub(super) root: &'s Path,
    pub(super) previous: Option<&'s Snapshot>,
    pub(super) keep_contents_under: Option<u64>,
    /// The rules from above the workspace and the global ones.
    pub(super) outer: Arc<Outer>,
    /// Rules to judge by instead of the ignore files on disk.
    pub(super) recorded_rules: Option<&'s IgnoreRules>,
    /// Files recorded even where the rules leave them out.
    pub(super) protected: Option<&'s ProtectedPaths>,
    /// Nothing but `protected` files is recorded: the walk starts as if the workspace itself
    /// were left out.
    pub(super) only_protected: bool,
    /// Each thread's findings, added when it is done.
    pub(super) parts: Mutex<Vec<Part>>,
    /// The first error that makes the snapshot fail.
    pub(super) failure: Mutex<Option<io::Error>>,
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
pub(super) struct Part {
    pub(super) files: Vec<(Arc<str>, Entry)>,
    pub(super) dirs: Vec<String>,
    pub(super) raw_names: Vec<(String, PathBuf)>,
    pub(super) hashed: usize,
    /// The ignore rules of each folder that has some, by its key with a trailing slash.
    pub(super) rules: Vec<(String, Arc<Matchers>)>,
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
                mode: if kind == Kind::File { mode & 0o7777 } else { 0 },
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
        let settled = entry.state.mtime_ns.max(entry.ctime_ns) < previous.settled_ns;
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

/// Errors the walk skips: vanished entries and folders that cannot be listed.
fn skippable(err: &io::Error) -> bool {
    err.kind() == ErrorKind::PermissionDenied || changed_underfoot(err)
}

/// A folder the walk never enters.
pub(super) struct Exclude {
    /// Relative, without `.` or `..`.
    pub(super) path: PathBuf,
    /// Its number of components: the walker's depth for it.
    pub(super) depth: usize,
}

/// An excluded folder as a plain relative path, or `None` when it cannot be inside the workspace.
pub(super) fn relative_exclude(workspace: &Path, exclude: &Path) -> Option<PathBuf> {
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

/// What `lstat` says about a file.
pub(super) struct Stat {
    /// `None` for anything but a regular file or a symlink.
    kind: Option<Kind>,
    size: u64,
    mtime_ns: i128,
    pub(super) ctime_ns: i128,
    inode: u64,
    mode: u32,
}

impl Stat {
    /// What `lstat` said, as the standard library gives it.
    pub(super) fn of(meta: &Metadata) -> Stat {
        Stat {
            kind: kind_of(meta),
            size: meta.len(),
            mtime_ns: os::mtime_ns(meta),
            ctime_ns: os::ctime_ns(meta),
            inode: os::inode(meta),
            mode: os::mode(meta),
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
