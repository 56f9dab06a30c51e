//! Verification: the gates, tree-sitter syntax checks, sub-agent review and feedback.

mod context;
pub mod feedback;
pub mod gates;
pub mod subagent;
pub mod syntax;
