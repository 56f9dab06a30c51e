//! Verifying an attempt's work: the snapshot after it and what it changed, then the verify modes
//! in order: self, external (the gates), approval, sub-agent.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::Attempt;
use crate::engine::approvals;
use crate::engine::context::{Run, millis, split_bookkeeping};
use crate::engine::observe::{Observed, observe, scene};
use crate::engine::state::LiveAttempt;
use crate::event::{Event, GateReport, GateStatus, ReportKind, Step};
use crate::model::{GateKind, Phase, VerifyMode, Worker};
use crate::verify::gates::judged_where_ignored;
use crate::verify::judge::{Inspection, passed_with_nothing_to_change};
use crate::verify::subagent::{self, SubAgentCheck, SubAgentOutcome};
use crate::workspace::{Changes, Snapshot};

/// Where an attempt's work is judged from: the workspace when its phase started (or, in a
/// worktree of its own, when the attempt did), and when the attempt started. `None` when nothing
/// the phase checks reads the changes.
pub(super) struct Starts<'s> {
    pub(super) phase: Option<Arc<Snapshot>>,
    pub(super) attempt: Option<&'s Snapshot>,
}

/// Runs the phase's verify modes on the work of an attempt whose worker succeeded, and returns
/// their reports. The gates judge what the phase changed since `starts.phase`; `changes.json`
/// says what this attempt changed. `task` is what the worker was asked to do, `response` its
/// agent's final response.
pub(super) async fn verify(
    a: &Attempt<'_>,
    starts: Starts<'_>,
    live: &LiveAttempt,
    task: &str,
    response: Option<&str>,
) -> std::io::Result<Verified> {
    let (run, phase, attempt, dir) = (a.run, a.phase, a.number, &a.dir);
    let before = starts.phase.clone();
    let mut reports: Vec<GateReport> = Vec::new();
    let mut verifier_void = None;
    let observed = observed(a, &starts).await?;
    let alongside = run.phases_alongside(a.id);
    let env = super::super::observe::env(run, phase);
    let earlier_work = work_in_place(run, phase, &observed.after);
    let emit = |report: &GateReport| {
        run.emit(Event::GateFinished {
            phase: phase.name.value.clone(),
            attempt,
            report: report.clone(),
        });
    };
    let passing = |reports: &[GateReport]| reports.iter().all(|r| r.status != GateStatus::Failed);

    // Modes run in the order self → external → sub-agent, each only when the earlier passed:
    // no verifier is paid to review work that already failed.
    if phase.verify.contains(&VerifyMode::SelfCheck) {
        let rules = before
            .as_ref()
            .and_then(|before| before.ignore_rules())
            .or_else(|| observed.after.ignore_rules());
        let judged = |path: &str| {
            rules.as_ref().is_none_or(|rules| {
                judged_where_ignored(rules, a.workspace(), &phase.protect, path)
            })
        };
        let report = self_verification(live, &observed.after, &judged);
        emit(&report);
        reports.push(report);
    }
    if passing(&reports) && phase.verify.contains(&VerifyMode::External) {
        let seen = Seen {
            observed: &observed,
            alongside: &alongside,
            env: &env,
            response,
            passed_before: earlier_work.as_ref().map(|(run_id, _)| run_id.clone()),
            declared: declared_no_change(run, phase, response),
        };
        reports.extend(external(a, seen, &emit).await);
    }
    if passing(&reports) && phase.generates.is_some() {
        reports.push(planned(a, &emit));
    }
    let nothing_to_change = reports.iter().any(passed_with_nothing_to_change);
    if passing(&reports) {
        approvals::decide(run, phase, attempt, dir, &mut reports, &emit).await;
    }
    if passing(&reports)
        && phase.verify.contains(&VerifyMode::SubAgent)
        && !run.state.cancel.is_cancelled()
    {
        let empty = Snapshot::default();
        let review = Review {
            workspace: a.workspace(),
            dir,
            task,
            reports: &reports,
            changes: &observed.changes,
            before: before.as_deref().unwrap_or(&empty),
            env: &env,
            alongside: &alongside,
        };
        let (report, void) = reviewed(a, review).await?;
        emit(&report);
        reports.push(report);
        verifier_void = void;
    }
    let work = work_or_earlier(&observed, earlier_work);
    Ok(Verified {
        reports,
        after: before.is_some().then_some(observed.after),
        verifier_void,
        work,
        nothing_to_change,
    })
}

