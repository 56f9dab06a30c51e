//! The end of an attempt: its gate reports (`gates.json`), the feedback a failed attempt leaves
//! for the next one, the attempt's end in the journal, and a passing attempt's bundle. Also what
//! a phase does after its final failure (`escalate`).

use std::time::{Duration, Instant};

use super::{Attempt, AttemptResult};
use crate::agent::failure;
use crate::engine::context::{Run, gate_env, millis, split_bookkeeping};
use crate::event::usage::FailureClass;
use crate::event::{AttemptOutcome, Event, GateReport, GateStatus};
use crate::model::{FailureMarkers, Phase, Worker};
use crate::process::{self, ChildSpec};
use crate::store::{bundle, journal};
use crate::verify::feedback::{self, AgentFailure};
use crate::workspace::Snapshot;

/// Concludes an attempt that ran: writes its gate reports, and passes it (`nothing_to_change`
/// when it passed having changed nothing, as its agent declared), or fails it with the feedback
/// for the next attempt.
pub(super) fn conclude(
    a: &Attempt<'_>,
    agent_failure: Option<&AgentFailure>,
    reports: &[GateReport],
    nothing_to_change: bool,
) -> std::io::Result<AttemptResult> {
    let (run, phase, attempt, max_attempts) = (a.run, a.phase, a.number, a.max_attempts);
    std::fs::write(
        a.dir.join("gates.json"),
        run.ctx.redactor.to_json_pretty(&reports)?,
    )?;
    if run.state.cancel.is_cancelled() {
        return Ok(cancelled(a));
    }

    let failed_gates: Vec<String> = reports
        .iter()
        .filter(|r| r.status == GateStatus::Failed)
        .map(|r| r.name.clone())
        .collect();
    if agent_failure.is_none() && failed_gates.is_empty() {
        return Ok(finish(
            a,
            AttemptOutcome::Passed,
            None,
            Vec::new(),
            None,
            Classified {
                nothing_to_change,
                ..Classified::default()
            },
        ));
    }
    let classified = classify(a, agent_failure);
    // The attempts the phase can still reach: its own retries, but no more than the run's
    // `retry-budget` has left. Phases running at once share the budget, and the count is what is
    // left when this feedback is written: a phase that retries first may still spend it, so an
    // attempt can turn out to be the last without the warning, but an attempt that gets the
    // warning is never followed by another.
    let reachable = match run.state.budget.retries_left() {
        Some(left) => max_attempts.min(attempt.saturating_add(left)),
        None => max_attempts,
    };
    let mut text = feedback::render(phase, attempt, reachable, agent_failure, reports);
    if let Some(class) = classified.class {
        text.push_str(&class_note(class, classified.message.as_deref()));
    }
    let text = run.ctx.redactor.redact(&text);
    std::fs::write(a.dir.join("feedback.md"), &text)?;
    Ok(finish(
        a,
        AttemptOutcome::Failed,
        Some(text),
        failed_gates,
        agent_failure.and_then(AgentFailure::error),
        classified,
    ))
}

/// Writes the bundle of a passing attempt, `phases/<phase>/bundle.hxb`: the changes from
/// `before` (the workspace before the phase's first attempt, or the attempt's worktree as it was
/// made) to `after` (the passing attempt's end), its agent's bookkeeping files left out, with the phase's folder and its records in the
/// journal so far.
pub(super) fn bundle(a: &Attempt<'_>, before: &Snapshot, after: &Snapshot) -> std::io::Result<()> {
    let (run, name) = (a.run, &a.phase.name.value);
    let mut changes = before.diff(after);
    split_bookkeeping(&run.ctx.pipeline, a.phase, &mut changes);
    let phase_dir = run.ctx.folder.phase_dir(name);
    bundle::create(
        &phase_dir.join(bundle::FILE_NAME),
        &bundle::Source {
            workspace: a.workspace(),
            before,
            changes: &changes,
            pipeline: &run.ctx.pipeline.name,
            phase: name,
            run_id: &run.ctx.folder.run_id,
            attempt: a.number,
            phase_dir: &phase_dir,
            // Written by the run's dispatcher: the latest events may not be in it yet.
            journal: &run.ctx.folder.path.join(journal::FILE_NAME),
        },
    )
    .map(drop)
}

/// How a failed attempt failed, and the wait a transient failure asks for.
#[derive(Debug, Default)]
struct Classified {
    class: Option<FailureClass>,
    /// The agent's message, with what marked the class.
    message: Option<String>,
    retry_after: Option<Duration>,
    /// For a pass: it changed nothing, as its agent declared.
    nothing_to_change: bool,
}

/// The class of a failed attempt: a failure of the agent is transient or fatal when its agent's
/// markers say so (exit 127 is always fatal); everything else is the work's.
fn classify(a: &Attempt<'_>, agent_failure: Option<&AgentFailure>) -> Classified {
    let work = Classified {
        class: Some(FailureClass::Work),
        ..Classified::default()
    };
    let (code, said) = match agent_failure {
        Some(AgentFailure::Exit {
            code,
            stderr,
            reported,
            ..
        }) => (
            *code,
            format!("{}\n{stderr}", reported.as_deref().unwrap_or_default()),
        ),
        Some(AgentFailure::Response(message)) => (None, message.clone()),
        _ => return work,
    };
    let markers = match &a.phase.worker {
        Worker::Agent(agent) => a.run.ctx.pipeline.agents[&agent.value].failures.clone(),
        Worker::Run(_) => FailureMarkers::default(),
    };
    let stdout = process::tail(&a.dir.join("stdout.log"), 8192).unwrap_or_default();
    let text = format!("{said}\n{stdout}");
    let Some((class, marker)) = failure::classify(&markers, code, &text) else {
        return work;
    };
    // A pattern's line is the message; an exit code is said after the agent's own words.
    let message = if marker.starts_with("exit code") {
        let headline = agent_failure
            .and_then(AgentFailure::error)
            .or_else(|| {
                let first = first_line(&said);
                (!first.is_empty()).then(|| first.to_owned())
            })
            .unwrap_or_else(|| format!("the {} failed", worker_noun(a.phase)));
        format!("{} ({marker})", first_line(&headline))
    } else {
        marker
    };
    Classified {
        class: Some(class),
        message: Some(message),
        retry_after: (class == FailureClass::Transient)
            .then(|| failure::retry_after(&text))
            .flatten(),
        nothing_to_change: false,
    }
}

