//! The `sections` gate: a Markdown document has every expected heading.

use std::path::Path;

use super::document::{FrontMatter, front_matter, read_document};
use super::{Finding, GateInfo, name_list};

/// What helixflow says about the `sections` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "The document is missing required headings:",
    how_to_fix: "add the missing headings",
    outside_a_run: None,
};

/// What the gate checks, for the agent.
pub(super) fn describe(path: &str, headings: &[String]) -> String {
    format!("{path} has the sections {}", headings.join(", "))
}

/// Names each expected heading the document lacks, and the headings it has.
pub(super) fn sections_gate(workspace: &Path, path: &str, expected: &[String]) -> Finding {
    let text = match read_document(workspace, path) {
        Ok(text) => text,
        Err(problem) => return Finding::failed(problem),
    };
    let found = headings(&text);
    let found_folded: Vec<String> = found.iter().map(|h| h.to_lowercase()).collect();
    let mut problems: Vec<String> = expected
        .iter()
        .filter(|heading| {
            let wanted = heading_text(heading.trim().trim_start_matches('#')).to_lowercase();
            !found_folded.contains(&wanted)
        })
        .map(|heading| format!("`{path}` has no heading `{}`", heading.trim()))
        .collect();
    if !problems.is_empty() {
        problems.push(if found.is_empty() {
            format!("`{path}` has no headings at all")
        } else {
            let found: Vec<&str> = found.iter().map(String::as_str).collect();
            format!("headings found: {}", name_list(&found, 30))
        });
    }
    Finding::from_problems(problems)
}

/// The texts of a Markdown document's headings (ATX `# …` and setext, underlined with `===` or
/// `---`), outside front matter and fenced code blocks.
fn headings(text: &str) -> Vec<String> {
    let body = match front_matter(text) {
        FrontMatter::Block { rest, .. } => rest,
        FrontMatter::None | FrontMatter::Unclosed => text,
    };
    let mut headings = Vec::new();
    // The fence character and length of the open fenced code block.
    let mut fence: Option<(char, usize)> = None;
    // The lines of the paragraph read so far: a setext underline (`===` or `---`) below them makes
    // them a heading.
    let mut paragraph: Vec<&str> = Vec::new();
    for line in body.lines() {
        let trimmed = line.trim_start_matches(' ');
        let indented = line.len() - trimmed.len() > 3;
        if let Some((ch, len)) = fence {
            let run = trimmed.chars().take_while(|c| *c == ch).count();
            if !indented && run >= len && trimmed[run..].trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if indented {
            // An indented line continues a paragraph; otherwise it is code.
            if !paragraph.is_empty() {
                paragraph.push(trimmed.trim());
            }
            continue;
        }
        if let Some(opened) = opening_fence(trimmed) {
            fence = Some(opened);
            paragraph.clear();
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        let rest = &trimmed[hashes..];
        if (1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
            headings.push(heading_text(rest));
            paragraph.clear();
            continue;
        }
        let underline = trimmed.trim_end();
        if !paragraph.is_empty()
            && !underline.is_empty()
            && (underline.bytes().all(|b| b == b'=') || underline.bytes().all(|b| b == b'-'))
        {
            headings.push(paragraph.join(" "));
            paragraph.clear();
            continue;
        }
        if trimmed.trim().is_empty() {
            paragraph.clear();
        } else {
            paragraph.push(trimmed.trim());
        }
    }
    headings
}

/// The fence of a line that opens a fenced code block: three or more backticks or tildes.
fn opening_fence(line: &str) -> Option<(char, usize)> {
    ['`', '~'].into_iter().find_map(|ch| {
        let run = line.chars().take_while(|c| *c == ch).count();
        // A backtick fence's info string may not contain backticks (CommonMark).
        (run >= 3 && !(ch == '`' && line[run..].contains('`'))).then_some((ch, run))
    })
}

/// A heading's text: trimmed, without the optional closing run of `#`s.
fn heading_text(rest: &str) -> String {
    let text = rest.trim();
    let without = text.trim_end_matches('#');
    if without.is_empty() {
        String::new()
    } else if without.ends_with([' ', '\t']) || without.len() == text.len() {
        without.trim_end().to_owned()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_skip_fences_and_front_matter() {
        let text = "---\n# comment: yes\ntitle: x\n---\n# Kontext\n```md\n# Not a heading\n```\n\
                    ## Entscheidung ##\n    # indented code\n~~~~\n# also code\n~~~\n# still code\n\
                    ~~~~\n###### Tiefe\n####### seven\n#no-space\n#\n";
        assert_eq!(headings(text), ["Kontext", "Entscheidung", "Tiefe", ""]);
    }

    #[test]
    fn heading_text_keeps_hashes_that_are_part_of_the_text() {
        assert_eq!(heading_text(" C# "), "C#");
        assert_eq!(heading_text(" Title ### "), "Title");
        assert_eq!(heading_text(" ###"), "");
    }
}
