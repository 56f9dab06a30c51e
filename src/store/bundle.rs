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
//! - `journal/phase/<path>`: the phase's folder of the run (every attempt's prompt, logs, gate
//!   reports, feedback and `changes.json`).
//!
//! Tar rather than a format of our own: it keeps binary contents, permission bits and symlinks as
//! they are, any machine can list or unpack it (`tar tf bundle.hxb`), and the `tar` crate reads
//! and writes it. Timestamps and owners are not kept (all zero), so that the same work makes the
//! same bundle. The workspace's ignored files and the state folder are never in a bundle: they are
//! not in the snapshots the changes come from.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::workspace::{Changes, Snapshot};

/// The bundle's file name in a phase's folder of the run.
pub(crate) const FILE_NAME: &str = "bundle.hxb";
/// What `format` says in every bundle's manifest.
pub(crate) const FORMAT: &str = "helixflow-bundle";
/// The version of the format this helixflow writes and reads.
pub(crate) const VERSION: u32 = 1;

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

/// What a bundle is made from: the workspace after a passing attempt, the snapshot before it,
/// and what changed.
pub(crate) struct Source<'a> {
    /// The workspace, as the attempt left it.
    pub workspace: &'a Path,
    /// The snapshot before the attempt (the hashes `check` compares with).
    pub before: &'a Snapshot,
    /// What the attempt changed (its agent's bookkeeping files left out).
    pub changes: &'a Changes,
    /// The pipeline's name.
    pub pipeline: &'a str,
    /// The phase.
    pub phase: &'a str,
    /// The run's id.
    pub run_id: &'a str,
    /// The passing attempt.
    pub attempt: u32,
    /// The phase's folder of the run, kept under `journal/phase/`.
    pub phase_dir: &'a Path,
    /// The phase's lines of the run's journal.
    pub events: &'a str,
}

