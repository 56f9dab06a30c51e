//! `helixflow run`: execute a pipeline.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::failure::{Failure, Outcome};
use super::input;
use super::reporters::ReportArgs;
use crate::agent::prompt::{render_argv, shell_quote};
use crate::diagnostics::did_you_mean;
use crate::engine::plan::{Force, PhasePlan};
use crate::engine::{Bundles, RunOptions, attempt_prompt, execute};
use crate::event::CheckKind;
use crate::graph::PhaseGraph;
use crate::model::{Phase, Pipeline, VerifyMode, Worker};
use crate::report::ProgressPause;
use crate::store::lock::RunLock;
use crate::store::run_json::RunSummary;

/// Arguments of `helixflow run`.
#[derive(Debug, Clone, clap::Args)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "command-line switches, each its own flag"
)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    /// Phases at once (overrides the pipeline's `max-parallel`).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Run only this phase (repeat the option for more); their other dependencies are taken as
    /// done. One name per option, so that a pipeline file after it stays the file.
    #[arg(long, value_name = "PHASE")]
    only: Vec<String>,
    /// Run phases even when they are up to date: without a value every phase; with one, that
    /// phase (repeat the option for more), and what depends on it runs because its upstream
    /// re-runs. Write `--force=PHASE`, or put a bare `--force` after the pipeline file.
    #[arg(
        long,
        value_name = "PHASE",
        num_args = 0..=1,
        default_missing_value = "",
        require_equals = false
    )]
    force: Option<Vec<String>>,
    /// Run this phase and every phase downstream of it, even when they are up to date.
    #[arg(long, value_name = "PHASE")]
    from: Option<String>,
    /// Print the plan (order, levels, which phases are up to date and why the others run, each
    /// agent's argv with its prompt) and run nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    reports: ReportArgs,
    #[command(flatten)]
    imports: super::imports::ImportArgs,
    /// Write a bundle (`phases/<phase>/bundle.hxb`) for every phase that passes, `run` steps
    /// included (by default only agent and isolated phases leave one: two walks of the workspace
    /// per attempt cost little beside an agent, much beside a short step).
    #[arg(long, conflicts_with = "no_bundles")]
    bundles: bool,
    /// Write no bundles: the workspace is then walked before and after an attempt only when the
    /// phase's checks read its changes.
    #[arg(long)]
    no_bundles: bool,
    /// When another run of this workspace (the same state folder) is live, wait for it to end
    /// instead of stopping at once.
    #[arg(long)]
    wait: bool,
    /// Write no HTML report (by default every run keeps `report.html` in its folder current,
    /// see `helixflow report`).
    #[arg(long)]
    no_report: bool,
}

/// What `--force` and `--from` ask, checked against the pipeline's phases.
fn force(args: &Args, pipeline: &Pipeline) -> Result<Force, String> {
    let mut force = Force {
        from: args.from.clone(),
        ..Force::default()
    };
    for name in args.force.iter().flatten() {
        if name.is_empty() {
            force.all = true;
        } else {
            force.phases.push(name.clone());
        }
    }
    let named = force.phases.iter().map(|n| ("--force", n));
    for (option, name) in named.chain(force.from.iter().map(|n| ("--from", n))) {
        if !pipeline.names_phase(name) {
            let names = pipeline.phases.iter().map(|p| p.name.value.as_str());
            return Err(match did_you_mean(name, names) {
                Some(s) => format!("{option}: no phase \"{name}\"; did you mean \"{s}\"?"),
                None => format!(
                    "{option}: no phase \"{name}\" (to force every phase of a pipeline file, put `--force` after the file)"
                ),
            });
        }
    }
    Ok(force)
}

