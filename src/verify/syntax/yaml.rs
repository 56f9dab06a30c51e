//! YAML: tree-sitter-yaml reports an indentation error at the start of the enclosing mapping;
//! yaml-rust2 names the exact place, so its message is used when both reject the file. Duplicate
//! keys in a mapping are errors.

use std::collections::HashMap;

use tree_sitter::Tree;

use super::position::{byte_at, position};
use super::{Finding, LanguageRules, MAX_ERRORS};

/// YAML's rules: tree-sitter-yaml's verdict, placed and completed by yaml-rust2.
pub(super) struct Yaml;

impl LanguageRules for Yaml {
    /// None: yaml-rust2 places the error.
    fn precise_problem(&self, _tree: &Tree, _text: &[u8]) -> Option<Finding> {
        None
    }

    fn after_walk(
        &self,
        _tree: &Tree,
        _text: &[u8],
        utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        yaml_findings(utf8, tree_errors)
    }
}

/// tree-sitter-yaml decides whether the file parses; yaml-rust2 places the error precisely and
/// finds duplicate keys. yaml-rust2 alone would be too strict: it rejects flow sequences whose
/// closing bracket sits at the parent's indentation, which GitHub workflows use.
fn yaml_findings(utf8: Option<&str>, tree_errors: Vec<Finding>) -> Vec<Finding> {
    let Some(text) = utf8 else {
        return tree_errors;
    };
    let scan = scan_yaml(text);
    let mut out = scan.duplicates;
    match scan.error {
        Some(error) if !tree_errors.is_empty() => out.push(error),
        // An alias to an anchor that does not exist is an error for every YAML parser.
        Some(error) if error.message.contains("unknown anchor") => out.push(error),
        _ => out.extend(tree_errors),
    }
    out
}

struct YamlScan {
    duplicates: Vec<Finding>,
    error: Option<Finding>,
}

/// A mapping being read: its keys so far, and whether the next node is a key.
struct YamlMapping {
    keys: HashMap<(bool, String), usize>,
    expecting_key: bool,
}

/// Runs yaml-rust2's event parser (never its loader: the loader expands aliases, which a
/// "billion laughs" file turns into exponential memory).
fn scan_yaml(text: &str) -> YamlScan {
    use yaml_rust2::Event;
    use yaml_rust2::scanner::TScalarStyle;

    let mut scan = YamlScan {
        duplicates: Vec::new(),
        error: None,
    };
    let mut parser = yaml_rust2::parser::Parser::new_from_str(text);
    // One entry per open collection; None for a sequence.
    let mut stack: Vec<Option<YamlMapping>> = Vec::new();
    loop {
        let (event, mark) = match parser.next_token() {
            Ok(next) => next,
            Err(error) => {
                let mark = error.marker();
                let byte = byte_at(text, mark.line(), mark.col());
                scan.error = Some(Finding::new(byte, error.info().to_owned()));
                return scan;
            }
        };
        let key = match &event {
            Event::Scalar(value, style, ..) => {
                Some(Some((*style == TScalarStyle::Plain, value.clone())))
            }
            Event::Alias(_) | Event::SequenceStart(..) | Event::MappingStart(..) => Some(None),
            _ => None,
        };
        if let Some(key) = key
            && let Some(Some(mapping)) = stack.last_mut()
        {
            if mapping.expecting_key
                && let Some(key) = key
                && key.1 != "<<"
            {
                let byte = byte_at(text, mark.line(), mark.col());
                if let Some(&first) = mapping.keys.get(&key) {
                    scan.duplicates.push(Finding::new(
                        byte,
                        format!(
                            "duplicate key `{}` (first on line {})",
                            key.1,
                            position(text.as_bytes(), first).0
                        ),
                    ));
                } else {
                    mapping.keys.insert(key, byte);
                }
            }
            mapping.expecting_key = !mapping.expecting_key;
        }
        match event {
            Event::StreamEnd => return scan,
            Event::DocumentStart => stack.clear(),
            Event::MappingStart(..) => stack.push(Some(YamlMapping {
                keys: HashMap::new(),
                expecting_key: true,
            })),
            Event::SequenceStart(..) => stack.push(None),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            _ => {}
        }
        if scan.duplicates.len() >= MAX_ERRORS {
            return scan;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::verify::syntax::Language;
    use crate::verify::syntax::tests::messages;

    #[test]
    fn yaml_duplicate_keys_are_errors() {
        assert_eq!(
            messages(Language::Yaml, "a: 1\nb:\n  c: 1\n  c: 2\na: 3\n"),
            vec![
                (4, 3, "duplicate key `c` (first on line 3)".to_owned()),
                (5, 1, "duplicate key `a` (first on line 1)".to_owned()),
            ]
        );
        assert_eq!(
            messages(Language::Yaml, "- a: 1\n- a: 2\nx: &x {k: 1}\n"),
            vec![(
                3,
                1,
                "while parsing a block collection, did not find expected '-' indicator".to_owned()
            )]
        );
    }

    #[test]
    fn yaml_error_is_placed_by_yaml_rust2() {
        assert_eq!(
            messages(Language::Yaml, "a: 1\n b: 2\n"),
            vec![(
                2,
                3,
                "mapping values are not allowed in this context".to_owned()
            )]
        );
    }
}
