//! Running a phase's gates: the implicit `outputs`, `scope` and `protect` gates, then the declared
//! ones in order, each giving a [`GateReport`] whose details are precise enough to act on.
//!
//! Decisions the language contract leaves open:
//! - Paths are relative to the workspace and compared with `/` separators; globs use
//!   [`compile_glob`], so `*` stays within one folder and `**` crosses folders.
//! - `outputs` and `paths-exist` look at the file system for plain paths (so an output that the
//!   snapshot ignores still counts) and at the after-snapshot for globs and near misses.
//! - `from`, `paths-exist` and `front-matter` read the YAML front matter of a Markdown file (a block
//!   between `---` lines at the very top), or the whole document for `.yaml`/`.yml` files. A dotted
//!   key walks nested maps (`files.create`); a key that itself contains dots is found too. A key
//!   whose value is empty still counts as present.
//! - `sections` compares ATX headings (`#` … `######`, outside fenced code blocks and front matter)
//!   with the expected texts after trimming, ignoring closing `#`s and letter case. Setext headings
//!   (underlined with `===`) are not recognised.
//! - `syntax` checks only files in a supported language; when none is left it passes and says that
//!   nothing was checked (the lint warns about it statically). It never passes silently over an
//!   expected file that does not exist (the `outputs` gate fails for it): a pass names such files
//!   as not checked, and when nothing could be checked at all (the files are missing, or no file
//!   matches the globs) the gate is skipped, with the reason.
//! - `matches` on files matches multi-line (`^`/`$` at line ends) over each whole file, up to
//!   16 MiB of it; `absent` scans line by line. Both skip binary files (a NUL byte early on).
//! - A `command` gate that passes only after its `fix` ran passes, with a detail saying so.
//! - Every detail is redacted before it is reported.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::event::{CheckKind, GateReport, GateStatus};
use crate::model::{Gate, GateKind, Phase};
use crate::process::Cancel;
use crate::redact::Redactor;
use crate::text::{count, name_list};
use crate::workspace::{Changes, Snapshot};

mod absent;
mod approval;
mod changes;
mod command;
mod document;
mod files;
mod front_matter;
mod matches;
mod outputs;
mod paths_exist;
mod protect;
mod scope;
mod sections;
mod syntax;

pub(crate) use files::{clean, glob_files};
pub(crate) use outputs::existing_outputs;
pub use outputs::resolve_outputs;
pub(crate) use protect::judged_where_ignored;
pub(crate) use scope::claimed_by_others;

use command::CommandGate;
use protect::ProtectWatch;

/// Everything a gate may look at.
pub(in crate::verify) struct GateContext<'a> {
    /// The workspace root; every relative path is resolved against it.
    pub(in crate::verify) workspace: &'a Path,
    /// The phase whose gates run.
    pub(in crate::verify) phase: &'a Phase,
    /// The agent's final response (None for `run` steps).
    pub(in crate::verify) response: Option<&'a str>,
    /// The workspace after the attempt.
    pub(in crate::verify) after: &'a Snapshot,
    /// What the attempt changed: the diff of the workspace before the attempt and `after`, without `bookkeeping`.
    pub(in crate::verify) changes: &'a Changes,
    /// What the attempt changed among the files its agent keeps for itself (`bookkeeping`):
    /// `scope` and `changes` do not count them; `protect` does.
    pub(in crate::verify) bookkeeping: &'a Changes,
    /// Pipeline env then phase env, added to helixflow's environment for gate commands.
    pub(in crate::verify) env: &'a [(std::ffi::OsString, std::ffi::OsString)],
    /// The attempt folder: command gates write `gate-<n>-<name>.stdout`/`.stderr` here.
    pub(in crate::verify) logs: &'a Path,
    /// Stops running gate commands when the run is cancelled.
    pub(in crate::verify) cancel: &'a Cancel,
    /// Removes secrets from command logs and from every detail.
    pub(in crate::verify) redactor: Arc<Redactor>,
    /// Time between TERM and KILL when a gate command is stopped.
    pub(in crate::verify) grace: Duration,
    /// Workspace-relative folders never listed (the state folder).
    pub(in crate::verify) exclude: &'a [PathBuf],
    /// The phases that ran at some time during the phase. A change outside this phase's own
    /// `scope` and `outputs` that one of theirs claims is theirs: `scope`, `protect` and
    /// `changes` leave it out (lint warns when a phase protects what another may write at the
    /// same time).
    pub(in crate::verify) alongside: &'a [&'a Phase],
    /// Every phase of the pipeline (empty where unknown).
    pub(in crate::verify) phases: &'a [Phase],
}

