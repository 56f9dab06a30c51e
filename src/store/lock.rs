//! The run lock: one `helixflow run` at a time per state folder.
//!
//! Two runs in one workspace would both start the phases the records do not show as passed: two
//! agents editing the same files, both paid for, and each run removing the other's worktrees as
//! leftovers. So a run holds a lock on `<state-dir>/run.lock` from before it reads the records
//! until its end, and a second run stops at once naming the live one, or waits for it.
//!
//! The lock is an advisory record lock of the kernel on the open file (Linux's open file
//! description lock, `F_OFD_SETLK`), never a file whose existence is the lock: the kernel drops it
//! when the last descriptor of the open file closes, so a helixflow killed outright (SIGKILL, out
//! of memory) leaves no stale lock, and no process id is trusted (one can be reused). Unlike
//! `flock`, a record lock can be *tested* without being taken (`F_OFD_GETLK`), so `status`,
//! `runs` and `show` look at it without ever making a starting run believe it is taken.
//!
//! The run hands a copy of the descriptor to its watchdog (see `process::watchdog`): should
//! helixflow be killed, the lock is released only once the watchdog has stopped its agents, so a
//! new run never starts beside the agents of a dead one.
//!
//! The file also says who holds the lock (run id, process id, since when), for messages only:
//! it is rewritten in place, never replaced or removed, since the lock belongs to the file that
//! is open, and a new file under the same name would be a second lock.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The lock file's name in the state folder.
pub(crate) const FILE_NAME: &str = "run.lock";

/// The lock of a state folder, held by this process's run until it is dropped.
#[derive(Debug)]
pub(crate) struct RunLock {
    file: File,
    /// When it was taken (RFC 3339).
    since: String,
    /// Why the file system refused the lock, when it has no such locks (an NFS mount without
    /// its lock service, say): the run goes on unguarded rather than not at all.
    refused: Option<io::Error>,
}

/// What the lock file says of the run that holds the lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Holder {
    /// Unknown for the moment between taking the lock and making the run's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
    pid: u32,
    /// RFC 3339, to the second.
    since: String,
}

/// The run that holds the lock of a state folder now, as far as its lock file tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LiveRun {
    /// The run's id; none while it is starting (or when the file cannot be read).
    pub run_id: Option<String>,
    /// Its helixflow process.
    pub pid: Option<u32>,
    /// When it took the lock (RFC 3339).
    pub since: Option<String>,
    /// Its helixflow is gone while the lock is still held: it was killed, and its watchdog is
    /// stopping the agents it left.
    pub killed: bool,
}

impl LiveRun {
    /// `run 20260101-120000 (pid 4242, since 2026-01-01T12:00:00Z)`, or as much of it as is
    /// known.
    pub(crate) fn describe(&self) -> String {
        let mut known = Vec::new();
        if let Some(pid) = self.pid {
            known.push(format!("pid {pid}"));
        }
        if let Some(since) = &self.since {
            known.push(format!("since {since}"));
        }
        let known = if known.is_empty() {
            String::new()
        } else {
            format!(" ({})", known.join(", "))
        };
        match &self.run_id {
            Some(run_id) => format!("run {run_id}{known}"),
            None => format!("a run that is starting{known}"),
        }
    }
}

impl RunLock {
    /// Takes the lock of `state_dir` (made, with its `.gitignore`, when missing) if no run holds
    /// it; `Ok(Err(live))` names the run that does.
    pub(crate) fn try_acquire(state_dir: &Path) -> io::Result<Result<RunLock, LiveRun>> {
        let file = open(state_dir)?;
        match lock(&file, libc::F_OFD_SETLK) {
            Ok(()) => Ok(Ok(RunLock::taken(file, None)?)),
            Err(e) if held(&e) => Ok(Err(read_live(&file).unwrap_or_default())),
            Err(e) if unsupported(&e) => Ok(Ok(RunLock::taken(file, Some(e))?)),
            Err(e) => Err(e),
        }
    }

    /// Waits until no run holds the lock of `state_dir`, then takes it.
    pub(crate) fn wait(state_dir: &Path) -> io::Result<RunLock> {
        let file = open(state_dir)?;
        match lock(&file, libc::F_OFD_SETLKW) {
            Ok(()) => RunLock::taken(file, None),
            Err(e) if unsupported(&e) => RunLock::taken(file, Some(e)),
            Err(e) => Err(e),
        }
    }

    /// Says in the file that this process holds the lock, from now.
    fn taken(file: File, refused: Option<io::Error>) -> io::Result<RunLock> {
        let lock = RunLock {
            file,
            since: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            refused,
        };
        lock.write(None)?;
        Ok(lock)
    }

