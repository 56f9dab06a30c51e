//! A fast, strict KDL v2 parser for well-formed files, over the tokens of [`super::lexer`].
//!
//! The `kdl` crate's parser recovers from errors by backtracking, which makes it slow: about a
//! microsecond per byte even on valid input, most of the time `lint` spends on a typical file.
//! This parser builds the same [`KdlDocument`] (names, values, types, value text and spans) in one
//! forward pass, but it only answers for input it is certain about: anything malformed, or any
//! construct it does not handle (such as `\` line continuations inside strings), makes it give up
//! and return `None`. The caller then parses with the `kdl` crate, which stays the reference for
//! what KDL means and the only source of syntax errors.
//!
//! The spans follow the `kdl` crate's conventions: a node runs from its type annotation or name to
//! the start of its terminator (trailing spaces included); an entry from its key, type or value to
//! the end of the value; a children block from its first node to the end of its last one. A test
//! parses the KDL specification's test suite and mutated pipelines with both parsers and compares.

use kdl::{KdlDocument, KdlEntry, KdlEntryFormat, KdlIdentifier, KdlNode, KdlValue};

use super::lexer::{Token, TokenKind};

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

fn is_newline(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0085}' | '\u{000B}' | '\u{000C}' | '\u{2028}' | '\u{2029}'
    )
}

fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{0009}' | '\u{0020}' | '\u{00A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
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

impl<'a> Parser<'a> {
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
                Some(TokenKind::Slashdash) => {
                    if !spaced {
                        return None;
                    }
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

    /// What may follow a value: space, a line break, `;`, a comment, a brace, `)` or the end.
    /// (The `kdl` crate also accepts `=` here, which only a property's key may be followed by.)
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
                | TokenKind::Continuation,
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

/// A bare word: a number, or an identifier string.
fn bare(text: &str) -> Option<KdlValue> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let first = unsigned.chars().next();
    if first.is_some_and(|c| c.is_ascii_digit()) {
        return number(text);
    }
    if first == Some('.') && unsigned[1..].starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if matches!(
        text,
        "true" | "false" | "null" | "inf" | "-inf" | "+inf" | "nan"
    ) {
        return None;
    }
    Some(KdlValue::String(text.to_owned()))
}

/// `#true`, `#false`, `#null`, `#inf`, `#-inf`, `#nan`.
fn keyword(text: &str) -> Option<KdlValue> {
    Some(match text {
        "#true" => KdlValue::Bool(true),
        "#false" => KdlValue::Bool(false),
        "#null" => KdlValue::Null,
        "#inf" => KdlValue::Float(f64::INFINITY),
        "#-inf" => KdlValue::Float(f64::NEG_INFINITY),
        "#nan" => KdlValue::Float(f64::NAN),
        _ => return None,
    })
}

/// Digits of `radix` with `_` between or after them, never first.
fn digits(text: &str, radix: u32) -> Option<String> {
    if !text.starts_with(|c: char| c.is_digit(radix)) {
        return None;
    }
    if !text.chars().all(|c| c == '_' || c.is_digit(radix)) {
        return None;
    }
    Some(text.replace('_', ""))
}

/// A number: decimal, hexadecimal, octal or binary integer, or a decimal with a fraction or an
/// exponent.
fn number(text: &str) -> Option<KdlValue> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    for (prefix, radix) in [("0x", 16), ("0X", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = unsigned.strip_prefix(prefix) {
            return integer(&digits(rest, radix)?, radix, negative);
        }
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let whole = digits(whole, 10)?;
    if fraction.is_none() && exponent.is_none() {
        return integer(&whole, 10, negative);
    }
    let mut float = String::with_capacity(text.len());
    if negative {
        float.push('-');
    }
    float.push_str(&whole);
    if let Some(fraction) = fraction {
        float.push('.');
        float.push_str(&digits(fraction, 10)?);
    }
    if let Some(exponent) = exponent {
        let (sign, magnitude) = match exponent.as_bytes().first() {
            Some(b'-') => ("-", &exponent[1..]),
            Some(b'+') => ("", &exponent[1..]),
            _ => ("", exponent),
        };
        float.push('e');
        float.push_str(sign);
        float.push_str(&digits(magnitude, 10)?);
    }
    float.parse::<f64>().ok().map(KdlValue::Float)
}

fn integer(digits: &str, radix: u32, negative: bool) -> Option<KdlValue> {
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    let value = if negative {
        magnitude.checked_neg()?
    } else {
        magnitude
    };
    Some(KdlValue::Integer(value))
}

/// The body of a single-line `"…"` string with its escapes applied. Gives up on `\` followed by
/// whitespace (which may span lines) and on invalid escapes.
fn unescape(body: &str) -> Option<String> {
    if !body.contains('\\') {
        return (!body.contains(is_newline)).then(|| body.to_owned());
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if is_newline(c) {
            return None;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            '\\' => '\\',
            '"' => '"',
            'b' => '\u{0008}',
            'f' => '\u{000C}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            's' => ' ',
            'u' => {
                let rest = chars.as_str().strip_prefix('{')?;
                let close = rest.find('}')?;
                let hex = &rest[..close];
                if hex.is_empty() || hex.len() > 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                let c = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                chars = rest[close + 1..].chars();
                c
            }
            _ => return None,
        });
    }
    Some(out)
}

/// Splits text at KDL line breaks (`\r\n` counts as one).
fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if is_newline(c) {
            out.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r'
                && let Some(&(j, '\n')) = chars.peek()
            {
                chars.next();
                end = j + 1;
            }
            start = end;
        }
    }
    out.push(&text[start..]);
    out
}

