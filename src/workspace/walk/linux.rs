//! The walk on Linux. Each folder is opened relative to its parent's descriptor and listed with
//! `getdents64` into a reused buffer; each file is stat'ed, and opened when it must be hashed, by
//! its name within that folder, so the kernel resolves one path component instead of the whole
//! path. The entry type from the listing decides what needs no `stat` (folders, FIFOs). What is
//! left out, and what is recorded all the same, is judged by [`crate::workspace::rules`].
//!
//! The walk runs on a few threads that share a stack of folders still to list.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, ErrorKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::{Exclude, Place, Recorder, Shared, Stat, skippable};
use crate::workspace::rules::Level;
use crate::workspace::snapshot::Kind;
use crate::workspace::{HELIXFLOW_IGNORE, with_path};

/// Walker threads at most: as many as the `ignore` crate's walker would start.
const MAX_THREADS: usize = 12;

/// Bytes asked of `getdents64` at a time: a few hundred entries.
const LISTING_CHUNK: usize = 32 * 1024;

/// Walks the workspace `shared.root`, leaving out `excludes`, into `shared`.
pub(in crate::workspace) fn walk(excludes: Arc<[Exclude]>, shared: &Shared<'_>) {
    let root = shared.root;
    let root_bytes = root.as_os_str().as_bytes();
    let walk = Walk {
        excludes: excludes
            .iter()
            .map(|exclude| (exclude.depth, exclude.path.as_os_str().as_bytes()))
            .collect(),
        root_len: root_bytes.len() + usize::from(!root_bytes.ends_with(b"/")),
        shared,
        queue: Queue {
            state: Mutex::new(QueueState {
                folders: vec![Folder {
                    parent: None,
                    name: CString::default(),
                    path: root_bytes.to_vec(),
                    depth: 0,
                    rules: None,
                    left_out: shared.only_protected,
                }],
                idle: 0,
                done: false,
            }),
            ready: Condvar::new(),
            threads: std::thread::available_parallelism()
                .map_or(1, std::num::NonZero::get)
                .min(MAX_THREADS),
        },
    };
    std::thread::scope(|scope| {
        for _ in 1..walk.queue.threads {
            scope.spawn(|| walk.run());
        }
        walk.run();
    });
}

/// What the walker threads share.
struct Walk<'w, 's> {
    /// Excluded folders: depth and relative path.
    excludes: Vec<(usize, &'w [u8])>,
    /// Bytes of a path before the part relative to the workspace.
    root_len: usize,
    shared: &'s Shared<'s>,
    queue: Queue,
}

/// A folder to list.
struct Folder {
    /// The folder holding it, open; `None` for the workspace.
    parent: Option<Arc<OwnedFd>>,
    name: CString,
    /// Its path: the workspace's path with the names on the way joined on.
    path: Vec<u8>,
    /// 0 for the workspace.
    depth: usize,
    /// The ignore rules of the folders from here up to the workspace; `None` when none has any.
    rules: Option<Arc<Level>>,
    /// Left out by the ignore rules (or by [`Shared::only_protected`]): only protected files in
    /// it are recorded.
    left_out: bool,
}

/// The stack of folders still to list.
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
    threads: usize,
}

struct QueueState {
    folders: Vec<Folder>,
    /// Threads waiting for a folder.
    idle: usize,
    /// Every folder is listed, or the walk failed.
    done: bool,
}

impl Queue {
    /// The next folder to list; `None` when there is none left and none will come.
    fn next(&self) -> Option<Folder> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if state.done {
                return None;
            }
            if let Some(folder) = state.folders.pop() {
                return Some(folder);
            }
            state.idle += 1;
            if state.idle == self.threads {
                state.done = true;
                self.ready.notify_all();
                return None;
            }
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.idle -= 1;
        }
    }

    fn push(&self, folders: &mut Vec<Folder>) {
        if folders.is_empty() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.folders.append(folders);
        if state.idle > 0 {
            self.ready.notify_all();
        }
    }

    fn quit(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.done = true;
        self.ready.notify_all();
    }
}

