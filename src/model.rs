//! The checked pipeline: plain data, produced by the language layer and consumed by the graph and the
//! engine. Serialized by `helixflow compile`; `schema/pipeline.schema.json` is generated from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diagnostics::Span;
use crate::redact::Redactor;

/// A value with the place it was written. Serializes as the bare value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: Span,
}

impl<T> Spanned<T> {
    /// Pairs a value with its span.
    pub fn new(value: T, span: Span) -> Self {
        Self { value, span }
    }
}

impl<T: Serialize> Serialize for Spanned<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

/// Read back from its bare value (a compiled pipeline kept in the state folder): the place it was
/// written is not kept, and nothing after compiling points at it.
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(|value| Spanned::new(value, Span::default()))
    }
}

impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

/// A duration, kept as whole milliseconds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// As a standard duration.
    pub fn duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0)
    }
}

/// A whole pipeline, with imports, templates and defaults applied.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Pipeline {
    /// The pipeline's name.
    pub name: String,
    /// Shown in reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The file this pipeline was read from.
    pub file: PathBuf,
    /// Root of every relative path and the agents' working directory.
    pub workspace: PathBuf,
    /// Phases running at once.
    pub max_parallel: u32,
    /// Retries shared by all phases of one run; none means unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_budget: Option<u32>,
    /// Limit for the whole run, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "timeout-ms"
    )]
    pub timeout: Option<Millis>,
    /// Where runs and state are kept, relative to the workspace.
    pub state_dir: PathBuf,
    /// Environment for every agent and gate.
    pub env: BTreeMap<String, String>,
    /// Environment variables whose values are redacted everywhere.
    pub secrets: Vec<String>,
    /// Files imported, directly or not, in the order they were loaded.
    pub imports: Vec<PathBuf>,
    /// Agents by name, from this file and its imports.
    pub agents: BTreeMap<String, Agent>,
    /// Phases in file order.
    // Shared: a run's table of phases begins as this list, without a copy.
    pub phases: std::sync::Arc<Vec<Phase>>,
    /// The most the run may spend, in US dollars: no attempt starts once it is spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// What a budget does when an attempt's cost is unknown.
    pub unknown_cost: UnknownCost,
    /// US dollars per million tokens, by model, for agents that report tokens but no dollars.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, Price>,
    /// The agents and templates imported from git repositories, and where each came from.
    #[serde(default, skip_serializing_if = "RemoteDefinitions::is_empty")]
    pub remote: RemoteDefinitions,
    /// The compiled-pipeline cache entry this pipeline is, when a command has one: pipelines with
    /// the same entry are the same. Not part of the pipeline's JSON; a change made to the
    /// pipeline after it was compiled drops it.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) compiled_from: Option<CompiledFrom>,
}

/// The compiled-pipeline cache entry a pipeline was written to or read from
/// (`store::pipeline_cache`): what a command that takes the pipeline from the cache knows of it
/// at no cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompiledFrom {
    /// BLAKE3 of the entry's bytes (which hold the pipeline whole): the same for the same
    /// pipeline compiled by the same helixflow from the same inputs.
    pub digest: [u8; 32],
    /// The entry's file: what is kept of the pipeline beside it is named after it.
    pub entry: PathBuf,
}

/// Where an agent or template imported from a git repository came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct RemoteOrigin {
    /// The file imported: its repository, `//` and its path there
    /// (`git+https://github.com/acme/lib.git//agents.kdl`).
    pub import: String,
    /// The `rev` of the import, as written.
    pub rev: String,
    /// The commit it was read at.
    pub commit: String,
}

impl std::fmt::Display for RemoteOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.commit.get(..12).unwrap_or(&self.commit);
        write!(f, "{} rev \"{}\" (commit {short})", self.import, self.rev)
    }
}

/// The agents and templates imported from git repositories, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RemoteDefinitions {
    /// Agents, by name.
    pub agents: BTreeMap<String, RemoteOrigin>,
    /// Templates, by name.
    pub templates: BTreeMap<String, RemoteOrigin>,
}

impl RemoteDefinitions {
    /// Whether nothing came from a repository.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty() && self.templates.is_empty()
    }
}

/// What a `max-cost` budget does when the cost of an attempt is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownCost {
    /// No new attempt starts: the budget cannot be held.
    #[default]
    Fail,
    /// Attempts go on, with a warning; only the known costs count against the budget.
    Allow,
}

/// A model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Price {
    /// Per million input tokens not read from a cache.
    pub input: f64,
    /// Per million input tokens read from a cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Per million output tokens.
    pub output: f64,
}

