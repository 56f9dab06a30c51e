//! Extracting the agent's final response from its standard-output log, and the `evidence` check
//! over its transcript. Both read the logs as streams: a 100 MB transcript costs a bounded amount of
//! memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use regex_automata::Input;
use regex_automata::meta;
use serde::Deserialize;

use crate::model::ResponseFormat;

/// How much of a `text` response is kept: the last 1 MiB. The rest of the output stays in
/// `stdout.log`; helixflow's memory does not grow with what the agent prints.
pub const TEXT_LIMIT: u64 = 1024 * 1024;

/// The largest `json` document, and the longest line of a `claude-stream-json` log, that is read.
pub(crate) const JSON_LIMIT: u64 = 64 * 1024 * 1024;

/// The size of the windows a transcript is searched in by [`transcript_matches`].
const WINDOW: usize = 8 * 1024 * 1024;

/// How much consecutive windows of a transcript overlap: an `evidence` match up to this long is
/// always found, wherever it lies; a longer one only when it does not cross from one window into
/// the next.
pub(crate) const EVIDENCE_MATCH_LIMIT: usize = 1024 * 1024;

/// Bytes of real text kept on each side of a window's search, so that `^`, `$` and `\b` at its
/// edges see their true neighbours (a UTF-8 character is at most 4 bytes).
const CONTEXT: usize = 4;

/// The agent's final response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The response text (for `text`, at most the last [`TEXT_LIMIT`] bytes of the output, after a
    /// line saying how much was left out).
    pub text: String,
    /// Set when the agent itself reported that it failed: Claude Code's result event (in
    /// `claude-stream-json`, or a `json` document of the same shape) with `is_error: true` or a
    /// `subtype` starting with `error`. Says what it reported, for feedback.
    pub error: Option<String>,
}

impl Response {
    /// Whether the agent reported an error in its result.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

/// Why no response could be taken from the output.
#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    /// The log could not be read.
    #[error("cannot read the agent's output {}: {source}", path.display())]
    Io {
        /// The log.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// A `json` response larger than [`JSON_LIMIT`].
    #[error(
        "the agent's output is {size} bytes, more than the {limit} bytes a `json` response may have"
    )]
    TooLarge {
        /// The output's size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The output of a `json` agent is not one JSON document.
    #[error("the agent's output is not one JSON document (response \"json\"): {0}")]
    InvalidJson(serde_json::Error),
    /// A `codex-json` output without a single JSON event.
    #[error(
        "the agent's output has no JSON events (response \"codex-json\" expects Codex's `exec --json`); did the agent stop early?"
    )]
    NoEvents,
    /// A `claude-stream-json` output without a `result` event.
    #[error(
        "the agent's output has no `result` event (response \"claude-stream-json\" expects Claude Code's `--output-format stream-json`); did the agent stop early?"
    )]
    NoResult,
}

/// Reads the response per the agent's `response` format from its stdout log, streaming.
///
/// - `text`: all of the output as lossy UTF-8, keeping only the last [`TEXT_LIMIT`] bytes.
/// - `json`: the output is one JSON document; the response is its `result` or `response` string
///   when it is an object with one, else the document written compactly.
/// - `claude-stream-json`: the `result` of the last line whose `type` is `"result"`; lines that are
///   not JSON are skipped.
/// - `codex-json`: the text of the last completed `agent_message` of Codex's `exec --json`.
pub fn extract(format: ResponseFormat, stdout_log: &Path) -> Result<Response, ResponseError> {
    let io_error = |source| ResponseError::Io {
        path: stdout_log.to_path_buf(),
        source,
    };
    match format {
        ResponseFormat::Text => Ok(Response {
            text: read_text(stdout_log).map_err(io_error)?,
            error: None,
        }),
        ResponseFormat::Json => extract_json(stdout_log, io_error),
        ResponseFormat::ClaudeStreamJson => extract_stream_json(stdout_log, io_error),
        ResponseFormat::CodexJson => extract_codex_json(stdout_log, io_error),
    }
}

