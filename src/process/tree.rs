//! Descendants that left their process group: `setsid`, a double fork, a daemon.
//!
//! A process group holds what a child starts unless a process leaves it on purpose, and whatever
//! leaves it is no longer reached by the group's signals. So helixflow makes itself and every
//! child it starts a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): a process whose parent ends is
//! adopted by the nearest living subreaper among its ancestors, never by the system's init. While
//! a child runs, whatever it started (however detached) stays in its tree; once it has exited, its
//! leftovers are adopted by helixflow itself. A process helixflow adopted is therefore always the
//! leftover of a child that has ended, and [`stop_leftovers`] stops them all (TERM, grace, KILL)
//! and reaps them, before the work of that child is judged.
//!
//! helixflow's own direct children are told apart from adopted ones: the supervised children and
//! the watchdog are registered here when they start (a scan waits while one is being started, so
//! a child is never seen before it is registered), and the short commands it runs itself (`git`)
//! stay in helixflow's own process group, which no leftover is in.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::procfs::{processes, stat, with_descendants};

/// How often leftovers are checked while they are given time to end.
const POLL: Duration = Duration::from_millis(20);

/// The pids of the children helixflow started itself and has not reaped yet.
static OWN: Mutex<Option<HashSet<libc::pid_t>>> = Mutex::new(None);

/// Held (shared) while a child is being started and registered, and (exclusively) while helixflow
/// looks for adopted processes.
pub(crate) static STARTING: RwLock<()> = RwLock::new(());

/// Makes helixflow the subreaper of its descendants, once. Without it (a system that refuses),
/// detached descendants are adopted by init and cannot be found.
pub(crate) fn become_subreaper() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: prctl with integer arguments only changes this process's own attribute.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
}

