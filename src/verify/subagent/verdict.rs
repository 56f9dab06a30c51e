//! The verifier's verdict: found in its response, checked against the format, redacted and
//! bounded (see [the module documentation](super) for the rules).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{STDERR_LOG, STDOUT_LOG, SubAgentCheck};
use crate::agent::response;
use crate::redact::Redactor;
use crate::text::plural;

/// How much of the end of a response is searched for the verdict.
pub(crate) const VERDICT_WINDOW: usize = 1024 * 1024;
/// The most entries kept of a verdict's `errors` and `checks_passed`.
const MAX_VERDICT_ITEMS: usize = 100;
/// The most characters kept of one entry.
const MAX_ITEM_CHARS: usize = 2000;
/// The most characters kept of `feedback`.
const MAX_FEEDBACK_CHARS: usize = 16_000;

/// The verifier's JSON verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Whether the work does what the task asks.
    pub success: bool,
    /// Every problem found, precise enough to fix.
    #[serde(default)]
    pub errors: Vec<String>,
    /// What the verifier checked and found right.
    #[serde(default)]
    pub checks_passed: Vec<String>,
    /// Advice for the next attempt.
    #[serde(default)]
    pub feedback: String,
}

/// Why a response holds no usable verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerdictError {
    /// No JSON object with a boolean `success`.
    #[error("its response has no JSON object with a boolean `success`")]
    Missing,
    /// The last object with a boolean `success` breaks the format; says how.
    #[error("{0}")]
    Invalid(String),
}

/// The verdict in a response: the last JSON object whose `success` is a boolean (see
/// [the module documentation](super)). `errors` and `checks_passed` must be lists of strings and
/// `feedback` a string when present (`null` counts as absent); other fields are ignored.
///
/// # Errors
/// [`VerdictError::Missing`] when no object has a boolean `success`; [`VerdictError::Invalid`]
/// when the last one breaks the format, or an object has a `success` that is not a boolean and
/// none has a boolean one.
pub fn parse_verdict(response: &str) -> Result<Verdict, VerdictError> {
    let mut start = response.len().saturating_sub(VERDICT_WINDOW);
    while !response.is_char_boundary(start) {
        start += 1;
    }
    let text = &response[start..];
    let mut last: Option<Map<String, Value>> = None;
    let mut not_boolean: Option<Value> = None;
    let mut at = 0;
    while let Some(offset) = text[at..].find('{') {
        let begin = at + offset;
        let mut values = serde_json::Deserializer::from_str(&text[begin..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(Value::Object(object))) => {
                // The object's insides (strings with braces, nested objects) are part of it.
                at = begin + values.byte_offset();
                match object.get("success") {
                    Some(Value::Bool(_)) => last = Some(object),
                    Some(other) => not_boolean = Some(other.clone()),
                    None => {}
                }
            }
            _ => at = begin + 1,
        }
    }
    match (last, not_boolean) {
        (Some(object), _) => verdict_from(&object),
        (None, Some(value)) => Err(VerdictError::Invalid(format!(
            "`success` must be true or false, not {}",
            short_json(&value)
        ))),
        (None, None) => Err(VerdictError::Missing),
    }
}

