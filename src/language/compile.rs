//! One compilation: the pipeline file and its imports → a checked [`Pipeline`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kdl::{KdlDocument, KdlNode};

use super::check;
use super::decode::{Body, Decoder, Origin};
use super::kdl::limits::Allowance;
use super::kdl::parse;
use super::loader::{Loader, normalize};
use super::prompt::UsesCache;
use super::schema::Context;
use super::template::{Substitution, TemplateDef};
use super::validate::{Validator, name_span, positional, property, value_span};
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, did_you_mean, rules};
use crate::model::{
    Agent, AttemptBlock, BlockOrigin, Gate, GateKind, OnFailure, Phase, Pipeline,
    RemoteDefinitions, RemoteOrigin, Spanned, VerifyMode, Worker,
};
use crate::remote::Source;

/// Default `max-parallel`.
pub(super) const DEFAULT_MAX_PARALLEL: u32 = 4;
/// Default `retries`.
pub(super) const DEFAULT_RETRIES: u32 = 2;
/// Tries after transient failures, when a phase does not say.
pub(super) const DEFAULT_TRANSIENT_RETRIES: u32 = 3;

/// Everything one compilation produced.
#[derive(Debug)]
pub struct Compilation {
    /// Every file read, for rendering diagnostics.
    pub sources: Sources,
    /// Findings, sorted by place.
    pub diagnostics: Vec<Diagnostic>,
    /// The pipeline, when the file declares one (also when there are errors: best effort).
    pub pipeline: Option<Pipeline>,
    /// The agents and templates read from git repositories, and where each came from.
    pub remote: RemoteDefinitions,
}

impl Compilation {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Options of one compilation.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Time budget of each file's parse.
    pub parse_budget: Duration,
    /// Whether a library for `import` (agents, templates and imports, with no `pipeline`,
    /// `phase` or `defaults`) is a file in its own right, as lint and the language server see
    /// it. Either way a library is checked as one; when it is not accepted (a command that runs
    /// the file), its missing `pipeline` is reported too (HF120).
    pub accept_library: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            parse_budget: parse::PARSE_BUDGET,
            accept_library: false,
        }
    }
}

/// Compiles `text`, read from `path`, resolving imports and prompt files through `loader`.
pub fn compile(path: &Path, text: &str, loader: &dyn Loader, options: Options) -> Compilation {
    let mut sources = Sources::new();
    let mut diagnostics = Diagnostics::default();
    let file = sources.add(path, text);
    let mut compiler = Compiler::new(
        path,
        loader,
        options,
        (&mut diagnostics, &mut sources),
        None,
    );
    let pipeline = compiler.main(path, file, text);
    let remote = std::mem::take(&mut compiler.provenance);
    Compilation {
        sources,
        diagnostics: diagnostics.into_sorted(),
        pipeline,
        remote,
    }
}

/// A file of `phase` nodes a planner wrote (`generates`): its path (absolute), its text, and the
/// planner's name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GeneratedFile<'a> {
    /// Where it is.
    pub(crate) path: &'a Path,
    /// What it holds.
    pub(crate) text: &'a str,
    /// The phase whose `generates` names it.
    pub(crate) planner: &'a str,
}

/// Compiles the pipeline in `text` (read from `path`) with the phases of a planner's `generates`
/// file added: they use the pipeline's agents, templates and `defaults`. Only the findings in the
/// generated file are kept (the pipeline was checked when it was run).
pub(crate) fn compile_generated(
    path: &Path,
    text: &str,
    loader: &dyn Loader,
    generated: GeneratedFile<'_>,
) -> Compilation {
    let mut sources = Sources::new();
    let mut diagnostics = Diagnostics::default();
    let file = sources.add(path, text);
    let mut compiler = Compiler::new(
        path,
        loader,
        Options::default(),
        (&mut diagnostics, &mut sources),
        Some(generated),
    );
    let pipeline = compiler.main(path, file, text);
    let generated_file = compiler.generated.and_then(|(_, file)| file);
    let diagnostics = diagnostics
        .into_sorted()
        .into_iter()
        .filter(|d| Some(d.span.file) == generated_file)
        .collect();
    Compilation {
        sources,
        diagnostics,
        pipeline,
        remote: RemoteDefinitions::default(),
    }
}

