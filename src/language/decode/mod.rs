//! Typed decoding of validated nodes into model pieces, with the checks of values' contents:
//! durations, regexes, globs, workspace paths and prompt templates.
//!
//! This file holds the [`Decoder`] and the checks that values of every kind share; the files beside
//! it decode by what they read: `agent.rs` (an `agent` node), `body.rs` (the body of a phase, a
//! template or `defaults`), `attempt.rs` (its `attempt` blocks), `outputs.rs`, `gates.rs` and
//! `prompt.rs`.

mod agent;
mod attempt;
mod body;
mod gates;
mod outputs;
mod prompt;

use std::path::{Component, Path, PathBuf};

use kdl::{KdlEntry, KdlNode, KdlValue};

use super::loader::Loader;
use super::template::Substitution;
use super::validate::{positional, property, value_span};
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, rules};
use crate::glob::compile_glob;
use crate::model::{Millis, Spanned};

pub(crate) use body::Body;
pub(crate) use prompt::PromptDecl;

/// The span of `range` of `text`, which lies at `at` in a source file: at least one character, on
/// character boundaries.
pub(crate) fn text_span(
    text: &str,
    at: Option<Span>,
    range: std::ops::Range<usize>,
) -> Option<Span> {
    let at = at?;
    if range.start > text.len() || range.end > text.len() || !text.is_char_boundary(range.start) {
        return None;
    }
    let mut end = range.end.max(range.start + 1).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    Some(Span::new(
        at.file,
        at.offset + range.start,
        end - range.start,
    ))
}

/// Where the text of a string entry lies in its file, when it is the source as written: a quoted
/// (or raw) single-line string whose text has no escapes.
pub(crate) fn string_text_span(entry: &KdlEntry, text: &str, span: Span) -> Option<Span> {
    let r = repr(entry)?;
    let hashes = r.len() - r.trim_start_matches('#').len();
    let body = &r[hashes..];
    (body.starts_with('"') && !body.starts_with("\"\"\"") && body.get(1..=text.len()) == Some(text))
        .then(|| Span::new(span.file, span.offset + hashes + 1, text.len()))
}

/// The text of an entry's value as written (for raw and escaped strings alike).
fn repr(entry: &KdlEntry) -> Option<&str> {
    entry.format().map(|f| f.value_repr.as_str())
}

/// Decodes nodes of one file at a time; shared state for one compilation.
pub(crate) struct Decoder<'c> {
    pub diagnostics: &'c mut Diagnostics,
    pub sources: &'c mut Sources,
    pub loader: &'c dyn Loader,
    /// Whether the template syntax of each prompt file and included template is valid, checked
    /// (and reported) once for all the phases that name it.
    pub syntax: &'c mut std::collections::HashMap<FileId, bool>,
    /// The workspace root, for prompt files.
    pub workspace: PathBuf,
}

/// One file and the substitution applied to its strings.
#[derive(Clone, Copy)]
pub(crate) struct Origin<'s> {
    pub file: FileId,
    pub subst: &'s Substitution<'s>,
}

impl Origin<'_> {
    fn string(&self, entry: &KdlEntry) -> Option<String> {
        match entry.value() {
            KdlValue::String(s) => Some(self.subst.apply(s)),
            _ => None,
        }
    }

    fn span(&self, entry: &KdlEntry) -> Span {
        value_span(self.file, entry)
    }

    fn arg(&self, node: &KdlNode, index: usize) -> Option<Spanned<String>> {
        let entry = positional(node).nth(index)?;
        Some(Spanned::new(self.string(entry)?, self.span(entry)))
    }

    fn args(&self, node: &KdlNode) -> Vec<Spanned<String>> {
        positional(node)
            .filter_map(|e| Some(Spanned::new(self.string(e)?, self.span(e))))
            .collect()
    }

    fn prop(&self, node: &KdlNode, name: &str) -> Option<Spanned<String>> {
        let entry = property(node, name)?;
        Some(Spanned::new(self.string(entry)?, self.span(entry)))
    }
}

fn int(entry: Option<&KdlEntry>) -> Option<u32> {
    match entry?.value() {
        KdlValue::Integer(n) => u32::try_from(*n).ok(),
        _ => None,
    }
}

