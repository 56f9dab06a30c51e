//! The walk over a Python tree that knows where each node stands: in which function, class,
//! comprehension or loop. CPython's compiler rejects `return` and `yield` outside a function,
//! `break` and `continue` outside a loop, `await` outside an async function, a `from __future__`
//! import after other statements, `import *` inside a function, a `nonlocal` name nothing binds;
//! tree-sitter-python parses all of them. The node-by-node checks of the parser's rules run in
//! the same walk, so the tree is walked once.

use super::{field, kind_of};
use tree_sitter::{Node, TreeCursor};

use super::names::{NameUse, name_use};
use super::{python_parameters, python3_rejects, strings, targets};
use crate::verify::syntax::{Finding, NodeCheck};

/// The node kinds [`PythonCheck`] looks at; every other node only passes by.
pub(super) const KINDS: &[&str] = &[
    // Scopes and loops.
    "module",
    "function_definition",
    "class_definition",
    "lambda",
    "list_comprehension",
    "set_comprehension",
    "dictionary_comprehension",
    "generator_expression",
    "for_statement",
    "while_statement",
    "block",
    "except_clause",
    // Statements that depend on where they are.
    "return_statement",
    "yield",
    "await",
    "break_statement",
    "continue_statement",
    "with_statement",
    "for_in_clause",
    "nonlocal_statement",
    "global_statement",
    "future_import_statement",
    "import_from_statement",
    // The parser's rules on single nodes.
    "print_statement",
    "exec_statement",
    "<>",
    "integer",
    "float",
    "string",
    "concatenated_string",
    "type_conversion",
    "raise_statement",
    "parameters",
    "lambda_parameters",
    "argument_list",
    "try_statement",
    "expression_statement",
    "assignment",
    "augmented_assignment",
    "delete_statement",
    "as_pattern_target",
    "parenthesized_expression",
    "tuple",
    "tuple_pattern",
    "named_expression",
    "slice",
    "interpolation",
];

/// CPython 3.11's `__future__` features.
const FUTURE_FEATURES: [&str; 10] = [
    "nested_scopes",
    "generators",
    "division",
    "absolute_import",
    "with_statement",
    "print_function",
    "unicode_literals",
    "barry_as_FLUFL",
    "generator_stop",
    "annotations",
];

/// What encloses a node.
#[derive(Clone, Copy)]
enum Scope<'t> {
    Module(Node<'t>),
    Function(Function<'t>),
    Class(Node<'t>),
    Comprehension(Comprehension<'t>),
    /// The body of a `for` or `while` loop (not its `else`).
    Loop,
    /// The body of an `except*` handler.
    ExceptStar,
}

#[derive(Clone, Copy)]
struct Function<'t> {
    /// The `def`, or the `lambda`.
    node: Node<'t>,
    is_async: bool,
    yields: bool,
    /// The first `return` with a value: an error once the function turns out to be an async
    /// generator.
    returns_value: Option<usize>,
}

#[derive(Clone, Copy)]
struct Comprehension<'t> {
    node: Node<'t>,
    generator: bool,
    /// It holds `await` or `async for`.
    is_async: bool,
    /// The first `in` clause's iterable, which runs in the enclosing scope.
    first_iterable: (usize, usize),
}

struct Frame<'t> {
    depth: u32,
    end: usize,
    scope: Scope<'t>,
    /// The scope has a `global` or `nonlocal` statement so far.
    declares: bool,
}

/// A scope that starts at the next `block` at `depth`: a function's or class's body, a loop's.
struct Pending<'t> {
    depth: u32,
    /// Where the statement that owns the block ends.
    end: usize,
    scope: Scope<'t>,
}

/// The Python check of every node of one tree.
pub(super) struct PythonCheck<'t> {
    text: &'t [u8],
    /// The compiler's checks run only on a tree without errors, as CPython compiles only what it
    /// parsed: in a broken file a `return` may be outside a function only because its `def`
    /// line is broken.
    compiled: bool,
    frames: Vec<Frame<'t>>,
    pending: Option<Pending<'t>>,
    /// Problems found when a scope ends.
    deferred: Vec<Finding>,
    /// Where the `from __future__` imports at the start of the module end.
    future_end: usize,
    /// Two cursors for the checks that go through a node's children: a cursor allocates, and
    /// the walk meets a call or a parameter list in most lines.
    cursors: Option<(TreeCursor<'t>, TreeCursor<'t>)>,
}

