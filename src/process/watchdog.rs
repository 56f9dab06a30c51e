//! A guard for the agents of a run whose helixflow is killed outright.
//!
//! Every child runs in a process group of its own, and helixflow stops each group when the child
//! ends, times out or is cancelled. A helixflow that is sent SIGKILL (or killed by the kernel when
//! memory runs out) can do none of that, and its agents would go on working, and spending, with
//! no one to check them. So a run starts a small second process, `helixflow __watchdog`, in a
//! group of its own, and tells it through a pipe which groups are running (`+PGID` when one
//! starts, `-PGID` when it is gone). When the pipe closes without helixflow having ended the
//! watchdog itself, helixflow died: the watchdog sends TERM to the groups still registered and to
//! every process below their members (what a child detached from its group stays below it, the
//! child being a subreaper: see `process::tree`), and to the leftovers helixflow was stopping
//! (`pPID`, `qPID` once gone), waits the grace period and sends KILL to what remains, as helixflow
//! would have. It then removes the
//! files and folders registered for removal (`fPATH`, `rPATH` to forget one): private copies of
//! prompts that hold secrets, and the worktrees of isolated phases, which helixflow would have
//! removed when their attempt ended. A run's watchdog also keeps the run lock's file open
//! (`store::lock`), so that the lock of a killed run is released once its agents are stopped,
//! not before.
//!
//! The watchdog sleeps and reads the pipe a few times a second rather than wait on it, so that a
//! run of short steps does not wake it for each line; the pipe is enlarged to hold what arrives
//! meanwhile, and a closed pipe is seen within that time. At a normal end helixflow ends it.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The hidden subcommand the watchdog runs as.
pub(crate) const SUBCOMMAND: &str = "__watchdog";

/// How often the watchdog reads the pipe, and so how soon it sees helixflow gone.
const READ_EVERY: Duration = Duration::from_millis(250);

/// The pipe's size asked for: a run's registrations for a while, should the watchdog be slow.
const PIPE_SIZE: libc::c_int = 1 << 20;

/// How often the groups are checked during the grace period.
const POLL: Duration = Duration::from_millis(20);

/// The watchdog of this process's run, once started.
static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();

/// The watchdog armed for this process's run ([`arm`]) and not started yet.
static ARMED: Mutex<Option<Armed>> = Mutex::new(None);

/// What [`ensure`] starts the watchdog with.
struct Armed {
    grace: Duration,
    /// A copy of the descriptor to keep open ([`start`]'s `keep`).
    keep: Option<OwnedFd>,
    /// Says why the watchdog could not be started.
    warn: Box<dyn FnOnce(&io::Error) + Send>,
}

/// helixflow's end of the pipe, and the watchdog process.
struct Watchdog {
    pipe: Mutex<Pipe>,
    process: Mutex<Option<Child>>,
}

struct Pipe {
    /// `None` once [`finish`] closed it.
    file: Option<File>,
    /// Lines the pipe could not take yet (it was full); sent before the next ones.
    pending: Vec<u8>,
}

