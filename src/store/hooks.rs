//! What the Stop hooks keep in the state folder, `<state-dir>/hooks/`: the phase chosen with
//! `helixflow hook use` and the workspace when it was chosen (where the phase started), and one
//! folder per agent session with the journal of every judgement of its stops.
//!
//! ```text
//! hooks/phase.json                      {"phase", "since"}
//! hooks/start.json                      the workspace when the phase was chosen (a listing)
//! hooks/sessions/<agent>-<id>/
//!     session.json                      the session: agent, id, phase, counts, the last verdict
//!     judgements.jsonl                  one line per judgement, written whole
//!     judgement-<n>.md                  the feedback a refused stop was given (all of it)
//!     judgement-<n>/                    that judgement's gate command logs (when it ran any)
//!     session.lock                      held while a judgement of the session is made
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write as _};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::event::GateReport;
use crate::workspace::{ListedFile, Snapshot};

/// The folder of the hooks' state, under the state folder.
pub(crate) const DIR: &str = "hooks";

/// The phase chosen for the sessions in this workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Chosen {
    pub phase: String,
    /// When it was chosen (RFC 3339): where the phase started.
    pub since: String,
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Records `phase` as the sessions' phase, started with the workspace as `start` lists it.
pub(crate) fn choose(state_dir: &Path, phase: &str, start: &Snapshot) -> io::Result<Chosen> {
    let dir = state_dir.join(DIR);
    super::state_dir::create(state_dir)?;
    fs::create_dir_all(&dir)?;
    let listing = serde_json::to_vec(&start.listing()).map_err(io::Error::other)?;
    super::run::write_atomic(&dir.join("start.json"), &listing)?;
    let chosen = Chosen {
        phase: phase.to_owned(),
        since: now(),
    };
    let text = serde_json::to_vec_pretty(&chosen).map_err(io::Error::other)?;
    super::run::write_atomic(&dir.join("phase.json"), &text)?;
    Ok(chosen)
}

/// The phase chosen with `helixflow hook use`, if any.
pub(crate) fn chosen(state_dir: &Path) -> io::Result<Option<Chosen>> {
    match fs::read(state_dir.join(DIR).join("phase.json")) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Where `phase` started, when it is the chosen one and its start was recorded.
pub(crate) fn start(state_dir: &Path, phase: &str) -> Option<Snapshot> {
    let chosen = chosen(state_dir).ok()??;
    if chosen.phase != phase {
        return None;
    }
    let bytes = fs::read(state_dir.join(DIR).join("start.json")).ok()?;
    let listing: Vec<ListedFile> = serde_json::from_slice(&bytes).ok()?;
    Some(Snapshot::from_listing(listing))
}

/// How a judgement of a stop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Verdict {
    /// Every gate passed: the stop was allowed.
    Passed,
    /// A gate failed: the stop was refused, with the feedback.
    Refused,
    /// A gate failed, but the stops refused in a row reached `--max-blocks`: allowed.
    AllowedAtCap,
    /// helixflow itself could not judge (a broken pipeline file, a timeout): allowed.
    AllowedOnError,
}

impl Verdict {
    /// The verdict in a few words.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Refused => "refused",
            Verdict::AllowedAtCap => "allowed at the cap",
            Verdict::AllowedOnError => "allowed on an error",
        }
    }
}

/// One judgement of a stop, a line of `judgements.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Judgement {
    pub number: u32,
    pub at: String,
    /// `Stop` or `SubagentStop`, as the hook was told.
    pub event: String,
    /// The sub-agent that stopped, for `SubagentStop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Whether the agent's CLI said this stop follows a refused one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_hook_active: Option<bool>,
    pub verdict: Verdict,
    /// Stops refused in a row, this one included.
    pub refused_in_a_row: u32,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateReport>,
    /// What went wrong, for a verdict on an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A session as its folder's `session.json` has it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    /// `claude` or `codex`.
    pub agent: String,
    pub session_id: String,
    /// The folder the agent worked in, as its hook said.
    #[serde(default)]
    pub cwd: Option<String>,
    pub started: String,
    pub updated: String,
    /// The phase of the latest judgement.
    #[serde(default)]
    pub phase: Option<String>,
    pub judgements: u32,
    /// Stops refused in a row by agent: `""` for the session's own, a sub-agent's id for its.
    #[serde(default)]
    pub refused_in_a_row: BTreeMap<String, u32>,
    #[serde(default)]
    pub last: Option<Verdict>,
}

