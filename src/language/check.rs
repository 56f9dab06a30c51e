//! Checks across the whole pipeline: names, references, cycles, and the warnings.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::decode::Body;
use super::kdl::limits::thousands;
use super::overlap::{self, Glob, Stopped, samples};
use super::template::TemplateDef;
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, did_you_mean, rules};
use crate::glob::compile_glob;
use crate::graph::PhaseGraph;
use crate::model::{GateKind, Isolation, Output, Pipeline, VerifyMode, Worker};

/// File extensions the `syntax` gate can parse.
fn syntax_extensions() -> impl Iterator<Item = &'static str> {
    crate::model::EXTENSIONS.iter().map(|&(e, _)| e)
}

/// Runs every pipeline-wide check.
pub(crate) fn pipeline(
    pipeline: &Pipeline,
    templates: &BTreeMap<String, TemplateDef>,
    defaults: &Body,
    main_file: FileId,
    diagnostics: &mut Diagnostics,
) {
    duplicate_phases(pipeline, diagnostics);
    references(pipeline, defaults, diagnostics);
    let graph = PhaseGraph::new(pipeline);
    cycles(pipeline, &graph, diagnostics);
    for phase in pipeline.phases.iter() {
        for gate in &phase.gates {
            if let GateKind::Syntax { globs } = &gate.kind
                && !syntax_has_language(globs, &phase.outputs)
            {
                diagnostics.push(
                    Diagnostic::new(
                        &rules::SYNTAX_WITHOUT_LANGUAGE,
                        gate.span,
                        format!(
                            "the `syntax` gate of phase \"{}\" has no file in a supported language",
                            phase.name.value
                        ),
                    )
                    .label("checks nothing")
                    .help(format!(
                        "supported extensions: {}",
                        syntax_extensions().collect::<Vec<_>>().join(", ")
                    )),
                );
            }
        }
    }
    overlapping_scopes(pipeline, &graph, diagnostics);
    protect_overlaps_parallel_work(pipeline, &graph, diagnostics);
    protect_covers_own_work(pipeline, diagnostics);
    worktree_settings_without_worktree(pipeline, diagnostics);
    shared_folder_in_own_work(pipeline, diagnostics);
    always_run_upstream(pipeline, diagnostics);
    budgets_without_usage(pipeline, diagnostics);
    unused(pipeline, templates, defaults, main_file, diagnostics);
}

/// `isolation "worktree"` in a workspace outside a git work tree: reported once per place it is
/// written (a template or `defaults` sets it for many phases).
pub(crate) fn worktrees_outside_git(
    pipeline: &Pipeline,
    loader: &dyn crate::language::loader::Loader,
    diagnostics: &mut Diagnostics,
) {
    let spans: Vec<(crate::diagnostics::Span, &str)> = pipeline
        .phases
        .iter()
        .filter(|phase| phase.isolation == Isolation::Worktree)
        .filter_map(|phase| Some((phase.spans.isolation?, phase.name.value.as_str())))
        .collect();
    if spans.is_empty() || loader.in_git_work_tree(&pipeline.workspace) {
        return;
    }
    let mut seen = HashSet::new();
    for (span, phase) in spans {
        if !seen.insert(span) {
            continue;
        }
        diagnostics.push(
            Diagnostic::new(
                &rules::WORKTREE_OUTSIDE_GIT,
                span,
                format!(
                    "phase \"{phase}\" works in a git worktree, but the workspace is not in a git repository"
                ),
            )
            .label("needs a git repository"),
        );
    }
}

/// A `max-cost` (the run's or the phase's) over a phase whose agent reads no `usage`: warned once
/// per phase, at the phase's name.
fn budgets_without_usage(pipeline: &Pipeline, diagnostics: &mut Diagnostics) {
    for phase in pipeline.phases.iter() {
        let Worker::Agent(agent) = &phase.worker else {
            continue;
        };
        let budget = match (phase.max_cost, pipeline.max_cost) {
            (Some(_), _) => "its `max-cost`",
            (None, Some(_)) => "the run's `max-cost`",
            (None, None) => continue,
        };
        if pipeline
            .agents
            .get(&agent.value)
            .is_some_and(|a| a.usage.is_none() && a.cost_usd.is_none())
        {
            diagnostics.push(
                Diagnostic::new(
                    &rules::BUDGET_WITHOUT_USAGE,
                    phase.name.span,
                    format!(
                        "phase \"{}\" is under {budget}, but agent \"{}\" has neither `usage` nor `cost`: what its attempts cost is unknown",
                        phase.name.value, agent.value
                    ),
                )
                .label("cost unknown"),
            );
        }
    }
}

