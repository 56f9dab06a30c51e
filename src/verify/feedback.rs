//! Feedback for the next attempt: what failed in this one, precisely enough to act on.
//!
//! The text is Markdown, deterministic for the same input (it is written to `feedback.md`, given to
//! the agent as `{{ feedback }}` and snapshot-tested). Each gate detail is kept verbatim: its first
//! line becomes a list item, and any further lines (a source line with its caret, a command's output)
//! a fenced block under it, so alignment survives. Redaction is the caller's job: gate details are
//! redacted when the gates run, and an agent's `stderr` must be redacted before it gets here.

use std::fmt::Write as _;
use std::time::Duration;

use crate::event::{GateReport, GateStatus, TimeoutKind, how_it_ended};
use crate::model::{Phase, Worker};
use crate::text::fenced;
use crate::verify::gates;

/// Most lines of the agent's standard error quoted.
const STDERR_LINES: usize = 40;

/// The most feedback an agent is given, in bytes: it fits in one argument (Linux allows 128 KiB)
/// with room for the rest of a prompt. Longer feedback keeps its start and its end, and names the
/// file that holds all of it.
pub const AGENT_FEEDBACK_LIMIT: usize = 64 * 1024;

/// The most feedback a Stop hook gives, in bytes: what reaches the model whole through both hook
/// channels (Codex 0.169.0 cuts hook output at about 2,500 tokens, 10,000 bytes, and Claude Code's
/// hook output is shortened past 10,000 characters).
pub(crate) const HOOK_FEEDBACK_LIMIT: usize = 8 * 1024;

/// Why the agent (or `run` step) itself failed, before any gate ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentFailure {
    /// It exited non-zero, or was ended by a signal.
    Exit {
        /// The exit code, when it exited normally.
        code: Option<i32>,
        /// The signal that ended it, when one did.
        signal: Option<i32>,
        /// Its standard error, or the start and the end of a long one (already redacted).
        stderr: String,
        /// The error the agent reported in its output (Claude's `is_error` result, a JSON
        /// `error`), when it did.
        reported: Option<String>,
    },
    /// helixflow stopped it for a timeout.
    Timeout {
        /// The wall-clock `timeout` or the `idle-timeout`.
        kind: TimeoutKind,
        /// The limit that expired.
        limit: Duration,
    },
    /// Its final response could not be taken from its output.
    Response(String),
    /// Its transcript did not match the agent's `evidence` pattern: the work looks skipped.
    NoEvidence {
        /// The `evidence` regex.
        pattern: String,
    },
    /// No tool call of its transcript succeeded (`evidence-tools`).
    NoToolEvidence {
        /// The tools asked for; empty for any.
        tools: Vec<String>,
        /// The calls that were refused or failed.
        failed: Vec<String>,
    },
}

impl AgentFailure {
    /// One line for reports, when how the child exited does not already say what went wrong:
    /// the response could not be read, or the evidence is missing. None for exits and timeouts.
    pub(crate) fn error(&self) -> Option<String> {
        match self {
            AgentFailure::Exit { reported, .. } => reported.clone(),
            AgentFailure::Timeout { .. } => None,
            AgentFailure::Response(reason) => Some(reason.clone()),
            AgentFailure::NoEvidence { pattern } => Some(format!(
                "the agent's transcript does not match its evidence `{pattern}`: the work looks skipped"
            )),
            AgentFailure::NoToolEvidence { tools, failed } => Some(format!(
                "no {} call of the agent succeeded{}: the work looks skipped",
                tool_names(tools),
                if failed.is_empty() {
                    String::new()
                } else {
                    format!(" ({} refused or failed)", failed.len())
                }
            )),
        }
    }
}

