//! `isolation "worktree"`: an attempt that works in a git worktree of its own.
//!
//! The worktree is made at the repository's HEAD under the state folder
//! (`worktrees/<run>/<phase>-<attempt>`), then brought to the workspace as it is now, without
//! copying the world: git says which files differ from HEAD (`git status`: uncommitted and
//! untracked changes; never `.git` or the state folder), and only those are copied over or
//! removed. Of the ignored files, the worktree gets only those `worktree-include` names (a
//! copy-on-write clone where the file system offers one), and sees the folders `worktree-share`
//! names read only, without a copy ([`readonly`]; copied instead where the system cannot mount
//! them read only, and then watched). The worktree is read once, after its files settled, and
//! that snapshot serves as the base of what the attempt changes: later snapshots of the worktree
//! read only what changed.
//!
//! When the attempt passes, its changes are applied back to the workspace: a file the workspace
//! still has as the worktree started from it is taken as the attempt left it; a file another phase
//! changed meanwhile is merged line by line (`git merge-file`), and the attempt fails, naming the
//! files, when the two changed the same lines or cannot be merged. An ignored file the attempt
//! made among its outputs, which the worktree did not bring, is taken as the attempt left it.
//! Nothing is written back until every file is known to apply. The worktree is removed when the
//! attempt ends (on cancellation too); a run removes those that a killed run left behind.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::context::Run;
use crate::event::Event;
use crate::model::{Output, Phase};
use crate::process::{readonly, watchdog};
use crate::store::run::folder_name;
use crate::store::run_json::RunSummary;
use crate::workspace::{
    self, FileState, ProtectedPaths, Snapshot, SnapshotOptions, clone_or_copy, git,
};

/// The folder of the state folder that holds the worktrees, one folder per run.
const WORKTREES: &str = "worktrees";

/// Worktrees are made, removed and applied back one at a time: git's own bookkeeping of
/// worktrees is not made for concurrent changes, and two attempts applying their changes at once
/// must each see the other's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Set, it makes `worktree-share` folders copies, as where read-only mounts are not available.
const SHARE_BY_COPY: &str = "HELIXFLOW_SHARE_BY_COPY";

/// The largest file whose bytes are kept as a merge base: a larger one that both the attempt and
/// another phase changed is a conflict.
const KEPT_BASE: u64 = 1 << 20;

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
    /// What the worktree's snapshots see: the files the attempt's own snapshots see, and the
    /// ignored ones it brought or may produce as outputs; never the shared folders.
    options: SnapshotOptions,
    /// The worktree as made, read once: the workspace as it was then, for every file `options`
    /// sees but ignored outputs the worktree did not bring.
    made: Arc<Snapshot>,
    /// The files copied from the workspace (those that differ from HEAD, and those brought), with
    /// their bytes when small enough to be a merge base. The base of every other file is HEAD's.
    copied: HashMap<String, Option<Vec<u8>>>,
    /// How the shared folders are shared.
    shared: Shared,
}

/// How an attempt sees the `worktree-share` folders.
enum Shared {
    /// Read-only bind mounts for every process the attempt starts, while this is registered.
    Mounted(#[allow(dead_code, reason = "held for its Drop")] readonly::Area),
    /// Copies in the worktree (no read-only mounts here), and what each copy and its original
    /// held, to fail an attempt that changed either.
    Copied(Vec<CopiedFolder>),
}

/// A shared folder copied into the worktree.
struct CopiedFolder {
    /// Relative to the workspace.
    rel: String,
    /// The copy, as made.
    copy: Listing,
    /// The workspace's folder, when the copy was made.
    original: Listing,
}

/// Every entry below a folder, with what its metadata says (size, times, inode, kind); any write
/// changes one of these (the change time cannot be set back).
type Listing = BTreeMap<String, (u64, i128, i128, u64, u32)>;

/// What applying an attempt's changes back found.
pub(crate) enum Applied {
    /// Every change is in the workspace.
    Done,
    /// These files were changed by both the attempt and another phase, and do not merge:
    /// nothing was applied.
    Conflicts(Vec<String>),
    /// The attempt changed a shared folder (copied, where it could not be mounted read only), or
    /// the workspace's own copy of it: nothing was applied.
    SharedChanged(Vec<String>),
}

/// What a worktree brings from the workspace besides git's files.
struct Brings {
    /// `worktree-include` globs.
    include: Vec<String>,
    /// The phase's output paths and globs: ignored outputs are seen, and come back.
    outputs: Vec<String>,
    /// `worktree-share` globs.
    share: Vec<String>,
    /// The state folder and the other folders never walked.
    excluded: Vec<PathBuf>,
}

impl Worktree {
    /// The attempt's workspace, inside the worktree.
    pub(crate) fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The worktree as made, read once: the base later snapshots of the worktree start from.
    pub(crate) fn made(&self) -> &Snapshot {
        &self.made
    }