/// A dependency on an `always-run` phase: the dependent is never up to date.
fn always_run_upstream(pipeline: &Pipeline, diagnostics: &mut Diagnostics) {
    for phase in pipeline.phases.iter() {
        for dependency in &phase.depends_on {
            if pipeline
                .phase(&dependency.value)
                .is_some_and(|upstream| upstream.always_run)
            {
                diagnostics.push(
                    Diagnostic::new(
                        &rules::ALWAYS_RUN_UPSTREAM,
                        dependency.span,
                        format!(
                            "\"{}\" has `always-run #true`, so phase \"{}\" runs in every run too",
                            dependency.value, phase.name.value
                        ),
                    )
                    .label("re-runs with it every time"),
                );
            }
        }
    }
}

fn duplicate_phases(pipeline: &Pipeline, diagnostics: &mut Diagnostics) {
    let mut seen = HashMap::new();
    for phase in pipeline.phases.iter() {
        if let Some(first) = seen.insert(phase.name.value.as_str(), phase.name.span) {
            diagnostics.push(
                Diagnostic::new(
                    &rules::DUPLICATE_NAME,
                    phase.name.span,
                    format!("phase \"{}\" is defined twice", phase.name.value),
                )
                .label("second definition")
                .note(first, "first defined here"),
            );
            // Keep reporting later duplicates against the first definition.
            seen.insert(phase.name.value.as_str(), first);
        }
    }
}

fn references(pipeline: &Pipeline, defaults: &Body, diagnostics: &mut Diagnostics) {
    let agent_names = || pipeline.agents.keys().map(String::as_str);
    let phase_names: HashSet<&str> = pipeline
        .phases
        .iter()
        .map(|p| p.name.value.as_str())
        .collect();
    let unknown_agent = |name: &crate::model::Spanned<String>, role: &str| {
        let mut d = Diagnostic::new(
            &rules::UNKNOWN_AGENT,
            name.span,
            format!("unknown {role}agent \"{}\"", name.value),
        )
        .label("not defined or imported");
        if let Some(s) = did_you_mean(&name.value, agent_names()) {
            d = d.help(format!("did you mean \"{s}\"?")).fix(
                format!("use \"{s}\""),
                name.span,
                format!("\"{s}\""),
            );
        }
        d
    };
    for name in defaults.agent.iter().chain(&defaults.verifier) {
        if !pipeline.agents.contains_key(&name.value) {
            diagnostics.push(unknown_agent(name, "default "));
        }
    }
    // A phase whose agent or verifier comes from `defaults` was reported once, above.
    let from_defaults = |name: &crate::model::Spanned<String>| {
        defaults
            .agent
            .iter()
            .chain(&defaults.verifier)
            .any(|d| d.span == name.span)
    };
    for phase in pipeline.phases.iter() {
        if let Worker::Agent(agent) = &phase.worker
            && !pipeline.agents.contains_key(&agent.value)
            && !from_defaults(agent)
        {
            diagnostics.push(unknown_agent(agent, ""));
        }
        match &phase.verifier {
            Some(verifier)
                if !pipeline.agents.contains_key(&verifier.value) && !from_defaults(verifier) =>
            {
                diagnostics.push(unknown_agent(verifier, "verifier "));
            }
            None if phase.verify.contains(&VerifyMode::SubAgent) => diagnostics.push(
                Diagnostic::new(
                    &rules::MISSING_VERIFIER,
                    phase.spans.verify.unwrap_or(phase.name.span),
                    format!(
                        "phase \"{}\" uses `sub-agent` verification without a `verifier`",
                        phase.name.value
                    ),
                )
                .label("needs a verifier"),
            ),
            _ => {}
        }
        tier_agents(pipeline, phase, &unknown_agent, diagnostics);
        for dependency in &phase.depends_on {
            if !phase_names.contains(dependency.value.as_str()) {
                let mut d = Diagnostic::new(
                    &rules::UNKNOWN_PHASE,
                    dependency.span,
                    format!("unknown phase \"{}\"", dependency.value),
                )
                .label("no phase has this name");
                if let Some(s) = did_you_mean(&dependency.value, phase_names.iter().copied()) {
                    d = d.help(format!("did you mean \"{s}\"?")).fix(
                        format!("use \"{s}\""),
                        dependency.span,
                        format!("\"{s}\""),
                    );
                }
                diagnostics.push(d);
            }
        }
    }
}

