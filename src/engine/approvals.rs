//! The `approval` gate: a person approves or rejects an attempt's work, at the terminal or with
//! `helixflow approve` / `helixflow reject` from another shell. It is asked only once every other
//! check of the attempt passed, so nobody reviews work that already failed.

use std::path::Path;
use std::time::{Duration, Instant};

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
    let decision_path = dir.join(DECISION_FILE);
    let _ = std::fs::remove_file(&decision_path);
    if let Err(e) = (run.ctx.redactor.to_json_pretty(&request))
        .map_err(std::io::Error::other)
        .and_then(|text| std::fs::write(dir.join(REQUEST_FILE), text))
    {
        return (
            GateStatus::Failed,
            vec![format!("could not record the approval request: {e}")],
        );
    }
    run.emit(Event::Step {
        phase: phase.name.value.clone(),
        attempt,
        step: Step::AwaitingApproval {
            command: format!(
                "helixflow approve {run} {phase} (or helixflow reject {run} {phase} --reason …)",
                run = run.ctx.folder.run_id,
                phase = crate::agent::prompt::shell_quote(&phase.name.value)
            ),
        },
    });
    // Polling a file keeps `approve` a plain file write that works from any shell; the run's
    // timeout and Ctrl-C end the wait.
    loop {
        if let Ok(text) = std::fs::read_to_string(&decision_path)
            && let Ok(decision) = serde_json::from_str::<ApprovalDecision>(&text)
        {
            let _ = std::fs::remove_file(dir.join(REQUEST_FILE));
            return judged(&decision);
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
            () = run.cancel().soft.cancelled() => {
                return (GateStatus::Skipped, vec!["not decided: the run was stopped while waiting for approval".into()]);
            }
        }
    }
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