impl<'t> PythonCheck<'t> {
    pub(super) fn new(text: &'t [u8]) -> Self {
        Self {
            text,
            compiled: false,
            frames: Vec::new(),
            pending: None,
            deferred: Vec::new(),
            future_end: 0,
            cursors: None,
        }
    }

    /// Closes the scopes that end before a node at `start` and `depth`.
    fn leave(&mut self, start: usize, depth: u32) {
        while let Some(top) = self.frames.last() {
            if top.depth < depth && start < top.end {
                return;
            }
            if let Some(frame) = self.frames.pop() {
                self.close(frame.scope);
            }
        }
    }

    fn close(&mut self, scope: Scope<'t>) {
        if !self.compiled {
            return;
        }
        match scope {
            Scope::Function(Function {
                is_async: true,
                yields: true,
                returns_value: Some(at),
                ..
            }) => self
                .deferred
                .push(Finding::new(at, "'return' with value in async generator")),
            Scope::Comprehension(c) if c.is_async && !c.generator => {
                if let Some(i) = self.scope_index(c.node.start_byte()) {
                    match &mut self.frames[i].scope {
                        Scope::Comprehension(outer) => outer.is_async = true,
                        Scope::Function(f) if f.is_async => {}
                        _ => self.deferred.push(Finding::new(
                            c.node.start_byte(),
                            "asynchronous comprehension outside of an asynchronous function",
                        )),
                    }
                }
            }
            _ => {}
        }
    }

    /// The index of the innermost function, class, comprehension or module frame around `byte`
    /// (a comprehension's first iterable belongs to the scope around the comprehension).
    fn scope_index(&self, byte: usize) -> Option<usize> {
        self.frames.iter().rposition(|frame| match frame.scope {
            Scope::Loop | Scope::ExceptStar => false,
            Scope::Comprehension(c) => !(c.first_iterable.0..c.first_iterable.1).contains(&byte),
            _ => true,
        })
    }

