//! A check of a whole pipeline against the workspace as it is: every phase's gates, in dependency
//! order, without starting an agent or a `run` step's command, reported through the same events
//! as a run so that the same reporters (plain lines, progress, summary, NDJSON, `JUnit`) show it.
//!
//! Decisions:
//! - Every phase is checked, even when a phase it depends on failed: a check changes nothing, so
//!   a failure upstream does not make a later result meaningless, and CI learns every problem at
//!   once. The order is still the dependency order.
//! - Gates that judge an attempt (`scope`, `protect`, `changes`, `approval`) and gates on the
//!   agent's response are skipped with the reason, as `helixflow verify` reports them outside a
//!   run; they are not failures.
//! - A `command` gate's `fix` is not run: a check proves what is there, it does not repair it.
//! - Gate command logs go to `<state-dir>/check/<phase>/`, never into the workspace proper, and
//!   no run folder is made: a check is not a run, and `helixflow runs` does not list it.
//! - A mode of the run driver (`run.rs`): its events go through the same [`Dispatcher`], and the
//!   same signal watcher stops it; the workspace is read off the async runtime's threads.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::{gate_env, millis};
use super::error::RunError;
use super::run::Dispatcher;
use super::state::Events;
use crate::event::sink::Sinks;
use crate::event::{AttemptOutcome, Event, GateReport, GateStatus, PhaseStatus, RunStatus};
use crate::graph::PhaseGraph;
use crate::model::{GateKind, Phase, Pipeline};
use crate::process::Cancel;
use crate::redact::Redactor;
use crate::verify::judge::{Inspection, Scene};
use crate::workspace::{Snapshot, SnapshotOptions};

/// The id a check's events carry where a run's carry the run's id: no run folder is made.
pub(crate) const CHECK_ID: &str = "check";

/// What a check needs besides the pipeline.
#[derive(Debug, Clone)]
pub(crate) struct CheckOptions {
    /// Time between TERM and KILL when a gate command is stopped.
    pub grace: Duration,
    /// Report files the check writes (absolute): the workspace's snapshots leave them out.
    pub reports: Vec<PathBuf>,
}

/// Checks every phase of a checked pipeline (its workspace absolute) and returns the exit code:
/// 0 when no gate failed, 1 when one did, 130 when interrupted, 3 when a report the user asked
/// for could not be written or the workspace could not be read.
pub(crate) async fn check(
    pipeline: Pipeline,
    options: CheckOptions,
    sinks: Sinks,
) -> Result<i32, RunError> {
    let started = Instant::now();
    // The work made at run time, as it can be had now: each item of a `for-each` phase is
    // checked as its phase, and the phases planners wrote.
    let pipeline = super::plan::made_now(pipeline);
    let redactor = Arc::new(pipeline.redactor());
    let cancel = Cancel::default();
    let interrupted = tokio::spawn(super::signals::watch(cancel.clone(), || {}));
    let (events, dispatcher) = Dispatcher::start(sinks, Arc::clone(&redactor), started);
    let checker = Checker::new(pipeline, &options, redactor, cancel);
    let order = checker.announce(&events);
    let mut tally = Tally::default();
    for &i in &order {
        checker.check_phase(i, &mut tally, &events).await;
    }
    interrupted.abort();
    let exit_code = checker.finish(&tally, events, started);
    Ok(dispatcher.join().await?.unwrap_or(exit_code))
}

/// What the check has learnt so far, phase after phase.
#[derive(Default)]
struct Tally {
    /// The workspace as it is now; none until read, and again after a gate command ran, which
    /// may have changed it.
    now: Option<Snapshot>,
    any_failed: bool,
    /// Why the check cannot go on (the workspace could not be read).
    broken: Option<String>,
}

/// What stays the same for every phase of a check.
struct Checker {
    pipeline: Pipeline,
    grace: Duration,
    redactor: Arc<Redactor>,
    cancel: Cancel,
    /// What the workspace's snapshots leave out: the state folder and the reports.
    exclude: Vec<PathBuf>,
}