impl Walk<'_, '_> {
    /// One walker thread.
    fn run(&self) {
        let mut walker = Walker {
            walk: self,
            recorder: Recorder::new(self.shared),
            listing: Vec::new(),
            path: Vec::new(),
            scratch: Vec::new(),
        };
        let mut found = Vec::new();
        while let Some(folder) = self.queue.next() {
            if let Err(err) = walker.list(&folder, &mut found) {
                self.shared.fail(err);
                self.queue.quit();
                break;
            }
            self.queue.push(&mut found);
        }
        walker.recorder.finish();
    }
}

/// One walker thread's state; its buffers are reused from folder to folder.
struct Walker<'w, 's> {
    walk: &'w Walk<'w, 's>,
    recorder: Recorder<'s>,
    /// The folder's entries as `getdents64` gives them.
    listing: Vec<u8>,
    /// The path of the entry at hand.
    path: Vec<u8>,
    /// Room to build a path for matching rules from above the workspace.
    scratch: Vec<u8>,
}

/// What an entry is, as far as the walk cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Folder,
    /// A regular file or a symlink.
    File,
    /// A FIFO, socket or device: skipped.
    Other,
}

impl Walker<'_, '_> {
    /// Lists `folder`, records its files and folders, and adds its subfolders to `found`.
    fn list(&mut self, folder: &Folder, found: &mut Vec<Folder>) -> io::Result<()> {
        let handle = match open_folder(folder) {
            Ok(handle) => Arc::new(handle),
            Err(err) if skippable(&err) => return Ok(()),
            Err(err) => return Err(with_path(&err, path_of(&folder.path))),
        };
        let mut listing = std::mem::take(&mut self.listing);
        let listed = read_entries(handle.as_raw_fd(), &mut listing);
        let result = match listed {
            Err(err) if !skippable(&err) => Err(with_path(&err, path_of(&folder.path))),
            // What was listed before a folder vanished is walked all the same.
            _ => self.entries(folder, &handle, &listing, found),
        };
        self.listing = listing;
        result
    }

