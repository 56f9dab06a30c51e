//! The generic walk of a document against the schema table: unknown and misplaced nodes, argument
//! counts and types, properties, children blocks and repeats. Every problem is collected.

use std::collections::HashMap;

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

use super::schema::{self, Context, NodeSchema, ValueType};
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Span, did_you_mean, rules};

/// The positional arguments of a node.
pub(crate) fn positional(node: &KdlNode) -> impl Iterator<Item = &KdlEntry> {
    node.entries().iter().filter(|e| e.name().is_none())
}

/// The last property `name` of a node (KDL: the last one wins).
pub(crate) fn property<'a>(node: &'a KdlNode, name: &str) -> Option<&'a KdlEntry> {
    node.entries()
        .iter()
        .rev()
        .find(|e| e.name().is_some_and(|n| n.value() == name))
}

/// The span of a node's name.
pub(crate) fn name_span(file: FileId, node: &KdlNode) -> Span {
    Span::from_miette(file, node.name().span())
}

/// The span of an entry's value (for a property, the part after `=`).
pub(crate) fn value_span(file: FileId, entry: &KdlEntry) -> Span {
    let whole = Span::from_miette(file, entry.span());
    match (entry.name(), entry.format()) {
        (Some(_), Some(format)) if format.value_repr.len() <= whole.len => Span::new(
            file,
            whole.end() - format.value_repr.len(),
            format.value_repr.len(),
        ),
        _ => whole,
    }
}

/// A documentation sentence as a fragment inside a message: no capital, no full stop.
fn sentence_fragment(doc: &str) -> String {
    let doc = doc.trim_end_matches('.');
    let mut chars = doc.chars();
    match chars.next() {
        Some(first) if chars.clone().next().is_some_and(char::is_lowercase) => {
            first.to_lowercase().chain(chars).collect()
        }
        _ => doc.to_owned(),
    }
}

/// How a KDL value is described in messages.
pub(crate) fn describe_value(value: &KdlValue) -> &'static str {
    match value {
        KdlValue::String(_) => "a string",
        KdlValue::Integer(_) => "an integer",
        KdlValue::Float(_) => "a number with a fraction",
        KdlValue::Bool(_) => "a boolean",
        KdlValue::Null => "#null",
    }
}

/// Walks documents against the schema, collecting diagnostics.
pub(crate) struct Validator<'d> {
    pub(crate) diagnostics: &'d mut Diagnostics,
    pub(crate) file: FileId,
}