/// What a pass leaves as the phase's work: what it changed, or, when a re-run changed nothing
/// because its work was in place, that earlier work.
fn work_or_earlier(observed: &Observed, earlier: Option<(String, Work)>) -> Work {
    let work = work_of(observed);
    match earlier {
        Some((_, earlier)) if work.is_empty() => earlier,
        _ => work,
    }
}

/// The agent's `no-change` pattern, when its final response matches it: it declares that there
/// was nothing to change.
fn declared_no_change(run: &Run, phase: &Phase, response: Option<&str>) -> Option<String> {
    let agent = run.ctx.pipeline.agents.get(phase.agent_name()?)?;
    let pattern = agent.no_change.as_ref()?;
    let regex = regex::RegexBuilder::new(pattern)
        .multi_line(true)
        .build()
        .ok()?;
    regex.is_match(response?).then(|| pattern.clone())
}

/// The workspace after the attempt, against where the phase started; `changes.json` says what
/// the attempt itself changed.
async fn observed(a: &Attempt<'_>, starts: &Starts<'_>) -> std::io::Result<Observed> {
    a.step(Step::Verify);
    let before = starts.phase.as_ref();
    let observed = observe(a.run, a.phase, a.workspace(), before, lists_files(a.phase)).await?;
    if let Some(attempt_before) = starts.attempt {
        write_changes(a.run, a.phase, &a.dir, attempt_before, &observed)?;
    }
    Ok(observed)
}

/// What the external mode judges an attempt by.
struct Seen<'s> {
    observed: &'s Observed,
    alongside: &'s [&'s Phase],
    env: &'s [(OsString, OsString)],
    response: Option<&'s str>,
    /// The run in which the phase passed before, with its work still in place.
    passed_before: Option<String>,
    /// The agent's `no-change` pattern, which its response matched.
    declared: Option<String>,
}

/// The external mode: the phase's gates, by the one judge, each report told as it is final
/// (approval gates are decided later, once everything else passed).
async fn external(
    a: &Attempt<'_>,
    seen: Seen<'_>,
    emit: &(dyn Fn(&GateReport) + Sync),
) -> Vec<GateReport> {
    let scene = scene(a.run, a.workspace(), seen.env, &a.dir);
    let inspection = Inspection::after_attempt(
        &scene,
        a.phase,
        &seen.observed.after,
        seen.observed.changed(),
        seen.alongside,
        seen.response,
    )
    .passed_before(seen.passed_before)
    .declared_no_change(seen.declared);
    let mut on_report = |report: &GateReport| {
        if !report.is(crate::event::CheckKind::Approval) {
            emit(report);
        }
    };
    inspection.judge(&mut on_report).await
}

/// The sub-agent verifier's verdict on the work, and why its last review was void when it was. A
/// void review (no verdict, a verifier that failed or changed files) is the verifier's failure,
/// not the worker's: the verifier is asked again, each review in a folder of its own, and after
/// the last void one the phase fails naming it.
async fn reviewed(
    a: &Attempt<'_>,
    first: Review<'_>,
) -> std::io::Result<(GateReport, Option<String>)> {
    let run = a.run;
    let mut round = 1;
    loop {
        a.step(Step::SubAgentVerification {
            round,
            of: VERIFIER_TRIES,
        });
        let dir = if round == 1 {
            first.dir.to_owned()
        } else {
            first.dir.join(format!("review-{round}"))
        };
        let review = Review { dir: &dir, ..first };
        let (report, void) = sub_agent(run, a.phase, a.number, &review).await?;
        add_verifier_usage(a, &dir);
        if round == VERIFIER_TRIES || void.is_none() || run.state.cancel.is_cancelled() {
            return Ok((report, void));
        }
        // What the void review changed in the repository is put back before the next one (and
        // still reported for this attempt when it ends).
        let repository = run.ctx.repository.clone();
        let since = a.started;
        let _ = tokio::task::spawn_blocking(move || repository.changed_since(since)).await;
        round += 1;
    }
}

/// What a passing phase changed, as `work.json` in its folder keeps it: each created or modified
/// file's hash (BLAKE3, hex), `None` for a deleted one.
pub(super) type Work = std::collections::BTreeMap<String, Option<String>>;

/// The file in a phase's folder of a run that holds its [`Work`].
pub(super) const WORK_FILE: &str = "work.json";

/// What the phase changed since it started, as [`Work`].
pub(super) fn work_of(observed: &Observed) -> Work {
    let hash = |path: &str| {
        observed
            .after
            .get(path)
            .map(|state| blake3::Hash::from(state.hash).to_hex().to_string())
    };
    let changes = &observed.changes;
    changes
        .created
        .iter()
        .chain(&changes.modified)
        .map(|path| (path.clone(), hash(path)))
        .chain(changes.deleted.iter().map(|path| (path.clone(), None)))
        .collect()
}

