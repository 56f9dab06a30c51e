//! Markdown for hover and completion, written from the schema table: the language's documentation
//! is kept in one place, and this only arranges it.

use std::fmt::Write;

use crate::language::schema::{self, Arg, Choice, Context, NodeSchema, Prop, ValueType};

/// A node: its signature, what it does, its arguments, properties and children.
pub(crate) fn node(schema: &NodeSchema) -> String {
    let mut out = format!("```kdl\n{}\n```\n\n{}", schema.signature(), schema.doc);
    if !schema.args.is_empty() {
        out.push_str("\n\n**Arguments**\n");
        for arg in schema.args {
            let _ = write!(
                out,
                "\n- `{}`: {} *{}.*",
                arg.name,
                arg.doc,
                capitalize(&type_text(arg.ty))
            );
        }
    }
    if !schema.props.is_empty() {
        out.push_str("\n\n**Properties**\n");
        for prop in schema.props {
            let _ = write!(
                out,
                "\n- `{}=`: {} *{}.*",
                prop.name,
                prop.doc,
                capitalize(&prop_facts(prop))
            );
        }
    }
    if let Some(context) = schema.children {
        out.push_str("\n\n**Children**: ");
        out.push_str(&children(context));
    }
    out
}

/// A property of a node.
pub(crate) fn prop(node: &NodeSchema, prop: &Prop) -> String {
    format!(
        "```kdl\n{} {}={}\n```\n\n{} *{}.*",
        node.name,
        prop.name,
        prop.name.to_uppercase(),
        prop.doc,
        capitalize(&prop_facts(prop))
    )
}

/// A positional argument of a node.
pub(crate) fn arg(node: &NodeSchema, arg: &Arg) -> String {
    format!(
        "```kdl\n{}\n```\n\n`{}`: {} *{}.*",
        node.signature(),
        arg.name,
        arg.doc,
        capitalize(&type_text(arg.ty))
    )
}

/// One value of a fixed set, with the others it could be.
pub(crate) fn choice(node: &NodeSchema, choice: &Choice, all: &[Choice]) -> String {
    let others: Vec<String> = all.iter().map(|c| format!("`\"{}\"`", c.value)).collect();
    format!(
        "```kdl\n{} \"{}\"\n```\n\n{}\n\nValues of `{}`: {}.",
        node.name,
        choice.value,
        choice.doc,
        node.name,
        others.join(", ")
    )
}

/// The nodes allowed in a context, as a sentence.
fn children(context: Context) -> String {
    if context == Context::Vars {
        return schema::VAR.doc.to_owned();
    }
    let names: Vec<String> = schema::nodes_in(context)
        .map(|n| format!("`{}`", n.name))
        .collect();
    format!("{}.", names.join(", "))
}

fn type_text(ty: ValueType) -> String {
    ty.describe()
}

fn prop_facts(prop: &Prop) -> String {
    let mut facts = type_text(prop.ty);
    if prop.required {
        facts.push_str(", required");
    }
    if let Some(default) = prop.default {
        let _ = write!(facts, ", default {default}");
    }
    facts
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_docs_come_from_the_schema() {
        let glob = schema::lookup(Context::Outputs, "glob").unwrap();
        let text = node(glob);
        assert!(text.starts_with("```kdl\nglob PATTERN [min=MIN]\n```\n\n"));
        assert!(text.contains(glob.doc));
        assert!(text.contains("- `min=`: "));
        assert!(text.contains("default 1"));
        let gates = schema::lookup(Context::Phase, "gates").unwrap();
        assert!(node(gates).contains("`syntax`, `command`"));
    }

    #[test]
    fn choices_list_their_siblings() {
        let verify = schema::lookup(Context::Phase, "verify").unwrap();
        let text = choice(verify, &schema::VERIFY_MODES[0], schema::VERIFY_MODES);
        assert!(text.contains(schema::VERIFY_MODES[0].doc));
        assert!(text.ends_with("`\"self\"`, `\"external\"`, `\"sub-agent\"`, `\"both\"`."));
    }
}
