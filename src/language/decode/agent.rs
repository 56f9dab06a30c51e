//! An `agent NAME { … }` node: its command lines, response format, evidence and session id.

use std::collections::BTreeMap;
use std::path::Path;

use kdl::{KdlDocument, KdlNode};

use super::{Decoder, Origin, boolean, string_text_span};
use crate::diagnostics::{Diagnostic, FileId, Span, rules};
use crate::language::template::Substitution;
use crate::language::validate::{name_span, positional};
use crate::model::{
    Agent, FailureMarkers, ResponseFormat, SessionCapture, Spanned, UsageFormat, UsageSpec,
};
use kdl::KdlValue;

impl Decoder<'_> {
    /// Decodes an `agent NAME { … }` node.
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per node of an agent: the schema's table, read whole"
    )]
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
            no_change: None,
            max_turns_option: None,
            timeout: None,
            idle_timeout: None,
            usage: None,
            cost_usd: None,
            failures: FailureMarkers::default(),
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
                    // An unknown name is an error of lint's (HF107); the agent keeps the default.
                    agent.response = origin
                        .arg(child, 0)
                        .and_then(|a| ResponseFormat::from_name(&a.value))
                        .unwrap_or_default();
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
                "usage" => agent.usage = self.usage_spec(child, origin),
                "no-change" => {
                    if let Some(pattern) = origin.arg(child, 0) {
                        self.empty(
                            &pattern,
                            "an empty `no-change` pattern matches every response: each attempt that changed nothing would pass `changes`",
                            "Write what the agent answers when there is nothing to change, e.g. `no-change \"NOTHING TO CHANGE\"`.",
                        );
                        self.regex(&pattern);
                        agent.no_change = Some(pattern.value);
                    }
                }
                "cost" => agent.cost_usd = super::number(positional(child).next()),
                "max-turns-option" => {
                    agent.max_turns_option = origin.arg(child, 0).map(|option| option.value);
                }
                kind @ ("transient-exit" | "fatal-exit") => {
                    let codes = positional(child).filter_map(|e| match e.value() {
                        KdlValue::Integer(n) => i32::try_from(*n).ok(),
                        _ => None,
                    });
                    if kind == "fatal-exit" {
                        agent.failures.fatal_exit.extend(codes);
                    } else {
                        agent.failures.transient_exit.extend(codes);
                    }
                }
                kind @ ("transient-pattern" | "fatal-pattern") => {
                    for pattern in origin.args(child) {
                        self.empty(
                            &pattern,
                            "an empty pattern matches every failure",
                            "Write what marks the failure, e.g. `transient-pattern \"API Error: 429\"`.",
                        );
                        self.regex(&pattern);
                        if kind == "fatal-pattern" {
                            agent.failures.fatal_pattern.push(pattern.value);
                        } else {
                            agent.failures.transient_pattern.push(pattern.value);
                        }
                    }
                }
                "timeout" => agent.timeout = origin.arg(child, 0).and_then(|d| self.duration(&d)),
                "idle-timeout" => {
                    agent.idle_timeout = origin.arg(child, 0).and_then(|d| self.duration(&d));
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
                    name_span(file, node),
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

    /// Decodes `usage FORMAT [cost=…] [input-tokens=…] …`: `json` and `regex` need at least one
    /// of the value properties, which the other formats do not take.
    fn usage_spec(&mut self, node: &KdlNode, origin: Origin<'_>) -> Option<UsageSpec> {
        let format = UsageFormat::from_name(&origin.arg(node, 0)?.value)?;
        let keys = [
            "cost",
            "input-tokens",
            "cached-input-tokens",
            "output-tokens",
            "turns",
        ];
        let values: Vec<Option<Spanned<String>>> =
            keys.iter().map(|key| origin.prop(node, key)).collect();
        let declared = matches!(format, UsageFormat::Json | UsageFormat::Regex);
        if declared && values.iter().all(Option::is_none) {
            self.report(
                Diagnostic::new(
                    &rules::USAGE_FIELDS,
                    name_span(origin.file, node),
                    "`usage \"json\"` and `usage \"regex\"` say where the values are",
                )
                .label("no value declared")
                .help("Add `cost=` (and token properties), e.g. `usage \"json\" cost=\"usage.cost_usd\" input-tokens=\"usage.input\"`."),
            );
        }
        for value in values.iter().flatten() {
            if !declared {
                self.report(
                    Diagnostic::new(
                        &rules::USAGE_FIELDS,
                        value.span,
                        "this `usage` format knows where its values are: only `json` and `regex` take cost and token properties",
                    )
                    .label("not read")
                    .help("Remove the property, or use `usage \"json\"` or `usage \"regex\"`."),
                );
            } else if format == UsageFormat::Regex {
                self.regex(value);
            }
        }
        let mut values = values.into_iter().map(|v| v.map(|v| v.value));
        let mut next = || values.next().flatten();
        Some(UsageSpec {
            format,
            cost: next(),
            input_tokens: next(),
            cached_input_tokens: next(),
            output_tokens: next(),
            turns: next(),
            model: origin.prop(node, "model").map(|m| m.value),
        })
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
                let span = regex.map_or_else(|| name_span(origin.file, node), |r| r.span);
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
}
