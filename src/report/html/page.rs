//! The page: the run's totals, the DAG, the timeline, then each phase and each of its attempts in
//! detail. One file with its CSS, script and drawings inline: it opens from `file://` and makes
//! no request (its Content-Security-Policy allows none). Long texts are cut to a budget per
//! attempt and link to the run folder's files that hold them whole.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::escape::{cut, esc};
use super::files::FileView;
use super::model::{AttemptView, PhaseView, RunView, SegmentKind};
use super::status::{Status, attempt_status, phase_status};
use super::{dag, timeline};
use crate::event::GateStatus;
use crate::event::usage::{FailureClass, short_tokens};
use crate::text::human_duration;

const CSS: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// The most text of one attempt shown inline (feedback, gate details, the verdict); the page's
/// whole budget is shared among the attempts, within these bounds.
const ATTEMPT_TEXT_MAX: usize = 48 * 1024;
const ATTEMPT_TEXT_MIN: usize = 4 * 1024;
const PAGE_TEXT: usize = 1024 * 1024;

/// What a page is made from.
pub(crate) struct Page<'a> {
    pub view: &'a RunView,
    /// The files each phase's bundle holds, by phase folder.
    pub files: &'a HashMap<String, Vec<FileView>>,
    /// What links into the run folder start with (empty beside its files).
    pub links: &'a str,
    /// Seconds between reloads of a live page.
    pub refresh_secs: u64,
    /// The script's nonce, new for each page written.
    pub nonce: &'a str,
    /// When the page was written (RFC 3339).
    pub written: &'a str,
}

