//! The last plan that found every phase up to date, kept in the state folder (`cache/plan`) with
//! everything it rested on, so that a `status` or `run` of an unchanged workspace need not read
//! every record and work out every phase's definition again: it looks up the same files and
//! finds each as it was.
//!
//! A plan is a function of the compiled pipeline, the plan's options, the records of passed
//! phases and the metadata of the files it looked up (an up-to-date phase's files are each proven
//! unchanged by their metadata, else read). A memo holds a key of the first two (the pipeline as
//! compiled: the digest of the compiled-pipeline cache entry it came from, else the pipeline
//! serialized; with its workspace, state folder, the paths the plan leaves out and this
//! helixflow's build) and the identity of each of the others as the plan found it: device, inode,
//! size, modification and change times and file type (a write changes the change time, which no
//! process can set back), or that nothing was there. It holds when every one is found the same
//! again, and then gives each phase's up-to-date verdict (the run it passed in).
//!
//! Only a plan that could be remembered is: every phase up to date (in a run, with no record to
//! take new file times, as the run writes them), and every identity settled (its last change well
//! before the plan began, git's "racy clean" rule: timestamps are coarse, so a file written in the
//! tick it was looked at may change again unseen). A record's identity is taken before it is
//! read, and a file's before it is read, so one that changed in between is remembered by an
//! identity it no longer has. Only pipelines whose phases name their
//! files one by one are remembered: a glob's matches or a `from` list can change without any file
//! the plan looked up changing; so are phases made while the run goes on (`for-each`, `generates`),
//! `always-run` and forced phases.
//!
//! The memo is a cache in a small binary format (written through a temporary file and a rename;
//! not synced). One that cannot be read, of another format or key, or that names a file now
//! different, is no memo: the plan is made in full and the memo written again or removed. A run
//! removes one that something else wrote while it ran, as it does compiled pipelines
//! ([`super::pipeline_cache::CacheWatch`]).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::model::{Input, Output, Phase, Pipeline};
use crate::workspace::{FileStat, chunks_in_parallel_on_cores};

/// The file of the memo in the state folder.
const FILE: &str = "cache/plan";

/// The first bytes of a memo, with its format.
const MAGIC: &[u8; 8] = b"hxplan\0\x01";

/// The largest memo read: far above what a pipeline of the largest size the front end compiles
/// remembers, and a bound on what a command reads of a file planted there.
const MAX_BYTES: u64 = 64 << 20;

/// What a file's metadata says of its identity: what the records' stamps compare
/// ([`FileStat`]), its device and its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    stat: FileStat,
    dev: u64,
    /// The file type bits of its mode (`S_IFMT`).
    kind: u32,
}

impl Seen {
    pub(crate) fn of(meta: &Metadata) -> Seen {
        Seen {
            stat: FileStat::of(meta),
            dev: meta.dev(),
            kind: meta.mode() & 0o170_000,
        }
    }

    /// What `statx` found, as [`Seen::of`] reads the same from the standard library's metadata
    /// (which `statx` fills, its device numbers joined by `makedev`).
    fn of_statx(found: &rustix::fs::Statx) -> Seen {
        let ns = |t: rustix::fs::StatxTimestamp| {
            i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
        };
        Seen {
            stat: FileStat {
                size: found.stx_size,
                mtime_ns: ns(found.stx_mtime),
                ctime_ns: ns(found.stx_ctime),
                inode: found.stx_ino,
            },
            dev: rustix::fs::makedev(found.stx_dev_major, found.stx_dev_minor),
            kind: u32::from(found.stx_mode) & 0o170_000,
        }
    }

    /// What is at `path` now (following symlinks, as the plan looks), or `None`.
    fn at(path: &Path) -> Option<Seen> {
        fs::metadata(path).ok().map(|meta| Seen::of(&meta))
    }

    /// Whether it last changed well before `began_ns` ([`FileStat::settled`]).
    fn settled(&self, began_ns: i128) -> bool {
        self.stat.settled(began_ns)
    }
}