/// A bundle read into memory.
#[derive(Debug, Clone)]
pub(crate) struct Bundle {
    /// Its manifest.
    pub manifest: Manifest,
    /// Contents after (for a symlink: its target) of created and modified files, by path.
    contents: BTreeMap<String, Vec<u8>>,
    /// `journal/events.jsonl`.
    pub events: String,
    /// The phase folder's files, by path relative to it.
    pub phase_files: BTreeMap<String, Vec<u8>>,
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

/// Writes the bundle of `source` to `path` and returns its manifest.
pub(crate) fn create(path: &Path, source: &Source<'_>) -> io::Result<Manifest> {
    let mut files = Vec::new();
    let mut contents: Vec<(String, FileKind, u32, Vec<u8>)> = Vec::new();
    let before_hash = |p: &str| source.before.get(p).map(|state| hex(&state.hash));
    let mut changed: Vec<(&str, ChangeKind)> = source
        .changes
        .created
        .iter()
        .map(|p| (p.as_str(), ChangeKind::Created))
        .chain(
            source
                .changes
                .modified
                .iter()
                .map(|p| (p.as_str(), ChangeKind::Modified)),
        )
        .chain(
            source
                .changes
                .deleted
                .iter()
                .map(|p| (p.as_str(), ChangeKind::Deleted)),
        )
        .collect();
    changed.sort_unstable_by_key(|(path, _)| *path);
    for (rel, change) in changed {
        let after = if change == ChangeKind::Deleted {
            None
        } else {
            let (kind, mode, bytes) =
                read_current(&source.workspace.join(rel))?.ok_or_else(|| {
                    io::Error::other(format!(
                        "{rel} is not there by that name: gone since the attempt, or a name that \
                         is not UTF-8, which a bundle cannot carry"
                    ))
                })?;
            if kind == FileKind::Symlink && !stays_inside(rel, &bytes) {
                return Err(io::Error::other(leaves(rel, &bytes)));
            }
            let after = FileAfter {
                kind,
                mode,
                hash: hex(blake3::hash(&bytes).as_bytes()),
                size: bytes.len() as u64,
            };
            contents.push((rel.to_owned(), kind, mode, bytes));
            Some(after)
        };
        let before = if change == ChangeKind::Created {
            None
        } else {
            before_hash(rel)
        };
        files.push(FileChange {
            path: rel.to_owned(),
            change,
            before,
            after,
        });
    }
    let manifest = Manifest {
        format: FORMAT.to_owned(),
        version: VERSION,
        pipeline: source.pipeline.to_owned(),
        phase: source.phase.to_owned(),
        run_id: source.run_id.to_owned(),
        attempt: source.attempt,
        files,
    };

    let tmp = path.with_extension("hxb.tmp");
    let mut builder = tar::Builder::new(io::BufWriter::new(fs::File::create(&tmp)?));
    append_file(
        &mut builder,
        MANIFEST,
        0o644,
        &serde_json::to_vec_pretty(&manifest)?,
    )?;
    for (rel, kind, mode, bytes) in &contents {
        let name = format!("{FILES}{rel}");
        match kind {
            FileKind::File => append_file(&mut builder, &name, *mode, bytes)?,
            FileKind::Symlink => {
                let mut header = header(tar::EntryType::Symlink, 0o777, 0);
                builder.append_link(
                    &mut header,
                    &name,
                    Path::new(std::ffi::OsStr::from_bytes(bytes)),
                )?;
            }
        }
    }
    append_file(&mut builder, EVENTS, 0o644, source.events.as_bytes())?;
    let mut journal = Vec::new();
    list_files(source.phase_dir, Path::new(""), &mut journal)?;
    for rel in journal {
        let rel_text = rel.to_string_lossy().replace('\\', "/");
        // The bundle itself, and the file it is written to before its rename.
        if rel_text == FILE_NAME || rel_text == format!("{FILE_NAME}.tmp") {
            continue;
        }
        let bytes = fs::read(source.phase_dir.join(&rel))?;
        append_file(
            &mut builder,
            &format!("{PHASE_DIR}{rel_text}"),
            0o644,
            &bytes,
        )?;
    }
    let mut writer = builder.into_inner()?;
    io::Write::flush(&mut writer)?;
    writer.get_ref().sync_data()?;
    drop(writer);
    fs::rename(&tmp, path)?;
    Ok(manifest)
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode & 0o7777);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

fn append_file<W: io::Write>(
    builder: &mut tar::Builder<W>,
    name: &str,
    mode: u32,
    bytes: &[u8],
) -> io::Result<()> {
    let mut header = header(tar::EntryType::Regular, mode, bytes.len() as u64);
    builder.append_data(&mut header, name, bytes)
}

/// Every file below `dir`, relative to the root it was first called with, in name order.
fn list_files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<fs::DirEntry> = match fs::read_dir(root.join(rel)) {
        Ok(entries) => entries.collect::<Result<_, _>>()?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let kind = entry.file_type()?;
        let path = rel.join(entry.file_name());
        if kind.is_dir() {
            list_files(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The file at `path` as a bundle sees it: its kind, permission bits and contents (a symlink's
/// target); `None` when there is none.
fn read_current(path: &Path) -> io::Result<Option<(FileKind, u32, Vec<u8>)>> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path)?;
        return Ok(Some((
            FileKind::Symlink,
            0,
            target.as_os_str().as_bytes().to_vec(),
        )));
    }
    if meta.is_dir() {
        return Ok(Some((FileKind::File, 0o40000, Vec::new())));
    }
    let bytes = fs::read(path)?;
    Ok(Some((
        FileKind::File,
        meta.permissions().mode() & 0o7777,
        bytes,
    )))
}

fn hex(bytes: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*bytes).to_hex().to_string()
}

/// Why a bundle could not be read.
#[derive(Debug)]
pub(crate) struct ReadError(String);

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Bundle {
    /// Reads a bundle file, checking its format, version and every path in it.
    pub(crate) fn read(path: &Path) -> Result<Bundle, ReadError> {
        let file = fs::File::open(path)
            .map_err(|e| ReadError(format!("cannot read {}: {e}", path.display())))?;
        Self::from_reader(file)
            .map_err(|e| ReadError(format!("{} is not a readable bundle: {e}", path.display())))
    }

    fn from_reader(reader: impl Read) -> Result<Bundle, String> {
        let mut archive = tar::Archive::new(reader);
        let mut manifest: Option<Manifest> = None;
        let mut contents = BTreeMap::new();
        let mut events = String::new();
        let mut phase_files = BTreeMap::new();
        for entry in archive.entries().map_err(|e| e.to_string())? {
            let mut entry = entry.map_err(|e| e.to_string())?;
            let name = entry
                .path()
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .into_owned();
            let kind = entry.header().entry_type();
            if name == MANIFEST {
                let mut text = Vec::new();
                entry.read_to_end(&mut text).map_err(|e| e.to_string())?;
                let value: serde_json::Value =
                    serde_json::from_slice(&text).map_err(|e| format!("{MANIFEST}: {e}"))?;
                if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
                    return Err(format!("{MANIFEST} does not say \"format\": \"{FORMAT}\""));
                }
                let version = value.get("version").and_then(serde_json::Value::as_u64);
                if version != Some(u64::from(VERSION)) {
                    return Err(format!(
                        "format version {}, and this helixflow reads version {VERSION}",
                        version.map_or_else(|| "missing".to_owned(), |v| v.to_string())
                    ));
                }
                manifest =
                    Some(serde_json::from_value(value).map_err(|e| format!("{MANIFEST}: {e}"))?);
            } else if let Some(rel) = name.strip_prefix(FILES) {
                let bytes = if kind == tar::EntryType::Symlink {
                    entry
                        .link_name_bytes()
                        .map(std::borrow::Cow::into_owned)
                        .ok_or_else(|| format!("{name}: a symlink without a target"))?
                } else {
                    let mut bytes = Vec::new();
                    entry.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
                    bytes
                };
                contents.insert(rel.to_owned(), bytes);
            } else if name == EVENTS {
                entry
                    .read_to_string(&mut events)
                    .map_err(|e| e.to_string())?;
            } else if let Some(rel) = name.strip_prefix(PHASE_DIR) {
                safe_path(rel).map_err(|why| format!("{name}: {why}"))?;
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
                phase_files.insert(rel.to_owned(), bytes);
            } else {
                return Err(format!("unexpected entry {name}"));
            }
        }
        let manifest = manifest.ok_or_else(|| format!("no {MANIFEST}"))?;
        Self::validate(&manifest, &contents)?;
        Ok(Bundle {
            manifest,
            contents,
            events,
            phase_files,
        })
    }

