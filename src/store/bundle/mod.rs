//! Bundles: a phase's result as one file that travels (`<run>/phases/<phase>/bundle.hxb`), to be
//! applied to another copy of the workspace: a CI job's fresh clone, or the workspace a worktree
//! was made from.
//!
//! The format, version 1, is a POSIX tar archive (ustar, with GNU long names) holding, in order:
//! - `manifest.json`: [`Manifest`], `"format": "helixflow-bundle"`, `"version": 1`, the phase,
//!   and every changed file with the BLAKE3 hash of its contents before (modified and deleted
//!   files) and after (created and modified ones), its kind (`file` or `symlink`) and mode;
//! - `files/<path>`: the contents after, of every created or modified file (a symlink entry for a
//!   symlink, with its target), with its permission bits;
//! - `journal/events.jsonl`: the phase's records in the run's journal, one event per line, as far
//!   as the journal had them when the bundle was written (the run's own journal has them all);
//! - `journal/phase/<path>`: the records of the phase's folder of the run (every attempt's
//!   `invocation.json`, `gates.json`, `changes.json` and the other JSON records that replay its
//!   verdict); the transcripts, prompts and logs stay in the run folder.
//!
//! Tar rather than a format of our own: it keeps binary contents, permission bits and symlinks as
//! they are, any machine can list or unpack it (`tar tf bundle.hxb`), and the `tar` crate reads
//! and writes it. Timestamps and owners are not kept (all zero), so that the same work makes the
//! same bundle. The workspace's ignored files and the state folder are never in a bundle: they are
//! not in the snapshots the changes come from.
//!
//! A bundle comes from elsewhere, so reading one trusts nothing in it ([`read`]): every entry is
//! streamed (memory does not grow with the size of its files or journal), the manifest and the
//! archive must agree exactly, and a few things are capped ([`MANIFEST_LIMIT`], [`NAME_LIMIT`]).
//! Applying one stages every file beside its target before anything is replaced ([`apply`]).

mod apply;
mod read;
mod write;

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

pub(crate) use read::{Bundle, contents};
pub(crate) use write::{Source, create};

/// The bundle's file name in a phase's folder of the run.
pub(crate) const FILE_NAME: &str = "bundle.hxb";
/// What `format` says in every bundle's manifest.
pub(crate) const FORMAT: &str = "helixflow-bundle";
/// The version of the format this helixflow writes and reads.
pub(crate) const VERSION: u32 = 1;

/// The largest `manifest.json` a reader accepts, in bytes (about 100,000 changed files).
pub(crate) const MANIFEST_LIMIT: u64 = 16 << 20;
/// The longest path, entry name or symlink target a reader accepts, in bytes (Linux's
/// `PATH_MAX`).
pub(crate) const NAME_LIMIT: usize = 4096;
/// The longest single name in a path, in bytes (`NAME_MAX`): a longer one could not be written.
const COMPONENT_LIMIT: usize = 255;

const MANIFEST: &str = "manifest.json";
const FILES: &str = "files/";
const EVENTS: &str = "journal/events.jsonl";
const PHASE_DIR: &str = "journal/phase/";

/// `manifest.json`: what a bundle holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// The format's version, [`VERSION`].
    pub version: u32,
    /// The pipeline's name.
    pub pipeline: String,
    /// The phase whose work this is.
    pub phase: String,
    /// The run it passed in.
    pub run_id: String,
    /// The passing attempt.
    pub attempt: u32,
    /// Every changed file, in path order.
    pub files: Vec<FileChange>,
}

/// One changed file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct FileChange {
    /// Relative to the workspace, forward slashes.
    pub path: String,
    /// What happened to it.
    pub change: ChangeKind,
    /// BLAKE3 of its contents before (for a symlink: of its target); modified and deleted files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// What it is afterwards; created and modified files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<FileAfter>,
}

/// Created, modified or deleted.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ChangeKind {
    /// Exists only afterwards.
    Created,
    /// Its contents, mode or kind changed.
    Modified,
    /// Exists only before.
    Deleted,
}

/// A file as a bundle leaves it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct FileAfter {
    /// `file` or `symlink`.
    pub kind: FileKind,
    /// Permission bits (files only; 0 for a symlink).
    pub mode: u32,
    /// BLAKE3 of the contents (for a symlink: of its target).
    pub hash: String,
    /// Size in bytes.
    pub size: u64,
}

/// A regular file or a symlink.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FileKind {
    /// A regular file.
    File,
    /// A symlink (its contents are its target).
    Symlink,
}

/// Why a bundle does not apply to a workspace, for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conflict {
    /// The file.
    pub path: String,
    /// What is in the way.
    pub problem: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.problem)
    }
}

/// How a bundle applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Files written or removed.
    pub changed: usize,
    /// Files that already were as the bundle leaves them.
    pub already: usize,
}

fn hex(hash: &blake3::Hash) -> String {
    hash.to_hex().to_string()
}

/// Refuses a path that is not written the one plain way (`a/b.txt`: no empty, `.` or `..` name,
/// no leading or trailing `/`), that would leave the workspace, goes into `.git` or a state
/// folder (named `.helixflow`), or has a name too long to be written. The reserved names are
/// compared as a case-insensitive file system would (macOS's default): in any case, and without
/// the invisible code points macOS ignores in names (as Git's own check does), on every system,
/// so that a bundle refused on a Mac is refused everywhere.
fn safe_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("an empty path".to_owned());
    }
    if path.len() > NAME_LIMIT {
        return Err(format!(
            "a path of {} bytes (the limit is {NAME_LIMIT})",
            path.len()
        ));
    }
    for name in path.split('/') {
        match name {
            "" | "." | ".." => {
                return Err("not a plain relative path inside the workspace".to_owned());
            }
            _ if reserved(name, ".git") => return Err("inside .git".to_owned()),
            _ if reserved(name, ".helixflow") => return Err("inside a state folder".to_owned()),
            _ if name.contains('\0') => return Err("a name with a NUL byte".to_owned()),
            _ if name.len() > COMPONENT_LIMIT => {
                return Err(format!(
                    "a name of {} bytes (the limit is {COMPONENT_LIMIT})",
                    name.len()
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `name` is `reserved` (lower case) on a case-insensitive file system.
fn reserved(name: &str, reserved: &str) -> bool {
    let mut seen = name.chars().filter(|&c| !ignored_by_hfs(c));
    reserved
        .chars()
        .all(|want| seen.next().is_some_and(|c| c.eq_ignore_ascii_case(&want)))
        && seen.next().is_none()
}

/// Code points macOS's file systems leave out when they compare names (the list Git checks
/// `.git` against: joiners, direction marks and the byte order mark).
fn ignored_by_hfs(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// Whether a symlink at `path` (relative to the workspace) to `target` leads to a place inside
/// the workspace, judged by its text alone: a relative target whose `..` never climb above the
/// workspace from the link's folder. An absolute target leads out, whatever it names: on the
/// machine the bundle is applied to, it names that machine's files.
fn stays_inside(path: &str, target: &[u8]) -> bool {
    if target.is_empty() {
        return false;
    }
    let target = Path::new(std::ffi::OsStr::from_bytes(target));
    let mut depth = path.split('/').count().saturating_sub(1);
    for component in target.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            _ => return false,
        }
    }
    true
}

/// Why a symlink that leads out of the workspace is not carried.
fn leaves(path: &str, target: &[u8]) -> String {
    format!(
        "{path} is a symlink to `{}`, which leads outside the workspace: a bundle carries no such link",
        String::from_utf8_lossy(target)
    )
}

#[cfg(test)]
mod tests;