/// Where an agent's output reports what it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum UsageFormat {
    /// Claude Code's final `result` event (`stream-json` or `json`): dollars, tokens, turns.
    Claude,
    /// Codex's `exec --json` `turn.completed` events: tokens, no dollars.
    Codex,
    /// Gemini CLI's `--output-format json` `stats`: tokens per model, no dollars.
    Gemini,
    /// Aider's `Tokens: … sent, … received. Cost: $… message, $… session.` lines.
    Aider,
    /// Fields of the last JSON object on standard output that has any of them, by dotted key.
    Json,
    /// Regexes over standard output and standard error: the first group of the last match.
    Regex,
}

impl UsageFormat {
    /// Every format.
    pub(crate) const ALL: [Self; 6] = [
        Self::Claude,
        Self::Codex,
        Self::Gemini,
        Self::Aider,
        Self::Json,
        Self::Regex,
    ];

    /// The format's name, as `usage` takes it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
            Self::Aider => "aider",
            Self::Json => "json",
            Self::Regex => "regex",
        }
    }

    /// The format with this name; `None` for a name no format has (lint reports it).
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.name() == name)
    }
}

/// How an agent's usage is read: the format, and for `json` and `regex` where each value is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct UsageSpec {
    /// Where the output reports usage.
    pub format: UsageFormat,
    /// The cost in US dollars (`json`: a dotted key; `regex`: a pattern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// Input tokens, cached ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<String>,
    /// Input tokens read from a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<String>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<String>,
    /// Turns taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<String>,
    /// The model priced when the output does not name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// What marks an agent's failed run as transient (tried again after a wait, without spending
/// retries) or fatal (not tried again): exit codes, and regexes over its reported error, its
/// standard error and the end of its standard output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub struct FailureMarkers {
    /// Exit codes of a transient failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transient_exit: Vec<i32>,
    /// Patterns of a transient failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transient_pattern: Vec<String>,
    /// Exit codes of a fatal failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fatal_exit: Vec<i32>,
    /// Patterns of a fatal failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fatal_pattern: Vec<String>,
}

impl FailureMarkers {
    /// Whether no marker is declared.
    pub fn is_empty(&self) -> bool {
        self.transient_exit.is_empty()
            && self.transient_pattern.is_empty()
            && self.fatal_exit.is_empty()
            && self.fatal_pattern.is_empty()
    }
}

impl Pipeline {
    /// The redactor of a run: for each `secret` name, every value it is given — by helixflow's
    /// environment and by the `env` of the pipeline, of any agent or of any phase — since each of
    /// those reaches some child's environment and so can show up in what it prints.
    pub fn redactor(&self) -> Redactor {
        let mut values: Vec<(String, String)> = Vec::new();
        for name in &self.secrets {
            let inherited = std::env::var(name).ok();
            let set = std::iter::once(&self.env)
                .chain(self.agents.values().map(|agent| &agent.env))
                .chain(self.phases.iter().map(|phase| &phase.env))
                .filter_map(|env| env.get(name).cloned());
            values.extend(inherited.into_iter().chain(set).map(|v| (name.clone(), v)));
        }
        Redactor::new(values)
    }
}

impl Agent {
    /// The arguments that pass a phase's `max-turns` to this agent's CLI, when it takes one.
    pub fn turn_limit_args(&self, max_turns: Option<u32>) -> Vec<String> {
        match (&self.max_turns_option, max_turns) {
            (Some(option), Some(turns)) => vec![option.clone(), turns.to_string()],
            _ => Vec::new(),
        }
    }
}

/// The identity of a phase of one pipeline: its place in `Pipeline::phases`, or past them, its
/// place among the phases a run made (items of `for-each` phases, generated phases). Only the
/// pipeline and the run's table of phases hand them out, so a `PhaseId` always names a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PhaseId(usize);

impl PhaseId {
    /// The phase's place in `Pipeline::phases`, for tables indexed like it.
    pub(crate) fn index(self) -> usize {
        self.0
    }

    /// The id of the phase at `index` of a run's table of phases (which starts with the
    /// pipeline's).
    pub(crate) fn from_table(index: usize) -> PhaseId {
        PhaseId(index)
    }
}

