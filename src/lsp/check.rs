//! Checking one document: a compile with the same rules as `helixflow lint`, run on a thread of its
//! own, its findings converted to the protocol's diagnostics for every file they are in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::{
    DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, TextEdit, Uri,
};

use super::documents::Overlay;
use super::position::LineIndex;
use super::uri;
use crate::diagnostics::{Diagnostic, FileId, Severity, Sources, Span, rules};
use crate::language::{self, Options};

/// How long the KDL parser may take on one file of a check. Shorter than `lint`'s: an editor
/// needs an answer while the author types.
pub(crate) const PARSE_BUDGET: Duration = Duration::from_secs(2);

/// The name diagnostics carry as their source.
pub(crate) const SOURCE: &str = "helixflow";

/// What one check needs: the document's text and everything it may read.
#[derive(Debug)]
pub(crate) struct Job {
    /// The document.
    pub(crate) uri: Uri,
    /// Its version.
    pub(crate) version: i32,
    /// The document's file.
    pub(crate) path: PathBuf,
    /// Its text.
    pub(crate) text: Arc<str>,
    /// Open documents before the disk.
    pub(crate) overlay: Overlay,
    /// The URI and version of every open document, by path.
    pub(crate) open: HashMap<PathBuf, (Uri, i32)>,
}

/// A diagnostic, and the fix that comes with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    /// As published.
    pub(crate) diagnostic: lsp_types::Diagnostic,
    /// A machine-applicable fix, as edits by URI.
    pub(crate) fix: Option<QuickFix>,
}

/// A fix: its title and edits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuickFix {
    /// E.g. "rename to `depends-on`".
    pub(crate) title: String,
    /// The replacements.
    pub(crate) edits: Vec<(Uri, TextEdit)>,
}

/// The findings in one file.
#[derive(Debug, Clone)]
pub(crate) struct FileFindings {
    /// The file.
    pub(crate) uri: Uri,
    /// The version of the text the positions refer to, when the file is an open document.
    pub(crate) version: Option<i32>,
    /// The findings.
    pub(crate) findings: Vec<Finding>,
}

/// What one check found.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The document checked.
    pub(crate) uri: Uri,
    /// The version checked.
    pub(crate) version: i32,
    /// Findings by file; the document's own come first, also when there are none.
    pub(crate) files: Vec<FileFindings>,
    /// Every other file the check read (imports, prompt files).
    pub(crate) read: Vec<PathBuf>,
}

/// Runs the check.
pub(crate) fn run(job: Job) -> Outcome {
    let options = Options {
        parse_budget: PARSE_BUDGET,
        // A file of agents and templates is meant to be imported: it has no pipeline of its own.
        accept_library: true,
    };
    let compilation = language::compile(&job.path, &job.text, &job.overlay, options);
    let diagnostics = &compilation.diagnostics;
    let converter = Converter::new(&job, &compilation.sources);
    let mut files = vec![FileFindings {
        uri: job.uri.clone(),
        version: Some(job.version),
        findings: Vec::new(),
    }];
    for diagnostic in diagnostics {
        let file_uri = converter.uri(diagnostic.span.file);
        let finding = converter.finding(diagnostic);
        match files.iter_mut().find(|f| f.uri == file_uri) {
            Some(file) => file.findings.push(finding),
            None => files.push(FileFindings {
                version: converter.version(diagnostic.span.file),
                uri: file_uri,
                findings: vec![finding],
            }),
        }
    }
    let read = compilation
        .sources
        .iter()
        .skip(1)
        .map(|(_, file)| file.path.clone())
        .collect();
    Outcome {
        uri: job.uri,
        version: job.version,
        files,
        read,
    }
}

/// The finding published when a check does not finish within its budget.
pub(crate) fn over_budget(budget: Duration) -> Finding {
    let rule = &rules::PARSE_BUDGET;
    let message = format!(
        "checking did not finish within {} s\nhelp: {}",
        budget.as_secs_f64(),
        rule.help
    );
    let diagnostic = lsp_types::Diagnostic {
        severity: Some(severity(rule.severity)),
        code: Some(NumberOrString::String(rule.code.to_owned())),
        source: Some(SOURCE.to_owned()),
        message,
        ..lsp_types::Diagnostic::default()
    };
    Finding {
        diagnostic,
        fix: None,
    }
}

fn severity(severity: Severity) -> DiagnosticSeverity {
    match severity {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
    }
}

/// Converts the findings of one compilation, with one line index per file.
struct Converter<'a> {
    job: &'a Job,
    sources: &'a Sources,
    indexes: HashMap<FileId, LineIndex<'a>>,
    cwd: Option<PathBuf>,
}

impl<'a> Converter<'a> {
    fn new(job: &'a Job, sources: &'a Sources) -> Self {
        let indexes = sources
            .iter()
            .map(|(id, file)| (id, LineIndex::new(&file.text)))
            .collect();
        Self {
            job,
            sources,
            indexes,
            cwd: std::env::current_dir().ok(),
        }
    }

