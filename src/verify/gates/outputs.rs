//! The implicit `outputs` gate: every expected file exists, at exactly its path.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::document::{Listed, listed_paths};
use super::files::{all_files, clean, glob_files, leads_outside, outside_detail};
use super::{GateContext, GateInfo, count, name_list};
use crate::glob::compile_glob;
use crate::model::{Output, Phase};

/// What helixflow says about the `outputs` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "These expected files are missing; create them at exactly these paths:",
    how_to_fix: "create every expected file at exactly the path shown (a near miss means the file is in the wrong folder)",
    outside_a_run: None,
};

/// Most near misses named for one missing file.
const MAX_NEAR_MISSES: usize = 3;

/// The paths the phase's outputs resolve to now (files, glob matches, paths listed by `from`
/// documents), relative to the workspace — used by `syntax` without globs, by receipts and by the
/// verifier later. Only paths that exist are returned, sorted and without duplicates; outputs that
/// cannot be resolved (a missing `from` document, a bad glob) contribute nothing, and neither do
/// files that lead outside the workspace (the `outputs` gate fails for them).
pub fn resolve_outputs(workspace: &Path, phase: &Phase, exclude: &[PathBuf]) -> Vec<String> {
    existing_outputs(
        workspace,
        phase,
        exclude,
        &crate::workspace::Stats::default(),
    )
    .into_iter()
    .filter(|path| leads_outside(workspace, path).is_none())
    .collect()
}

/// The phase's outputs that exist now, symlinks leading out of the workspace included: what the
/// up-to-date check stamps (a stamp is a hash, nothing of the file is shown to anyone, and a
/// link that changes changes the stamp), without looking along each path for a link.
pub(crate) fn existing_outputs(
    workspace: &Path,
    phase: &Phase,
    exclude: &[PathBuf],
    stats: &crate::workspace::Stats,
) -> Vec<String> {
    let mut paths = BTreeSet::new();
    for output in &phase.outputs {
        match output {
            Output::File { path } => {
                let path = clean(path);
                if stats.is_file(&workspace.join(&path)) {
                    paths.insert(path);
                }
            }
            Output::Glob { pattern, .. } => {
                if let Ok(found) = glob_files(workspace, exclude, std::slice::from_ref(pattern)) {
                    paths.extend(found);
                }
            }
            Output::From { doc, key } => {
                if let Ok(listed) = listed_paths(workspace, doc, key) {
                    paths.extend(listed.into_iter().filter(|p| workspace.join(p).is_file()));
                }
            }
        }
    }
    paths.into_iter().collect()
}

/// Why an output that leads outside the workspace does not count.
const OUTPUTS_INSIDE: &str = "an output must be a file in the workspace";

/// The `(document, key)` of each `from` output, which the gate reads first (see [`Listed`]).
pub(super) fn from_documents(phase: &Phase) -> Vec<(String, String)> {
    phase
        .outputs
        .iter()
        .filter_map(|output| match output {
            Output::From { doc, key } => Some((doc.clone(), key.clone())),
            _ => None,
        })
        .collect()
}

/// A detail for each expected output that is missing, with its near misses; `listed` holds what
/// the `from` documents list ([`from_documents`]).
pub(super) fn outputs_gate(ctx: &GateContext<'_>, listed: &Listed) -> Vec<String> {
    let mut problems = Vec::new();
    // Every file on disk, ignored or not, listed once and only when an output is missing: the
    // near misses come from it (agents write into ignored folders like `build/` or `output/`).
    let everywhere = std::cell::OnceCell::new();
    let all = || -> &[String] { everywhere.get_or_init(|| candidates(ctx)) };
    for output in &ctx.phase.outputs {
        match output {
            Output::File { path } => {
                let path = clean(path);
                let full = ctx.workspace.join(&path);
                if full.is_dir() {
                    problems.push(format!("`{path}` is a folder; a file was expected"));
                } else if !full.is_file() {
                    problems.push(missing(&path, "", all()));
                } else if let Some(problem) = outside_detail(ctx.workspace, &path, OUTPUTS_INSIDE) {
                    problems.push(problem);
                }
            }
            Output::Glob { pattern, min } => {
                match glob_files(ctx.workspace, ctx.exclude, std::slice::from_ref(pattern)) {
                    Err(problem) => problems.push(problem),
                    Ok(mut found) => {
                        found.retain(|path| {
                            let problem = outside_detail(ctx.workspace, path, OUTPUTS_INSIDE);
                            problems.extend(problem.clone());
                            problem.is_none()
                        });
                        let found: Vec<&str> = found.iter().map(String::as_str).collect();
                        let min = usize::try_from(*min).unwrap_or(usize::MAX);
                        if found.len() < min {
                            problems.push(too_few_matches(all(), pattern, &found, min));
                        }
                    }
                }
            }
            Output::From { doc, key } => {
                problems.extend(missing_listed(ctx, doc, key, listed, OUTPUTS_INSIDE, all));
            }
        }
    }
    problems
}

