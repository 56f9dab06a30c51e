//! `helixflow runs` and `helixflow show`: past runs from the journal.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::failure::{Failure, Outcome};
use super::input;
use crate::event::usage::{FailureClass, Usage};
use crate::event::{AttemptOutcome, Event, Tier};
use crate::report::replay;
use crate::store::journal;
use crate::store::run::{LATEST, RunDir, list_runs};
use crate::store::run_json::RunSummary;

/// Arguments of `helixflow runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    /// The pipeline file whose runs to list (default: the nearest helixflow.kdl or pipeline.kdl).
    #[arg(value_name = "FILE")]
    pipeline: Option<PathBuf>,
    /// The pipeline file, as FILE gives it.
    #[arg(long, global = true)]
    file: Option<PathBuf>,
    /// Per phase and tier (the attempt of the work and its agent), over every run: attempts,
    /// passes, cost and duration, the cost per pass and per passed phase.
    #[arg(long)]
    stats: bool,
    /// With `--stats`: as JSON.
    #[arg(long, requires = "stats")]
    json: bool,
    #[command(subcommand)]
    command: Option<RunsCommand>,
}

#[derive(Debug, clap::Subcommand)]
enum RunsCommand {
    /// Join the run folders of several machines (CI jobs that each ran some phases) into one
    /// run of this pipeline, which `runs` and `show` read.
    ///
    /// Each phase's records and folder come from the last run (by start time) that has any of
    /// it; the joined run ends with the worst status of the runs joined. Prints the new run's id.
    Merge(MergeArgs),
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// Run folders (`<state-dir>/runs/<run-id>`), or folders holding run folders.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Also write a `JUnit` XML report of the joined run to this file.
    #[arg(long, value_name = "PATH")]
    junit: Option<PathBuf>,
}

/// Arguments of `helixflow show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The pipeline file whose runs to look in, when the first word is a path to one (a `.kdl`
    /// path, or a path with a `/` to a file; default: the nearest helixflow.kdl or pipeline.kdl);
    /// then a run id, or `latest` (the default); then a phase, to show its attempts and their
    /// feedback.
    #[arg(value_names = ["FILE", "RUN", "PHASE"], num_args = 0..=3)]
    words: Vec<String>,
    /// The pipeline file, as FILE gives it.
    #[arg(long)]
    file: Option<PathBuf>,
}

/// What `helixflow show` was asked for, its words told apart.
struct ShowTarget {
    file: Option<PathBuf>,
    run: Option<String>,
    phase: Option<String>,
}

impl ShowArgs {
    /// The pipeline file, the run and the phase. A first word that is a path to a pipeline file
    /// is that file (as for every other command); a run id or `latest` never is one.
    fn target(&self) -> Result<ShowTarget, String> {
        let mut words = self.words.iter();
        let mut file = self.file.clone();
        let first = words.clone().next();
        if let Some(first) = first
            && names_a_file(first)
        {
            if file.is_some() {
                return Err(
                    "the pipeline file is given twice, as FILE and `--file`; give one".to_owned(),
                );
            }
            file = Some(PathBuf::from(first));
            words.next();
        }
        let run = words.next().cloned();
        let phase = words.next().cloned();
        if let Some(extra) = words.next() {
            return Err(format!(
                "unexpected `{extra}`: `helixflow show [FILE] [RUN] [PHASE]` takes a run and a phase"
            ));
        }
        Ok(ShowTarget { file, run, phase })
    }
}

/// Whether a word of `show` is a pipeline file rather than a run id or a phase name: a `.kdl`
/// file, or a path with a folder in it that is a file. A bare word (`latest`, `left`) is a run or
/// a phase even when a file of that name happens to be in the current folder.
pub(super) fn names_a_file(word: &str) -> bool {
    let path = std::path::Path::new(word);
    path.extension().is_some_and(|e| e == "kdl") || (word.contains('/') && path.is_file())
}