    /// Handles the entries of `folder`, listed in `listing`.
    #[allow(
        clippy::too_many_lines,
        reason = "not yet cut into named steps; a known exception to remove"
    )]
    fn entries(
        &mut self,
        folder: &Folder,
        handle: &Arc<OwnedFd>,
        listing: &[u8],
        found: &mut Vec<Folder>,
    ) -> io::Result<()> {
        let walk = self.walk;
        // The folder's path relative to the workspace, as a key with its trailing slash.
        let rel = folder.path.get(walk.root_len..).unwrap_or_default();
        let folder_utf8 = std::str::from_utf8(rel).is_ok();
        let mut folder_key = String::from_utf8_lossy(rel).into_owned();
        if !folder_key.is_empty() {
            folder_key.push('/');
        }
        // Everything in a folder left out is left out: git cannot take a file back from one.
        let (rules, matching) = if folder.left_out {
            (None, false)
        } else {
            let rules = self.rules_of(folder, &folder_key, listing);
            let matching = rules.is_some() || walk.shared.outer.any();
            (rules, matching)
        };
        self.recorder.enter(&folder_key);
        self.path.clear();
        self.path.extend_from_slice(&folder.path);
        if !self.path.ends_with(b"/") {
            self.path.push(b'/');
        }
        let base = self.path.len();
        let depth = folder.depth + 1;

        for (name, d_type) in Entries(listing) {
            let bare = name.to_bytes();
            if matches!(bare, b"." | b".." | b".git") {
                continue;
            }
            self.path.truncate(base);
            self.path.extend_from_slice(bare);
            let entry_rel = &self.path[walk.root_len..];
            if walk
                .excludes
                .iter()
                .any(|&(at, path)| at == depth && path == entry_rel)
            {
                continue;
            }
            let kind = match d_type {
                libc::DT_DIR => Type::Folder,
                libc::DT_REG | libc::DT_LNK => Type::File,
                libc::DT_UNKNOWN => match type_of(handle.as_raw_fd(), name) {
                    Ok(kind) => kind,
                    Err(err) if skippable(&err) => continue,
                    Err(err) => return Err(with_path(&err, path_of(&self.path))),
                },
                _ => Type::Other,
            };
            if kind == Type::Other {
                continue;
            }
            let is_folder = kind == Type::Folder;
            let left_out = folder.left_out || matching && self.ignored(rules.as_deref(), is_folder);
            if left_out && !self.protected(is_folder) {
                continue;
            }
            let name_text = std::str::from_utf8(bare).ok();
            let key = || match name_text {
                Some(text) if folder_utf8 => format!("{folder_key}{text}"),
                _ => String::from_utf8_lossy(&self.path[walk.root_len..]).into_owned(),
            };
            if kind == Type::Folder {
                self.recorder.part.dirs.push(key());
                found.push(Folder {
                    parent: Some(Arc::clone(handle)),
                    name: name.to_owned(),
                    path: self.path.clone(),
                    depth,
                    rules: rules.clone(),
                    left_out,
                });
                continue;
            }
            let lossy;
            let name_key = if let Some(text) = name_text {
                text
            } else {
                lossy = String::from_utf8_lossy(bare);
                &*lossy
            };
            let mut place = At {
                folder: handle.as_raw_fd(),
                name,
                path: &self.path,
            };
            let recorded = self.recorder.part.files.len();
            self.recorder
                .record(&mut place, name_key, || Arc::from(key()))?;
            if !(folder_utf8 && name_text.is_some()) && self.recorder.part.files.len() > recorded {
                let rel = &self.path[walk.root_len..];
                self.recorder.part.raw_names.push((
                    String::from_utf8_lossy(rel).into_owned(),
                    PathBuf::from(OsStr::from_bytes(rel)),
                ));
            }
        }
        Ok(())
    }

    /// The ignore rules for the entries of `folder` (whose key is `key` and whose entries are in
    /// `listing`): those recorded by an earlier snapshot when the walk judges by them, else those
    /// of the ignore files it has, which are then recorded in turn.
    fn rules_of(&mut self, folder: &Folder, key: &str, listing: &[u8]) -> Option<Arc<Level>> {
        if let Some(recorded) = self.walk.shared.recorded_rules {
            return Level::recorded(recorded, key, folder.rules.as_ref());
        }
        let (mut custom, mut git, mut repository) = (false, false, false);
        for (name, _) in Entries(listing) {
            match name.to_bytes() {
                b".gitignore" => git = true,
                b".git" => repository = true,
                name if name == HELIXFLOW_IGNORE.as_bytes() => custom = true,
                _ => {}
            }
        }
        let (rules, own) = Level::read(
            path_of(&folder.path),
            (custom, git, repository),
            folder.rules.as_ref(),
        );
        if let Some(own) = own {
            self.recorder.part.rules.push((key.to_owned(), own));
        }
        rules
    }

    /// Whether the entry at `self.path` is ignored, given the rules of its folder.
    fn ignored(&mut self, rules: Option<&Level>, is_dir: bool) -> bool {
        let walk = self.walk;
        let outer = &walk.shared.outer;
        if outer.has_above() {
            // The `ignore` crate matches rules from above the workspace against its canonical path.
            self.scratch.clear();
            self.scratch
                .extend_from_slice(outer.canonical.as_os_str().as_bytes());
            if !self.scratch.ends_with(b"/") {
                self.scratch.push(b'/');
            }
            self.scratch.extend_from_slice(&self.path[walk.root_len..]);
        }
        outer.ignored(rules, path_of(&self.path), path_of(&self.scratch), is_dir)
    }

    /// Whether the entry at `self.path`, left out by the ignore rules, is recorded all the same:
    /// a protected file, or a folder that can hold one.
    fn protected(&self, is_dir: bool) -> bool {
        let Some(protected) = self.walk.shared.protected else {
            return false;
        };
        let rel = &self.path[self.walk.root_len..];
        if is_dir {
            protected.may_hold(rel)
        } else {
            protected.matches(path_of(rel))
        }
    }
}

/// A file found by this walker: a name in an open folder.
struct At<'p> {
    folder: RawFd,
    name: &'p CStr,
    path: &'p [u8],
}

