//! The schema table: every node of the pipeline language, where it may appear, its arguments,
//! properties, types and documentation. The decoder, `helixflow explain`, the exported
//! `schema/` files and the language server all read this one table.

use serde::Serialize;

/// A place where nodes appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Context {
    /// The top level of a file.
    TopLevel,
    /// Inside `pipeline { … }`.
    Pipeline,
    /// Inside `agent NAME { … }`.
    Agent,
    /// Inside `phase NAME { … }`.
    Phase,
    /// Inside `template NAME { … }`.
    Template,
    /// Inside `defaults { … }`.
    Defaults,
    /// Inside `outputs { … }`.
    Outputs,
    /// Inside `inputs { … }`.
    Inputs,
    /// Inside `gates { … }`.
    Gates,
    /// Inside `vars { … }`: any name, one value.
    Vars,
    /// Inside `attempt RANGE { … }`: settings for some attempts of the work.
    Attempt,
}

impl Context {
    /// How the place is written in messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Context::TopLevel => "the top level",
            Context::Pipeline => "`pipeline`",
            Context::Agent => "`agent`",
            Context::Phase => "`phase`",
            Context::Template => "`template`",
            Context::Defaults => "`defaults`",
            Context::Outputs => "`outputs`",
            Context::Inputs => "`inputs`",
            Context::Gates => "`gates`",
            Context::Vars => "`vars`",
            Context::Attempt => "`attempt`",
        }
    }
}

/// One allowed value of a [`ValueType::Choice`].
#[derive(Debug, Serialize)]
pub struct Choice {
    /// The value as written.
    pub value: &'static str,
    /// What it means.
    pub doc: &'static str,
}

/// The type of an argument or property value.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case", tag = "type", content = "of")]
pub enum ValueType {
    /// Any string.
    String,
    /// The name of a phase, agent or template.
    Name,
    /// An integer no smaller than the bound.
    Int(i64),
    /// A number no smaller than zero, with or without a fraction (an amount of US dollars).
    Number,
    /// `#true` or `#false`.
    Bool,
    /// A duration such as `"90s"` or `"1h 30m"`.
    Duration,
    /// A regular expression.
    Regex,
    /// A glob relative to the workspace.
    Glob,
    /// A path relative to the workspace (or, for `import`, to the importing file).
    Path,
    /// A shell command, run with `sh -c`.
    Shell,
    /// A `MiniJinja` template.
    Template,
    /// One of a fixed set of strings.
    Choice(&'static [Choice]),
    /// Attempts of the work: an integer ≥ 1, or a string `"N.."` or `"N..M"`.
    AttemptRange,
}

impl ValueType {
    /// How the type is written in messages.
    pub(crate) fn describe(self) -> String {
        match self {
            ValueType::String | ValueType::Shell | ValueType::Template => "a string".into(),
            ValueType::Name => "a name (string)".into(),
            ValueType::Int(min) => format!("an integer ≥ {min}"),
            ValueType::Number => "a number ≥ 0".into(),
            ValueType::Bool => "#true or #false".into(),
            ValueType::Duration => "a duration string such as \"90s\"".into(),
            ValueType::Regex => "a regular expression (string)".into(),
            ValueType::Glob => "a glob pattern (string)".into(),
            ValueType::Path => "a relative path (string)".into(),
            ValueType::Choice(choices) => {
                let values: Vec<_> = choices.iter().map(|c| format!("\"{}\"", c.value)).collect();
                format!("one of {}", values.join(", "))
            }
            ValueType::AttemptRange => "an attempt (2) or a range (\"3..\", \"2..4\")".into(),
        }
    }
}

/// A positional argument.
#[derive(Debug, Serialize)]
pub struct Arg {
    /// Placeholder used in docs, e.g. `NAME`.
    pub name: &'static str,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: ValueType,
    /// What it means.
    pub doc: &'static str,
}

/// A property (`key=value`).
#[derive(Debug, Serialize)]
pub struct Prop {
    /// The key.
    pub name: &'static str,
    /// The value's type.
    #[serde(rename = "type")]
    pub ty: ValueType,
    /// Whether the node needs it.
    pub required: bool,
    /// The default, as documentation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<&'static str>,
    /// What it means.
    pub doc: &'static str,
}

/// One node of the language in the places it may appear.
#[derive(Debug, Serialize)]
pub struct NodeSchema {
    /// The node name.
    pub name: &'static str,
    /// Where it may appear.
    pub contexts: &'static [Context],
    /// Positional arguments; with `variadic` the last one repeats.
    pub args: &'static [Arg],
    /// The fewest arguments.
    pub min_args: usize,
    /// Whether the last argument may repeat.
    pub variadic: bool,
    /// Properties.
    pub props: &'static [Prop],
    /// The context of its children, when it takes a `{ … }` block.
    pub children: Option<Context>,
    /// Whether the block is required.
    pub children_required: bool,
    /// Whether it may appear more than once in the same block.
    pub repeatable: bool,
    /// What it does (Markdown).
    pub doc: &'static str,
}

impl NodeSchema {
    /// The most arguments, if bounded.
    pub(crate) fn max_args(&self) -> Option<usize> {
        (!self.variadic).then_some(self.args.len())
    }

    /// The property with this name.
    pub(crate) fn prop(&self, name: &str) -> Option<&'static Prop> {
        self.props.iter().find(|p| p.name == name)
    }

    /// The schema of the `index`-th argument (the last one repeats when variadic).
    pub(crate) fn arg(&self, index: usize) -> Option<&'static Arg> {
        self.args
            .get(index)
            .or_else(|| self.variadic.then(|| self.args.last()).flatten())
    }

    /// A one-line signature such as `glob PATTERN [min=INT]`.
    pub fn signature(&self) -> String {
        let mut out = self.name.to_owned();
        for (i, arg) in self.args.iter().enumerate() {
            let optional = i >= self.min_args;
            let repeat = if self.variadic && i + 1 == self.args.len() {
                "…"
            } else {
                ""
            };
            if optional {
                out.push_str(&format!(" [{}{repeat}]", arg.name));
            } else {
                out.push_str(&format!(" {}{repeat}", arg.name));
            }
        }
        for prop in self.props {
            let value = prop.name.to_uppercase();
            if prop.required {
                out.push_str(&format!(" {}={value}", prop.name));
            } else {
                out.push_str(&format!(" [{}={value}]", prop.name));
            }
        }
        if self.children.is_some() {
            out.push_str(" { … }");
        }
        out
    }
}

/// The nodes allowed in `context`.
pub fn nodes_in(context: Context) -> impl Iterator<Item = &'static NodeSchema> {
    NODES.iter().filter(move |n| n.contexts.contains(&context))
}

/// The schema of `name` in `context`.
pub(crate) fn lookup(context: Context, name: &str) -> Option<&'static NodeSchema> {
    nodes_in(context).find(|n| n.name == name)
}

