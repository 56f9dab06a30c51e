//! The `approval` gate: a person approves or rejects an attempt's work, at the terminal or with
//! `helixflow approve` / `helixflow reject` from another shell. It is asked only once every other
//! check of the attempt passed, so nobody reviews work that already failed.
//!
//! An agent must not approve its own work, nor a phase running alongside it. So a decision from
//! another shell reaches the run only over its control socket, which refuses one from any process
//! the run started (see `control`); files in the run folder are records for people and decide
//! nothing.

use std::path::Path;
use std::time::Instant;

use super::context::{Run, millis};
use crate::event::{CheckKind, Event, GateReport, GateStatus, Step};
use crate::model::{GateKind, Phase};

pub(crate) use super::approver::{
    ApprovalDecision, ApprovalRequest, Approver, DECISION_FILE, REQUEST_FILE,
};

/// Decides every `approval` gate of the phase and puts the result in `reports` (replacing the
/// placeholder the gate runner left, or adding it when external verification did not run).
pub(crate) async fn decide(
    run: &Run,
    phase: &Phase,
    attempt: u32,
    dir: &Path,
    reports: &mut Vec<GateReport>,
    emit: &(dyn Fn(&GateReport) + Sync),
) {
    for gate in &phase.gates {
        let GateKind::Approval { prompt } = &gate.kind else {
            continue;
        };
        let question = prompt
            .clone()
            .unwrap_or_else(|| format!("Approve the work of phase \"{}\"?", phase.name.value));
        let started = Instant::now();
        let (status, details) = ask(run, phase, attempt, dir, &gate.name, &question, reports).await;
        let report = GateReport {
            name: gate.name.clone(),
            kind: CheckKind::Approval.as_str().into(),
            status,
            duration_ms: millis(started.elapsed()),
            details,
        };
        emit(&report);
        match reports
            .iter_mut()
            .find(|r| r.is(CheckKind::Approval) && r.name == gate.name)
        {
            Some(slot) => *slot = report,
            None => reports.push(report),
        }
        if status != GateStatus::Passed {
            return;
        }
    }
}

async fn ask(
    run: &Run,
    phase: &Phase,
    attempt: u32,
    dir: &Path,
    gate: &str,
    question: &str,
    reports: &[GateReport],
) -> (GateStatus, Vec<String>) {
    if let Some(approver) = run.ctx.options.approver.clone() {
        let summary = run.ctx.redactor.redact(&summary(phase, attempt, reports));
        let question = run.ctx.redactor.redact(question);
        let answer = tokio::task::spawn_blocking(move || approver.ask(&summary, &question)).await;
        return match answer {
            Ok(Ok(decision)) => judged(&decision),
            Ok(Err(e)) => (
                GateStatus::Failed,
                vec![format!("could not ask for approval at the terminal: {e}")],
            ),
            Err(e) => (
                GateStatus::Failed,
                vec![format!("could not ask for approval at the terminal: {e}")],
            ),
        };
    }
    let request = ApprovalRequest {
        phase: phase.name.value.clone(),
        attempt,
        gate: gate.to_owned(),
        prompt: question.to_owned(),
    };
    let _ = std::fs::remove_file(dir.join(DECISION_FILE));
    let phase_name = phase.name.value.clone();
    let answer = run.state.approvals.wait(&phase_name, attempt);
    if let Err(e) = (run.ctx.redactor.to_json_pretty(&request))
        .map_err(std::io::Error::other)
        .and_then(|text| std::fs::write(dir.join(REQUEST_FILE), text))
    {
        run.state.approvals.forget(&phase_name);
        return (
            GateStatus::Failed,
            vec![format!("could not record the approval request: {e}")],
        );
    }
    if run.ctx.socket.is_none() {
        run.state.approvals.forget(&phase_name);
        return (
            GateStatus::Failed,
            vec![
                "cannot wait for `helixflow approve`: the run has no control socket to hear it on"
                    .into(),
            ],
        );
    }
    run.emit(Event::Step {
        phase: phase_name.clone(),
        attempt,
        step: Step::AwaitingApproval {
            command: format!(
                "helixflow approve {run} {phase} (or helixflow reject {run} {phase} --reason …)",
                run = run.ctx.folder.run_id,
                phase = crate::agent::prompt::shell_quote(&phase_name)
            ),
        },
    });
    // The run's timeout and Ctrl-C end the wait.
    let decision = tokio::select! {
        decision = answer => decision.ok(),
        () = run.cancel().soft.cancelled() => None,
    };
    run.state.approvals.forget(&phase_name);
    let _ = std::fs::remove_file(dir.join(REQUEST_FILE));
    let Some(decision) = decision else {
        return (
            GateStatus::Skipped,
            vec!["not decided: the run was stopped while waiting for approval".into()],
        );
    };
    // What was decided, and by whom, for people reading the run folder.
    if let Ok(text) = run.ctx.redactor.to_json_pretty(&decision) {
        let _ = std::fs::write(dir.join(DECISION_FILE), text);
    }
    judged(&decision)
}

fn judged(decision: &ApprovalDecision) -> (GateStatus, Vec<String>) {
    let by = if decision.by.is_empty() {
        String::new()
    } else {
        format!(" by {}", decision.by)
    };
    if decision.approved {
        (GateStatus::Passed, vec![format!("approved{by}")])
    } else if decision.reason.trim().is_empty() {
        (
            GateStatus::Failed,
            vec![format!("rejected{by} (no reason given)")],
        )
    } else {
        (
            GateStatus::Failed,
            vec![format!("rejected{by}: {}", decision.reason.trim())],
        )
    }
}

fn summary(phase: &Phase, attempt: u32, reports: &[GateReport]) -> String {
    let mut text = format!("\nphase \"{}\", attempt {attempt}", phase.name.value);
    if let Some(description) = &phase.description {
        text.push_str(&format!(": {description}"));
    }
    text.push('\n');
    for report in reports.iter().filter(|r| !r.is(CheckKind::Approval)) {
        text.push_str(
            &format!("  {:?} {} ({})\n", report.status, report.name, report.kind).to_lowercase(),
        );
    }
    text
}
