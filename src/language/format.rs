//! Canonical formatting of pipeline files (`helixflow fmt`).
//!
//! The formatter works on the lexer's tokens, not on a parsed tree, so that every comment survives
//! exactly where it was written. It copies every token's text verbatim (strings are never
//! re-quoted, numbers never rewritten) and decides only the space between tokens:
//!
//! - One node per line. Nodes separated by `;` go on separate lines, and the `;` is dropped.
//! - Four spaces of indentation per block depth. A block written on one line, `{ a; b }`, is
//!   expanded to one child per line with the `}` on its own line. A block with nothing in it, not
//!   even a comment, is written `{}`.
//! - Within a node: one space between the name and each entry, one space before `{`, and no space
//!   around `=`, inside a type annotation's parentheses, or after it: `(u8)port=8080`.
//! - A slashdash attaches to what it comments out, whether a node, an entry or a block: `/-node`,
//!   `/-"arg"`, `/-key=1`, `/-{`. Only a comment between the two keeps them apart.
//! - A `\` line continuation is kept; the continued line is indented one level deeper than the node.
//!   A continuation consumes one line break only, so when the line after it ends the node (it is
//!   blank, or holds only `;`), a blank line follows the `\`: `a \`, blank line, `b` is two nodes.
//! - Strings, raw strings and multi-line strings are copied byte for byte, line breaks included
//!   (a multi-line string's value depends only on its own lines, so re-indenting its node keeps it);
//!   only CRLF becomes LF, see below.
//! - Comments: a `//` comment on its own line is re-indented to the depth of the nodes around it; a
//!   `//` comment at the end of a line (after a node, a `{` or a `}`) stays there, one space after
//!   the text; trailing whitespace inside it is dropped. A block comment is copied verbatim: when
//!   it begins a line (alone, or before a node) it is re-indented, its inner lines are not; inside
//!   a node or at the end of a line it stays where it is, one space from its neighbours.
//! - Blank lines: a run of blank lines between nodes or comments becomes one; blank lines at the
//!   start of the file, right after `{` and right before `}` are dropped.
//! - No trailing whitespace outside strings and block comments; lines end with `\n` (CRLF becomes
//!   LF, inside multi-line strings and comments too, which does not change their value); the file
//!   ends with one newline. A file with no tokens but whitespace becomes empty.
//!
//! The input is expected to be valid KDL v2 (the caller parsed it). On other input the formatter
//! still returns some text and never panics, but makes no promise about it.

use std::borrow::Cow;

use super::kdl::lexer::{Token, TokenKind, tokenize};

const INDENT: &str = "    ";

/// Formats a KDL v2 document canonically, keeping every comment; formatting twice changes nothing.
#[must_use]
pub fn format_source(src: &str) -> String {
    let tokens = tokenize(src);
    let mut formatter = Formatter::new(src, &tokens);
    for index in 0..tokens.len() {
        formatter.token(index);
    }
    formatter.finish()
}

/// The formatter's state while it walks the tokens once, front to back.
struct Formatter<'a> {
    src: &'a str,
    tokens: &'a [Token],
    /// For each token, the index of the next token that is neither whitespace nor a block comment.
    next_solid: Vec<usize>,
    out: String,
    /// For each open block, the output length right after its `{`, to spot blocks left empty.
    blocks: Vec<usize>,
    /// The node being written, if one has started and not yet ended.
    node: Option<Node>,
    line: Line,
    /// Source newlines since the last written token; two or more mean a blank line.
    newlines: usize,
    /// The current block already has a line, so a blank line before the next one is kept.
    block_has_lines: bool,
    /// A node ended on the line after its `\` continuation, so the next line must follow a blank
    /// line: right after the continuation's line break, it would continue that node.
    blank_due: bool,
}