/// Every context in which a node named `name` may appear.
pub(crate) fn contexts_of(name: &str) -> Vec<Context> {
    NODES
        .iter()
        .filter(|n| n.name == name)
        .flat_map(|n| n.contexts.iter().copied())
        .collect()
}

/// Where phase children may appear: phases, templates and defaults.
const PHASE_LIKE: &[Context] = &[Context::Phase, Context::Template, Context::Defaults];
/// Where list-valued phase children that make no sense as defaults may appear.
const PHASE_OR_TEMPLATE: &[Context] = &[Context::Phase, Context::Template];
/// Where the settings an `attempt` block may change appear: phase-like blocks and `attempt`.
const PHASE_LIKE_OR_ATTEMPT: &[Context] = &[
    Context::Phase,
    Context::Template,
    Context::Defaults,
    Context::Attempt,
];
/// The nodes an `attempt` block may set, as its diagnostics list them.
pub(crate) const ATTEMPT_SETTINGS: &[&str] = &[
    "agent",
    "prompt",
    "vars",
    "max-turns",
    "timeout",
    "idle-timeout",
    "env",
    "verifier",
    "verifier-prompt",
    "backoff",
];

/// Verify modes.
pub(crate) const VERIFY_MODES: &[Choice] = &[
    Choice {
        value: "self",
        doc: "The agent runs `helixflow verify` before it finishes and must leave a passing receipt from this attempt, with the outputs unchanged since.",
    },
    Choice {
        value: "external",
        doc: "After the agent exits 0, helixflow runs every gate itself. The safety net, and the default.",
    },
    Choice {
        value: "sub-agent",
        doc: "A fresh verifier agent (see `verifier`) reviews the work and answers a JSON verdict.",
    },
    Choice {
        value: "both",
        doc: "`self` and `external`.",
    },
];

/// `isolation` values.
pub(crate) const ISOLATION: &[Choice] = &[
    Choice {
        value: "shared",
        doc: "Attempts work in the workspace itself, beside the phases running at the same time (the default).",
    },
    Choice {
        value: "worktree",
        doc: "Each attempt works in a git worktree of its own, made from the workspace as the phase's dependencies left it; only a passing attempt's changes are applied back. Needs a git repository.",
    },
];

/// `on-failure` values.
pub(crate) const ON_FAILURE: &[Choice] = &[
    Choice {
        value: "stop",
        doc: "Start no new phases; running ones finish their current attempt (the default).",
    },
    Choice {
        value: "continue",
        doc: "Go on with the phases that do not depend on the failed one.",
    },
];

/// `response` values.
pub(crate) const RESPONSE_FORMATS: &[Choice] = &[
    Choice {
        value: "text",
        doc: "The response is all of standard output (the default).",
    },
    Choice {
        value: "json",
        doc: "Standard output is one JSON document.",
    },
    Choice {
        value: "claude-stream-json",
        doc: "The final `result` event of Claude Code's `--output-format stream-json`.",
    },
    Choice {
        value: "codex-json",
        doc: "The last `agent_message` of Codex's `exec --json` events; `turn.failed` and `error` events are the agent's error.",
    },
];

/// Where an agent's output reports usage.
pub(crate) const USAGE_FORMATS: &[Choice] = &[
    Choice {
        value: "claude",
        doc: "Claude Code's final `result` event (`--output-format stream-json` or `json`): `total_cost_usd`, `usage` tokens, `num_turns`, `modelUsage`.",
    },
    Choice {
        value: "codex",
        doc: "Codex `exec --json`: the `usage` of every `turn.completed` event (tokens, no dollars: priced with `price`).",
    },
    Choice {
        value: "gemini",
        doc: "Gemini CLI `--output-format json`: the tokens per model in `stats.models` (no dollars: priced with `price`).",
    },
    Choice {
        value: "aider",
        doc: "Aider's `Tokens: … sent, … received. Cost: $… message, $… session.` lines.",
    },
    Choice {
        value: "json",
        doc: "The declared dotted keys (`cost=`, `input-tokens=`, …) of the last JSON object on standard output that has any of them.",
    },
    Choice {
        value: "regex",
        doc: "The declared patterns (`cost=`, `input-tokens=`, …) over standard output and standard error: the first group of each one's last match.",
    },
];

/// What a budget does with an unknown cost.
pub(crate) const UNKNOWN_COST: &[Choice] = &[
    Choice {
        value: "fail",
        doc: "No new attempt starts once an attempt's cost is unknown: the budget cannot be held (the default).",
    },
    Choice {
        value: "allow",
        doc: "Attempts go on, with a warning; only known costs count against the budget.",
    },
];

const fn arg(name: &'static str, ty: ValueType, doc: &'static str) -> Arg {
    Arg { name, ty, doc }
}

const fn prop(name: &'static str, ty: ValueType, doc: &'static str) -> Prop {
    Prop {
        name,
        ty,
        required: false,
        default: None,
        doc,
    }
}

const fn required(name: &'static str, ty: ValueType, doc: &'static str) -> Prop {
    Prop {
        name,
        ty,
        required: true,
        default: None,
        doc,
    }
}

const fn defaulted(
    name: &'static str,
    ty: ValueType,
    default: &'static str,
    doc: &'static str,
) -> Prop {
    Prop {
        name,
        ty,
        required: false,
        default: Some(default),
        doc,
    }
}

/// A node with the common fields defaulted; the table below fills in what differs.
const BASE: NodeSchema = NodeSchema {
    name: "",
    contexts: &[],
    args: &[],
    min_args: 0,
    variadic: false,
    props: &[],
    children: None,
    children_required: false,
    repeatable: false,
    doc: "",
};

const NAME_ARG: &[Arg] = &[arg(
    "NAME",
    ValueType::Name,
    "The name, unique within its kind.",
)];
const DURATION_ARG: &[Arg] = &[arg(
    "DURATION",
    ValueType::Duration,
    "A duration such as \"90s\", \"15m\" or \"1h 30m\".",
)];
const ENV_ARGS: &[Arg] = &[
    arg("NAME", ValueType::String, "The variable's name."),
    arg("VALUE", ValueType::String, "Its value."),
];
const STRING_ARG: &[Arg] = &[arg("STRING", ValueType::String, "The text.")];
/// The arguments of `matches` and `absent`.
const TARGET_AND_PATTERN: &[Arg] = &[
    arg(
        "TARGET",
        ValueType::String,
        "`\"response\"` (the agent's final response) or a path or glob.",
    ),
    arg("PATTERN", ValueType::Regex, "A regular expression."),
];
const GATE_NAME: Prop = prop(
    "name",
    ValueType::String,
    "The gate's name in reports (default: its kind).",
);

