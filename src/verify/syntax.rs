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

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::bytes::Regex;
use tree_sitter::{Node, Parser, Tree};

use crate::diagnostics::FileId;
use crate::diagnostics::rules;
use crate::language::kdl::parse as kdl_parse;

/// The most errors reported for one file: past the first few, most are consequences of them.
pub const MAX_ERRORS: usize = 20;

/// How many characters of the offending token a message quotes.
const SNIPPET_CHARS: usize = 24;

/// How many characters of a long source line are shown around the error (minified files have
/// lines of megabytes).
const LINE_WINDOW_CHARS: usize = 160;

/// Every file extension the syntax gate parses, and its language; lint's warning about `syntax`
/// gates that check nothing reads the same table.
pub const EXTENSIONS: &[(&str, Language)] = &[
    ("py", Language::Python),
    ("pyi", Language::Python),
    ("rs", Language::Rust),
    ("js", Language::JavaScript),
    ("mjs", Language::JavaScript),
    ("cjs", Language::JavaScript),
    ("jsx", Language::JavaScript),
    ("ts", Language::TypeScript),
    ("mts", Language::TypeScript),
    ("cts", Language::TypeScript),
    ("tsx", Language::Tsx),
    ("json", Language::Json),
    ("yaml", Language::Yaml),
    ("yml", Language::Yaml),
    ("toml", Language::Toml),
    ("sh", Language::Bash),
    ("bash", Language::Bash),
    ("go", Language::Go),
    ("kdl", Language::Kdl),
];

/// A language the syntax gate can parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// `.py`, `.pyi` (Python 3).
    Python,
    /// `.rs`
    Rust,
    /// `.js`, `.mjs`, `.cjs`, `.jsx` (JSX included).
    JavaScript,
    /// `.ts`, `.mts`, `.cts`
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.json` (comments tolerated, as in `tsconfig.json`).
    Json,
    /// `.yaml`, `.yml`
    Yaml,
    /// `.toml`
    Toml,
    /// `.sh`, `.bash`
    Bash,
    /// `.go`
    Go,
    /// `.kdl` (v2, or v1).
    Kdl,
}

const ALL_LANGUAGES: [Language; 11] = [
    Language::Python,
    Language::Rust,
    Language::JavaScript,
    Language::TypeScript,
    Language::Tsx,
    Language::Json,
    Language::Yaml,
    Language::Toml,
    Language::Bash,
    Language::Go,
    Language::Kdl,
];

impl Language {
    /// The language of a file, by its extension (case-sensitive, as on the file systems agents use).
    pub fn for_path(path: &Path) -> Option<Language> {
        let extension = path.extension()?.to_str()?;
        EXTENSIONS
            .iter()
            .find(|(e, _)| *e == extension)
            .map(|&(_, language)| language)
    }

    /// The language's usual name, e.g. `TypeScript`.
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "Python",
            Language::Rust => "Rust",
            Language::JavaScript => "JavaScript",
            Language::TypeScript => "TypeScript",
            Language::Tsx => "TSX",
            Language::Json => "JSON",
            Language::Yaml => "YAML",
            Language::Toml => "TOML",
            Language::Bash => "Bash",
            Language::Go => "Go",
            Language::Kdl => "KDL",
        }
    }

    /// Every language, in a fixed order.
    pub fn all() -> &'static [Language] {
        &ALL_LANGUAGES
    }

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

    /// Whether the language's files must be UTF-8. Shell scripts are bytes; Python files may
    /// declare another encoding (PEP 263), which [`python_coding`] reads.
    fn requires_utf8(self) -> bool {
        !matches!(self, Language::Bash)
    }
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
    let parsed = if language == Language::Json {
        json_exponent_signs(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let indentation = if language == Language::Python {
        python_indentation(text)
    } else {
        Vec::new()
    };
    let mut parsed_findings = match parse(language, &parsed) {
        Ok(tree) if language == Language::Python && tree.root_node().has_error() => {
            python_findings_joined(text, &tree)
        }
        Ok(tree) => language_findings(language, &parsed, utf8.ok(), &tree),
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
    // At the same place, Python's tokenizer speaks before its parser.
    let mut findings: Vec<Finding> = indentation.into_iter().map(|p| p.finding).collect();
    findings.extend(parsed_findings);
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
    let declared = if language == Language::Python {
        python_coding(text)
    } else {
        None
    };
    if let Some(name) = &declared
        && had_bom
        && !python_is_bom_compatible(name)
    {
        // CPython's own wording: a BOM says UTF-8, the declaration says otherwise.
        return Some(format!("encoding problem: {name} with BOM"));
    }
    let error = utf8_error?;
    if !language.requires_utf8() || declared.is_some_and(|name| !python_is_utf8(&name)) {
        return None;
    }
    let (line, column) = position(text, error.valid_up_to());
    Some(format!(
        "the file is not valid UTF-8 (first invalid byte at {line}:{column})"
    ))
}

/// Reads and checks one file; None when its extension has no supported language. An unreadable
/// file or invalid UTF-8 (for languages that require UTF-8) is reported as an error at 1:1.
pub fn check_file(path: &Path) -> Option<Vec<SyntaxError>> {
    let language = Language::for_path(path)?;
    Some(match std::fs::read(path) {
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
        RefCell::new(ALL_LANGUAGES.iter().map(|_| None).collect());
}

fn parse(language: Language, text: &[u8]) -> Result<Tree, String> {
    PARSERS.with_borrow_mut(|parsers| {
        let slot = &mut parsers[language.index()];
        let parser = match slot {
            Some(parser) => parser,
            None => {
                let mut parser = Parser::new();
                // The grammar's ABI is only checked here, at run time.
                parser.set_language(&language.grammar()).map_err(|error| {
                    format!("the {} grammar cannot be loaded: {error}", language.name())
                })?;
                slot.insert(parser)
            }
        };
        parser
            .parse(text, None)
            .ok_or_else(|| format!("the {} parser gave up on this file", language.name()))
    })
}

/// A language's check of one node, for what its grammar accepts but the language does not.
type ExtraCheck = fn(Node, &[u8]) -> Option<Finding>;

/// The node kinds each language's [`ExtraCheck`] looks at.
fn extra_kinds(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => &[
            "print_statement",
            "except_clause",
            "exec_statement",
            "<>",
            "integer",
            "string_start",
            "raise_statement",
            "parameters",
            "lambda_parameters",
            "argument_list",
            "float",
            "try_statement",
            "expression_statement",
            "for_in_clause",
        ],
        Language::JavaScript | Language::TypeScript | Language::Tsx => {
            &["jsx_element", "object", "object_pattern"]
        }
        _ => &[],
    }
}

/// Per language, by kind id, whether [`extra_kinds`] names the kind: every node of a file passes
/// the test, and comparing ids is much cheaper than comparing kind names.
static EXTRA_KIND_IDS: LazyLock<Vec<Vec<bool>>> = LazyLock::new(|| {
    ALL_LANGUAGES
        .iter()
        .map(|&language| {
            let kinds = extra_kinds(language);
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

/// Every finding for one parsed file: the tree's own errors, then the language's extra checks.
fn language_findings(
    language: Language,
    text: &[u8],
    utf8: Option<&str>,
    tree: &Tree,
) -> Vec<Finding> {
    let extra: Option<ExtraCheck> = match language {
        Language::Python => Some(python3_rejects),
        Language::JavaScript | Language::TypeScript | Language::Tsx if js_may_need_checks(text) => {
            Some(js_rejects)
        }
        _ => None,
    };
    let mut tree_errors = tree_findings(tree, text, extra.map(|e| (e, language)));
    if tree_errors.iter().any(|f| f.error_end.is_some()) {
        let precise = match language {
            Language::Toml => toml_unterminated_string(text),
            _ => bracket_problem(language, tree),
        };
        if let Some(precise) = precise {
            // The ERROR node that swallowed the bracket or string is a consequence of it.
            tree_errors.retain(|f| {
                f.error_end
                    .is_none_or(|end| !(f.byte..=end).contains(&precise.byte))
            });
            tree_errors.push(precise);
        }
    }
    match language {
        Language::Json => json_findings(tree, text, tree_errors),
        Language::Yaml => yaml_findings(utf8, tree_errors),
        Language::Toml => {
            let (mut findings, ends) = toml_statements_sharing_a_line(tree.root_node(), text);
            if tree.root_node().has_error() {
                // tree-sitter-toml reports the same problem as a missing line ending where the
                // statement before ends.
                findings.extend(tree_errors.into_iter().filter(|f| !ends.contains(&f.byte)));
            } else {
                findings.extend(toml_duplicates(tree.root_node(), text));
            }
            findings
        }
        Language::Kdl => kdl_findings(utf8, tree, tree_errors),
        Language::Bash => {
            let mut findings = tree_errors;
            findings.extend(bash_carriage_return(tree, text));
            findings
        }
        _ => tree_errors,
    }
}

/// The first bracket that is never closed, or closed by the wrong bracket, among the tree's
/// tokens. tree-sitter places such an error where its recovery gave up, often the start of the
/// enclosing block or of the file; the bracket is where the author has to look. Strings and
/// comments are single tokens, so brackets inside them do not count. Not for Bash (`case` items
/// end in a lone `)`), nor for the languages checked by other parsers.
fn bracket_problem(language: Language, tree: &Tree) -> Option<Finding> {
    if matches!(
        language,
        Language::Bash | Language::Yaml | Language::Toml | Language::Kdl
    ) {
        return None;
    }
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
fn tree_findings(tree: &Tree, text: &[u8], extra: Option<(ExtraCheck, Language)>) -> Vec<Finding> {
    let walk_all = extra.is_some();
    let checked: &[bool] = extra.map_or(&[], |(_, language)| &EXTRA_KIND_IDS[language.index()]);
    let mut out = Vec::new();
    let mut cursor = tree.walk();
    loop {
        let node = cursor.node();
        let mut descend = walk_all || node.has_error();
        if node.is_error() {
            out.push(unexpected(node, text));
            descend = false;
        } else if node.is_missing() {
            out.push(Finding::new(node.start_byte(), missing_message(node)));
            descend = false;
        } else if let Some((check, _)) = extra
            && checked
                .get(usize::from(node.kind_id()))
                .copied()
                .unwrap_or(false)
            && let Some(finding) = check(node, text)
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
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return out;
            }
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

// ----- Python 3 -------------------------------------------------------------------------------

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

/// CPython's tokenizer accepts a BOM only with a declaration that normalises to exactly `utf-8`
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

/// Python's implicit line joining, done before tree-sitter sees the file: inside brackets a line
/// break means nothing to Python, but tree-sitter-python's scanner still reads the next line's
/// indentation, and rejects valid code such as a continuation line indented less than its block.
/// Line breaks inside brackets become spaces and comments inside brackets become blanks, so every
/// byte keeps its offset and errors are still placed in the original text. None when nothing is
/// inside brackets across lines.
fn python_join_bracketed_lines(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = text.to_vec();
    let mut depth = 0usize;
    let mut changed = false;
    let mut i = 0;
    while i < out.len() {
        match out[i] {
            b'#' => {
                let end = out[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(out.len(), |n| i + n);
                if depth > 0 {
                    out[i..end].fill(b' ');
                    changed = true;
                }
                i = end;
            }
            quote @ (b'\'' | b'"') => {
                let triple = out.get(i + 1) == Some(&quote) && out.get(i + 2) == Some(&quote);
                i = if triple {
                    python_string_end(&out, i + 3, quote, true)
                } else {
                    python_string_end(&out, i + 1, quote, false)
                };
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'\\' => i += 2,
            b'\n' if depth > 0 => {
                out[i] = b' ';
                if i > 0 && out[i - 1] == b'\r' {
                    out[i - 1] = b' ';
                }
                changed = true;
                i += 1;
            }
            _ => i += 1,
        }
    }
    changed.then_some(out)
}

/// The byte after a string's closing quote. A single-quoted string also ends, unterminated, at a
/// line break, as in Python's tokenizer.
fn python_string_end(text: &[u8], mut i: usize, quote: u8, triple: bool) -> usize {
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'\n' if !triple => return i,
            b if b == quote => {
                if !triple {
                    return i + 1;
                }
                if text.get(i + 1) == Some(&quote) && text.get(i + 2) == Some(&quote) {
                    return i + 3;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    text.len()
}

/// Python's tab size, for comparing indentation as its tokenizer does.
const PYTHON_TAB_SIZE: usize = 8;

/// One indentation level of a Python block: its width with tabs to the next multiple of 8, and
/// with tabs as one column. CPython compares both: when they disagree about how two lines relate,
/// the meaning depends on the tab size and it raises `TabError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PythonIndent {
    columns: usize,
    tabs_as_one: usize,
}