/// The agents and verifiers a phase's `attempt` blocks name that are not defined. A block of
/// `defaults` is in every phase: its finding is one, as lint drops repeats.
fn tier_agents(
    pipeline: &Pipeline,
    phase: &crate::model::Phase,
    unknown_agent: &dyn Fn(&crate::model::Spanned<String>, &str) -> Diagnostic,
    diagnostics: &mut Diagnostics,
) {
    for block in &phase.attempts {
        let named = block.agent.iter().map(|a| (a, ""));
        for (name, role) in named.chain(block.verifier.iter().map(|v| (v, "verifier "))) {
            if !pipeline.agents.contains_key(&name.value) {
                diagnostics.push(unknown_agent(name, role));
            }
        }
    }
}

fn cycles(pipeline: &Pipeline, graph: &PhaseGraph, diagnostics: &mut Diagnostics) {
    for cycle in graph.cycles() {
        let Some(first) = cycle.first() else { continue };
        let name = |i: usize| pipeline.phases[i].name.value.as_str();
        let path: Vec<&str> = cycle
            .iter()
            .map(|e| name(e.from))
            .chain(std::iter::once(name(first.from)))
            .collect();
        let edge_span =
            |e: &crate::graph::CycleEdge| pipeline.phases[e.to].depends_on[e.dependency].span;
        let mut d = Diagnostic::new(
            &rules::DEPENDENCY_CYCLE,
            edge_span(first),
            format!("dependency cycle: {}", path.join(" → ")),
        )
        .label(format!(
            "\"{}\" depends on \"{}\"",
            name(first.to),
            name(first.from)
        ));
        for edge in &cycle[1..] {
            d = d.note(
                edge_span(edge),
                format!("\"{}\" depends on \"{}\"", name(edge.to), name(edge.from)),
            );
        }
        diagnostics.push(d);
    }
}

/// Whether a `syntax` gate has anything to parse: a glob or output with a supported extension, or
/// one whose extension is not fixed (e.g. `src/**`).
fn syntax_has_language(globs: &[String], outputs: &[Output]) -> bool {
    let patterns: Vec<&str> = if globs.is_empty() {
        outputs
            .iter()
            .filter_map(|o| match o {
                Output::File { path } => Some(path.as_str()),
                Output::Glob { pattern, .. } => Some(pattern.as_str()),
                // The listed paths are known only at run time.
                Output::From { .. } => None,
            })
            .collect()
    } else {
        globs.iter().map(String::as_str).collect()
    };
    if globs.is_empty() && outputs.iter().any(|o| matches!(o, Output::From { .. })) {
        return true;
    }
    patterns.iter().any(|pattern| {
        // An item's value is known only at run time: `{{ item.path }}` may be any file.
        let uses_item = super::item::uses_item(pattern);
        let neutral = super::item::neutral(pattern);
        let pattern: &str = &neutral;
        let last = pattern.rsplit('/').next().unwrap_or(pattern);
        if uses_item && !last.contains('.') {
            return true;
        }
        match last.rsplit_once('.') {
            Some((_, ext)) if !ext.contains(['*', '?', '[', '{']) => {
                syntax_extensions().any(|s| s == ext)
            }
            Some((_, ext)) => syntax_extensions().any(|s| ext.contains(s)) || ext.contains('*'),
            None => last.contains('*') || last.contains('{'),
        }
    })
}