impl Pipeline {
    /// The phase with this name.
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name.value == name)
    }

    /// Every phase's id, in file order.
    pub(crate) fn phase_ids(&self) -> impl Iterator<Item = PhaseId> + use<> {
        (0..self.phases.len()).map(PhaseId)
    }

    /// The phases a run selects: those named in `only`, or every phase when it is empty. Naming
    /// an item (`migrate[parser]`) selects its `for-each` phase (which then makes that item only).
    pub(crate) fn select(&self, only: &[String]) -> Vec<PhaseId> {
        self.phase_ids()
            .filter(|&id| {
                let name = &self[id].name.value;
                only.is_empty()
                    || only.contains(name)
                    || only
                        .iter()
                        .any(|o| split_item_name(o).is_some_and(|(of, _)| of == name))
            })
            .collect()
    }

    /// Whether `name` names a phase: one of the pipeline's, or an item of a `for-each` phase
    /// (`migrate[parser]`), whose items are known only once it runs.
    pub fn names_phase(&self, name: &str) -> bool {
        self.phase(name).is_some()
            || split_item_name(name).is_some_and(|(of, key)| {
                !key.is_empty() && self.phase(of).is_some_and(|p| p.for_each.is_some())
            })
    }
}

impl std::ops::Index<PhaseId> for Pipeline {
    type Output = Phase;

    fn index(&self, id: PhaseId) -> &Phase {
        &self.phases[id.0]
    }
}

/// How the agent's final response is taken from its standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ResponseFormat {
    /// All of standard output.
    #[default]
    Text,
    /// Standard output is one JSON document.
    Json,
    /// The final `result` event of Claude Code's `--output-format stream-json`.
    ClaudeStreamJson,
    /// The last `agent_message` of Codex's `exec --json` event stream.
    CodexJson,
}

impl ResponseFormat {
    /// Every format.
    pub(crate) const ALL: [Self; 4] = [
        Self::Text,
        Self::Json,
        Self::ClaudeStreamJson,
        Self::CodexJson,
    ];

    /// The format's name, as `response` takes it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
            Self::ClaudeStreamJson => "claude-stream-json",
            Self::CodexJson => "codex-json",
        }
    }

    /// The format with this name; `None` for a name no format has (lint reports it).
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.name() == name)
    }

    /// Whether the format is an event stream in which tool calls and their results can be told
    /// apart, so that `evidence-tools` can count the calls that succeeded.
    pub fn shows_tool_calls(self) -> bool {
        matches!(
            self,
            ResponseFormat::ClaudeStreamJson | ResponseFormat::CodexJson
        )
    }
}

/// How helixflow learns the id of the session an agent's CLI chose or confirmed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SessionCapture {
    /// The first JSON line of standard output with a top-level string field of this name.
    Json(String),
    /// The first match of this regex in standard output (its first group, when it has one).
    Regex(String),
}

/// A command-line agent.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Agent {
    /// The agent's name.
    pub name: Spanned<String>,
    /// The file it was defined in.
    pub file: PathBuf,
    /// argv with `{{ … }}` placeholders inside single arguments.
    pub command: Vec<String>,
    /// argv for retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<String>>,
    /// Whether the prompt goes to standard input.
    pub stdin: bool,
    /// How the response is extracted.
    pub response: ResponseFormat,
    /// A regex the transcript must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// Tool calls that must have succeeded, by tool name (empty: any tool); `None` when not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_tools: Option<Vec<String>>,
    /// How the session id the CLI reports is read from its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionCapture>,
    /// Globs of files the agent keeps for itself (histories, caches): `scope` and `changes`
    /// ignore them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bookkeeping: Vec<String>,
    /// A regex over the agent's final response by which it declares that nothing needed
    /// changing: an attempt that changed nothing then passes a `changes` gate, when every other
    /// gate of the phase passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_change: Option<String>,
    /// The option the CLI takes a turn limit with (`--max-turns`): a phase's `max-turns N` is
    /// passed as this option and `N` after the rest of the argv.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns_option: Option<String>,
    /// Wall-clock limit per run of the agent, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "timeout-ms"
    )]
    pub timeout: Option<Millis>,
    /// Longest time without output, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "idle-timeout-ms"
    )]
    pub idle_timeout: Option<Millis>,
    /// How the usage the agent reports is read; `None`: its cost is unknown (unless `cost_usd`
    /// declares it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageSpec>,
    /// What each run of the agent costs, in US dollars, whatever its output reports: `0` for a
    /// script, a local model or a flat-rate plan. `None`: the cost is what `usage` reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// What marks a failure as transient or fatal.
    #[serde(default, skip_serializing_if = "FailureMarkers::is_empty")]
    pub failures: FailureMarkers,
    /// Environment added for this agent.
    pub env: BTreeMap<String, String>,
}