/// One indentation problem of a Python file.
struct IndentProblem {
    finding: Finding,
    /// Where the logical line before it starts.
    line_before: usize,
    /// For a missing `:`, the header it is missing from.
    header: Option<(usize, usize)>,
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

/// Indentation errors CPython's tokenizer and parser raise and tree-sitter-python does not: it
/// reads a missing block as an empty one, an unexpected indent as a statement, an unindent to no
/// outer level as a new one, and knows nothing of tab sizes. A line scan in the tokenizer's terms:
/// brackets, strings, comments, blank lines and `\` continuations as Python reads them.
fn python_indentation(text: &[u8]) -> Vec<IndentProblem> {
    let mut out = Vec::new();
    let mut levels = vec![PythonIndent {
        columns: 0,
        tabs_as_one: 0,
    }];
    // The logical line before ended with `:`: its start, and the byte after the `:`.
    let mut opener: Option<(usize, usize)> = None;
    // The line before was misplaced: a deeper line after it (the rest of a block that lost its
    // indentation, or that was indented wrongly) is not a second mistake.
    let mut after_problem = false;
    // The logical line before starts with a compound statement's keyword but does not end with
    // `:`: its start, and the end of its last token.
    let mut colon_missing: Option<(usize, usize)> = None;
    let mut line_before = 0;
    let mut i = 0;
    while i < text.len() {
        let mut indent = PythonIndent {
            columns: 0,
            tabs_as_one: 0,
        };
        while let Some(&b) = text.get(i) {
            match b {
                b' ' => {
                    indent.columns += 1;
                    indent.tabs_as_one += 1;
                }
                b'\t' => {
                    indent.columns = (indent.columns / PYTHON_TAB_SIZE + 1) * PYTHON_TAB_SIZE;
                    indent.tabs_as_one += 1;
                }
                // A form feed resets the column, as in CPython's tokenizer.
                b'\x0c' => {
                    indent.columns = 0;
                    indent.tabs_as_one = 0;
                }
                _ => break,
            }
            i += 1;
        }
        // Blank lines and lines holding only a comment do not count.
        match text.get(i) {
            None => break,
            Some(b'#' | b'\n' | b'\r') => {
                i = python_line_end(text, i);
                continue;
            }
            Some(_) => {}
        }
        let before = LineBefore {
            opener,
            colon_missing,
            after_problem,
        };
        let problem = python_indent_problem(text, i, indent, &mut levels, &before);
        after_problem = problem.is_some();
        out.extend(problem.map(|finding| IndentProblem {
            header: colon_missing.filter(|&(_, last_end)| finding.byte == last_end),
            finding,
            line_before,
        }));
        let line = python_logical_line(text, i);
        opener = line.colon.map(|colon| (i, colon + 1));
        colon_missing = (line.colon.is_none()
            && PYTHON_COMPOUND_KEYWORDS.contains(&python_keyword(text, i).as_str()))
        .then_some((i, line.last_end));
        line_before = i;
        i = line.end;
    }
    if let Some((start, after_colon)) = opener {
        out.push(IndentProblem {
            finding: Finding::new(after_colon, expected_block(text, start)),
            line_before: start,
            header: None,
        });
    }
    out
}

/// What is wrong with the indentation of the logical line starting at `first`, if anything;
/// updates the stack of open levels as Python's tokenizer does (and recovers as if the line were
/// right, so that one mistake is reported once).
fn python_indent_problem(
    text: &[u8],
    first: usize,
    indent: PythonIndent,
    levels: &mut Vec<PythonIndent>,
    before: &LineBefore,
) -> Option<Finding> {
    const TAB_ERROR: &str = "inconsistent use of tabs and spaces in indentation: this line's level depends on the tab size";
    let top = *levels.last()?;
    let opener = before.opener;
    if indent.columns > top.columns {
        levels.push(indent);
        return if indent.tabs_as_one <= top.tabs_as_one {
            Some(Finding::new(first, TAB_ERROR))
        } else if opener.is_some() || before.after_problem {
            None
        } else if let Some((start, last_end)) = before.colon_missing {
            // `def f()` over an indented body: the colon is what is missing, as Python says.
            Some(Finding::new(
                last_end,
                format!(
                    "expected `:` at the end of the `{}` line",
                    python_keyword(text, start)
                ),
            ))
        } else {
            Some(Finding::new(
                first,
                "unexpected indent: the line before does not open a block",
            ))
        };
    }
    let mut tokenizer_error = None;
    if indent.columns < top.columns {
        while levels.len() > 1 && levels.last().is_some_and(|l| indent.columns < l.columns) {
            levels.pop();
        }
        let outer = *levels.last()?;
        if indent.columns != outer.columns {
            levels.push(indent);
            tokenizer_error = Some("unindent does not match any outer indentation level");
        } else if indent.tabs_as_one != outer.tabs_as_one {
            tokenizer_error = Some(TAB_ERROR);
        }
    } else if indent.tabs_as_one != top.tabs_as_one {
        tokenizer_error = Some(TAB_ERROR);
    }
    match (tokenizer_error, opener) {
        (Some(message), _) => Some(Finding::new(first, message)),
        (None, Some((start, _))) => Some(Finding::new(first, expected_block(text, start))),
        (None, None) => None,
    }
}

/// What the logical line before a line tells about its indentation.
struct LineBefore {
    /// It ends with `:`: its start, and the byte after the `:`.
    opener: Option<(usize, usize)>,
    /// It starts with a compound statement's keyword and does not end with `:`: its start, and
    /// the end of its last token.
    colon_missing: Option<(usize, usize)>,
    /// Its own indentation was reported.
    after_problem: bool,
}

/// The keywords that start a compound statement, whose header ends with `:`.
const PYTHON_COMPOUND_KEYWORDS: &[&str] = &[
    "def", "class", "if", "elif", "else", "for", "while", "try", "except", "finally", "with",
];

/// The first word of the statement at `start` (after `async`).
fn python_keyword(text: &[u8], start: usize) -> String {
    let word = |from: usize| {
        let rest = &text[from.min(text.len())..];
        let end = rest
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end]).into_owned()
    };
    let first = word(start);
    if first != "async" {
        return first;
    }
    let next = text[start + 5..]
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .map_or(text.len(), |n| start + 5 + n);
    word(next)
}

