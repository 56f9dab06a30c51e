//! A whole run: opening its folder, planning, the context and state every phase task holds, the
//! signal watcher, and the dispatcher that stamps every event and hands it to the run's sinks:
//! the journal, `run.json`, then the reporters. The scheduler is `schedule.rs`. `check` (in
//! `check.rs`) is a mode of this driver: the same dispatcher and signal watcher, with no run
//! folder and a phase loop that judges instead of scheduling attempts.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Instant, SystemTime};

use super::context::{Resumed, Run, RunContext, RunOptions, millis};
use super::control;
use super::error::RunError;
use super::plan;
use super::state::{Events, RunState};
use crate::event::sink::{EventSink, Sinks};
use crate::event::{CancelReason, Event, RunStatus, Stamped};
use crate::model::{PhaseId, Pipeline};
use crate::store::journal::Journal;
use crate::store::lock::RunLock;
use crate::store::passed::Records;
use crate::store::pipeline_cache;
use crate::store::run::RunDir;
use crate::store::run_json::RunJson;

/// At most this many queued events are journalled with one write.
const MAX_BATCH: usize = 64;

/// How long the dispatcher sleeps between looks at the channel while events keep coming, and how
/// many looks that find nothing it makes before it waits on the channel again.
const POLL: std::time::Duration = std::time::Duration::from_micros(500);
const POLLS: u32 = 4;

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
) -> Result<RunOutcome, RunError> {
    let (opening, journal) = open(&pipeline, lock)?;
    let selected = pipeline.select(&options.only);
    let excluded: Vec<PathBuf> = std::iter::once(pipeline.state_dir.clone())
        .chain(options.reports.iter().cloned())
        .collect();
    let records = Records::new(&opening.state_dir);
    // `pipeline.json` is written while the plan is made (it must be there before the first
    // event, which comes after the plan): for a large pipeline each takes milliseconds.
    let plans = std::thread::scope(|scope| {
        let written = scope.spawn(|| opening.write_pipeline(&pipeline));
        let plans = plan::plan(
            &pipeline,
            &selected,
            &options.force,
            &records,
            &opening.redactor,
            &excluded,
            opening.previous.as_ref(),
        );
        written
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
            .map(|()| plans)
    })?;
    let resumed = opening.resumed();
    let (events, dispatcher) = opening.dispatch(journal, &pipeline, &selected, reporters)?;

    let max_parallel = options.max_parallel(&pipeline) as usize;
    let timeout = pipeline.timeout.map(super::super::model::Millis::duration);
    // `self` verification and approvals talk to this run over a socket; without one,
    // `helixflow verify` inside the run reports that it cannot reach the run.
    let folder = opening.folder.clone();
    let socket_path = control::socket_path(&folder.path, &folder.run_id);
    let _ = std::fs::remove_file(&socket_path);
    let listener = tokio::net::UnixListener::bind(&socket_path).ok();
    let ctx = RunContext {
        repository: crate::workspace::RepositoryGuard::new(&pipeline.workspace),
        resumes: resumed,
        previous: opening.previous.clone(),
        // More phases at once than there are cores (a small pipeline never has).
        spawn_in_pool: max_parallel.min(selected.len())
            > std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        folder: folder.clone(),
        redactor: opening.redactor.clone(),
        options,
        socket: listener.as_ref().map(|_| socket_path.clone()),
        excluded,
        records,
        pipeline_cache: crate::store::pipeline_cache::CacheWatch::new(&opening.state_dir),
        pipeline,
    };
    let run = Arc::new(Run {
        state: RunState::new(events, &ctx.pipeline),
        ctx,
    });
    let server = listener.map(|listener| tokio::spawn(control::serve(listener, run.clone())));
    announce(
        &run,
        &selected,
        &plans,
        max_parallel,
        opening.previous.as_ref(),
    );

    let signals = tokio::spawn(watch_signals(run.clone()));
    let started = Instant::now();
    let any_failed = super::schedule::schedule(&run, &selected, plans, max_parallel, timeout).await;
    // Aborted tasks let go of their `Run` (and its event sender) only once they are dropped.
    for task in std::iter::once(signals).chain(server) {
        task.abort();
        let _ = task.await;
    }
    let _ = std::fs::remove_file(&socket_path);
    let exit_code = finish(run, any_failed, started, dispatcher).await?;
    Ok(RunOutcome {
        exit_code,
        run: folder,
    })
}

/// The thread that stamps every event of a run (or a check) and hands it to the sinks, in order:
/// the one emit path. Events reach it redacted, through the [`Events`] it was started with.
pub(crate) struct Dispatcher(std::thread::JoinHandle<std::io::Result<Option<i32>>>);

