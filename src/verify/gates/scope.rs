//! The implicit `scope` gate: every change is inside the phase's scope, or is the work of a phase
//! that ran alongside it.

use crate::text::code_name;
use std::collections::BTreeMap;

use globset::{GlobSet, GlobSetBuilder};

use super::files::{clean, glob_set};
use super::{Finding, GateContext, GateInfo, changed, count, name_list};
use crate::glob::compile_glob;
use crate::model::{Output, Phase};

/// What helixflow says about the `scope` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "These files were changed outside the phase's scope; undo those changes and keep your \
             work inside the scope:",
    how_to_fix: "undo the changes outside the phase's scope, or move them into it",
    outside_a_run: Some("judged only inside a run, against the attempt's starting point"),
};

/// A detail for each change outside the scope that is not another phase's work.
pub(super) fn scope_gate(ctx: &GateContext<'_>) -> Finding {
    let scope = &ctx.phase.scope;
    let set = match glob_set(scope) {
        Ok(set) => set,
        Err(problem) => return Finding::failed(problem),
    };
    let listed = scope
        .iter()
        .map(|g| format!("`{g}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let others = LeftToOthers::of(ctx);
    let mut finding = Finding::from_problems(
        changed(ctx.changes)
            .filter(|(path, _)| !set.is_match(path) && !others.contains(path))
            .map(|(path, how)| {
                format!(
                    "{} was {how}, but the phase's scope is {listed}",
                    code_name(path)
                )
            })
            .collect(),
    );
    finding.details.extend(others.notes());
    finding
}

/// The changes of an attempt that are another phase's: outside this phase's own `scope` and
/// `outputs`, and claimed by the `scope` or `outputs` of a phase that ran alongside it.
pub(super) struct LeftToOthers<'c> {
    /// Each such path with the phase it is left to (the first in pipeline order that claims it).
    paths: BTreeMap<&'c str, &'c str>,
}

impl<'c> LeftToOthers<'c> {
    pub(super) fn of(ctx: &GateContext<'c>) -> Self {
        let mut paths = BTreeMap::new();
        if ctx.alongside.is_empty() || ctx.changes.is_empty() {
            return Self { paths };
        }
        let own = claims(ctx.phase);
        let others: Vec<(&str, GlobSet)> = ctx
            .alongside
            .iter()
            .map(|phase| (phase.name.value.as_str(), claims(phase)))
            .collect();
        // A file named as another phase's expected output, in another folder, is that phase's
        // near miss (its agent wrote to the wrong folder): that phase's own `outputs` and
        // `scope` tell it so, and this one is not blamed for it.
        let near_misses: Vec<(&str, String, String)> = ctx
            .alongside
            .iter()
            .flat_map(|phase| {
                phase.outputs.iter().filter_map(move |output| match output {
                    Output::File { path } => {
                        let path = clean(path);
                        let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
                        Some((phase.name.value.as_str(), name, path))
                    }
                    _ => None,
                })
            })
            .collect();
        for (path, _) in changed(ctx.changes) {
            if own.is_match(path) {
                continue;
            }
            if let Some((name, _)) = others.iter().find(|(_, claim)| claim.is_match(path)) {
                paths.insert(path, *name);
                continue;
            }
            let file_name = path.rsplit('/').next().unwrap_or(path);
            // Never when this phase expects a file of that name too: the stray may be its own.
            let own_name = ctx.phase.outputs.iter().any(|output| {
                matches!(output, Output::File { path } if clean(path).rsplit('/').next() == Some(file_name))
            });
            if let Some((name, _, _)) = near_misses
                .iter()
                .find(|(_, wanted, full)| !own_name && *wanted == file_name && full != path)
            {
                paths.insert(path, *name);
            }
        }
        Self { paths }
    }

    pub(super) fn contains(&self, path: &str) -> bool {
        self.paths.contains_key(path)
    }

    /// Those of the paths that `keep` keeps.
    pub(super) fn only(&self, keep: impl Fn(&str) -> bool) -> Self {
        Self {
            paths: self
                .paths
                .iter()
                .filter(|(path, _)| keep(path))
                .map(|(path, phase)| (*path, *phase))
                .collect(),
        }
    }

    /// "1 change left to phase "b", which ran at the same time: `b/y`", one line per phase.
    pub(super) fn notes(&self) -> Vec<String> {
        let mut by_phase: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (path, phase) in &self.paths {
            by_phase.entry(phase).or_default().push(path);
        }
        by_phase
            .into_iter()
            .map(|(phase, paths)| {
                format!(
                    "{} left to phase \"{phase}\", which ran at the same time: {}",
                    count(paths.len(), "change", "changes"),
                    name_list(&paths, 10)
                )
            })
            .collect()
    }
}

/// Whether a changed path is the work of a phase running alongside `phase`: outside `phase`'s
/// own `scope` and `outputs`, and claimed by one of theirs.
pub(crate) fn claimed_by_others(
    phase: &Phase,
    alongside: &[&Phase],
) -> impl Fn(&str) -> bool + Send + Sync + 'static {
    let own = claims(phase);
    let others: Vec<GlobSet> = alongside.iter().map(|p| claims(p)).collect();
    move |path: &str| !own.is_match(path) && others.iter().any(|claim| claim.is_match(path))
}

/// The files a phase declares as its own: its `scope` globs and its `file` and `glob` outputs.
/// Globs that do not compile claim nothing (the phase's own gates report them).
pub(super) fn claims(phase: &Phase) -> GlobSet {
    let outputs = phase.outputs.iter().filter_map(|output| match output {
        Output::File { path } => Some(globset::escape(&clean(path))),
        Output::Glob { pattern, .. } => Some(clean(pattern)),
        Output::From { .. } => None,
    });
    let mut builder = GlobSetBuilder::new();
    for pattern in phase.scope.iter().map(|glob| clean(glob)).chain(outputs) {
        if let Ok(glob) = compile_glob(&pattern) {
            builder.add(glob);
        }
    }
    builder.build().unwrap_or_default()
}
