//! The `syntax` gate's parser layer: which language a file is written in, and every syntax error in it.
//!
//! tree-sitter parses every language; its error recovery keeps going after the first problem, so one
//! bad line does not hide the next. Where a grammar accepts what the language does not, or places its
//! errors poorly, more checks run on top:
//!
//! - **Python**: tree-sitter-python still parses Python 2 (`print "x"`, `exec "code"`, `<>`, `10L`,
//!   `0777`, backticks, `ur""`, `raise E, V`, `except E, e:`, tuple parameters); Python 3 rejects all
//!   of them. Its scanner also rejects a continuation line inside brackets that is indented less than
//!   its block, which Python allows, so a rejected file is parsed again with bracketed lines joined.
//!   Its indentation is lenient where Python's is not: a block opener with no indented block after
//!   it, an unexpected indent, an unindent to no outer level and tabs mixed with spaces (`TabError`)
//!   all parse. A scan of the lines as Python's tokenizer reads them finds those.
//! - **JavaScript/TypeScript**: a JSX closing tag must match its opening tag; objects have no holes
//!   (`{a: 1,, b: 2}`).
//! - **JSON**: tree-sitter-json tolerates comments (so `tsconfig.json` passes); a file without
//!   comments must also be strict JSON: one value, no raw control characters in strings.
//! - **YAML**: tree-sitter-yaml reports an indentation error at the start of the enclosing mapping;
//!   yaml-rust2 names the exact place, so its message is used when both reject the file. Duplicate
//!   keys in a mapping are errors.
//! - **TOML**: duplicate keys and tables defined twice are errors, as the TOML specification says,
//!   and so are two statements on one line (`a = 1 b = 2`), which tree-sitter-toml reads on.
//! - **Bash**: tree-sitter-bash takes a `\r` before a line break for blank space; bash takes it for
//!   part of the word, so a file with Windows line endings is an error (outside quoted text and
//!   here-documents, where a `\r` is data).
//! - **KDL**: tree-sitter-kdl accepts KDL v1, KDL v2, mixtures of both and more besides. helixflow's
//!   own KDL v2 parser decides; a file that declares `/- kdl-version 1`, or looks like KDL v1 (bare
//!   `true`/`false`/`null`, `r"…"` strings: a Zellij configuration, say), is judged by
//!   tree-sitter-kdl instead.
//!
//! tree-sitter reports an unclosed bracket or string where its recovery gave up, often the start of
//! the enclosing block; the bracket (or TOML string) itself is reported instead.
//!
//! Each language's checks live in a file of their own (`python.rs`, `toml.rs`, …); the generic
//! check reaches them through one set of hooks (`LanguageRules`), each with a default that adds
//! nothing.

use std::cell::RefCell;
use std::path::Path;
use std::sync::LazyLock;

use tree_sitter::{Node, Parser, Tree};

use self::position::{position, syntax_error_at};
pub(crate) use crate::model::Language;

mod bash;
mod confirm;
mod go;
mod javascript;
mod json;
mod kdl;
mod position;
mod python;
mod rust;
mod toml;
mod yaml;

/// The most errors reported for one file: past the first few, most are consequences of them.
pub(crate) const MAX_ERRORS: usize = 20;

/// How many characters of the offending token a message quotes.
const SNIPPET_CHARS: usize = 24;

/// What the syntax gate does with each language.
impl Language {
    fn index(self) -> usize {
        self as usize
    }

    fn grammar(self) -> tree_sitter::Language {
        match self {
            Language::Python => tree_sitter_python::LANGUAGE.into(),
            Language::Rust => tree_sitter_rust::LANGUAGE.into(),
            Language::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Language::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Language::Json => tree_sitter_json::LANGUAGE.into(),
            Language::Yaml => tree_sitter_yaml::LANGUAGE.into(),
            Language::Toml => tree_sitter_toml_ng::LANGUAGE.into(),
            Language::Bash => tree_sitter_bash::LANGUAGE.into(),
            Language::Go => tree_sitter_go::LANGUAGE.into(),
            Language::Kdl => tree_sitter_kdl::LANGUAGE.into(),
        }
    }

