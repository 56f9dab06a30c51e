//! What the front end reads at most, in one place. A pipeline file and the files it imports are
//! measured against these limits before anything is parsed, by one streaming pass of the lexer
//! that keeps nothing, so that any input gets a bounded answer in bounded time and memory: `lint`,
//! `fmt`, `compile`, `run`, `status`, `check` and the language server alike. The README lists
//! them.
//!
//! The limits sit far above real pipelines: a generated 1,000-phase pipeline
//! (`bench/gen_pipeline.py 1000`) is 348 KB with about 9,000 nodes and 12,000 entries, 609 KB once
//! each phase counts the template and `defaults` it takes; a 1,000-step DAG (`bench/gen_dag.py`)
//! is 81 KB with 4,000 nodes. What they bound is the parsed tree, about a kilobyte a node, the
//! model, and the time spent checking them: the worst files inside them take under 100 MB
//! (`bench/hostile.sh`).

use std::time::Duration;

use super::lexer::{self, TokenKind};
use crate::diagnostics::{Diagnostic, FileId, Span, rules};

/// The largest pipeline file read, in bytes, its imports included: a file over it is refused
/// before it is parsed (HF005), and only this much of it (and one byte more) is read at all.
pub(crate) const MAX_BYTES: usize = 2 << 20;

/// The most nodes in a pipeline file and its imports together (children and nodes commented out
/// with `/-` included).
pub(crate) const MAX_NODES: usize = 50_000;

/// The most entries (arguments and properties) in a pipeline file and its imports together.
pub(crate) const MAX_ENTRIES: usize = 100_000;

/// The deepest block nesting parsed; real pipelines need four or five levels.
pub(crate) const MAX_NESTING: usize = 64;

/// The largest file the `kdl` crate's parser is given (for files that are not plain well-formed
/// KDL, to report their syntax errors): its error recovery takes time and memory in proportion to
/// the errors (a 120 KB file of `a{}a{}…` took 125 MB), and it recurses on runs of punctuation
/// (twenty thousand `/-` in a row overflowed a 64 MiB stack); 64 KB of `a=a=…` took 94 MB.
/// Larger files are read only when they are plain well-formed KDL, which takes one linear pass;
/// about 90 phases of the generated benchmark pipelines fit.
pub(crate) const MAX_PARSER_BYTES: usize = 32 << 10;

/// The longest run of punctuation (braces, `;`, `=`, `/-`, `\`, parentheses) with no name or
/// value between that the `kdl` crate's parser is given; real pipelines close a few dozen
/// blocks at most.
pub(crate) const MAX_PUNCTUATION_RUN: usize = 1_000;

/// How long the KDL parser may take before the file is reported instead of parsed.
/// Measured in wall time, so it is generous: a valid 1 MiB file parses in about a second of CPU,
/// and a busy machine may stretch that several times.
pub(crate) const PARSE_BUDGET: Duration = Duration::from_secs(15);

/// The error of a loader asked for a file over [`MAX_BYTES`] (an import, a prompt file): a file
/// the front end does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge;

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the file is larger than {}, the limit for a pipeline file",
            size(MAX_BYTES)
        )
    }
}

impl std::error::Error for TooLarge {}

/// Whether a loader's error is [`TooLarge`].
pub(crate) fn is_too_large(error: &std::io::Error) -> bool {
    too_large(error).is_some()
}

fn too_large(error: &std::io::Error) -> Option<&TooLarge> {
    error.get_ref()?.downcast_ref()
}

/// A file a pipeline names (an import, a prompt file) that the loader refused as too large.
pub(crate) fn refused_file(what: &str, name: &str, span: Span) -> Diagnostic {
    Diagnostic::new(
        &rules::INPUT_LIMIT,
        span,
        format!(
            "{what} \"{name}\" is larger than {}, the limit for a file the pipeline reads",
            size(MAX_BYTES)
        ),
    )
    .label("not read")
    .help(HELP)
}

/// What one compilation may still read: the limits, less what its files so far took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Allowance {
    bytes: usize,
    nodes: usize,
    entries: usize,
}

impl Default for Allowance {
    fn default() -> Self {
        Self {
            bytes: MAX_BYTES,
            nodes: MAX_NODES,
            entries: MAX_ENTRIES,
        }
    }
}