pub(crate) fn run(args: &Args) -> Outcome {
    let fixed = with_forced_file(args);
    let args = fixed.as_ref().unwrap_or(args);
    // `--only a b` (one option, two phases) reads `b` as the pipeline file.
    if let (Some(file), Some(last)) = (&args.file, args.only.last())
        && !file.exists()
    {
        return Err(Failure::usage(format!(
            "no pipeline file {}; --only takes one phase, so for more phases repeat it: --only {last} --only {}",
            file.display(),
            file.display()
        )));
    }
    let pipeline = input::runnable_pipeline(args.file.clone(), &args.imports)?;
    check_selection(&pipeline, &args.only)?;
    let force = force(args, &pipeline)?;
    if args.dry_run {
        return dry_run(args, &pipeline, &force);
    }
    // A report that cannot be written is found out before anything is, the state folder
    // included.
    args.reports.check()?;
    // One run at a time per state folder, from before the records are read until the end.
    let lock = lock(&pipeline, args.wait)?;
    let (reporters, progress) = args.reports.sinks(&pipeline, !args.no_report)?;
    let grace = kill_grace()?;
    // Should helixflow itself be killed, the watchdog stops the agents it leaves behind. It starts
    // with the first agent or step: a run with nothing to run needs none.
    crate::process::watchdog::arm(grace, Some(lock.descriptor()), |e| {
        say!(
            "warning: no watchdog for this run ({e}): if helixflow is killed, its agents may go on running"
        );
    });
    let options = options(args, grace, force, progress);
    // One thread drives every phase: the work between children is short (heavy reads and walks
    // go to the blocking pool), and a single thread saves the hand-offs between threads that
    // made up much of the cost per phase (bench/schedule.sh: 1,000 phases, 1.03 s -> 0.83 s).
    let runtime = super::runtime()?;
    let result = runtime.block_on(execute(pipeline, options, reporters, &lock));
    crate::process::watchdog::finish();
    drop(lock);
    let outcome = result.map_err(|e| Failure::internal(format!("the run failed: {e}")))?;
    let journal = from_here(&outcome.run.path);
    let report = outcome.run.path.join(crate::report::html::FILE_NAME);
    if args.no_report || !report.is_file() {
        say!(
            "run {} — journal in {}",
            outcome.run.run_id,
            journal.display()
        );
    } else {
        say!(
            "run {} — journal in {}, report {}",
            outcome.run.run_id,
            journal.display(),
            journal.join(crate::report::html::FILE_NAME).display()
        );
    }
    Ok(outcome.exit_code)
}

/// `helixflow run --force pipeline.kdl`: a bare `--force`, then the file. The arguments read
/// that way, when they were written that way.
fn with_forced_file(args: &Args) -> Option<Args> {
    if args.file.is_some() {
        return None;
    }
    let forced = args.force.as_ref()?;
    let at = forced.iter().position(|v| {
        Path::new(v)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("kdl"))
            && Path::new(v).is_file()
    })?;
    let mut fixed = args.clone();
    fixed.file = Some(PathBuf::from(&forced[at]));
    if let Some(values) = &mut fixed.force {
        values[at] = String::new();
    }
    Some(fixed)
}

/// `run --dry-run`: prints the plan and runs nothing.
fn dry_run(args: &Args, pipeline: &Pipeline, force: &Force) -> Outcome {
    let jobs = RunOptions {
        jobs: args.jobs,
        ..RunOptions::default()
    }
    .max_parallel(pipeline);
    // The plan shows rendered prompts and argv: secrets are redacted there as everywhere.
    let redactor = pipeline.redactor();
    let (plans, previous) =
        crate::engine::plan::for_run(pipeline, &args.only, force, &args.reports.files());
    super::emit(&redactor.redact(&plan(pipeline, &args.only, jobs, &plans, previous.as_ref())))
}

