//! Python 3: what Python's tokenizer checks around the parse (its encoding declaration, its
//! indentation, a missing `:`), and what tree-sitter-python accepts (its grammar keeps Python 2)
//! but Python 3 rejects.

use std::sync::LazyLock;

use regex::bytes::Regex;
use tree_sitter::{Node, Tree};

use self::scopes::PythonCheck;
use self::tokenizer::{
    IndentProblem, python_indentation, python_join_bracketed_lines, python_keyword,
};
use super::{Encoding, Finding, Language, LanguageRules, NodeCheck, language_findings, parse};

mod names;
mod scopes;
mod strings;
mod targets;
mod tokenizer;

/// A node's kind. `Node::kind` converts a C string on every call, which shows when a walk asks
/// every node of a file; the names of the grammar's kinds are read once instead.
pub(super) fn kind_of<'t>(node: impl std::borrow::Borrow<Node<'t>>) -> &'static str {
    static NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        let grammar: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        (0..grammar.node_kind_count())
            .map(|id| {
                u16::try_from(id)
                    .ok()
                    .and_then(|id| grammar.node_kind_for_id(id))
                    .unwrap_or("")
            })
            .collect()
    });
    NAMES
        .get(usize::from(node.borrow().kind_id()))
        .copied()
        .unwrap_or("")
}

/// A node's child in a field. `Node::child_by_field_name` looks the name up among the grammar's
/// field names with `strncmp` on every call, which shows when every assignment and call is
/// checked; the names are read once instead.
pub(super) fn field<'t>(node: Node<'t>, name: &str) -> Option<Node<'t>> {
    static IDS: LazyLock<Vec<(&'static str, u16)>> = LazyLock::new(|| {
        let grammar: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        (1..=grammar.field_count())
            .filter_map(|id| u16::try_from(id).ok())
            .filter_map(|id| grammar.field_name_for_id(id).map(|name| (name, id)))
            .collect()
    });
    let id = IDS.iter().find(|(field, _)| *field == name)?.1;
    node.child_by_field_id(id)
}

/// Python's rules on top of tree-sitter-python.
pub(super) struct Python;

impl LanguageRules for Python {
    /// Python files may declare another encoding (PEP 263), which [`python_coding`] reads.
    fn encoding(&self, text: &[u8], had_bom: bool) -> Encoding {
        let Some(name) = python_coding(text) else {
            return Encoding::Utf8;
        };
        if had_bom && !python_is_bom_compatible(&name) {
            // CPython's own wording: a BOM says UTF-8, the declaration says otherwise.
            return Encoding::Problem(format!("encoding problem: {name} with BOM"));
        }
        if python_is_utf8(&name) {
            Encoding::Utf8
        } else {
            Encoding::Any
        }
    }

    fn findings(&self, _language: Language, text: &[u8], utf8: Option<&str>) -> Vec<Finding> {
        python_findings(text, utf8)
    }

    fn extra_kinds(&self) -> &'static [&'static str] {
        scopes::KINDS
    }

    fn node_check<'t>(&self, text: &'t [u8]) -> Option<Box<dyn NodeCheck<'t> + 't>> {
        Some(Box::new(PythonCheck::new(text)))
    }

    fn after_walk(
        &self,
        tree: &Tree,
        text: &[u8],
        _utf8: Option<&str>,
        mut tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        static DEBUG: LazyLock<Regex> =
            LazyLock::new(|| Regex::new("__debug__").expect("the pattern is valid"));
        if DEBUG.is_match(text) {
            tree_errors.extend(names::debug_bindings(tree, text));
        }
        tree_errors
    }
}

