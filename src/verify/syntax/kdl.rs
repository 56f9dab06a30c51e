//! KDL: tree-sitter-kdl accepts KDL v1, KDL v2, mixtures of both and more besides. helixflow's own
//! KDL v2 parser decides; a file that declares `/- kdl-version 1`, or looks like KDL v1 (bare
//! `true`/`false`/`null`, `r"…"` strings: a Zellij configuration, say), is judged by
//! tree-sitter-kdl instead.

use std::sync::LazyLock;

use tree_sitter::Tree;

use super::{Finding, LanguageRules};
use crate::diagnostics::FileId;
use crate::diagnostics::rules;
use crate::language::kdl::limits::MAX_BYTES;
use crate::language::kdl::parse as kdl_parse;

/// KDL's rules: helixflow's KDL v2 parser, with tree-sitter-kdl for what it cannot judge.
pub(super) struct Kdl;

impl LanguageRules for Kdl {
    /// None: helixflow's KDL parser places its errors.
    fn precise_problem(&self, _tree: &Tree, _text: &[u8]) -> Option<Finding> {
        None
    }

    fn after_walk(
        &self,
        tree: &Tree,
        _text: &[u8],
        utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        kdl_findings(utf8, tree, tree_errors)
    }
}

/// How deep the tree of a KDL file may be for helixflow's KDL v2 parser to see it. That parser
/// recurses once per nested block and overflows a thread's stack (aborting the process) beyond
/// about 60 levels in a debug build; pipelines nest a handful.
const KDL_MAX_TREE_DEPTH: u32 = 64;

/// helixflow's KDL v2 parser (its messages name the exact place); tree-sitter-kdl, which also
/// knows KDL v1, for files the v2 parser cannot judge (too large, too deep, too slow, not UTF-8)
/// and for KDL v1 files.
fn kdl_findings(utf8: Option<&str>, tree: &Tree, tree_errors: Vec<Finding>) -> Vec<Finding> {
    let Some(text) = utf8 else {
        return tree_errors;
    };
    if text.len() > MAX_BYTES || tree_depth_exceeds(tree, KDL_MAX_TREE_DEPTH) {
        return tree_errors;
    }
    let Err(diagnostics) = kdl_parse::parse(text, FileId(0), kdl_parse::PARSE_BUDGET) else {
        return Vec::new();
    };
    if diagnostics
        .iter()
        .any(|d| d.rule == &rules::PARSE_BUDGET || d.rule == &rules::INPUT_LIMIT)
    {
        return tree_errors;
    }
    match declared_kdl_version(text) {
        Some(1) => return tree_errors,
        Some(_) => {}
        // tree-sitter-kdl accepts much that neither version allows (`node .0`, `()node`, badly
        // indented multi-line strings), so only a file that looks like KDL v1 gets its verdict.
        None if looks_like_kdl_v1(text) => return tree_errors,
        None => {}
    }
    diagnostics
        .into_iter()
        .map(|d| {
            let offset = d.span.offset.min(text.len());
            let token = &text[offset..(offset + d.span.len).min(text.len())];
            let message = match token {
                "true" | "false" | "null" => {
                    format!("`{token}` is KDL v1; KDL v2 writes `#{token}`")
                }
                _ => d.message,
            };
            Finding::new(offset, message)
        })
        .collect()
}

/// Whether any node of the tree lies deeper than `limit` levels below the root.
fn tree_depth_exceeds(tree: &Tree, limit: u32) -> bool {
    let mut cursor = tree.walk();
    loop {
        if cursor.depth() > limit {
            return true;
        }
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return false;
            }
        }
    }
}

/// The version a `/- kdl-version N` line at the top of the document declares.
fn declared_kdl_version(text: &str) -> Option<u8> {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//"))?;
    let rest = first
        .strip_prefix("/-")?
        .trim_start()
        .strip_prefix("kdl-version")?;
    match rest.trim() {
        "1" => Some(1),
        "2" => Some(2),
        _ => None,
    }
}

/// Marks only KDL v1 has: bare `true`/`false`/`null` and `r"…"` raw strings.
fn looks_like_kdl_v1(text: &str) -> bool {
    static V1: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r#"(^|[\s=(])(true|false|null)([\s;})]|$)|(^|\s)r#*""#)
            .expect("the pattern is valid")
    });
    V1.is_match(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::syntax::Language;
    use crate::verify::syntax::tests::messages;

    #[test]
    fn kdl_v1_passes_and_v2_errors_use_the_v2_parser() {
        assert_eq!(messages(Language::Kdl, "node true null r\"raw\"\n"), vec![]);
        assert_eq!(
            messages(Language::Kdl, "node #true {\n  child\n}\n"),
            vec![]
        );
        assert_eq!(
            messages(Language::Kdl, "/- kdl-version 2\nnode true\n"),
            vec![(2, 6, "`true` is KDL v1; KDL v2 writes `#true`".to_owned())]
        );
        // tree-sitter-kdl accepts this; neither KDL version does.
        assert_eq!(
            messages(Language::Kdl, "node .0\n"),
            vec![
                (1, 6, "Expected end of document".to_owned()),
                (1, 7, "Found invalid node name".to_owned()),
            ]
        );
        assert_eq!(
            messages(Language::Kdl, "node a=1 {\n"),
            vec![(1, 10, "this `{` is never closed".to_owned())]
        );
    }

    #[test]
    fn kdl_version_declaration_is_read_from_the_first_node() {
        assert_eq!(declared_kdl_version("// c\n/- kdl-version 1\nn\n"), Some(1));
        assert_eq!(declared_kdl_version("n\n/- kdl-version 2\n"), None);
        assert!(looks_like_kdl_v1("node key=true\n"));
        assert!(!looks_like_kdl_v1("node key=#true \"true\"\n"));
    }
}
