//! Completion: the node names that fit the block the cursor is in (gate kinds inside `gates`),
//! property names, the values of fixed sets (verify modes, `on-failure`, response formats), and the
//! names of phases, agents, templates and template parameters where the language expects one.

use std::ops::Range;

use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, Documentation, MarkupContent,
    MarkupKind, Position, TextEdit,
};

use super::docs;
use super::documents::{Document, Documents, Overlay};
use super::hover::quote;
use super::locate;
use super::position::LineIndex;
use super::workspace::{Symbol, Workspace};
use crate::language::kdl::tolerant::{Entry, Node, Word};
use crate::language::schema::{self, Context, NodeSchema, ValueType};

/// The completions at `position` in `document`.
pub(crate) fn complete(
    document: &Document,
    documents: &Documents,
    overlay: &Overlay,
    position: Position,
) -> Vec<CompletionItem> {
    let index = LineIndex::new(&document.text);
    let offset = index.offset(position);
    let tree = document.tree();
    let found = locate::enclosing(&tree, offset);
    let mut completer = Completer {
        index: &index,
        document,
        documents,
        overlay,
        workspace: None,
        items: Vec::new(),
    };
    let head = found
        .siblings
        .iter()
        .find(|n| n.name.span.start <= offset && offset <= n.head_end);
    match head {
        None => completer.node_names(found.context, found.siblings, None, offset..offset),
        Some(node) if offset <= node.name.span.end => {
            if !node.name.quoted {
                completer.node_names(
                    found.context,
                    found.siblings,
                    Some(node),
                    node.name.span.clone(),
                );
            }
        }
        Some(node) => {
            let phase = found
                .ancestors
                .first()
                .filter(|n| n.name() == "phase")
                .and_then(|n| n.first_arg()?.text());
            let at = Site {
                context: found.context,
                node,
                enclosing_phase: phase,
            };
            completer.entry(&at, offset);
        }
    }
    completer.items
}

/// The node whose head the cursor is in.
struct Site<'t> {
    context: Option<Context>,
    node: &'t Node,
    /// The name of the top-level phase around the node, if any.
    enclosing_phase: Option<&'t str>,
}

struct Completer<'a> {
    index: &'a LineIndex<'a>,
    document: &'a Document,
    documents: &'a Documents,
    overlay: &'a Overlay,
    workspace: Option<Workspace>,
    items: Vec<CompletionItem>,
}

