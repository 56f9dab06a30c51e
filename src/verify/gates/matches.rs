//! The `matches` gate: a regex matches the agent's response, or somewhere in the target files.

use std::collections::BTreeSet;

use regex::{Regex, RegexBuilder};

use super::files::{GATES_READ_INSIDE, READ_CAP, clean, glob_files, outside_detail, read_text};
use super::{Finding, GateContext, GateInfo, count, last_lines, name_list};

/// What helixflow says about the `matches` gate.
pub(super) const INFO: GateInfo = GateInfo {
    intro: "A required pattern was not found:",
    how_to_fix: "make the target contain what the pattern requires",
    outside_a_run: None,
};

/// What the gate checks, for the agent.
pub(super) fn describe(target: &str, pattern: &str) -> String {
    format!("{target} matches `{pattern}`")
}

/// What a `matches` or `absent` gate looks at.
pub(super) enum Target<'t> {
    Response(&'t str),
    Files(Vec<String>),
}

/// Resolves a gate's TARGET: the response, a glob over the after-snapshot, or a plain path. A
/// file that leads outside the workspace is not read: the gate fails, naming it.
pub(super) fn target<'t>(ctx: &GateContext<'t>, target: &str) -> Result<Target<'t>, String> {
    if target == "response" {
        return ctx.response.map(Target::Response).ok_or_else(|| {
            "there is no agent response to check: this phase is a `run` step".to_owned()
        });
    }
    let path = clean(target);
    let mut files: BTreeSet<String> = BTreeSet::new();
    if target.contains(['*', '?', '[', '{']) {
        files.extend(glob_files(
            ctx.workspace,
            ctx.exclude,
            std::slice::from_ref(&path),
        )?);
    }
    if ctx.workspace.join(&path).is_file() {
        files.insert(path);
    }
    let outside: Vec<String> = files
        .iter()
        .filter_map(|file| outside_detail(ctx.workspace, file, GATES_READ_INSIDE))
        .collect();
    if !outside.is_empty() {
        return Err(outside.join("\n"));
    }
    Ok(Target::Files(files.into_iter().collect()))
}

/// The regex of a `matches` or `absent` pattern: `^` and `$` match at every line's start and end,
/// whether lines end with `\n` or `\r\n`.
pub(super) fn line_regex(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .multi_line(true)
        .crlf(true)
        .build()
}

/// Passes when `pattern` matches the response, or somewhere in one of the target files.
pub(super) async fn matches_gate(
    ctx: &GateContext<'_>,
    target_text: &str,
    pattern: &str,
) -> Finding {
    let regex = match line_regex(pattern) {
        Ok(regex) => regex,
        Err(error) => return Finding::failed(format!("invalid pattern `{pattern}`: {error}")),
    };
    match target(ctx, target_text) {
        Err(problem) => Finding::failed(problem),
        Ok(Target::Response(response)) => {
            if regex.is_match(response) {
                return Finding::from_problems(Vec::new());
            }
            let ending = if response.trim().is_empty() {
                "; the response is empty".to_owned()
            } else {
                format!("; the response ended with:\n{}", last_lines(response, 10))
            };
            Finding::failed(format!("the response does not match `{pattern}`{ending}"))
        }
        Ok(Target::Files(files)) if files.is_empty() => Finding::failed(format!(
            "`{target_text}` matches no file, so `{pattern}` cannot match"
        )),
        Ok(Target::Files(files)) => {
            let workspace = ctx.workspace.to_owned();
            let checked = files.clone();
            let found = tokio::task::spawn_blocking(move || {
                checked.iter().any(|path| {
                    read_text(&workspace.join(path), READ_CAP)
                        .ok()
                        .flatten()
                        .is_some_and(|text| regex.is_match(&text))
                })
            })
            .await
            .unwrap_or(false);
            if found {
                return Finding::from_problems(Vec::new());
            }
            let detail = if files.len() == 1 {
                format!("`{pattern}` matches nowhere in `{}`", files[0])
            } else {
                let names: Vec<&str> = files.iter().map(String::as_str).collect();
                format!(
                    "`{pattern}` matches nowhere in the {} matching `{target_text}` ({})",
                    count(files.len(), "file", "files"),
                    name_list(&names, 10)
                )
            };
            Finding::failed(detail)
        }
    }
}
