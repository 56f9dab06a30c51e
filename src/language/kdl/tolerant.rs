//! A tolerant view of a document: nodes, their entries and children, read from the lexer's tokens.
//!
//! The KDL parser rejects the half-written text an editor holds while someone types, yet hover,
//! completion, navigation and the outline must still work there. This view never fails: it
//! follows braces, line breaks and `;` the way KDL does, an unclosed block runs to the end of the
//! text, and anything it cannot place is skipped. Slashdashed (`/-`) nodes, entries and blocks are
//! left out, as KDL leaves them out.

use std::ops::Range;

use super::lexer::{Token, TokenKind, is_trivia, tokenize};

/// The nodes of one document.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    /// The top-level nodes, in order.
    pub(crate) nodes: Vec<Node>,
}

/// One node: its name, entries and children.
#[derive(Debug)]
pub(crate) struct Node {
    /// The node's name.
    pub(crate) name: Word,
    /// Arguments and properties, in order.
    pub(crate) entries: Vec<Entry>,
    /// The `{ … }` block, if any.
    pub(crate) children: Option<Block>,
    /// From the name to the end of the block, or of the last entry.
    pub(crate) span: Range<usize>,
    /// Where the head (name and entries) ends: at the line break, `;`, `{` or `}` after it.
    pub(crate) head_end: usize,
}

/// A `{ … }` block.
#[derive(Debug)]
pub(crate) struct Block {
    /// Offset of the `{`.
    pub(crate) open: usize,
    /// Offset of the `}`, when there is one.
    pub(crate) close: Option<usize>,
    /// The child nodes.
    pub(crate) nodes: Vec<Node>,
}

impl Block {
    /// Whether `offset` is inside the braces (an unclosed block runs to the end).
    pub(crate) fn contains(&self, offset: usize) -> bool {
        offset > self.open && self.close.is_none_or(|close| offset <= close)
    }
}

/// An argument (`value`) or a property (`key=value`).
#[derive(Debug)]
pub(crate) struct Entry {
    /// The key of a property.
    pub(crate) key: Option<Word>,
    /// The value; a property being typed (`key=`) has none yet.
    pub(crate) value: Option<Word>,
}

impl Entry {
    /// Where the entry ends (after the `=` of a property without a value).
    pub(crate) fn end(&self) -> usize {
        match (&self.value, &self.key) {
            (Some(value), _) => value.span.end,
            (None, Some(key)) => key.span.end + 1,
            (None, None) => 0,
        }
    }

    /// The key's text, for a property.
    pub(crate) fn key_text(&self) -> Option<&str> {
        self.key.as_ref().and_then(Word::text)
    }

    /// The value's text, when it is a string.
    pub(crate) fn value_text(&self) -> Option<&str> {
        self.value.as_ref().and_then(Word::text)
    }
}

/// One name or value token.
#[derive(Debug)]
pub(crate) struct Word {
    /// Its bytes in the document, quotes included.
    pub(crate) span: Range<usize>,
    /// Its decoded text, for strings and identifiers; numbers, keywords and multi-line strings
    /// have none.
    pub(crate) text: Option<String>,
    /// Whether it is written in quotes (and so is being edited inside them).
    pub(crate) quoted: bool,
}

impl Word {
    /// Its decoded text.
    pub(crate) fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }
}

impl Node {
    /// The positional arguments.
    pub(crate) fn args(&self) -> impl Iterator<Item = &Word> {
        self.entries
            .iter()
            .filter(|e| e.key.is_none())
            .filter_map(|e| e.value.as_ref())
    }

    /// The text of the first positional argument (the name of a phase, agent or template).
    pub(crate) fn first_arg(&self) -> Option<&Word> {
        self.args().next()
    }

    /// The last property `key` (KDL: the last one wins).
    pub(crate) fn prop(&self, key: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.key_text() == Some(key))
    }

    /// The node's name.
    pub(crate) fn name(&self) -> &str {
        self.name.text().unwrap_or_default()
    }

    /// The child nodes (none without a block).
    pub(crate) fn child_nodes(&self) -> &[Node] {
        self.children.as_ref().map_or(&[], |b| b.nodes.as_slice())
    }
}

/// Reads the tolerant view of `src`; a text over the front end's limits has an empty one (the
/// language server, which reads documents this way, gets the same bounded answer as `lint`).
pub(crate) fn parse(src: &str) -> Tree {
    if !crate::language::kdl::limits::Allowance::fits(src) {
        return Tree::default();
    }
    let tokens: Vec<Token> = tokenize(src)
        .into_iter()
        .filter(|t| !matches!(t.kind, TokenKind::Whitespace) && !is_comment(t.kind))
        .collect();
    let mut parser = Parser {
        src,
        tokens,
        pos: 0,
    };
    let (nodes, _) = parser.nodes(false);
    Tree { nodes }
}