/// Every node of the language.
pub static NODES: &[NodeSchema] = &[
    // Top level.
    NodeSchema {
        name: "pipeline",
        contexts: &[Context::TopLevel],
        args: NAME_ARG,
        min_args: 1,
        children: Some(Context::Pipeline),
        // A second one is reported as HF121, not as a repeat.
        repeatable: true,
        doc: "Run-wide settings. Exactly one in the file given to `run` or `lint`; none in imported files.",
        ..BASE
    },
    NodeSchema {
        name: "import",
        contexts: &[Context::TopLevel],
        args: &[arg(
            "PATH",
            ValueType::Path,
            "A KDL file, relative to the importing file, else searched on HELIXFLOW_PATH; or a file of a git repository: `git+https://HOST/REPO.git//PATH/IN/REPO` (also `git+ssh://`, `git+file://`, `git+git://`).",
        )],
        min_args: 1,
        props: &[prop(
            "rev",
            ValueType::String,
            "For a file of a git repository (required there): the tag, branch or full commit SHA to read it at. `helixflow.lock` pins the commit it names; `helixflow lock --update` moves the pin.",
        )],
        repeatable: true,
        doc: "Load the `agent` and `template` nodes of another file. Resolved relative to the importing file, else on `HELIXFLOW_PATH` (`:`-separated folders). A file of a git repository (`git+https://…/lib.git//agents.kdl` with `rev=`) is read at the commit `helixflow.lock` pins, from the import cache or fetched with git; a relative import inside it is read from the same repository at the same commit.",
        ..BASE
    },
    NodeSchema {
        name: "agent",
        contexts: &[Context::TopLevel],
        args: NAME_ARG,
        min_args: 1,
        children: Some(Context::Agent),
        repeatable: true,
        doc: "A command-line agent (Claude Code, Codex, Aider, a script): how to start it and how to read its answer.",
        ..BASE
    },
    NodeSchema {
        name: "template",
        contexts: &[Context::TopLevel],
        args: NAME_ARG,
        min_args: 1,
        children: Some(Context::Template),
        children_required: true,
        repeatable: true,
        doc: "A reusable phase body with parameters. A phase uses it with `use=NAME` and gives the parameters as properties.",
        ..BASE
    },
    NodeSchema {
        name: "defaults",
        contexts: &[Context::TopLevel],
        children: Some(Context::Defaults),
        children_required: true,
        doc: "Phase settings applied to every phase that does not set them itself.",
        ..BASE
    },
    NodeSchema {
        name: "phase",
        contexts: &[Context::TopLevel],
        args: NAME_ARG,
        min_args: 1,
        props: &[prop(
            "use",
            ValueType::Name,
            "A template whose body this phase starts from; its parameters are given as further properties.",
        )],
        children: Some(Context::Phase),
        repeatable: true,
        doc: "One unit of work: who does it, what it must produce, and how that is verified.",
        ..BASE
    },
    // pipeline { … }
    NodeSchema {
        name: "description",
        contexts: &[Context::Pipeline, Context::Phase, Context::Template],
        args: STRING_ARG,
        min_args: 1,
        doc: "A description shown in reports (and, for phases, available to prompts as `description`).",
        ..BASE
    },
    NodeSchema {
        name: "workspace",
        contexts: &[Context::Pipeline],
        args: &[arg(
            "PATH",
            ValueType::String,
            "A folder, relative to the pipeline file.",
        )],
        min_args: 1,
        doc: "Root for every relative path and the agents' working directory. Default: the pipeline file's folder.",
        ..BASE
    },
    NodeSchema {
        name: "max-parallel",
        contexts: &[Context::Pipeline],
        args: &[arg(
            "INT",
            ValueType::Int(1),
            "How many phases may run at once.",
        )],
        min_args: 1,
        doc: "Phases running at once (default 4; `run --jobs N` overrides).",
        ..BASE
    },
    NodeSchema {
        name: "retry-budget",
        contexts: &[Context::Pipeline],
        args: &[arg(
            "INT",
            ValueType::Int(0),
            "Retries shared by all phases.",
        )],
        min_args: 1,
        doc: "Retries shared by all phases in one run; when spent, no phase retries again. Default: unlimited.",
        ..BASE
    },
    NodeSchema {
        name: "timeout",
        contexts: &[
            Context::Pipeline,
            Context::Agent,
            Context::Phase,
            Context::Template,
            Context::Defaults,
            Context::Attempt,
        ],
        args: DURATION_ARG,
        min_args: 1,
        doc: "A time limit: for the whole run (in `pipeline`), per run of an agent (in `agent`), or per attempt (in a phase, overriding the agent's).",
        ..BASE
    },
    NodeSchema {
        name: "state-dir",
        contexts: &[Context::Pipeline],
        args: &[arg(
            "PATH",
            ValueType::Path,
            "A folder inside the workspace.",
        )],
        min_args: 1,
        doc: "Where runs, logs and state are kept, inside the workspace. Default: `.helixflow`.",
        ..BASE
    },
    NodeSchema {
        name: "env",
        contexts: &[
            Context::Pipeline,
            Context::Agent,
            Context::Phase,
            Context::Template,
            Context::Defaults,
            Context::Attempt,
        ],
        args: ENV_ARGS,
        min_args: 2,
        repeatable: true,
        doc: "An environment variable for agents and gates. Pipeline, agent and phase `env` add to helixflow's environment, in that order.",
        ..BASE
    },
    NodeSchema {
        name: "secret",
        contexts: &[Context::Pipeline],
        args: &[arg(
            "NAME",
            ValueType::String,
            "An environment variable's name.",
        )],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "Environment variables whose values are redacted from every log, event and report.",
        ..BASE
    },
    NodeSchema {
        name: "max-cost",
        contexts: &[
            Context::Pipeline,
            Context::Phase,
            Context::Template,
            Context::Defaults,
        ],
        args: &[arg("USD", ValueType::Number, "US dollars.")],
        min_args: 1,
        doc: "A budget in US dollars: for the whole run (in `pipeline`), or for one phase's attempts. Before each attempt helixflow adds up what was spent; once it reaches the budget no new attempt starts (running ones finish: their work is paid for) and the phase fails, naming the budget and the spend. An unknown cost is handled per `unknown-cost`.",
        ..BASE
    },
    NodeSchema {
        name: "unknown-cost",
        contexts: &[Context::Pipeline],
        args: &[arg(
            "ACTION",
            ValueType::Choice(UNKNOWN_COST),
            "What a budget does with an unknown cost.",
        )],
        min_args: 1,
        doc: "What a `max-cost` budget does when an attempt's cost is unknown (the agent reports none and no `price` applies): `fail` (default) starts no new attempt, `allow` goes on with a warning, counting the known costs only.",
        ..BASE
    },
    NodeSchema {
        name: "price",
        contexts: &[Context::Pipeline],
        args: &[arg(
            "MODEL",
            ValueType::String,
            "The model's name as the agent reports it, or as its `usage model=` names it.",
        )],
        min_args: 1,
        props: &[
            required(
                "input",
                ValueType::Number,
                "US dollars per million input tokens.",
            ),
            prop(
                "cached-input",
                ValueType::Number,
                "US dollars per million input tokens read from a cache (default: `input`).",
            ),
            required(
                "output",
                ValueType::Number,
                "US dollars per million output tokens.",
            ),
        ],
        repeatable: true,
        doc: "A model's prices, for agents that report tokens but no dollars (Codex, Gemini CLI, Aider without a cost map): the cost of an attempt is its tokens at these prices. Without a price for its model, the cost is unknown, never zero.",
        ..BASE
    },
    // agent { … }
    NodeSchema {
        name: "command",
        contexts: &[Context::Agent],
        args: &[arg(
            "ARG",
            ValueType::String,
            "One argument; `{{ prompt }}`, `{{ prompt_file }}`, `{{ phase }}`, `{{ attempt }}`, `{{ workspace }}`, `{{ session_id }}` are replaced inside it.",
        )],
        min_args: 1,
        variadic: true,
        doc: "The agent's argv (never a shell string). Placeholders are replaced inside single arguments; everything else, `{%` and other `{{ … }}` included, is passed byte for byte. A prompt is never shell-interpreted. `{{ session_id }}` is a new UUID for each session helixflow starts (for CLIs that take one, e.g. `claude --session-id`). Linux limits one argument to 128 KiB: prefer `stdin #true` or `{{ prompt_file }}` to `{{ prompt }}`.",
        ..BASE
    },
    NodeSchema {
        name: "resume",
        contexts: &[Context::Agent],
        args: &[arg(
            "ARG",
            ValueType::String,
            "One argument; may use the placeholders of `command`, and `{{ feedback }}` and `{{ feedback_file }}`.",
        )],
        min_args: 1,
        variadic: true,
        doc: "argv for retries that continue the worker's own session of this run and phase: `{{ session_id }}` is the id the agent reported (`session-id`), else the id given to its `command`. A retry uses it only when there is a session to continue (with `session-id`: when the latest attempt's output reported one); otherwise it runs `command` with the full prompt and the feedback. `{{ feedback }}` is the previous attempt's feedback, cut to 64 KiB. Without `resume`, retries use `command` with the re-rendered prompt.",
        ..BASE
    },
    NodeSchema {
        name: "stdin",
        contexts: &[Context::Agent],
        args: &[arg(
            "BOOL",
            ValueType::Bool,
            "Whether the prompt goes to standard input.",
        )],
        doc: "Write the message to the agent's standard input instead of passing it in argv: the prompt for `command`, the feedback for `resume`. No size limit applies, and a prompt that starts with `-` is never read as an option.",
        ..BASE
    },
    NodeSchema {
        name: "response",
        contexts: &[Context::Agent],
        args: &[arg(
            "FORMAT",
            ValueType::Choice(RESPONSE_FORMATS),
            "How the response is read.",
        )],
        min_args: 1,
        doc: "How the final response text is taken from standard output (default `text`).",
        ..BASE
    },
    NodeSchema {
        name: "evidence",
        contexts: &[Context::Agent],
        args: &[arg(
            "REGEX",
            ValueType::Regex,
            "Matched against stdout and stderr, across lines.",
        )],
        min_args: 1,
        doc: "The agent's transcript (stdout and stderr, each searched as one text) must match this regex, else the attempt counts as skipped work. `\\n` matches a line break and `^`/`$` match at every line; a log is searched in 8 MiB windows that overlap by 1 MiB, so a match longer than 1 MiB may be missed where it crosses from one window into the next.",
        ..BASE
    },
    NodeSchema {
        name: "evidence-tools",
        contexts: &[Context::Agent],
        args: &[arg(
            "TOOL",
            ValueType::String,
            "A tool's name as the agent reports it (`Write`, `Edit`, `Bash`; for Codex `command_execution`, `file_change`).",
        )],
        variadic: true,
        doc: "The agent's transcript must show a tool call that succeeded (of one of the named tools, when names are given), else the attempt counts as skipped work. A call refused by a permission rule or that failed does not count. Needs `response \"claude-stream-json\"` or `\"codex-json\"`.",
        ..BASE
    },
    NodeSchema {
        name: "session-id",
        contexts: &[Context::Agent],
        props: &[
            prop(
                "json",
                ValueType::String,
                "The top-level field holding the id, in the first JSON line of standard output that has it (Claude Code `session_id`, Codex `thread_id`).",
            ),
            prop(
                "regex",
                ValueType::Regex,
                "A regex over standard output; its first group (or the whole match) is the id.",
            ),
        ],
        doc: "How helixflow reads the id of the session the agent's CLI started: a retry's `resume` continues exactly that session (`{{ session_id }}`), and when none was reported (the first attempt never reached the model) the retry starts over with `command` and the full prompt.",
        ..BASE
    },
    NodeSchema {
        name: "bookkeeping",
        contexts: &[Context::Agent],
        args: &[arg(
            "GLOB",
            ValueType::Glob,
            "Files the agent writes for itself, e.g. `.aider.chat.history.md`.",
        )],
        min_args: 1,
        variadic: true,
        doc: "Files the agent's CLI keeps for itself (histories, caches). `scope` and `changes` do not count them, a verifier that writes them is not voided for it (they are still undone), and each attempt's journal lists them in `bookkeeping.json`; `protect` still covers them.",
        ..BASE
    },
    NodeSchema {
        name: "no-change",
        contexts: &[Context::Agent],
        args: &[arg(
            "REGEX",
            ValueType::Regex,
            "Matched against the agent's final response, across lines.",
        )],
        min_args: 1,
        doc: "How the agent declares that there was nothing to change (e.g. `no-change \"NOTHING TO CHANGE\"`): an attempt whose response matches it and that changed nothing passes a `changes` gate, but only when every other gate of the phase passes. The journal and the summary record it as \"passed, nothing to change\". Without it, a re-run that changes nothing fails `changes` unless its earlier work is in place.",
        ..BASE
    },
    NodeSchema {
        name: "max-turns-option",
        contexts: &[Context::Agent],
        args: &[arg(
            "OPTION",
            ValueType::String,
            "The CLI's option for a turn limit, e.g. `--max-turns`.",
        )],
        min_args: 1,
        doc: "How the CLI takes a limit on its turns (Claude Code: `--max-turns`). A phase's `max-turns N` is then passed as `OPTION N` after the rest of `command` (and of `resume`), as well as checked by helixflow from the turns the agent reports.",
        ..BASE
    },
    NodeSchema {
        name: "usage",
        contexts: &[Context::Agent],
        args: &[arg(
            "FORMAT",
            ValueType::Choice(USAGE_FORMATS),
            "Where the output reports usage.",
        )],
        min_args: 1,
        props: &[
            prop(
                "cost",
                ValueType::String,
                "`json`: the dotted key of the cost in US dollars; `regex`: a pattern whose first group is it.",
            ),
            prop(
                "input-tokens",
                ValueType::String,
                "`json`: the dotted key of the input tokens (cached ones included); `regex`: a pattern.",
            ),
            prop(
                "cached-input-tokens",
                ValueType::String,
                "`json`: the dotted key of the input tokens read from a cache; `regex`: a pattern.",
            ),
            prop(
                "output-tokens",
                ValueType::String,
                "`json`: the dotted key of the output tokens; `regex`: a pattern.",
            ),
            prop(
                "turns",
                ValueType::String,
                "`json`: the dotted key of the turns taken; `regex`: a pattern.",
            ),
            prop(
                "model",
                ValueType::String,
                "The model whose `price` applies when the output does not name one (Codex, Aider, `json`, `regex`).",
            ),
        ],
        doc: "How helixflow reads what an attempt's agent used: its cost in US dollars, tokens and turns, shown in every report and counted against `max-cost`. A cost the output does not give is computed from the tokens with the pipeline's `price` table; otherwise it is unknown, shown as such, and never counted as zero, unless the agent declares its `cost`.",
        ..BASE
    },
    NodeSchema {
        name: "cost",
        contexts: &[Context::Agent],
        args: &[arg("USD", ValueType::Number, "US dollars per run.")],
        min_args: 1,
        doc: "What each run of the agent costs, in US dollars, whatever its output reports: `cost 0` declares an agent free (a script, a local model, a flat-rate plan), so its attempts cost `$0.00` instead of an unknown amount, and a `max-cost` budget can hold it. Its tokens and turns are still read as `usage` says.",
        ..BASE
    },
    NodeSchema {
        name: "transient-exit",
        contexts: &[Context::Agent],
        args: &[arg("CODE", ValueType::Int(0), "An exit code.")],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "Exit codes of a transient failure (a rate limit, an overloaded service, a network error): the attempt is tried again after a backoff, honouring a Retry-After the output gives, without spending the phase's `retries` or the run's `retry-budget`, up to the phase's `transient-retries`.",
        ..BASE
    },
    NodeSchema {
        name: "transient-pattern",
        contexts: &[Context::Agent],
        args: &[arg(
            "REGEX",
            ValueType::Regex,
            "Matched against the agent's reported error, its standard error and the end of its output.",
        )],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "Patterns of a transient failure (e.g. `API Error: 429`, `overloaded`), looked for only when the agent failed; see `transient-exit`.",
        ..BASE
    },
    NodeSchema {
        name: "fatal-exit",
        contexts: &[Context::Agent],
        args: &[arg("CODE", ValueType::Int(0), "An exit code.")],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "Exit codes of a fatal failure (authentication, an invalid configuration): the phase fails at once, with the agent's message first, and is not retried. Exit code 127 (a command not found) is always fatal. Fatal markers are looked at before transient ones.",
        ..BASE
    },
    NodeSchema {
        name: "fatal-pattern",
        contexts: &[Context::Agent],
        args: &[arg(
            "REGEX",
            ValueType::Regex,
            "Matched against the agent's reported error, its standard error and the end of its output.",
        )],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "Patterns of a fatal failure (e.g. `Invalid API key`, `API Error: 401`), looked for only when the agent failed; see `fatal-exit`.",
        ..BASE
    },
    NodeSchema {
        name: "idle-timeout",
        contexts: &[Context::Agent, Context::Attempt],
        args: DURATION_ARG,
        min_args: 1,
        doc: "Longest time without output; on expiry the agent's process group is stopped (TERM, grace, KILL).",
        ..BASE
    },
    // phase { … }, template { … }, defaults { … }
    NodeSchema {
        name: "agent",
        contexts: PHASE_LIKE_OR_ATTEMPT,
        args: &[arg(
            "NAME",
            ValueType::Name,
            "An agent defined or imported in this pipeline.",
        )],
        min_args: 1,
        doc: "The agent that does the phase's work (from `defaults` when absent).",
        ..BASE
    },
    NodeSchema {
        name: "run",
        contexts: PHASE_OR_TEMPLATE,
        args: &[arg(
            "SHELL",
            ValueType::Shell,
            "A command run with `sh -c` in the workspace.",
        )],
        min_args: 1,
        doc: "Instead of an agent: a plain command step (formatters, code generators, deploys).",
        ..BASE
    },
    NodeSchema {
        name: "prompt",
        contexts: PHASE_LIKE_OR_ATTEMPT,
        args: &[arg(
            "TEMPLATE",
            ValueType::Template,
            "A MiniJinja template.",
        )],
        props: &[prop(
            "file",
            ValueType::Path,
            "A file holding the template, relative to the workspace.",
        )],
        doc: "The prompt, a MiniJinja template, written inline or in `file=`. Variables: `phase`, `description`, `outputs`, `gates`, `attempt`, `max_attempts`, `feedback`, `verify_instructions`, and `vars` (each name in `vars` also by itself). Every variable is always defined (`feedback` is empty on the first attempt); any other name is an error. `{% include \"PATH\" %}` names a template by its path relative to the workspace. The prompt reaches the agent byte-exact, trailing newlines included.",
        ..BASE
    },
    NodeSchema {
        name: "vars",
        contexts: PHASE_LIKE_OR_ATTEMPT,
        children: Some(Context::Vars),
        children_required: true,
        repeatable: true,
        doc: "Extra prompt variables: one `NAME VALUE` child each.",
        ..BASE
    },
    NodeSchema {
        name: "depends-on",
        contexts: PHASE_OR_TEMPLATE,
        args: &[arg(
            "PHASE",
            ValueType::Name,
            "A phase that must pass first.",
        )],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "Phases that must pass before this one starts.",
        ..BASE
    },
    NodeSchema {
        name: "outputs",
        contexts: PHASE_OR_TEMPLATE,
        children: Some(Context::Outputs),
        children_required: true,
        repeatable: true,
        doc: "Files the phase must produce. Checked by the implicit first gate, `outputs`, which also names same-named files found elsewhere (written to the wrong folder?).",
        ..BASE
    },
    NodeSchema {
        name: "inputs",
        contexts: PHASE_OR_TEMPLATE,
        children: Some(Context::Inputs),
        children_required: true,
        repeatable: true,
        doc: "Files whose content the phase's work depends on: when one changes, the phase is no longer up to date and runs again. Without `inputs`, a phase depends on the outputs of the phases it depends on and on its prompt file.",
        ..BASE
    },
    NodeSchema {
        name: "always-run",
        contexts: PHASE_LIKE,
        args: &[arg(
            "BOOL",
            ValueType::Bool,
            "Whether the phase runs even when it is up to date.",
        )],
        doc: "Never treat the phase as up to date (a review, a deploy): it runs in every `helixflow run`.",
        ..BASE
    },
    NodeSchema {
        name: "scope",
        contexts: PHASE_LIKE,
        args: &[arg("GLOB", ValueType::Glob, "Files the phase may touch.")],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "The only files this phase may create, change or delete; any other change fails the attempt.",
        ..BASE
    },
    NodeSchema {
        name: "protect",
        contexts: PHASE_LIKE,
        args: &[arg("GLOB", ValueType::Glob, "Files that must not change.")],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "Files that must stay byte-identical to their state before the attempt (tests the gates rely on, fixtures).",
        ..BASE
    },
    NodeSchema {
        name: "gates",
        contexts: PHASE_LIKE,
        children: Some(Context::Gates),
        children_required: true,
        repeatable: true,
        doc: "Checks of the phase's work, one gate per child. All gates run and all failures are reported together, unless `fail-fast #true`.",
        ..BASE
    },
    NodeSchema {
        name: "fail-fast",
        contexts: PHASE_LIKE,
        args: &[arg(
            "BOOL",
            ValueType::Bool,
            "Whether to stop at the first failing gate.",
        )],
        doc: "Stop checking at the first failing gate.",
        ..BASE
    },
    NodeSchema {
        name: "verify",
        contexts: PHASE_LIKE,
        args: &[arg(
            "MODE",
            ValueType::Choice(VERIFY_MODES),
            "A verify mode.",
        )],
        min_args: 1,
        variadic: true,
        doc: "How the work is verified: `self`, `external`, `sub-agent`, `both` (= self + external); several may be given. Default `external`. Modes run in the order self → external → sub-agent, each only when the earlier passed.",
        ..BASE
    },
    NodeSchema {
        name: "verifier",
        contexts: PHASE_LIKE_OR_ATTEMPT,
        args: &[arg(
            "AGENT",
            ValueType::Name,
            "An agent defined or imported in this pipeline.",
        )],
        min_args: 1,
        doc: "The agent that verifies the work in `sub-agent` mode.",
        ..BASE
    },
    NodeSchema {
        name: "verifier-prompt",
        contexts: PHASE_LIKE_OR_ATTEMPT,
        args: &[arg("TEMPLATE", ValueType::Template, "Extra instructions.")],
        props: &[prop(
            "file",
            ValueType::Path,
            "A file holding them, relative to the workspace.",
        )],
        doc: "Extra instructions for the verifier, inline or in `file=`.",
        ..BASE
    },
    NodeSchema {
        name: "retries",
        contexts: PHASE_LIKE,
        args: &[arg(
            "INT",
            ValueType::Int(0),
            "Retries after the first attempt.",
        )],
        min_args: 1,
        doc: "Retries after the first attempt (default 2), while the run's `retry-budget` allows.",
        ..BASE
    },
    NodeSchema {
        name: "transient-retries",
        contexts: PHASE_LIKE,
        args: &[arg(
            "INT",
            ValueType::Int(0),
            "Tries after transient failures.",
        )],
        min_args: 1,
        doc: "How many times an attempt that failed transiently (see the agent's `transient-exit` and `transient-pattern`) is tried again (default 3). These tries spend neither `retries` nor the run's `retry-budget`; they wait a backoff (the phase's `backoff`, else 2s, doubling each time, at most 60s) or the Retry-After the output gives, within the run's `timeout`.",
        ..BASE
    },
    NodeSchema {
        name: "max-turns",
        contexts: PHASE_LIKE_OR_ATTEMPT,
        args: &[arg("INT", ValueType::Int(1), "Turns per attempt.")],
        min_args: 1,
        doc: "The most turns one attempt's agent may take: helixflow counts the turns the agent's `usage` reports (Claude Code's `num_turns`, Codex's completed turns, Aider's replies, a declared `turns=`) and fails an attempt that took more, as work not done. A CLI that can stop itself is also given its own limit in its `command` (e.g. `claude --max-turns 20`).",
        ..BASE
    },
    NodeSchema {
        name: "backoff",
        contexts: PHASE_LIKE_OR_ATTEMPT,
        args: DURATION_ARG,
        min_args: 1,
        doc: "Wait before each retry.",
        ..BASE
    },
    NodeSchema {
        name: "isolation",
        contexts: PHASE_LIKE,
        args: &[arg(
            "MODE",
            ValueType::Choice(ISOLATION),
            "Where the phase's attempts work.",
        )],
        min_args: 1,
        doc: "Where the phase's attempts work: `shared` in the workspace (the default), or `worktree`, each attempt in a git worktree of its own under the state folder, made from the workspace as the phase's dependencies left it (tracked files, uncommitted and untracked changes; of the ignored files, those `worktree-include` names and the phase's outputs, and the folders `worktree-share` names, read only). The agent, the `run` step, the gates, `scope`, `protect`, `changes` and the verifiers all see the worktree as the workspace. Only a passing attempt's changes (created, modified and deleted files, modes, symlinks; of the ignored files, only its outputs and `worktree-include` files) are applied back, a file that another phase changed meanwhile merged line by line; a failed attempt leaves nothing behind. When the changes do not apply (both changed the same lines), the attempt fails with feedback naming the files, and the next attempt starts from the new state. Worktrees are removed afterwards, and a run removes those a killed run left. In `defaults`, the mode of every phase. Needs the workspace to be in a git repository.",
        ..BASE
    },
    NodeSchema {
        name: "worktree-include",
        contexts: PHASE_LIKE,
        args: &[arg(
            "GLOB",
            ValueType::Glob,
            "Ignored files the attempt's worktree gets a copy of.",
        )],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "With `isolation \"worktree\"`: ignored files (`.gitignore`) each attempt's worktree gets a copy of, made by a copy-on-write clone where the file system offers one (btrfs, XFS), else copied: `.env`, a generated config, test data (`\"data/**\"`). A worktree has the tracked files and the workspace's uncommitted and untracked changes; of the ignored files, only these, the phase's declared outputs and the `worktree-share` folders. A passing attempt's changes to them are applied back. In `defaults`, for every isolated phase.",
        ..BASE
    },
    NodeSchema {
        name: "worktree-share",
        contexts: PHASE_LIKE,
        args: &[arg(
            "GLOB",
            ValueType::Glob,
            "Ignored folders the attempt may only read.",
        )],
        min_args: 1,
        variadic: true,
        repeatable: true,
        doc: "With `isolation \"worktree\"`: ignored folders each attempt sees in its worktree without a copy, read only (`\".venv\"`, `\"node_modules\"`, `\"**/node_modules\"`, a package cache). Every process the attempt starts (the agent or `run` step, gate commands, the verifier) sees the folder, and the workspace's own copy, through a read-only bind mount in a mount namespace of its own: a write into either fails, so the workspace's copy cannot change. Where the system offers no unprivileged user namespaces, the folder is copied into the worktree instead (a copy-on-write clone where possible) and an attempt that changed it, or the workspace's copy, fails. In `defaults`, for every isolated phase.",
        ..BASE
    },
    NodeSchema {
        name: "on-failure",
        contexts: PHASE_LIKE,
        args: &[arg(
            "ACTION",
            ValueType::Choice(ON_FAILURE),
            "What the run does.",
        )],
        min_args: 1,
        doc: "When retries are exhausted: `stop` starting new phases (default), or `continue` with the phases that do not depend on this one.",
        ..BASE
    },
    NodeSchema {
        name: "escalate",
        contexts: PHASE_LIKE,
        args: &[arg(
            "SHELL",
            ValueType::Shell,
            "A command run with `sh -c`.",
        )],
        min_args: 1,
        doc: "Run when the phase finally fails (notify a person, open a ticket).",
        ..BASE
    },
    NodeSchema {
        name: "attempt",
        contexts: PHASE_LIKE,
        args: &[arg(
            "RANGE",
            ValueType::AttemptRange,
            "The attempts of the work it covers: `2` (exactly the second), `\"3..\"` (the third and later) or `\"2..4\"`.",
        )],
        min_args: 1,
        children: Some(Context::Attempt),
        children_required: true,
        repeatable: true,
        doc: "Settings for some attempts of the work, over the phase's own: an escalation tier (`attempt 2 { agent \"claude-opus\" }`). It may set `agent`, `prompt`, `vars`, `max-turns`, `timeout`, `idle-timeout`, `env`, `verifier`, `verifier-prompt` and `backoff` (the wait before these attempts); what the phase must produce and how it is judged stay the phase's. Attempts count the work: a try after a transient failure (a rate limit, an overloaded service) repeats the same attempt and its tier. An attempt with another agent starts a new session with the full prompt and the feedback; one that keeps the agent but changes the prompt continues the session with the new prompt's text and the feedback. Blocks of one phase (or template, or `defaults`) must not overlap; a phase's blocks apply over its template's, and those over `defaults`'.",
        ..BASE
    },
    // Work known only at run time: `for-each` items and phases a planner writes.
    NodeSchema {
        name: "for-each",
        contexts: PHASE_OR_TEMPLATE,
        args: &[arg(
            "ITEM",
            ValueType::String,
            "A literal item: its own key, `{{ item }}` and `{{ item.key }}`.",
        )],
        variadic: true,
        props: &[
            prop(
                "json",
                ValueType::Path,
                "A JSON array of objects or strings, relative to the workspace, read when the phase becomes ready.",
            ),
            prop(
                "key",
                ValueType::String,
                "With `json=`: the field of each object that is its key (a string or an integer); strings are their own key.",
            ),
            prop(
                "glob",
                ValueType::Glob,
                "One item per matching file: `{{ item.path }}`, `{{ item.stem }}`, `{{ item.name }}`, `{{ item.dir }}`; the key is the path.",
            ),
        ],
        doc: "Makes the phase a template, expanded once its dependencies passed into one phase per item, named `PHASE[KEY]`: each with its own gates, verifier, retries, journal folder and up-to-date record. `{{ item }}`, `{{ item.FIELD }}`, `{{ item.key }}` and `{{ item.index }}` are replaced in the prompt, outputs, inputs, scope, protect, gates, `env`, `run`, `escalate` and the agent's argv (in shell commands through environment variables, never as shell text). The phase passes when every item passed; its dependents wait for all of them.",
        ..BASE
    },
    NodeSchema {
        name: "max-items",
        contexts: PHASE_OR_TEMPLATE,
        args: &[arg("INT", ValueType::Int(1), "The most items.")],
        min_args: 1,
        doc: "With `for-each`: more items than this (default 100) fail the phase before any item starts.",
        ..BASE
    },
    NodeSchema {
        name: "max-parallel",
        contexts: PHASE_OR_TEMPLATE,
        args: &[arg(
            "INT",
            ValueType::Int(1),
            "Items of this phase at once.",
        )],
        min_args: 1,
        doc: "With `for-each`: at most this many items of the phase run at once (the run's `max-parallel` still applies).",
        ..BASE
    },
    NodeSchema {
        name: "generates",
        contexts: PHASE_OR_TEMPLATE,
        args: &[arg(
            "PATH",
            ValueType::Path,
            "A KDL file of `phase` nodes, relative to the workspace.",
        )],
        min_args: 1,
        doc: "The phase writes a KDL file of `phase` nodes (which may use the pipeline's agents, templates and `defaults`, and depend on each other or on this phase). Each attempt's file is linted as part of its verification: an error fails the attempt and its diagnostics are the feedback. Once the phase passed, its phases join the run after it; a phase that depends on it waits for them too. A generated phase may not redefine a phase, nor use `generates` or `import`.",
        ..BASE
    },
    // template { … }
    NodeSchema {
        name: "param",
        contexts: &[Context::Template],
        args: &[arg(
            "NAME",
            ValueType::Name,
            "The parameter's name, used as `{{ NAME }}`.",
        )],
        min_args: 1,
        props: &[prop(
            "default",
            ValueType::String,
            "The value when a phase does not give one; without it the parameter is required.",
        )],
        repeatable: true,
        doc: "A template parameter. Phases give it as a property (`NAME=VALUE`); `{{ NAME }}` in the template's strings is replaced, and it is also a prompt variable.",
        ..BASE
    },
    // inputs { … }
    NodeSchema {
        name: "file",
        contexts: &[Context::Inputs],
        args: &[arg(
            "PATH",
            ValueType::Path,
            "A file relative to the workspace.",
        )],
        min_args: 1,
        repeatable: true,
        doc: "One input file; its absence is part of the phase's state too (creating it makes the phase run again).",
        ..BASE
    },
    NodeSchema {
        name: "glob",
        contexts: &[Context::Inputs],
        args: &[arg(
            "PATTERN",
            ValueType::Glob,
            "A glob relative to the workspace.",
        )],
        min_args: 1,
        repeatable: true,
        doc: "Every file matching a pattern; a file added, changed or deleted makes the phase run again.",
        ..BASE
    },
    // outputs { … }
    NodeSchema {
        name: "file",
        contexts: &[Context::Outputs],
        args: &[arg(
            "PATH",
            ValueType::Path,
            "A file relative to the workspace.",
        )],
        min_args: 1,
        repeatable: true,
        doc: "One expected file.",
        ..BASE
    },
    NodeSchema {
        name: "glob",
        contexts: &[Context::Outputs],
        args: &[arg(
            "PATTERN",
            ValueType::Glob,
            "A glob relative to the workspace.",
        )],
        min_args: 1,
        props: &[defaulted(
            "min",
            ValueType::Int(0),
            "1",
            "The fewest files that must match; an empty expectation never passes silently.",
        )],
        repeatable: true,
        doc: "At least `min` files matching a pattern.",
        ..BASE
    },
    NodeSchema {
        name: "from",
        contexts: &[Context::Outputs],
        args: &[arg("DOC", ValueType::Path, "A Markdown or YAML document.")],
        min_args: 1,
        props: &[required(
            "key",
            ValueType::String,
            "A dotted key in the front matter, e.g. `files.create`.",
        )],
        repeatable: true,
        doc: "The paths listed under a key of a document's front matter (e.g. an ADR's `files.create`).",
        ..BASE
    },
    // gates { … }
    NodeSchema {
        name: "syntax",
        contexts: &[Context::Gates],
        args: &[arg(
            "GLOB",
            ValueType::Glob,
            "Files to parse (default: the outputs).",
        )],
        variadic: true,
        props: &[GATE_NAME],
        repeatable: true,
        doc: "Every output (or every file matching the globs) parses, by extension: Python, Rust, JavaScript, TypeScript/TSX, JSON, YAML, TOML, Bash, Go, KDL. Errors are reported as `file:line:col` with the source line.",
        ..BASE
    },
    NodeSchema {
        name: "command",
        contexts: &[Context::Gates],
        args: &[arg(
            "SHELL",
            ValueType::Shell,
            "A command run with `sh -c` in the workspace.",
        )],
        min_args: 1,
        props: &[
            GATE_NAME,
            prop(
                "timeout",
                ValueType::Duration,
                "A time limit for the command.",
            ),
            prop(
                "cwd",
                ValueType::Path,
                "The working directory, relative to the workspace.",
            ),
            prop(
                "fix",
                ValueType::Shell,
                "Run once when the command fails, before it is checked again.",
            ),
        ],
        repeatable: true,
        doc: "The command exits 0. With `fix`, a failing gate runs the fix once and checks again before the attempt counts as failed.",
        ..BASE
    },
    NodeSchema {
        name: "matches",
        contexts: &[Context::Gates],
        args: TARGET_AND_PATTERN,
        min_args: 2,
        props: &[GATE_NAME],
        repeatable: true,
        doc: "The regex matches the target.",
        ..BASE
    },
    NodeSchema {
        name: "absent",
        contexts: &[Context::Gates],
        args: TARGET_AND_PATTERN,
        min_args: 2,
        props: &[GATE_NAME],
        repeatable: true,
        doc: "The regex matches nowhere in the target (e.g. `TODO`, `pytest.skip`).",
        ..BASE
    },
    NodeSchema {
        name: "front-matter",
        contexts: &[Context::Gates],
        args: &[
            arg("PATH", ValueType::Path, "A Markdown file."),
            arg("KEY", ValueType::String, "A dotted key."),
        ],
        min_args: 2,
        variadic: true,
        props: &[GATE_NAME],
        repeatable: true,
        doc: "The Markdown file's YAML front matter exists and has every (dotted) key.",
        ..BASE
    },
    NodeSchema {
        name: "sections",
        contexts: &[Context::Gates],
        args: &[
            arg("PATH", ValueType::Path, "A Markdown file."),
            arg("HEADING", ValueType::String, "A heading's text."),
        ],
        min_args: 2,
        variadic: true,
        props: &[GATE_NAME],
        repeatable: true,
        doc: "The Markdown file has every heading.",
        ..BASE
    },
    NodeSchema {
        name: "paths-exist",
        contexts: &[Context::Gates],
        args: &[arg("DOC", ValueType::Path, "A Markdown or YAML document.")],
        min_args: 1,
        props: &[
            GATE_NAME,
            required(
                "key",
                ValueType::String,
                "A dotted front-matter key listing paths.",
            ),
        ],
        repeatable: true,
        doc: "Every path listed under the front-matter key exists.",
        ..BASE
    },
    NodeSchema {
        name: "changes",
        contexts: &[Context::Gates],
        props: &[
            GATE_NAME,
            defaulted(
                "min",
                ValueType::Int(1),
                "1",
                "The fewest files the attempt must change.",
            ),
        ],
        repeatable: true,
        doc: "The attempt changed at least `min` files: work was actually done.",
        ..BASE
    },
    NodeSchema {
        name: "approval",
        contexts: &[Context::Gates],
        props: &[
            GATE_NAME,
            prop("prompt", ValueType::String, "The question asked."),
        ],
        repeatable: true,
        doc: "A person approved: an interactive prompt, or `helixflow approve RUN PHASE`.",
        ..BASE
    },
];