/// Every finding for a Python file: its tokenizer's indentation errors, and the errors of the
/// parse (with bracketed lines joined, and missing colons put in, when that explains more).
fn python_findings(text: &[u8], utf8: Option<&str>) -> Vec<Finding> {
    let indentation = python_indentation(text);
    let mut parsed_findings = match parse(Language::Python, text) {
        Ok(tree) if tree.root_node().has_error() => python_findings_joined(text, &tree),
        Ok(tree) => language_findings(Language::Python, text, utf8, &tree),
        Err(message) => vec![Finding::new(0, message)],
    };
    // A compound statement's header that parses once its `:` is added misses only that. The
    // file is parsed again with the colons in place: tree-sitter's account of a missing colon (an
    // ERROR node around the header and its block, a `try` left without its `except`) says less
    // than "expected `:`", and hides what else is wrong.
    let colons: Vec<usize> = indentation
        .iter()
        .filter_map(|problem| problem.header)
        .filter(|&(start, end)| python_header_parses_with_colon(&text[start..end]))
        .map(|(_, end)| end)
        .collect();
    if !colons.is_empty() {
        parsed_findings = python_findings_with_colons(text, &colons).unwrap_or(parsed_findings);
    }
    // An error on the logical line before an indentation problem is what Python reports first,
    // and mostly its cause: a line broken in the middle makes the next one an unexpected indent.
    let indentation: Vec<IndentProblem> = indentation
        .into_iter()
        .filter(|problem| {
            !parsed_findings
                .iter()
                .any(|p| (problem.line_before..problem.finding.byte).contains(&p.byte))
        })
        .collect();
    if let Some(IndentProblem {
        finding: first,
        line_before,
        ..
    }) = indentation.first()
    {
        // tree-sitter's recovery from a bad indent often wraps whole definitions before it in an
        // ERROR node; such a node is the indentation error seen from afar.
        parsed_findings.retain(|f| {
            f.error_end
                .is_none_or(|end| f.byte >= *line_before || end < first.byte)
        });
    }
    // At the same place, Python's tokenizer speaks before its parser (the caller's sort keeps
    // this order).
    let mut findings: Vec<Finding> = indentation.into_iter().map(|p| p.finding).collect();
    findings.extend(parsed_findings);
    if findings.is_empty()
        && let Some(at) = python_trailing_continuation(text)
    {
        findings.push(Finding::new(
            at,
            "unexpected end of file after a `\\` line continuation",
        ));
    }
    findings
}

/// A `\` continuing the last line of the file onto nothing, which CPython's tokenizer rejects
/// and tree-sitter-python accepts: where it is, unless it is inside a comment or a string.
fn python_trailing_continuation(text: &[u8]) -> Option<usize> {
    let body = text
        .strip_suffix(b"\r\n")
        .or_else(|| text.strip_suffix(b"\n"))
        .unwrap_or(text);
    if body.last() != Some(&b'\\') {
        return None;
    }
    let line_start = body.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
    let mut quote: Option<u8> = None;
    let mut i = line_start;
    while i + 1 < body.len() {
        match (quote, body[i]) {
            (None, b'#') => return None,
            (None, q @ (b'\'' | b'"')) => quote = Some(q),
            (Some(q), b) if b == q => quote = None,
            (Some(_), b'\\') => i += 1,
            _ => {}
        }
        i += 1;
    }
    quote.is_none().then_some(body.len() - 1)
}

