//! `sub-agent` verification: a fresh verifier agent reviews one attempt's work and answers a JSON
//! verdict `{"success": bool, "errors": [..], "checks_passed": [..], "feedback": ".."}`.
//!
//! A verdict counts only when the review itself can be trusted. It is void — and the attempt
//! fails — when the verifier gives no verdict or an invalid one, when its transcript does not match
//! its `evidence` pattern, when it times out or exits non-zero, and when it changed the workspace in
//! any way: the workspace is snapshotted before the review (keeping the contents of every file up to
//! [`KEEP_LIMIT`]) and after it, and every change is listed and undone byte-exact. A third snapshot
//! checks the undoing, so a file reported as restored really is.
//!
//! Decisions the contract leaves open:
//! - `verifier-prompt` is added verbatim to the built-in prompt, under "Additional instructions";
//!   it is not a template.
//! - The verdict is the last JSON object in the response (its last [`VERDICT_WINDOW`] bytes) whose
//!   `success` is a boolean, wherever it stands: bare, inside prose, or in a fenced block. Only
//!   objects at the top level count: a `success` inside another object is part of that object.
//!   Claude Code's stream-json is unwrapped before, by the agent's `response` format.
//! - A verdict that says `success: true` and lists errors contradicts itself: it is invalid.
//! - Only the verifier's own `timeout` and `idle-timeout` apply; the phase's `timeout` limits the
//!   work, not the review.
//! - The verifier gets `PYTHONDONTWRITEBYTECODE=1` (any `env` may override it), so that running a
//!   Python project's tests does not write `__pycache__` files, which would void the verdict.
//! - Files the snapshots do not see (ignored by `.gitignore` or `.helixflowignore` before the
//!   review, the state dir, the attempt folder) are not watched, as everywhere else in helixflow;
//!   protected files are, ignored or not.
//! - The verdict returned and written to `verdict.json` is redacted and bounded (at most
//!   100 entries per list, 2000 characters per entry and 16000 for `feedback`): it becomes the next
//!   attempt's feedback, which may have to fit in a command line.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use similar::TextDiff;

use crate::engine::event::{ChildExit, GateReport, GateStatus, TimeoutKind};
use crate::engine::process::{self, Cancel, ChildSpec};
use crate::engine::prompt::{describe_output, render_argv};
use crate::engine::response;
use crate::model::{Agent, Millis, Phase};
use crate::store::prompt_file::PromptFile;
use crate::store::redact::Redactor;
use crate::verify::feedback::signal_name;
use crate::workspace::{Changes, ProtectedPaths, Snapshot, SnapshotOptions};

/// The verification prompt, as given to the verifier (redacted), in the attempt folder.
pub const PROMPT_FILE: &str = "verifier-prompt.md";
/// The verifier's standard output, in the attempt folder.
pub const STDOUT_LOG: &str = "verifier.stdout.log";
/// The verifier's standard error, in the attempt folder.
pub const STDERR_LOG: &str = "verifier.stderr.log";
/// The verdict, or why it is void, in the attempt folder.
pub const VERDICT_FILE: &str = "verdict.json";

/// Files up to this size are kept by the snapshot taken before the review, so that a verifier's
/// change to them can be undone; a change to a larger file is reported as not restored.
pub const KEEP_LIMIT: u64 = 32 * 1024 * 1024;
/// The most bytes [`diff_of_changes`] returns, notes included.
pub const DIFF_LIMIT: usize = 64 * 1024;
/// The most bytes of one file's part of the diff, notes included.
pub const FILE_DIFF_LIMIT: usize = 16 * 1024;
/// How much of the end of a response is searched for the verdict.
pub const VERDICT_WINDOW: usize = 1024 * 1024;

/// Numbers scratch folders apart within this process.
static NEXT_SCRATCH: AtomicU64 = AtomicU64::new(0);

/// Files larger than this (before or after) are named, not diffed: diffing costs time and memory
/// that a part of at most [`FILE_DIFF_LIMIT`] bytes does not repay.
const DIFF_INPUT_LIMIT: u64 = 1024 * 1024;
/// Kept free at the end of the diff for the note naming the files left out.
const CLOSING_NOTE_RESERVE: usize = 2 * 1024;
/// Kept free at the end of a cut file part for the note saying how much was cut.
const CUT_NOTE_RESERVE: usize = 128;
/// Below this much room, a file's part is left out rather than cut to almost nothing.
const MIN_FILE_ROOM: usize = 512;
/// The longest a line diff may search for the smallest diff before it settles for a larger one.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);
/// Bytes looked at to tell a binary file (one with a NUL byte) from text.
const BINARY_SNIFF: usize = 8192;
/// The most changed paths listed in the prompt, and in a void verdict's reason.
const MAX_LISTED_PATHS: usize = 100;
/// The most paths named in a void verdict's reason.
const MAX_NAMED_IN_REASON: usize = 20;
/// The most entries kept of a verdict's `errors` and `checks_passed`.
const MAX_VERDICT_ITEMS: usize = 100;
/// The most characters kept of one entry.
const MAX_ITEM_CHARS: usize = 2000;
/// The most characters kept of `feedback`.
const MAX_FEEDBACK_CHARS: usize = 16_000;