    /// Makes the worktree of attempt `attempt` of `phase` from the workspace as it is now.
    pub(crate) async fn create(run: &Run, phase: &Phase, attempt: u32) -> io::Result<Worktree> {
        let workspace = run.ctx.pipeline.workspace.clone();
        // Absolute: the watchdog is told this path, and git resolves it from the repository.
        let root = std::path::absolute(worktrees_dir(run))?
            .join(&run.ctx.folder.run_id)
            .join(format!("{}-{attempt}", folder_name(&phase.name.value)));
        let brings = Brings {
            include: phase.worktree_include.clone(),
            outputs: phase
                .outputs
                .iter()
                .filter_map(|output| match output {
                    Output::File { path } => Some(path.clone()),
                    Output::Glob { pattern, .. } => Some(pattern.clone()),
                    Output::From { .. } => None,
                })
                .collect(),
            share: phase.worktree_share.clone(),
            excluded: run.ctx.excluded.clone(),
        };
        let mountable = if brings.share.is_empty() {
            Ok(())
        } else if std::env::var_os(SHARE_BY_COPY).is_some() {
            Err(format!("{SHARE_BY_COPY} is set"))
        } else {
            tokio::task::spawn_blocking(readonly::available)
                .await
                .map_err(io::Error::other)?
        };
        if let Err(why) = &mountable {
            static TOLD: AtomicBool = AtomicBool::new(false);
            if !TOLD.swap(true, Ordering::Relaxed) {
                run.emit(Event::Warning {
                    message: format!(
                        "`worktree-share` folders are copied into each worktree, not shared read only: {why}; an attempt that changes one fails (see \"Isolated phases\" in the README)"
                    ),
                });
            }
        }
        let mount = mountable.is_ok();
        tokio::task::spawn_blocking(move || Worktree::make(&workspace, root, &brings, mount))
            .await
            .map_err(io::Error::other)?
    }

    fn make(workspace: &Path, root: PathBuf, brings: &Brings, mount: bool) -> io::Result<Worktree> {
        let (repo, prefix) = repository_of(workspace)?;
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
        let inside = root.join(&prefix);
        std::fs::create_dir_all(&inside)?;
        let share = ProtectedPaths::new(&brings.share).map_err(io::Error::other)?;
        let shared_folders = match &share {
            Some(share) => find(workspace, share, true, &brings.excluded)?,
            None => Vec::new(),
        };
        let copied = bring_in(workspace, &inside, &prefix, brings, &shared_folders)?;
        let shared = share_folders(workspace, &root, &inside, &shared_folders, mount)?;
        let mut seen = brings.include.clone();
        seen.extend(brings.outputs.iter().cloned());
        let mut exclude = brings.excluded.clone();
        exclude.extend(shared_folders.iter().map(PathBuf::from));
        let options = SnapshotOptions {
            exclude,
            keep_contents_under: None,
            protected: ProtectedPaths::new(&seen).ok().flatten(),
            only_protected: false,
            rules: None,
            fine_timestamps: true,
        };
        settle();
        let made = Arc::new(Snapshot::take(&inside, &options, None)?);
        Ok(Worktree {
            root,
            workspace: inside,
            repo,
            prefix,
            options,
            made,
            copied,
            shared,
        })
    }