/// Starts the watchdog for this process's children, with the run's grace period between TERM and
/// KILL. Starting it twice does nothing.
///
/// `keep` is a descriptor the watchdog keeps open until it ends: the run's lock
/// (`store::lock`), which a killed helixflow thus releases only once its agents are stopped.
///
/// # Errors
/// When the pipe or the process cannot be made; the run can go on without it.
pub(crate) fn start(grace: Duration, keep: Option<BorrowedFd<'_>>) -> io::Result<()> {
    if WATCHDOG.get().is_some() {
        return Ok(());
    }
    let (read, write) = pipe()?;
    // SAFETY: F_SETPIPE_SZ on a pipe we own; a refusal (over the system's limit) keeps 64 KiB.
    unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) };
    let program = std::env::current_exe()?;
    let mut command = Command::new(program);
    if let Some(keep) = keep.map(|fd| fd.as_raw_fd()) {
        // SAFETY: between fork and exec only fcntl runs, which is async-signal-safe. It clears
        // close-on-exec on the child's copy of the descriptor alone; helixflow's stays as it is,
        // so no agent inherits it.
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(keep, libc::F_SETFD, 0) == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        }
    }
    let process = command
        .arg(SUBCOMMAND)
        .arg(grace.as_millis().to_string())
        .stdin(Stdio::from(read))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: a Ctrl-C at the terminal is for helixflow, which stops its children.
        .process_group(0)
        .spawn()?;
    if let Ok(pid) = libc::pid_t::try_from(process.id()) {
        super::tree::register(pid);
    }
    let _ = WATCHDOG.set(Watchdog {
        pipe: Mutex::new(Pipe {
            file: Some(File::from(write)),
            pending: Vec::new(),
        }),
        process: Mutex::new(Some(process)),
    });
    Ok(())
}

/// Arms the watchdog for this process's children: it is started ([`start`]) just before the
/// first child is, or the first path is registered for removal, so that a run with nothing to
/// run starts no second process. `warn` says so should it fail to start then (the run goes on
/// without it). A copy of `keep` is held until then; should no copy be made, the watchdog is
/// started at once.
pub(crate) fn arm(
    grace: Duration,
    keep: Option<BorrowedFd<'_>>,
    warn: impl FnOnce(&io::Error) + Send + 'static,
) {
    let Ok(copy) = keep.map(|fd| fd.try_clone_to_owned()).transpose() else {
        if let Err(e) = start(grace, keep) {
            warn(&e);
        }
        return;
    };
    *ARMED.lock().unwrap_or_else(PoisonError::into_inner) = Some(Armed {
        grace,
        keep: copy,
        warn: Box::new(warn),
    });
}

/// Starts the watchdog [armed](arm), once; nothing when none is. Whoever asks while it starts
/// waits for it, so that no child starts unguarded.
pub(crate) fn ensure() {
    let mut armed = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(Armed { grace, keep, warn }) = armed.take() else {
        return;
    };
    if let Err(e) = start(grace, keep.as_ref().map(AsFd::as_fd)) {
        warn(&e);
    }
}

/// Ends the watchdog at the end of a run, when helixflow has stopped every group itself; one
/// armed and never started is disarmed.
pub(crate) fn finish() {
    ARMED.lock().unwrap_or_else(PoisonError::into_inner).take();
    let Some(watchdog) = WATCHDOG.get() else {
        return;
    };
    if let Ok(mut pipe) = watchdog.pipe.lock() {
        pipe.file = None;
    }
    if let Ok(mut process) = watchdog.process.lock()
        && let Some(mut process) = process.take()
    {
        // It would notice the closed pipe within READ_EVERY; there is no need to wait for that.
        let _ = process.kill();
        let _ = process.wait();
    }
}

/// Tells the watchdog that a child's group started.
pub(crate) fn started(pgid: libc::pid_t) {
    send(b'+', pgid.to_string().as_bytes());
}

/// Tells the watchdog that a child's group is gone.
pub(crate) fn ended(pgid: libc::pid_t) {
    send(b'-', pgid.to_string().as_bytes());
}

/// Tells the watchdog that helixflow is stopping `pid`, a process left by a child that ended.
pub(crate) fn started_process(pid: libc::pid_t) {
    send(b'p', pid.to_string().as_bytes());
}

/// Tells the watchdog that the leftover `pid` is gone.
pub(crate) fn ended_process(pid: libc::pid_t) {
    send(b'q', pid.to_string().as_bytes());
}

/// Asks the watchdog to remove `path` (a file, or a folder with all in it) should helixflow die
/// before it does.
pub(crate) fn remove_on_crash(path: &Path) {
    file_line(b'f', path);
}

/// Tells the watchdog that `path` was removed (or is kept) after all.
pub(crate) fn forget(path: &Path) {
    file_line(b'r', path);
}