/// Everything the sub-agent verification of one attempt needs.
#[derive(Debug)]
pub struct SubAgentCheck<'a> {
    /// The workspace root: the verifier's working directory, snapshotted around the review.
    pub workspace: &'a Path,
    /// The phase whose attempt is reviewed.
    pub phase: &'a Phase,
    /// The phase's rendered prompt for this attempt: the task the agent was given.
    pub task: &'a str,
    /// The verifier agent.
    pub verifier: &'a Agent,
    /// The attempt folder: [`PROMPT_FILE`], [`STDOUT_LOG`], [`STDERR_LOG`] and [`VERDICT_FILE`]
    /// are written here. Never snapshotted when it lies inside the workspace.
    pub attempt_dir: &'a Path,
    /// The gate results so far (external mode's, when it ran), shown to the verifier.
    pub gate_reports: &'a [GateReport],
    /// What this attempt changed.
    pub changes: &'a Changes,
    /// The attempt's starting snapshot. Modified and deleted files get a diff only when it was
    /// taken with kept contents (`keep_contents_under`).
    pub before: &'a Snapshot,
    /// Environment added to helixflow's for the verifier (the pipeline's `env`, the run's
    /// variables); the verifier's own `env`, then the phase's, then `HELIXFLOW_PHASE` and
    /// `HELIXFLOW_ATTEMPT` are added after it.
    pub env: &'a [(OsString, OsString)],
    /// Workspace-relative folders never snapshotted (the state dir).
    pub exclude: &'a [PathBuf],
    /// Stops the verifier when the run is cancelled.
    pub cancel: &'a Cancel,
    /// Removes secrets from the logs, the saved prompt, the verdict and the reasons.
    pub redactor: Arc<Redactor>,
    /// Time between TERM and KILL when the verifier is stopped.
    pub grace: Duration,
    /// The attempt under review, counting from 1.
    pub attempt: u32,
    /// The phases running alongside. A change during the review that one of them claims (its
    /// `scope` or `outputs`, not this phase's) is that phase's work: neither undone nor held
    /// against the verifier.
    pub alongside: &'a [&'a Phase],
}

/// The verifier's JSON verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Whether the work does what the task asks.
    pub success: bool,
    /// Every problem found, precise enough to fix.
    #[serde(default)]
    pub errors: Vec<String>,
    /// What the verifier checked and found right.
    #[serde(default)]
    pub checks_passed: Vec<String>,
    /// Advice for the next attempt.
    #[serde(default)]
    pub feedback: String,
}

/// Why a response holds no usable verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerdictError {
    /// No JSON object with a boolean `success`.
    #[error("its response has no JSON object with a boolean `success`")]
    Missing,
    /// The last object with a boolean `success` breaks the format; says how.
    #[error("{0}")]
    Invalid(String),
}

/// How sub-agent verification ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubAgentOutcome {
    /// A valid verdict, passing or failing (redacted and bounded).
    Verdict(Verdict),
    /// The verdict is void: no or an invalid verdict, no evidence, a timeout, a non-zero exit, or
    /// the verifier changed the workspace.
    Void {
        /// Every reason, joined by "; " (redacted).
        reason: String,
        /// Files the verifier created, modified or deleted, in that order; undone unless listed
        /// in `not_restored`.
        changed: Vec<String>,
        /// Changed files still not as they were before the review.
        not_restored: Vec<String>,
    },
    /// The run was cancelled; whatever the verifier changed was undone as far as possible.
    Cancelled,
}

impl SubAgentOutcome {
    /// The verifier's part of the next attempt's feedback (Markdown): a failing verdict's errors,
    /// feedback and passed checks, or why the review was void. `None` for a passing verdict and
    /// for a cancelled review.
    #[must_use]
    pub fn feedback(&self) -> Option<String> {
        let mut out = String::new();
        match self {
            SubAgentOutcome::Verdict(verdict) if verdict.success => return None,
            SubAgentOutcome::Cancelled => return None,
            SubAgentOutcome::Verdict(verdict) => {
                out.push_str("## The reviewer rejected the work\n\n");
                out.push_str(
                    "A separate reviewer checked your work against the task and found it not \
                     done. Fix every problem it names:\n\n",
                );
                if verdict.errors.is_empty() {
                    out.push_str("- (the reviewer named no specific problem)\n");
                }
                for error in &verdict.errors {
                    list_item(&mut out, error);
                }
                out.push('\n');
                if !verdict.feedback.trim().is_empty() {
                    out.push_str("The reviewer's advice:\n\n");
                    fenced(&mut out, "text", verdict.feedback.trim());
                    out.push('\n');
                }
                if !verdict.checks_passed.is_empty() {
                    out.push_str("What the reviewer found right (keep it so):\n\n");
                    for check in &verdict.checks_passed {
                        list_item(&mut out, check);
                    }
                    out.push('\n');
                }
            }
            SubAgentOutcome::Void { reason, .. } => {
                out.push_str("## The review of the work was void\n\n");
                let _ = writeln!(
                    out,
                    "The independent review of this attempt could not be trusted, so the attempt \
                     counts as failed: {reason}. Make sure the work is complete and correct; it \
                     will be reviewed again.\n"
                );
            }
        }
        while out.ends_with("\n\n") {
            out.pop();
        }
        Some(out)
    }
}

/// What `verdict.json` holds.
#[derive(Serialize)]
#[serde(untagged)]
enum Record<'a> {
    Verdict(&'a Verdict),
    Void {
        void: &'a str,
        changed: &'a [String],
        not_restored: &'a [String],
        /// The verdict the verifier gave, when it gave one: for a person reading the folder.
        #[serde(skip_serializing_if = "Option::is_none")]
        verdict: Option<&'a Verdict>,
    },
    Cancelled {
        cancelled: bool,
        changed: &'a [String],
        not_restored: &'a [String],
    },
}

