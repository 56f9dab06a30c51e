//! Checking and applying a bundle to a workspace, all or nothing: every file is first staged
//! beside its target (a temporary name in the same folder, its contents checked again against
//! the manifest as they are copied), and only then is each put in place by a rename, the file it
//! replaces or deletes kept under another name until all are in place. Any failure (a full disk,
//! a folder that cannot be written, a bundle that changed since it was read) removes what was
//! staged and puts back what was replaced: the workspace is left as it was.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::read::{self, Bundle, Contents};
use super::write::Checked;
use super::{Applied, ChangeKind, Conflict, FileChange, FileKind, hex};

/// A path of the workspace as a bundle compares it.
enum Found {
    Missing,
    Folder,
    /// A FIFO, socket or device: never read (a FIFO would block), never replaced.
    Special,
    Entry {
        kind: FileKind,
        mode: u32,
        hash: String,
        size: u64,
    },
}

/// What is at `path` now, its contents hashed as a stream.
fn found(path: &Path) -> io::Result<Found> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(e),
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path)?;
        let bytes = target.as_os_str().as_bytes();
        return Ok(Found::Entry {
            kind: FileKind::Symlink,
            mode: 0,
            hash: hex(&blake3::hash(bytes)),
            size: bytes.len() as u64,
        });
    }
    if meta.is_dir() {
        return Ok(Found::Folder);
    }
    if !meta.is_file() {
        return Ok(Found::Special);
    }
    // Not following a symlink, nor blocking on a FIFO put there since.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(Found::Special);
    }
    let mut reader = Checked::new(file);
    io::copy(&mut reader, &mut io::sink())?;
    Ok(Found::Entry {
        kind: FileKind::File,
        mode: meta.permissions().mode() & 0o7777,
        hash: hex(&reader.hasher.finalize()),
        size: reader.read,
    })
}

impl Bundle {
    /// What stands in the way of applying the bundle to `workspace`: a modified or deleted file
    /// whose contents are no longer those the bundle started from, a created file that exists with
    /// other contents, a folder on the way that is a file or a symlink, a path that is a folder or
    /// a special file. A file already as the bundle leaves it is no conflict (applying twice
    /// changes nothing).
    pub(crate) fn check(&self, workspace: &Path) -> io::Result<Vec<Conflict>> {
        let mut conflicts = Vec::new();
        for file in &self.manifest.files {
            let conflict = |problem: &str| Conflict {
                path: file.path.clone(),
                problem: problem.to_owned(),
            };
            if let Some(problem) = blocked_folder(workspace, &file.path)? {
                conflicts.push(conflict(&problem));
                continue;
            }
            let now = found(&workspace.join(&file.path))?;
            let current_hash = match &now {
                Found::Folder => {
                    conflicts.push(conflict("is a folder"));
                    continue;
                }
                Found::Special => {
                    conflicts.push(conflict("is neither a regular file nor a symlink"));
                    continue;
                }
                _ if already(file, &now) => continue,
                Found::Missing => None,
                Found::Entry { hash, .. } => Some(hash),
            };
            match file.change {
                ChangeKind::Created => {
                    if current_hash.is_some() {
                        conflicts.push(conflict("exists already, with other contents"));
                    }
                }
                ChangeKind::Modified | ChangeKind::Deleted => match current_hash {
                    None => conflicts.push(conflict(
                        "does not exist, and the bundle changes an existing file",
                    )),
                    Some(hash) if Some(hash) != file.before.as_ref() => {
                        conflicts
                            .push(conflict("changed since the bundle's phase started from it"));
                    }
                    Some(_) => {}
                },
            }
        }
        Ok(conflicts)
    }