impl Allowance {
    /// Measures `text` against what is left, and takes its share when it fits; a file that does
    /// not fit is refused with a finding that points at the first byte, node or entry too many.
    pub(crate) fn take(&mut self, text: &str, file: FileId) -> Result<(), Box<Diagnostic>> {
        if text.len() > self.bytes {
            return Err(Box::new(over_bytes(text, file, self.bytes)));
        }
        let counted = count(text, self.nodes, self.entries);
        if let Some(over) = counted.over {
            return Err(Box::new(over_count(text, file, over, self)));
        }
        self.bytes -= text.len();
        self.nodes -= counted.nodes;
        self.entries -= counted.entries;
        Ok(())
    }

    /// Takes the bytes a phase takes again from a template's or `defaults`' text and of the
    /// prompt files it read first: a phase built from a template counts as if the template were
    /// written out in it. (Their nodes are not counted again: a phase made from them holds no
    /// parsed tree, only the model, whose size follows the text's.) A phase that does not fit is
    /// refused with a finding at `span`, its name.
    pub(crate) fn take_again(&mut self, bytes: usize, span: Span) -> Result<(), Box<Diagnostic>> {
        if bytes > self.bytes {
            let message = format!(
                "with this phase, the pipeline is over its limit of {}: each phase counts the \
                 text of the template and `defaults` it takes as its own, and prompt files count \
                 too",
                size(MAX_BYTES)
            );
            return Err(Box::new(
                Diagnostic::new(&rules::INPUT_LIMIT, span, message)
                    .label("the first phase over the limit")
                    .help(HELP),
            ));
        }
        self.bytes -= bytes;
        Ok(())
    }

    /// Whether `text` alone fits the limits, for readers that keep no finding (the language
    /// server's view of a document).
    pub(crate) fn fits(text: &str) -> bool {
        Allowance::default().take(text, FileId(0)).is_ok()
    }
}

/// What was counted past a limit: a node or an entry, at this byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    Node(usize),
    Entry(usize),
}

/// Nodes and entries of a text, up to the first one past a limit.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counted {
    nodes: usize,
    entries: usize,
    over: Option<Over>,
}

/// Counts the nodes and entries of `text` in one pass of the lexer, stopping at the first one
/// past `max_nodes` or `max_entries`. A word (a bare word, a string or a `#keyword`) where a node
/// starts is a node; any other word is an entry, except the type in a `(type)` annotation and
/// the value after a property's `=` (the property counts once, at its key). The count is of
/// what the text says, whatever its syntax errors: it is never below what a parser would keep.
fn count(text: &str, max_nodes: usize, max_entries: usize) -> Counted {
    let mut counted = Counted::default();
    let mut node_start = true;
    let mut in_type = false;
    let mut after_equals = false;
    let mut continued = false;
    for token in lexer::tokens(text) {
        match token.kind {
            TokenKind::Newline if continued => continued = false,
            TokenKind::Newline
            | TokenKind::Semicolon
            | TokenKind::OpenBrace
            | TokenKind::CloseBrace => {
                node_start = true;
                (in_type, after_equals, continued) = (false, false, false);
            }
            TokenKind::Continuation => continued = true,
            TokenKind::OpenParen => in_type = true,
            TokenKind::CloseParen => in_type = false,
            TokenKind::Equals => after_equals = true,
            TokenKind::Bare
            | TokenKind::String { .. }
            | TokenKind::MultiLineString { .. }
            | TokenKind::RawString { .. }
            | TokenKind::Keyword => {
                if in_type {
                    continue;
                }
                if node_start {
                    node_start = false;
                    counted.nodes += 1;
                    if counted.nodes > max_nodes {
                        counted.over = Some(Over::Node(token.start));
                        break;
                    }
                } else if after_equals {
                    after_equals = false;
                } else {
                    counted.entries += 1;
                    if counted.entries > max_entries {
                        counted.over = Some(Over::Entry(token.start));
                        break;
                    }
                }
            }
            TokenKind::Whitespace
            | TokenKind::LineComment
            | TokenKind::BlockComment { .. }
            | TokenKind::Slashdash
            | TokenKind::Invalid => {}
        }
    }
    counted
}