impl Dispatcher {
    /// Starts the thread; events are stamped with the time since `opened`.
    pub(crate) fn start(
        sinks: Sinks,
        redactor: Arc<crate::redact::Redactor>,
        opened: Instant,
    ) -> (Events, Dispatcher) {
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::spawn(move || dispatch(receiver, sinks, opened));
        (Events::new(sender, redactor), Dispatcher(thread))
    }

    /// Waits for the thread to end, which it does after `RunFinished`, off the runtime's
    /// threads. Returns the exit code a sink imposed (a report the user asked for that could not
    /// be written), or the first error of a sink that records the run.
    pub(crate) async fn join(self) -> Result<Option<i32>, RunError> {
        let thread = self.0;
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|_| RunError::Dispatcher("could not be joined"))?
            .map_err(|_| RunError::Dispatcher("panicked"))?
            .map_err(RunError::Records)
    }
}

/// A run's folder, opened: what `execute` needs before it plans.
struct Opening {
    state_dir: PathBuf,
    /// The latest run before this one, when it did not pass: this run continues it.
    previous: Option<crate::store::run_json::RunSummary>,
    folder: RunDir,
    redactor: Arc<crate::redact::Redactor>,
    /// When the journal was opened: events are stamped with the time since.
    opened: Instant,
}

impl Opening {
    /// Writes the compiled `pipeline` the run runs, redacted, to `pipeline.json`. With nothing
    /// to redact, the same pipeline (by its cache entry) in the same workspace is the same file:
    /// copied from what the last run wrote of it, kept beside the entry.
    fn write_pipeline(&self, pipeline: &Pipeline) -> Result<(), RunError> {
        let target = self.folder.path.join("pipeline.json");
        let kept = pipeline
            .compiled_from
            .as_ref()
            .filter(|_| self.redactor.is_empty())
            .and_then(|compiled| {
                Some((
                    compiled,
                    pipeline_cache::rendition(compiled, &pipeline.workspace)?,
                ))
            });
        if let Some((_, rendition)) = &kept
            && std::fs::copy(rendition, &target).is_ok()
        {
            return Ok(());
        }
        let json = self
            .redactor
            .to_json_pretty(pipeline)
            .map_err(|e| RunError::Journal(e.into()))?;
        std::fs::write(&target, &json).map_err(RunError::Journal)?;
        if let Some((compiled, rendition)) = kept {
            pipeline_cache::keep_rendition(compiled, &rendition, json.as_bytes());
        }
        Ok(())
    }

    fn resumes(&self) -> Option<String> {
        self.previous.as_ref().map(|p| p.run_id.clone())
    }

    /// Starts `run.json` with the `selected` phases, and the dispatcher: the journal and
    /// `run.json` first, then the `reporters`.
    fn dispatch(
        &self,
        journal: Journal,
        pipeline: &Pipeline,
        selected: &[PhaseId],
        reporters: Sinks,
    ) -> Result<(Events, Dispatcher), RunError> {
        let run_json = RunJson::start(
            &self.folder,
            &pipeline.name,
            &pipeline.file,
            self.resumes(),
            selected.iter().map(|&id| pipeline[id].name.value.clone()),
        )
        .map_err(RunError::Journal)?;
        let sinks = reporters.with_first(vec![
            Box::new(journal) as Box<dyn EventSink>,
            Box::new(run_json),
        ]);
        Ok(Dispatcher::start(sinks, self.redactor.clone(), self.opened))
    }

    /// The unfinished run this one continues, with the phases that passed there.
    fn resumed(&self) -> Option<Resumed> {
        let previous = self.previous.as_ref()?;
        Some(Resumed {
            folder: RunDir {
                run_id: previous.run_id.clone(),
                path: self.state_dir.join("runs").join(&previous.run_id),
            },
            passed: previous
                .phases
                .iter()
                .filter(|phase| phase.status == "passed")
                .map(|phase| phase.name.clone())
                .collect(),
        })
    }
}

/// Makes the run's folder (named in the `lock` from now on), removes the worktrees a killed run
/// left and opens the journal.
fn open(pipeline: &Pipeline, lock: &RunLock) -> Result<(Opening, Journal), RunError> {
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let runs_dir = state_dir.join("runs");
    let previous = plan::unfinished_run(&state_dir);
    let folder = RunDir::create(&runs_dir).map_err(|source| RunError::RunFolder {
        runs: runs_dir.clone(),
        source,
    })?;
    lock.set_run(&folder.run_id).map_err(RunError::Lock)?;
    folder.mark_latest().map_err(RunError::Latest)?;
    super::isolation::remove_leftovers(&pipeline.workspace, &state_dir);
    let redactor = Arc::new(pipeline.redactor());
    let journal = Journal::open(&folder).map_err(RunError::Journal)?;
    let opened = Instant::now();
    let opening = Opening {
        state_dir,
        previous,
        folder,
        redactor,
        opened,
    };
    Ok((opening, journal))
}

