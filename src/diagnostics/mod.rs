//! One diagnostic type for every finding, the registry of rules, and the renderers.

mod collect;
mod render;
pub(crate) mod rules;
mod source;

pub(crate) use collect::Diagnostics;
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
