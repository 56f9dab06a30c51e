//! Edits the server proposes: formatting (the same as `helixflow fmt`) and the quick fixes that
//! diagnostics carry.

use std::collections::HashMap;
use std::time::Duration;

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, Range, TextEdit, Uri, WorkspaceEdit,
};

use super::check::Finding;
use super::position::LineIndex;
use crate::diagnostics::FileId;
use crate::language::format::format_source;
use crate::language::kdl::parse;

/// How long the parse before formatting may take.
const PARSE_BUDGET: Duration = Duration::from_secs(2);

/// How long the line diff between the text and its formatted form may search for the smallest
/// edits before it settles for larger ones.
const DIFF_BUDGET: Duration = Duration::from_millis(500);

/// The edits that format `text` as `helixflow fmt` does: none when it is formatted already, and
/// `None` when it does not parse (`fmt` refuses such text too).
pub(crate) fn format(text: &str) -> Option<Vec<TextEdit>> {
    parse::parse(text, FileId(0), PARSE_BUDGET).ok()?;
    let formatted = format_source(text);
    if formatted == text {
        return Some(Vec::new());
    }
    // Only the lines that change are replaced, so the editor keeps the cursor and folds.
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_BUDGET)
        .diff_lines(text, formatted.as_str());
    let old: Vec<&str> = diff.iter_old_slices().collect();
    let new: Vec<&str> = diff.iter_new_slices().collect();
    let mut old_offsets = Vec::with_capacity(old.len() + 1);
    let mut at = 0;
    for line in &old {
        old_offsets.push(at);
        at += line.len();
    }
    old_offsets.push(at);
    let index = LineIndex::new(text);
    let edits = diff
        .ops()
        .iter()
        .filter_map(|op| {
            let (tag, old_lines, new_lines) = op.as_tag_tuple();
            if tag == similar::DiffTag::Equal {
                return None;
            }
            let start = old_offsets[old_lines.start];
            let end = old_offsets[old_lines.end];
            Some(TextEdit::new(
                index.range(start, end),
                new[new_lines].concat(),
            ))
        })
        .collect();
    Some(edits)
}

/// The quick fixes of the findings whose ranges touch `range`.
pub(crate) fn quick_fixes<'f>(
    findings: impl IntoIterator<Item = &'f Finding>,
    range: Range,
) -> Vec<CodeActionOrCommand> {
    findings
        .into_iter()
        .filter(|f| touches(f.diagnostic.range, range))
        .filter_map(|finding| {
            let fix = finding.fix.as_ref()?;
            let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
            for (uri, edit) in &fix.edits {
                changes.entry(uri.clone()).or_default().push(edit.clone());
            }
            Some(CodeActionOrCommand::CodeAction(CodeAction {
                title: fix.title.clone(),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![finding.diagnostic.clone()]),
                edit: Some(WorkspaceEdit {
                    changes: Some(changes),
                    ..WorkspaceEdit::default()
                }),
                is_preferred: Some(true),
                ..CodeAction::default()
            }))
        })
        .collect()
}

/// Whether two ranges overlap or touch (a cursor at either end of a diagnostic counts).
fn touches(a: Range, b: Range) -> bool {
    a.start <= b.end && b.start <= a.end
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies edits made against `text` (last first, as they do not overlap).
    fn apply(text: &str, edits: &[TextEdit]) -> String {
        let index = LineIndex::new(text);
        let mut spans: Vec<_> = edits
            .iter()
            .map(|e| {
                (
                    index.offset(e.range.start),
                    index.offset(e.range.end),
                    &e.new_text,
                )
            })
            .collect();
        spans.sort_by_key(|s| std::cmp::Reverse(s.0));
        let mut out = text.to_owned();
        for (start, end, new) in spans {
            out.replace_range(start..end, new);
        }
        out
    }

    #[test]
    fn formats_like_fmt_with_line_edits() {
        let text = "pipeline   \"p\"\n// keep\nphase \"a\"  {\n  run \"x\"\n}\n";
        let edits = format(text).unwrap();
        assert!(!edits.is_empty());
        assert_eq!(apply(text, &edits), format_source(text));
        // The comment line is unchanged, so no edit touches it.
        assert!(
            edits
                .iter()
                .all(|e| e.range.start.line != 1 || e.range.end.line == 1)
        );
        let formatted = format_source(text);
        assert_eq!(format(&formatted), Some(Vec::new()));
    }

    #[test]
    fn text_that_does_not_parse_is_not_formatted() {
        assert_eq!(format("phase \"a\" {"), None);
        assert_eq!(format("phase \"a"), None);
    }
}
