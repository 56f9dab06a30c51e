//! A lossless lexer for KDL v2 text, used to screen a file before it reaches the KDL parser, and by
//! the formatter.
//!
//! Every byte of the input belongs to exactly one token, so concatenating the tokens' text gives the
//! input back. The lexer never fails: text that is not KDL becomes [`TokenKind::Invalid`] or a bare
//! token, and a string or comment that is never closed becomes one token flagged as unterminated.
//! Single-line strings (`"…"`, `#"…"#`) cannot contain a newline in KDL v2, so an unterminated one
//! stops at the end of its line; multi-line strings and block comments run to the end of the input.
//!
//! It runs in linear time: every scan moves forward, and the longest look-ahead (a closing `"""`
//! followed by the raw string's `#`s) only reads characters that belong to the closing delimiter.

use crate::diagnostics::rules::UNBALANCED_BRACES;
use crate::diagnostics::{Diagnostic, FileId, Span};

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// Spaces, tabs, the other Unicode spaces and the byte order mark.
    Whitespace,
    /// One line break: `\n`, `\r\n`, `\r`, or one of KDL's other newline characters.
    Newline,
    /// `// …` up to, not including, the line break.
    LineComment,
    /// `/* … */`, nested comments included.
    BlockComment {
        /// Whether the closing `*/` was found.
        terminated: bool,
    },
    /// `/-`, which comments out the next node, entry or child block.
    Slashdash,
    /// `{`
    OpenBrace,
    /// `}`
    CloseBrace,
    /// `;`
    Semicolon,
    /// `=`
    Equals,
    /// `(`, opening a type annotation.
    OpenParen,
    /// `)`, closing a type annotation.
    CloseParen,
    /// `\` outside a string, continuing a node on the next line.
    Continuation,
    /// `"…"`, escapes included.
    String {
        /// Whether the closing quote was found.
        terminated: bool,
    },
    /// `"""` newline … `"""`.
    MultiLineString {
        /// Whether the closing quotes were found.
        terminated: bool,
    },
    /// `#"…"#` or `#"""` newline … `"""#`, with any number of `#`.
    RawString {
        /// Whether the closing quote and `#`s were found.
        terminated: bool,
    },
    /// `#true`, `#false`, `#null`, `#inf`, `#-inf`, `#nan` (or any other `#word`, which is invalid).
    Keyword,
    /// An identifier or a number: everything up to the next delimiter.
    Bare,
    /// A character that starts no token, such as `[` or a lone `/`.
    Invalid,
}

impl TokenKind {
    /// Whether this is a string or comment whose closing delimiter is missing.
    pub(crate) fn is_unterminated(self) -> bool {
        match self {
            TokenKind::BlockComment { terminated }
            | TokenKind::String { terminated }
            | TokenKind::MultiLineString { terminated }
            | TokenKind::RawString { terminated } => !terminated,
            _ => false,
        }
    }
}

/// One token: its kind and its byte range in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    /// What the token is.
    pub(crate) kind: TokenKind,
    /// Byte offset of the first byte.
    pub(crate) start: usize,
    /// Byte offset one past the last byte.
    pub(crate) end: usize,
}

impl Token {
    /// The token's text in `src`, the text it was lexed from.
    pub(crate) fn text(self, src: &str) -> &str {
        src.get(self.start..self.end).unwrap_or_default()
    }
}

/// Splits `src` into tokens that cover it completely, in order.
pub(crate) fn tokenize(src: &str) -> Vec<Token> {
    tokens(src).collect()
}

/// The tokens of `src` one by one, for a pass that need not keep them.
pub(crate) fn tokens(src: &str) -> impl Iterator<Item = Token> + '_ {
    let mut lexer = Lexer { src, pos: 0 };
    std::iter::from_fn(move || {
        if lexer.pos >= src.len() {
            return None;
        }
        let start = lexer.pos;
        let kind = lexer.next_kind();
        Some(Token {
            kind,
            start,
            end: lexer.pos,
        })
    })
}

