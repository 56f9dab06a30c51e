//! A whole run: the scheduler over the DAG, cancellation, the run-wide timeout and retry budget,
//! and the dispatcher that journals every event and hands it to the reporters.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::attempt::{PhaseResult, run_phase};
use super::control::{self, LiveAttempts};
use super::event::{AttemptOutcome, Event, PhaseStatus, RunStatus, Stamped};
use super::process::Cancel;
use crate::graph::PhaseGraph;
use crate::model::{OnFailure, Pipeline};
use crate::report::Reporters;
use crate::report::record::RunRecord;
use crate::store::redact::Redactor;
use crate::store::run::{Journal, PhaseSummary, RunDir, RunSummary};

/// How often `run.json` is rewritten while a run goes on.
const SUMMARY_INTERVAL: Duration = Duration::from_secs(1);

/// At most this many queued events are journalled with one write.
const MAX_BATCH: usize = 64;

/// How long a child gets between TERM and KILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Phases at once; overrides the pipeline's `max-parallel`.
    pub jobs: Option<u32>,
    /// Run only these phases (their other dependencies are taken as done).
    pub only: Vec<String>,
    /// Time between TERM and KILL.
    pub grace: Duration,
    /// helixflow's own report files (`--events FILE`, `--junit FILE`): like the state folder,
    /// they are left out of workspace snapshots, so writing them is never taken for an agent's
    /// change. Absolute, or relative to the workspace.
    pub reports: Vec<PathBuf>,
}

