//! A whole run: the scheduler over the DAG, cancellation, the run-wide timeout and retry budget,
//! and the dispatcher that stamps every event and hands it to the run's sinks: the journal,
//! `run.json`, then the reporters.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use tokio::task::JoinSet;

use super::attempt::{PhaseResult, run_phase};
use super::context::{Run, RunContext, RunOptions, millis};
use super::control;
use super::state::{
    Alongside, Budget, Cancellation, Events, LiveAttempts, RunState, SnapshotCache,
};
use super::{fingerprint, plan};
use crate::event::sink::{EventSink, Sinks};
use crate::event::{CancelReason, Event, PhaseStatus, RunStatus, Stamped};
use crate::graph::PhaseGraph;
use crate::model::{OnFailure, PhaseId, Pipeline};
use crate::store::journal::Journal;
use crate::store::lock::RunLock;
use crate::store::passed::Records;
use crate::store::run::RunDir;
use crate::store::run_json::RunJson;

/// At most this many queued events are journalled with one write.
const MAX_BATCH: usize = 64;

/// How a run ended.
#[derive(Debug, Clone)]
pub(crate) struct RunOutcome {
    /// The process exit code for it.
    pub exit_code: i32,
    /// The run's folder.
    pub run: RunDir,
}

/// Runs a checked pipeline to the end. The caller has linted it and holds the `lock` of its state
/// folder; `reporters` receive every event, after the run's journal and `run.json`.
pub(crate) async fn execute(
    pipeline: Pipeline,
    options: RunOptions,
    reporters: Sinks,
    lock: &RunLock,
) -> std::io::Result<RunOutcome> {
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let runs_dir = state_dir.join("runs");
    // The latest run before this one: when it did not pass, this run continues it.
    let previous = plan::unfinished_run(&state_dir);
    let folder = RunDir::create(&runs_dir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot create a run folder in {}: {e}", runs_dir.display()),
        )
    })?;
    // Others now see which run holds the lock.
    lock.set_run(&folder.run_id)?;
    // Worktrees of isolated phases that a killed run could not remove.
    super::isolation::remove_leftovers(&pipeline.workspace, &state_dir);
    let redactor = Arc::new(pipeline.redactor());
    let journal = Journal::open(&folder)?;
    // Events are stamped with the time since the journal was opened.
    let opened = Instant::now();
    std::fs::write(
        folder.path.join("pipeline.json"),
        redactor.to_json_pretty(&pipeline)?,
    )?;

    let selected = pipeline.select(&options.only);
    let excluded: Vec<PathBuf> = std::iter::once(pipeline.state_dir.clone())
        .chain(options.reports.iter().cloned())
        .collect();
    let records = Records::new(&state_dir);
    let plans = plan::plan(
        &pipeline,
        &selected,
        &options.force,
        &records,
        &redactor,
        &excluded,
        previous.as_ref(),
    );
    let resumes = previous.as_ref().map(|p| p.run_id.clone());
    let run_json = RunJson::start(
        &folder,
        &pipeline.name,
        &pipeline.file,
        resumes.clone(),
        selected.iter().map(|&id| pipeline[id].name.value.clone()),
    )?;
    let sinks = reporters.with_first(vec![
        Box::new(journal) as Box<dyn EventSink>,
        Box::new(run_json),
    ]);

    let (sender, receiver) = mpsc::channel();
    let dispatcher = std::thread::spawn(move || dispatch(receiver, sinks, opened));

    let max_parallel = options.max_parallel(&pipeline) as usize;
    let timeout = pipeline.timeout.map(super::super::model::Millis::duration);
    // `self` verification talks to this run over a socket; without one, `helixflow verify`
    // inside the run reports that it cannot reach the run.
    let socket_path = control::socket_path(&folder.path, &folder.run_id);
    let _ = std::fs::remove_file(&socket_path);
    let listener = tokio::net::UnixListener::bind(&socket_path).ok();
    let repository = crate::workspace::RepositoryGuard::new(&pipeline.workspace);
    let ctx = RunContext {
        repository,
        resumes: previous.as_ref().map(|p| RunDir {
            run_id: p.run_id.clone(),
            path: runs_dir.join(&p.run_id),
        }),
        // More phases at once than there are cores (a small pipeline never has).
        spawn_in_pool: max_parallel.min(selected.len())
            > std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        folder: folder.clone(),
        redactor: redactor.clone(),
        options,
        socket: listener.as_ref().map(|_| socket_path.clone()),
        excluded,
        records,
        pipeline,
    };
    let state = RunState {
        events: Events::new(sender, redactor),
        budget: Budget::new(ctx.pipeline.retry_budget),
        cancel: Cancellation::default(),
        live: LiveAttempts::default(),
        approvals: super::approver::WaitingApprovals::default(),
        alongside: Alongside::default(),
        snapshots: SnapshotCache::default(),
    };
    let run = Arc::new(Run { ctx, state });
    let server = listener.map(|listener| tokio::spawn(control::serve(listener, run.clone())));
    run.emit(Event::RunStarted {
        run_id: folder.run_id.clone(),
        pipeline: run.ctx.pipeline.name.clone(),
        phases: selected
            .iter()
            .map(|&id| run.ctx.pipeline[id].name.value.clone())
            .collect(),
        max_parallel: max_parallel as u32,
        resumes,
    });
    for plan in &plans {
        if let Some(record) = &plan.restamped
            && let Err(e) = run.ctx.records.write(record)
        {
            run.emit(Event::Warning {
                message: format!("cannot update the record of \"{}\": {e}", plan.phase),
            });
        }
        match &plan.up_to_date {
            Some(run_id) => run.emit(Event::PhaseFinished {
                phase: plan.phase.clone(),
                status: PhaseStatus::UpToDate,
                attempts: 0,
                duration_ms: 0,
                reason: Some(format!(
                    "passed in run {run_id}; nothing it depends on changed since"
                )),
            }),
            None => run.emit(Event::PhaseQueued {
                phase: plan.phase.clone(),
                reasons: plan.reasons.iter().map(ToString::to_string).collect(),
            }),
        }
    }

    let signals = tokio::spawn(watch_signals(run.clone()));
    let started = Instant::now();
    let up_to_date: Vec<PhaseId> = plans
        .iter()
        .filter(|p| p.is_up_to_date())
        .map(|p| p.id)
        .collect();
    let any_failed = schedule(&run, &selected, &up_to_date, max_parallel, timeout).await;
    // Aborted tasks let go of their `Run` (and its event sender) only once they are dropped.
    signals.abort();
    let _ = signals.await;
    if let Some(server) = server {
        server.abort();
        let _ = server.await;
        let _ = std::fs::remove_file(&socket_path);
    }

    sweep(&run).await;
    let status = run.state.cancel.status().unwrap_or(if any_failed {
        RunStatus::Failed
    } else {
        RunStatus::Passed
    });
    let exit_code = match status {
        RunStatus::Passed => crate::exit::SUCCESS,
        RunStatus::Failed | RunStatus::TimedOut => crate::exit::FAILURE,
        RunStatus::Cancelled => crate::exit::INTERRUPTED,
    };
    run.emit(Event::RunFinished {
        status,
        duration_ms: millis(started.elapsed()),
        exit_code,
    });
    drop(run);
    // The dispatcher stops after `RunFinished`; joined off the runtime's threads all the same.
    let recorded = tokio::task::spawn_blocking(move || dispatcher.join())
        .await
        .map_err(|_| std::io::Error::other("the event dispatcher could not be joined"))?
        .map_err(|_| std::io::Error::other("the event dispatcher panicked"))??;
    let exit_code = recorded.unwrap_or(exit_code);
    Ok(RunOutcome {
        exit_code,
        run: folder,
    })
}