/// Checks that braces outside strings and comments balance, and reports every `{` that is never
/// closed and every `}` that closes nothing.
///
/// The KDL parser's error recovery takes exponential time on some unbalanced inputs (a slashdashed
/// `{` that is never closed, repeated), so callers run this first and skip the parser when it
/// reports anything.
#[cfg(test)]
pub(crate) fn screen(src: &str, file: FileId) -> Vec<Diagnostic> {
    screen_tokens(src, &tokenize(src), file)
}

/// Checks brace balance over tokens the caller already has (see `screen`).
pub(crate) fn screen_tokens(src: &str, tokens: &[Token], file: FileId) -> Vec<Diagnostic> {
    let mut open: Vec<OpenBrace> = Vec::new();
    let mut found = Vec::new();
    let mut node_start = None;
    // Strings and comments never closed: each hides any `}` after it (on its line, for a
    // single-line string; to the end of the file otherwise).
    let unterminated: Vec<&Token> = tokens.iter().filter(|t| t.kind.is_unterminated()).collect();
    for token in tokens {
        match token.kind {
            TokenKind::OpenBrace => {
                open.push(OpenBrace {
                    offset: token.start,
                    node_start,
                });
                node_start = None;
            }
            TokenKind::CloseBrace => {
                if open.pop().is_none() {
                    found.push(extra_close(file, token.start));
                }
                node_start = None;
            }
            TokenKind::Semicolon | TokenKind::Newline => node_start = None,
            kind if is_trivia(kind) || kind == TokenKind::Continuation => {}
            _ => {
                node_start.get_or_insert(*token);
            }
        }
    }
    found.extend(open.into_iter().map(|brace| {
        let swallowed = unterminated.iter().find(|t| t.start > brace.offset);
        never_closed(src, file, &brace, swallowed.copied())
    }));
    found.sort_by_key(|d| d.span.offset);
    found
}

/// A `{` still waiting for its `}`, and the first token of the node it belongs to.
struct OpenBrace {
    offset: usize,
    node_start: Option<Token>,
}

fn never_closed(
    src: &str,
    file: FileId,
    brace: &OpenBrace,
    swallowed: Option<&Token>,
) -> Diagnostic {
    let mut diagnostic = Diagnostic::new(
        &UNBALANCED_BRACES,
        Span::new(file, brace.offset, 1),
        "this `{` is never closed",
    )
    .label("never closed")
    .help("Add a `}` after the last child of this block, or remove the `{`.");
    if let Some(start) = brace.node_start {
        diagnostic = diagnostic.note(
            Span::new(file, start.start, start.end - start.start),
            "the block belongs to the node that starts here",
        );
    }
    if let Some(token) = swallowed {
        // An unclosed string or comment hides the `}` after it; that is the likelier mistake.
        let what = match token.kind {
            TokenKind::String { .. } => {
                "this string is never closed, so the rest of its line is inside it"
            }
            TokenKind::RawString { .. } if !token.text(src).contains('\n') => {
                "this string is never closed, so the rest of its line is inside it"
            }
            TokenKind::BlockComment { .. } => {
                "this comment is never closed, so the rest of the file is inside it"
            }
            _ => "this string is never closed, so the rest of the file is inside it",
        };
        // Its opening (`"x`, `#"`, `/*`): the first two characters, never half of one.
        let text = token.text(src);
        let opening = text.char_indices().nth(2).map_or(text.len(), |(at, _)| at);
        diagnostic = diagnostic.note(Span::new(file, token.start, opening), what);
    }
    diagnostic
}

fn extra_close(file: FileId, offset: usize) -> Diagnostic {
    Diagnostic::new(
        &UNBALANCED_BRACES,
        Span::new(file, offset, 1),
        "this `}` closes nothing",
    )
    .label("no open `{` before it")
    .help("Remove this `}`, or add the `{` it was meant to close.")
}

