//! Verifying an attempt's work: the snapshot after it and what it changed, then the verify modes
//! in order: self, external (the gates), approval, sub-agent.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::{Attempt, tracks_changes};
use crate::engine::approvals;
use crate::engine::context::{
    LiveAttempt, Shared, gate_env, millis, phase_index, phases_alongside, snapshot_options,
    split_bookkeeping, take_snapshot,
};
use crate::event::{Event, GateReport, GateStatus};
use crate::model::{GateKind, Phase, VerifyMode, Worker};
use crate::verify::gates::{GateContext, run_gates};
use crate::verify::subagent::{self, SubAgentCheck, SubAgentOutcome};
use crate::workspace::{Changes, Snapshot};

/// Runs the phase's verify modes on the work of an attempt whose worker succeeded, and returns
/// their reports. `before` is the workspace before the attempt, `task` what the worker was asked
/// to do, `response` its agent's final response.
pub(super) async fn verify(
    a: &Attempt<'_>,
    before: Option<Arc<Snapshot>>,
    live: &LiveAttempt,
    task: &str,
    response: Option<&str>,
) -> std::io::Result<(Vec<GateReport>, Option<Snapshot>)> {
    let (shared, phase, attempt, dir) = (a.shared, a.phase, a.number, &a.dir);
    let name = &phase.name.value;
    let mut reports: Vec<GateReport> = Vec::new();
    a.step("verify");
    // Without a `before`, nothing reads the changes; the files on disk are still listed
    // when an expected output may be missing, for the near-miss hints. With one, the ignore
    // rules are those from before the attempt: an ignore file the agent wrote or changed
    // hides none of its changes.
    let after = if tracks_changes(shared, phase) || lists_files(phase) {
        let rules = before.as_ref().and_then(|before| before.ignore_rules());
        let options = snapshot_options(shared, phase, false, rules);
        take_snapshot(shared, a.workspace(), options, before.as_deref()).await?
    } else {
        Snapshot::default()
    };
    let alongside = phases_alongside(shared, a.index);
    let tracked = before.is_some();
    let (before, changes, bookkeeping) = match &before {
        Some(before) => {
            let mut changes = before.diff(&after);
            let bookkeeping = split_bookkeeping(shared, phase, &mut changes);
            std::fs::write(
                dir.join("changes.json"),
                shared.redactor.to_json_pretty(&changes)?,
            )?;
            if !bookkeeping.is_empty() {
                std::fs::write(
                    dir.join("bookkeeping.json"),
                    shared.redactor.to_json_pretty(&bookkeeping)?,
                )?;
            }
            (before.clone(), changes, bookkeeping)
        }
        None => (
            Arc::new(Snapshot::default()),
            Changes::default(),
            Changes::default(),
        ),
    };
    let env: Vec<(OsString, OsString)> = gate_env(&shared.pipeline, phase);
    let emit = |report: &GateReport| {
        shared.emit(Event::GateFinished {
            phase: name.clone(),
            attempt,
            report: report.clone(),
        });
    };
    let passing = |reports: &[GateReport]| reports.iter().all(|r| r.status != GateStatus::Failed);

    // Modes run in the order self → external → sub-agent, each only when the earlier passed:
    // no verifier is paid to review work that already failed.
    if phase.verify.contains(&VerifyMode::SelfCheck) {
        let report = self_verification(live, &after);
        emit(&report);
        reports.push(report);
    }
    if passing(&reports) && phase.verify.contains(&VerifyMode::External) {
        let context = GateContext::new(
            a.workspace(),
            &shared.excluded,
            phase,
            &after,
            &env,
            dir,
            &shared.cancel,
            shared.options.grace,
            shared.redactor.clone(),
        )
        .changed(&changes, &bookkeeping)
        .alongside(&alongside)
        .with_response(response);
        let mut on_report = |report: &GateReport| {
            // Approval gates are decided below, once everything else passed.
            if !report.is(crate::event::CheckKind::Approval) {
                emit(report);
            }
        };
        reports.extend(run_gates(&context, &mut on_report).await);
    }
    if passing(&reports) {
        approvals::decide(shared, phase, attempt, dir, &mut reports, &emit).await;
    }
    if passing(&reports)
        && phase.verify.contains(&VerifyMode::SubAgent)
        && !shared.cancel.soft.is_cancelled()
    {
        a.step("sub-agent verification");
        let review = Review {
            workspace: a.workspace(),
            dir,
            task,
            reports: &reports,
            changes: &changes,
            before: &before,
            env: &env,
        };
        let report = sub_agent(shared, phase, attempt, &review).await?;
        add_verifier_usage(a);
        emit(&report);
        reports.push(report);
    }
    Ok((reports, tracked.then_some(after)))
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
        a.shared.repository.clone(),
        agent.then(|| a.shared.records.clone()),
        a.started,
    );
    let (repository, records) = tokio::task::spawn_blocking(move || {
        let records = records.map(|r| r.changed_since(since)).unwrap_or_default();
        (repository.changed_since(since), records)
    })
    .await
    .unwrap_or_default();
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
        a.shared.emit(Event::GateFinished {
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
fn add_verifier_usage(a: &Attempt<'_>) {
    let stdout = a.dir.join(subagent::STDOUT_LOG);
    if !stdout.exists() {
        return;
    }
    let Some(verifier) = a
        .phase
        .verifier
        .as_ref()
        .and_then(|v| a.shared.pipeline.agents.get(&v.value))
    else {
        return;
    };
    let used = crate::agent::usage::read(
        verifier.usage.as_ref(),
        &a.shared.pipeline.prices,
        &stdout,
        &a.dir.join(subagent::STDERR_LOG),
    );
    if let Ok(mut usage) = a.usage.lock()
        && let Some(usage) = usage.as_mut()
    {
        usage.add_review(&used);
    }
}

/// The `self` mode's verdict: a passing receipt from this attempt, and nothing changed since.
fn self_verification(live: &LiveAttempt, after: &Snapshot) -> GateReport {
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
            let changed = receipt.snapshot.diff(after);
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
        kind: "self".into(),
        status,
        duration_ms: 0,
        details,
    }
}

/// What a sub-agent review of one attempt looks at.
struct Review<'r> {
    /// The attempt's workspace.
    workspace: &'r Path,
    dir: &'r Path,
    task: &'r str,
    reports: &'r [GateReport],
    changes: &'r Changes,
    before: &'r Snapshot,
    env: &'r [(OsString, OsString)],
}

/// Runs the phase's verifier; its verdict becomes one more gate report.
async fn sub_agent(
    shared: &Shared,
    phase: &Phase,
    attempt: u32,
    review: &Review<'_>,
) -> std::io::Result<GateReport> {
    let started = Instant::now();
    let report = |status, details| GateReport {
        name: "sub-agent".into(),
        kind: "sub-agent".into(),
        status,
        duration_ms: millis(started.elapsed()),
        details,
    };
    // Lint guarantees a known verifier for sub-agent mode.
    let Some(verifier) = phase
        .verifier
        .as_ref()
        .and_then(|v| shared.pipeline.agents.get(&v.value))
    else {
        return Ok(report(
            GateStatus::Failed,
            vec!["the phase has no verifier agent".into()],
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
        exclude: &shared.excluded,
        cancel: &shared.cancel,
        redactor: shared.redactor.clone(),
        grace: shared.options.grace,
        attempt,
        alongside: &phases_alongside(shared, phase_index(shared, phase)),
    };
    let outcome = subagent::check(&check).await?;
    Ok(match &outcome {
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
    })
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
fn verify_program() -> String {
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
