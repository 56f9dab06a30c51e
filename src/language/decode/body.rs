//! The body of a phase, a template or `defaults`: decoded child by child, then merged.

use std::collections::BTreeMap;

use kdl::{KdlDocument, KdlNode};

use super::attempt::AttemptDecl;
use super::{Decoder, Origin, PromptDecl, boolean, int, number};
use crate::language::validate::{name_span, positional};
use crate::model::{
    BlockOrigin, Gate, Input, Isolation, ItemSource, Millis, OnFailure, Output, Prompt, Spanned,
    VerifyMode,
};

/// A phase body as written in a phase, a template or `defaults`, before they are merged.
#[derive(Debug, Default, Clone)]
pub(crate) struct Body {
    pub description: Option<String>,
    pub agent: Option<Spanned<String>>,
    pub run: Option<Spanned<String>>,
    pub prompt: Option<PromptDecl>,
    pub vars: BTreeMap<String, String>,
    pub depends_on: Vec<Spanned<String>>,
    pub outputs: Vec<Spanned<Output>>,
    /// `None` when no `inputs` block was written.
    pub inputs: Option<Vec<Input>>,
    pub always_run: Option<bool>,
    pub scope: Vec<Spanned<String>>,
    pub protect: Vec<Spanned<String>>,
    pub gates: Vec<Gate>,
    pub fail_fast: Option<bool>,
    pub verify: Option<Spanned<Vec<VerifyMode>>>,
    pub verifier: Option<Spanned<String>>,
    pub verifier_prompt: Option<Spanned<Prompt>>,
    pub retries: Option<u32>,
    pub backoff: Option<Millis>,
    pub timeout: Option<Millis>,
    pub on_failure: Option<OnFailure>,
    pub isolation: Option<Spanned<Isolation>>,
    pub worktree_include: Vec<Spanned<String>>,
    pub worktree_share: Vec<Spanned<String>>,
    pub escalate: Option<String>,
    pub env: BTreeMap<String, String>,
    pub max_cost: Option<f64>,
    pub transient_retries: Option<u32>,
    pub max_turns: Option<u32>,
    /// `attempt` blocks, in the order written.
    pub attempts: Vec<AttemptDecl>,
    /// `for-each`, `max-items`, `max-parallel` and `generates`: work made at run time.
    pub run_time: RunTimeWork,
}

/// The settings of a phase body that make work at run time.
#[derive(Debug, Default, Clone)]
pub(crate) struct RunTimeWork {
    /// The items' source, where `for-each` was written (`None` inside when it names none).
    pub for_each: Option<Spanned<Option<ItemSource>>>,
    pub max_items: Option<Spanned<u32>>,
    pub max_parallel: Option<Spanned<u32>>,
    pub generates: Option<Spanned<String>>,
}

impl RunTimeWork {
    /// `self` (a template's) with `own` (the phase's) on top: the phase's settings win.
    fn overlay(&mut self, own: RunTimeWork) {
        let RunTimeWork {
            for_each,
            max_items,
            max_parallel,
            generates,
        } = own;
        over(&mut self.for_each, for_each);
        over(&mut self.max_items, max_items);
        over(&mut self.max_parallel, max_parallel);
        over(&mut self.generates, generates);
    }
}

/// `theirs` where it is set, else `mine`.
fn over<T>(mine: &mut Option<T>, theirs: Option<T>) {
    if theirs.is_some() {
        *mine = theirs;
    }
}

/// `mine`, or `default` where `mine` is not set.
fn fill<T: Clone>(mine: &mut Option<T>, default: Option<&T>) {
    if mine.is_none() {
        *mine = default.cloned();
    }
}

/// `mine`, or `default` where `mine` is empty.
fn fill_list<T: Clone>(mine: &mut Vec<T>, default: &[T]) {
    if mine.is_empty() {
        *mine = default.to_vec();
    }
}

