//! `helixflow status`: which phases a run would skip as up to date, and why each other one would
//! run.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::json;

use super::failure::Outcome;
use super::input;
use crate::engine::plan::{Force, PhasePlan, Reason, for_run};
use crate::store::run_json::RunSummary;
use crate::text::one_line;

/// Arguments of `helixflow status`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    /// Print the plan as JSON: each phase with `up-to-date` (the run it passed in) or its
    /// `reasons`, each with a `reason` kind, its details and a `text`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    imports: super::imports::ImportArgs,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let pipeline = input::runnable_pipeline(args.file.clone(), &args.imports)?;
    let text = if args.json {
        let mut text = serde_json::to_string_pretty(&as_json(&pipeline)).unwrap_or_default();
        text.push('\n');
        text
    } else {
        let (plans, previous) = for_run(&pipeline, &[], &Force::default(), &[]);
        human(&pipeline.name, &plans, previous.as_ref())
    };
    super::emit(&pipeline.redactor().redact(&text))
}

/// The plan as `status --json` prints it (not yet redacted).
pub(crate) fn as_json(pipeline: &crate::model::Pipeline) -> serde_json::Value {
    let (plans, previous) = for_run(pipeline, &[], &Force::default(), &[]);
    let phases: Vec<serde_json::Value> = plans.iter().map(phase_json).collect();
    let live = previous.as_ref().filter(|p| p.running_pid().is_some());
    json!({
        "pipeline": pipeline.name,
        "resumes": previous.as_ref().filter(|p| p.running_pid().is_none()).map(|p| p.run_id.clone()),
        "running": live.map(|p| json!({
            "run-id": p.run_id,
            "pid": p.running_pid(),
            "since": p.started,
        })),
        "phases": phases,
    })
}

fn phase_json(plan: &PhasePlan) -> serde_json::Value {
    let reasons: Vec<serde_json::Value> = plan
        .reasons
        .iter()
        .map(|reason| {
            let mut value = serde_json::to_value(reason).unwrap_or_default();
            if let Some(object) = value.as_object_mut() {
                object.insert("text".to_owned(), json!(reason.to_string()));
            }
            value
        })
        .collect();
    json!({
        "phase": plan.phase,
        "status": if plan.is_up_to_date() { "up-to-date" } else { "will-run" },
        "up-to-date": plan.up_to_date,
        "reasons": reasons,
    })
}

fn human(pipeline: &str, plans: &[PhasePlan], previous: Option<&RunSummary>) -> String {
    let mut out = String::new();
    let fresh = plans.iter().filter(|p| p.is_up_to_date()).count();
    let _ = writeln!(
        out,
        "pipeline \"{pipeline}\": {fresh} of {} phases up to date, {} will run",
        plans.len(),
        plans.len() - fresh
    );
    if let Some(previous) = previous {
        let _ = match previous.running_pid() {
            Some(pid) => writeln!(
                out,
                "run {} is running (pid {pid}, since {}): a new run stops at once, or waits for it with `run --wait`",
                one_line(&previous.run_id),
                one_line(&previous.started)
            ),
            None => writeln!(
                out,
                "the next run resumes run {}, which did not pass",
                one_line(&previous.run_id)
            ),
        };
    }
    let width = plans
        .iter()
        .map(|p| p.phase.chars().count())
        .max()
        .unwrap_or(0);
    for plan in plans {
        if let Some(run_id) = &plan.up_to_date {
            let _ = writeln!(
                out,
                "✓ {:<width$}  up to date (passed in run {})",
                plan.phase,
                one_line(run_id)
            );
            continue;
        }
        let _ = writeln!(out, "→ {:<width$}  will run", plan.phase);
        for reason in &plan.reasons {
            // A reason names files an agent made: their names reach the terminal cleaned, one
            // line each.
            let _ = writeln!(out, "    - {}", one_line(&reason.to_string()));
            if let Reason::PromptChanged { diff, .. } = reason {
                for line in diff.lines() {
                    let _ = writeln!(out, "      {}", one_line(line));
                }
            }
        }
    }
    out
}
