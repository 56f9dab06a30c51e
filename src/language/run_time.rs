//! The language of work made at run time: a phase's `for-each` (its items) and `generates` (the
//! phases a planner writes), decoded into the model and checked.

use super::decode::Body;
use super::item::{item_placeholders, uses_item};
use crate::diagnostics::{Diagnostic, Diagnostics, Span, rules};
use crate::model::{DEFAULT_MAX_ITEMS, ForEach, Gate, GateKind, Output, Pipeline, Spanned, Worker};

/// The phase's `for-each`, when it names its items.
pub(super) fn for_each(body: &Body) -> Option<ForEach> {
    let source = body.run_time.for_each.as_ref()?.value.clone()?;
    Some(ForEach {
        source,
        max_items: body
            .run_time
            .max_items
            .as_ref()
            .map_or(DEFAULT_MAX_ITEMS, |n| n.value),
        max_parallel: body.run_time.max_parallel.as_ref().map(|n| n.value),
    })
}

/// Checks a phase's body: item settings without `for-each`, `for-each` with `generates`, and item
/// placeholders where no item is given.
pub(super) fn check_body(body: &Body, name: &Spanned<String>, diagnostics: &mut Diagnostics) {
    let run_time = &body.run_time;
    if let Some(for_each) = &run_time.for_each {
        if let Some(generates) = &run_time.generates {
            diagnostics.push(
                Diagnostic::new(
                    &rules::FOR_EACH_SETTINGS,
                    generates.span,
                    format!(
                        "phase \"{}\" is made into items and plans phases: it can do one of the two",
                        name.value
                    ),
                )
                .label("`generates` here")
                .note(for_each.span, "`for-each` here")
                .help("Let a phase without `for-each` write the phases, or drop `generates`."),
            );
        }
        // Outside the prompt, only the plain forms are replaced.
        if let Some((what, span)) = item_use(body, not_plain) {
            diagnostics.push(
                Diagnostic::new(
                    &rules::ITEM_OUTSIDE_FOR_EACH,
                    span.unwrap_or(name.span),
                    format!(
                        "{what} of phase \"{}\" uses an item placeholder that only a prompt can render",
                        name.value
                    ),
                )
                .label("not replaced here")
                .help("Outside the prompt write `{{ item }}`, `{{ item.FIELD }}`, `{{ item.key }}` or `{{ item.index }}`, without filters."),
            );
        }
        return;
    }
    for (setting, span) in [
        ("max-items", run_time.max_items.as_ref().map(|n| n.span)),
        (
            "max-parallel",
            run_time.max_parallel.as_ref().map(|n| n.span),
        ),
    ] {
        if let Some(span) = span {
            diagnostics.push(
                Diagnostic::new(
                    &rules::FOR_EACH_SETTINGS,
                    span,
                    format!(
                        "`{setting}` counts items, and phase \"{}\" has no `for-each`",
                        name.value
                    ),
                )
                .label("limits nothing")
                .help(rules::FOR_EACH_SETTINGS.help),
            );
        }
    }
    if let Some((what, span)) = item_use(body, uses_item) {
        diagnostics.push(outside(&name.value, what, span.unwrap_or(name.span)));
    }
}

/// An item placeholder where no item is given.
fn outside(phase: &str, what: &str, span: Span) -> Diagnostic {
    Diagnostic::new(
        &rules::ITEM_OUTSIDE_FOR_EACH,
        span,
        format!(
            "{what} of phase \"{phase}\" uses an item placeholder, and the phase has no `for-each`"
        ),
    )
    .label("no item here")
    .help(rules::ITEM_OUTSIDE_FOR_EACH.help)
}

/// Whether a text has an item placeholder that is not one of the plain forms.
fn not_plain(text: &str) -> bool {
    item_placeholders(text)
        .iter()
        .any(|p| p.reference.is_none())
}

/// The first place of a body (other than its prompt, which lint checks as a template) with a
/// text that `uses_item` finds an item placeholder in, with its span when it has one.
fn item_use(body: &Body, uses_item: fn(&str) -> bool) -> Option<(&'static str, Option<Span>)> {
    for output in &body.outputs {
        if output_texts(&output.value).into_iter().any(uses_item) {
            return Some(("an output", Some(output.span)));
        }
    }
    for (what, globs) in [("`scope`", &body.scope), ("`protect`", &body.protect)] {
        if let Some(glob) = globs.iter().find(|g| uses_item(&g.value)) {
            return Some((what, Some(glob.span)));
        }
    }
    if let Some(gate) = body
        .gates
        .iter()
        .find(|g| gate_texts(g).into_iter().any(uses_item))
    {
        return Some(("a gate", Some(gate.span)));
    }
    if let Some(run) = body.run.as_ref().filter(|r| uses_item(&r.value)) {
        return Some(("the `run` command", Some(run.span)));
    }
    let plain = [
        ("`env`", body.env.values().any(|v| uses_item(v))),
        ("`vars`", body.vars.values().any(|v| uses_item(v))),
        (
            "`escalate`",
            body.escalate.as_deref().is_some_and(uses_item),
        ),
        (
            "`description`",
            body.description.as_deref().is_some_and(uses_item),
        ),
        (
            "`inputs`",
            body.inputs.iter().flatten().any(|input| match input {
                crate::model::Input::File { path } => uses_item(path),
                crate::model::Input::Glob { pattern } => uses_item(pattern),
            }),
        ),
    ];
    plain
        .into_iter()
        .find(|(_, used)| *used)
        .map(|(what, _)| (what, None))
}