/// A phase's prompt.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Prompt {
    /// Written in the pipeline.
    Inline(String),
    /// Read from a file relative to the workspace.
    File {
        /// The file, relative to the workspace.
        path: PathBuf,
        /// Its text at compile time, shared by every phase that names the file.
        text: std::sync::Arc<str>,
    },
}

impl Prompt {
    /// The template text.
    pub fn text(&self) -> &str {
        match self {
            Prompt::Inline(text) => text,
            Prompt::File { text, .. } => text,
        }
    }
}

/// One expected output.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Output {
    /// One file.
    File {
        /// Path relative to the workspace.
        path: String,
    },
    /// At least `min` files matching a pattern.
    Glob {
        /// Glob relative to the workspace.
        pattern: String,
        /// Fewest matches.
        min: u32,
    },
    /// The paths listed under a key of a document's front matter.
    From {
        /// The Markdown or YAML document.
        doc: String,
        /// Dotted key, e.g. `files.create`.
        key: String,
    },
}

/// One declared input of a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Input {
    /// One file (absent is a state too).
    File {
        /// Path relative to the workspace.
        path: String,
    },
    /// Every file matching a pattern.
    Glob {
        /// Glob relative to the workspace.
        pattern: String,
    },
}

/// How a phase's work is verified.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum VerifyMode {
    /// The agent runs `helixflow verify` and must leave a passing receipt.
    #[serde(rename = "self")]
    SelfCheck,
    /// helixflow runs every gate after the agent exits.
    External,
    /// A separate verifier agent judges the work.
    SubAgent,
}

/// The kind of a gate and its settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum GateKind {
    /// Every output (or every file matching the globs) parses.
    Syntax {
        /// Globs; empty means the phase's outputs.
        globs: Vec<String>,
    },
    /// A shell command exits 0.
    Command {
        /// Run with `sh -c`.
        run: String,
        /// Limit in milliseconds.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            rename = "timeout-ms"
        )]
        timeout: Option<Millis>,
        /// Working directory relative to the workspace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// Run once when the command fails, before checking again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fix: Option<String>,
    },
    /// A regex matches the response or files.
    Matches {
        /// `response`, or a path or glob.
        target: String,
        /// The regex.
        pattern: String,
    },
    /// A regex matches nowhere in the response or files.
    Absent {
        /// `response`, or a path or glob.
        target: String,
        /// The regex.
        pattern: String,
    },
    /// A Markdown file's front matter has every key.
    FrontMatter {
        /// The Markdown file.
        path: String,
        /// Dotted keys.
        keys: Vec<String>,
    },
    /// A Markdown file has every heading.
    Sections {
        /// The Markdown file.
        path: String,
        /// Heading texts.
        headings: Vec<String>,
    },
    /// Every path listed under a front-matter key exists.
    PathsExist {
        /// The document.
        doc: String,
        /// Dotted key.
        key: String,
    },
    /// The attempt changed at least `min` files.
    Changes {
        /// Fewest changed files.
        min: u32,
    },
    /// A person approved.
    Approval {
        /// The question asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
    },
}

/// One check of a phase's work.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Gate {
    /// Name used in reports (default: the kind).
    pub name: String,
    /// What is checked.
    #[serde(flatten)]
    pub kind: GateKind,
    /// Where the gate was written.
    #[serde(skip)]
    pub span: Span,
}

/// What happens when a phase finally fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Start no new phases.
    #[default]
    Stop,
    /// Go on with the phases that do not depend on this one.
    Continue,
}

/// Where a phase's attempts work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// In the workspace itself.
    #[default]
    Shared,
    /// Each attempt in a git worktree of its own; a passing attempt's changes are applied back.
    Worktree,
}

/// Who does a phase's work.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Worker {
    /// An agent, by name.
    Agent(Spanned<String>),
    /// A shell command step.
    Run(String),
}

