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

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::{gate_env, millis};
use super::run::stamp;
use crate::event::sink::Sinks;
use crate::event::{AttemptOutcome, Event, GateStatus, PhaseStatus, RunStatus};
use crate::graph::PhaseGraph;
use crate::model::{GateKind, Phase, Pipeline};
use crate::process::Cancel;
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
pub(crate) async fn check(pipeline: Pipeline, options: CheckOptions, mut sinks: Sinks) -> i32 {
    let started = Instant::now();
    let redactor = Arc::new(pipeline.redactor());
    let cancel = Cancel::default();
    let interrupted = tokio::spawn(watch_signals(cancel.clone()));
    let mut emit = |event: Event| sinks.event(&stamp(event.redacted(&redactor), started));
    let order: Vec<usize> = PhaseGraph::new(&pipeline)
        .levels()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    emit(Event::RunStarted {
        run_id: CHECK_ID.to_owned(),
        pipeline: pipeline.name.clone(),
        phases: order
            .iter()
            .map(|&i| pipeline.phases[i].name.value.clone())
            .collect(),
        max_parallel: 1,
        resumes: None,
    });
    let exclude: Vec<PathBuf> = std::iter::once(pipeline.state_dir.clone())
        .chain(options.reports.iter().cloned())
        .collect();
    let snapshot_options = SnapshotOptions {
        exclude: exclude.clone(),
        ..SnapshotOptions::default()
    };
    let mut now: Option<Snapshot> = None;
    let mut any_failed = false;
    let mut broken: Option<String> = None;
    for &i in &order {
        let phase = &pipeline.phases[i];
        let name = phase.name.value.clone();
        if cancel.is_cancelled() || broken.is_some() {
            let reason = broken
                .clone()
                .unwrap_or_else(|| "the check was interrupted".to_owned());
            emit(Event::PhaseFinished {
                phase: name,
                status: if broken.is_some() {
                    PhaseStatus::Skipped
                } else {
                    PhaseStatus::Cancelled
                },
                attempts: 0,
                duration_ms: 0,
                reason: Some(reason),
            });
            continue;
        }
        let phase_started = Instant::now();
        emit(Event::AttemptStarted {
            phase: name.clone(),
            attempt: 1,
            max_attempts: 1,
        });
        emit(Event::Step {
            phase: name.clone(),
            attempt: 1,
            step: crate::event::Step::Verify,
        });
        // The workspace is read again only after a gate command ran, which may have changed it.
        if now.is_none() {
            let (workspace, options) = (pipeline.workspace.clone(), snapshot_options.clone());
            let taken =
                tokio::task::spawn_blocking(move || Snapshot::take(&workspace, &options, None))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match taken {
                Ok(snapshot) => now = Some(snapshot),
                Err(e) => {
                    let reason = format!("cannot read the workspace: {e}");
                    for event in broken_phase(name, phase_started.elapsed(), &reason) {
                        emit(event);
                    }
                    any_failed = true;
                    broken = Some(reason);
                    continue;
                }
            }
        }
        let snapshot = now.as_ref().expect("taken above");
        let logs = pipeline
            .workspace
            .join(&pipeline.state_dir)
            .join("check")
            .join(crate::store::run::folder_name(&name));
        // helixflow's own failure (a state folder that is a file), not the gates'.
        if let Err(e) = std::fs::create_dir_all(&logs) {
            let reason = format!("cannot create the log folder {}: {e}", logs.display());
            for event in broken_phase(name, phase_started.elapsed(), &reason) {
                emit(event);
            }
            any_failed = true;
            broken = Some(reason);
            continue;
        }
        let checked = without_fixes(phase);
        let env = gate_env(&pipeline, &checked);
        let scene = Scene {
            workspace: &pipeline.workspace,
            exclude: &exclude,
            env: &env,
            logs: &logs,
            cancel: &cancel,
            grace: options.grace,
            redactor: Arc::clone(&redactor),
            phases: &pipeline.phases,
        };
        let gates = Inspection::outside_run(&scene, &checked, snapshot)
            .judge(&mut |report| {
                emit(Event::GateFinished {
                    phase: name.clone(),
                    attempt: 1,
                    report: report.clone(),
                });
            })
            .await;
        if checked
            .gates
            .iter()
            .any(|g| matches!(g.kind, GateKind::Command { .. }))
        {
            now = None;
        }
        let failed_gates: Vec<String> = gates
            .iter()
            .filter(|g| g.status == GateStatus::Failed)
            .map(|g| g.name.clone())
            .collect();
        let interrupted_here = cancel.is_cancelled();
        let (outcome, status) = if interrupted_here {
            (AttemptOutcome::Cancelled, PhaseStatus::Cancelled)
        } else if failed_gates.is_empty() {
            (AttemptOutcome::Passed, PhaseStatus::Passed)
        } else {
            (AttemptOutcome::Failed, PhaseStatus::Failed)
        };
        any_failed |= status != PhaseStatus::Passed;
        let duration_ms = millis(phase_started.elapsed());
        emit(Event::AttemptFinished {
            phase: name.clone(),
            attempt: 1,
            outcome,
            duration_ms,
            failed_gates,
            feedback: None,
            error: None,
            usage: None,
            class: None,
        });
        emit(Event::PhaseFinished {
            phase: name,
            status,
            attempts: 1,
            duration_ms,
            reason: interrupted_here.then(|| "the check was interrupted".to_owned()),
        });
    }
    interrupted.abort();
    let (status, exit_code) = if cancel.is_cancelled() {
        (RunStatus::Cancelled, crate::exit::INTERRUPTED)
    } else if broken.is_some() {
        (RunStatus::Failed, crate::exit::INTERNAL)
    } else if any_failed {
        (RunStatus::Failed, crate::exit::FAILURE)
    } else {
        (RunStatus::Passed, crate::exit::SUCCESS)
    };
    emit(Event::RunFinished {
        status,
        duration_ms: millis(started.elapsed()),
        exit_code,
    });
    sinks.finish();
    sinks.exit_code().unwrap_or(exit_code)
}

/// The events of a phase that helixflow itself could not check, for `reason`.
fn broken_phase(phase: String, elapsed: std::time::Duration, reason: &str) -> [Event; 2] {
    [
        Event::AttemptFinished {
            phase: phase.clone(),
            attempt: 1,
            outcome: AttemptOutcome::Failed,
            duration_ms: millis(elapsed),
            failed_gates: Vec::new(),
            feedback: None,
            error: Some(reason.to_owned()),
            usage: None,
            class: None,
        },
        Event::PhaseFinished {
            phase,
            status: PhaseStatus::Failed,
            attempts: 1,
            duration_ms: millis(elapsed),
            reason: Some(reason.to_owned()),
        },
    ]
}

/// The phase with no `fix` on its command gates.
fn without_fixes(phase: &Phase) -> Phase {
    let mut phase = phase.clone();
    for gate in &mut phase.gates {
        if let GateKind::Command { fix, .. } = &mut gate.kind {
            *fix = None;
        }
    }
    phase
}

/// First SIGINT or SIGTERM: stop the running gate command (TERM, grace, KILL); second: KILL.
async fn watch_signals(cancel: Cancel) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        if cancel.soft.is_cancelled() {
            cancel.hard.cancel();
        } else {
            cancel.soft.cancel();
        }
    }
}