impl Page<'_> {
    /// The page's HTML.
    pub(crate) fn render(&self) -> String {
        let view = self.view;
        let attempts: usize = view.phases.iter().map(|p| p.attempts.len()).sum();
        let budget = (PAGE_TEXT / attempts.max(1)).clamp(ATTEMPT_TEXT_MIN, ATTEMPT_TEXT_MAX);
        // About a kilobyte for each phase and two for each attempt: a page of a thousand phases
        // is over a megabyte, which grown from a small start is copied many times.
        let mut out = String::with_capacity(64 * 1024 + view.phases.len() * 1024 + attempts * 2048);
        self.head(&mut out);
        self.header(&mut out);
        out.push_str("<main>");
        let _ = write!(
            out,
            "<section id=\"dag\" aria-labelledby=\"dag-h\"><h2 id=\"dag-h\">Phases</h2><div class=\"scroll\" tabindex=\"0\">{}</div></section>",
            dag::svg(view)
        );
        out.push_str("<section id=\"timeline\" aria-labelledby=\"timeline-h\"><h2 id=\"timeline-h\">Timeline</h2>");
        legend(&mut out);
        out.push_str(&timeline::html(view));
        out.push_str("</section><section id=\"details\" aria-labelledby=\"details-h\"><h2 id=\"details-h\">Phases in detail</h2>");
        for (p, phase) in view.phases.iter().enumerate() {
            self.phase(&mut out, p, phase, budget);
        }
        out.push_str("</section>");
        warnings(&mut out, view);
        let _ = write!(
            out,
            "</main><footer>Written by helixflow {} at {} from the journal of run {}.</footer><script nonce=\"{}\">{SCRIPT}</script></body></html>",
            env!("CARGO_PKG_VERSION"),
            esc(self.written),
            esc(&view.run_id),
            self.nonce
        );
        // A text file ends with a newline.
        out.push('\n');
        out
    }

    fn head(&self, out: &mut String) {
        let view = self.view;
        let live = if view.live {
            format!(" data-live=\"{}\"", self.refresh_secs)
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\" data-run=\"{}\"{live}><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-{}'; img-src data:\"><meta name=\"generator\" content=\"helixflow\"><title>{}: run {} ({})</title><style>{CSS}</style></head><body>",
            esc(&view.run_id),
            self.nonce,
            esc(&view.pipeline),
            esc(&view.run_id),
            esc(&view.status),
        );
        if view.live {
            // Without the script the page still refreshes.
            let _ = write!(
                out,
                "<noscript><meta http-equiv=\"refresh\" content=\"{}\"></noscript>",
                self.refresh_secs
            );
        }
    }

    fn header(&self, out: &mut String) {
        let view = self.view;
        let status = run_status(&view.status);
        let _ = write!(
            out,
            "<a class=\"skip\" href=\"#details\">Skip to the phases in detail</a><header><h1>Run <span class=\"run-id\">{}</span> of <q>{}</q> <span class=\"badge {}\">{} {}</span></h1>",
            esc(&view.run_id),
            esc(&view.pipeline),
            status.class(),
            status.symbol(),
            esc(&view.status)
        );
        if view.live {
            let _ = write!(
                out,
                "<p class=\"live\" role=\"status\">This run is still going: the page reloads itself every {} seconds, where you were.</p>",
                self.refresh_secs
            );
        } else if view.status == "crashed" {
            out.push_str("<p class=\"live\" role=\"status\">This run ended without finishing: helixflow was killed, or the machine stopped. The report shows what its journal holds.</p>");
        }
        totals(out, view);
        out.push_str("<nav aria-label=\"Sections\"><a href=\"#dag\">Phases</a> <a href=\"#timeline\">Timeline</a> <a href=\"#details\">Details</a>");
        if !view.warnings.is_empty() {
            out.push_str(" <a href=\"#warnings\">Warnings</a>");
        }
        out.push_str(" <span class=\"keys\">Keys: <kbd>j</kbd>/<kbd>k</kbd> next and previous phase, <kbd>o</kbd> open or close every attempt</span></nav></header>");
    }

    fn phase(&self, out: &mut String, p: usize, phase: &PhaseView, budget: usize) {
        let status = phase_status(phase, self.view.live);
        let _ = write!(
            out,
            "<section class=\"phase {}\" id=\"p{p}\" aria-labelledby=\"p{p}-h\" tabindex=\"-1\"><h3 id=\"p{p}-h\"><span class=\"badge {}\">{} {}</span> <span class=\"pname\">{}</span></h3>",
            status.class(),
            status.class(),
            status.symbol(),
            status.word(),
            esc(&phase.name)
        );
        phase_facts(out, phase, self.view);
        if let Some(reason) = &phase.reason {
            let label = if status == Status::UpToDate {
                "Why it did not run"
            } else {
                "Why"
            };
            let _ = write!(
                out,
                "<p class=\"reason\"><strong>{label}:</strong> {}</p>",
                esc(reason)
            );
        }
        if !phase.reasons.is_empty() {
            let reasons: Vec<String> = phase.reasons.iter().map(|r| esc(r).to_string()).collect();
            let _ = write!(
                out,
                "<p class=\"reasons\"><strong>Why it ran:</strong> {}</p>",
                reasons.join("; ")
            );
        }
        let files = self.files.get(&phase.folder);
        let last = phase.attempts.len();
        for (i, attempt) in phase.attempts.iter().enumerate() {
            let next = phase.attempts.get(i + 1).map(|a| a.number);
            self.attempt(out, p, phase, attempt, i + 1 == last, next, files, budget);
        }
        if let Some(files) = files.filter(|f| !f.is_empty()) {
            bundle(out, p, phase, files, self.links);
        }
        out.push_str("</section>");
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one call site; each argument is a different part of what an attempt shows"
    )]
    fn attempt(
        &self,
        out: &mut String,
        p: usize,
        phase: &PhaseView,
        a: &AttemptView,
        last: bool,
        next: Option<u32>,
        files: Option<&Vec<FileView>>,
        budget: usize,
    ) {
        let status = attempt_status(a.outcome, self.view.live);
        // Open: what a reader looks for first (how the phase ended, and every failure).
        let open = if status != Status::Passed || last {
            " open"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<details class=\"attempt {}\" id=\"p{p}-a{}\"{open}><summary>",
            status.class(),
            a.number
        );
        attempt_summary(out, phase, a, status, self.view.duration_ms);
        out.push_str("</summary><div class=\"attempt-body\">");
        attempt_facts(out, a);
        let mut left = budget;
        gates(out, a, &mut left);
        verdicts(out, a, &mut left);
        if let Some(feedback) = &a.feedback {
            let to = next.map_or_else(
                || "Feedback (for a next attempt)".to_owned(),
                |n| format!("Feedback given to attempt {n}"),
            );
            let _ = write!(out, "<h4>{to}</h4>");
            let link = self.file_link(a, "feedback.md");
            long_text(out, "feedback", feedback, &mut left, link.as_deref());
        }
        changes(out, p, a, files);
        self.logs(out, a);
        out.push_str("</div></details>");
    }

    /// A link to a file of an attempt's folder, when it is there.
    fn file_link(&self, a: &AttemptView, name: &str) -> Option<String> {
        a.files.listing.contains_key(name).then(|| {
            format!(
                "{}{}/{}",
                self.links,
                super::model::path_url(std::path::Path::new(&a.files.dir)),
                super::model::path_url(std::path::Path::new(name))
            )
        })
    }

    /// Links to the attempt folder's files: its logs, prompt, response, feedback.
    fn logs(&self, out: &mut String, a: &AttemptView) {
        if a.files.listing.is_empty() {
            return;
        }
        out.push_str("<p class=\"logs\"><strong>Files:</strong> ");
        let mut first = true;
        for (name, size) in &a.files.listing {
            let Some(link) = self.file_link(a, name) else {
                continue;
            };
            if !first {
                out.push_str(" · ");
            }
            first = false;
            let _ = write!(
                out,
                "<a href=\"{}\">{}</a> <span class=\"size\">({})</span>",
                esc(&link),
                esc(name),
                bytes(*size)
            );
        }
        out.push_str("</p>");
    }
}