/// "expected an indented block after …", naming the statement that starts at `start`.
fn expected_block(text: &[u8], start: usize) -> String {
    let line = position(text, start).0;
    let word = python_keyword(text, start);
    let what = match word.as_str() {
        "def" => "the function definition".to_owned(),
        "class" => "the class definition".to_owned(),
        "match" | "case" => format!("the `{word}` statement"),
        word if PYTHON_COMPOUND_KEYWORDS.contains(&word) => format!("the `{word}` statement"),
        _ => "the line ending in `:`".to_owned(),
    };
    format!("expected an indented block after {what} on line {line}")
}

/// The byte after the line break that ends the physical line holding `i` (the end of the text
/// when none does). `\r\n` and a lone `\r` end lines too, as Python reads them.
fn python_line_end(text: &[u8], mut i: usize) -> usize {
    while let Some(&b) = text.get(i) {
        i += 1;
        match b {
            b'\n' => return i,
            b'\r' if text.get(i) == Some(&b'\n') => return i + 1,
            b'\r' => return i,
            _ => {}
        }
    }
    i
}

/// One logical line of Python, as [`python_logical_line`] reads it.
struct PythonLine {
    /// The byte after the line break that ends it.
    end: usize,
    /// Where its last token is, when that token is a `:` outside brackets (the line opens a block).
    colon: Option<usize>,
    /// The byte after its last token (before any comment).
    last_end: usize,
}