    fn scope(&self, byte: usize) -> Option<Scope<'t>> {
        self.scope_index(byte).map(|i| self.frames[i].scope)
    }

    fn push(&mut self, node: Node<'t>, depth: u32, scope: Scope<'t>) {
        self.frames.push(Frame {
            depth,
            end: node.end_byte(),
            scope,
            declares: false,
        });
    }

    fn wait_for_block(&mut self, node: Node<'t>, depth: u32, scope: Scope<'t>) {
        self.pending = Some(Pending {
            depth: depth + 1,
            end: node.end_byte(),
            scope,
        });
    }

    /// The compiler's check of a node that depends on where it is.
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per kind of syntax node: a table, read whole"
    )]
    fn placement(&mut self, node: Node<'t>) -> Option<Finding> {
        let at = |message: &str| Some(Finding::new(node.start_byte(), message));
        let start = node.start_byte();
        match kind_of(node) {
            "return_statement" => {
                for frame in self.frames.iter_mut().rev() {
                    match &mut frame.scope {
                        Scope::Loop | Scope::Comprehension(_) => {}
                        Scope::ExceptStar => return at(EXCEPT_STAR),
                        Scope::Function(f) => {
                            if node.named_child_count() > 0 && f.returns_value.is_none() {
                                f.returns_value = Some(start);
                            }
                            return None;
                        }
                        Scope::Class(_) | Scope::Module(_) => break,
                    }
                }
                at("'return' outside function")
            }
            "break_statement" | "continue_statement" => {
                for frame in self.frames.iter().rev() {
                    match frame.scope {
                        Scope::Loop => return None,
                        Scope::ExceptStar => return at(EXCEPT_STAR),
                        Scope::Comprehension(_) => {}
                        _ => break,
                    }
                }
                if kind_of(node) == "break_statement" {
                    at("'break' outside loop")
                } else {
                    at("'continue' not properly in loop")
                }
            }
            "yield" if node.is_named() => {
                let index = self.scope_index(start)?;
                match &mut self.frames[index].scope {
                    Scope::Function(f) => {
                        f.yields = true;
                        let from = node.child(1).is_some_and(|c| kind_of(c) == "from");
                        (f.is_async && from)
                            .then(|| Finding::new(start, "'yield from' inside async function"))
                    }
                    Scope::Comprehension(c) => at(&format!(
                        "'yield' inside {}",
                        comprehension_name(kind_of(c.node))
                    )),
                    _ => at("'yield' outside function"),
                }
            }
            "await" if node.is_named() => {
                let index = self.scope_index(start)?;
                match &mut self.frames[index].scope {
                    Scope::Function(f) if f.is_async => None,
                    Scope::Function(_) => at("'await' outside async function"),
                    Scope::Comprehension(c) => {
                        c.is_async = true;
                        None
                    }
                    _ => at("'await' outside function"),
                }
            }
            "with_statement" | "for_statement"
                if node.child(0).is_some_and(|c| kind_of(c) == "async") =>
            {
                match self.scope(start) {
                    Some(Scope::Function(f)) if f.is_async => None,
                    _ if kind_of(node) == "with_statement" => {
                        at("'async with' outside async function")
                    }
                    _ => at("'async for' outside async function"),
                }
            }
            "for_in_clause" if node.child(0).is_some_and(|c| kind_of(c) == "async") => {
                if let Some(index) = self.scope_index(start)
                    && let Scope::Comprehension(c) = &mut self.frames[index].scope
                {
                    c.is_async = true;
                }
                None
            }
            "future_import_statement" => self.future_import(node),
            "import_from_statement" => {
                let mut cursor = node.walk();
                let wildcard = node
                    .children(&mut cursor)
                    .find(|c| kind_of(c) == "wildcard_import")?;
                match self.scope(start) {
                    Some(Scope::Module(_)) => None,
                    _ => Some(Finding::new(
                        wildcard.start_byte(),
                        "import * only allowed at module level",
                    )),
                }
            }
            "global_statement" | "nonlocal_statement" => {
                if let Some(index) = self.scope_index(start) {
                    self.frames[index].declares = true;
                }
                self.declaration(node)
            }
            "assignment" => self.annotated_declared(node),
            _ => None,
        }
    }

    fn future_import(&self, node: Node) -> Option<Finding> {
        let at = |message: String| Some(Finding::new(node.start_byte(), message));
        if node.end_byte() > self.future_end {
            return at("from __future__ imports must occur at the beginning of the file".into());
        }
        let mut cursor = node.walk();
        for imported in node.named_children(&mut cursor) {
            let name = match kind_of(imported) {
                "aliased_import" => field(imported, "name"),
                "dotted_name" => Some(imported),
                _ => None,
            };
            let Some(name) = name else { continue };
            let feature = String::from_utf8_lossy(&self.text[name.byte_range()]);
            if feature == "braces" {
                return at("not a chance".into());
            }
            if !FUTURE_FEATURES.contains(&feature.as_ref()) {
                return at(format!("future feature {feature} is not defined"));
            }
        }
        None
    }

    /// `global x` and `nonlocal x`: after no use of `x` in the same scope; `nonlocal` only in a
    /// function, for a name an enclosing function binds.
    fn declaration(&self, node: Node<'t>) -> Option<Finding> {
        let start = node.start_byte();
        let index = self.scope_index(start)?;
        let kind = if kind_of(node) == "global_statement" {
            "global"
        } else {
            "nonlocal"
        };
        let module = matches!(self.frames[index].scope, Scope::Module(_));
        let scope_node = match self.frames[index].scope {
            Scope::Module(n) | Scope::Class(n) => n,
            Scope::Function(f) => f.node,
            _ => return None,
        };
        let mut cursor = node.walk();
        for name in node.named_children(&mut cursor).filter(|n| !n.is_extra()) {
            let name_text = &self.text[name.byte_range()];
            let shown = String::from_utf8_lossy(name_text);
            let before = name_use(scope_node, name_text, start, self.text);
            let other = if kind == "global" {
                before.nonlocal
            } else {
                before.global
            };
            let message = if before.parameter {
                Some(format!("name '{shown}' is parameter and {kind}"))
            } else if before.used {
                Some(format!(
                    "name '{shown}' is used prior to {kind} declaration"
                ))
            } else if before.annotated {
                Some(format!("annotated name '{shown}' can't be {kind}"))
            } else if before.assigned {
                Some(format!(
                    "name '{shown}' is assigned to before {kind} declaration"
                ))
            } else if other {
                Some(format!("name '{shown}' is nonlocal and global"))
            } else if kind == "nonlocal" && module {
                Some("nonlocal declaration not allowed at module level".to_owned())
            } else if kind == "nonlocal" && !self.enclosing_binding(index, name_text) {
                Some(format!("no binding for nonlocal '{shown}' found"))
            } else {
                None
            };
            if let Some(message) = message {
                return Some(Finding::new(start, message));
            }
        }
        None
    }

    /// `f(x for x in y,)`: tree-sitter-python takes the comma into the `in` clause.
    fn trailing_comma_in_clause(&self, node: Node<'t>) -> Option<Finding> {
        let mut cursor = node.walk();
        let last = node
            .children(&mut cursor)
            .filter(|c| !c.is_extra())
            .last()?;
        if kind_of(last) != "," {
            return None;
        }
        let generator = self
            .frames
            .last()
            .is_some_and(|f| matches!(f.scope, Scope::Comprehension(c) if c.generator));
        let message = if generator {
            "Generator expression must be parenthesized"
        } else {
            "invalid syntax"
        };
        Some(Finding::new(last.start_byte(), message))
    }

    /// `x: int` after `global x` (or `nonlocal x`) in the same scope.
    fn annotated_declared(&self, node: Node<'t>) -> Option<Finding> {
        field(node, "type")?;
        let index = self.scope_index(node.start_byte())?;
        if !self.frames[index].declares {
            return None;
        }
        let target = field(node, "left")?;
        if kind_of(target) != "identifier" {
            return None;
        }
        let scope = match self.frames[index].scope {
            Scope::Module(n) | Scope::Class(n) => n,
            Scope::Function(f) => f.node,
            _ => return None,
        };
        let name = &self.text[target.byte_range()];
        let found = name_use(scope, name, node.start_byte(), self.text);
        let kind = if found.global {
            "global"
        } else if found.nonlocal {
            "nonlocal"
        } else {
            return None;
        };
        Some(Finding::new(
            node.start_byte(),
            format!(
                "annotated name '{}' can't be {kind}",
                String::from_utf8_lossy(name)
            ),
        ))
    }

    /// `:=` in a comprehension: not in an iterable, not rebinding the comprehension's own
    /// variable, not in a class body (where it would bind a class attribute from inside a scope).
    fn named_expression(&self, node: Node<'t>) -> Option<Finding> {
        let start = node.start_byte();
        let name = field(node, "name")?;
        let name_text = &self.text[name.byte_range()];
        let mut in_comprehension = false;
        for frame in self.frames.iter().rev() {
            match frame.scope {
                Scope::Comprehension(c) if c.node.byte_range().contains(&start) => {
                    in_comprehension = true;
                    let mut cursor = c.node.walk();
                    for clause in c
                        .node
                        .named_children(&mut cursor)
                        .filter(|n| kind_of(n) == "for_in_clause")
                    {
                        if field(clause, "right").is_some_and(|r| r.byte_range().contains(&start)) {
                            return Some(Finding::new(
                                start,
                                "assignment expression cannot be used in a comprehension iterable expression",
                            ));
                        }
                        let target = field(clause, "left")?;
                        if binds_name(target, name_text, self.text) {
                            return Some(Finding::new(
                                start,
                                format!(
                                    "assignment expression cannot rebind comprehension iteration variable '{}'",
                                    String::from_utf8_lossy(name_text)
                                ),
                            ));
                        }
                    }
                }
                Scope::Class(_) if in_comprehension => {
                    return Some(Finding::new(
                        start,
                        "assignment expression within a comprehension cannot be used in a class body",
                    ));
                }
                Scope::Comprehension(_) | Scope::Loop | Scope::ExceptStar => {}
                _ => return None,
            }
        }
        None
    }

    /// Whether a function around the scope at `index` binds `name` (classes do not count: their
    /// names are not visible to the functions inside them).
    fn enclosing_binding(&self, index: usize, name: &[u8]) -> bool {
        for frame in self.frames[..index].iter().rev() {
            let f = match frame.scope {
                Scope::Function(f) => f,
                // A method's `__class__` is the class being defined, which Python binds for it.
                Scope::Class(_) if name == b"__class__" => return true,
                _ => continue,
            };
            if kind_of(f.node) == "lambda" {
                continue;
            }
            let found: NameUse = name_use(f.node, name, usize::MAX, self.text);
            if found.global {
                return false;
            }
            if found.binds() {
                return true;
            }
        }
        false
    }
}