    /// Applies the changes the attempt made in the worktree to the workspace, or finds the files
    /// that conflict and applies nothing.
    pub(crate) async fn apply(&self, run: &Run) -> io::Result<Applied> {
        let workspace = run.ctx.pipeline.workspace.clone();
        let (worktree, made, options) = (
            self.workspace.clone(),
            Arc::clone(&self.made),
            self.options.clone(),
        );
        if let Shared::Copied(folders) = &self.shared {
            let changed = shared_changes(&workspace, &worktree, folders);
            if !changed.is_empty() {
                return Ok(Applied::SharedChanged(changed));
            }
        }
        let base_of = {
            let (root, prefix) = (self.root.clone(), self.prefix.clone());
            let copied = Arc::new(self.copied.clone());
            let made = Arc::clone(&made);
            move |path: &str| -> io::Result<Option<Vec<u8>>> {
                if let Some(bytes) = copied.get(path) {
                    return Ok(bytes.clone());
                }
                // Not copied into the worktree: as HEAD has it, when it has it.
                if made.is_symlink(path) || made.get(path).is_none_or(|f| f.size > KEPT_BASE) {
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
            let after = Snapshot::take(&worktree, &options, Some(&made))?;
            let rules = after.ignore_rules();
            let ignored = |path: &str| rules.as_ref().is_some_and(|r| r.ignores(&worktree, path));
            let mut take = Vec::new();
            let mut merged = Vec::new();
            let mut conflicts = Vec::new();
            let changed = made.diff(&after);
            for path in changed.all() {
                let (old, new) = (made.get(path), after.get(path));
                let current = state_of(&workspace.join(path))?;
                if same(old, current.as_ref()) || (old.is_none() && ignored(path)) {
                    take.push(path);
                } else if same(new, current.as_ref()) {
                    // Another phase made the same change.
                } else if let Some(text) = merge(
                    &workspace,
                    &worktree,
                    path,
                    &base_of,
                    (&after, current.as_ref()),
                )? {
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
                if let (Some(old), Some(new)) = (made.get(path), after.get(path))
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

/// The workspace's repository (its top folder) and the workspace's path in it.
fn repository_of(workspace: &Path) -> io::Result<(PathBuf, String)> {
    let mut command = git::command(workspace);
    command.args(["rev-parse", "--show-toplevel", "--show-prefix"]);
    let out = run_git(command, "find the workspace's repository")?;
    let text = String::from_utf8_lossy(&out);
    let mut lines = text.lines();
    let top = lines.next().unwrap_or_default();
    let prefix = lines.next().unwrap_or_default();
    Ok((PathBuf::from(top), prefix.to_owned()))
}

/// The workspace's files that differ from HEAD (relative to the workspace), as git sees them
/// through its index: each with whether the workspace has it (else it was deleted). Folders
/// git shows whole (a repository inside the workspace) are left out.
fn differences(workspace: &Path, prefix: &str) -> io::Result<Vec<(String, bool)>> {
    let mut status = git::command(workspace);
    // No index refresh written: another phase may be running git in this repository.
    status
        .args(["--no-optional-locks", "status", "--porcelain=v1", "-z"])
        .args([
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
        ])
        .args(["--", "."]);
    let out = run_git(status, "list the workspace's changes")?;
    let mut found = Vec::new();
    for record in out.split(|&b| b == 0).filter(|r| r.len() > 3) {
        let Ok(path) = std::str::from_utf8(&record[3..]) else {
            return Err(io::Error::other(format!(
                "`{}` is not a UTF-8 name: the worktree cannot be made like the workspace",
                String::from_utf8_lossy(&record[3..])
            )));
        };
        let Some(path) = path.strip_prefix(prefix) else {
            continue;
        };
        if path.is_empty() || path.ends_with('/') {
            continue;
        }
        let present = match std::fs::symlink_metadata(workspace.join(path)) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        };
        found.push((path.to_owned(), present));
    }
    Ok(found)
}

/// Makes the worktree's folder `inside` like the workspace: the files git lists as changed
/// copied over or removed, and the ignored files `worktree-include` names copied; never the state
/// folder, the run's report files or the shared folders. Returns what was copied, with the bytes
/// of each small enough to be a merge base.
fn bring_in(
    workspace: &Path,
    inside: &Path,
    prefix: &str,
    brings: &Brings,
    shared_folders: &[String],
) -> io::Result<HashMap<String, Option<Vec<u8>>>> {
    let left_out: Vec<String> = brings
        .excluded
        .iter()
        .filter_map(|e| {
            let rel = if e.is_absolute() {
                e.strip_prefix(workspace).ok()?
            } else {
                e.as_path()
            };
            rel.to_str().map(|r| r.trim_end_matches('/').to_owned())
        })
        .filter(|rel| !rel.is_empty())
        .chain(shared_folders.iter().cloned())
        .collect();
    let left_out = |path: &str| left_out.iter().any(|folder| within(path, folder));
    let mut copied = HashMap::new();
    for (path, present) in differences(workspace, prefix)? {
        if left_out(&path) {
            continue;
        }
        if present {
            copy_in(workspace, inside, &path, &mut copied)?;
        } else {
            remove_file(&inside.join(&path))?;
        }
    }
    if let Some(brought) = ProtectedPaths::new(&brings.include).map_err(io::Error::other)? {
        for path in find(workspace, &brought, false, &brings.excluded)? {
            let absent = std::fs::symlink_metadata(inside.join(&path))
                .is_err_and(|e| e.kind() == io::ErrorKind::NotFound);
            if absent && !left_out(&path) {
                copy_in(workspace, inside, &path, &mut copied)?;
            }
        }
    }
    Ok(copied)
}

/// Copies the file or symlink `path` from the workspace into the worktree (a copy-on-write clone
/// where the file system offers one), noting its bytes as its merge base when they are few.
fn copy_in(
    workspace: &Path,
    worktree: &Path,
    path: &str,
    copied: &mut HashMap<String, Option<Vec<u8>>>,
) -> io::Result<()> {
    let (from, to) = (workspace.join(path), worktree.join(path));
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    remove_file(&to)?;
    let meta = std::fs::symlink_metadata(&from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        copied.insert(path.to_owned(), None);
        return Ok(());
    }
    clone_or_copy(&from, &to)?;
    let bytes = (meta.len() <= KEPT_BASE)
        .then(|| std::fs::read(&to).ok())
        .flatten();
    copied.insert(path.to_owned(), bytes);
    Ok(())
}

/// Removes a file or symlink; one that is not there is fine.
fn remove_file(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether `path` is `folder` or below it.
fn within(path: &str, folder: &str) -> bool {
    path.strip_prefix(folder)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The relative paths below `root` that `globs` match: files, or with `folders` folders (a folder
/// that matches is not entered). Only folders that can hold a match are listed; never `.git` or
/// an excluded folder. Symlinks count as files and are not followed.
fn find(
    root: &Path,
    globs: &ProtectedPaths,
    folders: bool,
    excluded: &[PathBuf],
) -> io::Result<Vec<String>> {
    let excluded: Vec<PathBuf> = excluded
        .iter()
        .map(|e| {
            if e.is_absolute() {
                e.clone()
            } else {
                root.join(e)
            }
        })
        .collect();
    let mut found = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(folder) = stack.pop() {
        let entries = match std::fs::read_dir(root.join(&folder)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let rel = if folder.is_empty() {
                name.clone()
            } else {
                format!("{folder}/{name}")
            };
            if entry.file_type()?.is_dir() {
                if name == ".git" || excluded.iter().any(|e| *e == entry.path()) {
                    continue;
                }
                if folders && globs.matches(&rel) {
                    found.push(rel);
                } else if globs.may_hold(rel.as_bytes()) {
                    stack.push(rel);
                }
            } else if !folders && globs.matches(&rel) {
                found.push(rel);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Gives the attempt its shared folders: read-only bind mounts of the workspace's folders for
/// every process started in the worktree (the worktree's folders empty for helixflow itself), or
/// copies when `mount` is false.
fn share_folders(
    workspace: &Path,
    root: &Path,
    inside: &Path,
    folders: &[String],
    mount: bool,
) -> io::Result<Shared> {
    for rel in folders {
        let target = inside.join(rel);
        if std::fs::read_dir(&target).is_ok_and(|mut entries| entries.next().is_some()) {
            return Err(io::Error::other(format!(
                "`worktree-share` names `{rel}`, which has files in git: only an ignored folder can be shared"
            )));
        }
    }
    if mount {
        let mut binds = Vec::new();
        for rel in folders {
            let (original, target) = (workspace.join(rel), inside.join(rel));
            std::fs::create_dir_all(&target)?;
            binds.push((original.clone(), target));
            binds.push((original.clone(), original));
        }
        return Ok(Shared::Mounted(readonly::protect(root, &binds)?));
    }
    let mut copies = Vec::new();
    for rel in folders {
        let (original, target) = (workspace.join(rel), inside.join(rel));
        copy_tree(&original, &target)?;
        copies.push(CopiedFolder {
            rel: rel.clone(),
            copy: listing(&target)?,
            original: listing(&original)?,
        });
    }
    Ok(Shared::Copied(copies))
}

/// Copies the folder `from` to `to`: folders, symlinks, and files by copy-on-write clones where
/// the file system offers them.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else if kind.is_file() {
            clone_or_copy(&source, &target)?;
        }
    }
    Ok(())
}

/// Every entry below `folder`, with its metadata.
fn listing(folder: &Path) -> io::Result<Listing> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Listing::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(folder.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            let meta = std::fs::symlink_metadata(entry.path())?;
            if meta.is_dir() {
                stack.push(path.clone());
            }
            found.insert(
                path.to_string_lossy().into_owned(),
                (
                    meta.size(),
                    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                    i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
                    meta.ino(),
                    meta.mode(),
                ),
            );
        }
    }
    Ok(found)
}

/// The entries of copied shared folders, or of their originals, that changed since the worktree
/// was made (a folder that cannot be listed any more counts as changed).
fn shared_changes(workspace: &Path, worktree: &Path, folders: &[CopiedFolder]) -> Vec<String> {
    let mut changed = Vec::new();
    for folder in folders {
        for (base, was) in [(worktree, &folder.copy), (workspace, &folder.original)] {
            let now = listing(&base.join(&folder.rel)).unwrap_or_default();
            let names: std::collections::BTreeSet<&String> = was.keys().chain(now.keys()).collect();
            changed.extend(
                names
                    .into_iter()
                    .filter(|name| was.get(*name) != now.get(*name))
                    .map(|name| format!("{}/{name}", folder.rel)),
            );
        }
    }
    let unique: HashSet<String> = changed.drain(..).collect();
    let mut changed: Vec<String> = unique.into_iter().collect();
    changed.sort();
    changed
}

/// Waits until the worktree's files, all written by now, are old enough for their timestamps to
/// tell any later change apart ([`workspace::FINE_MARGIN_NS`]): its first snapshot then reads
/// each file once, and later ones only what changed.
fn settle() {
    // The precise clock: no file written so far is stamped later.
    let written = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    let settled = written + workspace::FINE_MARGIN_NS + 1_000_000;
    loop {
        let wait = settled - workspace::file_clock_now();
        if wait <= 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_nanos(
            u64::try_from(wait).unwrap_or(0),
        ));
    }
}

/// What is at `path` now (a file or symlink, hashed; `None` when there is none or it is a
/// folder).
fn state_of(path: &Path) -> io::Result<Option<FileState>> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let (hash, mode) = if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path)?;
        (blake3::hash(target.as_os_str().as_encoded_bytes()), 0)
    } else if meta.is_file() {
        let mut hasher = blake3::Hasher::new();
        hasher.update_reader(std::fs::File::open(path)?)?;
        (hasher.finalize(), meta.permissions().mode() & 0o7777)
    } else {
        return Ok(None);
    };
    Ok(Some(FileState {
        size: meta.len(),
        mtime_ns: 0,
        hash: *hash.as_bytes(),
        executable: mode & 0o111 != 0,
        mode,
    }))
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
    (after, now): (&Snapshot, Option<&FileState>),
) -> io::Result<Option<Vec<u8>>> {
    if after.get(path).is_none()
        || after.is_symlink(path)
        || now.is_none_or(|state| state.mode == 0)
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