/// Runs the verifier on the attempt and judges its answer.
///
/// # Errors
/// When the attempt folder cannot be written, a snapshot cannot be taken, the verifier's command
/// does not render or cannot be started (the message names the program): helixflow could not
/// verify at all, and retrying would fail the same way. Everything the verifier does wrong is a
/// [`SubAgentOutcome::Void`] instead.
pub async fn check(c: &SubAgentCheck<'_>) -> io::Result<SubAgentOutcome> {
    if c.cancel.is_cancelled() {
        return Ok(SubAgentOutcome::Cancelled);
    }
    std::fs::create_dir_all(c.attempt_dir).map_err(|e| with_path(&e, c.attempt_dir))?;
    let mut exclude = c.exclude.to_vec();
    // The verifier's own logs are written during the review; they are not its changes.
    exclude.push(c.attempt_dir.to_path_buf());

    // Protected files are watched even where ignored: they must stay byte-identical.
    let protected = ProtectedPaths::new(&c.phase.protect).ok().flatten();
    let (guard, diff) = {
        let workspace = c.workspace.to_path_buf();
        let before = c.before.clone();
        let changes = c.changes.clone();
        let options = SnapshotOptions {
            exclude: exclude.clone(),
            keep_contents_under: Some(KEEP_LIMIT),
            protected: protected.clone(),
            ..SnapshotOptions::default()
        };
        blocking(move || {
            let guard = Snapshot::take(&workspace, &options, Some(&before))?;
            let diff = diff_of_changes(&workspace, &before, &changes);
            Ok((guard, diff))
        })
        .await?
    };

    let prompt = verification_prompt(c, &diff);
    let journal_copy = c.attempt_dir.join(PROMPT_FILE);
    let reads_file = c.verifier.command.iter().any(|a| a.contains("prompt_file"));
    let prompt_file = PromptFile::write(&journal_copy, &prompt, &c.redactor, reads_file)
        .map_err(|e| with_path(&e, &journal_copy))?;
    let spec = verifier_spec(c, &prompt, prompt_file.path())?;
    let prompt_len = prompt.len();
    drop(prompt);
    let run = process::run(spec, c.cancel).await;
    drop(prompt_file);

    // Whatever happened to the verifier, what it changed is undone before anything else.
    let restoration = {
        let workspace = c.workspace.to_path_buf();
        // Judged by the rules as they were before the review: an ignore file the verifier
        // wrote hides none of its changes.
        let options = SnapshotOptions {
            exclude,
            protected,
            rules: guard.ignore_rules(),
            ..SnapshotOptions::default()
        };
        let others = super::gates::claimed_by_others(c.phase, c.alongside);
        blocking(move || undo_changes(&workspace, &guard, &options, &others)).await?
    };

    let mut reasons = Vec::new();
    // Files the verifier's CLI keeps for itself (`bookkeeping`) are undone like any change, but
    // writing them is not reviewing badly.
    let only_bookkeeping = {
        let mut changed = restoration.changed.clone();
        let set = glob_set(&c.verifier.bookkeeping);
        changed.split_off(|path| set.is_match(path));
        changed.is_empty() && restoration.not_restored.is_empty()
    };
    if !restoration.changed.is_empty() && !only_bookkeeping {
        reasons.push(restoration.reason());
    }
    let exit = match run {
        Ok(exit) => Some(exit),
        Err(error) if restoration.changed.is_empty() => {
            return Err(start_error(error, c.verifier, prompt_len));
        }
        Err(error) => {
            reasons.push(format!("helixflow lost track of the verifier: {error}"));
            None
        }
    };
    let changed = restoration.changed_paths();
    let not_restored = restoration.not_restored;
    if exit.as_ref().is_some_and(|exit| exit.cancelled) || c.cancel.is_cancelled() {
        write_record(
            c,
            &Record::Cancelled {
                cancelled: true,
                changed: &changed,
                not_restored: &not_restored,
            },
        )?;
        return Ok(SubAgentOutcome::Cancelled);
    }

    let mut verdict = None;
    if let Some(exit) = &exit {
        if let Some(problem) = exit_problem(c.verifier, exit) {
            reasons.push(problem);
        } else {
            let (given, problems) = judge_response(c);
            verdict = given.map(|v| bounded(redacted(&v, &c.redactor)));
            reasons.extend(problems);
        }
    }

    if reasons.is_empty()
        && let Some(verdict) = verdict
    {
        write_record(c, &Record::Verdict(&verdict))?;
        return Ok(SubAgentOutcome::Verdict(verdict));
    }
    let reason = c.redactor.redact(&reasons.join("; "));
    write_record(
        c,
        &Record::Void {
            void: &reason,
            changed: &changed,
            not_restored: &not_restored,
            verdict: verdict.as_ref(),
        },
    )?;
    Ok(SubAgentOutcome::Void {
        reason,
        changed,
        not_restored,
    })
}

/// The built-in verification prompt: the phase's task, the expected outputs, the gate results so
/// far, the files this attempt changed with `diff` (see [`diff_of_changes`]), the phase's
/// `verifier-prompt`, and the verdict format.
#[must_use]
pub fn verification_prompt(c: &SubAgentCheck<'_>, diff: &str) -> String {
    let phase = c.phase;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Review the work of phase `{}` (attempt {})\n",
        phase.name.value, c.attempt
    );
    out.push_str(
        "You are reviewing another agent's work with fresh eyes. The agent was given the task \
         below and has finished. Decide whether the work in this workspace really accomplishes the \
         task: read the changed files, and run read-only checks (tests, linters, type checkers) \
         where they help. Trust only what you verify yourself, not what the agent claims.\n\n\
         **Do not create, modify or delete any file.** The workspace is compared before and after \
         your review: any change voids your verdict, fails the attempt, and is undone. Checks that \
         write files (caches, build output, coverage reports) count as changes unless the project \
         ignores those files (e.g. in `.gitignore`): prefer options that write nothing.\n\n",
    );

    out.push_str("## The task\n\n");
    if let Some(description) = phase
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
    {
        let _ = writeln!(out, "The phase: {}\n", description.trim());
    }
    if c.task.trim().is_empty() {
        out.push_str("The agent was given no instructions beyond the expected outputs.\n\n");
    } else {
        out.push_str("The agent was given these instructions:\n\n");
        fenced(&mut out, "text", c.task);
        out.push('\n');
    }

    out.push_str("## Expected outputs\n\n");
    if phase.outputs.is_empty() {
        out.push_str("The phase declares no expected files: judge by the task.\n\n");
    } else {
        for output in &phase.outputs {
            let _ = writeln!(out, "- {}", describe_output(output));
        }
        out.push('\n');
    }

    out.push_str("## Gate results so far\n\n");
    if c.gate_reports.is_empty() {
        out.push_str("No gate ran before this review.\n\n");
    } else {
        for report in c.gate_reports {
            gate_item(&mut out, report);
        }
        out.push('\n');
    }

    out.push_str("## Changes made by this attempt\n\n");
    changes_section(&mut out, c.changes, diff);

    if let Some(extra) = &phase.verifier_prompt
        && !extra.text().trim().is_empty()
    {
        out.push_str("## Additional instructions\n\n");
        out.push_str(extra.text().trim_end());
        out.push_str("\n\n");
    }

    // The format line is deliberately not valid JSON, so that a response echoing the prompt is
    // never mistaken for a verdict.
    out.push_str(
        "## Your verdict\n\n\
         End your answer with your verdict: one JSON object in this form, with nothing after it:\n\n\
         ```json\n\
         {\"success\": true | false, \"errors\": [\"…\"], \"checks_passed\": [\"…\"], \"feedback\": \"…\"}\n\
         ```\n\n\
         - `success`: `true` only when the task is fully and correctly done; otherwise `false`.\n\
         - `errors`: every problem you found, precise enough to fix without guessing (file, line, \
         what is wrong, what is expected); empty when `success` is `true`.\n\
         - `checks_passed`: what you checked and found right.\n\
         - `feedback`: what the agent should do in its next attempt; may be empty when `success` \
         is `true`.\n",
    );
    out
}

