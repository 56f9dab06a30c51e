//! The json format: an array with one object per diagnostic.

use std::io::{self, Write};

use serde::Serialize;

use super::{Range, non_empty};
use crate::diagnostics::{Diagnostic, Fix, Severity, Sources, Span};

/// A place in a file: byte offsets for tools, lines and columns for people.
#[derive(Serialize)]
struct JsonLocation {
    file: String,
    offset: usize,
    length: usize,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
}

impl JsonLocation {
    fn new(sources: &Sources, span: Span) -> Self {
        let file = sources.get(span.file);
        let range = Range::of(file, span);
        Self {
            file: file.path.display().to_string(),
            offset: span.offset,
            length: span.len,
            line: range.line,
            column: range.column,
            end_line: range.end_line,
            end_column: range.end_column,
        }
    }
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'static str,
    name: &'static str,
    severity: Severity,
    message: &'a str,
    #[serde(flatten)]
    location: JsonLocation,
    label: Option<&'a str>,
    help: Option<&'a str>,
    notes: Vec<JsonNote<'a>>,
    fix: Option<JsonFix<'a>>,
}

#[derive(Serialize)]
struct JsonNote<'a> {
    #[serde(flatten)]
    location: JsonLocation,
    label: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonFix<'a> {
    title: &'a str,
    edits: Vec<JsonEdit<'a>>,
}

#[derive(Serialize)]
struct JsonEdit<'a> {
    #[serde(flatten)]
    location: JsonLocation,
    text: &'a str,
}

impl<'a> JsonDiagnostic<'a> {
    fn new(diagnostic: &'a Diagnostic, sources: &Sources) -> Self {
        Self {
            code: diagnostic.rule.code,
            name: diagnostic.rule.name,
            severity: diagnostic.severity,
            message: &diagnostic.message,
            location: JsonLocation::new(sources, diagnostic.span),
            label: non_empty(&diagnostic.label),
            help: non_empty(&diagnostic.help),
            notes: diagnostic
                .notes
                .iter()
                .map(|note| JsonNote {
                    location: JsonLocation::new(sources, note.span),
                    label: non_empty(&note.label),
                })
                .collect(),
            fix: diagnostic
                .fix
                .as_ref()
                .map(|fix| JsonFix::new(fix, sources)),
        }
    }
}

impl<'a> JsonFix<'a> {
    fn new(fix: &'a Fix, sources: &Sources) -> Self {
        Self {
            title: &fix.title,
            edits: fix
                .edits
                .iter()
                .map(|(span, text)| JsonEdit {
                    location: JsonLocation::new(sources, *span),
                    text,
                })
                .collect(),
        }
    }
}

pub(super) fn render_json(
    diagnostics: &[Diagnostic],
    sources: &Sources,
    out: &mut dyn Write,
) -> io::Result<()> {
    let report: Vec<_> = diagnostics
        .iter()
        .map(|diagnostic| JsonDiagnostic::new(diagnostic, sources))
        .collect();
    serde_json::to_writer_pretty(&mut *out, &report)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::Format;
    use super::super::tests::{example, parse, render_to_string};
    use crate::diagnostics::rules::UNKNOWN_NODE;

    #[test]
    fn json_has_byte_offsets_and_character_columns() {
        let (sources, diagnostics) = example();
        let json = parse(&render_to_string(Format::Json, &diagnostics, &sources));

        let unknown = &json[0];
        assert_eq!(unknown["code"], "HF101");
        assert_eq!(unknown["name"], "unknown-node");
        assert_eq!(unknown["severity"], "error");
        assert_eq!(unknown["message"], "unknown node");
        assert_eq!(unknown["file"], "demo.kdl");
        assert_eq!(unknown["offset"], 33);
        assert_eq!(unknown["length"], 9);
        assert_eq!([&unknown["line"], &unknown["column"]], [3, 5]);
        assert_eq!([&unknown["end_line"], &unknown["end_column"]], [3, 14]);
        assert_eq!(unknown["label"], "did you mean `depends-on`?");
        assert_eq!(unknown["help"], UNKNOWN_NODE.help);
        assert_eq!(unknown["notes"][1]["file"], "lib/agents.kdl");
        assert_eq!(unknown["notes"][1]["label"], "imported here");
        let edit = &unknown["fix"]["edits"][0];
        assert_eq!(unknown["fix"]["title"], "rename to `depends-on`");
        assert_eq!([&edit["offset"], &edit["length"]], [33, 9]);
        assert_eq!(edit["text"], "depends-on");

        // `é` is two bytes but one character: the brace is 11 bytes but 10 characters into its line.
        let unused = &json[1];
        assert_eq!(unused["severity"], "warning");
        assert_eq!(unused["offset"], 27);
        assert_eq!([&unused["line"], &unused["column"]], [2, 11]);
        assert_eq!([&unused["end_line"], &unused["end_column"]], [2, 12]);
        assert_eq!(unused["label"], Value::Null);
        assert_eq!(unused["notes"], json!([]));
        assert_eq!(unused["fix"], Value::Null);
    }
}