    /// Why the file system refused the lock, when it did: the run is then not guarded.
    pub(crate) fn refused(&self) -> Option<&io::Error> {
        self.refused.as_ref()
    }

    /// Names the run that holds the lock, once its folder is made.
    pub(crate) fn set_run(&self, run_id: &str) -> io::Result<()> {
        self.write(Some(run_id))
    }

    /// The open lock file, for the watchdog to keep open (and so the lock held) should helixflow
    /// be killed.
    pub(crate) fn descriptor(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Rewrites the file in place: a reader may see it empty or half written for a moment, and
    /// then reads a run that is starting.
    fn write(&self, run_id: Option<&str>) -> io::Result<()> {
        let holder = Holder {
            run_id: run_id.map(str::to_owned),
            pid: std::process::id(),
            since: self.since.clone(),
        };
        let mut text = serde_json::to_string(&holder).map_err(io::Error::other)?;
        text.push('\n');
        self.file.set_len(0)?;
        self.file.write_all_at(text.as_bytes(), 0)
    }
}

/// The run that holds the lock of `state_dir` now, if any; the lock is only looked at, never
/// taken.
pub(crate) fn live_run(state_dir: &Path) -> Option<LiveRun> {
    let file = File::open(state_dir.join(FILE_NAME)).ok()?;
    // SAFETY: a zeroed `flock` is a valid value of the C struct; the fields that matter are set.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = libc::F_WRLCK as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: fcntl on a descriptor we own, with a pointer to a live `flock`.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &raw mut request) } != 0 {
        return None;
    }
    if request.l_type == libc::F_UNLCK as libc::c_short {
        return None;
    }
    Some(read_live(&file).unwrap_or_default())
}

/// Opens (or makes) the lock file of `state_dir`, making the state folder when it is missing.
fn open(state_dir: &Path) -> io::Result<File> {
    super::state_dir::create(state_dir)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state_dir.join(FILE_NAME))
}

/// An exclusive lock on the whole file, with `F_OFD_SETLK` (fails at once when it is held) or
/// `F_OFD_SETLKW` (waits).
fn lock(file: &File, command: libc::c_int) -> io::Result<()> {
    // SAFETY: a zeroed `flock` is a valid value of the C struct: start 0 and length 0 cover the
    // whole file, and `l_pid` must be 0 for an open file description lock.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = libc::F_WRLCK as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    loop {
        // SAFETY: fcntl on a descriptor we own, with a pointer to a live `flock`.
        if unsafe { libc::fcntl(file.as_raw_fd(), command, &raw const request) } == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Whether a refused lock is held by another run (rather than an error).
fn held(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::EACCES))
}

/// Whether the file system (or the kernel, before Linux 3.15) has no such locks.
fn unsupported(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOLCK | libc::EINVAL | libc::EOPNOTSUPP)
    )
}

fn read_live(file: &File) -> Option<LiveRun> {
    let mut text = Vec::new();
    let mut at = 0;
    let mut buffer = [0u8; 4096];
    // Read by position: the descriptor may be shared, its offset is not ours to move.
    loop {
        let n = file.read_at(&mut buffer, at).ok()?;
        if n == 0 || text.len() > 64 * 1024 {
            break;
        }
        text.extend_from_slice(&buffer[..n]);
        at += n as u64;
    }
    let holder: Holder = serde_json::from_slice(&text).ok()?;
    Some(LiveRun {
        killed: !process_exists(holder.pid),
        run_id: holder.run_id,
        pid: Some(holder.pid),
        since: Some(holder.since),
    })
}

/// Whether a process exists (a zombie counts: its parent has not collected it yet).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    // Another user's process exists too; it only may not be signalled.
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_the_lock_is_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join(".helixflow");
        assert_eq!(live_run(&state), None);
        let lock = RunLock::try_acquire(&state).unwrap().unwrap();
        let live = live_run(&state).expect("held");
        assert_eq!(
            (live.run_id.as_deref(), live.pid, live.killed),
            (None, Some(std::process::id()), false)
        );
        lock.set_run("20260101-000000").unwrap();
        let second = RunLock::try_acquire(&state).unwrap().unwrap_err();
        assert_eq!(second.run_id.as_deref(), Some("20260101-000000"));
        assert!(
            second.describe().starts_with(&format!(
                "run 20260101-000000 (pid {}, since ",
                std::process::id()
            )),
            "{}",
            second.describe()
        );
        drop(lock);
        assert_eq!(live_run(&state), None);
        // The file stays (it must never be replaced), and the next run takes the lock on it.
        assert!(state.join(FILE_NAME).is_file());
        assert!(RunLock::try_acquire(&state).unwrap().is_ok());
    }
}
