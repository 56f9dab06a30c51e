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

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// One line of `/proc/PID/stat`: the fields that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub ppid: libc::pid_t,
    pub pgid: libc::pid_t,
    pub zombie: bool,
}

/// Parses `PID (COMM) STATE PPID PGRP …`; COMM may hold spaces and parentheses, so the fields
/// are counted from the last `)`.
pub(crate) fn parse_stat(stat: &[u8]) -> Option<Stat> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Stat {
        ppid,
        pgid,
        zombie: matches!(state, "Z" | "X" | "x"),
    })
}

/// The stat of one process, when it exists.
pub(crate) fn stat(pid: libc::pid_t) -> Option<Stat> {
    parse_stat(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process `/proc` shows, with its stat.
pub(crate) fn processes() -> BTreeMap<libc::pid_t, Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<libc::pid_t>().ok()?;
            Some((
                pid,
                parse_stat(&std::fs::read(entry.path().join("stat")).ok()?)?,
            ))
        })
        .collect()
}

/// Whether `ancestor` is `pid`'s parent, or its parent's parent, and so on; `None` when the
/// chain cannot be read (the process is gone, or `/proc` is not there).
pub(crate) fn descends_from(pid: libc::pid_t, ancestor: libc::pid_t) -> Option<bool> {
    let mut current = pid;
    // A chain longer than the pid space is a loop read while processes came and went.
    for _ in 0..(1 << 22) {
        if current == ancestor {
            return Some(true);
        }
        if current <= 1 {
            return Some(false);
        }
        current = stat(current)?.ppid;
    }
    None
}

/// `roots` and everything below them in `table`.
pub(crate) fn with_descendants(
    table: &BTreeMap<libc::pid_t, Stat>,
    roots: impl IntoIterator<Item = libc::pid_t>,
) -> BTreeSet<libc::pid_t> {
    let mut children: BTreeMap<libc::pid_t, Vec<libc::pid_t>> = BTreeMap::new();
    for (&pid, stat) in table {
        children.entry(stat.ppid).or_default().push(pid);
    }
    let mut found = BTreeSet::new();
    let mut queue: Vec<libc::pid_t> = roots.into_iter().collect();
    while let Some(pid) = queue.pop() {
        if found.insert(pid) {
            queue.extend(children.get(&pid).into_iter().flatten().copied());
        }
    }
    found
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
    let table = processes();
    let roots: Vec<libc::pid_t> = table
        .iter()
        .filter(|(pid, stat)| stat.ppid == me && stat.pgid != my_group && !is_own(**pid))
        .map(|(&pid, _)| pid)
        .collect();
    let all = with_descendants(&table, roots.iter().copied());
    (roots, all)
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
pub(crate) async fn stop_leftovers(grace: Duration, hard: &CancellationToken) -> usize {
    let (roots, mut pids) = adopted();
    reap(&roots);
    if pids.is_empty() {
        return 0;
    }
    pids.retain(|&pid| stat(pid).is_some_and(|stat| !stat.zombie));
    let mut stopped = pids.clone();
    // Registered with the watchdog, which stops them should helixflow be killed meanwhile.
    for &pid in &pids {
        super::watchdog::started_process(pid);
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
        super::watchdog::ended_process(pid);
    }
    stopped.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_parent_and_group_from_a_stat_line() {
        let line = b"4242 (odd) name) (x) S 17 777 777 0 -1 4194560 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                ppid: 17,
                pgid: 777,
                zombie: false
            })
        );
        assert!(parse_stat(b"4242 (sleep) Z 1 777 777").unwrap().zombie);
        assert_eq!(parse_stat(b"garbage"), None);
    }

    #[test]
    fn descendants_follow_parent_links() {
        let stat = |ppid| Stat {
            ppid,
            pgid: 1,
            zombie: false,
        };
        let table = BTreeMap::from([(10, stat(1)), (11, stat(10)), (12, stat(11)), (20, stat(1))]);
        assert_eq!(
            with_descendants(&table, [10])
                .into_iter()
                .collect::<Vec<_>>(),
            [10, 11, 12]
        );
    }

    #[test]
    fn this_process_descends_from_its_parent() {
        let me = libc::pid_t::try_from(std::process::id()).unwrap();
        // SAFETY: getppid only reads.
        let parent = unsafe { libc::getppid() };
        assert_eq!(descends_from(me, parent), Some(true));
        assert_eq!(descends_from(parent, me), Some(false));
    }
}