/// One unit of work.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Phase {
    /// The phase's name.
    pub name: Spanned<String>,
    /// The template it was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Shown in reports and the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who does the work.
    pub worker: Worker,
    /// The prompt template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Prompt>,
    /// The templates the prompt includes, imports or extends, by the name it uses (a path relative
    /// to the workspace), read when the pipeline was compiled, as the prompt file itself is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompt_includes: BTreeMap<String, std::sync::Arc<str>>,
    /// Extra prompt variables (template parameters included).
    pub vars: BTreeMap<String, String>,
    /// Phases that must pass first.
    pub depends_on: Vec<Spanned<String>>,
    /// Expected files.
    pub outputs: Vec<Output>,
    /// Files the work depends on; `None`: the outputs of its dependencies and its prompt file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Input>>,
    /// Never up to date: runs in every run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always_run: bool,
    /// The only files this phase may change.
    pub scope: Vec<String>,
    /// Files that must stay byte-identical.
    pub protect: Vec<String>,
    /// Checks after the implicit `outputs` gate.
    pub gates: Vec<Gate>,
    /// Stop at the first failing gate.
    pub fail_fast: bool,
    /// Verify modes in the order they run.
    pub verify: Vec<VerifyMode>,
    /// The verifier agent for `sub-agent` mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<Spanned<String>>,
    /// Extra instructions for the verifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier_prompt: Option<Prompt>,
    /// Retries after the first attempt.
    pub retries: u32,
    /// Wait before each retry, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "backoff-ms"
    )]
    pub backoff: Option<Millis>,
    /// Limit per attempt, in milliseconds (overrides the agent's).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "timeout-ms"
    )]
    pub timeout: Option<Millis>,
    /// What a final failure does to the run.
    pub on_failure: OnFailure,
    /// Where the attempts work.
    #[serde(default, skip_serializing_if = "is_shared")]
    pub isolation: Isolation,
    /// Ignored files an isolated attempt's worktree gets a copy of (globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worktree_include: Vec<String>,
    /// Ignored folders an isolated attempt sees read only, without a copy (globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worktree_share: Vec<String>,
    /// Run when the phase finally fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate: Option<String>,
    /// The most this phase's attempts may spend, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// Tries after a transient failure, which spend neither `retries` nor the `retry-budget`.
    pub transient_retries: u32,
    /// The most turns one attempt's agent may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Longest time without output per attempt, in milliseconds, overriding the agent's: set by
    /// an `attempt` block only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "idle-timeout-ms"
    )]
    pub idle_timeout: Option<Millis>,
    /// Environment added for this phase.
    pub env: BTreeMap<String, String>,
    /// Settings for some attempts of the work (`attempt N { … }`), from `defaults`, the template
    /// and the phase, in that order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<AttemptBlock>,
    /// `for-each`: the phase is a template, made at run time into one phase per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
    /// `generates PATH`: the phase writes a KDL file of `phase` nodes that join the run once it
    /// passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generates: Option<String>,
    /// What made this phase at run time: the item of a `for-each` phase, or the phase whose
    /// `generates` file declared it. `None` for a phase of the pipeline file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub made_by: Option<MadeBy>,
    /// Where some settings were written, for diagnostics.
    #[serde(skip)]
    #[schemars(skip)]
    pub spans: PhaseSpans,
}

/// Which attempts of the work an `attempt` block covers: from `first` to `last`, or from `first`
/// on. Written `2`, `"3.."` or `"2..4"`, and serialized so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptRange {
    /// The first attempt covered, from 1.
    pub first: u32,
    /// The last attempt covered; `None`: every later one.
    pub last: Option<u32>,
}

impl AttemptRange {
    /// Whether attempt `n` of the work is covered.
    pub fn contains(self, n: u32) -> bool {
        n >= self.first && self.last.is_none_or(|last| n <= last)
    }

    /// Whether some attempt is covered by both.
    pub fn overlaps(self, other: AttemptRange) -> bool {
        let ends_before = |a: AttemptRange, b: AttemptRange| a.last.is_some_and(|l| l < b.first);
        !ends_before(self, other) && !ends_before(other, self)
    }
}

impl std::fmt::Display for AttemptRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.last {
            Some(last) if last == self.first => write!(f, "{last}"),
            Some(last) => write!(f, "{}..{last}", self.first),
            None => write!(f, "{}..", self.first),
        }
    }
}

impl Serialize for AttemptRange {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::str::FromStr for AttemptRange {
    type Err = String;

    /// Reads a range as written: `2`, `"3.."`, `"2..4"`; the reason when it cannot be read.
    fn from_str(text: &str) -> Result<AttemptRange, String> {
        let number = |part: &str| -> Result<u32, String> {
            let part = part.trim();
            match part.parse::<u32>() {
                Ok(0) => Err("attempts count from 1".to_owned()),
                Ok(n) => Ok(n),
                Err(_) => Err(format!("`{part}` is not an attempt number")),
            }
        };
        let Some((first, last)) = text.split_once("..") else {
            let n = number(text)?;
            return Ok(AttemptRange {
                first: n,
                last: Some(n),
            });
        };
        let first = number(first)?;
        if last.trim().is_empty() {
            return Ok(AttemptRange { first, last: None });
        }
        let last = number(last)?;
        if last < first {
            return Err(format!(
                "the range ends ({last}) before it starts ({first})"
            ));
        }
        Ok(AttemptRange {
            first,
            last: Some(last),
        })
    }
}

impl<'de> Deserialize<'de> for AttemptRange {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for AttemptRange {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AttemptRange".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Attempts of the work: `2`, `3..` (3 and later) or `2..4`.",
            "type": "string",
            "pattern": "^[1-9][0-9]*(\\.\\.([1-9][0-9]*)?)?$"
        })
    }
}

