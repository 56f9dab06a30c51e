//! `helixflow check`: every phase's outputs and gates against the workspace as it is, in
//! dependency order, with the reporters of `helixflow run`, and without starting any agent.

use std::path::PathBuf;

use super::input;
use super::run::{absolute, kill_grace, sinks};
use crate::engine::check::{CheckOptions, check};

/// Arguments of `helixflow check`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    /// Write every event as NDJSON to FILE (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Write a `JUnit` XML report to FILE (a file: not `-`).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Plain lines instead of progress bars (the default when standard error is not a terminal).
    #[arg(long)]
    no_progress: bool,
}

pub(crate) fn run(args: &Args) -> i32 {
    let pipeline = match input::runnable_pipeline(args.file.clone()) {
        Ok(pipeline) => pipeline,
        Err(code) => return code,
    };
    input::warn_if_a_run_is_live(&pipeline);
    let grace = match kill_grace() {
        Ok(grace) => grace,
        Err(message) => return input::fail(&message),
    };
    let (reporters, _progress) = match sinks(
        args.events.as_deref(),
        args.junit.as_deref(),
        args.no_progress,
        &pipeline,
    ) {
        Ok(reporters) => reporters,
        Err(message) => return input::fail(&message),
    };
    let options = CheckOptions {
        grace,
        reports: args
            .events
            .iter()
            .filter(|path| path.as_os_str() != "-")
            .chain(&args.junit)
            .map(|path| absolute(path))
            .collect(),
    };
    // Should helixflow itself be killed, the watchdog stops the gate command it leaves behind.
    if let Err(e) = crate::process::watchdog::start(grace, None) {
        say!(
            "warning: no watchdog for this check ({e}): if helixflow is killed, a gate command may go on running"
        );
    }
    // Gate command logs go to the state folder: one made now ignores itself, as for a run.
    // Should it fail, the check's logs fail too, and say so.
    let _ = crate::store::state_dir::create(&pipeline.workspace.join(&pipeline.state_dir));
    let runtime = match super::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let code = runtime.block_on(check(pipeline, options, reporters));
    crate::process::watchdog::finish();
    code
}
