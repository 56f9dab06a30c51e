//! The diff of an attempt's changes shown to the verifier: a unified diff per text file, the
//! other changes named, all within fixed bounds.

use std::fmt::Write as _;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use similar::TextDiff;

use super::{bytes, with_path};
use crate::text::plural;
use crate::workspace::{Changes, Snapshot};

/// The most bytes [`diff_of_changes`] returns, notes included.
pub const DIFF_LIMIT: usize = 64 * 1024;
/// The most bytes of one file's part of the diff, notes included.
pub const FILE_DIFF_LIMIT: usize = 16 * 1024;

/// Numbers scratch folders apart within this process.
static NEXT_SCRATCH: AtomicU64 = AtomicU64::new(0);

/// Files larger than this (before or after) are named, not diffed: diffing costs time and memory
/// that a part of at most [`FILE_DIFF_LIMIT`] bytes does not repay.
const DIFF_INPUT_LIMIT: u64 = 1024 * 1024;
/// Kept free at the end of the diff for the note naming the files left out.
const CLOSING_NOTE_RESERVE: usize = 2 * 1024;
/// Kept free at the end of a cut file part for the note saying how much was cut.
const CUT_NOTE_RESERVE: usize = 128;
/// Below this much room, a file's part is left out rather than cut to almost nothing.
const MIN_FILE_ROOM: usize = 512;
/// The longest a line diff may search for the smallest diff before it settles for a larger one.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);
/// Bytes looked at to tell a binary file (one with a NUL byte) from text.
const BINARY_SNIFF: usize = 8192;

/// A unified diff of the attempt's changes to text files, in path order: created files as all
/// added, deleted ones as all removed, modified ones against the contents `before` kept. Binary
/// files, symlinks, files over 1 MiB and files whose earlier contents were not kept are named with
/// what changed instead. At most [`DIFF_LIMIT`] bytes in all and [`FILE_DIFF_LIMIT`] per file; a
/// cut part ends with a note of how many lines were left out, and the files that did not fit are
/// named in a closing note.
#[must_use]
pub fn diff_of_changes(workspace: &Path, before: &Snapshot, changes: &Changes) -> String {
    let mut entries: Vec<(&str, ChangeKind)> = changes
        .created
        .iter()
        .map(|p| (p.as_str(), ChangeKind::Created))
        .chain(
            changes
                .modified
                .iter()
                .map(|p| (p.as_str(), ChangeKind::Modified)),
        )
        .chain(
            changes
                .deleted
                .iter()
                .map(|p| (p.as_str(), ChangeKind::Deleted)),
        )
        .collect();
    entries.sort_unstable();
    let mut scratch = Scratch::default();
    let mut out = String::new();
    let mut left_out: Vec<&str> = Vec::new();
    for (path, kind) in entries {
        let room = (DIFF_LIMIT - CLOSING_NOTE_RESERVE)
            .saturating_sub(out.len())
            .min(FILE_DIFF_LIMIT);
        if room < MIN_FILE_ROOM || !left_out.is_empty() {
            left_out.push(path);
            continue;
        }
        let old = match kind {
            ChangeKind::Created => Side::Absent,
            ChangeKind::Modified | ChangeKind::Deleted => scratch.old_side(before, path),
        };
        let new = match kind {
            ChangeKind::Deleted => Side::Absent,
            ChangeKind::Created | ChangeKind::Modified => current_side(workspace, path),
        };
        let mut part = file_part(path, kind, &old, &new);
        if kind == ChangeKind::Modified
            && let Some(note) = mode_note(workspace, before, path)
        {
            part.push_str(&note);
        }
        out.push_str(&fit(part, room));
    }
    if !left_out.is_empty() {
        out.push_str(&closing_note(&left_out));
    }
    out
}

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ChangeKind {
    Created,
    Modified,
    Deleted,
}

/// One side (before or after) of a changed file, as the diff sees it.
#[derive(Debug)]
enum Side {
    /// The file does not exist on this side.
    Absent,
    /// UTF-8 text without NUL bytes, at most [`DIFF_INPUT_LIMIT`] bytes.
    Text(String),
    /// Any other contents, with their size.
    Binary(u64),
    /// A symlink, with its target.
    Symlink(String),
    /// A file too large to diff, with its size.
    TooLarge(u64),
    /// A file whose contents before the attempt were not kept, with its size.
    NotKept(u64),
    /// A file that cannot be read, with the reason.
    Unreadable(String),
}

impl Side {
    /// "a binary file of 12 bytes", for a change that is named rather than diffed.
    fn describe(&self) -> String {
        match self {
            Side::Absent => "nothing".to_owned(),
            Side::Text(text) => format!("a text file of {}", bytes(text.len() as u64)),
            Side::Binary(size) => format!("a binary file of {}", bytes(*size)),
            Side::Symlink(target) => format!("a symlink to `{target}`"),
            Side::TooLarge(size) => format!("a file of {}, too large to diff", bytes(*size)),
            Side::NotKept(size) => format!(
                "a file of {} whose contents before the attempt were not kept",
                bytes(*size)
            ),
            Side::Unreadable(why) => format!("a file that cannot be read ({why})"),
        }
    }
}