/// The run's status as a [`Status`], for its badge.
fn run_status(status: &str) -> Status {
    match status {
        "passed" => Status::Passed,
        "failed" | "timed-out" => Status::Failed,
        "cancelled" => Status::Cancelled,
        "running" => Status::Running,
        _ => Status::Unfinished,
    }
}

/// The run's totals: cost, tokens, attempts, retries of the budget, wall time against the sum of
/// the phases' times.
fn totals(out: &mut String, view: &RunView) {
    let attempts: usize = view.phases.iter().map(|p| p.attempts.len()).sum();
    let retries: u32 = view.phases.iter().map(PhaseView::retries_spent).sum();
    let summed: u64 = view
        .phases
        .iter()
        .filter_map(|p| {
            p.duration_ms
                .or_else(|| p.span(view.duration_ms).map(|(a, b)| b - a))
        })
        .sum();
    let mut counts: Vec<(Status, usize)> = Vec::new();
    for phase in &view.phases {
        let status = phase_status(phase, view.live);
        match counts.iter_mut().find(|(s, _)| *s == status) {
            Some((_, n)) => *n += 1,
            None => counts.push((status, 1)),
        }
    }
    let counts: Vec<String> = counts
        .iter()
        .map(|(s, n)| format!("{n} {}", s.word()))
        .collect();
    let budget = view.retry_budget.map_or_else(
        || " (no retry-budget)".to_owned(),
        |b| format!(" of the retry-budget of {b}"),
    );
    let parallel = if view.duration_ms > 0 && summed > view.duration_ms {
        format!(
            " ({:.1}× the wall time: phases ran at once)",
            summed as f64 / view.duration_ms as f64
        )
    } else {
        String::new()
    };
    let tokens = if view.spend.tokens > 0 {
        short_tokens(view.spend.tokens)
    } else {
        "none reported".to_owned()
    };
    let mut facts: Vec<(&str, String)> = vec![
        ("Cost", view.spend.words()),
        ("Tokens", tokens),
        (
            "Phases",
            format!("{} ({})", view.phases.len(), counts.join(", ")),
        ),
        ("Attempts", attempts.to_string()),
        ("Retries spent", format!("{retries}{budget}")),
        ("Wall time", human_duration(view.duration_ms)),
        (
            "Phase time, summed",
            format!("{}{parallel}", human_duration(summed)),
        ),
    ];
    if let Some(started) = &view.started {
        facts.push(("Started", started.clone()));
    }
    if let Some(code) = view.exit_code {
        facts.push(("Exit code", code.to_string()));
    }
    if let Some(file) = &view.file {
        facts.push(("Pipeline file", file.clone()));
    }
    if let Some(max) = view.max_parallel {
        facts.push(("At most at once", max.to_string()));
    }
    if let Some(resumes) = &view.resumes {
        facts.push(("Resumes run", resumes.clone()));
    }
    out.push_str("<dl class=\"totals\">");
    for (term, value) in facts {
        let _ = write!(out, "<div><dt>{term}</dt><dd>{}</dd></div>", esc(&value));
    }
    out.push_str("</dl>");
}

fn legend(out: &mut String) {
    out.push_str("<ul class=\"legend\" aria-label=\"What the bars show\">");
    for kind in [
        SegmentKind::Worker,
        SegmentKind::Verification,
        SegmentKind::Review,
        SegmentKind::Approval,
        SegmentKind::Backoff,
    ] {
        let _ = write!(
            out,
            "<li><span class=\"swatch {}\"></span>{}</li>",
            kind.class(),
            kind.label()
        );
    }
    out.push_str("<li>each bar is an attempt, numbered, with ✓ passed, ✗ failed, ■ cancelled, ▶ running</li></ul>");
}