/// The run's start in the journal: the phases it selected, then each one's plan (up to date, or
/// why it runs); an up-to-date phase's record is written back with its new file stamps.
fn announce(
    run: &Run,
    selected: &[PhaseId],
    plans: &[plan::PhasePlan],
    max_parallel: usize,
    previous: Option<&crate::store::run_json::RunSummary>,
) {
    run.emit(Event::RunStarted {
        run_id: run.ctx.folder.run_id.clone(),
        pipeline: run.ctx.pipeline.name.clone(),
        phases: selected
            .iter()
            .map(|&id| run.ctx.pipeline[id].name.value.clone())
            .collect(),
        max_parallel: u32::try_from(max_parallel).unwrap_or(u32::MAX),
        resumes: previous.map(|p| p.run_id.clone()),
    });
    // A phase downstream of work made while the run goes on is told once it is decided.
    for plan in plans.iter().filter(|plan| !plan.deferred) {
        super::schedule::tell_plan(run, plan);
    }
}

/// The run's end: what no attempt may leave changed is put back, `RunFinished` goes to the
/// journal, and the dispatcher is joined. Returns the exit code.
async fn finish(
    run: Arc<Run>,
    any_failed: bool,
    started: Instant,
    dispatcher: Dispatcher,
) -> Result<i32, RunError> {
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
    Ok(dispatcher.join().await?.unwrap_or(exit_code))
}

/// Puts back the guarded parts of the repository and removes the records of passed phases that
/// something other than helixflow changed since the last attempt looked (a `run` step, whose
/// attempts do not look at the records, or a process an agent left behind), each with a warning:
/// neither outlives the run. The records written since the scheduler's last turn are synced.
async fn sweep(run: &Arc<Run>) {
    let (repository, records) = (run.ctx.repository.clone(), run.ctx.records.clone());
    let cache = run.ctx.pipeline_cache.clone();
    let (repository, records, committed) = tokio::task::spawn_blocking(move || {
        let now = std::time::Instant::now();
        cache.sweep();
        let changed = records.changed_since(now);
        // The records removed ahead of phases that did not start, and the passes since the
        // scheduler's last turn.
        let committed = records.commit();
        (repository.changed_since(now), changed, committed)
    })
    .await
    .unwrap_or_else(|_| (Vec::new(), Vec::new(), Ok(())));
    if let Err(e) = committed {
        run.emit(Event::Warning {
            message: format!("cannot sync the records of the phases that passed: {e}"),
        });
    }
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

/// First SIGINT or SIGTERM: cancel (TERM, grace, KILL). Second: KILL at once.
async fn watch_signals(run: Arc<Run>) {
    let cancel = run.cancel().clone();
    super::signals::watch(cancel, move || {
        run.emit(Event::Warning {
            message:
                "interrupted: stopping every running child (press Ctrl-C again to kill at once)"
                    .into(),
        });
        run.state.cancel.cancel(CancelReason::Interrupted);
    })
    .await;
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
    // Polls left before the thread waits on the channel again: while events keep coming (a run
    // of quick steps), it looks every [`POLL`] instead, so that a sender does not have to wake
    // it for each event.
    let mut polls = 0;
    // Whether the last batch was cut at [`MAX_BATCH`]: more events are then waiting already (a
    // run that announces a thousand up-to-date phases at once), and the next look is not put off.
    let mut cut = false;
    loop {
        let next = if polls > 0 {
            polls -= 1;
            if !std::mem::take(&mut cut) {
                std::thread::sleep(POLL);
            }
            match receiver.try_recv() {
                Ok(event) => Ok(event),
                Err(mpsc::TryRecvError::Empty) => continue,
                Err(mpsc::TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            }
        } else {
            // A sink may want to be called again even when no further event comes (`run.json`
            // catches up within a second, so that `helixflow show` sees the run as it is).
            match sinks.next_tick() {
                Some(at) => receiver.recv_timeout(at.saturating_duration_since(Instant::now())),
                None => receiver.recv().map_err(|_| RecvTimeoutError::Disconnected),
            }
        };
        let event = match next {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => {
                sinks.tick();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        polls = POLLS;
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
        cut = batch.len() == MAX_BATCH;
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
