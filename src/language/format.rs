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
pub(crate) fn format_source(src: &str) -> String {
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
mod tests;
