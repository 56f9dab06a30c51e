//! Rust: tree-sitter-rust's verdict, with rustc's parser as the second opinion on a file it
//! rejects: tree-sitter-rust does not know `try!` in 2015-edition crates, macro fragments written
//! `($ name : ty)` or `safe fn` in `unsafe extern` blocks. A file rustfmt parses (in the 2024 or
//! the 2015 edition) passes; where rustfmt is not installed, tree-sitter's errors stand.

use tree_sitter::Tree;

use super::{Finding, LanguageRules, confirm};

/// Rust's rules on top of tree-sitter-rust.
pub(super) struct Rust;

impl LanguageRules for Rust {
    fn after_walk(
        &self,
        _tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        if !tree_errors.is_empty() && confirm::rust_accepts(text) {
            return Vec::new();
        }
        tree_errors
    }
}