/// The error an agent reported in its output, per its `response` format, when it did: from the
/// response on standard output, or (for `json`, as Gemini CLI writes its API errors) a JSON
/// document with an `error` on standard error.
pub(crate) fn reported_error(
    format: ResponseFormat,
    stdout_log: &Path,
    stderr_log: &Path,
) -> Option<String> {
    if format == ResponseFormat::Text {
        return None;
    }
    if let Some(error) = extract(format, stdout_log).ok().and_then(|r| r.error) {
        return Some(error);
    }
    if format != ResponseFormat::Json {
        return None;
    }
    let mut bytes = Vec::new();
    File::open(stderr_log)
        .ok()?
        .take(JSON_LIMIT)
        .read_to_end(&mut bytes)
        .ok()?;
    // The document may follow other lines (warnings); it starts at the beginning of a line.
    objects_at_line_starts(&bytes)
        .find_map(|document| document.get("error").and_then(error_message))
        .map(|m| format!("the agent reported an error: {}", first_chars(&m, 500)))
}

/// The JSON objects that start at the beginning of a line of `bytes` (a CLI may print other
/// lines before or after its document), each read up to its own end, first to last.
pub(crate) fn objects_at_line_starts(
    bytes: &[u8],
) -> impl DoubleEndedIterator<Item = serde_json::Value> + '_ {
    std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(at, _)| at + 1),
        )
        .filter(|&at| bytes.get(at) == Some(&b'{'))
        .filter_map(|at| {
            serde_json::Deserializer::from_slice(&bytes[at..])
                .into_iter::<serde_json::Value>()
                .next()?
                .ok()
        })
}

/// Calls `each` with every line of a JSON-lines log that is a JSON object, in order, until it
/// returns `false`. Lines that are not objects (plain text a CLI printed) and lines longer than
/// [`JSON_LIMIT`] are skipped: the log is read as a stream, in bounded memory per line.
pub(crate) fn for_each_json_object(
    path: &Path,
    mut each: impl FnMut(serde_json::Map<String, serde_json::Value>) -> bool,
) -> io::Result<()> {
    let file = File::open(path)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let limit = usize::try_from(JSON_LIMIT).unwrap_or(usize::MAX);
    let mut line = Vec::new();
    loop {
        line.clear();
        let ended = read_line_limited(&mut reader, &mut line, limit)?;
        if ended == LineEnd::Limit {
            skip_line(&mut reader)?;
        } else {
            let text = trim_newline(&line);
            let starts_object = text
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|&b| b == b'{');
            if starts_object
                && let Ok(serde_json::Value::Object(object)) = serde_json::from_slice(text)
                && !each(object)
            {
                return Ok(());
            }
        }
        if ended == LineEnd::Eof {
            return Ok(());
        }
    }
}

/// The `codex-json` format: Codex's `exec --json` events. The response is the text of the last
/// completed `agent_message` item; a `turn.failed` event, or an `error` event in a turn that gave
/// no answer, is the agent's error.
fn extract_codex_json(
    path: &Path,
    io_error: impl Fn(io::Error) -> ResponseError,
) -> Result<Response, ResponseError> {
    let mut text: Option<String> = None;
    let mut failed: Option<String> = None;
    let mut error_event: Option<String> = None;
    let mut events = 0_usize;
    for_each_json_object(path, |event| {
        events += 1;
        match event.get("type").and_then(serde_json::Value::as_str) {
            Some("item.completed") => {
                let item = event.get("item").and_then(serde_json::Value::as_object);
                if let Some(item) = item.filter(|i| {
                    i.get("type").and_then(serde_json::Value::as_str) == Some("agent_message")
                }) {
                    text = item
                        .get("text")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned);
                }
            }
            Some("turn.failed") => {
                failed = Some(
                    event
                        .get("error")
                        .and_then(error_message)
                        .unwrap_or_else(|| "the turn failed".to_owned()),
                );
            }
            Some("error") => error_event = error_message(&serde_json::Value::Object(event)),
            _ => {}
        }
        true
    })
    .map_err(&io_error)?;
    if events == 0 {
        return Err(ResponseError::NoEvents);
    }
    let error = failed
        .or_else(|| error_event.filter(|_| text.is_none()))
        .map(|message| {
            format!(
                "the agent reported an error: {}",
                first_chars(&message, 500)
            )
        });
    Ok(Response {
        text: text.unwrap_or_default(),
        error,
    })
}

