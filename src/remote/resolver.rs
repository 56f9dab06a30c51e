//! Resolving one pipeline's remote imports: the lock says which commit each repository and `rev`
//! is pinned to, the cache holds the commit's files, git fetches what the cache lacks. What was
//! resolved is kept, for the lock to be written from it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};

use super::cache::{self, Cache, FillError};
use super::git;
use super::lockfile::{self, Key, LockError, Lockfile, Pin, short};
use super::source::{Source, is_full_sha};

/// Whether the network may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    /// git may ask a repository (a commit missing from the cache, a `rev` not in the lock).
    Allowed,
    /// `--offline`: the lock and the cache only.
    Offline,
    /// The language server, and commands that only look: the lock and the cache only.
    Never,
}

/// Which pins `helixflow lock --update` moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Update {
    /// None: every locked pin stays.
    Nothing,
    /// Every pin is resolved again.
    All,
    /// The pins of repositories that this URL names (the repository, or an import of it).
    Matching(String),
}

impl Update {
    /// Whether the pin of `source`'s repository is resolved again.
    pub(crate) fn covers(&self, source: &Source) -> bool {
        match self {
            Update::Nothing => false,
            Update::All => true,
            Update::Matching(url) => {
                let bare = |s: &str| {
                    let s = s.trim_end_matches('/');
                    s.strip_prefix(super::source::PREFIX)
                        .unwrap_or(s)
                        .to_owned()
                };
                bare(&source.repository) == bare(url) || bare(&source.to_string()) == bare(url)
            }
        }
    }
}

/// How a resolver may resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Policy {
    /// Whether the network may be used.
    pub network: Network,
    /// `--locked`: an import missing from the lock is an error (the lock must not change).
    pub locked: bool,
    /// Pins to resolve again.
    pub update: Update,
}

impl Policy {
    /// The lock and the cache, nothing else: what the language server does.
    pub(crate) const CACHE_ONLY: Policy = Policy {
        network: Network::Never,
        locked: false,
        update: Update::Nothing,
    };
}

/// A file read from a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Its copy in the cache.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// The commit it was read at.
    pub commit: String,
}

/// Why a remote import cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// git could not reach the repository, or fetch the commit from it.
    Unreachable { repository: String, detail: String },
    /// The repository has no tag or branch of that name.
    UnknownRev { repository: String, rev: String },
    /// The file is not in the commit (or is not a UTF-8 text file there).
    Missing {
        source: String,
        commit: String,
        detail: String,
    },
    /// The lock cannot be read, or does not allow this import (`--locked`).
    Lock { message: String, help: String },
    /// A cached file is not what the lock says was read (`found`: its SHA-256; none: it is gone
    /// or cannot be read).
    Tampered {
        file: PathBuf,
        expected: String,
        found: Option<String>,
    },
    /// The cache cannot be written.
    Cache { path: String, detail: String },
    /// Neither the lock nor the cache can answer, and the network may not be used.
    NotCached { message: String, help: String },
}

impl Problem {
    /// What went wrong, in one sentence.
    pub(crate) fn message(&self) -> String {
        match self {
            Problem::Unreachable { repository, detail } => {
                format!("cannot fetch from {repository}: {detail}")
            }
            Problem::UnknownRev { repository, rev } => {
                format!("{repository} has no tag or branch `{rev}`")
            }
            Problem::Missing {
                source,
                commit,
                detail,
            } => format!("{source}: {detail} at commit {}", short(commit)),
            Problem::Lock { message, .. } | Problem::NotCached { message, .. } => message.clone(),
            Problem::Tampered {
                file,
                expected,
                found,
            } => match found {
                Some(found) => format!(
                    "{} was changed after it was fetched: its SHA-256 is {}…, the lock says {}…",
                    file.display(),
                    short(found),
                    short(expected)
                ),
                None => format!(
                    "{} is gone from the import cache, or is no longer a file: the lock says it was read",
                    file.display()
                ),
            },
            Problem::Cache { path, detail } => {
                format!("cannot write the import cache {path}: {detail}")
            }
        }
    }

