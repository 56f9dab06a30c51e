//! The `syntax` gate: every output (or every file matching the gate's globs) in a supported
//! language parses.

use std::collections::BTreeSet;
use std::path::Path;

use super::document::listed_paths;
use super::files::{GATES_READ_INSIDE, clean, glob_files, outside_detail};
use super::{Finding, GateContext, GateInfo, count, more, name_list, resolve_outputs};
use crate::model::{Output, Phase};
use crate::verify::syntax::{self, Language, SyntaxError};

/// What helixflow says about the `syntax` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "These files do not parse:",
    how_to_fix: "fix each error at the file, line and column shown",
    outside_a_run: None,
};

/// Most syntax errors listed in one report.
const MAX_LISTED_SYNTAX_ERRORS: usize = 25;

/// What the gate checks, for the agent.
pub(super) fn describe(globs: &[String]) -> String {
    if globs.is_empty() {
        "the outputs parse".to_owned()
    } else {
        format!("files matching {} parse", globs.join(", "))
    }
}

/// Parses the outputs (or the files matching `globs`) in a supported language.
#[allow(
    clippy::too_many_lines,
    reason = "not yet cut into named steps; a known exception to remove"
)]
pub(super) async fn syntax_gate(ctx: &GateContext<'_>, globs: &[String]) -> Finding {
    let (found, missing) = if globs.is_empty() {
        // `from` documents are read: off the runtime's thread.
        let workspace = ctx.workspace.to_owned();
        let (phase, exclude) = (ctx.phase.clone(), ctx.exclude.to_vec());
        super::off_the_runtime(move || {
            (
                resolve_outputs(&workspace, &phase, &exclude),
                missing_outputs(&workspace, &phase),
            )
        })
        .await
    } else {
        match glob_files(ctx.workspace, ctx.exclude, globs) {
            Ok(found) => (found, Vec::new()),
            Err(problem) => return Finding::failed(problem),
        }
    };
    // An expected file that is not there was not checked; the `outputs` gate fails for it.
    let not_checked = (!missing.is_empty()).then(|| {
        let names: Vec<&str> = missing.iter().map(String::as_str).collect();
        format!(
            "not checked: {} {} missing",
            name_list(&names, 10),
            if names.len() == 1 { "is" } else { "are" }
        )
    });
    let nothing_found = found.is_empty();
    let mut outside = Vec::new();
    let targets: Vec<String> = found
        .into_iter()
        .filter(|p| Language::for_path(Path::new(p)).is_some())
        .filter(
            |p| match outside_detail(ctx.workspace, p, GATES_READ_INSIDE) {
                Some(problem) => {
                    outside.push(problem);
                    false
                }
                None => true,
            },
        )
        .collect();
    if !outside.is_empty() {
        return Finding::from_problems(outside);
    }
    if targets.is_empty() {
        return match not_checked {
            Some(note) => Finding::skipped(note),
            None if nothing_found && globs.is_empty() => {
                Finding::skipped("not checked: none of the phase's outputs exists")
            }
            None if nothing_found => {
                Finding::skipped("not checked: no file matches the gate's globs")
            }
            None => {
                let what = if globs.is_empty() {
                    "the phase's outputs"
                } else {
                    "the files matching the gate's globs"
                };
                Finding::passed_with(format!(
                    "0 files checked: none of {what} is in a supported language"
                ))
            }
        };
    }
    let workspace = ctx.workspace.to_owned();
    let parsed = tokio::task::spawn_blocking(move || parse_all(&workspace, targets)).await;
    let results = match parsed {
        Ok(results) => results,
        Err(error) => return Finding::failed(format!("the syntax check stopped: {error}")),
    };
    let total: usize = results.iter().map(|(_, errors)| errors.len()).sum();
    let mut details = Vec::new();
    for (path, errors) in &results {
        for error in errors {
            if details.len() == MAX_LISTED_SYNTAX_ERRORS {
                break;
            }
            details.push(error.render(path));
        }
    }
    if total > details.len() {
        let files = results.iter().filter(|(_, e)| !e.is_empty()).count();
        details.push(format!(
            "{} ({total} in all, in {})",
            more(total - details.len(), "syntax error"),
            count(files, "file", "files")
        ));
    }
    // A failure's details are its syntax errors only (`verify --json` lists them as such); a pass
    // says what it did not cover.
    match not_checked {
        Some(note) if details.is_empty() => Finding::passed_with(note),
        _ => Finding::from_problems(details),
    }
}

/// The phase's expected files in a language the syntax gate parses that do not exist: `file`
/// outputs, and paths listed by `from` documents that can be read.
fn missing_outputs(workspace: &Path, phase: &Phase) -> Vec<String> {
    let mut missing = BTreeSet::new();
    let mut note = |path: String| {
        if Language::for_path(Path::new(&path)).is_some() && !workspace.join(&path).is_file() {
            missing.insert(path);
        }
    };
    for output in &phase.outputs {
        match output {
            Output::File { path } => note(clean(path)),
            Output::From { doc, key } => {
                for path in listed_paths(workspace, doc, key).unwrap_or_default() {
                    note(path);
                }
            }
            Output::Glob { .. } => {}
        }
    }
    missing.into_iter().collect()
}

/// Parses every file on as many threads as there are cores; returns each path with its errors,
/// in path order.
fn parse_all(workspace: &Path, mut paths: Vec<String>) -> Vec<(String, Vec<SyntaxError>)> {
    paths.sort();
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(paths.len())
        .max(1);
    let chunk = paths.len().div_ceil(workers);
    let mut results: Vec<(String, Vec<SyntaxError>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|path| {
                            let errors = syntax::check_file(&workspace.join(path));
                            (path.clone(), errors.unwrap_or_default())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}