/// A file read from a repository: what it is, for the relative imports inside it.
#[derive(Debug, Clone)]
pub(super) struct RemoteFile {
    /// The repository and the file's path in it.
    pub source: Source,
    /// The `rev` of the import that led to it.
    pub rev: String,
    /// The commit it was read at.
    pub commit: String,
}

pub(super) struct Compiler<'c> {
    pub(super) loader: &'c dyn Loader,
    options: Options,
    pub(super) diagnostics: &'c mut Diagnostics,
    pub(super) sources: &'c mut Sources,
    pub(super) agents: BTreeMap<String, Agent>,
    pub(super) templates: BTreeMap<String, TemplateDef>,
    pub(super) imports: Vec<PathBuf>,
    /// The chain of files being imported, for cycle detection.
    pub(super) stack: Vec<PathBuf>,
    /// A planner's file of phases to add, and its id once read.
    generated: Option<(GeneratedFile<'c>, Option<FileId>)>,
    /// The file compiled: its lock pins the remote imports.
    pub(super) root: PathBuf,
    /// The files read from repositories, by where their copy is.
    pub(super) remote_files: HashMap<PathBuf, RemoteFile>,
    /// Where each file read from a repository came from.
    pub(super) origins: HashMap<FileId, RemoteOrigin>,
    /// The agents and templates that came from repositories.
    provenance: RemoteDefinitions,
    /// What the files still to be read may hold: a pipeline file and its imports share the
    /// front end's limits.
    pub(super) allowance: Allowance,
    /// Whether each prompt file's template syntax is valid, and what each uses: checked once.
    syntax: HashMap<FileId, bool>,
    uses: UsesCache,
}

impl<'c> Compiler<'c> {
    /// A compiler of the pipeline file `path` (with a planner's file of phases, `generated`),
    /// its findings and files collected in `diagnostics` and `sources`.
    fn new(
        path: &Path,
        loader: &'c dyn Loader,
        options: Options,
        (diagnostics, sources): (&'c mut Diagnostics, &'c mut Sources),
        generated: Option<GeneratedFile<'c>>,
    ) -> Self {
        Compiler {
            loader,
            options,
            diagnostics,
            sources,
            agents: BTreeMap::new(),
            templates: BTreeMap::new(),
            imports: Vec::new(),
            stack: vec![normalize(Path::new(""), path)],
            root: path.to_owned(),
            remote_files: HashMap::new(),
            origins: HashMap::new(),
            provenance: RemoteDefinitions::default(),
            generated: generated.map(|file| (file, None)),
            allowance: Allowance::default(),
            syntax: HashMap::new(),
            uses: UsesCache::default(),
        }
    }
}

