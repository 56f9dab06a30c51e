//! Reading a bundle that came from elsewhere, trusting nothing in it. The archive is walked once,
//! entry by entry, and every entry is streamed: memory holds the manifest (at most
//! [`MANIFEST_LIMIT`]), entry names (at most [`NAME_LIMIT`] each) and symlink targets (at most
//! [`LINKS_LIMIT`] together), never a file's contents or the journal. The manifest comes first
//! and the archive must agree with it exactly: one entry under `files/` for each file it creates
//! or modifies and none other, of the kind, size and hash it says; one manifest; one
//! `journal/events.jsonl`; only regular files and symlinks (no sparse files, hard links, folders,
//! devices or PAX headers, which helixflow never writes).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::write::Checked;
use super::{
    ChangeKind, EVENTS, FILES, FORMAT, FileChange, FileKind, MANIFEST, MANIFEST_LIMIT, Manifest,
    NAME_LIMIT, PHASE_DIR, VERSION, hex, leaves, safe_path, stays_inside,
};

/// The most bytes of symlink targets a reader keeps, all links together.
pub(crate) const LINKS_LIMIT: u64 = 16 << 20;

/// A bundle whose every entry was checked. Contents stay in the file: applying it reads the file
/// again (and checks every entry again as it stages it).
#[derive(Debug, Clone)]
pub(crate) struct Bundle {
    /// Its manifest.
    pub manifest: Manifest,
    /// The bundle file.
    pub(super) file: PathBuf,
    /// The target of each created or modified symlink, by path.
    links: BTreeMap<String, Vec<u8>>,
    /// The number of records in `journal/events.jsonl`.
    pub events: usize,
    /// The phase folder's files, by path relative to it, with their sizes.
    pub phase_files: BTreeMap<String, u64>,
}