pub(crate) fn runs(args: &RunsArgs) -> Outcome {
    // `--file` is also `merge`'s, which a conflict declared here would break.
    let file = match (&args.pipeline, &args.file) {
        (Some(_), Some(_)) => {
            return Err(Failure::usage(
                "the pipeline file is given twice, as FILE and `--file`; give one",
            ));
        }
        (pipeline, file) => pipeline.clone().or_else(|| file.clone()),
    };
    let dir = input::runs_dir(file)?;
    if let Some(RunsCommand::Merge(merge)) = &args.command {
        return merge_runs(&dir, merge);
    }
    let runs = list_runs(&dir)
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", dir.display())))?;
    let sessions = super::sessions::table(dir.parent().unwrap_or(&dir));
    if runs.is_empty() && !args.json {
        return super::emit(&format!("no runs yet in {}\n{sessions}", dir.display()));
    }
    if args.stats {
        return super::emit(&super::stats::stats(&runs, args.json));
    }
    let summaries: Vec<_> = runs
        .iter()
        .map(|run| (run, RunSummary::read(run)))
        .collect();
    // Wide enough for `running (pid 4242)`.
    let width = summaries
        .iter()
        .filter_map(|(_, summary)| summary.as_ref().ok())
        .map(|summary| summary.status_words().chars().count())
        .max()
        .unwrap_or(0)
        .max(10);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:<width$} {:<22} {:<10} phases",
        "run", "status", "started", "cost"
    );
    for (run, summary) in summaries {
        match summary {
            Ok(summary) => {
                let passed = summary
                    .phases
                    .iter()
                    .filter(|p| p.status == "passed")
                    .count();
                let fresh = summary
                    .phases
                    .iter()
                    .filter(|p| p.status == "up-to-date")
                    .count();
                let mut line = format!(
                    "{:<20} {:<width$} {:<22} {:<10} {passed}/{} passed",
                    run.run_id,
                    summary.status_words(),
                    summary.started,
                    summary.cost.short(),
                    summary.phases.len()
                );
                if fresh > 0 {
                    let _ = write!(line, ", {fresh} up to date");
                }
                if let Some(resumed) = &summary.resumes {
                    let _ = write!(line, ", resumes {resumed}");
                }
                let _ = writeln!(out, "{line}");
            }
            Err(e) => {
                let _ = writeln!(out, "{:<20} unreadable: {e}", run.run_id);
            }
        }
    }
    out.push_str(&sessions);
    super::emit(&out)
}

pub(crate) fn show(args: &ShowArgs) -> Outcome {
    let args = args.target()?;
    let dir = input::runs_dir(args.file.clone())?;
    let runs = list_runs(&dir)
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", dir.display())))?;
    // `latest` names the latest run, as for `approve`.
    let wanted = args.run.as_deref().filter(|id| *id != LATEST);
    let run = match wanted {
        None => runs.last(),
        Some(id) => runs.iter().find(|r| r.run_id == id),
    };
    if run.is_none()
        && args.phase.is_none()
        && let Some(id) = wanted
        && let Some(session) = super::sessions::show(dir.parent().unwrap_or(&dir), id)
    {
        return match session {
            Ok(text) => super::emit(&text),
            Err(e) => Err(Failure::usage(e)),
        };
    }
    let Some(run) = run else {
        return Err(Failure::usage(match wanted {
            Some(id) => {
                let mut message = format!(
                    "no run \"{id}\" in {}; `helixflow runs` lists them",
                    dir.display()
                );
                // `show PHASE` was perhaps meant as the latest run's phase.
                let latest_has_phase = runs
                    .last()
                    .and_then(|latest| RunSummary::read(latest).ok())
                    .is_some_and(|s| s.phases.iter().any(|p| p.name == id));
                if args.phase.is_none() && latest_has_phase {
                    let _ = write!(
                        message,
                        " (for phase \"{id}\" of the latest run: `helixflow show latest {id}`)"
                    );
                }
                message
            }
            None => format!("no runs yet in {}", dir.display()),
        }));
    };
    match &args.phase {
        None => show_run(run),
        Some(phase) => show_phase(run, phase),
    }
}

fn show_run(run: &RunDir) -> Outcome {
    let summary = RunSummary::read(run)
        .map_err(|e| Failure::usage(format!("cannot read the run's summary: {e}")))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} of \"{}\" ({}), started {}",
        summary.run_id,
        summary.pipeline,
        summary.file.display(),
        summary.started
    );
    if let Some(resumed) = &summary.resumes {
        let _ = writeln!(out, "resumes run {resumed}, which did not pass");
    }
    let status = summary.current_status();
    let _ = writeln!(
        out,
        "status: {}{}",
        summary.status_words(),
        summary
            .exit_code
            .map(|c| format!(" (exit {c})"))
            .unwrap_or_default()
    );
    let _ = writeln!(out);
    // The table the run wrote at its end, from the journal: a run still going shows its phases
    // as running or pending, one that was killed as unfinished or not started.
    match replay::summary_table(run, status == "running") {
        Ok(table) => out.push_str(&table),
        Err(e) => {
            return Err(Failure::usage(format!(
                "cannot read the run's journal: {e}"
            )));
        }
    }
    let _ = writeln!(
        out,
        "\njournal: {}",
        run.path.join(journal::FILE_NAME).display()
    );
    super::emit(&out)
}