/// PEP 263: the encoding a `coding` declaration names, on line 1, or on line 2 below a comment or
/// blank line 1.
fn python_coding(text: &[u8]) -> Option<String> {
    static COOKIE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[ \t\x0c]*#.*?coding[:=][ \t]*([-\w.]+)").expect("the pattern is valid")
    });
    static BLANK_OR_COMMENT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^[ \t\x0c]*(?:[#\r]|$)").expect("the pattern is valid"));
    let mut lines = text.split(|&b| b == b'\n');
    let first = lines.next()?;
    let line = if let Some(c) = COOKIE.captures(first) {
        return Some(String::from_utf8_lossy(&c[1]).into_owned());
    } else if BLANK_OR_COMMENT.is_match(first) {
        lines.next()?
    } else {
        return None;
    };
    COOKIE
        .captures(line)
        .map(|c| String::from_utf8_lossy(&c[1]).into_owned())
}

/// Whether Python's codec lookup reads `name` as UTF-8.
fn python_is_utf8(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    name == "utf-8" || name == "utf8" || name.starts_with("utf-8-")
}

/// `CPython`'s tokenizer accepts a BOM only with a declaration that normalises to exactly `utf-8`
/// (so `utf8` with a BOM is an error there).
fn python_is_bom_compatible(name: &str) -> bool {
    let name: String = name
        .chars()
        .take(12)
        .map(|c| {
            if c == '_' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    name == "utf-8" || name.starts_with("utf-8-")
}

/// The findings of the file parsed with a `:` inserted at each of `colons` (ascending), placed
/// in the original text; None when it cannot be parsed.
fn python_findings_with_colons(text: &[u8], colons: &[usize]) -> Option<Vec<Finding>> {
    let mut repaired = Vec::with_capacity(text.len() + colons.len());
    let mut from = 0;
    for &at in colons {
        repaired.extend_from_slice(&text[from..at]);
        repaired.push(b':');
        from = at;
    }
    repaired.extend_from_slice(&text[from..]);
    let tree = parse(Language::Python, &repaired).ok()?;
    let findings = if tree.root_node().has_error() {
        python_findings_joined(&repaired, &tree)
    } else {
        language_findings(Language::Python, &repaired, None, &tree)
    };
    // A byte of the repaired text lies after as many inserted colons as start before it.
    let original = |byte: usize| {
        let before = colons
            .iter()
            .enumerate()
            .filter(|&(k, &at)| at + k < byte)
            .count();
        byte - before
    };
    Some(
        findings
            .into_iter()
            .map(|f| Finding {
                byte: original(f.byte),
                error_end: f.error_end.map(original),
                message: f.message,
            })
            .collect(),
    )
}

/// Whether a compound statement's header is valid Python once it ends with `:` (and a body, and
/// the statement a clause such as `else` continues).
fn python_header_parses_with_colon(header: &[u8]) -> bool {
    let mut statement = match python_keyword(header, 0).as_str() {
        "elif" | "else" => b"if x: pass\n".to_vec(),
        "except" | "finally" => b"try: pass\n".to_vec(),
        _ => Vec::new(),
    };
    statement.extend_from_slice(header);
    statement.extend_from_slice(b": pass\n");
    parse(Language::Python, &statement).is_ok_and(|tree| !tree.root_node().has_error())
}

/// A Python file tree-sitter rejects is parsed again with its bracketed lines joined; the errors
/// of that parse are the ones Python would see.
fn python_findings_joined(text: &[u8], tree: &Tree) -> Vec<Finding> {
    if let Some(joined) = python_join_bracketed_lines(text)
        && let Ok(joined_tree) = parse(Language::Python, &joined)
    {
        return language_findings(Language::Python, &joined, None, &joined_tree);
    }
    language_findings(Language::Python, text, None, tree)
}

/// What tree-sitter-python accepts (its grammar keeps Python 2) but Python 3 rejects.
fn python3_rejects(node: Node, text: &[u8]) -> Option<Finding> {
    let at = |n: Node, message: &str| Some(Finding::new(n.start_byte(), message));
    match kind_of(node) {
        // `print >>f, x` is also a valid Python 3 expression (a tuple holding `print >> f`).
        "print_statement" if node.child(1).is_some_and(|c| kind_of(c) == "chevron") => None,
        "print_statement" => at(
            node,
            "Python 2 `print` statement; Python 3 needs `print(…)`",
        ),
        "exec_statement" => at(node, "Python 2 `exec` statement; Python 3 needs `exec(…)`"),
        // Python 3.14 (PEP 758) accepts `except A, B:` and reads it as `except (A, B):`; every
        // earlier Python 3 rejects it, and in Python 2 code `except E, e:` meant `except E as e:`.
        "except_clause" => {
            let mut cursor = node.walk();
            let comma = node.children(&mut cursor).find(|c| kind_of(c) == ",")?;
            at(
                comma,
                "`except A, B:` needs parentheses before Python 3.14; Python 2's `except E, e:` is `except E as e:`",
            )
        }
        "<>" if !node.is_named() => at(node, "Python 2 `<>` operator; Python 3 needs `!=`"),
        "integer" => python_integer(node, text),
        "raise_statement" => {
            let mut cursor = node.walk();
            let list = node
                .named_children(&mut cursor)
                .find(|c| kind_of(c) == "expression_list")?;
            at(list, "Python 2 `raise E, V`; Python 3 needs `raise E(V)`")
        }
        "float" if text[node.byte_range()].last() == Some(&b'_') => at(node, TRAILING_UNDERSCORE),
        "try_statement" => {
            let mut cursor = node.walk();
            let handled = node
                .named_children(&mut cursor)
                .any(|c| matches!(kind_of(c), "except_clause" | "finally_clause"));
            if handled {
                None
            } else {
                at(node, "`try` needs an `except` or `finally` block")
            }
        }
        "expression_statement"
            if node.named_child_count() == 1
                && node
                    .named_child(0)
                    .is_some_and(|c| kind_of(c) == "named_expression") =>
        {
            at(
                node,
                "`:=` cannot be a statement without parentheses; write `=` or `(x := …)`",
            )
        }
        "for_in_clause" => {
            let mut cursor = node.walk();
            let second = node.children_by_field_name("right", &mut cursor).nth(1)?;
            at(
                second,
                "the tuple after `in` in a comprehension needs parentheses in Python 3",
            )
        }
        _ => None,
    }
}

/// Parameter lists: Python 2 tuple parameters, a parameter without a default after one with a
/// default, a bare `*` with no named parameter after it. tree-sitter-python accepts all three.
fn python_parameters<'t>(
    node: Node<'t>,
    cursor: &mut tree_sitter::TreeCursor<'t>,
) -> Option<Finding> {
    let mut positional_default = false;
    // After `*args` or a bare `*`, parameters are keyword-only and may go without defaults.
    let mut keyword_only = false;
    // A bare `*` still waiting for its first named parameter.
    let mut bare_star: Option<Node> = None;
    for parameter in node.named_children(cursor) {
        if kind_of(parameter) == "tuple_pattern"
            || field(parameter, "name").is_some_and(|n| kind_of(n) == "tuple_pattern")
        {
            return Some(Finding::new(
                parameter.start_byte(),
                "Python 2 tuple parameter; Python 3 parameters cannot unpack",
            ));
        }
        // `*args: T` and `**kwargs: T` are typed parameters around the splat.
        let kind =
            match kind_of(parameter) {
                "typed_parameter" => parameter.named_child(0).map_or("typed_parameter", |inner| {
                    match kind_of(inner) {
                        splat @ ("list_splat_pattern" | "dictionary_splat_pattern") => splat,
                        _ => "typed_parameter",
                    }
                }),
                kind => kind,
            };
        match kind {
            "default_parameter" | "typed_default_parameter" => {
                positional_default |= !keyword_only;
                bare_star = None;
            }
            "identifier" | "typed_parameter" => {
                if positional_default && !keyword_only {
                    return Some(Finding::new(
                        parameter.start_byte(),
                        "parameter without a default follows parameter with a default",
                    ));
                }
                bare_star = None;
            }
            "keyword_separator" => {
                keyword_only = true;
                bare_star = Some(parameter);
            }
            "list_splat_pattern" => keyword_only = true,
            "dictionary_splat_pattern" if bare_star.is_some() => break,
            _ => {}
        }
    }
    bare_star.map(|star| Finding::new(star.start_byte(), "named parameters must follow a bare `*`"))
}

const TRAILING_UNDERSCORE: &str = "invalid number: `_` must separate digits, not end the literal";

fn python_integer(node: Node, text: &[u8]) -> Option<Finding> {
    let literal = &text[node.byte_range()];
    let shown = String::from_utf8_lossy(literal);
    if literal.last() == Some(&b'_') {
        return Some(Finding::new(node.start_byte(), TRAILING_UNDERSCORE));
    }
    if matches!(literal.last(), Some(b'l' | b'L')) {
        return Some(Finding::new(
            node.start_byte(),
            format!("Python 2 long integer `{shown}`; Python 3 integers take no `L`"),
        ));
    }
    // `0777` was octal in Python 2; Python 3 allows leading zeros only in zero itself (`00`) and
    // in imaginary literals (`07j`).
    let decimal_with_leading_zero = literal.len() > 1
        && literal[0] == b'0'
        && literal.iter().all(|b| b.is_ascii_digit() || *b == b'_')
        && literal.iter().any(|b| (b'1'..=b'9').contains(b));
    decimal_with_leading_zero.then(|| {
        Finding::new(
            node.start_byte(),
            format!("leading zeros in `{shown}` are not allowed in Python 3; octal needs `0o`"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::syntax::check;
    use crate::verify::syntax::tests::messages;

    #[test]
    fn python2_forms_are_errors() {
        let cases = [
            (
                "print \"x\"\n",
                "Python 2 `print` statement; Python 3 needs `print(…)`",
            ),
            (
                "try:\n    pass\nexcept ValueError, e:\n    pass\n",
                "`except A, B:` needs parentheses before Python 3.14; Python 2's `except E, e:` is `except E as e:`",
            ),
            (
                "exec \"code\" in ns\n",
                "Python 2 `exec` statement; Python 3 needs `exec(…)`",
            ),
            (
                "x = a <> b\n",
                "Python 2 `<>` operator; Python 3 needs `!=`",
            ),
            (
                "x = 10L\n",
                "Python 2 long integer `10L`; Python 3 integers take no `L`",
            ),
            (
                "x = 0777\n",
                "leading zeros in `0777` are not allowed in Python 3; octal needs `0o`",
            ),
            ("x = `y`\n", "Python 2 backticks; Python 3 needs `repr(…)`"),
            (
                "x = ur\"y\"\n",
                "string prefix `ur` is not valid in Python 3",
            ),
            (
                "raise E, \"m\"\n",
                "Python 2 `raise E, V`; Python 3 needs `raise E(V)`",
            ),
            (
                "def f(a, (b, c)): pass\n",
                "Python 2 tuple parameter; Python 3 parameters cannot unpack",
            ),
            (
                "x = b\"é\"\n",
                "bytes literals can only contain ASCII characters",
            ),
        ];
        for (source, message) in cases {
            let found = messages(Language::Python, source);
            assert_eq!(found.len(), 1, "{source:?}: {found:?}");
            assert_eq!(found[0].2, message, "{source:?}");
        }
    }

    #[test]
    fn python3_forms_that_look_like_python2_pass() {
        let source = "print(x)\nprint (a), b\nprint -1\nprint\nprint >>sys.stderr, \"m\"\nx = 00 + 0_0 + 07j + 0o777 + 0x1F\n\
                      y = rb'a' + Rb\"b\" + f'{x}' + u'c' + t'd'\nexec(code)\nx = a != b\ntry: pass\nexcept (A, B) as e: pass\ntry: pass\nexcept* C: pass\n\
                      match p:\n    case [a, *rest]: pass\ndef f[T](x: T) -> T: pass\ntype X = int\n";
        assert_eq!(messages(Language::Python, source), vec![]);
    }

    #[test]
    fn python_coding_cookie_allows_another_encoding() {
        let latin1 = b"# -*- coding: latin-1 -*-\nx = '\xe9'\n";
        assert!(check(Language::Python, latin1).is_empty());
        let undeclared = b"x = '\xe9'\n";
        let found = check(Language::Python, undeclared);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].message,
            "the file is not valid UTF-8 (first invalid byte at 1:6)"
        );
        assert_eq!((found[0].line, found[0].column), (1, 1));
    }

    #[test]
    fn python_bom_needs_a_utf8_declaration() {
        let found = check(Language::Python, b"\xEF\xBB\xBF# coding: utf8\nx = 1\n");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].message, "encoding problem: utf8 with BOM");
        assert!(check(Language::Python, b"\xEF\xBB\xBF# coding: utf-8\nx = 1\n").is_empty());
        assert_eq!(
            python_coding(b"#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\n"),
            Some("latin-1".to_owned())
        );
        assert_eq!(python_coding(b"import os\n# coding: latin-1\n"), None);
    }

    #[test]
    fn python_missing_colon_is_named_not_the_indent_after_it() {
        let cases = [
            (
                "def add(a, b):\n    return a + b\n\n\ndef mul(a, b)\n    return a * b\n",
                (5, 14),
                "def",
            ),
            (
                "class A:\n    def f(self)\n        return 1\n",
                (2, 16),
                "def",
            ),
            ("if x\n    y = 1\n", (1, 5), "if"),
            // tree-sitter leaves the `try` without its `except`; with the colon in place it is not.
            (
                "try:\n    x = 1\nexcept ValueError\n    pass\n",
                (3, 18),
                "except",
            ),
        ];
        for (source, (line, column), keyword) in cases {
            assert_eq!(
                messages(Language::Python, source),
                vec![(
                    line,
                    column,
                    format!("expected `:` at the end of the `{keyword}` line")
                )],
                "{source:?}"
            );
        }
        // Another error on the header comes first, as in Python.
        assert_eq!(
            messages(Language::Python, "def f(a b)\n    return 1\n"),
            vec![(1, 1, "unexpected `def`".to_owned())]
        );
        // Other errors still show, where they are.
        assert_eq!(
            messages(Language::Python, "def f()\n    return (1,\n"),
            vec![
                (1, 8, "expected `:` at the end of the `def` line".to_owned()),
                (2, 12, "`(` is never closed".to_owned())
            ]
        );
    }

    #[test]
    fn python3_parser_rules_tree_sitter_lacks() {
        let cases = [
            (
                "f(a=1, b)\n",
                (1, 8),
                "positional argument follows keyword argument",
            ),
            (
                "f(**a, b)\n",
                (1, 8),
                "positional argument follows keyword argument",
            ),
            (
                "f(**a, *b)\n",
                (1, 8),
                "iterable argument unpacking follows keyword argument unpacking",
            ),
            (
                "def f(a=1, b): pass\n",
                (1, 12),
                "parameter without a default follows parameter with a default",
            ),
            (
                "g = lambda a=1, b: 0\n",
                (1, 17),
                "parameter without a default follows parameter with a default",
            ),
            (
                "def f(*): pass\n",
                (1, 7),
                "named parameters must follow a bare `*`",
            ),
            (
                "def f(a, *, **k): pass\n",
                (1, 10),
                "named parameters must follow a bare `*`",
            ),
            (
                "try:\n    pass\nx = 1\n",
                (1, 1),
                "`try` needs an `except` or `finally` block",
            ),
            (
                "x := 1\n",
                (1, 1),
                "`:=` cannot be a statement without parentheses; write `=` or `(x := …)`",
            ),
            (
                "x = 1_\n",
                (1, 5),
                "invalid number: `_` must separate digits, not end the literal",
            ),
            (
                "f(x for x in y, 1)\n",
                (1, 15),
                "the tuple after `in` in a comprehension needs parentheses in Python 3",
            ),
        ];
        for (source, (line, column), message) in cases {
            assert_eq!(
                messages(Language::Python, source),
                vec![(line, column, message.to_owned())],
                "{source:?}"
            );
        }
        let valid = "f(*a, b=1, *c, **d, e=2)\nf(x for x in y)\nf(a, *b, c=1)\n\
                     f(a=1, \\\n  b=2, # two\n  c=3)\n\
                     def g(a, b=1, /, c=2, *d, e, f=3, **g): pass\n\
                     def h(a=1, *, b, c=2): pass\ndef i(*a: int, b: int, **k: str): pass\n\
                     def j(a: int = 1, *args: int, b: int): pass\n\
                     try:\n    pass\nfinally:\n    pass\n(y := 1)\nz = [v for v in (1, 2)]\n\
                     n = 1_000 + 1_0.5\n";
        assert_eq!(messages(Language::Python, valid), vec![]);
    }
}
