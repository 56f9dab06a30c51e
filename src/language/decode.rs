//! Typed decoding of validated nodes into model pieces, with the checks of values' contents:
//! durations, regexes, globs, workspace paths and prompt templates.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

use super::loader::{Loader, normalize};
use super::template::Substitution;
use super::validate::{name_span, positional, property, value_span};
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, rules};
use crate::glob::compile_glob;
use crate::model::{
    Agent, Gate, GateKind, Millis, OnFailure, Output, Prompt, ResponseFormat, SessionCapture,
    Spanned, VerifyMode,
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
    pub escalate: Option<String>,
    pub env: BTreeMap<String, String>,
}

impl Body {
    /// `self` (a template's body) with `own` (the phase's) on top: lists are added, single values
    /// of `own` win.
    pub(crate) fn overlay(mut self, own: Body) -> Body {
        macro_rules! single {
            ($($field:ident),*) => { $( if own.$field.is_some() { self.$field = own.$field; } )* };
        }
        single!(
            description,
            agent,
            run,
            prompt,
            fail_fast,
            verify,
            verifier,
            verifier_prompt,
            retries,
            backoff,
            timeout,
            on_failure,
            escalate
        );
        self.depends_on.extend(own.depends_on);
        self.outputs.extend(own.outputs);
        self.scope.extend(own.scope);
        self.protect.extend(own.protect);
        self.gates.extend(own.gates);
        self.vars.extend(own.vars);
        self.env.extend(own.env);
        self
    }

    /// Fills what the phase does not set from `defaults`.
    pub(crate) fn fill_from(mut self, defaults: &Body) -> Body {
        macro_rules! single {
            ($($field:ident),*) => { $( if self.$field.is_none() { self.$field = defaults.$field.clone(); } )* };
        }
        // A `run` step has no agent: the default agent applies to agent phases only.
        if self.run.is_none() && self.agent.is_none() {
            self.agent = defaults.agent.clone();
        }
        single!(
            prompt,
            fail_fast,
            verify,
            verifier,
            verifier_prompt,
            retries,
            backoff,
            timeout,
            on_failure,
            escalate
        );
        macro_rules! list {
            ($($field:ident),*) => { $( if self.$field.is_empty() { self.$field = defaults.$field.clone(); } )* };
        }
        list!(scope, protect, gates);
        for (map, default) in [
            (&mut self.vars, &defaults.vars),
            (&mut self.env, &defaults.env),
        ] {
            for (k, v) in default {
                map.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        self
    }
}

/// A prompt as written.
#[derive(Debug, Clone)]
pub(crate) struct PromptDecl {
    /// The prompt, at its string or its `file=` value.
    pub prompt: Spanned<Prompt>,
    /// Where the template text itself lies, byte for byte, in a source file: the prompt file, or
    /// the inside of a quoted string without escapes. Places inside the template map onto it.
    pub text: Option<Span>,
}

/// The span of `range` of `text`, which lies at `at` in a source file: at least one character, on
/// character boundaries.
pub(crate) fn text_span(
    text: &str,
    at: Option<Span>,
    range: std::ops::Range<usize>,
) -> Option<Span> {
    let at = at?;
    if range.start > text.len() || range.end > text.len() || !text.is_char_boundary(range.start) {
        return None;
    }
    let mut end = range.end.max(range.start + 1).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    Some(Span::new(
        at.file,
        at.offset + range.start,
        end - range.start,
    ))
}

/// Where the text of a string entry lies in its file, when it is the source as written: a quoted
/// (or raw) single-line string whose text has no escapes.
pub(crate) fn string_text_span(entry: &KdlEntry, text: &str, span: Span) -> Option<Span> {
    let r = repr(entry)?;
    let hashes = r.len() - r.trim_start_matches('#').len();
    let body = &r[hashes..];
    (body.starts_with('"') && !body.starts_with("\"\"\"") && body.get(1..=text.len()) == Some(text))
        .then(|| Span::new(span.file, span.offset + hashes + 1, text.len()))
}

/// Decodes nodes of one file at a time; shared state for one compilation.
pub(crate) struct Decoder<'c> {
    pub diagnostics: &'c mut Diagnostics,
    pub sources: &'c mut Sources,
    pub loader: &'c dyn Loader,
    /// The workspace root, for prompt files.
    pub workspace: PathBuf,
}

/// One file and the substitution applied to its strings.
#[derive(Clone, Copy)]
pub(crate) struct Origin<'s> {
    pub file: FileId,
    pub subst: &'s Substitution<'s>,
}

