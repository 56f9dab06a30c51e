//! Restoring files from a snapshot: [`Snapshot::restore`] puts the workspace back as the snapshot
//! saw it, for the paths a diff names, byte-exact from the contents it kept.

use std::collections::HashSet;
use std::fs;
use std::io::{self, ErrorKind, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::snapshot::{Entry, Kind};
use super::walk::Stat;
use super::{Changes, Snapshot, changed_underfoot, key_of, os, with_path};

impl Snapshot {
    /// Restores the workspace to this snapshot for the given changes: modified and deleted files
    /// rewritten byte-exact from kept contents (and their permission bits), created files removed
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
    /// ignore rule that was changed since, unless it is a file this snapshot has elsewhere, under a
    /// path the changes delete or modify, with its contents kept: a file moved (a folder moved
    /// with `mv sub sub_real` keeps its files' change times), which is removed, as its original
    /// is written back.
    ///
    /// # Errors
    /// The first I/O error met; every other path is still tried first.
    pub fn restore(&self, workspace: &Path, changes: &Changes) -> io::Result<Vec<String>> {
        let mut outcome = Restoring::default();
        // The inodes of the files changes take away whose contents are kept: found again under a
        // new name, such a file was moved there.
        let moved: HashSet<u64> = changes
            .deleted
            .iter()
            .chain(&changes.modified)
            .filter_map(|path| self.entry(path))
            .filter(|entry| entry.contents.is_some() && entry.inode != 0)
            .map(|entry| entry.inode)
            .collect();
        for path in changes.all().filter(|path| self.entry(path).is_none()) {
            outcome.record(path, self.remove_created(workspace, path, &moved));
        }
        for path in changes.all() {
            if let Some(entry) = self.entry(path) {
                outcome.record(path, self.write_back(workspace, path, entry));
            }
        }
        outcome.finish()
    }

    /// Makes `target` like `source`, the folder this snapshot was taken of, at the given paths:
    /// a path the snapshot has is copied from `source` as it is there now (contents, permission
    /// bits and modification time, or the symlink; atomically by rename), a path it does not have
    /// is removed from `target`, with the folders above it that are left empty and that the
    /// snapshot does not have. The same care as [`Snapshot::restore`]: nothing is written through
    /// a symlinked folder, and such paths are returned as not copied.
    ///
    /// # Errors
    /// The first I/O error met; every other path is still tried first.
    pub(crate) fn copy_paths<'p>(
        &self,
        source: &Path,
        target: &Path,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> io::Result<Vec<String>> {
        let paths: Vec<&str> = paths.into_iter().collect();
        let mut outcome = Restoring::default();
        for &path in paths.iter().filter(|path| self.entry(path).is_none()) {
            let result = match Path::new(path) {
                rel if plain(rel) => self.remove_path(target, rel, None),
                _ => Ok(false),
            };
            outcome.record(path, result);
        }
        for &path in paths.iter().filter(|path| self.entry(path).is_some()) {
            outcome.record(path, self.copy_one(source, target, path));
        }
        outcome.finish()
    }

    /// Copies one file or symlink from `source` to `target`. `Ok(false)`: unsafe to write.
    fn copy_one(&self, source: &Path, target: &Path, path: &str) -> io::Result<bool> {
        let Some(rel) = self.locate(source, path) else {
            return Ok(false);
        };
        if symlinked_folder_in(target, &rel)? || symlinked_folder_in(source, &rel)? {
            return Ok(false);
        }
        let (from, to) = (source.join(&rel), target.join(&rel));
        let (Some(parent), Some(name)) = (to.parent(), to.file_name()) else {
            return Ok(false);
        };
        fs::create_dir_all(parent).map_err(|err| with_path(&err, parent))?;
        let temp = parent.join(format!(
            ".{}.helixflow-copy-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        remove_quietly(&temp);
        let meta = fs::symlink_metadata(&from).map_err(|err| with_path(&err, &from))?;
        let written = if meta.file_type().is_symlink() {
            fs::read_link(&from)
                .and_then(|link| os::make_symlink(&temp, link.as_os_str().as_encoded_bytes()))
        } else {
            // A clone where the file system offers one; the permission bits come along.
            os::clone_or_copy(&from, &temp).and_then(|_| {
                fs::File::options()
                    .write(true)
                    .open(&temp)?
                    .set_modified(meta.modified()?)
            })
        };
        if let Err(err) = written {
            remove_quietly(&temp);
            return Err(with_path(&err, &to));
        }
        if fs::symlink_metadata(&to).is_ok_and(|existing| existing.is_dir()) {
            // A folder stands where the file goes: what is in it is not this copy's to remove.
            remove_quietly(&temp);
            return Ok(false);
        }
        if let Err(err) = fs::rename(&temp, &to) {
            remove_quietly(&temp);
            return Err(with_path(&err, &to));
        }
        Ok(true)
    }

    /// Removes a file this snapshot does not have, then the folders above it that it does not
    /// have either, while they are empty; a file whose inode is among `moved` is removed even when
    /// its inode last changed before this snapshot began. `Ok(false)`: left in place.
    fn remove_created(
        &self,
        workspace: &Path,
        path: &str,
        moved: &HashSet<u64>,
    ) -> io::Result<bool> {
        let Some(rel) = self.locate(workspace, path) else {
            return Ok(false);
        };
        let was_moved = fs::symlink_metadata(workspace.join(&rel))
            .is_ok_and(|meta| moved.contains(&os::inode(&meta)));
        let kept_before = (!was_moved).then_some(self.started_ns);
        self.remove_path(workspace, &rel, kept_before)
    }

    /// Removes the file at `rel` and the empty folders above it that this snapshot does not
    /// have; with `kept_before`, a file whose inode last changed before that time is kept.
    fn remove_path(
        &self,
        workspace: &Path,
        rel: &Path,
        kept_before: Option<i128>,
    ) -> io::Result<bool> {
        if symlinked_folder_in(workspace, rel)? {
            return Ok(false);
        }
        let full = workspace.join(rel);
        match fs::symlink_metadata(&full) {
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => return Err(with_path(&err, &full)),
            Ok(meta) if meta.is_dir() => return Ok(false),
            Ok(meta) if kept_before.is_some_and(|time| changed_before(&meta, time)) => {
                return Ok(true);
            }
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
            Kind::Symlink => os::make_symlink(&temp, contents),
        };
        if let Err(err) = written {
            remove_quietly(&temp);
            return Err(with_path(&err, &full));
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

/// Whether `rel` is a plain relative path: no root, no `.` or `..`.
fn plain(rel: &Path) -> bool {
    !rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Whether the file's inode last changed before `started_ns`: it existed before the snapshot.
fn changed_before(meta: &fs::Metadata, started_ns: i128) -> bool {
    Stat::of(meta).ctime_ns < started_ns
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

/// Writes a new file with these bytes, permission bits and modification time.
fn write_file(path: &Path, bytes: &[u8], mode: u32, mtime_ns: i128) -> io::Result<()> {
    let options = os::create_new_private();
    let mut file = match options.open(path) {
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            // Left behind by a restore that was interrupted.
            fs::remove_file(path)?;
            options.open(path)?
        }
        other => other?,
    };
    file.write_all(bytes)?;
    os::set_mode(&file, mode)?;
    if let Some(time) = system_time(mtime_ns) {
        file.set_modified(time)?;
    }
    Ok(())
}

/// Removes a temporary file after a failure; the failure itself is what gets reported.
fn remove_quietly(path: &Path) {
    // The original error matters more than a failure to tidy up after it.
    let _ = fs::remove_file(path);
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
