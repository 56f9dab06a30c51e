//! Verification: the gates, tree-sitter syntax checks, sub-agent review and feedback.

pub(crate) mod feedback;
pub(crate) mod gates;
pub(crate) mod judge;
pub(crate) mod subagent;
pub(crate) mod syntax;
