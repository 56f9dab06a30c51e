//! Bash: tree-sitter-bash takes a `\r` before a line break for blank space; bash takes it for part
//! of the word, so a file with Windows line endings is an error (outside quoted text and
//! here-documents, where a `\r` is data). tree-sitter-bash also rejects valid scripts (POSIX
//! `for i do`, `[ -x f; then`, where `[` is a command and `;` ends it): a script it rejects is
//! given to `bash -n`, and passes when bash accepts it.

use tree_sitter::Tree;

use super::{Encoding, Finding, LanguageRules, confirm};

/// Bash's rules on top of tree-sitter-bash.
pub(super) struct Bash;

impl LanguageRules for Bash {
    /// Shell scripts are bytes.
    fn encoding(&self, _text: &[u8], _had_bom: bool) -> Encoding {
        Encoding::Any
    }

    /// None: `case` items end in a lone `)`, so brackets do not pair up in Bash.
    fn precise_problem(&self, _tree: &Tree, _text: &[u8]) -> Option<Finding> {
        None
    }

    fn after_walk(
        &self,
        tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        // tree-sitter-bash rejects valid scripts (`for i do`, `[ -x f; then`); bash decides.
        let mut findings = if !tree_errors.is_empty() && confirm::bash_accepts(text) {
            Vec::new()
        } else {
            tree_errors
        };
        findings.extend(bash_carriage_return(tree, text));
        findings
    }
}

/// The first `\r` before a line break outside quoted text and here-documents. tree-sitter-bash
/// takes it for blank space; bash takes it for part of the word before it, so `then\r` is no
/// keyword (`bash -n` fails) and `cd dir\r` names another folder.
fn bash_carriage_return(tree: &Tree, text: &[u8]) -> Option<Finding> {
    let quoted = |byte: usize| {
        let mut node = tree.root_node().descendant_for_byte_range(byte, byte + 1);
        while let Some(n) = node {
            if matches!(
                n.kind(),
                "string" | "raw_string" | "ansi_c_string" | "translated_string" | "heredoc_body"
            ) {
                return true;
            }
            node = n.parent();
        }
        false
    };
    text.windows(2)
        .enumerate()
        .filter(|(_, pair)| *pair == b"\r\n")
        .map(|(i, _)| i)
        .find(|&i| !quoted(i))
        .map(|i| {
            Finding::new(
                i,
                "the file has Windows line endings (CRLF); bash reads \\r as part of the word",
            )
        })
}

#[cfg(test)]
mod tests {
    use crate::verify::syntax::tests::messages;
    use crate::verify::syntax::{Language, check};

    #[test]
    fn bash_windows_line_endings_are_errors() {
        let message =
            "the file has Windows line endings (CRLF); bash reads \\r as part of the word";
        assert_eq!(
            messages(Language::Bash, "if true; then\r\n  echo hi\r\nfi\r\n"),
            vec![(1, 14, message.to_owned())]
        );
        assert_eq!(
            messages(
                Language::Bash,
                "echo \"a\r\nb\"\ncat <<EOF\nx\r\nEOF\ncd dir\r\n"
            ),
            vec![(6, 7, message.to_owned())]
        );
        assert_eq!(
            messages(Language::Bash, "printf 'a\r\n'\necho \"\r\"\n"),
            vec![]
        );
    }

    #[test]
    fn bash_may_hold_any_bytes() {
        assert!(check(Language::Bash, b"echo '\xff'\n").is_empty());
    }
}