    /// What the language adds to the generic check: the one place that dispatches to a
    /// language's file.
    fn rules(self) -> &'static dyn LanguageRules {
        match self {
            Language::Python => &python::Python,
            Language::Rust => &rust::Rust,
            Language::JavaScript => &javascript::JavaScript {
                language: Language::JavaScript,
            },
            Language::TypeScript => &javascript::JavaScript {
                language: Language::TypeScript,
            },
            Language::Tsx => &javascript::JavaScript {
                language: Language::Tsx,
            },
            Language::Json => &json::Json,
            Language::Yaml => &yaml::Yaml,
            Language::Toml => &toml::Toml,
            Language::Bash => &bash::Bash,
            Language::Go => &go::Go,
            Language::Kdl => &kdl::Kdl,
        }
    }
}

/// What one language adds to the generic check, where its grammar accepts what the language does
/// not or places its errors poorly. Every hook has a default that adds nothing, so a language
/// whose tree-sitter grammar says it all (Rust, Go) overrides none.
trait LanguageRules {
    /// What the file's bytes must be: UTF-8 unless the language says otherwise.
    fn encoding(&self, _text: &[u8], _had_bom: bool) -> Encoding {
        Encoding::Utf8
    }

    /// Every finding for the file (the byte order mark removed), in any order; `utf8` is the text
    /// when it is UTF-8. By default the file is parsed and its tree walked ([`parsed_findings`]);
    /// a language whose own rules run around the parse (Python's tokenizer) replaces that.
    fn findings(&self, language: Language, text: &[u8], utf8: Option<&str>) -> Vec<Finding> {
        parsed_findings(language, text, utf8)
    }

    /// The node kinds the language's [`ExtraCheck`] looks at.
    fn extra_kinds(&self) -> &'static [&'static str] {
        &[]
    }

    /// The language's check of single nodes, when this text needs one (the walk then visits every
    /// node, not only those around an error).
    fn extra_check(&self, _text: &[u8]) -> Option<ExtraCheck> {
        None
    }

    /// The check the walk runs on the nodes of [`LanguageRules::extra_kinds`]: by default
    /// [`LanguageRules::extra_check`], which looks at one node at a time; a language whose rules
    /// depend on where a node is (Python's `return` outside a function) keeps state instead.
    fn node_check<'t>(&self, text: &'t [u8]) -> Option<Box<dyn NodeCheck<'t> + 't>> {
        self.extra_check(text)
            .map(|check| Box::new(SingleNodeCheck { check, text }) as Box<dyn NodeCheck<'t> + 't>)
    }

    /// When the tree has an ERROR node: the mistake it is a consequence of, placed where the
    /// author has to look. By default the first bracket that is never closed or closed wrongly.
    fn precise_problem(&self, tree: &Tree, _text: &[u8]) -> Option<Finding> {
        bracket_problem(tree)
    }

    /// The file's findings, given the tree's own (its ERROR and MISSING nodes and what the extra
    /// check rejects): more checks on top, or another parser's verdict instead.
    fn after_walk(
        &self,
        _tree: &Tree,
        _text: &[u8],
        _utf8: Option<&str>,
        tree_errors: Vec<Finding>,
    ) -> Vec<Finding> {
        tree_errors
    }
}

/// What a file's bytes must be, by its language.
enum Encoding {
    /// UTF-8.
    Utf8,
    /// Any bytes: shell scripts, and Python files that declare another encoding (PEP 263).
    Any,
    /// The file's encoding cannot be read at all; the message says why.
    Problem(String),
}

/// One syntax error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong, e.g. "missing `)`".
    pub message: String,
    /// The line the error is on (a window of it when the line is very long), without its line break.
    pub source_line: String,
    /// Spaces (tabs where the source line has tabs) and a `^` under the column.
    pub caret: String,
}

impl SyntaxError {
    /// `path:line:col: message` then the source line and the caret line (no trailing newline).
    pub fn render(&self, path: &str) -> String {
        format!(
            "{path}:{}:{}: {}\n{}\n{}",
            self.line, self.column, self.message, self.source_line, self.caret
        )
    }
}