impl RunOptions {
    /// Phases at once: `jobs` when given, else the pipeline's `max-parallel`.
    pub fn max_parallel(&self, pipeline: &Pipeline) -> u32 {
        self.jobs.unwrap_or(pipeline.max_parallel).max(1)
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            jobs: None,
            only: Vec::new(),
            grace: GRACE,
            reports: Vec::new(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Passed, failed, cancelled or timed out.
    pub status: RunStatus,
    /// The process exit code for it.
    pub exit_code: i32,
    /// The run's folder.
    pub run: RunDir,
}

/// State shared by the scheduler and the phase tasks.
pub(crate) struct Shared {
    pub pipeline: Pipeline,
    pub run: RunDir,
    pub redactor: Arc<Redactor>,
    pub cancel: Cancel,
    pub options: RunOptions,
    events: mpsc::Sender<Event>,
    stopping: AtomicBool,
    /// Retries left in the run's budget; `None` is unlimited.
    retries_left: Option<AtomicU32>,
    cancel_reason: Mutex<String>,
    /// Attempts now running, for `helixflow verify` over the control socket.
    pub live: LiveAttempts,
    /// The control socket's path, when it could be opened.
    pub socket: Option<PathBuf>,
    /// What workspace snapshots and gate searches leave out: the state folder and helixflow's
    /// own report files.
    pub excluded: Vec<PathBuf>,
    /// The latest workspace snapshot of the run, a cache of file hashes for the next one.
    pub latest_snapshot: Mutex<Option<crate::workspace::Snapshot>>,
    /// Which phases ran alongside each attempt under way.
    pub alongside: Mutex<super::attempt::Alongside>,
    /// Whether agents and steps are started from the blocking pool: when more may run at once
    /// than there are cores (see `ChildSpec::spawn_in_pool`).
    pub spawn_in_pool: bool,
}

impl Shared {
    /// Sends an event to the journal and the reporters.
    pub fn emit(&self, event: Event) {
        // The dispatcher outlives every phase task; a send can only fail after it stopped.
        let _ = self.events.send(event.redacted(&self.redactor));
    }

    /// Whether `on-failure "stop"` was triggered: no new phases, no more retries.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Takes one retry from the run's budget; false when it is spent.
    pub fn take_retry(&self) -> bool {
        match &self.retries_left {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    /// Retries left in the run's budget now; `None` when it is unlimited.
    pub fn retries_left(&self) -> Option<u32> {
        self.retries_left
            .as_ref()
            .map(|left| left.load(Ordering::SeqCst))
    }

    /// Why running phases were cancelled.
    pub fn cancel_reason(&self) -> String {
        self.cancel_reason
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    fn cancel_with(&self, reason: &str, status: &Mutex<Option<RunStatus>>, as_status: RunStatus) {
        if let Ok(mut r) = self.cancel_reason.lock()
            && r.is_empty()
        {
            *r = reason.to_owned();
        }
        if let Ok(mut s) = status.lock() {
            s.get_or_insert(as_status);
        }
        self.cancel.soft.cancel();
    }
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs a checked pipeline to the end. The caller has linted it; `reporters` receive every event.
pub async fn execute(
    pipeline: Pipeline,
    options: RunOptions,
    reporters: Reporters,
) -> std::io::Result<RunOutcome> {
    let runs_dir = pipeline.workspace.join(&pipeline.state_dir).join("runs");
    let run = RunDir::create(&runs_dir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot create a run folder in {}: {e}", runs_dir.display()),
        )
    })?;
    let redactor = Arc::new(Redactor::for_pipeline(&pipeline));
    let journal = Journal::open(&run)?;
    std::fs::write(
        run.path.join("pipeline.json"),
        redactor.to_json_pretty(&pipeline)?,
    )?;

    let selected: Vec<usize> = (0..pipeline.phases.len())
        .filter(|&i| {
            options.only.is_empty() || options.only.contains(&pipeline.phases[i].name.value)
        })
        .collect();
    let summary = RunSummary {
        run_id: run.run_id.clone(),
        pipeline: pipeline.name.clone(),
        file: pipeline.file.clone(),
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        finished: None,
        status: "running".into(),
        exit_code: None,
        pid: std::process::id(),
        phases: selected
            .iter()
            .map(|&i| PhaseSummary {
                name: pipeline.phases[i].name.value.clone(),
                status: "pending".into(),
                attempts: 0,
                duration_ms: 0,
                failed_gates: Vec::new(),
                error: None,
                reason: None,
            })
            .collect(),
    };
    run.write_summary(&summary)?;

    let (sender, receiver) = mpsc::channel();
    let dispatcher = std::thread::spawn({
        let run = run.clone();
        move || dispatch(receiver, journal, reporters, run, Summary::new(summary))
    });

    let retries_left = pipeline.retry_budget.map(AtomicU32::new);
    let max_parallel = options.max_parallel(&pipeline) as usize;
    let timeout = pipeline.timeout.map(|t| t.duration());
    // `self` verification talks to this run over a socket; without one, `helixflow verify`
    // inside the run reports that it cannot reach the run.
    let socket_path = control::socket_path(&run.path, &run.run_id);
    let _ = std::fs::remove_file(&socket_path);
    let listener = tokio::net::UnixListener::bind(&socket_path).ok();
    let excluded: Vec<PathBuf> = std::iter::once(pipeline.state_dir.clone())
        .chain(options.reports.iter().cloned())
        .collect();
    let shared = Arc::new(Shared {
        pipeline,
        run: run.clone(),
        redactor,
        cancel: Cancel::default(),
        options,
        events: sender,
        stopping: AtomicBool::new(false),
        retries_left,
        cancel_reason: Mutex::new(String::new()),
        live: LiveAttempts::default(),
        socket: listener.as_ref().map(|_| socket_path.clone()),
        excluded,
        latest_snapshot: Mutex::new(None),
        alongside: Mutex::default(),
        // More phases at once than there are cores (a small pipeline never has).
        spawn_in_pool: max_parallel.min(selected.len())
            > std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
    });
    let server = listener.map(|listener| tokio::spawn(control::serve(listener, shared.clone())));
    shared.emit(Event::RunStarted {
        run_id: run.run_id.clone(),
        pipeline: shared.pipeline.name.clone(),
        phases: selected
            .iter()
            .map(|&i| shared.pipeline.phases[i].name.value.clone())
            .collect(),
        max_parallel: max_parallel as u32,
    });

    let interrupted = Arc::new(Mutex::new(None));
    let signals = tokio::spawn(watch_signals(shared.clone(), interrupted.clone()));
    let started = Instant::now();
    let any_failed = schedule(&shared, &selected, max_parallel, timeout, &interrupted).await;
    // Aborted tasks let go of their `Shared` (and its event sender) only once they are dropped.
    signals.abort();
    let _ = signals.await;
    if let Some(server) = server {
        server.abort();
        let _ = server.await;
        let _ = std::fs::remove_file(&socket_path);
    }

    let status = interrupted
        .lock()
        .ok()
        .and_then(|s| *s)
        .unwrap_or(if any_failed {
            RunStatus::Failed
        } else {
            RunStatus::Passed
        });
    let exit_code = match status {
        RunStatus::Passed => crate::exit::SUCCESS,
        RunStatus::Failed | RunStatus::TimedOut => crate::exit::FAILURE,
        RunStatus::Cancelled => crate::exit::INTERRUPTED,
    };
    shared.emit(Event::RunFinished {
        status,
        duration_ms: millis(started.elapsed()),
        exit_code,
    });
    drop(shared);
    // The dispatcher stops after `RunFinished`; joined off the runtime's threads all the same.
    let recorded = tokio::task::spawn_blocking(move || dispatcher.join())
        .await
        .map_err(|_| std::io::Error::other("the event dispatcher could not be joined"))?
        .map_err(|_| std::io::Error::other("the event dispatcher panicked"))??;
    let exit_code = recorded.unwrap_or(exit_code);
    Ok(RunOutcome {
        status,
        exit_code,
        run,
    })
}

/// Starts phases as their dependencies pass, at most `max_parallel` at once. Returns whether any
/// phase did not pass.
async fn schedule(
    shared: &Arc<Shared>,
    selected: &[usize],
    max_parallel: usize,
    timeout: Option<Duration>,
    interrupted: &Arc<Mutex<Option<RunStatus>>>,
) -> bool {
    let pipeline = &shared.pipeline;
    let graph = PhaseGraph::new(pipeline);
    let order: Vec<usize> = graph
        .levels()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .filter(|i| selected.contains(i))
        .collect();
    let by_name: HashMap<&str, usize> = pipeline
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.value.as_str(), i))
        .collect();
    let mut is_selected = vec![false; pipeline.phases.len()];
    for &i in selected {
        is_selected[i] = true;
    }
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
    let mut waiting: Vec<usize> = order;
    let mut state: Vec<Option<PhaseStatus>> = vec![None; pipeline.phases.len()];
    let mut running: JoinSet<(usize, PhaseResult)> = JoinSet::new();
    let mut started = vec![false; pipeline.phases.len()];
    let mut stop_reason: Option<String> = None;
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut any_failed = false;

    loop {
        let halted = stop_reason.is_some() || shared.cancel.soft.is_cancelled();
        for &i in &waiting {
            let dependencies = &dependencies[i];
            let blocked = dependencies
                .iter()
                .find(|&&d| matches!(state[d], Some(s) if s != PhaseStatus::Passed));
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
                        .unwrap_or_else(|| shared.cancel_reason()),
                )
            } else {
                None
            };
            if let Some(reason) = reason {
                state[i] = Some(PhaseStatus::Skipped);
                any_failed = true;
                shared.emit(Event::PhaseFinished {
                    phase: pipeline.phases[i].name.value.clone(),
                    status: PhaseStatus::Skipped,
                    attempts: 0,
                    duration_ms: 0,
                    reason: Some(reason),
                });
                continue;
            }
            let ready = dependencies
                .iter()
                .all(|&d| state[d] == Some(PhaseStatus::Passed));
            if ready && running.len() < max_parallel {
                started[i] = true;
                let shared = shared.clone();
                running.spawn(async move { (i, run_phase(shared, i).await) });
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
                shared.cancel_with(&format!("the run's timeout of {limit} expired"), interrupted, RunStatus::TimedOut);
                continue;
            }
        };
        let Some(Ok((i, result))) = joined else {
            // A phase task panicked: a bug in helixflow. Stop cleanly rather than hang.
            shared.cancel_with(
                "helixflow failed internally",
                interrupted,
                RunStatus::Failed,
            );
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
            shared.stopping.store(true, Ordering::SeqCst);
        }
        shared.emit(Event::PhaseFinished {
            phase: phase.name.value.clone(),
            status: result.status,
            attempts: result.attempts,
            duration_ms: millis(result.duration),
            reason: result.reason,
        });
    }
    any_failed
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// First SIGINT or SIGTERM: cancel (TERM, grace, KILL). Second: KILL at once.
async fn watch_signals(shared: Arc<Shared>, interrupted: Arc<Mutex<Option<RunStatus>>>) {
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
            shared.emit(Event::Warning {
                message:
                    "interrupted: stopping every running child (press Ctrl-C again to kill at once)"
                        .into(),
            });
            shared.cancel_with(
                "the run was interrupted",
                &interrupted,
                RunStatus::Cancelled,
            );
        } else {
            shared.cancel.hard.cancel();
        }
    }
}

