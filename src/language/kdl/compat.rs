//! Reading with the `kdl` crate where it lags the KDL v2 specification.
//!
//! The crate (6.7) still wants a space before a slashdash, as KDL v2.0.0 did. The specification
//! dropped that rule in January 2025 (kdl-org/kdl#499, test cases `zero_space_before_slashdash_*`):
//! `node "string"/-1` is valid, and means `node "string"`. So the crate is handed the text with one
//! space inserted before every slashdash that directly follows a name or a value, where the space
//! changes nothing the specification reads, and every span it gives back is mapped to the original
//! text. The inserted spaces can only show in the crate's formatting trivia (the text between
//! entries), which helixflow never reads.

use kdl::{KdlDocument, KdlError};
use miette::SourceSpan;

use super::lexer::{Token, TokenKind};

/// Parses `src`, already split into `tokens`, with the `kdl` crate, as the current KDL v2
/// specification reads it. (`parse::parse` does the same on a thread of its own, with a budget.)
#[cfg(test)]
pub(crate) fn parse_v2(src: &str, tokens: &[Token]) -> Result<KdlDocument, KdlError> {
    let spaced = Spaced::new(src, tokens);
    spaced.restore(KdlDocument::parse_v2(&spaced.text))
}

/// The text the `kdl` crate is given, and where it differs from the original.
pub(crate) struct Spaced {
    /// The original text, with a space before each slashdash that directly follows a name or value.
    pub(crate) text: String,
    /// The original offsets of those slashdashes, in order.
    inserted: Vec<usize>,
}

impl Spaced {
    /// Spaces out `src`, already split into `tokens`.
    pub(crate) fn new(src: &str, tokens: &[Token]) -> Self {
        let inserted: Vec<usize> = tokens
            .windows(2)
            .filter(|pair| {
                pair[1].kind == TokenKind::Slashdash
                    && pair[0].end == pair[1].start
                    && is_name_or_value(pair[0].kind)
            })
            .map(|pair| pair[1].start)
            .collect();
        if inserted.is_empty() {
            return Self {
                text: src.to_owned(),
                inserted,
            };
        }
        let mut text = String::with_capacity(src.len() + inserted.len());
        let mut from = 0;
        for &at in &inserted {
            text.push_str(&src[from..at]);
            text.push(' ');
            from = at;
        }
        text.push_str(&src[from..]);
        Self { text, inserted }
    }

    /// The crate's result with its spans in the original text.
    pub(crate) fn restore(
        &self,
        result: Result<KdlDocument, KdlError>,
    ) -> Result<KdlDocument, KdlError> {
        if self.inserted.is_empty() {
            return result;
        }
        match result {
            Ok(mut document) => {
                self.restore_document(&mut document);
                Ok(document)
            }
            Err(mut error) => {
                for diagnostic in &mut error.diagnostics {
                    diagnostic.span = self.span(diagnostic.span);
                }
                Err(error)
            }
        }
    }

    /// The original offset of an offset in the spaced text: an inserted space maps to the
    /// slashdash after it.
    fn original(&self, offset: usize) -> usize {
        // The i-th insertion (from 0) puts its space at `inserted[i] + i` in the spaced text.
        let before = self
            .inserted
            .iter()
            .enumerate()
            .take_while(|&(i, &at)| at + i < offset)
            .count();
        offset - before
    }

    fn span(&self, span: SourceSpan) -> SourceSpan {
        let start = self.original(span.offset());
        let end = self.original(span.offset() + span.len());
        SourceSpan::new(start.into(), end - start)
    }

    fn restore_document(&self, document: &mut KdlDocument) {
        document.set_span(self.span(document.span()));
        for node in document.nodes_mut() {
            node.set_span(self.span(node.span()));
            let name = node.name_mut();
            name.set_span(self.span(name.span()));
            if let Some(ty) = node.ty_mut() {
                ty.set_span(self.span(ty.span()));
            }
            for entry in node.entries_mut() {
                entry.set_span(self.span(entry.span()));
                if let Some(name) = entry.name_mut() {
                    name.set_span(self.span(name.span()));
                }
                if let Some(ty) = entry.ty_mut() {
                    ty.set_span(self.span(ty.span()));
                }
            }
            if let Some(children) = node.children_mut() {
                self.restore_document(children);
            }
        }
    }
}