/// A number no smaller than zero (an integer or one with a fraction).
pub(super) fn number(entry: Option<&KdlEntry>) -> Option<f64> {
    #[allow(clippy::cast_precision_loss, reason = "an amount of dollars")]
    let n = match entry?.value() {
        KdlValue::Integer(n) => *n as f64,
        KdlValue::Float(n) => *n,
        _ => return None,
    };
    (n.is_finite() && n >= 0.0).then_some(n)
}

fn boolean(node: &KdlNode) -> Option<bool> {
    match positional(node).next().map(KdlEntry::value) {
        None => Some(true),
        Some(KdlValue::Bool(b)) => Some(*b),
        Some(_) => None,
    }
}

impl Decoder<'_> {
    fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// A duration such as `"90s"` or `"1h 30m"`.
    pub(crate) fn duration(&mut self, value: &Spanned<String>) -> Option<Millis> {
        match humantime::parse_duration(value.value.trim()) {
            Ok(d) if !d.is_zero() => Some(Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))),
            Ok(_) => {
                self.report(
                    Diagnostic::new(
                        &rules::INVALID_DURATION,
                        value.span,
                        "a duration of zero would expire at once",
                    )
                    .label("zero"),
                );
                None
            }
            Err(e) => {
                self.report(
                    Diagnostic::new(
                        &rules::INVALID_DURATION,
                        value.span,
                        format!("\"{}\" is not a duration: {e}", value.value),
                    )
                    .label("invalid duration"),
                );
                None
            }
        }
    }

    /// Checks that a regex compiles.
    pub(crate) fn regex(&mut self, value: &Spanned<String>) {
        // An item placeholder stands for text that is escaped when the item's phase is made.
        let pattern = crate::language::item::neutral(&value.value);
        // Parsing is enough to find every syntax error, and much cheaper than compiling.
        if let Err(e) = regex_syntax::Parser::new().parse(&pattern) {
            let detail = e.to_string();
            let last = detail.lines().last().unwrap_or_default().trim().to_owned();
            self.report(
                Diagnostic::new(
                    &rules::INVALID_REGEX,
                    value.span,
                    format!("invalid regular expression: {last}"),
                )
                .label("does not compile"),
            );
        }
    }

    /// Checks that a glob is not empty, compiles, names files and stays inside the workspace. An
    /// item placeholder of a `for-each` phase stands for one plain name here (its value is
    /// escaped when the item's phase is made).
    pub(crate) fn glob(&mut self, value: &Spanned<String>) {
        self.check_glob(value, true);
    }

    /// Checks a glob of folders (`worktree-share`): as [`Decoder::glob`], but naming a folder is
    /// what it is for.
    pub(crate) fn folder_glob(&mut self, value: &Spanned<String>) {
        self.check_glob(value, false);
    }

    fn check_glob(&mut self, value: &Spanned<String>, of_files: bool) {
        let neutral;
        let value = if crate::language::item::uses_item(&value.value) {
            neutral = Spanned::new(
                crate::language::item::neutral(&value.value).into_owned(),
                value.span,
            );
            &neutral
        } else {
            value
        };
        if self.empty(
            value,
            "an empty glob matches no file",
            "Write a pattern such as `src/**/*.py`.",
        ) {
            return;
        }
        if let Err(e) = compile_glob(&value.value) {
            self.report(
                Diagnostic::new(
                    &rules::INVALID_GLOB,
                    value.span,
                    format!("invalid glob: {}", e.kind()),
                )
                .label("does not compile"),
            );
        } else if let Some(meant) = without_parent_segments(&value.value) {
            let mut d = Diagnostic::new(
                &rules::PARENT_IN_GLOB,
                value.span,
                format!(
                    "`{}` has a `..` segment: globs are matched against paths without `..`, so it \
                     matches no file",
                    value.value
                ),
            )
            .label("matches nothing")
            .help(format!("Write `{meant}`, the path it means."));
            if self.written(value.span) == Some(format!("\"{}\"", value.value).as_str()) {
                d = d.fix(
                    format!("use \"{meant}\""),
                    value.span,
                    format!("\"{meant}\""),
                );
            }
            self.report(d);
        } else if let Some((folder, why)) = of_files
            .then(|| self.names_a_folder(&value.value))
            .flatten()
        {
            let every_file = format!("{folder}/**");
            let mut d = Diagnostic::new(
                &rules::FOLDER_GLOB,
                value.span,
                format!(
                    "`{}` {why}: globs match files, and this one matches none",
                    value.value
                ),
            )
            .label("names only the folder")
            .help(format!(
                "Write `{every_file}` for every file under the folder."
            ));
            // Only where the value is written as a plain string: a fix must not undo a template
            // parameter or an escape.
            if self.written(value.span) == Some(format!("\"{}\"", value.value).as_str()) {
                d = d.fix(
                    format!("use \"{every_file}\""),
                    value.span,
                    format!("\"{every_file}\""),
                );
            }
            self.report(d);
        }
        self.workspace_path(value);
    }

    /// The folder a glob names instead of files, and how it shows: it ends with `/`, or it has no
    /// wildcard and is a folder in the workspace (`protect "tests"`).
    fn names_a_folder<'v>(&self, glob: &'v str) -> Option<(&'v str, &'static str)> {
        if escape_problem(glob).is_some() {
            return None;
        }
        if glob.ends_with('/') {
            return Some((glob.trim_end_matches('/'), "ends with `/`"));
        }
        let literal = crate::glob::is_literal(glob);
        (literal && self.loader.is_dir(&self.workspace.join(glob))).then_some((glob, "is a folder"))
    }

    /// Reports a value that is empty or only blanks, where one is needed; returns whether it is.
    fn empty(&mut self, value: &Spanned<String>, message: &str, help: &str) -> bool {
        let blank = value.value.trim().is_empty();
        if blank {
            self.report(
                Diagnostic::new(&rules::EMPTY_VALUE, value.span, message)
                    .label("empty")
                    .help(help),
            );
        }
        blank
    }

    /// The source text at `span`.
    fn written(&self, span: Span) -> Option<&str> {
        self.sources
            .get(span.file)
            .text
            .get(span.offset..span.end())
    }

    /// Checks that a path is relative and does not climb above the workspace.
    pub(crate) fn workspace_path(&mut self, value: &Spanned<String>) {
        if let Some(problem) = escape_problem(&value.value) {
            self.report(
                Diagnostic::new(
                    &rules::PATH_ESCAPES_WORKSPACE,
                    value.span,
                    format!("\"{}\" {problem}", value.value),
                )
                .label("outside the workspace"),
            );
        }
    }
}

