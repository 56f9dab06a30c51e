//! Records of passed phases, `<state>/passed/<phase>.json`: what a phase was, read and produced
//! when it last passed. A phase is up to date when its record matches the pipeline and the
//! workspace now (see `engine::plan`).
//!
//! The record is the only proof that a phase passed, so it is written only after the phase
//! passed, and atomically: a new file is written beside the old one and renamed over it. A
//! phase's record is removed, and the removal synced, before the phase starts again
//! ([`Records::remove_before_start`]), so a helixflow killed at any moment, or a machine that
//! loses power, leaves either the complete record of a phase that passed or none: never a
//! partial one, never one of a phase that did not pass.
//!
//! Records of passes are synced in groups ([`Records::commit`]): every record written since the
//! last commit has its contents written out, then the folder is synced once, when the scheduler next starts
//! phases (with their removals) and when the run ends. A record that a power cut catches before
//! its commit is lost, or left empty, zero-filled or cut short: none of these parses as a record,
//! so its phase runs again, which costs time but never trusts work that did not pass. SIGKILL
//! loses nothing: what was written is in the kernel's cache.
//!
//! A record is a file in the state folder, which the run's agents can write like any other. Within
//! a run, [`Records`] knows every record file as it left it (its inode, size and modification and
//! change times; the change time cannot be set back): at the end of each attempt a record it did
//! not leave so is found, removed and told ([`Records::changed_since`]). What a record cannot
//! prove is said in the README ("Up to date: never pay twice").

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::run::folder_name;
use crate::workspace::FileStat;

/// The format of a record; a record of another version is read as no record (the phase runs).
pub(crate) const RECORD_VERSION: u32 = 1;

/// The folder of the records, inside the state folder.
pub(crate) const FOLDER: &str = "passed";

/// One file as it was when a phase passed: the hash of its contents, and what its metadata said
/// when it was read, which lets a later check reuse the hash without reading the file again when
/// the metadata proves it unchanged ([`FileStat::unchanged`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// Inode change time, nanoseconds since the Unix epoch (0 in a record written before it was
    /// kept: the file is then read again).
    #[serde(default)]
    pub ctime_ns: i128,
    /// Inode number.
    #[serde(default)]
    pub inode: u64,
    /// When the file was read, on the clock files are stamped from.
    #[serde(default)]
    pub read_ns: i128,
    /// BLAKE3 of the content, in hex.
    pub hash: String,
}

impl FileStamp {
    /// What the file's metadata said when it was read.
    pub(crate) fn stat(&self) -> FileStat {
        FileStat {
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            inode: self.inode,
        }
    }
}

/// What a phase was, read and produced when it last passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct PhaseRecord {
    /// [`RECORD_VERSION`].
    pub version: u32,
    /// The phase.
    pub phase: String,
    /// The run in which it passed.
    pub run_id: String,
    /// One hash of everything below but the outputs; what dependent phases record of it.
    pub fingerprint: String,
    /// The compiled phase, its agent and the declared environment, part by part (secret values
    /// replaced by their hash).
    pub definition: BTreeMap<String, String>,
    /// The template the phase was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The first attempt's prompt, rendered, secrets redacted (kept to show what changed).
    pub prompt: String,
    /// BLAKE3 of the rendered prompt before redaction.
    pub prompt_hash: String,
    /// The agent and template taken from git repositories, with the import and commit each came
    /// from (kept to name an import that moved).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub remote: BTreeMap<String, crate::model::RemoteOrigin>,
    /// The input files, by workspace-relative path.
    pub inputs: BTreeMap<String, FileStamp>,
    /// The phase's outputs when it passed.
    pub outputs: BTreeMap<String, FileStamp>,
    /// The fingerprint of each dependency when this phase passed (`none` for one never passed).
    pub upstream: BTreeMap<String, String>,
}

/// The records of one state folder; clones share what they know of the folder.
#[derive(Debug, Clone)]
pub(crate) struct Records {
    dir: PathBuf,
    known: Arc<Mutex<Known>>,
    /// A run's ([`Records::new`]), not read only ([`Records::to_read`]).
    writes: bool,
}

