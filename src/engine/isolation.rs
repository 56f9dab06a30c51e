//! `isolation "worktree"`: an attempt that works in a git worktree of its own.
//!
//! The worktree is made at the repository's HEAD under the state folder
//! (`worktrees/<run>/<phase>-<attempt>`), then brought to the workspace as it is now: every file
//! that differs (tracked changes, untracked and ignored files; never `.git` or the state folder)
//! is copied over, every file the workspace no longer has is removed. The attempt then sees the
//! worktree as its workspace. When it passes, its changes are applied back to the workspace: a
//! file the workspace still has as the worktree started from it is taken as the attempt left it;
//! a file another phase changed meanwhile is merged line by line (`git merge-file`), and the
//! attempt fails, naming the files, when the two changed the same lines or cannot be merged.
//! Nothing is written back until every file is known to apply. The worktree is removed when the
//! attempt ends (on cancellation too); a run removes those that a killed run left behind.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use super::context::Run;
use crate::model::Phase;
use crate::process::watchdog;
use crate::store::run::folder_name;
use crate::store::run_json::RunSummary;
use crate::workspace::{FileState, ProtectedPaths, Snapshot, SnapshotOptions, git};

/// The folder of the state folder that holds the worktrees, one folder per run.
const WORKTREES: &str = "worktrees";

/// Worktrees are made, removed and applied back one at a time: git's own bookkeeping of
/// worktrees is not made for concurrent changes, and two attempts applying their changes at once
/// must each see the other's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The worktree of one attempt; removed when dropped.
pub(crate) struct Worktree {
    /// The worktree's top folder.
    root: PathBuf,
    /// The attempt's workspace: where the workspace's folder is in the worktree.
    workspace: PathBuf,
    /// The workspace's repository, where `git worktree` commands run.
    repo: PathBuf,
    /// The workspace's path in its repository (`git rev-parse --show-prefix`).
    prefix: String,
    /// The workspace when the worktree was made, every file (no contents).
    base: Snapshot,
    /// The worktree as checked out, before it was made like the workspace: hashes to reuse.
    checked_out: Snapshot,
    /// What the merge base of a file that differed from HEAD was: the bytes copied into the
    /// worktree (up to [`KEPT_BASE`] each). The base of every other file is HEAD's.
    base_bytes: HashMap<String, Vec<u8>>,
}

/// The largest file whose bytes are kept as a merge base: a larger one that both the attempt and
/// another phase changed is a conflict.
const KEPT_BASE: u64 = 1 << 20;

/// What applying an attempt's changes back found.
pub(crate) enum Applied {
    /// Every change is in the workspace.
    Done,
    /// These files were changed by both the attempt and another phase, and do not merge:
    /// nothing was applied.
    Conflicts(Vec<String>),
}

impl Worktree {
    /// The attempt's workspace, inside the worktree.
    pub(crate) fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Makes the worktree of attempt `attempt` of `phase` from the workspace as it is now.
    pub(crate) async fn create(run: &Run, phase: &Phase, attempt: u32) -> io::Result<Worktree> {
        let workspace = run.ctx.pipeline.workspace.clone();
        // Absolute: the watchdog is told this path, and git resolves it from the repository.
        let root = std::path::absolute(worktrees_dir(run))?
            .join(&run.ctx.folder.run_id)
            .join(format!("{}-{attempt}", folder_name(&phase.name.value)));
        // Any earlier snapshot of the workspace spares reading the files that did not change.
        let latest = run.state.snapshots.latest();
        let excluded = run.ctx.excluded.clone();
        tokio::task::spawn_blocking(move || {
            Worktree::make(&workspace, root, &excluded, latest.as_ref())
        })
        .await
        .map_err(io::Error::other)?
    }

