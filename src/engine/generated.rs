//! The phases a planner writes (`generates`): its file linted as part of each attempt's
//! verification (an error fails the attempt, and the findings are its feedback), and, once the
//! planner passed, its phases compiled with the pipeline's agents, templates and `defaults`.

use std::path::Path;
use std::time::Instant;

use crate::event::{GateReport, GateStatus, ReportKind};
use crate::language::{FsLoader, GeneratedFile, compile_generated};
use crate::model::{Phase, Pipeline};

/// The name of the report on a planner's file.
pub(crate) const REPORT: &str = "phases";

/// The phases of `planner`'s file in `workspace`, compiled; `Err` holds each finding that stops
/// them, one line each (`plan/phases.kdl:3:5: HF101 …`, with its help).
pub(crate) fn phases(
    pipeline: &Pipeline,
    planner: &Phase,
    workspace: &Path,
) -> Result<Vec<Phase>, Vec<String>> {
    let Some(relative) = &planner.generates else {
        return Ok(Vec::new());
    };
    let path = workspace.join(relative);
    let text = crate::regular::read(&path)
        .map_err(|e| vec![format!("`{relative}` cannot be read: {e}")])?;
    let text =
        String::from_utf8(text).map_err(|_| vec![format!("`{relative}` is not UTF-8 text")])?;
    let source = std::fs::read_to_string(&pipeline.file).map_err(|e| {
        vec![format!(
            "the pipeline file {} cannot be read again: {e}",
            pipeline.file.display()
        )]
    })?;
    let compilation = compile_generated(
        &pipeline.file,
        &source,
        &FsLoader,
        GeneratedFile {
            path: &path,
            text: &text,
            planner: &planner.name.value,
        },
    );
    let errors: Vec<String> = compilation
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| {
            let file = compilation.sources.get(d.span.file);
            let (line, column) = file.line_col(d.span.offset);
            let mut detail = format!("{relative}:{line}:{column}: {} {}", d.code(), d.message);
            if !d.help.is_empty() {
                detail.push_str(&format!("\n  help: {}", d.help));
            }
            detail
        })
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(compilation
        .pipeline
        .map(|p| {
            std::sync::Arc::unwrap_or_clone(p.phases)
                .into_iter()
                .filter(|phase| phase.made_by.is_some())
                .collect()
        })
        .unwrap_or_default())
}

/// The planner's file checked as a report of the attempt: failed with every finding, so that they
/// are the feedback of the next attempt.
pub(crate) fn report(pipeline: &Pipeline, planner: &Phase, workspace: &Path) -> GateReport {
    let started = Instant::now();
    let (status, details) = match phases(pipeline, planner, workspace) {
        Ok(made) => (
            GateStatus::Passed,
            vec![format!("{} phases, ready to join the run", made.len())],
        ),
        Err(errors) => (GateStatus::Failed, errors),
    };
    GateReport {
        name: REPORT.to_owned(),
        kind: ReportKind::Phases,
        status,
        duration_ms: super::context::millis(started.elapsed()),
        details,
    }
}
