//! One run's folder: `<state-dir>/runs/<run-id>/` with the event journal, the summary and every
//! attempt's artifacts.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::event::{Event, Stamped};

/// The summary of a run, `run.json`: written when the run starts and rewritten when it ends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct RunSummary {
    /// The run's id.
    pub run_id: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// The pipeline file.
    pub file: PathBuf,
    /// RFC 3339 start time.
    pub started: String,
    /// RFC 3339 end time, once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// `running`, `passed`, `failed`, `cancelled` or `timed-out`.
    pub status: String,
    /// The process exit code, once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The helixflow process running it (to tell a crashed run from a running one).
    pub pid: u32,
    /// Per phase, in file order.
    pub phases: Vec<PhaseSummary>,
}

impl RunSummary {
    /// The run's status as it stands: `crashed` when `run.json` says `running` but the helixflow
    /// process that ran it is gone (killed outright, or the machine stopped), else as recorded.
    /// `helixflow runs` and `helixflow show` both tell a run's status by this.
    pub fn current_status(&self) -> &str {
        if self.status == "running" && !process_exists(self.pid) {
            "crashed"
        } else {
            &self.status
        }
    }
}

/// Whether a process still exists.
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    // Another user's process exists too; it only may not be signalled.
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// One phase's line in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct PhaseSummary {
    /// The phase.
    pub name: String,
    /// `pending`, `running`, `passed`, `failed`, `skipped` or `cancelled`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// What failed in the last attempt: `agent` (or `run`, for a `run` step) when the child did,
    /// then the gates that failed.
    #[serde(default)]
    pub failed_gates: Vec<String>,
    /// Why the last attempt's agent or `run` step failed, when how it exited does not say: it
    /// could not start, its response could not be read, or its transcript lacks the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The folder of one run.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// `<workspace>/<state-dir>/runs/<run-id>`.
    pub path: PathBuf,
    /// The run's id.
    pub run_id: String,
}

impl RunDir {
    /// Creates a new run folder under `runs_dir` with a fresh, sortable id.
    pub fn create(runs_dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(runs_dir)?;
        let stamp = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
        let base: String = stamp.chars().filter(char::is_ascii_digit).collect();
        let base = format!("{}-{}", &base[..8], &base[8..14]);
        for n in 0u32.. {
            let run_id = if n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let path = runs_dir.join(&run_id);
            match fs::create_dir(&path) {
                Ok(()) => {
                    fs::create_dir(path.join("phases"))?;
                    return Ok(Self { path, run_id });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        unreachable!("some suffix is free")
    }

    /// The folder of one attempt, created on demand: `phases/<phase>/attempt-<n>`.
    pub fn attempt_dir(&self, phase: &str, attempt: u32) -> io::Result<PathBuf> {
        let phase_dir = self.phase_dir(phase);
        let dir = phase_dir.join(format!("attempt-{attempt}"));
        // `phases/` is made with the run: one `mkdir` per level that is new, none that fails.
        if attempt == 1 {
            create_new_dir(&phase_dir)?;
        }
        create_new_dir(&dir)?;
        Ok(dir)
    }

    /// The folder of one phase.
    pub fn phase_dir(&self, phase: &str) -> PathBuf {
        self.path.join("phases").join(folder_name(phase))
    }

    /// Replaces `run.json` through a rename, so that helixflow killed at any moment leaves the old
    /// or the new one, never half of one. Not synced to the disk, like the journal: a sync costs
    /// milliseconds per write here, and what it guards against (the machine losing power) the
    /// journal is not guarded against either.
    pub fn write_summary(&self, summary: &RunSummary) -> io::Result<()> {
        replace_file(
            &self.path.join("run.json"),
            serde_json::to_string_pretty(summary)?.as_bytes(),
        )
    }

    /// Reads `run.json`.
    pub fn read_summary(&self) -> io::Result<RunSummary> {
        let text = fs::read_to_string(self.path.join("run.json"))?;
        serde_json::from_str(&text).map_err(io::Error::other)
    }
}

/// A phase name as a folder name: safe characters kept, others replaced, and a short hash added
/// when anything was replaced so that two names cannot collide.
pub fn folder_name(phase: &str) -> String {
    let safe: String = phase
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe == phase && !safe.starts_with('.') && !safe.is_empty() {
        safe
    } else {
        let hash = blake3::hash(phase.as_bytes()).to_hex();
        format!("{}-{}", safe.trim_start_matches('.'), &hash[..8])
    }
}

/// Writes a file through a temporary sibling, synced to the disk, and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    fs::rename(&tmp, path)
}

/// Writes a file through a temporary sibling and a rename, without syncing it to the disk.
fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}

/// The event journal, `events.jsonl`: one JSON object per line, whole lines written with a single
/// `write` call, so that killing helixflow at any moment leaves whole lines only.
pub struct Journal {
    file: File,
    /// The lines of one write, kept to reuse its allocation.
    buffer: String,
    started: Instant,
}

impl Journal {
    /// Opens (appending) the journal of a run. Events come to it redacted already (see
    /// [`crate::event::Event::redacted`]).
    pub fn open(run: &RunDir) -> io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(run.path.join("events.jsonl"))?;
        Ok(Self {
            file,
            buffer: String::new(),
            started: Instant::now(),
        })
    }