/// The first line of a text that is not blank.
fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
}

/// What the worker is called in a message.
fn worker_noun(phase: &Phase) -> &'static str {
    match phase.worker {
        Worker::Run(_) => "run step",
        Worker::Agent(_) => "agent",
    }
}

/// The feedback's note on a transient or fatal failure.
fn class_note(class: FailureClass, message: Option<&str>) -> String {
    let message = message.unwrap_or_default();
    match class {
        FailureClass::Work => String::new(),
        FailureClass::Transient => format!(
            "\n## Failure class: transient\n\n{message}\n\nThe service failed, not the work: the attempt is tried again after a wait.\n"
        ),
        FailureClass::Fatal => format!(
            "\n## Failure class: fatal\n\n{message}\n\nRetrying cannot help: the phase fails without another attempt (once per phase, an attempt that continued the agent's session is followed by one in a new session).\n"
        ),
    }
}

/// Ends an attempt the run's cancellation stopped.
pub(super) fn cancelled(a: &Attempt<'_>) -> AttemptResult {
    finish(
        a,
        AttemptOutcome::Cancelled,
        None,
        Vec::new(),
        None,
        Classified::default(),
    )
}

/// Ends an attempt in the journal with its outcome, its class and what its agent used.
fn finish(
    a: &Attempt<'_>,
    outcome: AttemptOutcome,
    feedback: Option<String>,
    failed_gates: Vec<String>,
    error: Option<String>,
    classified: Classified,
) -> AttemptResult {
    let usage = a.usage.lock().ok().and_then(|u| u.clone());
    a.run.emit(Event::AttemptFinished {
        phase: a.phase.name.value.clone(),
        attempt: a.number,
        outcome,
        duration_ms: millis(a.started.elapsed()),
        failed_gates,
        feedback: feedback.clone(),
        error,
        usage: usage.clone(),
        class: classified.class,
        nothing_to_change: classified.nothing_to_change,
    });
    AttemptResult {
        outcome,
        feedback,
        fatal: None,
        no_retry: None,
        class: classified.class,
        message: classified.message,
        retry_after: classified.retry_after,
        usage,
    }
}

/// Ends an attempt that could not run, or could not be judged, in the journal with the reason,
/// and leaves the same account in its folder (no gate ran).
pub(super) fn could_not_run(
    run: &Run,
    phase: &Phase,
    attempt: u32,
    max_attempts: u32,
    started: Instant,
    reason: &str,
) {
    if let Ok(dir) = run.ctx.folder.attempt_dir(&phase.name.value, attempt) {
        let _ = std::fs::write(dir.join("gates.json"), "[]");
        let text = format!("# Attempt {attempt} of {max_attempts} could not run\n\n{reason}\n");
        let _ = std::fs::write(dir.join("feedback.md"), run.ctx.redactor.redact(&text));
    }
    run.emit(Event::AttemptFinished {
        phase: phase.name.value.clone(),
        attempt,
        outcome: AttemptOutcome::Failed,
        duration_ms: millis(started.elapsed()),
        failed_gates: Vec::new(),
        feedback: None,
        error: Some(reason.to_owned()),
        usage: None,
        class: Some(FailureClass::Fatal),
        nothing_to_change: false,
    });
}

/// Ends an attempt that cannot run: retrying would fail the same way.
pub(super) fn fatal(message: String) -> AttemptResult {
    AttemptResult {
        outcome: AttemptOutcome::Failed,
        feedback: None,
        fatal: Some(message),
        no_retry: None,
        class: Some(FailureClass::Fatal),
        message: None,
        retry_after: None,
        usage: None,
    }
}

/// Runs the phase's `escalate` command after its final failure.
pub(super) async fn escalate(run: &Run, phase: &Phase) {
    let Some(command) = &phase.escalate else {
        return;
    };
    let Ok(dir) = std::fs::create_dir_all(run.ctx.folder.phase_dir(&phase.name.value))
        .map(|()| run.ctx.folder.phase_dir(&phase.name.value))
    else {
        return;
    };
    let mut spec = ChildSpec::shell(
        command,
        &run.ctx.pipeline.workspace,
        dir.join("escalate.stdout"),
        dir.join("escalate.stderr"),
    );
    spec.env = gate_env(&run.ctx.pipeline, phase);
    spec.env.push((
        "HELIXFLOW_RUN_DIR".into(),
        run.ctx.folder.path.clone().into(),
    ));
    spec.env
        .push(("HELIXFLOW_PHASE".into(), phase.name.value.clone().into()));
    spec.grace = run.ctx.options.grace;
    spec.redactor = run.ctx.redactor.clone();
    let code = process::run(spec, run.cancel())
        .await
        .ok()
        .and_then(|exit| exit.code);
    run.emit(Event::Escalated {
        phase: phase.name.value.clone(),
        code,
    });
}