impl Compiler<'_> {
    pub(super) fn parse(&mut self, file: FileId, text: &str) -> Option<KdlDocument> {
        match parse::parse_within(text, file, self.options.parse_budget, &mut self.allowance) {
            Ok(document) => Some(document),
            Err(found) => {
                self.diagnostics.extend(found);
                None
            }
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "not yet cut into named steps; a known exception to remove"
    )]
    fn main(&mut self, path: &Path, file: FileId, text: &str) -> Option<Pipeline> {
        let document = self.parse(file, text)?;
        Validator {
            diagnostics: self.diagnostics,
            file,
        }
        .document(&document, Context::TopLevel);
        let folder = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        };

        let pipelines: Vec<&KdlNode> = nodes_named(&document, "pipeline").collect();
        let Some(&pipeline_node) = pipelines.first() else {
            if is_library(&document) {
                // Checked as it is when imported: its imports, agents and templates.
                self.load_imports(&document, path, file);
                self.collect_definitions(&document, file, path, true);
                self.provenance = self.provenance();
                if !self.options.accept_library {
                    self.diagnostics.push(
                        Diagnostic::new(
                            &rules::MISSING_PIPELINE,
                            Span::new(file, 0, 0),
                            "the file has no `pipeline` node: it is a library for `import`",
                        )
                        .label("agents and templates, nothing to run")
                        .help("Run a pipeline that imports this file; `helixflow lint` checks a library as it is."),
                    );
                }
                return None;
            }
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::MISSING_PIPELINE,
                    Span::new(file, 0, 0),
                    "the file has no `pipeline` node",
                )
                .label("expected `pipeline \"NAME\"`"),
            );
            return None;
        };
        for extra in &pipelines[1..] {
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::MULTIPLE_PIPELINES,
                    name_span(file, extra),
                    "a second `pipeline` node",
                )
                .label("second pipeline")
                .note(name_span(file, pipeline_node), "first pipeline"),
            );
        }

        let workspace = pipeline_setting(pipeline_node, "workspace")
            .and_then(first_string)
            .map_or_else(|| folder.clone(), |w| normalize(&folder, Path::new(&w)));

        self.load_imports(&document, path, file);
        self.collect_definitions(&document, file, path, false);
        self.provenance = self.provenance();

        let mut decoder = Decoder {
            diagnostics: self.diagnostics,
            sources: self.sources,
            loader: self.loader,
            syntax: &mut self.syntax,
            workspace: workspace.clone(),
        };
        let none = Substitution::none();
        let origin = Origin { file, subst: &none };
        let defaults_node = nodes_named(&document, "defaults").next();
        let defaults = decoder
            .body(defaults_node.and_then(KdlNode::children), origin)
            .attempts_from(BlockOrigin::Defaults);

        let mut pipeline = self.pipeline_settings(pipeline_node, file, path, workspace.clone());
        let defaults_bytes =
            defaults_node.map_or(0, |node| node_text(self.sources, file, node).len());
        let pipeline_span = name_span(file, pipeline_node);
        let mut phases = self.phases(document, file, (&defaults, defaults_bytes), &workspace);
        if let Some((generated, _)) = self.generated {
            let made = self.generated_phases(generated, &defaults, &workspace, &phases);
            phases.extend(made);
        }
        if phases.is_empty() {
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::NO_PHASES,
                    pipeline_span,
                    "the pipeline has no phases",
                )
                .label("nothing to run"),
            );
        }
        pipeline.phases = phases.into();
        pipeline.agents = std::mem::take(&mut self.agents);
        pipeline.remote = self.provenance.clone();
        pipeline.imports = std::mem::take(&mut self.imports);
        check::pipeline(
            &pipeline,
            &self.templates,
            &defaults,
            file,
            self.diagnostics,
        );
        check::worktrees_outside_git(&pipeline, self.loader, self.diagnostics);
        super::run_time::agents_outside_for_each(&pipeline, self.diagnostics);
        Some(pipeline)
    }

    #[allow(
        clippy::too_many_lines,
        reason = "not yet cut into named steps; a known exception to remove"
    )]
    fn pipeline_settings(
        &mut self,
        node: &KdlNode,
        file: FileId,
        path: &Path,
        workspace: PathBuf,
    ) -> Pipeline {
        let mut decoder = Decoder {
            diagnostics: self.diagnostics,
            sources: self.sources,
            loader: self.loader,
            syntax: &mut self.syntax,
            workspace: workspace.clone(),
        };
        let mut pipeline = Pipeline {
            name: first_string(node).unwrap_or_default(),
            description: None,
            file: path.to_owned(),
            workspace,
            max_parallel: DEFAULT_MAX_PARALLEL,
            retry_budget: None,
            timeout: None,
            state_dir: PathBuf::from(".helixflow"),
            env: BTreeMap::new(),
            secrets: Vec::new(),
            imports: Vec::new(),
            agents: BTreeMap::new(),
            phases: std::sync::Arc::default(),
            max_cost: None,
            unknown_cost: crate::model::UnknownCost::default(),
            prices: BTreeMap::new(),
            remote: crate::model::RemoteDefinitions::default(),
            compiled_from: None,
        };
        for child in node.children().map(KdlDocument::nodes).unwrap_or_default() {
            let arg = |i: usize| {
                positional(child).nth(i).and_then(|e| match e.value() {
                    kdl::KdlValue::String(s) => Some(Spanned::new(s.clone(), value_span(file, e))),
                    _ => None,
                })
            };
            let int = || match positional(child).next().map(kdl::KdlEntry::value) {
                Some(kdl::KdlValue::Integer(n)) => u32::try_from(*n).ok(),
                _ => None,
            };
            match child.name().value() {
                "description" => pipeline.description = arg(0).map(|d| d.value),
                "max-parallel" => {
                    pipeline.max_parallel =
                        int().filter(|&n| n > 0).unwrap_or(DEFAULT_MAX_PARALLEL);
                }
                "retry-budget" => pipeline.retry_budget = int(),
                "max-cost" => pipeline.max_cost = super::decode::number(positional(child).next()),
                "unknown-cost" => {
                    pipeline.unknown_cost = match arg(0).as_ref().map(|a| a.value.as_str()) {
                        Some("allow") => crate::model::UnknownCost::Allow,
                        _ => crate::model::UnknownCost::Fail,
                    };
                }
                "price" => {
                    let prop = |key: &str| super::decode::number(child.entry(key));
                    if let (Some(model), Some(input), Some(output)) =
                        (arg(0), prop("input"), prop("output"))
                    {
                        pipeline.prices.insert(
                            model.value,
                            crate::model::Price {
                                input,
                                cached_input: prop("cached-input"),
                                output,
                            },
                        );
                    }
                }
                "timeout" => pipeline.timeout = arg(0).and_then(|d| decoder.duration(&d)),
                "state-dir" => {
                    if let Some(dir) = arg(0) {
                        decoder.workspace_path(&dir);
                        pipeline.state_dir = PathBuf::from(dir.value);
                    }
                }
                "env" => {
                    if let (Some(k), Some(v)) = (arg(0), arg(1)) {
                        pipeline.env.insert(k.value, v.value);
                    }
                }
                "secret" => pipeline.secrets.extend(
                    positional(child).filter_map(|e| e.value().as_string().map(str::to_owned)),
                ),
                _ => {}
            }
        }
        pipeline
    }

    /// Records the agents and templates of one file.
    pub(super) fn collect_definitions(
        &mut self,
        document: &KdlDocument,
        file: FileId,
        path: &Path,
        imported: bool,
    ) {
        for node in nodes_named(document, "agent") {
            let mut decoder = Decoder {
                diagnostics: self.diagnostics,
                sources: self.sources,
                loader: self.loader,
                syntax: &mut self.syntax,
                workspace: PathBuf::new(),
            };
            let Some(agent) = decoder.agent(node, file, path) else {
                continue;
            };
            if let Some(first) = self.agents.get(&agent.name.value) {
                self.diagnostics
                    .push(duplicate("agent", &agent.name, first.name.span));
                continue;
            }
            self.agents.insert(agent.name.value.clone(), agent);
        }
        for node in nodes_named(document, "template") {
            let Some(name) = positional(node).next().and_then(|e| {
                Some(Spanned::new(
                    e.value().as_string()?.to_owned(),
                    value_span(file, e),
                ))
            }) else {
                continue;
            };
            if let Some(first) = self.templates.get(&name.value) {
                self.diagnostics
                    .push(duplicate("template", &name, first.name.span));
                continue;
            }
            let params = node
                .children()
                .map(KdlDocument::nodes)
                .unwrap_or_default()
                .iter()
                .filter(|n| n.name().value() == "param")
                .filter_map(|n| {
                    let entry = positional(n).next()?;
                    let default = property(n, "default")
                        .and_then(|d| d.value().as_string())
                        .map(str::to_owned);
                    Some((
                        entry.value().as_string()?.to_owned(),
                        default,
                        value_span(file, entry),
                    ))
                })
                .collect();
            self.templates.insert(
                name.value.clone(),
                TemplateDef {
                    name,
                    file,
                    imported,
                    params,
                    node: node.clone(),
                    bytes: node_text(self.sources, file, node).len(),
                },
            );
        }
    }

    /// Expands and decodes every `phase` node, each taking what it uses of templates and
    /// `defaults` from the allowance: past it, the phases that do not fit are not decoded.
    ///
    /// The document is taken apart as its phases are decoded: each node is dropped once its phase
    /// is, so that the tree and the model are not both whole at once.
    fn phases(
        &mut self,
        mut document: KdlDocument,
        file: FileId,
        (defaults, defaults_bytes): (&Body, usize),
        workspace: &Path,
    ) -> Vec<Phase> {
        let mut phases = Vec::with_capacity(nodes_named(&document, "phase").count());
        let nodes = std::mem::take(document.nodes_mut());
        for node in nodes.into_iter().filter(|n| n.name().value() == "phase") {
            let node = &node;
            let template = property(node, "use")
                .and_then(|entry| entry.value().as_string())
                .and_then(|name| self.templates.get(name))
                .map_or(0, |template| template.bytes);
            let before = self.sources.bytes();
            let phase = self.phase(node, file, defaults, workspace);
            let read = self.sources.bytes() - before;
            let taken = template + defaults_bytes + read;
            if let Err(refused) = self.allowance.take_again(taken, name_span(file, node)) {
                self.diagnostics.push(*refused);
                break;
            }
            phases.extend(phase);
        }
        phases
    }

    /// Expands and decodes one `phase` node.
    #[allow(
        clippy::too_many_lines,
        reason = "not yet cut into named steps; a known exception to remove"
    )]
    fn phase(
        &mut self,
        node: &KdlNode,
        file: FileId,
        defaults: &Body,
        workspace: &Path,
    ) -> Option<Phase> {
        let name_entry = positional(node).next()?;
        let name = Spanned::new(
            name_entry.value().as_string()?.to_owned(),
            value_span(file, name_entry),
        );
        let none = Substitution::none();
        let mut decoder = Decoder {
            diagnostics: self.diagnostics,
            sources: self.sources,
            loader: self.loader,
            syntax: &mut self.syntax,
            workspace: workspace.to_owned(),
        };
        let own = decoder.body(node.children(), Origin { file, subst: &none });

        let mut template_name = None;
        let mut template_missing = false;
        let base = match property(node, "use") {
            None => Body::default(),
            Some(use_entry) => {
                let use_span = value_span(file, use_entry);
                let wanted = use_entry.value().as_string()?;
                template_name = Some(wanted.to_owned());
                match self.templates.get(wanted) {
                    None => {
                        template_missing = true;
                        let mut d = Diagnostic::new(
                            &rules::UNKNOWN_TEMPLATE,
                            use_span,
                            format!("unknown template \"{wanted}\""),
                        )
                        .label("not defined or imported");
                        if let Some(s) =
                            did_you_mean(wanted, self.templates.keys().map(String::as_str))
                        {
                            d = d.help(format!("did you mean \"{s}\"?")).fix(
                                format!("use \"{s}\""),
                                use_span,
                                format!("\"{s}\""),
                            );
                        }
                        self.diagnostics.push(d);
                        Body::default()
                    }
                    Some(template) => {
                        let template = template.clone();
                        let params = self.template_params(node, file, &template, use_span);
                        let subst = Substitution::with(&params);
                        let mut decoder = Decoder {
                            diagnostics: self.diagnostics,
                            sources: self.sources,
                            loader: self.loader,
                            syntax: &mut self.syntax,
                            workspace: workspace.to_owned(),
                        };
                        let mut body = decoder.body(
                            template.node.children(),
                            Origin {
                                file: template.file,
                                subst: &subst,
                            },
                        );
                        for (k, v) in &params {
                            body.vars.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                        body.attempts_from(BlockOrigin::Template)
                    }
                }
            }
        };
        let body = base.overlay(own).fill_from(defaults);
        super::run_time::check_body(&body, &name, self.diagnostics);
        let for_each = super::run_time::for_each(&body);
        // A parameter the phase does not give is reported already (HF501); its uses in the
        // prompt are not reported again.
        let mut vars = body.vars.clone();
        let declared = template_name
            .as_deref()
            .and_then(|t| self.templates.get(t))
            .map(|t| t.params.as_slice())
            .unwrap_or_default();
        for (param, _, _) in declared {
            vars.entry(param.clone()).or_default();
        }
        let mut decoder = Decoder {
            diagnostics: self.diagnostics,
            sources: self.sources,
            loader: self.loader,
            syntax: &mut self.syntax,
            workspace: workspace.to_owned(),
        };
        let prompt_includes = match &body.prompt {
            Some(prompt) => decoder.check_prompt(
                &name.value,
                prompt,
                &vars,
                for_each.is_some(),
                &mut self.uses,
            ),
            None => BTreeMap::new(),
        };
        let attempts = attempt_blocks(
            &mut decoder,
            (&name.value, for_each.is_some()),
            &body,
            &vars,
            &mut self.uses,
        );

        let worker = match (&body.agent, &body.run) {
            (Some(agent), Some(run)) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::AGENT_AND_RUN,
                        run.span,
                        format!("phase \"{}\" sets both `agent` and `run`", name.value),
                    )
                    .label("`run` here")
                    .note(agent.span, "`agent` here"),
                );
                Worker::Agent(agent.clone())
            }
            (Some(agent), None) => Worker::Agent(agent.clone()),
            (None, Some(run)) => Worker::Run(run.value.clone()),
            // An unknown template is reported already; its body would have named the worker.
            (None, None) if template_missing => Worker::Run(String::new()),
            (None, None) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::PHASE_WITHOUT_WORKER,
                        name.span,
                        format!("phase \"{}\" has neither `agent` nor `run`, and `defaults` names no agent", name.value),
                    )
                    .label("who does this work?"),
                );
                Worker::Run(String::new())
            }
        };
        if let (None, Some(run)) = (&body.agent, &body.run) {
            for gate in &body.gates {
                self.response_in_run_step(gate, &name.value, run.span);
            }
            self.agent_in_run_step(&attempts, &name.value, run.span);
        }
        // A planner's file of phases is one of its outputs.
        let mut outputs: Vec<crate::model::Output> =
            body.outputs.into_iter().map(|o| o.value).collect();
        if let Some(generates) = &body.run_time.generates
            && !outputs.iter().any(
                |o| matches!(o, crate::model::Output::File { path } if *path == generates.value),
            )
        {
            outputs.push(crate::model::Output::File {
                path: generates.value.clone(),
            });
        }
        Some(Phase {
            name,
            template: template_name,
            description: body.description,
            worker,
            prompt: body.prompt.map(|p| p.prompt.value),
            prompt_includes,
            vars: body.vars,
            depends_on: body.depends_on,
            outputs,
            inputs: body.inputs,
            always_run: body.always_run.unwrap_or(false),
            scope: body.scope.iter().map(|s| s.value.clone()).collect(),
            protect: body.protect.iter().map(|s| s.value.clone()).collect(),
            gates: body.gates,
            fail_fast: body.fail_fast.unwrap_or(false),
            verify: body
                .verify
                .as_ref()
                .map_or_else(|| vec![VerifyMode::External], |v| v.value.clone()),
            verifier: body.verifier,
            verifier_prompt: body.verifier_prompt.map(|p| p.value),
            retries: body.retries.unwrap_or(DEFAULT_RETRIES),
            backoff: body.backoff,
            timeout: body.timeout,
            on_failure: body.on_failure.unwrap_or(OnFailure::Stop),
            isolation: body.isolation.as_ref().map(|i| i.value).unwrap_or_default(),
            worktree_include: body
                .worktree_include
                .iter()
                .map(|s| s.value.clone())
                .collect(),
            worktree_share: body
                .worktree_share
                .iter()
                .map(|s| s.value.clone())
                .collect(),
            escalate: body.escalate,
            env: body.env,
            max_cost: body.max_cost,
            transient_retries: body.transient_retries.unwrap_or(DEFAULT_TRANSIENT_RETRIES),
            max_turns: body.max_turns,
            for_each,
            generates: body.run_time.generates.map(|g| g.value),
            made_by: None,
            idle_timeout: None,
            attempts,
            spans: crate::model::PhaseSpans {
                verify: body.verify.map(|v| v.span),
                scope: body.scope.iter().map(|s| s.span).collect(),
                protect: body.protect.iter().map(|s| s.span).collect(),
                isolation: body.isolation.map(|i| i.span),
                worktree_include: body.worktree_include.iter().map(|s| s.span).collect(),
                worktree_share: body.worktree_share.iter().map(|s| s.span).collect(),
            },
        })
    }

    /// The phases of a planner's file, decoded like the pipeline's own; what only the pipeline
    /// may declare is reported (HF703).
    fn generated_phases(
        &mut self,
        generated: GeneratedFile<'_>,
        defaults: &Body,
        workspace: &Path,
        existing: &[Phase],
    ) -> Vec<Phase> {
        let file = self.sources.add(generated.path, generated.text);
        if let Some((_, id)) = &mut self.generated {
            *id = Some(file);
        }
        let Some(document) = self.parse(file, generated.text) else {
            return Vec::new();
        };
        Validator {
            diagnostics: self.diagnostics,
            file,
        }
        .document(&document, Context::TopLevel);
        let mut made: Vec<Phase> = Vec::new();
        for node in document.nodes() {
            let kind = node.name().value();
            if kind != "phase" {
                if super::schema::lookup(Context::TopLevel, kind).is_some() {
                    self.diagnostics.push(super::run_time::not_generated(
                        name_span(file, node),
                        format!("a file of generated phases declares a `{kind}`: only `phase` nodes belong there"),
                    ));
                }
                continue;
            }
            let Some(mut phase) = self.phase(node, file, defaults, workspace) else {
                continue;
            };
            if let Some(problem) =
                super::run_time::generated_problem(&phase, existing, generated.planner)
            {
                self.diagnostics
                    .push(super::run_time::not_generated(phase.name.span, problem));
                continue;
            }
            phase.made_by = Some(crate::model::MadeBy::Generated {
                by: generated.planner.to_owned(),
            });
            made.push(phase);
        }
        made
    }

    /// An `attempt` block of a `run` step (its own or its template's) that sets an agent: a step
    /// runs its command on every attempt. (`defaults`' agent applies to agent phases only.)
    fn agent_in_run_step(&mut self, attempts: &[AttemptBlock], phase: &str, run: Span) {
        for block in attempts.iter().filter(|b| b.from != BlockOrigin::Defaults) {
            let Some(agent) = &block.agent else { continue };
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::AGENT_AND_RUN,
                    agent.span,
                    format!(
                        "phase \"{phase}\" is a `run` step: its `attempt {}` block cannot set an agent",
                        block.range.value
                    ),
                )
                .label("`agent` here")
                .note(run, "`run` here"),
            );
        }
    }

    /// A `matches`/`absent` gate on the response in a `run` step, which has no agent response.
    fn response_in_run_step(&mut self, gate: &Gate, phase: &str, run: Span) {
        let kind = match &gate.kind {
            GateKind::Matches { target, .. } if target == "response" => "matches",
            GateKind::Absent { target, .. } if target == "response" => "absent",
            _ => return,
        };
        self.diagnostics.push(
            Diagnostic::new(
                &rules::RESPONSE_IN_RUN_STEP,
                first_argument(self.sources, gate.span).unwrap_or(gate.span),
                format!(
                    "phase \"{phase}\" is a `run` step: it has no agent response for `{kind} \"response\"` to check, so the gate fails on every run"
                ),
            )
            .label("no response in a `run` step")
            .note(run, "a `run` step"),
        );
    }

    /// The parameter values a phase gives its template, with missing and unknown ones reported.
    fn template_params(
        &mut self,
        node: &KdlNode,
        file: FileId,
        template: &TemplateDef,
        use_span: Span,
    ) -> BTreeMap<String, String> {
        let mut values = BTreeMap::new();
        for entry in node.entries() {
            let Some(key) = entry.name() else { continue };
            if key.value() == "use" {
                continue;
            }
            let key_span = Span::from_miette(file, key.span());
            if !template.params.iter().any(|(p, _, _)| p == key.value()) {
                let names: Vec<&str> = template.params.iter().map(|(p, _, _)| p.as_str()).collect();
                let mut d = Diagnostic::new(
                    &rules::UNKNOWN_TEMPLATE_PARAMETER,
                    key_span,
                    format!(
                        "template \"{}\" has no parameter `{}`",
                        template.name.value,
                        key.value()
                    ),
                )
                .label("unknown parameter")
                .note(template.name.span, "template defined here");
                if let Some(s) = did_you_mean(key.value(), names.iter().copied()) {
                    d = d.help(format!("did you mean `{s}`?")).fix(
                        format!("rename to `{s}`"),
                        key_span,
                        s,
                    );
                } else if !names.is_empty() {
                    d = d.help(format!("its parameters are: {}", names.join(", ")));
                } else {
                    d = d.help("the template declares no parameters");
                }
                self.diagnostics.push(d);
                continue;
            }
            let value = match entry.value() {
                kdl::KdlValue::String(s) => s.clone(),
                other => other.to_string(),
            };
            values.insert(key.value().to_owned(), value);
        }
        for (param, default, declared) in &template.params {
            if values.contains_key(param) {
                continue;
            }
            match default {
                Some(default) => {
                    values.insert(param.clone(), default.clone());
                }
                None => self.diagnostics.push(
                    Diagnostic::new(
                        &rules::MISSING_TEMPLATE_PARAMETER,
                        use_span,
                        format!(
                            "template \"{}\" needs the parameter `{param}`",
                            template.name.value
                        ),
                    )
                    .label(format!("missing {param}="))
                    .note(*declared, "declared here without a default")
                    .help(format!("add `{param}=\"…\"` to the phase")),
                ),
            }
        }
        values
    }
}