/// Attempts made, time, cost, tokens, the agent.
fn phase_facts(out: &mut String, phase: &PhaseView, view: &RunView) {
    let mut facts = Vec::new();
    if !phase.attempts.is_empty() {
        let max = phase
            .max_attempts
            .map(|m| format!(" of {m}"))
            .unwrap_or_default();
        let n = phase.attempts.len();
        facts.push(format!("{n} attempt{}{max}", if n == 1 { "" } else { "s" }));
    }
    if let Some(ms) = phase
        .duration_ms
        .filter(|_| !phase.attempts.is_empty())
        .or_else(|| phase.span(view.duration_ms).map(|(a, b)| b - a))
    {
        facts.push(human_duration(ms));
    }
    if !phase.spend.is_empty() {
        facts.push(format!("cost {}", phase.spend.short()));
        if phase.spend.tokens > 0 {
            facts.push(format!("{} tokens", short_tokens(phase.spend.tokens)));
        }
    }
    match (&phase.agent, &phase.command) {
        (Some(agent), _) => facts.push(format!("agent {agent}")),
        (None, Some(command)) => facts.push(format!("run step `{command}`")),
        (None, None) => {}
    }
    if let Some(verifier) = &phase.verifier {
        facts.push(format!("verifier {verifier}"));
    }
    if phase.escalated {
        facts.push(format!(
            "escalated (exit code {})",
            phase
                .escalate_code
                .map_or_else(|| "none".to_owned(), |c| c.to_string())
        ));
    }
    if !facts.is_empty() {
        let facts: Vec<String> = facts.iter().map(|f| esc(f).to_string()).collect();
        let _ = write!(out, "<p class=\"facts\">{}</p>", facts.join(" · "));
    }
}

/// The line an attempt's details open with.
fn attempt_summary(out: &mut String, phase: &PhaseView, a: &AttemptView, status: Status, now: u64) {
    let max = phase
        .max_attempts
        .map(|m| format!("/{m}"))
        .unwrap_or_default();
    let class = match a.class {
        Some(class @ (FailureClass::Transient | FailureClass::Fatal | FailureClass::Work))
            if status == Status::Failed =>
        {
            format!(" ({})", class.as_str())
        }
        _ => String::new(),
    };
    let took = a
        .duration_ms
        .unwrap_or_else(|| now.saturating_sub(a.started_ms));
    let _ = write!(
        out,
        "Attempt {}{max} <span class=\"badge {}\">{} {}{class}</span> in {}",
        a.number,
        status.class(),
        status.symbol(),
        status.word(),
        human_duration(took)
    );
    if let Some(usage) = &a.usage {
        let _ = write!(out, " · {}", esc(&usage.short()));
    }
    if let Some(agent) = a.files.agent.as_ref().or(phase.agent.as_ref()) {
        let _ = write!(out, " · agent {}", esc(agent));
        if let Some(tier) = &a.files.tier {
            let _ = write!(out, " (tier {})", esc(tier));
        }
    }
}

/// How the worker exited, its error, the failure class, the time in each step.
fn attempt_facts(out: &mut String, a: &AttemptView) {
    let mut facts: Vec<(&str, String)> = Vec::new();
    if let Some(exit) = &a.exit {
        let worker = if a.run_step {
            "the run command"
        } else {
            "the agent"
        };
        facts.push(("Worker", format!("{worker} {exit}")));
    }
    if a.files.resume {
        facts.push((
            "Session",
            "continued the previous attempt's session".to_owned(),
        ));
    }
    if let Some(error) = &a.error {
        facts.push(("Error", error.clone()));
    }
    if let Some(class) = a
        .class
        .filter(|_| a.outcome == Some(crate::event::AttemptOutcome::Failed))
    {
        let meaning = match class {
            FailureClass::Transient => {
                "transient: tried again after a wait, without spending retries"
            }
            FailureClass::Fatal => "fatal: not retried",
            FailureClass::Work => "work: the gates or the verifier said no; retried with feedback",
        };
        facts.push(("Failure class", meaning.to_owned()));
    }
    if let Some(usage) = &a.usage {
        let mut used = usage.short();
        if let Some(turns) = usage.turns {
            used.push_str(&format!(", {turns} turns"));
        }
        if !usage.models.is_empty() {
            used.push_str(&format!(", {}", usage.models.join(", ")));
        }
        facts.push(("Used", used));
    }
    let mut spent: Vec<(SegmentKind, u64)> = Vec::new();
    for segment in &a.segments {
        match spent.iter_mut().find(|(k, _)| *k == segment.kind) {
            Some((_, ms)) => *ms += segment.end - segment.start,
            None => spent.push((segment.kind, segment.end - segment.start)),
        }
    }
    if !spent.is_empty() {
        let spent: Vec<String> = spent
            .iter()
            .map(|(k, ms)| format!("{} {}", k.label(), human_duration(*ms)))
            .collect();
        facts.push(("Time", spent.join(", ")));
    }
    if facts.is_empty() {
        return;
    }
    out.push_str("<dl class=\"facts\">");
    for (term, value) in facts {
        let _ = write!(out, "<div><dt>{term}</dt><dd>{}</dd></div>", esc(&value));
    }
    out.push_str("</dl>");
}