/// Tokens after which a slashdash may follow with no space in KDL v2 (a name or a value); after
/// anything else (`(t)/-x`, `k=/-x`) the slashdash is invalid with or without one.
fn is_name_or_value(kind: TokenKind) -> bool {
    match kind {
        TokenKind::Bare | TokenKind::Keyword => true,
        TokenKind::String { terminated }
        | TokenKind::MultiLineString { terminated }
        | TokenKind::RawString { terminated } => terminated,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::kdl::lexer::tokenize;

    fn read(src: &str) -> Result<KdlDocument, KdlError> {
        parse_v2(src, &tokenize(src))
    }

    fn meaning(src: &str) -> String {
        let mut document = read(src).unwrap_or_else(|e| panic!("{src:?}: {e:?}"));
        document.autoformat_no_comments();
        document.to_string()
    }

    #[test]
    fn reads_a_slashdash_right_after_a_name_or_value() {
        // The KDL test cases `zero_space_before_slashdash_{arg,prop,children}`.
        assert_eq!(meaning("node \"string\"/-1"), meaning("node \"string\""));
        assert_eq!(
            meaning("node \"string\"/-foo=1"),
            meaning("node \"string\"")
        );
        assert_eq!(
            meaning("node \"string\"/-{}\nnode \"string\" {}/-{}"),
            meaning("node \"string\"\nnode \"string\" {}")
        );
        assert_eq!(
            meaning("node/-1 a/-2 #true/-3 k=1/-k=2 #\"r\"#/-4 \"a\\   b\"/-5 6"),
            meaning("node a #true k=1 #\"r\"# \"ab\" 6")
        );
        assert_eq!(meaning("a 1/-2/-3 4"), meaning("a 1 4"));
    }

    #[test]
    fn maps_every_span_back_to_the_original_text() {
        let src = "(t)node \"s\"/-1 k=(u)2/-x {\n  child/-\"c\" 3\n}/-{ gone }";
        let document = read(src).unwrap();
        let node = &document.nodes()[0];
        let text = |span: SourceSpan| &src[span.offset()..span.offset() + span.len()];
        assert_eq!(text(node.name().span()), "node");
        assert_eq!(text(node.ty().unwrap().span()), "t");
        let entries: Vec<_> = node.entries().iter().map(|e| text(e.span())).collect();
        assert_eq!(entries, ["\"s\"", "k=(u)2"]);
        assert_eq!(text(node.entries()[1].name().unwrap().span()), "k");
        let child = &node.children().unwrap().nodes()[0];
        assert_eq!(text(child.name().span()), "child");
        assert_eq!(text(child.entries()[0].span()), "3");
        assert!(text(node.span()).starts_with("(t)node"));
        assert!(text(node.span()).ends_with("/-{ gone }"));
    }

    #[test]
    fn keeps_rejecting_what_is_invalid_and_points_at_the_original_text() {
        for src in [
            "a (t)/-1",
            "a k=/-1",
            "(t)/-a",
            "a (t/-u)1",
            "a \"s\"/-",
            "a 1/-/-2",
        ] {
            assert!(read(src).is_err(), "{src:?}");
        }
        let src = "a \"s\"/-1 2/-3 4.";
        let error = read(src).unwrap_err();
        let at = src.find("4.").unwrap();
        assert!(
            error
                .diagnostics
                .iter()
                .all(|d| d.span.offset() + d.span.len() <= src.len()),
            "{error:?}"
        );
        assert!(
            error.diagnostics.iter().any(|d| d.span.offset() == at),
            "{:?}",
            error.diagnostics
        );
    }

    #[test]
    fn leaves_text_without_such_a_slashdash_alone() {
        for src in [
            "a /-1 2",
            "a {}/-{}",
            "/-a",
            "a; /-b",
            "a\n/-b",
            "a /*c*//-1",
        ] {
            let tokens = tokenize(src);
            assert_eq!(Spaced::new(src, &tokens).text, src);
        }
    }
}