fn file_line(sign: u8, path: &Path) {
    if sign == b'f' {
        ensure();
    }
    // A line holds one path: one with a line break in it cannot be sent (and is not removed).
    let bytes = path.as_os_str().as_bytes();
    if path.is_absolute() && !bytes.contains(&b'\n') {
        send(sign, bytes);
    }
}

fn send(sign: u8, value: &[u8]) {
    let Some(watchdog) = WATCHDOG.get() else {
        return;
    };
    let Ok(mut pipe) = watchdog.pipe.lock() else {
        return;
    };
    let pipe = &mut *pipe;
    let Some(file) = &mut pipe.file else {
        return;
    };
    pipe.pending.push(sign);
    pipe.pending.extend_from_slice(value);
    pipe.pending.push(b'\n');
    // Non-blocking: a full pipe keeps the rest for the next time rather than stall the run.
    match file.write(&pipe.pending) {
        Ok(n) => {
            pipe.pending.drain(..n);
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        // The watchdog is gone: nothing more to tell it.
        Err(_) => pipe.pending.clear(),
    }
}

/// A pipe: (read end, write end), both close-on-exec, the write end non-blocking.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just opened and belong to nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(write.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(write.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    Ok((read, write))
}

/// Has the watchdog remove a prompt file's private copy should helixflow be killed while an agent
/// reads it; the returned guard takes the path back off its list when dropped (with the file).
pub(crate) fn cleanup_on_crash(
    file: &crate::agent::prompt_file::PromptFile,
) -> Option<CrashCleanup> {
    let path = file.private_path()?.to_path_buf();
    remove_on_crash(&path);
    Some(CrashCleanup(path))
}

/// Takes a path off the watchdog's list when dropped.
pub(crate) struct CrashCleanup(std::path::PathBuf);

impl Drop for CrashCleanup {
    fn drop(&mut self) {
        forget(&self.0);
    }
}

/// The watchdog itself: reads registrations from standard input until it closes, then stops the
/// groups still registered, giving them `grace` between TERM and KILL. Returns the exit code.
pub(crate) fn serve(grace: Duration) -> i32 {
    let stdin = io::stdin();
    let fd = stdin.as_raw_fd();
    // SAFETY: fcntl on standard input; reads below then never block.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut input = stdin.lock();
    let mut groups = Targets::default();
    let mut files = BTreeSet::new();
    let mut line = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // Sleeps rather than waits on the pipe, which would wake it at every line.
        std::thread::sleep(READ_EVERY);
        let mut closed = false;
        loop {
            match input.read(&mut buffer) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => apply(&buffer[..n], &mut line, &mut groups, &mut files),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        if closed {
            break;
        }
    }
    stop(&groups, grace);
    for path in &files {
        // Not followed if it is a symlink: only a real folder is removed with what is in it.
        if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir()) {
            let _ = std::fs::remove_dir_all(path);
        } else {
            let _ = std::fs::remove_file(path);
        }
    }
    crate::exit::SUCCESS
}

/// What the watchdog stops should helixflow die.
#[derive(Debug, Default)]
struct Targets {
    /// The process groups of running children.
    groups: BTreeSet<libc::pid_t>,
    /// Leftovers of ended children that helixflow was stopping.
    processes: BTreeSet<libc::pid_t>,
}