impl Validator<'_> {
    /// Checks every node of `document` as children of `context`.
    pub(crate) fn document(&mut self, document: &KdlDocument, context: Context) {
        let mut first_seen: HashMap<&str, Span> = HashMap::new();
        for node in document.nodes() {
            let schema = self.node(node, context);
            let repeatable = schema.is_some_and(|s| s.repeatable);
            if schema.is_none() && context != Context::Vars {
                continue;
            }
            let name = node.name().value();
            let span = name_span(self.file, node);
            if let Some(&first) = first_seen.get(name) {
                if !repeatable {
                    self.diagnostics.push(
                        Diagnostic::new(
                            &rules::REPEATED_NODE,
                            span,
                            format!("`{name}` is given more than once in {}", context.describe()),
                        )
                        .label("repeated here")
                        .note(first, "first given here"),
                    );
                }
            } else {
                first_seen.insert(name, span);
            }
        }
    }

    /// Checks one node; returns its schema when the node is known in `context`.
    fn node(&mut self, node: &KdlNode, context: Context) -> Option<&'static NodeSchema> {
        let schema = if context == Context::Vars {
            &schema::VAR
        } else if let Some(schema) = schema::lookup(context, node.name().value()) {
            schema
        } else {
            self.unknown_node(node, context);
            return None;
        };
        self.arguments(node, schema);
        self.properties(node, schema);
        self.children(node, schema);
        Some(schema)
    }

    fn unknown_node(&mut self, node: &KdlNode, context: Context) {
        let name = node.name().value();
        let span = name_span(self.file, node);
        let elsewhere = schema::contexts_of(name);
        if context == Context::Attempt && !elsewhere.is_empty() {
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::ATTEMPT_SETTING,
                    span,
                    format!("an `attempt` block cannot set `{name}`"),
                )
                .label("not an attempt's setting")
                .help(format!(
                    "an `attempt` block may set: {}{}",
                    schema::ATTEMPT_SETTINGS.join(", "),
                    if elsewhere.contains(&Context::Phase) {
                        format!("; `{name}` stays the phase's for every attempt")
                    } else {
                        String::new()
                    }
                )),
            );
            return;
        }
        if !elsewhere.is_empty() {
            let places: Vec<_> = elsewhere.iter().map(|c| c.describe()).collect();
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::MISPLACED_NODE,
                    span,
                    format!("`{name}` is not allowed in {}", context.describe()),
                )
                .label("not allowed here")
                .help(format!("`{name}` belongs in {}", places.join(" or "))),
            );
            return;
        }
        let candidates: Vec<&str> = schema::nodes_in(context).map(|n| n.name).collect();
        let mut diagnostic = Diagnostic::new(
            &rules::UNKNOWN_NODE,
            span,
            format!("unknown node `{name}` in {}", context.describe()),
        )
        .label("unknown node");
        if let Some(suggestion) = did_you_mean(name, candidates.iter().copied()) {
            diagnostic = diagnostic
                .help(format!("did you mean `{suggestion}`?"))
                .fix(format!("rename to `{suggestion}`"), span, suggestion);
        } else {
            diagnostic = diagnostic.help(format!(
                "nodes allowed in {}: {}",
                context.describe(),
                candidates.join(", ")
            ));
        }
        self.diagnostics.push(diagnostic);
    }

    fn arguments(&mut self, node: &KdlNode, schema: &NodeSchema) {
        let args: Vec<&KdlEntry> = positional(node).collect();
        let optional_text = matches!(schema.name, "prompt" | "verifier-prompt");
        if let Some(max) = schema.max_args()
            && args.len() > max
        {
            let extra = Span::from_miette(self.file, args[max].span());
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::ARGUMENT_COUNT,
                    extra,
                    format!(
                        "`{}` takes {} argument{}, found {}",
                        schema.name,
                        if schema.min_args == max {
                            max.to_string()
                        } else {
                            format!("at most {max}")
                        },
                        if max == 1 { "" } else { "s" },
                        args.len()
                    ),
                )
                .label("unexpected argument")
                .help(format!("write it as `{}`", schema.signature())),
            );
        }
        if args.len() < schema.min_args {
            let missing = &schema.args[args.len()];
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::ARGUMENT_COUNT,
                    name_span(self.file, node),
                    format!(
                        "`{}` needs {} ({})",
                        schema.name,
                        missing.name,
                        sentence_fragment(missing.doc)
                    ),
                )
                .label(format!("missing {}", missing.name))
                .help(format!("write it as `{}`", schema.signature())),
            );
        }
        if optional_text && args.is_empty() && property(node, "file").is_none() {
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::MISSING_PROPERTY,
                    name_span(self.file, node),
                    format!("`{}` needs a template string or `file=`", schema.name),
                )
                .label("empty")
                .help(format!(
                    "write `{0} \"…\"` or `{0} file=\"prompts/….md\"`",
                    schema.name
                )),
            );
        }
        if optional_text && !args.is_empty() && property(node, "file").is_some() {
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::ARGUMENT_COUNT,
                    Span::from_miette(self.file, args[0].span()),
                    format!(
                        "`{}` takes either a string or `file=`, not both",
                        schema.name
                    ),
                )
                .label("remove this or `file=`"),
            );
        }
        for (index, entry) in args.iter().enumerate() {
            if let Some(arg) = schema.arg(index) {
                self.value(entry, arg.ty, schema.name);
            }
        }
    }

    fn properties(&mut self, node: &KdlNode, schema: &NodeSchema) {
        let template_params = schema.name == "phase" && property(node, "use").is_some();
        for entry in node.entries() {
            let Some(key) = entry.name() else { continue };
            match schema.prop(key.value()) {
                Some(prop) => self.value(entry, prop.ty, schema.name),
                // Further properties of a phase that uses a template are its parameters, checked
                // against the template's `param`s when it is expanded.
                None if template_params => {}
                None => self.unknown_property(entry, schema),
            }
        }
        for prop in schema.props.iter().filter(|p| p.required) {
            if property(node, prop.name).is_none() {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::MISSING_PROPERTY,
                        name_span(self.file, node),
                        format!(
                            "`{}` needs `{}=` ({})",
                            schema.name,
                            prop.name,
                            sentence_fragment(prop.doc)
                        ),
                    )
                    .label(format!("missing {}=", prop.name))
                    .help(format!("write it as `{}`", schema.signature())),
                );
            }
        }
    }

    fn unknown_property(&mut self, entry: &KdlEntry, schema: &NodeSchema) {
        let key = entry.name().expect("a property has a name");
        let span = Span::from_miette(self.file, key.span());
        let candidates: Vec<&str> = schema.props.iter().map(|p| p.name).collect();
        let mut diagnostic = Diagnostic::new(
            &rules::UNKNOWN_PROPERTY,
            span,
            format!(
                "`{}` does not take a property `{}`",
                schema.name,
                key.value()
            ),
        )
        .label("unknown property");
        if let Some(suggestion) = did_you_mean(key.value(), candidates.iter().copied()) {
            diagnostic = diagnostic
                .help(format!("did you mean `{suggestion}`?"))
                .fix(format!("rename to `{suggestion}`"), span, suggestion);
        } else if candidates.is_empty() {
            diagnostic = diagnostic.help(format!("`{}` takes no properties", schema.name));
        } else {
            diagnostic = diagnostic.help(format!(
                "`{}` takes: {}",
                schema.name,
                candidates.join(", ")
            ));
        }
        self.diagnostics.push(diagnostic);
    }

    /// Checks the KDL type of a value; the content (durations, regexes, globs, paths) is checked
    /// by the decoder after template parameters are substituted.
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per value type: a table, read whole"
    )]
    fn value(&mut self, entry: &KdlEntry, ty: ValueType, node: &str) {
        let span = value_span(self.file, entry);
        let value = entry.value();
        let wrong_type = |found: &KdlValue| {
            let mut d = Diagnostic::new(
                &rules::WRONG_TYPE,
                span,
                format!(
                    "`{node}` expects {}, found {}",
                    ty.describe(),
                    describe_value(found)
                ),
            )
            .label(format!("expected {}", ty.describe()));
            let numeric = match (ty, found) {
                (ValueType::Int(_), KdlValue::String(s)) => s.trim().parse::<i64>().is_ok(),
                (ValueType::Number, KdlValue::String(s)) => s.trim().parse::<f64>().is_ok(),
                _ => false,
            };
            if let KdlValue::String(s) = found
                && numeric
            {
                d = d
                    .help(format!("write the number without quotes: {}", s.trim()))
                    .fix("remove the quotes", span, s.trim());
            }
            d
        };
        match (ty, value) {
            (ValueType::Int(min), KdlValue::Integer(n)) => {
                let max = i128::from(u32::MAX);
                let problem = if *n < i128::from(min) {
                    Some(format!("`{node}` must be at least {min}, found {n}"))
                } else if *n > max {
                    Some(format!("`{node}` must be at most {max}, found {n}"))
                } else {
                    None
                };
                if let Some(message) = problem {
                    self.diagnostics.push(
                        Diagnostic::new(&rules::OUT_OF_RANGE, span, message).label("out of range"),
                    );
                }
            }
            (ValueType::Int(_), other) => self.diagnostics.push(wrong_type(other)),
            (ValueType::Number, KdlValue::Integer(n)) if *n < 0 => {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::OUT_OF_RANGE,
                        span,
                        format!("`{node}` must be at least 0, found {n}"),
                    )
                    .label("out of range"),
                );
            }
            (ValueType::Number, KdlValue::Float(n)) if !n.is_finite() || *n < 0.0 => {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::OUT_OF_RANGE,
                        span,
                        format!("`{node}` must be a finite number of at least 0, found {n}"),
                    )
                    .label("out of range"),
                );
            }
            (ValueType::Number, KdlValue::Integer(_) | KdlValue::Float(_)) => {}
            (ValueType::Number, other) => self.diagnostics.push(wrong_type(other)),
            // Its content (`"3.."`, an attempt from 1) is the decoder's to check (HF140).
            (ValueType::AttemptRange, KdlValue::Integer(_) | KdlValue::String(_)) => {}
            (ValueType::Bool, KdlValue::Bool(_)) => {}
            (ValueType::Bool, other) => self.diagnostics.push(wrong_type(other)),
            (ValueType::Choice(choices), KdlValue::String(s)) => {
                if !choices.iter().any(|c| c.value == s) {
                    let values: Vec<&str> = choices.iter().map(|c| c.value).collect();
                    let mut d = Diagnostic::new(
                        &rules::INVALID_CHOICE,
                        span,
                        format!("`{node}` does not accept \"{s}\""),
                    )
                    .label("not a valid value")
                    .help(format!("use one of: {}", values.join(", ")));
                    if let Some(suggestion) = did_you_mean(s, values.iter().copied()) {
                        d = d
                            .help(format!(
                                "did you mean \"{suggestion}\"? (valid: {})",
                                values.join(", ")
                            ))
                            .fix(
                                format!("replace with \"{suggestion}\""),
                                span,
                                format!("\"{suggestion}\""),
                            );
                    }
                    self.diagnostics.push(d);
                }
            }
            (_, KdlValue::String(_)) => {}
            (_, other) => self.diagnostics.push(wrong_type(other)),
        }
    }

    fn children(&mut self, node: &KdlNode, schema: &NodeSchema) {
        match (schema.children, node.children()) {
            (Some(context), Some(children)) => self.document(children, context),
            (None, Some(children)) => {
                let span = Span::from_miette(self.file, children.span());
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::CHILDREN_BLOCK,
                        span,
                        format!("`{}` does not take a children block", schema.name),
                    )
                    .label("unexpected block")
                    .help(format!("write it as `{}`", schema.signature())),
                );
            }
            (Some(_), None) if schema.children_required => {
                self.diagnostics.push(
                    Diagnostic::new(
                        &rules::CHILDREN_BLOCK,
                        name_span(self.file, node),
                        format!("`{}` needs a children block `{{ … }}`", schema.name),
                    )
                    .label("no block")
                    .help(format!("write it as `{}`", schema.signature())),
                );
            }
            _ => {}
        }
    }
}