/// Reads one logical line from `start`: through brackets, strings and `\` continuations to the
/// line break that ends it.
fn python_logical_line(text: &[u8], start: usize) -> PythonLine {
    let mut depth = 0usize;
    let mut last: Option<usize> = None;
    let mut last_end = start;
    let mut i = start;
    while let Some(&b) = text.get(i) {
        match b {
            b'#' => {
                while text.get(i).is_some_and(|b| !matches!(b, b'\n' | b'\r')) {
                    i += 1;
                }
            }
            b'\n' | b'\r' => {
                let end = python_line_end(text, i);
                if depth == 0 {
                    let colon = last.filter(|&l| text[l] == b':');
                    return PythonLine {
                        end,
                        colon,
                        last_end,
                    };
                }
                i = end;
            }
            b'\\' if matches!(text.get(i + 1), Some(b'\n' | b'\r')) => {
                i = python_line_end(text, i + 1);
            }
            quote @ (b'\'' | b'"') => {
                last = Some(i);
                let triple = text.get(i + 1) == Some(&quote) && text.get(i + 2) == Some(&quote);
                i = if triple {
                    python_string_end(text, i + 3, quote, true)
                } else {
                    python_string_end(text, i + 1, quote, false)
                };
                last_end = i;
            }
            b' ' | b'\t' | b'\x0c' => i += 1,
            _ => {
                match b {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                last = Some(i);
                i += 1;
                last_end = i;
            }
        }
    }
    // The file ends inside the logical line: an unclosed bracket is reported by the parse.
    PythonLine {
        end: text.len(),
        colon: last.filter(|&l| depth == 0 && text[l] == b':'),
        last_end,
    }
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
    match node.kind() {
        // `print >>f, x` is also a valid Python 3 expression (a tuple holding `print >> f`).
        "print_statement" if node.child(1).is_some_and(|c| c.kind() == "chevron") => None,
        "print_statement" => at(
            node,
            "Python 2 `print` statement; Python 3 needs `print(…)`",
        ),
        "exec_statement" => at(node, "Python 2 `exec` statement; Python 3 needs `exec(…)`"),
        // Python 3.14 (PEP 758) accepts `except A, B:` and reads it as `except (A, B):`; every
        // earlier Python 3 rejects it, and in Python 2 code `except E, e:` meant `except E as e:`.
        "except_clause" => {
            let mut cursor = node.walk();
            let comma = node.children(&mut cursor).find(|c| c.kind() == ",")?;
            at(
                comma,
                "`except A, B:` needs parentheses before Python 3.14; Python 2's `except E, e:` is `except E as e:`",
            )
        }
        "<>" if !node.is_named() => at(node, "Python 2 `<>` operator; Python 3 needs `!=`"),
        "integer" => python_integer(node, text),
        "string_start" => python_string_start(node, text),
        "raise_statement" => {
            let mut cursor = node.walk();
            let list = node
                .named_children(&mut cursor)
                .find(|c| c.kind() == "expression_list")?;
            at(list, "Python 2 `raise E, V`; Python 3 needs `raise E(V)`")
        }
        "parameters" | "lambda_parameters" => python_parameters(node),
        "argument_list" => python_arguments(node),
        "float" if text[node.byte_range()].last() == Some(&b'_') => at(node, TRAILING_UNDERSCORE),
        "try_statement" => {
            let mut cursor = node.walk();
            let handled = node
                .named_children(&mut cursor)
                .any(|c| matches!(c.kind(), "except_clause" | "finally_clause"));
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
                    .is_some_and(|c| c.kind() == "named_expression") =>
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
fn python_parameters(node: Node) -> Option<Finding> {
    let mut cursor = node.walk();
    let mut positional_default = false;
    // After `*args` or a bare `*`, parameters are keyword-only and may go without defaults.
    let mut keyword_only = false;
    // A bare `*` still waiting for its first named parameter.
    let mut bare_star: Option<Node> = None;
    for parameter in node.named_children(&mut cursor) {
        if parameter.kind() == "tuple_pattern"
            || parameter
                .child_by_field_name("name")
                .is_some_and(|n| n.kind() == "tuple_pattern")
        {
            return Some(Finding::new(
                parameter.start_byte(),
                "Python 2 tuple parameter; Python 3 parameters cannot unpack",
            ));
        }
        // `*args: T` and `**kwargs: T` are typed parameters around the splat.
        let kind = match parameter.kind() {
            "typed_parameter" => {
                parameter
                    .named_child(0)
                    .map_or("typed_parameter", |inner| match inner.kind() {
                        splat @ ("list_splat_pattern" | "dictionary_splat_pattern") => splat,
                        _ => "typed_parameter",
                    })
            }
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

/// Call arguments: positional after keyword arguments, `*iterable` after `**mapping`.
fn python_arguments(node: Node) -> Option<Finding> {
    let mut cursor = node.walk();
    let mut keyword = false;
    let mut mapping_unpacked = false;
    // Comments and `\` line continuations are extras: they sit among the arguments.
    for argument in node.named_children(&mut cursor).filter(|a| !a.is_extra()) {
        match argument.kind() {
            "keyword_argument" => keyword = true,
            "dictionary_splat" => mapping_unpacked = true,
            "list_splat" if mapping_unpacked => {
                return Some(Finding::new(
                    argument.start_byte(),
                    "iterable argument unpacking follows keyword argument unpacking",
                ));
            }
            "list_splat" => {}
            _ if keyword || mapping_unpacked => {
                return Some(Finding::new(
                    argument.start_byte(),
                    "positional argument follows keyword argument",
                ));
            }
            _ => {}
        }
    }
    None
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

fn python_string_start(node: Node, text: &[u8]) -> Option<Finding> {
    let token = &text[node.byte_range()];
    let quote = token
        .iter()
        .position(|b| matches!(b, b'\'' | b'"' | b'`'))
        .unwrap_or(token.len());
    if token.get(quote) == Some(&b'`') {
        return Some(Finding::new(
            node.start_byte(),
            "Python 2 backticks; Python 3 needs `repr(…)`",
        ));
    }
    let prefix = String::from_utf8_lossy(&token[..quote]).to_ascii_lowercase();
    // `t` (template strings) is Python 3.14; accepting it keeps valid new code passing.
    if !matches!(
        prefix.as_str(),
        "" | "r" | "u" | "f" | "b" | "t" | "br" | "rb" | "fr" | "rf" | "tr" | "rt"
    ) {
        return Some(Finding::new(
            node.start_byte(),
            format!("string prefix `{prefix}` is not valid in Python 3"),
        ));
    }
    if prefix.contains('b') {
        let string = node.parent()?;
        let offset = text[string.byte_range()]
            .iter()
            .position(|b| !b.is_ascii())?;
        return Some(Finding::new(
            string.start_byte() + offset,
            "bytes literals can only contain ASCII characters",
        ));
    }
    None
}

// ----- JavaScript and TypeScript ---------------------------------------------------------------

/// Whether the text has what [`js_rejects`] looks for: a JSX closing tag, or a comma after `{`
/// or after another comma. Most files have neither and skip the walk over every node.
fn js_may_need_checks(text: &[u8]) -> bool {
    static SUSPECT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"</|[{,]\s*,").expect("the pattern is valid"));
    SUSPECT.is_match(text)
}

/// What tree-sitter-javascript and -typescript accept but JavaScript engines reject.
fn js_rejects(node: Node, text: &[u8]) -> Option<Finding> {
    match node.kind() {
        "jsx_element" => jsx_tag_mismatch(node, text),
        "object" | "object_pattern" => object_hole(node),
        _ => None,
    }
}

/// `{a: 1,, b: 2}`: the grammars allow holes in objects as in arrays; objects have none.
fn object_hole(node: Node) -> Option<Finding> {
    let mut cursor = node.walk();
    let mut previous = "";
    for child in node.children(&mut cursor) {
        if child.is_extra() {
            continue;
        }
        let kind = child.kind();
        if kind == "," && matches!(previous, "," | "{") {
            return Some(Finding::new(child.start_byte(), "unexpected `,`"));
        }
        previous = kind;
    }
    None
}

/// `<div>…</span>`: tree-sitter accepts it, every JSX compiler rejects it.
fn jsx_tag_mismatch(node: Node, text: &[u8]) -> Option<Finding> {
    let name = |field: &str| {
        let tag = node.child_by_field_name(field)?;
        tag.child_by_field_name("name")
            .map(|n| &text[n.byte_range()])
    };
    let (open, close) = (name("open_tag")?, name("close_tag")?);
    (open != close).then(|| {
        let close_tag = node.child_by_field_name("close_tag").unwrap_or(node);
        Finding::new(
            close_tag.start_byte(),
            format!(
                "closing tag `</{}>` does not match `<{}>`",
                String::from_utf8_lossy(close),
                String::from_utf8_lossy(open)
            ),
        )
    })
}

// ----- Bash -----------------------------------------------------------------------------------

/// The first `\r` before a line break outside quoted text and here-documents. tree-sitter-bash
/// takes it for blank space; bash takes it for part of the word before it, so `then\r` is no
/// keyword (`bash -n` fails) and `cd dir\r` names another folder.
fn bash_carriage_return(tree: &Tree, text: &[u8]) -> Option<Finding> {
    let quoted = |byte: usize| {
        let mut node = tree.root_node().descendant_for_byte_range(byte, byte + 1);
        while let Some(n) = node {
            if matches!(
                n.kind(),
                "string" | "raw_string" | "ansi_c_string" | "translated_string" | "heredoc_body"
            ) {
                return true;
            }
            node = n.parent();
        }
        false
    };
    text.windows(2)
        .enumerate()
        .filter(|(_, pair)| *pair == b"\r\n")
        .map(|(i, _)| i)
        .find(|&i| !quoted(i))
        .map(|i| {
            Finding::new(
                i,
                "the file has Windows line endings (CRLF); bash reads \\r as part of the word",
            )
        })
}

// ----- JSON -----------------------------------------------------------------------------------

/// tree-sitter-json's errors; when it accepts a file without comments, serde_json's verdict on
/// strict JSON as well (several top-level values, an empty file, control characters in strings).
fn json_findings(tree: &Tree, text: &[u8], tree_errors: Vec<Finding>) -> Vec<Finding> {
    if !tree_errors.is_empty() {
        return tree_errors;
    }
    if has_comment(tree, text) {
        return tree_errors;
    }
    let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(text) else {
        return tree_errors;
    };
    let message = error.to_string();
    // Limits of serde_json, not errors in the file: very deep nesting and numbers beyond f64.
    if message.starts_with("recursion limit exceeded") || message.starts_with("number out of range")
    {
        return tree_errors;
    }
    let message = match message.rsplit_once(" at line ") {
        Some((head, _)) => head.to_owned(),
        None => message,
    };
    let byte = if error.is_eof() {
        text.len()
    } else {
        // serde_json's column is 1-based and counts bytes; 0 means the line break before the line.
        (line_start(text, error.line()) + error.column().saturating_sub(1)).min(text.len())
    };
    vec![Finding::new(byte, message)]
}

/// tree-sitter-json has no `+` in exponents (`1e+5`, which Python's `json.dumps` writes). The
/// `+` becomes a `0` before parsing (`1e05`), which keeps every byte's offset and changes no
/// verdict: inside strings and comments the content does not matter.
fn json_exponent_signs(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let sign_at = |i: usize| {
        text[i] == b'+'
            && i >= 2
            && matches!(text[i - 1], b'e' | b'E')
            && text[i - 2].is_ascii_digit()
            && text.get(i + 1).is_some_and(u8::is_ascii_digit)
    };
    if !(0..text.len()).any(sign_at) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        (0..text.len())
            .map(|i| if sign_at(i) { b'0' } else { text[i] })
            .collect(),
    )
}

/// Whether the tree holds a comment; iterative, as deep JSON makes a deep tree.
fn has_comment(tree: &Tree, text: &[u8]) -> bool {
    if !text.contains(&b'/') {
        return false;
    }
    let mut cursor = tree.walk();
    loop {
        if cursor.node().kind() == "comment" {
            return true;
        }
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return false;
            }
        }
    }
}

// ----- YAML -----------------------------------------------------------------------------------

/// tree-sitter-yaml decides whether the file parses; yaml-rust2 places the error precisely and
/// finds duplicate keys. yaml-rust2 alone would be too strict: it rejects flow sequences whose
/// closing bracket sits at the parent's indentation, which GitHub workflows use.
fn yaml_findings(utf8: Option<&str>, tree_errors: Vec<Finding>) -> Vec<Finding> {
    let Some(text) = utf8 else {
        return tree_errors;
    };
    let scan = scan_yaml(text);
    let mut out = scan.duplicates;
    match scan.error {
        Some(error) if !tree_errors.is_empty() => out.push(error),
        // An alias to an anchor that does not exist is an error for every YAML parser.
        Some(error) if error.message.contains("unknown anchor") => out.push(error),
        _ => out.extend(tree_errors),
    }
    out
}

struct YamlScan {
    duplicates: Vec<Finding>,
    error: Option<Finding>,
}

/// A mapping being read: its keys so far, and whether the next node is a key.
struct YamlMapping {
    keys: HashMap<(bool, String), usize>,
    expecting_key: bool,
}

/// Runs yaml-rust2's event parser (never its loader: the loader expands aliases, which a
/// "billion laughs" file turns into exponential memory).
fn scan_yaml(text: &str) -> YamlScan {
    use yaml_rust2::Event;
    use yaml_rust2::scanner::TScalarStyle;

    let mut scan = YamlScan {
        duplicates: Vec::new(),
        error: None,
    };
    let mut parser = yaml_rust2::parser::Parser::new_from_str(text);
    // One entry per open collection; None for a sequence.
    let mut stack: Vec<Option<YamlMapping>> = Vec::new();
    loop {
        let (event, mark) = match parser.next_token() {
            Ok(next) => next,
            Err(error) => {
                let mark = error.marker();
                let byte = byte_at(text, mark.line(), mark.col());
                scan.error = Some(Finding::new(byte, error.info().to_owned()));
                return scan;
            }
        };
        let key = match &event {
            Event::Scalar(value, style, ..) => {
                Some(Some((*style == TScalarStyle::Plain, value.clone())))
            }
            Event::Alias(_) | Event::SequenceStart(..) | Event::MappingStart(..) => Some(None),
            _ => None,
        };
        if let Some(key) = key
            && let Some(Some(mapping)) = stack.last_mut()
        {
            if mapping.expecting_key
                && let Some(key) = key
                && key.1 != "<<"
            {
                let byte = byte_at(text, mark.line(), mark.col());
                if let Some(&first) = mapping.keys.get(&key) {
                    scan.duplicates.push(Finding::new(
                        byte,
                        format!(
                            "duplicate key `{}` (first on line {})",
                            key.1,
                            position(text.as_bytes(), first).0
                        ),
                    ));
                } else {
                    mapping.keys.insert(key, byte);
                }
            }
            mapping.expecting_key = !mapping.expecting_key;
        }
        match event {
            Event::StreamEnd => return scan,
            Event::DocumentStart => stack.clear(),
            Event::MappingStart(..) => stack.push(Some(YamlMapping {
                keys: HashMap::new(),
                expecting_key: true,
            })),
            Event::SequenceStart(..) => stack.push(None),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            _ => {}
        }
        if scan.duplicates.len() >= MAX_ERRORS {
            return scan;
        }
    }
}

// ----- TOML -----------------------------------------------------------------------------------

/// How a table came to exist; it decides what may define or extend it later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TableOrigin {
    /// Created as the parent of a header (`[a.b]` creates `a`): a header may still define it.
    Implicit,
    /// Defined by its own `[header]`.
    Header,
    /// Created by a dotted key (`a.b = 1` creates `a`).
    Dotted,
    /// One `[[element]]` of an array of tables.
    ArrayElement,
}

#[derive(Debug)]
enum TomlEntry {
    /// Any value, inline tables and arrays included: nothing may be added to it afterwards.
    Value,
    Table(TomlTable),
    ArrayOfTables(Vec<TomlTable>),
}

#[derive(Debug)]
struct TomlTable {
    origin: TableOrigin,
    /// Key → entry and the byte where it was first defined.
    entries: HashMap<String, (TomlEntry, usize)>,
}

impl TomlTable {
    fn new(origin: TableOrigin) -> Self {
        Self {
            origin,
            entries: HashMap::new(),
        }
    }
}

/// One key segment: its decoded text and where it is written.
struct KeyPart {
    name: String,
    byte: usize,
}

/// Two statements on one line (`a = 1 b = 2`, `x = { a = 1 } y = 2`, `[a] [b]`): TOML ends every
/// key/value pair and table header with a line break; tree-sitter-toml reads on, at most marking
/// a missing line ending. Returns the findings, and where each statement before one of them ends.
fn toml_statements_sharing_a_line(root: Node, text: &[u8]) -> (Vec<Finding>, Vec<usize>) {
    let end_of = |node: Node| (node.end_position().row, node.end_byte());
    let mut out = Vec::new();
    let mut ends = Vec::new();
    // Where the statement before ends: its last row and its end.
    let mut previous_end: Option<(usize, usize)> = None;
    let mut check = |start: Node, end: (usize, usize), out: &mut Vec<Finding>| {
        if let Some((row, byte)) = previous_end
            && row == start.start_position().row
            && out.len() < MAX_ERRORS
        {
            ends.push(byte);
            let shown = snippet(&text[start.byte_range()]).unwrap_or_default();
            out.push(Finding::new(
                start.start_byte(),
                format!(
                    "expected a line break before `{shown}`: TOML puts each key/value pair and table header on a line of its own"
                ),
            ));
        }
        previous_end = Some(end);
    };
    let mut cursor = root.walk();
    for node in root.named_children(&mut cursor) {
        match node.kind() {
            "pair" => check(node, end_of(node), &mut out),
            "table" | "table_array_element" => {
                let mut parts = node.walk();
                let header = node
                    .children(&mut parts)
                    .find(|c| matches!(c.kind(), "]" | "]]"))
                    .unwrap_or(node);
                check(node, end_of(header), &mut out);
                let mut pairs = node.walk();
                for pair in node
                    .named_children(&mut pairs)
                    .filter(|c| c.kind() == "pair")
                {
                    check(pair, end_of(pair), &mut out);
                }
            }
            _ => {}
        }
    }
    (out, ends)
}

/// Duplicate keys and tables defined twice: tree-sitter-toml parses each line on its own and
/// cannot see them, but the TOML specification makes them errors.
fn toml_duplicates(root: Node, text: &[u8]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut document = TomlTable::new(TableOrigin::Header);
    // The table that `key = value` lines go into, as a path from the root.
    let mut current: Vec<String> = Vec::new();
    let mut cursor = root.walk();
    for node in root.named_children(&mut cursor) {
        match node.kind() {
            "pair" => {
                if let Some(table) = resolve(&mut document, &current)
                    && let Some(value) = toml_pair(table, node, text, &mut out)
                {
                    toml_values(value, text, &mut out);
                }
            }
            "table" | "table_array_element" => {
                let Some(key) = node.named_child(0) else {
                    continue;
                };
                let parts = key_parts(key, text);
                let array = node.kind() == "table_array_element";
                match define_table(&mut document, &parts, array, text) {
                    Ok(()) => current = parts.into_iter().map(|p| p.name).collect(),
                    Err(finding) => {
                        out.push(finding);
                        // The section's pairs cannot be placed; skip them rather than guess.
                        current = vec!["\u{0}unplaceable".to_owned()];
                    }
                }
                let mut pairs = node.walk();
                for pair in node
                    .named_children(&mut pairs)
                    .filter(|c| c.kind() == "pair")
                {
                    if let Some(table) = resolve(&mut document, &current)
                        && let Some(value) = toml_pair(table, pair, text, &mut out)
                    {
                        toml_values(value, text, &mut out);
                    }
                }
            }
            _ => {}
        }
        if out.len() >= MAX_ERRORS {
            break;
        }
    }
    out
}

/// The table at `path`, through the last element of each array of tables.
fn resolve<'t>(table: &'t mut TomlTable, path: &[String]) -> Option<&'t mut TomlTable> {
    let mut table = table;
    for name in path {
        table = match &mut table.entries.get_mut(name)?.0 {
            TomlEntry::Table(next) => next,
            TomlEntry::ArrayOfTables(elements) => elements.last_mut()?,
            TomlEntry::Value => return None,
        };
    }
    Some(table)
}