/// One file's part of the diff: a unified diff when both sides are text (or absent), else a line
/// naming the change.
fn file_part(path: &str, kind: ChangeKind, old: &Side, new: &Side) -> String {
    let text = |side: &Side| match side {
        Side::Absent => Some(String::new()),
        Side::Text(text) => Some(text.clone()),
        _ => None,
    };
    if let (Some(old_text), Some(new_text)) = (text(old), text(new)) {
        let diff = TextDiff::configure()
            .timeout(DIFF_TIMEOUT)
            .diff_lines(&old_text, &new_text);
        let old_name = match old {
            Side::Absent => "/dev/null".to_owned(),
            _ => format!("a/{}", crate::text::one_line(path)),
        };
        let new_name = match new {
            Side::Absent => "/dev/null".to_owned(),
            _ => format!("b/{}", crate::text::one_line(path)),
        };
        let unified = diff.unified_diff().header(&old_name, &new_name).to_string();
        if !unified.is_empty() {
            return unified;
        }
        // Same text on both sides: an empty file created or deleted, or a change of mode only.
        return match kind {
            ChangeKind::Created => format!(
                "{shown}: created, empty\n",
                shown = crate::text::code_name(path)
            ),
            ChangeKind::Deleted => format!(
                "{shown}: deleted, was empty\n",
                shown = crate::text::code_name(path)
            ),
            ChangeKind::Modified => String::new(),
        };
    }
    match kind {
        ChangeKind::Created => format!(
            "{shown}: created, {}\n",
            new.describe(),
            shown = crate::text::code_name(path)
        ),
        ChangeKind::Deleted => format!(
            "{shown}: deleted, was {}\n",
            old.describe(),
            shown = crate::text::code_name(path)
        ),
        ChangeKind::Modified => format!(
            "{}: changed from {} to {}\n",
            crate::text::code_name(path),
            old.describe(),
            new.describe()
        ),
    }
}

/// A line saying the permission bits changed, when they did: the executable bit in words, any
/// other change (`chmod 666`, `u+s`) by its octal bits.
fn mode_note(workspace: &Path, before: &Snapshot, path: &str) -> Option<String> {
    let was = before.get(path)?.mode;
    let meta = std::fs::symlink_metadata(workspace.join(path)).ok()?;
    if meta.file_type().is_symlink() {
        return None;
    }
    let is = meta.permissions().mode() & 0o7777;
    if was == is {
        return None;
    }
    Some(match (was & 0o111 != 0, is & 0o111 != 0) {
        (false, true) if was | 0o111 == is | 0o111 => format!(
            "{shown}: made executable\n",
            shown = crate::text::code_name(path)
        ),
        (true, false) if was | 0o111 == is | 0o111 => format!(
            "{shown}: no longer executable\n",
            shown = crate::text::code_name(path)
        ),
        _ => format!(
            "{shown}: permissions changed from {was:04o} to {is:04o}\n",
            shown = crate::text::code_name(path)
        ),
    })
}

/// The file as it is now in the workspace, without following a symlink.
fn current_side(workspace: &Path, path: &str) -> Side {
    let full = workspace.join(path);
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(error) => return Side::Unreadable(error.to_string()),
    };
    if meta.file_type().is_symlink() {
        return match std::fs::read_link(&full) {
            Ok(target) => Side::Symlink(target.to_string_lossy().into_owned()),
            Err(error) => Side::Unreadable(error.to_string()),
        };
    }
    if !meta.is_file() {
        return Side::Unreadable("not a regular file".to_owned());
    }
    if meta.len() > DIFF_INPUT_LIMIT {
        return Side::TooLarge(meta.len());
    }
    match read_limited(&full) {
        Ok(bytes) => classify(bytes),
        Err(error) => Side::Unreadable(error.to_string()),
    }
}

