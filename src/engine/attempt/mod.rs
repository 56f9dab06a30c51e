//! One phase, attempt after attempt: render the prompt, start the agent or `run` step, verify the
//! work, write the artifacts, and decide on a retry.
//!
//! One attempt is four steps, one file each: [`prepare`] (the snapshot before, the prompt, the
//! session, the child to start), [`worker`] (running it, and judging its exit and response),
//! [`verify`] (the snapshot after, then the verify modes) and [`conclude`] (`gates.json`, the
//! feedback, the attempt's end in the journal).

mod conclude;
mod prepare;
mod verify;
mod worker;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::context::{AttemptWindow, LiveAttempt, PhaseRunning, Shared, millis};
use crate::event::{AttemptOutcome, Event, PhaseStatus};
use crate::model::{GateKind, Phase, VerifyMode};
use crate::workspace::Snapshot;
use prepare::Session;

pub(crate) use prepare::{attempt_prompt, fingerprint_prompt};

/// How a phase ended, for the scheduler.
#[derive(Debug, Clone)]
pub(crate) struct PhaseResult {
    pub status: PhaseStatus,
    pub attempts: u32,
    pub reason: Option<String>,
    pub duration: Duration,
}

/// What one attempt produced.
struct AttemptResult {
    outcome: AttemptOutcome,
    feedback: Option<String>,
    /// Set when the attempt could not even start (a prompt that does not render, a program that
    /// does not exist): retrying would fail the same way.
    fatal: Option<String>,
}

/// Runs every attempt of one phase.
pub(crate) async fn run_phase(shared: Arc<Shared>, index: usize) -> PhaseResult {
    let phase = &shared.pipeline.phases[index];
    let _running = PhaseRunning::start(&shared, index);
    let started = Instant::now();
    let max_attempts = phase.retries.saturating_add(1);
    let mut previous_feedback: Option<(String, PathBuf)> = None;
    let mut session = Session::default();
    // The workspace before the phase's first attempt, which its bundle starts from.
    let mut phase_before = None;
    let mut attempt = 1;
    loop {
        shared.emit(Event::AttemptStarted {
            phase: phase.name.value.clone(),
            attempt,
            max_attempts,
        });
        let attempt_started = Instant::now();
        let result = match one_attempt(
            &shared,
            index,
            attempt,
            max_attempts,
            previous_feedback.as_ref(),
            &mut session,
            &mut phase_before,
        )
        .await
        {
            Ok(result) => result,
            Err(e) => conclude::fatal(format!("helixflow could not run the attempt: {e}")),
        };
        if let Some(reason) = &result.fatal {
            conclude::could_not_run(
                &shared,
                phase,
                attempt,
                max_attempts,
                attempt_started,
                reason,
            );
        }
        let finished = |status, reason: Option<String>| PhaseResult {
            status,
            attempts: attempt,
            reason,
            duration: started.elapsed(),
        };
        match result.outcome {
            AttemptOutcome::Passed => return finished(PhaseStatus::Passed, None),
            AttemptOutcome::Cancelled => {
                return finished(PhaseStatus::Cancelled, Some(shared.cancel_reason()));
            }
            AttemptOutcome::Failed => {}
        }
        let why_not_retry = if let Some(fatal) = &result.fatal {
            Some(fatal.clone())
        } else if attempt >= max_attempts {
            Some("no retries left".to_owned())
        } else if shared.stopping() {
            Some("not retried: the run is stopping".to_owned())
        } else if !shared.take_retry() {
            Some("not retried: the run's retry budget is spent".to_owned())
        } else {
            None
        };
        if let Some(reason) = why_not_retry {
            conclude::escalate(&shared, phase).await;
            return finished(PhaseStatus::Failed, Some(reason));
        }
        let backoff = phase
            .backoff
            .map_or(Duration::ZERO, super::super::model::Millis::duration);
        shared.emit(Event::RetryScheduled {
            phase: phase.name.value.clone(),
            next_attempt: attempt + 1,
            backoff_ms: millis(backoff),
        });
        if !backoff.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = shared.cancel.soft.cancelled() => {
                    return finished(PhaseStatus::Cancelled, Some(shared.cancel_reason()));
                }
            }
        }
        let feedback_file = shared
            .run
            .attempt_dir(&phase.name.value, attempt)
            .map(|d| d.join("feedback.md"))
            .unwrap_or_default();
        previous_feedback = result.feedback.map(|f| (f, feedback_file));
        attempt += 1;
    }
}

