//! What an agent's transcript says besides its response: the id of the session its CLI chose
//! (`session-id`), and which of its tool calls succeeded (`evidence-tools`).

use std::collections::HashMap;
use std::io::{self, Read, Seek};
use std::path::Path;

use serde_json::Value;

use super::response::for_each_json_object;
use crate::model::{ResponseFormat, SessionCapture};

/// How much of the start, and of the end, of standard output a `session-id regex=` searches: CLIs
/// print their session id at the start or the end of a run, never deep inside a huge transcript.
const REGEX_SEARCH_LIMIT: u64 = 1024 * 1024;

/// The session id the agent's output reports, per its `session-id`; `None` when it reports none.
pub(crate) fn session_id(
    capture: &SessionCapture,
    stdout_log: &Path,
) -> io::Result<Option<String>> {
    match capture {
        SessionCapture::Json(key) => {
            let mut found = None;
            for_each_json_object(stdout_log, |object| {
                found = object
                    .get(key)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned);
                found.is_none()
            })?;
            Ok(found)
        }
        SessionCapture::Regex(pattern) => {
            let regex = regex::bytes::Regex::new(pattern)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let mut file = std::fs::File::open(stdout_log)?;
            let len = file.metadata()?.len();
            let mut bytes = Vec::new();
            (&mut file)
                .take(REGEX_SEARCH_LIMIT)
                .read_to_end(&mut bytes)?;
            if let Some(id) = captured(&regex, &bytes) {
                return Ok(Some(id));
            }
            // The end, when the start did not reach it.
            let tail = len
                .saturating_sub(REGEX_SEARCH_LIMIT)
                .max(REGEX_SEARCH_LIMIT);
            if tail >= len {
                return Ok(None);
            }
            bytes.clear();
            file.seek(io::SeekFrom::Start(tail))?;
            file.take(REGEX_SEARCH_LIMIT).read_to_end(&mut bytes)?;
            Ok(captured(&regex, &bytes))
        }
    }
}

/// The session id `regex` captures in `bytes`: its first group, else the whole match.
fn captured(regex: &regex::bytes::Regex, bytes: &[u8]) -> Option<String> {
    regex.captures(bytes).and_then(|captures| {
        let id = captures.get(1).or_else(|| captures.get(0))?;
        let id = String::from_utf8_lossy(id.as_bytes()).trim().to_owned();
        (!id.is_empty()).then_some(id)
    })
}

/// The tool calls in a transcript, by outcome.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ToolCalls {
    /// The names of the calls that succeeded, in order.
    pub succeeded: Vec<String>,
    /// The names of the calls that were refused or failed, in order.
    pub failed: Vec<String>,
}

impl ToolCalls {
    /// Whether a call that succeeded is among `names` (any call, when `names` is empty).
    pub(crate) fn any_succeeded(&self, names: &[String]) -> bool {
        self.succeeded
            .iter()
            .any(|call| names.is_empty() || names.iter().any(|n| n == call))
    }
}