fn is_comment(kind: TokenKind) -> bool {
    is_trivia(kind) && !matches!(kind, TokenKind::Whitespace | TokenKind::Newline)
}

struct Parser<'s> {
    src: &'s str,
    /// Every token but whitespace and comments.
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<Token> {
        self.tokens.get(self.pos).copied()
    }

    /// Nodes up to the `}` that closes the block (when `in_block`) or the end.
    fn nodes(&mut self, in_block: bool) -> (Vec<Node>, Option<usize>) {
        let mut nodes = Vec::new();
        while let Some(token) = self.peek() {
            match token.kind {
                TokenKind::Newline | TokenKind::Semicolon | TokenKind::Continuation => {
                    self.pos += 1;
                }
                TokenKind::CloseBrace => {
                    self.pos += 1;
                    if in_block {
                        return (nodes, Some(token.start));
                    }
                }
                TokenKind::OpenBrace => {
                    // A block without a node: read past it.
                    self.pos += 1;
                    self.nodes(true);
                }
                TokenKind::Slashdash => {
                    self.pos += 1;
                    self.skip_newlines();
                    if self.peek().is_some_and(|t| t.kind == TokenKind::OpenBrace) {
                        self.pos += 1;
                        self.nodes(true);
                    } else {
                        self.node();
                    }
                }
                _ => {
                    if let Some(node) = self.node() {
                        nodes.push(node);
                    }
                }
            }
        }
        (nodes, None)
    }

    fn skip_newlines(&mut self) {
        while self.peek().is_some_and(|t| t.kind == TokenKind::Newline) {
            self.pos += 1;
        }
    }

    /// Skips a type annotation `(…)` if one is next.
    fn type_annotation(&mut self) {
        if self.peek().is_some_and(|t| t.kind == TokenKind::OpenParen) {
            while let Some(token) = self.peek() {
                match token.kind {
                    TokenKind::CloseParen => {
                        self.pos += 1;
                        return;
                    }
                    TokenKind::Newline
                    | TokenKind::Semicolon
                    | TokenKind::OpenBrace
                    | TokenKind::CloseBrace => return,
                    _ => self.pos += 1,
                }
            }
        }
    }

    fn node(&mut self) -> Option<Node> {
        self.type_annotation();
        let token = self.peek()?;
        let Some(name) = self.word(token) else {
            // Not a node name (a stray `=` or `)`): skip it.
            self.pos += 1;
            return None;
        };
        self.pos += 1;
        let start = name.span.start;
        let mut end = name.span.end;
        let mut entries = Vec::new();
        let mut children = None;
        let head_end;
        loop {
            let Some(token) = self.peek() else {
                head_end = self.src.len();
                break;
            };
            match token.kind {
                TokenKind::Newline | TokenKind::Semicolon | TokenKind::CloseBrace => {
                    head_end = token.start;
                    break;
                }
                TokenKind::OpenBrace => {
                    head_end = token.start;
                    self.pos += 1;
                    let (nodes, close) = self.nodes(true);
                    end = close.map_or(self.src.len(), |c| c + 1);
                    children = Some(Block {
                        open: token.start,
                        close,
                        nodes,
                    });
                    break;
                }
                TokenKind::Continuation => {
                    // `\` continues the node on the next line.
                    self.pos += 1;
                    if self.peek().is_some_and(|t| t.kind == TokenKind::Newline) {
                        self.pos += 1;
                    }
                }
                TokenKind::Slashdash => {
                    self.pos += 1;
                    if self.peek().is_some_and(|t| t.kind == TokenKind::OpenBrace) {
                        self.pos += 1;
                        let (_, close) = self.nodes(true);
                        end = close.map_or(self.src.len(), |c| c + 1);
                    } else {
                        self.type_annotation();
                        self.entry();
                    }
                }
                TokenKind::OpenParen => self.type_annotation(),
                _ => match self.entry() {
                    Some(entry) => {
                        end = entry.end();
                        entries.push(entry);
                    }
                    // A stray `=`, `)` or other character: skip it.
                    None => self.pos += 1,
                },
            }
        }
        Some(Node {
            name,
            entries,
            children,
            span: start..end,
            head_end,
        })
    }

    /// An argument or property at the current token; `None` (consuming nothing) when the token
    /// cannot start one.
    fn entry(&mut self) -> Option<Entry> {
        let token = self.peek()?;
        let first = self.word(token)?;
        self.pos += 1;
        let is_property = self
            .peek()
            .is_some_and(|t| t.kind == TokenKind::Equals && t.start == first.span.end);
        if !is_property {
            return Some(Entry {
                key: None,
                value: Some(first),
            });
        }
        self.pos += 1;
        self.type_annotation();
        let value = self.peek().and_then(|t| self.word(t));
        if value.is_some() {
            self.pos += 1;
        }
        Some(Entry {
            key: Some(first),
            value,
        })
    }

    /// The word a token is, if it is a name or value.
    fn word(&self, token: Token) -> Option<Word> {
        let raw = token.text(self.src);
        let (text, quoted) = match token.kind {
            TokenKind::Bare => (bare(raw), false),
            TokenKind::Keyword => (None, false),
            TokenKind::String { terminated } => (Some(unescape(raw, terminated)), true),
            TokenKind::RawString { terminated } => (raw_text(raw, terminated), true),
            TokenKind::MultiLineString { .. } => (None, true),
            _ => return None,
        };
        Some(Word {
            span: token.start..token.end,
            text,
            quoted,
        })
    }
}

