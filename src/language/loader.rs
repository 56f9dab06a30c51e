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

    /// Whether a folder exists (a glob that names one is reported).
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

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
        let text = read_pipeline_file_from(crate::regular::open(path)?)?.ok_or_else(|| {
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
    read_pipeline_text(reader, Vec::new())
}

/// The text of the pipeline file `file` ([`read_pipeline_file`]), read into a buffer sized for it.
pub(crate) fn read_pipeline_file_from(file: std::fs::File) -> io::Result<Option<String>> {
    let buffer = crate::regular::buffer_for(&file, super::kdl::limits::MAX_BYTES as u64 + 1);
    read_pipeline_text(file, buffer)
}

fn read_pipeline_text(reader: impl io::Read, mut bytes: Vec<u8>) -> io::Result<Option<String>> {
    reader
        .take(super::kdl::limits::MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > super::kdl::limits::MAX_BYTES {
        return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
    }
    Ok(String::from_utf8(bytes).ok())
}

/// One question a compilation asked through its loader, with the answer it got. A compilation
/// is a function of its file's path and text, helixflow's own code and these answers: when every
/// one of them is answered the same way again, compiling again gives the same pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Answer {
    /// A file read: the BLAKE3 hash of its text, or the error met.
    Read {
        /// As the compilation named it.
        path: PathBuf,
        /// The hash, in hex.
        hash: Option<String>,
        /// The kind of error, when it could not be read.
        error: Option<String>,
    },
    /// Whether a file exists.
    IsFile {
        /// As the compilation named it.
        path: PathBuf,
        /// The answer.
        answer: bool,
    },
    /// Whether a folder exists.
    IsDir {
        /// As the compilation named it.
        path: PathBuf,
        /// The answer.
        answer: bool,
    },
    /// The import search path.
    SearchPath(Vec<PathBuf>),
    /// A file of a remote import: where the import cache holds it, the commit it was read at
    /// and the BLAKE3 hash of its text, or the problem met (by the lock and the import cache
    /// alone when asked again: a cached compilation never fetches).
    Remote {
        /// The pipeline (or library) that imports it.
        root: PathBuf,
        /// The repository and the file's path in it.
        source: Source,
        /// The `rev` it is pinned to.
        rev: String,
        /// Its copy in the cache, the commit, and the hash of its text; or the problem, for a
        /// person.
        answer: Result<(PathBuf, String, String), String>,
    },
    /// Whether a folder is in a git work tree.
    InGitWorkTree {
        /// As the compilation named it.
        folder: PathBuf,
        /// The answer.
        answer: bool,
    },
}

impl Answer {
    /// Whether `loader` answers this question the same way now.
    pub(crate) fn holds(&self, loader: &dyn Loader) -> bool {
        let recording = Recording::new(loader);
        match self {
            Answer::Read { path, .. } => {
                let _ = recording.read(path);
            }
            Answer::IsFile { path, .. } => {
                recording.is_file(path);
            }
            Answer::IsDir { path, .. } => {
                recording.is_dir(path);
            }
            Answer::SearchPath(_) => {
                recording.search_path();
            }
            Answer::InGitWorkTree { folder, .. } => {
                recording.in_git_work_tree(folder);
            }
            Answer::Remote {
                root, source, rev, ..
            } => {
                let _ = recording.remote(root, source, rev);
            }
        }
        recording.answers().first() == Some(self)
    }
}

/// A loader that notes every question asked of `inner`, and its answer.
pub(crate) struct Recording<'l> {
    inner: &'l dyn Loader,
    answers: std::sync::Mutex<(Vec<Answer>, std::collections::HashSet<Answer>)>,
}

impl<'l> Recording<'l> {
    /// Asks `inner`, noting each question.
    pub(crate) fn new(inner: &'l dyn Loader) -> Self {
        Recording {
            inner,
            answers: std::sync::Mutex::default(),
        }
    }

    /// The questions asked so far, in order, each once.
    pub(crate) fn answers(&self) -> Vec<Answer> {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .clone()
    }

    fn note(&self, answer: Answer) {
        let mut answers = self
            .answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if answers.1.insert(answer.clone()) {
            answers.0.push(answer);
        }
    }
}

impl Loader for Recording<'_> {
    fn read(&self, path: &Path) -> io::Result<String> {
        let read = self.inner.read(path);
        self.note(Answer::Read {
            path: path.to_owned(),
            hash: read
                .as_ref()
                .ok()
                .map(|text| blake3::hash(text.as_bytes()).to_hex().to_string()),
            error: read.as_ref().err().map(|e| format!("{:?}", e.kind())),
        });
        read
    }

    fn is_file(&self, path: &Path) -> bool {
        let answer = self.inner.is_file(path);
        self.note(Answer::IsFile {
            path: path.to_owned(),
            answer,
        });
        answer
    }

    fn is_dir(&self, path: &Path) -> bool {
        let answer = self.inner.is_dir(path);
        self.note(Answer::IsDir {
            path: path.to_owned(),
            answer,
        });
        answer
    }

    fn search_path(&self) -> Vec<PathBuf> {
        let answer = self.inner.search_path();
        self.note(Answer::SearchPath(answer.clone()));
        answer
    }

    fn remote(&self, root: &Path, source: &Source, rev: &str) -> Result<Fetched, Problem> {
        let fetched = self.inner.remote(root, source, rev);
        self.note(Answer::Remote {
            root: root.to_owned(),
            source: source.clone(),
            rev: rev.to_owned(),
            answer: match &fetched {
                Ok(file) => Ok((
                    file.path.clone(),
                    file.commit.clone(),
                    blake3::hash(file.text.as_bytes()).to_hex().to_string(),
                )),
                Err(problem) => Err(format!("{problem:?}")),
            },
        });
        fetched
    }

    fn in_git_work_tree(&self, folder: &Path) -> bool {
        let answer = self.inner.in_git_work_tree(folder);
        self.note(Answer::InGitWorkTree {
            folder: folder.to_owned(),
            answer,
        });
        answer
    }
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
