//! `sub-agent` verification: a fresh verifier agent reviews one attempt's work and answers a JSON
//! verdict `{"success": bool, "errors": [..], "checks_passed": [..], "feedback": ".."}`.
//!
//! A verdict counts only when the review itself can be trusted. It is void — and the attempt
//! fails — when the verifier gives no verdict or an invalid one, when its transcript does not match
//! its `evidence` pattern, when it times out or exits non-zero, and when it changed the workspace in
//! any way: the workspace is snapshotted before the review (keeping the contents of every file up to
//! [`KEEP_LIMIT`]) and after it, and every change is listed and undone byte-exact. A third snapshot
//! checks the undoing, so a file reported as restored really is. A change to the git repository's
//! configuration, hooks or `info/` voids it too (the run puts those back when the attempt ends).
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
use std::time::Duration;

use serde::Serialize;

use crate::agent::prompt::render_argv;
use crate::agent::prompt_file::PromptFile;
use crate::event::how_it_ended;
use crate::event::{ChildExit, GateReport, TimeoutKind};
use crate::model::{Agent, Millis, Phase};
use crate::process::{self, Cancel, ChildSpec};
use crate::redact::Redactor;
use crate::workspace::{Changes, ProtectedPaths, RepositoryFingerprint, Snapshot, SnapshotOptions};

mod diff;
mod prompt;
mod undo;
mod verdict;

pub use diff::{DIFF_LIMIT, FILE_DIFF_LIMIT, diff_of_changes};
pub use prompt::verification_prompt;
pub use verdict::{Verdict, VerdictError, parse_verdict};

use undo::undo_changes;
use verdict::{bounded, judge_response, redacted};

/// The verification prompt, as given to the verifier (redacted), in the attempt folder.
pub(crate) const PROMPT_FILE: &str = "verifier-prompt.md";
/// The verifier's standard output, in the attempt folder.
pub(crate) const STDOUT_LOG: &str = "verifier.stdout.log";
/// The verifier's standard error, in the attempt folder.
pub(crate) const STDERR_LOG: &str = "verifier.stderr.log";
/// The verdict, or why it is void, in the attempt folder.
pub(crate) const VERDICT_FILE: &str = "verdict.json";

/// Files up to this size are kept by the snapshot taken before the review, so that a verifier's
/// change to them can be undone; a change to a larger file is reported as not restored.
pub(crate) const KEEP_LIMIT: u64 = 32 * 1024 * 1024;

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
                    crate::text::fenced(&mut out, "", "text", verdict.feedback.trim());
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
                     counts as failed: {reason}. That is the verifier's failure, not the work's: \
                     the verifier is asked again, and the work is not run again for it.\n"
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
#[allow(
    clippy::too_many_lines,
    reason = "not yet cut into named steps; a known exception to remove"
)]
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
    let (guard, diff, repository) = {
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
            Ok((guard, diff, RepositoryFingerprint::take(&workspace)))
        })
        .await?
    };

    let prompt = verification_prompt(c, &diff);
    let journal_copy = c.attempt_dir.join(PROMPT_FILE);
    let reads_file = c.verifier.command.iter().any(|a| a.contains("prompt_file"));
    let prompt_file = PromptFile::write(&journal_copy, &prompt, &c.redactor, reads_file)
        .map_err(|e| with_path(&e, &journal_copy))?;
    let cleanup = crate::process::watchdog::cleanup_on_crash(&prompt_file);
    let spec = verifier_spec(c, &prompt, prompt_file.path())?;
    let prompt_len = prompt.len();
    drop(prompt);
    let run = process::run(spec, c.cancel).await;
    drop((prompt_file, cleanup));

    // Whatever happened to the verifier, what it changed is undone before anything else.
    let (restoration, repository) = {
        let workspace = c.workspace.to_path_buf();
        // Judged by the rules as they were before the review: an ignore file the verifier
        // wrote hides none of its changes.
        let options = SnapshotOptions {
            exclude,
            protected,
            rules: guard.ignore_rules(),
            ..SnapshotOptions::default()
        };
        let others = crate::verify::gates::claimed_by_others(c.phase, c.alongside);
        blocking(move || {
            let repository = repository.changes(&repository.again());
            Ok((
                undo_changes(&workspace, &guard, &options, &others)?,
                repository,
            ))
        })
        .await?
    };

    let mut reasons = Vec::new();
    // Files the verifier's CLI keeps for itself (`bookkeeping`) are undone like any change, but
    // writing them is not reviewing badly.
    let only_bookkeeping = {
        let mut changed = restoration.changed.clone();
        let set = crate::glob::set(&c.verifier.bookkeeping);
        changed.split_off(|path| set.is_match(path));
        changed.is_empty() && restoration.not_restored.is_empty()
    };
    if !restoration.changed.is_empty() && !only_bookkeeping {
        reasons.push(restoration.reason());
    }
    // Put back, and held against every attempt under way, when the attempt ends.
    if !repository.is_empty() {
        reasons.push(format!(
            "the verifier changed the git repository's configuration, hooks or `info/`, which \
             no one may change during a run: {}",
            repository.join("; ")
        ));
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
    let how = how_it_ended(exit.code, exit.signal);
    Some(format!("the verifier {how} (see {STDERR_LOG})"))
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

/// A list item: the first line as the item, later lines indented under it.
fn list_item(out: &mut String, text: &str) {
    let mut lines = text.trim_end().lines();
    let _ = writeln!(out, "- {}", lines.next().unwrap_or_default());
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// "1 byte", "12 bytes".
fn bytes(size: u64) -> String {
    format!("{size} byte{}", if size == 1 { "" } else { "s" })
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