/// The value of a multi-line string, given what lies between its opening and closing quotes
/// (the line break after the opening quotes included). The last line holds only the
/// indentation, which every other line either starts with or is blank; both go. Escapes are
/// applied unless `raw`; a quoted multi-line string with any `\` is left to the `kdl` crate.
fn multi_line(inner: &str, raw: bool) -> Option<String> {
    if !raw && inner.contains('\\') {
        return None;
    }
    let mut first = inner.chars();
    if !first.next().is_some_and(is_newline) {
        return None;
    }
    let after_newline = inner.strip_prefix("\r\n").unwrap_or(first.as_str());
    let all = lines(after_newline);
    let (prefix, body) = all.split_last()?;
    if !prefix.chars().all(is_unicode_space) {
        return None;
    }
    let mut out = String::with_capacity(inner.len());
    for (i, line) in body.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.chars().all(is_unicode_space) {
            continue;
        }
        if raw && starts_with_escaped_space(line) {
            return None;
        }
        out.push_str(line.strip_prefix(prefix)?);
    }
    Some(out)
}

/// Whether a line's first non-space characters are `\` and a space or the end: the `kdl` crate
/// may read such a line as blank even in a raw string.
fn starts_with_escaped_space(line: &str) -> bool {
    line.trim_start_matches(is_unicode_space)
        .strip_prefix('\\')
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(is_unicode_space))
}