    /// Applies the bundle to `workspace` when [`Bundle::check`] finds no conflict; otherwise
    /// changes nothing and returns the conflicts. On an error the workspace is as it was.
    pub(crate) fn apply(&self, workspace: &Path) -> io::Result<Result<Applied, Vec<Conflict>>> {
        let conflicts = self.check(workspace)?;
        if !conflicts.is_empty() {
            return Ok(Err(conflicts));
        }
        let mut plan = BTreeMap::new();
        for file in &self.manifest.files {
            if !already(file, &found(&workspace.join(&file.path))?) {
                plan.insert(file.path.as_str(), file);
            }
        }
        let mut change = Change::new(workspace);
        let done = change
            .stage(self, &plan)
            .and_then(|()| change.commit(&plan));
        if let Err(e) = done {
            change.roll_back();
            return Err(e);
        }
        change.finish(&plan);
        Ok(Ok(Applied {
            changed: plan.len(),
            already: self.manifest.files.len() - plan.len(),
        }))
    }
}

/// Whether the file is already as the bundle leaves it.
fn already(file: &FileChange, now: &Found) -> bool {
    match (&file.after, now) {
        (None, Found::Missing) => true,
        (
            Some(after),
            Found::Entry {
                kind,
                mode,
                hash,
                size,
            },
        ) => {
            *kind == after.kind
                && (after.kind == FileKind::Symlink || *mode == after.mode)
                && *hash == after.hash
                && *size == after.size
        }
        _ => false,
    }
}

/// One application of a bundle in progress, with what it takes to undo it.
struct Change<'a> {
    workspace: &'a Path,
    /// Folders made for created files, in the order they were made.
    made_folders: Vec<PathBuf>,
    /// Staged files not yet in place, by the path they are for.
    staged: BTreeMap<String, PathBuf>,
    /// Files replaced or deleted, kept under another name: (that name, the file).
    kept: Vec<(PathBuf, PathBuf)>,
    /// Files put in place where there was none.
    placed: Vec<PathBuf>,
    /// The number in the next temporary name.
    counter: u64,
}

impl<'a> Change<'a> {
    fn new(workspace: &'a Path) -> Self {
        Self {
            workspace,
            made_folders: Vec::new(),
            staged: BTreeMap::new(),
            kept: Vec::new(),
            placed: Vec::new(),
            counter: 0,
        }
    }

    /// A name in `folder` for a staged or kept file; hidden, short (whatever the target's name),
    /// and new: callers create it exclusively and ask again when it exists.
    fn temporary(&mut self, folder: &Path, what: &str) -> PathBuf {
        self.counter += 1;
        folder.join(format!(
            ".helixflow-{}-{}.{what}",
            std::process::id(),
            self.counter
        ))
    }

