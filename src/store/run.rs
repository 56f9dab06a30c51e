//! One run's folder: `<state-dir>/runs/<run-id>/` with the event journal ([`super::journal`]), the
//! summary ([`super::run_json`]) and every attempt's artifacts.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The folder of one run.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// `<workspace>/<state-dir>/runs/<run-id>`.
    pub path: PathBuf,
    /// The run's id.
    pub run_id: String,
}

impl RunDir {
    /// Creates a new run folder under `runs_dir` (`<state-dir>/runs`) with a fresh, sortable id;
    /// a state folder made for it ignores itself (see [`super::state_dir`]).
    pub fn create(runs_dir: &Path) -> io::Result<Self> {
        if let Some(state_dir) = runs_dir.parent() {
            super::state_dir::create(state_dir)?;
        }
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

    /// Points `<runs>/latest` at this run (a relative symlink, replaced through a rename), so that
    /// `.helixflow/runs/latest/report.html` is the newest run's report whatever its id.
    pub fn mark_latest(&self) -> io::Result<()> {
        let Some(runs_dir) = self.path.parent() else {
            return Ok(());
        };
        let tmp = runs_dir.join(format!(".{LATEST}-{}.tmp", std::process::id()));
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&self.run_id, &tmp)?;
        fs::rename(&tmp, runs_dir.join(LATEST)).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
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
    pub(crate) fn phase_dir(&self, phase: &str) -> PathBuf {
        self.path.join("phases").join(folder_name(phase))
    }
}

/// A phase name as a folder name: safe characters kept, others replaced, and a short hash added
/// when anything was replaced so that two names cannot collide.
pub(crate) fn folder_name(phase: &str) -> String {
    let safe: String = phase
        .chars()
        .map(|c| {
            // `[` and `]`: the phases of `for-each` items are named `phase[key]`.
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '[' | ']') {
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

/// The name of the link to the newest run in a runs folder, and the word `show`, `report`,
/// `approve` and `reject` take for it.
pub(crate) const LATEST: &str = "latest";

/// Writes a file through a temporary sibling, synced to the disk, and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    fs::rename(&tmp, path)
}

/// Past runs in a state folder, oldest first.
pub(crate) fn list_runs(runs_dir: &Path) -> io::Result<Vec<RunDir>> {
    let mut runs: Vec<RunDir> = match fs::read_dir(runs_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            // `latest` is a link to one of the others, and `.latest-*.tmp` one on its way.
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
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
    fn latest_points_at_the_newest_run_and_is_not_listed_as_one() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..2 {
            let run = RunDir::create(dir.path()).unwrap();
            std::fs::write(run.path.join("run.json"), "{}").unwrap();
            run.mark_latest().unwrap();
            assert_eq!(
                std::fs::read_link(dir.path().join(LATEST)).unwrap(),
                Path::new(&run.run_id)
            );
            assert!(dir.path().join(LATEST).join("run.json").is_file());
        }
        let listed = list_runs(dir.path()).unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().all(|run| run.run_id != LATEST));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
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
