//! The run's control socket. `helixflow verify`, started by an agent inside a run, asks the
//! engine to check the agent's work now. The engine runs the gates itself and keeps the receipt in
//! memory: a receipt file an agent could write proves nothing, so the file in the attempt folder
//! is only a record for people.
//!
//! `helixflow approve` and `helixflow reject` answer a phase waiting at an `approval` gate here,
//! and only here. The kernel tells who connected (`SO_PEERCRED`), and a decision from a process
//! the run started — an agent, a `run` step, a gate command, anything they started, however
//! detached (helixflow is their subreaper, so they stay below it: see `process::tree`) — is
//! refused: an agent cannot approve its own work nor a phase running alongside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::approvals::ApprovalDecision;
use super::context::Run;
use super::observe::{observe, scene};
use super::state::{LiveAttempt, Receipt};
use crate::event::{GateReport, GateStatus};
use crate::verify::gates::resolve_outputs;
use crate::verify::judge::Inspection;
use crate::workspace::Snapshot;

/// The environment variable that names the socket.
pub(crate) const SOCKET_ENV: &str = "HELIXFLOW_VERIFY_SOCKET";

/// What a client asks the run.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "kebab-case")]
pub(crate) enum ControlRequest {
    /// `helixflow verify`: check an attempt's work now.
    Verify(VerifyRequest),
    /// `helixflow approve` / `helixflow reject`: decide a phase waiting at an `approval` gate.
    Decide(DecideRequest),
}

/// A decision from `helixflow approve` or `helixflow reject`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DecideRequest {
    /// The phase waiting for approval.
    pub phase: String,
    /// The decision.
    pub decision: ApprovalDecision,
}

/// The run's answer to a decision.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DecideResponse {
    /// The attempt decided, when the decision was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Why the decision was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A request from `helixflow verify`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct VerifyRequest {
    /// The phase to check.
    pub phase: String,
    /// The attempt the caller belongs to.
    pub attempt: u32,
}

/// The engine's answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct VerifyResponse {
    /// Whether every gate passed.
    pub success: bool,
    /// Each gate's result, in order.
    pub gates: Vec<GateReport>,
    /// Set when the request could not be served (no such phase running, a stale attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The longest socket path `sun_path` holds (108 bytes with the closing NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Where the run listens: `control.sock` in the run's folder, so that a run that is killed leaves
/// it there rather than in a shared folder; in the temporary folder, named after the process and
/// the run, when that path is too long for a socket.
pub(crate) fn socket_path(run_dir: &Path, run_id: &str) -> PathBuf {
    socket_path_of(run_dir, run_id, std::process::id())
}

/// Where the run `run_id`, whose helixflow is process `pid`, listens.
pub(crate) fn socket_path_of(run_dir: &Path, run_id: &str, pid: u32) -> PathBuf {
    let in_run = run_dir.join("control.sock");
    // Absolute, since agents may run somewhere else.
    if in_run.is_absolute() && in_run.as_os_str().len() <= MAX_SOCKET_PATH {
        return in_run;
    }
    std::env::temp_dir().join(format!("helixflow-{pid}-{run_id}.sock"))
}

/// Accepts `helixflow verify`, `approve` and `reject` connections until the run ends (the task
/// is aborted then).
pub(crate) async fn serve(listener: UnixListener, run: Arc<Run>) {
    // Whatever the run's children detach stays below the run, where `started_by_run` sees it.
    crate::process::tree::become_subreaper();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let run = run.clone();
        tokio::spawn(async move {
            let _ = answer(stream, &run).await;
        });
    }
}

async fn answer(stream: UnixStream, run: &Run) -> std::io::Result<()> {
    // Who connected, as the kernel saw it at `connect`.
    let peer = stream.peer_cred().ok().and_then(|cred| cred.pid());
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    // One request line; a client that sends more than a few KiB is not helixflow.
    BufReader::new(read.take(64 * 1024))
        .read_line(&mut line)
        .await?;
    let text = match serde_json::from_str::<ControlRequest>(&line) {
        Ok(ControlRequest::Verify(request)) => serde_json::to_string(&verify(run, &request).await)?,
        Ok(ControlRequest::Decide(request)) => serde_json::to_string(&decide(run, peer, request))?,
        Err(e) => serde_json::to_string(&refusal(format!("not a request helixflow knows: {e}")))?,
    };
    let mut text = text;
    text.push('\n');
    write.write_all(text.as_bytes()).await?;
    write.shutdown().await
}