/// Warns about two phases that may run at once (neither depends on the other, directly or not)
/// and have overlapping scopes: once per pair of phases, at the later one's glob. Candidate pairs
/// are found through the globs' literal folders, so unrelated scopes are never compared.
fn overlapping_scopes(pipeline: &Pipeline, graph: &PhaseGraph, diagnostics: &mut Diagnostics) {
    let globs: Vec<Glob<'_>> = pipeline
        .phases
        .iter()
        .enumerate()
        .flat_map(|(phase, p)| {
            p.scope
                .iter()
                .enumerate()
                .map(move |(index, pattern)| Glob::new(phase, index, pattern))
        })
        .collect();
    let mut reported = HashSet::new();
    let stopped =
        overlap::meeting_pairs(graph, &globs, &globs, true, &mut |a, b| {
            let (first, second) = if a.phase < b.phase { (a, b) } else { (b, a) };
            if !reported.insert((first.phase, second.phase)) {
                return;
            }
            let (p1, p2) = (
                &pipeline.phases[first.phase],
                &pipeline.phases[second.phase],
            );
            diagnostics.push(
            Diagnostic::new(
                &rules::OVERLAPPING_SCOPE,
                p2.spans.scope[second.index],
                format!(
                    "phases \"{}\" and \"{}\" may run at the same time and both may change \"{}\"",
                    p2.name.value, p1.name.value, second.pattern
                ),
            )
            .label("overlaps")
            .note(p1.spans.scope[first.index], format!("scope of \"{}\"", p1.name.value)),
        );
        });
    if let (Err(stopped), Some(first)) = (stopped, globs.first()) {
        diagnostics.push(not_compared(
            &rules::OVERLAPPING_SCOPE,
            pipeline.phases[first.phase].spans.scope[first.index],
            "scopes",
            stopped,
        ));
    }
}

/// The finding of a check that compares globs of phases pairwise and stopped at its bound.
fn not_compared(
    rule: &'static crate::diagnostics::Rule,
    span: crate::diagnostics::Span,
    what: &str,
    stopped: Stopped,
) -> Diagnostic {
    let message = match stopped {
        Stopped::TooManyPhases(n) => format!(
            "{} phases have {what} in folders that meet, more than the {} compared with each \
             other: this check was not made",
            thousands(n),
            thousands(overlap::MAX_PHASES)
        ),
        Stopped::TooManyPairs => format!(
            "more than {} pairs of {what} of phases were to be compared (a pair of long ones \
             counting for more): this check stopped after the first",
            thousands(overlap::MAX_PAIRS)
        ),
    };
    Diagnostic::new(rule, span, message)
        .label("not all compared")
        .help("Give each phase folders of its own (`src/parser/**` rather than `**/*.py`), or make phases that share folders depend on each other.")
}

/// A phase's `protect` glob that covers another phase's `scope` or `outputs`, where the two may
/// run at the same time: that phase's changes there are its own, which `protect` does not judge.
/// One warning per pair of phases, at the first such glob.
fn protect_overlaps_parallel_work(
    pipeline: &Pipeline,
    graph: &PhaseGraph,
    diagnostics: &mut Diagnostics,
) {
    let protected: Vec<Glob<'_>> = pipeline
        .phases
        .iter()
        .enumerate()
        .flat_map(|(phase, p)| {
            p.protect
                .iter()
                .enumerate()
                .map(move |(index, pattern)| Glob::new(phase, index, pattern))
        })
        .collect();
    if protected.is_empty() {
        return;
    }
    let claims: Vec<Glob<'_>> = pipeline
        .phases
        .iter()
        .enumerate()
        .flat_map(|(phase, p)| {
            let outputs = p.outputs.iter().filter_map(|output| match output {
                Output::File { path } => Some(path.as_str()),
                Output::Glob { pattern, .. } => Some(pattern.as_str()),
                Output::From { .. } => None,
            });
            p.scope
                .iter()
                .map(String::as_str)
                .chain(outputs)
                .enumerate()
                .map(move |(index, pattern)| Glob::new(phase, index, pattern))
        })
        .collect();
    // The first protect glob of each protecting phase that covers another phase's claims.
    let mut hits: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let stopped = overlap::meeting_pairs(graph, &protected, &claims, false, &mut |p, claim| {
        let first = hits.entry((p.phase, claim.phase)).or_insert(p.index);
        *first = (*first).min(p.index);
    });
    for ((p, other), index) in hits {
        let phase = &pipeline.phases[p];
        let (Some(&span), Some(pattern)) =
            (phase.spans.protect.get(index), phase.protect.get(index))
        else {
            continue;
        };
        let other = &pipeline.phases[other];
        diagnostics.push(
            Diagnostic::new(
                &rules::PROTECT_OVERLAPS_PARALLEL_WORK,
                span,
                format!(
                    "phase \"{}\" protects \"{pattern}\", where phase \"{}\" may change files at the same time (its scope or outputs); those changes are \"{}\"'s, not judged by this `protect`",
                    phase.name.value, other.name.value, other.name.value
                ),
            )
            .label("covers another phase's work"),
        );
    }
    if let Err(stopped) = stopped
        && let Some(&span) = pipeline.phases[protected[0].phase].spans.protect.first()
    {
        diagnostics.push(not_compared(
            &rules::PROTECT_OVERLAPS_PARALLEL_WORK,
            span,
            "protected globs and claims",
            stopped,
        ));
    }
}