/// Where a pipeline's memo is, and the key of the plans it may answer.
pub(crate) struct PlanMemo {
    file: PathBuf,
    key: [u8; 32],
}

/// A plan worth remembering: what it found and what it looked at.
pub(crate) struct Remembered {
    /// Each phase with the run it passed in and its record file's identity when the plan began.
    pub phases: Vec<(String, String, Option<Seen>)>,
    /// Every path the plan looked up, with what it found.
    pub paths: Vec<(OsString, Option<Seen>)>,
    /// When the plan began, on the clock files are stamped from.
    pub began_ns: i128,
}

impl PlanMemo {
    /// The memo of plans of `pipeline` whose records are in `state_dir`, leaving `exclude` out of
    /// what they look at; `None` when such a plan is not remembered (see the module's notes).
    pub(crate) fn of(pipeline: &Pipeline, state_dir: &Path, exclude: &[PathBuf]) -> Option<Self> {
        if !pipeline.phases.iter().all(rememberable) {
            return None;
        }
        let build = super::pipeline_cache::build()?;
        let mut hasher = blake3::Hasher::new();
        let mut field = |bytes: &[u8]| {
            hasher.update(&(bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(MAGIC);
        field(build.as_bytes());
        field(&super::passed::RECORD_VERSION.to_le_bytes());
        field(pipeline.workspace.as_os_str().as_bytes());
        field(state_dir.as_os_str().as_bytes());
        field(&(exclude.len() as u64).to_le_bytes());
        for path in exclude {
            field(path.as_os_str().as_bytes());
        }
        // The pipeline's cache entry holds it whole (and is already hashed); else the pipeline
        // serialized whole first: hashing the many small writes of the serializer one by one
        // takes longer than serializing.
        if let Some(compiled) = &pipeline.compiled_from {
            field(b"cache entry");
            field(&compiled.digest);
        } else {
            field(b"pipeline");
            field(&serde_json::to_vec(pipeline).ok()?);
        }
        Some(PlanMemo {
            file: state_dir.join(FILE),
            key: *hasher.finalize().as_bytes(),
        })
    }

    /// The run each of `phases` passed in, when the memo holds: its key is this one and every
    /// record and file it remembers is as it was. The phases must all be in it.
    pub(crate) fn recall(&self, phases: &[&str]) -> Option<BTreeMap<String, String>> {
        let bytes = self.read_bytes()?;
        let memo = self.parse(&bytes)?;
        let known: BTreeMap<&str, &str> = memo
            .phases
            .iter()
            .map(|&(phase, run, _)| (phase, run))
            .collect();
        let wanted: BTreeMap<String, String> = phases
            .iter()
            .map(|&name| Some((name.to_owned(), (*known.get(name)?).to_owned())))
            .collect::<Option<_>>()?;
        // Every record, wanted or not (an upstream phase's record is part of its dependents'
        // verdict), and every path, in one pass on every core.
        let records: Vec<PathBuf> = memo
            .phases
            .iter()
            .map(|&(name, _, _)| self.record_path(name))
            .collect();
        let looked: Vec<(&Path, Option<Seen>)> = records
            .iter()
            .zip(&memo.phases)
            .map(|(path, &(_, _, seen))| (path.as_path(), seen))
            .chain(
                memo.paths
                    .iter()
                    .map(|&(path, seen)| (Path::new(OsStr::from_bytes(path)), seen)),
            )
            .collect();
        let holds = chunks_in_parallel_on_cores(&looked, |part| {
            let mut looker = Looker::default();
            part.iter()
                .map(|&(path, seen)| looker.at(path) == seen)
                .collect()
        })
        .into_iter()
        .all(|same| same);
        holds.then_some(wanted)
    }

    /// The identity of each phase's record file now, before the plan reads it.
    pub(crate) fn records_now(&self, phases: &[&str]) -> Vec<Option<Seen>> {
        let paths: Vec<PathBuf> = phases.iter().map(|p| self.record_path(p)).collect();
        chunks_in_parallel_on_cores(&paths, |part| {
            let mut looker = Looker::default();
            part.iter().map(|path| looker.at(path)).collect()
        })
    }

    /// Keeps `plan` when everything it remembers had settled when it began; else removes the
    /// memo (it would be found stale anyway, at the cost of looking). A failure is a memo missed.
    pub(crate) fn remember(&self, plan: &Remembered) {
        let settled = plan
            .phases
            .iter()
            .filter_map(|(_, _, seen)| seen.as_ref())
            .chain(plan.paths.iter().filter_map(|(_, seen)| seen.as_ref()))
            .all(|seen| seen.settled(plan.began_ns));
        if !settled || plan.phases.iter().any(|(_, _, seen)| seen.is_none()) {
            self.forget();
            return;
        }
        let Some(folder) = self.file.parent() else {
            return;
        };
        // Only in a state folder that exists (a plan of a pipeline never run writes nothing).
        if folder.parent().is_none_or(|state| !state.is_dir()) {
            return;
        }
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.key);
        put_len(&mut out, plan.phases.len());
        for (phase, run, seen) in &plan.phases {
            put_bytes(&mut out, phase.as_bytes());
            put_bytes(&mut out, run.as_bytes());
            put_seen(&mut out, *seen);
        }
        let mut paths: Vec<&(OsString, Option<Seen>)> = plan.paths.iter().collect();
        paths.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        put_len(&mut out, paths.len());
        for (path, seen) in paths {
            put_bytes(&mut out, path.as_bytes());
            put_seen(&mut out, *seen);
        }
        if out.len() as u64 > MAX_BYTES {
            // It would not be read.
            self.forget();
            return;
        }
        let _ = fs::create_dir_all(folder).and_then(|()| super::replace_unsynced(&self.file, &out));
    }

    /// Removes the memo.
    pub(crate) fn forget(&self) {
        let _ = fs::remove_file(&self.file);
    }

    fn record_path(&self, phase: &str) -> PathBuf {
        let state = self
            .file
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        super::passed::path_in(state, phase)
    }

    /// The memo's bytes, when it is a regular file.
    fn read_bytes(&self) -> Option<Vec<u8>> {
        crate::regular::read_within(&self.file, MAX_BYTES).ok()
    }

    /// The memo in `bytes`, when they are of this format and key.
    fn parse<'a>(&self, bytes: &'a [u8]) -> Option<Memo<'a>> {
        let mut reader = Reader(bytes);
        if reader.take(MAGIC.len())? != MAGIC || reader.take(32)? != self.key {
            return None;
        }
        let phases = (0..reader.len()?)
            .map(|_| Some((reader.text()?, reader.text()?, reader.seen()?)))
            .collect::<Option<Vec<_>>>()?;
        let paths = (0..reader.len()?)
            .map(|_| Some((reader.take_bytes()?, reader.seen()?)))
            .collect::<Option<Vec<_>>>()?;
        reader.0.is_empty().then_some(Memo { phases, paths })
    }
}

