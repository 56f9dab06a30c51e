//! The parts of a workspace's git repository that no agent or verifier may change: its
//! configuration (`config`, `config.worktree`), its hooks (`hooks/`) and `info/` (excludes,
//! attributes, sparse-checkout). Each can make git run a command of the writer's choosing
//! (`core.fsmonitor`, a hook, a filter driver named by `info/attributes`) in a later git command
//! of the person or of another phase, or hide files from the snapshots (`info/exclude`).
//!
//! Refs, the index, objects and logs are not guarded: git changes them itself, and an agent that
//! commits its work (Aider does by default) changes them as it should.
//!
//! [`RepositoryFingerprint`] is those files at one moment, contents included. A run's
//! [`RepositoryGuard`] holds them as they were when the run started and is asked at the end of
//! every attempt: what differs is noted with the time it was found and put back byte-exact, and
//! every attempt that was under way then answers for it, since any of them may have made the
//! change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::git::GitDirs;
use super::{Changes, ProtectedPaths, Snapshot, SnapshotOptions};

/// The largest guarded file whose contents are kept to be put back.
const KEPT: u64 = 1 << 20;

/// The guarded files of the common git folder.
const COMMON: [&str; 4] = ["config", "config.worktree", "hooks/**", "info/**"];

/// The guarded files of a linked worktree's own git folder.
const OWN: [&str; 1] = ["config.worktree"];

/// The guarded files of a workspace's repository at one moment, with their contents.
#[derive(Debug, Clone, Default)]
pub(crate) struct RepositoryFingerprint {
    folders: Vec<Folder>,
}

#[derive(Debug, Clone)]
struct Folder {
    /// The git folder.
    dir: PathBuf,
    /// How its files are named to people: `.git`, from the repository's top.
    shown: String,
    /// Its guarded files.
    guarded: ProtectedPaths,
    /// Those files as they were.
    files: Snapshot,
}

impl RepositoryFingerprint {
    /// The guarded files of the repository `workspace` is in, now; nothing outside a repository.
    pub(crate) fn take(workspace: &Path) -> RepositoryFingerprint {
        let Some(dirs) = GitDirs::find(workspace) else {
            return RepositoryFingerprint::default();
        };
        // Named as the person sees them from the repository's top: `.git/config`.
        let top = dirs
            .common
            .parent()
            .filter(|_| dirs.common.file_name() == Some(std::ffi::OsStr::new(".git")));
        let shown = |dir: &Path| match top.and_then(|top| dir.strip_prefix(top).ok()) {
            Some(relative) => relative.to_string_lossy().into_owned(),
            None => dir.display().to_string(),
        };
        let mut wanted = vec![(dirs.common.clone(), &COMMON[..])];
        if dirs.own != dirs.common {
            wanted.push((dirs.own.clone(), &OWN[..]));
        }
        let folders = wanted
            .into_iter()
            .filter_map(|(dir, globs)| {
                let globs: Vec<String> = globs.iter().map(|g| (*g).to_owned()).collect();
                let guarded = ProtectedPaths::new(&globs).ok().flatten()?;
                Some(Folder {
                    shown: shown(&dir),
                    files: files(&dir, &guarded, None),
                    dir,
                    guarded,
                })
            })
            .collect();
        RepositoryFingerprint { folders }
    }

    /// The same files, now; a file whose metadata shows it unchanged is not read again.
    pub(crate) fn again(&self) -> RepositoryFingerprint {
        let folders = self
            .folders
            .iter()
            .map(|folder| Folder {
                files: files(&folder.dir, &folder.guarded, Some(&folder.files)),
                ..folder.clone()
            })
            .collect();
        RepositoryFingerprint { folders }
    }

    /// What differs in `later`, a detail per file: "`.git/config` was modified".
    pub(crate) fn changes(&self, later: &RepositoryFingerprint) -> Vec<String> {
        self.folders
            .iter()
            .zip(&later.folders)
            .flat_map(|(then, now)| describe(&then.shown, &then.files.diff(&now.files), None))
            .collect()
    }

    /// The guarded files now, compared with these: what differs is put back as it was here; a
    /// detail per file, saying whether it could be.
    fn put_back(&self) -> Vec<String> {
        let now = self.again();
        let mut details = Vec::new();
        for (then, now) in self.folders.iter().zip(&now.folders) {
            let changes = then.files.diff(&now.files);
            if changes.is_empty() {
                continue;
            }
            let not_restored = then
                .files
                .restore(&then.dir, &changes)
                .unwrap_or_else(|_| changes.all().map(str::to_owned).collect());
            details.extend(describe(&then.shown, &changes, Some(&not_restored)));
        }
        details
    }
}

/// Watches the guarded parts of a workspace's repository during a run; cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct RepositoryGuard {
    inner: Option<Arc<Mutex<Guarded>>>,
}

struct Guarded {
    /// The guarded files as they must be.
    expected: RepositoryFingerprint,
    /// Each change found, with when it was found: a detail per file.
    found: Vec<(Instant, Vec<String>)>,
}

