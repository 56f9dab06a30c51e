//! The `absent` gate: a regex matches nowhere in the agent's response or the target files.

use crate::text::code_name;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use regex::Regex;

use super::files::{BINARY_SNIFF, READ_CAP, read_text};
use super::matches::{Target, line_regex, target};
use super::{Finding, GateContext, GateInfo, count, more};

/// What helixflow says about the `absent` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "A forbidden pattern was found; remove every occurrence:",
    how_to_fix: "remove every match listed",
    outside_a_run: None,
};

/// Most `absent` matches listed in one report.
const MAX_LISTED_MATCHES: usize = 20;

/// What the gate checks, for the agent.
pub(super) fn describe(target: &str, pattern: &str) -> String {
    format!("`{pattern}` appears nowhere in {target}")
}

/// Lists every line where `pattern` matches in the target; passes when there is none.
pub(super) async fn absent_gate(
    ctx: &GateContext<'_>,
    target_text: &str,
    pattern: &str,
) -> Finding {
    let regex = match line_regex(pattern) {
        Ok(regex) => regex,
        Err(error) => return Finding::failed(format!("invalid pattern `{pattern}`: {error}")),
    };
    let hits = match target(ctx, target_text) {
        Err(problem) => return Finding::failed(problem),
        Ok(Target::Response(response)) => {
            let mut hits = Hits::default();
            hits.text(&regex, "response", response);
            hits
        }
        // Nothing to look in passes (generated files may not be there), but says so: a typo in
        // the path must not look like a clean check.
        Ok(Target::Files(files)) if files.is_empty() => {
            return Finding::passed_with(format!(
                "`{target_text}` matches no file: nothing was checked for `{pattern}`"
            ));
        }
        Ok(Target::Files(files)) => {
            let workspace = ctx.workspace.to_owned();
            tokio::task::spawn_blocking(move || {
                let mut hits = Hits::default();
                for path in &files {
                    if let Err(error) = scan_lines(&workspace.join(path), path, &regex, &mut hits) {
                        hits.unreadable
                            .push(format!("{} could not be read: {error}", code_name(path)));
                    }
                }
                hits
            })
            .await
            .unwrap_or_default()
        }
    };
    let mut details = hits.unreadable;
    if hits.total > 0 {
        details.insert(
            0,
            format!(
                "`{pattern}` must not appear, but it matches {}",
                count(hits.total, "line", "lines")
            ),
        );
        details.extend(hits.listed);
        if hits.total > MAX_LISTED_MATCHES {
            details.push(more(hits.total - MAX_LISTED_MATCHES, "matching line"));
        }
    }
    Finding::from_problems(details)
}

/// Matches an `absent` gate found.
#[derive(Default)]
struct Hits {
    total: usize,
    /// `path:line: text`, at most [`MAX_LISTED_MATCHES`].
    listed: Vec<String>,
    unreadable: Vec<String>,
}

impl Hits {
    /// Counts the lines of `text` where a match starts (a match may span lines), listing each as
    /// `label:line: text`.
    fn text(&mut self, regex: &Regex, label: &str, text: &str) {
        let mut line_number = 1;
        let mut counted_to = 0;
        let mut last_listed_line = 0;
        for found in regex.find_iter(text) {
            line_number += text.as_bytes()[counted_to..found.start()]
                .iter()
                .filter(|&&byte| byte == b'\n')
                .count();
            counted_to = found.start();
            if line_number == last_listed_line {
                continue;
            }
            last_listed_line = line_number;
            let start = text[..found.start()].rfind('\n').map_or(0, |at| at + 1);
            let end = text[found.start()..]
                .find('\n')
                .map_or(text.len(), |at| found.start() + at);
            let line = text[start..end].trim_end_matches('\r');
            self.total += 1;
            if self.listed.len() < MAX_LISTED_MATCHES {
                let clamp = |at: usize| at.clamp(start, start + line.len()) - start;
                let matched = clamp(found.start())..clamp(found.end());
                self.listed
                    .push(format!("{label}:{line_number}: {}", excerpt(line, matched)));
            }
        }
    }

    fn line(&mut self, regex: &Regex, label: &str, number: usize, line: &str) {
        let Some(found) = regex.find(line) else {
            return;
        };
        self.total += 1;
        if self.listed.len() < MAX_LISTED_MATCHES {
            self.listed.push(format!(
                "{label}:{number}: {}",
                excerpt(line, found.range())
            ));
        }
    }
}

/// Feeds a text file to `hits`; binary files are skipped. A file of up to [`READ_CAP`] bytes is
/// searched whole, so a pattern may span lines; a larger one line by line, in constant memory.
fn scan_lines(full: &Path, label: &str, regex: &Regex, hits: &mut Hits) -> io::Result<()> {
    if std::fs::metadata(full)?.len() <= READ_CAP {
        if let Some(text) = read_text(full, READ_CAP)? {
            hits.text(regex, label, &text);
        }
        return Ok(());
    }
    let mut reader = BufReader::new(crate::regular::open(full)?);
    if reader
        .fill_buf()?
        .iter()
        .take(BINARY_SNIFF)
        .any(|b| *b == 0)
    {
        return Ok(());
    }
    let mut buffer = Vec::new();
    let mut number = 0;
    loop {
        buffer.clear();
        if reader.read_until(b'\n', &mut buffer)? == 0 {
            return Ok(());
        }
        number += 1;
        let line = String::from_utf8_lossy(&buffer);
        hits.line(regex, label, number, line.trim_end_matches(['\n', '\r']));
    }
}

/// The line trimmed, or, for a long line, a window around the match.
fn excerpt(line: &str, matched: std::ops::Range<usize>) -> String {
    const WIDTH: usize = 160;
    let trimmed = line.trim();
    if trimmed.len() <= WIDTH {
        return trimmed.to_owned();
    }
    let mut start = matched.start.saturating_sub(WIDTH / 2);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + WIDTH).max(matched.end).min(line.len());
    while !line.is_char_boundary(end) {
        end += 1;
    }
    let before = if start > 0 { "…" } else { "" };
    let after = if end < line.len() { "…" } else { "" };
    format!("{before}{}{after}", &line[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_windows_long_lines_on_char_boundaries() {
        let line = format!("{}TODO{}", "é".repeat(200), "x".repeat(200));
        let at = line.find("TODO").unwrap();
        let shown = excerpt(&line, at..at + 4);
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        assert!(shown.contains("TODO"));
        assert_eq!(excerpt("  short TODO  ", 8..12), "short TODO");
    }
}
