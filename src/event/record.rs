//! What the reporters that look back over a run (summary, `JUnit`, progress) know of it: the event
//! stream folded into one record per phase.

use std::collections::HashMap;

use crate::event::usage::{FailureClass, Spend};
use crate::event::{
    ChildExit, Event, GateReport, GateStatus, PhaseStatus, RUN_STEP, Stamped, Step, Tier,
};

/// The run so far.
#[derive(Debug, Default)]
pub(crate) struct RunRecord {
    /// The pipeline's name, once the run started.
    pub pipeline: Option<String>,
    /// The earlier run this one continues.
    pub resumes: Option<String>,
    /// Phases in `RunStarted` order, then any others in the order they first appeared.
    pub phases: Vec<PhaseRecord>,
    index: HashMap<String, usize>,
    /// The run's length from `RunFinished`, once it ended.
    pub finished_ms: Option<u64>,
    /// `elapsed_ms` of the latest event: the run's length when it ends without `RunFinished`.
    pub last_elapsed_ms: u64,
}

/// One phase so far.
#[derive(Debug)]
pub(crate) struct PhaseRecord {
    pub name: String,
    /// `retries + 1`, once an attempt started.
    pub max_attempts: Option<u32>,
    /// The run's `elapsed_ms` when its first attempt started.
    pub started_ms: Option<u64>,
    /// The latest attempt.
    pub attempt: Option<AttemptRecord>,
    /// How it ended, once it did.
    pub end: Option<PhaseEnd>,
    /// Why it ran (it was not up to date).
    pub reasons: Vec<String>,
    /// What its attempts' agents used, summed.
    pub spend: Spend,
    /// The agent of its first attempt: a later attempt with another one names it.
    pub first_agent: Option<String>,
    /// Each attempt's tier, by attempt number, in the order they started.
    pub tiers: Vec<(u32, Tier)>,
    /// The phases it made while the run went on: its items, or the phases it planned.
    pub made: Vec<String>,
    /// The phase that made it, for an item or a planned phase.
    pub made_by: Option<String>,
}

impl PhaseRecord {
    fn new(name: &str) -> Self {
        PhaseRecord {
            name: name.to_owned(),
            max_attempts: None,
            started_ms: None,
            attempt: None,
            end: None,
            reasons: Vec::new(),
            spend: Spend::default(),
            first_agent: None,
            tiers: Vec::new(),
            made: Vec::new(),
            made_by: None,
        }
    }
}

/// How a phase ended.
#[derive(Debug, Clone)]
pub(crate) struct PhaseEnd {
    pub status: PhaseStatus,
    pub attempts: u32,
    pub duration_ms: u64,
    pub reason: Option<String>,
}

/// One attempt so far.
#[derive(Debug)]
pub(crate) struct AttemptRecord {
    /// Counting from 1.
    pub number: u32,
    /// What it is doing now (`agent`, `gate tests`, …).
    pub step: Option<Step>,
    /// How the agent or `run` step exited, once it did.
    pub exit: Option<ChildExit>,
    /// Whether that child was a `run` step's command rather than an agent (the step it ran in).
    pub run_step: bool,
    /// Gates in the order they finished.
    pub gates: Vec<GateReport>,
    /// How it ended, once it did.
    pub end: Option<AttemptEnd>,
    /// The tier it ran in, when its start said.
    pub tier: Option<Tier>,
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub(crate) struct AttemptEnd {
    pub duration_ms: u64,
    pub failed_gates: Vec<String>,
    pub feedback: Option<String>,
    /// Why the agent or `run` step failed, when how it exited does not say.
    pub error: Option<String>,
    /// How it failed.
    pub class: Option<FailureClass>,
    /// It passed having changed nothing, as its agent declared.
    pub nothing_to_change: bool,
}

/// Where a phase stands, including the states a run that ended abnormally leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// It ended.
    Ended(PhaseStatus),
    /// An attempt started but the phase never finished.
    Unfinished,
    /// No attempt started and the phase never finished.
    NotStarted,
}