impl RepositoryGuard {
    /// A guard of the repository `workspace` is in, holding its guarded files as they are now;
    /// a guard that watches nothing outside a repository.
    pub(crate) fn new(workspace: &Path) -> RepositoryGuard {
        let expected = RepositoryFingerprint::take(workspace);
        if expected.folders.is_empty() {
            return RepositoryGuard::default();
        }
        RepositoryGuard {
            inner: Some(Arc::new(Mutex::new(Guarded {
                expected,
                found: Vec::new(),
            }))),
        }
    }

    /// Whether there is a repository to watch.
    pub(crate) fn watches(&self) -> bool {
        self.inner.is_some()
    }

    /// Every change to the guarded files found after `since`: those noted before, and any found
    /// now, which is noted and put back first. A detail per file, such as "`.git/config` was
    /// modified, and was put back as it was".
    pub(crate) fn changed_since(&self, since: Instant) -> Vec<String> {
        let Some(inner) = &self.inner else {
            return Vec::new();
        };
        let mut guarded = inner.lock().unwrap_or_else(PoisonError::into_inner);
        let details = guarded.expected.put_back();
        if !details.is_empty() {
            guarded.found.push((Instant::now(), details));
        }
        guarded
            .found
            .iter()
            .filter(|(when, _)| *when >= since)
            .flat_map(|(_, details)| details.iter().cloned())
            .collect()
    }
}

/// The guarded files of `dir` now, with their contents; nothing when it cannot be read. The
/// contents of a file that `previous` saw are reused when its metadata shows it unchanged, as in
/// every snapshot.
fn files(dir: &Path, guarded: &ProtectedPaths, previous: Option<&Snapshot>) -> Snapshot {
    let options = SnapshotOptions {
        keep_contents_under: Some(KEPT),
        protected: Some(guarded.clone()),
        only_protected: true,
        ..SnapshotOptions::default()
    };
    Snapshot::take(dir, &options, previous).unwrap_or_default()
}

/// "`.git/config` was modified", a line per changed file; with `not_restored`, saying whether
/// it was put back.
fn describe(shown: &str, changes: &Changes, not_restored: Option<&[String]>) -> Vec<String> {
    let kinds = [
        (&changes.created, "created"),
        (&changes.modified, "modified"),
        (&changes.deleted, "deleted"),
    ];
    let mut details = Vec::new();
    for (paths, how) in kinds {
        for path in paths {
            let outcome = match not_restored {
                None => "",
                Some(list) if list.contains(path) => ", and could not be put back",
                Some(_) => ", and was put back as it was",
            };
            details.push(format!("`{shown}/{path}` was {how}{outcome}"));
        }
    }
    details
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("git")
            .args(["init", "--quiet"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        dir
    }

    #[test]
    fn a_fingerprint_sees_configuration_hooks_info_and_modes_but_not_refs() {
        let dir = repository();
        let git = dir.path().join(".git");
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        let before = RepositoryFingerprint::take(dir.path());
        std::fs::write(git.join("HEAD"), "ref: refs/heads/other\n").unwrap();
        std::fs::write(git.join("index"), "not an index").unwrap();
        assert!(
            before
                .changes(&RepositoryFingerprint::take(dir.path()))
                .is_empty()
        );

        let mut config = std::fs::read(git.join("config")).unwrap();
        config.extend_from_slice(b"[core]\n\tfsmonitor = ./evil.sh\n");
        std::fs::write(git.join("config"), config).unwrap();
        std::fs::write(git.join("info/attributes"), "* filter=x\n").unwrap();
        std::fs::set_permissions(
            git.join("hooks/pre-commit"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_eq!(
            before.changes(&RepositoryFingerprint::take(&dir.path().join("sub"))),
            [
                "`.git/info/attributes` was created",
                "`.git/config` was modified",
                "`.git/hooks/pre-commit` was modified",
            ]
        );
    }

    #[test]
    fn a_change_is_found_put_back_and_told_to_whoever_was_under_way() {
        let dir = repository();
        let config = dir.path().join(".git/config");
        let original = std::fs::read(&config).unwrap();
        let guard = RepositoryGuard::new(dir.path());
        let before = Instant::now();
        assert!(guard.changed_since(before).is_empty());

        let mut planted = original.clone();
        planted.extend_from_slice(b"[core]\n\tfsmonitor = ./evil.sh\n");
        std::fs::write(&config, &planted).unwrap();
        std::fs::write(dir.path().join(".git/hooks/post-checkout"), "#!/bin/sh\n").unwrap();
        assert_eq!(
            guard.changed_since(before),
            [
                "`.git/hooks/post-checkout` was created, and was put back as it was",
                "`.git/config` was modified, and was put back as it was",
            ]
        );
        assert_eq!(std::fs::read(&config).unwrap(), original);
        assert!(!dir.path().join(".git/hooks/post-checkout").exists());
        // Told again to whoever was under way then, and to no one who started after.
        assert_eq!(guard.changed_since(before).len(), 2);
        assert!(guard.changed_since(Instant::now()).is_empty());
    }

    #[test]
    fn outside_a_repository_nothing_is_watched() {
        let dir = tempfile::tempdir().unwrap();
        let guard = RepositoryGuard::new(dir.path());
        std::fs::create_dir_all(dir.path().join("hooks")).unwrap();
        assert!(guard.changed_since(Instant::now()).is_empty());
    }
}
