//! Workspace snapshots: every file of a workspace with its size, modification time, content hash
//! and permission bits, taken before and after each attempt to judge `scope`, `protect` and the
//! `changes` gate, and able to keep contents so that a verifier's changes can be undone byte-exact.
//!
//! What a snapshot sees, and why:
//! - Files and symlinks below the workspace, walked in parallel: on Linux by the walker in
//!   `walk/linux.rs`, elsewhere by the `ignore` crate's with its own filters off
//!   (`walk/portable.rs`); both judge what is ignored with the same code (`rules.rs`).
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
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{self, ErrorKind};
use std::path::Path;

pub(crate) mod git;
mod repository_guard;
mod restore;
mod rules;
mod snapshot;
mod stats;
mod take;
mod walk;

// The few things that differ between systems (permission bits, inode numbers and change times,
// symlinks, the clock files are stamped from), chosen once, here. helixflow runs on Unix only (its
// process supervision works with process groups and signals), so there is one set; the only other
// choice in this module is the walker's, in `walk/mod.rs`.
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as os;

pub(crate) use repository_guard::{RepositoryFingerprint, RepositoryGuard};
pub(crate) use rules::protect_root;
pub use rules::{IgnoreRules, ProtectedPaths};
pub(crate) use snapshot::ListedFile;
pub use snapshot::{Changes, FileState, Snapshot, SnapshotOptions};
pub(crate) use stats::{Stats, chunks_in_parallel_on_cores, in_parallel_on_cores};

/// Ignore files with `.gitignore` syntax that only helixflow reads.
const HELIXFLOW_IGNORE: &str = ".helixflowignore";

/// Files stamped this close to (or after) a snapshot's start are re-read by the next snapshot even
/// when size and times match: 2 s covers the coarsest common timestamp granularity (FAT).
const RACY_MARGIN_NS: i128 = 2_000_000_000;

/// The margin instead on a file system whose timestamps have nanoseconds
/// ([`SnapshotOptions::fine_timestamps`]): well above the kernel's clock tick (at most 10 ms).
pub(crate) const FINE_MARGIN_NS: i128 = 50_000_000;

/// What a file's metadata says of its contents, as the snapshot shortcut compares it: size,
/// modification time, inode change time and inode number. Every write moves the change time, and
/// no process can set it back, so a same-size rewrite whose modification time was put back is
/// still seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// Inode change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i128,
    /// Inode number.
    pub inode: u64,
}

impl FileStat {
    /// What `meta` says.
    pub(crate) fn of(meta: &std::fs::Metadata) -> FileStat {
        FileStat {
            size: meta.len(),
            mtime_ns: os::mtime_ns(meta),
            ctime_ns: os::ctime_ns(meta),
            inode: os::inode(meta),
        }
    }

    /// Whether a file that was `self` when it was read at `read_ns` ([`file_clock_now`]) has the
    /// same contents now that it is `now`, without reading it: the same on every count, and
    /// changed last well before it was read (git's "racy clean" rule: timestamps are coarse, so a
    /// file written in the tick it was read in may have changed again unseen).
    pub(crate) fn unchanged(&self, read_ns: i128, now: &FileStat) -> bool {
        self == now && self.settled(read_ns)
    }

    /// Whether the file last changed well before `read_ns`: the racy rule of
    /// [`FileStat::unchanged`].
    pub(crate) fn settled(&self, read_ns: i128) -> bool {
        self.mtime_ns.max(self.ctime_ns) < read_ns - RACY_MARGIN_NS
    }
}

/// Each entry of `folder` whose name `keep` takes, by name, with its identity (not following
/// symlinks); nothing when there is no folder.
pub(crate) fn identities_in(
    folder: &Path,
    keep: impl Fn(&OsStr) -> bool,
) -> BTreeMap<OsString, FileStat> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| keep(&entry.file_name()))
        .filter_map(|entry| {
            let meta = std::fs::symlink_metadata(entry.path()).ok()?;
            Some((entry.file_name(), FileStat::of(&meta)))
        })
        .collect()
}

/// Copies the regular file `from` to the new file `to`, permission bits included, by a
/// copy-on-write clone where the file system offers one; returns whether it was one.
pub(crate) fn clone_or_copy(from: &Path, to: &Path) -> io::Result<bool> {
    os::clone_or_copy(from, to)
}

/// Now, on the clock the system stamps files with.
pub(crate) fn file_clock_now() -> i128 {
    os::file_clock_now()
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

/// Errors meaning the file or folder vanished, or changed type, since it was listed.
fn changed_underfoot(err: &io::Error) -> bool {
    // O_NOFOLLOW met a symlink where a file was listed.
    os::met_symlink(err)
        || matches!(
            err.kind(),
            ErrorKind::NotFound
                | ErrorKind::NotADirectory
                | ErrorKind::IsADirectory
                | ErrorKind::WouldBlock
        )
}

fn with_path(err: &io::Error, path: &Path) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}