/// The first of `patterns` (globs of `phase`, made matchers by `glob`) that `covers` an example
/// path of one of the phase's own outputs or scope globs: its index, itself, what it covers
/// (`output` or `scope`) and that claim.
fn first_covering<'p>(
    phase: &'p crate::model::Phase,
    patterns: &'p [String],
    glob: impl Fn(&str) -> Option<globset::Glob>,
    covers: impl Fn(&globset::GlobMatcher, &str) -> bool,
) -> Option<(usize, &'p String, &'static str, String)> {
    let own: Vec<(&'static str, String)> = phase
        .outputs
        .iter()
        .filter_map(|output| match output {
            Output::File { path } => Some(("output", path.clone())),
            Output::Glob { pattern, .. } => Some(("output", pattern.clone())),
            Output::From { .. } => None,
        })
        .chain(phase.scope.iter().map(|glob| ("scope", glob.clone())))
        .collect();
    patterns.iter().enumerate().find_map(|(index, pattern)| {
        let matcher = glob(pattern)?.compile_matcher();
        own.iter()
            .find(|(_, claim)| samples(claim).iter().any(|s| covers(&matcher, s)))
            .map(|(what, claim)| (index, pattern, *what, claim.clone()))
    })
}

/// A phase's `protect` glob that covers one of its own outputs or part of its own scope: the
/// first such glob per phase.
fn protect_covers_own_work(pipeline: &Pipeline, diagnostics: &mut Diagnostics) {
    for phase in pipeline.phases.iter().filter(|p| !p.protect.is_empty()) {
        let hit = first_covering(
            phase,
            &phase.protect,
            |pattern| compile_glob(pattern).ok(),
            |glob, sample| glob.is_match(sample),
        );
        let Some((index, pattern, what, claim)) = hit else {
            continue;
        };
        let Some(&span) = phase.spans.protect.get(index) else {
            continue;
        };
        diagnostics.push(
            Diagnostic::new(
                &rules::PROTECT_COVERS_OWN_WORK,
                span,
                format!(
                    "phase \"{}\" protects \"{pattern}\", which covers its own {what} \"{claim}\"",
                    phase.name.value
                ),
            )
            .label("covers the phase's own work"),
        );
    }
}

/// `worktree-include` or `worktree-share` where none of the phases it applies to works in a
/// worktree: reported once per place it is written (in `defaults` or a template it applies to
/// many phases, and does something when one of them is isolated).
fn worktree_settings_without_worktree(pipeline: &Pipeline, diagnostics: &mut Diagnostics) {
    let mut places: Vec<(crate::diagnostics::Span, &str, &str, bool)> = Vec::new();
    for phase in pipeline.phases.iter() {
        let isolated = phase.isolation == Isolation::Worktree;
        for (spans, node) in [
            (&phase.spans.worktree_include, "worktree-include"),
            (&phase.spans.worktree_share, "worktree-share"),
        ] {
            let Some(&span) = spans.first() else { continue };
            match places.iter_mut().find(|(s, ..)| *s == span) {
                Some(place) => place.3 |= isolated,
                None => places.push((span, node, phase.name.value.as_str(), isolated)),
            }
        }
    }
    for (span, node, phase, _) in places.into_iter().filter(|place| !place.3) {
        diagnostics.push(
            Diagnostic::new(
                &rules::WORKTREE_SETTING_WITHOUT_WORKTREE,
                span,
                format!(
                    "`{node}` does nothing for phase \"{phase}\": it works in the workspace, not in a git worktree"
                ),
            )
            .label("no worktree to bring this to"),
        );
    }
}

/// A phase's `worktree-share` glob that covers one of its own outputs or part of its own scope:
/// the first such glob per phase. A shared folder is read only, and a folder matched by the glob
/// holds everything below it.
fn shared_folder_in_own_work(pipeline: &Pipeline, diagnostics: &mut Diagnostics) {
    for phase in pipeline
        .phases
        .iter()
        .filter(|p| !p.worktree_share.is_empty() && p.isolation == Isolation::Worktree)
    {
        let inside = |glob: &globset::GlobMatcher, path: &str| {
            let mut folder = path.trim_end_matches('/');
            while let Some((parent, _)) = folder.rsplit_once('/') {
                if glob.is_match(parent) {
                    return true;
                }
                folder = parent;
            }
            false
        };
        let hit = first_covering(
            phase,
            &phase.worktree_share,
            |pattern| compile_glob(pattern.trim_end_matches('/')).ok(),
            inside,
        );
        let Some((index, pattern, what, claim)) = hit else {
            continue;
        };
        let Some(&span) = phase.spans.worktree_share.get(index) else {
            continue;
        };
        diagnostics.push(
            Diagnostic::new(
                &rules::SHARED_FOLDER_IN_OWN_WORK,
                span,
                format!(
                    "phase \"{}\" shares \"{pattern}\" read only, which holds its own {what} \"{claim}\"",
                    phase.name.value
                ),
            )
            .label("read only for the phase's attempts"),
        );
    }
}

fn unused(
    pipeline: &Pipeline,
    templates: &BTreeMap<String, TemplateDef>,
    defaults: &Body,
    main_file: FileId,
    diagnostics: &mut Diagnostics,
) {
    let mut used: HashSet<&str> = HashSet::new();
    for phase in pipeline.phases.iter() {
        if let Worker::Agent(agent) = &phase.worker {
            used.insert(&agent.value);
        }
        if let Some(verifier) = &phase.verifier {
            used.insert(&verifier.value);
        }
        for block in &phase.attempts {
            used.extend(
                block
                    .agent
                    .iter()
                    .chain(&block.verifier)
                    .map(|a| a.value.as_str()),
            );
        }
    }
    used.extend(
        defaults
            .agent
            .iter()
            .chain(&defaults.verifier)
            .map(|a| a.value.as_str()),
    );
    for agent in pipeline.agents.values() {
        if agent.name.span.file == main_file && !used.contains(agent.name.value.as_str()) {
            diagnostics.push(
                Diagnostic::new(
                    &rules::UNUSED_AGENT,
                    agent.name.span,
                    format!("agent \"{}\" is never used", agent.name.value),
                )
                .label("unused"),
            );
        }
    }
    let used_templates: HashSet<&str> = pipeline
        .phases
        .iter()
        .filter_map(|p| p.template.as_deref())
        .collect();
    for template in templates.values() {
        if !template.imported && !used_templates.contains(template.name.value.as_str()) {
            diagnostics.push(
                Diagnostic::new(
                    &rules::UNUSED_TEMPLATE,
                    template.name.span,
                    format!("template \"{}\" is never used", template.name.value),
                )
                .label("unused"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_languages() {
        let file = |p: &str| Output::File { path: p.into() };
        assert!(syntax_has_language(&[], &[file("a.py")]));
        assert!(!syntax_has_language(&[], &[file("a.md")]));
        assert!(!syntax_has_language(&["docs/*.md".into()], &[]));
        assert!(syntax_has_language(&["src/**".into()], &[]));
        assert!(!syntax_has_language(&[], &[]));
    }
}