fn dotted(parts: &[KeyPart]) -> String {
    parts
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(".")
}

fn first_on(text: &[u8], byte: usize) -> String {
    format!("first on line {}", position(text, byte).0)
}

/// `[a.b.c]` (or `[[a.b.c]]` when `array`).
fn define_table(
    document: &mut TomlTable,
    parts: &[KeyPart],
    array: bool,
    text: &[u8],
) -> Result<(), Finding> {
    let Some((last, parents)) = parts.split_last() else {
        return Ok(());
    };
    let header = if array {
        format!("[[{}]]", dotted(parts))
    } else {
        format!("[{}]", dotted(parts))
    };
    let mut table = document;
    for (i, part) in parents.iter().enumerate() {
        let (entry, first) = table.entries.entry(part.name.clone()).or_insert_with(|| {
            (
                TomlEntry::Table(TomlTable::new(TableOrigin::Implicit)),
                part.byte,
            )
        });
        table = match entry {
            TomlEntry::Table(next) => next,
            TomlEntry::ArrayOfTables(elements) => match elements.last_mut() {
                Some(element) => element,
                None => return Ok(()),
            },
            TomlEntry::Value => {
                return Err(Finding::new(
                    part.byte,
                    format!(
                        "`{}` is already a value ({}); `{header}` cannot make it a table",
                        dotted(&parts[..=i]),
                        first_on(text, *first)
                    ),
                ));
            }
        };
    }
    let origin = if array {
        TableOrigin::ArrayElement
    } else {
        TableOrigin::Header
    };
    match table.entries.get_mut(&last.name) {
        None => {
            let entry = if array {
                TomlEntry::ArrayOfTables(vec![TomlTable::new(origin)])
            } else {
                TomlEntry::Table(TomlTable::new(origin))
            };
            table.entries.insert(last.name.clone(), (entry, last.byte));
            Ok(())
        }
        Some((TomlEntry::ArrayOfTables(elements), _)) if array => {
            elements.push(TomlTable::new(origin));
            Ok(())
        }
        Some((TomlEntry::Table(existing), first))
            if !array && existing.origin == TableOrigin::Implicit =>
        {
            existing.origin = TableOrigin::Header;
            *first = last.byte;
            Ok(())
        }
        Some((entry, first)) => {
            let what = match entry {
                TomlEntry::Value => "a value",
                TomlEntry::ArrayOfTables(_) => "an array of tables",
                TomlEntry::Table(t) if t.origin == TableOrigin::Dotted => {
                    "a table (made by dotted keys)"
                }
                TomlEntry::Table(_) => "a table",
            };
            Err(Finding::new(
                last.byte,
                format!(
                    "`{header}` defines `{}` again: it is already {what} ({})",
                    dotted(parts),
                    first_on(text, *first)
                ),
            ))
        }
    }
}

/// `a.b.c = value` inside `table`; returns the value, whose own checks are the caller's.
fn toml_pair<'t>(
    table: &mut TomlTable,
    pair: Node<'t>,
    text: &[u8],
    out: &mut Vec<Finding>,
) -> Option<Node<'t>> {
    let key = pair.named_child(0)?;
    let parts = key_parts(key, text);
    let (last, parents) = parts.split_last()?;
    let mut table = table;
    for (i, part) in parents.iter().enumerate() {
        let (entry, first) = table.entries.entry(part.name.clone()).or_insert_with(|| {
            (
                TomlEntry::Table(TomlTable::new(TableOrigin::Dotted)),
                part.byte,
            )
        });
        let first = *first;
        let problem = match entry {
            TomlEntry::Table(next)
                if matches!(next.origin, TableOrigin::Dotted | TableOrigin::Implicit) =>
            {
                table = next;
                continue;
            }
            TomlEntry::Table(_) => "a table defined by a header",
            TomlEntry::ArrayOfTables(_) => "an array of tables",
            TomlEntry::Value => "a value",
        };
        out.push(Finding::new(
            part.byte,
            format!(
                "`{}` is already {problem} ({}); dotted keys cannot add `{}` to it",
                dotted(&parts[..=i]),
                first_on(text, first),
                dotted(&parts)
            ),
        ));
        return None;
    }
    if let Some((_, first)) = table.entries.get(&last.name) {
        out.push(Finding::new(
            last.byte,
            format!(
                "duplicate key `{}` ({})",
                dotted(&parts),
                first_on(text, *first)
            ),
        ));
        return None;
    }
    table
        .entries
        .insert(last.name.clone(), (TomlEntry::Value, last.byte));
    pair.named_child(1)
}

/// The checks inside a value: inline tables have their own keys, and may nest in arrays and in
/// each other; escapes must name Unicode scalar values; dates and times must exist. Iterative, as
/// arrays nest as deep as the file likes.
fn toml_values(value: Node, text: &[u8], out: &mut Vec<Finding>) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value.kind() {
            "inline_table" => {
                let mut table = TomlTable::new(TableOrigin::Header);
                let mut cursor = value.walk();
                for pair in value
                    .named_children(&mut cursor)
                    .filter(|c| c.kind() == "pair")
                {
                    pending.extend(toml_pair(&mut table, pair, text, out));
                }
            }
            "array" => {
                let mut cursor = value.walk();
                pending.extend(value.named_children(&mut cursor));
            }
            "string" => out.extend(toml_escape_problem(value, text)),
            "offset_date_time" | "local_date_time" | "local_date" | "local_time"
                if !toml_datetime_exists(&text[value.byte_range()]) =>
            {
                out.push(Finding::new(
                    value.start_byte(),
                    format!(
                        "`{}` is not a valid date or time",
                        String::from_utf8_lossy(&text[value.byte_range()])
                    ),
                ));
            }
            _ => {}
        }
    }
}

/// `"\uD800"`: the grammar accepts any hex digits, TOML only Unicode scalar values.
fn toml_escape_problem(string: Node, text: &[u8]) -> Option<Finding> {
    let mut cursor = string.walk();
    string
        .named_children(&mut cursor)
        .filter(|c| c.kind() == "escape_sequence")
        .find_map(|escape| {
            let written = String::from_utf8_lossy(&text[escape.byte_range()]);
            let hex = written
                .strip_prefix("\\u")
                .or_else(|| written.strip_prefix("\\U"))?;
            let valid = u32::from_str_radix(hex, 16)
                .ok()
                .and_then(char::from_u32)
                .is_some();
            (!valid).then(|| {
                Finding::new(
                    escape.start_byte(),
                    format!("escape `{written}` is not a Unicode scalar value"),
                )
            })
        })
}