/// The value of a raw string `#"…"#` or `#"""…"""#`, with any number of `#`.
fn raw(text: &str) -> Option<String> {
    let hashes = text.bytes().take_while(|&b| b == b'#').count();
    let inner = text.get(hashes..text.len().checked_sub(hashes)?)?;
    if let Some(multi) = inner
        .strip_prefix("\"\"\"")
        .and_then(|s| s.strip_suffix("\"\"\""))
        && multi.starts_with(is_newline)
    {
        return multi_line(multi, true);
    }
    let body = inner.strip_prefix('"')?.strip_suffix('"')?;
    if body == "\"" || body.contains(is_newline) {
        return None;
    }
    Some(body.to_owned())
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;
    use std::path::{Path, PathBuf};

    use kdl::KdlDocument;
    use proptest::prelude::*;

    use super::super::lexer::tokenize;

    /// Everything the decoder reads from a document, spans included, as text.
    fn dump(document: &KdlDocument) -> String {
        let mut out = String::new();
        dump_into(document, 0, &mut out);
        out
    }

    fn dump_into(document: &KdlDocument, depth: usize, out: &mut String) {
        let pad = "  ".repeat(depth);
        let span = document.span();
        let _ = writeln!(out, "{pad}document {}+{}", span.offset(), span.len());
        for node in document.nodes() {
            let (name, span) = (node.name(), node.span());
            let _ = writeln!(
                out,
                "{pad}node {:?} at {}+{} repr {:?} ty {:?}, span {}+{}",
                name.value(),
                name.span().offset(),
                name.span().len(),
                name.repr(),
                node.ty()
                    .map(|t| (t.value(), t.span().offset(), t.span().len())),
                span.offset(),
                span.len()
            );
            for entry in node.entries() {
                let _ = writeln!(
                    out,
                    "{pad}  entry {:?} = {:?} repr {:?} ty {:?}, span {}+{}",
                    entry
                        .name()
                        .map(|n| (n.value(), n.span().offset(), n.span().len())),
                    entry.value(),
                    entry.format().map(|f| &f.value_repr),
                    entry.ty().map(|t| t.value()),
                    entry.span().offset(),
                    entry.span().len()
                );
            }
            if let Some(children) = node.children() {
                dump_into(children, depth + 1, out);
            }
        }
    }

    /// Parses with both parsers; when the fast one answers, the kdl crate must agree exactly.
    /// Says whether the fast parser answered.
    fn agree(src: &str) -> bool {
        let Ok(fast) = super::parse(src, &tokenize(src)) else {
            return false;
        };
        match KdlDocument::parse_v2(src) {
            Ok(reference) => {
                assert_eq!(
                    dump(&fast),
                    dump(&reference),
                    "different documents for {src:?}"
                );
            }
            Err(e) => panic!("the fast parser accepted what kdl rejects: {src:?}\n{e:?}"),
        }
        true
    }

    fn rejects(src: &str) {
        assert!(
            super::parse(src, &tokenize(src)).is_err(),
            "the fast parser should leave {src:?} to the kdl crate"
        );
    }

    #[test]
    fn agrees_on_every_construct_it_accepts() {
        let cases = [
            "",
            "a",
            "a\n",
            "a;b;c",
            "a 1 2.5 -3 +4 0x1F 0o17 0b101 1_000 1e3 1.5E-2 -0.0 0X1f",
            "a #true #false #null #inf #-inf #nan",
            "a \"x\" \"esc \\\" \\\\ \\n \\t \\s \\b \\f \\r \\u{1F600} \\u{41}\"",
            "a #\"raw \\n\"# ##\"with \"# inside\"## #\"\"#",
            "a key=1 \"quoted key\"=2 k = 3 k=(t)4 (u)5 (u) 6",
            "(ty)node; (\"quoted ty\")other",
            "\"quoted name\" 1; #\"raw name\"# 2",
            "a {\n  b\n  c 1 { d; }\n}\n",
            "a { b }",
            "a{b}",
            "a {}",
            "a { }",
            "a {\n}\n",
            "a /- 1 2 /- k=v",
            "/- a\nb",
            "/-a 1 { x }\nb",
            "a /- { x } { y }",
            "a { y } /- { x }",
            "a { b; /- c }",
            "a { /- b }",
            "a 1 \\\n  2",
            "a 1 \\ // comment\n  2",
            "a /* c */ 1 /* d */ ; b",
            "a 1 // comment\nb",
            "// only a comment",
            "a\r\nb\r\n",
            "a \"\"\"\n  line one\n\n    indented\n  \"\"\"",
            "a \"\"\"\n\"\"\"",
            "a \"\"\"\n  x\n   \n  \"\"\"",
            "a #\"\"\"\n  raw \\d+ \"quoted\"\n  \"\"\"#",
            "a ##\"\"\"\n\t\tx\n\t\t\"\"\"##",
            "a - + . -. .a -a +b a.b",
            "a é 日本 \"ü\"",
            "a\u{2028}b",
            "a\u{00A0}1",
            "pipeline \"x\" max-parallel=2 { // hi\n    phase  a  (t)\"b\" c=1 /- d=2 e= 0x1F {\n        x; y 1.5e3\n    } ;\n}\n",
        ];
        for case in cases {
            assert!(agree(case), "the fast parser should accept {case:?}");
        }
    }

    #[test]
    fn leaves_malformed_and_unusual_input_to_the_kdl_crate() {
        for case in [
            "a {",
            "a }",
            "}",
            "a \"unterminated",
            "a 1.",
            "a 1e",
            "a .5",
            "a 0x",
            "a 1abc",
            "a true",
            "a #yes",
            "a=1",
            "a b=c=d",
            "a 1=2",
            "a\"b\"",
            "a /-",
            "a {} b",
            "a; ; b",
            "/- a; b",
            "a { /- b; c }",
            "a \"x \\   y\"",
            "a \"\"\"x\"\"\"",
            "a \"\"\"\n  x\n y\n  \"\"\"",
            "a \"\"\"\n  \\n\n  \"\"\"",
            "a 170141183460469231731687303715884105728",
            "\u{FEFF}a",
            "a \u{7}",
            "a [1]",
        ] {
            rejects(case);
        }
    }

    /// The KDL specification's test suite, shipped with the kdl crate's source.
    fn spec_cases() -> Vec<PathBuf> {
        let home = std::env::var_os("CARGO_HOME").map_or_else(
            || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo"),
            PathBuf::from,
        );
        let registry = home.join("registry").join("src");
        let mut found = Vec::new();
        for index in std::fs::read_dir(&registry).expect("the cargo registry exists") {
            let input = index
                .expect("readable registry")
                .path()
                .join(format!("kdl-{}", kdl_version()))
                .join("tests/test_cases/input");
            if let Ok(entries) = std::fs::read_dir(&input) {
                found.extend(entries.map(|e| e.expect("readable test case").path()));
                break;
            }
        }
        found.sort();
        found
    }

    /// The version of the kdl crate this build uses, from Cargo.lock.
    fn kdl_version() -> String {
        let lock =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
                .expect("Cargo.lock is readable");
        let at = lock
            .find("name = \"kdl\"\nversion = \"")
            .expect("kdl is locked");
        let rest = &lock[at + "name = \"kdl\"\nversion = \"".len()..];
        rest[..rest.find('"').expect("closing quote")].to_owned()
    }

    #[test]
    fn agrees_with_the_kdl_crate_on_the_specification_test_suite() {
        let cases = spec_cases();
        assert!(
            cases.len() > 100,
            "the KDL test suite was not found in the cargo registry ({} files)",
            cases.len()
        );
        let mut accepted = 0;
        for path in &cases {
            let src = std::fs::read_to_string(path).expect("readable test case");
            if agree(&src) {
                accepted += 1;
            }
        }
        // Most valid cases take the fast path; the rest exercise unusual corners on purpose.
        assert!(
            accepted > cases.len() / 3,
            "only {accepted} of {} accepted",
            cases.len()
        );
    }

    /// Every pipeline in the repository: examples and lint fixtures.
    fn corpus() -> &'static [String] {
        static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        CORPUS.get_or_init(read_corpus)
    }

    fn read_corpus() -> Vec<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut folders = vec![root.join("examples"), root.join("tests/fixtures")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).expect("readable folder") {
                let path = entry.expect("readable entry").path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "kdl") {
                    files.push(std::fs::read_to_string(&path).expect("readable pipeline"));
                }
            }
        }
        files
    }

    #[test]
    fn takes_the_fast_path_on_every_valid_example_and_fixture() {
        let corpus = corpus();
        assert!(corpus.len() > 50, "{} files", corpus.len());
        for src in corpus {
            let valid = KdlDocument::parse_v2(src).is_ok();
            let fast = agree(src);
            assert!(
                fast || !valid || src.contains('\\'),
                "a valid pipeline did not take the fast path:\n{src}"
            );
        }
    }

    /// Random documents built from KDL's pieces: values of every kind, properties, type
    /// annotations, comments, slashdashes, line continuations and children blocks, with a
    /// sprinkling of pieces out of place.
    fn document() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just("1".to_owned()),
            Just("-0x1f".to_owned()),
            Just("0o17".to_owned()),
            Just("0b1_0".to_owned()),
            Just("1_000.5e-3".to_owned()),
            Just("+2.0".to_owned()),
            Just("#true".to_owned()),
            Just("#null".to_owned()),
            Just("#-inf".to_owned()),
            Just("bare".to_owned()),
            Just("-dash".to_owned()),
            Just(".dot".to_owned()),
            Just("\"quoted \\\"x\\\" \\u{e9}\"".to_owned()),
            Just("\"\"".to_owned()),
            Just("#\"raw \\d\"#".to_owned()),
            Just("##\"a \"# b\"##".to_owned()),
            Just("\"\"\"\n  one\n\n    two\n  \"\"\"".to_owned()),
            Just("#\"\"\"\n\tx\\y\n\t\"\"\"#".to_owned()),
            Just("\"\"\"\n\"\"\"".to_owned()),
            Just("(ty)1".to_owned()),
            Just("(\"t y\") \"v\"".to_owned()),
            "[a-z]{1,3}",
        ];
        let space = prop_oneof![
            Just(" ".to_owned()),
            Just("  ".to_owned()),
            Just("\t".to_owned()),
            Just(" /* c */ ".to_owned()),
            Just(" \\\n  ".to_owned()),
            Just(" \\ // c\n ".to_owned()),
            Just("".to_owned()),
        ];
        let entry = prop_oneof![
            value.clone(),
            (value.clone(), value.clone()).prop_map(|(k, v)| format!("{k}={v}")),
            ("[a-z]{1,3}", value.clone()).prop_map(|(k, v)| format!("{k} = {v}")),
            value.clone().prop_map(|v| format!("/-{v}")),
            value.clone().prop_map(|v| format!("/- {v}")),
            Just("=".to_owned()),
            Just("{".to_owned()),
            Just(";".to_owned()),
        ];
        let terminator = prop_oneof![
            Just("\n".to_owned()),
            Just(";".to_owned()),
            Just("; ".to_owned()),
            Just(" // end\n".to_owned()),
            Just("\r\n".to_owned()),
            Just("\n\n".to_owned()),
            Just("".to_owned()),
        ];
        let node = (
            prop_oneof![
                Just("node".to_owned()),
                Just("(t)node".to_owned()),
                Just("\"quoted name\"".to_owned()),
                Just("/- gone".to_owned()),
                Just("-".to_owned()),
            ],
            proptest::collection::vec((space.clone(), entry), 0..5),
            space,
            prop_oneof![
                Just(String::new()),
                Just("{}".to_owned()),
                Just("{ inner 1; }".to_owned()),
                Just("{\n    inner \"x\" k=#false\n    /- skipped { a }\n}".to_owned()),
                Just("/- { hidden } { shown }".to_owned()),
                Just("{ a } /- { b }".to_owned()),
            ],
            terminator,
        )
            .prop_map(|(name, entries, space, children, end)| {
                let mut out = name;
                for (space, entry) in entries {
                    out.push_str(&space);
                    out.push_str(&entry);
                }
                out.push_str(&space);
                out.push_str(&children);
                out.push_str(&end);
                out
            });
        proptest::collection::vec(node, 0..6).prop_map(|nodes| nodes.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Mutated pipelines: whatever the fast parser accepts, the kdl crate reads the same way.
        #[test]
        fn mutations_never_make_the_parsers_disagree(
            file in 0usize..1_000,
            edits in proptest::collection::vec((0usize..100_000, 0usize..24, 0u8..4), 1..6),
        ) {
            let corpus = corpus();
            let mut src = corpus[file % corpus.len()].clone();
            const PIECES: [&str; 24] = [
                "{", "}", ";", "\n", " ", "=", "/-", "\"", "#", "(t)", "\\", "//", "/*", "*/",
                "1", "-", ".", "e", "0x", "_", "\"\"\"", "#\"", "\"#", "\r",
            ];
            for (at, piece, op) in edits {
                let mut at = at % (src.len() + 1);
                while !src.is_char_boundary(at) {
                    at -= 1;
                }
                match op {
                    0 => src.insert_str(at, PIECES[piece]),
                    1 => {
                        let end = src[at..].char_indices().nth(1).map_or(src.len(), |(i, _)| at + i);
                        src.replace_range(at..end, "");
                    }
                    2 => {
                        let end = src[at..].find('\n').map_or(src.len(), |i| at + i);
                        let dup = src[at..end].to_owned();
                        src.insert_str(at, &dup);
                    }
                    _ => {
                        let end = src[at..].char_indices().nth(1).map_or(src.len(), |(i, _)| at + i);
                        src.replace_range(at..end, PIECES[piece]);
                    }
                }
            }
            agree(&src);
        }

        /// Random documents: whatever the fast parser accepts, the kdl crate reads the same way.
        #[test]
        fn random_documents_never_make_the_parsers_disagree(src in document()) {
            agree(&src);
        }
    }
}
