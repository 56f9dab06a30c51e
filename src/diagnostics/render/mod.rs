//! Renderers: one diagnostic list, many formats (human, json, github, sarif).
//!
//! Every format reports the same facts: byte offsets for tools, and 1-based lines and columns
//! counted in characters for people, both taken from [`SourceFile::line_col`].
//!
//! One file per format: `human.rs` (miette), `json.rs`, `github.rs` (workflow commands) and
//! `sarif.rs`; this one chooses among them and holds what they share.

mod github;
mod human;
mod json;
mod sarif;

use std::io::{self, Write};

use super::{Diagnostic, SourceFile, Sources, Span};

/// Output format of `helixflow lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// miette's graphical report; plain text when not a terminal or when `NO_COLOR` is set.
    Human,
    /// A JSON array with one object per diagnostic.
    Json,
    /// GitHub Actions workflow commands.
    Github,
    /// SARIF 2.1.0.
    Sarif,
}

/// Writes `diagnostics` in `format`. `color` selects the graphical, coloured human output.
///
/// # Errors
/// Fails only when writing to `out` fails.
pub(crate) fn render(
    format: Format,
    diagnostics: &[Diagnostic],
    sources: &Sources,
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Human => human::render_human(diagnostics, sources, color, out),
        Format::Json => json::render_json(diagnostics, sources, out),
        Format::Github => github::render_github(diagnostics, sources, out),
        Format::Sarif => sarif::render_sarif(diagnostics, sources, out),
    }
}

/// Where a span starts and ends, as 1-based lines and character columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
}

impl Range {
    fn of(file: &SourceFile, span: Span) -> Self {
        let (line, column) = file.line_col(span.offset);
        let (end_line, end_column) = file.line_col(span.end());
        Self {
            line,
            column,
            end_line,
            end_column,
        }
    }
}

fn non_empty(text: &str) -> Option<&str> {
    Some(text).filter(|text| !text.is_empty())
}

/// The message with the help on a line of its own, for formats that have no field for the help.
fn message_with_help(diagnostic: &Diagnostic) -> String {
    match non_empty(&diagnostic.help) {
        Some(help) => format!("{}\nhelp: {help}", diagnostic.message),
        None => diagnostic.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::rules::{DEPENDENCY_CYCLE, IMPORT_CYCLE, UNKNOWN_NODE, UNUSED_AGENT};
    use super::*;

    /// A pipeline with a non-ASCII phase name, so that byte offsets and character columns differ.
    const PIPELINE: &str = "pipeline \"demo\"\nphase \"é\" {\n    depend-on \"parser\"\n}\n";

    pub(super) fn render_to_string(
        format: Format,
        diagnostics: &[Diagnostic],
        sources: &Sources,
    ) -> String {
        render_colored(format, false, diagnostics, sources)
    }

    pub(super) fn render_colored(
        format: Format,
        color: bool,
        diagnostics: &[Diagnostic],
        sources: &Sources,
    ) -> String {
        let mut out = Vec::new();
        render(format, diagnostics, sources, color, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    pub(super) fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    /// The pipeline, an imported file, an error with a note in each file and a fix, and a warning
    /// after the `é`.
    pub(super) fn example() -> (Sources, Vec<Diagnostic>) {
        let mut sources = Sources::new();
        let pipeline = sources.add("demo.kdl", PIPELINE);
        let library = sources.add("lib/agents.kdl", "import \"demo.kdl\"\n");
        let node = PIPELINE.find("depend-on").unwrap();
        let brace = PIPELINE.find('{').unwrap();
        let unknown = Diagnostic::new(&UNKNOWN_NODE, Span::new(pipeline, node, 9), "unknown node")
            .label("did you mean `depends-on`?")
            .note(Span::new(pipeline, brace, 1), "in this phase")
            .note(Span::new(library, 0, 17), "imported here")
            .fix(
                "rename to `depends-on`",
                Span::new(pipeline, node, 9),
                "depends-on",
            );
        let unused = Diagnostic::new(&UNUSED_AGENT, Span::new(pipeline, brace, 1), "unused");
        (sources, vec![unknown, unused])
    }

    #[test]
    fn nothing_to_report() {
        let sources = Sources::new();
        assert_eq!(render_to_string(Format::Human, &[], &sources), "");
        assert_eq!(render_to_string(Format::Github, &[], &sources), "");
        assert_eq!(
            parse(&render_to_string(Format::Json, &[], &sources)),
            json!([])
        );
        let sarif = parse(&render_to_string(Format::Sarif, &[], &sources));
        assert_eq!(sarif["runs"][0]["results"], json!([]));
    }

    #[test]
    fn empty_span_at_end_of_file_renders_in_every_format() {
        for (text, line, column) in [("", 1, 1), ("a\n", 2, 1), ("a é", 1, 4), ("}\r\n", 2, 1)] {
            let mut sources = Sources::new();
            let file = sources.add("end.kdl", text);
            let at_end = Diagnostic::new(&IMPORT_CYCLE, Span::new(file, text.len(), 0), "eof")
                .note(Span::new(file, text.len(), 0), "here");
            let diagnostics = [at_end];

            let human = render_to_string(Format::Human, &diagnostics, &sources);
            assert!(
                human.contains(&format!("[end.kdl:{line}:{column}]")),
                "{human}"
            );
            assert!(human.contains(&format!("\n{line:>2} | ")), "{human}");
            let marker = |l: &str| l.trim_start().starts_with(':') && l.contains('^');
            assert!(human.lines().any(marker), "no marker in\n{human}");
            let json = parse(&render_to_string(Format::Json, &diagnostics, &sources));
            assert_eq!([&json[0]["line"], &json[0]["column"]], [line, column]);
            assert_eq!(
                [&json[0]["end_line"], &json[0]["end_column"]],
                [line, column]
            );
            let github = render_to_string(Format::Github, &diagnostics, &sources);
            assert!(
                github.contains(&format!("line={line},col={column},")),
                "{github}"
            );
            let sarif = parse(&render_to_string(Format::Sarif, &diagnostics, &sources));
            let region =
                &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"];
            assert_eq!(
                [&region["startColumn"], &region["endColumn"]],
                [column, column]
            );
        }
    }

    #[test]
    fn spans_past_the_end_or_inside_a_character_do_not_panic() {
        let mut sources = Sources::new();
        let file = sources.add("bad.kdl", "phase \"é\"");
        let diagnostics = [
            Diagnostic::new(&DEPENDENCY_CYCLE, Span::new(file, 8, 1), "inside `é`"),
            Diagnostic::new(&DEPENDENCY_CYCLE, Span::new(file, 40, 3), "past the end"),
        ];
        for format in [Format::Human, Format::Json, Format::Github, Format::Sarif] {
            assert!(!render_to_string(format, &diagnostics, &sources).is_empty());
        }
    }
}