/// A problem at a byte offset of the text, before it is turned into a line, column and excerpt.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Finding {
    byte: usize,
    message: String,
    /// For an ERROR node, where it ends: a better explanation inside it replaces it.
    error_end: Option<usize>,
}

impl Finding {
    fn new(byte: usize, message: impl Into<String>) -> Self {
        Self {
            byte,
            message: message.into(),
            error_end: None,
        }
    }
}

/// Parses `text` as `language`; returns every error found (ERROR and MISSING nodes and the
/// language's extra checks; at most [`MAX_ERRORS`]), empty when it parses.
pub fn check(language: Language, text: &[u8]) -> Vec<SyntaxError> {
    // A byte order mark is invisible to every tool that accepts it; columns on line 1 count without it.
    let (text, had_bom) = match text.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (rest, true),
        None => (text, false),
    };
    let utf8 = std::str::from_utf8(text);
    let encoding_error = encoding_problem(language, text, had_bom, utf8.as_ref().err());
    let mut findings = language.rules().findings(language, text, utf8.ok());
    // The sort is stable: of two findings at one place, the one found first stays.
    findings.sort_by_key(|f| f.byte);
    findings.dedup_by(|a, b| a.byte == b.byte);
    let mut errors: Vec<SyntaxError> = Vec::with_capacity(findings.len() + 1);
    if let Some(message) = encoding_error {
        errors.push(syntax_error_at(text, 0, message));
    }
    errors.extend(
        findings
            .into_iter()
            .take(MAX_ERRORS)
            .map(|f| syntax_error_at(text, f.byte, f.message)),
    );
    errors.truncate(MAX_ERRORS);
    errors
}

/// Why the file's bytes cannot be read as source text at all, if they cannot.
fn encoding_problem(
    language: Language,
    text: &[u8],
    had_bom: bool,
    utf8_error: Option<&std::str::Utf8Error>,
) -> Option<String> {
    let error = match language.rules().encoding(text, had_bom) {
        Encoding::Problem(message) => return Some(message),
        Encoding::Any => return None,
        Encoding::Utf8 => utf8_error?,
    };
    let (line, column) = position(text, error.valid_up_to());
    Some(format!(
        "the file is not valid UTF-8 (first invalid byte at {line}:{column})"
    ))
}

/// Reads and checks one file; None when its extension has no supported language. An unreadable
/// file or invalid UTF-8 (for languages that require UTF-8) is reported as an error at 1:1.
pub fn check_file(path: &Path) -> Option<Vec<SyntaxError>> {
    let language = Language::for_path(path)?;
    Some(match crate::regular::read(path) {
        Ok(text) => check(language, &text),
        Err(error) => vec![SyntaxError {
            line: 1,
            column: 1,
            message: format!("cannot read the file: {error}"),
            source_line: String::new(),
            caret: "^".to_owned(),
        }],
    })
}

thread_local! {
    /// One parser per language and thread: the syntax gate checks many files, and a parser keeps
    /// its allocations between parses.
    static PARSERS: RefCell<Vec<Option<Parser>>> =
        RefCell::new(Language::all().iter().map(|_| None).collect());
}

fn parse(language: Language, text: &[u8]) -> Result<Tree, String> {
    PARSERS.with_borrow_mut(|parsers| {
        let slot = &mut parsers[language.index()];
        let parser = if let Some(parser) = slot {
            parser
        } else {
            let mut parser = Parser::new();
            // The grammar's ABI is only checked here, at run time.
            parser.set_language(&language.grammar()).map_err(|error| {
                format!("the {} grammar cannot be loaded: {error}", language.name())
            })?;
            slot.insert(parser)
        };
        parser
            .parse(text, None)
            .ok_or_else(|| format!("the {} parser gave up on this file", language.name()))
    })
}

/// A language's check of one node, for what its grammar accepts but the language does not.
type ExtraCheck = fn(Node, &[u8]) -> Option<Finding>;

