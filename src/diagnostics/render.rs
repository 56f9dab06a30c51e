//! Renderers: one diagnostic list, many formats (human, json, github, sarif).
//!
//! Every format reports the same facts: byte offsets for tools, and 1-based lines and columns
//! counted in characters for people, both taken from [`SourceFile::line_col`].

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};
use serde::Serialize;
use serde_json::{Value, json};

use super::{ALL_RULES, Diagnostic, FileId, Fix, Note, Rule, Severity, SourceFile, Sources, Span};

/// Output format of `helixflow lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
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
pub fn render(
    format: Format,
    diagnostics: &[Diagnostic],
    sources: &Sources,
    color: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Human => render_human(diagnostics, sources, color, out),
        Format::Json => render_json(diagnostics, sources, out),
        Format::Github => render_github(diagnostics, sources, out),
        Format::Sarif => render_sarif(diagnostics, sources, out),
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

// ---------------------------------------------------------------------------------------------
// human

/// Wrap width when the terminal's width is unknown; wide enough for most snippets.
const DEFAULT_WIDTH: usize = 100;

fn render_human(
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
        let mut notes_elsewhere = Vec::new();
        for note in &diagnostic.notes {
            if note.span.file == diagnostic.span.file {
                labels.push(LabeledSpan::new_with_span(
                    non_empty(&note.label).map(str::to_owned),
                    source_span(file, note.span),
                ));
            } else {
                notes_elsewhere.push(NoteReport::new(note, sources));
            }
        }
        Self {
            diagnostic,
            source: FileSource::new(file, &labels),
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
        Self {
            label: non_empty(&note.label).unwrap_or("related to the finding above"),
            source: FileSource::new(file, std::slice::from_ref(&span)),
            span,
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

/// A source file for miette, named by its display path, with two corrections:
///
/// - miette counts the column in its `[path:line:column]` header in bytes; we put our character
///   column there, so the human output agrees with json, github and sarif;
/// - miette draws nothing for an empty span at the very end of the text, because no line
///   contains that offset. When a label is such a span, the text gets one trailing space, so the
///   marker appears where the end is (on a line of its own after a final line break).
#[derive(Debug)]
struct FileSource<'a> {
    file: &'a SourceFile,
    name: String,
    text: Cow<'a, str>,
}

impl<'a> FileSource<'a> {
    fn new(file: &'a SourceFile, labels: &[LabeledSpan]) -> Self {
        let end = file.text.len();
        let marks_end = labels.iter().any(|l| l.is_empty() && l.offset() == end);
        let text = if marks_end {
            Cow::Owned(format!("{} ", file.text))
        } else {
            Cow::Borrowed(&*file.text)
        };
        Self {
            file,
            name: file.path.display().to_string(),
            text,
        }
    }
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
            let (line, column) = self.file.line_col(span.offset());
            (line - 1, column - 1)
        } else {
            (contents.line(), contents.column())
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

// ---------------------------------------------------------------------------------------------
// json

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

fn render_json(
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

// ---------------------------------------------------------------------------------------------
// github

fn render_github(
    diagnostics: &[Diagnostic],
    sources: &Sources,
    out: &mut dyn Write,
) -> io::Result<()> {
    for diagnostic in diagnostics {
        writeln!(out, "{}", github_command(diagnostic, sources))?;
    }
    Ok(())
}

/// `::error file=…,line=…::message`, escaped as GitHub's workflow commands require.
fn github_command(diagnostic: &Diagnostic, sources: &Sources) -> String {
    let file = sources.get(diagnostic.span.file);
    let range = Range::of(file, diagnostic.span);
    format!(
        "::{} file={},line={},col={},endLine={},endColumn={},title={}::{}",
        diagnostic.severity.as_str(),
        escape_property(&file.path.display().to_string()),
        range.line,
        range.column,
        range.end_line,
        range.end_column,
        escape_property(diagnostic.code()),
        escape_data(&message_with_help(diagnostic)),
    )
}

/// Escapes a command's message, where only `%` and line breaks are special.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property value, where `:` and `,` would also end the value.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

// ---------------------------------------------------------------------------------------------
// sarif

const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

fn render_sarif(
    diagnostics: &[Diagnostic],
    sources: &Sources,
    out: &mut dyn Write,
) -> io::Result<()> {
    let log = json!({
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "helixflow",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/helixflow/helixflow",
                "rules": ALL_RULES.iter().map(|rule| sarif_rule(rule)).collect::<Vec<_>>(),
            }},
            // Our columns count characters; SARIF's default would be UTF-16 code units.
            "columnKind": "unicodeCodePoints",
            "results": diagnostics.iter().map(|d| sarif_result(d, sources)).collect::<Vec<_>>(),
        }],
    });
    serde_json::to_writer_pretty(&mut *out, &log)?;
    writeln!(out)
}

/// The reportingDescriptor of one rule, so viewers can show its documentation.
fn sarif_rule(rule: &Rule) -> Value {
    json!({
        "id": rule.code,
        "name": rule.name,
        "shortDescription": { "text": rule.summary },
        "fullDescription": { "text": rule.summary },
        "help": { "text": rule.help, "markdown": rule.docs },
        "defaultConfiguration": { "level": rule.severity.as_str() },
    })
}

fn sarif_result(diagnostic: &Diagnostic, sources: &Sources) -> Value {
    let mut result = json!({
        "ruleId": diagnostic.code(),
        "level": diagnostic.severity.as_str(),
        "message": { "text": message_with_help(diagnostic) },
        "locations": [{ "physicalLocation": sarif_physical_location(sources, diagnostic.span) }],
    });
    if let Some(index) = ALL_RULES
        .iter()
        .position(|rule| rule.code == diagnostic.code())
    {
        result["ruleIndex"] = json!(index);
    }
    if !diagnostic.notes.is_empty() {
        result["relatedLocations"] = diagnostic
            .notes
            .iter()
            .enumerate()
            .map(|(id, note)| {
                json!({
                    "id": id,
                    "physicalLocation": sarif_physical_location(sources, note.span),
                    "message": { "text": note.label },
                })
            })
            .collect();
    }
    if let Some(fix) = &diagnostic.fix {
        result["fixes"] = json!([sarif_fix(fix, sources)]);
    }
    result
}

fn sarif_physical_location(sources: &Sources, span: Span) -> Value {
    let file = sources.get(span.file);
    let range = Range::of(file, span);
    json!({
        "artifactLocation": { "uri": path_uri(&file.path) },
        "region": {
            "startLine": range.line,
            "startColumn": range.column,
            "endLine": range.end_line,
            "endColumn": range.end_column,
            "byteOffset": span.offset,
            "byteLength": span.len,
        },
    })
}

/// A fix as one artifactChange per file, its edits in the order given.
fn sarif_fix(fix: &Fix, sources: &Sources) -> Value {
    let mut changes: Vec<(FileId, Vec<Value>)> = Vec::new();
    for (span, text) in &fix.edits {
        let replacement = json!({
            "deletedRegion": { "byteOffset": span.offset, "byteLength": span.len },
            "insertedContent": { "text": text },
        });
        match changes.iter_mut().find(|(file, _)| *file == span.file) {
            Some((_, replacements)) => replacements.push(replacement),
            None => changes.push((span.file, vec![replacement])),
        }
    }
    json!({
        "description": { "text": fix.title },
        "artifactChanges": changes
            .into_iter()
            .map(|(file, replacements)| json!({
                "artifactLocation": { "uri": path_uri(&sources.get(file).path) },
                "replacements": replacements,
            }))
            .collect::<Vec<_>>(),
    })
}

const HEX_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// A path as a URI reference: forward slashes, percent-encoded; absolute paths as `file:` URIs.
fn path_uri(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut uri = String::with_capacity(text.len());
    if path.is_absolute() {
        uri.push_str(if text.starts_with('/') {
            "file://"
        } else {
            "file:///"
        });
    }
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push('%');
            uri.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            uri.push(char::from(HEX_DIGITS[usize::from(byte & 0xF)]));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::super::rules::{DEPENDENCY_CYCLE, IMPORT_CYCLE, UNKNOWN_NODE, UNUSED_AGENT};
    use super::*;

    /// A pipeline with a non-ASCII phase name, so that byte offsets and character columns differ.
    const PIPELINE: &str = "pipeline \"demo\"\nphase \"é\" {\n    depend-on \"parser\"\n}\n";

    fn render_to_string(format: Format, diagnostics: &[Diagnostic], sources: &Sources) -> String {
        render_colored(format, false, diagnostics, sources)
    }

    fn render_colored(
        format: Format,
        color: bool,
        diagnostics: &[Diagnostic],
        sources: &Sources,
    ) -> String {
        let mut out = Vec::new();
        render(format, diagnostics, sources, color, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    /// The pipeline, an imported file, an error with a note in each file and a fix, and a warning
    /// after the `é`.
    fn example() -> (Sources, Vec<Diagnostic>) {
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

    #[test]
    fn github_escapes_messages_and_properties() {
        let mut sources = Sources::new();
        let file = sources.add("a,b:c%.kdl", "phase \"é\" {\n");
        let diagnostic = Diagnostic::new(&UNUSED_AGENT, Span::new(file, 10, 1), "50%,\r\nb: c")
            .help("use it, or: remove it");
        assert_eq!(
            render_to_string(Format::Github, &[diagnostic], &sources),
            "::warning file=a%2Cb%3Ac%25.kdl,line=1,col=10,endLine=1,endColumn=11,title=HF604::\
             50%25,%0D%0Ab: c%0Ahelp: use it, or: remove it\n"
        );
    }

    #[test]
    fn sarif_points_at_the_rule_and_the_region() {
        let (sources, diagnostics) = example();
        let sarif = parse(&render_to_string(Format::Sarif, &diagnostics, &sources));
        assert_eq!(sarif["version"], "2.1.0");
        let run = &sarif["runs"][0];
        assert_eq!(run["columnKind"], "unicodeCodePoints");
        let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), ALL_RULES.len());

        let result = &run["results"][1];
        let index = usize::try_from(result["ruleIndex"].as_u64().unwrap()).unwrap();
        assert_eq!(rules[index]["id"], "HF604");
        assert_eq!(rules[index]["defaultConfiguration"]["level"], "warning");
        assert_eq!(result["ruleId"], "HF604");
        assert_eq!(result["level"], "warning");
        let location = &result["locations"][0]["physicalLocation"];
        assert_eq!(location["artifactLocation"]["uri"], "demo.kdl");
        assert_eq!(
            location["region"],
            json!({
                "startLine": 2, "startColumn": 11, "endLine": 2, "endColumn": 12,
                "byteOffset": 27, "byteLength": 1,
            })
        );

        let unknown = &run["results"][0];
        let related = &unknown["relatedLocations"][1];
        assert_eq!(related["message"]["text"], "imported here");
        assert_eq!(
            related["physicalLocation"]["artifactLocation"]["uri"],
            "lib/agents.kdl"
        );
        let change = &unknown["fixes"][0]["artifactChanges"][0];
        assert_eq!(
            change["replacements"][0],
            json!({
                "deletedRegion": { "byteOffset": 33, "byteLength": 9 },
                "insertedContent": { "text": "depends-on" },
            })
        );
    }

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

    #[test]
    fn paths_become_uri_references() {
        assert_eq!(path_uri(Path::new("dir/a b.kdl")), "dir/a%20b.kdl");
        assert_eq!(path_uri(Path::new("é#1.kdl")), "%C3%A9%231.kdl");
        if cfg!(unix) {
            assert_eq!(path_uri(Path::new("/srv/p.kdl")), "file:///srv/p.kdl");
        }
    }
}
