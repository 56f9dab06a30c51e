//! The document outline: the pipeline, imports, agents, templates, defaults and phases, with the
//! gates of each phase and template.

use lsp_types::{DocumentSymbol, SymbolKind};

use super::position::LineIndex;
use crate::language::kdl::tolerant::{Node, Tree};

/// The outline of a document.
pub(crate) fn document_symbols(text: &str, tree: &Tree) -> Vec<DocumentSymbol> {
    let index = LineIndex::new(text);
    tree.nodes
        .iter()
        .filter_map(|node| {
            let (kind, children) = match node.name() {
                "pipeline" => (SymbolKind::MODULE, Vec::new()),
                "import" => (SymbolKind::FILE, Vec::new()),
                "agent" => (SymbolKind::OBJECT, Vec::new()),
                "template" => (SymbolKind::CLASS, gates(&index, node)),
                "defaults" => (SymbolKind::STRUCT, gates(&index, node)),
                "phase" => (SymbolKind::FUNCTION, gates(&index, node)),
                _ => return None,
            };
            // Named by the first argument when it has one; the selection is that name.
            let named = node
                .first_arg()
                .filter(|w| w.text().is_some_and(|t| !t.is_empty()));
            let (name, selection) = match named {
                Some(word) => (word.text().unwrap_or_default(), &word.span),
                None => (node.name(), &node.name.span),
            };
            let detail = match node.prop("use").and_then(|e| e.value_text()) {
                Some(template) => format!("{} use={template}", node.name()),
                None => node.name().to_owned(),
            };
            Some(symbol(
                &index,
                node,
                selection,
                name.to_owned(),
                detail,
                kind,
                children,
            ))
        })
        .collect()
}

/// The gates of a phase, template or defaults block: one symbol per child of each `gates` block,
/// named by its `name=` or its kind.
fn gates(index: &LineIndex<'_>, node: &Node) -> Vec<DocumentSymbol> {
    node.child_nodes()
        .iter()
        .filter(|n| n.name() == "gates")
        .flat_map(Node::child_nodes)
        .map(|gate| {
            let kind = gate.name();
            let argument = gate
                .first_arg()
                .map(|w| index.text()[w.span.clone()].to_owned());
            let (name, detail) = match gate.prop("name").and_then(|e| e.value_text()) {
                Some(name) if !name.is_empty() => {
                    let detail = match argument {
                        Some(argument) => format!("{kind} {argument}"),
                        None => kind.to_owned(),
                    };
                    (name.to_owned(), detail)
                }
                _ => (kind.to_owned(), argument.unwrap_or_default()),
            };
            symbol(
                index,
                gate,
                &gate.name.span,
                name,
                detail,
                SymbolKind::EVENT,
                Vec::new(),
            )
        })
        .collect()
}

fn symbol(
    index: &LineIndex<'_>,
    node: &Node,
    selection: &std::ops::Range<usize>,
    name: String,
    detail: String,
    kind: SymbolKind,
    children: Vec<DocumentSymbol>,
) -> DocumentSymbol {
    // `deprecated` is the protocol's own deprecated field; it has to be written to be left out.
    #[allow(deprecated)]
    DocumentSymbol {
        name,
        detail: (!detail.is_empty()).then_some(detail),
        kind,
        tags: None,
        deprecated: None,
        range: index.range(node.span.start, node.span.end),
        selection_range: index.range(selection.start, selection.end),
        children: (!children.is_empty()).then_some(children),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::kdl::tolerant;

    #[test]
    fn outlines_phases_with_their_gates() {
        let text = "pipeline \"p\"\nphase \"a\" {\n  gates {\n    syntax\n    command \"pytest\" name=\"tests\"\n  }\n}\nphase \"\" use=\"t\"\n";
        let symbols = document_symbols(text, &tolerant::parse(text));
        let names: Vec<_> = symbols.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["p", "a", "phase"]);
        let gates = symbols[1].children.as_ref().unwrap();
        let gates: Vec<_> = gates
            .iter()
            .map(|s| (s.name.as_str(), s.detail.as_deref()))
            .collect();
        assert_eq!(
            gates,
            [("syntax", None), ("tests", Some("command \"pytest\""))]
        );
        assert_eq!(symbols[2].detail.as_deref(), Some("phase use=t"));
        assert_eq!(symbols[1].range.start.line, 1);
        assert_eq!(symbols[1].range.end.line, 6);
    }
}