/// Puts back the guarded parts of the repository and removes the records of passed phases that
/// something other than helixflow changed since the last attempt looked (a `run` step, whose
/// attempts do not look at the records, or a process an agent left behind), each with a warning:
/// neither outlives the run.
async fn sweep(run: &Arc<Run>) {
    let (repository, records) = (run.ctx.repository.clone(), run.ctx.records.clone());
    let (repository, records) = tokio::task::spawn_blocking(move || {
        let now = std::time::Instant::now();
        (repository.changed_since(now), records.changed_since(now))
    })
    .await
    .unwrap_or_default();
    if !repository.is_empty() {
        run.emit(Event::Warning {
            message: format!(
                "the git repository's configuration, hooks or `info/` changed during the run: {}",
                repository.join("; ")
            ),
        });
    }
    for record in records {
        run.emit(Event::Warning { message: record });
    }
}

/// Starts phases as their dependencies pass, at most `max_parallel` at once. Returns whether any
/// phase did not pass.
async fn schedule(
    run: &Arc<Run>,
    selected: &[PhaseId],
    up_to_date: &[PhaseId],
    max_parallel: usize,
    timeout: Option<Duration>,
) -> bool {
    // The scheduler's tables are indexed like the pipeline's phases (`PhaseId::index`).
    let pipeline = &run.ctx.pipeline;
    let graph = PhaseGraph::new(pipeline);
    let ids: Vec<PhaseId> = pipeline.phase_ids().collect();
    let mut is_selected = vec![false; pipeline.phases.len()];
    for &id in selected {
        is_selected[id.index()] = true;
    }
    let order: Vec<usize> = graph
        .levels()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .filter(|&i| is_selected[i])
        .collect();
    let by_name: HashMap<&str, usize> = pipeline
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.value.as_str(), i))
        .collect();
    // Each phase's selected dependencies, found once.
    let dependencies: Vec<Vec<usize>> = pipeline
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
    // The phases neither started nor decided, in order: each pass looks at these only.
    let mut state: Vec<Option<PhaseStatus>> = vec![None; pipeline.phases.len()];
    for &id in up_to_date {
        state[id.index()] = Some(PhaseStatus::UpToDate);
    }
    let mut waiting: Vec<usize> = order;
    waiting.retain(|&i| state[i].is_none());
    let done =
        |s: Option<PhaseStatus>| matches!(s, Some(PhaseStatus::Passed | PhaseStatus::UpToDate));
    let mut running: JoinSet<(usize, PhaseResult)> = JoinSet::new();
    let mut started = vec![false; pipeline.phases.len()];
    let mut stop_reason: Option<String> = None;
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut any_failed = false;

    loop {
        let halted = stop_reason.is_some() || run.state.cancel.is_cancelled();
        for &i in &waiting {
            let dependencies = &dependencies[i];
            let blocked = dependencies
                .iter()
                .find(|&&d| state[d].is_some() && !done(state[d]));
            let reason = if let Some(&d) = blocked {
                let how = match state[d] {
                    Some(PhaseStatus::Failed) => "failed",
                    Some(PhaseStatus::Cancelled) => "was cancelled",
                    _ => "was skipped",
                };
                Some(format!(
                    "dependency \"{}\" {how}",
                    pipeline.phases[d].name.value
                ))
            } else if halted {
                Some(
                    stop_reason
                        .clone()
                        .unwrap_or_else(|| run.state.cancel.reason()),
                )
            } else {
                None
            };
            if let Some(reason) = reason {
                state[i] = Some(PhaseStatus::Skipped);
                any_failed = true;
                run.emit(Event::PhaseFinished {
                    phase: pipeline.phases[i].name.value.clone(),
                    status: PhaseStatus::Skipped,
                    attempts: 0,
                    duration_ms: 0,
                    reason: Some(reason),
                });
                continue;
            }
            let ready = dependencies.iter().all(|&d| done(state[d]));
            if ready && running.len() < max_parallel {
                started[i] = true;
                let run = run.clone();
                let id = ids[i];
                running.spawn(async move { (i, run_and_record(run, id).await) });
            }
        }
        waiting.retain(|&i| !started[i] && state[i].is_none());
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
        let Some(Ok((i, result))) = joined else {
            // A phase task panicked: a bug in helixflow. Stop cleanly rather than hang.
            run.state.cancel.cancel(CancelReason::Internal);
            any_failed = true;
            continue;
        };
        let phase = &pipeline.phases[i];
        state[i] = Some(result.status);
        if result.status != PhaseStatus::Passed {
            any_failed = true;
        }
        if result.status == PhaseStatus::Failed
            && phase.on_failure == OnFailure::Stop
            && stop_reason.is_none()
        {
            stop_reason = Some(format!(
                "the run stopped after \"{}\" failed",
                phase.name.value
            ));
            run.state.budget.stop();
        }
        run.emit(Event::PhaseFinished {
            phase: phase.name.value.clone(),
            status: result.status,
            attempts: result.attempts,
            duration_ms: millis(result.duration),
            reason: result.reason,
        });
    }
    any_failed
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
            let record = fingerprint::record(
                &run.ctx.pipeline,
                phase,
                &run.ctx.folder.run_id,
                &run.ctx.redactor,
                &run.ctx.excluded,
                upstream,
            );
            run.ctx.records.write(&record)
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

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// First SIGINT or SIGTERM: cancel (TERM, grace, KILL). Second: KILL at once.
async fn watch_signals(run: Arc<Run>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    let mut count = 0;
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        count += 1;
        if count == 1 {
            run.emit(Event::Warning {
                message:
                    "interrupted: stopping every running child (press Ctrl-C again to kill at once)"
                        .into(),
            });
            run.state.cancel.cancel(CancelReason::Interrupted);
        } else {
            run.cancel().hard.cancel();
        }
    }
}