/// Between fork and exec: makes the child the subreaper of its own descendants, so that what it
/// detaches stays in its tree while it runs. The setting survives `exec`.
pub(crate) fn subreaper_in_child() -> std::io::Result<()> {
    // SAFETY: prctl is a plain system call, safe between fork and exec.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Notes `pid` as a child helixflow started itself.
pub(crate) fn register(pid: libc::pid_t) {
    if let Ok(mut own) = OWN.lock() {
        own.get_or_insert_with(HashSet::new).insert(pid);
    }
}

/// `pid` has been reaped.
pub(crate) fn unregister(pid: libc::pid_t) {
    if let Ok(mut own) = OWN.lock()
        && let Some(own) = own.as_mut()
    {
        own.remove(&pid);
    }
}

fn is_own(pid: libc::pid_t) -> bool {
    OWN.lock()
        .ok()
        .is_some_and(|own| own.as_ref().is_some_and(|own| own.contains(&pid)))
}

/// The processes helixflow adopted (its children that it did not start itself and that are not
/// in its own group: see the module's documentation), and all below them.
fn adopted() -> (Vec<libc::pid_t>, BTreeSet<libc::pid_t>) {
    let me = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: getpgrp only reads this process's group.
    let my_group = unsafe { libc::getpgrp() };
    let _starting = STARTING
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Most of the time helixflow adopted nothing: its own children, a few files in `/proc/self`,
    // say so without reading every process of the machine.
    if let Some(children) = direct_children() {
        let candidate = |pid: &libc::pid_t| {
            !is_own(*pid) && stat(*pid).is_some_and(|stat| stat.pgid != my_group)
        };
        if !children.iter().any(candidate) {
            return (Vec::new(), BTreeSet::new());
        }
    }
    let table = processes();
    let roots: Vec<libc::pid_t> = table
        .iter()
        .filter(|(pid, stat)| stat.ppid == me && stat.pgid != my_group && !is_own(**pid))
        .map(|(&pid, _)| pid)
        .collect();
    let all = with_descendants(&table, roots.iter().copied());
    (roots, all)
}

/// helixflow's children, from `/proc/self/task/*/children`; `None` where the kernel does not
/// list them (then every process is read). Asked after every child ends: the folder of the
/// threads stays open between asks, and each thread's list is read with one call, relative to it.
fn direct_children() -> Option<Vec<libc::pid_t>> {
    use rustix::fs::{CWD, Mode, OFlags, RawDir, SeekFrom};
    use std::mem::MaybeUninit;
    static TASKS: Mutex<Option<std::os::fd::OwnedFd>> = Mutex::new(None);
    let mut tasks = TASKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if tasks.is_none() {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        *tasks = Some(rustix::fs::openat(CWD, "/proc/self/task", flags, Mode::empty()).ok()?);
    }
    let dir = tasks.as_ref()?;
    rustix::fs::seek(dir, SeekFrom::Start(0)).ok()?;
    let mut entries = [MaybeUninit::<u8>::uninit(); 4096];
    let mut threads = Vec::new();
    let mut listing = RawDir::new(dir, &mut entries);
    while let Some(entry) = listing.next() {
        let name = entry.ok()?.file_name().to_bytes().to_vec();
        if name.first().is_some_and(u8::is_ascii_digit) {
            threads.push(name);
        }
    }
    let mut children = Vec::new();
    let mut text = Vec::new();
    for mut thread in threads {
        thread.extend_from_slice(b"/children");
        let path = std::ffi::CString::new(thread).ok()?;
        // A thread that ended since it was listed handed its children to another, perhaps one
        // already read: then every process is read.
        let file =
            rustix::fs::openat(dir, &path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
        text.clear();
        let mut chunk = [0u8; 256];
        loop {
            match rustix::io::read(&file, &mut chunk) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&chunk[..n]),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        children.extend(
            String::from_utf8_lossy(&text)
                .split_whitespace()
                .filter_map(|pid| pid.parse::<libc::pid_t>().ok()),
        );
    }
    Some(children)
}

/// Reaps the adopted processes that have ended (they are helixflow's children now).
fn reap(roots: &[libc::pid_t]) {
    for &pid in roots {
        // SAFETY: waitpid on one pid that is helixflow's child and not one it started itself, so
        // no other waiter is owed its status.
        unsafe {
            libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
        }
    }
}

fn signal_all(pids: &BTreeSet<libc::pid_t>, signal: libc::c_int) {
    for &pid in pids {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// Whether any of `pids` (all leftovers) is still running.
fn any_running(pids: &BTreeSet<libc::pid_t>) -> bool {
    pids.iter()
        .any(|&pid| stat(pid).is_some_and(|stat| !stat.zombie))
}

/// Stops every process helixflow adopted, with what they started: TERM, up to `grace` for them
/// to end (a hard cancel cuts it short), then KILL; and reaps them. What such a process starts
/// while it is being stopped is found too. Returns how many processes were stopped.
///
/// `watch` and `unwatch` tell the watchdog which processes are being stopped, so that it stops
/// them should helixflow be killed meanwhile.
pub(crate) async fn stop_leftovers(
    grace: Duration,
    hard: &CancellationToken,
    watch: fn(libc::pid_t),
    unwatch: fn(libc::pid_t),
) -> usize {
    let (roots, mut pids) = adopted();
    reap(&roots);
    if pids.is_empty() {
        return 0;
    }
    pids.retain(|&pid| stat(pid).is_some_and(|stat| !stat.zombie));
    let mut stopped = pids.clone();
    for &pid in &pids {
        watch(pid);
    }
    signal_all(&pids, libc::SIGTERM);
    let grace_end = Instant::now() + grace;
    while Instant::now() < grace_end {
        let (roots, found) = adopted();
        reap(&roots);
        let new: BTreeSet<libc::pid_t> = found.difference(&stopped).copied().collect();
        signal_all(&new, libc::SIGTERM);
        stopped.extend(new);
        if !any_running(&found) {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL.min(grace_end - Instant::now())) => {}
            () = hard.cancelled() => break,
        }
    }
    // KILL cannot be caught: a few rounds reach what was started in the meantime.
    for _ in 0..50 {
        let (roots, found) = adopted();
        reap(&roots);
        if !any_running(&found) {
            break;
        }
        signal_all(&found, libc::SIGKILL);
        stopped.extend(found);
        tokio::time::sleep(POLL).await;
    }
    let (roots, _) = adopted();
    reap(&roots);
    for &pid in &stopped {
        unwatch(pid);
    }
    stopped.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_children_of_every_thread_are_listed_each_time_they_are_asked_for() {
        let sleeper = || {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        };
        let pid = |child: &std::process::Child| libc::pid_t::try_from(child.id()).unwrap();
        let mut here = sleeper();
        // A child of another thread, which lives on while it is looked for.
        let (started, there) = std::sync::mpsc::channel();
        let (done, end) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut child = sleeper();
            started.send(pid(&child)).unwrap();
            end.recv().unwrap();
            child.kill().unwrap();
            child.wait().unwrap();
        });
        let there = there.recv().unwrap();
        for _ in 0..3 {
            let children = direct_children().unwrap();
            assert!(children.contains(&pid(&here)), "{children:?}");
            assert!(children.contains(&there), "{children:?}");
        }
        here.kill().unwrap();
        here.wait().unwrap();
        let children = direct_children().unwrap();
        assert!(!children.contains(&pid(&here)), "{children:?}");
        assert!(children.contains(&there), "{children:?}");
        done.send(()).unwrap();
        thread.join().unwrap();
        assert!(!direct_children().unwrap().contains(&there));
    }
}