/// How the next token of the node being written attaches.
#[derive(Debug, Clone, Copy, Default)]
struct Node {
    /// The next token attaches without a space (after `(`, `)`, `=` and `/-`).
    glue: bool,
    /// After a `\`, or a `//` comment inside the node: the next newline continues the node.
    newline_continues: bool,
    /// A `/-` is still waiting for what it comments out; newlines until then are dropped.
    slashdash_open: bool,
}

/// Where the output stands on its last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// The source has moved on to a new line; the next node or comment starts a new one.
    Closed,
    /// A node goes on after a line break. The break waits for the node's next token, so that
    /// nothing is left dangling when the node ends instead.
    BreakDue,
    /// Only indentation is written so far.
    Fresh,
    /// Text is written and the source is still on its line, so a trailing comment joins it.
    Open {
        /// The line holds only block comments, so the next node may continue it.
        only_comments: bool,
    },
}

impl<'a> Formatter<'a> {
    fn new(src: &'a str, tokens: &'a [Token]) -> Self {
        Self {
            src,
            tokens,
            next_solid: next_solid(tokens),
            out: String::with_capacity(src.len() + src.len() / 8),
            blocks: Vec::new(),
            node: None,
            line: Line::Closed,
            newlines: 0,
            block_has_lines: false,
            blank_due: false,
        }
    }

    fn token(&mut self, index: usize) {
        if self.node.is_some() {
            self.node_token(index);
        } else {
            self.between_nodes(index);
        }
    }

    fn finish(mut self) -> String {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.out
    }

    /// A token where a node may start: comments, blank lines, `}` and the next node's first token.
    fn between_nodes(&mut self, index: usize) {
        let token = self.tokens[index];
        match token.kind {
            TokenKind::Whitespace | TokenKind::Semicolon => {}
            TokenKind::Newline => {
                self.newlines += 1;
                self.line = Line::Closed;
            }
            TokenKind::LineComment => {
                if !matches!(self.line, Line::Open { .. }) {
                    self.start_line();
                }
                self.push_spaced(token);
            }
            TokenKind::BlockComment { .. } => self.block_comment_between_nodes(index),
            TokenKind::CloseBrace => self.close_block(),
            _ => {
                let joins_comments = self.line
                    == Line::Open {
                        only_comments: true,
                    };
                if !joins_comments {
                    self.start_line();
                }
                self.node = Some(Node {
                    glue: !joins_comments,
                    ..Node::default()
                });
                self.node_token(index);
            }
        }
    }

    /// A block comment outside a node trails the previous line when nothing else follows it on
    /// its line; otherwise it begins a line, which the next node may continue.
    fn block_comment_between_nodes(&mut self, index: usize) {
        let token = self.tokens[index];
        let only_comments = match self.line {
            Line::Open {
                only_comments: true,
            } => true,
            Line::Open { .. } if self.rest_of_line_is_empty(index) => false,
            _ => {
                self.start_line();
                true
            }
        };
        self.push_spaced(token);
        self.line = Line::Open { only_comments };
    }

    fn rest_of_line_is_empty(&self, index: usize) -> bool {
        self.next_solid
            .get(index)
            .and_then(|&next| self.tokens.get(next))
            .is_none_or(|next| {
                matches!(
                    next.kind,
                    TokenKind::Newline | TokenKind::LineComment | TokenKind::CloseBrace
                )
            })
    }

