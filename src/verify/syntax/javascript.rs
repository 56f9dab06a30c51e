//! JavaScript, TypeScript and TSX: a JSX closing tag must match its opening tag; objects have no
//! holes (`{a: 1,, b: 2}`).

use std::sync::LazyLock;

use regex::bytes::Regex;
use tree_sitter::{Node, Tree};

use super::{ExtraCheck, Finding, LanguageRules, confirm};

/// The rules of JavaScript and TypeScript (TSX included) on top of their tree-sitter grammars.
pub(super) struct JavaScript {
    /// Plain JavaScript: Node.js, when installed, is the second opinion on a file tree-sitter
    /// rejects. Node cannot read TypeScript.
    pub(super) node_confirms: bool,
}

impl LanguageRules for JavaScript {
    fn after_walk(
        &self,
        _tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        if self.node_confirms && !tree_errors.is_empty() && confirm::node_accepts(text) {
            return Vec::new();
        }
        tree_errors
    }

    fn extra_kinds(&self) -> &'static [&'static str] {
        &["jsx_element", "object", "object_pattern"]
    }

    fn extra_check(&self, text: &[u8]) -> Option<ExtraCheck> {
        js_may_need_checks(text).then_some(js_rejects as ExtraCheck)
    }
}

/// Whether the text has what [`js_rejects`] looks for: a JSX closing tag, or a comma after `{`
/// or after another comma. Most files have neither and skip the walk over every node.
fn js_may_need_checks(text: &[u8]) -> bool {
    static SUSPECT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"</|[{,]\s*,").expect("the pattern is valid"));
    SUSPECT.is_match(text)
}

/// What tree-sitter-javascript and -typescript accept but JavaScript engines reject.
fn js_rejects(node: Node, text: &[u8]) -> Option<Finding> {
    match node.kind() {
        "jsx_element" => jsx_tag_mismatch(node, text),
        "object" | "object_pattern" => object_hole(node),
        _ => None,
    }
}

/// `{a: 1,, b: 2}`: the grammars allow holes in objects as in arrays; objects have none.
fn object_hole(node: Node) -> Option<Finding> {
    let mut cursor = node.walk();
    let mut previous = "";
    for child in node.children(&mut cursor) {
        if child.is_extra() {
            continue;
        }
        let kind = child.kind();
        if kind == "," && matches!(previous, "," | "{") {
            return Some(Finding::new(child.start_byte(), "unexpected `,`"));
        }
        previous = kind;
    }
    None
}

/// `<div>…</span>`: tree-sitter accepts it, every JSX compiler rejects it.
fn jsx_tag_mismatch(node: Node, text: &[u8]) -> Option<Finding> {
    let name = |field: &str| {
        let tag = node.child_by_field_name(field)?;
        tag.child_by_field_name("name")
            .map(|n| &text[n.byte_range()])
    };
    let (open, close) = (name("open_tag")?, name("close_tag")?);
    (open != close).then(|| {
        let close_tag = node.child_by_field_name("close_tag").unwrap_or(node);
        Finding::new(
            close_tag.start_byte(),
            format!(
                "closing tag `</{}>` does not match `<{}>`",
                String::from_utf8_lossy(close),
                String::from_utf8_lossy(open)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::verify::syntax::Language;
    use crate::verify::syntax::tests::messages;

    #[test]
    fn object_holes_are_errors() {
        assert_eq!(
            messages(Language::JavaScript, "const o = {a: 1,, b: 2};\n"),
            vec![(1, 17, "unexpected `,`".to_owned())]
        );
        assert_eq!(
            messages(Language::TypeScript, "const {, a} = o;\n"),
            vec![(1, 8, "unexpected `,`".to_owned())]
        );
        assert_eq!(
            messages(Language::JavaScript, "const a = [1,, 2]; f(a, b);\n"),
            vec![]
        );
    }

    #[test]
    fn jsx_closing_tag_must_match() {
        assert_eq!(
            messages(Language::Tsx, "const a = <div>hi</span>;\n"),
            vec![(
                1,
                18,
                "closing tag `</span>` does not match `<div>`".to_owned()
            )]
        );
        assert_eq!(
            messages(Language::JavaScript, "const a = <a.b>hi</a.b>;\n"),
            vec![]
        );
    }
}
