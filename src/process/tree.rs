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

/// helixflow's children that it may have adopted: those of its main thread. A subreaper's
/// orphans go to its first thread still alive (the kernel's `find_alive_thread`, since Linux
/// 3.19), which is the main thread while helixflow runs; the other threads' children are ones
/// helixflow started itself. The main thread's list (`/proc/self/task/PID/children`) stays open
/// and is read again from its start each time: asked after every child ends, one call. Where the
/// kernel is older, every thread's list is read; `None` where the kernel lists none (then every
/// process is read).
fn direct_children() -> Option<Vec<libc::pid_t>> {
    static MAIN: Mutex<Option<std::fs::File>> = Mutex::new(None);
    if !orphans_go_to_the_main_thread() {
        return every_threads_children();
    }
    let mut main = MAIN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if main.is_none() {
        let path = format!("/proc/self/task/{}/children", std::process::id());
        *main = Some(std::fs::File::open(path).ok()?);
    }
    let text = read_from_start(main.as_ref()?)?;
    Some(pids(&text))
}

/// Whether the kernel gives a subreaper's orphans to its first thread alive (Linux 3.19 and
/// later).
fn orphans_go_to_the_main_thread() -> bool {
    static NEW_ENOUGH: OnceLock<bool> = OnceLock::new();
    *NEW_ENOUGH.get_or_init(|| {
        // SAFETY: uname fills the structure it is given, which is zeroed and ours.
        let release = unsafe {
            let mut names: libc::utsname = std::mem::zeroed();
            if libc::uname(&raw mut names) != 0 {
                return false;
            }
            std::ffi::CStr::from_ptr(names.release.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().unwrap_or(0));
        let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        version >= (3, 19)
    })
}

/// Every thread's children, from `/proc/self/task/*/children`.
fn every_threads_children() -> Option<Vec<libc::pid_t>> {
    let mut children = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let file = std::fs::File::open(task.ok()?.path().join("children")).ok()?;
        children.extend(pids(&read_from_start(&file)?));
    }
    Some(children)
}

/// What a `/proc` file says now, read from its start.
fn read_from_start(file: &std::fs::File) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut text = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let offset = u64::try_from(text.len()).ok()?;
        match file.read_at(&mut chunk, offset) {
            Ok(0) => return Some(text),
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// The pids a `children` file lists.
fn pids(text: &[u8]) -> Vec<libc::pid_t> {
    String::from_utf8_lossy(text)
        .split_whitespace()
        .filter_map(|pid| pid.parse::<libc::pid_t>().ok())
        .collect()
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
    fn an_orphan_of_a_child_started_by_another_thread_is_found_each_time_it_is_looked_for() {
        become_subreaper();
        // A child of another thread that leaves a grandchild behind: the grandchild is
        // adopted, in its own process group.
        let (told, orphan) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut child = std::process::Command::new("sh")
                .args(["-c", "setsid sleep 30 >/dev/null 2>&1 & echo $!"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut out = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
            child.wait().unwrap();
            told.send(out.trim().parse::<libc::pid_t>().unwrap())
                .unwrap();
        })
        .join()
        .unwrap();
        let orphan = orphan.recv().unwrap();
        for _ in 0..3 {
            let children = direct_children().unwrap();
            assert!(children.contains(&orphan), "{children:?} lacks {orphan}");
            assert!(every_threads_children().unwrap().contains(&orphan));
        }
        // SAFETY: signals and reaps the one process this test made.
        unsafe {
            libc::kill(orphan, libc::SIGKILL);
            libc::waitpid(orphan, std::ptr::null_mut(), 0);
        }
        assert!(!direct_children().unwrap().contains(&orphan));
    }
}
