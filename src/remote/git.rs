//! The git command line, which does all the fetching: the user's credentials, proxies, SSH set-up
//! and `url.*.insteadOf` rules apply as they do to their own git commands. Every command is an
//! argv (never a shell), with no standard input and no prompt for a password (a repository that
//! needs one fails with git's own message).

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// What went wrong running git: the command and, for a person, what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitError {
    /// What git said on standard error (its last lines), or why it could not start.
    pub detail: String,
}

/// Variables that would point git at another repository than the one it is given (set when
/// helixflow runs inside a git hook, for instance).
const REPOSITORY_VARIABLES: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// A git command run in `folder`.
fn git(folder: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(folder)
        .stdin(Stdio::null())
        // No prompt for a user name or password: a session without a terminal would wait.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GCM_INTERACTIVE", "never");
    for name in REPOSITORY_VARIABLES {
        command.env_remove(name);
    }
    command
}

fn run(mut command: Command) -> Result<Output, GitError> {
    let output = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    let output = output.map_err(|e| cannot_start(&command, &e))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(GitError {
            detail: said(&output.stderr),
        })
    }
}

fn cannot_start(command: &Command, e: &std::io::Error) -> GitError {
    let folder_exists = command.get_current_dir().is_none_or(Path::is_dir);
    GitError {
        detail: if e.kind() == std::io::ErrorKind::NotFound && folder_exists {
            "git is not installed (helixflow fetches remote imports with the git command line)"
                .to_owned()
        } else {
            format!("cannot run git: {e}")
        },
    }
}

/// The first lines git wrote on standard error (where it says what failed), cleaned for a
/// terminal.
fn said(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(2)
        .collect();
    let tail = crate::text::one_line(&lines.join("; "));
    if tail.is_empty() {
        "git failed without saying why".to_owned()
    } else {
        tail
    }
}

/// The commit `rev` (a tag, a branch, or a full ref name) names in the repository at `url`, as
/// the repository says now; `None` when it has no such tag or branch. A tag is preferred to a
/// branch of the same name, as git itself prefers it.
pub(crate) fn ls_remote(folder: &Path, url: &str, rev: &str) -> Result<Option<String>, GitError> {
    let wanted: Vec<String> = if rev.starts_with("refs/") || rev == "HEAD" {
        vec![rev.to_owned()]
    } else {
        vec![format!("refs/tags/{rev}"), format!("refs/heads/{rev}")]
    };
    let mut command = git(folder);
    command.args(["ls-remote", "--quiet", "--"]).arg(url);
    for name in &wanted {
        command.arg(name);
        command.arg(format!("{name}^{{}}"));
    }
    let output = run(command)?;
    let listed = String::from_utf8_lossy(&output.stdout);
    let refs: Vec<(&str, &str)> = listed
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .collect();
    let find = |name: &str| {
        refs.iter()
            .find(|(_, r)| *r == name)
            .map(|(sha, _)| (*sha).to_owned())
    };
    // An annotated tag's commit is its peeled line.
    Ok(wanted
        .iter()
        .find_map(|name| find(&format!("{name}^{{}}")).or_else(|| find(name))))
}

/// Makes an empty repository at `git_dir` (a folder that does not exist yet) to fetch into.
pub(crate) fn init(git_dir: &Path) -> Result<(), GitError> {
    let parent = git_dir.parent().unwrap_or(git_dir);
    let mut command = git(parent);
    command
        .args(["init", "--quiet", "--bare"])
        .arg(git_dir.file_name().unwrap_or(OsStr::new("git")));
    run(command).map(drop)
}

/// Fetches the one commit `commit` from `url` into `git_dir`, by its id (not by a branch or tag
/// name, which may have moved), without its history.
pub(crate) fn fetch_commit(git_dir: &Path, url: &str, commit: &str) -> Result<(), GitError> {
    let mut command = git(git_dir);
    command
        .args([
            "fetch",
            "--quiet",
            "--depth=1",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
        ])
        .arg(url)
        .arg(commit);
    run(command).map(drop)
}

/// Streams the files of `commit` in `git_dir`, as a tar archive, to `read`; what `read`
/// returned, once git has ended well.
pub(crate) fn archive(
    git_dir: &Path,
    commit: &str,
    read: impl FnOnce(&mut dyn std::io::Read) -> std::io::Result<()>,
) -> Result<std::io::Result<()>, GitError> {
    let mut command = git(git_dir);
    command
        .args(["archive", "--format=tar"])
        .arg(format!("{commit}^{{commit}}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| cannot_start(&command, &e))?;
    let read = match child.stdout.as_mut() {
        Some(stdout) => read(stdout),
        None => Ok(()),
    };
    // Whatever was not read is dropped so that git does not wait on a full pipe.
    drop(child.stdout.take());
    let output = child.wait_with_output().map_err(|e| GitError {
        detail: format!("cannot run git: {e}"),
    })?;
    // A write that failed stopped the reading, and git with it: the write's error is the one.
    if read.is_err() || output.status.success() {
        return Ok(read);
    }
    Err(GitError {
        detail: said(&output.stderr),
    })
}
