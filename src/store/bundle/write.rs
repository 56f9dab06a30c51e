//! Writing a bundle at the end of a passing attempt. Every file is streamed into the archive (its
//! hash taken on a first read, checked again as it is copied), so that memory does not grow with
//! the size of the workspace's files or the journal. The agent's transcripts are not carried.

use std::fs;
use std::io::{self, BufRead, Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    ChangeKind, EVENTS, FILES, FORMAT, FileAfter, FileChange, FileKind, MANIFEST, Manifest,
    PHASE_DIR, VERSION, hex, leaves, stays_inside,
};
use crate::workspace::{Changes, Snapshot};

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
    /// The phase's folder of the run, whose records are kept under `journal/phase/`.
    pub phase_dir: &'a Path,
    /// The run's journal, whose lines of the phase are kept as `journal/events.jsonl`.
    pub journal: &'a Path,
}

/// Writes the bundle of `source` to `path` and returns its manifest. On an error nothing is left
/// behind (the archive is written to a temporary file first).
pub(crate) fn create(path: &Path, source: &Source<'_>) -> io::Result<Manifest> {
    let tmp = path.with_extension("hxb.tmp");
    let written = write_to(&tmp, source);
    match written {
        Ok(manifest) => {
            fs::rename(&tmp, path)?;
            Ok(manifest)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn write_to(tmp: &Path, source: &Source<'_>) -> io::Result<Manifest> {
    let manifest = manifest(source)?;
    let mut builder = tar::Builder::new(io::BufWriter::new(fs::File::create(tmp)?));
    let json = serde_json::to_vec_pretty(&manifest)?;
    append_bytes(&mut builder, MANIFEST, 0o644, &json)?;
    for file in &manifest.files {
        let Some(after) = &file.after else { continue };
        let name = format!("{FILES}{}", file.path);
        let at = source.workspace.join(&file.path);
        match after.kind {
            FileKind::Symlink => {
                let target = fs::read_link(&at)?;
                if hex(&blake3::hash(target.as_os_str().as_bytes())) != after.hash {
                    return Err(changed_meanwhile(&file.path));
                }
                let mut header = header(tar::EntryType::Symlink, 0o777, 0);
                builder.append_link(&mut header, &name, &target)?;
            }
            FileKind::File => {
                let file_handle = fs::File::open(&at)?;
                let mut header = header(tar::EntryType::Regular, after.mode, after.size);
                let mut reader = Checked::new(file_handle.take(after.size));
                builder.append_data(&mut header, &name, &mut reader)?;
                if reader.read != after.size || hex(&reader.hasher.finalize()) != after.hash {
                    return Err(changed_meanwhile(&file.path));
                }
            }
        }
    }
    append_events(&mut builder, source)?;
    let mut journal = Vec::new();
    list_files(source.phase_dir, Path::new(""), &mut journal)?;
    for rel in journal.into_iter().filter(|rel| is_record(rel)) {
        let rel_text = rel.to_string_lossy().replace('\\', "/");
        let file = fs::File::open(source.phase_dir.join(&rel))?;
        let size = file.metadata()?.len();
        let mut header = header(tar::EntryType::Regular, 0o644, size);
        let mut reader = Checked::new(file.take(size));
        builder.append_data(&mut header, format!("{PHASE_DIR}{rel_text}"), &mut reader)?;
        if reader.read != size {
            return Err(io::Error::other(format!(
                "{} shrank while the bundle was written",
                source.phase_dir.join(&rel).display()
            )));
        }
    }
    let mut writer = builder.into_inner()?;
    writer.flush()?;
    writer.get_ref().sync_data()?;
    Ok(manifest)
}

/// The manifest of `source`: every changed file, with its hashes taken by streaming it.
fn manifest(source: &Source<'_>) -> io::Result<Manifest> {
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
    let mut files = Vec::new();
    for (rel, change) in changed {
        // What no reader would accept is not written (a `.Git` folder is one on Linux, not on a
        // Mac): the phase gets no bundle, and the run says why.
        super::safe_path(rel).map_err(|why| {
            io::Error::other(format!("{rel}: {why}, which a bundle cannot carry"))
        })?;
        let after = if change == ChangeKind::Deleted {
            None
        } else {
            Some(file_after(source.workspace, rel)?)
        };
        let before = if change == ChangeKind::Created {
            None
        } else {
            source
                .before
                .get(rel)
                .map(|state| hex(&blake3::Hash::from_bytes(state.hash)))
        };
        files.push(FileChange {
            path: rel.to_owned(),
            change,
            before,
            after,
        });
    }
    Ok(Manifest {
        format: FORMAT.to_owned(),
        version: VERSION,
        pipeline: source.pipeline.to_owned(),
        phase: source.phase.to_owned(),
        run_id: source.run_id.to_owned(),
        attempt: source.attempt,
        files,
    })
}

/// What `rel` is now in the workspace, its contents hashed as a stream.
fn file_after(workspace: &Path, rel: &str) -> io::Result<FileAfter> {
    let path = workspace.join(rel);
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::other(format!(
                "{rel} is not there by that name: gone since the attempt, or a name that is not \
                 UTF-8, which a bundle cannot carry"
            )));
        }
        Err(e) => return Err(e),
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(&path)?;
        let bytes = target.as_os_str().as_bytes();
        if !stays_inside(rel, bytes) {
            return Err(io::Error::other(leaves(rel, bytes)));
        }
        return Ok(FileAfter {
            kind: FileKind::Symlink,
            mode: 0,
            hash: hex(&blake3::hash(bytes)),
            size: bytes.len() as u64,
        });
    }
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{rel} is not a regular file or a symlink: a bundle cannot carry it"
        )));
    }
    let mut reader = Checked::new(fs::File::open(&path)?);
    io::copy(&mut reader, &mut io::sink())?;
    Ok(FileAfter {
        kind: FileKind::File,
        mode: meta.permissions().mode() & 0o7777,
        hash: hex(&reader.hasher.finalize()),
        size: reader.read,
    })
}

