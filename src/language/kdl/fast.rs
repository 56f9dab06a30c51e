//! A fast, strict KDL v2 parser for well-formed files, over the tokens of [`super::lexer`].
//!
//! The `kdl` crate's parser recovers from errors by backtracking, which makes it slow: about a
//! microsecond per byte even on valid input, most of the time `lint` spends on a typical file.
//! This parser builds the same [`KdlDocument`] (names, values, types, value text and spans) in one
//! forward pass, but it only answers for input it is certain about: anything malformed, or any
//! construct it does not handle (such as `\` line continuations inside strings), makes it give up
//! and return `None`. The caller then parses with the `kdl` crate, which stays the reference for
//! what KDL means and the only source of syntax errors (through `super::compat`, which makes up for
//! the one rule of the current specification the crate does not follow yet).
//!
//! The spans follow the `kdl` crate's conventions: a node runs from its type annotation or name to
//! the start of its terminator (trailing spaces included); an entry from its key, type or value to
//! the end of the value; a children block from its first node to the end of its last one. A test
//! parses the KDL specification's test suite and mutated pipelines with both parsers and compares.

use kdl::{KdlDocument, KdlEntry, KdlEntryFormat, KdlIdentifier, KdlNode, KdlValue};

use super::lexer::{Token, TokenKind};
use value::{bare, keyword, multi_line, raw, unescape};

mod value;

/// Parses `src`, already split into `tokens`. When the `kdl` crate must decide instead, says
/// where this parser stopped (a byte offset).
pub(crate) fn parse(src: &str, tokens: &[Token]) -> Result<KdlDocument, usize> {
    if let Some(at) = src.find(disallowed) {
        return Err(at);
    }
    let mut parser = Parser { src, tokens, at: 0 };
    match parser.nodes(false) {
        Some(document) if parser.at == tokens.len() => Ok(document),
        _ => Err(parser.offset()),
    }
}

/// Code points KDL forbids outside the first position (the byte order mark) or anywhere.
fn disallowed(c: char) -> bool {
    matches!(c,
        '\u{0000}'..='\u{0008}'
        | '\u{000E}'..='\u{001F}'
        | '\u{007F}'
        | '\u{200E}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}'
    )
}

struct Parser<'a> {
    src: &'a str,
    tokens: &'a [Token],
    at: usize,
}

/// Where a node is in its sequence of entries and children blocks.
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Stage {
    /// Entries may still come.
    Entries,
    /// A commented-out children block was seen: a real one may still come, entries may not.
    CommentedChildren,
    /// The children block was seen: only commented-out blocks may follow.
    Children,
}