/// The record files as helixflow last left them, and the ones found otherwise.
#[derive(Debug, Default)]
struct Known {
    /// Whether the folder was listed ([`Records::watch`]): until then nothing else is told
    /// apart.
    watched: bool,
    /// Each file of the folder by name, as it was when helixflow wrote it or first saw it.
    files: BTreeMap<OsString, Identity>,
    /// Each record found changed by something else, with when it was found.
    found: Vec<(Instant, String)>,
    /// The records written since the last commit, whose contents and names are not yet synced.
    pending: BTreeSet<OsString>,
    /// Records removed ahead of their phase's start, with their contents, to put back should the
    /// phase not start after all ([`Records::commit`]).
    aside: BTreeMap<OsString, Vec<u8>>,
    /// The fingerprint of each record helixflow wrote, good while the file is as it left it
    /// ([`Records::fingerprint`]).
    fingerprints: BTreeMap<OsString, String>,
    /// Whether the folder was made (or found) by a write.
    made: bool,
}

/// What a file's metadata says of its identity ([`FileStat`]): a write changes the change time,
/// which no process can set back.
type Identity = FileStat;

impl Records {
    /// The records kept in the state folder `state_dir` (an absolute path), for a run that
    /// writes them. Records written by something else are told apart once [`Records::watch`]
    /// listed the folder.
    pub(crate) fn new(state_dir: &Path) -> Self {
        Records {
            dir: state_dir.join(FOLDER),
            known: Arc::new(Mutex::new(Known::default())),
            writes: true,
        }
    }

    /// Lists the folder, once, before the run starts any phase: from then on a record written
    /// by anything else (an agent, a process a step left behind) is found by
    /// [`Records::changed_since`]. A run that starts nothing never lists it: no process of its
    /// own could have written one.
    pub(crate) fn watch(&self) {
        let mut known = self.known();
        if known.watched {
            return;
        }
        known.watched = true;
        let listed = listing(&self.dir);
        known.files.extend(listed);
    }

    /// The records kept in the state folder `state_dir`, to read only (a plan that runs
    /// nothing: `status`, `run --dry-run`): the folder is not listed, so nothing written by
    /// another could be told apart (see [`Records::changed_since`]).
    pub(crate) fn to_read(state_dir: &Path) -> Self {
        Records {
            dir: state_dir.join(FOLDER),
            known: Arc::new(Mutex::new(Known::default())),
            writes: false,
        }
    }

    /// Whether these are a run's records, which it writes (a plan's new file stamps included),
    /// rather than read only.
    pub(crate) fn writes(&self) -> bool {
        self.writes
    }

