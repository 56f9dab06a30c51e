//! Telling a failed agent run's class: transient (a rate limit, an overloaded service, a network
//! error), fatal (authentication, a missing CLI, an invalid configuration), or neither, by the
//! agent's declared markers; and the wait a transient failure asks for (`Retry-After`).

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

use crate::event::usage::FailureClass;
use crate::model::FailureMarkers;

/// Exit code of a command the shell, or `env`, did not find: always fatal.
const NOT_FOUND: i32 = 127;

/// The longest `Retry-After` honoured.
const LONGEST_WAIT: Duration = Duration::from_mins(10);

/// The class of a failed run that exited with `code` and said `text` (its reported error, its
/// standard error, the end of its output), and what marked it: the exit code, or the line a
/// pattern matched in; `None` when no marker matches (then the failure is the work's). Fatal
/// markers are looked at first.
pub(crate) fn classify(
    markers: &FailureMarkers,
    code: Option<i32>,
    text: &str,
) -> Option<(FailureClass, String)> {
    if code == Some(NOT_FOUND) || code.is_some_and(|c| markers.fatal_exit.contains(&c)) {
        return Some((
            FailureClass::Fatal,
            format!("exit code {}", code.unwrap_or_default()),
        ));
    }
    if let Some(found) = first_match(&markers.fatal_pattern, text) {
        return Some((FailureClass::Fatal, found));
    }
    if code.is_some_and(|c| markers.transient_exit.contains(&c)) {
        return Some((
            FailureClass::Transient,
            format!("exit code {}", code.unwrap_or_default()),
        ));
    }
    first_match(&markers.transient_pattern, text).map(|found| (FailureClass::Transient, found))
}

/// The line of the first match of any pattern, trimmed and cut to 300 characters: the message
/// that says what went wrong.
fn first_match(patterns: &[String], text: &str) -> Option<String> {
    patterns.iter().find_map(|pattern| {
        let regex = Regex::new(pattern).ok()?;
        let found = regex.find(text)?;
        let start = text[..found.start()].rfind('\n').map_or(0, |at| at + 1);
        let end = text[found.end()..]
            .find('\n')
            .map_or(text.len(), |at| found.end() + at);
        Some(text[start..end].trim().chars().take(300).collect())
    })
}

/// The wait a failure's text asks for: a `Retry-After` header or field (`retry-after: 30`,
/// `"retry_after": 2.5`), Gemini's `"retryDelay": "30s"`, or `try again in 20s`; at most ten
/// minutes.
pub(crate) fn retry_after(text: &str) -> Option<Duration> {
    static PATTERNS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
        [
            r#"(?i)retry[-_ ]?after["']?\s*[:=]?\s*["']?(\d+(?:\.\d+)?)\s*(ms|s)?"#,
            r#"(?i)"?retryDelay"?\s*:\s*"(\d+(?:\.\d+)?)(ms|s)""#,
            r"(?i)try again in (\d+(?:\.\d+)?)\s*(ms|s)",
        ]
        .map(|p| Regex::new(p).expect("a valid pattern"))
    });
    PATTERNS.iter().find_map(|regex| {
        let captures = regex.captures(text)?;
        let amount: f64 = captures.get(1)?.as_str().parse().ok()?;
        let seconds = match captures.get(2).map(|m| m.as_str().to_ascii_lowercase()) {
            Some(unit) if unit == "ms" => amount / 1000.0,
            _ => amount,
        };
        Duration::try_from_secs_f64(seconds)
            .ok()
            .map(|d| d.min(LONGEST_WAIT))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markers() -> FailureMarkers {
        FailureMarkers {
            transient_exit: vec![75],
            transient_pattern: vec![r"API Error: (429|529)|overloaded".into()],
            fatal_exit: vec![41],
            fatal_pattern: vec![r"Invalid API key|API Error: 401".into()],
        }
    }

    #[test]
    fn fatal_markers_come_first() {
        let class = |code, text| classify(&markers(), code, text).map(|(c, _)| c);
        assert_eq!(
            class(Some(1), "API Error: 429 rate_limit_error"),
            Some(FailureClass::Transient)
        );
        assert_eq!(
            class(Some(75), "Invalid API key"),
            Some(FailureClass::Fatal)
        );
        assert_eq!(class(Some(127), ""), Some(FailureClass::Fatal));
        assert_eq!(class(Some(41), ""), Some(FailureClass::Fatal));
        assert_eq!(class(Some(1), "tests failed"), None);
    }

    #[test]
    fn retry_after_is_read_in_its_usual_spellings() {
        assert_eq!(
            retry_after("HTTP 429\nretry-after: 3\n"),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(r#"{"retry_after": 0.5}"#),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            retry_after(r#""retryDelay": "20s""#),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            retry_after("Please try again in 250ms."),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after("Retry-After: 86400"),
            Some(Duration::from_mins(10))
        );
        assert_eq!(retry_after("no hint"), None);
    }
}