impl Standing {
    /// One word (or two) for tables and reports.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Standing::Ended(PhaseStatus::Passed) => "passed",
            Standing::Ended(PhaseStatus::Failed) => "failed",
            Standing::Ended(PhaseStatus::Skipped) => "skipped",
            Standing::Ended(PhaseStatus::Cancelled) => "cancelled",
            Standing::Ended(PhaseStatus::UpToDate) => "up to date",
            Standing::Unfinished => "unfinished",
            Standing::NotStarted => "not started",
        }
    }
}

impl RunRecord {
    /// Folds one event in.
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per event: the per-event match reads best whole"
    )]
    pub(crate) fn apply(&mut self, stamped: &Stamped) {
        let now = stamped.elapsed_ms;
        self.last_elapsed_ms = self.last_elapsed_ms.max(now);
        match &stamped.event {
            Event::RunStarted {
                pipeline,
                phases,
                resumes,
                ..
            } => {
                self.pipeline = Some(pipeline.clone());
                self.resumes.clone_from(resumes);
                // Room for them all at once: a thousand phases otherwise move the table ten times.
                self.phases.reserve(phases.len());
                self.index.reserve(phases.len());
                for phase in phases {
                    self.phase_mut(phase);
                }
            }
            Event::AttemptStarted {
                phase,
                attempt,
                max_attempts,
                tier,
            } => {
                let record = self.phase_mut(phase);
                record.max_attempts = Some(*max_attempts);
                record.started_ms.get_or_insert(now);
                if record.first_agent.is_none() {
                    record.first_agent = tier.as_ref().and_then(|t| t.agent.clone());
                }
                if let Some(tier) = tier {
                    record.tiers.push((*attempt, tier.clone()));
                }
                let mut started = AttemptRecord::new(*attempt);
                started.tier.clone_from(tier);
                record.attempt = Some(started);
            }
            Event::Step {
                phase,
                attempt,
                step,
            } => {
                self.attempt_mut(phase, *attempt, now).step = Some(step.clone());
            }
            Event::ChildExited {
                phase,
                attempt,
                exit,
            } => {
                let record = self.attempt_mut(phase, *attempt, now);
                record.run_step = record.step == Some(Step::Run);
                record.exit = Some(exit.clone());
            }
            Event::GateFinished {
                phase,
                attempt,
                report,
            } => {
                self.attempt_mut(phase, *attempt, now)
                    .gates
                    .push(report.clone());
            }
            Event::AttemptFinished {
                phase,
                attempt,
                duration_ms,
                failed_gates,
                feedback,
                error,
                usage,
                class,
                nothing_to_change,
                ..
            } => {
                if let Some(usage) = usage {
                    self.phase_mut(phase).spend.add(usage);
                }
                let record = self.attempt_mut(phase, *attempt, now);
                if record.exit.is_none() {
                    // It never ran, or never exited: the step it was in says what it was.
                    record.run_step = record.step == Some(Step::Run);
                }
                record.step = None;
                record.end = Some(AttemptEnd {
                    duration_ms: *duration_ms,
                    failed_gates: failed_gates.clone(),
                    feedback: feedback.clone(),
                    error: error.clone(),
                    class: *class,
                    nothing_to_change: *nothing_to_change,
                });
            }
            Event::PhaseFinished {
                phase,
                status,
                attempts,
                duration_ms,
                reason,
            } => {
                self.phase_mut(phase).end = Some(PhaseEnd {
                    status: *status,
                    attempts: *attempts,
                    duration_ms: *duration_ms,
                    reason: reason.clone(),
                });
            }
            Event::PhaseQueued { phase, reasons } => {
                self.phase_mut(phase).reasons.clone_from(reasons);
            }
            Event::RunFinished { duration_ms, .. } => self.finished_ms = Some(*duration_ms),
            Event::PhasesMade { phase, made, .. } => self.made(phase, made),
            Event::RetryScheduled { .. } | Event::Escalated { .. } | Event::Warning { .. } => {}
        }
    }

    /// Phases made by `by` while the run goes on: listed right after it (a `for-each` phase's
    /// items under their phase), and noted as its.
    fn made(&mut self, by: &str, made: &[String]) {
        self.phase_mut(by).made.extend(made.iter().cloned());
        let Some(&at) = self.index.get(by) else {
            return;
        };
        let mut place = at + 1;
        for name in made {
            if self.index.contains_key(name) {
                continue;
            }
            self.phases.insert(place, PhaseRecord::new(name));
            place += 1;
        }
        for (i, phase) in self.phases.iter().enumerate().skip(at + 1) {
            self.index.insert(phase.name.clone(), i);
        }
        for name in made {
            if let Some(&i) = self.index.get(name) {
                self.phases[i].made_by = Some(by.to_owned());
            }
        }
    }

    /// The phase named `name`, if any event mentioned it.
    pub(crate) fn phase(&self, name: &str) -> Option<&PhaseRecord> {
        self.index.get(name).map(|&i| &self.phases[i])
    }

    /// What every phase's attempts used, summed.
    pub(crate) fn spend(&self) -> Spend {
        let mut total = Spend::default();
        for phase in &self.phases {
            total.merge(&phase.spend);
        }
        total
    }

    /// The run's length: from `RunFinished`, else up to the latest event.
    pub(crate) fn duration_ms(&self) -> u64 {
        self.finished_ms.unwrap_or(self.last_elapsed_ms)
    }

    /// The phase named `name`, added when no event mentioned it before (events are trusted to be
    /// consistent, but a reporter must not lose a phase because `RunStarted` did not list it).
    fn phase_mut(&mut self, name: &str) -> &mut PhaseRecord {
        let i = if let Some(&i) = self.index.get(name) {
            i
        } else {
            self.phases.push(PhaseRecord::new(name));
            self.index.insert(name.to_owned(), self.phases.len() - 1);
            self.phases.len() - 1
        };
        &mut self.phases[i]
    }

    /// Attempt `number` of `phase`, started afresh when its `AttemptStarted` was not seen.
    fn attempt_mut(&mut self, phase: &str, number: u32, now: u64) -> &mut AttemptRecord {
        let record = self.phase_mut(phase);
        record.started_ms.get_or_insert(now);
        if record.attempt.as_ref().is_none_or(|a| a.number != number) {
            record.attempt = Some(AttemptRecord::new(number));
        }
        record
            .attempt
            .get_or_insert_with(|| AttemptRecord::new(number))
    }
}