/// Each gate's result and details, in a table.
fn gates(out: &mut String, a: &AttemptView, left: &mut usize) {
    if a.gates.is_empty() {
        return;
    }
    out.push_str("<table class=\"gates\"><caption>Gates</caption><thead><tr><th scope=\"col\">gate</th><th scope=\"col\">kind</th><th scope=\"col\">result</th><th scope=\"col\">time</th><th scope=\"col\">details</th></tr></thead><tbody>");
    for gate in &a.gates {
        let status = match gate.status {
            GateStatus::Passed => Status::Passed,
            GateStatus::Failed => Status::Failed,
            GateStatus::Skipped => Status::Skipped,
        };
        let _ = write!(
            out,
            "<tr class=\"{}\"><th scope=\"row\">{}</th><td>{}</td><td><span class=\"badge {}\">{} {}</span></td><td>{}</td><td>",
            status.class(),
            esc(&gate.name),
            esc(&gate.kind.to_string()),
            status.class(),
            status.symbol(),
            status.word(),
            human_duration(gate.duration_ms)
        );
        for detail in &gate.details {
            long_text(out, "detail", detail, left, None);
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table>");
}

/// The sub-agent verifier's verdicts: its answer, or why the review was void.
fn verdicts(out: &mut String, a: &AttemptView, left: &mut usize) {
    for (round, verdict) in &a.files.verdicts {
        let round = if *round == 1 {
            String::new()
        } else {
            format!(" (review {round})")
        };
        let list = |key: &str| -> Vec<String> {
            verdict
                .get(key)
                .and_then(|v| v.as_array())
                .map(|items| {
                    items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (status, words) = match (verdict.get("success"), verdict.get("void")) {
            (_, Some(void)) => (
                Status::Cancelled,
                format!("void: {}", void.as_str().unwrap_or_default()),
            ),
            (Some(serde_json::Value::Bool(true)), _) => {
                (Status::Passed, "approved the work".to_owned())
            }
            (Some(serde_json::Value::Bool(false)), _) => {
                (Status::Failed, "rejected the work".to_owned())
            }
            _ => (Status::Cancelled, "no verdict".to_owned()),
        };
        let _ = write!(
            out,
            "<div class=\"verdict {}\"><h4>The verifier's verdict{round}</h4><p><span class=\"badge {}\">{} {}</span></p>",
            status.class(),
            status.class(),
            status.symbol(),
            esc(&words)
        );
        for (key, title) in [
            ("errors", "Errors it found"),
            ("checks_passed", "Checks it passed"),
            ("changed", "Files it changed (undone)"),
            ("not_restored", "Files not restored"),
        ] {
            let items = list(key);
            if !items.is_empty() {
                let _ = write!(out, "<p><strong>{title}:</strong></p><ul>");
                for item in items {
                    out.push_str("<li>");
                    long_text(out, "item", &item, left, None);
                    out.push_str("</li>");
                }
                out.push_str("</ul>");
            }
        }
        if let Some(advice) = verdict
            .get("feedback")
            .and_then(|f| f.as_str())
            .filter(|f| !f.trim().is_empty())
        {
            out.push_str("<p><strong>Its advice:</strong></p>");
            long_text(out, "advice", advice, left, None);
        }
        out.push_str("</div>");
    }
}

/// A text from the run in a `<pre>`, cut to what is `left` of the attempt's budget (which it
/// uses), with a link to the file that holds it whole when there is one.
fn long_text(out: &mut String, class: &str, text: &str, left: &mut usize, link: Option<&str>) {
    let limit = (*left).max(512);
    let (shown, rest) = cut(text, limit);
    *left = left.saturating_sub(shown.len());
    let _ = write!(out, "<pre class=\"{class}\">{}</pre>", esc(shown));
    if rest > 0 {
        let _ = write!(
            out,
            "<p class=\"cut\">{} more not shown",
            bytes(rest as u64)
        );
        if let Some(link) = link {
            let _ = write!(out, ": <a href=\"{}\">the whole text</a>", esc(link));
        }
        out.push_str("</p>");
    }
}

/// The files an attempt changed (`changes.json`), each a link to its diff when the phase's bundle
/// holds it.
fn changes(out: &mut String, p: usize, a: &AttemptView, files: Option<&Vec<FileView>>) {
    let Some(changes) = &a.files.changes else {
        return;
    };
    if changes.len() == 0 {
        out.push_str("<p class=\"changes-none\"><strong>Files changed:</strong> none</p>");
        return;
    }
    let _ = write!(
        out,
        "<h4>Files changed ({})</h4><ul class=\"changes\">",
        changes.len()
    );
    for (word, paths) in [
        ("created", &changes.created),
        ("modified", &changes.modified),
        ("deleted", &changes.deleted),
    ] {
        for path in paths {
            let diff = files
                .and_then(|files| files.iter().position(|f| &f.path == path))
                .map(|f| format!(" <a href=\"#p{p}-f{f}\">diff</a>"))
                .unwrap_or_default();
            let _ = write!(
                out,
                "<li><span class=\"chg c-{word}\">{word}</span> <code>{}</code>{diff}</li>",
                esc(path)
            );
        }
    }
    out.push_str("</ul>");
}

/// The files the phase's bundle holds, with their diffs.
fn bundle(out: &mut String, p: usize, phase: &PhaseView, files: &[FileView], links: &str) {
    let _ = write!(
        out,
        "<details class=\"bundle\" open><summary>What the phase leaves: {} file{} in its bundle (<a href=\"{}phases/{}/bundle.hxb\">bundle.hxb</a>)</summary>",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        esc(links),
        esc(&super::model::path_url(std::path::Path::new(&phase.folder)))
    );
    for (f, file) in files.iter().enumerate() {
        let added = file.lines.iter().filter(|l| l.tag == '+').count();
        let removed = file.lines.iter().filter(|l| l.tag == '-').count();
        let counts = if added + removed > 0 {
            format!(" <span class=\"counts\">+{added} −{removed}</span>")
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "<details class=\"file\" id=\"p{p}-f{f}\"><summary><span class=\"chg c-{}\">{}</span> <code>{}</code>{counts}</summary>",
            file.change,
            file.change,
            esc(&file.path)
        );
        if let Some(note) = &file.note {
            let _ = write!(out, "<p class=\"note\">{}</p>", esc(note));
        }
        if !file.lines.is_empty() {
            out.push_str("<pre class=\"diff\">");
            for line in &file.lines {
                let class = match line.tag {
                    '+' => "add",
                    '-' => "del",
                    '@' => "hunk",
                    _ => "ctx",
                };
                let tag = if line.tag == '=' || line.tag == '@' {
                    String::new()
                } else {
                    line.tag.to_string()
                };
                let _ = writeln!(
                    out,
                    "<span class=\"{class}\">{tag}{}</span>",
                    esc(&line.text)
                );
            }
            out.push_str("</pre>");
        }
        out.push_str("</details>");
    }
    out.push_str("</details>");
}

fn warnings(out: &mut String, view: &RunView) {
    if view.warnings.is_empty() {
        return;
    }
    out.push_str("<section id=\"warnings\" aria-labelledby=\"warnings-h\"><h2 id=\"warnings-h\">Warnings</h2><ul>");
    for warning in &view.warnings {
        let _ = write!(out, "<li>{}</li>", esc(warning));
    }
    out.push_str("</ul></section>");
}

/// A size in a few characters: `512 B`, `2.1 KiB`, `3.4 MiB`.
fn bytes(size: u64) -> String {
    match size {
        0..1024 => format!("{size} B"),
        1024..1_048_576 => format!("{:.1} KiB", size as f64 / 1024.0),
        _ => format!("{:.1} MiB", size as f64 / 1_048_576.0),
    }
}
