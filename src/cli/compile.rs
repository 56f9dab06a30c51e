//! `helixflow compile`: print the checked model as JSON.

use std::path::PathBuf;

use super::failure::{Failure, Outcome};
use super::input;

/// Arguments of `helixflow compile`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    #[command(flatten)]
    imports: super::imports::ImportArgs,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let (_, pipeline) = input::checked_pipeline(args.file.clone(), &args.imports)?;
    // `secret` values set in the pipeline's or a phase's `env` are redacted, as in the run's
    // `pipeline.json`.
    let json = pipeline
        .redactor()
        .to_json_pretty(&pipeline)
        .map_err(|e| Failure::internal(format!("cannot serialize the pipeline: {e}")))?;
    super::emit(&format!("{json}\n"))
}
