//! Process groups: every child helixflow starts leads one, and is stopped as a group.

use std::io;

/// Sends `signal` to every process of the group. A group that is already gone is not an error.
pub(crate) fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal; it touches no memory of this process.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// Whether any process of the group is still running. Zombies do not count: they hold no
/// resources and, when the system's init does not reap orphans (some containers), would otherwise
/// keep a finished group "alive" for ever.
pub(crate) fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the group exists and may be signalled.
    let exists = unsafe { libc::killpg(pgid, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && has_running_member(pgid)
}

/// Whether `/proc` shows a process of group `pgid` that is not a zombie. When `/proc` cannot be
/// read, every existing group counts as running.
#[cfg(target_os = "linux")]
fn has_running_member(pgid: libc::pid_t) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            return false;
        }
        let Ok(stat) = std::fs::read(entry.path().join("stat")) else {
            return false;
        };
        running_in_group(&stat, pgid)
    })
}

/// Without `/proc`, every existing group counts as running.
#[cfg(not(target_os = "linux"))]
fn has_running_member(_pgid: libc::pid_t) -> bool {
    true
}

/// Whether a `/proc/PID/stat` line describes a live (not zombie, not dead) process of group `pgid`.
/// The line is `PID (COMM) STATE PPID PGRP …`, and COMM may itself contain spaces and parentheses,
/// so the fields are counted from the last `)`.
#[cfg(target_os = "linux")]
fn running_in_group(stat: &[u8], pgid: libc::pid_t) -> bool {
    let Some(close) = stat.iter().rposition(|&b| b == b')') else {
        return false;
    };
    let rest = String::from_utf8_lossy(&stat[close + 1..]);
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next();
    let group = fields
        .nth(1)
        .and_then(|field| field.parse::<libc::pid_t>().ok());
    group == Some(pgid) && !matches!(state, Some("Z" | "X" | "x"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_group_from_a_stat_line() {
        let line = b"4242 (odd) name) (x) S 1 777 777 0 -1 4194560 0 0";
        assert!(running_in_group(line, 777));
        assert!(!running_in_group(line, 778));
        let zombie = b"4242 (sleep) Z 1 777 777 0 -1";
        assert!(!running_in_group(zombie, 777));
        assert!(!running_in_group(b"garbage", 777));
    }
}
