//! Joining the journals of several runs into one run: the runs each machine of a CI workflow made
//! of its phases (`helixflow run --only PHASE`), read as one by `helixflow runs` and `show`.
//!
//! Each phase's records come from the last run (by start time) that has records of it; the
//! other records of that run go with them. The joined journal starts with one `run-started`
//! naming every phase (in the order of the pipeline, when a run kept its compiled pipeline, else
//! in the order they first appear), holds the phases' events in time order, and ends with one
//! `run-finished`: the worst status of the runs joined, with its exit code, and the time from the
//! first event to the last. The phases' folders are copied along.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::journal::{self, Journal};
use super::run::{RunDir, folder_name};
use super::run_json::{RunJson, RunSummary};
use crate::event::sink::EventSink;
use crate::event::{Event, RunStatus, Stamped};

/// Why runs cannot be joined.
#[derive(Debug)]
pub(crate) struct MergeError(pub String);

/// One run to join, read.
struct Source {
    dir: PathBuf,
    events: Vec<Stamped>,
    summary: Option<RunSummary>,
}

/// Joins the runs in `dirs` into a new run under `runs_dir`, and returns it with its events.
#[allow(
    clippy::too_many_lines,
    reason = "not yet cut into named steps; a known exception to remove"
)]
pub(crate) fn merge(
    runs_dir: &Path,
    dirs: &[PathBuf],
) -> Result<(RunDir, Vec<Stamped>), MergeError> {
    let mut sources = Vec::new();
    for dir in dirs {
        let run = RunDir {
            path: dir.clone(),
            run_id: String::new(),
        };
        let events = journal::read(&run).map_err(|e| {
            MergeError(format!(
                "cannot read the journal of {} ({}): {e}",
                dir.display(),
                journal::FILE_NAME
            ))
        })?;
        if !events
            .iter()
            .any(|s| matches!(s.event, Event::RunStarted { .. }))
        {
            return Err(MergeError(format!(
                "{} has no run-started record: not a run's journal",
                dir.display()
            )));
        }
        sources.push(Source {
            dir: dir.clone(),
            summary: RunSummary::read(&run).ok(),
            events,
        });
    }
    if sources.is_empty() {
        return Err(MergeError("no runs to join".into()));
    }
    sources.sort_by_key(|s| s.events.first().map(|e| e.time.clone()).unwrap_or_default());

    // Each phase's records, from the last run that has any.
    let mut owner: HashMap<String, usize> = HashMap::new();
    for (i, source) in sources.iter().enumerate() {
        for stamped in &source.events {
            if let Some(phase) = phase_of(&stamped.event) {
                owner.insert(phase.to_owned(), i);
            }
        }
    }
    let mut pipeline = String::new();
    let mut max_parallel = 1;
    let mut appearing: Vec<String> = Vec::new();
    let mut status = RunStatus::Passed;
    let mut exit_code = 0;
    for source in &sources {
        for stamped in &source.events {
            match &stamped.event {
                Event::RunStarted {
                    pipeline: name,
                    phases,
                    max_parallel: parallel,
                    ..
                } => {
                    if pipeline.is_empty() {
                        pipeline.clone_from(name);
                    } else if *name != pipeline {
                        return Err(MergeError(format!(
                            "{} is a run of pipeline \"{name}\", the others of \"{pipeline}\"",
                            source.dir.display()
                        )));
                    }
                    max_parallel = max_parallel.max(*parallel);
                    for phase in phases {
                        if !appearing.contains(phase) {
                            appearing.push(phase.clone());
                        }
                    }
                }
                Event::RunFinished {
                    status: finished,
                    exit_code: code,
                    ..
                } if severity(*finished) > severity(status) => {
                    status = *finished;
                    exit_code = *code;
                }
                _ => {}
            }
        }
    }
    // A run that never finished (killed) counts as failed.
    if sources.iter().any(|s| {
        !s.events
            .iter()
            .any(|e| matches!(e.event, Event::RunFinished { .. }))
    }) && severity(status) < severity(RunStatus::Failed)
    {
        status = RunStatus::Failed;
        exit_code = crate::exit::FAILURE;
    }
    let phases = phase_order(&sources, appearing);

    let mut events: Vec<Stamped> = sources
        .iter()
        .enumerate()
        .flat_map(|(i, source)| {
            let owner = &owner;
            source.events.iter().filter(move |s| {
                phase_of(&s.event).is_some_and(|phase| owner.get(phase) == Some(&i))
            })
        })
        .cloned()
        .collect();
    events.sort_by(|a, b| a.time.cmp(&b.time));
    let first = sources
        .iter()
        .filter_map(|s| s.events.first())
        .map(|s| s.time.clone())
        .min()
        .unwrap_or_default();
    let last = sources
        .iter()
        .filter_map(|s| s.events.last())
        .map(|s| s.time.clone())
        .max()
        .unwrap_or_default();
    let start = parse_time(&first);
    let since_start = |time: &str| match (start, parse_time(time)) {
        (Some(start), Some(at)) => at.duration_since(start).map_or(0, |d| d.as_millis() as u64),
        _ => 0,
    };

    let run = RunDir::create(runs_dir).map_err(|e| {
        MergeError(format!(
            "cannot make a run folder in {}: {e}",
            runs_dir.display()
        ))
    })?;
    let mut joined = vec![Stamped {
        time: first.clone(),
        elapsed_ms: 0,
        event: Event::RunStarted {
            run_id: run.run_id.clone(),
            pipeline: pipeline.clone(),
            phases: phases.clone(),
            max_parallel,
            resumes: None,
        },
    }];
    for mut stamped in events {
        stamped.elapsed_ms = since_start(&stamped.time);
        joined.push(stamped);
    }
    joined.push(Stamped {
        time: last.clone(),
        elapsed_ms: since_start(&last),
        event: Event::RunFinished {
            status,
            duration_ms: since_start(&last),
            exit_code,
        },
    });

    write(
        &run, &sources, &owner, &pipeline, &phases, &joined, &first, &last,
    )
    .map_err(|e| MergeError(format!("cannot write {}: {e}", run.path.display())))?;
    run.mark_latest()
        .map_err(|e| MergeError(format!("cannot link {}: {e}", run.path.display())))?;
    Ok((run, joined))
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site; each argument is a different part of the joined run"
)]
/// Writes the joined run's folder: its phases' folders, the journal, `run.json`, `pipeline.json`.
fn write(
    run: &RunDir,
    sources: &[Source],
    owner: &HashMap<String, usize>,
    pipeline: &str,
    phases: &[String],
    joined: &[Stamped],
    first: &str,
    last: &str,
) -> io::Result<()> {
    for (phase, &i) in owner {
        let from = sources[i].dir.join("phases").join(folder_name(phase));
        if from.is_dir() {
            copy_dir(&from, &run.path.join("phases").join(folder_name(phase)))?;
        }
    }
    if let Some(source) = sources
        .iter()
        .rev()
        .find(|s| s.dir.join("pipeline.json").is_file())
    {
        fs::copy(
            source.dir.join("pipeline.json"),
            run.path.join("pipeline.json"),
        )?;
    }
    let file = sources
        .iter()
        .find_map(|s| s.summary.as_ref().map(|summary| summary.file.clone()))
        .unwrap_or_default();
    let mut journal = Journal::open(run)?;
    journal.batch(joined)?;
    let mut run_json = RunJson::start(run, pipeline, &file, None, phases.iter().cloned())?;
    run_json.batch(joined)?;
    run_json.finish()?;
    // The joined run's times are those of its records, not of the join.
    let mut summary = RunSummary::read(run)?;
    summary.started = seconds(first);
    summary.finished = Some(seconds(last));
    super::run::write_atomic(
        &run.path.join(super::run_json::FILE_NAME),
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )
}

