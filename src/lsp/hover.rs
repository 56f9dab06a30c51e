//! Hover: the documentation of the node, property or value under the cursor, from the schema
//! table; for a name that refers to a phase, agent or template, where and how it is defined.

use std::fmt::Write;

use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position};

use super::docs;
use super::documents::{Document, Documents, Overlay};
use super::locate::{self, Hit, Part};
use super::position::LineIndex;
use super::workspace::{self, Found, Symbol, Workspace};
use crate::language::Loader;
use crate::language::kdl::tolerant::{Entry, Node};
use crate::language::schema::{Context, NodeSchema, ValueType};
use crate::remote::{Source, is_remote};

/// The hover at `position` in `document`.
pub(crate) fn hover(
    document: &Document,
    documents: &Documents,
    overlay: &Overlay,
    position: Position,
) -> Option<Hover> {
    let index = LineIndex::new(&document.text);
    let offset = index.offset(position);
    let tree = document.tree();
    let hit = locate::hit(&tree, offset)?;
    let markdown = match &hit.part {
        Part::Name => locate::schema_of(hit.context, hit.node).map(docs::node),
        Part::Key(entry) => property(&hit, entry, document, documents, overlay),
        Part::Value { entry, index } => {
            value(&hit, entry, *index, offset, document, documents, overlay)
        }
    }?;
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: markdown,
        }),
        range: Some(index.range(hit.span.start, hit.span.end)),
    })
}

fn property(
    hit: &Hit<'_>,
    entry: &Entry,
    document: &Document,
    documents: &Documents,
    overlay: &Overlay,
) -> Option<String> {
    let schema = locate::schema_of(hit.context, hit.node)?;
    let key = entry.key_text()?;
    if let Some(prop) = schema.prop(key) {
        return Some(docs::prop(schema, prop));
    }
    // Any other property of a phase that uses a template is one of the template's parameters.
    let template = template_of(hit)?;
    let symbol = Symbol::Param {
        template: template.to_owned(),
        name: key.to_owned(),
    };
    let workspace = Workspace::of(&document.path, documents, overlay);
    definition_text(&workspace, &symbol)
}

fn value(
    hit: &Hit<'_>,
    entry: &Entry,
    index: Option<usize>,
    offset: usize,
    document: &Document,
    documents: &Documents,
    overlay: &Overlay,
) -> Option<String> {
    let schema = locate::schema_of(hit.context, hit.node)?;
    let (ty, fallback) = match (index, entry.key_text()) {
        (Some(index), _) => {
            let arg = schema.arg(index)?;
            (arg.ty, docs::arg(schema, arg))
        }
        (None, Some(key)) => match schema.prop(key) {
            Some(prop) => (prop.ty, docs::prop(schema, prop)),
            // A template parameter's value: the parameter explains it.
            None => return property(hit, entry, document, documents, overlay),
        },
        (None, None) => return None,
    };
    if hit.context == Some(Context::TopLevel) && hit.node.name() == "import" {
        let pinned = remote_import(hit.node, &document.path, overlay);
        return Some(match pinned {
            Some(text) => format!("{text}\n\n---\n\n{fallback}"),
            None => fallback,
        });
    }
    match ty {
        ValueType::Choice(choices) => {
            let text = entry.value_text()?;
            Some(match choices.iter().find(|c| c.value == text) {
                Some(choice) => docs::choice(schema, choice, choices),
                None => fallback,
            })
        }
        ValueType::Name => {
            let tree = document.tree();
            let symbol = workspace::symbol_at(&tree, offset).map(|o| o.symbol);
            let described = symbol.and_then(|symbol| {
                let workspace = Workspace::of(&document.path, documents, overlay);
                definition_text(&workspace, &symbol)
            });
            Some(match described {
                Some(text) => format!("{text}\n\n---\n\n{fallback}"),
                None => fallback,
            })
        }
        _ => Some(fallback),
    }
}

/// For a remote import: its repository, file, `rev` and the commit the lock pins, and its copy in
/// the import cache (from the lock and the cache only: hovering never fetches).
fn remote_import(node: &Node, root: &std::path::Path, overlay: &Overlay) -> Option<String> {
    let text = node.first_arg()?.text()?;
    if !is_remote(text) {
        return None;
    }
    let source = match Source::parse(text) {
        Ok(source) => source,
        Err(problem) => return Some(format!("Not a file of a repository: {problem}")),
    };
    let mut out = format!(
        "A file of the git repository `{}`: `{}`.",
        source.repository, source.path
    );
    let Some(rev) = node.prop("rev").and_then(Entry::value_text) else {
        out.push_str("\n\nNot pinned: add `rev=` with a tag, a branch or a full commit SHA.");
        return Some(out);
    };
    match overlay.remote(root, &source, rev) {
        Ok(fetched) => {
            let _ = write!(
                out,
                "\n\n`rev` `{rev}` is commit `{}`.\n\nRead from the import cache: `{}` (read-only).",
                fetched.commit,
                fetched.path.display()
            );
        }
        Err(problem) => {
            let _ = write!(out, "\n\n`rev` `{rev}`: {problem}.");
        }
    }
    Some(out)
}

/// The template a top-level phase uses.
fn template_of<'t>(hit: &Hit<'t>) -> Option<&'t str> {
    if hit.context != Some(Context::TopLevel) || hit.node.name() != "phase" {
        return None;
    }
    hit.node.prop("use")?.value_text()
}

/// How a phase, agent, template or parameter is defined: its head, description and file.
fn definition_text(workspace: &Workspace, symbol: &Symbol) -> Option<String> {
    let definitions = workspace.definitions(symbol);
    let found = definitions.first()?;
    let mut out = String::from("```kdl\n");
    if let Symbol::Param { template, .. } = symbol {
        let head = &found.file.text[found.occurrence.span.start..line_end(found)];
        let _ = write!(
            out,
            "param {head}\n```\n\nA parameter of template `{template}`."
        );
        if let Some(schema) = param_schema() {
            let _ = write!(out, "\n\n{}", schema.doc);
        }
    } else {
        let _ = write!(out, "{} {}\n```", symbol.kind(), quote(symbol.name()));
        if let Some(description) = Workspace::defining_node(found).and_then(description) {
            let _ = write!(out, "\n\n{description}");
        }
    }
    let name = found
        .file
        .path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let line = LineIndex::new(&found.file.text)
        .position(found.occurrence.span.start)
        .line
        + 1;
    let _ = write!(out, "\n\nDefined in `{name}`, line {line}.");
    if definitions.len() > 1 {
        let _ = write!(out, " ({} definitions)", definitions.len());
    }
    Some(out)
}

fn param_schema() -> Option<&'static NodeSchema> {
    crate::language::schema::lookup(Context::Template, "param")
}

/// Where the line of a definition ends, for showing its head.
fn line_end(found: &Found<'_>) -> usize {
    let text = &found.file.text;
    text[found.occurrence.span.start..]
        .find(['\n', '\r', ';', '{', '}'])
        .map_or(text.len(), |i| found.occurrence.span.start + i)
        .max(found.occurrence.span.end)
}

fn description(node: &Node) -> Option<String> {
    node.child_nodes()
        .iter()
        .rev()
        .find(|n| n.name() == "description")?
        .first_arg()?
        .text()
        .map(str::to_owned)
}

/// A name as KDL writes it in quotes.
pub(crate) fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}
