//! Verification: the gates, tree-sitter syntax checks, workspace snapshots and feedback.

pub mod feedback;
pub mod gates;
pub mod snapshot;
pub mod subagent;
pub mod syntax;
