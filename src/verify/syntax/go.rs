//! Go: tree-sitter-go's verdict, with `gofmt -e` (Go's own parser) as the second opinion on a
//! file it rejects; where gofmt is not installed, tree-sitter's errors stand.

use tree_sitter::Tree;

use super::{Finding, LanguageRules, confirm};

/// Go's rules on top of tree-sitter-go.
pub(super) struct Go;

impl LanguageRules for Go {
    fn after_walk(
        &self,
        _tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        if !tree_errors.is_empty() && confirm::go_accepts(text) {
            return Vec::new();
        }
        tree_errors
    }
}