/// The message of an error value: a string, or an object's `message` (also one level down, as in
/// `{"error": {"message": …}}`).
pub(crate) fn error_message(value: &serde_json::Value) -> Option<String> {
    match value {
        // A message that is itself an API's JSON error body (Gemini CLI passes them on as text):
        // the message inside it.
        serde_json::Value::String(text) if text.trim_start().starts_with('{') => {
            serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .filter(serde_json::Value::is_object)
                .and_then(|inner| error_message(&inner))
                .or_else(|| Some(text.trim().to_owned()))
        }
        serde_json::Value::String(text) if !text.trim().is_empty() => Some(text.trim().to_owned()),
        serde_json::Value::Object(fields) => fields
            .get("message")
            .filter(|m| m.is_string())
            .and_then(error_message)
            .or_else(|| fields.get("error").and_then(error_message)),
        _ => None,
    }
}

/// The `evidence` check: whether `regex` matches the transcript, each of the given logs (stdout,
/// stderr) searched as one text, across lines: `\n` matches a line break, and `^` and `$` match at
/// the start and end of every line. A missing log counts as empty.
///
/// Memory stays flat on any output: a log is searched in windows of 8 MiB that overlap by
/// [`EVIDENCE_MATCH_LIMIT`] (1 MiB), each with the bytes around it as context, so every match up
/// to 1 MiB long is found and no match is found that the whole text would not have.
pub fn transcript_matches(regex: &regex::bytes::Regex, logs: &[&Path]) -> io::Result<bool> {
    // The caller's pattern, compiled as `regex::bytes::Regex` compiles it, in multi-line mode;
    // the lower-level engine can search part of a buffer while seeing the bytes around it.
    let searcher = meta::Regex::builder()
        .configure(meta::Regex::config().utf8_empty(false))
        .syntax(
            regex_automata::util::syntax::Config::new()
                .utf8(false)
                .multi_line(true)
                .crlf(true),
        )
        .build(regex.as_str())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    for log in logs {
        if log_matches(&searcher, log)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Searches one log in overlapping windows; see [`transcript_matches`].
fn log_matches(regex: &meta::Regex, log: &Path) -> io::Result<bool> {
    let mut file = match File::open(log) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    };
    let mut window: Vec<u8> = Vec::with_capacity(WINDOW);
    // Where the search starts: the bytes before it are context, searched already.
    let mut from = 0;
    loop {
        let wanted = WINDOW - window.len();
        let read = (&mut file).take(wanted as u64).read_to_end(&mut window)?;
        if read < wanted {
            // The end of the log: the window's end is the text's end.
            return Ok(regex.is_match(Input::new(&window).span(from..window.len())));
        }
        // A match must end before the last CONTEXT bytes, which are there to be seen only.
        let end = window.len() - CONTEXT;
        if regex.is_match(Input::new(&window).span(from..end)) {
            return Ok(true);
        }
        // A match not yet found ends after `end`; one up to the limit long starts after `next`.
        let next = end.saturating_sub(EVIDENCE_MATCH_LIMIT).max(from);
        let keep = next.saturating_sub(CONTEXT);
        window.drain(..keep);
        from = next - keep;
    }
}

/// All of the output as lossy UTF-8, or its last [`TEXT_LIMIT`] bytes after a marker line.
fn read_text(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let skipped = len.saturating_sub(TEXT_LIMIT);
    let mut bytes = Vec::new();
    if skipped > 0 {
        let marker = format!("[helixflow: the first {skipped} bytes of the output are left out]\n");
        bytes.reserve_exact(marker.len() + usize::try_from(TEXT_LIMIT).unwrap_or(0));
        bytes.extend_from_slice(marker.as_bytes());
        file.seek(SeekFrom::Start(skipped))?;
        let start = bytes.len();
        file.take(TEXT_LIMIT).read_to_end(&mut bytes)?;
        // Continuation bytes at the cut belong to a character whose start was left out.
        let cut = bytes[start..]
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xC0 == 0x80)
            .count();
        bytes.drain(start..start + cut);
    } else {
        bytes.reserve_exact(usize::try_from(len).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
    }
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })
}

