//! The human format: miette's graphical report, with our character columns and notes in other
//! files as reports of their own.

use std::fmt;
use std::io::{self, Write};

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};

use super::non_empty;
use crate::diagnostics::{Diagnostic, Note, Severity, SourceFile, Sources, Span};

/// Wrap width when the terminal's width is unknown; wide enough for most snippets.
const DEFAULT_WIDTH: usize = 100;

pub(super) fn render_human(
    diagnostics: &[Diagnostic],
    sources: &Sources,
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    if diagnostics.is_empty() {
        return Ok(());
    }
    let handler = report_handler(color);
    for diagnostic in diagnostics {
        let report = Report::new(diagnostic, sources);
        let mut text = String::new();
        handler
            .render_report(&mut text, &report)
            .map_err(io::Error::other)?;
        // miette would print related reports after a "╰─▶" at a deeper indent; printed as
        // reports of their own, notes line up with the message and the help above them.
        for note in &report.notes_elsewhere {
            handler
                .render_report(&mut text, note)
                .map_err(io::Error::other)?;
        }
        writeln!(out, "{text}")?;
    }
    writeln!(out, "{}", summary(diagnostics))
}

/// A miette handler that depends only on `color`, never on the environment's terminal checks, so
/// the caller alone decides (and tests are reproducible).
fn report_handler(color: bool) -> GraphicalReportHandler {
    let (theme, width) = if color {
        (GraphicalTheme::unicode(), terminal_width())
    } else {
        (GraphicalTheme::none(), DEFAULT_WIDTH)
    };
    GraphicalReportHandler::new_themed(theme)
        .with_width(width)
        .with_urls(false)
        .without_syntax_highlighting()
}

/// The width a shell exports in `COLUMNS`, when it does.
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.trim().parse().ok())
        .filter(|&width| width >= 40)
        .unwrap_or(DEFAULT_WIDTH)
}

/// "2 errors, 1 warning": only the kinds that occur are counted.
fn summary(diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    [(errors, "error"), (warnings, "warning")]
        .into_iter()
        .filter(|&(count, _)| count > 0)
        .map(|(count, word)| format!("{count} {word}{}", if count == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One of our diagnostics as miette sees it. Notes in the same file become secondary labels;
/// notes in other files need a snippet of their own file, so they become reports of their own.
#[derive(Debug)]
struct Report<'a> {
    diagnostic: &'a Diagnostic,
    source: FileSource<'a>,
    labels: Vec<LabeledSpan>,
    notes_elsewhere: Vec<NoteReport<'a>>,
}

impl<'a> Report<'a> {
    fn new(diagnostic: &'a Diagnostic, sources: &'a Sources) -> Self {
        let file = sources.get(diagnostic.span.file);
        let mut labels = vec![LabeledSpan::new_primary_with_span(
            non_empty(&diagnostic.label).map(str::to_owned),
            source_span(file, diagnostic.span),
        )];
        let primary_line = file.line_index(diagnostic.span.offset);
        let mut notes_elsewhere = Vec::new();
        for note in &diagnostic.notes {
            // A note far from the finding gets a snippet of its own, so that the one snippet
            // never shows the lines between them.
            let near = file.line_index(note.span.offset).abs_diff(primary_line) <= NEAR_LINES;
            if note.span.file == diagnostic.span.file && near {
                labels.push(LabeledSpan::new_with_span(
                    non_empty(&note.label).map(str::to_owned),
                    source_span(file, note.span),
                ));
            } else {
                notes_elsewhere.push(NoteReport::new(note, sources));
            }
        }
        let (source, labels) = FileSource::new(file, &labels);
        Self {
            diagnostic,
            source,
            labels,
            notes_elsewhere,
        }
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diagnostic.code()))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        non_empty(&self.diagnostic.help).map(|help| Box::new(help) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
}

/// A note in another file than its diagnostic: advice whose message is the note's label.
#[derive(Debug)]
struct NoteReport<'a> {
    label: &'a str,
    source: FileSource<'a>,
    span: LabeledSpan,
}

impl<'a> NoteReport<'a> {
    fn new(note: &'a Note, sources: &'a Sources) -> Self {
        let file = sources.get(note.span.file);
        let span = LabeledSpan::new_primary_with_span(None, source_span(file, note.span));
        let (source, mut spans) = FileSource::new(file, std::slice::from_ref(&span));
        Self {
            label: non_empty(&note.label).unwrap_or("related to the finding above"),
            source,
            span: spans.pop().unwrap_or(span),
        }
    }
}

impl fmt::Display for NoteReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label)
    }
}

