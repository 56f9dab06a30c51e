//! What an `approval` gate asks and is answered, and who may answer it on the spot.

use serde::{Deserialize, Serialize};

/// Written by the engine into the attempt folder while it waits.
pub(crate) const REQUEST_FILE: &str = "approval-request.json";
/// Written by `helixflow approve` / `helixflow reject`.
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
#[derive(Debug, Serialize, Deserialize)]
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