/// The `json` format.
fn extract_json(
    path: &Path,
    io_error: impl Fn(io::Error) -> ResponseError,
) -> Result<Response, ResponseError> {
    let file = File::open(path).map_err(&io_error)?;
    let size = file.metadata().map_err(&io_error)?.len();
    if size > JSON_LIMIT {
        return Err(ResponseError::TooLarge {
            size,
            limit: JSON_LIMIT,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(JSON_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(&io_error)?;
    if bytes.len() as u64 > JSON_LIMIT {
        return Err(ResponseError::TooLarge {
            size: bytes.len() as u64,
            limit: JSON_LIMIT,
        });
    }
    let document: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(ResponseError::InvalidJson)?;
    drop(bytes);
    // Claude Code's result shape, or an `error` field as Gemini CLI writes it.
    let error = ResultEvent::deserialize(&document)
        .ok()
        .and_then(|event| event.error())
        .or_else(|| {
            document
                .get("error")
                .and_then(error_message)
                .map(|m| format!("the agent reported an error: {}", first_chars(&m, 500)))
        });
    let text = match &document {
        serde_json::Value::Object(fields) => ["result", "response"]
            .iter()
            .find_map(|key| fields.get(*key).and_then(serde_json::Value::as_str))
            .map(str::to_owned),
        _ => None,
    };
    let text = match text {
        Some(text) => text,
        None => serde_json::to_string(&document).map_err(ResponseError::InvalidJson)?,
    };
    Ok(Response { text, error })
}

/// The `claude-stream-json` format.
fn extract_stream_json(
    path: &Path,
    io_error: impl Fn(io::Error) -> ResponseError,
) -> Result<Response, ResponseError> {
    let file = File::open(path).map_err(&io_error)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let limit = usize::try_from(JSON_LIMIT).unwrap_or(usize::MAX);
    let mut line = Vec::new();
    let mut last = None;
    loop {
        line.clear();
        let ended = read_line_limited(&mut reader, &mut line, limit).map_err(&io_error)?;
        if ended == LineEnd::Limit {
            // A line over the limit cannot be held, so it cannot be the result: skip the rest.
            skip_line(&mut reader).map_err(&io_error)?;
        } else if let Some(event) = parse_result_event(trim_newline(&line)) {
            last = Some(event);
        }
        if ended == LineEnd::Eof {
            break;
        }
    }
    let event = last.ok_or(ResponseError::NoResult)?;
    let error = event.error();
    Ok(Response {
        text: event.result_text().unwrap_or_default(),
        error,
    })
}

/// A line of Claude Code's output that is a `result` event.
fn parse_result_event(line: &[u8]) -> Option<ResultEvent> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace())?;
    // Only an object can be an event; this also skips plain text quickly.
    if line[start] != b'{' {
        return None;
    }
    let event: ResultEvent = serde_json::from_slice(line).ok()?;
    (event.kind.as_deref() == Some("result")).then_some(event)
}

/// The fields of Claude Code's `result` event that matter here; the rest are ignored.
#[derive(Debug, Deserialize)]
struct ResultEvent {
    #[serde(rename = "type")]
    kind: Option<String>,
    subtype: Option<String>,
    is_error: Option<bool>,
    /// A string in practice; anything else is kept as compact JSON rather than lost.
    result: Option<serde_json::Value>,
}

impl ResultEvent {
    /// The result as text: the string itself, or other JSON written compactly.
    fn result_text(&self) -> Option<String> {
        match self.result.as_ref()? {
            serde_json::Value::String(text) => Some(text.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// What the event says went wrong, when it reports an error.
    fn error(&self) -> Option<String> {
        let subtype = self.subtype.as_deref().unwrap_or_default();
        if subtype.starts_with("error") {
            return Some(format!("the agent reported an error: {subtype}"));
        }
        if self.is_error == Some(true) {
            let detail = self
                .result_text()
                .as_deref()
                .map(str::trim)
                .filter(|result| !result.is_empty())
                .map(|result| format!(": {}", first_chars(result, 500)))
                .unwrap_or_default();
            return Some(format!("the agent reported an error{detail}"));
        }
        None
    }
}

/// At most the first `max` characters of `text`, with `…` when cut.
fn first_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// How [`read_line_limited`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineEnd {
    /// At a newline (included in the line).
    Newline,
    /// At the end of the file.
    Eof,
    /// After `limit` bytes, in the middle of a line.
    Limit,
}

/// Appends the rest of the current line to `line`, up to `limit` bytes in all.
fn read_line_limited(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    limit: usize,
) -> io::Result<LineEnd> {
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok(LineEnd::Eof);
        }
        let room = limit.saturating_sub(line.len());
        if room == 0 {
            return Ok(LineEnd::Limit);
        }
        let window = &available[..available.len().min(room)];
        if let Some(newline) = window.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&window[..=newline]);
            reader.consume(newline + 1);
            return Ok(LineEnd::Newline);
        }
        let taken = window.len();
        line.extend_from_slice(window);
        reader.consume(taken);
    }
}