/// The newest earlier run in which `phase` passed, with what it changed then, when all of that
/// is still in place in `now`: every file it made or changed has the same contents, every file it
/// deleted is still gone. Only for a phase with a `changes` gate (the only reader).
fn work_in_place(run: &Run, phase: &Phase, now: &Snapshot) -> Option<(String, Work)> {
    if !phase
        .gates
        .iter()
        .any(|g| matches!(g.kind, GateKind::Changes { .. }))
    {
        return None;
    }
    let runs = run.ctx.folder.path.parent()?;
    let run_id =
        crate::store::run_json::last_passed(runs, &phase.name.value, &run.ctx.folder.run_id)?;
    let folder = crate::store::run::RunDir {
        run_id: run_id.clone(),
        path: runs.join(&run_id),
    };
    let text = std::fs::read_to_string(folder.phase_dir(&phase.name.value).join(WORK_FILE)).ok()?;
    let work: Work = serde_json::from_str(&text).ok()?;
    let in_place = |(path, hash): (&String, &Option<String>)| match hash {
        Some(hash) => now
            .get(path)
            .is_some_and(|state| blake3::Hash::from(state.hash).to_hex().as_str() == hash),
        None => now.get(path).is_none() && !run.ctx.pipeline.workspace.join(path).exists(),
    };
    (!work.is_empty() && work.iter().all(in_place)).then_some((run_id, work))
}

/// How many times the verifier is asked when its review is void.
pub(super) const VERIFIER_TRIES: u32 = 2;

/// What verifying an attempt found.
pub(super) struct Verified {
    pub(super) reports: Vec<GateReport>,
    /// The workspace after the attempt, when its changes are read.
    pub(super) after: Option<Snapshot>,
    /// Why the verifier's last review was void, when it was: the worker is not run again.
    pub(super) verifier_void: Option<String>,
    /// What the phase changed since it started, written as its work when the attempt passes.
    pub(super) work: Work,
    /// Whether `changes` passed because the agent declared there was nothing to change.
    pub(super) nothing_to_change: bool,
}

/// `changes.json` (and `bookkeeping.json`) in the attempt folder: what the attempt changed.
fn write_changes(
    run: &Run,
    phase: &Phase,
    dir: &Path,
    attempt_before: &Snapshot,
    observed: &Observed,
) -> std::io::Result<()> {
    let redactor = &run.ctx.redactor;
    let mut changes = attempt_before.diff(&observed.after);
    let bookkeeping = split_bookkeeping(&run.ctx.pipeline, phase, &mut changes);
    std::fs::write(dir.join("changes.json"), redactor.to_json_pretty(&changes)?)?;
    if !bookkeeping.is_empty() {
        std::fs::write(
            dir.join("bookkeeping.json"),
            redactor.to_json_pretty(&bookkeeping)?,
        )?;
    }
    Ok(())
}

/// What no phase may change and the attempt's time saw changed, as failing reports (none when
/// nothing did): the guarded parts of the workspace's git repository (put back) and, after an
/// agent, the records of passed phases (removed; a `run` step is the pipeline's own command, and
/// listing the records after each of a thousand steps would cost more than the steps). Asked
/// whatever the worker did, since a change is found only when someone asks, and every attempt
/// under way when one is found answers for it.
pub(super) async fn guarded(a: &Attempt<'_>) -> Vec<GateReport> {
    let agent = matches!(a.phase.worker, Worker::Agent(_));
    let (repository, records, since) = (
        a.run.ctx.repository.clone(),
        agent.then(|| (a.run.ctx.records.clone(), a.run.ctx.pipeline_cache.clone())),
        a.started,
    );
    // After a `run` step, when the kernel told of no change to the repository: no files to
    // read, and no hand-off to pay for (a run of quick steps would wait on it after each).
    let quiet = records
        .is_none()
        .then(|| repository.quietly_changed_since(since))
        .flatten();
    let (repository, records) = if let Some(repository) = quiet {
        (repository, Vec::new())
    } else {
        tokio::task::spawn_blocking(move || {
            let records = records
                .map(|(records, cache)| {
                    cache.sweep();
                    records.changed_since(since)
                })
                .unwrap_or_default();
            (repository.changed_since(since), records)
        })
        .await
        .unwrap_or_default()
    };
    let intro = "the git repository's configuration, hooks or `info/` changed while this attempt \
                 ran: no phase may change them (git runs the commands they can name), so leave \
                 them as they are";
    let mut reports = Vec::new();
    for (name, intro, details) in [
        ("repository", Some(intro), repository),
        ("records", None, records),
    ] {
        if details.is_empty() {
            continue;
        }
        let report = GateReport {
            name: name.into(),
            kind: name.into(),
            status: GateStatus::Failed,
            duration_ms: 0,
            details: intro
                .map(str::to_owned)
                .into_iter()
                .chain(details)
                .collect(),
        };
        a.run.emit(Event::GateFinished {
            phase: a.phase.name.value.clone(),
            attempt: a.number,
            report: report.clone(),
        });
        reports.push(report);
    }
    reports
}