impl Body {
    /// `self` (a template's body) with `own` (the phase's) on top: lists are added, single values
    /// of `own` win. `own` is taken apart field by field, so a field added to [`Body`] does not
    /// compile until it says how it merges.
    pub(crate) fn overlay(mut self, own: Body) -> Body {
        let Body {
            description,
            agent,
            run,
            prompt,
            vars,
            depends_on,
            outputs,
            inputs,
            always_run,
            scope,
            protect,
            gates,
            fail_fast,
            verify,
            verifier,
            verifier_prompt,
            retries,
            backoff,
            timeout,
            on_failure,
            isolation,
            worktree_include,
            worktree_share,
            escalate,
            env,
            max_cost,
            transient_retries,
            max_turns,
            attempts,
            run_time,
        } = own;
        over(&mut self.description, description);
        over(&mut self.agent, agent);
        over(&mut self.run, run);
        over(&mut self.prompt, prompt);
        over(&mut self.always_run, always_run);
        over(&mut self.fail_fast, fail_fast);
        over(&mut self.verify, verify);
        over(&mut self.verifier, verifier);
        over(&mut self.verifier_prompt, verifier_prompt);
        over(&mut self.retries, retries);
        over(&mut self.backoff, backoff);
        over(&mut self.timeout, timeout);
        over(&mut self.on_failure, on_failure);
        over(&mut self.isolation, isolation);
        over(&mut self.escalate, escalate);
        over(&mut self.max_cost, max_cost);
        over(&mut self.transient_retries, transient_retries);
        over(&mut self.max_turns, max_turns);
        self.run_time.overlay(run_time);
        if let Some(own_inputs) = inputs {
            self.inputs.get_or_insert_with(Vec::new).extend(own_inputs);
        }
        self.depends_on.extend(depends_on);
        self.outputs.extend(outputs);
        self.scope.extend(scope);
        self.protect.extend(protect);
        self.worktree_include.extend(worktree_include);
        self.worktree_share.extend(worktree_share);
        self.gates.extend(gates);
        self.vars.extend(vars);
        self.env.extend(env);
        self.attempts.extend(attempts);
        self
    }