/// What helixflow says about one kind of gate, written once, in the kind's own file.
#[derive(Debug)]
pub(crate) struct GateInfo {
    /// One sentence above a failed gate's details in the feedback, saying what they mean and what
    /// to do about them.
    pub intro: &'static str,
    /// What to do about a failed gate, as `helixflow verify` says it.
    pub how_to_fix: &'static str,
    /// Why `helixflow verify` outside a run cannot judge the gate; None when it can.
    pub outside_a_run: Option<&'static str>,
}

/// What helixflow says about gates of this kind.
#[must_use]
pub(crate) fn info(kind: CheckKind) -> &'static GateInfo {
    match kind {
        CheckKind::Outputs => &outputs::INFO,
        CheckKind::Scope => &scope::INFO,
        CheckKind::Protect => &protect::INFO,
        CheckKind::Syntax => &syntax::INFO,
        CheckKind::Command => &command::INFO,
        CheckKind::Matches => &matches::INFO,
        CheckKind::Absent => &absent::INFO,
        CheckKind::FrontMatter => &front_matter::INFO,
        CheckKind::Sections => &sections::INFO,
        CheckKind::PathsExist => &paths_exist::INFO,
        CheckKind::Changes => &changes::INFO,
        CheckKind::Approval => &approval::INFO,
    }
}

/// How a gate is described to the agent: `name: what it checks`.
#[must_use]
pub(crate) fn describe(gate: &Gate) -> String {
    let what = match &gate.kind {
        GateKind::Syntax { globs } => syntax::describe(globs),
        GateKind::Command { run, .. } => command::describe(run),
        GateKind::Matches { target, pattern } => matches::describe(target, pattern),
        GateKind::Absent { target, pattern } => absent::describe(target, pattern),
        GateKind::FrontMatter { path, keys } => front_matter::describe(path, keys),
        GateKind::Sections { path, headings } => sections::describe(path, headings),
        GateKind::PathsExist { doc, key } => paths_exist::describe(doc, key),
        GateKind::Changes { min } => changes::describe(*min),
        GateKind::Approval { .. } => approval::describe(),
    };
    format!("{}: {what}", gate.name)
}

/// Runs the implicit gates and the phase's gates in order, calling `on_report` as each finishes.
/// All run and all failures are reported together, unless the phase has `fail_fast` (then the rest
/// are reported as Skipped).
pub(in crate::verify) async fn run_gates(
    ctx: &GateContext<'_>,
    on_report: &mut (dyn FnMut(&GateReport) + Send),
) -> Vec<GateReport> {
    let planned = plan(ctx.phase);
    let mut reports = Vec::with_capacity(planned.len());
    let mut stopped: Option<&'static str> = None;
    let mut watch = ProtectWatch::new(ctx.phase);
    for (index, gate) in planned.iter().enumerate() {
        let started = Instant::now();
        if stopped.is_none() && ctx.cancel.is_cancelled() {
            stopped = Some("the run was cancelled");
        }
        let finding = match stopped {
            Some(reason) => Finding::skipped(reason),
            None => check(ctx, index + 1, gate, &mut watch).await,
        };
        if finding.status == GateStatus::Failed && ctx.phase.fail_fast {
            stopped = Some("an earlier gate failed and the phase has `fail-fast`");
        }
        if finding.cancelled {
            stopped = Some("the run was cancelled");
        }
        let report = GateReport {
            name: gate.name().to_owned(),
            kind: gate.kind().into(),
            status: finding.status,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            details: finding
                .details
                .iter()
                .map(|d| ctx.redactor.redact(d))
                .collect(),
        };
        on_report(&report);
        reports.push(report);
    }
    reports
}

