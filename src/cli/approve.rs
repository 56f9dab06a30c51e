//! `helixflow approve` and `helixflow reject`: answer an `approval` gate from another shell.

use std::path::PathBuf;

use super::input;
use crate::engine::approvals::{ApprovalDecision, DECISION_FILE, REQUEST_FILE};
use crate::store::run::{list_runs, write_atomic};

/// Arguments of `helixflow approve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    /// The run id (`helixflow runs` lists them), or `latest`.
    run: String,
    /// The phase waiting for approval.
    phase: String,
    /// The pipeline file whose runs to look in (default: the nearest helixflow.kdl or pipeline.kdl).
    #[arg(long)]
    file: Option<PathBuf>,
}

/// Arguments of `helixflow reject`.
#[derive(Debug, clap::Args)]
pub(crate) struct RejectArgs {
    /// The run id (`helixflow runs` lists them), or `latest`.
    run: String,
    /// The phase waiting for approval.
    phase: String,
    /// Why: it becomes feedback for the phase's next attempt.
    #[arg(long)]
    reason: String,
    /// The pipeline file whose runs to look in (default: the nearest helixflow.kdl or pipeline.kdl).
    #[arg(long)]
    file: Option<PathBuf>,
}

pub(crate) fn approve(args: &ApproveArgs) -> i32 {
    answer(
        args.file.clone(),
        &args.run,
        &args.phase,
        true,
        String::new(),
    )
}

pub(crate) fn reject(args: &RejectArgs) -> i32 {
    answer(
        args.file.clone(),
        &args.run,
        &args.phase,
        false,
        args.reason.clone(),
    )
}

fn answer(file: Option<PathBuf>, run_id: &str, phase: &str, approved: bool, reason: String) -> i32 {
    let runs_dir = match input::runs_dir(file) {
        Ok(dir) => dir,
        Err(code) => return code,
    };
    let runs = list_runs(&runs_dir).unwrap_or_default();
    let run = if run_id == "latest" {
        runs.last()
    } else {
        runs.iter().find(|r| r.run_id == run_id)
    };
    let Some(run) = run else {
        return input::fail(&format!(
            "no run \"{run_id}\" in {}; `helixflow runs` lists them",
            runs_dir.display()
        ));
    };
    let waiting = std::fs::read_dir(run.phase_dir(phase))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|attempt| attempt.join(REQUEST_FILE).is_file());
    let Some(attempt) = waiting else {
        return input::fail(&format!(
            "phase \"{phase}\" of run {} is not waiting for approval",
            run.run_id
        ));
    };
    let decision = ApprovalDecision {
        approved,
        reason,
        by: std::env::var("USER").unwrap_or_default(),
    };
    let text = match serde_json::to_string_pretty(&decision) {
        Ok(text) => text,
        Err(e) => return input::fail(&e.to_string()),
    };
    match write_atomic(&attempt.join(DECISION_FILE), text.as_bytes()) {
        Ok(()) => {
            let verb = if approved { "approved" } else { "rejected" };
            super::emit(&format!("{verb} phase \"{phase}\" of run {}\n", run.run_id))
        }
        Err(e) => input::fail(&format!("cannot record the decision: {e}")),
    }
}