impl Parser<'_> {
    fn kind(&self) -> Option<TokenKind> {
        self.tokens.get(self.at).map(|t| t.kind)
    }

    fn token(&self) -> Option<Token> {
        self.tokens.get(self.at).copied()
    }

    /// The byte offset of the current token, or the end of the input.
    fn offset(&self) -> usize {
        self.token().map_or(self.src.len(), |t| t.start)
    }

    /// Skips spaces and block comments; `None` on an unterminated comment.
    fn skip_ws(&mut self) -> Option<()> {
        while let Some(kind) = self.kind() {
            match kind {
                TokenKind::Whitespace => {}
                TokenKind::BlockComment { terminated: true } => {}
                TokenKind::BlockComment { terminated: false } => return None,
                _ => break,
            }
            self.at += 1;
        }
        Some(())
    }

    /// Skips node space: spaces, block comments and `\` line continuations.
    /// Says whether anything was skipped; `None` on a malformed continuation.
    fn skip_node_space(&mut self) -> Option<bool> {
        let from = self.at;
        loop {
            self.skip_ws()?;
            if self.kind() != Some(TokenKind::Continuation) {
                break;
            }
            self.at += 1;
            self.skip_ws()?;
            if self.kind() == Some(TokenKind::LineComment) {
                self.at += 1;
            }
            match self.kind() {
                Some(TokenKind::Newline) => self.at += 1,
                None => {}
                _ => return None,
            }
        }
        Some(self.at > from)
    }

    /// Skips line space: node space, line breaks and line comments.
    fn skip_line_space(&mut self) -> Option<()> {
        loop {
            self.skip_node_space()?;
            match self.kind() {
                Some(TokenKind::Newline | TokenKind::LineComment) => self.at += 1,
                _ => return Some(()),
            }
        }
    }

    /// `nodes`: the top level (`in_block` false, up to the end) or the inside of a children block
    /// (up to, not including, its `}`).
    fn nodes(&mut self, in_block: bool) -> Option<KdlDocument> {
        let mut document = KdlDocument::new();
        let mut first_start = None;
        let mut last_end = None;
        loop {
            // Leading line space, and nodes commented out with `/-`.
            loop {
                self.skip_line_space()?;
                if self.kind() != Some(TokenKind::Slashdash) {
                    break;
                }
                self.at += 1;
                self.skip_line_space()?;
                // Only line space may follow a commented-out node: `/- a; b` is not KDL.
                self.base_node()?;
            }
            match self.kind() {
                None if !in_block => break,
                Some(TokenKind::CloseBrace) if in_block => break,
                None | Some(TokenKind::CloseBrace) => return None,
                _ => {}
            }
            let node = self.base_node()?;
            first_start.get_or_insert(node.span().offset());
            last_end = Some(node.span().offset() + node.span().len());
            document.nodes_mut().push(node);
            self.terminator(in_block)?;
        }
        document.nodes_mut().shrink_to_fit();
        let start = first_start.unwrap_or_else(|| self.offset());
        document.set_span(start..last_end.unwrap_or(start));
        Some(document)
    }

    /// After a node: a line break, `;`, a line comment (which a line break or the end follows),
    /// or the end of the block or file (left for the caller).
    fn terminator(&mut self, in_block: bool) -> Option<()> {
        match self.kind() {
            Some(TokenKind::Newline | TokenKind::Semicolon) => self.at += 1,
            Some(TokenKind::LineComment) => {
                self.at += 1;
                match self.kind() {
                    Some(TokenKind::Newline) => self.at += 1,
                    None => {}
                    _ => return None,
                }
            }
            None if !in_block => {}
            Some(TokenKind::CloseBrace) if in_block => {}
            _ => return None,
        }
        Some(())
    }

    /// A node without its terminator: its span ends where the terminator starts.
    fn base_node(&mut self) -> Option<KdlNode> {
        let start = self.offset();
        let ty = self.leading_type()?;
        let name = self.identifier()?;
        let mut node = KdlNode::new(name);
        // Nothing reads a node's formatting; `new` allocates some for every node.
        node.clear_format();
        if let Some(ty) = ty {
            node.set_ty(ty);
        }
        let mut stage = Stage::Entries;
        loop {
            let spaced = self.skip_node_space()?;
            match self.kind() {
                None
                | Some(
                    TokenKind::Newline
                    | TokenKind::Semicolon
                    | TokenKind::LineComment
                    | TokenKind::CloseBrace,
                ) => break,
                Some(TokenKind::OpenBrace) => {
                    if stage == Stage::Children {
                        return None;
                    }
                    node.set_children(self.children()?);
                    stage = Stage::Children;
                }
                // KDL v2 needs no space before a slashdash (kdl-org/kdl#499): `a "b"/-c`.
                Some(TokenKind::Slashdash) => {
                    self.at += 1;
                    self.skip_ws()?;
                    if self.kind() == Some(TokenKind::OpenBrace) {
                        self.children()?;
                        stage = stage.max(Stage::CommentedChildren);
                    } else if stage == Stage::Entries {
                        self.entry()?;
                    } else {
                        return None;
                    }
                }
                Some(_) => {
                    if !spaced || stage != Stage::Entries {
                        return None;
                    }
                    let entry = self.entry()?;
                    node.entries_mut().push(entry);
                }
            }
        }
        // A node has a handful of entries; the vector grew to at least four (about 1.5 KB).
        node.entries_mut().shrink_to_fit();
        node.set_span(start..self.offset());
        Some(node)
    }

    /// `{ nodes }`, at the `{`.
    fn children(&mut self) -> Option<KdlDocument> {
        self.at += 1;
        let document = self.nodes(true)?;
        if self.kind() != Some(TokenKind::CloseBrace) {
            return None;
        }
        self.at += 1;
        self.value_terminator()?;
        Some(document)
    }

    /// A type annotation and the space after it, when there is one: `Some(None)` when there is
    /// none, `None` when the parser gives up.
    #[expect(
        clippy::option_option,
        reason = "three outcomes: no annotation, an annotation, the parser gave up"
    )]
    fn leading_type(&mut self) -> Option<Option<KdlIdentifier>> {
        if self.kind() != Some(TokenKind::OpenParen) {
            return Some(None);
        }
        let ty = self.type_annotation()?;
        self.skip_node_space()?;
        Some(Some(ty))
    }

    /// `(name)`, at the `(`.
    fn type_annotation(&mut self) -> Option<KdlIdentifier> {
        self.at += 1;
        self.skip_node_space()?;
        let ty = self.identifier()?;
        self.skip_node_space()?;
        if self.kind() != Some(TokenKind::CloseParen) {
            return None;
        }
        self.at += 1;
        Some(ty)
    }

    /// A string used as a name: a node's, a property's or a type's.
    fn identifier(&mut self) -> Option<KdlIdentifier> {
        let token = self.token()?;
        let KdlValue::String(value) = self.scalar(token)? else {
            return None;
        };
        self.at += 1;
        if self.kind() != Some(TokenKind::Equals) {
            self.value_terminator()?;
        }
        let raw = token.text(self.src);
        let mut identifier = KdlIdentifier::from(value);
        identifier.set_repr(raw);
        identifier.set_span(token.start..token.end);
        Some(identifier)
    }

    /// What may follow a value: space, a line break, `;`, a comment, a brace, `)`, a slashdash or
    /// the end. (The `kdl` crate also accepts `=` here, which only a property's key may be
    /// followed by, and it rejects the slashdash, which `compat` makes up for.)
    fn value_terminator(&self) -> Option<()> {
        match self.kind() {
            None
            | Some(
                TokenKind::Whitespace
                | TokenKind::Newline
                | TokenKind::LineComment
                | TokenKind::BlockComment { .. }
                | TokenKind::Semicolon
                | TokenKind::OpenBrace
                | TokenKind::CloseBrace
                | TokenKind::CloseParen
                | TokenKind::Continuation
                | TokenKind::Slashdash,
            ) => Some(()),
            _ => None,
        }
    }

    /// An argument or a property.
    fn entry(&mut self) -> Option<KdlEntry> {
        let start = self.offset();
        let token = self.token()?;
        if token.kind != TokenKind::OpenParen {
            // A string followed by `=` (spaces allowed around it) is a property's key.
            let after = self.lookahead_equals();
            if let Some(equals) = after {
                let key = self.identifier()?;
                self.at = equals + 1;
                self.skip_node_space()?;
                let mut entry = self.value()?;
                entry.set_name(Some(key));
                entry.set_span(start..self.offset_after_previous());
                return Some(entry);
            }
        }
        let mut entry = self.value()?;
        entry.set_span(start..self.offset_after_previous());
        Some(entry)
    }

    /// The end of the token just consumed.
    fn offset_after_previous(&self) -> usize {
        self.at
            .checked_sub(1)
            .and_then(|i| self.tokens.get(i))
            .map_or(0, |t| t.end)
    }

    /// When the current token is followed by node space and `=`, the index of the `=`.
    fn lookahead_equals(&self) -> Option<usize> {
        let mut i = self.at + 1;
        while let Some(token) = self.tokens.get(i) {
            match token.kind {
                TokenKind::Whitespace | TokenKind::BlockComment { terminated: true } => i += 1,
                TokenKind::Equals => return Some(i),
                _ => return None,
            }
        }
        None
    }

    /// A value with an optional type annotation, as an entry without a name.
    fn value(&mut self) -> Option<KdlEntry> {
        let ty = self.leading_type()?;
        let token = self.token()?;
        let value = self.scalar(token)?;
        self.at += 1;
        self.value_terminator()?;
        let mut entry = KdlEntry::new(value);
        if let Some(ty) = ty {
            entry.set_ty(ty);
        }
        entry.set_format(KdlEntryFormat {
            value_repr: token.text(self.src).to_owned(),
            ..KdlEntryFormat::default()
        });
        Some(entry)
    }

    /// The value a single token stands for.
    fn scalar(&self, token: Token) -> Option<KdlValue> {
        let text = token.text(self.src);
        match token.kind {
            TokenKind::Bare => bare(text),
            TokenKind::Keyword => keyword(text),
            TokenKind::String { terminated: true } => {
                let body = text.get(1..text.len().checked_sub(1)?)?;
                unescape(body).map(KdlValue::String)
            }
            TokenKind::MultiLineString { terminated: true } => {
                multi_line(text.strip_prefix("\"\"\"")?.strip_suffix("\"\"\"")?, false)
                    .map(KdlValue::String)
            }
            TokenKind::RawString { terminated: true } => raw(text).map(KdlValue::String),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