/// Where an `attempt` block was written.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum BlockOrigin {
    /// In `defaults`: for every phase.
    Defaults,
    /// In the template the phase is made from.
    Template,
    /// In the phase itself.
    Phase,
}

/// An `attempt` block: settings for some attempts of a phase's work, over the phase's own.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct AttemptBlock {
    /// The attempts it covers.
    pub range: Spanned<AttemptRange>,
    /// Where it was written.
    pub from: BlockOrigin,
    /// The agent of these attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Spanned<String>>,
    /// Their prompt template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Prompt>,
    /// The templates that prompt includes, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompt_includes: BTreeMap<String, std::sync::Arc<str>>,
    /// Prompt variables added to the phase's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, String>,
    /// The most turns each of these attempts may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Limit per attempt, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "timeout-ms"
    )]
    pub timeout: Option<Millis>,
    /// Longest time without output, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "idle-timeout-ms"
    )]
    pub idle_timeout: Option<Millis>,
    /// Environment added to the phase's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The verifier of these attempts, in `sub-agent` mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<Spanned<String>>,
    /// Extra instructions for that verifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier_prompt: Option<Prompt>,
    /// Wait before each of these attempts, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "backoff-ms"
    )]
    pub backoff: Option<Millis>,
}

impl AttemptBlock {
    /// The block as reports name it: `3..`, or `defaults 3..` / `template 3..` where it was not
    /// written in the phase.
    pub fn label(&self) -> String {
        match self.from {
            BlockOrigin::Phase => self.range.value.to_string(),
            BlockOrigin::Defaults => format!("defaults {}", self.range.value),
            BlockOrigin::Template => format!("template {}", self.range.value),
        }
    }

    /// What the block sets, in words: `agent "claude-opus", max-turns 80`.
    pub fn settings(&self) -> Vec<String> {
        let ms = |m: Millis| humantime::format_duration(m.duration()).to_string();
        let prompt = |p: &Prompt| match p {
            Prompt::Inline(_) => "an inline prompt".to_owned(),
            Prompt::File { path, .. } => format!("prompt {}", path.display()),
        };
        let mut out = Vec::new();
        out.extend(self.agent.iter().map(|a| format!("agent \"{}\"", a.value)));
        out.extend(self.prompt.iter().map(prompt));
        if !self.vars.is_empty() {
            let names: Vec<&str> = self.vars.keys().map(String::as_str).collect();
            out.push(format!("vars {}", names.join(", ")));
        }
        out.extend(self.max_turns.map(|n| format!("max-turns {n}")));
        out.extend(self.timeout.map(|t| format!("timeout {}", ms(t))));
        out.extend(self.idle_timeout.map(|t| format!("idle-timeout {}", ms(t))));
        if !self.env.is_empty() {
            let names: Vec<&str> = self.env.keys().map(String::as_str).collect();
            out.push(format!("env {}", names.join(", ")));
        }
        out.extend(
            self.verifier
                .iter()
                .map(|v| format!("verifier \"{}\"", v.value)),
        );
        if self.verifier_prompt.is_some() {
            out.push("verifier-prompt".to_owned());
        }
        out.extend(self.backoff.map(|t| format!("backoff {}", ms(t))));
        out
    }
}

impl Phase {
    /// The `attempt` blocks that cover attempt `n` of the work, in the order they apply:
    /// `defaults`, the template, the phase (each later one wins where it sets something).
    pub fn blocks_for(&self, n: u32) -> Vec<&AttemptBlock> {
        let mut blocks: Vec<&AttemptBlock> = self
            .attempts
            .iter()
            .filter(|b| b.range.value.contains(n))
            .collect();
        blocks.sort_by_key(|b| b.from);
        blocks
    }