impl Origin<'_> {
    fn string(&self, entry: &KdlEntry) -> Option<String> {
        match entry.value() {
            KdlValue::String(s) => Some(self.subst.apply(s)),
            _ => None,
        }
    }

    fn span(&self, entry: &KdlEntry) -> Span {
        value_span(self.file, entry)
    }

    fn arg(&self, node: &KdlNode, index: usize) -> Option<Spanned<String>> {
        let entry = positional(node).nth(index)?;
        Some(Spanned::new(self.string(entry)?, self.span(entry)))
    }

    fn args(&self, node: &KdlNode) -> Vec<Spanned<String>> {
        positional(node)
            .filter_map(|e| Some(Spanned::new(self.string(e)?, self.span(e))))
            .collect()
    }

    fn prop(&self, node: &KdlNode, name: &str) -> Option<Spanned<String>> {
        let entry = property(node, name)?;
        Some(Spanned::new(self.string(entry)?, self.span(entry)))
    }
}

fn int(entry: Option<&KdlEntry>) -> Option<u32> {
    match entry?.value() {
        KdlValue::Integer(n) => u32::try_from(*n).ok(),
        _ => None,
    }
}

fn boolean(node: &KdlNode) -> Option<bool> {
    match positional(node).next().map(KdlEntry::value) {
        None => Some(true),
        Some(KdlValue::Bool(b)) => Some(*b),
        Some(_) => None,
    }
}

/// The text of an entry's value as written (for raw and escaped strings alike).
fn repr(entry: &KdlEntry) -> Option<&str> {
    entry.format().map(|f| f.value_repr.as_str())
}

