//! What an `approval` gate asks and is answered, and who may answer it on the spot.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// Written by the engine into the attempt folder while it waits: a record for people.
pub(crate) const REQUEST_FILE: &str = "approval-request.json";
/// Written by the engine once a decision is taken: a record for people, never read back. A
/// decision reaches the run only over its control socket (see `control`).
pub(crate) const DECISION_FILE: &str = "approval.json";

/// What the engine asks.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ApprovalRequest {
    /// The phase.
    pub phase: String,
    /// The attempt.
    pub attempt: u32,
    /// The gate's name.
    pub gate: String,
    /// The question.
    pub prompt: String,
}

/// A person's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ApprovalDecision {
    /// Approved or rejected.
    pub approved: bool,
    /// Why it was rejected (becomes feedback for the next attempt).
    #[serde(default)]
    pub reason: String,
    /// Who answered, from `$USER`.
    #[serde(default)]
    pub by: String,
}

/// Who answers an `approval` gate on the spot: a person at the terminal, asked by the command
/// line (the engine never reads the terminal). Without one, the run waits for `helixflow approve`
/// or `helixflow reject`.
pub(crate) trait Approver: Send + Sync {
    /// Shows `summary` and asks `question`; the answer, with a reason when rejected.
    fn ask(&self, summary: &str, question: &str) -> std::io::Result<ApprovalDecision>;
}

/// The phases waiting for `helixflow approve` or `helixflow reject` now, by name.
#[derive(Debug, Default)]
pub(crate) struct WaitingApprovals(Mutex<BTreeMap<String, Waiting>>);

#[derive(Debug)]
struct Waiting {
    attempt: u32,
    answer: oneshot::Sender<ApprovalDecision>,
}

impl WaitingApprovals {
    /// Notes that `phase` waits for a decision on `attempt`; the receiver gets it.
    pub(crate) fn wait(&self, phase: &str, attempt: u32) -> oneshot::Receiver<ApprovalDecision> {
        let (answer, receiver) = oneshot::channel();
        if let Ok(mut waiting) = self.0.lock() {
            waiting.insert(phase.to_owned(), Waiting { attempt, answer });
        }
        receiver
    }

    /// `phase` no longer waits (decided, or the run stopped).
    pub(crate) fn forget(&self, phase: &str) {
        if let Ok(mut waiting) = self.0.lock() {
            waiting.remove(phase);
        }
    }

    /// Hands `decision` to `phase`; the attempt it decided, or why it cannot.
    pub(crate) fn decide(&self, phase: &str, decision: ApprovalDecision) -> Result<u32, String> {
        let waiting = self.0.lock().ok().and_then(|mut w| w.remove(phase));
        let Some(waiting) = waiting else {
            return Err(format!("phase \"{phase}\" is not waiting for approval"));
        };
        let attempt = waiting.attempt;
        waiting
            .answer
            .send(decision)
            .map(|()| attempt)
            .map_err(|_| format!("phase \"{phase}\" stopped waiting for approval"))
    }
}
