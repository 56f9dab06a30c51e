//! Plain lines for logs, pipes and `--no-progress`: one line per notable event, no colours, no
//! cursor movement, and no timestamps of its own (log collectors add those), so the text stays
//! stable.

use std::io::Write;

use crate::event::{AttemptOutcome, Event, GateStatus, PhaseStatus, RunStatus, Stamped, Step};

use crate::event::record::{AttemptRecord, RunRecord, first_line};
use crate::event::sink::EventSink;
use crate::text::{count, human_duration, one_line, sanitize};

/// Indentation of a gate's details and of a message's continuation lines.
const INDENT: &str = "    ";

/// Writes one plain line per notable event: attempts started and finished (a failed one with what
/// failed, the agent's exit included), failed gates with their details indented below, waits for
/// approval, retries, phases finished, escalations, warnings, and the run's start and end.
pub struct Plain<W: Write + Send> {
    out: W,
    run: RunRecord,
}

impl<W: Write + Send> Plain<W> {
    /// Writes to `out`, flushing after every event (or events that came together).
    pub fn new(out: W) -> Self {
        Self {
            out,
            run: RunRecord::default(),
        }
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// `2/3` for attempt 2 of a phase allowed 3, or `2` when the limit is unknown; with its
    /// agent when that is not the phase's first: `3/4 (claude-opus)`.
    fn attempt_label(&self, phase: &str, attempt: u32) -> String {
        let record = self.run.phase(phase);
        let agent = record.map(|p| p.other_agent(attempt)).unwrap_or_default();
        match record.and_then(|p| p.max_attempts) {
            Some(max) => format!("{attempt}/{max}{agent}"),
            None => format!("{attempt}{agent}"),
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one arm per event: the reporter's per-event match reads best whole"
    )]
    fn write_event(&mut self, event: &Event) -> std::io::Result<()> {
        match event {
            Event::RunStarted {
                run_id,
                pipeline,
                phases,
                max_parallel,
                resumes,
            } => {
                writeln!(
                    self.out,
                    "run {}: pipeline {}, {}, up to {max_parallel} at once",
                    one_line(run_id),
                    one_line(pipeline),
                    count(phases.len(), "phase", "phases"),
                )?;
                match resumes {
                    Some(earlier) => writeln!(
                        self.out,
                        "run {}: resumes run {}, which did not pass",
                        one_line(run_id),
                        one_line(earlier)
                    ),
                    None => Ok(()),
                }
            }
            Event::PhaseQueued { phase, reasons } => writeln!(
                self.out,
                "[{}] will run: {}",
                one_line(phase),
                one_line(&reasons.join("; "))
            ),
            Event::AttemptStarted { phase, attempt, .. } => {
                let label = self.attempt_label(phase, *attempt);
                writeln!(self.out, "[{}] attempt {label} started", one_line(phase))
            }
            // A wait for a person is the one step said here: without it the run looks hung, and
            // the line tells the reader what to type.
            Event::Step {
                phase,
                attempt,
                step,
            } if matches!(step, Step::AwaitingApproval { .. }) => {
                let label = self.attempt_label(phase, *attempt);
                writeln!(
                    self.out,
                    "[{}] attempt {label}: {}",
                    one_line(phase),
                    one_line(&step.to_string())
                )
            }
            // The attempt's end says how the agent exited, and other steps are for live displays.
            Event::Step { .. } | Event::ChildExited { .. } => Ok(()),
            Event::GateFinished {
                phase,
                attempt,
                report,
            } => {
                if report.status != GateStatus::Failed {
                    return Ok(());
                }
                let label = self.attempt_label(phase, *attempt);
                writeln!(
                    self.out,
                    "[{}] attempt {label}: gate {} failed ({})",
                    one_line(phase),
                    one_line(&report.name),
                    human_duration(report.duration_ms)
                )?;
                for detail in &report.details {
                    write_indented(&mut self.out, INDENT, &sanitize(detail))?;
                }
                Ok(())
            }
            Event::AttemptFinished {
                phase,
                attempt,
                outcome,
                duration_ms,
                usage,
                nothing_to_change,
                ..
            } => {
                let label = self.attempt_label(phase, *attempt);
                let name = one_line(phase);
                let took = human_duration(*duration_ms);
                let used = usage
                    .as_ref()
                    .map(|u| format!(" ({})", u.short()))
                    .unwrap_or_default();
                match outcome {
                    AttemptOutcome::Passed if *nothing_to_change => writeln!(
                        self.out,
                        "[{name}] attempt {label} passed, nothing to change, in {took}{used}"
                    ),
                    AttemptOutcome::Passed => {
                        writeln!(self.out, "[{name}] attempt {label} passed in {took}{used}")
                    }
                    AttemptOutcome::Cancelled => {
                        writeln!(
                            self.out,
                            "[{name}] attempt {label} cancelled after {took}{used}"
                        )
                    }
                    AttemptOutcome::Failed => {
                        let record = self.run.phase(phase).and_then(|p| p.attempt.as_ref());
                        let class = record.map(AttemptRecord::class_prefix).unwrap_or_default();
                        // A failure that is not the work's says the agent's own words too.
                        let words = record
                            .filter(|_| !class.is_empty())
                            .filter(|r| r.failed_exit().is_some())
                            .and_then(AttemptRecord::error)
                            .map(|e| format!(" ({})", first_line(e)))
                            .unwrap_or_default();
                        match record.and_then(AttemptRecord::failure_summary) {
                            Some(why) => writeln!(
                                self.out,
                                "[{name}] attempt {label} failed in {took}{used}: {class}{}{}",
                                one_line(&why),
                                one_line(&words)
                            ),
                            None => writeln!(
                                self.out,
                                "[{name}] attempt {label} failed in {took}{used}"
                            ),
                        }
                    }
                }
            }
            Event::RetryScheduled {
                phase,
                next_attempt,
                backoff_ms,
            } => {
                let label = self.attempt_label(phase, *next_attempt);
                let name = one_line(phase);
                if *backoff_ms == 0 {
                    writeln!(self.out, "[{name}] retrying as attempt {label}")
                } else {
                    writeln!(
                        self.out,
                        "[{name}] retrying as attempt {label} in {}",
                        human_duration(*backoff_ms)
                    )
                }
            }
            Event::PhaseFinished {
                phase,
                status,
                attempts,
                duration_ms,
                reason,
            } => {
                let name = one_line(phase);
                let tried = count(*attempts as usize, "attempt", "attempts");
                let took = human_duration(*duration_ms);
                let mut line = match status {
                    PhaseStatus::Passed => format!("[{name}] passed after {tried} in {took}"),
                    PhaseStatus::Failed => format!("[{name}] failed after {tried} in {took}"),
                    PhaseStatus::Cancelled => format!("[{name}] cancelled after {took}"),
                    PhaseStatus::Skipped => format!("[{name}] skipped"),
                    PhaseStatus::UpToDate => format!("[{name}] up to date"),
                };
                if let Some(spend) = self.run.phase(phase).map(|p| p.spend)
                    && !spend.is_empty()
                {
                    line.push_str(&format!(", cost {}", spend.words()));
                }
                // Nothing started: an up-to-date phase cost nothing, and says so.
                let free = if *status == PhaseStatus::UpToDate {
                    " (cost $0.00)"
                } else {
                    ""
                };
                match reason {
                    Some(reason) => writeln!(self.out, "{line}: {}{free}", one_line(reason)),
                    None => writeln!(self.out, "{line}{free}"),
                }
            }
            Event::PhasesMade {
                phase,
                made,
                dropped,
            } => {
                let name = one_line(phase);
                writeln!(self.out, "[{name}] {}", made_line(made, dropped))
            }
            Event::Escalated { phase, code } => {
                let name = one_line(phase);
                match code {
                    Some(code) => writeln!(
                        self.out,
                        "[{name}] escalated: the escalate command exited with code {code}"
                    ),
                    None => writeln!(
                        self.out,
                        "[{name}] escalated: the escalate command ended without an exit code"
                    ),
                }
            }
            Event::Warning { message } => {
                let message = sanitize(message);
                let mut lines = message.lines();
                writeln!(self.out, "warning: {}", lines.next().unwrap_or_default())?;
                for line in lines {
                    writeln!(self.out, "{INDENT}{line}")?;
                }
                Ok(())
            }
            Event::RunFinished {
                status,
                duration_ms,
                exit_code,
            } => {
                let spend = self.run.spend();
                let cost = if spend.is_empty() {
                    String::new()
                } else {
                    format!(", cost {}", spend.words())
                };
                writeln!(
                    self.out,
                    "run {} in {}{cost} (exit code {exit_code})",
                    run_status(*status),
                    human_duration(*duration_ms)
                )
            }
        }
    }
}

impl<W: Write + Send> EventSink for Plain<W> {
    fn event(&mut self, event: &Stamped) -> std::io::Result<()> {
        self.batch(std::slice::from_ref(event))
    }