impl Decoder<'_> {
    fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// A duration such as `"90s"` or `"1h 30m"`.
    pub(crate) fn duration(&mut self, value: &Spanned<String>) -> Option<Millis> {
        match humantime::parse_duration(value.value.trim()) {
            Ok(d) if !d.is_zero() => Some(Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))),
            Ok(_) => {
                self.report(
                    Diagnostic::new(
                        &rules::INVALID_DURATION,
                        value.span,
                        "a duration of zero would expire at once",
                    )
                    .label("zero"),
                );
                None
            }
            Err(e) => {
                self.report(
                    Diagnostic::new(
                        &rules::INVALID_DURATION,
                        value.span,
                        format!("\"{}\" is not a duration: {e}", value.value),
                    )
                    .label("invalid duration"),
                );
                None
            }
        }
    }

    /// Checks that a regex compiles.
    pub(crate) fn regex(&mut self, value: &Spanned<String>) {
        // Parsing is enough to find every syntax error, and much cheaper than compiling.
        if let Err(e) = regex_syntax::Parser::new().parse(&value.value) {
            let detail = e.to_string();
            let last = detail.lines().last().unwrap_or_default().trim().to_owned();
            self.report(
                Diagnostic::new(
                    &rules::INVALID_REGEX,
                    value.span,
                    format!("invalid regular expression: {last}"),
                )
                .label("does not compile"),
            );
        }
    }

    /// Checks that a glob is not empty, compiles, names files and stays inside the workspace.
    pub(crate) fn glob(&mut self, value: &Spanned<String>) {
        if self.empty(
            value,
            "an empty glob matches no file",
            "Write a pattern such as `src/**/*.py`.",
        ) {
            return;
        }
        if let Err(e) = compile_glob(&value.value) {
            self.report(
                Diagnostic::new(
                    &rules::INVALID_GLOB,
                    value.span,
                    format!("invalid glob: {}", e.kind()),
                )
                .label("does not compile"),
            );
        } else if let Some((folder, why)) = self.names_a_folder(&value.value) {
            let every_file = format!("{folder}/**");
            let mut d = Diagnostic::new(
                &rules::FOLDER_GLOB,
                value.span,
                format!(
                    "`{}` {why}: globs match files, and this one matches none",
                    value.value
                ),
            )
            .label("names only the folder")
            .help(format!(
                "Write `{every_file}` for every file under the folder."
            ));
            // Only where the value is written as a plain string: a fix must not undo a template
            // parameter or an escape.
            if self.written(value.span) == Some(format!("\"{}\"", value.value).as_str()) {
                d = d.fix(
                    format!("use \"{every_file}\""),
                    value.span,
                    format!("\"{every_file}\""),
                );
            }
            self.report(d);
        }
        self.workspace_path(value);
    }

    /// The folder a glob names instead of files, and how it shows: it ends with `/`, or it has no
    /// wildcard and is a folder in the workspace (`protect "tests"`).
    fn names_a_folder<'v>(&self, glob: &'v str) -> Option<(&'v str, &'static str)> {
        if escape_problem(glob).is_some() {
            return None;
        }
        if glob.ends_with('/') {
            return Some((glob.trim_end_matches('/'), "ends with `/`"));
        }
        let literal = !glob.contains(['*', '?', '[', '{', '\\']);
        (literal && self.workspace.join(glob).is_dir()).then_some((glob, "is a folder"))
    }

    /// Reports a value that is empty or only blanks, where one is needed; returns whether it is.
    fn empty(&mut self, value: &Spanned<String>, message: &str, help: &str) -> bool {
        let blank = value.value.trim().is_empty();
        if blank {
            self.report(
                Diagnostic::new(&rules::EMPTY_VALUE, value.span, message)
                    .label("empty")
                    .help(help),
            );
        }
        blank
    }

    /// The source text at `span`.
    fn written(&self, span: Span) -> Option<&str> {
        self.sources
            .get(span.file)
            .text
            .get(span.offset..span.end())
    }

    /// Checks that a path is relative and does not climb above the workspace.
    pub(crate) fn workspace_path(&mut self, value: &Spanned<String>) {
        if let Some(problem) = escape_problem(&value.value) {
            self.report(
                Diagnostic::new(
                    &rules::PATH_ESCAPES_WORKSPACE,
                    value.span,
                    format!("\"{}\" {problem}", value.value),
                )
                .label("outside the workspace"),
            );
        }
    }

    /// Checks a prompt template's syntax; `at` maps error offsets back into a source file.
    pub(crate) fn template_syntax(&mut self, text: &str, span: Span, at: Option<Span>) -> bool {
        let Err(e) = super::template::environment().template_from_str(text) else {
            return true;
        };
        let precise = e
            .range()
            .and_then(|range| text_span(text, at, range))
            .unwrap_or(span);
        let message = e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_owned);
        self.report(
            Diagnostic::new(
                &rules::PROMPT_TEMPLATE_SYNTAX,
                precise,
                format!("invalid prompt template: {message}"),
            )
            .label("template error"),
        );
        false
    }

    /// Reads a file a prompt names (through the loader, so an editor's unsaved text counts) and
    /// registers it among the sources, once: its text, and a span over the whole of it.
    pub(crate) fn read_source(&mut self, absolute: &Path) -> std::io::Result<(String, Span)> {
        let text = self.loader.read(absolute)?;
        let file = self
            .sources
            .find(absolute)
            .unwrap_or_else(|| self.sources.add(absolute.to_path_buf(), text.as_str()));
        let whole = Span::new(file, 0, text.len());
        Ok((text, whole))
    }

    /// `prompt "…"` or `prompt file="…"` (also `verifier-prompt`).
    fn prompt(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<PromptDecl> {
        if let Some(path) = origin.prop(node, "file") {
            self.workspace_path(&path);
            let absolute = normalize(&self.workspace, Path::new(&path.value));
            return match self.read_source(&absolute) {
                Ok((text, whole)) => {
                    self.template_syntax(&text, whole, Some(whole));
                    Some(PromptDecl {
                        prompt: Spanned::new(
                            Prompt::File {
                                path: PathBuf::from(&path.value),
                                text,
                            },
                            path.span,
                        ),
                        text: Some(whole),
                    })
                }
                Err(e) => {
                    let what = if e.kind() == std::io::ErrorKind::NotFound {
                        "does not exist".to_owned()
                    } else {
                        format!("cannot be read: {e}")
                    };
                    self.report(
                        Diagnostic::new(
                            &rules::PROMPT_FILE_MISSING,
                            path.span,
                            format!("prompt file \"{}\" {what}", path.value),
                        )
                        .label(format!("looked for {}", absolute.display())),
                    );
                    None
                }
            };
        }
        let entry = positional(node).next()?;
        let text = origin.string(entry)?;
        let span = origin.span(entry);
        // Error offsets map into the file only where the text is the literal source between quotes.
        let at = string_text_span(entry, &text, span);
        self.template_syntax(&text, span, at);
        Some(PromptDecl {
            prompt: Spanned::new(Prompt::Inline(text), span),
            text: at,
        })
    }

    /// Decodes an `agent NAME { … }` node.
    pub(crate) fn agent(&mut self, node: &KdlNode, file: FileId, path: &Path) -> Option<Agent> {
        let subst = Substitution::none();
        let origin = Origin {
            file,
            subst: &subst,
        };
        let name = origin.arg(node, 0)?;
        let mut agent = Agent {
            name: name.clone(),
            file: path.to_owned(),
            command: Vec::new(),
            resume: None,
            stdin: false,
            response: ResponseFormat::Text,
            evidence: None,
            evidence_tools: None,
            session_id: None,
            bookkeeping: Vec::new(),
            timeout: None,
            idle_timeout: None,
            env: BTreeMap::new(),
        };
        let mut evidence_tools = None;
        for child in node.children().map(KdlDocument::nodes).unwrap_or_default() {
            match child.name().value() {
                kind @ ("command" | "resume") => {
                    let args: Vec<(Spanned<String>, Option<Span>)> = positional(child)
                        .filter_map(|entry| {
                            let text = origin.string(entry)?;
                            let span = origin.span(entry);
                            let at = string_text_span(entry, &text, span);
                            Some((Spanned::new(text, span), at))
                        })
                        .collect();
                    self.check_argv(&args, kind == "resume");
                    let argv = args.into_iter().map(|(a, _)| a.value).collect();
                    if kind == "command" {
                        agent.command = argv;
                    } else {
                        agent.resume = Some(argv);
                    }
                }
                "stdin" => agent.stdin = boolean(child).unwrap_or(false),
                "response" => {
                    agent.response = match origin.arg(child, 0).as_ref().map(|a| a.value.as_str()) {
                        Some("json") => ResponseFormat::Json,
                        Some("claude-stream-json") => ResponseFormat::ClaudeStreamJson,
                        Some("codex-json") => ResponseFormat::CodexJson,
                        _ => ResponseFormat::Text,
                    };
                }
                "evidence" => {
                    if let Some(pattern) = origin.arg(child, 0) {
                        self.empty(
                            &pattern,
                            "an empty `evidence` pattern matches any transcript: it proves nothing",
                            "Write a pattern the agent's transcript must contain, e.g. `evidence \"tool_use\"`.",
                        );
                        self.regex(&pattern);
                        agent.evidence = Some(pattern.value);
                    }
                }
                "evidence-tools" => {
                    let names = origin.args(child);
                    for name in &names {
                        self.empty(
                            name,
                            "an empty tool name matches no tool call",
                            "Write a tool's name as the agent reports it, e.g. `evidence-tools \"Write\" \"Edit\"`, or no name for any tool.",
                        );
                    }
                    agent.evidence_tools = Some(names.into_iter().map(|n| n.value).collect());
                    evidence_tools = Some(child);
                }
                "session-id" => agent.session_id = self.session_capture(child, origin),
                "bookkeeping" => {
                    for glob in origin.args(child) {
                        self.glob(&glob);
                        agent.bookkeeping.push(glob.value);
                    }
                }
                "timeout" => agent.timeout = origin.arg(child, 0).and_then(|d| self.duration(&d)),
                "idle-timeout" => {
                    agent.idle_timeout = origin.arg(child, 0).and_then(|d| self.duration(&d))
                }
                "env" => {
                    if let (Some(k), Some(v)) = (origin.arg(child, 0), origin.arg(child, 1)) {
                        agent.env.insert(k.value, v.value);
                    }
                }
                _ => {}
            }
        }
        if let Some(node) = evidence_tools.filter(|_| !agent.response.shows_tool_calls()) {
            self.report(
                Diagnostic::new(
                    &rules::EVIDENCE_TOOLS_FORMAT,
                    super::validate::name_span(file, node),
                    format!(
                        "agent \"{}\" asks for `evidence-tools`, but its output is not an event stream helixflow can read tool calls from",
                        name.value
                    ),
                )
                .label("needs `response \"claude-stream-json\"` or `\"codex-json\"`"),
            );
        }
        if agent.command.is_empty() {
            self.report(
                Diagnostic::new(
                    &rules::AGENT_WITHOUT_COMMAND,
                    name.span,
                    format!("agent \"{}\" has no `command`", name.value),
                )
                .label("no command"),
            );
        }
        Some(agent)
    }

    /// Decodes `session-id json=KEY` or `session-id regex=RE`: exactly one of the two.
    fn session_capture(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<SessionCapture> {
        let json = origin.prop(node, "json");
        let regex = origin.prop(node, "regex");
        match (json, regex) {
            (Some(key), None) => {
                self.empty(
                    &key,
                    "an empty JSON key names no field",
                    "Write the field that holds the session id, e.g. `session-id json=\"session_id\"`.",
                );
                Some(SessionCapture::Json(key.value))
            }
            (None, Some(pattern)) => {
                self.empty(
                    &pattern,
                    "an empty pattern captures no session id",
                    "Write a pattern whose first group is the id, e.g. `session-id regex=\"session: (\\S+)\"`.",
                );
                self.regex(&pattern);
                Some(SessionCapture::Regex(pattern.value))
            }
            (json, regex) => {
                let both = json.is_some();
                let span =
                    regex.map_or_else(|| super::validate::name_span(origin.file, node), |r| r.span);
                self.report(
                    Diagnostic::new(
                        &rules::SESSION_ID_SOURCE,
                        span,
                        if both {
                            "`session-id` takes `json=` or `regex=`, not both"
                        } else {
                            "`session-id` says where the id is: `json=` or `regex=`"
                        },
                    )
                    .label(if both { "one too many" } else { "no source" }),
                );
                None
            }
        }
    }

    /// Decodes the children of a phase, template or `defaults` block.
    pub(crate) fn body(&mut self, children: Option<&KdlDocument>, origin: Origin<'_>) -> Body {
        let mut body = Body::default();
        for child in children.map(KdlDocument::nodes).unwrap_or_default() {
            self.body_child(child, origin, &mut body);
        }
        body
    }

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
            "scope" | "protect" => {
                let globs = origin.args(child);
                for glob in &globs {
                    self.glob(glob);
                }
                if child.name().value() == "scope" {
                    body.scope.extend(globs);
                } else {
                    body.protect.extend(globs);
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
            "backoff" => body.backoff = first().and_then(|d| self.duration(&d)),
            "timeout" => body.timeout = first().and_then(|d| self.duration(&d)),
            "on-failure" => {
                body.on_failure = match first().as_ref().map(|v| v.value.as_str()) {
                    Some("stop") => Some(OnFailure::Stop),
                    Some("continue") => Some(OnFailure::Continue),
                    _ => None,
                };
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
            _ => {}
        }
    }

    fn output(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<Spanned<Output>> {
        let first = origin.arg(node, 0)?;
        let output = match node.name().value() {
            "file" => {
                let blank = self.empty(
                    &first,
                    "`file \"\"` names no file",
                    "Give the path of the expected file, relative to the workspace.",
                );
                if !blank && first.value.ends_with('/') && escape_problem(&first.value).is_none() {
                    let folder = first.value.trim_end_matches('/');
                    self.report(
                        Diagnostic::new(
                            &rules::FOLDER_GLOB,
                            first.span,
                            format!(
                                "`file \"{}\"` names a folder; an output is a file",
                                first.value
                            ),
                        )
                        .label("names only the folder")
                        .help(format!(
                            "Name the file itself, or write `glob \"{folder}/**\"` for every file under `{folder}`."
                        )),
                    );
                }
                self.workspace_path(&first);
                Output::File { path: first.value }
            }
            "glob" => {
                self.glob(&first);
                let min_entry = property(node, "min");
                let min = int(min_entry).unwrap_or(1);
                if min == 0 {
                    let span =
                        min_entry.map_or(first.span, |e| Span::from_miette(origin.file, e.span()));
                    self.report(
                        Diagnostic::new(
                            &rules::EMPTY_GLOB_EXPECTATION,
                            span,
                            format!(
                                "`glob \"{}\" min=0` accepts no files at all and always passes",
                                first.value
                            ),
                        )
                        .label("always passes"),
                    );
                }
                Output::Glob {
                    pattern: first.value,
                    min,
                }
            }
            "from" => {
                self.empty(
                    &first,
                    "an empty path names no document",
                    "Give the path of the document that lists the files, e.g. `from \"adr/ADR-042.md\" key=\"files.create\"`.",
                );
                self.workspace_path(&first);
                let key = origin.prop(node, "key")?;
                self.empty(
                    &key,
                    "`key=\"\"` names no front-matter key",
                    "Give the dotted key of the list in the front matter, e.g. `key=\"files.create\"`.",
                );
                Output::From {
                    doc: first.value,
                    key: key.value,
                }
            }
            _ => return None,
        };
        Some(Spanned::new(
            output,
            Span::from_miette(origin.file, node.span()),
        ))
    }

    fn gate(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<Gate> {
        let kind_name = node.name().value();
        let args = origin.args(node);
        let kind = match kind_name {
            "syntax" => {
                for glob in &args {
                    self.glob(glob);
                }
                GateKind::Syntax {
                    globs: args.into_iter().map(|a| a.value).collect(),
                }
            }
            "command" => {
                let run = args.into_iter().next()?;
                self.empty(
                    &run,
                    "an empty command runs nothing and exits 0: this gate always passes",
                    "Write the shell command the gate runs, e.g. `command \"pytest -q\"`.",
                );
                let timeout = origin.prop(node, "timeout").and_then(|d| self.duration(&d));
                let cwd = origin.prop(node, "cwd");
                if let Some(cwd) = &cwd {
                    self.empty(
                        cwd,
                        "`cwd=\"\"` names no folder",
                        "Give the folder the command runs in, relative to the workspace, or remove `cwd=`.",
                    );
                    self.workspace_path(cwd);
                }
                let fix = origin.prop(node, "fix");
                if let Some(fix) = &fix {
                    self.empty(
                        fix,
                        "`fix=\"\"` runs nothing: the failing gate is only checked again",
                        "Give the shell command that repairs what the gate checks, or remove `fix=`.",
                    );
                }
                GateKind::Command {
                    run: run.value,
                    timeout,
                    cwd: cwd.map(|c| c.value),
                    fix: fix.map(|f| f.value),
                }
            }
            "matches" | "absent" => {
                let mut args = args.into_iter();
                let (target, pattern) = (args.next()?, args.next()?);
                if target.value != "response" {
                    self.glob(&target);
                }
                if pattern.value.is_empty() {
                    let outcome = if kind_name == "matches" {
                        "this `matches` gate always passes"
                    } else {
                        "this `absent` gate fails on every line"
                    };
                    self.report(
                        Diagnostic::new(
                            &rules::EMPTY_VALUE,
                            pattern.span,
                            format!("an empty pattern matches everywhere: {outcome}"),
                        )
                        .label("empty")
                        .help("Write the regular expression the gate looks for."),
                    );
                }
                self.regex(&pattern);
                let (target, pattern) = (target.value, pattern.value);
                if kind_name == "matches" {
                    GateKind::Matches { target, pattern }
                } else {
                    GateKind::Absent { target, pattern }
                }
            }
            "front-matter" | "sections" => {
                let mut args = args.into_iter();
                let path = args.next()?;
                self.empty(
                    &path,
                    "an empty path names no file",
                    "Give the path of the Markdown document, relative to the workspace.",
                );
                self.workspace_path(&path);
                let what = if kind_name == "front-matter" {
                    "an empty key is in no front matter: this gate always fails"
                } else {
                    "an empty heading is in no document: this gate always fails"
                };
                let rest = args
                    .inspect(|entry| {
                        self.empty(entry, what, "Write the text, or remove the empty entry.");
                    })
                    .map(|a| a.value)
                    .collect();
                if kind_name == "front-matter" {
                    GateKind::FrontMatter {
                        path: path.value,
                        keys: rest,
                    }
                } else {
                    GateKind::Sections {
                        path: path.value,
                        headings: rest,
                    }
                }
            }
            "paths-exist" => {
                let doc = args.into_iter().next()?;
                self.empty(
                    &doc,
                    "an empty path names no document",
                    "Give the path of the document that lists the paths, relative to the workspace.",
                );
                self.workspace_path(&doc);
                let key = origin.prop(node, "key")?;
                self.empty(
                    &key,
                    "`key=\"\"` names no front-matter key",
                    "Give the dotted key of the list in the front matter, e.g. `key=\"files.create\"`.",
                );
                GateKind::PathsExist {
                    doc: doc.value,
                    key: key.value,
                }
            }
            "changes" => GateKind::Changes {
                min: int(property(node, "min")).unwrap_or(1),
            },
            "approval" => GateKind::Approval {
                prompt: origin.prop(node, "prompt").map(|p| p.value),
            },
            _ => return None,
        };
        let name = origin.prop(node, "name");
        if let Some(name) = &name {
            self.empty(
                name,
                "`name=\"\"` leaves the gate without a name in reports and feedback",
                &format!("Name the gate, or remove `name=` to have it named `{kind_name}`."),
            );
        }
        let name = name.map_or_else(|| kind_name.to_owned(), |n| n.value);
        Some(Gate {
            name,
            kind,
            span: Span::from_miette(origin.file, node.span()),
        })
    }
}

/// Why a workspace-relative path leaves the workspace, if it does.
pub fn escape_problem(path: &str) -> Option<&'static str> {
    let p = Path::new(path);
    if p.has_root()
        || path.starts_with('~')
        || p.components().any(|c| matches!(c, Component::Prefix(_)))
    {
        return Some("is absolute; paths are relative to the workspace");
    }
    let mut depth = 0i32;
    for component in p.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Some("climbs above the workspace with `..`");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::escape_problem;

    #[test]
    fn paths_that_leave_the_workspace_are_found() {
        assert!(escape_problem("/etc/passwd").is_some());
        assert!(escape_problem("~/x").is_some());
        assert!(escape_problem("../x").is_some());
        assert!(escape_problem("a/../../x").is_some());
        assert!(escape_problem("a/../b/./c").is_none());
        assert!(escape_problem("src/**/*.py").is_none());
    }
}