/// Documentation of a `vars` child, which may have any name.
pub(crate) static VAR: NodeSchema = NodeSchema {
    name: "NAME",
    contexts: &[Context::Vars],
    args: &[arg("VALUE", ValueType::String, "The variable's value.")],
    min_args: 1,
    repeatable: false,
    doc: "A prompt variable, available as `{{ vars.NAME }}`.",
    ..BASE
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_is_documented_and_unique_per_context() {
        let mut seen = std::collections::HashSet::new();
        for node in NODES {
            assert!(!node.doc.is_empty(), "{} has no doc", node.name);
            assert!(node.min_args <= node.args.len(), "{}", node.name);
            for context in node.contexts {
                assert!(
                    seen.insert((node.name, *context)),
                    "{} twice in {context:?}",
                    node.name
                );
            }
            for arg in node.args {
                assert!(!arg.doc.is_empty(), "{} {}", node.name, arg.name);
            }
        }
    }

    /// Every name the schema offers for `response` and `usage` decodes to a format of its own,
    /// and every format is offered: a value lint accepts is never read as another.
    #[test]
    fn every_format_the_schema_names_decodes_to_its_own_variant() {
        use crate::model::{ResponseFormat, UsageFormat};
        let responses: Vec<ResponseFormat> = RESPONSE_FORMATS
            .iter()
            .map(|c| ResponseFormat::from_name(c.value).unwrap_or_else(|| panic!("{}", c.value)))
            .collect();
        assert_eq!(responses, ResponseFormat::ALL);
        let usages: Vec<UsageFormat> = USAGE_FORMATS
            .iter()
            .map(|c| UsageFormat::from_name(c.value).unwrap_or_else(|| panic!("{}", c.value)))
            .collect();
        assert_eq!(usages, UsageFormat::ALL);
        for format in ResponseFormat::ALL {
            assert_eq!(ResponseFormat::from_name(format.name()), Some(format));
        }
        for format in UsageFormat::ALL {
            assert_eq!(UsageFormat::from_name(format.name()), Some(format));
        }
    }

    /// Every gate node of the schema is a kind of check (and the implicit `outputs`, `scope` and
    /// `protect` gates are the rest of them): a gate lint accepts always has a report kind.
    #[test]
    fn every_gate_node_is_a_check_kind() {
        use crate::event::CheckKind;
        let mut kinds: Vec<CheckKind> = NODES
            .iter()
            .filter(|node| node.contexts.contains(&Context::Gates))
            .map(|node| CheckKind::from_name(node.name).unwrap_or_else(|| panic!("{}", node.name)))
            .collect();
        kinds.extend([CheckKind::Outputs, CheckKind::Scope, CheckKind::Protect]);
        kinds.sort();
        let mut all = CheckKind::ALL.to_vec();
        all.sort();
        assert_eq!(kinds, all);
    }

    #[test]
    fn signatures_read_like_the_language_reference() {
        assert_eq!(
            lookup(Context::Outputs, "glob").unwrap().signature(),
            "glob PATTERN [min=MIN]"
        );
        assert_eq!(
            lookup(Context::Agent, "command").unwrap().signature(),
            "command ARG…"
        );
        assert_eq!(
            lookup(Context::Gates, "syntax").unwrap().signature(),
            "syntax [GLOB…] [name=NAME]"
        );
    }
}