    /// Events that came together are written together, with one flush.
    fn batch(&mut self, events: &[Stamped]) -> std::io::Result<()> {
        for event in events {
            // Folded in first, so an attempt's own end is part of what describes it.
            self.run.apply(event);
            self.write_event(&event.event)?;
        }
        self.out.flush()
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    fn name(&self) -> String {
        "the plain-text report".to_owned()
    }
}

/// How a run ended, in words.
pub(crate) fn run_status(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Passed => "passed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
        RunStatus::TimedOut => "timed out",
    }
}

/// Writes every line of `text` after `indent`, keeping the text's own indentation.
fn write_indented(out: &mut impl Write, indent: &str, text: &str) -> std::io::Result<()> {
    for line in text.lines() {
        if line.is_empty() {
            writeln!(out)?;
        } else {
            writeln!(out, "{indent}{line}")?;
        }
    }
    Ok(())
}

/// `3 phases made: migrate[a], migrate[b], migrate[c]; dropped: 1 item (migrate[d])`.
pub(crate) fn made_line(made: &[String], dropped: &[String]) -> String {
    const SHOWN: usize = 5;
    let names = |list: &[String]| {
        let mut shown: Vec<String> = list.iter().take(SHOWN).map(|n| one_line(n)).collect();
        if list.len() > SHOWN {
            shown.push(format!("and {} more", list.len() - SHOWN));
        }
        shown.join(", ")
    };
    let mut line = match made.len() {
        0 => "no phases made".to_owned(),
        1 => format!("1 phase made: {}", names(made)),
        n => format!("{n} phases made: {}", names(made)),
    };
    if !dropped.is_empty() {
        let items = if dropped.len() == 1 { "item" } else { "items" };
        line.push_str(&format!(
            "; dropped: {} {items} ({})",
            dropped.len(),
            names(dropped)
        ));
    }
    line
}
