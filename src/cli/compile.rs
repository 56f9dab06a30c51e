//! `helixflow compile`: print the checked model as JSON.

use std::path::PathBuf;

use super::input;

/// Arguments of `helixflow compile`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    #[command(flatten)]
    imports: super::imports::ImportArgs,
}

pub(crate) fn run(args: &Args) -> i32 {
    let (_, pipeline) = match input::checked_pipeline(args.file.clone(), &args.imports) {
        Ok(checked) => checked,
        Err(code) => return code,
    };
    // `secret` values set in the pipeline's or a phase's `env` are redacted, as in the run's
    // `pipeline.json`.
    match pipeline.redactor().to_json_pretty(&pipeline) {
        Ok(json) => super::emit(&format!("{json}\n")),
        Err(e) => {
            say!("error: cannot serialize the pipeline: {e}");
            crate::exit::INTERNAL
        }
    }
}