/// The verdict in a response: the last JSON object whose `success` is a boolean (see the module
/// documentation). `errors` and `checks_passed` must be lists of strings and `feedback` a string
/// when present (`null` counts as absent); other fields are ignored.
///
/// # Errors
/// [`VerdictError::Missing`] when no object has a boolean `success`; [`VerdictError::Invalid`]
/// when the last one breaks the format, or an object has a `success` that is not a boolean and
/// none has a boolean one.
pub fn parse_verdict(response: &str) -> Result<Verdict, VerdictError> {
    let mut start = response.len().saturating_sub(VERDICT_WINDOW);
    while !response.is_char_boundary(start) {
        start += 1;
    }
    let text = &response[start..];
    let mut last: Option<Map<String, Value>> = None;
    let mut not_boolean: Option<Value> = None;
    let mut at = 0;
    while let Some(offset) = text[at..].find('{') {
        let begin = at + offset;
        let mut values = serde_json::Deserializer::from_str(&text[begin..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(Value::Object(object))) => {
                // The object's insides (strings with braces, nested objects) are part of it.
                at = begin + values.byte_offset();
                match object.get("success") {
                    Some(Value::Bool(_)) => last = Some(object),
                    Some(other) => not_boolean = Some(other.clone()),
                    None => {}
                }
            }
            _ => at = begin + 1,
        }
    }
    match (last, not_boolean) {
        (Some(object), _) => verdict_from(&object),
        (None, Some(value)) => Err(VerdictError::Invalid(format!(
            "`success` must be true or false, not {}",
            short_json(&value)
        ))),
        (None, None) => Err(VerdictError::Missing),
    }
}

/// A unified diff of the attempt's changes to text files, in path order: created files as all
/// added, deleted ones as all removed, modified ones against the contents `before` kept. Binary
/// files, symlinks, files over 1 MiB and files whose earlier contents were not kept are named with
/// what changed instead. At most [`DIFF_LIMIT`] bytes in all and [`FILE_DIFF_LIMIT`] per file; a
/// cut part ends with a note of how many lines were left out, and the files that did not fit are
/// named in a closing note.
#[must_use]
pub fn diff_of_changes(workspace: &Path, before: &Snapshot, changes: &Changes) -> String {
    let mut entries: Vec<(&str, ChangeKind)> = changes
        .created
        .iter()
        .map(|p| (p.as_str(), ChangeKind::Created))
        .chain(
            changes
                .modified
                .iter()
                .map(|p| (p.as_str(), ChangeKind::Modified)),
        )
        .chain(
            changes
                .deleted
                .iter()
                .map(|p| (p.as_str(), ChangeKind::Deleted)),
        )
        .collect();
    entries.sort_unstable();
    let mut scratch = Scratch::default();
    let mut out = String::new();
    let mut left_out: Vec<&str> = Vec::new();
    for (path, kind) in entries {
        let room = (DIFF_LIMIT - CLOSING_NOTE_RESERVE)
            .saturating_sub(out.len())
            .min(FILE_DIFF_LIMIT);
        if room < MIN_FILE_ROOM || !left_out.is_empty() {
            left_out.push(path);
            continue;
        }
        let old = match kind {
            ChangeKind::Created => Side::Absent,
            ChangeKind::Modified | ChangeKind::Deleted => scratch.old_side(before, path),
        };
        let new = match kind {
            ChangeKind::Deleted => Side::Absent,
            ChangeKind::Created | ChangeKind::Modified => current_side(workspace, path),
        };
        let mut part = file_part(path, kind, &old, &new);
        if kind == ChangeKind::Modified
            && let Some(note) = mode_note(workspace, before, path)
        {
            part.push_str(&note);
        }
        out.push_str(&fit(part, room));
    }
    if !left_out.is_empty() {
        out.push_str(&closing_note(&left_out));
    }
    out
}

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ChangeKind {
    Created,
    Modified,
    Deleted,
}

/// One side (before or after) of a changed file, as the diff sees it.
#[derive(Debug)]
enum Side {
    /// The file does not exist on this side.
    Absent,
    /// UTF-8 text without NUL bytes, at most [`DIFF_INPUT_LIMIT`] bytes.
    Text(String),
    /// Any other contents, with their size.
    Binary(u64),
    /// A symlink, with its target.
    Symlink(String),
    /// A file too large to diff, with its size.
    TooLarge(u64),
    /// A file whose contents before the attempt were not kept, with its size.
    NotKept(u64),
    /// A file that cannot be read, with the reason.
    Unreadable(String),
}

impl Side {
    /// "a binary file of 12 bytes", for a change that is named rather than diffed.
    fn describe(&self) -> String {
        match self {
            Side::Absent => "nothing".to_owned(),
            Side::Text(text) => format!("a text file of {}", bytes(text.len() as u64)),
            Side::Binary(size) => format!("a binary file of {}", bytes(*size)),
            Side::Symlink(target) => format!("a symlink to `{target}`"),
            Side::TooLarge(size) => format!("a file of {}, too large to diff", bytes(*size)),
            Side::NotKept(size) => format!(
                "a file of {} whose contents before the attempt were not kept",
                bytes(*size)
            ),
            Side::Unreadable(why) => format!("a file that cannot be read ({why})"),
        }
    }
}