/// The texts of an output that may hold item placeholders.
pub(crate) fn output_texts(output: &Output) -> Vec<&str> {
    match output {
        Output::File { path } => vec![path],
        Output::Glob { pattern, .. } => vec![pattern],
        Output::From { doc, key } => vec![doc, key],
    }
}

/// The texts of a gate that may hold item placeholders.
pub(crate) fn gate_texts(gate: &Gate) -> Vec<&str> {
    let mut texts: Vec<&str> = vec![&gate.name];
    match &gate.kind {
        GateKind::Syntax { globs } => texts.extend(globs.iter().map(String::as_str)),
        GateKind::Command { run, cwd, fix, .. } => {
            texts.push(run);
            texts.extend(cwd.as_deref());
            texts.extend(fix.as_deref());
        }
        GateKind::Matches { target, pattern } | GateKind::Absent { target, pattern } => {
            texts.extend([target.as_str(), pattern.as_str()]);
        }
        GateKind::FrontMatter { path, keys } => {
            texts.push(path);
            texts.extend(keys.iter().map(String::as_str));
        }
        GateKind::Sections { path, headings } => {
            texts.push(path);
            texts.extend(headings.iter().map(String::as_str));
        }
        GateKind::PathsExist { doc, key } => texts.extend([doc.as_str(), key.as_str()]),
        GateKind::Changes { .. } => {}
        GateKind::Approval { prompt } => texts.extend(prompt.as_deref()),
    }
    texts
}

/// Agents whose argv uses an item placeholder, given to a phase without `for-each`: the
/// placeholder would reach the agent as written.
pub(super) fn agents_outside_for_each(pipeline: &Pipeline, diagnostics: &mut Diagnostics) {
    for phase in pipeline.phases.iter().filter(|p| p.for_each.is_none()) {
        let Worker::Agent(name) = &phase.worker else {
            continue;
        };
        let Some(agent) = pipeline.agents.get(&name.value) else {
            continue;
        };
        let argv = agent.command.iter().chain(agent.resume.iter().flatten());
        if argv
            .into_iter()
            .any(|arg| !item_placeholders(arg).is_empty())
        {
            diagnostics.push(outside(
                &phase.name.value,
                "the argv of its agent",
                name.span,
            ));
        }
    }
}

/// A finding in a planner's file of phases.
pub(super) fn not_generated(span: Span, message: String) -> Diagnostic {
    Diagnostic::new(&rules::GENERATED_PHASES, span, message)
        .label("not in a generated file")
        .help(rules::GENERATED_PHASES.help)
}

/// Why a phase a planner wrote may not join the pipeline: it redefines a phase, plans phases
/// itself, or depends on a phase that waits for the planner's phases (it would wait for itself).
pub(super) fn generated_problem(
    phase: &crate::model::Phase,
    existing: &[crate::model::Phase],
    planner: &str,
) -> Option<String> {
    let name = &phase.name.value;
    if existing.iter().any(|p| &p.name.value == name) {
        return Some(format!(
            "phase \"{name}\" is a phase of the pipeline already: a generated phase may not redefine one"
        ));
    }
    if phase.generates.is_some() {
        return Some(format!(
            "phase \"{name}\" uses `generates`: generated phases may not plan phases themselves"
        ));
    }
    // The phases downstream of the planner wait for its phases.
    let mut downstream: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    downstream.insert(planner);
    loop {
        let before = downstream.len();
        for p in existing {
            if p.depends_on
                .iter()
                .any(|d| downstream.contains(d.value.as_str()))
            {
                downstream.insert(&p.name.value);
            }
        }
        if downstream.len() == before {
            break;
        }
    }
    downstream.remove(planner);
    phase
        .depends_on
        .iter()
        .find(|d| downstream.contains(d.value.as_str()))
        .map(|d| {
            format!(
                "phase \"{name}\" depends on \"{}\", which waits for the phases \"{planner}\" writes: it would wait for itself",
                d.value
            )
        })
}