/// Every file on disk that may be a near miss: not a file another phase declares as its own (its
/// `outputs` or `scope`), which the agent must not be invited to move.
fn candidates(ctx: &GateContext<'_>) -> Vec<String> {
    let others: Vec<_> = ctx
        .phases
        .iter()
        .filter(|p| p.name.value != ctx.phase.name.value)
        .map(super::scope::claims)
        .collect();
    let mut files = all_files(ctx);
    files.retain(|f| !others.iter().any(|claim| claim.is_match(f)));
    files
}

/// A detail for each path listed under `key` in `doc` that does not exist, or leads outside the
/// workspace (`why` says why that does not count), or why the list cannot be had.
pub(super) fn missing_listed<'f>(
    ctx: &GateContext<'_>,
    doc: &str,
    key: &str,
    listed: &Listed,
    why: &str,
    all: impl Fn() -> &'f [String],
) -> Vec<String> {
    let wanted = (doc.to_owned(), key.to_owned());
    let paths = match listed.get(&wanted) {
        Some(paths) => paths.clone(),
        None => listed_paths(ctx.workspace, doc, key),
    };
    match paths {
        Ok(paths) if paths.is_empty() => vec![format!(
            "`{doc}` lists no paths under `{key}`: an empty list of expected files never passes"
        )],
        Ok(paths) => paths
            .iter()
            .filter_map(|p| {
                if ctx.workspace.join(p).exists() {
                    outside_detail(ctx.workspace, p, why)
                } else {
                    Some(missing(
                        p,
                        &format!(" (listed under `{key}` in `{doc}`)"),
                        all(),
                    ))
                }
            })
            .collect(),
        Err(problem) => vec![problem],
    }
}

/// "missing `a/b.py`{note}", with same-named files found elsewhere in the workspace (`all`).
fn missing(path: &str, note: &str, all: &[String]) -> String {
    let mut detail = format!("missing `{path}`{note}");
    let name = path.rsplit('/').next().unwrap_or(path);
    let files = || all.iter().map(String::as_str);
    let same_name: Vec<&str> = files()
        .filter(|f| *f != path && f.rsplit('/').next() == Some(name))
        .collect();
    let (found, hint) = if same_name.is_empty() {
        let other_case: Vec<&str> = files()
            .filter(|f| {
                let other = f.rsplit('/').next().unwrap_or(f);
                other != name && other.eq_ignore_ascii_case(name)
            })
            .collect();
        (other_case, "wrong letter case?")
    } else {
        (same_name, "written to the wrong folder?")
    };
    if !found.is_empty() {
        let _ = write!(
            detail,
            "; found {} — {hint}",
            name_list(&found, MAX_NEAR_MISSES)
        );
    }
    detail
}

/// The detail for a glob output with fewer than `min` matches, naming files elsewhere whose
/// names match the glob's last part.
fn too_few_matches(all: &[String], pattern: &str, found: &[&str], min: usize) -> String {
    let mut detail = if found.is_empty() {
        format!("no file matches `{pattern}`; at least {min} expected")
    } else {
        format!(
            "`{pattern}` matches {} ({}); at least {min} expected",
            count(found.len(), "file", "files"),
            name_list(found, 5)
        )
    };
    let last = pattern.rsplit('/').next().unwrap_or(pattern);
    if last != pattern
        && !last.contains("**")
        && let Ok(glob) = compile_glob(last)
    {
        let name_matcher = glob.compile_matcher();
        let elsewhere: Vec<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|f| !found.contains(f))
            .filter(|f| name_matcher.is_match(f.rsplit('/').next().unwrap_or(f)))
            .collect();
        if !elsewhere.is_empty() {
            let _ = write!(
                detail,
                "; found {} — written to the wrong folder?",
                name_list(&elsewhere, MAX_NEAR_MISSES)
            );
        }
    }
    detail
}