/// A memo as read, borrowing from its bytes.
struct Memo<'a> {
    phases: Vec<(&'a str, &'a str, Option<Seen>)>,
    paths: Vec<(&'a [u8], Option<Seen>)>,
}

/// Looks up paths one after the other as [`Seen::at`] does, keeping the last one's folder open:
/// the next path in the same folder is looked up by its name from there, rather than walking
/// every folder from the root again (a quarter of the time of each lookup, for files a few
/// folders deep). The memo's paths are sorted, so a folder's files come together.
#[derive(Default)]
struct Looker {
    /// The folder open, as its path's bytes.
    folder: Vec<u8>,
    /// It, opened for lookups only (`O_PATH`); `None` when it could not be.
    opened: Option<rustix::fd::OwnedFd>,
}

impl Looker {
    fn at(&mut self, path: &Path) -> Option<Seen> {
        use rustix::fs::{AtFlags, Mode, OFlags, StatxFlags};
        let bytes = path.as_os_str().as_bytes();
        let Some(slash) = bytes.iter().rposition(|&b| b == b'/') else {
            return Seen::at(path);
        };
        // `/name` is in the root folder.
        let (folder, name) = (&bytes[..slash.max(1)], &bytes[slash + 1..]);
        if name.is_empty() || name == b"." || name == b".." {
            return Seen::at(path);
        }
        if self.folder != folder {
            self.folder.clear();
            self.folder.extend_from_slice(folder);
            self.opened = rustix::fs::open(
                OsStr::from_bytes(folder),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok();
        }
        let Some(opened) = &self.opened else {
            return Seen::at(path);
        };
        // Following a symlink the name is, as the plan looks. Any failure is looked up again the
        // long way, which gives `None` where it fails too.
        match rustix::fs::statx(
            opened,
            OsStr::from_bytes(name),
            AtFlags::empty(),
            StatxFlags::BASIC_STATS,
        ) {
            Ok(found) => Some(Seen::of_statx(&found)),
            Err(_) => Seen::at(path),
        }
    }
}

/// Whether the plan of `phase` rests only on what a memo remembers.
fn rememberable(phase: &Phase) -> bool {
    phase.for_each.is_none()
        && phase.generates.is_none()
        && phase.made_by.is_none()
        && !phase.always_run
        && phase
            .inputs
            .iter()
            .flatten()
            .all(|input| matches!(input, Input::File { .. }))
        && phase
            .outputs
            .iter()
            .all(|output| matches!(output, Output::File { .. }))
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&(len as u64).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_seen(out: &mut Vec<u8>, seen: Option<Seen>) {
    let Some(seen) = seen else {
        out.push(0);
        return;
    };
    out.push(1);
    out.extend_from_slice(&seen.dev.to_le_bytes());
    out.extend_from_slice(&seen.stat.inode.to_le_bytes());
    out.extend_from_slice(&seen.stat.size.to_le_bytes());
    out.extend_from_slice(&seen.stat.mtime_ns.to_le_bytes());
    out.extend_from_slice(&seen.stat.ctime_ns.to_le_bytes());
    out.extend_from_slice(&seen.kind.to_le_bytes());
}

/// Reads what the `put_` functions wrote; `None` at the first thing out of place.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn i128(&mut self) -> Option<i128> {
        Some(i128::from_le_bytes(self.take(16)?.try_into().ok()?))
    }