/// Whether the target of a `for` clause binds `name`: it, or a name inside its tuple or list.
fn binds_name(target: Node, name: &[u8], text: &[u8]) -> bool {
    match kind_of(target) {
        "identifier" => &text[target.byte_range()] == name,
        "pattern_list"
        | "tuple_pattern"
        | "list_pattern"
        | "list_splat_pattern"
        | "tuple"
        | "list"
        | "parenthesized_expression" => {
            let mut cursor = target.walk();
            target
                .named_children(&mut cursor)
                .any(|c| binds_name(c, name, text))
        }
        _ => false,
    }
}

const EXCEPT_STAR: &str = "'break', 'continue' and 'return' cannot appear in an except* block";

fn comprehension_name(kind: &str) -> &'static str {
    match kind {
        "list_comprehension" => "list comprehension",
        "set_comprehension" => "set comprehension",
        "dictionary_comprehension" => "dict comprehension",
        _ => "generator expression",
    }
}

/// Where the `from __future__` imports that may stand at the start of the module end: after an
/// optional docstring, only such imports (CPython's `future.c`).
fn future_prefix_end(module: Node, text: &[u8]) -> usize {
    let mut cursor = module.walk();
    let mut end = 0;
    for (index, statement) in module
        .named_children(&mut cursor)
        .filter(|c| !c.is_extra())
        .enumerate()
    {
        match kind_of(statement) {
            "future_import_statement" => end = statement.end_byte(),
            "expression_statement" if index == 0 => {
                let docstring = statement.named_child_count() == 1
                    && statement.named_child(0).is_some_and(|value| {
                        matches!(kind_of(value), "string" | "concatenated_string")
                            && !text[value.byte_range()]
                                .iter()
                                .take_while(|b| b.is_ascii_alphabetic())
                                .any(|b| matches!(b.to_ascii_lowercase(), b'f' | b'b'))
                    });
                if !docstring {
                    break;
                }
            }
            _ => break,
        }
    }
    end
}