/// One file's part of the diff: a unified diff when both sides are text (or absent), else a line
/// naming the change.
fn file_part(path: &str, kind: ChangeKind, old: &Side, new: &Side) -> String {
    let text = |side: &Side| match side {
        Side::Absent => Some(String::new()),
        Side::Text(text) => Some(text.clone()),
        _ => None,
    };
    if let (Some(old_text), Some(new_text)) = (text(old), text(new)) {
        let diff = TextDiff::configure()
            .timeout(DIFF_TIMEOUT)
            .diff_lines(&old_text, &new_text);
        let old_name = match old {
            Side::Absent => "/dev/null".to_owned(),
            _ => format!("a/{path}"),
        };
        let new_name = match new {
            Side::Absent => "/dev/null".to_owned(),
            _ => format!("b/{path}"),
        };
        let unified = diff.unified_diff().header(&old_name, &new_name).to_string();
        if !unified.is_empty() {
            return unified;
        }
        // Same text on both sides: an empty file created or deleted, or a change of mode only.
        return match kind {
            ChangeKind::Created => format!("`{path}`: created, empty\n"),
            ChangeKind::Deleted => format!("`{path}`: deleted, was empty\n"),
            ChangeKind::Modified => String::new(),
        };
    }
    match kind {
        ChangeKind::Created => format!("`{path}`: created, {}\n", new.describe()),
        ChangeKind::Deleted => format!("`{path}`: deleted, was {}\n", old.describe()),
        ChangeKind::Modified => format!(
            "`{path}`: changed from {} to {}\n",
            old.describe(),
            new.describe()
        ),
    }
}

/// A line saying the executable bit changed, when it did.
fn mode_note(workspace: &Path, before: &Snapshot, path: &str) -> Option<String> {
    let was = before.get(path)?.executable;
    let meta = std::fs::symlink_metadata(workspace.join(path)).ok()?;
    if meta.file_type().is_symlink() {
        return None;
    }
    let is = executable(&meta);
    (was != is).then(|| {
        if is {
            format!("`{path}`: made executable\n")
        } else {
            format!("`{path}`: no longer executable\n")
        }
    })
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_meta: &std::fs::Metadata) -> bool {
    false
}

/// The file as it is now in the workspace, without following a symlink.
fn current_side(workspace: &Path, path: &str) -> Side {
    let full = workspace.join(path);
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(error) => return Side::Unreadable(error.to_string()),
    };
    if meta.file_type().is_symlink() {
        return match std::fs::read_link(&full) {
            Ok(target) => Side::Symlink(target.to_string_lossy().into_owned()),
            Err(error) => Side::Unreadable(error.to_string()),
        };
    }
    if !meta.is_file() {
        return Side::Unreadable("not a regular file".to_owned());
    }
    if meta.len() > DIFF_INPUT_LIMIT {
        return Side::TooLarge(meta.len());
    }
    match read_limited(&full) {
        Ok(bytes) => classify(bytes),
        Err(error) => Side::Unreadable(error.to_string()),
    }
}

/// Reads at most [`DIFF_INPUT_LIMIT`] + 1 bytes: a file that grew since it was measured is not
/// read whole.
fn read_limited(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(DIFF_INPUT_LIMIT + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Text, or binary (a NUL byte early on, invalid UTF-8), or too large.
fn classify(bytes: Vec<u8>) -> Side {
    let size = bytes.len() as u64;
    if size > DIFF_INPUT_LIMIT {
        return Side::TooLarge(size);
    }
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return Side::Binary(size);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Side::Text(text),
        Err(_) => Side::Binary(size),
    }
}

/// A private temporary folder the snapshot's kept contents are restored into, one file at a time,
/// to be read: the snapshot hands its kept bytes out only through `restore`.
#[derive(Default)]
struct Scratch {
    dir: Option<PathBuf>,
}

impl Scratch {
    /// The file as the snapshot `before` kept it.
    fn old_side(&mut self, before: &Snapshot, path: &str) -> Side {
        let Some(state) = before.get(path) else {
            return Side::Unreadable("not in the snapshot taken before the attempt".to_owned());
        };
        if state.size > DIFF_INPUT_LIMIT {
            return Side::TooLarge(state.size);
        }
        match self.restored(before, path) {
            Ok(Some(side)) => side,
            Ok(None) => Side::NotKept(state.size),
            Err(error) => Side::Unreadable(error.to_string()),
        }
    }

    /// Restores `path` alone into the empty scratch folder and reads it back; `None` when the
    /// snapshot did not keep its contents.
    fn restored(&mut self, before: &Snapshot, path: &str) -> io::Result<Option<Side>> {
        let dir = self.folder()?;
        let one = Changes {
            modified: vec![path.to_owned()],
            ..Changes::default()
        };
        let not_restored = before.restore(&dir, &one);
        let side = match not_restored {
            Ok(not_restored) if not_restored.is_empty() => only_file(&dir).map(Some),
            Ok(_) => Ok(None),
            Err(error) => Err(error),
        };
        // Emptied for the next file; a folder that cannot be emptied is replaced.
        if std::fs::remove_dir_all(&dir).is_ok() {
            let _ = create_private_dir(&dir);
        }
        if !dir.is_dir() {
            self.dir = None;
        }
        side
    }

    /// The scratch folder, created on first use.
    fn folder(&mut self) -> io::Result<PathBuf> {
        if let Some(dir) = &self.dir {
            return Ok(dir.clone());
        }
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let dir = base.join(format!(
                "helixflow-diff-{}-{}",
                std::process::id(),
                NEXT_SCRATCH.fetch_add(1, Ordering::Relaxed)
            ));
            match create_private_dir(&dir) {
                Ok(()) => {
                    self.dir = Some(dir.clone());
                    return Ok(dir);
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(with_path(&error, &dir)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "cannot create a scratch folder in {}: every name tried exists",
                base.display()
            ),
        ))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            // Best effort: a leftover folder in the temporary folder harms nothing.
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Creates a folder only its owner can enter: it briefly holds copies of workspace files.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// The contents of the one file (or symlink) below `dir`.
fn only_file(dir: &Path) -> io::Result<Side> {
    let mut folder = dir.to_path_buf();
    loop {
        let entry = std::fs::read_dir(&folder)?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "the restored file is missing")
        })??;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            folder = entry.path();
            continue;
        }
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            return Ok(Side::Symlink(target.to_string_lossy().into_owned()));
        }
        return Ok(classify(read_limited(&entry.path())?));
    }
}