    /// A count or length: no more than the bytes left could hold.
    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.u64()?)
            .ok()
            .filter(|&n| n <= self.0.len())
    }

    fn take_bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.take_bytes()?).ok()
    }

    #[allow(
        clippy::option_option,
        reason = "nothing readable, or what was read: nothing there or an identity"
    )]
    fn seen(&mut self) -> Option<Option<Seen>> {
        match self.take(1)?[0] {
            0 => Some(None),
            1 => {
                let dev = self.u64()?;
                let (inode, size) = (self.u64()?, self.u64()?);
                let (mtime_ns, ctime_ns) = (self.i128()?, self.i128()?);
                Some(Some(Seen {
                    stat: FileStat {
                        size,
                        mtime_ns,
                        ctime_ns,
                        inode,
                    },
                    dev,
                    kind: u32::from_le_bytes(self.take(4)?.try_into().ok()?),
                }))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memo with one phase and two paths, in a state folder of its own.
    fn written(state: &Path) -> PlanMemo {
        fs::create_dir_all(state.join("passed")).unwrap();
        fs::write(state.join("passed/a.json"), "{}").unwrap();
        let memo = PlanMemo {
            file: state.join(FILE),
            key: [7; 32],
        };
        let seen = Seen::at(&state.join("passed/a.json"));
        memo.remember(&Remembered {
            phases: vec![("a".to_owned(), "run-1".to_owned(), seen)],
            paths: vec![
                (state.join("passed/a.json").into_os_string(), seen),
                (state.join("absent").into_os_string(), None),
            ],
            // A minute on: everything written now has settled by then.
            began_ns: crate::workspace::file_clock_now() + 60_000_000_000,
        });
        memo
    }

    /// A lookup from the folder opened finds what a lookup of the whole path does, whatever is
    /// there: files, folders, symlinks to either or to nothing, nothing at all, a file where a
    /// folder should be, names that are not names, folders one after the other and back.
    #[test]
    fn a_lookup_from_the_folder_finds_what_the_whole_path_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/f.txt"), "x").unwrap();
        fs::write(root.join("a/b/g.txt"), "yy").unwrap();
        std::os::unix::fs::symlink("f.txt", root.join("a/to-file")).unwrap();
        std::os::unix::fs::symlink("b", root.join("a/to-folder")).unwrap();
        std::os::unix::fs::symlink("nothing", root.join("a/dangling")).unwrap();
        let names = [
            "a/f.txt",
            "a/b",
            "a/b/g.txt",
            "a/to-file",
            "a/to-folder",
            "a/to-folder/g.txt",
            "a/dangling",
            "a/missing",
            "missing/f.txt",
            "a/f.txt/inside",
            "a/b/",
            "a/b/.",
            "a/b/..",
            "a/f.txt",
        ];
        let mut paths: Vec<PathBuf> = names.iter().map(|n| root.join(n)).collect();
        paths.extend([
            PathBuf::from("/"),
            PathBuf::from("relative"),
            PathBuf::from("/proc"),
        ]);
        let mut looker = Looker::default();
        for path in &paths {
            assert_eq!(looker.at(path), Seen::at(path), "{}", path.display());
        }
        assert!(looker.at(&root.join("a/b/g.txt")).is_some());
        assert_eq!(looker.at(&root.join("a/missing")), None);
    }

    #[test]
    fn a_memo_reads_back_and_any_damage_reads_as_no_memo() {
        let dir = tempfile::tempdir().unwrap();
        let memo = written(dir.path());
        let recalled = memo.recall(&["a"]).expect("the memo holds");
        assert_eq!(recalled["a"], "run-1");
        assert!(memo.recall(&["b"]).is_none(), "a phase it does not know");
        let bytes = fs::read(&memo.file).unwrap();
        for cut in 0..bytes.len() {
            assert!(memo.parse(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        // Every byte changed in turn: no panic, no allocation past the file's size, and no
        // other verdict (a changed identity or key does not hold; a changed run name is not text).
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0xff;
            fs::write(&memo.file, &damaged).unwrap();
            if let Some(recalled) = memo.recall(&["a"]) {
                assert_eq!(recalled["a"], "run-1", "byte {at}");
            }
        }
        // Another key: not this pipeline's.
        fs::write(&memo.file, &bytes).unwrap();
        let other = PlanMemo {
            file: memo.file.clone(),
            key: [8; 32],
        };
        assert!(other.recall(&["a"]).is_none());
        assert!(memo.recall(&["a"]).is_some());
        // A path it looked at appears: no longer holds.
        fs::write(dir.path().join("absent"), "").unwrap();
        assert!(memo.recall(&["a"]).is_none());
    }

    #[test]
    fn only_a_settled_plan_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let memo = written(dir.path());
        assert!(memo.file.is_file());
        // Began now: the record was written just before, within the racy margin.
        let seen = Seen::at(&dir.path().join("passed/a.json"));
        memo.remember(&Remembered {
            phases: vec![("a".to_owned(), "run-1".to_owned(), seen)],
            paths: Vec::new(),
            began_ns: crate::workspace::file_clock_now(),
        });
        assert!(!memo.file.exists(), "an unsettled plan removes the memo");
    }
}