/// The run's options from its arguments; `progress` pauses the progress bars while a person
/// answers an `approval` gate at the terminal.
fn options(
    args: &Args,
    grace: std::time::Duration,
    force: Force,
    progress: Option<ProgressPause>,
) -> RunOptions {
    RunOptions {
        jobs: args.jobs,
        only: args.only.clone(),
        grace,
        reports: args.reports.files(),
        force,
        bundles: if args.bundles {
            Bundles::All
        } else if args.no_bundles {
            Bundles::None
        } else {
            Bundles::Agents
        },
        // A person at the terminal answers `approval` gates there; otherwise the run waits for
        // `helixflow approve`.
        approver: std::io::stdin().is_terminal().then(|| {
            Arc::new(super::approver::TerminalApprover::new(progress))
                as Arc<dyn crate::engine::approvals::Approver>
        }),
    }
}

/// The lock of the pipeline's state folder: taken at once, or once the live run ends with
/// `wait`. Another run that is live without `wait` is an error naming it.
fn lock(pipeline: &Pipeline, wait: bool) -> Result<RunLock, Failure> {
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let cannot = |e: std::io::Error| {
        Failure::internal(format!(
            "cannot lock the state folder {}: {e}",
            state_dir.display()
        ))
    };
    let unguarded = |lock: RunLock| {
        if let Some(e) = lock.refused() {
            say!(
                "warning: cannot lock the state folder {} ({e}): another run could start beside this one",
                state_dir.display()
            );
        }
        lock
    };
    let live = match RunLock::try_acquire(&state_dir).map_err(cannot)? {
        Ok(lock) => return Ok(unguarded(lock)),
        Err(live) => live,
    };
    if wait {
        say!(
            "waiting for {} to end: one run at a time in {}",
            live.describe(),
            state_dir.display()
        );
        return RunLock::wait(&state_dir).map(unguarded).map_err(cannot);
    }
    let message = if live.killed {
        format!(
            "{}: its helixflow was killed, and its watchdog is still stopping the agents it left (TERM, then KILL after the grace period); wait for that with `helixflow run --wait`",
            live.describe()
        )
    } else {
        let stop = live
            .pid
            .map(|pid| format!(" (Ctrl-C where it runs, or `kill {pid}`)"))
            .unwrap_or_default();
        format!(
            "{} is running in this workspace: one run at a time per state folder ({}); wait for it with `helixflow run --wait`, or stop it{stop}",
            live.describe(),
            state_dir.display()
        )
    };
    Err(Failure::busy(message))
}

/// `path` relative to the current folder when it is inside it (as the user typed the pipeline's
/// path), else as it is. The run works in the absolute workspace; people read the short path.
fn from_here(path: &Path) -> PathBuf {
    std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .ok()
        .and_then(|here| path.strip_prefix(here).ok().map(Path::to_owned))
        .filter(|relative| !relative.as_os_str().is_empty())
        .unwrap_or_else(|| path.to_owned())
}

/// `HELIXFLOW_KILL_GRACE`: seconds between TERM and KILL when a child is stopped (default 5).
pub(super) fn kill_grace() -> Result<std::time::Duration, String> {
    match std::env::var("HELIXFLOW_KILL_GRACE") {
        Err(_) => Ok(crate::engine::GRACE),
        Ok(text) => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(std::time::Duration::from_secs_f64)
            .ok_or_else(|| {
                format!("HELIXFLOW_KILL_GRACE must be a number of seconds, not \"{text}\"")
            }),
    }
}

fn check_selection(pipeline: &Pipeline, only: &[String]) -> Result<(), String> {
    for name in only {
        if !pipeline.names_phase(name) {
            let names = pipeline.phases.iter().map(|p| p.name.value.as_str());
            return Err(match did_you_mean(name, names) {
                Some(s) => format!("--only: no phase \"{name}\"; did you mean \"{s}\"?"),
                None => format!("--only: no phase \"{name}\""),
            });
        }
    }
    Ok(())
}