/// Adds what the sub-agent verifier used, when it ran, to the attempt's usage: a review is paid
/// for too. The verifier's turns are its own: `max-turns` counts the worker's.
fn add_verifier_usage(a: &Attempt<'_>, dir: &Path) {
    let stdout = dir.join(subagent::STDOUT_LOG);
    if !stdout.exists() {
        return;
    }
    let Some(verifier) = a
        .phase
        .verifier
        .as_ref()
        .and_then(|v| a.run.ctx.pipeline.agents.get(&v.value))
    else {
        return;
    };
    let used = crate::agent::usage::read(
        verifier.usage.as_ref(),
        verifier.cost_usd,
        &a.run.ctx.pipeline.prices,
        &stdout,
        &dir.join(subagent::STDERR_LOG),
    );
    if let Ok(mut usage) = a.usage.lock()
        && let Some(usage) = usage.as_mut()
    {
        usage.add_review(&used);
    }
}

/// The `self` mode's verdict: a passing receipt from this attempt, and nothing changed since (of
/// what is `judged`: not the caches a gate command of the receipt wrote into ignored folders).
fn self_verification(
    live: &LiveAttempt,
    after: &Snapshot,
    judged: &dyn Fn(&str) -> bool,
) -> GateReport {
    let receipts = live.receipts.lock().map(|r| r.clone()).unwrap_or_default();
    let (status, details) = match receipts.last() {
        None => (
            GateStatus::Failed,
            vec!["no receipt: `helixflow verify` was not run during this attempt. Run it before you finish; \
                  the phase passes only with a passing receipt."
                .to_owned()],
        ),
        Some(receipt) if !receipt.success => {
            let mut details = vec![format!(
                "your last `helixflow verify` (receipt {} of this attempt) failed, and you finished anyway. What failed:",
                receipts.len()
            )];
            for gate in receipt.gates.iter().filter(|g| g.status == GateStatus::Failed) {
                details.push(format!("gate `{}` ({}):\n{}", gate.name, gate.kind, gate.details.join("\n")));
            }
            (GateStatus::Failed, details)
        }
        Some(receipt) => {
            let mut changed = receipt.snapshot.diff(after);
            changed.split_off(|path| !judged(path));
            if changed.is_empty() {
                (GateStatus::Passed, Vec::new())
            } else {
                let mut details = vec![format!(
                    "files changed after your last passing `helixflow verify`; run it again after your last change ({} changed):",
                    changed.len()
                )];
                details.extend(changed.created.iter().map(|p| format!("`{p}` was created")));
                details.extend(changed.modified.iter().map(|p| format!("`{p}` was modified")));
                details.extend(changed.deleted.iter().map(|p| format!("`{p}` was deleted")));
                (GateStatus::Failed, details)
            }
        }
    };
    GateReport {
        name: "self-verification".into(),
        kind: ReportKind::SelfCheck,
        status,
        duration_ms: 0,
        details,
    }
}

/// What a sub-agent review of one attempt looks at.
#[derive(Clone, Copy)]
struct Review<'r> {
    /// The attempt's workspace.
    workspace: &'r Path,
    dir: &'r Path,
    task: &'r str,
    reports: &'r [GateReport],
    changes: &'r Changes,
    before: &'r Snapshot,
    env: &'r [(OsString, OsString)],
    alongside: &'r [&'r Phase],
}

