//! Names as CPython's symbol table sees them, for the few statements that depend on them: a
//! `global` or `nonlocal` declaration after the name is used or assigned in its scope, a
//! `nonlocal` name that no enclosing function binds, and assignments to `__debug__`. These run
//! only where such a statement (or the name `__debug__`) is, so most files never pay for them.

use super::{field, kind_of};
use tree_sitter::{Node, Tree};

use super::targets::parameter_name;
use crate::verify::syntax::Finding;

/// How one scope (a function, a class or the module) uses one name.
#[derive(Debug, Default, Clone, Copy)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent facts of CPython's symbol table, each set by its own kind of statement"
)]
pub(super) struct NameUse {
    pub(super) parameter: bool,
    pub(super) used: bool,
    pub(super) annotated: bool,
    pub(super) assigned: bool,
    pub(super) imported: bool,
    pub(super) global: bool,
    pub(super) nonlocal: bool,
}

impl NameUse {
    /// Whether the name is local to the scope: the scope binds it and does not declare it
    /// `global` or `nonlocal`.
    pub(super) fn binds(self) -> bool {
        !self.global
            && !self.nonlocal
            && (self.parameter || self.assigned || self.imported || self.annotated)
    }
}

/// How a name appears: read, bound, or not a use of the name at all (a comprehension's own
/// variables, an attribute's name).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Load,
    Store,
    Comprehension,
}

/// How `scope` uses `name` in the text before byte `before`, outside the functions, classes,
/// lambdas and comprehensions nested in it (their names and default values excepted).
#[allow(
    clippy::too_many_lines,
    reason = "one arm per kind of syntax node: a table, read whole"
)]
pub(super) fn name_use(scope: Node, name: &[u8], before: usize, text: &[u8]) -> NameUse {
    fn push_children<'t>(stack: &mut Vec<(Node<'t>, Context)>, node: Node<'t>, context: Context) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev().map(|c| (c, context)));
    }
    let mut found = NameUse::default();
    let mut stack: Vec<(Node, Context)> = Vec::new();
    match kind_of(scope) {
        "function_definition" => {
            if let Some(parameters) = field(scope, "parameters") {
                let mut cursor = parameters.walk();
                found.parameter = parameters
                    .named_children(&mut cursor)
                    .filter_map(parameter_name)
                    .any(|n| &text[n.byte_range()] == name);
            }
            stack.extend(field(scope, "body").map(|b| (b, Context::Load)));
        }
        "class_definition" => {
            stack.extend(field(scope, "body").map(|b| (b, Context::Load)));
        }
        _ => stack.push((scope, Context::Load)),
    }
    while let Some((node, context)) = stack.pop() {
        if node.start_byte() >= before || node.is_extra() {
            continue;
        }
        let own = |name: &str| field(node, name);
        match kind_of(node) {
            "identifier" => {
                if &text[node.byte_range()] == name {
                    match context {
                        Context::Load => found.used = true,
                        Context::Store => found.assigned = true,
                        Context::Comprehension => {}
                    }
                }
            }
            "function_definition" | "class_definition" => {
                stack.extend(own("name").map(|n| (n, Context::Store)));
                if let Some(parameters) = own("parameters") {
                    let mut cursor = parameters.walk();
                    let defaults: Vec<Node> = parameters
                        .named_children(&mut cursor)
                        .filter_map(|p| field(p, "value"))
                        .collect();
                    stack.extend(defaults.into_iter().map(|d| (d, Context::Load)));
                }
                stack.extend(own("superclasses").map(|s| (s, Context::Load)));
            }
            "lambda" => {}
            "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression" => {
                let mut cursor = node.walk();
                let first = node
                    .named_children(&mut cursor)
                    .find(|c| kind_of(c) == "for_in_clause")
                    .and_then(|c| field(c, "right"));
                push_children(&mut stack, node, Context::Comprehension);
                stack.extend(first.map(|f| (f, Context::Load)));
            }
            "named_expression" => {
                stack.extend(own("value").map(|v| (v, context)));
                stack.extend(own("name").map(|n| (n, Context::Store)));
            }
            "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause" => {
                let target_context = if context == Context::Comprehension {
                    Context::Comprehension
                } else {
                    Context::Store
                };
                let left = own("left");
                if kind_of(node) == "assignment"
                    && own("type").is_some()
                    && left.is_some_and(|l| &text[l.byte_range()] == name)
                {
                    found.annotated = true;
                }
                let mut cursor = node.walk();
                let rest: Vec<Node> = node
                    .named_children(&mut cursor)
                    .filter(|c| Some(*c) != left)
                    .collect();
                stack.extend(rest.into_iter().rev().map(|c| (c, context)));
                stack.extend(left.map(|l| (l, target_context)));
            }
            "as_pattern_target" | "delete_statement" => {
                let target_context = if context == Context::Comprehension {
                    context
                } else {
                    Context::Store
                };
                push_children(&mut stack, node, target_context);
            }
            "pattern_list"
            | "tuple_pattern"
            | "list_pattern"
            | "list_splat_pattern"
            | "tuple"
            | "list"
            | "parenthesized_expression"
            | "expression_list"
            | "list_splat" => {
                push_children(&mut stack, node, context);
            }
            "attribute" => {
                let object_context = if context == Context::Comprehension {
                    context
                } else {
                    Context::Load
                };
                stack.extend(own("object").map(|o| (o, object_context)));
            }
            "keyword_argument" => stack.extend(own("value").map(|v| (v, context))),
            "import_statement" | "import_from_statement" | "future_import_statement" => {
                found.imported |= imports(node, name, text);
            }
            "global_statement" | "nonlocal_statement" => {
                let mut cursor = node.walk();
                let declared = node
                    .named_children(&mut cursor)
                    .any(|n| &text[n.byte_range()] == name);
                if kind_of(node) == "global_statement" {
                    found.global |= declared;
                } else {
                    found.nonlocal |= declared;
                }
            }
            _ => {
                let inner = if context == Context::Comprehension {
                    context
                } else {
                    Context::Load
                };
                push_children(&mut stack, node, inner);
            }
        }
    }
    found
}

