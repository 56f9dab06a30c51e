//! One diagnostic type for every finding, the registry of rules, and the renderers.

mod render;
pub(crate) mod rules;
mod source;

pub(crate) use render::{Format, render};
pub(crate) use rules::find_rule;
pub use rules::{ALL_RULES, Rule};
pub(crate) use source::Remap;
pub use source::{FileId, SourceFile, Sources, Span};

/// Whether a finding blocks the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Reported, but `lint` still exits 0.
    Warning,
    /// The pipeline is invalid.
    Error,
}

impl Severity {
    /// The lower-case word used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A secondary place a diagnostic points at, with its own label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Where.
    pub span: Span,
    /// What is there.
    pub label: String,
}

/// A machine-applicable fix: replace each span with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// What the fix does, e.g. "rename to `depends-on`".
    pub title: String,
    /// Non-overlapping replacements.
    pub edits: Vec<(Span, String)>,
}

/// One finding about a pipeline: a rule, where, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule that was broken.
    pub rule: &'static Rule,
    /// Error or warning (the rule's own severity).
    pub severity: Severity,
    /// One sentence saying what is wrong.
    pub message: String,
    /// The exact place.
    pub span: Span,
    /// The text shown at the place.
    pub label: String,
    /// How to fix it.
    pub help: String,
    /// Further places that explain the finding (e.g. every edge of a cycle).
    pub notes: Vec<Note>,
    /// A fix that tools may apply.
    pub fix: Option<Fix>,
}

impl Diagnostic {
    /// A diagnostic for `rule` at `span`; the label defaults to the message, the help to the rule's.
    pub(crate) fn new(rule: &'static Rule, span: Span, message: impl Into<String>) -> Self {
        Self {
            rule,
            severity: rule.severity,
            message: message.into(),
            span,
            label: String::new(),
            help: rule.help.to_owned(),
            notes: Vec::new(),
            fix: None,
        }
    }

    /// Sets the label shown at the span.
    #[must_use]
    pub(crate) fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Replaces the rule's generic help with a specific one.
    #[must_use]
    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = help.into();
        self
    }

    /// Adds a secondary place.
    #[must_use]
    pub(crate) fn note(mut self, span: Span, label: impl Into<String>) -> Self {
        self.notes.push(Note {
            span,
            label: label.into(),
        });
        self
    }

    /// Attaches a fix that replaces `span` with `text`.
    #[must_use]
    pub(crate) fn fix(
        mut self,
        title: impl Into<String>,
        span: Span,
        text: impl Into<String>,
    ) -> Self {
        self.fix = Some(Fix {
            title: title.into(),
            edits: vec![(span, text.into())],
        });
        self
    }

    /// The rule's code, e.g. `HF101`.
    pub fn code(&self) -> &'static str {
        self.rule.code
    }

    /// Whether this finding makes the pipeline invalid.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl Remap {
    /// The diagnostic with every span mapped into the combined table.
    pub(crate) fn diagnostic(self, mut diagnostic: Diagnostic) -> Diagnostic {
        diagnostic.span = self.span(diagnostic.span);
        for note in &mut diagnostic.notes {
            note.span = self.span(note.span);
        }
        if let Some(fix) = &mut diagnostic.fix {
            for (span, _) in &mut fix.edits {
                *span = self.span(*span);
            }
        }
        diagnostic
    }
}

/// The diagnostics of one compilation, in the order they were found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    /// Records a finding.
    pub(crate) fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }

    /// Sorts by file and position, drops exact repeats, and bounds the answer: at most
    /// [`MAX_SHOWN`] findings per file, then one that counts the rest (HF004), and no message or
    /// label longer than [`MAX_TEXT`] characters.
    pub(crate) fn into_sorted(self) -> Vec<Diagnostic> {
        let mut sorted = self.sorted();
        for diagnostic in &mut sorted {
            shorten(&mut diagnostic.message);
            shorten(&mut diagnostic.label);
            for note in &mut diagnostic.notes {
                shorten(&mut note.label);
            }
        }
        cap(sorted)
    }

    fn sorted(mut self) -> Vec<Diagnostic> {
        self.0.sort_by(|a, b| {
            (a.span.file, a.span.offset, a.span.len, a.rule.code).cmp(&(
                b.span.file,
                b.span.offset,
                b.span.len,
                b.rule.code,
            ))
        });
        self.0
            .dedup_by(|a, b| a.span == b.span && a.rule == b.rule && a.message == b.message);
        self.0
    }
}

