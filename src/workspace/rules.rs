//! What a walk leaves out, and what it records all the same. Both walkers judge with the code
//! here, so that they cannot disagree.
//!
//! Ignore rules are matched with `ignore::gitignore` directly, with the sources and precedence the
//! `ignore` crate's walker gives for the configuration in `walk_with_ignore` (the reference walker
//! of the walkers' tests, `walk/tests.rs`):
//!
//! - per folder, `.helixflowignore` and `.gitignore`, read when the folder has them, and
//!   `.git/info/exclude` (of the common git folder, for a worktree) when it has a `.git`;
//! - the same three for every folder above the workspace, matched against its canonical path;
//! - the global excludes file, matched relative to the current folder.
//!
//! The first of these that has a say decides, in this order: `.helixflowignore` files from the
//! nearest folder outwards, then `.gitignore` files, then exclude files, then the global file. A
//! folder and everything above it without rules are not matched at all.
//!
//! A walk records the rules it read, by folder ([`IgnoreRules`]); a later walk given them judges
//! with them instead of the ignore files on disk, so that what was added, changed or removed since
//! hides nothing and reveals nothing. A folder that did not exist then has no rules of its own.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::{GlobSet, GlobSetBuilder};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::HELIXFLOW_IGNORE;

/// Rules that hold for the whole workspace.
pub(super) struct Outer {
    /// Those of the folders above the workspace, nearest first; only folders that have any.
    above: Vec<Matchers>,
    /// The workspace's canonical path, which rules from above are matched against.
    pub(super) canonical: PathBuf,
    /// The global excludes file, relative to the current folder.
    global: Gitignore,
}

impl Outer {
    /// The rules above `root` and the global ones, as they are now.
    pub(super) fn read(root: &Path) -> Outer {
        let global = match std::env::current_dir() {
            Ok(cwd) => GitignoreBuilder::new(cwd).build_global().0,
            Err(_) => Gitignore::empty(),
        };
        let Ok(canonical) = root.canonicalize() else {
            return Outer {
                above: Vec::new(),
                canonical: PathBuf::new(),
                global,
            };
        };
        let above = canonical
            .ancestors()
            .skip(1)
            .filter_map(|dir| Matchers::read(dir, true, true, true))
            .collect();
        Outer {
            above,
            canonical,
            global,
        }
    }

    /// No rule at all.
    pub(super) fn none() -> Outer {
        Outer {
            above: Vec::new(),
            canonical: PathBuf::new(),
            global: Gitignore::empty(),
        }
    }

    /// Whether any rule holds for the whole workspace.
    pub(super) fn any(&self) -> bool {
        !self.above.is_empty() || !self.global.is_empty()
    }

    /// Whether rules from above the workspace are matched, so that a walker must build the path
    /// they are matched against.
    pub(super) fn has_above(&self) -> bool {
        !self.above.is_empty()
    }

    /// Whether the entry at `path` is ignored, given `level`, the rules of its folder and of the
    /// folders up to the workspace. `from_above` is the same path below [`Outer::canonical`]; it is
    /// read only when [`Outer::has_above`].
    pub(super) fn ignored(
        &self,
        level: Option<&Level>,
        path: &Path,
        from_above: &Path,
        is_dir: bool,
    ) -> bool {
        let sources: [fn(&Matchers) -> &Gitignore; 3] = [|m| &m.custom, |m| &m.git, |m| &m.exclude];
        for source in sources {
            let mut at = level;
            while let Some(rules) = at {
                match source(&rules.matchers).matched(path, is_dir) {
                    Match::None => at = rules.parent.as_deref(),
                    other => return other.is_ignore(),
                }
            }
            for matchers in &self.above {
                match source(matchers).matched(from_above, is_dir) {
                    Match::None => {}
                    other => return other.is_ignore(),
                }
            }
        }
        self.global.matched(path, is_dir).is_ignore()
    }
}

/// The ignore files of one folder.
pub(super) struct Matchers {
    custom: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
}

impl Matchers {
    /// Reads the ignore files of `dir`, as far as they can be there: `custom` when a
    /// `.helixflowignore` can be, `git` for `.gitignore`, `repository` for `.git`. `None` when
    /// none has a rule. Files that cannot be read, and lines that are not patterns, count as
    /// empty, as they do for the `ignore` crate's walker.
    pub(super) fn read(dir: &Path, custom: bool, git: bool, repository: bool) -> Option<Matchers> {
        let matchers = Matchers {
            custom: if custom {
                ignore_file(dir, &dir.join(HELIXFLOW_IGNORE))
            } else {
                Gitignore::empty()
            },
            git: if git {
                ignore_file(dir, &dir.join(".gitignore"))
            } else {
                Gitignore::empty()
            },
            exclude: match repository.then(|| common_git_dir(dir)).flatten() {
                Some(git_dir) => ignore_file(dir, &git_dir.join("info/exclude")),
                None => Gitignore::empty(),
            },
        };
        let empty =
            matchers.custom.is_empty() && matchers.git.is_empty() && matchers.exclude.is_empty();
        (!empty).then_some(matchers)
    }
}

