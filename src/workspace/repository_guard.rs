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
//! change. Between looks, the kernel watches those files and folders (`inotify`): a look that
//! finds nothing told since the last one, which found everything as it must be, reads nothing
//! again (a run of a thousand quick steps asks a thousand times).

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
    /// The names in the folder itself they are found under (`config`, `hooks`).
    names: Vec<&'static str>,
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
                let names = globs
                    .iter()
                    .filter_map(|glob| glob.split('/').next())
                    .collect();
                let globs: Vec<String> = globs.iter().map(|g| (*g).to_owned()).collect();
                let guarded = ProtectedPaths::new(&globs).ok().flatten()?;
                Some(Folder {
                    names,
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
    /// What the kernel has told of the guarded files since the last look, set up before it; none
    /// before the first look, or where the kernel cannot watch them (every look then reads
    /// them all).
    watch: Option<watch::Watch>,
    /// Whether the last look found every guarded file as it must be.
    settled: bool,
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
                watch: None,
                settled: false,
            }))),
        }
    }

    /// What [`changed_since`](Self::changed_since) says, when the kernel told of no change since
    /// the last look found everything as it must be: cheap enough to ask from the thread that
    /// drives the run. `None` when the files must be read (then ask `changed_since`).
    pub(crate) fn quietly_changed_since(&self, since: Instant) -> Option<Vec<String>> {
        let Some(inner) = &self.inner else {
            return Some(Vec::new());
        };
        let mut guarded = inner.lock().unwrap_or_else(PoisonError::into_inner);
        guarded.quiet().then(|| guarded.found_since(since))
    }

    /// Every change to the guarded files found after `since`: those noted before, and any found
    /// now, which is noted and put back first. A detail per file, such as "`.git/config` was
    /// modified, and was put back as it was".
    pub(crate) fn changed_since(&self, since: Instant) -> Vec<String> {
        let Some(inner) = &self.inner else {
            return Vec::new();
        };
        let mut guarded = inner.lock().unwrap_or_else(PoisonError::into_inner);
        if !guarded.quiet() {
            // Watched from before the look: a change made while it reads is told next time.
            let watch = watch::Watch::new(&guarded.expected);
            let details = guarded.expected.put_back();
            guarded.settled = details.is_empty();
            guarded.watch = watch;
            if !details.is_empty() {
                guarded.found.push((Instant::now(), details));
            }
        }
        guarded.found_since(since)
    }
}

impl Guarded {
    /// Whether the last look found every guarded file as it must be and the kernel told of
    /// nothing since. What it told is read once: until a look reads the files, not quiet.
    fn quiet(&mut self) -> bool {
        if self.settled && !self.watch.as_mut().is_some_and(watch::Watch::quiet) {
            self.settled = false;
        }
        self.settled
    }

    /// The changes found at `since` or later, a detail per file.
    fn found_since(&self, since: Instant) -> Vec<String> {
        self.found
            .iter()
            .filter(|(when, _)| *when >= since)
            .flat_map(|(_, details)| details.iter().cloned())
            .collect()
    }
}

/// What the kernel tells of the guarded files and folders between two looks.
#[cfg(target_os = "linux")]
mod watch {
    use std::ffi::OsStr;
    use std::mem::MaybeUninit;
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
    use rustix::io::Errno;

    use super::RepositoryFingerprint;

    /// An `inotify` instance watching every guarded file and folder, and each git folder for its
    /// guarded names.
    pub(super) struct Watch {
        fd: OwnedFd,
        /// The watches of the git folders themselves, with the names guarded in each: an event
        /// there of any other name (git's own `index`, `HEAD`, refs) says nothing.
        roots: Vec<(i32, Vec<&'static str>)>,
    }

    /// Whatever changes a file or folder: its contents, its mode, its name, its being.
    const CHANGES: WatchFlags = WatchFlags::MODIFY
        .union(WatchFlags::ATTRIB)
        .union(WatchFlags::CLOSE_WRITE)
        .union(WatchFlags::CREATE)
        .union(WatchFlags::DELETE)
        .union(WatchFlags::DELETE_SELF)
        .union(WatchFlags::MOVED_FROM)
        .union(WatchFlags::MOVED_TO)
        .union(WatchFlags::MOVE_SELF);