/// Cuts a file's part to `room` bytes at a line end, with a note of how many lines were left out.
fn fit(part: String, room: usize) -> String {
    if part.len() <= room {
        return part;
    }
    let keep = room.saturating_sub(CUT_NOTE_RESERVE);
    let cut = if let Some(newline) = part.as_bytes()[..keep].iter().rposition(|&b| b == b'\n') {
        newline + 1
    } else {
        // One line longer than the room (minified code): cut inside it.
        let mut at = keep;
        while !part.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let left_out = part[cut..].lines().count();
    let mut out = part[..cut].to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "[helixflow: {left_out} more line{} of this file's diff left out]",
        plural(left_out)
    );
    out
}

/// The note naming the files whose diff did not fit, within [`CLOSING_NOTE_RESERVE`] bytes.
fn closing_note(left_out: &[&str]) -> String {
    let mut note = format!(
        "[helixflow: the diff is cut at {} KiB; not shown:",
        DIFF_LIMIT / 1024
    );
    let mut named = 0;
    for path in left_out {
        let item = format!(" `{path}`,");
        // Room for the longest ending: " and 18446744073709551615 more files]\n".
        if note.len() + item.len() + 48 > CLOSING_NOTE_RESERVE {
            break;
        }
        note.push_str(&item);
        named += 1;
    }
    let rest = left_out.len() - named;
    if rest == 0 {
        note.pop();
    } else {
        let _ = write!(note, " and {rest} more file{}", plural(rest));
    }
    note.push_str("]\n");
    note
}

/// The globs that compile, as one set.
fn glob_set(globs: &[String]) -> globset::GlobSet {
    let mut builder = globset::GlobSetBuilder::new();
    for glob in globs
        .iter()
        .filter_map(|g| crate::language::compile_glob(g).ok())
    {
        builder.add(glob);
    }
    builder.build().unwrap_or_default()
}