    fn known(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every record found written by something other than helixflow after `since`: those found
    /// before, and any found now, which is removed first (its phase is then not up to date). A
    /// detail per record. A record removed by something else is only forgotten: its phase runs
    /// again, which helps no one past a verdict. Nothing before [`Records::watch`].
    pub(crate) fn changed_since(&self, since: Instant) -> Vec<String> {
        let mut known = self.known();
        if !known.watched {
            return Vec::new();
        }
        let mut kept = BTreeMap::new();
        let mut removed = false;
        for (name, identity) in listing(&self.dir) {
            if known.files.get(&name) == Some(&identity) {
                kept.insert(name, identity);
                continue;
            }
            removed |= fs::remove_file(self.dir.join(&name)).is_ok();
            let detail = format!(
                "`{FOLDER}/{}` in the state folder was written by something other than \
                 helixflow during the run: records of passed phases are helixflow's own. It was \
                 removed, so its phase is no longer up to date",
                name.to_string_lossy()
            );
            known.found.push((Instant::now(), detail));
        }
        known.files = kept;
        if removed {
            let _ = sync_dir(&self.dir);
        }
        known
            .found
            .iter()
            .filter(|(when, _)| *when >= since)
            .map(|(_, detail)| detail.clone())
            .collect()
    }

    /// The state folder the records are in.
    pub(crate) fn state_dir(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// Where a phase's record is.
    pub(crate) fn path(&self, phase: &str) -> PathBuf {
        self.dir.join(file_name(phase))
    }

    /// A phase's record: `Ok(None)` when there is none, or one of another format or of another
    /// phase (a name collision), or one that cannot be parsed; the phase then runs.
    pub(crate) fn read(&self, phase: &str) -> io::Result<Option<PhaseRecord>> {
        let text = match fs::read(self.path(phase)) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(serde_json::from_slice::<PhaseRecord>(&text)
            .ok()
            .filter(|r| r.version == RECORD_VERSION && r.phase == phase))
    }

    /// The fingerprint of a phase's record, as [`Records::read`] would find it: told from what
    /// was written, when helixflow wrote the record and the file is as it left it (its identity
    /// unchanged), else read.
    pub(crate) fn fingerprint(&self, phase: &str) -> Option<String> {
        let name = file_name(phase);
        {
            let known = self.known();
            if let (Some(fingerprint), Some(identity)) =
                (known.fingerprints.get(&name), known.files.get(&name))
            {
                match fs::symlink_metadata(self.dir.join(&name)) {
                    Ok(meta) if FileStat::of(&meta) == *identity => {
                        return Some(fingerprint.clone());
                    }
                    _ => {}
                }
            }
        }
        self.read(phase)
            .ok()
            .flatten()
            .map(|record| record.fingerprint)
    }

    /// Writes a record atomically: the old record or the new one is in the folder at every
    /// moment. It is on the disk for good once [`Records::commit`] returns.
    pub(crate) fn write(&self, record: &PhaseRecord) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        bytes.push(b'\n');
        // Held until the new record is known: a check meanwhile must not take it for a forgery.
        let mut known = self.known();
        let name = file_name(&record.phase);
        known.aside.remove(&name);
        self.write_bytes(&mut known, name.clone(), &bytes)?;
        if record.version == RECORD_VERSION {
            known.fingerprints.insert(name, record.fingerprint.clone());
        }
        Ok(())
    }

    /// Writes the record file `name` through a temporary file and a rename, uncommitted.
    fn write_bytes(&self, known: &mut Known, name: OsString, bytes: &[u8]) -> io::Result<()> {
        // Bytes not known to be a record: only `write` tells its fingerprint.
        known.fingerprints.remove(&name);
        if !known.made {
            fs::create_dir_all(&self.dir)?;
            known.made = true;
        }
        let path = self.dir.join(&name);
        let tmp = super::temporary_beside(&path);
        let written = (|| {
            let file = match File::create(&tmp) {
                // The folder went since: made again.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir_all(&self.dir)?;
                    File::create(&tmp)
                }
                file => file,
            };
            file?.write_all(bytes)?;
            fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        if let Ok(meta) = fs::symlink_metadata(&path) {
            known.files.insert(name.clone(), FileStat::of(&meta));
        }
        known.pending.insert(name);
        Ok(())
    }

    /// The phases whose records name them items of the `for-each` phase `of` (`of[KEY]`).
    pub(crate) fn items_of(&self, of: &str) -> Vec<String> {
        // A record's file is named after its phase, so only those that start like an item's of
        // `of` are read.
        let folder = folder_name(&format!("{of}["));
        let prefix = folder[..=folder.rfind('[').unwrap_or_default()].to_owned();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                name.starts_with(&prefix) && name.ends_with(".json")
            })
            .filter_map(|entry| {
                let text = fs::read(entry.path()).ok()?;
                let record: PhaseRecord = serde_json::from_slice(&text).ok()?;
                let (item_of, _) = crate::model::split_item_name(&record.phase)?;
                (item_of == of).then_some(record.phase)
            })
            .collect();
        names.sort();
        names
    }