    impl Watch {
        /// Watches the guarded files and folders of `expected`'s git folders as they are now
        /// (a folder made since it was taken, empty, is watched too); `None` when the kernel
        /// cannot watch all of it (out of watches or instances), and every look reads the files
        /// instead.
        pub(super) fn new(expected: &RepositoryFingerprint) -> Option<Watch> {
            let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
            let mut roots = Vec::new();
            for folder in &expected.folders {
                let root =
                    inotify::add_watch(&fd, &folder.dir, CHANGES | WatchFlags::ONLYDIR).ok()?;
                roots.push((root, folder.names.clone()));
                for name in &folder.names {
                    watch_tree(&fd, &folder.dir.join(name))?;
                }
            }
            Some(Watch { fd, roots })
        }

        /// Whether nothing was told since the last time that may have changed a guarded file
        /// (an overflowing queue, or one that cannot be read, may have).
        pub(super) fn quiet(&mut self) -> bool {
            let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
            let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
            let mut quiet = true;
            loop {
                match reader.next() {
                    Ok(event) => {
                        if event.events().contains(ReadFlags::QUEUE_OVERFLOW) {
                            quiet = false;
                            continue;
                        }
                        let root = self.roots.iter().find(|(wd, _)| *wd == event.wd());
                        let told = match (root, event.file_name()) {
                            // In a git folder: only its guarded names count.
                            (Some((_, names)), Some(name)) => {
                                let name = OsStr::from_bytes(name.to_bytes());
                                names.iter().any(|guarded| OsStr::new(guarded) == name)
                            }
                            _ => true,
                        };
                        quiet &= !told;
                    }
                    Err(Errno::AGAIN) => return quiet,
                    Err(Errno::INTR) => {}
                    Err(_) => return false,
                }
            }
        }
    }

    /// Watches `path` and, a folder, everything in it: each file on its own as well as in its
    /// folder, since a change made through another name of the same file (a hard link) is told
    /// to the file's watch only. A folder is watched before it is listed, so that what is made in
    /// it meanwhile is told. Nothing there is nothing to watch (its making is told to the folder
    /// above).
    fn watch_tree(fd: &OwnedFd, path: &Path) -> Option<()> {
        match inotify::add_watch(fd, path, CHANGES | WatchFlags::DONT_FOLLOW) {
            Ok(_) => {}
            Err(Errno::NOENT | Errno::NOTDIR) => return Some(()),
            Err(_) => return None,
        }
        let gone = |e: std::io::Error| (e.kind() == std::io::ErrorKind::NotFound).then_some(());
        let metadata = match std::fs::symlink_metadata(path) {
            Ok(metadata) => metadata,
            Err(e) => return gone(e),
        };
        if metadata.is_dir() {
            let entries = match std::fs::read_dir(path) {
                Ok(entries) => entries,
                Err(e) => return gone(e),
            };
            for entry in entries {
                match entry {
                    Ok(entry) => watch_tree(fd, &entry.path())?,
                    Err(e) => gone(e)?,
                }
            }
        }
        Some(())
    }
}

/// Without `inotify`, every look reads the guarded files.
#[cfg(not(target_os = "linux"))]
mod watch {
    use super::RepositoryFingerprint;

    pub(super) struct Watch;

    impl Watch {
        pub(super) fn new(_: &RepositoryFingerprint) -> Option<Watch> {
            None
        }

        pub(super) fn quiet(&mut self) -> bool {
            false
        }
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

    /// A repository with a hook in a folder of its own, `info/exclude`, and another name (a hard
    /// link) for `hooks/pre-commit` outside `.git`; its guard, after a first look.
    fn watched() -> (tempfile::TempDir, RepositoryGuard) {
        let dir = repository();
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("hooks/lib")).unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(git.join("hooks/lib/common.sh"), "true\n").unwrap();
        std::fs::create_dir_all(git.join("info")).unwrap();
        std::fs::write(git.join("info/exclude"), "").unwrap();
        std::fs::hard_link(git.join("hooks/pre-commit"), dir.path().join("elsewhere")).unwrap();
        let guard = RepositoryGuard::new(dir.path());
        assert!(guard.changed_since(Instant::now()).is_empty());
        let inner = guard.inner.as_ref().unwrap().lock().unwrap();
        assert!(
            inner.settled && inner.watch.is_some(),
            "watched after a settled look"
        );
        drop(inner);
        (dir, guard)
    }