/// A gate in the order gates run: the implicit ones first.
enum Planned<'p> {
    Outputs,
    Scope,
    Protect,
    Declared(&'p Gate),
}

impl Planned<'_> {
    fn name(&self) -> &str {
        match self {
            Planned::Declared(gate) => &gate.name,
            implicit => implicit.kind().as_str(),
        }
    }

    fn kind(&self) -> CheckKind {
        match self {
            Planned::Outputs => CheckKind::Outputs,
            Planned::Scope => CheckKind::Scope,
            Planned::Protect => CheckKind::Protect,
            Planned::Declared(gate) => CheckKind::of(&gate.kind),
        }
    }
}

fn plan(phase: &Phase) -> Vec<Planned<'_>> {
    let mut planned = Vec::with_capacity(phase.gates.len() + 3);
    if !phase.outputs.is_empty() {
        planned.push(Planned::Outputs);
    }
    if !phase.scope.is_empty() {
        planned.push(Planned::Scope);
    }
    if !phase.protect.is_empty() {
        planned.push(Planned::Protect);
    }
    planned.extend(phase.gates.iter().map(Planned::Declared));
    planned
}

/// What one gate found.
struct Finding {
    status: GateStatus,
    details: Vec<String>,
    /// The run was cancelled while the gate ran: later gates are skipped.
    cancelled: bool,
}

impl Finding {
    /// Failed when there are problems, else passed.
    fn from_problems(problems: Vec<String>) -> Self {
        let status = if problems.is_empty() {
            GateStatus::Passed
        } else {
            GateStatus::Failed
        };
        Self {
            status,
            details: problems,
            cancelled: false,
        }
    }

    fn passed_with(detail: String) -> Self {
        Self {
            status: GateStatus::Passed,
            details: vec![detail],
            cancelled: false,
        }
    }

    fn failed(detail: String) -> Self {
        Self::from_problems(vec![detail])
    }

    fn skipped(reason: impl Into<String>) -> Self {
        Self {
            status: GateStatus::Skipped,
            details: vec![reason.into()],
            cancelled: false,
        }
    }

    fn cancelled() -> Self {
        Self {
            cancelled: true,
            ..Self::skipped("stopped: the run was cancelled")
        }
    }
}

async fn check(
    ctx: &GateContext<'_>,
    number: usize,
    gate: &Planned<'_>,
    watch: &mut ProtectWatch,
) -> Finding {
    let gate = match gate {
        Planned::Outputs => {
            let listed = listed_documents(ctx, outputs::from_documents(ctx.phase)).await;
            return Finding::from_problems(outputs::outputs_gate(ctx, &listed));
        }
        Planned::Scope => return scope::scope_gate(ctx),
        Planned::Protect => return protect::protect_gate(ctx),
        Planned::Declared(gate) => gate,
    };
    match &gate.kind {
        GateKind::Syntax { globs } => syntax::syntax_gate(ctx, globs).await,
        GateKind::Command {
            run,
            timeout,
            cwd,
            fix,
        } => {
            let command = CommandGate {
                run,
                timeout: timeout.map(crate::model::Millis::duration),
                cwd: cwd.as_deref(),
                fix: fix.as_deref(),
                log_stem: format!(
                    "gate-{number}-{}",
                    command::file_safe(&ctx.redactor.redact(&gate.name))
                ),
            };
            let mut finding = command.check(ctx, watch).await;
            // `protect` was judged before this gate ran; what the gate did to a protected file
            // is judged here.
            if !watch.notes.is_empty() && !finding.cancelled {
                finding.status = GateStatus::Failed;
                finding.details.append(&mut watch.notes);
            }
            watch.notes.clear();
            finding
        }
        GateKind::Matches { target, pattern } => matches::matches_gate(ctx, target, pattern).await,
        GateKind::Absent { target, pattern } => absent::absent_gate(ctx, target, pattern).await,
        GateKind::FrontMatter { path, keys } => {
            let (workspace, path, keys) = (ctx.workspace.to_owned(), path.clone(), keys.clone());
            off_the_runtime(move || front_matter::front_matter_gate(&workspace, &path, &keys)).await
        }
        GateKind::Sections { path, headings } => {
            let (workspace, path, headings) =
                (ctx.workspace.to_owned(), path.clone(), headings.clone());
            off_the_runtime(move || sections::sections_gate(&workspace, &path, &headings)).await
        }
        GateKind::PathsExist { doc, key } => {
            let listed = listed_documents(ctx, vec![(doc.clone(), key.clone())]).await;
            paths_exist::paths_exist_gate(ctx, doc, key, &listed)
        }
        GateKind::Changes { min } => changes::changes_gate(ctx, *min),
        // A person decides (engine::approvals) once every other gate passed; the gate runner only
        // holds its place in the order.
        GateKind::Approval { .. } => approval::approval_gate(),
    }
}

