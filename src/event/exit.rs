//! How a child exited: one type, one wording, one table of signal names.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::TimeoutKind;

/// How the agent or `run` step of an attempt exited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildExit {
    /// The exit code, when it exited normally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Set when helixflow stopped it for a timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<TimeoutKind>,
    /// Whether it was stopped because the run was cancelled.
    pub cancelled: bool,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Bytes written to standard output.
    pub stdout_bytes: u64,
    /// Bytes written to standard error.
    pub stderr_bytes: u64,
}

impl ChildExit {
    /// Whether the child exited 0 on its own.
    pub fn success(&self) -> bool {
        self.code == Some(0) && self.timeout.is_none() && !self.cancelled
    }
}

/// How a child ended, completing "the agent …": `exited with code 1`, `was killed by signal 9
/// (SIGKILL)`, `was stopped by its timeout after 20m 00s`.
impl fmt::Display for ChildExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let after = crate::text::human_duration(self.duration_ms);
        if self.cancelled {
            return write!(f, "was stopped after {after}: the run was cancelled");
        }
        match self.timeout {
            Some(TimeoutKind::Wall) => {
                return write!(f, "was stopped by its timeout after {after}");
            }
            Some(TimeoutKind::Idle) => {
                return write!(
                    f,
                    "was stopped by its idle-timeout (no output) after {after}"
                );
            }
            None => {}
        }
        match (self.signal, self.code) {
            (Some(signal), _) => write!(f, "was killed by {}", signal_name(signal)),
            (None, Some(code)) => write!(f, "exited with code {code}"),
            (None, None) => f.write_str("ended without an exit code"),
        }
    }
}

/// How a process ended, for feedback, completing "the agent …": `exited with code 2`, `was ended
/// by signal 9 (SIGKILL)`, `exited abnormally`.
pub(crate) fn how_it_ended(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (_, Some(signal)) => format!("was ended by {}", signal_name(signal)),
        (Some(code), None) => format!("exited with code {code}"),
        (None, None) => "exited abnormally".to_owned(),
    }
}

/// "signal 9 (SIGKILL)", with the name for the signals children commonly die of.
pub(crate) fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => Some("SIGHUP"),
        libc::SIGINT => Some("SIGINT"),
        libc::SIGQUIT => Some("SIGQUIT"),
        libc::SIGILL => Some("SIGILL"),
        libc::SIGABRT => Some("SIGABRT"),
        libc::SIGBUS => Some("SIGBUS"),
        libc::SIGFPE => Some("SIGFPE"),
        libc::SIGKILL => Some("SIGKILL"),
        libc::SIGSEGV => Some("SIGSEGV"),
        libc::SIGPIPE => Some("SIGPIPE"),
        libc::SIGALRM => Some("SIGALRM"),
        libc::SIGTERM => Some("SIGTERM"),
        _ => None,
    };
    match name {
        Some(name) => format!("signal {signal} ({name})"),
        None => format!("signal {signal}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "signal 9 (SIGKILL)");
        assert_eq!(signal_name(64), "signal 64");
    }

    #[test]
    fn exits_are_described_by_their_cause() {
        let exit = ChildExit {
            code: Some(2),
            signal: None,
            timeout: None,
            cancelled: false,
            duration_ms: 1500,
            stdout_bytes: 0,
            stderr_bytes: 0,
        };
        assert_eq!(exit.to_string(), "exited with code 2");
        let killed = ChildExit {
            code: None,
            signal: Some(libc::SIGKILL),
            ..exit.clone()
        };
        assert_eq!(killed.to_string(), "was killed by signal 9 (SIGKILL)");
        let idle = ChildExit {
            timeout: Some(TimeoutKind::Idle),
            ..killed.clone()
        };
        assert_eq!(
            idle.to_string(),
            "was stopped by its idle-timeout (no output) after 1.5s"
        );
        let cancelled = ChildExit {
            cancelled: true,
            ..idle
        };
        assert_eq!(
            cancelled.to_string(),
            "was stopped after 1.5s: the run was cancelled"
        );
    }
}