/// The verifier's command, environment, limits and logs.
fn verifier_spec(c: &SubAgentCheck<'_>, prompt: &str, prompt_file: &Path) -> io::Result<ChildSpec> {
    let verifier = c.verifier;
    let values = BTreeMap::from([
        ("prompt", prompt.to_owned()),
        ("prompt_file", prompt_file.display().to_string()),
        ("phase", c.phase.name.value.clone()),
        ("attempt", c.attempt.to_string()),
        ("workspace", c.workspace.display().to_string()),
        // A review is a session of its own, never one a worker continues.
        ("session_id", uuid::Uuid::new_v4().to_string()),
    ]);
    let argv = render_argv(&verifier.command, &values);
    let mut spec = ChildSpec::argv(
        &argv,
        c.workspace,
        c.attempt_dir.join(STDOUT_LOG),
        c.attempt_dir.join(STDERR_LOG),
    )?;
    if verifier.stdin {
        spec.stdin = Some(prompt.as_bytes().to_vec());
    }
    spec.timeout = verifier.timeout.map(Millis::duration);
    spec.idle_timeout = verifier.idle_timeout.map(Millis::duration);
    let mut env: Vec<(OsString, OsString)> = vec![("PYTHONDONTWRITEBYTECODE".into(), "1".into())];
    env.extend(c.env.iter().cloned());
    env.extend(
        verifier
            .env
            .iter()
            .chain(&c.phase.env)
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env.push(("HELIXFLOW_PHASE".into(), c.phase.name.value.clone().into()));
    env.push(("HELIXFLOW_ATTEMPT".into(), c.attempt.to_string().into()));
    spec.env = env;
    spec.grace = c.grace;
    spec.redactor = c.redactor.clone();
    Ok(spec)
}

/// A start failure, with a hint when the prompt was too long for the command line.
fn start_error(error: io::Error, verifier: &Agent, prompt_len: usize) -> io::Error {
    if error.kind() == io::ErrorKind::ArgumentListTooLong {
        return io::Error::new(
            error.kind(),
            format!(
                "{error}: the verification prompt ({}) is too long for a command-line argument; \
                 give verifier `{}` the prompt with `{{{{ prompt_file }}}}` or `stdin #true`",
                bytes(prompt_len as u64),
                verifier.name.value
            ),
        );
    }
    error
}

/// What the verifier changed, and what of it could not be undone.
#[derive(Debug, Default)]
struct Restoration {
    changed: Changes,
    not_restored: Vec<String>,
    /// The first error met while restoring, when there was one.
    error: Option<String>,
}

impl Restoration {
    fn changed_paths(&self) -> Vec<String> {
        self.changed.all().map(str::to_owned).collect()
    }

    /// The reason a verdict is void because of these changes.
    fn reason(&self) -> String {
        let mut parts = Vec::new();
        for (verb, paths) in [
            ("created", &self.changed.created),
            ("modified", &self.changed.modified),
            ("deleted", &self.changed.deleted),
        ] {
            if !paths.is_empty() {
                parts.push(format!("{verb} {}", name_list(paths, MAX_NAMED_IN_REASON)));
            }
        }
        let mut reason = format!(
            "the verifier changed the workspace, which a review must not do: {}",
            parts.join(", ")
        );
        if self.not_restored.is_empty() {
            reason.push_str(" (all undone)");
        } else {
            let _ = write!(
                reason,
                " (could not undo {}",
                name_list(&self.not_restored, MAX_NAMED_IN_REASON)
            );
            if let Some(error) = &self.error {
                let _ = write!(reason, ": {error}");
            }
            reason.push(')');
        }
        reason
    }
}

/// Compares the workspace with `guard`, the snapshot taken before the review, and undoes every
/// change; a fresh snapshot then shows what is still not as it was.
fn undo_changes(
    workspace: &Path,
    guard: &Snapshot,
    options: &SnapshotOptions,
    others: &impl Fn(&str) -> bool,
) -> io::Result<Restoration> {
    let after = Snapshot::take(workspace, options, Some(guard))?;
    let mut changed = guard.diff(&after);
    // Left to the phases running alongside, whose work they are.
    changed.split_off(others);
    if changed.is_empty() {
        return Ok(Restoration::default());
    }
    let error = guard
        .restore(workspace, &changed)
        .err()
        .map(|e| e.to_string());
    let now = Snapshot::take(workspace, options, Some(&after))?;
    let mut still = guard.diff(&now);
    still.split_off(others);
    let mut not_restored: Vec<String> = still.all().map(str::to_owned).collect();
    not_restored.sort_unstable();
    Ok(Restoration {
        changed,
        not_restored,
        error,
    })
}

/// Why the verifier's exit voids the verdict, if it does.
fn exit_problem(verifier: &Agent, exit: &ChildExit) -> Option<String> {
    if let Some(kind) = exit.timeout {
        let (limit, what) = match kind {
            TimeoutKind::Wall => (verifier.timeout, "ran past its `timeout`"),
            TimeoutKind::Idle => (
                verifier.idle_timeout,
                "produced no output for its `idle-timeout`",
            ),
        };
        let limit = limit.map_or_else(String::new, |l| {
            format!(" of {}", humantime::format_duration(l.duration()))
        });
        return Some(format!("the verifier {what}{limit} and was stopped"));
    }
    if exit.success() {
        return None;
    }
    let how = match (exit.code, exit.signal) {
        (_, Some(signal)) => format!("was ended by {}", signal_name(signal)),
        (Some(code), None) => format!("exited with code {code}"),
        (None, None) => "exited abnormally".to_owned(),
    };
    Some(format!("the verifier {how} (see {STDERR_LOG})"))
}

/// The verdict in the verifier's response, and every reason it is not to be trusted: an
/// unreadable response, an error result, missing evidence, no or an invalid verdict.
fn judge_response(c: &SubAgentCheck<'_>) -> (Option<Verdict>, Vec<String>) {
    let verifier = c.verifier;
    let stdout = c.attempt_dir.join(STDOUT_LOG);
    let stderr = c.attempt_dir.join(STDERR_LOG);
    let mut problems = Vec::new();
    if let Some(pattern) = &verifier.evidence {
        match regex::bytes::Regex::new(pattern) {
            Ok(regex) => match response::transcript_matches(&regex, &[&stdout, &stderr]) {
                Ok(true) => {}
                Ok(false) => problems.push(format!(
                    "the verifier's transcript does not match its `evidence` pattern `{pattern}`: \
                     the review looks skipped"
                )),
                Err(error) => problems.push(format!(
                    "the verifier's transcript cannot be read for `evidence`: {error}"
                )),
            },
            Err(error) => problems.push(format!(
                "the verifier's `evidence` pattern is not a valid regex: {error}"
            )),
        }
    }
    if let Some(tools) = &verifier.evidence_tools {
        match crate::engine::transcript::tool_calls(verifier.response, &stdout) {
            Ok(calls) if calls.any_succeeded(tools) => {}
            Ok(_) => problems.push(
                "no tool call of the verifier succeeded (`evidence-tools`): the review looks skipped"
                    .to_owned(),
            ),
            Err(error) => problems.push(format!(
                "the verifier's transcript cannot be read for `evidence-tools`: {error}"
            )),
        }
    }
    let response = match response::extract(verifier.response, &stdout) {
        Ok(response) => response,
        Err(error) => {
            problems.push(format!("the verifier's response cannot be read: {error}"));
            return (None, problems);
        }
    };
    if let Some(error) = &response.error {
        problems.push(format!("the verifier's result is an error ({error})"));
    }
    match parse_verdict(&response.text) {
        Ok(verdict) => (Some(verdict), problems),
        Err(VerdictError::Missing) => {
            problems.push(format!(
                "the verifier gave no verdict: {}",
                VerdictError::Missing
            ));
            (None, problems)
        }
        Err(VerdictError::Invalid(why)) => {
            problems.push(format!("the verifier's verdict is invalid: {why}"));
            (None, problems)
        }
    }
}

/// Checks the fields of an object whose `success` is a boolean.
fn verdict_from(object: &Map<String, Value>) -> Result<Verdict, VerdictError> {
    let Some(Value::Bool(success)) = object.get("success") else {
        return Err(VerdictError::Invalid(
            "`success` must be true or false".to_owned(),
        ));
    };
    let errors = string_list(object, "errors")?;
    let checks_passed = string_list(object, "checks_passed")?;
    let feedback = match object.get("feedback") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => {
            return Err(VerdictError::Invalid(format!(
                "`feedback` must be a string, not {}",
                short_json(other)
            )));
        }
    };
    if *success && !errors.is_empty() {
        return Err(VerdictError::Invalid(format!(
            "`success` is true but `errors` lists {} problem{}: a verdict must not contradict \
             itself",
            errors.len(),
            plural(errors.len())
        )));
    }
    Ok(Verdict {
        success: *success,
        errors,
        checks_passed,
        feedback,
    })
}

/// A field that must be a list of strings; absent or `null` is an empty list.
fn string_list(object: &Map<String, Value>, field: &str) -> Result<Vec<String>, VerdictError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(VerdictError::Invalid(format!(
                    "`{field}` must be a list of strings, but entry {} is {}",
                    index + 1,
                    short_json(other)
                ))),
            })
            .collect(),
        Some(other) => Err(VerdictError::Invalid(format!(
            "`{field}` must be a list of strings, not {}",
            short_json(other)
        ))),
    }
}

/// A JSON value for a message: at most 60 characters of it.
fn short_json(value: &Value) -> String {
    first_chars(&value.to_string(), 60)
}

fn redacted(verdict: &Verdict, redactor: &Redactor) -> Verdict {
    Verdict {
        success: verdict.success,
        errors: verdict.errors.iter().map(|e| redactor.redact(e)).collect(),
        checks_passed: verdict
            .checks_passed
            .iter()
            .map(|e| redactor.redact(e))
            .collect(),
        feedback: redactor.redact(&verdict.feedback),
    }
}