    /// Fills what the phase does not set from `defaults`. `defaults` is taken apart field by
    /// field, so a field added to [`Body`] does not compile until it says whether it inherits.
    pub(crate) fn fill_from(mut self, defaults: &Body) -> Body {
        let Body {
            // What a phase is and what it depends on are its own.
            description: _,
            run_time: _,
            run: _,
            depends_on: _,
            outputs: _,
            inputs: _,
            agent,
            prompt,
            vars,
            always_run,
            scope,
            protect,
            gates,
            fail_fast,
            verify,
            verifier,
            verifier_prompt,
            retries,
            backoff,
            timeout,
            on_failure,
            isolation,
            worktree_include,
            worktree_share,
            escalate,
            env,
            max_cost,
            transient_retries,
            max_turns,
            attempts,
        } = defaults;
        // A `run` step has no agent: the default agent applies to agent phases only.
        if self.run.is_none() {
            fill(&mut self.agent, agent.as_ref());
        }
        fill(&mut self.prompt, prompt.as_ref());
        fill(&mut self.always_run, always_run.as_ref());
        fill(&mut self.fail_fast, fail_fast.as_ref());
        fill(&mut self.verify, verify.as_ref());
        fill(&mut self.verifier, verifier.as_ref());
        fill(&mut self.verifier_prompt, verifier_prompt.as_ref());
        fill(&mut self.retries, retries.as_ref());
        fill(&mut self.backoff, backoff.as_ref());
        fill(&mut self.timeout, timeout.as_ref());
        fill(&mut self.on_failure, on_failure.as_ref());
        fill(&mut self.isolation, isolation.as_ref());
        fill(&mut self.escalate, escalate.as_ref());
        fill(&mut self.max_cost, max_cost.as_ref());
        fill(&mut self.transient_retries, transient_retries.as_ref());
        fill(&mut self.max_turns, max_turns.as_ref());
        fill_list(&mut self.scope, scope);
        fill_list(&mut self.protect, protect);
        fill_list(&mut self.worktree_include, worktree_include);
        fill_list(&mut self.worktree_share, worktree_share);
        fill_list(&mut self.gates, gates);
        // A phase's and its template's blocks apply over those of `defaults`.
        self.attempts.extend(attempts.iter().cloned());
        for (map, default) in [(&mut self.vars, vars), (&mut self.env, env)] {
            for (k, v) in default {
                map.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        self
    }
}

impl Body {
    /// Marks the body's `attempt` blocks as written in a phase, its template or `defaults`.
    pub(crate) fn attempts_from(mut self, from: BlockOrigin) -> Body {
        for decl in &mut self.attempts {
            decl.block.from = from;
        }
        self
    }
}

impl Decoder<'_> {
    /// Decodes the children of a phase, template or `defaults` block.
    pub(crate) fn body(&mut self, children: Option<&KdlDocument>, origin: Origin<'_>) -> Body {
        let mut body = Body::default();
        for child in children.map(KdlDocument::nodes).unwrap_or_default() {
            self.body_child(child, origin, &mut body);
        }
        self.overlapping_attempts(&body.attempts);
        body
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one arm per node of a phase body: the schema's table, read whole"
    )]
    fn body_child(&mut self, child: &KdlNode, origin: Origin<'_>, body: &mut Body) {
        let first = || origin.arg(child, 0);
        match child.name().value() {
            "description" => body.description = first().map(|d| d.value),
            "agent" => body.agent = first(),
            "run" => {
                body.run = first();
                if let Some(run) = &body.run {
                    self.empty(
                        run,
                        "an empty `run` command does nothing and exits 0: the phase always passes",
                        "Write the shell command the step runs, e.g. `run \"cargo fmt\"`.",
                    );
                }
            }
            "prompt" => body.prompt = self.prompt(child, origin),
            "verifier-prompt" => {
                body.verifier_prompt = self.prompt(child, origin).map(|p| p.prompt);
            }
            "vars" => {
                for var in child.children().map(KdlDocument::nodes).unwrap_or_default() {
                    if let Some(value) = origin.arg(var, 0) {
                        body.vars.insert(var.name().value().to_owned(), value.value);
                    }
                }
            }
            "depends-on" => body.depends_on.extend(origin.args(child)),
            "outputs" => {
                for output in child.children().map(KdlDocument::nodes).unwrap_or_default() {
                    if let Some(decoded) = self.output(output, origin) {
                        body.outputs.push(decoded);
                    }
                }
            }
            "inputs" => {
                let inputs = body.inputs.get_or_insert_with(Vec::new);
                for input in child.children().map(KdlDocument::nodes).unwrap_or_default() {
                    let Some(first) = origin.arg(input, 0) else {
                        continue;
                    };
                    match input.name().value() {
                        "file" => {
                            self.workspace_path(&first);
                            inputs.push(Input::File { path: first.value });
                        }
                        "glob" => {
                            self.glob(&first);
                            inputs.push(Input::Glob {
                                pattern: first.value,
                            });
                        }
                        _ => {}
                    }
                }
            }
            "always-run" => body.always_run = boolean(child),
            "scope" | "protect" | "worktree-include" | "worktree-share" => {
                let globs = origin.args(child);
                for glob in &globs {
                    if child.name().value() == "worktree-share" {
                        self.folder_glob(glob);
                    } else {
                        self.glob(glob);
                    }
                }
                match child.name().value() {
                    "scope" => body.scope.extend(globs),
                    "protect" => body.protect.extend(globs),
                    "worktree-include" => body.worktree_include.extend(globs),
                    _ => body.worktree_share.extend(globs),
                }
            }
            "gates" => {
                for gate in child.children().map(KdlDocument::nodes).unwrap_or_default() {
                    if let Some(decoded) = self.gate(gate, origin) {
                        body.gates.push(decoded);
                    }
                }
            }
            "fail-fast" => body.fail_fast = boolean(child),
            "verify" => {
                let mut modes = Vec::new();
                for mode in origin.args(child) {
                    match mode.value.as_str() {
                        "self" => modes.push(VerifyMode::SelfCheck),
                        "external" => modes.push(VerifyMode::External),
                        "sub-agent" => modes.push(VerifyMode::SubAgent),
                        "both" => modes.extend([VerifyMode::SelfCheck, VerifyMode::External]),
                        _ => {}
                    }
                }
                modes.sort();
                modes.dedup();
                if !modes.is_empty() {
                    body.verify = Some(Spanned::new(modes, name_span(origin.file, child)));
                }
            }
            "verifier" => body.verifier = first(),
            "retries" => body.retries = int(positional(child).next()),
            "max-cost" => body.max_cost = number(positional(child).next()),
            "transient-retries" => body.transient_retries = int(positional(child).next()),
            "max-turns" => body.max_turns = int(positional(child).next()).filter(|&n| n > 0),
            "backoff" => body.backoff = first().and_then(|d| self.duration(&d)),
            "timeout" => body.timeout = first().and_then(|d| self.duration(&d)),
            "on-failure" => {
                body.on_failure = match first().as_ref().map(|v| v.value.as_str()) {
                    Some("stop") => Some(OnFailure::Stop),
                    Some("continue") => Some(OnFailure::Continue),
                    _ => None,
                };
            }
            "isolation" => {
                body.isolation = first().and_then(|mode| {
                    let isolation = match mode.value.as_str() {
                        "shared" => Isolation::Shared,
                        "worktree" => Isolation::Worktree,
                        _ => return None,
                    };
                    Some(Spanned::new(isolation, mode.span))
                });
            }
            "escalate" => {
                let escalate = first();
                if let Some(escalate) = &escalate {
                    self.empty(
                        escalate,
                        "an empty `escalate` command tells no one that the phase failed",
                        "Write the shell command that notifies a person, or remove `escalate`.",
                    );
                }
                body.escalate = escalate.map(|e| e.value);
            }
            "env" => {
                if let (Some(k), Some(v)) = (origin.arg(child, 0), origin.arg(child, 1)) {
                    body.env.insert(k.value, v.value);
                }
            }
            "attempt" => body.attempts.extend(self.attempt_block(child, origin)),
            "for-each" => body.run_time.for_each = Some(self.for_each(child, origin)),
            "max-items" => {
                body.run_time.max_items = int(positional(child).next())
                    .filter(|&n| n > 0)
                    .map(|n| Spanned::new(n, name_span(origin.file, child)));
            }
            "max-parallel" => {
                body.run_time.max_parallel = int(positional(child).next())
                    .filter(|&n| n > 0)
                    .map(|n| Spanned::new(n, name_span(origin.file, child)));
            }
            "generates" => {
                body.run_time.generates = first().inspect(|path| self.workspace_path(path));
            }
            _ => {}
        }
    }
}