fn changed_meanwhile(rel: &str) -> io::Error {
    io::Error::other(format!("{rel} changed while the bundle was written"))
}

/// `journal/events.jsonl`: the journal's whole lines of the phase, streamed through a temporary
/// file (the run's dispatcher may be appending to the journal meanwhile).
fn append_events<W: Write>(builder: &mut tar::Builder<W>, source: &Source<'_>) -> io::Result<()> {
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        phase: Option<std::borrow::Cow<'a, str>>,
    }
    let mut events = tempfile::tempfile()?;
    match fs::File::open(source.journal) {
        Ok(journal) => {
            let mut reader = io::BufReader::new(journal);
            let mut out = io::BufWriter::new(&mut events);
            let mut line = Vec::new();
            loop {
                line.clear();
                // A last line without its newline is still being written.
                if reader.read_until(b'\n', &mut line)? == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                if serde_json::from_slice::<Line<'_>>(&line)
                    .is_ok_and(|l| l.phase.as_deref() == Some(source.phase))
                {
                    out.write_all(&line)?;
                }
            }
            out.flush()?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let size = events.stream_position()?;
    events.seek(io::SeekFrom::Start(0))?;
    let mut header = header(tar::EntryType::Regular, 0o644, size);
    builder.append_data(&mut header, EVENTS, events.take(size))
}

pub(super) fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode & 0o7777);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

pub(super) fn append_bytes<W: Write>(
    builder: &mut tar::Builder<W>,
    name: &str,
    mode: u32,
    bytes: &[u8],
) -> io::Result<()> {
    let mut header = header(tar::EntryType::Regular, mode, bytes.len() as u64);
    builder.append_data(&mut header, name, bytes)
}

/// A reader that counts and hashes what passes through it.
pub(super) struct Checked<R> {
    inner: R,
    pub(super) read: u64,
    pub(super) hasher: blake3::Hasher,
}

impl<R: Read> Checked<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            read: 0,
            hasher: blake3::Hasher::new(),
        }
    }
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Whether a file of the phase's folder is one of the journal's records, which a bundle carries:
/// the JSON files helixflow writes (`invocation.json`, `gates.json`, `changes.json`,
/// `bookkeeping.json`, `receipt.json`, `verdict.json`, approvals, `work.json`), which replay the
/// verdict. The transcripts (`stdout.log`, `stderr.log`, `response.txt`), the prompts, the
/// feedback and the gate commands' logs grow with what the agent and the gates print: they stay in
/// the run folder, so that a bundle is the size of the phase's changes and not of its output.
fn is_record(rel: &Path) -> bool {
    rel.extension().is_some_and(|e| e == "json")
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