/// The verdict within the limits the module documentation gives.
fn bounded(verdict: Verdict) -> Verdict {
    Verdict {
        success: verdict.success,
        errors: bounded_list(verdict.errors),
        checks_passed: bounded_list(verdict.checks_passed),
        feedback: first_chars(&verdict.feedback, MAX_FEEDBACK_CHARS),
    }
}

fn bounded_list(items: Vec<String>) -> Vec<String> {
    let total = items.len();
    let kept = if total > MAX_VERDICT_ITEMS {
        MAX_VERDICT_ITEMS - 1
    } else {
        total
    };
    let mut out: Vec<String> = items
        .into_iter()
        .take(kept)
        .map(|item| first_chars(&item, MAX_ITEM_CHARS))
        .collect();
    if kept < total {
        out.push(format!("… and {} more", total - kept));
    }
    out
}

/// Writes `verdict.json` (redacted).
fn write_record(c: &SubAgentCheck<'_>, record: &Record<'_>) -> io::Result<()> {
    let path = c.attempt_dir.join(VERDICT_FILE);
    let json = c
        .redactor
        .to_json_pretty(record)
        .map_err(io::Error::other)?;
    std::fs::write(&path, json).map_err(|e| with_path(&e, &path))
}

/// One gate as a list item, its details as sub-items (later lines of a detail indented under it).
fn gate_item(out: &mut String, report: &GateReport) {
    let status = match report.status {
        GateStatus::Passed => "passed",
        GateStatus::Failed => "failed",
        GateStatus::Skipped => "skipped",
    };
    if report.name == report.kind {
        let _ = writeln!(out, "- `{}`: {status}", report.name);
    } else {
        let _ = writeln!(out, "- `{}` (`{}`): {status}", report.name, report.kind);
    }
    for detail in &report.details {
        let mut lines = detail.trim_end().lines();
        if let Some(first) = lines.next() {
            let _ = writeln!(out, "  - {first}");
        }
        for line in lines {
            let _ = writeln!(out, "    {line}");
        }
    }
}

/// A list item: the first line as the item, later lines indented under it.
fn list_item(out: &mut String, text: &str) {
    let mut lines = text.trim_end().lines();
    let _ = writeln!(out, "- {}", lines.next().unwrap_or_default());
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// The changed files, bounded, and the diff.
fn changes_section(out: &mut String, changes: &Changes, diff: &str) {
    if changes.is_empty() {
        out.push_str("This attempt changed no files.\n\n");
        return;
    }
    let _ = writeln!(
        out,
        "This attempt changed {} file{} ({} created, {} modified, {} deleted):\n",
        changes.len(),
        plural(changes.len()),
        changes.created.len(),
        changes.modified.len(),
        changes.deleted.len(),
    );
    let listed = changes
        .created
        .iter()
        .map(|p| ("created", p))
        .chain(changes.modified.iter().map(|p| ("modified", p)))
        .chain(changes.deleted.iter().map(|p| ("deleted", p)));
    for (verb, path) in listed.take(MAX_LISTED_PATHS) {
        let _ = writeln!(out, "- {verb} `{path}`");
    }
    if changes.len() > MAX_LISTED_PATHS {
        let _ = writeln!(out, "- … and {} more", changes.len() - MAX_LISTED_PATHS);
    }
    out.push('\n');
    if diff.trim().is_empty() {
        out.push_str("There is no text difference to show.\n\n");
    } else {
        out.push_str(
            "The diff of these changes (binary files, very large files and symlinks are only \
             named; long diffs are cut):\n\n",
        );
        fenced(out, "diff", diff);
        out.push('\n');
    }
}

/// A fenced block with a fence longer than any backtick run inside.
fn fenced(out: &mut String, info: &str, text: &str) {
    let mut longest = 0;
    let mut run = 0;
    for ch in text.chars() {
        if ch == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = writeln!(out, "{fence}{info}");
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{fence}");
}

/// "`a`, `b` and 3 more".
fn name_list(paths: &[String], max: usize) -> String {
    let named: Vec<String> = paths.iter().take(max).map(|p| format!("`{p}`")).collect();
    let mut list = named.join(", ");
    if paths.len() > max {
        let _ = write!(list, " and {} more", paths.len() - max);
    }
    list
}

/// At most the first `max` characters of `text`, with `…` when cut.
fn first_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// "1 byte", "12 bytes".
fn bytes(size: u64) -> String {
    format!("{size} byte{}", if size == 1 { "" } else { "s" })
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

fn with_path(error: &io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// Runs blocking file-system work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_part_ends_at_a_line_with_a_note() {
        let part = (0..100).fold(String::new(), |mut part, i| {
            let _ = writeln!(part, "+line {i}");
            part
        });
        let cut = fit(part, 400);
        assert!(cut.len() <= 400, "{} bytes", cut.len());
        assert!(cut.starts_with("+line 0\n"));
        assert!(
            cut.ends_with(" more lines of this file's diff left out]\n"),
            "{cut}"
        );
    }

    #[test]
    fn a_single_long_line_is_cut_inside() {
        let part = format!("+{}\n", "é".repeat(1000));
        let cut = fit(part, 300);
        assert!(cut.len() <= 300);
        assert!(cut.ends_with("[helixflow: 1 more line of this file's diff left out]\n"));
    }

    #[test]
    fn the_closing_note_stays_within_its_reserve() {
        let long = "d/".repeat(400);
        let paths: Vec<String> = (0..50).map(|i| format!("{long}{i}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let note = closing_note(&refs);
        assert!(note.len() <= CLOSING_NOTE_RESERVE, "{} bytes", note.len());
        assert!(note.ends_with("more files]\n"), "{note}");
        assert_eq!(
            closing_note(&["a", "b"]),
            "[helixflow: the diff is cut at 64 KiB; not shown: `a`, `b`]\n"
        );
    }

    #[test]
    fn fences_outgrow_backticks_inside() {
        let mut out = String::new();
        fenced(&mut out, "diff", "+```rust\n");
        assert_eq!(out, "````diff\n+```rust\n````\n");
    }
}