impl Checker {
    fn new(
        pipeline: Pipeline,
        options: &CheckOptions,
        redactor: Arc<Redactor>,
        cancel: Cancel,
    ) -> Self {
        let exclude: Vec<PathBuf> = std::iter::once(pipeline.state_dir.clone())
            .chain(options.reports.iter().cloned())
            .collect();
        Checker {
            pipeline,
            grace: options.grace,
            redactor,
            cancel,
            exclude,
        }
    }

    /// Emits the start of the check and returns the phases in dependency order.
    fn announce(&self, events: &Events) -> Vec<usize> {
        let order: Vec<usize> = PhaseGraph::new(&self.pipeline)
            .levels()
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect();
        events.emit(Event::RunStarted {
            run_id: CHECK_ID.to_owned(),
            pipeline: self.pipeline.name.clone(),
            phases: order
                .iter()
                .map(|&i| self.pipeline.phases[i].name.value.clone())
                .collect(),
            max_parallel: 1,
            resumes: None,
        });
        order
    }

    /// Checks the phase at `index`, or says why it is not checked.
    async fn check_phase(&self, index: usize, tally: &mut Tally, events: &Events) {
        let phase = &self.pipeline.phases[index];
        let name = phase.name.value.clone();
        if self.cancel.is_cancelled() || tally.broken.is_some() {
            not_checked(name, tally, events);
            return;
        }
        let phase_started = Instant::now();
        events.emit(Event::AttemptStarted {
            phase: name.clone(),
            attempt: 1,
            max_attempts: 1,
            tier: None,
        });
        events.emit(Event::Step {
            phase: name.clone(),
            attempt: 1,
            step: crate::event::Step::Verify,
        });
        if tally.now.is_none() {
            match self.snapshot().await {
                Ok(snapshot) => tally.now = Some(snapshot),
                Err(e) => {
                    let reason = format!("cannot read the workspace: {e}");
                    broken(name, reason, phase_started, tally, events);
                    return;
                }
            }
        }
        let logs = self.logs(&name);
        // helixflow's own failure (a state folder that is a file), not the gates'.
        if let Err(e) = std::fs::create_dir_all(&logs) {
            let reason = format!("cannot create the log folder {}: {e}", logs.display());
            broken(name, reason, phase_started, tally, events);
            return;
        }
        let snapshot = tally.now.as_ref().expect("taken above");
        let checked = phase.without_fixes();
        let gates = self.judge(&name, &checked, snapshot, &logs, events).await;
        if checked
            .gates
            .iter()
            .any(|g| matches!(g.kind, GateKind::Command { .. }))
        {
            tally.now = None;
        }
        let failed_gates: Vec<String> = gates
            .iter()
            .filter(|g| g.status == GateStatus::Failed)
            .map(|g| g.name.clone())
            .collect();
        self.conclude(name, failed_gates, phase_started, tally, events);
    }

    /// Reads the workspace, off the async runtime's threads.
    async fn snapshot(&self) -> std::io::Result<Snapshot> {
        let workspace = self.pipeline.workspace.clone();
        let options = SnapshotOptions {
            exclude: self.exclude.clone(),
            ..SnapshotOptions::default()
        };
        tokio::task::spawn_blocking(move || Snapshot::take(&workspace, &options, None))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }

    /// The folder of a phase's gate command logs: in the state folder, not the workspace proper.
    fn logs(&self, name: &str) -> PathBuf {
        self.pipeline
            .workspace
            .join(&self.pipeline.state_dir)
            .join("check")
            .join(crate::store::run::folder_name(name))
    }