/// The rules of a folder that has some, and of the folders above it.
pub(super) struct Level {
    matchers: Arc<Matchers>,
    parent: Option<Arc<Level>>,
}

impl Level {
    /// The rules for the entries of the folder `dir`, whose own ignore files are as the flags say
    /// (see [`Matchers::read`]) and whose parent's rules are `parent`. The second value is the
    /// folder's own rules, when it has any.
    pub(super) fn read(
        dir: &Path,
        (custom, git, repository): (bool, bool, bool),
        parent: Option<&Arc<Level>>,
    ) -> (Option<Arc<Level>>, Option<Arc<Matchers>>) {
        if !(custom || git || repository) {
            return (parent.cloned(), None);
        }
        match Matchers::read(dir, custom, git, repository) {
            Some(matchers) => {
                let matchers = Arc::new(matchers);
                let level = Level {
                    matchers: Arc::clone(&matchers),
                    parent: parent.cloned(),
                };
                (Some(Arc::new(level)), Some(matchers))
            }
            None => (parent.cloned(), None),
        }
    }

    /// The rules for the entries of the folder `key` (relative, with its trailing slash; empty
    /// for the workspace) as `rules` recorded them.
    pub(super) fn recorded(
        rules: &IgnoreRules,
        key: &str,
        parent: Option<&Arc<Level>>,
    ) -> Option<Arc<Level>> {
        match rules.0.folders.get(key) {
            Some(matchers) => Some(Arc::new(Level {
                matchers: Arc::clone(matchers),
                parent: parent.cloned(),
            })),
            None => parent.cloned(),
        }
    }
}

/// The ignore rules a snapshot was taken with: those from above the workspace and the global
/// ones, and each folder's own.
#[derive(Clone)]
pub struct IgnoreRules(Arc<Book>);

struct Book {
    outer: Arc<Outer>,
    /// By folder: relative, with its trailing slash; empty for the workspace.
    folders: HashMap<String, Arc<Matchers>>,
}

impl IgnoreRules {
    pub(super) fn new(outer: Arc<Outer>, folders: HashMap<String, Arc<Matchers>>) -> IgnoreRules {
        IgnoreRules(Arc::new(Book { outer, folders }))
    }

    pub(super) fn outer(&self) -> &Arc<Outer> {
        &self.0.outer
    }

    /// Whether these rules ignore the file at `rel` (relative, forward slashes) in the workspace
    /// `root`: the file itself, or a folder on its way, is ignored, as a walk would find.
    pub(crate) fn ignores(&self, root: &Path, rel: &str) -> bool {
        self.ignores_entry(root, rel, false)
    }

    /// Like [`IgnoreRules::ignores`], for a file or (`is_dir`) a folder.
    pub(crate) fn ignores_entry(&self, root: &Path, rel: &str, is_dir: bool) -> bool {
        let outer = &self.0.outer;
        let mut level = Level::recorded(self, "", None);
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let mut key = String::new();
        for (i, part) in parts.iter().enumerate() {
            let folder = i + 1 < parts.len();
            key.push_str(part);
            let from_above = outer.canonical.join(&key);
            if outer.ignored(
                level.as_deref(),
                &root.join(&key),
                &from_above,
                folder || is_dir,
            ) {
                return true;
            }
            if folder {
                key.push('/');
                level = Level::recorded(self, &key, level.as_ref());
            }
        }
        false
    }
}

impl std::fmt::Debug for IgnoreRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut folders: Vec<&str> = self.0.folders.keys().map(String::as_str).collect();
        folders.sort_unstable();
        f.debug_struct("IgnoreRules")
            .field("above", &self.0.outer.above.len())
            .field("folders", &folders)
            .finish_non_exhaustive()
    }
}

/// Files a snapshot records whether or not ignore rules leave them out: a phase's `protect` globs,
/// since a protected file must stay byte-identical wherever it is.
#[derive(Clone)]
pub struct ProtectedPaths(Arc<Protected>);

struct Protected {
    set: GlobSet,
    /// Where each glob's matches can be: only folders on the way there, or inside, are entered.
    roots: Vec<Root>,
}