    /// Removes the records of phases about to start, and makes the removals durable together
    /// with every record written since the last commit: one sync of the folder for all of them.
    /// When this returns, none of these phases can look up to date should helixflow be killed
    /// or the machine lose power while they run.
    ///
    /// The records of `ahead` (phases expected to start soon) are removed in the same sync and
    /// set aside: [`Records::started`] drops one when its phase starts, and
    /// [`Records::commit`] writes back those whose phase did not start. A helixflow killed
    /// meanwhile loses them: those phases then run again, though they may have been up to date.
    pub(crate) fn remove_before_start(&self, phases: &[&str], ahead: &[&str]) -> io::Result<()> {
        let mut known = self.known();
        let mut removed = false;
        let mut first_error = None;
        for (phase, keep) in phases
            .iter()
            .map(|p| (p, false))
            .chain(ahead.iter().map(|p| (p, true)))
        {
            let name = file_name(phase);
            // Set aside already: gone for good when its phase starts, kept when it is ahead again.
            if known.aside.contains_key(&name) {
                if !keep {
                    known.aside.remove(&name);
                }
                continue;
            }
            let path = self.dir.join(&name);
            let kept = if keep { fs::read(&path).ok() } else { None };
            known.files.remove(&name);
            known.fingerprints.remove(&name);
            known.pending.remove(&name);
            match fs::remove_file(&path) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            }
            if let Some(bytes) = kept {
                known.aside.insert(name, bytes);
            }
        }
        let committed = self.commit_locked(&mut known, removed);
        first_error.map_or(committed, Err)
    }

    /// Whether a phase's record was removed ahead of its start and is still set aside.
    pub(crate) fn is_aside(&self, phase: &str) -> bool {
        self.known().aside.contains_key(&file_name(phase))
    }

    /// A phase whose record was set aside started: its record is gone for good.
    pub(crate) fn started(&self, phase: &str) {
        self.known().aside.remove(&file_name(phase));
    }

    /// Makes every record written since the last commit durable (its contents, then the folder
    /// once), having written back the records set aside whose phase did not start.
    pub(crate) fn commit(&self) -> io::Result<()> {
        let mut known = self.known();
        let aside = std::mem::take(&mut known.aside);
        let mut result = Ok(());
        for (name, bytes) in aside {
            let written = self.write_bytes(&mut known, name, &bytes);
            if result.is_ok() {
                result = written;
            }
        }
        result.and(self.commit_locked(&mut known, false))
    }

    fn commit_locked(&self, known: &mut Known, removed: bool) -> io::Result<()> {
        if known.pending.is_empty() && !removed {
            return Ok(());
        }
        let mut result = Ok(());
        let pending: Vec<OsString> = std::mem::take(&mut known.pending).into_iter().collect();
        // Every record of a group is sent to the disk before any is waited for: the disk takes
        // them together rather than one after the other.
        for group in pending.chunks(WRITTEN_OUT_TOGETHER) {
            let files: Vec<io::Result<File>> = group
                .iter()
                .map(|name| {
                    let file = File::open(self.dir.join(name))?;
                    start_writing_out(&file);
                    Ok(file)
                })
                .collect();
            for file in files {
                match file.and_then(|file| write_out(&file)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound && result.is_ok() => {
                        result = Err(e);
                    }
                    _ => {}
                }
            }
        }
        result.and(sync_dir(&self.dir))
    }
}

/// How many records' files are open at once while a group is written out.
const WRITTEN_OUT_TOGETHER: usize = 64;

/// Starts writing a record's contents to the disk, without waiting ([`write_out`] waits).
fn start_writing_out(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain system call on a descriptor `file` owns for the call's duration. A
        // failure is met again, and reported, by `write_out`.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Writes a record's contents to the disk ahead of the folder's sync. On Linux the pages are
/// written and waited for without a journal commit of their own (`sync_file_range`): the
/// folder's sync that follows commits every record of the group at once (on ext4 and XFS, the
/// blocks written here with it). Where that does not make the contents durable, a power cut
/// leaves a record empty or zero-filled, which reads as none. Elsewhere, `fdatasync`.
fn write_out(file: &File) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: a plain system call on a descriptor `file` owns for the call's duration.
        if unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) } == 0 {
            return Ok(());
        }
    }
    file.sync_data()
}

/// Where the record of `phase` is in the state folder `state_dir`.
pub(crate) fn path_in(state_dir: &Path, phase: &str) -> PathBuf {
    state_dir.join(FOLDER).join(file_name(phase))
}

/// The name of a phase's record file.
fn file_name(phase: &str) -> OsString {
    OsString::from(format!("{}.json", folder_name(phase)))
}

