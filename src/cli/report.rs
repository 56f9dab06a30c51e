//! `helixflow report`: a run's HTML report, from its journal.

use std::path::PathBuf;

use super::failure::{Failure, Outcome};
use super::input;
use crate::report::html::{FILE_NAME, Writer};
use crate::store::journal;
use crate::store::run::{LATEST, list_runs};
use crate::store::run_json::RunSummary;

/// Arguments of `helixflow report`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file whose runs to look in, when the first word is a path to one (a `.kdl`
    /// path, or a path with a `/` to a file; default: the nearest helixflow.kdl or pipeline.kdl);
    /// then a run id, or `latest` (the default).
    #[arg(value_names = ["FILE", "RUN"], num_args = 0..=2)]
    words: Vec<String>,
    /// The pipeline file, as FILE gives it.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Where to write the report (`-` for standard output; default: `report.html` in the run's
    /// folder).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let mut words = args.words.iter();
    let mut file = args.file.clone();
    if let Some(first) = args.words.first()
        && super::runs::names_a_file(first)
    {
        if file.is_some() {
            return Err(Failure::usage(
                "the pipeline file is given twice, as FILE and `--file`; give one",
            ));
        }
        file = Some(PathBuf::from(first));
        words.next();
    }
    let wanted = words.next().filter(|id| *id != LATEST);
    if let Some(extra) = words.next() {
        return Err(Failure::usage(format!(
            "unexpected `{extra}`: `helixflow report [FILE] [RUN]` takes one run"
        )));
    }
    let dir = input::runs_dir(file)?;
    let runs = list_runs(&dir)
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", dir.display())))?;
    let run = match wanted {
        None => runs.last(),
        Some(id) => runs.iter().find(|r| &r.run_id == id),
    };
    let Some(run) = run else {
        return Err(Failure::usage(match wanted {
            Some(id) => format!(
                "no run \"{id}\" in {}; `helixflow runs` lists them",
                dir.display()
            ),
            None => format!("no runs yet in {}", dir.display()),
        }));
    };
    let events = journal::read(run)
        .map_err(|e| Failure::usage(format!("cannot read the run's journal: {e}")))?;
    let live = RunSummary::read(run)
        .ok()
        .map(|summary| summary.current_status() == "running");
    let mut writer = Writer::new(run.clone());
    match args.output.as_deref() {
        Some(path) if path.as_os_str() == "-" => {
            // Links into the run folder are absolute: the page may be saved anywhere.
            let html = writer.render(&events, live, None);
            super::emit(&html)
        }
        output => {
            let path = output.map_or_else(|| run.path.join(FILE_NAME), PathBuf::from);
            writer
                .write(&events, live, &path)
                .map_err(|e| Failure::internal(format!("cannot write {}: {e}", path.display())))?;
            super::emit(&format!(
                "report of run {}: {}\n",
                run.run_id,
                path.display()
            ))
        }
    }
}