impl std::error::Error for NoteReport<'_> {}

impl miette::Diagnostic for NoteReport<'_> {
    fn severity(&self) -> Option<miette::Severity> {
        Some(miette::Severity::Advice)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(self.span.clone())))
    }
}

/// The lines of a source file that one report shows, for miette, named by the file's display
/// path. Three corrections to what miette would do with the whole file:
///
/// - only the lines around the labels are given to it, and a line longer than [`MAX_LINE`] bytes
///   is cut to a window around its labels, with `…` where text was left out: miette lays a line
///   out with width arguments that cannot exceed 65,535, and a report must stay small however
///   long the line;
/// - miette counts the column in its `[path:line:column]` header in bytes; we put our character
///   column there (of the file, not of the excerpt), so the human output agrees with json, github
///   and sarif;
/// - miette draws nothing for an empty span at the very end of the text, because no line
///   contains that offset. When a label is such a span, the text gets one trailing space, so the
///   marker appears where the end is (on a line of its own after a final line break).
#[derive(Debug)]
struct FileSource<'a> {
    file: &'a SourceFile,
    name: String,
    /// The lines shown, long ones cut.
    text: String,
    /// The 0-based line of the file that the excerpt starts with.
    first_line: usize,
    /// Each piece of the file kept in the excerpt: where it starts in the excerpt, and its byte
    /// range in the file; in order.
    pieces: Vec<(usize, std::ops::Range<usize>)>,
}

/// Longest line shown whole, in bytes.
const MAX_LINE: usize = 240;
/// Bytes of a long line shown before and after its labels.
const AROUND: usize = 60;
/// Lines of a label that spans lines that are shown at most.
const MAX_LABEL_LINES: usize = 6;
/// Lines between a finding and a note in the same file that one snippet shows.
const NEAR_LINES: usize = 12;

impl<'a> FileSource<'a> {
    /// The excerpt of `file` that shows `labels` (spans in the file), and the labels as spans in
    /// the excerpt.
    fn new(file: &'a SourceFile, labels: &[LabeledSpan]) -> (Self, Vec<LabeledSpan>) {
        let text = &*file.text;
        // Each label's range, a label over many lines cut to its first lines.
        let ranges: Vec<(usize, usize)> = labels
            .iter()
            .map(|label| {
                let start = label.offset();
                let last =
                    (file.line_index(start) + MAX_LABEL_LINES - 1).min(file.line_count() - 1);
                (
                    start,
                    (start + label.len())
                        .min(file.line_range(last).end)
                        .max(start),
                )
            })
            .collect();
        // miette shows one line around each label, and decides whether two labels share a
        // snippet from what it reads around them: two lines more on each side make it read the
        // same as in the whole file.
        let first_line = ranges
            .iter()
            .map(|&(start, _)| file.line_index(start))
            .min()
            .unwrap_or(0)
            .saturating_sub(2);
        let last_line = ranges
            .iter()
            .map(|&(_, end)| file.line_index(end))
            .max()
            .unwrap_or(0)
            .saturating_add(2)
            .min(file.line_count() - 1);
        let mut excerpt = String::new();
        let mut pieces = Vec::new();
        for line in first_line..=last_line {
            let whole = file.line_range(line);
            let kept = if whole.len() <= MAX_LINE {
                whole.clone()
            } else {
                window(text, whole.clone(), &ranges)
            };
            if kept.start > whole.start {
                excerpt.push('…');
            }
            pieces.push((excerpt.len(), kept.clone()));
            excerpt.push_str(&text[kept.clone()]);
            if kept.end < whole.end {
                excerpt.push('…');
            }
            // A line break ends every line that has one in the file (miette counts lines by
            // them).
            if line + 1 < file.line_count() {
                excerpt.push('\n');
            }
        }
        let source = Self {
            file,
            name: file.path.display().to_string(),
            text: excerpt,
            first_line,
            pieces,
        };
        let mapped: Vec<LabeledSpan> = labels
            .iter()
            .zip(&ranges)
            .map(|(label, &(start, end))| {
                let start = source.to_excerpt(start, false);
                let end = source.to_excerpt(end, true).max(start);
                let text = label.label().map(str::to_owned);
                if label.primary() {
                    LabeledSpan::new_primary_with_span(text, start..end)
                } else {
                    LabeledSpan::new_with_span(text, start..end)
                }
            })
            .collect();
        let mut source = source;
        let end = source.text.len();
        if mapped.iter().any(|l| l.is_empty() && l.offset() == end) {
            source.text.push(' ');
        }
        (source, mapped)
    }