    /// A token inside a node: its name, type annotation, entries, children, and the terminator.
    fn node_token(&mut self, index: usize) {
        let token = self.tokens[index];
        let node = self.node.unwrap_or_default();
        match token.kind {
            TokenKind::Whitespace => {}
            TokenKind::Newline => self.newline_in_node(node),
            TokenKind::Semicolon => self.end_node(),
            TokenKind::LineComment => {
                self.push_spaced(token);
                if node.newline_continues || node.slashdash_open {
                    self.update_node(|node| node.newline_continues = true);
                } else {
                    self.end_node();
                }
            }
            TokenKind::BlockComment { .. } => {
                self.push_spaced(token);
                self.update_node(|node| node.glue = false);
            }
            TokenKind::Continuation => {
                self.push_spaced(token);
                self.update_node(|node| node.newline_continues = true);
            }
            TokenKind::Slashdash => {
                self.push_inline(token, !node.glue);
                self.update_node(|node| {
                    node.glue = true;
                    node.slashdash_open = true;
                });
            }
            TokenKind::Equals | TokenKind::CloseParen => {
                self.push_inline(token, false);
                self.update_node(|node| node.glue = true);
            }
            TokenKind::OpenParen => {
                self.push_inline(token, !node.glue);
                self.update_node(|node| {
                    node.glue = true;
                    node.slashdash_open = false;
                });
            }
            TokenKind::OpenBrace => self.open_block(token, node),
            TokenKind::CloseBrace => {
                self.end_node();
                self.close_block();
            }
            _ => {
                self.push_inline(token, !node.glue);
                self.update_node(|node| {
                    node.glue = false;
                    node.slashdash_open = false;
                });
            }
        }
    }

    fn update_node(&mut self, change: impl FnOnce(&mut Node)) {
        if let Some(node) = &mut self.node {
            change(node);
        }
    }

    fn newline_in_node(&mut self, node: Node) {
        if node.newline_continues {
            self.update_node(|node| node.newline_continues = false);
            self.line = Line::BreakDue;
        } else if !node.slashdash_open {
            self.end_node();
            self.newlines = 1;
            self.line = Line::Closed;
        }
    }

    fn end_node(&mut self) {
        self.node = None;
        if self.line == Line::BreakDue {
            self.blank_due = true;
            self.line = Line::Closed;
        }
    }

    fn open_block(&mut self, token: Token, node: Node) {
        self.push_inline(token, !node.glue);
        self.blocks.push(self.out.len());
        self.end_node();
        self.block_has_lines = false;
    }

    /// Writes a `}`: right after its `{` when the block stayed empty, else on a line of its own.
    /// The node that owns the block goes on, since a slashdashed block or a comment may follow.
    fn close_block(&mut self) {
        let empty = self.blocks.pop() == Some(self.out.len());
        if !empty {
            self.new_line(false);
        }
        self.push_text("}");
        self.node = Some(Node::default());
        self.block_has_lines = true;
    }

    /// Starts a line at the current depth, after one blank line if the source had any here.
    fn start_line(&mut self) {
        self.new_line(true);
    }

    /// Starts a line; `keep_blank` before a node or comment, not before a `}` (which a
    /// continuation may precede directly).
    fn new_line(&mut self, keep_blank: bool) {
        if !self.out.is_empty() {
            self.out.push('\n');
            let blank = self.blank_due || self.newlines >= 2 && self.block_has_lines;
            if keep_blank && blank {
                self.out.push('\n');
            }
        }
        self.blank_due = false;
        self.indent(self.blocks.len());
        self.block_has_lines = true;
    }

    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str(INDENT);
        }
        self.line = Line::Fresh;
    }

    /// Writes a token of the current line, one space after what is already on it.
    fn push_spaced(&mut self, token: Token) {
        self.push_inline(token, true);
    }

    /// Writes a token of the current line, after the continuation line break if one is due.
    fn push_inline(&mut self, token: Token, spaced: bool) {
        if self.line == Line::BreakDue {
            self.out.push('\n');
            self.indent(self.blocks.len() + 1);
        }
        if spaced && self.line != Line::Fresh {
            self.out.push(' ');
        }
        let text = token.text(self.src);
        let text = if token.kind == TokenKind::LineComment {
            text.trim_end()
        } else {
            text
        };
        self.push_text(&lf_only(text));
    }

    fn push_text(&mut self, text: &str) {
        self.out.push_str(text);
        self.line = Line::Open {
            only_comments: false,
        };
        self.newlines = 0;
    }
}