/// Reads at most [`DIFF_INPUT_LIMIT`] + 1 bytes: a file that grew since it was measured is not
/// read whole.
fn read_limited(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(DIFF_INPUT_LIMIT + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Text, or binary (a NUL byte early on, invalid UTF-8), or too large.
fn classify(bytes: Vec<u8>) -> Side {
    let size = bytes.len() as u64;
    if size > DIFF_INPUT_LIMIT {
        return Side::TooLarge(size);
    }
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return Side::Binary(size);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Side::Text(text),
        Err(_) => Side::Binary(size),
    }
}

/// A private temporary folder the snapshot's kept contents are restored into, one file at a time,
/// to be read: the snapshot hands its kept bytes out only through `restore`.
#[derive(Default)]
struct Scratch {
    dir: Option<PathBuf>,
}

impl Scratch {
    /// The file as the snapshot `before` kept it.
    fn old_side(&mut self, before: &Snapshot, path: &str) -> Side {
        let Some(state) = before.get(path) else {
            return Side::Unreadable("not in the snapshot taken before the attempt".to_owned());
        };
        if state.size > DIFF_INPUT_LIMIT {
            return Side::TooLarge(state.size);
        }
        match self.restored(before, path) {
            Ok(Some(side)) => side,
            Ok(None) => Side::NotKept(state.size),
            Err(error) => Side::Unreadable(error.to_string()),
        }
    }

    /// Restores `path` alone into the empty scratch folder and reads it back; `None` when the
    /// snapshot did not keep its contents.
    fn restored(&mut self, before: &Snapshot, path: &str) -> io::Result<Option<Side>> {
        let dir = self.folder()?;
        let one = Changes {
            modified: vec![path.to_owned()],
            ..Changes::default()
        };
        let not_restored = before.restore(&dir, &one);
        let side = match not_restored {
            Ok(not_restored) if not_restored.is_empty() => only_file(&dir).map(Some),
            Ok(_) => Ok(None),
            Err(error) => Err(error),
        };
        // Emptied for the next file; a folder that cannot be emptied is replaced.
        if std::fs::remove_dir_all(&dir).is_ok() {
            let _ = create_private_dir(&dir);
        }
        if !dir.is_dir() {
            self.dir = None;
        }
        side
    }

    /// The scratch folder, created on first use.
    fn folder(&mut self) -> io::Result<PathBuf> {
        if let Some(dir) = &self.dir {
            return Ok(dir.clone());
        }
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let dir = base.join(format!(
                "helixflow-diff-{}-{}",
                std::process::id(),
                NEXT_SCRATCH.fetch_add(1, Ordering::Relaxed)
            ));
            match create_private_dir(&dir) {
                Ok(()) => {
                    self.dir = Some(dir.clone());
                    return Ok(dir);
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(with_path(&error, &dir)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "cannot create a scratch folder in {}: every name tried exists",
                base.display()
            ),
        ))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            // Best effort: a leftover folder in the temporary folder harms nothing.
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Creates a folder only its owner can enter: it briefly holds copies of workspace files.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700);
    builder.create(dir)
}

/// The contents of the one file (or symlink) below `dir`.
fn only_file(dir: &Path) -> io::Result<Side> {
    let mut folder = dir.to_path_buf();
    loop {
        let entry = std::fs::read_dir(&folder)?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "the restored file is missing")
        })??;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            folder = entry.path();
            continue;
        }
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            return Ok(Side::Symlink(target.to_string_lossy().into_owned()));
        }
        return Ok(classify(read_limited(&entry.path())?));
    }
}

/// Cuts a file's part to `room` bytes at a line end, with a note of how many lines were left out.
fn fit(part: String, room: usize) -> String {
    if part.len() <= room {
        return part;
    }
    let keep = room.saturating_sub(CUT_NOTE_RESERVE);
    let cut = if let Some(newline) = part.as_bytes()[..keep].iter().rposition(|&b| b == b'\n') {
        newline + 1
    } else {
        // One line longer than the room (minified code): cut inside it.
        let mut at = keep;
        while !part.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let left_out = part[cut..].lines().count();
    let mut out = part[..cut].to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "[helixflow: {left_out} more line{} of this file's diff left out]",
        plural(left_out)
    );
    out
}

/// The note naming the files whose diff did not fit, within [`CLOSING_NOTE_RESERVE`] bytes.
fn closing_note(left_out: &[&str]) -> String {
    let mut note = format!(
        "[helixflow: the diff is cut at {} KiB; not shown:",
        DIFF_LIMIT / 1024
    );
    let mut named = 0;
    for path in left_out {
        let item = format!(" {shown},", shown = crate::text::code_name(path));
        // Room for the longest ending: " and 18446744073709551615 more files]\n".
        if note.len() + item.len() + 48 > CLOSING_NOTE_RESERVE {
            break;
        }
        note.push_str(&item);
        named += 1;
    }
    let rest = left_out.len() - named;
    if rest == 0 {
        note.pop();
    } else {
        let _ = write!(note, " and {rest} more file{}", plural(rest));
    }
    note.push_str("]\n");
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_part_ends_at_a_line_with_a_note() {
        let part = (0..100).fold(String::new(), |mut part, i| {
            let _ = writeln!(part, "+line {i}");
            part
        });
        let cut = fit(part, 400);
        assert!(cut.len() <= 400, "{} bytes", cut.len());
        assert!(cut.starts_with("+line 0\n"));
        assert!(
            cut.ends_with(" more lines of this file's diff left out]\n"),
            "{cut}"
        );
    }

    #[test]
    fn a_single_long_line_is_cut_inside() {
        let part = format!("+{}\n", "é".repeat(1000));
        let cut = fit(part, 300);
        assert!(cut.len() <= 300);
        assert!(cut.ends_with("[helixflow: 1 more line of this file's diff left out]\n"));
    }

    #[test]
    fn the_closing_note_stays_within_its_reserve() {
        let long = "d/".repeat(400);
        let paths: Vec<String> = (0..50).map(|i| format!("{long}{i}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let note = closing_note(&refs);
        assert!(note.len() <= CLOSING_NOTE_RESERVE, "{} bytes", note.len());
        assert!(note.ends_with("more files]\n"), "{note}");
        assert_eq!(
            closing_note(&["a", "b"]),
            "[helixflow: the diff is cut at 64 KiB; not shown: `a`, `b`]\n"
        );
    }
}