impl AttemptRecord {
    fn new(number: u32) -> Self {
        Self {
            number,
            step: None,
            exit: None,
            run_step: false,
            gates: Vec::new(),
            end: None,
            tier: None,
        }
    }

    /// The agent's exit, when it did not exit 0 on its own.
    pub(crate) fn failed_exit(&self) -> Option<&ChildExit> {
        self.exit.as_ref().filter(|exit| !exit.success())
    }

    /// Names of the gates that failed: as the engine listed them, else as the gates reported.
    pub(crate) fn failed_gates(&self) -> Vec<String> {
        match &self.end {
            Some(end) if !end.failed_gates.is_empty() => end.failed_gates.clone(),
            _ => self
                .gates
                .iter()
                .filter(|gate| gate.status == GateStatus::Failed)
                .map(|gate| gate.name.clone())
                .collect(),
        }
    }

    /// Why the agent or `run` step failed, when how it exited does not say (it could not start,
    /// its response could not be read, no evidence).
    pub(crate) fn error(&self) -> Option<&str> {
        self.end.as_ref().and_then(|end| end.error.as_deref())
    }

    /// What failed, as the table at the end of a run names it: `agent` (or `run`, for a `run`
    /// step) when the child did, then the gates that failed.
    pub(crate) fn failures(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.failed_exit().is_some() || self.error().is_some() {
            names.push(self.worker().to_owned());
        }
        names.extend(self.failed_gates());
        names
    }