/// For each token, the index of the next one that is neither whitespace nor a block comment
/// (`tokens.len()` when there is none), computed in one backward pass to keep formatting linear.
fn next_solid(tokens: &[Token]) -> Vec<usize> {
    let mut next = vec![tokens.len(); tokens.len()];
    let mut upcoming = tokens.len();
    for (index, token) in tokens.iter().enumerate().rev() {
        next[index] = upcoming;
        if !matches!(
            token.kind,
            TokenKind::Whitespace | TokenKind::BlockComment { .. }
        ) {
            upcoming = index;
        }
    }
    next
}

fn lf_only(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::format_source;
    use kdl::KdlDocument;

    /// The big example from the language reference, with its comments.
    const REFERENCE_EXAMPLE: &str = r##"pipeline "adr-042-payments" {
    description "Implement the payment module described in ADR-042"
    max-parallel 2
    retry-budget 6
}

import "templates/python.kdl"          // agents and templates shared across repos

agent "claude" {
    command "claude" "-p" "{{ prompt }}" "--output-format" "stream-json" "--verbose"
    resume "claude" "-p" "{{ feedback }}" "--continue"
    response "claude-stream-json"
    timeout "20m"
    idle-timeout "5m"
}

agent "reviewer" {
    command "claude" "-p" "{{ prompt }}" "--model" "haiku" "--permission-mode" "plan" "--output-format" "stream-json" "--verbose"
    response "claude-stream-json"
    evidence #""type":"tool_use""#
    timeout "3m"
}

defaults {
    agent "claude"
    retries 2
    verify "external"
}

phase "parser" {
    description "Write the ADR parser"
    prompt file="prompts/parser.md"
    outputs {
        file "src/helix/adr/parser.py"
        file "tests/adr/test_parser.py"
        glob "docs/adr/*.md" min=1
        from "adr/ADR-042.md" key="files.create"
    }
    scope "src/helix/adr/**" "tests/adr/**" "docs/adr/**"
    protect "tests/fixtures/**"
    gates {
        syntax
        command "pytest -q tests/adr" name="tests" timeout="5m"
        matches "response" #"<!-- STEP: (what|why|constraints|generate|finalize|done) -->"# name="step-marker"
        front-matter "adr/ADR-042.md" "adr_id" "title" "status"
        sections "adr/ADR-042.md" "Kontext" "Entscheidung" "Akzeptanzkriterien"
    }
    verify "both"
    retries 2
}

phase "docs" {
    depends-on "parser"
    prompt "Document the parser in docs/adr/parser.md"
    outputs { file "docs/adr/parser.md" }
    verify "sub-agent"
    verifier "reviewer"
}