/// The folders a glob's matches can be in.
#[derive(Debug)]
struct Root {
    /// The glob's folders before its first wildcard (`tests/fixtures` for `tests/fixtures/**`).
    folder: String,
    /// Whether matches can be below that folder too, not only directly in it.
    deep: bool,
}

impl ProtectedPaths {
    /// The files these globs (relative to the workspace, as `protect` writes them) match; `None`
    /// for no globs.
    ///
    /// # Errors
    /// A glob that does not compile.
    pub(crate) fn new(globs: &[String]) -> Result<Option<ProtectedPaths>, globset::Error> {
        if globs.is_empty() {
            return Ok(None);
        }
        let mut builder = GlobSetBuilder::new();
        let mut roots = Vec::with_capacity(globs.len());
        for glob in globs {
            let parts: Vec<&str> = glob
                .split('/')
                .filter(|part| !part.is_empty() && *part != ".")
                .collect();
            builder.add(crate::glob::compile_glob(&parts.join("/"))?);
            let (name, folders) = parts.split_last().unwrap_or((&"", &[]));
            let literal: Vec<&str> = folders
                .iter()
                .take_while(|part| crate::glob::is_literal(part))
                .copied()
                .collect();
            // `*` stays within one folder; `**`, and a brace that may hold a `/`, do not.
            let deep = literal.len() < folders.len() || name.contains("**") || name.contains('{');
            roots.push(Root {
                folder: literal.join("/"),
                deep,
            });
        }
        Ok(Some(ProtectedPaths(Arc::new(Protected {
            set: builder.build()?,
            roots,
        }))))
    }

    /// Whether the file at `path` (relative, forward slashes) is protected.
    pub(crate) fn matches(&self, path: impl AsRef<Path>) -> bool {
        self.0.set.is_match(path)
    }

    /// Whether the folder at `folder` (relative, forward slashes, no trailing slash) can hold a
    /// protected file, directly or below.
    pub(crate) fn may_hold(&self, folder: &[u8]) -> bool {
        // Whether `inner` is strictly inside `outer`.
        let inside = |inner: &[u8], outer: &[u8]| {
            outer.is_empty()
                || inner
                    .strip_prefix(outer)
                    .is_some_and(|rest| rest.first() == Some(&b'/'))
        };
        self.0.roots.iter().any(|root| {
            let root_folder = root.folder.as_bytes();
            root_folder == folder
                || inside(root_folder, folder)
                || root.deep && inside(folder, root_folder)
        })
    }
}

impl std::fmt::Debug for ProtectedPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtectedPaths")
            .field("roots", &self.0.roots)
            .finish_non_exhaustive()
    }
}

/// The rules in the ignore file at `path`, for the folder `dir`; empty when there is none.
fn ignore_file(dir: &Path, path: &Path) -> Gitignore {
    if !path.exists() {
        return Gitignore::empty();
    }
    let mut builder = GitignoreBuilder::new(dir);
    // Lines that are not valid patterns are skipped, as git skips them.
    let _ = builder.add(path);
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// The git folder whose `info/exclude` holds for `dir`, which has a `.git`: that folder itself,
/// or for a linked worktree (a `.git` file) the common folder its `commondir` names. `None` when a
/// `.git` file names none. The same resolution as the `ignore` crate's (which, unlike git, reads
/// no environment variables).
fn common_git_dir(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    let is_file = std::fs::metadata(&dot_git).is_ok_and(|meta| meta.is_file());
    if !is_file {
        return Some(dot_git);
    }
    let line = first_line(&dot_git)?;
    let real = PathBuf::from(line.strip_prefix("gitdir: ")?);
    let common = first_line(&real.join("commondir"))?;
    Some(if common.starts_with('.') {
        real.join(common)
    } else {
        PathBuf::from(common)
    })
}

/// The first line of a text file.
fn first_line(path: &Path) -> Option<String> {
    use std::io::BufRead;
    let file = File::open(path).ok()?;
    io::BufReader::new(file).lines().next()?.ok()
}

/// Where a `protect` pattern points: the path it names, or the folder before its first wildcard
/// (`data` for `data/**`), and whether that is a folder; `None` for a pattern that starts with a
/// wildcard.
pub(crate) fn protect_root(pattern: &str) -> Option<(String, bool)> {
    let parts: Vec<&str> = pattern
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    let literal: Vec<&str> = parts
        .iter()
        .take_while(|part| crate::glob::is_literal(part))
        .copied()
        .collect();
    if literal.is_empty() {
        return None;
    }
    Some((literal.join("/"), literal.len() < parts.len()))
}