/// Why a bundle could not be read.
#[derive(Debug)]
pub(crate) struct ReadError(String);

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The contents of a created or modified file, as the archive holds them.
pub(super) enum Contents<'a> {
    /// A regular file's bytes, streamed (counted and hashed as they are read).
    File(&'a mut dyn Read),
    /// A symlink's target.
    Symlink(&'a [u8]),
}

/// What one walk through the archive found.
pub(super) struct Scanned {
    pub(super) manifest: Manifest,
    pub(super) links: BTreeMap<String, Vec<u8>>,
    pub(super) events: usize,
    pub(super) phase_files: BTreeMap<String, u64>,
}

impl Bundle {
    /// Reads a bundle file, checking its format, version, limits and every entry in it.
    pub(crate) fn read(path: &Path) -> Result<Bundle, ReadError> {
        let file =
            open(path).map_err(|e| ReadError(format!("cannot read {}: {e}", path.display())))?;
        let scanned = scan(io::BufReader::new(file), &mut |_, _| Ok(()))
            .map_err(|e| ReadError(format!("{} is not a readable bundle: {e}", path.display())))?;
        Ok(Bundle {
            manifest: scanned.manifest,
            file: path.to_path_buf(),
            links: scanned.links,
            events: scanned.events,
            phase_files: scanned.phase_files,
        })
    }

    /// The target of a symlink the bundle creates or modifies.
    pub(crate) fn link_target(&self, path: &str) -> Option<&[u8]> {
        self.links.get(path).map(Vec::as_slice)
    }
}

/// Opens a bundle file for reading; anything but a regular file (a FIFO would block) is refused.
pub(super) fn open(path: &Path) -> io::Result<fs::File> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// What an archive entry is, once its GNU long name (if any) is joined to it.
enum Item {
    File(u64),
    Symlink(Vec<u8>),
}

/// Walks the archive once, checking everything, and hands `on_file` the contents of every
/// created or modified file; the contents a regular file's reader yields are checked against the
/// manifest after `on_file` returns (an error then, after `on_file` has seen them).
pub(super) fn scan(
    reader: impl Read,
    on_file: &mut dyn FnMut(&FileChange, Contents<'_>) -> io::Result<()>,
) -> Result<Scanned, String> {
    scan_until(reader, on_file, false)
}

/// The contents after of the files a bundle creates or modifies, by path, each cut to its first
/// `keep` bytes (symlinks: their targets), with its manifest. The walk stops where the files end:
/// the journal after them is not read.
pub(crate) fn contents(
    path: &Path,
    keep: usize,
) -> Result<(Manifest, BTreeMap<String, Vec<u8>>), ReadError> {
    let file = open(path).map_err(|e| ReadError(format!("cannot read {}: {e}", path.display())))?;
    let mut kept = BTreeMap::new();
    let mut on_file = |change: &FileChange, contents: Contents<'_>| {
        let bytes = match contents {
            Contents::Symlink(target) => target.to_vec(),
            Contents::File(reader) => {
                let mut bytes = Vec::new();
                reader.take(keep as u64).read_to_end(&mut bytes)?;
                bytes
            }
        };
        kept.insert(change.path.clone(), bytes);
        Ok(())
    };
    let scanned = scan_until(io::BufReader::new(file), &mut on_file, true)
        .map_err(|e| ReadError(format!("{} is not a readable bundle: {e}", path.display())))?;
    Ok((scanned.manifest, kept))
}

/// [`scan`], stopping at the first entry after the files when `files_only`.
fn scan_until(
    reader: impl Read,
    on_file: &mut dyn FnMut(&FileChange, Contents<'_>) -> io::Result<()>,
    files_only: bool,
) -> Result<Scanned, String> {
    let mut archive = tar::Archive::new(reader);
    // Raw entries: the tar crate would otherwise read a GNU long name or a PAX header of any
    // size into memory before we see it.
    let entries = archive.entries().map_err(|e| e.to_string())?.raw(true);
    let mut state: Option<State> = None;
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    for entry in entries {
        let mut entry = entry.map_err(|e| e.to_string())?;
        let kind = entry.header().entry_type();
        let size = entry.header().entry_size().map_err(|e| e.to_string())?;
        if kind.is_gnu_longname() || kind.is_gnu_longlink() {
            let slot = if kind.is_gnu_longname() {
                &mut long_name
            } else {
                &mut long_link
            };
            if slot.is_some() {
                return Err("two long names for one entry".to_owned());
            }
            *slot = Some(long_name_entry(&mut entry, size)?);
            continue;
        }
        let name = long_name
            .take()
            .unwrap_or_else(|| entry.header().path_bytes().into_owned());
        let link = long_link.take().or_else(|| {
            entry
                .header()
                .link_name_bytes()
                .map(std::borrow::Cow::into_owned)
        });
        let name =
            String::from_utf8(name).map_err(|_| "an entry whose name is not UTF-8".to_owned())?;
        if name.len() > NAME_LIMIT {
            return Err(format!(
                "an entry name of {} bytes (the limit is {NAME_LIMIT})",
                name.len()
            ));
        }
        let item = match kind {
            tar::EntryType::Regular => Item::File(size),
            tar::EntryType::Symlink => {
                let target = link.ok_or_else(|| format!("{name}: a symlink without a target"))?;
                if target.len() > NAME_LIMIT {
                    return Err(format!(
                        "{name}: a symlink target of {} bytes (the limit is {NAME_LIMIT})",
                        target.len()
                    ));
                }
                Item::Symlink(target)
            }
            other => {
                return Err(format!(
                    "{name}: an entry of type {:?}; a bundle holds only regular files and symlinks",
                    other.as_byte() as char
                ));
            }
        };
        match &mut state {
            None if name == MANIFEST => {
                let Item::File(size) = item else {
                    return Err(format!("{MANIFEST} is not a regular file"));
                };
                state = Some(State::new(read_manifest(&mut entry, size)?)?);
            }
            None => return Err(format!("the first entry is {name}, not {MANIFEST}")),
            Some(_) if name == MANIFEST => return Err(format!("two {MANIFEST} entries")),
            Some(_) if files_only && !name.starts_with(FILES) => break,
            Some(state) => state.entry(&name, item, &mut entry, on_file)?,
        }
    }
    if long_name.is_some() || long_link.is_some() {
        return Err("a long name with no entry after it".to_owned());
    }
    let state = state.ok_or_else(|| format!("no {MANIFEST}"))?;
    state.finish()
}

/// The contents of a GNU long name or long link entry, without its trailing NULs.
fn long_name_entry(entry: &mut impl Read, size: u64) -> Result<Vec<u8>, String> {
    if size > NAME_LIMIT as u64 + 1 {
        return Err(format!(
            "an entry name of {size} bytes (the limit is {NAME_LIMIT})"
        ));
    }
    let mut bytes = Vec::new();
    entry
        .take(size)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 != size {
        return Err("the archive ends inside an entry name".to_owned());
    }
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    Ok(bytes)
}

fn read_manifest(entry: &mut impl Read, size: u64) -> Result<Manifest, String> {
    #[derive(Deserialize)]
    struct Probe {
        format: Option<serde_json::Value>,
        version: Option<serde_json::Value>,
    }
    if size > MANIFEST_LIMIT {
        return Err(format!(
            "{MANIFEST} is {size} bytes (the limit is {MANIFEST_LIMIT})"
        ));
    }
    let mut text = Vec::new();
    entry
        .take(size)
        .read_to_end(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 != size {
        return Err(format!("the archive ends inside {MANIFEST}"));
    }
    let probe: Probe = serde_json::from_slice(&text).map_err(|e| format!("{MANIFEST}: {e}"))?;
    if probe.format.as_ref().and_then(serde_json::Value::as_str) != Some(FORMAT) {
        return Err(format!("{MANIFEST} does not say \"format\": \"{FORMAT}\""));
    }
    let version = probe.version.as_ref().and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(VERSION)) {
        return Err(format!(
            "format version {}, and this helixflow reads version {VERSION}",
            probe
                .version
                .map_or_else(|| "missing".to_owned(), |v| v.to_string())
        ));
    }
    serde_json::from_slice(&text).map_err(|e| format!("{MANIFEST}: {e}"))
}

/// The walk's state once the manifest is read.
struct State {
    manifest: Manifest,
    /// The index in the manifest of every file whose contents are still to come.
    expected: BTreeMap<String, usize>,
    /// Paths whose contents came.
    seen: BTreeSet<String>,
    links: BTreeMap<String, Vec<u8>>,
    links_size: u64,
    events: Option<usize>,
    phase_files: BTreeMap<String, u64>,
}

impl State {
    fn new(manifest: Manifest) -> Result<State, String> {
        let expected = check_manifest(&manifest)?;
        Ok(State {
            manifest,
            expected,
            seen: BTreeSet::new(),
            links: BTreeMap::new(),
            links_size: 0,
            events: None,
            phase_files: BTreeMap::new(),
        })
    }

    fn entry(
        &mut self,
        name: &str,
        item: Item,
        entry: &mut impl Read,
        on_file: &mut dyn FnMut(&FileChange, Contents<'_>) -> io::Result<()>,
    ) -> Result<(), String> {
        if let Some(rel) = name.strip_prefix(FILES) {
            return self.file(name, rel, item, entry, on_file);
        }
        let Item::File(size) = item else {
            return Err(format!("{name}: a symlink, where a regular file belongs"));
        };
        if name == EVENTS {
            if self.events.is_some() {
                return Err(format!("two {EVENTS} entries"));
            }
            let mut lines = 0;
            let mut last = b'\n';
            let read = stream(entry, size, |chunk| {
                lines += chunk.iter().filter(|&&b| b == b'\n').count();
                if let Some(&b) = chunk.last() {
                    last = b;
                }
            })
            .map_err(|e| format!("{name}: {e}"))?;
            self.events = Some(lines + usize::from(read > 0 && last != b'\n'));
        } else if let Some(rel) = name.strip_prefix(PHASE_DIR) {
            safe_path(rel).map_err(|why| format!("{name}: {why}"))?;
            if self.phase_files.contains_key(rel) {
                return Err(format!("two {name} entries"));
            }
            stream(entry, size, |_| {}).map_err(|e| format!("{name}: {e}"))?;
            self.phase_files.insert(rel.to_owned(), size);
        } else {
            return Err(format!("unexpected entry {name}"));
        }
        Ok(())
    }

    /// `files/<rel>`: the contents of a created or modified file, which must be exactly what the
    /// manifest says.
    fn file(
        &mut self,
        name: &str,
        rel: &str,
        item: Item,
        entry: &mut impl Read,
        on_file: &mut dyn FnMut(&FileChange, Contents<'_>) -> io::Result<()>,
    ) -> Result<(), String> {
        safe_path(rel).map_err(|why| format!("{name}: {why}"))?;
        let Some(index) = self.expected.remove(rel) else {
            return Err(if self.seen.contains(rel) {
                format!("two {name} entries")
            } else if self.manifest.files.iter().any(|f| f.path == rel) {
                format!("{name}: the manifest deletes this file")
            } else {
                format!("{name}: not in the manifest")
            });
        };
        self.seen.insert(rel.to_owned());
        let file = &self.manifest.files[index];
        let Some(after) = &file.after else {
            return Err(format!("{name}: the manifest deletes this file"));
        };
        match (after.kind, item) {
            (FileKind::Symlink, Item::Symlink(target)) => {
                if target.len() as u64 != after.size || hex(&blake3::hash(&target)) != after.hash {
                    return Err(format!(
                        "{rel}: its target does not match the manifest's size and hash"
                    ));
                }
                if !stays_inside(rel, &target) {
                    return Err(leaves(rel, &target));
                }
                self.links_size += target.len() as u64;
                if self.links_size > LINKS_LIMIT {
                    return Err(format!("more than {LINKS_LIMIT} bytes of symlink targets"));
                }
                on_file(file, Contents::Symlink(&target)).map_err(|e| format!("{rel}: {e}"))?;
                self.links.insert(rel.to_owned(), target);
            }
            (FileKind::File, Item::File(size)) => {
                if size != after.size {
                    return Err(format!(
                        "{rel}: {size} bytes in the archive, {} in the manifest",
                        after.size
                    ));
                }
                let mut reader = Checked::new(entry.take(size));
                on_file(file, Contents::File(&mut reader)).map_err(|e| format!("{rel}: {e}"))?;
                io::copy(&mut reader, &mut io::sink()).map_err(|e| format!("{rel}: {e}"))?;
                if reader.read != size {
                    return Err(format!("{rel}: the archive ends inside its contents"));
                }
                if hex(&reader.hasher.finalize()) != after.hash {
                    return Err(format!("{rel}: its contents do not match its hash"));
                }
            }
            (FileKind::File, Item::Symlink(_)) => {
                return Err(format!(
                    "{rel}: a symlink in the archive, a regular file in the manifest"
                ));
            }
            (FileKind::Symlink, Item::File(_)) => {
                return Err(format!(
                    "{rel}: a regular file in the archive, a symlink in the manifest"
                ));
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Scanned, String> {
        if let Some(path) = self.expected.keys().next() {
            return Err(format!("{path}: its contents are missing"));
        }
        Ok(Scanned {
            manifest: self.manifest,
            links: self.links,
            events: self.events.unwrap_or(0),
            phase_files: self.phase_files,
        })
    }
}

/// Reads an entry's `size` bytes through `each`, failing when the archive ends before.
fn stream(entry: &mut impl Read, size: u64, mut each: impl FnMut(&[u8])) -> io::Result<u64> {
    let mut entry = entry.take(size);
    let mut buf = vec![0u8; 64 * 1024];
    let mut read = 0;
    loop {
        let n = entry.read(&mut buf)?;
        if n == 0 {
            break;
        }
        each(&buf[..n]);
        read += n as u64;
    }
    if read != size {
        return Err(io::Error::other("the archive ends inside it"));
    }
    Ok(read)
}

/// Every path is a plain relative path inside the workspace and outside `.git`, listed once;
/// every entry is complete for its change; modes are permission bits; hashes are BLAKE3 in hex;
/// no file is written below another that the bundle writes. Returns the index of every file
/// whose contents the archive must hold.
fn check_manifest(manifest: &Manifest) -> Result<BTreeMap<String, usize>, String> {
    let mut expected = BTreeMap::new();
    let mut paths = BTreeSet::new();
    for (index, file) in manifest.files.iter().enumerate() {
        let path = &file.path;
        safe_path(path).map_err(|why| format!("{path}: {why}"))?;
        if !paths.insert(path.as_str()) {
            return Err(format!("{path}: listed twice in the manifest"));
        }
        match (&file.change, &file.after, &file.before) {
            (ChangeKind::Created, Some(_), None)
            | (ChangeKind::Modified, Some(_), Some(_))
            | (ChangeKind::Deleted, None, Some(_)) => {}
            _ => return Err(format!("{path}: the manifest's entry is inconsistent")),
        }
        if file.before.as_deref().is_some_and(|h| !is_hash(h)) {
            return Err(format!("{path}: its hash before is not a BLAKE3 hash"));
        }
        if let Some(after) = &file.after {
            if !is_hash(&after.hash) {
                return Err(format!("{path}: its hash after is not a BLAKE3 hash"));
            }
            if after.kind == FileKind::File && after.mode & !0o7777 != 0 {
                return Err(format!(
                    "{path}: mode {:o} is not permission bits",
                    after.mode
                ));
            }
            if after.kind == FileKind::Symlink && after.size > NAME_LIMIT as u64 {
                return Err(format!(
                    "{path}: a symlink target of {} bytes (the limit is {NAME_LIMIT})",
                    after.size
                ));
            }
            expected.insert(path.clone(), index);
        }
    }
    for path in expected.keys() {
        let mut parent = Path::new(path).parent();
        while let Some(folder) = parent.filter(|p| !p.as_os_str().is_empty()) {
            if expected.contains_key(folder.to_string_lossy().as_ref()) {
                return Err(format!(
                    "{path}: below {}, which is a file",
                    folder.display()
                ));
            }
            parent = folder.parent();
        }
    }
    Ok(expected)
}

fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