/// A session's folder, `hooks/sessions/<agent>-<id>`.
#[derive(Debug, Clone)]
pub(crate) struct SessionDir {
    pub path: PathBuf,
}

/// The folder of every session.
pub(crate) fn sessions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(DIR).join("sessions")
}

/// A session id as a folder name: the id itself when it is a plain name (Claude Code and Codex
/// use UUIDs), else a hash of it, so no id names a path outside the folder.
fn folder_name(agent: &str, session_id: &str) -> String {
    let plain = !session_id.is_empty()
        && session_id.len() <= 128
        && !session_id.starts_with('.')
        && session_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if plain {
        format!("{agent}-{session_id}")
    } else {
        let hash = blake3::hash(session_id.as_bytes()).to_hex();
        format!("{agent}-{}", &hash[..32])
    }
}

impl SessionDir {
    /// The folder of `agent`'s session `session_id`, made when missing.
    pub(crate) fn open(state_dir: &Path, agent: &str, session_id: &str) -> io::Result<SessionDir> {
        super::state_dir::create(state_dir)?;
        let path = sessions_dir(state_dir).join(folder_name(agent, session_id));
        fs::create_dir_all(&path)?;
        Ok(SessionDir { path })
    }

    /// Holds the session's lock until the returned file is dropped: judgements of one session
    /// (a stop and a sub-agent's, say) are made one after the other. Waits for it until
    /// `deadline`.
    pub(crate) fn lock_until(&self, deadline: std::time::Instant) -> io::Result<fs::File> {
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path.join("session.lock"))?;
        loop {
            // SAFETY: `flock` on a descriptor this function owns.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(file);
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::WouldBlock {
                return Err(error);
            }
            if std::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "another judgement of this session holds it",
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// The session's record; None before its first judgement.
    pub(crate) fn record(&self) -> Option<SessionRecord> {
        let bytes = fs::read(self.path.join("session.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Where judgement `number`'s gate commands write their logs.
    pub(crate) fn logs(&self, number: u32) -> PathBuf {
        self.path.join(format!("judgement-{number}"))
    }

    /// The file that holds judgement `number`'s feedback.
    pub(crate) fn feedback_file(&self, number: u32) -> PathBuf {
        self.path.join(format!("judgement-{number}.md"))
    }

    /// Appends `judgement` to the journal (one whole line) and replaces the record.
    pub(crate) fn write(&self, record: &SessionRecord, judgement: &Judgement) -> io::Result<()> {
        let mut line = serde_json::to_vec(judgement).map_err(io::Error::other)?;
        line.push(b'\n');
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path.join("judgements.jsonl"))?
            .write_all(&line)?;
        let text = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        super::run::write_atomic(&self.path.join("session.json"), &text)
    }

    /// Every judgement of the session, in order; lines that cannot be read are left out.
    pub(crate) fn judgements(&self) -> io::Result<Vec<Judgement>> {
        let text = fs::read_to_string(self.path.join("judgements.jsonl"))?;
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect())
    }
}

/// A new record for a session seen for the first time.
pub(crate) fn new_record(agent: &str, session_id: &str, cwd: Option<&str>) -> SessionRecord {
    SessionRecord {
        agent: agent.to_owned(),
        session_id: session_id.to_owned(),
        cwd: cwd.map(str::to_owned),
        started: now(),
        updated: now(),
        ..SessionRecord::default()
    }
}

/// The time now, as the journal writes it.
pub(crate) fn timestamp() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Every session with a record, oldest first (by when it started).
pub(crate) fn list_sessions(state_dir: &Path) -> io::Result<Vec<(SessionDir, SessionRecord)>> {
    let entries = match fs::read_dir(sessions_dir(state_dir)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut sessions: Vec<(SessionDir, SessionRecord)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let dir = SessionDir { path: entry.path() };
            let record = dir.record()?;
            Some((dir, record))
        })
        .collect();
    sessions.sort_by(|a, b| (&a.1.started, &a.1.session_id).cmp(&(&b.1.started, &b.1.session_id)));
    Ok(sessions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_never_names_a_path_outside_its_folder() {
        assert_eq!(folder_name("claude", "dcc7-ab"), "claude-dcc7-ab");
        for hostile in ["../../etc", "a/b", "", ".hidden", "x\ny"] {
            let name = folder_name("codex", hostile);
            assert!(name.starts_with("codex-"), "{name}");
            assert_eq!(name.len(), "codex-".len() + 32, "{name}");
        }
    }
}