/// Hands a decision to the phase waiting for it, unless a process the run started sent it.
fn decide(run: &Run, peer: Option<libc::pid_t>, request: DecideRequest) -> DecideResponse {
    let refused = |error: String| DecideResponse {
        attempt: None,
        error: Some(error),
    };
    let Some(peer) = peer else {
        return refused(
            "refused: the system does not say which process sent this decision, so it may come \
             from the run's own agents"
                .into(),
        );
    };
    match started_by_run(peer) {
        Some(false) => {}
        Some(true) => {
            return refused(format!(
                "refused: process {peer} was started by this run (an agent, a step or something \
                 they started); an approval must come from outside the run, such as your own shell"
            ));
        }
        None => {
            return refused(format!(
                "refused: cannot tell whether process {peer} was started by this run (it ended, \
                 or /proc cannot be read)"
            ));
        }
    }
    match run.state.approvals.decide(&request.phase, request.decision) {
        Ok(attempt) => DecideResponse {
            attempt: Some(attempt),
            error: None,
        },
        Err(error) => refused(error),
    }
}

/// Whether the run's process is an ancestor of `pid` (its parent, its parent's parent, …);
/// `None` when that cannot be told.
fn started_by_run(pid: libc::pid_t) -> Option<bool> {
    let me = libc::pid_t::try_from(std::process::id()).ok()?;
    if pid == me {
        // The run itself never asks.
        return Some(true);
    }
    crate::process::procfs::descends_from(pid, me)
}

fn refusal(error: String) -> VerifyResponse {
    VerifyResponse {
        success: false,
        gates: Vec::new(),
        error: Some(error),
    }
}

async fn verify(run: &Run, request: &VerifyRequest) -> VerifyResponse {
    let Some(id) = run.state.phases.id(&request.phase) else {
        return refusal(format!("no phase \"{}\"", request.phase));
    };
    let Some(live) = run.state.live.get(id) else {
        return refusal(format!(
            "phase \"{}\" has no attempt running now",
            request.phase
        ));
    };
    if live.attempt != request.attempt {
        return refusal(format!(
            "this is attempt {} of phase \"{}\", not attempt {}",
            live.attempt, request.phase, request.attempt
        ));
    }
    let phase = run.phase(id);
    let observed = match observe(run, phase, &live.workspace, live.before.as_ref(), true).await {
        Ok(observed) => observed,
        Err(e) => return refusal(format!("cannot read the workspace: {e}")),
    };
    let alongside = run.phases_alongside(id);
    let env = super::observe::env(run, phase);
    let number = live.receipts.lock().map_or(1, |r| r.len() + 1);
    let logs = live.dir.join(format!("verify-{number}"));
    if let Err(e) = std::fs::create_dir_all(&logs) {
        return refusal(format!("cannot write {}: {e}", logs.display()));
    }
    let scene = scene(run, &live.workspace, &env, &logs);
    let inspection = Inspection::for_receipt(
        &scene,
        phase,
        &observed.after,
        observed.changed(),
        &alongside,
    );
    let gates = inspection.judge(&mut |_| {}).await;
    let success = gates.iter().all(|g| g.status != GateStatus::Failed);
    let mut paths = resolve_outputs(&live.workspace, phase, &run.ctx.excluded);
    paths.extend(observed.changes.all().map(str::to_owned));
    paths.sort();
    paths.dedup();
    write_receipt(
        &live,
        number,
        success,
        &gates,
        &observed.after,
        &paths,
        &run.ctx.redactor,
    );
    if let Ok(mut receipts) = live.receipts.lock() {
        receipts.push(Receipt {
            success,
            gates: gates.clone(),
            snapshot: observed.after,
        });
    }
    VerifyResponse {
        success,
        gates,
        error: None,
    }
}

/// The receipt as a file: the result and the fingerprints (BLAKE3) of the phase's outputs and of
/// every file the attempt changed, as they were when it was written.
fn write_receipt(
    live: &LiveAttempt,
    number: usize,
    success: bool,
    gates: &[GateReport],
    snapshot: &Snapshot,
    paths: &[String],
    redactor: &crate::redact::Redactor,
) {
    let fingerprints: BTreeMap<&str, String> = paths
        .iter()
        .map(|path| {
            let hash = match snapshot.get(path) {
                Some(state) => blake3::Hash::from(state.hash).to_hex().to_string(),
                // An output the snapshot does not list (a gitignored folder) is hashed directly.
                None => std::fs::read(live.workspace.join(path)).map_or_else(
                    |_| "missing".to_owned(),
                    |bytes| blake3::hash(&bytes).to_hex().to_string(),
                ),
            };
            (path.as_str(), hash)
        })
        .collect();
    let receipt = serde_json::json!({
        "receipt": number,
        "success": success,
        "gates": gates,
        "fingerprints": fingerprints,
    });
    if let Ok(text) = redactor.to_json_pretty(&receipt) {
        let _ = std::fs::write(live.dir.join("receipt.json"), text);
    }
}