/// Applies whole `+PGID` / `-PGID` / `pPID` / `qPID` / `fPATH` / `rPATH` lines; an incomplete
/// last line waits in `line`.
fn apply(bytes: &[u8], line: &mut Vec<u8>, targets: &mut Targets, files: &mut BTreeSet<PathBuf>) {
    for &byte in bytes {
        if byte != b'\n' {
            line.push(byte);
            continue;
        }
        if let (Some(sign @ (b'f' | b'r')), Some(path)) = (line.first().copied(), line.get(1..)) {
            let path = PathBuf::from(OsStr::from_bytes(path));
            if path.is_absolute() {
                if sign == b'f' {
                    files.insert(path);
                } else {
                    files.remove(&path);
                }
            }
            line.clear();
            continue;
        }
        let pgid = std::str::from_utf8(&line[1.min(line.len())..])
            .ok()
            .and_then(|n| n.parse::<libc::pid_t>().ok())
            .filter(|&n| n > 1);
        match (line.first(), pgid) {
            (Some(b'+'), Some(pgid)) => {
                targets.groups.insert(pgid);
            }
            (Some(b'-'), Some(pgid)) => {
                targets.groups.remove(&pgid);
            }
            (Some(b'p'), Some(pid)) => {
                targets.processes.insert(pid);
            }
            (Some(b'q'), Some(pid)) => {
                targets.processes.remove(&pid);
            }
            _ => {}
        }
        line.clear();
    }
}

/// TERM to every group, to every process below their members and to the leftovers, up to
/// `grace` for them to end, then KILL to what is left. The processes below are found before any
/// signal: a child that ends hands what it detached to the system's init, out of reach.
fn stop(targets: &Targets, grace: Duration) {
    use super::procfs::{processes, stat, with_descendants};
    if targets.groups.is_empty() && targets.processes.is_empty() {
        return;
    }
    let below = |table: &std::collections::BTreeMap<libc::pid_t, super::procfs::Stat>| {
        let members = table
            .iter()
            .filter(|(_, stat)| targets.groups.contains(&stat.pgid))
            .map(|(&pid, _)| pid);
        with_descendants(table, members.chain(targets.processes.iter().copied()))
    };
    let signal = |pids: &BTreeSet<libc::pid_t>, signal| {
        for &pid in pids {
            // SAFETY: kill only sends a signal.
            unsafe {
                libc::kill(pid, signal);
            }
        }
        for &pgid in &targets.groups {
            super::group::signal_group(pgid, signal);
        }
    };
    let running = |pids: &BTreeSet<libc::pid_t>| {
        pids.iter().any(|&pid| stat(pid).is_some_and(|s| !s.zombie))
            || targets
                .groups
                .iter()
                .any(|&pgid| super::group::group_alive(pgid))
    };
    let mut pids = below(&processes());
    signal(&pids, libc::SIGTERM);
    let end = Instant::now() + grace;
    while Instant::now() < end && running(&pids) {
        std::thread::sleep(POLL);
        // What they started meanwhile, while it is still below them.
        let more = below(&processes());
        signal(&more.difference(&pids).copied().collect(), libc::SIGTERM);
        pids.extend(more);
    }
    if running(&pids) {
        pids.extend(below(&processes()));
        signal(&pids, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_register_and_unregister_groups() {
        let mut groups = Targets::default();
        let mut files = BTreeSet::new();
        let mut line = Vec::new();
        apply(b"+100\n+200\n-10", &mut line, &mut groups, &mut files);
        assert_eq!(
            groups.groups.iter().copied().collect::<Vec<_>>(),
            [100, 200]
        );
        // The cut line completes with the next read.
        apply(b"0\n+1\n+x\n\n-\n+0\n", &mut line, &mut groups, &mut files);
        assert_eq!(groups.groups.iter().copied().collect::<Vec<_>>(), [200]);
        assert!(line.is_empty());
        apply(
            b"f/tmp/a b\nf/tmp/c\nfrel\nr/tmp/c\n",
            &mut line,
            &mut groups,
            &mut files,
        );
        assert_eq!(files.iter().collect::<Vec<_>>(), [Path::new("/tmp/a b")]);
        assert_eq!(groups.groups.len(), 1);
        apply(b"p300\np301\nq300\n", &mut line, &mut groups, &mut files);
        assert_eq!(groups.processes.iter().copied().collect::<Vec<_>>(), [301]);
    }
}