    /// Every path is relative, inside the workspace and outside `.git`; every file written has
    /// contents that match its hash; no file is written below another that the bundle writes.
    fn validate(manifest: &Manifest, contents: &BTreeMap<String, Vec<u8>>) -> Result<(), String> {
        let mut written = std::collections::BTreeSet::new();
        for file in &manifest.files {
            safe_path(&file.path).map_err(|why| format!("{}: {why}", file.path))?;
            match (&file.change, &file.after, &file.before) {
                (ChangeKind::Created, Some(_), _)
                | (ChangeKind::Modified, Some(_), Some(_))
                | (ChangeKind::Deleted, None, Some(_)) => {}
                _ => return Err(format!("{}: the manifest's entry is incomplete", file.path)),
            }
            if let Some(after) = &file.after {
                let bytes = contents
                    .get(&file.path)
                    .ok_or_else(|| format!("{}: its contents are missing", file.path))?;
                if hex(blake3::hash(bytes).as_bytes()) != after.hash {
                    return Err(format!("{}: its contents do not match its hash", file.path));
                }
                if after.kind == FileKind::Symlink && !stays_inside(&file.path, bytes) {
                    return Err(leaves(&file.path, bytes));
                }
                written.insert(file.path.as_str());
            }
        }
        for path in &written {
            let mut parent = Path::new(path).parent();
            while let Some(folder) = parent.filter(|p| !p.as_os_str().is_empty()) {
                if written.contains(folder.to_string_lossy().as_ref()) {
                    return Err(format!(
                        "{path}: below {}, which is a file",
                        folder.display()
                    ));
                }
                parent = folder.parent();
            }
        }
        Ok(())
    }

