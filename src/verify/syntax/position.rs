//! Where a finding is: its line and column, and the excerpt of its line with a caret under it.

use super::SyntaxError;

/// How many characters of a long source line are shown around the error (minified files have
/// lines of megabytes).
const LINE_WINDOW_CHARS: usize = 160;

/// The byte where 1-based `line` starts (the end of the text past the last line).
pub(super) fn line_start(text: &[u8], line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    text.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(line - 2)
        .map_or(text.len(), |(i, _)| i + 1)
}

/// The byte of 1-based `line` and 0-based character `column` (yaml-rust2's markers).
pub(super) fn byte_at(text: &str, line: usize, column: usize) -> usize {
    let start = line_start(text.as_bytes(), line);
    text[start..]
        .char_indices()
        .take_while(|(_, c)| *c != '\n')
        .nth(column)
        .map_or_else(
            || {
                let rest = &text[start..];
                start + rest.find('\n').unwrap_or(rest.len())
            },
            |(i, _)| start + i,
        )
}

/// 1-based line and column (in characters; in bytes on a line that is not UTF-8) of `byte`.
pub(super) fn position(text: &[u8], byte: usize) -> (usize, usize) {
    let byte = byte.min(text.len());
    let before = &text[..byte];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let prefix = &text[start..byte];
    let column = match std::str::from_utf8(prefix) {
        Ok(s) => s.chars().count(),
        Err(_) => prefix.len(),
    };
    (line, column + 1)
}

pub(super) fn syntax_error_at(text: &[u8], byte: usize, message: String) -> SyntaxError {
    let byte = byte.min(text.len());
    let (line, column) = position(text, byte);
    let start = text[..byte]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let end = text[byte..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(text.len(), |i| byte + i);
    let before = String::from_utf8_lossy(&text[start..byte]);
    let after = String::from_utf8_lossy(&text[byte..end]);
    let after = after.strip_suffix('\r').unwrap_or(&after);
    let (source_line, caret) = excerpt(&before, after);
    SyntaxError {
        line,
        column,
        message,
        source_line,
        caret,
    }
}

/// The line around the error (a window when it is long) and the caret under the error. The caret
/// copies the line's tabs so it lines up however wide the terminal draws a tab.
fn excerpt(before: &str, after: &str) -> (String, String) {
    let before: Vec<char> = before.chars().collect();
    let after: Vec<char> = after.chars().collect();
    let at = before.len();
    let total = at + after.len();
    let (from, to) = if total <= LINE_WINDOW_CHARS {
        (0, total)
    } else {
        let from = at
            .saturating_sub(LINE_WINDOW_CHARS / 2)
            .min(total - LINE_WINDOW_CHARS);
        (from, from + LINE_WINDOW_CHARS)
    };
    let char_at = |i: usize| if i < at { before[i] } else { after[i - at] };
    let mut line = String::new();
    let mut caret = String::new();
    if from > 0 {
        line.push('…');
        caret.push(' ');
    }
    for i in from..to {
        line.push(char_at(i));
    }
    if to < total {
        line.push('…');
    }
    for &c in &before[from..] {
        caret.push(if c == '\t' { '\t' } else { ' ' });
    }
    caret.push('^');
    (line, caret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::syntax::{Language, check};

    #[test]
    fn caret_copies_tabs_and_counts_characters() {
        let errors = check(Language::Python, "if x:\n\tprint(\"é\" +)\n".as_bytes());
        let error = &errors[0];
        assert_eq!((error.line, error.column), (2, 12));
        assert_eq!(error.source_line, "\tprint(\"é\" +)");
        assert_eq!(error.caret, "\t          ^");
    }

    #[test]
    fn excerpt_windows_long_lines_around_the_column() {
        let before = "a".repeat(1000);
        let after = format!("!{}", "b".repeat(1000));
        let (line, caret) = excerpt(&before, &after);
        assert_eq!(line.chars().count(), LINE_WINDOW_CHARS + 2);
        assert!(line.starts_with('…') && line.ends_with('…'));
        let caret_at = caret.chars().count() - 1;
        assert_eq!(line.chars().nth(caret_at), Some('!'));
    }

    #[test]
    fn excerpt_of_a_short_line_is_the_line() {
        assert_eq!(excerpt("ab", "c"), ("abc".to_owned(), "  ^".to_owned()));
        assert_eq!(excerpt("", ""), (String::new(), "^".to_owned()));
    }

    #[test]
    fn position_counts_characters_not_bytes() {
        let text = "é\nüü x".as_bytes();
        assert_eq!(position(text, 0), (1, 1));
        assert_eq!(position(text, 3), (2, 1));
        assert_eq!(position(text, 8), (2, 4));
    }

    #[test]
    fn byte_at_converts_yaml_markers() {
        assert_eq!(byte_at("ab\né x", 2, 2), 6);
        assert_eq!(byte_at("ab\n", 1, 9), 2);
        assert_eq!(byte_at("ab", 5, 0), 2);
    }
}
