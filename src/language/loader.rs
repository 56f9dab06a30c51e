//! File access for the language layer, so that lint, the language server and tests share one core
//! without the core touching the disk itself.

use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

use crate::remote::{Fetched, Policy, Problem, Resolver, Source};

/// Reads the files a pipeline refers to: imports and prompt files.
pub trait Loader {
    /// The text of a file.
    fn read(&self, path: &Path) -> io::Result<String>;

    /// Whether a file exists.
    fn is_file(&self, path: &Path) -> bool;

    /// Folders searched for imports after the importing file's own folder.
    fn search_path(&self) -> Vec<PathBuf>;

    /// The file `source` of a repository at the commit `rev` is pinned to, for the pipeline (or
    /// library) `root`. By default from the lock beside `root` and the import cache only: nothing
    /// is fetched and no lock is written (the language server, and tools that only look).
    fn remote(&self, root: &Path, source: &Source, rev: &str) -> Result<Fetched, Problem> {
        Resolver::new(root, Policy::CACHE_ONLY).resolve(source, rev)
    }

    /// Whether `folder` is inside a git work tree: it or a folder above it holds a `.git` (a
    /// repository's folder, or the file a worktree or submodule has instead).
    fn in_git_work_tree(&self, folder: &Path) -> bool {
        let absolute = folder
            .canonicalize()
            .or_else(|_| std::path::absolute(folder))
            .unwrap_or_else(|_| folder.to_path_buf());
        absolute
            .ancestors()
            .any(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
    }
}

/// The real file system, with `HELIXFLOW_PATH` as the import search path.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsLoader;

impl Loader for FsLoader {
    fn read(&self, path: &Path) -> io::Result<String> {
        let text = read_pipeline_file(crate::regular::open(path)?)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "the file is not valid UTF-8")
        })?;
        if text.len() > super::kdl::limits::MAX_BYTES {
            return Err(io::Error::other(super::kdl::limits::TooLarge));
        }
        Ok(text)
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn search_path(&self) -> Vec<PathBuf> {
        std::env::var_os("HELIXFLOW_PATH")
            .map(|paths| {
                std::env::split_paths(&paths)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The real file system, with remote imports resolved, fetched and locked as `resolver` allows:
/// what the command line compiles with.
impl Loader for Resolver {
    fn read(&self, path: &Path) -> io::Result<String> {
        FsLoader.read(path)
    }

    fn is_file(&self, path: &Path) -> bool {
        FsLoader.is_file(path)
    }

    fn search_path(&self) -> Vec<PathBuf> {
        FsLoader.search_path()
    }

    fn remote(&self, _root: &Path, source: &Source, rev: &str) -> Result<Fetched, Problem> {
        self.resolve(source, rev)
    }
}

/// The text of a pipeline file (or of standard input), read up to one byte past the front end's
/// size limit: a longer file is refused all the same (HF005), and memory never holds more of it.
/// `None` when the text is not UTF-8; past the limit, where the refusal is all that is said, a
/// character the cut splits (or any invalid byte) is read as U+FFFD instead.
pub(crate) fn read_pipeline_file(reader: impl io::Read) -> io::Result<Option<String>> {
    let mut bytes = Vec::new();
    reader
        .take(super::kdl::limits::MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > super::kdl::limits::MAX_BYTES {
        return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
    }
    Ok(String::from_utf8(bytes).ok())
}

/// Joins `relative` onto `base` and removes `.` and `..` lexically (no symlinks are followed).
pub(crate) fn normalize(base: &Path, relative: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in base.join(relative).components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}
