//! Collecting the findings of one compilation with bounded memory: per file, only the first
//! [`MAX_SHOWN`] by place are kept as they come (and the first error among the rest); the others
//! are only counted. A file with a finding on each of its 50,000 nodes costs a hundred findings,
//! not fifty thousand.

use std::cmp::Reverse;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::hash::{Hash, Hasher};

use super::{Diagnostic, FileId, Span, rules};

/// Most findings shown for one file; the rest are counted (HF004).
pub(crate) const MAX_SHOWN: usize = 100;
/// Longest message or label, in characters; longer ones keep their start and end.
pub(crate) const MAX_TEXT: usize = 400;

/// The diagnostics of one compilation.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    files: BTreeMap<FileId, File>,
    /// Hashes of every finding's place, rule and message, so that an exact repeat is dropped
    /// (and not counted) wherever it comes.
    seen: HashSet<u64>,
    /// Order of arrival, which breaks ties between findings at the same place.
    next: u64,
}

/// A finding with the key it is ordered by: file, offset, length, code, arrival.
#[derive(Debug)]
struct Placed {
    key: (Span, &'static str, u64),
    diagnostic: Diagnostic,
}

impl PartialEq for Placed {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Placed {}
impl PartialOrd for Placed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Placed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

/// One file's findings: the first [`MAX_SHOWN`] by place, and what is known of the rest.
#[derive(Debug, Default)]
struct File {
    /// The first findings, the last of them on top.
    shown: BinaryHeap<Placed>,
    /// The first error not among `shown`.
    first_error: Option<Reverse<Placed>>,
    rest_errors: usize,
    rest_warnings: usize,
    /// Where the first finding not shown is.
    first_rest: Option<Span>,
}

impl File {
    fn push(&mut self, placed: Placed) {
        self.shown.push(placed);
        if self.shown.len() > MAX_SHOWN
            && let Some(last) = self.shown.pop()
        {
            self.count(last);
        }
    }

    /// Counts a finding among those not shown.
    fn count(&mut self, placed: Placed) {
        let span = placed.key.0;
        self.first_rest = Some(self.first_rest.map_or(span, |first| first.min(span)));
        if placed.diagnostic.is_error() {
            self.rest_errors += 1;
            if self
                .first_error
                .as_ref()
                .is_none_or(|Reverse(e)| placed < *e)
            {
                self.first_error = Some(Reverse(placed));
            }
        } else {
            self.rest_warnings += 1;
        }
    }

    /// The findings shown, by place, then one that counts the rest. An error is always among
    /// those shown when the file has one, so the exit code stays the same.
    fn finish(mut self, out: &mut Vec<Diagnostic>) {
        if let Some(Reverse(error)) = self.first_error.take()
            && !self.shown.iter().any(|p| p.diagnostic.is_error())
            && let Some(last) = self.shown.pop()
        {
            // The last shown comes before every finding not shown.
            self.rest_errors -= 1;
            self.rest_warnings += 1;
            self.first_rest = Some(last.key.0);
            self.shown.push(error);
        }
        out.extend(
            self.shown
                .into_sorted_vec()
                .into_iter()
                .map(|p| p.diagnostic),
        );
        let rest = self.rest_errors + self.rest_warnings;
        let Some(first) = self.first_rest.filter(|_| rest > 0) else {
            return;
        };
        let counted = [(self.rest_errors, "error"), (self.rest_warnings, "warning")]
            .into_iter()
            .filter(|&(n, _)| n > 0)
            .map(|(n, word)| format!("{n} {word}{}", if n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(" and ");
        let message = if rest == 1 {
            format!("1 more problem in this file is not shown ({counted})")
        } else {
            format!("{rest} more problems in this file are not shown ({counted})")
        };
        out.push(
            Diagnostic::new(
                &rules::TOO_MANY_PROBLEMS,
                Span::new(first.file, first.offset, 0),
                message,
            )
            .label("the first that is not shown"),
        );
    }
}

impl Diagnostics {
    /// Records a finding: an exact repeat of one already recorded is dropped, and messages and
    /// labels longer than [`MAX_TEXT`] characters are shortened.
    pub(crate) fn push(&mut self, mut diagnostic: Diagnostic) {
        let mut hasher = DefaultHasher::new();
        (diagnostic.span, diagnostic.rule.code, &diagnostic.message).hash(&mut hasher);
        if !self.seen.insert(hasher.finish()) {
            return;
        }
        shorten(&mut diagnostic.message);
        shorten(&mut diagnostic.label);
        for note in &mut diagnostic.notes {
            shorten(&mut note.label);
        }
        let key = (diagnostic.span, diagnostic.rule.code, self.next);
        self.next += 1;
        self.files
            .entry(diagnostic.span.file)
            .or_default()
            .push(Placed { key, diagnostic });
    }

    /// The findings sorted by file and position, at most [`MAX_SHOWN`] per file, then one that
    /// counts the rest (HF004).
    pub(crate) fn into_sorted(self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for (_, file) in self.files {
            file.finish(&mut out);
        }
        out
    }
}

impl Extend<Diagnostic> for Diagnostics {
    fn extend<T: IntoIterator<Item = Diagnostic>>(&mut self, iter: T) {
        for diagnostic in iter {
            self.push(diagnostic);
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::rules;

    fn at(offset: usize, rule: &'static crate::diagnostics::Rule) -> Diagnostic {
        Diagnostic::new(
            rule,
            Span::new(FileId(0), offset, 1),
            format!("at {offset}"),
        )
    }

    #[test]
    fn keeps_the_first_by_place_and_counts_the_rest() {
        let mut diagnostics = Diagnostics::default();
        for offset in (0..1_000).rev() {
            diagnostics.push(at(offset, &rules::UNUSED_AGENT));
        }
        diagnostics.push(at(5, &rules::UNUSED_AGENT));
        let out = diagnostics.into_sorted();
        assert_eq!(out.len(), MAX_SHOWN + 1);
        assert!(
            out[..MAX_SHOWN]
                .iter()
                .enumerate()
                .all(|(i, d)| d.span.offset == i)
        );
        let last = out.last().unwrap();
        assert_eq!(last.rule.code, "HF004");
        assert_eq!(last.span.offset, MAX_SHOWN);
        assert!(
            last.message.starts_with("900 more problems"),
            "{}",
            last.message
        );
    }

    #[test]
    fn an_error_among_the_rest_is_shown() {
        let mut diagnostics = Diagnostics::default();
        diagnostics.push(at(5_000, &rules::UNKNOWN_NODE));
        diagnostics.push(at(6_000, &rules::UNKNOWN_NODE));
        for offset in 0..500 {
            diagnostics.push(at(offset, &rules::UNUSED_AGENT));
        }
        let out = diagnostics.into_sorted();
        assert_eq!(out.len(), MAX_SHOWN + 1);
        assert_eq!(out[MAX_SHOWN - 1].span.offset, 5_000);
        assert!(out[..MAX_SHOWN - 1].iter().all(|d| !d.is_error()));
        let last = out.last().unwrap();
        assert_eq!(last.span.offset, MAX_SHOWN - 1);
        assert!(
            last.message.contains("(1 error and 401 warnings)"),
            "{}",
            last.message
        );
    }
}