/// Discards input up to and including the next newline.
fn skip_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok(());
        }
        if let Some(newline) = available.iter().position(|&b| b == b'\n') {
            reader.consume(newline + 1);
            return Ok(());
        }
        let taken = available.len();
        reader.consume(taken);
    }
}

/// The line without its `\n` (or `\r\n`).
fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(text: &[u8]) -> BufReader<&[u8]> {
        BufReader::with_capacity(4, text)
    }

    #[test]
    fn lines_are_read_up_to_the_limit() {
        let mut input = reader(b"ab\ncdefgh\nij");
        let mut line = Vec::new();
        assert_eq!(
            read_line_limited(&mut input, &mut line, 5).unwrap(),
            LineEnd::Newline
        );
        assert_eq!(line, b"ab\n");
        line.clear();
        assert_eq!(
            read_line_limited(&mut input, &mut line, 5).unwrap(),
            LineEnd::Limit
        );
        assert_eq!(line, b"cdefg");
        skip_line(&mut input).unwrap();
        line.clear();
        assert_eq!(
            read_line_limited(&mut input, &mut line, 5).unwrap(),
            LineEnd::Eof
        );
        assert_eq!(line, b"ij");
    }

    fn matches(pattern: &str, text: &[u8]) -> bool {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        std::fs::write(&log, text).unwrap();
        transcript_matches(&regex::bytes::Regex::new(pattern).unwrap(), &[&log]).unwrap()
    }

    #[test]
    fn evidence_spans_lines_and_anchors_match_at_every_line() {
        assert!(matches(r"a\nb", b"a\nb\n"));
        assert!(matches(r"(?s)start.*end", b"start\nmiddle\nend\n"));
        assert!(matches(r"^b$", b"a\r\nb\r\nc"));
        assert!(!matches(r"^a$", b"ab\n"));
        assert!(!matches(r"\Ab", b"a\nb"));
    }

    #[test]
    fn window_edges_see_the_text_around_them() {
        // "foo" ends exactly where the first window's search ends; "bar" follows in the context.
        let mut text = vec![b'x'; WINDOW - CONTEXT - 3];
        text.extend_from_slice(b"foobar\n");
        text.resize(text.len() + 2 * EVIDENCE_MATCH_LIMIT, b'y');
        assert!(!matches(r"foo$", &text));
        assert!(!matches(r"foo\b", &text));
        assert!(matches(r"foobar$", &text));
    }

    #[test]
    fn a_match_up_to_the_limit_is_found_across_windows() {
        let mut text = vec![b'.'; WINDOW - EVIDENCE_MATCH_LIMIT / 2];
        text.push(b'<');
        text.extend(std::iter::repeat_n(b'm', EVIDENCE_MATCH_LIMIT - 2));
        text.push(b'>');
        text.extend_from_slice(&vec![b'.'; WINDOW]);
        assert!(matches(r"<m+>", &text));
        assert!(matches(r"(?s)<.{100}", &text));
    }

    #[test]
    fn an_error_message_that_is_a_json_body_gives_the_message_inside() {
        let value = serde_json::json!({
            "type": "Error",
            "message": "{\"error\":{\"code\":429,\"message\":\"Resource exhausted\",\"status\":\"RESOURCE_EXHAUSTED\"}}",
        });
        assert_eq!(error_message(&value).as_deref(), Some("Resource exhausted"));
        let plain = serde_json::json!({"message": "{not json"});
        assert_eq!(error_message(&plain).as_deref(), Some("{not json"));
        assert_eq!(
            error_message(&serde_json::json!("  API Error: 400 ")).as_deref(),
            Some("API Error: 400")
        );
    }

    #[test]
    fn error_results_are_recognised() {
        let event = |line: &str| parse_result_event(line.as_bytes());
        let ok = event(r#"{"type":"result","subtype":"success","is_error":false,"result":"done"}"#)
            .unwrap();
        assert_eq!(ok.error(), None);
        let turns =
            event(r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#).unwrap();
        assert_eq!(
            turns.error().as_deref(),
            Some("the agent reported an error: error_max_turns")
        );
        let api = event(
            r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529"}"#,
        )
        .unwrap();
        assert_eq!(
            api.error().as_deref(),
            Some("the agent reported an error: API Error: 529")
        );
        assert!(event(r#"{"type":"assistant","message":{}}"#).is_none());
        assert!(event("not json").is_none());
        assert!(event(r#"["type","result"]"#).is_none());
    }
}