/// The dry-run plan: levels, then each phase with its command and the prompt its first attempt
/// gets, `max_parallel` phases at once.
fn plan(
    pipeline: &Pipeline,
    only: &[String],
    max_parallel: u32,
    plans: &[PhasePlan],
    previous: Option<&RunSummary>,
) -> String {
    let mut out = String::new();
    let selected = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let phases = pipeline
        .phases
        .iter()
        .filter(|p| selected(&p.name.value))
        .count();
    let _ = writeln!(
        out,
        "pipeline \"{}\": {phases} phase{}, at most {max_parallel} at once, workspace {}",
        pipeline.name,
        if phases == 1 { "" } else { "s" },
        pipeline.workspace.display()
    );
    if let Some(previous) = previous {
        previous_run(&mut out, previous);
    }
    let graph = PhaseGraph::new(pipeline);
    for (level, phases) in graph.levels().unwrap_or_default().iter().enumerate() {
        let names: Vec<&str> = phases
            .iter()
            .map(|&i| pipeline.phases[i].name.value.as_str())
            .filter(|n| selected(n))
            .collect();
        if !names.is_empty() {
            let _ = writeln!(out, "level {level}: {}", names.join(", "));
        }
    }
    for phase in pipeline.phases.iter().filter(|p| selected(&p.name.value)) {
        phase_plan(&mut out, pipeline, phase, plans);
    }
    // The items of `for-each` phases and the phases planners wrote, as far as they are known.
    for made in plans.iter().filter(|p| pipeline.phase(&p.phase).is_none()) {
        let _ = writeln!(out, "\nphase \"{}\" (made at run time)", made.phase);
        let _ = match &made.up_to_date {
            Some(run_id) => writeln!(out, "  up to date: passed in run {run_id}; skipped"),
            None => writeln!(out, "  will run: {}", crate::text::one_line(&made.why())),
        };
    }
    out
}

/// The run this one resumes, or the live run it would wait for.
fn previous_run(out: &mut String, previous: &RunSummary) {
    let _ = match previous.running_pid() {
        Some(pid) => writeln!(
            out,
            "run {} is running (pid {pid}, since {}): a run now stops at once, or waits for it with --wait and then resumes it unless it passed",
            previous.run_id, previous.started
        ),
        None => writeln!(
            out,
            "resumes run {} ({})",
            previous.run_id,
            previous.current_status()
        ),
    };
}

/// One phase of the dry-run plan: up to date, or what it will run and how it is checked.
fn phase_plan(out: &mut String, pipeline: &Pipeline, phase: &Phase, plans: &[PhasePlan]) {
    let attempts = phase.retries + 1;
    let _ = writeln!(
        out,
        "\nphase \"{}\" (up to {attempts} attempt{})",
        phase.name.value,
        if attempts == 1 { "" } else { "s" }
    );
    if !phase.depends_on.is_empty() {
        let deps: Vec<&str> = phase.depends_on.iter().map(|d| d.value.as_str()).collect();
        let _ = writeln!(out, "  after: {}", deps.join(", "));
    }
    if let Some(planned) = plans.iter().find(|p| p.phase == phase.name.value) {
        match &planned.up_to_date {
            Some(run_id) => {
                let _ = writeln!(out, "  up to date: passed in run {run_id}; skipped");
                return;
            }
            None => {
                let _ = writeln!(out, "  will run: {}", crate::text::one_line(&planned.why()));
            }
        }
    }
    match &phase.worker {
        Worker::Run(command) => {
            let _ = writeln!(out, "  run: sh -c {}", shell_quote(command));
        }
        Worker::Agent(name) => agent_plan(out, pipeline, phase, &name.value, attempts),
    }
    for block in &phase.attempts {
        let _ = writeln!(
            out,
            "  attempt {}: {}",
            block.label(),
            block.settings().join(", ")
        );
    }
    let gates: Vec<String> = std::iter::once(CheckKind::Outputs.as_str().to_owned())
        .filter(|_| !phase.outputs.is_empty())
        .chain(phase.gates.iter().map(|g| g.name.clone()))
        .collect();
    if !gates.is_empty() {
        let _ = writeln!(out, "  gates: {}", gates.join(", "));
    }
    verification(out, pipeline, phase);
}