/// Runs `work` on the blocking pool: the one thread that drives the run keeps serving signals,
/// timeouts and cancellation while a gate reads the agent's files.
async fn off_the_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

/// The paths listed under each `(document, key)`, read off the runtime's thread.
async fn listed_documents(
    ctx: &GateContext<'_>,
    wanted: Vec<(String, String)>,
) -> document::Listed {
    if wanted.is_empty() {
        return document::Listed::new();
    }
    let workspace = ctx.workspace.to_owned();
    off_the_runtime(move || {
        wanted
            .into_iter()
            .map(|(doc, key)| {
                let paths = document::listed_paths(&workspace, &doc, &key);
                ((doc, key), paths)
            })
            .collect()
    })
    .await
}

/// Whether the phase's gate reported as `name` checks the agent's response, which exists only once
/// the agent has exited (so `helixflow verify`, run before that, cannot judge it).
pub(crate) fn checks_response(phase: &Phase, name: &str) -> bool {
    phase.gates.iter().any(|g| {
        g.name == name
            && matches!(&g.kind, GateKind::Matches { target, .. } | GateKind::Absent { target, .. } if target == "response")
    })
}

/// Every changed path with what happened to it, in path order within each kind of change.
fn changed(changes: &Changes) -> impl Iterator<Item = (&str, &'static str)> {
    let created = changes.created.iter().map(|p| (p.as_str(), "created"));
    let modified = changes.modified.iter().map(|p| (p.as_str(), "modified"));
    let deleted = changes.deleted.iter().map(|p| (p.as_str(), "deleted"));
    created.chain(modified).chain(deleted)
}

/// The last `max` lines of `text`, without trailing blank lines.
fn last_lines(text: &str, max: usize) -> String {
    let text = text.trim_end();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(max);
    lines[start..].join("\n")
}

/// "… and 5 more matching lines".
fn more(n: usize, noun: &str) -> String {
    format!("… and {n} more {noun}{}", crate::text::plural(n))
}

#[cfg(test)]
mod tests {
    use super::command::file_safe;
    use super::files::clean;
    use super::*;

    #[test]
    fn every_kind_has_its_own_info() {
        let mut intros = std::collections::BTreeSet::new();
        for kind in CheckKind::ALL {
            let info = info(kind);
            assert!(
                intros.insert(info.intro),
                "{kind} shares its wording with another kind"
            );
            assert!(info.intro.ends_with(':'), "{kind}: {}", info.intro);
            assert!(!info.how_to_fix.is_empty(), "{kind}");
        }
    }

    #[test]
    fn paths_are_cleaned_like_snapshot_paths() {
        assert_eq!(clean("./src//a.py"), "src/a.py");
        assert_eq!(file_safe("unit tests/py"), "unit-tests-py");
    }
}
