//! Wording helpers shared by every layer: counts, name lists, fenced blocks and durations as
//! people read them, and the one cleaning of text that came from agents, commands or bundles
//! before it is shown.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `1 phase`, `3 phases`.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The `s` of a plural noun: `""` for one, `"s"` for any other count.
pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// "`a`, `b` and 3 more": at most `max` names, each as a one-line code span.
pub(crate) fn name_list<S: AsRef<str>>(names: &[S], max: usize) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(max)
        .map(|n| code_name(n.as_ref()))
        .collect();
    let mut list = shown.join(", ");
    if names.len() > max {
        let _ = write!(list, " and {} more", names.len() - max);
    }
    list
}

/// `text` as a Markdown fenced block with the info string `info`, every line indented by
/// `indent`; the fence is longer than any run of backticks in the text, so nothing inside can
/// close it.
pub(crate) fn fenced(out: &mut String, indent: &str, info: &str, text: &str) {
    let mut longest = 0;
    let mut run = 0;
    for ch in text.chars() {
        if ch == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = writeln!(out, "{indent}{fence}{info}");
    // Each line as it is (a `\r` stays), indented unless empty.
    for line in text.split_inclusive('\n') {
        if line != "\n" {
            out.push_str(indent);
        }
        out.push_str(line);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{indent}{fence}");
}

/// A duration for people: `850ms`, `12.3s`, `4m 05s`, `1h 02m`.
pub(crate) fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let tenths = (ms + 50) / 100;
    if tenths < 600 {
        return format!("{}.{}s", tenths / 10, tenths % 10);
    }
    let secs = (ms + 500) / 1000;
    if secs < 3600 {
        return format!("{}m {:02}s", secs / 60, secs % 60);
    }
    let mins = (secs + 30) / 60;
    format!("{}h {:02}m", mins / 60, mins % 60)
}

/// Text from agents and commands made safe to show in logs, tables and XML: terminal escape
/// sequences (colours, cursor movement, titles) are removed, `\r\n` becomes `\n`, and every other
/// control character except tab and newline is shown as its Unicode control picture (`␇` for BEL),
/// so nothing invisible reaches the reader and nothing invalid reaches an XML 1.0 parser.
pub(crate) fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_cleaning) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                if !skip_escape_sequence(&mut chars) {
                    out.push('\u{241b}');
                }
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\t' => out.push(c),
            '\u{0}'..='\u{1f}' => {
                out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'));
            }
            '\u{7f}' => out.push('\u{2421}'),
            // C1 controls (`\u{9b}` starts a sequence in some terminals), and noncharacters that
            // XML 1.0 forbids.
            '\u{80}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`sanitize`] for one line of a table or progress bar: newlines and tabs become spaces.
pub(crate) fn one_line(text: &str) -> String {
    sanitize(text)
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect()
}

fn needs_cleaning(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || c == '\u{fffe}' || c == '\u{ffff}'
}

/// A name that came from a workspace or a bundle (a file's path) as Markdown inline code that
/// stays on its line: every control character is shown as its picture (a newline as `␊`, ESC as
/// `␛`), and the code span is fenced with more backticks than any run inside it.
pub(crate) fn code_name(name: &str) -> String {
    let shown: String = name
        .chars()
        .map(|c| match c {
            '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'),
            '\u{7f}' => '\u{2421}',
            '\u{80}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}' => '\u{fffd}',
            c => c,
        })
        .collect();
    let longest = shown.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    if longest == 0 {
        return format!("`{shown}`");
    }
    let fence = "`".repeat(longest + 1);
    format!("{fence} {shown} {fence}")
}