/// The help of every refusal.
const HELP: &str = "Move agents and templates into a smaller imported file and build phases from \
                    templates, split the work into several pipelines, or check that this is the \
                    pipeline file you meant; `helixflow explain HF005` lists the limits.";

fn over_bytes(text: &str, file: FileId, left: usize) -> Diagnostic {
    let mut at = left.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let message = if left == MAX_BYTES {
        format!(
            "the file is larger than {}, the limit for a pipeline file",
            size(MAX_BYTES)
        )
    } else {
        format!(
            "the file is larger than the {} left of the {} limit, which the files before it \
             took; a pipeline file and its imports share the limit",
            size(left),
            size(MAX_BYTES)
        )
    };
    Diagnostic::new(&rules::INPUT_LIMIT, Span::new(file, at, 0), message)
        .label("not read past here")
        .help(HELP)
}

fn over_count(text: &str, file: FileId, over: Over, left: &Allowance) -> Diagnostic {
    let (offset, what, limit, left, label) = match over {
        Over::Node(offset) => (
            offset,
            "nodes",
            MAX_NODES,
            left.nodes,
            "the first node over the limit",
        ),
        Over::Entry(offset) => (
            offset,
            "entries",
            MAX_ENTRIES,
            left.entries,
            "the first entry over the limit",
        ),
    };
    let len = text[offset..].chars().next().map_or(0, char::len_utf8);
    let message = if left == limit {
        format!(
            "the file has more than {} {what}, the limit for a pipeline file",
            thousands(limit)
        )
    } else {
        format!(
            "the file has more than the {} {what} left of the limit of {}, which the files \
             before it took; a pipeline file and its imports share the limit",
            thousands(left),
            thousands(limit)
        )
    };
    Diagnostic::new(&rules::INPUT_LIMIT, Span::new(file, offset, len), message)
        .label(label)
        .help(HELP)
}

/// `4 MiB`, or a count of bytes.
fn size(bytes: usize) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} bytes", thousands(bytes))
    }
}

/// `50,000`.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(text: &str) -> (usize, usize) {
        let counted = count(text, usize::MAX, usize::MAX);
        (counted.nodes, counted.entries)
    }

    #[test]
    fn counts_nodes_and_entries_as_kdl_has_them() {
        assert_eq!(counts(""), (0, 0));
        assert_eq!(counts("a"), (1, 0));
        assert_eq!(counts("a 1 \"two\" #true key=\"v\"\n"), (1, 4));
        assert_eq!(counts("(t)a (u)1 k=(v)2"), (1, 2));
        assert_eq!(counts("a { b; c 1; }; d\n/- e { f }"), (6, 1));
        assert_eq!(counts("a 1 \\\n  2\nb"), (2, 2));
        assert_eq!(
            counts("// a 1\n/* b 2 */ c #\"raw\"# \"\"\"\nx\n\"\"\""),
            (1, 2)
        );
    }

    #[test]
    fn stops_at_the_first_node_or_entry_past_a_limit() {
        let counted = count("a; b; c; d", 2, 10);
        assert_eq!(counted.over, Some(Over::Node(6)));
        let counted = count("a 1 2 3", 10, 2);
        assert_eq!(counted.over, Some(Over::Entry(6)));
    }

    #[test]
    fn a_compilation_shares_one_allowance() {
        let mut allowance = Allowance {
            bytes: 100,
            nodes: 3,
            entries: 100,
        };
        allowance.take("a; b", FileId(0)).unwrap();
        let refused = allowance.take("c; d", FileId(1)).unwrap_err();
        assert_eq!(refused.span, Span::new(FileId(1), 3, 1));
        assert!(
            refused.message.contains("the 1 nodes left"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_file_over_the_size_limit_is_refused_at_a_character_boundary() {
        let text = format!("{}é", "a".repeat(MAX_BYTES - 1));
        let refused = Allowance::default().take(&text, FileId(0)).unwrap_err();
        assert_eq!(refused.span.offset, MAX_BYTES - 1);
        assert_eq!(refused.rule.code, "HF005");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(size(MAX_BYTES), "2 MiB");
    }
}