/// The agent of a phase in the dry-run plan: its argv, that of its retries, its standard input
/// and the prompt of the first attempt.
fn agent_plan(out: &mut String, pipeline: &Pipeline, phase: &Phase, name: &str, attempts: u32) {
    // The first attempt's, with the `attempt` block that covers it, if any.
    let phase = &*phase.for_attempt(1);
    let name = phase.agent_name().unwrap_or(name);
    let agent = &pipeline.agents[name];
    let prompt = if phase.for_each.is_some() {
        // Rendered for each item, with its values.
        phase.prompt.as_ref().map_or("", |p| p.text()).to_owned()
    } else {
        attempt_prompt(phase, 1, attempts, "")
            .unwrap_or_else(|e| format!("<the prompt does not render: {e}>"))
    };
    let mut values = BTreeMap::from([
        ("prompt", prompt.clone()),
        ("prompt_file", "<attempt folder>/prompt.md".to_owned()),
        ("phase", phase.name.value.clone()),
        ("attempt", "1".to_owned()),
        ("workspace", pipeline.workspace.display().to_string()),
        ("session_id", "<new session id>".to_owned()),
    ]);
    let shown = |argv: &[String], values: &BTreeMap<&str, String>| {
        let mut argv = render_argv(argv, values);
        argv.extend(agent.turn_limit_args(phase.max_turns));
        argv.iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        out,
        "  agent \"{name}\": {}",
        shown(&agent.command, &values)
    );
    if let Some(resume) = &agent.resume {
        values.insert("attempt", "N".to_owned());
        values.insert("prompt_file", "<attempt folder>/prompt.md".to_owned());
        values.insert("session_id", "<the session to continue>".to_owned());
        values.insert("feedback", "<feedback of the previous attempt>".to_owned());
        values.insert(
            "feedback_file",
            "<previous attempt folder>/feedback.md".to_owned(),
        );
        let _ = writeln!(out, "  retries: {}", shown(resume, &values));
    }
    if agent.stdin {
        let _ = writeln!(
            out,
            "  standard input: the prompt{}",
            if agent.resume.is_some() {
                "; on a retry that continues the session, the feedback"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(out, "  prompt:");
    for line in prompt.lines() {
        let _ = writeln!(out, "    | {line}");
    }
}

/// A phase's `scope`, `protect`, verify modes and, for `sub-agent`, the verifier's argv.
fn verification(out: &mut String, pipeline: &Pipeline, phase: &Phase) {
    if !phase.scope.is_empty() {
        let _ = writeln!(out, "  scope: {}", phase.scope.join(", "));
    }
    if !phase.protect.is_empty() {
        let _ = writeln!(out, "  protect: {}", phase.protect.join(", "));
    }
    // Each mode runs only when the ones before it passed.
    let modes: Vec<&str> = phase
        .verify
        .iter()
        .map(|mode| match mode {
            VerifyMode::SelfCheck => "self",
            VerifyMode::External => "external",
            VerifyMode::SubAgent => "sub-agent",
        })
        .collect();
    let _ = writeln!(out, "  verify: {}", modes.join(", then "));
    let Some(name) = phase
        .verifier
        .as_ref()
        .filter(|_| phase.verify.contains(&VerifyMode::SubAgent))
    else {
        return;
    };
    let Some(verifier) = pipeline.agents.get(&name.value) else {
        return;
    };
    let values = BTreeMap::from([
        ("prompt", "<the review prompt>".to_owned()),
        ("prompt_file", "<a copy of the review prompt>".to_owned()),
        ("phase", phase.name.value.clone()),
        ("attempt", "N".to_owned()),
        ("workspace", pipeline.workspace.display().to_string()),
        ("session_id", "<new session id>".to_owned()),
    ]);
    let argv: Vec<String> = render_argv(&verifier.command, &values)
        .iter()
        .map(|a| shell_quote(a))
        .collect();
    let _ = writeln!(out, "  verifier \"{}\": {}", name.value, argv.join(" "));
    if verifier.stdin {
        let _ = writeln!(out, "  verifier's standard input: the review prompt");
    }
}
