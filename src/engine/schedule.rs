//! The scheduler: phases start as their dependencies pass, at most `max-parallel` at once, until
//! every selected phase is decided; a failed dependency skips its dependents, `on-failure "stop"`
//! and cancellation stop new starts, and the run's `timeout` cancels what runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::attempt::{PhaseResult, run_phase};
use super::context::{Run, millis};
use super::fingerprint;
use crate::event::{CancelReason, Event, PhaseStatus};
use crate::graph::PhaseGraph;
use crate::model::{OnFailure, PhaseId};

/// Starts phases as their dependencies pass, at most `max_parallel` at once. Returns whether any
/// phase did not pass.
pub(super) async fn schedule(
    run: &Arc<Run>,
    selected: &[PhaseId],
    up_to_date: &[PhaseId],
    max_parallel: usize,
    timeout: Option<Duration>,
) -> bool {
    let mut scheduler = Scheduler::new(run, selected, up_to_date, max_parallel);
    let mut running: JoinSet<(usize, PhaseResult)> = JoinSet::new();
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    loop {
        scheduler.start_ready(&mut running);
        if running.is_empty() {
            break;
        }
        let joined = tokio::select! {
            joined = running.join_next() => joined,
            () = sleep_until(deadline) => {
                let limit = humantime::format_duration(timeout.unwrap_or_default());
                run.state.cancel.cancel(CancelReason::TimedOut(limit.to_string()));
                continue;
            }
        };
        if let Some(Ok((i, result))) = joined {
            scheduler.finished(i, result);
        } else {
            // A phase task panicked: a bug in helixflow. Stop cleanly rather than hang.
            run.state.cancel.cancel(CancelReason::Internal);
            scheduler.any_failed = true;
        }
    }
    scheduler.any_failed
}

/// What the scheduler knows. Its tables are indexed like the pipeline's phases
/// (`PhaseId::index`).
struct Scheduler<'r> {
    run: &'r Arc<Run>,
    ids: Vec<PhaseId>,
    /// Each phase's selected dependencies.
    dependencies: Vec<Vec<usize>>,
    /// How each phase ended; `None` while it waits or runs.
    state: Vec<Option<PhaseStatus>>,
    /// The phases neither started nor decided, in order: each pass looks at these only.
    waiting: Vec<usize>,
    started: Vec<bool>,
    /// Why no phase starts any more, after `on-failure "stop"`.
    stop_reason: Option<String>,
    any_failed: bool,
    max_parallel: usize,
}

impl<'r> Scheduler<'r> {
    fn new(
        run: &'r Arc<Run>,
        selected: &[PhaseId],
        up_to_date: &[PhaseId],
        max_parallel: usize,
    ) -> Self {
        let pipeline = &run.ctx.pipeline;
        let count = pipeline.phases.len();
        let mut is_selected = vec![false; count];
        for &id in selected {
            is_selected[id.index()] = true;
        }
        let by_name: HashMap<&str, usize> = pipeline
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.value.as_str(), i))
            .collect();
        let dependencies = pipeline
            .phases
            .iter()
            .map(|phase| {
                phase
                    .depends_on
                    .iter()
                    .filter_map(|d| by_name.get(d.value.as_str()).copied())
                    .filter(|&d| is_selected[d])
                    .collect()
            })
            .collect();
        let mut state = vec![None; count];
        for &id in up_to_date {
            state[id.index()] = Some(PhaseStatus::UpToDate);
        }
        let waiting = PhaseGraph::new(pipeline)
            .levels()
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .filter(|&i| is_selected[i] && state[i].is_none())
            .collect();
        Scheduler {
            run,
            ids: pipeline.phase_ids().collect(),
            dependencies,
            state,
            waiting,
            started: vec![false; count],
            stop_reason: None,
            any_failed: false,
            max_parallel,
        }
    }

    /// Skips the waiting phases that can no longer run, and starts those that are ready while
    /// there is room.
    fn start_ready(&mut self, running: &mut JoinSet<(usize, PhaseResult)>) {
        let waiting = std::mem::take(&mut self.waiting);
        for &i in &waiting {
            if let Some(reason) = self.why_skipped(i) {
                self.state[i] = Some(PhaseStatus::Skipped);
                self.any_failed = true;
                self.run.emit(Event::PhaseFinished {
                    phase: self.run.ctx.pipeline.phases[i].name.value.clone(),
                    status: PhaseStatus::Skipped,
                    attempts: 0,
                    duration_ms: 0,
                    reason: Some(reason),
                });
                continue;
            }
            let ready = self.dependencies[i].iter().all(|&d| done(self.state[d]));
            if ready && running.len() < self.max_parallel {
                self.started[i] = true;
                let (run, id) = (self.run.clone(), self.ids[i]);
                running.spawn(async move { (i, run_and_record(run, id).await) });
            }
        }
        self.waiting = waiting;
        self.waiting
            .retain(|&i| !self.started[i] && self.state[i].is_none());
    }

    /// Why phase `i` will not run: a dependency did not pass, or the run stopped.
    fn why_skipped(&self, i: usize) -> Option<String> {
        let state = &self.state;
        if let Some(&d) = self.dependencies[i]
            .iter()
            .find(|&&d| state[d].is_some() && !done(state[d]))
        {
            let how = match state[d] {
                Some(PhaseStatus::Failed) => "failed",
                Some(PhaseStatus::Cancelled) => "was cancelled",
                _ => "was skipped",
            };
            let name = &self.run.ctx.pipeline.phases[d].name.value;
            return Some(format!("dependency \"{name}\" {how}"));
        }
        if self.stop_reason.is_some() || self.run.state.cancel.is_cancelled() {
            return Some(
                self.stop_reason
                    .clone()
                    .unwrap_or_else(|| self.run.state.cancel.reason()),
            );
        }
        None
    }

    /// Phase `i` ended with `result`: noted, told, and with `on-failure "stop"` the end of new
    /// starts.
    fn finished(&mut self, i: usize, result: PhaseResult) {
        let phase = &self.run.ctx.pipeline.phases[i];
        self.state[i] = Some(result.status);
        if result.status != PhaseStatus::Passed {
            self.any_failed = true;
        }
        if result.status == PhaseStatus::Failed
            && phase.on_failure == OnFailure::Stop
            && self.stop_reason.is_none()
        {
            self.stop_reason = Some(format!(
                "the run stopped after \"{}\" failed",
                phase.name.value
            ));
            self.run.state.budget.stop();
        }
        self.run.emit(Event::PhaseFinished {
            phase: phase.name.value.clone(),
            status: result.status,
            attempts: result.attempts,
            duration_ms: millis(result.duration),
            reason: result.reason,
        });
    }
}

