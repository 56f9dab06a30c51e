//! The registry of lint rules. Each rule is written once, here, with its documentation; `helixflow
//! explain`, the README's list and the language server all read this table.

use super::Severity;

/// One rule: a stable code, a name, and its documentation.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stable code, e.g. `HF101`.
    pub code: &'static str,
    /// Kebab-case name, e.g. `unknown-node`.
    pub name: &'static str,
    /// Severity of every finding of this rule.
    pub severity: Severity,
    /// One line: what the rule catches.
    pub summary: &'static str,
    /// Default help shown with a finding.
    pub help: &'static str,
    /// Markdown: what it catches, why, and an example.
    pub docs: &'static str,
}

macro_rules! rules {
    ($(
        $(#[doc = $doc:literal])*
        $ident:ident = $code:literal $name:literal $severity:ident,
            summary: $summary:literal,
            help: $help:literal;
    )*) => {
        $(
            #[doc = $summary]
            #[allow(clippy::doc_markdown, reason = "the summary is text for the terminal, shown as is")]
            pub(crate) static $ident: Rule = Rule {
                code: $code,
                name: $name,
                severity: Severity::$severity,
                summary: $summary,
                help: $help,
                docs: concat!($($doc, "\n"),*),
            };
        )*
        /// Every rule, ordered by code.
        pub static ALL_RULES: &[&Rule] = &[$(&$ident),*];
    };
}

/// The rule with this code (case-insensitive) or name.
pub(crate) fn find_rule(code_or_name: &str) -> Option<&'static Rule> {
    ALL_RULES.iter().copied().find(|r| {
        r.code.eq_ignore_ascii_case(code_or_name) || r.name.eq_ignore_ascii_case(code_or_name)
    })
}