/// The phases in the order of the pipeline a run kept (`pipeline.json`), then any others in the
/// order they appear.
fn phase_order(sources: &[Source], appearing: Vec<String>) -> Vec<String> {
    let from_pipeline: Vec<String> = sources
        .iter()
        .rev()
        .find_map(|s| {
            let text = fs::read_to_string(s.dir.join("pipeline.json")).ok()?;
            let value: serde_json::Value = serde_json::from_str(&text).ok()?;
            let phases = value.get("phases")?.as_array()?;
            Some(
                phases
                    .iter()
                    .filter_map(|p| {
                        let name = p.get("name")?;
                        name.get("value")
                            .unwrap_or(name)
                            .as_str()
                            .map(str::to_owned)
                    })
                    .collect(),
            )
        })
        .unwrap_or_default();
    let mut order: BTreeMap<usize, String> = BTreeMap::new();
    let rank = |phase: &str| from_pipeline.iter().position(|p| p == phase);
    let mut extra = from_pipeline.len();
    for phase in appearing {
        let at = rank(&phase).unwrap_or_else(|| {
            extra += 1;
            extra
        });
        order.insert(at, phase);
    }
    order.into_values().collect()
}

/// The phase an event is about, if any.
fn phase_of(event: &Event) -> Option<&str> {
    match event {
        Event::PhaseQueued { phase, .. }
        | Event::AttemptStarted { phase, .. }
        | Event::Step { phase, .. }
        | Event::ChildExited { phase, .. }
        | Event::GateFinished { phase, .. }
        | Event::AttemptFinished { phase, .. }
        | Event::RetryScheduled { phase, .. }
        | Event::PhaseFinished { phase, .. }
        | Event::Escalated { phase, .. }
        | Event::PhasesMade { phase, .. } => Some(phase),
        Event::RunStarted { .. } | Event::Warning { .. } | Event::RunFinished { .. } => None,
    }
}

/// How bad a run's ending is, for the joined run's: the worst wins.
fn severity(status: RunStatus) -> u8 {
    match status {
        RunStatus::Passed => 0,
        RunStatus::Failed => 1,
        RunStatus::TimedOut => 2,
        RunStatus::Cancelled => 3,
    }
}

fn parse_time(time: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(time).ok()
}

/// An event's time to the second, as `run.json` gives times.
fn seconds(time: &str) -> String {
    parse_time(time).map_or_else(
        || time.to_owned(),
        |t| humantime::format_rfc3339_seconds(t).to_string(),
    )
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