/// Whether a date-time the grammar accepted names a real date and time: `1988-02-30` and `25:00`
/// have the right shape but do not exist. A leap second (`:60`) is accepted, as RFC 3339 does.
fn toml_datetime_exists(literal: &[u8]) -> bool {
    let text = String::from_utf8_lossy(literal);
    let number = |s: &str| s.parse::<u32>().ok();
    let (date, time) = if text.len() >= 10 && text.as_bytes().get(4) == Some(&b'-') {
        let (date, rest) = text.split_at(10);
        (Some(date), rest.get(1..).filter(|t| !t.is_empty()))
    } else {
        (None, Some(text.as_ref()))
    };
    if let Some(date) = date {
        let mut parts = date.split('-');
        let (Some(year), Some(month), Some(day)) = (
            parts.next().and_then(number),
            parts.next().and_then(number),
            parts.next().and_then(number),
        ) else {
            return false;
        };
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let days = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return false,
        };
        if day == 0 || day > days {
            return false;
        }
    }
    let Some(time) = time else {
        return true;
    };
    // HH:MM[:SS[.frac]] then an optional Z or ±HH:MM offset.
    let offset_at = time[1..]
        .find(['Z', 'z', '+', '-'])
        .map_or(time.len(), |i| i + 1);
    let (clock, offset) = time.split_at(offset_at);
    let mut fields = clock.split(':');
    let hour = fields.next().and_then(number);
    let minute = fields.next().and_then(number);
    let second = fields.next().map(|s| s.split('.').next().and_then(number));
    let clock_ok = matches!(hour, Some(h) if h <= 23)
        && matches!(minute, Some(m) if m <= 59)
        && second.is_none_or(|s| matches!(s, Some(s) if s <= 60));
    let offset_ok = match offset.get(1..) {
        None | Some("") => true,
        Some(hm) => {
            let mut parts = hm.split(':');
            matches!(parts.next().and_then(number), Some(h) if h <= 23)
                && matches!(parts.next().and_then(number), Some(m) if m <= 59)
        }
    };
    clock_ok && offset_ok
}

fn key_parts(key: Node, text: &[u8]) -> Vec<KeyPart> {
    match key.kind() {
        "dotted_key" => {
            let mut cursor = key.walk();
            key.named_children(&mut cursor)
                .flat_map(|part| key_parts(part, text))
                .collect()
        }
        "quoted_key" => vec![KeyPart {
            name: unquote_toml(&String::from_utf8_lossy(&text[key.byte_range()])),
            byte: key.start_byte(),
        }],
        _ => vec![KeyPart {
            name: String::from_utf8_lossy(&text[key.byte_range()]).into_owned(),
            byte: key.start_byte(),
        }],
    }
}