    /// The phase as attempt `n` of its work runs it: its own settings with those of the
    /// `attempt` blocks that cover `n` on top. A `run` step keeps its command: an agent set by
    /// a block applies to agent phases only.
    pub fn for_attempt(&self, n: u32) -> std::borrow::Cow<'_, Phase> {
        let blocks = self.blocks_for(n);
        if blocks.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut phase = self.clone();
        for block in blocks {
            if let (Some(agent), Worker::Agent(_)) = (&block.agent, &phase.worker) {
                phase.worker = Worker::Agent(agent.clone());
            }
            if let Some(prompt) = &block.prompt {
                phase.prompt = Some(prompt.clone());
                phase.prompt_includes.clone_from(&block.prompt_includes);
            }
            phase.vars.extend(block.vars.clone());
            phase.env.extend(block.env.clone());
            let or = |mine: &mut Option<Millis>, theirs: Option<Millis>| {
                if theirs.is_some() {
                    *mine = theirs;
                }
            };
            or(&mut phase.timeout, block.timeout);
            or(&mut phase.idle_timeout, block.idle_timeout);
            or(&mut phase.backoff, block.backoff);
            if block.max_turns.is_some() {
                phase.max_turns = block.max_turns;
            }
            if block.verifier.is_some() {
                phase.verifier.clone_from(&block.verifier);
            }
            if block.verifier_prompt.is_some() {
                phase.verifier_prompt.clone_from(&block.verifier_prompt);
            }
        }
        std::borrow::Cow::Owned(phase)
    }

    /// The agent that does the work, by name; `None` for a `run` step.
    pub fn agent_name(&self) -> Option<&str> {
        match &self.worker {
            Worker::Agent(name) => Some(&name.value),
            Worker::Run(_) => None,
        }
    }
}

/// Where the items of a `for-each` phase come from, and how many of them run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct ForEach {
    /// The items.
    pub source: ItemSource,
    /// More items than this fail the phase before any item starts.
    pub max_items: u32,
    /// At most this many items of the phase at once (the run's limit still applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
}

/// The default of `max-items`.
pub const DEFAULT_MAX_ITEMS: u32 = 100;

/// Where the items of a `for-each` phase come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ItemSource {
    /// A JSON array of objects or strings, read when the phase becomes ready.
    Json {
        /// The file, relative to the workspace.
        path: String,
        /// The field of each object that is its key (strings are their own key).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
    /// One item per matching file (`path`, `stem`, `name`, `dir`); the key is the path.
    Glob {
        /// The glob, relative to the workspace.
        pattern: String,
    },
    /// A literal list of strings, each its own key.
    List {
        /// The items.
        items: Vec<String>,
    },
}

/// One item of a `for-each` phase, as its phase was made from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Item {
    /// Its key: unique among the items, part of the phase's name (`migrate[KEY]`).
    pub key: String,
    /// Its place in the list, from 0.
    pub index: usize,
    /// The value: a string, or an object.
    pub value: serde_json::Value,
}

/// What made a phase at run time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum MadeBy {
    /// An item of the `for-each` phase `of`.
    Item {
        /// The `for-each` phase.
        of: String,
        /// The item.
        item: Item,
    },
    /// The `generates` file of the phase `by`.
    Generated {
        /// The planner.
        by: String,
    },
}

impl Phase {
    /// The phase with no `fix` on its command gates: for a check that proves what is there and
    /// repairs nothing (`helixflow check`, the MCP server's `verify`).
    #[must_use]
    pub fn without_fixes(&self) -> Phase {
        let mut phase = self.clone();
        for gate in &mut phase.gates {
            if let GateKind::Command { fix, .. } = &mut gate.kind {
                *fix = None;
            }
        }
        phase
    }

    /// The item this phase was made for, when it is an item of a `for-each` phase.
    pub fn item(&self) -> Option<&Item> {
        match &self.made_by {
            Some(MadeBy::Item { item, .. }) => Some(item),
            _ => None,
        }
    }

    /// The `for-each` phase this one is an item of.
    pub fn item_of(&self) -> Option<&str> {
        match &self.made_by {
            Some(MadeBy::Item { of, .. }) => Some(of),
            _ => None,
        }
    }
}

/// The name of the phase made for item `key` of the `for-each` phase `of`: `of[key]`.
pub fn item_phase_name(of: &str, key: &str) -> String {
    format!("{of}[{key}]")
}

/// The `for-each` phase and the key of an item phase's name (`migrate[parser]`), when it is one.
pub fn split_item_name(name: &str) -> Option<(&str, &str)> {
    let inner = name.strip_suffix(']')?;
    let open = inner.rfind('[')?;
    Some((&inner[..open], &inner[open + 1..]))
}

