//! JSON: tree-sitter-json tolerates comments (so `tsconfig.json` passes); a file without comments
//! must also be strict JSON: one value, no raw control characters in strings.

use tree_sitter::Tree;

use super::position::line_start;
use super::{Finding, Language, LanguageRules, parsed_findings};

/// JSON's rules on top of tree-sitter-json.
pub(super) struct Json;

impl LanguageRules for Json {
    /// The file is parsed with the `+` of its exponents read as `0` ([`json_exponent_signs`]).
    fn findings(&self, language: Language, text: &[u8], utf8: Option<&str>) -> Vec<Finding> {
        parsed_findings(language, &json_exponent_signs(text), utf8)
    }

    fn after_walk(
        &self,
        tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        json_findings(tree, text, tree_errors)
    }
}

/// tree-sitter-json's errors; when it accepts a file without comments, `serde_json`'s verdict on
/// strict JSON as well (several top-level values, an empty file, control characters in strings).
fn json_findings(tree: &Tree, text: &[u8], tree_errors: Vec<Finding>) -> Vec<Finding> {
    if !tree_errors.is_empty() {
        return tree_errors;
    }
    if has_comment(tree, text) {
        return tree_errors;
    }
    let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(text) else {
        return tree_errors;
    };
    let message = error.to_string();
    // Limits of serde_json, not errors in the file: very deep nesting and numbers beyond f64.
    if message.starts_with("recursion limit exceeded") || message.starts_with("number out of range")
    {
        return tree_errors;
    }
    let message = match message.rsplit_once(" at line ") {
        Some((head, _)) => head.to_owned(),
        None => message,
    };
    let byte = if error.is_eof() {
        text.len()
    } else {
        // serde_json's column is 1-based and counts bytes; 0 means the line break before the line.
        (line_start(text, error.line()) + error.column().saturating_sub(1)).min(text.len())
    };
    vec![Finding::new(byte, message)]
}

/// tree-sitter-json has no `+` in exponents (`1e+5`, which Python's `json.dumps` writes). The
/// `+` becomes a `0` before parsing (`1e05`), which keeps every byte's offset and changes no
/// verdict: inside strings and comments the content does not matter.
fn json_exponent_signs(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let sign_at = |i: usize| {
        text[i] == b'+'
            && i >= 2
            && matches!(text[i - 1], b'e' | b'E')
            && text[i - 2].is_ascii_digit()
            && text.get(i + 1).is_some_and(u8::is_ascii_digit)
    };
    if !(0..text.len()).any(sign_at) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        (0..text.len())
            .map(|i| if sign_at(i) { b'0' } else { text[i] })
            .collect(),
    )
}

/// Whether the tree holds a comment; iterative, as deep JSON makes a deep tree.
fn has_comment(tree: &Tree, text: &[u8]) -> bool {
    if !text.contains(&b'/') {
        return false;
    }
    let mut cursor = tree.walk();
    loop {
        if cursor.node().kind() == "comment" {
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

#[cfg(test)]
mod tests {
    use crate::verify::syntax::Language;
    use crate::verify::syntax::tests::messages;

    #[test]
    fn json_must_hold_one_value_unless_it_has_comments() {
        assert_eq!(
            messages(Language::Json, "{\"a\": 1}\n{\"b\": 2}\n"),
            vec![(2, 1, "trailing characters".to_owned())]
        );
        assert_eq!(
            messages(Language::Json, ""),
            vec![(1, 1, "EOF while parsing a value".to_owned())]
        );
        assert_eq!(
            messages(Language::Json, "// editor settings\n{\"a\": 1}\n"),
            vec![]
        );
        assert_eq!(
            messages(Language::Json, "[1e+5, 2E+10, 0.5e-3, \"e+1\"] // 3e+4\n"),
            vec![]
        );
        assert_eq!(
            messages(Language::Json, "[1e+]"),
            vec![(1, 3, "unexpected `e+`".to_owned())]
        );
        assert_eq!(messages(Language::Json, "[1e999]"), vec![]);
    }
}
