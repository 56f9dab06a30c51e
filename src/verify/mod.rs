//! Verification: the gates, tree-sitter syntax checks, sub-agent review and feedback.

mod context;
pub(crate) mod feedback;
pub(crate) mod gates;
pub(crate) mod subagent;
pub(crate) mod syntax;