rules! {
    /// ## What it catches
    /// Text that is not valid KDL v2: an unterminated string, a bad number, a stray character.
    /// Every error the KDL parser reports becomes one finding at its own place.
    ///
    /// ## Why
    /// Nothing else can be checked until the file is KDL.
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" {
    ///     retries 1.        // a float needs digits after the point
    /// }
    /// ```
    KDL_SYNTAX = "HF001" "kdl-syntax" Error,
        summary: "The file is not valid KDL v2.",
        help: "Fix the KDL syntax at this place; see https://kdl.dev for the grammar.";

    /// ## What it catches
    /// A `{` that is never closed, or a `}` that closes nothing. helixflow checks braces before it
    /// hands the file to the KDL parser.
    ///
    /// ## Why
    /// Unbalanced braces make every later node land in the wrong block, and some of them make the
    /// KDL parser's error recovery slow. Reporting the brace itself is the precise answer.
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" {
    ///     outputs { file "a.py"
    /// }
    /// ```
    UNBALANCED_BRACES = "HF002" "unbalanced-braces" Error,
        summary: "A `{` is never closed, or a `}` closes nothing.",
        help: "Add the missing `}` or remove the extra one.";

    /// ## What it catches
    /// A file larger than 32 KiB that is not plain well-formed KDL (the finding points where
    /// reading stopped); a run of more than 1,000 marks of punctuation (braces, `/-`, `=`, `;`,
    /// `\`) with no name or value between them in a file that is not well-formed; blocks nested
    /// more than 64 deep; a parse that did not finish within the time budget. (Files over the
    /// front end's limits on size, nodes and entries are HF005.)
    ///
    /// ## Why
    /// Lint runs in editors and in CI; it must always answer promptly. Well-formed KDL is read in
    /// one linear pass at any size up to the limits, but the full KDL parser, which reports syntax
    /// errors, takes time and memory with every error it recovers from and recurses on long runs
    /// of punctuation, so it is given files up to 32 KiB (about 90 phases) without such runs.
    ///
    /// ## Example
    /// A 300 KB generated pipeline with `retries 1.` (a number cut short) near its end.
    PARSE_BUDGET = "HF003" "parse-budget" Error,
        summary: "The file is too large or too complex to parse within the budget.",
        help: "Move agents and templates into imported files and build phases from templates, or check that this is the pipeline you meant.";

    /// ## What it catches
    /// More than 100 findings in one file: the first 100 (by place) are shown, then this one
    /// counts the rest and points at the first that is not shown. Messages and labels that quote
    /// very long text are shortened, and so are the lines of a snippet.
    ///
    /// ## Why
    /// Every file gets a bounded answer in bounded time: a generated or corrupted file with
    /// thousands of problems would otherwise print megabytes that no one reads. Fix the first
    /// problems (often one unclosed brace or a wrong file) and lint again.
    ///
    /// ## Example
    /// A file that is not a pipeline at all, with a few hundred lines that are unknown nodes.
    TOO_MANY_PROBLEMS = "HF004" "too-many-problems" Warning,
        summary: "More findings than are shown: the rest are counted.",
        help: "Fix the problems shown first (often one cause has many findings), then lint again.";

    /// ## What it catches
    /// A pipeline file over the front end's limits, its imports included: larger than 2 MiB,
    /// more than 50,000 nodes (children and nodes commented out with `/-` included), or more
    /// than 100,000 entries (arguments and properties). A pipeline file and the files it imports
    /// share the limits; a phase built from a template or `defaults` counts their bytes as its
    /// own, and prompt files count with their bytes. The file is measured in one pass before
    /// anything is parsed; the finding points at the first byte, node, entry or phase over the
    /// limit, and nothing past it is read.
    ///
    /// ## Why
    /// Every input gets a bounded answer in bounded time and memory, from `lint`, `fmt`,
    /// `compile`, `run`, `status` and the language server alike: a parsed node costs about a
    /// kilobyte, so a generated or corrupted file of millions of nodes, or a large template
    /// taken by thousands of phases, would otherwise take seconds and gigabytes before saying
    /// anything. Real pipelines sit far below the limits: a generated 1,000-phase pipeline is
    /// 348 KB with 9,000 nodes (609 KB with its templates counted for each phase).
    ///
    /// ## Example
    /// A 10 MB file of phases on one line, 100,000 nodes written by a runaway generator, or a
    /// template of 100 KB taken by 30 phases.
    INPUT_LIMIT = "HF005" "input-limit" Error,
        summary: "The file is over the limits of what a pipeline file may hold.",
        help: "Move agents and templates into a smaller imported file and build phases from templates, or split the work into several pipelines.";

    /// ## What it catches
    /// A node name that the pipeline language does not define at all.
    ///
    /// ## Why
    /// A misspelt node would otherwise be ignored silently: `depend-on "parser"` would run the phase
    /// without waiting for its dependency.
    ///
    /// ## Example
    /// ```kdl
    /// phase "docs" {
    ///     depend-on "parser"    // did you mean `depends-on`?
    /// }
    /// ```
    UNKNOWN_NODE = "HF101" "unknown-node" Error,
        summary: "A node that the pipeline language does not define.",
        help: "Check the spelling against the nodes the message lists for this place.";

    /// ## What it catches
    /// A node that exists, but not where it is written: `retries` at the top level, `syntax` outside
    /// `gates`, `param` outside a `template`.
    ///
    /// ## Why
    /// The node would have no effect where it stands.
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" {
    ///     syntax          // gates go inside `gates { … }`
    /// }
    /// ```
    MISPLACED_NODE = "HF102" "misplaced-node" Error,
        summary: "A known node in a place where it is not allowed.",
        help: "Move the node into one of the places listed in the message.";

    /// ## What it catches
    /// A property (`key=value`) that the node does not take.
    ///
    /// ## Why
    /// A misspelt property is otherwise ignored: `glob "*.md" mn=1` would leave the default.
    ///
    /// ## Example
    /// ```kdl
    /// gates {
    ///     command "pytest" timout="5m"   // did you mean `timeout`?
    /// }
    /// ```
    UNKNOWN_PROPERTY = "HF103" "unknown-property" Error,
        summary: "A property that the node does not take.",
        help: "Check the spelling, or remove the property.";

    /// ## What it catches
    /// Too few or too many arguments for a node.
    ///
    /// ## Why
    /// A missing argument leaves the setting undefined; an extra one is a sign that the line does
    /// not mean what its author thinks (for example two names given to `phase`).
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" "lexer" { … }   // one phase per node
    /// ```
    ARGUMENT_COUNT = "HF104" "argument-count" Error,
        summary: "A node has too few or too many arguments.",
        help: "Give the node the number of arguments its documentation lists.";

    /// ## What it catches
    /// An argument or property of the wrong type: a string where a number is expected, a number
    /// where a name is expected.
    ///
    /// ## Why
    /// `retries "two"` cannot be turned into a retry count.
    ///
    /// ## Example
    /// ```kdl
    /// retries "two"
    /// ```
    WRONG_TYPE = "HF105" "wrong-type" Error,
        summary: "A value has the wrong type.",
        help: "Write a value of the type the message names.";

    /// ## What it catches
    /// A number outside its allowed range: a negative `max-parallel`, `max-parallel 0`, a negative
    /// `retries`.
    ///
    /// ## Why
    /// Such a setting could never run the pipeline as intended.
    ///
    /// ## Example
    /// ```kdl
    /// pipeline "x" { max-parallel -1 }
    /// ```
    OUT_OF_RANGE = "HF106" "out-of-range" Error,
        summary: "A number is outside its allowed range.",
        help: "Use a number in the range the message names.";

    /// ## What it catches
    /// A value that must be one of a fixed set: verify modes, `on-failure`, `response`.
    ///
    /// ## Why
    /// `verify "extrenal"` must not silently fall back to a default.
    ///
    /// ## Example
    /// ```kdl
    /// verify "sub_agent"   // did you mean "sub-agent"?
    /// ```
    INVALID_CHOICE = "HF107" "invalid-choice" Error,
        summary: "A value that must be one of a fixed set is not.",
        help: "Use one of the values listed in the message.";

    /// ## What it catches
    /// A setting that takes one value written twice in the same block, e.g. two `retries`.
    ///
    /// ## Why
    /// Only one of them can win; which one was meant is unclear.
    ///
    /// ## Example
    /// ```kdl
    /// phase "p" { retries 1; retries 3 }
    /// ```
    REPEATED_NODE = "HF108" "repeated-node" Error,
        summary: "A single-valued setting is given more than once.",
        help: "Keep one of them.";

    /// ## What it catches
    /// A required property that is absent, such as `key=` on `from` and `paths-exist`, or a
    /// `prompt` with neither a string nor `file=`.
    ///
    /// ## Why
    /// The node cannot be interpreted without it.
    ///
    /// ## Example
    /// ```kdl
    /// outputs { from "adr/ADR-042.md" }   // which key lists the files?
    /// ```
    MISSING_PROPERTY = "HF109" "missing-property" Error,
        summary: "A required property or value is missing.",
        help: "Add the property the message names.";

    /// ## What it catches
    /// A children block `{ … }` on a node that takes none, or a block node written without one.
    ///
    /// ## Why
    /// Children of `retries 2 { … }` would be ignored; `outputs` without a block declares nothing.
    ///
    /// ## Example
    /// ```kdl
    /// retries 2 { backoff "10s" }
    /// ```
    CHILDREN_BLOCK = "HF110" "children-block" Error,
        summary: "A children block where none is allowed, or none where one is required.",
        help: "Add or remove the `{ … }` block as the message says.";

    /// ## What it catches
    /// A file with phases (or `defaults`) but no `pipeline` node, or a library for `import` given
    /// to a command that runs a pipeline (`run`, `check`, `graph`, …).
    ///
    /// ## Why
    /// The `pipeline` node names the run and holds its settings. A file of only agents, templates
    /// and imports is a library, which is imported, not run: `lint` and the language server
    /// check it as one, and do not ask it for a pipeline.
    ///
    /// ## Example
    /// ```kdl
    /// phase "a" { run "true" }     // add: pipeline "name"
    /// ```
    MISSING_PIPELINE = "HF120" "missing-pipeline" Error,
        summary: "The file has no `pipeline` node.",
        help: "Add `pipeline \"NAME\"` at the top of the file.";

    /// ## What it catches
    /// More than one `pipeline` node in a file.
    ///
    /// ## Why
    /// A file describes exactly one pipeline.
    ///
    /// ## Example
    /// ```kdl
    /// pipeline "a"
    /// pipeline "b"
    /// ```
    MULTIPLE_PIPELINES = "HF121" "multiple-pipelines" Error,
        summary: "A file has more than one `pipeline` node.",
        help: "Keep one `pipeline` node; put the other pipeline in its own file.";

    /// ## What it catches
    /// A pipeline without any `phase`.
    ///
    /// ## Why
    /// There is nothing to run.
    ///
    /// ## Example
    /// ```kdl
    /// pipeline "empty"
    /// ```
    NO_PHASES = "HF122" "no-phases" Error,
        summary: "The pipeline has no phases.",
        help: "Add at least one `phase \"NAME\" { … }`.";

    /// ## What it catches
    /// A phase with neither `agent` nor `run`, when `defaults` names no agent either.
    ///
    /// ## Why
    /// Nobody would do the phase's work.
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" { prompt "Write the parser" }   // which agent?
    /// ```
    PHASE_WITHOUT_WORKER = "HF123" "phase-without-worker" Error,
        summary: "A phase has neither `agent` nor `run`, and there is no default agent.",
        help: "Add `agent \"NAME\"` or `run \"COMMAND\"` to the phase, or `agent` to `defaults`.";

    /// ## What it catches
    /// A phase that sets both `agent` and `run`.
    ///
    /// ## Why
    /// A phase is either agent work or a plain command step; it cannot be both.
    ///
    /// ## Example
    /// ```kdl
    /// phase "fmt" { agent "claude"; run "cargo fmt" }
    /// ```
    AGENT_AND_RUN = "HF124" "agent-and-run" Error,
        summary: "A phase sets both `agent` and `run`.",
        help: "Keep `agent` for agent work or `run` for a command step, not both.";

    /// ## What it catches
    /// An `agent` without a `command`.
    ///
    /// ## Why
    /// helixflow would not know what to start.
    ///
    /// ## Example
    /// ```kdl
    /// agent "claude" { response "claude-stream-json" }
    /// ```
    AGENT_WITHOUT_COMMAND = "HF125" "agent-without-command" Error,
        summary: "An agent has no `command`.",
        help: "Add `command \"PROGRAM\" \"ARG\"…` with `{{ prompt }}` where the prompt goes.";

    /// ## What it catches
    /// `pipeline`, `phase` or `defaults` in a file that is imported.
    ///
    /// ## Why
    /// Imports share `agent` and `template` definitions; phases belong to the pipeline that runs
    /// them.
    ///
    /// ## Example
    /// ```kdl
    /// // templates/python.kdl
    /// phase "lint" { run "ruff ." }   // make it a template instead
    /// ```
    NOT_ALLOWED_IN_IMPORT = "HF126" "not-allowed-in-import" Error,
        summary: "An imported file declares something other than agents, templates and imports.",
        help: "Imported files may hold only `agent`, `template` and `import`; turn phases into templates.";

    /// ## What it catches
    /// A `matches "response" …` or `absent "response" …` gate in a phase that is a `run` step
    /// (directly, from its template or from `defaults`).
    ///
    /// ## Why
    /// Only an agent gives a final response; a `run` step has none, so the gate fails on every
    /// run and the phase can never pass.
    ///
    /// ## Example
    /// ```kdl
    /// phase "fmt" {
    ///     run "cargo fmt"
    ///     gates { matches "response" "done" }
    /// }
    /// ```
    RESPONSE_IN_RUN_STEP = "HF127" "response-in-run-step" Error,
        summary: "A `run` step has a gate on the agent response, which it does not have.",
        help: "Check a file the step writes (a path or glob as the target), or make the phase an agent phase.";

    /// ## What it catches
    /// A `session-id` node without `json=` or `regex=`, or with both.
    ///
    /// ## Why
    /// helixflow reads the id of the session an agent's CLI chose from its standard output, so
    /// that a retry continues that session and no other. It must know where to look: a field of
    /// a JSON line (`json="session_id"`), or a regex whose first group is the id.
    ///
    /// ## Example
    /// ```kdl
    /// agent "codex" {
    ///     command "codex" "exec" "--json" "-"
    ///     session-id
    /// }
    /// ```
    SESSION_ID_SOURCE = "HF128" "session-id-source" Error,
        summary: "`session-id` needs exactly one of `json=` and `regex=`.",
        help: "Write `session-id json=\"KEY\"` for a field of a JSON line of the agent's output, or `session-id regex=\"…(ID)…\"`.";

    /// ## What it catches
    /// `evidence-tools` on an agent whose `response` format is not an event stream of tool calls
    /// (`claude-stream-json` or `codex-json`).
    ///
    /// ## Why
    /// Only those transcripts say which tool calls were made and whether each succeeded; in any
    /// other output the check could never pass.
    ///
    /// ## Example
    /// ```kdl
    /// agent "aider" {
    ///     command "aider" "--message-file" "{{ prompt_file }}"
    ///     evidence-tools
    /// }
    /// ```
    EVIDENCE_TOOLS_FORMAT = "HF129" "evidence-tools-format" Error,
        summary: "`evidence-tools` needs a response format that shows tool calls.",
        help: "Set `response \"claude-stream-json\"` or `response \"codex-json\"` with the CLI's matching output option, or use `evidence REGEX` instead.";

    /// ## What it catches
    /// `usage "json"` or `usage "regex"` without any of `cost=`, `input-tokens=`,
    /// `cached-input-tokens=`, `output-tokens=`, `turns=`; or those properties on a format that
    /// knows where its values are (`claude`, `codex`, `gemini`, `aider`).
    ///
    /// ## Why
    /// A declared format reads only what is declared: without a key or pattern it reads nothing,
    /// and every attempt's cost would be unknown. A built-in format ignores the properties, which
    /// would only mislead.
    ///
    /// ## Example
    /// ```kdl
    /// agent "bot" {
    ///     command "bot" "{{ prompt }}"
    ///     usage "json"
    /// }
    /// ```
    USAGE_FIELDS = "HF130" "usage-fields" Error,
        summary: "`usage` declares values its format does not read, or none it needs.",
        help: "Give `usage \"json\"` dotted keys and `usage \"regex\"` patterns (`cost=`, `input-tokens=`, …); give the built-in formats none.";

    /// ## What it catches
    /// An `attempt` block whose range cannot be read: attempt `0` (attempts count from 1), a
    /// range that ends before it starts (`"4..2"`), or text that is not `N`, `"N.."` or
    /// `"N..M"`.
    ///
    /// ## Why
    /// A block that covers no attempt would never apply: the escalation it declares would
    /// silently never happen.
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" {
    ///     agent "claude-sonnet"
    ///     attempt "3-4" { agent "claude-opus" }    // write "3..4"
    /// }
    /// ```
    ATTEMPT_RANGE = "HF140" "attempt-range" Error,
        summary: "An `attempt` block's range cannot be read, or covers no attempt.",
        help: "Write an attempt (`2`), the attempts from one on (`\"3..\"`) or a range (`\"2..4\"`), counting from 1.";

    /// ## What it catches
    /// Two `attempt` blocks of one phase (or of one template, or of `defaults`) that cover the
    /// same attempt: `attempt "2.."` and `attempt 3`.
    ///
    /// ## Why
    /// Each attempt of the work runs in one tier; with two blocks for it, which one's agent or
    /// prompt applies would depend on the order they are written. (A phase's block may cover
    /// what a block of its template or of `defaults` covers: the phase's applies over it.)
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" {
    ///     agent "claude-sonnet"
    ///     retries 3
    ///     attempt "2.." { agent "claude-opus" }
    ///     attempt 3 { prompt file="prompts/strict.md" }    // attempt 3 is in "2.." too
    /// }
    /// ```
    OVERLAPPING_ATTEMPTS = "HF141" "overlapping-attempts" Error,
        summary: "Two `attempt` blocks cover the same attempt.",
        help: "Make the ranges disjoint (`attempt 2 { … }` and `attempt \"3..\" { … }`), or join the two blocks into one.";

    /// ## What it catches
    /// A node in an `attempt` block that an attempt cannot change: `retries`, `gates`,
    /// `outputs`, `scope`, `verify`, … An `attempt` block may set `agent`, `prompt`, `vars`,
    /// `max-turns`, `timeout`, `idle-timeout`, `env`, `verifier`, `verifier-prompt` and `backoff`.
    ///
    /// ## Why
    /// A tier changes who does the work and how they are asked, not what the work is: every
    /// attempt of a phase must produce the same outputs and be judged by the same gates, or a
    /// later attempt could pass by being asked less.
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" {
    ///     agent "claude-sonnet"
    ///     attempt 2 {
    ///         agent "claude-opus"
    ///         retries 5    // the phase's, not an attempt's
    ///     }
    /// }
    /// ```
    ATTEMPT_SETTING = "HF142" "attempt-setting" Error,
        summary: "An `attempt` block sets something an attempt cannot change.",
        help: "Move it to the phase, or remove it: an `attempt` block may set agent, prompt, vars, max-turns, timeout, idle-timeout, env, verifier, verifier-prompt and backoff.";

    /// ## What it catches
    /// Two phases, agents or templates with the same name (also across imports).
    ///
    /// ## Why
    /// References by name would be ambiguous.
    ///
    /// ## Example
    /// ```kdl
    /// phase "tests" { run "pytest" }
    /// phase "tests" { run "cargo test" }
    /// ```
    DUPLICATE_NAME = "HF201" "duplicate-name" Error,
        summary: "A name is defined twice.",
        help: "Rename one of the two definitions.";

    /// ## What it catches
    /// `depends-on` naming a phase that does not exist.
    ///
    /// ## Why
    /// The dependency could never pass.
    ///
    /// ## Example
    /// ```kdl
    /// phase "docs" { depends-on "parsr" }   // did you mean "parser"?
    /// ```
    UNKNOWN_PHASE = "HF202" "unknown-phase" Error,
        summary: "A reference to a phase that does not exist.",
        help: "Use the name of a phase defined in this pipeline.";

    /// ## What it catches
    /// `agent` or `verifier` naming an agent that is neither defined nor imported.
    ///
    /// ## Why
    /// Nothing could be started for the phase.
    ///
    /// ## Example
    /// ```kdl
    /// phase "p" { agent "cluade" }
    /// ```
    UNKNOWN_AGENT = "HF203" "unknown-agent" Error,
        summary: "A reference to an agent that is not defined.",
        help: "Define the agent with `agent \"NAME\" { command … }`, or import the file that has it.";

    /// ## What it catches
    /// `use=` naming a template that is neither defined nor imported.
    ///
    /// ## Why
    /// The phase's body would be missing.
    ///
    /// ## Example
    /// ```kdl
    /// phase "lexer" use="python-modul" module="lexer"
    /// ```
    UNKNOWN_TEMPLATE = "HF204" "unknown-template" Error,
        summary: "A reference to a template that is not defined.",
        help: "Define the template, or import the file that has it.";

    /// ## What it catches
    /// `verify "sub-agent"` without a `verifier`.
    ///
    /// ## Why
    /// sub-agent verification starts a separate verifier agent; without one it cannot run.
    ///
    /// ## Example
    /// ```kdl
    /// phase "docs" { verify "sub-agent" }    // add: verifier "reviewer"
    /// ```
    MISSING_VERIFIER = "HF205" "missing-verifier" Error,
        summary: "`sub-agent` verification without a `verifier`.",
        help: "Add `verifier \"AGENT\"` to the phase or to `defaults`.";

    /// ## What it catches
    /// Phases that depend on each other in a circle. The finding shows every edge of the cycle.
    ///
    /// ## Why
    /// None of the phases in the cycle could ever start.
    ///
    /// ## Example
    /// ```kdl
    /// phase "a" { run "true"; depends-on "b" }
    /// phase "b" { run "true"; depends-on "a" }
    /// ```
    DEPENDENCY_CYCLE = "HF206" "dependency-cycle" Error,
        summary: "Phases depend on each other in a cycle.",
        help: "Remove one of the `depends-on` edges shown so that the phases form a DAG.";

    /// ## What it catches
    /// A duration that cannot be read, such as `"5 minutes please"` or `"-3s"`.
    ///
    /// ## Why
    /// Timeouts and backoffs must mean exactly what they say.
    ///
    /// ## Example
    /// ```kdl
    /// timeout "5min"    // write "5m"
    /// ```
    INVALID_DURATION = "HF301" "invalid-duration" Error,
        summary: "A duration cannot be read.",
        help: "Write durations like \"90s\", \"15m\" or \"1h 30m\".";

    /// ## What it catches
    /// A regular expression that does not compile (`evidence`, `matches`, `absent`).
    ///
    /// ## Why
    /// The gate would fail at run time, after the agent has already been paid.
    ///
    /// ## Example
    /// ```kdl
    /// matches "response" "STEP: (done"
    /// ```
    INVALID_REGEX = "HF302" "invalid-regex" Error,
        summary: "A regular expression does not compile.",
        help: "Fix the pattern; raw strings (#\"…\"#) avoid doubled backslashes.";

    /// ## What it catches
    /// A glob pattern that does not compile (`glob`, `scope`, `protect`, `syntax`, targets).
    ///
    /// ## Why
    /// The expectation could never be checked.
    ///
    /// ## Example
    /// ```kdl
    /// scope "src/[a-"
    /// ```
    INVALID_GLOB = "HF303" "invalid-glob" Error,
        summary: "A glob pattern does not compile.",
        help: "Fix the pattern: `*` matches within a folder, `**` across folders, `{a,b}` alternatives.";

    /// ## What it catches
    /// A prompt (inline, or in a `file=`) that is not a valid MiniJinja template.
    ///
    /// ## Why
    /// The prompt would fail to render at run time, after the run started.
    ///
    /// ## Example
    /// ```kdl
    /// prompt "Fix {{ feedback }"
    /// ```
    PROMPT_TEMPLATE_SYNTAX = "HF304" "prompt-template-syntax" Error,
        summary: "A prompt is not a valid MiniJinja template.",
        help: "Close every `{{ … }}` and `{% … %}`; write `{{ '{{' }}` for a literal brace pair.";

    /// ## What it catches
    /// A prompt template (or a template it includes) that uses a variable helixflow does not
    /// define: anything but `phase`, `description`, `outputs`, `gates`, `attempt`, `max_attempts`,
    /// `feedback`, `verify_instructions`, `vars` and the names of the phase's `vars` (template
    /// parameters included); or `vars.NAME` where the phase's `vars` have no `NAME`. Also
    /// `nosuchvar.field`. A value the template treats as optional is not reported: tested with
    /// `is defined` or `is undefined`, given a `default` (or `d`), or used as an `if`/`elif`
    /// condition, so one prompt file can serve phases that set different `vars`.
    ///
    /// ## Why
    /// Printing an undefined variable is an error when a prompt renders, so a typo would fail
    /// every attempt of the phase at run time; before, it silently became empty text and the
    /// agent got a prompt without its feedback. Every documented variable is always defined
    /// (`feedback` is empty on the first attempt), so `{% if feedback %}` needs no guard.
    ///
    /// ## Example
    /// ```kdl
    /// phase "parser" {
    ///     prompt "Fix the parser. {{ feedbak }}"   // did you mean `feedback`?
    /// }
    /// ```
    UNKNOWN_PROMPT_VARIABLE = "HF305" "unknown-prompt-variable" Error,
        summary: "A prompt uses a variable that is not defined.",
        help: "Use one of the prompt variables, or declare the name in the phase's `vars`.";

    /// ## What it catches
    /// A prompt template that applies a filter (`{{ x | uper }}`) or a test
    /// (`{% if attempt is evn %}`) that MiniJinja does not have.
    ///
    /// ## Why
    /// MiniJinja looks filters and tests up only when the prompt renders, so the phase would fail
    /// at run time, after the run started.
    ///
    /// ## Example
    /// ```kdl
    /// prompt "Outputs: {{ outputs | joined(\", \") }}"   // the filter is `join`
    /// ```
    UNKNOWN_TEMPLATE_FILTER = "HF306" "unknown-template-filter" Error,
        summary: "A prompt uses a filter or test that MiniJinja does not have.",
        help: "See MiniJinja's filters and tests: https://docs.rs/minijinja/latest/minijinja/filters/";

    /// ## What it catches
    /// A `{{ name }}` in an agent's `command` or `resume` argument that helixflow does not
    /// replace. `command` replaces `{{ prompt }}`, `{{ prompt_file }}`, `{{ phase }}`,
    /// `{{ attempt }}` and `{{ workspace }}`; `resume` also `{{ feedback }}` and
    /// `{{ feedback_file }}`. An expression such as `{{ prompt | upper }}` is not replaced either.
    ///
    /// ## Why
    /// Arguments are not templates: everything but those placeholders reaches the agent byte for
    /// byte (so `sh -c "echo '{% if x %}'"` is safe), and a misspelt placeholder would reach it
    /// as written instead of the prompt.
    ///
    /// ## Example
    /// ```kdl
    /// agent "claude" {
    ///     command "claude" "-p" "{{ promt }}"   // did you mean `{{ prompt }}`?
    /// }
    /// ```
    UNKNOWN_ARGV_PLACEHOLDER = "HF307" "unknown-argv-placeholder" Error,
        summary: "An agent's argument has a `{{ … }}` placeholder that is not replaced.",
        help: "Use one of the placeholders the message lists; put expressions in the prompt.";

    /// ## What it catches
    /// An empty (or blank) value where a gate, output or step needs one: `command ""`, `fix=""`,
    /// `run ""` and `escalate ""` (commands that do nothing), `name=""`, `cwd=""`, `key=""`,
    /// `file ""`, `glob ""` and every other empty glob or path, an empty heading or front-matter
    /// key, and an empty `matches`/`absent`/`evidence` pattern.
    ///
    /// ## Why
    /// An empty command exits 0, so its gate always passes; an empty path or glob names no file;
    /// an empty pattern matches everywhere, so `matches` always passes and `absent` always fails;
    /// an empty name leaves the gate unnamed in reports. None of them checks what it seems to.
    ///
    /// ## Example
    /// ```kdl
    /// gates { command "" name="tests" }
    /// ```
    EMPTY_VALUE = "HF308" "empty-value" Error,
        summary: "A gate option, path, glob or pattern is empty.",
        help: "Write the value the gate needs, or remove the option.";

    /// ## What it catches
    /// A glob that ends with `/`, such as `protect "tests/"` or `scope "src/"` (also in `outputs`,
    /// `syntax` and gate targets), a glob without wildcards that names a folder of the workspace
    /// (`protect "tests"`), and a `file` output that ends with `/`.
    ///
    /// ## Why
    /// Globs match files, and a pattern ending with `/` names only the folder: `protect "tests/"`
    /// protects nothing, and `scope "src/"` allows no change at all. helixflow does not widen it
    /// silently, so that a pattern always means what it says; `tests/**` is every file under the
    /// folder.
    ///
    /// ## Example
    /// ```kdl
    /// protect "tests/"     // write "tests/**"
    /// ```
    FOLDER_GLOB = "HF309" "folder-glob" Error,
        summary: "A glob ends with `/`: it names a folder and matches no file.",
        help: "Write `FOLDER/**` for every file under the folder.";

    /// ## What it catches
    /// A glob with a `..` segment that does not climb above the workspace, such as
    /// `protect "src/../data/**"`, in `scope`, `protect`, `outputs`, `inputs`, `syntax`, gate
    /// targets and `bookkeeping`. A `..` that climbs above the workspace is HF401.
    ///
    /// ## Why
    /// Globs are matched against the paths of the workspace's files, which never hold `..`: such a
    /// glob matches no file, so `protect "src/../data/**"` protects nothing and `scope` with it
    /// allows nothing. helixflow does not rewrite the pattern silently, so that a pattern always
    /// means what it says; the fix is the glob without `..`.
    ///
    /// ## Example
    /// ```kdl
    /// protect "src/../data/**"     // write "data/**"
    /// ```
    PARENT_IN_GLOB = "HF310" "parent-in-glob" Error,
        summary: "A glob has a `..` segment: it matches no file.",
        help: "Write the glob without `..`, as the path it means.";

    /// ## What it catches
    /// A path that is absolute, or that climbs above the workspace with `..`.
    ///
    /// ## Why
    /// Agents work inside the workspace; outputs, scopes and prompts outside it cannot be checked
    /// or protected, and a pipeline that reaches out of its folder is not portable.
    ///
    /// ## Example
    /// ```kdl
    /// outputs { file "../other-repo/main.py" }
    /// ```
    PATH_ESCAPES_WORKSPACE = "HF401" "path-escapes-workspace" Error,
        summary: "A path is absolute or leaves the workspace.",
        help: "Use a path relative to the workspace that stays inside it.";

    /// ## What it catches
    /// `prompt file=` or `verifier-prompt file=` naming a file that does not exist.
    ///
    /// ## Why
    /// The phase could not render its prompt; better to know before the run starts.
    ///
    /// ## Example
    /// ```kdl
    /// prompt file="prompts/parsr.md"
    /// ```
    PROMPT_FILE_MISSING = "HF402" "prompt-file-missing" Error,
        summary: "A prompt file does not exist.",
        help: "Create the file, or fix the path (it is relative to the workspace).";

    /// ## What it catches
    /// An `{% include %}`, `{% import %}`, `{% from … import %}` or `{% extends %}` in a prompt
    /// naming a template that does not exist, or whose name is computed (`{% include name %}`).
    /// Names are paths relative to the workspace, like `prompt file=`.
    ///
    /// ## Why
    /// Included templates are read and checked with the pipeline, as prompt files are, so that
    /// what lint accepted is what runs. A missing one would fail the phase at run time.
    ///
    /// ## Example
    /// ```kdl
    /// prompt "{% include \"prompts/comon.md\" %} Write the parser."
    /// ```
    PROMPT_INCLUDE_MISSING = "HF403" "prompt-include-missing" Error,
        summary: "A prompt includes a template that cannot be found.",
        help: "Create the file, or fix the name (a path relative to the workspace, written as a string).";

    /// ## What it catches
    /// `isolation "worktree"` (on a phase, in a template or in `defaults`) in a pipeline whose
    /// workspace is not inside a git work tree: no folder from the workspace up holds a `.git`.
    ///
    /// ## Why
    /// An isolated phase's attempts work in a git worktree made from the workspace's repository
    /// (`git worktree add`); without a repository there is nothing to make it from, and every
    /// attempt of the phase would fail at run time.
    ///
    /// ## Example
    /// ```kdl
    /// // in a folder that is not a git repository
    /// phase "parser" { agent "claude"; isolation "worktree" }
    /// ```
    WORKTREE_OUTSIDE_GIT = "HF404" "worktree-outside-git" Error,
        summary: "`isolation \"worktree\"` in a workspace that is not in a git repository.",
        help: "Make the workspace a git repository (`git init`, and commit), or remove `isolation \"worktree\"` so that the phase works in the workspace itself.";

    /// ## What it catches
    /// A phase that uses a template without giving a parameter that has no default.
    ///
    /// ## Why
    /// The template's text would keep an unfilled placeholder.
    ///
    /// ## Example
    /// ```kdl
    /// template "python-module" { param "module"; … }
    /// phase "lexer" use="python-module"        // module= is missing
    /// ```
    MISSING_TEMPLATE_PARAMETER = "HF501" "missing-template-parameter" Error,
        summary: "A template parameter without a default is not given.",
        help: "Add the parameter as a property of the phase, e.g. `module=\"adr/lexer\"`.";

    /// ## What it catches
    /// A property on a phase that the template it uses does not declare as a `param`.
    ///
    /// ## Why
    /// A misspelt parameter would leave the default in place unnoticed.
    ///
    /// ## Example
    /// ```kdl
    /// phase "lexer" use="python-module" modul="adr/lexer"
    /// ```
    UNKNOWN_TEMPLATE_PARAMETER = "HF502" "unknown-template-parameter" Error,
        summary: "A phase gives a parameter that its template does not declare.",
        help: "Use one of the template's parameters, or declare it with `param` in the template.";

    /// ## What it catches
    /// An `import` whose file is neither next to the importing file nor on `HELIXFLOW_PATH`.
    ///
    /// ## Why
    /// Its agents and templates would be missing.
    ///
    /// ## Example
    /// ```kdl
    /// import "templates/pyhton.kdl"
    /// ```
    IMPORT_NOT_FOUND = "HF503" "import-not-found" Error,
        summary: "An imported file cannot be found or read.",
        help: "Imports are resolved relative to the importing file, then in each folder of HELIXFLOW_PATH.";

    /// ## What it catches
    /// Files that import each other in a circle.
    ///
    /// ## Why
    /// The import chain would never end.
    ///
    /// ## Example
    /// ```kdl
    /// // a.kdl
    /// import "b.kdl"
    /// // b.kdl
    /// import "a.kdl"
    /// ```
    IMPORT_CYCLE = "HF504" "import-cycle" Error,
        summary: "Files import each other in a cycle.",
        help: "Remove one of the imports; move what both need into a third file.";

    /// ## What it catches
    /// An `import` of a file in a git repository (`git+https://…`, `git+ssh://…`,
    /// `git+file://…`, `git+git://…`) without `rev`.
    ///
    /// ## Why
    /// Without a pin, the agents and templates a pipeline runs with would be whatever the
    /// repository holds on the day: two machines would run different pipelines. `rev` names a
    /// tag, a branch or a full commit SHA, and `helixflow.lock` keeps the commit it resolved to.
    ///
    /// ## Example
    /// ```kdl
    /// import "git+https://github.com/acme/helixflow-lib.git//agents.kdl"
    /// ```
    UNPINNED_IMPORT = "HF505" "unpinned-import" Error,
        summary: "A remote import has no `rev`: it is not pinned.",
        help: "Add `rev=` with a tag, a branch or a full commit SHA: import \"git+https://…//agents.kdl\" rev=\"v1.4.0\".";

    /// ## What it catches
    /// A remote import that cannot name a file of a repository: a scheme git is not asked to
    /// fetch with (only `git+https://`, `git+ssh://`, `git+file://` and `git+git://` are), no
    /// `//` between the repository and the file, a path that leaves the repository, a `rev`
    /// that cannot be a tag, a branch or a commit, or `rev` on an import of a local file.
    ///
    /// ## Why
    /// git would be asked for something that cannot exist, or something other than a file of
    /// the repository.
    ///
    /// ## Example
    /// ```kdl
    /// import "git+https://github.com/acme/helixflow-lib.git/agents.kdl" rev="v1.4.0"
    /// ```
    INVALID_REMOTE_IMPORT = "HF506" "invalid-remote-import" Error,
        summary: "A remote import's URL or `rev` cannot name a file of a repository.",
        help: "Write `git+SCHEME://HOST/REPOSITORY//PATH/IN/REPOSITORY` with `rev=\"TAG, BRANCH OR SHA\"`.";

    /// ## What it catches
    /// A repository that git cannot reach: a wrong URL, no network, missing credentials, or a
    /// commit that the repository cannot give (git's own message is quoted).
    ///
    /// ## Why
    /// The commit the lock pins is not in the import cache, so it must be fetched.
    ///
    /// ## Example
    /// ```kdl
    /// import "git+file:///srv/git/no-such-repository.git//agents.kdl" rev="v1"
    /// ```
    REPOSITORY_UNREACHABLE = "HF507" "repository-unreachable" Error,
        summary: "git cannot fetch from the repository of a remote import.",
        help: "Check the URL and that `git ls-remote URL` works here (credentials, network, SSH keys); `--offline` uses the cache only.";

    /// ## What it catches
    /// A `rev` that is neither a tag nor a branch of the repository, nor a full commit SHA.
    ///
    /// ## Why
    /// There is nothing to pin the import to. An abbreviated SHA cannot be looked up without
    /// fetching the whole history: write all 40 characters.
    ///
    /// ## Example
    /// ```kdl
    /// import "git+https://github.com/acme/helixflow-lib.git//agents.kdl" rev="v9.9.9"
    /// ```
    UNKNOWN_REV = "HF508" "unknown-rev" Error,
        summary: "The repository has no tag or branch of that name.",
        help: "List what it has with `git ls-remote --tags --heads URL`, or give a full commit SHA.";

    /// ## What it catches
    /// A remote import whose file is not in the repository at the pinned commit (or is not a
    /// UTF-8 text file there). A relative import inside a remote file is looked for in the same
    /// repository at the same commit.
    ///
    /// ## Why
    /// Its agents and templates would be missing.
    ///
    /// ## Example
    /// ```kdl
    /// import "git+https://github.com/acme/helixflow-lib.git//agnets.kdl" rev="v1.4.0"
    /// ```
    FILE_MISSING_AT_COMMIT = "HF509" "file-missing-at-commit" Error,
        summary: "The imported file is not in the repository at the pinned commit.",
        help: "Check the path after `//` (it is relative to the repository's root), or the `rev`.";

    /// ## What it catches
    /// A lock file (`helixflow.lock`) that cannot be read, and, under `--locked`, a lock that
    /// does not match the pipeline: a remote import it does not pin, a file it does not list, a
    /// pin no import uses any more, or no lock at all.
    ///
    /// ## Why
    /// The lock is what makes every machine use the same commits. `--locked` (for CI) fails
    /// rather than change it, as `cargo --locked` does; a lock that cannot be read is never
    /// written over.
    ///
    /// ## Example
    /// ```kdl
    /// // pipeline.kdl, with `helixflow run --locked` and no helixflow.lock
    /// import "git+https://github.com/acme/helixflow-lib.git//agents.kdl" rev="v1.4.0"
    /// ```
    LOCK_MISMATCH = "HF510" "lock-mismatch" Error,
        summary: "The lock does not match the pipeline, or cannot be read.",
        help: "Run `helixflow lock` and commit the lock; `helixflow lock --update` moves pins to what their `rev` names now.";

    /// ## What it catches
    /// A file in the import cache whose SHA-256 is not the one the lock recorded when it was
    /// first read (someone edited the cached copy), or a locked file gone from the cache.
    ///
    /// ## Why
    /// The cache is trusted only as far as the lock vouches for it; a changed copy would run
    /// agents and templates nobody reviewed. A tag moved upstream does not matter (the lock
    /// pins the commit); a changed cache does.
    ///
    /// ## Example
    /// ```text
    /// ~/.cache/helixflow/imports/3f2c1a9…/agents.kdl edited by hand
    /// ```
    IMPORT_HASH_MISMATCH = "HF511" "import-hash-mismatch" Error,
        summary: "A cached file of a remote import is not the one the lock recorded.",
        help: "Remove the commit's folder from the import cache and run again: it is fetched anew and checked against the lock.";

    /// ## What it catches
    /// An import cache folder that cannot be created or written (`HELIXFLOW_CACHE`, else
    /// `$XDG_CACHE_HOME/helixflow/imports`, else `~/.cache/helixflow/imports`).
    ///
    /// ## Why
    /// A fetched commit is put in the cache before any of its files is read.
    ///
    /// ## Example
    /// ```text
    /// HELIXFLOW_CACHE=/read-only/folder helixflow lint
    /// ```
    IMPORT_CACHE_UNWRITABLE = "HF512" "import-cache-unwritable" Error,
        summary: "The import cache folder cannot be written.",
        help: "Set HELIXFLOW_CACHE to a folder this user can write.";

    /// ## What it catches
    /// A remote import that cannot be resolved without the network when the network may not be
    /// used: with `--offline`, or in the language server, which never fetches: a `rev` that is
    /// not in the lock, or a locked commit that is not in the import cache.
    ///
    /// ## Why
    /// Offline, only the lock and the cache can answer.
    ///
    /// ## Example
    /// ```kdl
    /// // helixflow lint --offline, before the first fetch
    /// import "git+https://github.com/acme/helixflow-lib.git//agents.kdl" rev="v1.4.0"
    /// ```
    IMPORT_NOT_CACHED = "HF513" "import-not-cached" Error,
        summary: "A remote import is not in the lock or the cache, and the network may not be used.",
        help: "Run once with the network (`helixflow lock`) to fetch it into the cache.";

    /// ## What it catches
    /// `glob PATTERN min=0` in `outputs`.
    ///
    /// ## Why
    /// An expectation that accepts zero files always passes: it verifies nothing.
    ///
    /// ## Example
    /// ```kdl
    /// outputs { glob "docs/*.md" min=0 }
    /// ```
    EMPTY_GLOB_EXPECTATION = "HF601" "empty-glob-expectation" Warning,
        summary: "`glob … min=0` expects nothing and always passes.",
        help: "Use `min=1` (the default) or more, or remove the line.";

    /// ## What it catches
    /// A `syntax` gate none of whose files has a language helixflow can parse.
    ///
    /// ## Why
    /// The gate would pass without checking anything. Supported: Python, Rust, JavaScript,
    /// TypeScript/TSX, JSON, YAML, TOML, Bash, Go and KDL, by file extension.
    ///
    /// ## Example
    /// ```kdl
    /// outputs { file "docs/guide.md" }
    /// gates { syntax }
    /// ```
    SYNTAX_WITHOUT_LANGUAGE = "HF602" "syntax-without-language" Warning,
        summary: "A `syntax` gate has no files in a supported language.",
        help: "Give `syntax` globs of source files, or remove the gate.";

    /// ## What it catches
    /// Two phases that may run at the same time (neither depends on the other) whose `scope`
    /// globs overlap.
    ///
    /// ## Why
    /// Two agents writing the same files at once will undo each other's work, and each attempt's
    /// scope check will blame the other.
    ///
    /// ## Example
    /// ```kdl
    /// phase "a" { scope "src/**" }
    /// phase "b" { scope "src/lib/**" }
    /// ```
    OVERLAPPING_SCOPE = "HF603" "overlapping-scope" Warning,
        summary: "Two phases that may run concurrently have overlapping scopes.",
        help: "Make one phase depend on the other, or narrow the scopes so they do not overlap.";

    /// ## What it catches
    /// An agent defined in the pipeline file that no phase, verifier or default uses.
    ///
    /// ## Why
    /// Dead configuration misleads readers. (Agents from imported libraries are not reported.)
    ///
    /// ## Example
    /// ```kdl
    /// agent "old-claude" { command "claude" "-p" "{{ prompt }}" }
    /// ```
    UNUSED_AGENT = "HF604" "unused-agent" Warning,
        summary: "An agent is defined but never used.",
        help: "Remove the agent, or use it from a phase.";

    /// ## What it catches
    /// A template defined in the pipeline file that no phase uses.
    ///
    /// ## Why
    /// Dead configuration misleads readers. (Templates from imported libraries are not reported.)
    ///
    /// ## Example
    /// ```kdl
    /// template "python-module" { param "module" }
    /// ```
    UNUSED_TEMPLATE = "HF605" "unused-template" Warning,
        summary: "A template is defined but never used.",
        help: "Remove the template, or use it with `phase \"NAME\" use=\"TEMPLATE\"`.";

    /// ## What it catches
    /// `{{ prompt }}` inside an argument of an agent's `command` or `resume`.
    ///
    /// ## Why
    /// Linux refuses a single argument longer than 128 KiB ("Argument list too long"). A prompt
    /// grows with its template, included files, `vars`, the feedback of a retry and, for a
    /// verifier, the diff it reviews; past the limit the agent cannot be started, and the attempt
    /// fails. `{{ feedback }}` is not reported: feedback given to an agent is cut to 64 KiB.
    ///
    /// ## Example
    /// ```kdl
    /// agent "claude" {
    ///     command "claude" "-p" "{{ prompt }}"
    /// }
    /// ```
    PROMPT_IN_ARGV = "HF606" "prompt-in-argv" Warning,
        summary: "The prompt is passed as one argument, which the OS limits to 128 KiB.",
        help: "Give the prompt on standard input (`stdin #true`) or as a file (`{{ prompt_file }}`).";

    /// ## What it catches
    /// A phase that depends on a phase with `always-run #true`.
    ///
    /// ## Why
    /// A phase is up to date only when nothing it depends on re-runs. An `always-run` phase runs
    /// in every `helixflow run`, so every phase downstream of it runs every time too, and pays
    /// for its agent every time. That is right when the upstream phase produces something new
    /// each time (a review, a fetch); when it does not, declare the downstream phase's `inputs`
    /// and let the upstream phase be up to date, or move the always-run work to the end.
    ///
    /// ## Example
    /// ```kdl
    /// phase "review" { agent "claude"; prompt "Review the code."; always-run #true }
    /// phase "docs" { agent "claude"; prompt "Write the docs."; depends-on "review" }
    /// ```
    ALWAYS_RUN_UPSTREAM = "HF607" "always-run-upstream" Warning,
        summary: "A phase depends on an `always-run` phase, so it is never up to date either.",
        help: "Keep it if the phase must follow each new run of its upstream; otherwise drop the dependency or the upstream's `always-run`.";

    /// ## What it catches
    /// A `max-cost` budget over a phase whose agent has neither `usage` nor `cost`, so that
    /// helixflow cannot know what any of its attempts cost.
    ///
    /// ## Why
    /// With `unknown-cost "fail"` (the default) such a phase stops after its first attempt; with
    /// `"allow"` the budget does not count it at all.
    ///
    /// ## Example
    /// ```kdl
    /// pipeline "p" { max-cost 5 }
    /// agent "bot" { command "bot" "{{ prompt }}" }
    /// phase "work" { agent "bot"; prompt "Write the parser." }
    /// ```
    BUDGET_WITHOUT_USAGE = "HF608" "budget-without-usage" Warning,
        summary: "A `max-cost` budget covers an agent whose cost helixflow cannot read.",
        help: "Declare the agent's `usage` (e.g. `usage \"claude\"`), and a `price` for models that report tokens only; or its `cost` per run (`cost 0` for an agent that costs nothing).";

    /// ## What it catches
    /// A phase's `protect` glob that covers files another phase may change at the same time: a
    /// file in that phase's `scope`, or one of its `outputs`.
    ///
    /// ## Why
    /// Phases that run at once share the workspace. A change to a file that a phase running
    /// alongside claims (by its `scope` or `outputs`) is that phase's work: the protecting phase
    /// is not blamed for it, and its `protect` cannot stop it. What `protect` guarantees for such
    /// files holds only against the protecting phase's own agent.
    ///
    /// ## Example
    /// ```kdl
    /// phase "code" { scope "src/**" }
    /// phase "docs" { scope "docs/**"; protect "src/**" }
    /// ```
    PROTECT_OVERLAPS_PARALLEL_WORK = "HF609" "protect-overlaps-parallel-work" Warning,
        summary: "A phase protects files another phase may change at the same time.",
        help: "Make one phase depend on the other, or protect only what no phase running alongside may change.";

    /// ## What it catches
    /// A phase whose `protect` covers its own `outputs` or part of its own `scope`.
    ///
    /// ## Why
    /// The phase must write its outputs and may change its scope, but must leave protected files
    /// byte-identical: an output under `protect` can never be written, so the phase can never
    /// pass, and a change in the overlap of scope and protect always fails.
    ///
    /// ## Example
    /// ```kdl
    /// phase "tests" {
    ///     outputs { file "toolz/tests/test_nth.py" }
    ///     scope "toolz/tests/**"
    ///     protect "toolz/**"
    /// }
    /// ```
    PROTECT_COVERS_OWN_WORK = "HF610" "protect-covers-own-work" Warning,
        summary: "A phase protects files it must or may change itself.",
        help: "Narrow `protect` to what the phase must not touch (e.g. `toolz/*.py` rather than `toolz/**`), or narrow its scope.";

    /// ## What it catches
    /// `worktree-include` or `worktree-share` where no phase they apply to has
    /// `isolation "worktree"`.
    ///
    /// ## Why
    /// They say what an attempt's git worktree brings from the workspace. A phase that works in
    /// the workspace itself has no worktree: the files are already there, and nothing is read
    /// only, so the setting does nothing.
    ///
    /// ## Example
    /// ```kdl
    /// phase "tests" {
    ///     run "pytest -q"
    ///     worktree-share ".venv"
    /// }
    /// ```
    WORKTREE_SETTING_WITHOUT_WORKTREE = "HF611" "worktree-setting-without-worktree" Warning,
        summary: "`worktree-include` or `worktree-share` on a phase that has no worktree.",
        help: "Add `isolation \"worktree\"` to the phase (or to `defaults`), or remove the setting.";

    /// ## What it catches
    /// A phase's `worktree-share` glob that covers one of its own outputs or part of its own
    /// scope.
    ///
    /// ## Why
    /// A shared folder is read only for every process the attempt starts: an output inside it
    /// can never be written, so the phase can never pass, and a change the scope allows there
    /// always fails.
    ///
    /// ## Example
    /// ```kdl
    /// phase "deps" {
    ///     isolation "worktree"
    ///     run "npm install"
    ///     outputs { file "node_modules/.package-lock.json" }
    ///     worktree-share "node_modules"
    /// }
    /// ```
    SHARED_FOLDER_IN_OWN_WORK = "HF612" "shared-folder-in-own-work" Warning,
        summary: "A phase shares read only a folder it must or may write.",
        help: "Bring the folder with `worktree-include \"FOLDER/**\"` instead (a copy the attempt may change), or keep the phase's outputs and scope out of it.";

    /// ## What it catches
    /// A `for-each` with no source, or with more than one (`json=`, `glob=`, a list of items),
    /// or `key=` without `json=`.
    ///
    /// ## Why
    /// The items of the phase must come from exactly one place, known before it runs.
    ///
    /// ## Example
    /// ```kdl
    /// phase "migrate" {
    ///     for-each            // json="plan/modules.json" key="id", glob="src/**/*.py" or "a" "b"
    ///     run "true"
    /// }
    /// ```
    FOR_EACH_SOURCE = "HF701" "for-each-source" Error,
        summary: "`for-each` needs exactly one source: `json=`, `glob=` or a list of items.",
        help: "Write `for-each json=\"plan/items.json\" key=\"id\"`, `for-each glob=\"src/**/*.py\"` or `for-each \"a\" \"b\"`.";

    /// ## What it catches
    /// `{{ item }}`, `{{ item.FIELD }}`, `{{ item.key }}` or `{{ item.index }}` in a phase that has
    /// no `for-each`, or an item placeholder that is not a plain name (`{{ item.path | upper }}`)
    /// where no template language renders it.
    ///
    /// ## Why
    /// Only the items of a `for-each` phase have a value; elsewhere the placeholder would reach
    /// the agent, the file system or the shell as written.
    ///
    /// ## Example
    /// ```kdl
    /// phase "docs" {
    ///     run "true"
    ///     outputs { file "docs/{{ item.key }}.md" }   // no `for-each` here
    /// }
    /// ```
    ITEM_OUTSIDE_FOR_EACH = "HF702" "item-outside-for-each" Error,
        summary: "An item placeholder is used where no item is given.",
        help: "Add `for-each` to the phase, or write the value itself.";

    /// ## What it catches
    /// In a file of phases a planner writes (`generates`): a node other than `phase`, a phase that
    /// redefines one of the pipeline, or a phase that itself uses `generates`.
    ///
    /// ## Why
    /// Generated phases join a pipeline that is already running: they may add work after the
    /// planner, not change what was planned, and may not plan again (one level only).
    ///
    /// ## Example
    /// ```kdl
    /// // plan/phases.kdl, written by the phase with `generates "plan/phases.kdl"`
    /// import "other.kdl"
    /// phase "build" { run "make" }   // "build" is a phase of the pipeline already
    /// ```
    GENERATED_PHASES = "HF703" "generated-phases" Error,
        summary: "A generated file of phases declares what only the pipeline may.",
        help: "Write only `phase` nodes with new names and no `generates`; use the pipeline's agents, templates and `defaults`.";

    /// ## What it catches
    /// `max-items` or `max-parallel` on a phase without `for-each`, or `for-each` together with
    /// `generates`.
    ///
    /// ## Why
    /// The limits count items, which only a `for-each` phase has; a phase made into items cannot
    /// also plan phases.
    ///
    /// ## Example
    /// ```kdl
    /// phase "build" {
    ///     run "make"
    ///     max-parallel 4   // without `for-each` this limits nothing
    /// }
    /// ```
    FOR_EACH_SETTINGS = "HF704" "for-each-settings" Error,
        summary: "An item setting on a phase without `for-each`, or `for-each` with `generates`.",
        help: "Add `for-each`, or remove the setting.";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_ordered_and_documented() {
        for pair in ALL_RULES.windows(2) {
            assert!(
                pair[0].code < pair[1].code,
                "{} before {}",
                pair[0].code,
                pair[1].code
            );
        }
        for rule in ALL_RULES {
            for heading in ["## What it catches", "## Why", "## Example"] {
                assert!(rule.docs.contains(heading), "{} lacks {heading}", rule.code);
            }
            assert!(!rule.help.is_empty());
        }
        assert_eq!(find_rule("hf101"), Some(&UNKNOWN_NODE));
        assert_eq!(find_rule("unknown-node"), Some(&UNKNOWN_NODE));
    }
}