    /// What stands in the way of applying the bundle to `workspace`: a modified or deleted file
    /// whose contents are no longer those the bundle started from, a created file that exists with
    /// other contents, a folder on the way that is a file or a symlink. A file already as the
    /// bundle leaves it is no conflict (applying twice changes nothing).
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
            let current = read_current(&workspace.join(&file.path))?;
            if current
                .as_ref()
                .is_some_and(|(_, mode, _)| *mode == 0o40000)
            {
                conflicts.push(conflict("is a folder"));
                continue;
            }
            if self.already(file, current.as_ref()) {
                continue;
            }
            let current_hash = current
                .as_ref()
                .map(|(_, _, bytes)| hex(blake3::hash(bytes).as_bytes()));
            match file.change {
                ChangeKind::Created => {
                    if current.is_some() {
                        conflicts.push(conflict("exists already, with other contents"));
                    }
                }
                ChangeKind::Modified | ChangeKind::Deleted => match current_hash {
                    None => conflicts.push(conflict(
                        "does not exist, and the bundle changes an existing file",
                    )),
                    Some(hash) if Some(&hash) != file.before.as_ref() => {
                        conflicts
                            .push(conflict("changed since the bundle's phase started from it"));
                    }
                    Some(_) => {}
                },
            }
        }
        Ok(conflicts)
    }

    /// Whether the file is already as the bundle leaves it.
    fn already(&self, file: &FileChange, current: Option<&(FileKind, u32, Vec<u8>)>) -> bool {
        match (&file.after, current) {
            (None, None) => true,
            (Some(after), Some((kind, mode, bytes))) => {
                *kind == after.kind
                    && (after.kind == FileKind::Symlink || *mode == after.mode)
                    && Some(bytes) == self.contents.get(&file.path)
            }
            _ => false,
        }
    }

    /// Applies the bundle to `workspace` when [`Bundle::check`] finds no conflict; otherwise
    /// changes nothing and returns the conflicts.
    pub(crate) fn apply(&self, workspace: &Path) -> io::Result<Result<Applied, Vec<Conflict>>> {
        let conflicts = self.check(workspace)?;
        if !conflicts.is_empty() {
            return Ok(Err(conflicts));
        }
        let mut applied = Applied::default();
        for file in &self.manifest.files {
            let path = workspace.join(&file.path);
            let current = read_current(&path)?;
            if self.already(file, current.as_ref()) {
                applied.already += 1;
                continue;
            }
            applied.changed += 1;
            let Some(after) = &file.after else {
                fs::remove_file(&path)?;
                remove_empty_folders(workspace, &path);
                continue;
            };
            let bytes = &self.contents[&file.path];
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            if current.is_some() {
                fs::remove_file(&path)?;
            }
            match after.kind {
                FileKind::Symlink => std::os::unix::fs::symlink(
                    Path::new(std::ffi::OsStr::from_bytes(bytes)),
                    &path,
                )?,
                FileKind::File => {
                    fs::write(&path, bytes)?;
                    fs::set_permissions(&path, fs::Permissions::from_mode(after.mode))?;
                }
            }
        }
        Ok(Ok(applied))
    }

    /// The contents a created or modified file has after the bundle.
    pub(crate) fn contents(&self, path: &str) -> Option<&[u8]> {
        self.contents.get(path).map(Vec::as_slice)
    }
}

/// Refuses a path that is absolute, leaves the workspace, or goes into `.git`.
fn safe_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("an empty path");
    }
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) if name == ".git" => return Err("inside .git"),
            Component::Normal(_) => {}
            _ => return Err("not a plain relative path inside the workspace"),
        }
    }
    Ok(())
}

