//! `helixflow approve` and `helixflow reject`: answer an `approval` gate from another shell, over
//! the run's control socket (the run refuses a decision from a process it started itself).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use super::failure::{Failure, Outcome};
use super::input;
use crate::engine::approvals::ApprovalDecision;
use crate::engine::control::{self, ControlRequest, DecideRequest, DecideResponse};
use crate::store::run::list_runs;

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

pub(crate) fn approve(args: &ApproveArgs) -> Outcome {
    answer(
        args.file.clone(),
        &args.run,
        &args.phase,
        true,
        String::new(),
    )
}

pub(crate) fn reject(args: &RejectArgs) -> Outcome {
    answer(
        args.file.clone(),
        &args.run,
        &args.phase,
        false,
        args.reason.clone(),
    )
}

fn answer(
    file: Option<PathBuf>,
    run_id: &str,
    phase: &str,
    approved: bool,
    reason: String,
) -> Outcome {
    let runs_dir = input::runs_dir(file)?;
    let runs = list_runs(&runs_dir).unwrap_or_default();
    let run = if run_id == crate::store::run::LATEST {
        runs.last()
    } else {
        runs.iter().find(|r| r.run_id == run_id)
    };
    let Some(run) = run else {
        return Err(Failure::usage(format!(
            "no run \"{run_id}\" in {}; `helixflow runs` lists them",
            runs_dir.display()
        )));
    };
    let live = runs_dir
        .parent()
        .and_then(crate::store::lock::live_run)
        .filter(|live| !live.killed && live.run_id.as_deref() == Some(run.run_id.as_str()));
    let Some(live) = live else {
        return Err(Failure::usage(format!(
            "phase \"{phase}\" of run {} is not waiting for approval: the run is not running",
            run.run_id
        )));
    };
    let request = ControlRequest::Decide(DecideRequest {
        phase: phase.to_owned(),
        decision: ApprovalDecision {
            approved,
            reason,
            by: std::env::var("USER").unwrap_or_default(),
        },
    });
    let response = match ask_run(&run.path, &run.run_id, live.pid, &request) {
        Ok(response) => response,
        Err(e) => {
            return Err(Failure::usage(format!(
                "cannot reach run {} to decide phase \"{phase}\": {e}",
                run.run_id
            )));
        }
    };
    match (response.error, response.attempt) {
        (Some(error), _) => Err(Failure::usage(error)),
        (None, attempt) => {
            let verb = if approved { "approved" } else { "rejected" };
            let attempt = attempt.map_or_else(String::new, |n| format!(" (attempt {n})"));
            super::emit(&format!(
                "{verb} phase \"{phase}\" of run {}{attempt}\n",
                run.run_id
            ))
        }
    }
}

/// Sends `request` to the run over its control socket, and reads the answer.
fn ask_run(
    run_dir: &Path,
    run_id: &str,
    pid: Option<u32>,
    request: &ControlRequest,
) -> std::io::Result<DecideResponse> {
    let mut text = serde_json::to_string(request).map_err(std::io::Error::other)?;
    text.push('\n');
    // In the run folder, or, when that path is too long for a socket, in the temporary folder
    // under the run's process id.
    let in_run = run_dir.join("control.sock");
    let socket = match pid {
        Some(pid) if !in_run.exists() => {
            let absolute = std::path::absolute(run_dir)?;
            control::socket_path_of(&absolute, run_id, pid)
        }
        _ => in_run,
    };
    let mut stream = UnixStream::connect(&socket)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", socket.display())))?;
    stream.write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| {
        std::io::Error::other(format!("the run gave an answer helixflow cannot read: {e}"))
    })
}