/// Reads the tool calls from a `claude-stream-json` or `codex-json` transcript.
///
/// - Claude Code: a `tool_use` block of an `assistant` message succeeded when the `tool_result`
///   with its id is not marked `is_error` (a call refused by a permission rule is marked so); a
///   call with no result (the run ended first) did not succeed.
/// - Codex: a completed `command_execution` item succeeded when its exit code is 0; a
///   `file_change` or `mcp_tool_call` item when its status is `completed`. Each is named by its
///   item type (`mcp_tool_call` by its tool).
pub(crate) fn tool_calls(format: ResponseFormat, stdout_log: &Path) -> io::Result<ToolCalls> {
    let mut calls = ToolCalls::default();
    match format {
        ResponseFormat::ClaudeStreamJson => {
            // Calls waiting for their result: id → name.
            let mut pending: HashMap<String, String> = HashMap::new();
            for_each_json_object(stdout_log, |event| {
                let kind = event.get("type").and_then(Value::as_str);
                let blocks = event
                    .get("message")
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array);
                for block in blocks.into_iter().flatten() {
                    match (kind, block.get("type").and_then(Value::as_str)) {
                        (Some("assistant"), Some("tool_use")) => {
                            let id = block.get("id").and_then(Value::as_str);
                            let name = block.get("name").and_then(Value::as_str);
                            if let (Some(id), Some(name)) = (id, name) {
                                pending.insert(id.to_owned(), name.to_owned());
                            }
                        }
                        (Some("user"), Some("tool_result")) => {
                            let id = block.get("tool_use_id").and_then(Value::as_str);
                            if let Some(name) = id.and_then(|id| pending.remove(id)) {
                                if block.get("is_error").and_then(Value::as_bool) == Some(true) {
                                    calls.failed.push(name);
                                } else {
                                    calls.succeeded.push(name);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                true
            })?;
            calls.failed.extend(pending.into_values());
        }
        ResponseFormat::CodexJson => {
            for_each_json_object(stdout_log, |event| {
                if event.get("type").and_then(Value::as_str) != Some("item.completed") {
                    return true;
                }
                let Some(item) = event.get("item").and_then(Value::as_object) else {
                    return true;
                };
                let status = item.get("status").and_then(Value::as_str);
                let (name, ok) = match item.get("type").and_then(Value::as_str) {
                    Some("command_execution") => (
                        "command_execution",
                        item.get("exit_code").and_then(Value::as_i64) == Some(0)
                            && status != Some("failed")
                            && status != Some("declined"),
                    ),
                    Some("file_change") => ("file_change", status == Some("completed")),
                    Some("mcp_tool_call") => (
                        item.get("tool")
                            .and_then(Value::as_str)
                            .unwrap_or("mcp_tool_call"),
                        status == Some("completed"),
                    ),
                    _ => return true,
                };
                if ok {
                    calls.succeeded.push(name.to_owned());
                } else {
                    calls.failed.push(name.to_owned());
                }
                true
            })?;
        }
        ResponseFormat::Text | ResponseFormat::Json => {}
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout.log");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_session_id_is_the_first_json_line_with_the_key() {
        let (_dir, path) = log(concat!(
            "Reading prompt from stdin...\n",
            "{\"type\":\"thread.started\",\"thread_id\":\"0199a213-81c0\"}\n",
            "{\"type\":\"other\",\"thread_id\":\"later\"}\n",
        ));
        let capture = SessionCapture::Json("thread_id".into());
        assert_eq!(
            session_id(&capture, &path).unwrap().as_deref(),
            Some("0199a213-81c0")
        );
        let missing = SessionCapture::Json("session_id".into());
        assert_eq!(session_id(&missing, &path).unwrap(), None);
        let regex = SessionCapture::Regex(r#""thread_id":"([^"]+)""#.into());
        assert_eq!(
            session_id(&regex, &path).unwrap().as_deref(),
            Some("0199a213-81c0")
        );
    }

    #[test]
    fn a_session_id_regex_searches_the_start_then_the_end_of_a_long_transcript() {
        let middle = "x".repeat(3 * REGEX_SEARCH_LIMIT as usize);
        let regex = SessionCapture::Regex("session: ([a-z0-9-]+)".into());
        let (_dir, path) = log(&format!(
            "{middle}\nsession: deep-inside\n{middle}\nsession: at-the-end\n"
        ));
        assert_eq!(
            session_id(&regex, &path).unwrap().as_deref(),
            Some("at-the-end")
        );
        let (_dir, path) = log(&format!(
            "session: at-the-start\n{middle}\nsession: at-the-end\n"
        ));
        assert_eq!(
            session_id(&regex, &path).unwrap().as_deref(),
            Some("at-the-start")
        );
        let (_dir, path) = log(&format!("{middle}\nsession: deep-inside\n{middle}\n"));
        assert_eq!(session_id(&regex, &path).unwrap(), None);
    }

    #[test]
    fn claude_calls_count_only_when_their_result_is_not_an_error() {
        let (_dir, path) = log(concat!(
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Write","input":{}},{"type":"tool_use","id":"b","name":"Bash","input":{}}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":"Claude requested permissions to use Write, but you haven't granted it yet."}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","content":"ok"}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"c","name":"Edit","input":{}}]}}"#,
            "\n",
        ));
        let calls = tool_calls(ResponseFormat::ClaudeStreamJson, &path).unwrap();
        assert_eq!(calls.succeeded, ["Bash"]);
        assert_eq!(calls.failed, ["Write", "Edit"]);
        assert!(calls.any_succeeded(&[]));
        assert!(calls.any_succeeded(&["Bash".into()]));
        assert!(!calls.any_succeeded(&["Write".into(), "Edit".into()]));
    }

    #[test]
    fn codex_items_count_when_they_completed() {
        let (_dir, path) = log(concat!(
            r#"{"type":"item.completed","item":{"id":"1","type":"command_execution","command":"touch x","exit_code":1,"status":"failed"}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"id":"2","type":"reasoning","text":"hm"}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"id":"3","type":"file_change","changes":[],"status":"completed"}}"#,
            "\n",
        ));
        let calls = tool_calls(ResponseFormat::CodexJson, &path).unwrap();
        assert_eq!(calls.succeeded, ["file_change"]);
        assert_eq!(calls.failed, ["command_execution"]);
    }
}