/// The glob a glob with `..` segments means, written without them (`src/../data/**` →
/// `data/**`); `None` when it has none, or when they climb above the workspace (which
/// [`escape_problem`] reports).
fn without_parent_segments(glob: &str) -> Option<String> {
    if escape_problem(glob).is_some() || !glob.split('/').any(|segment| segment == "..") {
        return None;
    }
    let mut kept: Vec<&str> = Vec::new();
    for segment in glob.split('/') {
        match segment {
            ".." => {
                kept.pop();
            }
            "." | "" => {}
            other => kept.push(other),
        }
    }
    Some(kept.join("/"))
}

/// Why a workspace-relative path leaves the workspace, if it does.
pub(crate) fn escape_problem(path: &str) -> Option<&'static str> {
    let p = Path::new(path);
    if p.has_root()
        || path.starts_with('~')
        || p.components().any(|c| matches!(c, Component::Prefix(_)))
    {
        return Some("is absolute; paths are relative to the workspace");
    }
    let mut depth = 0i32;
    for component in p.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Some("climbs above the workspace with `..`");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{escape_problem, without_parent_segments};

    #[test]
    fn paths_that_leave_the_workspace_are_found() {
        assert!(escape_problem("/etc/passwd").is_some());
        assert!(escape_problem("~/x").is_some());
        assert!(escape_problem("../x").is_some());
        assert!(escape_problem("a/../../x").is_some());
        assert!(escape_problem("a/../b/./c").is_none());
        assert!(escape_problem("src/**/*.py").is_none());
    }

    #[test]
    fn a_glob_with_parent_segments_is_written_without_them() {
        assert_eq!(
            without_parent_segments("src/../data/**").as_deref(),
            Some("data/**")
        );
        assert_eq!(
            without_parent_segments("a/b/../../c/*.py").as_deref(),
            Some("c/*.py")
        );
        assert_eq!(without_parent_segments("src/**/*.py"), None);
        assert_eq!(without_parent_segments("../data/**"), None);
        assert_eq!(without_parent_segments("a..b/*"), None);
    }
}
