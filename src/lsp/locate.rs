//! Where an offset is in a document's tolerant view: the innermost block around it, the schema
//! context of that block, and the name, key or value under the cursor.

use std::ops::Range;

use crate::language::kdl::tolerant::{Entry, Node, Tree};
use crate::language::schema::{self, Context, NodeSchema};

/// The context of the children of `node`, which appears in `context`; `None` when the node is
/// unknown there or takes no children.
pub(crate) fn child_context(context: Option<Context>, node: &Node) -> Option<Context> {
    schema_of(context, node).and_then(|s| s.children)
}

/// The schema of `node` in `context`.
pub(crate) fn schema_of(context: Option<Context>, node: &Node) -> Option<&'static NodeSchema> {
    match context? {
        Context::Vars => Some(&schema::VAR),
        context => schema::lookup(context, node.name()),
    }
}

/// The block that contains `offset`, innermost: the nodes enclosing it (outermost first), the
/// context of the block, and its nodes.
pub(crate) struct Enclosing<'t> {
    /// The nodes whose blocks contain the offset, outermost first.
    pub(crate) ancestors: Vec<&'t Node>,
    /// The context of the innermost block (`None` inside an unknown node).
    pub(crate) context: Option<Context>,
    /// The nodes of the innermost block.
    pub(crate) siblings: &'t [Node],
}

/// Finds the innermost block containing `offset`.
pub(crate) fn enclosing(tree: &Tree, offset: usize) -> Enclosing<'_> {
    let mut found = Enclosing {
        ancestors: Vec::new(),
        context: Some(Context::TopLevel),
        siblings: &tree.nodes,
    };
    'descend: loop {
        for node in found.siblings {
            if let Some(block) = &node.children
                && block.contains(offset)
            {
                found.context = child_context(found.context, node);
                found.ancestors.push(node);
                found.siblings = &block.nodes;
                continue 'descend;
            }
        }
        return found;
    }
}

/// What is at an offset inside a node's head.
#[derive(Debug)]
pub(crate) enum Part<'t> {
    /// The node's name.
    Name,
    /// A property's key.
    Key(&'t Entry),
    /// A value: the `index`-th positional argument, or a property's value.
    Value {
        /// The entry.
        entry: &'t Entry,
        /// Its index among the positional arguments, for an argument.
        index: Option<usize>,
    },
}

/// The token under an offset: the node it belongs to, that node's context, and which part.
#[derive(Debug)]
pub(crate) struct Hit<'t> {
    /// The node.
    pub(crate) node: &'t Node,
    /// The context the node appears in.
    pub(crate) context: Option<Context>,
    /// The part of the node.
    pub(crate) part: Part<'t>,
    /// The token's bytes.
    pub(crate) span: Range<usize>,
}

/// The name or value token at `offset` (a cursor just after a token counts as on it).
pub(crate) fn hit(tree: &Tree, offset: usize) -> Option<Hit<'_>> {
    let within = |span: &Range<usize>| span.start <= offset && offset <= span.end;
    let found = enclosing(tree, offset);
    let node = found
        .siblings
        .iter()
        .find(|n| n.name.span.start <= offset && offset <= n.head_end)?;
    let (part, span) = if within(&node.name.span) {
        (Part::Name, node.name.span.clone())
    } else {
        let mut index = 0;
        let mut part = None;
        for entry in &node.entries {
            if let Some(key) = &entry.key
                && within(&key.span)
            {
                part = Some((Part::Key(entry), key.span.clone()));
                break;
            }
            if let Some(value) = &entry.value
                && within(&value.span)
            {
                let index = entry.key.is_none().then_some(index);
                part = Some((Part::Value { entry, index }, value.span.clone()));
                break;
            }
            if entry.key.is_none() {
                index += 1;
            }
        }
        part?
    };
    Some(Hit {
        node,
        context: found.context,
        part,
        span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::kdl::tolerant::parse;

    #[test]
    fn finds_the_enclosing_block_and_context() {
        let src = "phase \"a\" {\n  gates {\n    \n  }\n  \n}\n";
        let tree = parse(src);
        let in_gates = enclosing(&tree, src.find("    \n").unwrap() + 2);
        assert_eq!(in_gates.context, Some(Context::Gates));
        let ancestors: Vec<&str> = in_gates.ancestors.iter().map(|n| n.name()).collect();
        assert_eq!(ancestors, ["phase", "gates"]);
        let in_phase = enclosing(&tree, src.rfind("  \n}").unwrap() + 1);
        assert_eq!(in_phase.context, Some(Context::Phase));
        let top = enclosing(&tree, src.len());
        assert_eq!(top.context, Some(Context::TopLevel));
        let unknown = parse("nonsense {\n  x\n}");
        assert_eq!(enclosing(&unknown, 13).context, None);
    }

    #[test]
    fn hits_names_keys_and_values() {
        let src = "phase \"a\" use=\"t\" {\n  verify \"self\" \"external\"\n}";
        let tree = parse(src);
        let hit = hit(&tree, 1).unwrap();
        assert!(matches!(hit.part, Part::Name));
        assert_eq!(hit.context, Some(Context::TopLevel));
        let key = super::hit(&tree, src.find("use").unwrap() + 1).unwrap();
        assert!(matches!(key.part, Part::Key(e) if e.key_text() == Some("use")));
        let at = src.find("external").unwrap();
        let value = super::hit(&tree, at).unwrap();
        assert_eq!(value.node.name(), "verify");
        assert_eq!(value.context, Some(Context::Phase));
        assert!(matches!(value.part, Part::Value { index: Some(1), .. }));
        assert_eq!(value.span, at - 1..at + "external".len() + 1);
        assert!(super::hit(&tree, src.find('{').unwrap() + 1).is_none());
    }
}