fn show_phase(run: &RunDir, phase: &str) -> Outcome {
    let summary = RunSummary::read(run).ok();
    let recorded = summary
        .as_ref()
        .and_then(|s| s.phases.iter().find(|p| p.name == phase));
    if let Some(summary) = &summary
        && recorded.is_none()
    {
        let names: Vec<&str> = summary.phases.iter().map(|p| p.name.as_str()).collect();
        return Err(Failure::usage(format!(
            "no phase named \"{phase}\" in run {}; its phases: {}",
            run.run_id,
            names.join(", ")
        )));
    }
    let running = summary
        .as_ref()
        .is_some_and(|s| s.current_status() == "running");
    let reason = recorded.and_then(|p| p.reason.clone());
    let mut attempts = attempt_folders(run, phase);
    if attempts.is_empty() {
        let status = recorded.map_or("", |p| p.status.as_str());
        return no_attempts(run, phase, status, reason.as_deref(), running);
    }
    attempts.sort();
    let (ends, tiers) = attempt_records(run, phase);
    let mut out = String::new();
    for (n, path) in attempts {
        let _ = writeln!(out, "── attempt {n} ({})", path.display());
        if let Some(tier) = tiers.get(&n) {
            let _ = writeln!(out, "   tier: {}", tier_words(tier));
        }
        let end = ends.get(&n);
        if let Some(usage) = end.and_then(|end| end.usage.as_ref()) {
            let turns = usage
                .turns
                .map(|t| format!(", {t} turns"))
                .unwrap_or_default();
            let _ = writeln!(out, "   used: {}{turns}", usage.short());
        }
        if let Some(class) = end.and_then(|end| end.class) {
            let _ = writeln!(out, "   failure class: {}", class.as_str());
        }
        write_gates(&mut out, &path);
        let feedback = std::fs::read_to_string(path.join("feedback.md")).ok();
        write_ending(&mut out, end, feedback, reason.as_deref(), running);
    }
    super::emit(&out)
}