    fn make(
        workspace: &Path,
        root: PathBuf,
        excluded: &[PathBuf],
        latest: Option<&Snapshot>,
    ) -> io::Result<Worktree> {
        let repo = PathBuf::from(git_line(workspace, &["rev-parse", "--show-toplevel"])?);
        let prefix = git_line(workspace, &["rev-parse", "--show-prefix"])?;
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent)?;
        }
        {
            let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
            let mut add = git::command(&repo);
            add.args(["worktree", "add", "--detach"])
                .arg(&root)
                .arg("HEAD");
            run_git(add, "make a git worktree for the phase")?;
        }
        // Should helixflow be killed, its watchdog removes the folder once the agents are stopped;
        // the next run has git forget it.
        watchdog::remove_on_crash(&root);
        let mut worktree = Worktree {
            workspace: root.join(&prefix),
            root,
            repo,
            prefix,
            base: Snapshot::default(),
            checked_out: Snapshot::default(),
            base_bytes: HashMap::new(),
        };
        std::fs::create_dir_all(&worktree.workspace)?;
        let everything = everything(excluded);
        worktree.base = Snapshot::take(workspace, &everything, latest)?;
        worktree.checked_out = Snapshot::take(&worktree.workspace, &everything, None)?;
        let differences = worktree.checked_out.diff(&worktree.base);
        let not_copied =
            worktree
                .base
                .copy_paths(workspace, &worktree.workspace, differences.all())?;
        if !not_copied.is_empty() {
            return Err(io::Error::other(format!(
                "cannot copy into the phase's worktree: `{}`",
                not_copied.join("`, `")
            )));
        }
        for path in differences.created.iter().chain(&differences.modified) {
            if worktree
                .base
                .get(path)
                .is_some_and(|file| file.size <= KEPT_BASE)
                && !worktree.base.is_symlink(path)
                && let Ok(bytes) = std::fs::read(worktree.workspace.join(path))
            {
                worktree.base_bytes.insert(path.clone(), bytes);
            }
        }
        Ok(worktree)
    }

    /// Applies the changes the attempt made in the worktree to the workspace, or finds the files
    /// that conflict and applies nothing.
    pub(crate) async fn apply(&self, run: &Run) -> io::Result<Applied> {
        let workspace = run.ctx.pipeline.workspace.clone();
        let everything = everything(&run.ctx.excluded);
        let (worktree, checked_out, base) = (
            self.workspace.clone(),
            Arc::new(self.checked_out.clone()),
            Arc::new(self.base.clone()),
        );
        let base_of = {
            let (root, prefix, kept) = (
                self.root.clone(),
                self.prefix.clone(),
                Arc::new(self.base_bytes.clone()),
            );
            let (checked_out, base) = (checked_out.clone(), base.clone());
            move |path: &str| -> io::Result<Option<Vec<u8>>> {
                if let Some(bytes) = kept.get(path) {
                    return Ok(Some(bytes.clone()));
                }
                // Not copied into the worktree: as HEAD has it, when it has it.
                if checked_out.get(path).is_none()
                    || base.is_symlink(path)
                    || base.get(path).is_none_or(|file| file.size > KEPT_BASE)
                {
                    return Ok(None);
                }
                let mut show = git::command(&root);
                show.args(["cat-file", "blob"])
                    .arg(format!("HEAD:{prefix}{path}"));
                run_git(show, "read a file's merge base").map(Some)
            }
        };
        tokio::task::spawn_blocking(move || {
            // Held from the first look at the worktree: should the attempt be dropped meanwhile,
            // its worktree is removed only once this is done with it.
            let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
            let after = Snapshot::take(&worktree, &everything, Some(&checked_out))?;
            let changed = base.diff(&after);
            let now = Snapshot::take(&workspace, &everything, Some(&base))?;
            let mut take = Vec::new();
            let mut merged = Vec::new();
            let mut conflicts = Vec::new();
            for path in changed.all() {
                let (old, new, current) = (base.get(path), after.get(path), now.get(path));
                if same(old, current) {
                    take.push(path);
                } else if same(new, current) {
                    // Another phase made the same change.
                } else if let Some(text) =
                    merge(&workspace, &worktree, path, &base_of, (&after, &now))?
                {
                    merged.push((path, text));
                } else {
                    conflicts.push(path.to_owned());
                }
            }
            if !conflicts.is_empty() {
                return Ok(Applied::Conflicts(conflicts));
            }
            let not_copied = after.copy_paths(&worktree, &workspace, take)?;
            for (path, text) in merged {
                std::fs::write(workspace.join(path), text)?;
                // The attempt's executable bit where it changed it, else the workspace's.
                if let (Some(old), Some(new)) = (base.get(path), after.get(path))
                    && old.executable != new.executable
                {
                    set_executable(&workspace.join(path), new.executable)?;
                }
            }
            Ok(if not_copied.is_empty() {
                Applied::Done
            } else {
                Applied::Conflicts(not_copied)
            })
        })
        .await
        .map_err(io::Error::other)?
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        remove(&self.repo, &self.root);
        watchdog::forget(&self.root);
        // The run's folder of worktrees goes with its last one.
        if let Some(run) = self.root.parent() {
            let _ = std::fs::remove_dir(run);
        }
    }
}