/// Runs the phase's verifier; its verdict becomes one more gate report.
async fn sub_agent(
    run: &Run,
    phase: &Phase,
    attempt: u32,
    review: &Review<'_>,
) -> std::io::Result<(GateReport, Option<String>)> {
    let started = Instant::now();
    let report = |status, details| GateReport {
        name: "sub-agent".into(),
        kind: ReportKind::SubAgent,
        status,
        duration_ms: millis(started.elapsed()),
        details,
    };
    // Lint guarantees a known verifier for sub-agent mode.
    let Some(verifier) = phase
        .verifier
        .as_ref()
        .and_then(|v| run.ctx.pipeline.agents.get(&v.value))
    else {
        return Ok((
            report(
                GateStatus::Failed,
                vec!["the phase has no verifier agent".into()],
            ),
            None,
        ));
    };
    let check = SubAgentCheck {
        workspace: review.workspace,
        phase,
        task: review.task,
        verifier,
        attempt_dir: review.dir,
        gate_reports: review.reports,
        changes: review.changes,
        before: review.before,
        env: review.env,
        exclude: &run.ctx.excluded,
        cancel: run.cancel(),
        redactor: run.ctx.redactor.clone(),
        grace: run.ctx.options.grace,
        attempt,
        alongside: review.alongside,
    };
    let outcome = subagent::check(&check).await?;
    let void = match &outcome {
        SubAgentOutcome::Void { reason, .. } => Some(reason.clone()),
        _ => None,
    };
    let report = match &outcome {
        SubAgentOutcome::Verdict(verdict) if verdict.success => report(
            GateStatus::Passed,
            verdict
                .checks_passed
                .iter()
                .map(|c| format!("checked: {c}"))
                .collect(),
        ),
        SubAgentOutcome::Verdict(_) | SubAgentOutcome::Void { .. } => report(
            GateStatus::Failed,
            vec![
                outcome
                    .feedback()
                    .unwrap_or_else(|| "the verifier rejected the work".into()),
            ],
        ),
        SubAgentOutcome::Cancelled => report(
            GateStatus::Skipped,
            vec!["the run was cancelled during the review".into()],
        ),
    };
    Ok((report, void))
}

/// What a `self`-verified agent is told: the outputs, the gates, and the exact command.
pub(super) fn verify_instructions(phase: &Phase) -> String {
    instructions_with(phase, &verify_program())
}

/// The verify instructions as the phase's fingerprint sees them: with `helixflow` as the program,
/// so that where this binary is installed (which the agent is told) does not make phases run again.
pub(super) fn stable_verify_instructions(phase: &Phase) -> String {
    instructions_with(phase, "helixflow")
}

fn instructions_with(phase: &Phase, program: &str) -> String {
    let mut text = String::from("## Verify your work before you finish\n\n");
    text.push_str(&format!(
        "Before you finish, run this command in the workspace:\n\n    {} verify\n\n",
        crate::agent::prompt::shell_quote(program)
    ));
    text.push_str(
        "It checks the expected outputs and the gates below and records a receipt. This phase passes only if \
         your last `helixflow verify` passed and no file changed after it. If it fails, fix what it reports \
         and run it again.\n",
    );
    if !phase.outputs.is_empty() {
        text.push_str("\nExpected outputs:\n");
        for output in &phase.outputs {
            text.push_str(&format!(
                "- {}\n",
                crate::agent::prompt::describe_output(output)
            ));
        }
    }
    if !phase.gates.is_empty() {
        text.push_str("\nGates:\n");
        for gate in &phase.gates {
            text.push_str(&format!("- {}\n", crate::verify::gates::describe(gate)));
        }
    }
    text
}

/// How the agent is told to start `helixflow verify`: as `helixflow` when that name on `PATH` is
/// this very program (an agent's permission rules, such as Claude Code's
/// `--allowedTools "Bash(helixflow verify:*)"`, match the command as written), else by its path.
pub(crate) fn verify_program() -> String {
    let Ok(exe) = std::env::current_exe() else {
        return "helixflow".to_owned();
    };
    let on_path = std::env::var_os("PATH")
        .and_then(|path| crate::process::shell::find_program("helixflow", &path))
        .and_then(|found| found.canonicalize().ok());
    if on_path.is_some_and(|found| exe.canonicalize().is_ok_and(|exe| exe == found)) {
        "helixflow".to_owned()
    } else {
        exe.display().to_string()
    }
}

/// Whether the gates may look for misplaced files: `outputs` and `paths-exist` do when one is
/// missing.
fn lists_files(phase: &Phase) -> bool {
    !phase.outputs.is_empty()
        || phase
            .gates
            .iter()
            .any(|g| matches!(g.kind, GateKind::PathsExist { .. }))
}

/// A planner's file of phases, linted: its findings are the next attempt's feedback.
fn planned(a: &Attempt<'_>, emit: &impl Fn(&GateReport)) -> GateReport {
    let report = super::super::generated::report(&a.run.ctx.pipeline, a.phase, a.workspace());
    emit(&report);
    report
}