/// Most findings shown for one file; the rest are counted (HF004).
pub(crate) const MAX_SHOWN: usize = 100;
/// Longest message or label, in characters; longer ones keep their start and end.
pub(crate) const MAX_TEXT: usize = 400;

/// `text` with its middle elided when it is longer than [`MAX_TEXT`] characters.
fn shorten(text: &mut String) {
    if text.len() <= MAX_TEXT {
        return;
    }
    let chars = text.chars().count();
    if chars <= MAX_TEXT {
        return;
    }
    let keep = MAX_TEXT / 2;
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(chars - keep).collect();
    *text = format!("{head}… ({} characters elided) …{tail}", chars - 2 * keep);
}

/// At most [`MAX_SHOWN`] findings per file (sorted by place), then one that counts the rest. An
/// error is always among those shown when the file has one, so the exit code stays the same.
fn cap(sorted: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut per_file: Vec<(FileId, Vec<Diagnostic>)> = Vec::new();
    for diagnostic in sorted {
        match per_file.last_mut() {
            Some((file, list)) if *file == diagnostic.span.file => list.push(diagnostic),
            _ => per_file.push((diagnostic.span.file, vec![diagnostic])),
        }
    }
    let mut out = Vec::new();
    for (_, mut list) in per_file {
        if list.len() <= MAX_SHOWN {
            out.append(&mut list);
            continue;
        }
        let mut rest = list.split_off(MAX_SHOWN);
        if !list.iter().any(Diagnostic::is_error)
            && let Some(at) = rest.iter().position(Diagnostic::is_error)
        {
            let error = rest.remove(at);
            rest.insert(0, list.pop().expect("MAX_SHOWN is not zero"));
            list.push(error);
        }
        let errors = rest.iter().filter(|d| d.is_error()).count();
        let warnings = rest.len() - errors;
        let counted = [(errors, "error"), (warnings, "warning")]
            .into_iter()
            .filter(|&(n, _)| n > 0)
            .map(|(n, word)| format!("{n} {word}{}", if n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(" and ");
        let first = rest.iter().map(|d| d.span).min().unwrap_or_default();
        out.append(&mut list);
        out.push(
            Diagnostic::new(
                &rules::TOO_MANY_PROBLEMS,
                Span::new(first.file, first.offset, 0),
                if rest.len() == 1 {
                    format!("1 more problem in this file is not shown ({counted})")
                } else {
                    format!(
                        "{} more problems in this file are not shown ({counted})",
                        rest.len()
                    )
                },
            )
            .label("the first that is not shown"),
        );
    }
    out
}

impl Extend<Diagnostic> for Diagnostics {
    fn extend<T: IntoIterator<Item = Diagnostic>>(&mut self, iter: T) {
        self.0.extend(iter);
    }
}

/// The closest candidate to `word` by edit distance, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let chars = word.chars().count();
    candidates
        .into_iter()
        // The distance is at least the difference in length: a word far longer or shorter than
        // a candidate (a 10 MB node name) costs nothing, instead of a table of its length.
        .filter(|c| {
            chars.abs_diff(c.chars().count()) <= (word.len().max(c.len()) / 3).max(1)
                || c.contains(word)
        })
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|&(d, c)| {
            d <= (word.len().max(c.len()) / 3).max(1) || (c.contains(word) && word.len() >= 3)
        })
        .min_by_key(|&(d, c)| (d, c))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::did_you_mean;

    #[test]
    fn suggests_close_names_only() {
        let names = ["depends-on", "description", "retries"];
        assert_eq!(did_you_mean("depend-on", names), Some("depends-on"));
        assert_eq!(did_you_mean("retires", names), Some("retries"));
        assert_eq!(did_you_mean("zzz", names), None);
    }
}
