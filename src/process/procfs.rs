//! Reading processes from `/proc`: parent, group and state, and the tree they make.

use std::collections::{BTreeMap, BTreeSet};

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