impl Decoder<'_> {
    /// A `for-each` node: its one source of items, or `None` inside when it names none or more
    /// than one (reported).
    fn for_each(&mut self, node: &KdlNode, origin: Origin<'_>) -> Spanned<Option<ItemSource>> {
        let span = name_span(origin.file, node);
        let json = origin.prop(node, "json");
        let key = origin.prop(node, "key");
        let glob = origin.prop(node, "glob");
        let list = origin.args(node);
        let given = usize::from(json.is_some())
            + usize::from(glob.is_some())
            + usize::from(!list.is_empty());
        let problem = match (given, &key, &json) {
            (0, _, _) => Some("`for-each` names no items"),
            (2.., _, _) => Some("`for-each` names its items in more than one way"),
            (_, Some(_), None) => {
                Some("`key=` says which field of a JSON object is its key: it needs `json=`")
            }
            _ => None,
        };
        if let Some(problem) = problem {
            self.report(
                crate::diagnostics::Diagnostic::new(
                    &crate::diagnostics::rules::FOR_EACH_SOURCE,
                    span,
                    problem,
                )
                .label("where do the items come from?")
                .help(crate::diagnostics::rules::FOR_EACH_SOURCE.help),
            );
            return Spanned::new(None, span);
        }
        let source = if let Some(path) = json {
            self.workspace_path(&path);
            ItemSource::Json {
                path: path.value,
                key: key.map(|k| k.value),
            }
        } else if let Some(pattern) = glob {
            self.glob(&pattern);
            ItemSource::Glob {
                pattern: pattern.value,
            }
        } else {
            ItemSource::List {
                items: list.into_iter().map(|item| item.value).collect(),
            }
        };
        Spanned::new(Some(source), span)
    }
}