/// A phase's `attempt` blocks, from `defaults`, its template and itself: each prompt checked
/// against the phase's variables (`vars`) and the block's own.
fn attempt_blocks(
    decoder: &mut Decoder<'_>,
    (phase, items): (&str, bool),
    body: &Body,
    vars: &BTreeMap<String, String>,
    uses: &mut UsesCache,
) -> Vec<AttemptBlock> {
    body.attempts
        .iter()
        .map(|decl| {
            let mut block = decl.block.clone();
            if let Some(prompt) = &decl.prompt {
                let mut vars = vars.clone();
                vars.extend(block.vars.clone());
                block.prompt_includes = decoder.check_prompt(phase, prompt, &vars, items, uses);
                block.prompt = Some(prompt.prompt.value.clone());
            }
            block
        })
        .collect()
}

/// Whether a file without a `pipeline` is a library for `import`: it defines agents, templates
/// or imports, and nothing that belongs to a pipeline (`phase`, `defaults`).
fn is_library(document: &KdlDocument) -> bool {
    let has = |name: &'static str| nodes_named(document, name).next().is_some();
    !has("pipeline")
        && !has("phase")
        && !has("defaults")
        && (has("agent") || has("template") || has("import"))
}

pub(super) fn nodes_named<'d>(
    document: &'d KdlDocument,
    name: &'static str,
) -> impl Iterator<Item = &'d KdlNode> {
    document
        .nodes()
        .iter()
        .filter(move |n| n.name().value() == name)
}