/// "tool" or "`Write`/`Edit`".
fn tool_names(tools: &[String]) -> String {
    if tools.is_empty() {
        "tool".to_owned()
    } else {
        tools
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// The feedback as an agent is given it: whole up to [`AGENT_FEEDBACK_LIMIT`] bytes, else its
/// start and its end around a line naming `file`, which holds all of it.
pub fn for_agent(text: &str, file: &std::path::Path) -> String {
    bounded(text, file, AGENT_FEEDBACK_LIMIT)
}

/// `text` whole up to `limit` bytes, else its start and its end around a line naming `file`,
/// which holds all of it.
pub(crate) fn bounded(text: &str, file: &std::path::Path, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let note = format!(
        "\n\n[… {{}} bytes of this feedback are left out here; all of it is in {} …]\n\n",
        file.display()
    );
    let room = limit.saturating_sub(note.len() + 20);
    let head_end = floor_char_boundary(text, room * 3 / 4);
    let tail_start = ceil_char_boundary(text, text.len() - (room - head_end));
    let left_out = tail_start - head_end;
    format!(
        "{}{}{}",
        &text[..head_end],
        note.replace("{}", &left_out.to_string()),
        &text[tail_start..]
    )
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// The feedback text (Markdown) for the attempt after `attempt`: what failed, precisely.
/// `max_attempts` is the last attempt the phase can reach, counting what is left of the run's
/// `retry-budget`; the attempt after `attempt` is warned when it is that one.
pub fn render(
    phase: &Phase,
    attempt: u32,
    max_attempts: u32,
    agent: Option<&AgentFailure>,
    reports: &[GateReport],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Attempt {attempt} of {max_attempts} failed verification\n"
    );
    if attempt.saturating_add(1) == max_attempts {
        out.push_str(
            "⚠ This is your last attempt: if it fails too, the phase fails. Fix every problem \
             listed below, and check your work against the gates before you finish.\n\n",
        );
    }
    let _ = writeln!(
        out,
        "Phase `{}`: fix every problem below. The next attempt is checked the same way.\n",
        phase.name.value
    );

    body(&mut out, phase, agent, reports);
    out
}

/// The feedback (Markdown) an agent's own session gets for a phase that fails: what fails,
/// precisely, as a retry in a run is told. For a Stop hook, `refusals` is the stops refused in a
/// row so far, this one included, and the most it refuses; the last one is warned.
pub(crate) fn render_for_session(
    phase: &Phase,
    refusals: Option<(u32, u32)>,
    reports: &[GateReport],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# helixflow: phase `{}` is not done yet\n",
        phase.name.value
    );
    match refusals {
        Some((refused, most)) => {
            if refused >= most {
                out.push_str(
                    "⚠ This is the last time helixflow refuses your stop: if you stop again \
                     with problems left, the phase stays failed. Fix every problem listed \
                     below, and check your work against the gates before you finish.\n\n",
                );
            }
            let _ = writeln!(
                out,
                "Fix every problem below, then finish again: your next stop is checked the same \
                 way (stop {refused} of at most {most} refused in a row).\n"
            );
        }
        None => out.push_str("Fix every problem below.\n\n"),
    }
    body(&mut out, phase, None, reports);
    out
}

/// What failed (the agent, then each failed gate), the gates not run and those that passed.
fn body(out: &mut String, phase: &Phase, agent: Option<&AgentFailure>, reports: &[GateReport]) {
    let failed: Vec<&GateReport> = reports
        .iter()
        .filter(|r| r.status == GateStatus::Failed)
        .collect();
    if let Some(failure) = agent {
        agent_section(out, worker_noun(phase), failure);
    }
    for report in &failed {
        gate_section(out, report);
    }
    if agent.is_none() && failed.is_empty() {
        out.push_str("No specific failure was recorded for this attempt.\n\n");
    }

    let skipped: Vec<&GateReport> = reports
        .iter()
        .filter(|r| r.status == GateStatus::Skipped)
        .collect();
    if !skipped.is_empty() {
        out.push_str("## Gates not run\n\n");
        for report in skipped {
            let _ = write!(out, "- {}", gate_label(report));
            if let Some(reason) = report.details.first() {
                let _ = write!(out, ": {reason}");
            }
            out.push('\n');
        }
        out.push('\n');
    }

    let passed: Vec<String> = reports
        .iter()
        .filter(|r| r.status == GateStatus::Passed)
        .map(|r| format!("`{}`", r.name))
        .collect();
    if !passed.is_empty() {
        let _ = writeln!(
            out,
            "Gates that passed (keep them passing): {}.",
            passed.join(", ")
        );
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
}

/// "The agent" or "The `run` command", as the subject of the agent section.
fn worker_noun(phase: &Phase) -> &'static str {
    match phase.worker {
        Worker::Agent(_) => "agent",
        Worker::Run(_) => "`run` command",
    }
}

fn agent_section(out: &mut String, noun: &str, failure: &AgentFailure) {
    match failure {
        AgentFailure::Exit {
            code,
            signal,
            stderr,
            reported,
        } => {
            let _ = writeln!(out, "## The {noun} failed\n");
            // What the agent itself said went wrong comes first: it is the real cause, and the
            // exit code only its echo.
            if let Some(reported) = reported {
                let _ = writeln!(out, "{}\n", capitalized(reported));
            }
            let how = how_it_ended(*code, *signal);
            let _ = write!(out, "The {noun} {how}.");
            let stderr = console::strip_ansi_codes(stderr);
            if stderr.trim().is_empty() {
                out.push_str(" It wrote nothing to standard error.\n\n");
            } else {
                let (shown, whole) = first_and_last_lines(&stderr, STDERR_LINES);
                out.push_str(if whole {
                    " Its standard error:\n\n"
                } else {
                    " The start and the end of its standard error:\n\n"
                });
                fenced(out, "", "text", &shown);
                out.push('\n');
            }
        }
        AgentFailure::Timeout { kind, limit } => {
            let _ = writeln!(out, "## The {noun} timed out\n");
            // A zero limit means the caller did not know it; say nothing rather than "after 0s".
            let limit = if limit.is_zero() {
                String::new()
            } else {
                format!(" of {}", humantime::format_duration(*limit))
            };
            let _ = match kind {
                TimeoutKind::Wall => writeln!(
                    out,
                    "The {noun} was stopped: it ran past its time limit{limit} (`timeout`). Work \
                     in smaller steps and finish within the limit.\n"
                ),
                TimeoutKind::Idle => writeln!(
                    out,
                    "The {noun} was stopped: it produced no output for longer than its \
                     `idle-timeout`{limit}. Avoid commands that wait for input or run silently \
                     for long.\n"
                ),
            };
        }
        AgentFailure::Response(reason) => {
            let _ = writeln!(out, "## The {noun}'s final response could not be read\n");
            let _ = writeln!(out, "{reason}\n");
        }
        AgentFailure::NoToolEvidence { tools, failed } => {
            let _ = writeln!(out, "## The work looks skipped\n");
            let _ = write!(out, "None of your {} calls succeeded", tool_names(tools));
            if failed.is_empty() {
                out.push_str(": you made none.");
            } else {
                let _ = write!(
                    out,
                    ": {} were refused or failed ({}).",
                    failed.len(),
                    failed.join(", ")
                );
            }
            out.push_str(" Do the work with your tools; do not only describe it.\n\n");
        }
        AgentFailure::NoEvidence { pattern } => {
            let _ = writeln!(out, "## The work looks skipped\n");
            let _ = writeln!(
                out,
                "Your transcript did not show the required evidence `{pattern}` — the work looks \
                 skipped. Do the work with your tools; do not only describe it.\n"
            );
        }
    }
}

fn gate_section(out: &mut String, report: &GateReport) {
    let _ = writeln!(out, "## Gate {} failed\n", gate_label(report));
    if let Some(kind) = report.check_kind() {
        let _ = writeln!(out, "{}\n", gates::info(kind).intro);
    }
    if report.details.is_empty() {
        out.push_str("- (the gate gave no details)\n");
    }
    for detail in &report.details {
        list_item(out, detail);
    }
    out.push('\n');
}

/// `` `tests` (`command`) ``, or just `` `syntax` `` when the name is the kind.
fn gate_label(report: &GateReport) -> String {
    if report.kind == *report.name {
        format!("`{}`", report.name)
    } else {
        format!("`{}` (`{}`)", report.name, report.kind)
    }
}

/// At most `max` lines of `text`: all of them, or the first quarter and the rest from its end
/// around a line saying how many were left out; and whether it is all of them. A CLI's first
/// line is often the real error, and its last lines what it did at the end.
fn first_and_last_lines(text: &str, max: usize) -> (String, bool) {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.len() <= max {
        return (lines.join("\n"), true);
    }
    let head = max / 4;
    let tail = max - head;
    let mut shown: Vec<String> = lines[..head].iter().map(|l| (*l).to_owned()).collect();
    shown.push(format!(
        "[… {} lines left out …]",
        lines.len() - head - tail
    ));
    shown.extend(lines[lines.len() - tail..].iter().map(|l| (*l).to_owned()));
    (shown.join("\n"), false)
}

/// `text` with its first letter in upper case.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().collect::<String>() + chars.as_str()
    })
}

/// A Markdown list item: the first line as the item, further lines in a fenced block under it.
fn list_item(out: &mut String, detail: &str) {
    let detail = detail.trim_end_matches('\n');
    let (first, rest) = detail.split_once('\n').unwrap_or((detail, ""));
    let _ = writeln!(out, "- {first}");
    if !rest.is_empty() {
        out.push('\n');
        fenced(out, "  ", "text", rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_item_keeps_alignment_of_later_lines() {
        let mut out = String::new();
        list_item(&mut out, "a.py:1:5: error\nx = (\n    ^");
        assert_eq!(
            out,
            "- a.py:1:5: error\n\n  ```text\n  x = (\n      ^\n  ```\n"
        );
    }
}