    /// Runs the gates of `checked` on the workspace as `snapshot` saw it, logging their commands
    /// in `logs` and emitting each report.
    async fn judge(
        &self,
        name: &str,
        checked: &Phase,
        snapshot: &Snapshot,
        logs: &Path,
        events: &Events,
    ) -> Vec<GateReport> {
        let pipeline = &self.pipeline;
        let env = gate_env(pipeline, checked);
        let scene = Scene {
            workspace: &pipeline.workspace,
            exclude: &self.exclude,
            env: &env,
            logs,
            cancel: &self.cancel,
            grace: self.grace,
            redactor: Arc::clone(&self.redactor),
            phases: &pipeline.phases,
        };
        Inspection::outside_run(&scene, checked, snapshot)
            .judge(&mut |report| {
                events.emit(Event::GateFinished {
                    phase: name.to_owned(),
                    attempt: 1,
                    report: report.clone(),
                });
            })
            .await
    }

    /// Emits the end of a checked phase: passed, failed or interrupted.
    fn conclude(
        &self,
        name: String,
        failed_gates: Vec<String>,
        phase_started: Instant,
        tally: &mut Tally,
        events: &Events,
    ) {
        let interrupted_here = self.cancel.is_cancelled();
        let (outcome, status) = if interrupted_here {
            (AttemptOutcome::Cancelled, PhaseStatus::Cancelled)
        } else if failed_gates.is_empty() {
            (AttemptOutcome::Passed, PhaseStatus::Passed)
        } else {
            (AttemptOutcome::Failed, PhaseStatus::Failed)
        };
        tally.any_failed |= status != PhaseStatus::Passed;
        let duration_ms = millis(phase_started.elapsed());
        events.emit(Event::AttemptFinished {
            phase: name.clone(),
            attempt: 1,
            outcome,
            duration_ms,
            failed_gates,
            feedback: None,
            error: None,
            usage: None,
            class: None,
            nothing_to_change: false,
        });
        events.emit(Event::PhaseFinished {
            phase: name,
            status,
            attempts: 1,
            duration_ms,
            reason: interrupted_here.then(|| "the check was interrupted".to_owned()),
        });
    }

    /// Emits the end of the check (the dispatcher stops there) and returns its exit code.
    fn finish(&self, tally: &Tally, events: Events, started: Instant) -> i32 {
        let (status, exit_code) = if self.cancel.is_cancelled() {
            (RunStatus::Cancelled, crate::exit::INTERRUPTED)
        } else if tally.broken.is_some() {
            (RunStatus::Failed, crate::exit::INTERNAL)
        } else if tally.any_failed {
            (RunStatus::Failed, crate::exit::FAILURE)
        } else {
            (RunStatus::Passed, crate::exit::SUCCESS)
        };
        events.emit(Event::RunFinished {
            status,
            duration_ms: millis(started.elapsed()),
            exit_code,
        });
        exit_code
    }
}

/// Emits why a phase is not checked: the check was interrupted, or cannot go on.
fn not_checked(name: String, tally: &Tally, events: &Events) {
    let reason = tally
        .broken
        .clone()
        .unwrap_or_else(|| "the check was interrupted".to_owned());
    events.emit(Event::PhaseFinished {
        phase: name,
        status: if tally.broken.is_some() {
            PhaseStatus::Skipped
        } else {
            PhaseStatus::Cancelled
        },
        attempts: 0,
        duration_ms: 0,
        reason: Some(reason),
    });
}

/// Emits the failure of a phase that helixflow itself could not check, for `reason`; the check
/// stops there.
fn broken(
    name: String,
    reason: String,
    phase_started: Instant,
    tally: &mut Tally,
    events: &Events,
) {
    events.emit(Event::AttemptFinished {
        phase: name.clone(),
        attempt: 1,
        outcome: AttemptOutcome::Failed,
        duration_ms: millis(phase_started.elapsed()),
        failed_gates: Vec::new(),
        feedback: None,
        error: Some(reason.clone()),
        usage: None,
        class: None,
        nothing_to_change: false,
    });
    events.emit(Event::PhaseFinished {
        phase: name,
        status: PhaseStatus::Failed,
        attempts: 1,
        duration_ms: millis(phase_started.elapsed()),
        reason: Some(reason.clone()),
    });
    tally.any_failed = true;
    tally.broken = Some(reason);
}