/// Whether a phase that ended this way lets its dependents start.
fn done(status: Option<PhaseStatus>) -> bool {
    matches!(status, Some(PhaseStatus::Passed | PhaseStatus::UpToDate))
}

/// Runs a phase: its record goes before it starts (a phase that does not pass again, or whose
/// helixflow is killed while it runs, is not up to date afterwards), and a new one is written
/// once it passed, before the scheduler hears of it.
async fn run_and_record(run: Arc<Run>, id: PhaseId) -> PhaseResult {
    let name = run.ctx.pipeline[id].name.value.clone();
    if let Err(e) = run.ctx.records.remove(&name) {
        run.emit(Event::Warning {
            message: format!("cannot remove the record of \"{name}\": {e}"),
        });
    }
    let result = run_phase(run.clone(), id).await;
    if result.status == PhaseStatus::Passed {
        let recording = run.clone();
        let written = tokio::task::spawn_blocking(move || {
            let run = recording;
            let phase = &run.ctx.pipeline[id];
            let upstream = fingerprint::upstream(phase, |name| {
                run.ctx
                    .records
                    .read(name)
                    .ok()
                    .flatten()
                    .map(|r| r.fingerprint)
            });
            let work = super::attempt::work_files(&run.ctx.folder, &phase.name.value);
            let record = fingerprint::record(
                &run.ctx.pipeline,
                phase,
                &run.ctx.folder.run_id,
                &run.ctx.redactor,
                &run.ctx.excluded,
                upstream,
                &work,
            );
            run.ctx.records.write(&record)?;
            restamp_others(&run, &record, &work)
        })
        .await;
        let error = match written {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(e) = error {
            run.emit(Event::Warning {
                message: format!(
                    "cannot record that \"{name}\" passed ({e}); it will run again next time"
                ),
            });
        }
    }
    result
}

/// A phase that passed changed files other phases' records stamp (a later phase edited what an
/// earlier one made): those records take the new stamps, since a verified change is not the
/// user's edit that makes a phase run again.
fn restamp_others(
    run: &Run,
    record: &crate::store::passed::PhaseRecord,
    work: &[String],
) -> std::io::Result<()> {
    if work.is_empty() {
        return Ok(());
    }
    // The files as this phase left them, whether or not its own record stamps them (a phase
    // with declared outputs stamps only those).
    let now = fingerprint::stamps(&run.ctx.pipeline.workspace, work, Some(&record.outputs));
    for other in &run.ctx.pipeline.phases {
        if other.name.value == record.phase {
            continue;
        }
        let Some(mut theirs) = run.ctx.records.read(&other.name.value)? else {
            continue;
        };
        let mut changed = false;
        for path in work {
            if let (Some(stamp), Some(now)) = (theirs.outputs.get_mut(path), now.get(path))
                && stamp != now
            {
                *stamp = now.clone();
                changed = true;
            }
        }
        if changed {
            run.ctx.records.write(&theirs)?;
        }
    }
    Ok(())
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