    /// What to do about it, when more than the rule's help can say.
    pub(crate) fn help(&self) -> Option<String> {
        match self {
            Problem::Lock { help, .. } | Problem::NotCached { help, .. } => Some(help.clone()),
            Problem::Tampered { file, .. } => {
                let folder = file
                    .ancestors()
                    .find(|a| {
                        a.file_name()
                            .is_some_and(|n| is_full_sha(&n.to_string_lossy()))
                    })
                    .unwrap_or(file);
                Some(format!(
                    "Remove {} and run again: helixflow fetches the commit anew and checks it against the lock.",
                    folder.display()
                ))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

/// The lock a resolution started from, and the one it makes.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The lock file.
    pub path: PathBuf,
    /// Its text when it was read (none: there was no lock file).
    pub text: Option<String>,
    /// The lock as read (none: no file, or one that cannot be read).
    pub old: Option<Lockfile>,
    /// The pins of every remote import resolved, and the files read from each.
    pub new: Lockfile,
}

/// Resolves the remote imports of one pipeline (or library), against the lock beside it.
#[derive(Debug)]
pub(crate) struct Resolver {
    policy: Policy,
    /// The pipeline's file name, which its lock records.
    pipeline: String,
    lock_path: PathBuf,
    lock_text: Option<String>,
    lock: Result<Option<Lockfile>, LockError>,
    cache: Option<Cache>,
    session: Mutex<BTreeMap<Key, Pinned>>,
}

/// A pin as this resolution found it.
#[derive(Debug, Clone)]
struct Pinned {
    pin: Pin,
    /// The files' hashes to check against: the lock's, when the commit is the locked one.
    expected: BTreeMap<String, String>,
    /// Whether the lock pins it to this commit (a file it does not list changes the lock).
    locked: bool,
}

impl Resolver {
    /// A resolver for the pipeline file `root`, reading the lock beside it.
    pub(crate) fn new(root: &Path, policy: Policy) -> Resolver {
        let lock_path = lockfile::path_for(root);
        let pipeline = root
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let (lock_text, lock) = match std::fs::read_to_string(&lock_path) {
            Ok(text) => {
                let lock = Lockfile::parse(&text).and_then(|lock| ours(lock, &pipeline));
                (Some(text), lock.map(Some))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, Ok(None)),
            Err(e) => (
                None,
                Err(LockError {
                    message: format!("it cannot be read: {e}"),
                    span: (0, 0),
                }),
            ),
        };
        Resolver {
            policy,
            pipeline,
            lock_path,
            lock_text,
            lock,
            cache: cache::location().map(|root| Cache { root }),
            session: Mutex::new(BTreeMap::new()),
        }
    }

    fn session(&self) -> MutexGuard<'_, BTreeMap<Key, Pinned>> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The file `source` at the commit `rev` is pinned to.
    pub(crate) fn resolve(&self, source: &Source, rev: &str) -> Result<Fetched, Problem> {
        let key = Key {
            repository: source.repository.clone(),
            rev: rev.to_owned(),
        };
        let pinned = self.pinned(source, &key)?;
        let cache = self.cache()?;
        let commit = pinned.pin.commit.clone();
        let expected = pinned.expected.get(&source.path);
        let (path, bytes) = match cache.read(&commit, &source.path) {
            Ok(read) => read,
            Err(e) => {
                let file = cache.commit_dir(&commit).join(&source.path);
                return Err(match expected {
                    Some(expected) => Problem::Tampered {
                        file,
                        expected: expected.clone(),
                        found: None,
                    },
                    None if e.kind() == std::io::ErrorKind::NotFound => Problem::Missing {
                        source: source.to_string(),
                        commit,
                        detail: "no such file".to_owned(),
                    },
                    None => Problem::Missing {
                        source: source.to_string(),
                        commit,
                        detail: format!("not a file ({e})"),
                    },
                });
            }
        };
        let sha = hex(&Sha256::digest(&bytes));
        match expected {
            Some(expected) if *expected != sha => {
                return Err(Problem::Tampered {
                    file: path,
                    expected: expected.clone(),
                    found: Some(sha),
                });
            }
            None if pinned.locked && self.policy.locked => {
                return Err(self.not_in_lock(&format!(
                    "{source} is not in {} (its commit is, but not this file)",
                    self.lock_name()
                )));
            }
            _ => {}
        }
        let text = String::from_utf8(bytes).map_err(|_| Problem::Missing {
            source: source.to_string(),
            commit: commit.clone(),
            detail: "not a UTF-8 text file".to_owned(),
        })?;
        if let Some(pinned) = self.session().get_mut(&key) {
            pinned.pin.files.insert(source.path.clone(), sha);
        }
        Ok(Fetched { path, text, commit })
    }

    /// The commit of `key`: resolved already in this session, locked, or found now.
    fn pinned(&self, source: &Source, key: &Key) -> Result<Pinned, Problem> {
        if let Some(pinned) = self.session().get(key) {
            return Ok(pinned.clone());
        }
        let lock = self.lock.as_ref().map_err(|e| Problem::Lock {
            message: format!("{} cannot be read: {}", self.lock_name(), e.message),
            help: "Fix it, or remove it to have helixflow write it again (`helixflow lock`)."
                .to_owned(),
        })?;
        let locked = lock.as_ref().and_then(|l| l.pins.get(key));
        let pinned = match locked {
            Some(pin) if !self.updates(source) => {
                self.ensure_cached(source, &pin.commit)?;
                Pinned {
                    pin: Pin {
                        commit: pin.commit.clone(),
                        files: BTreeMap::new(),
                    },
                    expected: pin.files.clone(),
                    locked: true,
                }
            }
            _ => {
                if self.policy.locked {
                    return Err(self.not_in_lock(&format!(
                        "{} rev \"{}\" is not in {}",
                        key.repository,
                        key.rev,
                        self.lock_name()
                    )));
                }
                let commit = self.find_commit(source, &key.rev)?;
                self.ensure_cached(source, &commit)?;
                // The same commit as the lock's: its files are still checked against it.
                let expected = locked
                    .filter(|pin| pin.commit == commit)
                    .map(|pin| pin.files.clone())
                    .unwrap_or_default();
                Pinned {
                    pin: Pin {
                        commit,
                        files: BTreeMap::new(),
                    },
                    expected,
                    locked: false,
                }
            }
        };
        self.session().insert(key.clone(), pinned.clone());
        Ok(pinned)
    }

    fn updates(&self, source: &Source) -> bool {
        self.policy.update.covers(source)
    }

    fn lock_name(&self) -> String {
        self.lock_path.file_name().map_or_else(
            || "the lock".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    fn not_in_lock(&self, message: &str) -> Problem {
        Problem::Lock {
            message: format!("{message}, and `--locked` forbids changing the lock"),
            help: format!(
                "Run `helixflow lock` where the network is allowed, and commit {}.",
                self.lock_path.display()
            ),
        }
    }

    fn cache(&self) -> Result<&Cache, Problem> {
        self.cache.as_ref().ok_or_else(|| Problem::Cache {
            path: "(none)".to_owned(),
            detail: "neither HELIXFLOW_CACHE, XDG_CACHE_HOME nor HOME is set".to_owned(),
        })
    }

    /// The commit `rev` names now, asking the repository unless `rev` is a full commit id.
    fn find_commit(&self, source: &Source, rev: &str) -> Result<String, Problem> {
        if is_full_sha(rev) {
            return Ok(rev.to_ascii_lowercase());
        }
        if self.policy.network != Network::Allowed {
            return Err(self.offline(format!(
                "{} rev \"{rev}\" is not in {}",
                source.repository,
                self.lock_name()
            )));
        }
        let cache = self.cache()?;
        let folder = ensure_folder(&cache.root)?;
        match git::ls_remote(&folder, source.git_url(), rev) {
            Ok(Some(commit)) => Ok(commit),
            Ok(None) => Err(Problem::UnknownRev {
                repository: source.repository.clone(),
                rev: rev.to_owned(),
            }),
            Err(e) => Err(Problem::Unreachable {
                repository: source.repository.clone(),
                detail: e.detail,
            }),
        }
    }

    fn ensure_cached(&self, source: &Source, commit: &str) -> Result<(), Problem> {
        let cache = self.cache()?;
        if cache.has(commit) {
            return Ok(());
        }
        if self.policy.network != Network::Allowed {
            return Err(self.offline(format!(
                "commit {} of {} is not in the import cache {}",
                short(commit),
                source.repository,
                cache.root.display()
            )));
        }
        cache.fill(source.git_url(), commit).map_err(|e| match e {
            FillError::Cache { path, error } => Problem::Cache {
                path: path.display().to_string(),
                detail: error.to_string(),
            },
            FillError::Git(e) => Problem::Unreachable {
                repository: source.repository.clone(),
                detail: format!("commit {}: {}", short(commit), e.detail),
            },
        })
    }

    fn offline(&self, message: String) -> Problem {
        let help = match self.policy.network {
            Network::Offline => {
                "Run once without `--offline` (or `helixflow lock`) to fetch it into the cache."
            }
            _ => {
                "Run `helixflow lock` (or any command on the pipeline) to fetch it into the cache."
            }
        };
        Problem::NotCached {
            message,
            help: help.to_owned(),
        }
    }

    /// What this resolution found, beside the lock it started from.
    pub(crate) fn outcome(&self) -> Outcome {
        let mut new = Lockfile {
            pipeline: self.pipeline.clone(),
            ..Lockfile::default()
        };
        for (key, pinned) in self.session().iter() {
            new.pins.insert(key.clone(), pinned.pin.clone());
        }
        Outcome {
            path: self.lock_path.clone(),
            text: self.lock_text.clone(),
            old: self.lock.clone().ok().flatten(),
            new,
        }
    }
}

/// `lock` when it is the lock of the pipeline file `pipeline`; the lock of another pipeline (two
/// files of a folder that share `helixflow.lock`) is not read as this one's.
fn ours(lock: Lockfile, pipeline: &str) -> Result<Lockfile, LockError> {
    if lock.pipeline == pipeline {
        return Ok(lock);
    }
    Err(LockError {
        message: format!(
            "it is the lock of {}, not of {pipeline} (both use the same lock file: rename one of them)",
            lock.pipeline
        ),
        span: (0, 0),
    })
}

/// The cache folder, made when it is not there, for git to run in.
fn ensure_folder(root: &Path) -> Result<PathBuf, Problem> {
    cache::make_folder(root).map_err(|e| Problem::Cache {
        path: root.display().to_string(),
        detail: e.to_string(),
    })?;
    Ok(root.to_owned())
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}
