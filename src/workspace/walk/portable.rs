//! The walk on other systems than Linux (macOS, the BSDs): the `ignore` crate's parallel walker,
//! judged by the same rules as the Linux walker. Its paths are cut as bytes, as Unix paths are.
//! The tests also run it on Linux, to compare it with the Linux walker.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use super::{Exclude, Part, Place, Recorder, Shared, Stat, skippable};
use crate::workspace::rules::{Level, Matchers, Outer};
use crate::workspace::{HELIXFLOW_IGNORE, IgnoreRules, ProtectedPaths, key_of};

/// Walks with the `ignore` crate's parallel walker with its own filters off: what is left out,
/// and what is recorded all the same, is judged in its `filter_entry` by
/// [`crate::workspace::rules`], as the Linux walker judges it. The crate's own ignore handling
/// cannot judge by an earlier snapshot's rules, nor record protected files it ignores.
pub(in crate::workspace) fn walk(excludes: Arc<[Exclude]>, shared: &Shared<'_>) {
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

/// Decides, for [`walk`], which entries are walked.
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
#[derive(Clone)]
enum FolderRules {
    /// They are matched against these rules (`None`: none from the workspace's folders).
    Matched(Option<Arc<Level>>),
    /// The folder is left out: only protected files in it are recorded.
    LeftOut,
}

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

/// Makes one [`Collector`] per walker thread.
pub(super) struct Collectors<'s> {
    pub(super) shared: &'s Shared<'s>,
}

impl<'s> ParallelVisitorBuilder<'s> for Collectors<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Collector {
            recorder: Some(Recorder::new(self.shared)),
        })
    }
}

/// Records what one thread of the `ignore` crate's walker visits.
struct Collector<'s> {
    /// `None` once handed over.
    recorder: Option<Recorder<'s>>,
}

/// A file found by the `ignore` crate's walker, reached by its whole path.
struct ByPath<'p>(&'p Path);

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

impl Drop for Collector<'_> {
    fn drop(&mut self) {
        if let Some(recorder) = self.recorder.take() {
            recorder.finish();
        }
    }
}

/// Vanished files and unlistable folders are skipped; other I/O errors fail the snapshot. Errors
/// without I/O (a bad pattern in an ignore file) are skipped, as git skips such lines.
fn walk_error(shared: &Shared<'_>, err: &ignore::Error) -> WalkState {
    match err.io_error() {
        Some(io_err) if !skippable(io_err) => {
            shared.fail(io::Error::new(io_err.kind(), err.to_string()));
            WalkState::Quit
        }
        _ => WalkState::Continue,
    }
}

/// Opens a file for hashing without following a symlink, and without blocking should a FIFO have
/// taken its place since it was listed.
fn open_no_follow(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    options.open(path)
}

/// Whether the walker enters or records `entry`: never `.git`, never an excluded folder.
pub(super) fn entered(entry: &DirEntry, root: &Path, excludes: &[Exclude]) -> bool {
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
fn name_of(entry: &DirEntry) -> &OsStr {
    let bytes = entry.path().as_os_str().as_bytes();
    let name = bytes.rsplit(|&byte| byte == b'/').next().unwrap_or(bytes);
    OsStr::from_bytes(name)
}

/// `path` relative to `root`. The walker builds every path by joining names onto the root, so
/// cutting off the root's bytes is enough, and much cheaper than comparing components.
fn below<'p>(path: &'p Path, root: &Path) -> Option<&'p Path> {
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
        Some(rest) => Some(Path::new(OsStr::from_bytes(rest))),
        None => path.strip_prefix(root).ok(),
    }
}