impl<'t> NodeCheck<'t> for PythonCheck<'t> {
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per kind of syntax node: a table, read whole"
    )]
    fn visit(&mut self, node: Node<'t>, depth: u32) -> Option<Finding> {
        let start = node.start_byte();
        self.leave(start, depth);
        let text = self.text;
        match kind_of(node) {
            "module" => {
                self.cursors = Some((node.walk(), node.walk()));
                self.compiled = !node.has_error();
                self.future_end = future_prefix_end(node, text);
                self.frames.push(Frame {
                    depth,
                    end: usize::MAX,
                    scope: Scope::Module(node),
                    declares: false,
                });
                return None;
            }
            "function_definition" => {
                let is_async = node.child(0).is_some_and(|c| kind_of(c) == "async");
                self.wait_for_block(
                    node,
                    depth,
                    Scope::Function(Function {
                        node,
                        is_async,
                        yields: false,
                        returns_value: None,
                    }),
                );
                return None;
            }
            "class_definition" => {
                self.wait_for_block(node, depth, Scope::Class(node));
                return None;
            }
            "while_statement" => {
                self.wait_for_block(node, depth, Scope::Loop);
                return None;
            }
            "for_statement" => self.wait_for_block(node, depth, Scope::Loop),
            "except_clause" if node.child(1).is_some_and(|c| kind_of(c) == "*") => {
                self.wait_for_block(node, depth, Scope::ExceptStar);
            }
            "block" => {
                if let Some(pending) = self.pending.take_if(|p| p.depth == depth && start < p.end) {
                    self.push(node, depth, pending.scope);
                }
                return None;
            }
            "lambda" => self.push(
                node,
                depth,
                Scope::Function(Function {
                    node,
                    is_async: false,
                    yields: false,
                    returns_value: None,
                }),
            ),
            "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression" => {
                if let Some(finding) = targets::comprehension_body(node) {
                    return Some(finding);
                }
                if kind_of(node) == "generator_expression"
                    && let Some(finding) = targets::generator_argument(node)
                {
                    return Some(finding);
                }
                let first_iterable = (0..u32::try_from(node.named_child_count())
                    .unwrap_or(u32::MAX))
                    .filter_map(|i| node.named_child(i))
                    .find(|c| kind_of(c) == "for_in_clause")
                    .and_then(|c| field(c, "right"))
                    .map_or((0, 0), |r| (r.start_byte(), r.end_byte()));
                self.push(
                    node,
                    depth,
                    Scope::Comprehension(Comprehension {
                        node,
                        generator: kind_of(node) == "generator_expression",
                        is_async: false,
                        first_iterable,
                    }),
                );
                return None;
            }
            _ => {}
        }
        if self.compiled
            && let Some(finding) = self.placement(node)
        {
            return Some(finding);
        }
        match kind_of(node) {
            "string" => strings::string(node, text),
            "concatenated_string" => targets::mixed_concatenation(node, text),
            "type_conversion" => strings::conversion(node, text),
            "delete_statement" => targets::delete_targets(node, text),
            "augmented_assignment" => targets::augmented_target(node, text),
            "as_pattern_target" => targets::as_target(node, text),
            "for_statement" => targets::loop_target(node),
            "for_in_clause" => targets::loop_target(node)
                .or_else(|| python3_rejects(node, text))
                .or_else(|| self.trailing_comma_in_clause(node)),
            "assignment" => targets::assignment(node),
            "parenthesized_expression" | "tuple" | "tuple_pattern" => {
                targets::parenthesized_starred(node)
            }
            "named_expression" => self.named_expression(node),
            "return_statement" => targets::lone_starred(node),
            "expression_statement" => {
                targets::lone_starred(node).or_else(|| python3_rejects(node, text))
            }
            "parameters" | "lambda_parameters" => {
                let (cursor, earlier) = self.cursors.as_mut()?;
                targets::parameter_list(node, text, cursor, earlier)
                    .or_else(|| python_parameters(node, cursor))
            }
            "argument_list" => {
                let (cursor, earlier) = self.cursors.as_mut()?;
                targets::arguments(node, text, cursor, earlier)
            }
            "slice" => targets::starred_slice(node),
            "import_from_statement" => targets::import_trailing_comma(node),
            "except_clause" => targets::except_clause(node).or_else(|| python3_rejects(node, text)),
            "interpolation" => {
                let expression = field(node, "expression")?;
                targets::is_starred(expression).then(|| {
                    Finding::new(
                        expression.start_byte(),
                        "f-string: cannot use starred expression here",
                    )
                })
            }
            "try_statement" => {
                python3_rejects(node, text).or_else(|| targets::except_clauses(node))
            }
            _ => python3_rejects(node, text),
        }
    }

    fn finish(&mut self) -> Vec<Finding> {
        while let Some(frame) = self.frames.pop() {
            self.close(frame.scope);
        }
        std::mem::take(&mut self.deferred)
    }
}