    fn path(&self, file: FileId) -> &'a Path {
        &self.sources.get(file).path
    }

    /// The URI of a file: the document's own, an open document's, or the file's.
    fn uri(&self, file: FileId) -> Uri {
        if file == FileId(0) {
            return self.job.uri.clone();
        }
        let path = self.path(file);
        if let Some((uri, _)) = self.job.open.get(path) {
            return uri.clone();
        }
        uri::from_path(path)
            .or_else(|| uri::from_path(&self.cwd.as_ref()?.join(path)))
            // A relative path with no current folder to anchor it: reported on the document.
            .unwrap_or_else(|| self.job.uri.clone())
    }

    fn version(&self, file: FileId) -> Option<i32> {
        if file == FileId(0) {
            return Some(self.job.version);
        }
        self.job.open.get(self.path(file)).map(|(_, v)| *v)
    }

    fn range(&self, span: Span) -> lsp_types::Range {
        let index = &self.indexes[&span.file];
        index.range(span.offset, span.end())
    }

    fn finding(&self, diagnostic: &Diagnostic) -> Finding {
        let message = if diagnostic.help.is_empty() {
            diagnostic.message.clone()
        } else {
            format!("{}\nhelp: {}", diagnostic.message, diagnostic.help)
        };
        let related: Vec<DiagnosticRelatedInformation> = diagnostic
            .notes
            .iter()
            .map(|note| DiagnosticRelatedInformation {
                location: Location::new(self.uri(note.span.file), self.range(note.span)),
                message: note.label.clone(),
            })
            .collect();
        let fix = diagnostic.fix.as_ref().map(|fix| QuickFix {
            title: fix.title.clone(),
            edits: fix
                .edits
                .iter()
                .map(|(span, text)| {
                    (
                        self.uri(span.file),
                        TextEdit::new(self.range(*span), text.clone()),
                    )
                })
                .collect(),
        });
        Finding {
            diagnostic: lsp_types::Diagnostic {
                range: self.range(diagnostic.span),
                severity: Some(severity(diagnostic.severity)),
                code: Some(NumberOrString::String(diagnostic.code().to_owned())),
                code_description: None,
                source: Some(SOURCE.to_owned()),
                message,
                related_information: (!related.is_empty()).then_some(related),
                tags: None,
                data: None,
            },
            fix,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::documents::Documents;

    fn job(dir: &Path, text: &str) -> Job {
        let path = dir.join("p.kdl");
        Job {
            uri: uri::from_path(&path).unwrap(),
            version: 7,
            path,
            text: text.into(),
            overlay: Documents::default().overlay(&[]),
            open: HashMap::new(),
        }
    }

    #[test]
    fn converts_findings_with_utf16_ranges_help_and_fix() {
        let dir = tempfile::tempdir().unwrap();
        let text = "pipeline \"ü😀\"\nphase \"a\" { run \"x\"; retires 1 }\n";
        let outcome = run(job(dir.path(), text));
        assert_eq!(outcome.version, 7);
        assert_eq!(outcome.files.len(), 1);
        let finding = &outcome.files[0].findings[0];
        let d = &finding.diagnostic;
        assert_eq!(d.code, Some(NumberOrString::String("HF101".into())));
        assert_eq!(d.severity, Some(DiagnosticSeverity::ERROR));
        assert_eq!(
            d.message,
            "unknown node `retires` in `phase`\nhelp: did you mean `retries`?"
        );
        let start = lsp_types::Position::new(1, 21);
        assert_eq!(
            d.range,
            lsp_types::Range::new(start, lsp_types::Position::new(1, 28))
        );
        let fix = finding.fix.as_ref().unwrap();
        assert_eq!(fix.title, "rename to `retries`");
        assert_eq!(fix.edits[0].1.new_text, "retries");
    }

    #[test]
    fn findings_in_an_import_are_reported_for_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lib.kdl"), "agent \"a\" { comand \"x\" }\n").unwrap();
        let text = "pipeline \"p\"\nimport \"lib.kdl\"\nphase \"b\" { agent \"a\" }\n";
        let outcome = run(job(dir.path(), text));
        assert!(outcome.files[0].findings.is_empty());
        let lib = uri::from_path(&dir.path().join("lib.kdl")).unwrap();
        let in_lib = outcome.files.iter().find(|f| f.uri == lib).unwrap();
        let codes: Vec<_> = in_lib
            .findings
            .iter()
            .map(|f| f.diagnostic.code.clone())
            .collect();
        assert!(codes.contains(&Some(NumberOrString::String("HF101".into()))));
        assert_eq!(in_lib.version, None);
        assert_eq!(outcome.read, [dir.path().join("lib.kdl")]);
    }

    #[test]
    fn a_library_is_not_asked_for_a_pipeline() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run(job(dir.path(), "agent \"a\" { command \"x\" }\n"));
        assert!(outcome.files[0].findings.is_empty());
        // Phases make it a pipeline that lacks its `pipeline` node.
        let outcome = run(job(
            dir.path(),
            "agent \"a\" { command \"x\"; }\nphase \"b\" { agent \"a\"; }\n",
        ));
        let codes: Vec<_> = outcome.files[0]
            .findings
            .iter()
            .map(|f| f.diagnostic.code.clone())
            .collect();
        assert_eq!(codes, [Some(NumberOrString::String("HF120".into()))]);
        let outcome = run(job(dir.path(), "description \"x\"\n"));
        let codes: Vec<_> = outcome.files[0]
            .findings
            .iter()
            .map(|f| f.diagnostic.code.clone())
            .collect();
        assert!(codes.contains(&Some(NumberOrString::String("HF120".into()))));
    }
}