fn pipeline_setting<'n>(node: &'n KdlNode, name: &str) -> Option<&'n KdlNode> {
    node.children()?
        .nodes()
        .iter()
        .rev()
        .find(|n| n.name().value() == name)
}

fn first_string(node: &KdlNode) -> Option<String> {
    positional(node)
        .next()?
        .value()
        .as_string()
        .map(str::to_owned)
}

fn duplicate(kind: &str, name: &Spanned<String>, first: Span) -> Diagnostic {
    Diagnostic::new(
        &rules::DUPLICATE_NAME,
        name.span,
        format!("{kind} \"{}\" is defined twice", name.value),
    )
    .label("second definition")
    .note(first, "first defined here")
}

/// The text of a node as written in its file.
fn node_text<'s>(sources: &'s Sources, file: FileId, node: &KdlNode) -> &'s str {
    let span = node.span();
    sources
        .get(file)
        .text
        .get(span.offset()..span.offset() + span.len())
        .unwrap_or_default()
}

/// Where the first argument of the node at `node` is written: the model keeps a gate's node span
/// only, and a diagnostic points at the exact entry.
fn first_argument(sources: &Sources, node: Span) -> Option<Span> {
    let text = sources.get(node.file).text.get(node.offset..node.end())?;
    let document = parse::parse(text, node.file, parse::PARSE_BUDGET).ok()?;
    let entry = positional(document.nodes().first()?).next()?;
    let span = value_span(node.file, entry);
    Some(Span::new(node.file, node.offset + span.offset, span.len))
}
