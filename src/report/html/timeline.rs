//! The timeline (a Gantt chart): one lane per phase, a bar per attempt split into what it was
//! doing (the worker, verification, the sub-agent's review, waiting for approval), and the
//! backoff before a retry, on one time axis: what ran at once and where the time went.

use std::fmt::Write as _;

use super::escape::esc;
use super::model::{AttemptView, PhaseView, RunView, SegmentKind};
use super::status::{attempt_status, phase_status};
use crate::text::human_duration;

/// The chart.
pub(crate) fn html(view: &RunView) -> String {
    let total = view.duration_ms.max(1);
    let mut out = String::new();
    out.push_str(
        "<div class=\"gantt\" role=\"table\" aria-label=\"Timeline: one lane per phase, a bar per attempt\">",
    );
    axis(&mut out, total);
    for (p, phase) in view.phases.iter().enumerate() {
        lane(&mut out, view, p, phase, total);
    }
    out.push_str("</div>");
    out
}

/// A position on the axis as a percentage of the run.
fn pct(ms: u64, total: u64) -> String {
    format!("{:.3}", ms as f64 * 100.0 / total as f64)
}

/// Ticks at a round step, about eight of them.
fn axis(out: &mut String, total: u64) {
    let mut step = 1u64;
    'outer: loop {
        for factor in [1, 2, 5] {
            if total / (step * factor) <= 8 {
                step *= factor;
                break 'outer;
            }
        }
        step *= 10;
    }
    out.push_str("<div class=\"axis\" role=\"row\" aria-hidden=\"true\"><span class=\"lane-name\"></span><div class=\"track\">");
    let mut at = 0;
    while at <= total {
        let _ = write!(
            out,
            "<span class=\"tick\" style=\"left:{}%\">{}</span>",
            pct(at, total),
            if at == 0 {
                "0".to_owned()
            } else {
                human_duration(at)
            }
        );
        at += step;
    }
    out.push_str("</div></div>");
}

fn lane(out: &mut String, view: &RunView, p: usize, phase: &PhaseView, total: u64) {
    let status = phase_status(phase, view.live);
    let _ = write!(
        out,
        "<div class=\"lane\" role=\"row\"><a class=\"lane-name {}\" href=\"#p{p}\" role=\"rowheader\" title=\"{}\"><span class=\"lane-title\">{}</span> <span class=\"word\">{} {}</span></a><div class=\"track\" role=\"cell\">",
        status.class(),
        esc(&phase.name),
        esc(&phase.name),
        status.symbol(),
        status.word()
    );
    for &(start, end) in &phase.backoffs {
        let _ = write!(
            out,
            "<span class=\"wait {}\" style=\"left:{}%;width:{}%\" title=\"backoff: {}\"></span>",
            SegmentKind::Backoff.class(),
            pct(start, total),
            pct(end - start, total),
            human_duration(end - start)
        );
    }
    for attempt in &phase.attempts {
        bar(out, view, p, phase, attempt, total);
    }
    if phase.attempts.is_empty() {
        let why = phase.reason.as_deref().unwrap_or(status.word());
        let _ = write!(out, "<span class=\"no-bar\">{}</span>", esc(why));
    }
    out.push_str("</div></div>");
}

fn bar(out: &mut String, view: &RunView, p: usize, phase: &PhaseView, a: &AttemptView, total: u64) {
    let end = a.ended_ms.unwrap_or(view.duration_ms).max(a.started_ms);
    let length = (end - a.started_ms).max(1);
    let status = attempt_status(a.outcome, view.live);
    let mut parts: Vec<(SegmentKind, u64)> = Vec::new();
    for segment in &a.segments {
        let spent = segment.end - segment.start;
        match parts.iter_mut().find(|(kind, _)| *kind == segment.kind) {
            Some((_, sum)) => *sum += spent,
            None => parts.push((segment.kind, spent)),
        }
    }
    let parts: Vec<String> = parts
        .iter()
        .map(|(kind, ms)| format!("{} {}", kind.label(), human_duration(*ms)))
        .collect();
    let max = phase
        .max_attempts
        .map(|m| format!("/{m}"))
        .unwrap_or_default();
    let label = format!(
        "{}: attempt {}{max} {} in {}{}",
        phase.name,
        a.number,
        status.word(),
        human_duration(end - a.started_ms),
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    );
    let _ = write!(
        out,
        "<a class=\"bar {}\" href=\"#p{p}-a{}\" style=\"left:{}%;width:{}%\" title=\"{}\" aria-label=\"{}\">",
        status.class(),
        a.number,
        pct(a.started_ms, total),
        pct(end - a.started_ms, total),
        esc(&label),
        esc(&label)
    );
    for segment in &a.segments {
        let _ = write!(
            out,
            "<span class=\"seg {}\" style=\"left:{}%;width:{}%\"></span>",
            segment.kind.class(),
            pct(segment.start.saturating_sub(a.started_ms), length),
            pct(segment.end - segment.start, length)
        );
    }
    let _ = write!(
        out,
        "<span class=\"bar-label\">{} {}</span></a>",
        a.number,
        status.symbol()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_has_round_ticks() {
        let mut out = String::new();
        axis(&mut out, 9_500);
        assert!(out.contains(">2.0s<"), "{out}");
        assert!(out.contains(">8.0s<"), "{out}");
        assert!(!out.contains(">10.0s<"), "{out}");
    }
}