/// The phase's attempt folders (`attempt-<n>`) with their numbers, in no order.
fn attempt_folders(run: &RunDir, phase: &str) -> Vec<(u32, PathBuf)> {
    std::fs::read_dir(run.phase_dir(phase))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let n = e
                        .file_name()
                        .to_str()?
                        .strip_prefix("attempt-")?
                        .parse()
                        .ok()?;
                    Some((n, e.path()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What `show` says of a phase without attempts, from its `status` in `run.json` (empty when
/// unknown).
fn no_attempts(
    run: &RunDir,
    phase: &str,
    status: &str,
    reason: Option<&str>,
    running: bool,
) -> Outcome {
    let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
    let text = match status {
        "skipped" => format!("phase \"{phase}\" was skipped{why}"),
        "pending" if running => format!("phase \"{phase}\" has not started yet"),
        "pending" => format!("phase \"{phase}\" never started: the run ended before it"),
        "" => {
            return Err(Failure::usage(format!(
                "phase \"{phase}\" has no attempts in run {}",
                run.run_id
            )));
        }
        status => format!("phase \"{phase}\" is {status}, with no attempts{why}"),
    };
    super::emit(&format!("{text} (run {})\n", run.run_id))
}

/// The gate reports of the attempt in `folder` (its `gates.json`), one line each.
fn write_gates(out: &mut String, folder: &Path) {
    if let Ok(gates) = std::fs::read_to_string(folder.join("gates.json"))
        && let Ok(serde_json::Value::Array(reports)) =
            serde_json::from_str::<serde_json::Value>(&gates)
    {
        for report in reports {
            let _ = writeln!(
                out,
                "   {:<8} {} ({})",
                report["status"].as_str().unwrap_or("?"),
                report["name"].as_str().unwrap_or("?"),
                report["kind"].as_str().unwrap_or("?")
            );
        }
    }
}

/// How an attempt ended: its feedback when it failed with some, else its outcome in a line.
/// `reason` is why the phase was cancelled; `running` whether the run is live.
fn write_ending(
    out: &mut String,
    end: Option<&AttemptEnd>,
    feedback: Option<String>,
    reason: Option<&str>,
    running: bool,
) {
    match (end.map(|end| end.outcome), feedback) {
        (Some(AttemptOutcome::Failed) | None, Some(feedback)) => {
            let _ = writeln!(out, "   feedback:");
            for line in feedback.lines() {
                let _ = writeln!(out, "   | {}", crate::text::one_line(line));
            }
        }
        (Some(AttemptOutcome::Failed), None) => {
            let why = end
                .and_then(|end| end.error.as_deref())
                .unwrap_or("no feedback was written");
            let _ = writeln!(out, "   failed: {}", crate::text::one_line(why));
        }
        (Some(AttemptOutcome::Passed), _) if end.is_some_and(|end| end.nothing_to_change) => {
            let _ = writeln!(out, "   passed, nothing to change");
        }
        (Some(AttemptOutcome::Passed), _) => {
            let _ = writeln!(out, "   passed");
        }
        (Some(AttemptOutcome::Cancelled), _) => {
            let _ = writeln!(
                out,
                "   cancelled: {}",
                reason.unwrap_or("the run was stopped")
            );
        }
        (None, None) if running => {
            let _ = writeln!(out, "   running: this attempt has not finished yet");
        }
        (None, None) => {
            let _ = writeln!(out, "   unfinished: the run ended before this attempt did");
        }
    }
}

/// How one attempt ended, as its `attempt-finished` event says.
struct AttemptEnd {
    outcome: AttemptOutcome,
    error: Option<String>,
    usage: Option<Usage>,
    class: Option<FailureClass>,
    nothing_to_change: bool,
}

/// How each attempt of `phase` ended, by attempt number (the outcome, error, usage and failure
/// class of its `attempt-finished` event in the run's journal; an attempt without one has not
/// finished), and the tier each ran in (its `attempt-started`).
fn attempt_records(run: &RunDir, phase: &str) -> (HashMap<u32, AttemptEnd>, HashMap<u32, Tier>) {
    let (mut ends, mut tiers) = (HashMap::new(), HashMap::new());
    let Ok(events) = journal::read(run) else {
        return (ends, tiers);
    };
    for stamped in events {
        match stamped.event {
            Event::AttemptStarted {
                phase: of,
                attempt,
                tier: Some(tier),
                ..
            } if of == phase => {
                tiers.insert(attempt, tier);
            }
            Event::AttemptFinished {
                phase: of,
                attempt,
                outcome,
                error,
                usage,
                class,
                nothing_to_change,
                ..
            } if of == phase => {
                let end = AttemptEnd {
                    outcome,
                    error,
                    usage,
                    class,
                    nothing_to_change,
                };
                ends.insert(attempt, end);
            }
            _ => {}
        }
    }
    (ends, tiers)
}

/// An attempt's tier in words, e.g. `attempt 2 of the work, agent "claude-opus"`, then the
/// blocks that set it.
fn tier_words(tier: &Tier) -> String {
    let mut words = format!("attempt {} of the work", tier.work_attempt);
    if let Some(agent) = &tier.agent {
        let _ = write!(words, ", agent \"{}\"", crate::text::one_line(agent));
    }
    if tier.blocks.is_empty() {
        words.push_str(", the phase's own settings");
    } else {
        let blocks: Vec<String> = tier
            .blocks
            .iter()
            .map(|b| format!("`attempt {}`", crate::text::one_line(b)))
            .collect();
        let _ = write!(words, ", set by {}", blocks.join(" and "));
    }
    words
}

/// `helixflow runs merge`.
fn merge_runs(runs_dir: &std::path::Path, args: &MergeArgs) -> Outcome {
    // A folder without a journal of its own holds run folders (artifacts downloaded whole).
    let mut dirs = Vec::new();
    for dir in &args.dirs {
        let before = dirs.len();
        find_runs(dir, 3, &mut dirs);
        if dirs.len() == before {
            return Err(Failure::usage(format!(
                "{} is not a run folder ({} missing) and holds none",
                dir.display(),
                journal::FILE_NAME
            )));
        }
    }
    let (run, events) =
        crate::store::merge::merge(runs_dir, &dirs).map_err(|e| Failure::usage(e.0))?;
    if let Some(path) = &args.junit {
        let mut junit = crate::report::Junit::new(path.clone());
        let written = replay::replay(&events, &mut junit);
        written.map_err(|e| Failure::internal(format!("cannot write {}: {e}", path.display())))?;
    }
    super::emit(&format!(
        "joined {} into run {} ({})\n",
        if dirs.len() == 1 {
            "1 run".to_owned()
        } else {
            format!("{} runs", dirs.len())
        },
        run.run_id,
        run.path.display()
    ))
}

/// The run folders at `dir` or below it, up to `depth` levels down, in name order.
fn find_runs(dir: &std::path::Path, depth: u32, out: &mut Vec<PathBuf>) {
    // `latest` is another run's folder again (a link, or its copy in a downloaded artifact).
    if dir.file_name().is_some_and(|name| name == LATEST) {
        return;
    }
    if dir.join(journal::FILE_NAME).is_file() {
        out.push(dir.to_owned());
        return;
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut inner: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    inner.sort();
    for path in inner {
        find_runs(&path, depth - 1, out);
    }
}
