//! KDL text → `KdlDocument`, with every syntax error as a diagnostic, bounded in size and time.

use std::sync::mpsc;
use std::time::Duration;

use kdl::KdlDocument;

use super::{compat, fast, lexer};
use crate::diagnostics::{Diagnostic, FileId, Span, rules};

pub(crate) use super::limits::PARSE_BUDGET;
use super::limits::{Allowance, MAX_NESTING, MAX_PARSER_BYTES, MAX_PUNCTUATION_RUN};

/// The deepest `{` nesting outside strings and comments.
fn nesting_depth(tokens: &[lexer::Token]) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0;
    for token in tokens {
        match token.kind {
            lexer::TokenKind::OpenBrace => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            lexer::TokenKind::CloseBrace => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Why a file that is not plain well-formed KDL (the fast parser stopped at `stopped`) is not
/// given to the `kdl` crate's parser either: too large, or a run of punctuation it recurses on.
fn not_for_the_parser(
    text: &str,
    file: FileId,
    tokens: &[lexer::Token],
    stopped: usize,
) -> Option<Diagnostic> {
    if text.len() > MAX_PARSER_BYTES {
        let len = text[stopped..].chars().next().map_or(0, char::len_utf8);
        return Some(
            Diagnostic::new(
                &rules::PARSE_BUDGET,
                Span::new(file, stopped, len),
                format!(
                    "the file is {} bytes, and files over {MAX_PARSER_BYTES} bytes are read only \
                     when they are plain well-formed KDL; this one is not, from here on",
                    text.len()
                ),
            )
            .label("not read past here")
            .help(
                "Fix the syntax error here (under 32 KiB, the file would get a full report), or \
                 move agents and templates into imported files.",
            ),
        );
    }
    let (start, end, run) = punctuation_run(tokens)?;
    Some(
        Diagnostic::new(
            &rules::PARSE_BUDGET,
            Span::new(file, start, end - start),
            format!(
                "{run} marks of punctuation in a row with no name or value between them; the KDL \
                 parser is not given more than {MAX_PUNCTUATION_RUN}"
            ),
        )
        .label("this run")
        .help("Remove the repeated braces, `/-`, `=`, `;` or `\\` here."),
    )
}

/// The first run of more than [`MAX_PUNCTUATION_RUN`] punctuation tokens with no name or value
/// between (spaces, line breaks and comments do not end a run): its start, end and length. The
/// `kdl` crate's parser recurses on such runs until its stack overflows.
fn punctuation_run(tokens: &[lexer::Token]) -> Option<(usize, usize, usize)> {
    use lexer::TokenKind as K;
    let (mut run, mut start, mut end) = (0, 0, 0);
    for token in tokens {
        match token.kind {
            K::OpenBrace
            | K::CloseBrace
            | K::Semicolon
            | K::Equals
            | K::Slashdash
            | K::Continuation
            | K::OpenParen
            | K::CloseParen
            | K::Invalid => {
                if run == 0 {
                    start = token.start;
                }
                run += 1;
                end = token.end;
            }
            K::Whitespace | K::Newline | K::LineComment | K::BlockComment { .. } => {}
            _ if run > MAX_PUNCTUATION_RUN => break,
            _ => run = 0,
        }
    }
    (run > MAX_PUNCTUATION_RUN).then_some((start, end, run))
}

/// How many syntax errors are reported per file; beyond that they are noise.
const MAX_SYNTAX_ERRORS: usize = 50;

/// Parses `text`; on failure returns the diagnostics instead.
///
/// The text is first measured against the front end's limits (see `limits`), alone.
/// The kdl parser's error recovery is exponential on some malformed input (unclosed slashdashed
/// blocks), so braces are screened first, and the parse runs on a worker thread with a budget.
pub fn parse(text: &str, file: FileId, budget: Duration) -> Result<KdlDocument, Vec<Diagnostic>> {
    parse_within(text, file, budget, &mut Allowance::default())
}

/// [`parse`], with what the file may take out of the allowance of a whole compilation (a pipeline
/// file and its imports share the limits).
pub(crate) fn parse_within(
    text: &str,
    file: FileId,
    budget: Duration,
    allowance: &mut Allowance,
) -> Result<KdlDocument, Vec<Diagnostic>> {
    allowance
        .take(text, file)
        .map_err(|refused| vec![*refused])?;
    let tokens = lexer::tokenize(text);
    let screened = lexer::screen_tokens(text, &tokens, file);
    if !screened.is_empty() {
        return Err(screened);
    }
    // The kdl parser recurses once per nested block; deep nesting would overflow its stack.
    let depth = nesting_depth(&tokens);
    if depth > MAX_NESTING {
        return Err(vec![Diagnostic::new(
            &rules::PARSE_BUDGET,
            Span::new(file, 0, 0),
            format!(
                "blocks are nested {depth} levels deep; pipeline files are limited to {MAX_NESTING}"
            ),
        )]);
    }
    // Well-formed files, the common case, take the fast path; the kdl crate decides the rest.
    let stopped = match fast::parse(text, &tokens) {
        Ok(document) => return Ok(document),
        Err(stopped) => stopped,
    };
    if let Some(refused) = not_for_the_parser(text, file, &tokens, stopped) {
        return Err(vec![refused]);
    }
    let (sender, receiver) = mpsc::channel();
    // The crate reads the text as the current specification does (see `compat`).
    let mut spaced = compat::Spaced::new(text, &tokens);
    let owned = std::mem::take(&mut spaced.text);
    // A parse that overruns is abandoned: the thread finishes (or the process exits) on its own.
    // The stack is generous because the parser recurses per nested block (lazily committed).
    let spawned = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let _ = sender.send(KdlDocument::parse_v2(&owned));
        });
    if let Err(e) = spawned {
        return Err(vec![Diagnostic::new(
            &rules::PARSE_BUDGET,
            Span::new(file, 0, 0),
            format!("cannot start the parser: {e}"),
        )]);
    }
    match receiver
        .recv_timeout(budget)
        .map(|result| spaced.restore(result))
    {
        Ok(Ok(document)) => Ok(document),
        Ok(Err(error)) => Err(syntax_diagnostics(&error, file, text, &tokens)),
        Err(_) => Err(vec![Diagnostic::new(
            &rules::PARSE_BUDGET,
            Span::new(file, 0, 0),
            format!("parsing did not finish within {} s", budget.as_secs_f64()),
        )]),
    }
}

