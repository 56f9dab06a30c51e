//! The cache of remote imports: a repository's files at a commit, in a folder named after the
//! commit (`<cache>/<commit>/agents.kdl`), so a build keeps working after the repository is gone.
//!
//! A commit's folder appears whole or not at all: its files are written into a staging folder of
//! the process's own (`.tmp-<pid>-…`), synced, and the folder is renamed into place. Two
//! helixflow processes that fill the same commit at once each stage their own copy; the first
//! rename wins, the other process finds the folder there and removes its copy. The files are
//! made read-only: they are copies of a commit, not files to edit (an editor opens them so).

use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::git::{self, GitError};

/// Where the cache is: `HELIXFLOW_CACHE`, else `$XDG_CACHE_HOME/helixflow/imports`, else
/// `~/.cache/helixflow/imports`; `None` when none of them is set.
pub(crate) fn location() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(folder) = set("HELIXFLOW_CACHE") {
        return Some(PathBuf::from(folder));
    }
    let base = set("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| set("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("helixflow").join("imports"))
}

/// Why a commit could not be put in the cache.
#[derive(Debug)]
pub(crate) enum FillError {
    /// The cache folder could not be written.
    Cache { path: PathBuf, error: io::Error },
    /// git could not fetch the commit.
    Git(GitError),
}

/// The cache folder.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    /// Its root.
    pub root: PathBuf,
}

impl Cache {
    /// The folder of a commit's files.
    pub(crate) fn commit_dir(&self, commit: &str) -> PathBuf {
        self.root.join(commit)
    }

    /// Whether the commit is in the cache.
    pub(crate) fn has(&self, commit: &str) -> bool {
        self.commit_dir(commit).is_dir()
    }

    /// The cached file `path` of `commit` (where it is, and its bytes). A file that is a link,
    /// or anything but a regular file, is refused: the cache holds none.
    pub(crate) fn read(&self, commit: &str, path: &str) -> io::Result<(PathBuf, Vec<u8>)> {
        let full = self.commit_dir(commit).join(path);
        let meta = std::fs::symlink_metadata(&full)?;
        if meta.file_type().is_symlink() {
            return Err(io::Error::other(
                "a symbolic link, which the cache never holds",
            ));
        }
        let bytes = crate::regular::read(&full)?;
        Ok((full, bytes))
    }

    /// Fetches `commit` from the repository at `url` and puts its files in the cache.
    pub(crate) fn fill(&self, url: &str, commit: &str) -> Result<(), FillError> {
        let cache_error = |path: &Path, error: io::Error| FillError::Cache {
            path: path.to_owned(),
            error,
        };
        make_folder(&self.root).map_err(|e| cache_error(&self.root, e))?;
        let staging = self.root.join(staging_name());
        std::fs::create_dir(&staging).map_err(|e| cache_error(&staging, e))?;
        let filled = self.stage_and_place(&staging, url, commit);
        let _ = std::fs::remove_dir_all(&staging);
        filled
    }

    fn stage_and_place(&self, staging: &Path, url: &str, commit: &str) -> Result<(), FillError> {
        let git_dir = staging.join("git");
        let tree = staging.join("tree");
        git::init(&git_dir).map_err(FillError::Git)?;
        git::fetch_commit(&git_dir, url, commit).map_err(FillError::Git)?;
        std::fs::create_dir(&tree).map_err(|e| FillError::Cache {
            path: tree.clone(),
            error: e,
        })?;
        let written = git::archive(&git_dir, commit, |archive| unpack(archive, &tree))
            .map_err(FillError::Git)?;
        written
            .and_then(|()| sync_folder(&tree))
            .map_err(|e| FillError::Cache {
                path: self.commit_dir(commit),
                error: e,
            })?;
        let target = self.commit_dir(commit);
        match std::fs::rename(&tree, &target) {
            Ok(()) => {
                let _ = sync_folder(&self.root);
                Ok(())
            }
            // Another process placed the same commit first: its copy is as good as this one.
            Err(_) if target.is_dir() => Ok(()),
            Err(e) => Err(FillError::Cache {
                path: target,
                error: e,
            }),
        }
    }
}

/// A staging folder's name, unique to this process and call.
fn staging_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        ".tmp-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Writes the regular files of a tar archive below `tree`, read-only and synced. Links and other
/// kinds of entries are left out: an import reads regular files only, and a link in the cache
/// could lead anywhere.
fn unpack(archive: &mut dyn Read, tree: &Path) -> io::Result<()> {
    let mut archive = tar::Archive::new(archive);
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path()?.into_owned();
        if !path.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        let target = tree.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = std::fs::File::create_new(&target)?;
        io::copy(&mut entry, &mut file)?;
        file.sync_all()?;
        let mut permissions = file.metadata()?.permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(&target, permissions)?;
    }
    Ok(())
}

/// Makes the folder `folder` (and its parents) unless it is there; a file in its place is named
/// as such, not as the "file exists" of the system.
pub(crate) fn make_folder(folder: &Path) -> io::Result<()> {
    match std::fs::metadata(folder) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::other("it is a file, not a folder")),
        Err(_) => std::fs::create_dir_all(folder),
    }
}

fn sync_folder(folder: &Path) -> io::Result<()> {
    std::fs::File::open(folder)?.sync_all()
}
