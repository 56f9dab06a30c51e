//! The reporters `helixflow run` and `helixflow check` write to: their arguments, declared once,
//! and the sinks they make. A new reporter is its file in `report/`, its line in `report/mod.rs`
//! and its argument and sink here.

use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};

use crate::event::sink::{EventSink, Sinks};
use crate::model::Pipeline;
use crate::report::html::LiveReport;
use crate::report::{Junit, Ndjson, Plain, Progress, ProgressPause, Summary};

/// The reporter arguments of `helixflow run` and `helixflow check`.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct ReportArgs {
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

impl ReportArgs {
    /// The report files asked for, as absolute paths: snapshots of the workspace leave them out.
    pub(super) fn files(&self) -> Vec<PathBuf> {
        self.events
            .iter()
            .filter(|path| path.as_os_str() != "-")
            .chain(&self.junit)
            .map(|path| absolute(path))
            .collect()
    }

    /// Whether the `JUnit` report asked for can be written.
    pub(super) fn check(&self) -> Result<(), String> {
        if let Some(path) = &self.junit {
            // `-` means standard output to --events; here it would quietly be a file named `-`.
            if path.as_os_str() == "-" {
                return Err(
                    "--junit needs a file name: a JUnit report is not written to standard output (`--events -` is)"
                        .to_owned(),
                );
            }
            Junit::check(path)
                .map_err(|e| format!("--junit: cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// The reporters asked for, then the run's HTML report (with `html`: a run's, not a check's),
    /// then the summary, and the handle that pauses the progress bars when they are drawn.
    pub(super) fn sinks(
        &self,
        pipeline: &Pipeline,
        html: bool,
    ) -> Result<(Sinks, Option<ProgressPause>), String> {
        // Checked before anything is written or run: a report that cannot be written is found
        // out now, not after the work is done.
        self.check()?;
        let mut list: Vec<Box<dyn EventSink>> = Vec::new();
        let stderr = std::io::stderr();
        let mut pause = None;
        if !self.no_progress && stderr.is_terminal() {
            let progress = Progress::new(pipeline.phases.len());
            pause = Some(progress.pause_handle());
            list.push(Box::new(progress));
        } else {
            // Buffered and flushed after each event: one `write` per event rather than one per
            // piece.
            list.push(Box::new(Plain::new(BufWriter::new(std::io::stderr()))));
        }
        match &self.events {
            None => {}
            Some(path) if path.as_os_str() == "-" => {
                list.push(Box::new(Ndjson::new(std::io::stdout())));
            }
            Some(path) => {
                let file = std::fs::File::create(path)
                    .map_err(|e| format!("--events: cannot write {}: {e}", path.display()))?;
                list.push(Box::new(Ndjson::file(BufWriter::new(file))));
            }
        }
        if let Some(path) = &self.junit {
            list.push(Box::new(Junit::new(path)));
        }
        if html {
            let runs = pipeline.workspace.join(&pipeline.state_dir).join("runs");
            list.push(Box::new(LiveReport::new(
                runs,
                pipeline,
                pipeline.redactor(),
            )));
        }
        list.push(Box::new(Summary::new(BufWriter::new(std::io::stderr()))));
        Ok((Sinks::new(list), pause))
    }
}

/// `path` made absolute, with its folder's symbolic links and `..` resolved when that folder
/// exists, so that it compares with paths inside the (canonical) workspace.
fn absolute(path: &Path) -> PathBuf {
    let resolved = match (path.parent(), path.file_name()) {
        (Some(folder), Some(name)) => {
            let folder = if folder.as_os_str().is_empty() {
                Path::new(".")
            } else {
                folder
            };
            std::fs::canonicalize(folder).ok().map(|f| f.join(name))
        }
        _ => None,
    };
    resolved
        .or_else(|| std::path::absolute(path).ok())
        .unwrap_or_else(|| path.to_owned())
}
