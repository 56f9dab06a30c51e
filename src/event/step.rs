//! The step an attempt is at, for progress displays and the journal: written as words (`agent`,
//! `verify`, `awaiting approval: helixflow approve …`), read back into the same step.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What an attempt is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Taking the snapshot of the workspace before the attempt.
    Snapshot,
    /// The agent runs.
    Agent,
    /// A `run` step's command runs.
    Run,
    /// The snapshot after the attempt, then the gates.
    Verify,
    /// The sub-agent verifier reviews the work: its `round` of at most `of`.
    SubAgentVerification {
        /// Counting from 1.
        round: u32,
        /// How many reviews a void one allows.
        of: u32,
    },
    /// Waiting for a person: `command` is what answers it.
    AwaitingApproval {
        /// `helixflow approve RUN PHASE (or helixflow reject …)`.
        command: String,
    },
    /// Applying an isolated attempt's worktree to the workspace.
    Apply,
    /// A step this version does not know (a journal written by another version).
    Other(String),
}

/// How the words of [`Step::AwaitingApproval`] begin.
const AWAITING_APPROVAL: &str = "awaiting approval: ";

/// How the words of a later [`Step::SubAgentVerification`] begin.
const SUB_AGENT: &str = "sub-agent verification";

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Snapshot => f.write_str("snapshot"),
            Self::Agent => f.write_str("agent"),
            Self::Run => f.write_str(super::RUN_STEP),
            Self::Verify => f.write_str("verify"),
            Self::SubAgentVerification { round: 1, .. } => f.write_str(SUB_AGENT),
            Self::SubAgentVerification { round, of } => {
                write!(f, "{SUB_AGENT} (again, {round} of {of})")
            }
            Self::AwaitingApproval { command } => write!(f, "{AWAITING_APPROVAL}{command}"),
            Self::Apply => f.write_str("apply"),
            Self::Other(words) => f.write_str(words),
        }
    }
}

impl From<&str> for Step {
    fn from(words: &str) -> Self {
        match words {
            "snapshot" => return Self::Snapshot,
            "agent" => return Self::Agent,
            super::RUN_STEP => return Self::Run,
            "verify" => return Self::Verify,
            SUB_AGENT => return Self::SubAgentVerification { round: 1, of: 1 },
            "apply" => return Self::Apply,
            _ => {}
        }
        if let Some(command) = words.strip_prefix(AWAITING_APPROVAL) {
            return Self::AwaitingApproval {
                command: command.to_owned(),
            };
        }
        let again = words
            .strip_prefix(SUB_AGENT)
            .and_then(|rest| rest.strip_prefix(" (again, "))
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|rest| rest.split_once(" of "))
            .and_then(|(round, of)| Some((round.parse().ok()?, of.parse().ok()?)));
        match again {
            Some((round, of)) => Self::SubAgentVerification { round, of },
            None => Self::Other(words.to_owned()),
        }
    }
}

impl Step {
    /// The step with `redact` applied to the words it carries from outside (a phase's name in
    /// a command).
    pub(crate) fn redacted(self, redact: impl Fn(String) -> String) -> Self {
        match self {
            Self::AwaitingApproval { command } => Self::AwaitingApproval {
                command: redact(command),
            },
            Self::Other(words) => Self::Other(redact(words)),
            step => step,
        }
    }
}

impl Serialize for Step {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let words = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::from(&*words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_reads_back_as_itself() {
        let steps = [
            Step::Snapshot,
            Step::Agent,
            Step::Run,
            Step::Verify,
            Step::SubAgentVerification { round: 2, of: 2 },
            Step::AwaitingApproval {
                command: "helixflow approve 1 docs".into(),
            },
            Step::Apply,
            Step::Other("gate tests".into()),
        ];
        for step in steps {
            let json = serde_json::to_string(&step).unwrap();
            assert_eq!(serde_json::from_str::<Step>(&json).unwrap(), step, "{json}");
        }
        assert_eq!(
            Step::SubAgentVerification { round: 1, of: 2 }.to_string(),
            "sub-agent verification"
        );
    }
}
