//! The tier an attempt ran in: which attempt of the work it is, its agent, and the `attempt`
//! blocks that set it. Carried by `attempt-started`, kept in `run.json`, `JUnit` and `show`, and
//! counted by `helixflow runs --stats`.

use serde::{Deserialize, Serialize};

/// The tier of one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tier {
    /// The attempt of the work, from 1: a try after a transient failure repeats its attempt,
    /// and its tier.
    pub work_attempt: u32,
    /// The agent that did the work; none for a `run` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The `attempt` blocks that applied, as reports name them (`2`, `3..`, `defaults 2..`);
    /// empty when the phase's own settings did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<String>,
}