/// Whether a symlink at `path` (relative to the workspace) to `target` leads to a place inside
/// the workspace, judged by its text alone: a relative target whose `..` never climb above the
/// workspace from the link's folder. An absolute target leads out, whatever it names: on the
/// machine the bundle is applied to, it names that machine's files.
fn stays_inside(path: &str, target: &[u8]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::SnapshotOptions;

    fn snapshot(dir: &Path) -> Snapshot {
        Snapshot::take(dir, &SnapshotOptions::default(), None).unwrap()
    }

    fn make(dir: &Path, out: &Path, before: &Snapshot) -> Manifest {
        let after = snapshot(dir);
        let changes = before.diff(&after);
        let phase_dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(phase_dir.path().join("attempt-1")).unwrap();
        fs::write(phase_dir.path().join("attempt-1/gates.json"), "[]").unwrap();
        create(
            out,
            &Source {
                workspace: dir,
                before,
                changes: &changes,
                pipeline: "p",
                phase: "code",
                run_id: "r1",
                attempt: 1,
                phase_dir: phase_dir.path(),
                events: "{}\n",
            },
        )
        .unwrap()
    }

    #[test]
    fn a_bundle_carries_created_modified_deleted_binary_modes_and_symlinks() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        fs::write(w.join("keep.txt"), "same").unwrap();
        fs::write(w.join("edit.txt"), "old").unwrap();
        fs::create_dir(w.join("gone")).unwrap();
        fs::write(w.join("gone/x.txt"), "bye").unwrap();
        let copy = tempfile::tempdir().unwrap();
        for f in ["keep.txt", "edit.txt"] {
            fs::copy(w.join(f), copy.path().join(f)).unwrap();
        }
        fs::create_dir(copy.path().join("gone")).unwrap();
        fs::write(copy.path().join("gone/x.txt"), "bye").unwrap();

        let before = snapshot(w);
        fs::write(w.join("edit.txt"), "new").unwrap();
        fs::remove_dir_all(w.join("gone")).unwrap();
        fs::create_dir_all(w.join("bin")).unwrap();
        fs::write(w.join("bin/tool"), [0u8, 159, 146, 150, 255]).unwrap();
        fs::set_permissions(w.join("bin/tool"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("../edit.txt", w.join("bin/link")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let out = out.path().join("b.hxb");
        let manifest = make(w, &out, &before);
        let bundle = Bundle::read(&out).unwrap();
        assert_eq!(bundle.manifest, manifest);
        let paths: Vec<(&str, ChangeKind)> = bundle
            .manifest
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.change))
            .collect();
        assert_eq!(
            paths,
            [
                ("bin/link", ChangeKind::Created),
                ("bin/tool", ChangeKind::Created),
                ("edit.txt", ChangeKind::Modified),
                ("gone/x.txt", ChangeKind::Deleted),
            ]
        );
        assert_eq!(
            bundle.phase_files.keys().collect::<Vec<_>>(),
            ["attempt-1/gates.json"]
        );

        let c = copy.path();
        assert_eq!(bundle.check(c).unwrap(), []);
        assert_eq!(
            bundle.apply(c).unwrap().unwrap(),
            Applied {
                changed: 4,
                already: 0
            }
        );
        assert_eq!(
            fs::read(c.join("bin/tool")).unwrap(),
            [0u8, 159, 146, 150, 255]
        );
        assert_eq!(
            fs::metadata(c.join("bin/tool"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o755
        );
        assert_eq!(
            fs::read_link(c.join("bin/link")).unwrap(),
            Path::new("../edit.txt")
        );
        assert_eq!(fs::read_to_string(c.join("edit.txt")).unwrap(), "new");
        assert!(!c.join("gone").exists());
        // Twice changes nothing.
        assert_eq!(
            bundle.apply(c).unwrap().unwrap(),
            Applied {
                changed: 0,
                already: 4
            }
        );
    }

    #[test]
    fn conflicts_are_named_and_nothing_is_written() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        fs::write(w.join("a.txt"), "one").unwrap();
        let before = snapshot(w);
        fs::write(w.join("a.txt"), "two").unwrap();
        fs::write(w.join("new.txt"), "fresh").unwrap();
        let out = tempfile::tempdir().unwrap();
        let out = out.path().join("b.hxb");
        make(w, &out, &before);
        let bundle = Bundle::read(&out).unwrap();

        let other = tempfile::tempdir().unwrap();
        let o = other.path();
        fs::write(o.join("a.txt"), "someone else's").unwrap();
        fs::write(o.join("new.txt"), "not fresh").unwrap();
        let conflicts = bundle.apply(o).unwrap().unwrap_err();
        let named: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
        assert_eq!(
            named,
            [
                "a.txt: changed since the bundle's phase started from it",
                "new.txt: exists already, with other contents"
            ]
        );
        assert_eq!(
            fs::read_to_string(o.join("a.txt")).unwrap(),
            "someone else's"
        );
    }

    #[test]
    fn a_path_that_leaves_the_workspace_or_enters_git_is_refused() {
        for bad in ["../x", "/etc/passwd", "a/../../x", ".git/config", ""] {
            assert!(safe_path(bad).is_err(), "{bad}");
        }
        assert!(safe_path("a/b.txt").is_ok());
    }

    #[test]
    fn a_symlink_that_leads_out_of_the_workspace_is_neither_written_nor_read() {
        for (path, target, inside) in [
            ("a/link", "../b.txt", true),
            ("a/b/link", "../../c/./d", true),
            ("link", "b.txt", true),
            ("link", "/etc/passwd", false),
            ("link", "../outside", false),
            ("a/link", "../../outside", false),
            ("a/link", "../a/../../x", false),
        ] {
            assert_eq!(
                stays_inside(path, target.as_bytes()),
                inside,
                "{path} -> {target}"
            );
        }
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let before = snapshot(w);
        std::os::unix::fs::symlink("/etc/passwd", w.join("out.txt")).unwrap();
        let after = snapshot(w);
        let phase_dir = tempfile::tempdir().unwrap();
        let out = phase_dir.path().join("b.hxb");
        let err = create(
            &out,
            &Source {
                workspace: w,
                before: &before,
                changes: &before.diff(&after),
                pipeline: "p",
                phase: "code",
                run_id: "r1",
                attempt: 1,
                phase_dir: phase_dir.path(),
                events: "",
            },
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "out.txt is a symlink to `/etc/passwd`, which leads outside the workspace: a bundle carries no such link"
        );

        // A bundle made elsewhere with such a link is refused as a whole.
        let mut builder = tar::Builder::new(fs::File::create(&out).unwrap());
        let target = b"../../home/someone/.ssh/authorized_keys";
        let manifest = Manifest {
            format: FORMAT.to_owned(),
            version: VERSION,
            pipeline: "p".to_owned(),
            phase: "code".to_owned(),
            run_id: "r1".to_owned(),
            attempt: 1,
            files: vec![FileChange {
                path: "keys".to_owned(),
                change: ChangeKind::Created,
                before: None,
                after: Some(FileAfter {
                    kind: FileKind::Symlink,
                    mode: 0,
                    hash: hex(blake3::hash(target).as_bytes()),
                    size: target.len() as u64,
                }),
            }],
        };
        let json = serde_json::to_vec(&manifest).unwrap();
        append_file(&mut builder, MANIFEST, 0o644, &json).unwrap();
        let mut link = header(tar::EntryType::Symlink, 0o777, 0);
        builder
            .append_link(
                &mut link,
                "files/keys",
                Path::new(std::ffi::OsStr::from_bytes(target)),
            )
            .unwrap();
        builder.finish().unwrap();
        drop(builder);
        let err = Bundle::read(&out).unwrap_err().to_string();
        assert!(err.contains("keys is a symlink to `../../home"), "{err}");
    }

    #[test]
    fn another_format_or_version_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.hxb");
        let mut builder = tar::Builder::new(fs::File::create(&path).unwrap());
        let text = br#"{"format":"helixflow-bundle","version":9}"#;
        append_file(&mut builder, MANIFEST, 0o644, text).unwrap();
        builder.finish().unwrap();
        drop(builder);
        let err = Bundle::read(&path).unwrap_err().to_string();
        assert!(err.contains("format version 9"), "{err}");
        fs::write(&path, "not a tar").unwrap();
        assert!(Bundle::read(&path).is_err());
    }
}
