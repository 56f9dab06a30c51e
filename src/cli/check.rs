//! `helixflow check`: every phase's outputs and gates against the workspace as it is, in
//! dependency order, with the reporters of `helixflow run`, and without starting any agent.

use std::path::PathBuf;

use super::failure::{Failure, Outcome};
use super::input;
use super::reporters::ReportArgs;
use super::run::kill_grace;
use crate::engine::check::{CheckOptions, check};

/// Arguments of `helixflow check`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    #[command(flatten)]
    reports: ReportArgs,
    #[command(flatten)]
    imports: super::imports::ImportArgs,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let pipeline = input::runnable_pipeline(args.file.clone(), &args.imports)?;
    input::warn_if_a_run_is_live(&pipeline);
    let grace = kill_grace()?;
    let (reporters, _progress) = args.reports.sinks(&pipeline, false)?;
    let options = CheckOptions {
        grace,
        reports: args.reports.files(),
    };
    // Should helixflow itself be killed, the watchdog stops the gate command it leaves behind.
    crate::process::watchdog::arm(grace, None, |e| {
        say!(
            "warning: no watchdog for this check ({e}): if helixflow is killed, a gate command may go on running"
        );
    });
    // Gate command logs go to the state folder: one made now ignores itself, as for a run.
    // Should it fail, the check's logs fail too, and say so.
    let _ = crate::store::state_dir::create(&pipeline.workspace.join(&pipeline.state_dir));
    let runtime = super::runtime()?;
    let result = runtime.block_on(check(pipeline, options, reporters));
    crate::process::watchdog::finish();
    result.map_err(|e| Failure::internal(format!("the check failed: {e}")))
}