impl Place for At<'_> {
    fn stat(&mut self) -> io::Result<Stat> {
        lstat_at(self.folder, self.name).map(|raw| stat_of(&raw))
    }

    fn open(&mut self) -> io::Result<File> {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: `folder` is an open folder and `name` is NUL-terminated.
        let fd = unsafe { libc::openat(self.folder, self.name.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openat returned a new descriptor that nothing else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    fn path(&self) -> PathBuf {
        path_of(self.path).to_path_buf()
    }
}

/// What `lstat` said, as `fstatat` gives it.
#[allow(
    clippy::useless_conversion,
    reason = "the field types differ between 32- and 64-bit targets"
)]
fn stat_of(raw: &libc::stat) -> Stat {
    let kind = match raw.st_mode & libc::S_IFMT {
        libc::S_IFREG => Some(Kind::File),
        libc::S_IFLNK => Some(Kind::Symlink),
        _ => None,
    };
    Stat {
        kind,
        size: u64::try_from(raw.st_size).unwrap_or(0),
        mtime_ns: i128::from(raw.st_mtime) * 1_000_000_000 + i128::from(raw.st_mtime_nsec),
        ctime_ns: i128::from(raw.st_ctime) * 1_000_000_000 + i128::from(raw.st_ctime_nsec),
        inode: u64::from(raw.st_ino),
        mode: u32::from(raw.st_mode),
    }
}

/// `lstat` of `name` in the open folder `folder`.
fn lstat_at(folder: RawFd, name: &CStr) -> io::Result<libc::stat> {
    let mut raw = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `folder` is an open folder, `name` is NUL-terminated and `raw` is writable memory
    // for one `stat`, which fstatat fills completely when it returns 0.
    let status = unsafe {
        libc::fstatat(
            folder,
            name.as_ptr(),
            raw.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat returned 0, so `raw` is initialized.
    Ok(unsafe { raw.assume_init() })
}

/// The type of an entry the listing did not give one for.
fn type_of(folder: RawFd, name: &CStr) -> io::Result<Type> {
    let raw = lstat_at(folder, name)?;
    Ok(match raw.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Type::Folder,
        libc::S_IFREG | libc::S_IFLNK => Type::File,
        _ => Type::Other,
    })
}

/// Opens a folder to list: the workspace by its path (following a symlink, as the workspace may
/// be one), any other by name in its parent, never through a symlink.
fn open_folder(folder: &Folder) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let fd = if let Some(parent) = &folder.parent {
        // SAFETY: `parent` is an open folder and `name` is NUL-terminated.
        unsafe {
            libc::openat(
                parent.as_raw_fd(),
                folder.name.as_ptr(),
                flags | libc::O_NOFOLLOW,
            )
        }
    } else {
        let path = CString::new(folder.path.clone())
            .map_err(|_| io::Error::from(ErrorKind::InvalidInput))?;
        // SAFETY: `path` is NUL-terminated.
        unsafe { libc::open(path.as_ptr(), flags) }
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads every entry of the open folder `folder` into `listing`, as `getdents64` returns them.
/// On an error, `listing` holds the entries read before it.
fn read_entries(folder: RawFd, listing: &mut Vec<u8>) -> io::Result<()> {
    listing.clear();
    loop {
        listing.reserve(LISTING_CHUNK);
        let room = listing.capacity() - listing.len();
        // SAFETY: the buffer has `room` writable bytes after its length; getdents64 writes at most
        // that many and returns how many it wrote.
        let read = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                folder,
                listing.as_mut_ptr().add(listing.len()),
                room,
            )
        };
        match usize::try_from(read) {
            Ok(0) => return Ok(()),
            // SAFETY: getdents64 initialized `read` more bytes, within the capacity.
            Ok(read) => unsafe { listing.set_len(listing.len() + read) },
            Err(_) => {
                let err = io::Error::last_os_error();
                if err.kind() != ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
}

/// The entries of a `getdents64` listing: name and `d_type`.
struct Entries<'l>(&'l [u8]);

/// Offsets in a `linux_dirent64` record: `d_ino` (8 bytes) and `d_off` (8) come first.
const RECORD_LEN_AT: usize = 16;
const TYPE_AT: usize = 18;
const NAME_AT: usize = 19;

impl<'l> Iterator for Entries<'l> {
    type Item = (&'l CStr, u8);

    fn next(&mut self) -> Option<(&'l CStr, u8)> {
        loop {
            let header = self.0.get(..NAME_AT)?;
            let len = usize::from(u16::from_ne_bytes([
                header[RECORD_LEN_AT],
                header[RECORD_LEN_AT + 1],
            ]));
            let record = self.0.get(..len.max(NAME_AT))?;
            self.0 = &self.0[record.len()..];
            if let Ok(name) = CStr::from_bytes_until_nul(&record[NAME_AT..]) {
                return Some((name, header[TYPE_AT]));
            }
        }
    }
}

/// Bytes as a path.
fn path_of(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}
