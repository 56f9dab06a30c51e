//! The kinds of check a gate report can come from: the implicit `outputs`, `scope` and `protect`
//! gates, and every kind of declared gate. What helixflow says about each kind (its feedback,
//! how to fix it) lives with the gate, in `verify/gates/<kind>.rs`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::GateKind;

/// The kind of a gate, as reports carry it. Its name is the keyword the gate is written with
/// (`front-matter`, `paths-exist`, …), and the implicit gates are named after their kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// The phase's expected outputs exist (implicit).
    Outputs,
    /// Every change is inside the phase's `scope` (implicit).
    Scope,
    /// Protected files stay byte-identical (implicit).
    Protect,
    /// Files parse.
    Syntax,
    /// A shell command exits 0.
    Command,
    /// A regex matches the response or files.
    Matches,
    /// A regex matches nowhere in the response or files.
    Absent,
    /// A document's front matter has every key.
    FrontMatter,
    /// A Markdown document has every heading.
    Sections,
    /// Every path listed in a document exists.
    PathsExist,
    /// The attempt changed enough files.
    Changes,
    /// A person approves.
    Approval,
}

impl CheckKind {
    /// Every kind, in the order gates are documented.
    pub(crate) const ALL: [Self; 12] = [
        Self::Outputs,
        Self::Scope,
        Self::Protect,
        Self::Syntax,
        Self::Command,
        Self::Matches,
        Self::Absent,
        Self::FrontMatter,
        Self::Sections,
        Self::PathsExist,
        Self::Changes,
        Self::Approval,
    ];

    /// The kind's name, as reports, journals, `run.json` and `JUnit` write it.
    #[must_use]
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Outputs => "outputs",
            Self::Scope => "scope",
            Self::Protect => "protect",
            Self::Syntax => "syntax",
            Self::Command => "command",
            Self::Matches => "matches",
            Self::Absent => "absent",
            Self::FrontMatter => "front-matter",
            Self::Sections => "sections",
            Self::PathsExist => "paths-exist",
            Self::Changes => "changes",
            Self::Approval => "approval",
        }
    }

    /// The kind with this name; None for a name no kind has.
    #[must_use]
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The kind of a declared gate.
    #[must_use]
    pub(crate) const fn of(gate: &GateKind) -> Self {
        match gate {
            GateKind::Syntax { .. } => Self::Syntax,
            GateKind::Command { .. } => Self::Command,
            GateKind::Matches { .. } => Self::Matches,
            GateKind::Absent { .. } => Self::Absent,
            GateKind::FrontMatter { .. } => Self::FrontMatter,
            GateKind::Sections { .. } => Self::Sections,
            GateKind::PathsExist { .. } => Self::PathsExist,
            GateKind::Changes { .. } => Self::Changes,
            GateKind::Approval { .. } => Self::Approval,
        }
    }
}

impl fmt::Display for CheckKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a gate report comes from: a gate of some kind, or one of the verdicts that are reported
/// like gates (the `self` mode, the sub-agent verifier, applying an isolated attempt's worktree).
/// It is written as its name in reports, journals, `run.json` and `JUnit`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReportKind {
    /// A gate of this kind.
    Gate(CheckKind),
    /// The `self` verify mode: the agent's last `helixflow verify` receipt.
    SelfCheck,
    /// The sub-agent verifier's verdict.
    SubAgent,
    /// Applying an isolated attempt's worktree back to the workspace.
    Worktree,
    /// The lint of a planner's file of phases (`generates`).
    Phases,
    /// A name this version does not know (a journal written by another version).
    Unknown(String),
}

impl ReportKind {
    /// The kind's name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Gate(kind) => kind.as_str(),
            Self::SelfCheck => "self",
            Self::SubAgent => "sub-agent",
            Self::Worktree => "worktree",
            Self::Phases => "phases",
            Self::Unknown(name) => name,
        }
    }

    /// The kind with this name.
    #[must_use]
    pub fn from_name(name: &str) -> Self {
        match name {
            "self" => Self::SelfCheck,
            "sub-agent" => Self::SubAgent,
            "worktree" => Self::Worktree,
            "phases" => Self::Phases,
            name => CheckKind::from_name(name)
                .map_or_else(|| Self::Unknown(name.to_owned()), Self::Gate),
        }
    }
}

impl From<CheckKind> for ReportKind {
    fn from(kind: CheckKind) -> Self {
        Self::Gate(kind)
    }
}

impl From<&str> for ReportKind {
    fn from(name: &str) -> Self {
        Self::from_name(name)
    }
}

impl fmt::Display for ReportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ReportKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl Serialize for ReportKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ReportKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serialized_names_and_read_back() {
        for kind in CheckKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<CheckKind>(&json).unwrap(), kind);
            assert_eq!(CheckKind::from_name(kind.as_str()), Some(kind));
            let report = ReportKind::Gate(kind);
            assert_eq!(serde_json::to_string(&report).unwrap(), json);
            assert_eq!(serde_json::from_str::<ReportKind>(&json).unwrap(), report);
        }
        assert_eq!(CheckKind::from_name("lint"), None);
    }
}