/// A language's check of the nodes of one tree, in document order, for what its grammar accepts
/// but the language does not; it may remember what it saw (the scopes around a node).
trait NodeCheck<'t> {
    /// The problem with `node`, if any; `depth` is its depth in the tree (the root's is 0). The
    /// walk does not enter a node with a problem.
    fn visit(&mut self, node: Node<'t>, depth: u32) -> Option<Finding>;

    /// What only the whole walk tells (a problem found when a scope ends), after the last node.
    fn finish(&mut self) -> Vec<Finding> {
        Vec::new()
    }
}

/// An [`ExtraCheck`] as a [`NodeCheck`]: nothing remembered.
struct SingleNodeCheck<'t> {
    check: ExtraCheck,
    text: &'t [u8],
}

impl<'t> NodeCheck<'t> for SingleNodeCheck<'t> {
    fn visit(&mut self, node: Node<'t>, _depth: u32) -> Option<Finding> {
        (self.check)(node, self.text)
    }
}

/// Per language, by kind id, whether [`LanguageRules::extra_kinds`] names the kind: every node of
/// a file passes the test, and comparing ids is much cheaper than comparing kind names.
static EXTRA_KIND_IDS: LazyLock<Vec<Vec<bool>>> = LazyLock::new(|| {
    Language::all()
        .iter()
        .map(|&language| {
            let kinds = language.rules().extra_kinds();
            let grammar = language.grammar();
            (0..grammar.node_kind_count())
                .map(|id| {
                    u16::try_from(id)
                        .ok()
                        .and_then(|id| grammar.node_kind_for_id(id))
                        .is_some_and(|kind| kinds.contains(&kind))
                })
                .collect()
        })
        .collect()
});

/// Parses the file and returns every finding for it: the default of
/// [`LanguageRules::findings`]. A parser that gives up is one finding at the start of the file.
fn parsed_findings(language: Language, text: &[u8], utf8: Option<&str>) -> Vec<Finding> {
    match parse(language, text) {
        Ok(tree) => language_findings(language, text, utf8, &tree),
        Err(message) => vec![Finding::new(0, message)],
    }
}

/// Every finding for one parsed file: the tree's own errors, then the language's extra checks.
fn language_findings(
    language: Language,
    text: &[u8],
    utf8: Option<&str>,
    tree: &Tree,
) -> Vec<Finding> {
    let rules = language.rules();
    let mut extra = rules.node_check(text);
    let mut tree_errors = tree_findings(
        tree,
        text,
        extra.as_deref_mut().map(|check| (check, language)),
    );
    if tree_errors.iter().any(|f| f.error_end.is_some())
        && let Some(precise) = rules.precise_problem(tree, text)
    {
        // The ERROR node that swallowed the bracket or string is a consequence of it.
        tree_errors.retain(|f| {
            f.error_end
                .is_none_or(|end| !(f.byte..=end).contains(&precise.byte))
        });
        tree_errors.push(precise);
    }
    rules.after_walk(tree, text, utf8, tree_errors)
}