impl Completer<'_> {
    fn workspace(&mut self) -> &Workspace {
        self.workspace
            .get_or_insert_with(|| Workspace::of(&self.document.path, self.documents, self.overlay))
    }

    fn push(
        &mut self,
        label: String,
        insert: String,
        kind: CompletionItemKind,
        detail: String,
        documentation: Option<String>,
        replace: &Range<usize>,
    ) {
        let typed = &self.document.text[replace.clone()];
        // Clients filter on the text in the replaced range; when that starts with a quote, the
        // quoted form is what it must match.
        let filter_text = typed.starts_with(['"', '#']).then(|| insert.clone());
        let sort_text = format!("{:04}", self.items.len());
        self.items.push(CompletionItem {
            label,
            kind: Some(kind),
            detail: Some(detail),
            documentation: documentation.map(|value| {
                Documentation::MarkupContent(MarkupContent {
                    kind: MarkupKind::Markdown,
                    value,
                })
            }),
            sort_text: Some(sort_text),
            filter_text,
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
                self.index.range(replace.start, replace.end),
                insert,
            ))),
            ..CompletionItem::default()
        });
    }

    /// The nodes allowed in the block, less those already there that may appear only once.
    fn node_names(
        &mut self,
        context: Option<Context>,
        siblings: &[Node],
        editing: Option<&Node>,
        replace: Range<usize>,
    ) {
        let Some(context) = context.filter(|c| *c != Context::Vars) else {
            return;
        };
        for schema in schema::nodes_in(context) {
            let present = siblings
                .iter()
                .any(|n| n.name() == schema.name && !editing.is_some_and(|e| std::ptr::eq(e, n)));
            if present && !schema.repeatable {
                continue;
            }
            let kind = if context == Context::Gates {
                CompletionItemKind::FUNCTION
            } else {
                CompletionItemKind::KEYWORD
            };
            self.push(
                schema.name.to_owned(),
                schema.name.to_owned(),
                kind,
                schema.signature(),
                Some(docs::node(schema)),
                &replace,
            );
        }
    }

    /// Inside a node's head, after its name.
    fn entry(&mut self, at: &Site<'_>, offset: usize) {
        let node = at.node;
        let Some(schema) = locate::schema_of(at.context, node) else {
            return;
        };
        let within = |word: &Word| word.span.start <= offset && offset <= word.span.end;
        let editing = node.entries.iter().find(|e| {
            e.key.as_ref().is_some_and(within)
                || e.value.as_ref().is_some_and(within)
                || (e.key.is_some() && e.value.is_none() && offset == e.end())
        });
        let arg_index = node
            .entries
            .iter()
            .filter(|e| e.key.is_none() && e.end() < offset)
            .count();
        match editing {
            None => {
                let here = offset..offset;
                self.props(at, schema, None, &here);
                self.arg_values(at, schema, arg_index, &here);
            }
            Some(entry) => match (&entry.key, &entry.value) {
                (Some(key), _) if offset <= key.span.end => {
                    self.props(at, schema, Some(entry), &key.span.clone());
                }
                (Some(_), value) => {
                    let replace = value
                        .as_ref()
                        .map_or(offset..offset, |v| self.replaced(v, offset));
                    self.prop_values(at, schema, entry, &replace);
                }
                (None, Some(value)) => {
                    let replace = self.replaced(value, offset);
                    if !value.quoted {
                        self.props(at, schema, Some(entry), &replace);
                    }
                    let index = node
                        .entries
                        .iter()
                        .take_while(|e| !std::ptr::eq(*e, entry))
                        .filter(|e| e.key.is_none())
                        .count();
                    self.arg_values(at, schema, index, &replace);
                }
                (None, None) => {}
            },
        }
    }

    /// The range a completion replaces when the cursor is in `word`: the whole token, except
    /// that an unterminated string (which runs to the end of the line) is replaced up to the
    /// cursor only.
    fn replaced(&self, word: &Word, offset: usize) -> Range<usize> {
        let raw = &self.document.text[word.span.clone()];
        let closed = raw.len() > 1 && raw.ends_with(['"', '#']);
        if word.quoted && !closed {
            word.span.start..offset
        } else {
            word.span.clone()
        }
    }

    /// Property names: the schema's, and a used template's parameters.
    fn props(
        &mut self,
        at: &Site<'_>,
        schema: &'static NodeSchema,
        editing: Option<&Entry>,
        replace: &Range<usize>,
    ) {
        let given = |name: &str| {
            at.node
                .entries
                .iter()
                .any(|e| e.key_text() == Some(name) && !editing.is_some_and(|x| std::ptr::eq(x, e)))
        };
        for prop in schema.props {
            if given(prop.name) {
                continue;
            }
            self.push(
                prop.name.to_owned(),
                format!("{}=", prop.name),
                CompletionItemKind::PROPERTY,
                prop.ty.describe(),
                Some(docs::prop(schema, prop)),
                replace,
            );
        }
        let Some(template) = used_template(at) else {
            return;
        };
        let params = self
            .workspace()
            .definitions(&Symbol::Template(template.to_owned()))
            .first()
            .and_then(|found| template_params(&found.file.tree.nodes, template))
            .unwrap_or_default();
        for (name, detail) in params {
            if given(&name) {
                continue;
            }
            self.push(
                name.clone(),
                format!("{name}="),
                CompletionItemKind::PROPERTY,
                detail,
                Some(format!("A parameter of template `{template}`.")),
                replace,
            );
        }
    }

    fn arg_values(
        &mut self,
        at: &Site<'_>,
        schema: &'static NodeSchema,
        index: usize,
        replace: &Range<usize>,
    ) {
        if let Some(arg) = schema.arg(index) {
            self.values(at, schema, arg.ty, None, replace);
        }
    }

    fn prop_values(
        &mut self,
        at: &Site<'_>,
        schema: &'static NodeSchema,
        entry: &Entry,
        replace: &Range<usize>,
    ) {
        if let Some(prop) = entry.key_text().and_then(|k| schema.prop(k)) {
            self.values(at, schema, prop.ty, Some(prop.name), replace);
        }
    }

    /// The values of a type: a fixed set, booleans, or the names a reference may take.
    fn values(
        &mut self,
        at: &Site<'_>,
        schema: &'static NodeSchema,
        ty: ValueType,
        prop: Option<&str>,
        replace: &Range<usize>,
    ) {
        match ty {
            ValueType::Choice(choices) => {
                for choice in choices {
                    self.push(
                        choice.value.to_owned(),
                        quote(choice.value),
                        CompletionItemKind::ENUM_MEMBER,
                        format!("{} value", schema.name),
                        Some(docs::choice(schema, choice, choices)),
                        replace,
                    );
                }
            }
            ValueType::Bool => {
                for value in ["#true", "#false"] {
                    self.push(
                        value.to_owned(),
                        value.to_owned(),
                        CompletionItemKind::VALUE,
                        "boolean".to_owned(),
                        None,
                        replace,
                    );
                }
            }
            ValueType::Name => {
                let Some((kind, names)) = self.reference_names(at, prop) else {
                    return;
                };
                let given: Vec<&str> = at.node.args().filter_map(Word::text).collect();
                for name in names {
                    let own = kind == "phase" && at.enclosing_phase == Some(name.as_str());
                    if own || (kind == "phase" && given.contains(&name.as_str())) {
                        continue;
                    }
                    self.push(
                        name.clone(),
                        quote(&name),
                        CompletionItemKind::REFERENCE,
                        kind.to_owned(),
                        None,
                        replace,
                    );
                }
            }
            _ => {}
        }
    }

    /// The names a reference at this place may take, and their kind.
    fn reference_names(
        &mut self,
        at: &Site<'_>,
        prop: Option<&str>,
    ) -> Option<(&'static str, Vec<String>)> {
        let phase_like = matches!(
            at.context,
            Some(Context::Phase | Context::Template | Context::Defaults | Context::Attempt)
        );
        let kind = match (at.node.name(), prop) {
            ("depends-on", None) if phase_like => "phase",
            ("agent" | "verifier", None) if phase_like => "agent",
            ("phase", Some("use")) if at.context == Some(Context::TopLevel) => "template",
            _ => return None,
        };
        let names = self.workspace().defined(kind);
        Some((kind, names))
    }
}

/// The template named by `use=` on the top-level phase the cursor is in.
fn used_template<'t>(at: &Site<'t>) -> Option<&'t str> {
    if at.context != Some(Context::TopLevel) || at.node.name() != "phase" {
        return None;
    }
    at.node.prop("use")?.value_text()
}

/// The parameters of template `name` among top-level `nodes`, with a description of each.
fn template_params(nodes: &[Node], name: &str) -> Option<Vec<(String, String)>> {
    let template = nodes
        .iter()
        .find(|n| n.name() == "template" && n.first_arg().and_then(Word::text) == Some(name))?;
    Some(
        template
            .child_nodes()
            .iter()
            .filter(|n| n.name() == "param")
            .filter_map(|param| {
                let name = param.first_arg()?.text()?.to_owned();
                let detail = match param.prop("default").and_then(Entry::value_text) {
                    Some(default) => format!("parameter, default {}", quote(default)),
                    None => "parameter, required".to_owned(),
                };
                Some((name, detail))
            })
            .collect(),
    )
}