/// A hint for KDL v1 spellings, which the v2 parser rejects without saying why.
fn v1_hint(text: &str, offset: usize) -> Option<String> {
    let rest = text.get(offset..)?;
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    match word.as_str() {
        "true" | "false" | "null" => Some(format!("KDL v2 writes `{word}` as `#{word}`")),
        _ => None,
    }
}

/// Every `key=` with no value after it. The kdl parser reports only the first, with a span that
/// starts at the beginning of the file.
fn properties_without_values(tokens: &[lexer::Token], file: FileId, text: &str) -> Vec<Diagnostic> {
    use lexer::TokenKind as K;
    let significant = |i: &usize| {
        !matches!(
            tokens[*i].kind,
            K::Whitespace | K::BlockComment { terminated: true }
        )
    };
    let mut found = Vec::new();
    for (i, equals) in tokens.iter().enumerate() {
        if equals.kind != K::Equals {
            continue;
        }
        if found.len() == MAX_SYNTAX_ERRORS {
            break;
        }
        let next = (i + 1..tokens.len())
            .find(significant)
            .map(|j| tokens[j].kind);
        let has_value = match next {
            None => false,
            Some(kind) => !matches!(
                kind,
                K::Newline
                    | K::Semicolon
                    | K::OpenBrace
                    | K::CloseBrace
                    | K::LineComment
                    | K::Equals
                    | K::CloseParen
            ),
        };
        if has_value {
            continue;
        }
        let key = (0..i).rev().find(significant).map(|j| tokens[j]);
        let (start, name) = match key {
            Some(key) if matches!(key.kind, K::Bare | K::String { .. } | K::RawString { .. }) => {
                (key.start, key.text(text))
            }
            _ => (equals.start, ""),
        };
        let subject = if name.is_empty() {
            "this `=`".to_owned()
        } else {
            format!("the property `{name}`")
        };
        found.push(
            Diagnostic::new(
                &rules::KDL_SYNTAX,
                Span::new(file, start, equals.end - start),
                format!("{subject} has no value"),
            )
            .label("no value after `=`")
            .help(
                "Write a value after `=` (for example `name=\"tests\"`), or remove the property.",
            ),
        );
    }
    found
}

fn syntax_diagnostics(
    error: &kdl::KdlError,
    file: FileId,
    text: &str,
    tokens: &[lexer::Token],
) -> Vec<Diagnostic> {
    let mut out = properties_without_values(tokens, file, text);
    let ours = out.len();
    for d in &error.diagnostics {
        let offset = d.span.offset().min(text.len());
        let len = d.span.len().min(text.len() - offset);
        // The kdl parser's report of a missing value, spanning from the start of the file.
        if out[..ours].iter().any(|o| o.span.end() == offset + len) {
            continue;
        }
        let message = d
            .message
            .clone()
            .unwrap_or_else(|| "invalid KDL".to_owned());
        if out
            .iter()
            .any(|o| o.span.offset == offset && o.message == message)
        {
            continue;
        }
        // The parser's labels ("not quoted string") name its internal rules; say "here" instead.
        let mut diagnostic =
            Diagnostic::new(&rules::KDL_SYNTAX, Span::new(file, offset, len), message)
                .label("here");
        if let Some(help) = &d.help {
            diagnostic = diagnostic.help(help.clone());
        }
        if let Some(help) = v1_hint(text, offset) {
            diagnostic = diagnostic.help(help);
        }
        out.push(diagnostic);
        if out.len() == MAX_SYNTAX_ERRORS {
            break;
        }
    }
    if out.is_empty() {
        out.push(Diagnostic::new(
            &rules::KDL_SYNTAX,
            Span::new(file, 0, 0),
            "invalid KDL",
        ));
    }
    out.sort_by_key(|d| d.span.offset);
    out.truncate(MAX_SYNTAX_ERRORS);
    out
}