/// The first bracket that is never closed, or closed by the wrong bracket, among the tree's
/// tokens. tree-sitter places such an error where its recovery gave up, often the start of the
/// enclosing block or of the file; the bracket is where the author has to look. Strings and
/// comments are single tokens, so brackets inside them do not count. Not for Bash (`case` items
/// end in a lone `)`), nor for the languages checked by other parsers: their
/// [`LanguageRules::precise_problem`] does not call it.
fn bracket_problem(tree: &Tree) -> Option<Finding> {
    let mut open: Vec<Node> = Vec::new();
    let mut cursor = tree.walk();
    loop {
        let node = cursor.node();
        if node.child_count() == 0 && !node.is_error() {
            match node.kind() {
                "(" | "[" | "{" | "${" => open.push(node),
                closer @ (")" | "]" | "}") => {
                    let expected = |opener: &Node| match opener.kind() {
                        "(" => ")",
                        "[" => "]",
                        _ => "}",
                    };
                    match open.pop() {
                        Some(opener) if expected(&opener) == closer => {}
                        Some(opener) if node.is_missing() => {
                            return Some(Finding::new(
                                opener.start_byte(),
                                format!("`{}` is never closed", opener.kind()),
                            ));
                        }
                        Some(opener) => {
                            return Some(Finding::new(
                                node.start_byte(),
                                format!(
                                    "`{closer}` does not match `{}` (line {})",
                                    opener.kind(),
                                    opener.start_position().row + 1
                                ),
                            ));
                        }
                        None => {
                            return Some(Finding::new(
                                node.start_byte(),
                                format!("unmatched `{closer}`"),
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return open.pop().map(|opener| {
                    Finding::new(
                        opener.start_byte(),
                        format!("`{}` is never closed", opener.kind()),
                    )
                });
            }
        }
    }
}

/// ERROR and MISSING nodes in document order, plus whatever `extra` rejects. Without `extra`, only
/// subtrees that contain an error are entered; with it, every node is visited. An ERROR node's
/// descendants are not reported: they are one error.
fn tree_findings<'t>(
    tree: &'t Tree,
    text: &[u8],
    extra: Option<(&mut (dyn NodeCheck<'t> + 't), Language)>,
) -> Vec<Finding> {
    let walk_all = extra.is_some();
    let checked: &[bool] = extra
        .as_ref()
        .map_or(&[], |(_, language)| &EXTRA_KIND_IDS[language.index()]);
    let mut extra = extra.map(|(check, _)| check);
    let mut out = Vec::new();
    let mut cursor = tree.walk();
    // The cursor can tell its depth, but only by counting its stack each time.
    let mut depth = 0u32;
    let finish = |extra: Option<&mut (dyn NodeCheck<'t> + 't)>, mut out: Vec<Finding>| {
        if let Some(check) = extra {
            out.extend(check.finish());
        }
        out
    };
    loop {
        let node = cursor.node();
        let mut descend = walk_all || node.has_error();
        if node.is_error() {
            out.push(unexpected(node, text));
            descend = false;
        } else if node.is_missing() {
            out.push(Finding::new(node.start_byte(), missing_message(node)));
            descend = false;
        } else if let Some(check) = extra.as_deref_mut()
            && checked
                .get(usize::from(node.kind_id()))
                .copied()
                .unwrap_or(false)
            && let Some(finding) = check.visit(node, depth)
        {
            out.push(finding);
            descend = false;
        } else if node.has_error() && !node.children(&mut node.walk()).any(|c| c.has_error()) {
            out.push(hidden_missing(node));
            descend = false;
        }
        if out.len() >= MAX_ERRORS {
            return out;
        }
        if descend && cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return finish(extra, out);
            }
            depth -= 1;
        }
    }
}

/// The error of a node none of whose visible children has one: a MISSING token of a hidden rule
/// (`_line_ending_or_eof` after a TOML pair). Tree cursors skip hidden nodes, so only the node
/// that holds it shows it; the token was expected where the node ends.
fn hidden_missing(node: Node) -> Finding {
    let tree = node.to_sexp();
    let name = tree
        .split("(MISSING ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .map(|name| name.trim_matches(['"', '_']).replace('_', " "));
    let message = match name {
        Some(name) if !name.is_empty() => format!("missing {name}"),
        _ => "invalid syntax".to_owned(),
    };
    Finding::new(node.end_byte(), message)
}

fn missing_message(node: Node) -> String {
    let kind = node.kind();
    if node.is_named() {
        format!("missing {}", kind.trim_matches('_').replace('_', " "))
    } else {
        format!("missing `{kind}`")
    }
}

/// An ERROR node as "unexpected `token`". A nested error leaf (one character no rule could use)
/// is more precise than the start of the enclosing ERROR node, so it wins.
fn unexpected(node: Node, text: &[u8]) -> Finding {
    Finding {
        error_end: Some(node.end_byte()),
        ..unexpected_token(node, text)
    }
}

fn unexpected_token(node: Node, text: &[u8]) -> Finding {
    let target = first_error_leaf(node).unwrap_or_else(|| first_incomplete_child(node));
    let start = target.start_byte();
    if start >= text.len() {
        return Finding::new(start, "unexpected end of file");
    }
    let mut leaf = target;
    while let Some(child) = leaf.child(0) {
        leaf = child;
    }
    let end = if leaf.end_byte() > start {
        leaf.end_byte()
    } else {
        target.end_byte()
    };
    match snippet(&text[start..end.min(text.len())]) {
        Some(snippet) => Finding::new(start, format!("unexpected `{snippet}`")),
        None => Finding::new(start, "invalid syntax"),
    }
}

/// Where an ERROR node stops making sense: tree-sitter often wraps the complete statements before
/// a mistake into the ERROR node (a missing `:` after `def f()` swallows the whole module), so the
/// first child that is not a complete definition or statement is the place to report.
fn first_incomplete_child(node: Node) -> Node {
    let mut cursor = node.walk();
    let complete = |child: &Node| {
        let kind = child.kind();
        child.is_named()
            && !child.has_error()
            && (kind.ends_with("_definition")
                || kind.ends_with("_statement")
                || kind.ends_with("_declaration"))
    };
    node.children(&mut cursor)
        .find(|child| !complete(child))
        .unwrap_or(node)
}

/// The first error leaf under `node`, in document order. Iterative: a deeply nested file makes a
/// deep tree, and recursion would overflow the stack.
fn first_error_leaf(node: Node) -> Option<Node> {
    let mut cursor = node.walk();
    if !cursor.goto_first_child() {
        return None;
    }
    loop {
        let child = cursor.node();
        if child.is_error() && child.child_count() == 0 && child.end_byte() > child.start_byte() {
            return Some(child);
        }
        if child.has_error() && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() || cursor.node() == node {
                return None;
            }
        }
    }
}

/// The first line of `bytes`, trimmed and shortened for a message; None when nothing is visible.
fn snippet(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return None;
    }
    let mut out: String = line.chars().take(SNIPPET_CHARS).collect();
    if line.chars().count() > SNIPPET_CHARS {
        out.push('…');
    }
    Some(out.replace('`', "'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error's line, column and message; the language files' tests use it too.
    pub(super) fn messages(language: Language, text: &str) -> Vec<(usize, usize, String)> {
        check(language, text.as_bytes())
            .into_iter()
            .map(|e| (e.line, e.column, e.message))
            .collect()
    }

    #[test]
    fn missing_token_is_named() {
        assert_eq!(
            messages(Language::Rust, "fn main() { foo(1, 2 }\n"),
            vec![(1, 21, "missing `)`".to_owned())]
        );
    }

    #[test]
    fn unexpected_token_is_quoted() {
        assert_eq!(
            messages(Language::Rust, "fn main() { let x = ; }\n"),
            vec![(1, 19, "unexpected `=`".to_owned())]
        );
    }

    #[test]
    fn snippet_is_one_short_line() {
        assert_eq!(snippet(b"  abc\ndef"), Some("abc".to_owned()));
        assert_eq!(snippet(b" \n "), None);
        let long = snippet("x".repeat(100).as_bytes()).unwrap_or_default();
        assert_eq!(long.chars().count(), SNIPPET_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn byte_order_mark_is_ignored() {
        assert!(check(Language::Json, b"\xEF\xBB\xBF{\"a\": 1}").is_empty());
    }

    #[test]
    fn missing_tokens_of_hidden_rules_are_reported() {
        // A tree cursor never visits the MISSING `_line_ending_or_eof`; the pair holding it has the
        // error and no child with one.
        let text = b"a = 1 b = 2\n";
        let tree = parse(Language::Toml, text).expect("parses");
        assert!(tree.root_node().has_error());
        assert_eq!(
            tree_findings(&tree, text, None),
            vec![Finding::new(5, "missing line ending or eof")]
        );
    }

    #[test]
    fn errors_are_capped() {
        let source = "fn f() { let = ; }\n".repeat(50);
        assert_eq!(check(Language::Rust, source.as_bytes()).len(), MAX_ERRORS);
    }
}