/// Stamps every event and hands it to the sinks: events that queued up meanwhile go together, so
/// that the journal writes them at once. Returns the exit code the run ends with: its own, unless
/// a report the user asked for could not be written; or the first error of the journal or
/// `run.json`.
fn dispatch(
    receiver: mpsc::Receiver<Event>,
    mut sinks: Sinks,
    started: Instant,
) -> std::io::Result<Option<i32>> {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        // A sink may want to be called again even when no further event comes (`run.json`
        // catches up within a second, so that `helixflow show` sees the run as it is).
        let next = match sinks.next_tick() {
            Some(at) => receiver.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => receiver.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let event = match next {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => {
                sinks.tick();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        batch.push(stamp(event, started));
        while batch.len() < MAX_BATCH
            && let Ok(event) = receiver.try_recv()
        {
            batch.push(stamp(event, started));
        }
        // `RunFinished` is the last event: the run does not wait for every sender to be dropped.
        let finished = batch
            .iter()
            .position(|stamped| matches!(stamped.event, Event::RunFinished { .. }));
        if let Some(at) = finished {
            batch.truncate(at + 1);
        }
        sinks.batch(&batch);
        batch.clear();
        if finished.is_some() {
            break;
        }
    }
    sinks.finish();
    sinks.take_error().map_or(Ok(sinks.exit_code()), Err)
}

/// Stamps an event with the current time and the time since `started`.
pub(crate) fn stamp(event: Event, started: Instant) -> Stamped {
    Stamped {
        time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        event,
    }
}