/// Whether a token is only space between the tokens that carry meaning.
pub(crate) fn is_trivia(kind: TokenKind) -> bool {
    matches!(
        kind,
        TokenKind::Whitespace
            | TokenKind::Newline
            | TokenKind::LineComment
            | TokenKind::BlockComment { .. }
    )
}

/// KDL v2's newline characters other than `\r` and `\n`.
const OTHER_NEWLINES: [char; 5] = ['\u{0085}', '\u{000B}', '\u{000C}', '\u{2028}', '\u{2029}'];

/// KDL v2's `unicode-space` characters, plus the byte order mark.
const SPACES: [char; 19] = [
    '\u{0009}', '\u{0020}', '\u{00A0}', '\u{1680}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}',
    '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}', '\u{200A}', '\u{202F}',
    '\u{205F}', '\u{3000}', '\u{FEFF}',
];

fn is_newline(c: char) -> bool {
    // Most characters are ASCII: answered without a search of the lists.
    if c.is_ascii() {
        return matches!(c, '\n' | '\r' | '\u{000B}' | '\u{000C}');
    }
    OTHER_NEWLINES.contains(&c)
}

fn is_space(c: char) -> bool {
    if c.is_ascii() {
        return c == ' ' || c == '\t';
    }
    SPACES.contains(&c)
}

/// Characters that end a bare token (KDL v2 forbids them in identifiers).
fn is_delimiter(c: char) -> bool {
    is_space(c)
        || is_newline(c)
        || matches!(
            c,
            '\\' | '/' | '(' | ')' | '{' | '}' | '[' | ']' | ';' | '"' | '#' | '='
        )
}

struct Lexer<'a> {
    src: &'a str,
    /// Always on a character boundary: every step advances by whole characters, or by ASCII bytes.
    pos: usize,
}