/// One attempt under way: what each of its steps reads.
struct Attempt<'s> {
    shared: &'s Shared,
    /// The phase's index in the pipeline.
    index: usize,
    phase: &'s Phase,
    /// The attempt's number, from 1.
    number: u32,
    max_attempts: u32,
    /// The attempt folder.
    dir: PathBuf,
    started: Instant,
}

impl Attempt<'_> {
    /// Tells the reporters which step the attempt is at.
    fn step(&self, step: &str) {
        self.shared.emit(Event::Step {
            phase: self.phase.name.value.clone(),
            attempt: self.number,
            step: step.to_owned(),
        });
    }
}

/// One attempt: prepare the worker, run it, verify its work, conclude. A step that returns
/// `Err(result)` ends the attempt there, with that result.
async fn one_attempt(
    shared: &Shared,
    index: usize,
    attempt: u32,
    max_attempts: u32,
    previous: Option<&(String, PathBuf)>,
    session: &mut Session,
    phase_before: &mut Option<Arc<Snapshot>>,
) -> std::io::Result<AttemptResult> {
    let phase = &shared.pipeline.phases[index];
    // From here on, the phases running alongside are noted: their changes are not this attempt's.
    let _window = AttemptWindow::open(shared, index);
    let current = Attempt {
        shared,
        index,
        phase,
        number: attempt,
        max_attempts,
        dir: shared.run.attempt_dir(&phase.name.value, attempt)?,
        started: Instant::now(),
    };

    let before = prepare::snapshot_before(&current).await?;
    // The phase's result is what its attempts changed together: a failed attempt's files are
    // still there when the next one starts, so its bundle starts from before the first.
    if phase_before.is_none() {
        phase_before.clone_from(&before);
    }
    let first_before = phase_before.clone();
    let prepared = match prepare::worker(&current, previous, session)? {
        Ok(prepared) => prepared,
        Err(ended) => return Ok(ended),
    };
    let live = Arc::new(LiveAttempt {
        attempt,
        before: before.clone(),
        dir: current.dir.clone(),
        receipts: Mutex::new(Vec::new()),
    });
    let exit = match worker::run(
        &current,
        prepared.spec,
        prepared.prompt_file,
        &live,
        session,
    )
    .await
    {
        Ok(exit) => exit,
        Err(ended) => return Ok(ended),
    };
    let (agent_failure, response) = worker::agent_result(shared, phase, &exit, &current.dir).await;
    let (reports, after) = if agent_failure.is_none() {
        verify::verify(
            &current,
            before.clone(),
            &live,
            &prepared.task,
            response.as_deref(),
        )
        .await?
    } else {
        (Vec::new(), None)
    };
    let result = conclude::conclude(&current, agent_failure.as_ref(), &reports)?;
    if let (true, AttemptOutcome::Passed, Some(before), Some(after)) =
        (shared.options.bundles, result.outcome, first_before, after)
    {
        conclude::bundle(&current, &before, &after)?;
    }
    Ok(result)
}

/// Whether an attempt's changes to the workspace are read: by a passing attempt's bundle
/// (unless `run --no-bundles`), by `scope`, `protect` and `changes`, and by self and sub-agent
/// verification. Only then are snapshots taken before and after it (and `changes.json`
/// written): a walk of the workspace costs more than a short step.
fn tracks_changes(shared: &Shared, phase: &Phase) -> bool {
    shared.options.bundles
        || !phase.scope.is_empty()
        || !phase.protect.is_empty()
        || phase
            .verify
            .iter()
            .any(|m| matches!(m, VerifyMode::SelfCheck | VerifyMode::SubAgent))
        || phase
            .gates
            .iter()
            .any(|g| matches!(g.kind, GateKind::Changes { .. }))
}