    /// Writes every created or modified file of `plan` beside its target, reading the bundle
    /// again and checking each entry as it is copied.
    fn stage(&mut self, bundle: &Bundle, plan: &BTreeMap<&str, &FileChange>) -> io::Result<()> {
        let file = read::open(&bundle.file)?;
        let scanned = read::scan(io::BufReader::new(file), &mut |change, contents| {
            if !plan.contains_key(change.path.as_str()) {
                return Ok(());
            }
            let target = self.workspace.join(&change.path);
            let folder = target.parent().unwrap_or(self.workspace).to_path_buf();
            self.make_folders(&folder)?;
            let mode = change.after.as_ref().map_or(0o644, |after| after.mode);
            match contents {
                Contents::Symlink(target) => {
                    let target = Path::new(std::ffi::OsStr::from_bytes(target));
                    loop {
                        let tmp = self.temporary(&folder, "tmp");
                        match std::os::unix::fs::symlink(target, &tmp) {
                            Ok(()) => {
                                self.staged.insert(change.path.clone(), tmp);
                                break;
                            }
                            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Contents::File(reader) => {
                    let (tmp, out) = loop {
                        let tmp = self.temporary(&folder, "tmp");
                        match fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(0o600)
                            .open(&tmp)
                        {
                            Ok(out) => break (tmp, out),
                            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                            Err(e) => return Err(e),
                        }
                    };
                    self.staged.insert(change.path.clone(), tmp);
                    let mut writer = io::BufWriter::new(out);
                    io::copy(reader, &mut writer)?;
                    writer.flush()?;
                    let out = writer
                        .into_inner()
                        .map_err(io::IntoInnerError::into_error)?;
                    out.set_permissions(fs::Permissions::from_mode(mode))?;
                    out.sync_all()?;
                }
            }
            Ok(())
        })
        .map_err(|e| io::Error::other(format!("{}: {e}", bundle.file.display())))?;
        if scanned.manifest != bundle.manifest {
            return Err(io::Error::other(format!(
                "{} changed since it was read",
                bundle.file.display()
            )));
        }
        Ok(())
    }

    /// Makes `folder` and the folders above it that are missing, remembering each one made.
    fn make_folders(&mut self, folder: &Path) -> io::Result<()> {
        let Ok(rel) = folder.strip_prefix(self.workspace) else {
            return Ok(());
        };
        let mut at = self.workspace.to_path_buf();
        for part in rel.components() {
            at.push(part);
            match fs::create_dir(&at) {
                Ok(()) => self.made_folders.push(at.clone()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if !fs::symlink_metadata(&at)?.is_dir() {
                        return Err(io::Error::other(format!(
                            "{} is not a folder",
                            at.display()
                        )));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Puts every staged file in place and removes every deleted one, keeping each file it
    /// replaces or deletes under another name (a hard link, so the original is never touched).
    fn commit(&mut self, plan: &BTreeMap<&str, &FileChange>) -> io::Result<()> {
        for (path, file) in plan {
            let target = self.workspace.join(path);
            let exists = fs::symlink_metadata(&target).is_ok();
            if exists {
                let folder = target.parent().unwrap_or(self.workspace).to_path_buf();
                loop {
                    let keep = self.temporary(&folder, "old");
                    match fs::hard_link(&target, &keep) {
                        Ok(()) => {
                            self.kept.push((keep, target.clone()));
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            match self.staged.remove(*path) {
                Some(tmp) => {
                    if let Err(e) = fs::rename(&tmp, &target) {
                        self.staged.insert((*path).to_owned(), tmp);
                        return Err(e);
                    }
                    if !exists {
                        self.placed.push(target);
                    }
                }
                None if file.change == ChangeKind::Deleted => fs::remove_file(&target)?,
                None => {
                    return Err(io::Error::other(format!("{path} was not staged")));
                }
            }
        }
        Ok(())
    }

    /// Undoes everything done so far, as far as it can.
    fn roll_back(&mut self) {
        for target in self.placed.drain(..).rev() {
            let _ = fs::remove_file(target);
        }
        for (keep, target) in self.kept.drain(..).rev() {
            let _ = fs::rename(keep, target);
        }
        for tmp in std::mem::take(&mut self.staged).into_values() {
            let _ = fs::remove_file(tmp);
        }
        for folder in self.made_folders.drain(..).rev() {
            let _ = fs::remove_dir(folder);
        }
    }

    /// Removes the files kept for undoing, and the folders deleted files left empty.
    fn finish(&mut self, plan: &BTreeMap<&str, &FileChange>) {
        for (keep, _) in self.kept.drain(..) {
            let _ = fs::remove_file(keep);
        }
        for (path, file) in plan {
            if file.change == ChangeKind::Deleted {
                remove_empty_folders(self.workspace, &self.workspace.join(path));
            }
        }
    }
}

/// A folder on the way to `rel` that is a file or a symlink (writing through a symlink could
/// leave the workspace).
fn blocked_folder(workspace: &Path, rel: &str) -> io::Result<Option<String>> {
    let mut at = workspace.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Ok(Some(format!("{} is a symlink", at.display())));
            }
            Ok(meta) if !meta.is_dir() => {
                return Ok(Some(format!("{} is a file", at.display())));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Removes the folders above a deleted file that it left empty, up to the workspace.
fn remove_empty_folders(workspace: &Path, file: &Path) {
    let mut parent = file.parent();
    while let Some(folder) = parent {
        if folder == workspace || !folder.starts_with(workspace) || fs::remove_dir(folder).is_err()
        {
            break;
        }
        parent = folder.parent();
    }
}
