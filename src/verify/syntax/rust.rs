//! Rust: tree-sitter-rust's verdict says it all; the generic check places an unclosed bracket.

use super::LanguageRules;

/// Rust adds nothing to the generic check.
pub(super) struct Rust;

impl LanguageRules for Rust {}
