//! Records of passed phases, `<state>/passed/<phase>.json`: what a phase was, read and produced
//! when it last passed. A phase is up to date when its record matches the pipeline and the
//! workspace now (see `engine::plan`).
//!
//! The record is the only proof that a phase passed, so it is written only after the phase
//! passed, and atomically: a new file is written and synced beside the old one, renamed over it,
//! and the folder synced. A phase's record is removed (and the removal synced) before the phase
//! starts again, so a helixflow killed at any moment leaves either the complete record of a phase
//! that passed or none: never a partial one, never one of a phase that did not pass.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::run::folder_name;

/// The format of a record; a record of another version is read as no record (the phase runs).
pub(crate) const RECORD_VERSION: u32 = 1;

/// The folder of the records, inside the state folder.
pub(crate) const FOLDER: &str = "passed";

/// One file as it was when a phase passed. Size and modification time let a later check reuse
/// the hash without reading the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// BLAKE3 of the content, in hex.
    pub hash: String,
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
    /// The input files, by workspace-relative path.
    pub inputs: BTreeMap<String, FileStamp>,
    /// The phase's outputs when it passed.
    pub outputs: BTreeMap<String, FileStamp>,
    /// The fingerprint of each dependency when this phase passed (`none` for one never passed).
    pub upstream: BTreeMap<String, String>,
}

/// The records of one state folder.
#[derive(Debug, Clone)]
pub(crate) struct Records {
    dir: PathBuf,
}

impl Records {
    /// The records kept in the state folder `state_dir` (an absolute path).
    pub(crate) fn new(state_dir: &Path) -> Self {
        Records {
            dir: state_dir.join(FOLDER),
        }
    }

    /// Where a phase's record is.
    pub(crate) fn path(&self, phase: &str) -> PathBuf {
        self.dir.join(format!("{}.json", folder_name(phase)))
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

    /// Writes a record atomically: the old record or the new one is on the disk at every moment,
    /// and the new one is there for good when this returns.
    pub(crate) fn write(&self, record: &PhaseRecord) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let path = self.path(&record.phase);
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            folder_name(&record.phase),
            std::process::id()
        ));
        let mut bytes = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        bytes.push(b'\n');
        let written = (|| {
            let mut file = File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        sync_dir(&self.dir)
    }

    /// Removes a phase's record before it runs again, for good when this returns.
    pub(crate) fn remove(&self, phase: &str) -> io::Result<()> {
        match fs::remove_file(self.path(phase)) {
            Ok(()) => sync_dir(&self.dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
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
        Remove(usize),
        /// A writer killed before its rename: a partial temporary file, no rename.
        KilledWrite(usize, u8, usize),
        /// A record file cut short by a broken disk: never produced by `write`, read as none.
        Truncated(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..3, 1u8..20).prop_map(|(p, n)| Op::Write(p, n)),
            (0usize..3).prop_map(Op::Remove),
            (0usize..3, 1u8..20, 0usize..400).prop_map(|(p, n, cut)| Op::KilledWrite(p, n, cut)),
            (0usize..3, 0usize..200).prop_map(|(p, cut)| Op::Truncated(p, cut)),
        ]
    }

    const PHASES: [&str; 3] = ["build", "a/b c", "tests"];

    proptest! {
        /// Whatever sequence of writes, removals and killed writes, reading gives exactly the
        /// last record written and not removed since, or none: never a partial one.
        #[test]
        fn reads_give_the_last_complete_write(ops in proptest::collection::vec(op(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let records = Records::new(dir.path());
            let mut model: [Option<PhaseRecord>; 3] = [None, None, None];
            for op in ops {
                match op {
                    Op::Write(p, n) => {
                        let r = record(PHASES[p], n);
                        records.write(&r).unwrap();
                        model[p] = Some(r);
                    }
                    Op::Remove(p) => {
                        records.remove(PHASES[p]).unwrap();
                        model[p] = None;
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
                }
            }
        }
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
