//! JavaScript, TypeScript and TSX: a JSX closing tag must match its opening tag; objects have no
//! holes (`{a: 1,, b: 2}`). Where the grammars reject valid code: a JavaScript file is given to
//! `node --check`; a TypeScript file is parsed again with the forms tree-sitter-typescript 0.23
//! does not know put in words it knows (`import("m").T<X>` types, which `tsc` writes into every
//! declaration file that names another module's type; `keyof readonly T[]`; `export type *`).

use std::sync::LazyLock;

use regex::bytes::Regex;
use tree_sitter::{Node, Tree};

use super::{ExtraCheck, Finding, Language, LanguageRules, confirm, parse};

/// The rules of JavaScript and TypeScript (TSX included) on top of their tree-sitter grammars.
pub(super) struct JavaScript {
    /// Which of the three: Node.js, when installed, is the second opinion on a JavaScript file
    /// tree-sitter rejects (Node cannot read TypeScript); TypeScript gets the second parse.
    pub(super) language: Language,
}

impl LanguageRules for JavaScript {
    fn after_walk(
        &self,
        _tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        if tree_errors.is_empty() {
            return tree_errors;
        }
        let valid = match self.language {
            Language::JavaScript => confirm::node_accepts(text),
            language => typescript_gaps_masked(text)
                .and_then(|masked| parse(language, &masked).ok())
                .is_some_and(|tree| !tree.root_node().has_error()),
        };
        if valid { Vec::new() } else { tree_errors }
    }

    fn extra_kinds(&self) -> &'static [&'static str] {
        &["jsx_element", "object", "object_pattern"]
    }

    fn extra_check(&self, text: &[u8]) -> Option<ExtraCheck> {
        js_may_need_checks(text).then_some(js_rejects as ExtraCheck)
    }
}

/// The text with the valid TypeScript that tree-sitter-typescript 0.23 rejects put in forms it
/// accepts, byte for byte in place (so that nothing else moves); None when there is none. Each
/// form is replaced by one TypeScript reads the same way: `import("m").T` by a qualified name
/// (`____________.T`), `keyof readonly T[]` by `keyof T[]`, `export type *` by `export *`.
fn typescript_gaps_masked(text: &[u8]) -> Option<Vec<u8>> {
    static GAPS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"(?P<import>\bimport\(\s*(?:"[^"\n]*"|'[^'\n]*')\s*\))\s*\.|\bkeyof\s+(?P<readonly>readonly)\b|\bexport\s+(?P<type>type)\s*\*"#,
        )
        .expect("the pattern is valid")
    });
    let mut masked: Option<Vec<u8>> = None;
    for found in GAPS.captures_iter(text) {
        let out = masked.get_or_insert_with(|| text.to_vec());
        if let Some(import) = found.name("import") {
            out[import.range()].fill(b'_');
        }
        for word in ["readonly", "type"] {
            if let Some(word) = found.name(word) {
                out[word.range()].fill(b' ');
            }
        }
    }
    masked
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
