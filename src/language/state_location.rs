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
    let mut location = StateLocation::default();
    // The names of the nodes whose children block is open, outermost first.
    let mut blocks: Vec<String> = Vec::new();
    let mut node: Option<String> = None;
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
                blocks.push(node.take().unwrap_or_default());
                (setting, at_node_start, commented_out) = (None, true, false);
            }
            TokenKind::CloseBrace => {
                blocks.pop();
                (node, setting, at_node_start, commented_out) = (None, None, true, false);
            }
            TokenKind::Slashdash if at_node_start => commented_out = true,
            _ if at_node_start => {
                at_node_start = false;
                let name = string_value(token.kind, source).unwrap_or_else(|| source.to_owned());
                let in_pipeline = blocks.len() == 1 && blocks[0] == "pipeline";
                if in_pipeline && !commented_out && (name == "workspace" || name == "state-dir") {
                    setting = Some(name.clone());
                }
                // A commented-out node's block belongs to no node that counts.
                node = Some(if commented_out { String::new() } else { name });
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

    #[test]
    fn the_last_setting_holds() {
        let text = "pipeline \"p\" {\n    state-dir \"a\"\n    state-dir \"b\"\n}\n";
        assert_eq!(state_location(text), location(None, Some("b")));
    }
}