impl Lexer<'_> {
    fn rest(&self) -> &str {
        self.src.get(self.pos..).unwrap_or_default()
    }

    fn peek(&self) -> Option<char> {
        // An ASCII byte at a character boundary is that character; others are decoded.
        match self.src.as_bytes().get(self.pos) {
            Some(&byte) if byte.is_ascii() => Some(char::from(byte)),
            Some(_) => self.rest().chars().next(),
            None => None,
        }
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek() {
            self.pos += c.len_utf8();
        }
    }

    fn eat(&mut self, prefix: &str) -> bool {
        let found = self.rest().starts_with(prefix);
        if found {
            self.pos += prefix.len();
        }
        found
    }

    fn bump_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.bump();
        }
    }

    /// Consumes one token starting at `pos` (which is before the end) and says what it was.
    fn next_kind(&mut self) -> TokenKind {
        let Some(c) = self.peek() else {
            // Unreachable while `pos` stays on a character boundary; taking the rest guarantees
            // progress all the same.
            self.pos = self.src.len();
            return TokenKind::Invalid;
        };
        if self.eat("\r\n") {
            return TokenKind::Newline;
        }
        if is_newline(c) {
            self.bump();
            return TokenKind::Newline;
        }
        if is_space(c) {
            self.bump_while(is_space);
            return TokenKind::Whitespace;
        }
        if self.eat("//") {
            self.bump_while(|c| !is_newline(c));
            return TokenKind::LineComment;
        }
        if self.eat("/*") {
            return self.block_comment();
        }
        if self.eat("/-") {
            return TokenKind::Slashdash;
        }
        if self.eat("\"\"\"") {
            return self.multi_line_string();
        }
        if self.eat("\"") {
            return self.string();
        }
        if c == '#' {
            return self.hash();
        }
        self.bump();
        match c {
            '{' => TokenKind::OpenBrace,
            '}' => TokenKind::CloseBrace,
            ';' => TokenKind::Semicolon,
            '=' => TokenKind::Equals,
            '(' => TokenKind::OpenParen,
            ')' => TokenKind::CloseParen,
            '\\' => TokenKind::Continuation,
            '/' | '[' | ']' => TokenKind::Invalid,
            _ => {
                self.bump_while(|c| !is_delimiter(c));
                TokenKind::Bare
            }
        }
    }

    /// After `/*`: up to the matching `*/`, counting nested comments.
    fn block_comment(&mut self) -> TokenKind {
        let mut depth = 1_usize;
        while self.pos < self.src.len() {
            if self.eat("*/") {
                depth -= 1;
                if depth == 0 {
                    return TokenKind::BlockComment { terminated: true };
                }
            } else if self.eat("/*") {
                depth += 1;
            } else {
                self.bump();
            }
        }
        TokenKind::BlockComment { terminated: false }
    }

    /// After `"`: up to the closing quote, or to the end of the line when there is none.
    fn string(&mut self) -> TokenKind {
        while let Some(c) = self.peek() {
            if c == '"' {
                self.bump();
                return TokenKind::String { terminated: true };
            }
            if is_newline(c) {
                break;
            }
            if c == '\\' {
                self.escape();
            } else {
                self.bump();
            }
        }
        TokenKind::String { terminated: false }
    }

    /// After `"""`: up to the closing `"""`.
    fn multi_line_string(&mut self) -> TokenKind {
        while let Some(c) = self.peek() {
            if self.eat("\"\"\"") {
                return TokenKind::MultiLineString { terminated: true };
            }
            if c == '\\' {
                self.escape();
            } else {
                self.bump();
            }
        }
        TokenKind::MultiLineString { terminated: false }
    }

    /// At a `\` inside a string: the escape, where `\` followed by whitespace swallows all of it,
    /// line breaks included.
    fn escape(&mut self) {
        self.bump();
        match self.peek() {
            Some(c) if is_space(c) || is_newline(c) => {
                self.bump_while(|c| is_space(c) || is_newline(c));
            }
            _ => self.bump(),
        }
    }

    /// At `#`: a raw string when the `#`s are followed by a quote, else a keyword such as `#true`.
    fn hash(&mut self) -> TokenKind {
        let start = self.pos;
        self.bump_while(|c| c == '#');
        let hashes = self.pos - start;
        if !self.eat("\"") {
            self.bump_while(|c| !is_delimiter(c));
            return TokenKind::Keyword;
        }
        // Like the KDL parser: `"""` opens a multi-line raw string only when a newline follows.
        let after_quotes = self.rest().strip_prefix("\"\"");
        let multi_line = after_quotes
            .and_then(|rest| rest.chars().next())
            .is_some_and(is_newline);
        if multi_line {
            self.pos += 2;
            self.raw_body("\"\"\"", hashes, true)
        } else {
            self.raw_body("\"", hashes, false)
        }
    }

    /// A raw string's body, up to `quotes` followed by `hashes` `#`s.
    fn raw_body(&mut self, quotes: &str, hashes: usize, multi_line: bool) -> TokenKind {
        while let Some(c) = self.peek() {
            if self.rest().starts_with(quotes) {
                let after = &self.rest()[quotes.len()..];
                let found = after
                    .bytes()
                    .take(hashes)
                    .take_while(|&b| b == b'#')
                    .count();
                if found == hashes {
                    self.pos += quotes.len() + hashes;
                    return TokenKind::RawString { terminated: true };
                }
            }
            if !multi_line && is_newline(c) {
                break;
            }
            self.bump();
        }
        TokenKind::RawString { terminated: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(TokenKind, &str)> {
        tokenize(src)
            .into_iter()
            .map(|t| (t.kind, t.text(src)))
            .collect()
    }

    fn significant(src: &str) -> Vec<(TokenKind, &str)> {
        kinds(src)
            .into_iter()
            .filter(|(k, _)| !is_trivia(*k))
            .collect()
    }

    fn assert_lossless(src: &str) {
        let tokens = tokenize(src);
        let mut at = 0;
        for token in &tokens {
            assert_eq!(token.start, at, "gap or overlap in {src:?}: {tokens:?}");
            assert!(
                token.end > token.start,
                "empty token in {src:?}: {tokens:?}"
            );
            at = token.end;
        }
        assert_eq!(at, src.len());
        let joined: String = tokens.iter().map(|t| t.text(src)).collect();
        assert_eq!(joined, src);
    }

    #[test]
    fn lexes_every_token_kind() {
        use TokenKind::*;
        let src = "(t)node a=1 #true #-inf /-x {\n  // c\n  b; /* c /* n */ */ } \\\n\u{3000}";
        assert_eq!(
            kinds(src),
            vec![
                (OpenParen, "("),
                (Bare, "t"),
                (CloseParen, ")"),
                (Bare, "node"),
                (Whitespace, " "),
                (Bare, "a"),
                (Equals, "="),
                (Bare, "1"),
                (Whitespace, " "),
                (Keyword, "#true"),
                (Whitespace, " "),
                (Keyword, "#-inf"),
                (Whitespace, " "),
                (Slashdash, "/-"),
                (Bare, "x"),
                (Whitespace, " "),
                (OpenBrace, "{"),
                (Newline, "\n"),
                (Whitespace, "  "),
                (LineComment, "// c"),
                (Newline, "\n"),
                (Whitespace, "  "),
                (Bare, "b"),
                (Semicolon, ";"),
                (Whitespace, " "),
                (BlockComment { terminated: true }, "/* c /* n */ */"),
                (Whitespace, " "),
                (CloseBrace, "}"),
                (Whitespace, " "),
                (Continuation, "\\"),
                (Newline, "\n"),
                (Whitespace, "\u{3000}"),
            ]
        );
    }

    #[test]
    fn lexes_strings_with_escapes_and_raw_strings() {
        use TokenKind::*;
        let t = String { terminated: true };
        assert_eq!(
            significant(r#"a "x \" y""#),
            vec![(Bare, "a"), (t, r#""x \" y""#)]
        );
        assert_eq!(significant("\"a\\   \n  b\""), vec![(t, "\"a\\   \n  b\"")]);
        let raw = RawString { terminated: true };
        assert_eq!(
            significant(r###"##"a "# b"##"###),
            vec![(raw, r###"##"a "# b"##"###)]
        );
        assert_eq!(significant(r##"#"""#"##), vec![(raw, r##"#"""#"##)]);
        let src = "#\"\"\"\n  x \"\"\" \"#\n  \"\"\"#";
        assert_eq!(significant(src), vec![(raw, src)]);
        let src = "\"\"\"\n  a \\\"\"\" b\n  \"\"\"";
        assert_eq!(
            significant(src),
            vec![(MultiLineString { terminated: true }, src)]
        );
    }

    #[test]
    fn recognises_every_kdl_newline() {
        for newline in [
            "\n", "\r\n", "\r", "\u{85}", "\u{b}", "\u{c}", "\u{2028}", "\u{2029}",
        ] {
            let src = format!("a{newline}b");
            assert_eq!(kinds(&src)[1], (TokenKind::Newline, newline));
        }
    }

    #[test]
    fn unterminated_tokens_are_flagged() {
        let cases = [
            ("\"abc\nd", "\"abc"),
            ("#\"abc\nd", "#\"abc"),
            ("\"\"\"\nabc", "\"\"\"\nabc"),
            ("#\"\"\"\nabc\"\"\"", "#\"\"\"\nabc\"\"\""),
            ("/* a /* b */", "/* a /* b */"),
            ("\"a\\", "\"a\\"),
        ];
        for (src, first) in cases {
            let tokens = tokenize(src);
            assert!(tokens[0].kind.is_unterminated(), "{src:?}: {tokens:?}");
            assert_eq!(tokens[0].text(src), first);
            assert_lossless(src);
        }
    }

    #[test]
    fn is_lossless_on_odd_input() {
        let cases = [
            "",
            "\u{feff}a é \u{2028} ü=\"ö\" #\u{e9}",
            "/ / [ ] # ## #\"",
            "a\\",
            "\"\\\u{e9}\"",
            "/*/*/",
            "*/ }{ \r\r\n\n",
            "#\"\"\"\u{2028}x\"\"\"#",
            "\"\\",
            "é\"é\\é",
        ];
        for src in cases {
            assert_lossless(src);
        }
    }

    #[test]
    fn balanced_braces_report_nothing() {
        let src =
            "a { b { c } /-{ d } }\ne \"{\" #\"}\"# \"\"\"\n{\n\"\"\" // {\n/* { /* } */ { */ f";
        assert!(screen(src, FileId(0)).is_empty());
    }

    #[test]
    fn braces_inside_strings_and_comments_do_not_count() {
        let cases = [
            "a \"{\"",
            "a \"}\"",
            "a #\"{\"#",
            "a ##\"}\"#\"##",
            "a \"\"\"\n  {\n  \"\"\"",
            "a #\"\"\"\n  }\n  \"\"\"#",
            "a // {",
            "a /* { */",
            "a /* /* } */ { */",
            "a \"\\\"{\"",
        ];
        for src in cases {
            assert!(screen(src, FileId(0)).is_empty(), "{src:?}");
        }
    }

    #[test]
    fn an_unclosed_string_is_pointed_at_whole_characters() {
        let src = "a { b fix=\"\u{e9}\ncargo\"; }\n";
        let found = screen(src, FileId(0));
        let notes: Vec<_> = found
            .iter()
            .flat_map(|d| &d.notes)
            .map(|n| (n.span.offset, n.span.len))
            .collect();
        let quote = src.find('"').unwrap();
        // The quote and the two bytes of `é`: not the quote and half of `é`.
        assert!(notes.contains(&(quote, 3)), "{notes:?}");
        for (offset, len) in notes {
            assert!(src.is_char_boundary(offset) && src.is_char_boundary(offset + len));
        }
    }

    #[test]
    fn reports_each_unclosed_and_extra_brace() {
        let src = "a {\n  b {\n}\n}\n}\nc {";
        let found = screen(src, FileId(3));
        let offsets: Vec<_> = found.iter().map(|d| (d.span.offset, d.span.len)).collect();
        assert_eq!(offsets, vec![(14, 1), (18, 1)]);
        assert!(
            found
                .iter()
                .all(|d| d.rule.code == "HF002" && d.span.file == FileId(3))
        );
        assert_eq!(found[0].message, "this `}` closes nothing");
        assert_eq!(found[1].message, "this `{` is never closed");
        assert_eq!(found[1].notes[0].span, Span::new(FileId(3), 16, 1));
    }

    #[test]
    fn reports_sixteen_unclosed_slashdashed_blocks() {
        // The KDL parser needs seconds on this input, doubling with every line.
        let src = "a /-{\n".repeat(16);
        let found = screen(&src, FileId(0));
        assert_eq!(found.len(), 16);
        assert!(
            found
                .iter()
                .all(|d| d.message == "this `{` is never closed")
        );
        assert!(
            found
                .iter()
                .all(|d| &src[d.span.offset..d.span.end()] == "{")
        );
    }

    #[test]
    fn unclosed_comment_is_named_as_the_likely_cause() {
        let found = screen("a {\n/* b }", FileId(0));
        assert_eq!(found.len(), 1);
        assert!(found[0].notes.iter().any(|n| n.span.offset == 4));
    }

    #[test]
    fn is_linear_on_pathological_input() {
        let src = format!("{}{}", "#".repeat(50_000), "\"".repeat(50_000));
        assert_lossless(&src);
        let src = "/*".repeat(100_000);
        assert_lossless(&src);
    }

    proptest::proptest! {
        #[test]
        fn covers_any_input_without_gaps(src in "(\\PC|[\"#/*\\\\{}\r\n\u{2028}])*") {
            assert_lossless(&src);
            screen(&src, FileId(0));
        }
    }
}