/// Journals every event, keeps `run.json` current, and feeds the reporters. Returns the exit code
/// `run.json` ends with: the run's, unless a report the user asked for could not be written.
fn dispatch(
    receiver: mpsc::Receiver<Event>,
    mut journal: Journal,
    mut reporters: Reporters,
    run: RunDir,
    mut summary: Summary,
) -> std::io::Result<Option<i32>> {
    let mut first_error = None;
    let mut last_written = Instant::now();
    let mut dirty = false;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    'events: loop {
        // A change waits at most until a second has passed since the last write, even when no
        // further event comes: `helixflow show` during a long attempt sees the run as it is.
        let next = if dirty {
            receiver.recv_timeout(SUMMARY_INTERVAL.saturating_sub(last_written.elapsed()))
        } else {
            receiver.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        let event = match next {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => {
                last_written = Instant::now();
                dirty = false;
                if let Err(e) = run.write_summary(&summary.summary) {
                    first_error.get_or_insert(e);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // Events that queued up meanwhile go to the journal in the same write.
        batch.push(event);
        while batch.len() < MAX_BATCH
            && let Ok(event) = receiver.try_recv()
        {
            batch.push(event);
        }
        let (stamped, written) = journal.record(batch.drain(..));
        if let Err(e) = written {
            first_error.get_or_insert(e);
        }
        for stamped in stamped {
            // Rewriting run.json for every finished phase made large runs quadratic; it is
            // rewritten at most once a second while running, and always at the end.
            let finished = matches!(stamped.event, Event::RunFinished { .. });
            dirty |= summary.apply(&stamped);
            if dirty && (finished || last_written.elapsed() >= SUMMARY_INTERVAL) {
                last_written = Instant::now();
                dirty = false;
                if let Err(e) = run.write_summary(&summary.summary) {
                    first_error.get_or_insert(e);
                }
            }
            reporters.event(&stamped);
            if finished {
                // The last event: the run does not wait for every sender to be dropped.
                break 'events;
            }
        }
    }
    reporters.finish();
    // The work is done, but a report CI reads is missing: helixflow itself failed.
    if reporters.failed_required() > 0 && summary.summary.exit_code == Some(crate::exit::SUCCESS) {
        summary.summary.exit_code = Some(crate::exit::INTERNAL);
        if let Err(e) = run.write_summary(&summary.summary) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(summary.summary.exit_code), Err)
}

/// `run.json` as the events tell it.
struct Summary {
    summary: RunSummary,
    /// Phase name to its place in `summary.phases`.
    index: HashMap<String, usize>,
    /// The run as the reporters see it, for what failed in an attempt.
    record: RunRecord,
}

impl Summary {
    fn new(summary: RunSummary) -> Self {
        let index = summary
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), i))
            .collect();
        Self {
            summary,
            index,
            record: RunRecord::default(),
        }
    }

    /// Applies an event; true when `run.json` should be rewritten.
    fn apply(&mut self, stamped: &Stamped) -> bool {
        self.record.apply(stamped);
        let Self {
            summary,
            index,
            record,
        } = self;
        let phases = &mut summary.phases;
        let at = |phase: &str| index.get(phase).copied();
        match &stamped.event {
            Event::AttemptStarted { phase, attempt, .. } => {
                if let Some(i) = at(phase) {
                    let p = &mut phases[i];
                    p.status = "running".into();
                    p.attempts = *attempt;
                }
                true
            }
            Event::AttemptFinished { phase, outcome, .. } => {
                let attempt = record
                    .phase(phase)
                    .and_then(|record| record.attempt.as_ref());
                if let (Some(i), Some(attempt)) = (at(phase), attempt) {
                    let p = &mut phases[i];
                    if *outcome == AttemptOutcome::Cancelled {
                        // Stopped, not failed: the phase's reason says why.
                        p.failed_gates.clear();
                        p.error = None;
                    } else {
                        // As the table at the end of a run shows it: the agent or run command first.
                        p.failed_gates = attempt.failures();
                        p.error = attempt.error().map(str::to_owned);
                    }
                }
                true
            }
            Event::PhaseFinished {
                phase,
                status,
                attempts,
                duration_ms,
                reason,
            } => {
                if let Some(i) = at(phase) {
                    let p = &mut phases[i];
                    p.status = label(status);
                    p.attempts = *attempts;
                    p.duration_ms = *duration_ms;
                    p.reason.clone_from(reason);
                }
                true
            }
            Event::RunFinished {
                status, exit_code, ..
            } => {
                summary.status = label(status);
                summary.exit_code = Some(*exit_code);
                summary.finished = Some(
                    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
                );
                true
            }
            _ => false,
        }
    }
}

/// A status as its JSON string (`passed`, `timed-out`, …).
fn label(status: &impl serde::Serialize) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
