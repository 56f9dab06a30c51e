//! helixflow's own git commands, and where a workspace's repository keeps its folders.
//!
//! An agent can write a repository's configuration, hooks and attribute files (they are files in
//! `.git`), so helixflow's own git commands must not run what they name: a command planted in
//! `core.fsmonitor`, a hook or a filter driver would run in helixflow's process, outside any
//! agent's process group, timeout or `scope`. [`command`] makes every git command helixflow runs,
//! with the settings below given on its command line, where they override the repository's:
//!
//! - `core.fsmonitor` off: git would start the monitor to refresh its index (a checkout does);
//! - `core.hooksPath` a path that cannot hold a hook: `post-checkout`, `reference-transaction`
//!   and every other hook are looked for there, and found nowhere;
//! - every filter driver the configuration defines (`filter.NAME.clean`, `smudge`, `process`)
//!   emptied and not required, so that a checkout copies the stored bytes: attributes may name a
//!   driver from `.gitattributes`, `.git/info/attributes` or elsewhere, but the command it would
//!   run is gone;
//! - `submodule.recurse` off, and automatic maintenance off (`gc.auto`, `maintenance.auto`).
//!
//! Commands git runs only to show diffs (`diff.external`, `textconv`), to talk to other machines
//! (`core.sshCommand`, credential helpers) or to ask a person (`core.editor`, `core.pager`) are
//! left as they are: helixflow's git commands do none of these.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where hooks are looked for: a path below a file, so that no hook can be there.
const NO_HOOKS: &str = "/dev/null";

/// A git command run in `folder`, which runs nothing the repository's configuration names.
pub(crate) fn command(folder: &Path) -> Command {
    let mut git = Command::new("git");
    git.arg("-C").arg(folder);
    for setting in [
        "core.fsmonitor=",
        &format!("core.hooksPath={NO_HOOKS}"),
        "submodule.recurse=false",
        "gc.auto=0",
        "maintenance.auto=false",
    ] {
        git.arg("-c").arg(setting);
    }
    for driver in filter_drivers(folder) {
        for setting in ["clean=", "smudge=", "process=", "required=false"] {
            git.arg("-c").arg(format!("filter.{driver}.{setting}"));
        }
    }
    git
}

/// The names of the filter drivers the configuration seen from `folder` defines. Reading the
/// configuration runs nothing.
fn filter_drivers(folder: &Path) -> Vec<String> {
    let Ok(output) = Command::new("git")
        .arg("-C")
        .arg(folder)
        .args(["config", "--null", "--name-only", "--get-regexp"])
        .arg(r"^filter\..*\.(clean|smudge|process)$")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    let mut drivers: Vec<String> = output
        .stdout
        .split(|b| *b == 0)
        .filter_map(|key| std::str::from_utf8(key).ok())
        .filter_map(|key| {
            let inner = key.strip_prefix("filter.")?;
            let (name, _) = inner.rsplit_once('.')?;
            Some(name.to_owned())
        })
        .collect();
    drivers.sort();
    drivers.dedup();
    drivers
}

/// The git folders of the repository a workspace is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitDirs {
    /// The folder shared by every worktree: configuration, hooks, `info/`, refs, objects.
    pub common: PathBuf,
    /// The workspace's own git folder: the common one, or for a linked worktree its folder in
    /// `worktrees/`.
    pub own: PathBuf,
}

impl GitDirs {
    /// The git folders of the repository `workspace` is in (found from it upwards, as git does,
    /// without reading git's environment variables); `None` outside a repository.
    pub(crate) fn find(workspace: &Path) -> Option<GitDirs> {
        let start = std::path::absolute(workspace).ok()?;
        let dot_git = start
            .ancestors()
            .map(|folder| folder.join(".git"))
            .find(|dot_git| dot_git.exists())?;
        if dot_git.is_dir() {
            return Some(GitDirs {
                common: dot_git.clone(),
                own: dot_git,
            });
        }
        // A linked worktree or a submodule: `.git` is a file naming the real folder.
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let named = PathBuf::from(text.lines().next()?.strip_prefix("gitdir: ")?.trim());
        let own = if named.is_absolute() {
            named
        } else {
            dot_git.parent()?.join(named)
        };
        let common = match std::fs::read_to_string(own.join("commondir")) {
            Ok(text) => {
                let common = PathBuf::from(text.trim());
                if common.is_absolute() {
                    common
                } else {
                    own.join(common)
                }
            }
            Err(_) => own.clone(),
        };
        Some(GitDirs { common, own })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn every_filter_driver_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "--quiet"]);
        git(
            dir.path(),
            &["config", "filter.lfs.smudge", "git-lfs smudge %f"],
        );
        git(dir.path(), &["config", "filter.a.b.process", "evil"]);
        let args: Vec<String> = command(dir.path())
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for expected in [
            "core.fsmonitor=",
            "core.hooksPath=/dev/null",
            "filter.lfs.smudge=",
            "filter.lfs.process=",
            "filter.lfs.required=false",
            "filter.a.b.clean=",
            "filter.a.b.smudge=",
        ] {
            assert!(args.iter().any(|a| a == expected), "{expected}: {args:?}");
        }
    }

    #[test]
    fn the_git_folders_of_a_repository_and_of_a_linked_worktree_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("sub/deeper")).unwrap();
        git(&repo, &["init", "--quiet"]);
        git(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "commit",
                "--quiet",
                "--allow-empty",
                "-m",
                "start",
            ],
        );
        let found = GitDirs::find(&repo.join("sub/deeper")).unwrap();
        assert_eq!(found.common, repo.join(".git"));
        assert_eq!(found.own, repo.join(".git"));
        let linked = dir.path().join("linked");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "--quiet",
                "--detach",
                linked.to_str().unwrap(),
            ],
        );
        let found = GitDirs::find(&linked).unwrap();
        assert_eq!(
            found.common.canonicalize().unwrap(),
            repo.join(".git").canonicalize().unwrap()
        );
        assert_eq!(
            found.own.canonicalize().unwrap(),
            repo.join(".git/worktrees/linked").canonicalize().unwrap()
        );
        assert_eq!(GitDirs::find(&dir.path().join("nowhere")), None);
    }
}