    /// What ran: `agent`, or `run` for a `run` step's command.
    pub(crate) fn worker(&self) -> &'static str {
        if self.run_step { RUN_STEP } else { "agent" }
    }

    /// The worker in a sentence: `the agent`, `the run command`.
    pub(crate) fn worker_phrase(&self) -> &'static str {
        if self.run_step {
            "the run command"
        } else {
            "the agent"
        }
    }

    /// The class of a failure that is not the work's, as a prefix: `transient: `, `fatal: `.
    pub(crate) fn class_prefix(&self) -> String {
        match self.end.as_ref().and_then(|end| end.class) {
            Some(class @ (FailureClass::Transient | FailureClass::Fatal)) => {
                format!("{}: ", class.as_str())
            }
            _ => String::new(),
        }
    }

    /// What went wrong, in one phrase: `agent exited with code 1; gates syntax, tests` (`run
    /// command exited …` for a `run` step; the error itself when the agent failed otherwise).
    /// None when nothing did.
    pub(crate) fn failure_summary(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(exit) = self.failed_exit() {
            let worker = self.worker_phrase().trim_start_matches("the ");
            parts.push(format!("{worker} {exit}"));
        } else if let Some(error) = self.error() {
            parts.push(first_line(error).to_owned());
        }
        let gates = self.failed_gates();
        match gates.len() {
            0 => {}
            1 => parts.push(format!("gate {}", gates[0])),
            _ => parts.push(format!("gates {}", gates.join(", "))),
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

impl PhaseRecord {
    /// ` (claude-opus)` when attempt `number`, the latest one, ran with another agent than the
    /// phase's first attempt; else nothing.
    pub(crate) fn other_agent(&self, number: u32) -> String {
        self.attempt
            .as_ref()
            .filter(|a| a.number == number)
            .and_then(|a| a.tier.as_ref())
            .and_then(|t| t.agent.as_deref())
            .filter(|agent| self.first_agent.as_deref() != Some(*agent))
            .map(|agent| format!(" ({})", crate::text::one_line(agent)))
            .unwrap_or_default()
    }

    /// Whether it passed with an attempt that changed nothing, as its agent declared.
    pub(crate) fn nothing_to_change(&self) -> bool {
        self.standing() == Standing::Ended(PhaseStatus::Passed)
            && self
                .attempt
                .as_ref()
                .and_then(|a| a.end.as_ref())
                .is_some_and(|end| end.nothing_to_change)
    }

    /// Where it stands.
    pub(crate) fn standing(&self) -> Standing {
        match (&self.end, &self.attempt) {
            (Some(end), _) => Standing::Ended(end.status),
            (None, Some(_)) => Standing::Unfinished,
            (None, None) => Standing::NotStarted,
        }
    }

    /// Attempts made: from `PhaseFinished`, else the latest attempt's number.
    pub(crate) fn attempts(&self) -> u32 {
        match (&self.end, &self.attempt) {
            (Some(end), _) => end.attempts,
            (None, Some(attempt)) => attempt.number,
            (None, None) => 0,
        }
    }

    /// How long it ran: from `PhaseFinished`, else from its first attempt to the run's latest
    /// event. None when it never ran.
    pub(crate) fn duration_ms(&self, run: &RunRecord) -> Option<u64> {
        match (&self.end, self.started_ms) {
            (Some(end), _) if end.attempts > 0 => Some(end.duration_ms),
            // Ended without an attempt: skipped before it ran.
            (Some(_), _) | (None, None) => None,
            (None, Some(started)) => Some(run.last_elapsed_ms.saturating_sub(started)),
        }
    }

    /// Whether it is a `for-each` phase made into items: its row counts them, and it is not
    /// counted beside them.
    pub(crate) fn has_items(&self) -> bool {
        self.made.first().is_some_and(|made| {
            crate::model::split_item_name(made).is_some_and(|(of, _)| of == self.name)
        })
    }

    /// Why it was skipped, failed or cancelled, as the engine said.
    pub(crate) fn reason(&self) -> Option<&str> {
        self.end.as_ref().and_then(|end| end.reason.as_deref())
    }
}

/// The last column of a table of phases, for a phase that failed or did not finish: what failed
/// in its last attempt (`agent`, then gates), with the agent's error after it, else the phase's
/// reason in parentheses. The summary at the end of a run and `helixflow show` both use it.
pub(crate) fn failing_column(
    failures: &[String],
    error: Option<&str>,
    reason: Option<&str>,
) -> String {
    if failures.is_empty() {
        return reason.map(|r| format!("({r})")).unwrap_or_default();
    }
    let names = failures.join(", ");
    match error {
        Some(error) => format!("{names} ({})", first_line(error)),
        None => names,
    }
}

/// The first line of `text` that is not blank, trimmed: a long message's headline.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default()
}
