//! `helixflow graph`: print the phase DAG.

use std::path::PathBuf;

use super::failure::Outcome;
use super::input;
use crate::graph::{GraphFormat, PhaseGraph, render};

/// Arguments of `helixflow graph`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: helixflow.kdl or pipeline.kdl here or in a parent folder).
    file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    format: GraphFormat,
    #[command(flatten)]
    imports: super::imports::ImportArgs,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let (_, pipeline) = input::checked_pipeline(args.file.clone(), &args.imports)?;
    // What is known now of the work made at run time: the phases planners wrote, and how
    // many items each `for-each` phase has.
    let (pipeline, items) = crate::engine::plan::known_now(pipeline);
    let graph = PhaseGraph::new(&pipeline);
    super::emit(&render(&pipeline, &graph, args.format, &items))
}