phase "lexer" use="python-module" module="adr/lexer"
"##;

    const TEMPLATE_EXAMPLE: &str = r#"template "python-module" {
    param "module"
    param "tests" default="tests"
    prompt "Implement {{ module }} with tests under {{ tests }}"
    outputs { file "src/{{ module }}.py"; file "{{ tests }}/test_{{ module | replace(\"/\", \"_\") }}.py" }
    gates { syntax; command "pytest -q {{ tests }}" name="tests" }
}
phase "lexer" use="python-module" module="adr/lexer" { depends-on "parser" }
"#;

    /// Inputs that exercise every rule; each is valid KDL v2.
    const TRICKY: &[&str] = &[
        REFERENCE_EXAMPLE,
        TEMPLATE_EXAMPLE,
        "\n\n// leading\n\n\n\na 1;b 2 ;  c { d;e }\n\n\n\n// end\n",
        "a { // after brace\n\n\n    b // trailing\n    /* own line */\n    c /* inline */ 1 // end\n\n}\n",
        "/* block\n   spanning lines */ node 1\n/* before */ /* twice */ other\nx; /* after semi */\ny; // after semi\n",
        "a /-1 /- \"two\" /-key=3 b=(u8)  4 /- { x }\n/-\nnode\n/- // why\n  gone 1\n(t) typed (t)1 ( t )\"s\"\n",
        "node 1 \\\n   2 \\ // continued\n 3\nnext\n",
        "text \"\"\"\n      keep   \n  these\n     lines\n  \"\"\" after\nraw #\"\"\"\n   \"# still\n   \"\"\"#\n",
        "r ##\"quote \"# inside\"## #\"a\"#\nempty {}\nspaced {   }\nlines {\n\n}\nkw #true #false #null #inf #-inf\n",
        "a {\n\tb {\n\t\tc {\n\t\t\td\n\t\t}\n\t}\n}\n",
        "a {b {c}} // all on one line\nz{}",
        "\u{feff}a \"x\"\r\nb {\r\n  c \"\"\"\r\n  line\r\n  \"\"\"\r\n}\r\n",
        "m k  =  \"v\" {\n  /*c*/ n\n} /-{ old }\n",
        "a\n/* only comment, nested /* inner */ */\n\n\n\n",
    ];

    fn parse(src: &str) -> KdlDocument {
        let mut doc =
            KdlDocument::parse(src).unwrap_or_else(|e| panic!("does not parse: {e:?}\n{src}"));
        doc.clear_format_recursive();
        doc
    }

    fn count(haystack: &str, needle: &str) -> usize {
        haystack.matches(needle).count()
    }

    #[test]
    fn every_sample_is_valid_kdl() {
        for src in TRICKY {
            parse(src);
        }
    }

    #[test]
    fn keeps_every_comment() {
        for src in TRICKY {
            let out = format_source(src);
            assert_eq!(count(src, "//"), count(&out, "//"), "{out}");
            assert_eq!(count(src, "/*"), count(&out, "/*"), "{out}");
            assert_eq!(count(src, "*/"), count(&out, "*/"), "{out}");
        }
    }

    #[test]
    fn is_idempotent() {
        for src in TRICKY {
            let once = format_source(src);
            assert_eq!(format_source(&once), once, "input:\n{src}");
        }
    }

    #[test]
    fn output_parses_to_an_equivalent_document() {
        for src in TRICKY {
            let out = format_source(src);
            assert_eq!(parse(&out), parse(src), "input:\n{src}\noutput:\n{out}");
        }
    }

    #[test]
    fn reference_example_changes_only_the_one_line_block() {
        let out = format_source(REFERENCE_EXAMPLE);
        let expected = REFERENCE_EXAMPLE
            .replace(
                r#"outputs { file "docs/adr/parser.md" }"#,
                "outputs {\n        file \"docs/adr/parser.md\"\n    }",
            )
            .replace(
                r#""templates/python.kdl"          //"#,
                r#""templates/python.kdl" //"#,
            );
        assert_eq!(out, expected);
    }

    #[test]
    fn splits_semicolon_separated_nodes() {
        assert_eq!(format_source("a 1;b 2 ;  c;"), "a 1\nb 2\nc\n");
    }

    #[test]
    fn expands_one_line_blocks() {
        assert_eq!(
            format_source("a {b {c}; d 1} // all\nz{}"),
            "a {\n    b {\n        c\n    }\n    d 1\n} // all\nz {}\n"
        );
    }

    #[test]
    fn keeps_trailing_comments_on_the_node_line() {
        let src = "a 1    // one\nb { // two\n  c; // three\n  d /* four */\n} // five\n";
        let expected = "a 1 // one\nb { // two\n    c // three\n    d /* four */\n} // five\n";
        assert_eq!(format_source(src), expected);
    }

    #[test]
    fn reindents_comments_on_their_own_line() {
        let src = "a {\n// x\n        /* y\n   z */\n  b\n}\n";
        assert_eq!(
            format_source(src),
            "a {\n    // x\n    /* y\n   z */\n    b\n}\n"
        );
    }

    #[test]
    fn keeps_multi_line_strings_byte_exact() {
        let body = "\"\"\"\n      keep   \n\n  these \\\n   \"lines\"\n  \"\"\"";
        let src = format!("  a {{\n        text {body} after\n}}\n");
        assert_eq!(
            format_source(&src),
            format!("a {{\n    text {body} after\n}}\n")
        );
    }

    #[test]
    fn keeps_raw_strings_with_hashes() {
        let src = "r ##\"quote \"# inside\"##   #\"a\"#\nm #\"\"\"\n  \"# x\n  \"\"\"#\n";
        assert_eq!(
            format_source(src),
            "r ##\"quote \"# inside\"## #\"a\"#\nm #\"\"\"\n  \"# x\n  \"\"\"#\n"
        );
    }

    #[test]
    fn normalises_spacing_within_a_node() {
        let src = "( t )node   k = ( u8 )  1  /- \"x\"  /-\n y  z{\n}";
        assert_eq!(format_source(src), "(t)node k=(u8)1 /-\"x\" /-y z {}\n");
    }

    #[test]
    fn attaches_slashdash_to_nodes_and_blocks() {
        let src = "/-\n  gone 1 {\n a\n }\nkept /- { old }\n";
        assert_eq!(
            format_source(src),
            "/-gone 1 {\n    a\n}\nkept /-{\n    old\n}\n"
        );
    }

    #[test]
    fn indents_continuation_lines_one_level_deeper() {
        let src = "a {\nnode 1 \\\n2 \\   // why\n          3\n}\n";
        assert_eq!(
            format_source(src),
            "a {\n    node 1 \\\n        2 \\ // why\n        3\n}\n"
        );
    }

    #[test]
    fn a_continuation_into_a_line_that_ends_the_node_keeps_a_blank_line() {
        // The continuation consumes one line break; the next one ends `a`.
        let cases = [
            ("a \\\n\nb", "a \\\n\nb\n"),
            ("a \\ // why\n\n\n  b 1", "a \\ // why\n\nb 1\n"),
            ("a \\\n;b", "a \\\n\nb\n"),
            (
                "a 1 \\\n  2 \\\n\n/* c */ b",
                "a 1 \\\n    2 \\\n\n/* c */ b\n",
            ),
            ("\\\n\nnode", "\\\n\nnode\n"),
            ("x {\n  a \\\n\n}", "x {\n    a \\\n}\n"),
            ("a \\\n", "a \\\n"),
        ];
        for (src, expected) in cases {
            let out = format_source(src);
            assert_eq!(out, expected, "input:\n{src}");
            assert_eq!(parse(&out), parse(src), "input:\n{src}\noutput:\n{out}");
            assert_eq!(format_source(&out), out);
        }
    }

    #[test]
    fn collapses_blank_lines() {
        let src = "\n\n\na\n\n\n\nb {\n\n\n  c\n\n\n  d\n\n\n}\n\n\n";
        assert_eq!(format_source(src), "a\n\nb {\n    c\n\n    d\n}\n");
    }

    #[test]
    fn writes_empty_blocks_compactly_unless_they_hold_comments() {
        assert_eq!(format_source("a {\n\n}\nb {   }"), "a {}\nb {}\n");
        assert_eq!(format_source("a { /* c */ }"), "a { /* c */\n}\n");
        assert_eq!(format_source("a {\n  // c\n}"), "a {\n    // c\n}\n");
    }

    #[test]
    fn converts_crlf_to_lf() {
        let src = "a {\r\n  b \"\"\"\r\n  x\r\n  \"\"\"\r\n}\r\n";
        let out = format_source(src);
        assert!(!out.contains('\r'));
        assert_eq!(out, "a {\n    b \"\"\"\n  x\n  \"\"\"\n}\n");
        assert_eq!(parse(&out), parse(src));
    }

    #[test]
    fn empty_input_stays_empty() {
        assert_eq!(format_source(""), "");
        assert_eq!(format_source(" \n\r\n\t"), "");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_any_input(src in "[a-c{}();=/\\\\*#\"\\- \n\r\t\u{2028}é]{0,60}") {
            let once = format_source(&src);
            let twice = format_source(&once);
            for out in [once, twice] {
                proptest::prop_assert!(out.is_empty() || out.ends_with('\n'));
            }
        }
    }

    /// Random valid KDL documents with comments and unusual spacing everywhere the grammar allows
    /// it, to check the formatter's promises beyond the hand-written samples.
    mod generated {
        use proptest::prelude::*;
        use proptest::sample::select;

        use super::{count, parse};
        use crate::diagnostics::FileId;
        use crate::language::format::format_source;
        use crate::language::kdl::lexer::screen;

        const NAMES: &[&str] = &["a", "node", "x-y", "über", "\"quoted name\"", "#\"raw\"#"];
        const KEYS: &[&str] = &["k", "key-2", "\"q k\""];
        const TYPES: &[&str] = &["t", "u8", "\"my type\""];
        const VALUES: &[&str] = &[
            "v",
            "1",
            "-2.5",
            "0x1F",
            "1_000",
            "1e10",
            "\"s p\"",
            "\"esc \\\" \\n {\"",
            "\"\\u{1F600} }\"",
            "#\"r\"#",
            "##\"a\"#b\"##",
            "#true",
            "#false",
            "#null",
            "#-inf",
            "\"\"\"\n  line one\n    two // not a comment\n\n  \"\"\"",
            "#\"\"\"\n  raw \"# /*\n  \"\"\"#",
            "\"ws \\\n   escape\"",
        ];
        const SPACE: &[&str] = &[
            " ",
            "   ",
            "\t",
            " /* c */ ",
            " \\\n    ",
            " \\ // c\n  ",
            "\u{3000}",
        ];
        const BEFORE_BLOCK: &[&str] = &["", " ", " /* b */ ", " \\\n "];
        const AFTER_SLASHDASH: &[&str] = &["", " ", "\n", " /* s */ ", " // s\n"];
        const TIGHT: &[&str] = &["", " "];
        const TERMINATOR: &[&str] = &[
            "\n",
            ";",
            " ;",
            "; // t\n",
            " // t\n",
            "\n\n\n",
            " \\\n\n",
            "\n// own\n",
            "\n/* own */\n",
            "\r\n",
            " /* t */\n",
        ];
        const LAST_TERMINATOR: &[&str] = &["", " ", "\n", ";", " // t\n", "\n\n"];
        const LEADING: &[&str] = &[
            "",
            "\n",
            " // lead\n",
            "\n\n\n",
            " /* in */ ",
            "\n  /* a\n b */\n",
        ];

        #[derive(Debug, Clone)]
        struct Entry {
            slashdash: bool,
            key: Option<&'static str>,
            ty: Option<&'static str>,
            value: &'static str,
        }

        #[derive(Debug, Clone)]
        struct Node {
            slashdash: bool,
            ty: Option<&'static str>,
            name: &'static str,
            entries: Vec<Entry>,
            children: Option<Vec<Node>>,
            dashed_block: bool,
        }

        /// Picks the spacing; a seeded generator keeps the tree strategy small.
        struct Picker(u64);

        impl Picker {
            fn pick(&mut self, options: &[&'static str]) -> &'static str {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                options[usize::try_from(self.0 % options.len() as u64).unwrap_or_default()]
            }
        }

        fn entry() -> impl Strategy<Value = Entry> {
            (
                proptest::bool::weighted(0.2),
                proptest::option::weighted(0.3, select(KEYS)),
                proptest::option::weighted(0.2, select(TYPES)),
                select(VALUES),
            )
                .prop_map(|(slashdash, key, ty, value)| Entry {
                    slashdash,
                    key,
                    ty,
                    value,
                })
        }

        fn node() -> impl Strategy<Value = Node> {
            let leaf = node_with(Just(None).boxed());
            leaf.prop_recursive(3, 24, 4, |inner| {
                node_with(proptest::option::of(proptest::collection::vec(inner, 0..4)).boxed())
            })
        }

        fn node_with(children: BoxedStrategy<Option<Vec<Node>>>) -> BoxedStrategy<Node> {
            (
                proptest::bool::weighted(0.15),
                proptest::option::weighted(0.2, select(TYPES)),
                select(NAMES),
                proptest::collection::vec(entry(), 0..4),
                children,
                proptest::bool::weighted(0.15),
            )
                .prop_map(
                    |(slashdash, ty, name, entries, children, dashed_block)| Node {
                        slashdash,
                        ty,
                        name,
                        entries,
                        children,
                        dashed_block,
                    },
                )
                .boxed()
        }

        fn render_nodes(nodes: &[Node], picker: &mut Picker, out: &mut String) {
            out.push_str(picker.pick(LEADING));
            for (index, node) in nodes.iter().enumerate() {
                render_node(node, picker, out);
                let last = index + 1 == nodes.len();
                // The kdl crate rejects `;` after a slashdashed node (`/-a; b`), though the
                // grammar allows it.
                let terminators: Vec<_> = (if last { LAST_TERMINATOR } else { TERMINATOR })
                    .iter()
                    .copied()
                    .filter(|t| !(node.slashdash && t.contains(';')))
                    .collect();
                out.push_str(picker.pick(&terminators));
            }
        }

        fn render_node(node: &Node, picker: &mut Picker, out: &mut String) {
            if node.slashdash {
                out.push_str("/-");
                out.push_str(picker.pick(AFTER_SLASHDASH));
            }
            if let Some(ty) = node.ty {
                render_type(ty, picker, out);
            }
            out.push_str(node.name);
            for entry in &node.entries {
                out.push_str(picker.pick(SPACE));
                render_entry(entry, picker, out);
            }
            if let Some(children) = &node.children {
                out.push_str(picker.pick(BEFORE_BLOCK));
                out.push('{');
                render_nodes(children, picker, out);
                out.push('}');
            }
            if node.dashed_block {
                out.push_str(picker.pick(SPACE));
                out.push_str("/-");
                out.push_str(picker.pick(AFTER_SLASHDASH));
                out.push_str("{ gone 1 }");
            }
        }

        fn render_entry(entry: &Entry, picker: &mut Picker, out: &mut String) {
            if entry.slashdash {
                out.push_str("/-");
                out.push_str(picker.pick(AFTER_SLASHDASH));
            }
            if let Some(key) = entry.key {
                out.push_str(key);
                out.push_str(picker.pick(TIGHT));
                out.push('=');
                out.push_str(picker.pick(TIGHT));
            }
            if let Some(ty) = entry.ty {
                render_type(ty, picker, out);
            }
            out.push_str(entry.value);
        }

        fn render_type(ty: &str, picker: &mut Picker, out: &mut String) {
            out.push('(');
            out.push_str(picker.pick(TIGHT));
            out.push_str(ty);
            out.push_str(picker.pick(TIGHT));
            out.push(')');
            out.push_str(picker.pick(TIGHT));
        }

        fn document() -> impl Strategy<Value = String> {
            (proptest::collection::vec(node(), 0..5), any::<u64>()).prop_map(|(nodes, seed)| {
                let mut out = String::new();
                render_nodes(&nodes, &mut Picker(seed | 1), &mut out);
                out
            })
        }

        proptest! {
            #[test]
            fn formatting_keeps_meaning_and_comments_and_is_idempotent(src in document()) {
                let out = format_source(&src);
                prop_assert_eq!(parse(&out), parse(&src), "output:\n{}", out);
                prop_assert_eq!(format_source(&out), out.clone());
                for marker in ["//", "/*", "*/"] {
                    prop_assert_eq!(count(&src, marker), count(&out, marker));
                }
                prop_assert!(!out.contains('\r'));
                prop_assert!(screen(&src, FileId(0)).is_empty());
                prop_assert!(out.lines().all(|line| !line.ends_with(' ') || line.trim().is_empty()));
            }
        }
    }
}