/// A quoted key's name: `'literal'` as written, `"basic"` with its escapes decoded, so that
/// `"a"`, `'a'` and `a` are the same key.
fn unquote_toml(quoted: &str) -> String {
    if let Some(literal) = quoted.strip_prefix('\'') {
        return literal.strip_suffix('\'').unwrap_or(literal).to_owned();
    }
    let inner = quoted.strip_prefix('"').unwrap_or(quoted);
    let inner = inner.strip_suffix('"').unwrap_or(inner);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('b') => out.push('\u{8}'),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('f') => out.push('\u{c}'),
            Some('r') => out.push('\r'),
            Some('e') => out.push('\u{1b}'),
            Some(u @ ('u' | 'U')) => {
                let digits: String = chars.by_ref().take(if u == 'u' { 4 } else { 8 }).collect();
                match u32::from_str_radix(&digits, 16)
                    .ok()
                    .and_then(char::from_u32)
                {
                    Some(decoded) => out.push(decoded),
                    None => {
                        out.push('\\');
                        out.push(u);
                        out.push_str(&digits);
                    }
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The first single-line string that is not closed on its line. tree-sitter-toml wraps the whole
/// line in an ERROR node; the opening quote is where to look. Comments and multi-line strings are
/// skipped as TOML reads them.
fn toml_unterminated_string(text: &[u8]) -> Option<Finding> {
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'#' => {
                i = text[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(text.len(), |n| i + n);
            }
            quote @ (b'"' | b'\'') => {
                let delimiter = [quote; 3];
                if text[i..].starts_with(&delimiter) {
                    let body = i + 3;
                    let mut j = body;
                    loop {
                        if j >= text.len() {
                            return Some(Finding::new(i, "unterminated multi-line string"));
                        }
                        if quote == b'"' && text[j] == b'\\' {
                            j += 2;
                        } else if text[j..].starts_with(&delimiter) {
                            // Up to two quotes may end the content right before the delimiter.
                            let mut end = j + 3;
                            while end < text.len() && end < j + 5 && text[end] == quote {
                                end += 1;
                            }
                            i = end;
                            break;
                        } else {
                            j += 1;
                        }
                    }
                    continue;
                }
                let mut j = i + 1;
                loop {
                    match text.get(j) {
                        None | Some(b'\n') => {
                            return Some(Finding::new(i, "unterminated string"));
                        }
                        Some(b'\\') if quote == b'"' => j += 2,
                        Some(&b) if b == quote => break,
                        Some(_) => j += 1,
                    }
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    None
}

// ----- KDL ------------------------------------------------------------------------------------

/// How deep the tree of a KDL file may be for helixflow's KDL v2 parser to see it. That parser
/// recurses once per nested block and overflows a thread's stack (aborting the process) beyond
/// about 60 levels in a debug build; pipelines nest a handful.
const KDL_MAX_TREE_DEPTH: u32 = 64;

/// helixflow's KDL v2 parser (its messages name the exact place); tree-sitter-kdl, which also
/// knows KDL v1, for files the v2 parser cannot judge (too large, too deep, too slow, not UTF-8)
/// and for KDL v1 files.
fn kdl_findings(utf8: Option<&str>, tree: &Tree, tree_errors: Vec<Finding>) -> Vec<Finding> {
    let Some(text) = utf8 else {
        return tree_errors;
    };
    if text.len() > kdl_parse::MAX_FILE_BYTES || tree_depth_exceeds(tree, KDL_MAX_TREE_DEPTH) {
        return tree_errors;
    }
    let diagnostics = match kdl_parse::parse(text, FileId(0), kdl_parse::PARSE_BUDGET) {
        Ok(_) => return Vec::new(),
        Err(diagnostics) => diagnostics,
    };
    if diagnostics
        .iter()
        .any(|d| d.rule.code == rules::PARSE_BUDGET.code)
    {
        return tree_errors;
    }
    match declared_kdl_version(text) {
        Some(1) => return tree_errors,
        Some(_) => {}
        // tree-sitter-kdl accepts much that neither version allows (`node .0`, `()node`, badly
        // indented multi-line strings), so only a file that looks like KDL v1 gets its verdict.
        None if looks_like_kdl_v1(text) => return tree_errors,
        None => {}
    }
    diagnostics
        .into_iter()
        .map(|d| {
            let offset = d.span.offset.min(text.len());
            let token = &text[offset..(offset + d.span.len).min(text.len())];
            let message = match token {
                "true" | "false" | "null" => {
                    format!("`{token}` is KDL v1; KDL v2 writes `#{token}`")
                }
                _ => d.message,
            };
            Finding::new(offset, message)
        })
        .collect()
}

/// Whether any node of the tree lies deeper than `limit` levels below the root.
fn tree_depth_exceeds(tree: &Tree, limit: u32) -> bool {
    let mut cursor = tree.walk();
    loop {
        if cursor.depth() > limit {
            return true;
        }
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return false;
            }
        }
    }
}

/// The version a `/- kdl-version N` line at the top of the document declares.
fn declared_kdl_version(text: &str) -> Option<u8> {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//"))?;
    let rest = first
        .strip_prefix("/-")?
        .trim_start()
        .strip_prefix("kdl-version")?;
    match rest.trim() {
        "1" => Some(1),
        "2" => Some(2),
        _ => None,
    }
}

/// Marks only KDL v1 has: bare `true`/`false`/`null` and `r"…"` raw strings.
fn looks_like_kdl_v1(text: &str) -> bool {
    static V1: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r#"(^|[\s=(])(true|false|null)([\s;})]|$)|(^|\s)r#*""#)
            .expect("the pattern is valid")
    });
    V1.is_match(text)
}

// ----- Positions ------------------------------------------------------------------------------

/// The byte where 1-based `line` starts (the end of the text past the last line).
fn line_start(text: &[u8], line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    text.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(line - 2)
        .map_or(text.len(), |(i, _)| i + 1)
}

/// The byte of 1-based `line` and 0-based character `column` (yaml-rust2's markers).
fn byte_at(text: &str, line: usize, column: usize) -> usize {
    let start = line_start(text.as_bytes(), line);
    text[start..]
        .char_indices()
        .take_while(|(_, c)| *c != '\n')
        .nth(column)
        .map_or_else(
            || {
                let rest = &text[start..];
                start + rest.find('\n').unwrap_or(rest.len())
            },
            |(i, _)| start + i,
        )
}

/// 1-based line and column (in characters; in bytes on a line that is not UTF-8) of `byte`.
fn position(text: &[u8], byte: usize) -> (usize, usize) {
    let byte = byte.min(text.len());
    let before = &text[..byte];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let prefix = &text[start..byte];
    let column = match std::str::from_utf8(prefix) {
        Ok(s) => s.chars().count(),
        Err(_) => prefix.len(),
    };
    (line, column + 1)
}

fn syntax_error_at(text: &[u8], byte: usize, message: String) -> SyntaxError {
    let byte = byte.min(text.len());
    let (line, column) = position(text, byte);
    let start = text[..byte]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let end = text[byte..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(text.len(), |i| byte + i);
    let before = String::from_utf8_lossy(&text[start..byte]);
    let after = String::from_utf8_lossy(&text[byte..end]);
    let after = after.strip_suffix('\r').unwrap_or(&after);
    let (source_line, caret) = excerpt(&before, after);
    SyntaxError {
        line,
        column,
        message,
        source_line,
        caret,
    }
}

/// The line around the error (a window when it is long) and the caret under the error. The caret
/// copies the line's tabs so it lines up however wide the terminal draws a tab.
fn excerpt(before: &str, after: &str) -> (String, String) {
    let before: Vec<char> = before.chars().collect();
    let after: Vec<char> = after.chars().collect();
    let at = before.len();
    let total = at + after.len();
    let (from, to) = if total <= LINE_WINDOW_CHARS {
        (0, total)
    } else {
        let from = at
            .saturating_sub(LINE_WINDOW_CHARS / 2)
            .min(total - LINE_WINDOW_CHARS);
        (from, from + LINE_WINDOW_CHARS)
    };
    let char_at = |i: usize| if i < at { before[i] } else { after[i - at] };
    let mut line = String::new();
    let mut caret = String::new();
    if from > 0 {
        line.push('…');
        caret.push(' ');
    }
    for i in from..to {
        line.push(char_at(i));
    }
    if to < total {
        line.push('…');
    }
    for &c in &before[from..] {
        caret.push(if c == '\t' { '\t' } else { ' ' });
    }
    caret.push('^');
    (line, caret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(language: Language, text: &str) -> Vec<(usize, usize, String)> {
        check(language, text.as_bytes())
            .into_iter()
            .map(|e| (e.line, e.column, e.message))
            .collect()
    }

    #[test]
    fn caret_copies_tabs_and_counts_characters() {
        let errors = check(Language::Python, "if x:\n\tprint(\"é\" +)\n".as_bytes());
        let error = &errors[0];
        assert_eq!((error.line, error.column), (2, 12));
        assert_eq!(error.source_line, "\tprint(\"é\" +)");
        assert_eq!(error.caret, "\t          ^");
    }

    #[test]
    fn excerpt_windows_long_lines_around_the_column() {
        let before = "a".repeat(1000);
        let after = format!("!{}", "b".repeat(1000));
        let (line, caret) = excerpt(&before, &after);
        assert_eq!(line.chars().count(), LINE_WINDOW_CHARS + 2);
        assert!(line.starts_with('…') && line.ends_with('…'));
        let caret_at = caret.chars().count() - 1;
        assert_eq!(line.chars().nth(caret_at), Some('!'));
    }

    #[test]
    fn excerpt_of_a_short_line_is_the_line() {
        assert_eq!(excerpt("ab", "c"), ("abc".to_owned(), "  ^".to_owned()));
        assert_eq!(excerpt("", ""), (String::new(), "^".to_owned()));
    }

    #[test]
    fn position_counts_characters_not_bytes() {
        let text = "é\nüü x".as_bytes();
        assert_eq!(position(text, 0), (1, 1));
        assert_eq!(position(text, 3), (2, 1));
        assert_eq!(position(text, 8), (2, 4));
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
                      y = rb'a' + Rb\"b\" + f'{x}' + u'c' + t'd'\nexec(code)\nx = a != b\ntry: pass\nexcept (A, B) as e: pass\nexcept* C: pass\n\
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
    fn python_continuation_lines_inside_brackets_may_dedent() {
        let source = "def f():\n    (bar.\nbaz)\n    x = [1,  # one\n2]\n";
        assert_eq!(
            messages(Language::Python, "def f():\n    (bar.\nbaz)\n    (\n"),
            vec![(4, 5, "`(` is never closed".to_owned())]
        );
        let joined = python_join_bracketed_lines(source.as_bytes()).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&joined),
            "def f():\n    (bar. baz)\n    x = [1,        2]\n"
        );
        let strings = "x = ('a)', \"\"\"(\n\"\"\", '''\n)''')\ny = (\n";
        let joined = python_join_bracketed_lines(strings.as_bytes()).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&joined),
            "x = ('a)', \"\"\"(\n\"\"\", '''\n)''')\ny = ( "
        );
    }

    #[test]
    fn python_indentation_errors_are_found() {
        let tab_error = "inconsistent use of tabs and spaces in indentation: this line's level depends on the tab size";
        let cases = [
            (
                "def f():\n",
                (1, 9),
                "expected an indented block after the function definition on line 1",
            ),
            (
                "class A:\n    def m(self):\n",
                (2, 17),
                "expected an indented block after the function definition on line 2",
            ),
            (
                "if x:\n\ny = 2",
                (3, 1),
                "expected an indented block after the `if` statement on line 1",
            ),
            (
                "for i in x:\npass",
                (2, 1),
                "expected an indented block after the `for` statement on line 1",
            ),
            (
                "async def f(\n    a,\n):  # comment\n\nx = 1\n",
                (5, 1),
                "expected an indented block after the function definition on line 1",
            ),
            (
                "x = 1\n    y = 2\n",
                (2, 5),
                "unexpected indent: the line before does not open a block",
            ),
            (
                "if x:\n        a = 1\n    b = 2\n",
                (3, 5),
                "unindent does not match any outer indentation level",
            ),
            ("if x:\n\ta = 1\n        b = 2\n", (3, 9), tab_error),
            ("if x:\n        a = 1\n\tb = 2\n", (3, 2), tab_error),
            ("if x:\n    a = 1\n\tb = 2\n", (3, 2), tab_error),
        ];
        for (source, (line, column), message) in cases {
            assert_eq!(
                messages(Language::Python, source),
                vec![(line, column, message.to_owned())],
                "{source:?}"
            );
        }
    }

    #[test]
    fn python_indentation_error_hides_the_error_nodes_it_causes() {
        // tree-sitter reads the stray unindent as the end of the class and wraps what follows in
        // ERROR nodes; only the unindent is the author's mistake.
        let source = "def f():\n    return 1\n\nclass A:\n    x = 1\n  y = 2\n    z = 3\n";
        assert_eq!(
            messages(Language::Python, source),
            vec![(
                6,
                3,
                "unindent does not match any outer indentation level".to_owned()
            )]
        );
        // A line that lost its indentation after a block opener is one mistake, not two.
        let source = "if a:\n    pass\nelif b:\nx = 1\n    y = 2\n";
        assert_eq!(
            messages(Language::Python, source),
            vec![(
                4,
                1,
                "expected an indented block after the `elif` statement on line 3".to_owned()
            )]
        );
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
    fn python_valid_indentation_passes() {
        let source = "# comment\n\nclass A:  # a class\n    x = {\n  'a': 1,\n}\n      # odd comment\n\n\
                      \x20   def f(self):\n        return \\\n  2\n\n    s = '''\nno indent\n:'''\n\
                      \x0cdef g(): return [\n1]\ndef t():\n\tif t:\n\t\treturn 1\n  # comments may sit anywhere\n\
                      \treturn 2\nif x: pass\nelse: y = 1\nwith a as b:\r\n    pass\r\n@dec\nasync def h():\n\
                      \x20   async with a:\n        pass\nmatch p:\n    case 1:\n        pass\n";
        assert_eq!(messages(Language::Python, source), vec![]);
    }

    #[test]
    fn python_valid_file_with_a_dedented_continuation_passes() {
        let source = "class A:\n    def f(self):\n        (bar.\n    baz)\n        return 1\n";
        assert_eq!(messages(Language::Python, source), vec![]);
    }

    #[test]
    fn object_holes_are_errors() {
        assert_eq!(
            messages(Language::JavaScript, "const o = {a: 1,, b: 2};\n"),
            vec![(1, 17, "unexpected `,`".to_owned())]
        );
        assert_eq!(
            messages(Language::TypeScript, "const {, a} = o;\n"),
            vec![(1, 8, "unexpected `,`".to_owned())]
        );
        assert_eq!(
            messages(Language::JavaScript, "const a = [1,, 2]; f(a, b);\n"),
            vec![]
        );
    }

    #[test]
    fn toml_unterminated_string_is_placed_at_its_quote() {
        assert_eq!(
            messages(
                Language::Toml,
                "# \"quoted\" comment\na = \"\"\"x\n\"y\"\"\"\"\nb = 'it\nc = 1\n"
            ),
            vec![(4, 5, "unterminated string".to_owned())]
        );
        assert_eq!(
            toml_unterminated_string(b"a = '''\nno end"),
            Some(Finding::new(4, "unterminated multi-line string"))
        );
        assert_eq!(toml_unterminated_string(b"a = \"q\\\"\"\nb = ''\n"), None);
    }

    #[test]
    fn toml_values_must_exist() {
        assert_eq!(
            messages(
                Language::Toml,
                "a = \"\\uD800\"\nb = [1988-02-30]\nc = {d = 1979-04-31}\ne = 2024-02-29T23:59:60Z\n"
            ),
            vec![
                (
                    1,
                    6,
                    "escape `\\uD800` is not a Unicode scalar value".to_owned()
                ),
                (2, 6, "`1988-02-30` is not a valid date or time".to_owned()),
                (3, 10, "`1979-04-31` is not a valid date or time".to_owned()),
            ]
        );
        assert!(toml_datetime_exists(b"1979-05-27T07:32:00.999-07:00"));
        assert!(toml_datetime_exists(b"1979-05-27 07:32:00"));
        assert!(!toml_datetime_exists(b"1979-05-27T07:32:00+24:00"));
        assert!(!toml_datetime_exists(b"1900-02-29"));
        assert!(toml_datetime_exists(b"2000-02-29"));
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

    #[test]
    fn bash_windows_line_endings_are_errors() {
        let message =
            "the file has Windows line endings (CRLF); bash reads \\r as part of the word";
        assert_eq!(
            messages(Language::Bash, "if true; then\r\n  echo hi\r\nfi\r\n"),
            vec![(1, 14, message.to_owned())]
        );
        assert_eq!(
            messages(
                Language::Bash,
                "echo \"a\r\nb\"\ncat <<EOF\nx\r\nEOF\ncd dir\r\n"
            ),
            vec![(6, 7, message.to_owned())]
        );
        assert_eq!(
            messages(Language::Bash, "printf 'a\r\n'\necho \"\r\"\n"),
            vec![]
        );
    }

    #[test]
    fn bash_may_hold_any_bytes() {
        assert!(check(Language::Bash, b"echo '\xff'\n").is_empty());
    }

    #[test]
    fn byte_order_mark_is_ignored() {
        assert!(check(Language::Json, b"\xEF\xBB\xBF{\"a\": 1}").is_empty());
    }

    #[test]
    fn jsx_closing_tag_must_match() {
        assert_eq!(
            messages(Language::Tsx, "const a = <div>hi</span>;\n"),
            vec![(
                1,
                18,
                "closing tag `</span>` does not match `<div>`".to_owned()
            )]
        );
        assert_eq!(
            messages(Language::JavaScript, "const a = <a.b>hi</a.b>;\n"),
            vec![]
        );
    }

    #[test]
    fn json_must_hold_one_value_unless_it_has_comments() {
        assert_eq!(
            messages(Language::Json, "{\"a\": 1}\n{\"b\": 2}\n"),
            vec![(2, 1, "trailing characters".to_owned())]
        );
        assert_eq!(
            messages(Language::Json, ""),
            vec![(1, 1, "EOF while parsing a value".to_owned())]
        );
        assert_eq!(
            messages(Language::Json, "// editor settings\n{\"a\": 1}\n"),
            vec![]
        );
        assert_eq!(
            messages(Language::Json, "[1e+5, 2E+10, 0.5e-3, \"e+1\"] // 3e+4\n"),
            vec![]
        );
        assert_eq!(
            messages(Language::Json, "[1e+]"),
            vec![(1, 3, "unexpected `e+`".to_owned())]
        );
        assert_eq!(messages(Language::Json, "[1e999]"), vec![]);
    }

    #[test]
    fn yaml_duplicate_keys_are_errors() {
        assert_eq!(
            messages(Language::Yaml, "a: 1\nb:\n  c: 1\n  c: 2\na: 3\n"),
            vec![
                (4, 3, "duplicate key `c` (first on line 3)".to_owned()),
                (5, 1, "duplicate key `a` (first on line 1)".to_owned()),
            ]
        );
        assert_eq!(
            messages(Language::Yaml, "- a: 1\n- a: 2\nx: &x {k: 1}\n"),
            vec![(
                3,
                1,
                "while parsing a block collection, did not find expected '-' indicator".to_owned()
            )]
        );
    }

    #[test]
    fn yaml_error_is_placed_by_yaml_rust2() {
        assert_eq!(
            messages(Language::Yaml, "a: 1\n b: 2\n"),
            vec![(
                2,
                3,
                "mapping values are not allowed in this context".to_owned()
            )]
        );
    }

    #[test]
    fn toml_duplicates_follow_the_specification() {
        let invalid = [
            (
                "a = 1\na = 2\n",
                (2, 1),
                "duplicate key `a` (first on line 1)",
            ),
            (
                "\"a\" = 1\n'a' = 2\n",
                (2, 1),
                "duplicate key `a` (first on line 1)",
            ),
            (
                "[x]\n[x]\n",
                (2, 2),
                "`[x]` defines `x` again: it is already a table (first on line 1)",
            ),
            (
                "a.b = 1\n[a]\n",
                (2, 2),
                "`[a]` defines `a` again: it is already a table (made by dotted keys) (first on line 1)",
            ),
            (
                "[a.b]\nc = 1\n[a]\nb.d = 2\n",
                (4, 1),
                "`b` is already a table defined by a header (first on line 1); dotted keys cannot add `b.d` to it",
            ),
            (
                "a = {x = 1}\na.y = 2\n",
                (2, 1),
                "`a` is already a value (first on line 1); dotted keys cannot add `a.y` to it",
            ),
            (
                "t = {a = 1, a = 2}\n",
                (1, 13),
                "duplicate key `a` (first on line 1)",
            ),
            (
                "a = []\n[[a]]\n",
                (2, 3),
                "`[[a]]` defines `a` again: it is already a value (first on line 1)",
            ),
            (
                "[[a]]\n[a]\n",
                (2, 2),
                "`[a]` defines `a` again: it is already an array of tables (first on line 1)",
            ),
        ];
        for (source, (line, column), message) in invalid {
            assert_eq!(
                messages(Language::Toml, source),
                vec![(line, column, message.to_owned())],
                "{source:?}"
            );
        }
        let valid = "a.b = 1\na.c = 2\n[x.y.z]\n[x]\n[fruit]\napple.color = 'red'\n\
                     [fruit.apple.texture]\nsmooth = true\n[[p]]\nn = 1\n[p.q]\nm = 1\n[[p]]\nn = 2\n\
                     [p.q]\nm = 2\n";
        assert_eq!(messages(Language::Toml, valid), vec![]);
    }

    #[test]
    fn toml_statements_need_a_line_each() {
        let message = |s: &str| {
            format!(
                "expected a line break before `{s}`: TOML puts each key/value pair and table header on a line of its own"
            )
        };
        let cases = [
            ("a = 1 b = 2\n", (1, 7), "b = 2"),
            ("x = { a = 1 } y = 2\n", (1, 15), "y = 2"),
            ("[a] [b]\n", (1, 5), "[b]"),
            ("a = 1 [b]\n", (1, 7), "[b]"),
            ("[c]\nd = 1 e = 2\n", (2, 7), "e = 2"),
            ("a = \"\"\"\nx\"\"\" b = 1\n", (2, 6), "b = 1"),
        ];
        for (source, (line, column), shown) in cases {
            assert_eq!(
                messages(Language::Toml, source),
                vec![(line, column, message(shown))],
                "{source:?}"
            );
        }
        let valid = "a = 1 # one\nb = [\n  1,\n] # two\n[t] # table\nc = { d = 1 }\n\n[[u]]\ne = 2";
        assert_eq!(messages(Language::Toml, valid), vec![]);
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
    fn toml_basic_keys_are_decoded() {
        assert_eq!(unquote_toml(r#""a\u0062\tc""#), "ab\tc");
        assert_eq!(unquote_toml(r"'a\b'"), r"a\b");
    }

    #[test]
    fn kdl_v1_passes_and_v2_errors_use_the_v2_parser() {
        assert_eq!(messages(Language::Kdl, "node true null r\"raw\"\n"), vec![]);
        assert_eq!(
            messages(Language::Kdl, "node #true {\n  child\n}\n"),
            vec![]
        );
        assert_eq!(
            messages(Language::Kdl, "/- kdl-version 2\nnode true\n"),
            vec![(2, 6, "`true` is KDL v1; KDL v2 writes `#true`".to_owned())]
        );
        // tree-sitter-kdl accepts this; neither KDL version does.
        assert_eq!(
            messages(Language::Kdl, "node .0\n"),
            vec![
                (1, 6, "Expected end of document".to_owned()),
                (1, 7, "Found invalid node name".to_owned()),
            ]
        );
        assert_eq!(
            messages(Language::Kdl, "node a=1 {\n"),
            vec![(1, 10, "this `{` is never closed".to_owned())]
        );
    }

    #[test]
    fn kdl_version_declaration_is_read_from_the_first_node() {
        assert_eq!(declared_kdl_version("// c\n/- kdl-version 1\nn\n"), Some(1));
        assert_eq!(declared_kdl_version("n\n/- kdl-version 2\n"), None);
        assert!(looks_like_kdl_v1("node key=true\n"));
        assert!(!looks_like_kdl_v1("node key=#true \"true\"\n"));
    }

    #[test]
    fn byte_at_converts_yaml_markers() {
        assert_eq!(byte_at("ab\né x", 2, 2), 6);
        assert_eq!(byte_at("ab\n", 1, 9), 2);
        assert_eq!(byte_at("ab", 5, 0), 2);
    }

    #[test]
    fn errors_are_capped() {
        let source = "fn f() { let = ; }\n".repeat(50);
        assert_eq!(check(Language::Rust, source.as_bytes()).len(), MAX_ERRORS);
    }
}