    /// Stamps events that arrived together and appends them with a single `write`, so that an
    /// interruption leaves whole lines only. The stamped events come back with the write's result.
    pub fn record(
        &mut self,
        events: impl IntoIterator<Item = Event>,
    ) -> (Vec<Stamped>, io::Result<()>) {
        self.buffer.clear();
        let mut stamped = Vec::new();
        let mut result = Ok(());
        for event in events {
            let event = stamp(event, self.started);
            match serde_json::to_string(&event) {
                Ok(json) => {
                    self.buffer.push_str(&json);
                    self.buffer.push('\n');
                }
                Err(e) => result = Err(e.into()),
            }
            stamped.push(event);
        }
        let written = self.file.write_all(self.buffer.as_bytes());
        (stamped, result.and(written))
    }
}

/// Stamps an event with the current time and the time since `started`.
pub fn stamp(event: Event, started: Instant) -> Stamped {
    Stamped {
        time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        event,
    }
}

/// Past runs in a state folder, oldest first.
pub fn list_runs(runs_dir: &Path) -> io::Result<Vec<RunDir>> {
    let mut runs: Vec<RunDir> = match fs::read_dir(runs_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("run.json").is_file())
            .map(|e| RunDir {
                run_id: e.file_name().to_string_lossy().into_owned(),
                path: e.path(),
            })
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    runs.sort_by(|a, b| run_order(&a.run_id).cmp(&run_order(&b.run_id)));
    Ok(runs)
}

/// The order of run ids: by their time stamp, then by the number a second run in the same second
/// gets (`…-2` before `…-10`, which a comparison of strings would reverse).
fn run_order(run_id: &str) -> (&str, u64, &str) {
    match run_id.match_indices('-').nth(1) {
        Some((at, _)) => match run_id[at + 1..].parse() {
            Ok(n) => (&run_id[..at], n, ""),
            Err(_) => (run_id, 0, run_id),
        },
        None => (run_id, 0, ""),
    }
}

/// Creates a folder, and its parents when they are missing; one that exists is fine.
fn create_new_dir(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(dir),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_safe_and_distinct() {
        assert_eq!(folder_name("parser"), "parser");
        assert_ne!(folder_name("a/b"), folder_name("a_b"));
        assert!(!folder_name("..").contains('/'));
        assert!(!folder_name("..").starts_with('.'));
        assert!(folder_name("").len() > 1);
    }

    #[test]
    fn runs_in_the_same_second_are_listed_in_the_order_they_started() {
        let dir = tempfile::tempdir().unwrap();
        let made: Vec<String> = (0..12)
            .map(|_| {
                let run = RunDir::create(dir.path()).unwrap();
                std::fs::write(run.path.join("run.json"), "{}").unwrap();
                run.run_id
            })
            .collect();
        let listed: Vec<String> = list_runs(dir.path())
            .unwrap()
            .into_iter()
            .map(|run| run.run_id)
            .collect();
        assert_eq!(listed, made);
        let mut ids = vec!["20260101-000000-10", "20260101-000000-2", "20260101-000000"];
        ids.sort_by_key(|id| run_order(id));
        assert_eq!(
            ids,
            ["20260101-000000", "20260101-000000-2", "20260101-000000-10"]
        );
    }

    #[test]
    fn run_ids_are_unique_and_sortable() {
        let dir = tempfile::tempdir().unwrap();
        let a = RunDir::create(dir.path()).unwrap();
        let b = RunDir::create(dir.path()).unwrap();
        assert_ne!(a.run_id, b.run_id);
        assert!(a.run_id < b.run_id || b.run_id.starts_with(&a.run_id));
    }
}