/// Every record file of the folder (a name ending with `.json`: other files are never read as
/// records, such as a writer's temporary file or an editor's swap file) by name, with its
/// identity; nothing when there is no folder.
fn listing(dir: &Path) -> BTreeMap<OsString, Identity> {
    crate::workspace::identities_in(dir, |name| name.as_encoded_bytes().ends_with(b".json"))
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(phase: &str, n: u8) -> PhaseRecord {
        PhaseRecord {
            version: RECORD_VERSION,
            phase: phase.to_owned(),
            run_id: format!("run-{n}"),
            fingerprint: format!("{n:064x}"),
            definition: BTreeMap::from([("retries".to_owned(), n.to_string())]),
            template: None,
            prompt: "x".repeat(usize::from(n) * 100),
            prompt_hash: String::new(),
            remote: BTreeMap::new(),
            inputs: BTreeMap::new(),
            outputs: BTreeMap::new(),
            upstream: BTreeMap::new(),
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Write a record with this number.
        Write(usize, u8),
        /// Remove the record.
        /// Remove the record before its phase starts, and the other one's ahead of its start.
        Remove(usize, usize),
        /// A phase whose record was set aside starts.
        Started(usize),
        /// A writer killed before its rename: a partial temporary file, no rename.
        KilledWrite(usize, u8, usize),
        /// A record file cut short by a broken disk: never produced by `write`, read as none.
        Truncated(usize, usize),
        /// The records written since the last commit.
        Commit,
        /// The power fails: each record written since the last commit is on the disk as written,
        /// or gone, or empty, or zero-filled, or cut short (its name renamed in, its contents
        /// not yet written). Committed records and removals stay as they were.
        PowerLoss(Vec<(u8, usize)>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..3, 1u8..20).prop_map(|(p, n)| Op::Write(p, n)),
            (0usize..3, 0usize..3).prop_map(|(p, q)| Op::Remove(p, q)),
            (0usize..3).prop_map(Op::Started),
            (0usize..3, 1u8..20, 0usize..400).prop_map(|(p, n, cut)| Op::KilledWrite(p, n, cut)),
            (0usize..3, 0usize..200).prop_map(|(p, cut)| Op::Truncated(p, cut)),
            Just(Op::Commit),
            proptest::collection::vec((0u8..5, 0usize..400), 3).prop_map(Op::PowerLoss),
        ]
    }

    /// What a power cut leaves of a record written but not committed: `how` chooses among the
    /// outcomes `Op::PowerLoss` lists. Returns whether the record is still whole.
    fn power_cut(path: &Path, how: u8, cut: usize) -> bool {
        let Ok(bytes) = fs::read(path) else {
            return false;
        };
        match how {
            0 => return true,
            1 => fs::remove_file(path).unwrap(),
            2 => fs::write(path, b"").unwrap(),
            3 => fs::write(path, vec![0u8; bytes.len()]).unwrap(),
            _ if cut < bytes.len() => fs::write(path, &bytes[..cut]).unwrap(),
            _ => return true,
        }
        false
    }

    const PHASES: [&str; 3] = ["build", "a/b c", "tests"];

    proptest! {
        /// Whatever sequence of writes, removals before a start, commits, killed writes and
        /// power cuts, reading gives exactly the last record written and not removed since, or
        /// none: never a partial one, never one removed before its phase started.
        #[test]
        fn reads_give_the_last_complete_write(ops in proptest::collection::vec(op(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let mut records = Records::new(dir.path());
            let mut model: [Option<PhaseRecord>; 3] = [None, None, None];
            // Which phases' records were written since the last commit.
            let mut uncommitted = [false; 3];
            // The records set aside ahead of a start, as they were.
            let mut aside: [Option<Option<PhaseRecord>>; 3] = [None, None, None];
            for op in ops {
                match op {
                    Op::Write(p, n) => {
                        let r = record(PHASES[p], n);
                        records.write(&r).unwrap();
                        model[p] = Some(r);
                        uncommitted[p] = true;
                        aside[p] = None;
                    }
                    Op::Remove(p, q) => {
                        // Removals commit every record written before them.
                        records.remove_before_start(&[PHASES[p]], &[PHASES[q]]).unwrap();
                        aside[p] = None;
                        model[p] = None;
                        if q != p && aside[q].is_none() {
                            aside[q] = Some(model[q].take());
                        }
                        uncommitted = [false; 3];
                    }
                    Op::Started(p) => {
                        records.started(PHASES[p]);
                        aside[p] = None;
                    }
                    Op::Commit => {
                        records.commit().unwrap();
                        for (p, kept) in aside.iter_mut().enumerate() {
                            if let Some(kept) = kept.take() {
                                model[p] = kept;
                            }
                        }
                        uncommitted = [false; 3];
                    }
                    Op::PowerLoss(cuts) => {
                        for (p, (how, cut)) in cuts.into_iter().enumerate() {
                            if uncommitted[p] && !power_cut(&records.path(PHASES[p]), how, cut) {
                                model[p] = None;
                            }
                        }
                        // A new process: it knows the folder as it finds it; what was set
                        // aside is lost.
                        uncommitted = [false; 3];
                        aside = [None, None, None];
                        records = Records::new(dir.path());
                    }
                    Op::KilledWrite(p, n, cut) => {
                        fs::create_dir_all(dir.path().join(FOLDER)).unwrap();
                        let bytes = serde_json::to_vec_pretty(&record(PHASES[p], n)).unwrap();
                        let tmp = dir.path().join(FOLDER).join(format!(
                            ".{}.{}.tmp",
                            folder_name(PHASES[p]),
                            std::process::id() + 1
                        ));
                        fs::write(tmp, &bytes[..cut.min(bytes.len())]).unwrap();
                    }
                    Op::Truncated(p, cut) => {
                        if let Some(r) = &model[p] {
                            let bytes = serde_json::to_vec_pretty(r).unwrap();
                            if cut < bytes.len() {
                                fs::write(records.path(PHASES[p]), &bytes[..cut]).unwrap();
                                model[p] = None;
                            }
                        }
                    }
                }
                for (p, expected) in model.iter().enumerate() {
                    prop_assert_eq!(&records.read(PHASES[p]).unwrap(), expected);
                    // What a dependent records of it: the same, whether remembered or read.
                    prop_assert_eq!(
                        records.fingerprint(PHASES[p]),
                        expected.as_ref().map(|r| r.fingerprint.clone())
                    );
                }
            }
        }
    }

    #[test]
    fn a_record_helixflow_did_not_write_is_found_removed_and_told_to_whoever_was_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path());
        records.watch();
        records.write(&record("build", 1)).unwrap();
        records.write(&record("tests", 1)).unwrap();
        let started = Instant::now();
        // Written and removed by helixflow: nothing to tell.
        records.write(&record("build", 2)).unwrap();
        records.remove_before_start(&["tests"], &[]).unwrap();
        assert!(records.changed_since(started).is_empty());

        // Another process rewrites one record and removes another; files that are not records
        // are none of the records' business.
        fs::write(dir.path().join(FOLDER).join(".build.json.swp"), "x").unwrap();
        records.write(&record("tests", 1)).unwrap();
        let forged = serde_json::to_vec(&record("build", 3)).unwrap();
        fs::write(records.path("build"), forged).unwrap();
        fs::remove_file(records.path("tests")).unwrap();
        let found = records.changed_since(started);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("`passed/build.json` in the state folder"),
            "{found:?}"
        );
        assert_eq!(records.read("build").unwrap(), None);
        // Told again to an attempt that was under way, to none that started after.
        assert_eq!(records.changed_since(started).len(), 1);
        assert!(records.changed_since(Instant::now()).is_empty());
        // A clone knows what the original wrote.
        let clone = records.clone();
        records.write(&record("build", 4)).unwrap();
        assert!(clone.changed_since(Instant::now()).is_empty());
    }

    #[test]
    fn records_are_told_apart_from_when_the_folder_is_watched() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path());
        records.write(&record("build", 1)).unwrap();
        let started = Instant::now();
        let rewrite = |n| {
            fs::write(
                records.path("build"),
                serde_json::to_vec(&record("build", n)).unwrap(),
            )
            .unwrap();
        };
        // A run that starts nothing never lists the folder: nothing is told apart.
        rewrite(2);
        assert!(records.changed_since(started).is_empty());
        assert!(records.read("build").unwrap().is_some());
        // Watched before the first phase starts: what is there then is the folder as found.
        records.watch();
        assert!(records.changed_since(started).is_empty());
        rewrite(3);
        assert_eq!(records.changed_since(started).len(), 1);
        assert_eq!(records.read("build").unwrap(), None);
    }

    #[test]
    fn a_record_of_another_version_or_phase_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path());
        let mut r = record("build", 1);
        r.version = RECORD_VERSION + 1;
        records.write(&r).unwrap();
        assert_eq!(records.read("build").unwrap(), None);
        let other = record("other", 1);
        fs::write(records.path("build"), serde_json::to_vec(&other).unwrap()).unwrap();
        assert_eq!(records.read("build").unwrap(), None);
    }
}
