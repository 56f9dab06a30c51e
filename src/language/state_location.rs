//! Where a pipeline keeps its runs, read from a file that may not parse: `helixflow runs` and
//! `helixflow show` must keep working while the pipeline file is being edited.

use kdl::KdlDocument;

use super::kdl::lexer::{self, TokenKind};

/// The `workspace` and `state-dir` settings of a file's `pipeline` node, as far as they can be
/// read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StateLocation {
    /// `workspace PATH`, when the pipeline sets it.
    pub workspace: Option<String>,
    /// `state-dir PATH`, when the pipeline sets it.
    pub state_dir: Option<String>,
}

/// Reads `workspace` and `state-dir` from the children of the top-level `pipeline` node using
/// the tokens alone, so that a syntax error anywhere else does not hide them. A node commented
/// out with `/-` is not read; when a setting is given twice, the last one holds, as in a run.
pub(crate) fn state_location(text: &str) -> StateLocation {
    // A name is written out whole, or spelled with escapes (`"work\u{73}pace"`): a file with
    // neither sets neither, and need not be lexed (a pipeline of 1,000 phases takes a
    // millisecond).
    if !text.contains('\\') && !text.contains("workspace") && !text.contains("state-dir") {
        return StateLocation::default();
    }
    let mut location = StateLocation::default();
    // Whether each open children block is the (top-level, not commented-out) `pipeline` node's,
    // outermost first.
    let mut blocks: Vec<bool> = Vec::new();
    // Whether the node being read is such a `pipeline` node.
    let mut node: Option<bool> = None;
    let mut at_node_start = true;
    let mut commented_out = false;
    // The setting whose first argument comes next.
    let mut setting: Option<String> = None;
    for token in lexer::tokens(text) {
        let source = token.text(text);
        match token.kind {
            TokenKind::Whitespace
            | TokenKind::LineComment
            | TokenKind::BlockComment { .. }
            | TokenKind::Continuation => {}
            TokenKind::Newline | TokenKind::Semicolon => {
                (node, setting, at_node_start, commented_out) = (None, None, true, false);
            }
            TokenKind::OpenBrace => {
                blocks.push(node.take().unwrap_or(false));
                (setting, at_node_start, commented_out) = (None, true, false);
            }
            TokenKind::CloseBrace => {
                blocks.pop();
                (node, setting, at_node_start, commented_out) = (None, None, true, false);
            }
            TokenKind::Slashdash if at_node_start => commented_out = true,
            kind if at_node_start => {
                at_node_start = false;
                let name = string_value(kind, source)
                    .map_or(std::borrow::Cow::Borrowed(source), std::borrow::Cow::Owned);
                let in_pipeline = blocks.len() == 1 && blocks[0];
                if in_pipeline && !commented_out && (name == "workspace" || name == "state-dir") {
                    setting = Some(name.clone().into_owned());
                }
                // A commented-out node's block belongs to no node that counts.
                node = Some(!commented_out && name == "pipeline");
            }
            kind => {
                if let Some(name) = setting.take()
                    && let Some(value) = string_value(kind, source)
                {
                    match name.as_str() {
                        "workspace" => location.workspace = Some(value),
                        _ => location.state_dir = Some(value),
                    }
                }
            }
        }
    }
    location
}

/// The value of a string token (quoted, raw or multi-line), its escapes decoded; None for any
/// other token, or a string that is not valid.
fn string_value(kind: TokenKind, source: &str) -> Option<String> {
    if !matches!(
        kind,
        TokenKind::String { terminated: true }
            | TokenKind::RawString { terminated: true }
            | TokenKind::MultiLineString { terminated: true }
    ) {
        return None;
    }
    let document = KdlDocument::parse_v2(&format!("n {source}")).ok()?;
    let entry = document.nodes().first()?.entries().first()?;
    entry.value().as_string().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(workspace: Option<&str>, state_dir: Option<&str>) -> StateLocation {
        StateLocation {
            workspace: workspace.map(str::to_owned),
            state_dir: state_dir.map(str::to_owned),
        }
    }

    #[test]
    fn settings_are_read_despite_syntax_errors_elsewhere() {
        let text = "pipeline \"p\" {\n    workspace \"../ws\"\n    state-dir \"st\\u{61}te\"\n}\nphase \"a\" { run \"true\" \n";
        assert_eq!(state_location(text), location(Some("../ws"), Some("state")));
    }

    #[test]
    fn only_the_pipeline_nodes_own_settings_count() {
        let text = "/-pipeline \"x\" {\n    state-dir \"no1\"\n}\npipeline \"p\" { /-state-dir \"no2\"; state-dir #\"st\"#; }\nphase \"state-dir\" {\n    state-dir \"no3\"\n    vars { workspace \"no4\"; }\n}\n";
        assert_eq!(state_location(text), location(None, Some("st")));
        assert_eq!(state_location("pipeline \"p\"\n"), StateLocation::default());
    }

    /// Names spelled with escapes are read (a file without an escape or either name written out
    /// is not lexed at all).
    #[test]
    fn names_spelled_with_escapes_count() {
        let text =
            "pipeline \"p\" {\n    \"work\\u{73}pace\" \"ws\"\n    \"state\\u{2d}dir\" \"st\"\n}\n";
        assert_eq!(state_location(text), location(Some("ws"), Some("st")));
        let text = "pipeline \"p\" {\n    max-parallel 2\n}\nphase \"a\" { run \"true\"; }\n";
        assert_eq!(state_location(text), StateLocation::default());
    }

    #[test]
    fn the_last_setting_holds() {
        let text = "pipeline \"p\" {\n    state-dir \"a\"\n    state-dir \"b\"\n}\n";
        assert_eq!(state_location(text), location(None, Some("b")));
    }
}
