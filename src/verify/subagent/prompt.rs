//! The verification prompt: what the verifier is told of the task, the expected outputs, the gates,
//! the attempt's changes with their diff, and the verdict it must give.

use std::fmt::Write as _;

use super::SubAgentCheck;
use crate::agent::prompt::describe_output;
use crate::event::{GateReport, GateStatus};
use crate::text::{fenced, plural};
use crate::workspace::Changes;

/// The most changed paths listed in the prompt, and in a void verdict's reason.
const MAX_LISTED_PATHS: usize = 100;

/// The built-in verification prompt: the phase's task, the expected outputs, the gate results so
/// far, the files this attempt changed with `diff` (see
/// [`diff_of_changes`](super::diff_of_changes)), the phase's `verifier-prompt`, and the verdict
/// format.
#[must_use]
pub fn verification_prompt(c: &SubAgentCheck<'_>, diff: &str) -> String {
    let phase = c.phase;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Review the work of phase `{}` (attempt {})\n",
        phase.name.value, c.attempt
    );
    out.push_str(
        "You are reviewing another agent's work with fresh eyes. The agent was given the task \
         below and has finished. Decide whether the work in this workspace really accomplishes the \
         task: read the changed files, and run read-only checks (tests, linters, type checkers) \
         where they help. Trust only what you verify yourself, not what the agent claims.\n\n\
         **Do not create, modify or delete any file.** The workspace is compared before and after \
         your review: any change voids your verdict, fails the attempt, and is undone. Checks that \
         write files (caches, build output, coverage reports) count as changes unless the project \
         ignores those files (e.g. in `.gitignore`): prefer options that write nothing.\n\n",
    );

    out.push_str("## The task\n\n");
    if let Some(description) = phase
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
    {
        let _ = writeln!(out, "The phase: {}\n", description.trim());
    }
    if c.task.trim().is_empty() {
        out.push_str("The agent was given no instructions beyond the expected outputs.\n\n");
    } else {
        out.push_str("The agent was given these instructions:\n\n");
        fenced(&mut out, "", "text", c.task);
        out.push('\n');
    }

    out.push_str("## Expected outputs\n\n");
    if phase.outputs.is_empty() {
        out.push_str("The phase declares no expected files: judge by the task.\n\n");
    } else {
        for output in &phase.outputs {
            let _ = writeln!(out, "- {}", describe_output(output));
        }
        out.push('\n');
    }

    out.push_str("## Gate results so far\n\n");
    if c.gate_reports.is_empty() {
        out.push_str("No gate ran before this review.\n\n");
    } else {
        for report in c.gate_reports {
            gate_item(&mut out, report);
        }
        out.push('\n');
    }

    out.push_str("## Changes made by this attempt\n\n");
    changes_section(&mut out, c.changes, diff);

    if let Some(extra) = &phase.verifier_prompt
        && !extra.text().trim().is_empty()
    {
        out.push_str("## Additional instructions\n\n");
        out.push_str(extra.text().trim_end());
        out.push_str("\n\n");
    }

    // The format line is deliberately not valid JSON, so that a response echoing the prompt is
    // never mistaken for a verdict.
    out.push_str(
        "## Your verdict\n\n\
         End your answer with your verdict: one JSON object in this form, with nothing after it:\n\n\
         ```json\n\
         {\"success\": true | false, \"errors\": [\"…\"], \"checks_passed\": [\"…\"], \"feedback\": \"…\"}\n\
         ```\n\n\
         - `success`: `true` only when the task is fully and correctly done; otherwise `false`.\n\
         - `errors`: every problem you found, precise enough to fix without guessing (file, line, \
         what is wrong, what is expected); empty when `success` is `true`.\n\
         - `checks_passed`: what you checked and found right.\n\
         - `feedback`: what the agent should do in its next attempt; may be empty when `success` \
         is `true`.\n",
    );
    out
}

/// One gate as a list item, its details as sub-items (later lines of a detail indented under it).
fn gate_item(out: &mut String, report: &GateReport) {
    let status = match report.status {
        GateStatus::Passed => "passed",
        GateStatus::Failed => "failed",
        GateStatus::Skipped => "skipped",
    };
    if report.kind == *report.name {
        let _ = writeln!(out, "- `{}`: {status}", report.name);
    } else {
        let _ = writeln!(out, "- `{}` (`{}`): {status}", report.name, report.kind);
    }
    for detail in &report.details {
        let mut lines = detail.trim_end().lines();
        if let Some(first) = lines.next() {
            let _ = writeln!(out, "  - {first}");
        }
        for line in lines {
            let _ = writeln!(out, "    {line}");
        }
    }
}

/// The changed files, bounded, and the diff.
fn changes_section(out: &mut String, changes: &Changes, diff: &str) {
    if changes.is_empty() {
        out.push_str("This attempt changed no files.\n\n");
        return;
    }
    let _ = writeln!(
        out,
        "This attempt changed {} file{} ({} created, {} modified, {} deleted):\n",
        changes.len(),
        plural(changes.len()),
        changes.created.len(),
        changes.modified.len(),
        changes.deleted.len(),
    );
    let listed = changes
        .created
        .iter()
        .map(|p| ("created", p))
        .chain(changes.modified.iter().map(|p| ("modified", p)))
        .chain(changes.deleted.iter().map(|p| ("deleted", p)));
    for (verb, path) in listed.take(MAX_LISTED_PATHS) {
        let _ = writeln!(out, "- {verb} {}", crate::text::code_name(path));
    }
    if changes.len() > MAX_LISTED_PATHS {
        let _ = writeln!(out, "- … and {} more", changes.len() - MAX_LISTED_PATHS);
    }
    out.push('\n');
    if diff.trim().is_empty() {
        out.push_str("There is no text difference to show.\n\n");
    } else {
        out.push_str(
            "The diff of these changes (binary files, very large files and symlinks are only \
             named; long diffs are cut):\n\n",
        );
        fenced(out, "", "diff", diff);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_backticks_inside() {
        let mut out = String::new();
        fenced(&mut out, "", "diff", "+```rust\n");
        assert_eq!(out, "````diff\n+```rust\n````\n");
    }
}