    /// What the guard finds now, which it puts back: the look after it finds nothing.
    fn look(guard: &RepositoryGuard, what: &str) -> Vec<String> {
        let found = guard.changed_since(Instant::now());
        assert!(guard.changed_since(Instant::now()).is_empty(), "{what}");
        found
    }

    #[test]
    fn what_git_does_in_a_commit_leaves_the_watch_quiet() {
        let (dir, guard) = watched();
        let git = dir.path().join(".git");
        std::fs::write(git.join("HEAD"), "ref: refs/heads/other\n").unwrap();
        std::fs::write(git.join("index.lock"), "x").unwrap();
        std::fs::rename(git.join("index.lock"), git.join("index")).unwrap();
        std::fs::create_dir_all(git.join("refs/heads/topic")).unwrap();
        assert_eq!(
            guard.quietly_changed_since(Instant::now()),
            Some(Vec::new())
        );
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        assert_eq!(guard.quietly_changed_since(Instant::now()), None);
        // Told once, and read by the next look all the same.
        assert_eq!(
            look(&guard, "config"),
            ["`.git/config` was modified, and was put back as it was"]
        );
    }

    /// A change made in the repository whose top is given.
    type Change = fn(&Path);

    #[test]
    fn every_kind_of_change_after_a_quiet_look_is_found() {
        let (dir, guard) = watched();
        let top = dir.path();
        // First, while the other name still is the hook's (putting a file back writes it anew).
        let changes: [(&str, Change); 9] = [
            ("hook changed through another name", |top| {
                std::fs::write(top.join("elsewhere"), "#!/bin/sh\nevil\n").unwrap();
            }),
            ("config written", |top| {
                std::fs::write(top.join(".git/config"), "[core]\n").unwrap();
            }),
            ("config removed", |top| {
                std::fs::remove_file(top.join(".git/config")).unwrap();
            }),
            ("config.worktree made", |top| {
                std::fs::write(top.join(".git/config.worktree"), "[x]\n").unwrap();
            }),
            ("hook made executable", |top| {
                let mode = std::fs::Permissions::from_mode(0o755);
                std::fs::set_permissions(top.join(".git/hooks/pre-commit"), mode).unwrap();
            }),
            ("hook in a folder changed", |top| {
                std::fs::write(top.join(".git/hooks/lib/common.sh"), "evil\n").unwrap();
            }),
            ("folder made in hooks", |top| {
                std::fs::create_dir_all(top.join(".git/hooks/new/deeper")).unwrap();
                std::fs::write(top.join(".git/hooks/new/deeper/x"), "").unwrap();
            }),
            ("hook renamed in", |top| {
                std::fs::write(top.join("post-checkout"), "#!/bin/sh\n").unwrap();
                std::fs::rename(
                    top.join("post-checkout"),
                    top.join(".git/hooks/post-checkout"),
                )
                .unwrap();
            }),
            ("info replaced", |top| {
                std::fs::rename(top.join(".git/info"), top.join("old-info")).unwrap();
                std::fs::create_dir_all(top.join(".git/info")).unwrap();
                std::fs::write(top.join(".git/info/attributes"), "* filter=evil\n").unwrap();
            }),
        ];
        for (what, change) in changes {
            change(top);
            assert!(!look(&guard, what).is_empty(), "{what}: not found");
        }
        // An empty folder is nothing to find, but what is made in it later is.
        std::fs::create_dir(top.join(".git/hooks/later")).unwrap();
        assert!(look(&guard, "empty folder").is_empty());
        std::fs::write(top.join(".git/hooks/later/x"), "").unwrap();
        assert!(!look(&guard, "file in a folder made empty").is_empty());
        assert_eq!(
            std::fs::read(top.join(".git/hooks/pre-commit")).unwrap(),
            b"#!/bin/sh\n"
        );
        assert_eq!(std::fs::read(top.join(".git/info/exclude")).unwrap(), b"");
    }

    #[test]
    fn outside_a_repository_nothing_is_watched() {
        let dir = tempfile::tempdir().unwrap();
        let guard = RepositoryGuard::new(dir.path());
        std::fs::create_dir_all(dir.path().join("hooks")).unwrap();
        assert!(guard.changed_since(Instant::now()).is_empty());
    }
}