/// Places of phase settings that later checks point at.
#[derive(Debug, Clone, Default)]
pub struct PhaseSpans {
    /// The `verify` node.
    pub verify: Option<Span>,
    /// Each `scope` glob, in order.
    pub scope: Vec<Span>,
    /// Each `protect` glob, in order.
    pub protect: Vec<Span>,
    /// The `isolation` node's value, where the phase, its template or `defaults` set it.
    pub isolation: Option<Span>,
    /// Each `worktree-include` glob, in order.
    pub worktree_include: Vec<Span>,
    /// Each `worktree-share` glob, in order.
    pub worktree_share: Vec<Span>,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_shared(isolation: &Isolation) -> bool {
    *isolation == Isolation::Shared
}

// ------------------------------------------------------------------------------------------
// The languages of the `syntax` gate: plain data, read by lint and by the gate.

/// Every file extension the syntax gate parses, and its language; lint's warning about `syntax`
/// gates that check nothing reads the same table.
pub const EXTENSIONS: &[(&str, Language)] = &[
    ("py", Language::Python),
    ("pyi", Language::Python),
    ("rs", Language::Rust),
    ("js", Language::JavaScript),
    ("mjs", Language::JavaScript),
    ("cjs", Language::JavaScript),
    ("jsx", Language::JavaScript),
    ("ts", Language::TypeScript),
    ("mts", Language::TypeScript),
    ("cts", Language::TypeScript),
    ("tsx", Language::Tsx),
    ("json", Language::Json),
    ("yaml", Language::Yaml),
    ("yml", Language::Yaml),
    ("toml", Language::Toml),
    ("sh", Language::Bash),
    ("bash", Language::Bash),
    ("go", Language::Go),
    ("kdl", Language::Kdl),
];

/// A language the syntax gate can parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// `.py`, `.pyi` (Python 3).
    Python,
    /// `.rs`
    Rust,
    /// `.js`, `.mjs`, `.cjs`, `.jsx` (JSX included).
    JavaScript,
    /// `.ts`, `.mts`, `.cts`
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.json` (comments tolerated, as in `tsconfig.json`).
    Json,
    /// `.yaml`, `.yml`
    Yaml,
    /// `.toml`
    Toml,
    /// `.sh`, `.bash`
    Bash,
    /// `.go`
    Go,
    /// `.kdl` (v2, or v1).
    Kdl,
}

impl Language {
    /// The language of a file, by its extension (case-sensitive, as on the file systems agents use).
    pub fn for_path(path: &Path) -> Option<Language> {
        let extension = path.extension()?.to_str()?;
        EXTENSIONS
            .iter()
            .find(|(e, _)| *e == extension)
            .map(|&(_, language)| language)
    }

    /// The language's usual name, e.g. `TypeScript`.
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "Python",
            Language::Rust => "Rust",
            Language::JavaScript => "JavaScript",
            Language::TypeScript => "TypeScript",
            Language::Tsx => "TSX",
            Language::Json => "JSON",
            Language::Yaml => "YAML",
            Language::Toml => "TOML",
            Language::Bash => "Bash",
            Language::Go => "Go",
            Language::Kdl => "KDL",
        }
    }

    /// Every language, in a fixed order.
    pub fn all() -> &'static [Language] {
        &[
            Language::Python,
            Language::Rust,
            Language::JavaScript,
            Language::TypeScript,
            Language::Tsx,
            Language::Json,
            Language::Yaml,
            Language::Toml,
            Language::Bash,
            Language::Go,
            Language::Kdl,
        ]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pipeline_s_secrets_take_every_value_they_are_given() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"pipeline "p" {
    secret "HELIXFLOW_TEST_KEY" "HELIXFLOW_TEST_MISSING" "HELIXFLOW_TEST_BLANK"
    env "HELIXFLOW_TEST_KEY" "k-42"
    env "HELIXFLOW_TEST_BLANK" ""
}
agent "bot" {
    command "bot" "{{ prompt }}"
    env "HELIXFLOW_TEST_KEY" "agent-k"
}
phase "a" {
    agent "bot"
    prompt "go"
    env "HELIXFLOW_TEST_KEY" "phase-k"
}
"#;
        let compiled = crate::language::compile(
            &dir.path().join("pipeline.kdl"),
            text,
            &crate::language::FsLoader,
            crate::language::Options::default(),
        );
        let pipeline = compiled.pipeline.expect("the pipeline compiles");
        let r = pipeline.redactor();
        assert_eq!(
            r.redact("use k-42, agent-k and phase-k; nothing else"),
            "use [REDACTED:HELIXFLOW_TEST_KEY], [REDACTED:HELIXFLOW_TEST_KEY] and \
             [REDACTED:HELIXFLOW_TEST_KEY]; nothing else"
        );
    }
}