/// Removes the worktrees that runs no longer running left behind (a run that was killed, whose
/// watchdog could not remove them), and git's records of them. Called as a run starts.
pub(crate) fn remove_leftovers(workspace: &Path, state_dir: &Path) {
    let dir = state_dir.join(WORKTREES);
    let Ok(runs) = std::fs::read_dir(&dir) else {
        return;
    };
    for run in runs.filter_map(Result::ok) {
        let id = run.file_name();
        let running = crate::store::run::RunDir {
            path: state_dir.join("runs").join(&id),
            run_id: id.to_string_lossy().into_owned(),
        };
        if RunSummary::read(&running).is_ok_and(|summary| summary.current_status() == "running") {
            continue;
        }
        let _ = std::fs::remove_dir_all(run.path());
    }
    // Whether the folders went now or with a killed run's watchdog, git still lists them.
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let mut prune = git::command(workspace);
    prune.args(["worktree", "prune"]);
    let _ = run_git(prune, "prune the worktrees of killed runs");
}

fn worktrees_dir(run: &Run) -> PathBuf {
    run.ctx
        .pipeline
        .workspace
        .join(&run.ctx.pipeline.state_dir)
        .join(WORKTREES)
}

/// Removes one worktree: through git, then whatever is left of its folder.
fn remove(repo: &Path, root: &Path) {
    let mut command = git::command(repo);
    command
        .args(["worktree", "remove", "--force", "--force"])
        .arg(root);
    let _ = run_git(command, "remove the phase's worktree");
    if root.exists() {
        let _ = std::fs::remove_dir_all(root);
        let mut prune = git::command(repo);
        prune.args(["worktree", "prune"]);
        let _ = run_git(prune, "prune the phase's worktree");
    }
}

/// Every file below a folder, ignored or not, but for `.git` and the excluded folders.
fn everything(excluded: &[PathBuf]) -> SnapshotOptions {
    SnapshotOptions {
        exclude: excluded.to_vec(),
        keep_contents_under: None,
        protected: ProtectedPaths::new(&["**".to_owned()]).ok().flatten(),
        only_protected: true,
        rules: None,
    }
}

/// Whether two states of a path are the same file (or both absent).
fn same(a: Option<&FileState>, b: Option<&FileState>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.hash == b.hash && a.mode == b.mode,
        _ => false,
    }
}

/// The three-way merge of a file both the attempt and the workspace changed, when it merges
/// without conflicts; `None` when it does not, or cannot be merged (a side deleted it, a symlink,
/// a file whose base contents were not kept, a binary file).
fn merge(
    workspace: &Path,
    worktree: &Path,
    path: &str,
    base_of: &impl Fn(&str) -> io::Result<Option<Vec<u8>>>,
    (after, now): (&Snapshot, &Snapshot),
) -> io::Result<Option<Vec<u8>>> {
    if after.get(path).is_none()
        || now.get(path).is_none()
        || [after, now].iter().any(|s| s.is_symlink(path))
    {
        return Ok(None);
    }
    let Some(base_bytes) = base_of(path)? else {
        return Ok(None);
    };
    let temp = tempfile::NamedTempFile::new()?;
    std::fs::write(temp.path(), base_bytes)?;
    let output = git::command(workspace)
        .arg("merge-file")
        .arg("-p")
        .arg("--")
        .arg(workspace.join(path))
        .arg(temp.path())
        .arg(worktree.join(path))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()?;
    // 0: merged; a positive count: conflicts; negative (255): an error, such as a binary file.
    Ok((output.status.code() == Some(0)).then_some(output.stdout))
}

fn set_executable(path: &Path, executable: bool) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = std::fs::metadata(path)?.permissions();
    let mode = permissions.mode();
    let wanted = if executable {
        mode | ((mode & 0o444) >> 2)
    } else {
        mode & !0o111
    };
    if wanted != mode {
        permissions.set_mode(wanted);
        std::fs::set_permissions(path, permissions)?;
    }
    Ok(())
}

/// Runs a git command made by [`git::command`]; its error output is the error.
fn run_git(mut command: Command, what: &str) -> io::Result<Vec<u8>> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run git to {what}: {e}")))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(io::Error::other(format!(
            "git could not {what}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// The first line git prints for `args`, run in `folder`.
fn git_line(folder: &Path, args: &[&str]) -> io::Result<String> {
    let mut command = git::command(folder);
    command.args(args);
    let out = run_git(command, "find the workspace's repository")?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned())
}