/// The verdict in the verifier's response, and every reason it is not to be trusted: an
/// unreadable response, an error result, missing evidence, no or an invalid verdict.
pub(super) fn judge_response(c: &SubAgentCheck<'_>) -> (Option<Verdict>, Vec<String>) {
    let verifier = c.verifier;
    let stdout = c.attempt_dir.join(STDOUT_LOG);
    let stderr = c.attempt_dir.join(STDERR_LOG);
    let mut problems = Vec::new();
    if let Some(pattern) = &verifier.evidence {
        match regex::bytes::Regex::new(pattern) {
            Ok(regex) => match response::transcript_matches(&regex, &[&stdout, &stderr]) {
                Ok(true) => {}
                Ok(false) => problems.push(format!(
                    "the verifier's transcript does not match its `evidence` pattern `{pattern}`: \
                     the review looks skipped"
                )),
                Err(error) => problems.push(format!(
                    "the verifier's transcript cannot be read for `evidence`: {error}"
                )),
            },
            Err(error) => problems.push(format!(
                "the verifier's `evidence` pattern is not a valid regex: {error}"
            )),
        }
    }
    if let Some(tools) = &verifier.evidence_tools {
        match crate::agent::transcript::tool_calls(verifier.response, &stdout) {
            Ok(calls) if calls.any_succeeded(tools) => {}
            Ok(_) => problems.push(
                "no tool call of the verifier succeeded (`evidence-tools`): the review looks skipped"
                    .to_owned(),
            ),
            Err(error) => problems.push(format!(
                "the verifier's transcript cannot be read for `evidence-tools`: {error}"
            )),
        }
    }
    let response = match response::extract(verifier.response, &stdout) {
        Ok(response) => response,
        Err(error) => {
            problems.push(format!("the verifier's response cannot be read: {error}"));
            return (None, problems);
        }
    };
    if let Some(error) = &response.error {
        problems.push(format!("the verifier's result is an error ({error})"));
    }
    match parse_verdict(&response.text) {
        Ok(verdict) => (Some(verdict), problems),
        Err(VerdictError::Missing) => {
            problems.push(format!(
                "the verifier gave no verdict: {}",
                VerdictError::Missing
            ));
            (None, problems)
        }
        Err(VerdictError::Invalid(why)) => {
            problems.push(format!("the verifier's verdict is invalid: {why}"));
            (None, problems)
        }
    }
}

/// Checks the fields of an object whose `success` is a boolean.
fn verdict_from(object: &Map<String, Value>) -> Result<Verdict, VerdictError> {
    let Some(Value::Bool(success)) = object.get("success") else {
        return Err(VerdictError::Invalid(
            "`success` must be true or false".to_owned(),
        ));
    };
    let errors = string_list(object, "errors")?;
    let checks_passed = string_list(object, "checks_passed")?;
    let feedback = match object.get("feedback") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => {
            return Err(VerdictError::Invalid(format!(
                "`feedback` must be a string, not {}",
                short_json(other)
            )));
        }
    };
    if *success && !errors.is_empty() {
        return Err(VerdictError::Invalid(format!(
            "`success` is true but `errors` lists {} problem{}: a verdict must not contradict \
             itself",
            errors.len(),
            plural(errors.len())
        )));
    }
    Ok(Verdict {
        success: *success,
        errors,
        checks_passed,
        feedback,
    })
}

/// A field that must be a list of strings; absent or `null` is an empty list.
fn string_list(object: &Map<String, Value>, field: &str) -> Result<Vec<String>, VerdictError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(VerdictError::Invalid(format!(
                    "`{field}` must be a list of strings, but entry {} is {}",
                    index + 1,
                    short_json(other)
                ))),
            })
            .collect(),
        Some(other) => Err(VerdictError::Invalid(format!(
            "`{field}` must be a list of strings, not {}",
            short_json(other)
        ))),
    }
}

/// A JSON value for a message: at most 60 characters of it.
fn short_json(value: &Value) -> String {
    first_chars(&value.to_string(), 60)
}

pub(super) fn redacted(verdict: &Verdict, redactor: &Redactor) -> Verdict {
    Verdict {
        success: verdict.success,
        errors: verdict.errors.iter().map(|e| redactor.redact(e)).collect(),
        checks_passed: verdict
            .checks_passed
            .iter()
            .map(|e| redactor.redact(e))
            .collect(),
        feedback: redactor.redact(&verdict.feedback),
    }
}

/// The verdict within the limits [the module documentation](super) gives.
pub(super) fn bounded(verdict: Verdict) -> Verdict {
    Verdict {
        success: verdict.success,
        errors: bounded_list(verdict.errors),
        checks_passed: bounded_list(verdict.checks_passed),
        feedback: first_chars(&verdict.feedback, MAX_FEEDBACK_CHARS),
    }
}

fn bounded_list(items: Vec<String>) -> Vec<String> {
    let total = items.len();
    let kept = if total > MAX_VERDICT_ITEMS {
        MAX_VERDICT_ITEMS - 1
    } else {
        total
    };
    let mut out: Vec<String> = items
        .into_iter()
        .take(kept)
        .map(|item| first_chars(&item, MAX_ITEM_CHARS))
        .collect();
    if kept < total {
        out.push(format!("… and {} more", total - kept));
    }
    out
}

/// At most the first `max` characters of `text`, with `…` when cut.
fn first_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