    /// Where byte `offset` of the file is in the excerpt; an offset that was left out goes to
    /// the end of the piece before it (`end`) or the start of the piece after it.
    fn to_excerpt(&self, offset: usize, end: bool) -> usize {
        let index = self
            .pieces
            .partition_point(|(_, range)| range.start <= offset);
        if index > 0 {
            let (at, range) = &self.pieces[index - 1];
            if offset <= range.end {
                return at + (offset - range.start);
            }
            if end || index == self.pieces.len() {
                return at + range.len();
            }
        }
        self.pieces.get(index).map_or(0, |(at, _)| *at)
    }

    /// Where byte `offset` of the excerpt is in the file.
    fn to_file(&self, offset: usize) -> usize {
        let index = self.pieces.partition_point(|(at, _)| *at <= offset);
        match index.checked_sub(1).map(|i| &self.pieces[i]) {
            Some((at, range)) => range.start + (offset - at).min(range.len()),
            None => self.pieces.first().map_or(0, |(_, range)| range.start),
        }
    }
}

/// The part of the long line `line` (a byte range of `text`) to show: a window around the labels
/// on it, at most about [`MAX_LINE`] bytes, on character boundaries.
fn window(
    text: &str,
    line: std::ops::Range<usize>,
    labels: &[(usize, usize)],
) -> std::ops::Range<usize> {
    let on_line = labels
        .iter()
        .filter(|&&(start, end)| start <= line.end && end >= line.start);
    let from = on_line
        .clone()
        .map(|&(start, _)| start.max(line.start))
        .min();
    let to = on_line.map(|&(_, end)| end.min(line.end)).max();
    let (from, to) = match (from, to) {
        (Some(from), Some(to)) => (from.saturating_sub(AROUND).max(line.start), to + AROUND),
        _ => (line.start, line.start + MAX_LINE),
    };
    let to = to.min(from + MAX_LINE).min(line.end);
    let from = text.floor_char_boundary(from);
    (from..text.ceil_char_boundary(to)).clone()
}

impl SourceCode for FileSource<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let text: &'b str = &self.text;
        let contents = text.read_span(span, context_lines_before, context_lines_after)?;
        // With context lines the contents start at a line start and miette's column is 0 already.
        let (line, column) = if context_lines_before == 0 {
            let (line, column) = self.file.line_col(self.to_file(span.offset()));
            (line - 1, column - 1)
        } else {
            (contents.line() + self.first_line, contents.column())
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            contents.data(),
            *contents.span(),
            line,
            column,
            contents.line_count(),
        )))
    }
}

/// `span` clamped to the file and widened to character boundaries, so a span from a buggy check
/// can never make the snippet code slice through a character or read past the end.
fn source_span(file: &SourceFile, span: Span) -> SourceSpan {
    let text = &*file.text;
    let start = text.floor_char_boundary(span.offset.min(text.len()));
    let end = text.ceil_char_boundary(span.end().clamp(start, text.len()));
    SourceSpan::new(start.into(), end - start)
}

#[cfg(test)]
mod tests {
    use super::super::Format;
    use super::super::tests::{example, render_colored, render_to_string};
    use super::*;
    use crate::diagnostics::rules::UNKNOWN_NODE;

    #[test]
    fn plain_human_output_shows_everything_without_escapes() {
        let (sources, diagnostics) = example();
        let text = render_to_string(Format::Human, &diagnostics, &sources);
        for expected in [
            "HF101",
            "unknown node",
            UNKNOWN_NODE.help,
            "[demo.kdl:3:5]",
            "    depend-on \"parser\"",
            "did you mean `depends-on`?",
            "in this phase",
            "[lib/agents.kdl:1:1]",
            "import \"demo.kdl\"",
            "imported here",
            // miette would say column 12, counting the bytes of `é`.
            "[demo.kdl:2:11]",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(text.ends_with("\n1 error, 1 warning\n"), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
    }

    #[test]
    fn colored_human_output_uses_ansi_styles() {
        let (sources, diagnostics) = example();
        let text = render_colored(Format::Human, true, &diagnostics, &sources);
        assert!(text.contains('\x1b'));
        assert!(text.contains("unknown node"));
    }

    #[test]
    fn summary_counts_only_the_kinds_that_occur() {
        let (_, diagnostics) = example();
        assert_eq!(summary(&diagnostics), "1 error, 1 warning");
        assert_eq!(
            summary(&[diagnostics[0].clone(), diagnostics[0].clone()]),
            "2 errors"
        );
        assert_eq!(summary(&diagnostics[1..]), "1 warning");
    }
}