/// A bare word's text when it is an identifier; numbers have none.
fn bare(raw: &str) -> Option<String> {
    let unsigned = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    let unsigned = unsigned.strip_prefix('.').unwrap_or(unsigned);
    if unsigned.starts_with(|c: char| c.is_ascii_digit()) {
        None
    } else {
        Some(raw.to_owned())
    }
}

/// The text of a quoted string, escapes resolved; an unterminated one is read to its end.
fn unescape(raw: &str, terminated: bool) -> String {
    let inner = raw.strip_prefix('"').unwrap_or(raw);
    let inner = if terminated {
        inner.strip_suffix('"').unwrap_or(inner)
    } else {
        inner
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('s') => out.push(' '),
            Some('u') if chars.peek() == Some(&'{') => {
                chars.next();
                let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(c);
                }
            }
            // `\` before whitespace removes all of it, line breaks included.
            Some(c) if c.is_whitespace() => {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// The text of a single-line raw string `#"…"#`; multi-line raw strings have none.
fn raw_text(raw: &str, terminated: bool) -> Option<String> {
    let hashes = raw.bytes().take_while(|&b| b == b'#').count();
    let body = raw[hashes..].strip_prefix('"')?;
    if body.starts_with("\"\"") {
        return None;
    }
    let body = if terminated {
        body.get(..body.len().saturating_sub(hashes + 1))?
    } else {
        body
    };
    Some(body.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(nodes: &[Node]) -> Vec<&str> {
        nodes.iter().map(Node::name).collect()
    }

    #[test]
    fn reads_nodes_entries_and_blocks() {
        let src = "phase \"a\" use=\"t\" module=x {\n  depends-on b \"c\"; retries 2\n  gates { syntax }\n}\nagent #\"q\"#";
        let tree = parse(src);
        assert_eq!(names(&tree.nodes), ["phase", "agent"]);
        let phase = &tree.nodes[0];
        assert_eq!(phase.first_arg().and_then(Word::text), Some("a"));
        assert_eq!(phase.prop("use").and_then(Entry::value_text), Some("t"));
        assert_eq!(phase.prop("module").and_then(Entry::value_text), Some("x"));
        assert_eq!(
            names(phase.child_nodes()),
            ["depends-on", "retries", "gates"]
        );
        let depends: Vec<_> = phase.child_nodes()[0]
            .args()
            .filter_map(Word::text)
            .collect();
        assert_eq!(depends, ["b", "c"]);
        assert!(phase.child_nodes()[1].first_arg().unwrap().text.is_none());
        assert_eq!(names(phase.child_nodes()[2].child_nodes()), ["syntax"]);
        assert_eq!(phase.span, 0..src.find("}\nagent").unwrap() + 1);
        assert_eq!(tree.nodes[1].first_arg().and_then(Word::text), Some("q"));
    }

    #[test]
    fn tolerates_broken_text() {
        let src = "phase \"a\" {\n  gates {\n    comm\n  depends-on \"unterminated\nphase";
        let tree = parse(src);
        let phase = &tree.nodes[0];
        assert_eq!(phase.children.as_ref().unwrap().close, None);
        let gates = &phase.child_nodes()[0];
        assert_eq!(names(gates.child_nodes()), ["comm", "depends-on", "phase"]);
        assert_eq!(
            gates.child_nodes()[1].first_arg().and_then(Word::text),
            Some("unterminated")
        );
        // A property being typed has a key and no value yet.
        let tree = parse("glob \"x\" min=");
        let entry = &tree.nodes[0].entries[1];
        assert_eq!(entry.key_text(), Some("min"));
        assert!(entry.value.is_none());
    }

    #[test]
    fn leaves_out_slashdashed_parts_and_reads_escapes() {
        let src = "/-phase \"x\" { a }\nb /-\"gone\" \"k\\u{e9}\\n\" /-{ c }\nd \\\n  \"cont\"";
        let tree = parse(src);
        assert_eq!(names(&tree.nodes), ["b", "d"]);
        let args: Vec<_> = tree.nodes[0].args().filter_map(Word::text).collect();
        assert_eq!(args, ["ké\n"]);
        assert!(tree.nodes[0].children.is_none());
        assert_eq!(tree.nodes[1].first_arg().and_then(Word::text), Some("cont"));
    }
}