/// Whether an import statement binds `name`: `import a.b` binds `a`, `import a as b` and
/// `from m import a as b` bind `b`, `from m import a` binds `a`.
fn imports(node: Node, name: &[u8], text: &[u8]) -> bool {
    let mut cursor = node.walk();
    let module = field(node, "module_name");
    node.named_children(&mut cursor)
        .filter(|c| Some(*c) != module)
        .any(|imported| {
            let bound = match kind_of(imported) {
                "aliased_import" => field(imported, "alias"),
                "dotted_name" => imported.named_child(0),
                _ => None,
            };
            bound.is_some_and(|b| &text[b.byte_range()] == name)
        })
}

/// Every binding of the name `__debug__`, which CPython forbids: `__debug__ = 1`, a parameter,
/// an import, a `def`, a keyword argument, `del __debug__`. Only files that name it are searched.
pub(super) fn debug_bindings(tree: &Tree, text: &[u8]) -> Vec<Finding> {
    const NAME: &[u8] = b"__debug__";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].windows(NAME.len()).position(|w| w == NAME) {
        let start = from + found;
        from = start + NAME.len();
        let Some(node) = tree
            .root_node()
            .descendant_for_byte_range(start, start + NAME.len())
        else {
            continue;
        };
        if kind_of(node) != "identifier" || node.byte_range() != (start..start + NAME.len()) {
            continue;
        }
        if let Some(message) = debug_binding(node) {
            out.push(Finding::new(start, message));
        }
    }
    out
}

fn debug_binding(node: Node) -> Option<&'static str> {
    const ASSIGN: &str = "cannot assign to __debug__";
    let is_field = |parent: Node, name: &str, child: Node| field(parent, name) == Some(child);
    let mut child = node;
    let mut parent = node.parent()?;
    if kind_of(parent) == "attribute" {
        if !is_field(parent, "attribute", child) {
            return None;
        }
        child = parent;
        parent = parent.parent()?;
    }
    while matches!(
        kind_of(parent),
        "pattern_list"
            | "tuple_pattern"
            | "list_pattern"
            | "list_splat_pattern"
            | "tuple"
            | "list"
            | "parenthesized_expression"
            | "expression_list"
            | "as_pattern_target"
            | "list_splat"
    ) {
        child = parent;
        parent = parent.parent()?;
    }
    match kind_of(parent) {
        "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause"
            if is_field(parent, "left", child) =>
        {
            Some(ASSIGN)
        }
        "as_pattern" if kind_of(child) == "as_pattern_target" => Some(ASSIGN),
        "named_expression"
        | "function_definition"
        | "class_definition"
        | "keyword_argument"
        | "default_parameter"
        | "typed_default_parameter"
            if is_field(parent, "name", child) =>
        {
            Some(ASSIGN)
        }
        "parameters" | "lambda_parameters" | "typed_parameter" | "dictionary_splat_pattern" => {
            Some(ASSIGN)
        }
        "aliased_import" if is_field(parent, "alias", child) => Some(ASSIGN),
        "dotted_name" => {
            let statement = parent.parent()?;
            let module = field(statement, "module_name");
            let first = parent.named_child(0) == Some(child);
            let imported = matches!(
                kind_of(statement),
                "import_statement" | "import_from_statement"
            ) && module != Some(parent)
                && first;
            let captured = kind_of(statement) == "case_pattern" && parent.named_child_count() == 1;
            (imported || captured).then_some(ASSIGN)
        }
        "delete_statement" => Some("cannot delete __debug__"),
        _ => None,
    }
}