/// Consumes the rest of an escape sequence whose ESC was just read. Returns false when the ESC
/// starts no sequence (it is then shown instead of dropped).
fn skip_escape_sequence(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    match chars.peek() {
        // CSI: parameters and intermediates, then one final byte.
        Some('[') => {
            chars.next();
            while let Some(&c) = chars.peek() {
                if ('\u{20}'..='\u{3f}').contains(&c) {
                    chars.next();
                    continue;
                }
                // A malformed sequence ends at the first byte that is not its final one; that
                // byte is kept.
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    chars.next();
                }
                break;
            }
            true
        }
        // OSC (window titles, hyperlinks): up to BEL or ESC \.
        Some(']') => {
            chars.next();
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                    chars.next();
                    break;
                }
            }
            true
        }
        // Two-character sequences (ESC followed by one of `@`..`_`, or charset selection).
        Some(&c) if ('\u{40}'..='\u{5f}').contains(&c) || c == '(' || c == ')' => {
            chars.next();
            if c == '(' || c == ')' {
                chars.next();
            }
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_outgrows_every_backtick_run_inside_and_indents_each_line() {
        let mut out = String::new();
        fenced(&mut out, "", "text", "a\n```\nb");
        assert_eq!(out, "````text\na\n```\nb\n````\n");
        let mut out = String::new();
        fenced(&mut out, "  ", "diff", "x ````` y\n\nz\n");
        assert_eq!(out, "  ``````diff\n  x ````` y\n\n  z\n  ``````\n");
    }

    #[test]
    fn counts_and_name_lists_read_as_sentences() {
        assert_eq!(count(1, "file", "files"), "1 file");
        assert_eq!(count(0, "file", "files"), "0 files");
        assert_eq!(plural(2), "s");
        assert_eq!(name_list(&["a", "b", "c"], 2), "`a`, `b` and 1 more");
        assert_eq!(name_list::<&str>(&[], 2), "");
    }

    #[test]
    fn durations_switch_units_at_their_boundaries() {
        assert_eq!(human_duration(0), "0ms");
        assert_eq!(human_duration(850), "850ms");
        assert_eq!(human_duration(999), "999ms");
        assert_eq!(human_duration(1000), "1.0s");
        assert_eq!(human_duration(12_340), "12.3s");
        assert_eq!(human_duration(59_949), "59.9s");
        assert_eq!(human_duration(59_950), "1m 00s");
        assert_eq!(human_duration(245_000), "4m 05s");
        assert_eq!(human_duration(3_599_499), "59m 59s");
        assert_eq!(human_duration(3_599_500), "1h 00m");
        assert_eq!(human_duration(3_720_000), "1h 02m");
        assert_eq!(human_duration(90_000_000), "25h 00m");
    }

    #[test]
    fn sanitize_drops_escape_sequences_and_shows_other_controls() {
        assert!(matches!(sanitize("plain\ttext\n"), Cow::Borrowed(_)));
        assert_eq!(sanitize("\u{1b}[1;31mred\u{1b}[0m"), "red");
        assert_eq!(sanitize("\u{1b}]0;title\u{7}after"), "after");
        assert_eq!(sanitize("\u{1b}]8;;http://x\u{1b}\\link"), "link");
        assert_eq!(sanitize("a\r\nb\rc"), "a\nb\u{240d}c");
        assert_eq!(sanitize("bell\u{7} nul\u{0}"), "bell\u{2407} nul\u{2400}");
        assert_eq!(sanitize("lone \u{1b}"), "lone \u{241b}");
        assert_eq!(sanitize("x\u{ffff}"), "x\u{fffd}");
        assert_eq!(one_line("a\nb\tc\u{1b}[2K"), "a b c");
        assert_eq!(sanitize("c1 \u{9b}2J"), "c1 \u{fffd}2J");
    }

    #[test]
    fn a_code_name_stays_on_one_line_and_shows_its_controls() {
        assert_eq!(code_name("src/a.rs"), "`src/a.rs`");
        assert_eq!(
            code_name("x\u{1b}]0;t\u{7}\nfake"),
            "`x\u{241b}]0;t\u{2407}\u{240a}fake`"
        );
        assert_eq!(code_name("a`b``c"), "``` a`b``c ```");
    }
}
