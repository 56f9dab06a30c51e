//! The events of a run. The engine emits them; the journal, the progress display, NDJSON, `JUnit` and
//! the summary only listen. The engine itself never prints.

use serde::{Deserialize, Serialize};

mod check;
mod exit;
pub(crate) mod record;
pub(crate) mod sink;
mod step;
mod tier;
pub(crate) mod usage;

pub use check::CheckKind;
pub use check::ReportKind;
pub use exit::ChildExit;
pub(crate) use exit::how_it_ended;
pub use step::Step;
pub use tier::Tier;

use crate::redact::Redactor;

/// How a timed-out child was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeoutKind {
    /// The wall-clock `timeout`.
    Wall,
    /// No output for `idle-timeout`.
    Idle,
}

/// The result of one gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateStatus {
    /// The gate passed.
    Passed,
    /// The gate failed.
    Failed,
    /// Not run (an earlier gate failed with `fail-fast`, or the run was cancelled).
    Skipped,
}

/// What one gate found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateReport {
    /// The gate's name (default: its kind); the implicit first gate is `outputs`.
    pub name: String,
    /// What the report comes from: a gate's kind (`syntax`, `command`, `outputs`, `scope`, …),
    /// or `self`, `sub-agent`, `worktree`.
    pub kind: ReportKind,
    /// Passed, failed or skipped.
    pub status: GateStatus,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// One entry per finding, each precise enough to act on (a path, `file:line:col` with the source
    /// line and a caret, the tail of a command's output, …). A passing gate may carry a note (a
    /// fix that repaired it, nothing to check).
    pub details: Vec<String>,
}

impl GateReport {
    /// The report's kind, typed; None for a name no kind has (a report written by another
    /// version of helixflow).
    #[must_use]
    pub(crate) fn check_kind(&self) -> Option<CheckKind> {
        match self.kind {
            ReportKind::Gate(kind) => Some(kind),
            _ => None,
        }
    }

    /// Whether the report comes from a gate of this kind.
    #[must_use]
    pub(crate) fn is(&self, kind: CheckKind) -> bool {
        self.kind == ReportKind::Gate(kind)
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttemptOutcome {
    /// Every gate passed.
    Passed,
    /// The agent failed, or a gate did.
    Failed,
    /// The run was cancelled during the attempt.
    Cancelled,
}

/// How a phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseStatus {
    /// An attempt passed.
    Passed,
    /// Every allowed attempt failed.
    Failed,
    /// Not started: a dependency failed, or the run stopped.
    Skipped,
    /// Stopped by Ctrl-C or the run's timeout.
    Cancelled,
    /// Not started: it passed in an earlier run and nothing it depends on changed since.
    UpToDate,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Every phase passed.
    Passed,
    /// A phase failed or was skipped.
    Failed,
    /// Interrupted (Ctrl-C).
    Cancelled,
    /// The run-wide `timeout` expired.
    TimedOut,
}

/// Why a run cancelled its running phases. Its words are the reason those phases report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CancelReason {
    /// SIGINT or SIGTERM.
    Interrupted,
    /// The run-wide `timeout` expired; the limit as written in words.
    TimedOut(String),
    /// A phase task panicked: a bug in helixflow.
    Internal,
}

impl CancelReason {
    /// The status a run cancelled for this reason ends with.
    pub(crate) fn run_status(&self) -> RunStatus {
        match self {
            Self::Interrupted => RunStatus::Cancelled,
            Self::TimedOut(_) => RunStatus::TimedOut,
            Self::Internal => RunStatus::Failed,
        }
    }
}

impl std::fmt::Display for CancelReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Interrupted => f.write_str("the run was interrupted"),
            Self::TimedOut(limit) => write!(f, "the run's timeout of {limit} expired"),
            Self::Internal => f.write_str("helixflow failed internally"),
        }
    }
}

/// The step in which a `run` step's command runs (an agent runs in step `agent`).
pub const RUN_STEP: &str = "run";

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// The run began.
    RunStarted {
        /// The run's id (its folder name under `runs/`).
        run_id: String,
        /// The pipeline's name.
        pipeline: String,
        /// Phases in file order.
        phases: Vec<String>,
        /// Phases that may run at once.
        max_parallel: u32,
        /// The earlier run this one continues, when that one failed, was interrupted or crashed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumes: Option<String>,
    },
    /// A phase will run in this run (it is not up to date), for these reasons.
    PhaseQueued {
        /// The phase.
        phase: String,
        /// Why it runs, one line each.
        reasons: Vec<String>,
    },
    /// An attempt of a phase began.
    AttemptStarted {
        /// The phase.
        phase: String,
        /// Counting from 1.
        attempt: u32,
        /// `retries + 1`.
        max_attempts: u32,
        /// The tier it runs in: its attempt of the work, its agent, the `attempt` blocks that
        /// set it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tier: Option<Tier>,
    },
    /// The attempt moved to a new step (for progress displays): `agent`, [`RUN_STEP`],
    /// `gate tests`, …
    Step {
        /// The phase.
        phase: String,
        /// The attempt.
        attempt: u32,
        /// What it is doing now.
        step: Step,
    },
    /// The agent or `run` step exited.
    ChildExited {
        /// The phase.
        phase: String,
        /// The attempt.
        attempt: u32,
        /// How it exited.
        exit: ChildExit,
    },
    /// A gate finished.
    GateFinished {
        /// The phase.
        phase: String,
        /// The attempt.
        attempt: u32,
        /// What it found.
        report: GateReport,
    },
    /// An attempt finished.
    AttemptFinished {
        /// The phase.
        phase: String,
        /// The attempt.
        attempt: u32,
        /// Passed, failed or cancelled.
        outcome: AttemptOutcome,
        /// Wall time in milliseconds.
        duration_ms: u64,
        /// Names of the gates that failed.
        failed_gates: Vec<String>,
        /// The feedback for the next attempt, when it failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
        /// Why the agent or `run` step failed, when how it exited does not say: it could not
        /// start, its response could not be read or reported an error, or its transcript lacks
        /// the `evidence`.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// What the agent used, as its output reported it (none for a `run` step, or an agent
        /// that never started).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<usage::Usage>,
        /// How a failed attempt failed: `transient`, `fatal` or `work`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<usage::FailureClass>,
        /// It passed having changed nothing, as its agent declared (`no-change`): "passed,
        /// nothing to change".
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        nothing_to_change: bool,
    },
    /// A failed phase will be tried again.
    RetryScheduled {
        /// The phase.
        phase: String,
        /// The attempt that comes next.
        next_attempt: u32,
        /// The wait before it, in milliseconds.
        backoff_ms: u64,
    },
    /// A phase ended.
    PhaseFinished {
        /// The phase.
        phase: String,
        /// How it ended.
        status: PhaseStatus,
        /// Attempts made.
        attempts: u32,
        /// Wall time in milliseconds, from its first attempt.
        duration_ms: u64,
        /// Why, for skipped, failed and cancelled phases.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Phases were made while the run goes on: the items of a `for-each` phase once it was ready,
    /// or the phases a planner's `generates` file declares once it passed.
    PhasesMade {
        /// The `for-each` phase, or the planner.
        phase: String,
        /// The phases made, in order (`migrate[parser]`, …).
        made: Vec<String>,
        /// Items of an earlier run that are no longer in the list: their records were removed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        dropped: Vec<String>,
    },
    /// A phase's `escalate` command ran.
    Escalated {
        /// The phase.
        phase: String,
        /// Its exit code.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
    },
    /// Something the user should know that is not a failure.
    Warning {
        /// The message.
        message: String,
    },
    /// The run ended.
    RunFinished {
        /// How.
        status: RunStatus,
        /// Wall time in milliseconds.
        duration_ms: u64,
        /// The process exit code.
        exit_code: i32,
    },
}

impl Event {
    /// The event with `secret` values redacted from every text it carries, as every listener (the
    /// journal, the terminal, `--events`, `JUnit`, `run.json`) must see it. Names that identify
    /// (the run's id, the pipeline's and the phases' names) are kept: they are written by the
    /// pipeline's author, and every record of the run is keyed by them, so a secret that happens
    /// to equal a phase's name must not split the phase's events from the phase.
    #[must_use]
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per event: the per-event match reads best whole"
    )]
    pub(crate) fn redacted(self, redactor: &Redactor) -> Self {
        if redactor.is_empty() {
            return self;
        }
        let r = |text: String| redactor.redact(&text);
        let all = |texts: Vec<String>| texts.into_iter().map(r).collect();
        match self {
            Self::RunStarted {
                run_id,
                pipeline,
                phases,
                max_parallel,
                resumes,
            } => Self::RunStarted {
                run_id,
                pipeline,
                phases,
                max_parallel,
                resumes,
            },
            Self::PhaseQueued { phase, reasons } => Self::PhaseQueued {
                phase,
                reasons: all(reasons),
            },
            Self::AttemptStarted {
                phase,
                attempt,
                max_attempts,
                tier,
            } => Self::AttemptStarted {
                phase,
                attempt,
                max_attempts,
                tier,
            },
            Self::Step {
                phase,
                attempt,
                step,
            } => Self::Step {
                phase,
                attempt,
                step: step.redacted(r),
            },
            Self::ChildExited {
                phase,
                attempt,
                exit,
            } => Self::ChildExited {
                phase,
                attempt,
                exit,
            },
            Self::GateFinished {
                phase,
                attempt,
                report,
            } => Self::GateFinished {
                phase,
                attempt,
                report: GateReport {
                    name: r(report.name),
                    kind: report.kind,
                    details: all(report.details),
                    ..report
                },
            },
            Self::AttemptFinished {
                phase,
                attempt,
                outcome,
                duration_ms,
                failed_gates,
                feedback,
                error,
                usage,
                class,
                nothing_to_change,
            } => Self::AttemptFinished {
                phase,
                attempt,
                outcome,
                duration_ms,
                failed_gates: all(failed_gates),
                feedback: feedback.map(r),
                error: error.map(r),
                // Model names are decoded from the agent's JSON: a secret written there with
                // `\uXXXX` escapes got past the redaction of the raw log.
                usage: usage.map(|usage| usage::Usage {
                    models: all(usage.models),
                    ..usage
                }),
                class,
                nothing_to_change,
            },
            Self::RetryScheduled {
                phase,
                next_attempt,
                backoff_ms,
            } => Self::RetryScheduled {
                phase,
                next_attempt,
                backoff_ms,
            },
            Self::PhaseFinished {
                phase,
                status,
                attempts,
                duration_ms,
                reason,
            } => Self::PhaseFinished {
                phase,
                status,
                attempts,
                duration_ms,
                reason: reason.map(r),
            },
            Self::Escalated { phase, code } => Self::Escalated { phase, code },
            Self::PhasesMade { .. } => self,
            Self::Warning { message } => Self::Warning {
                message: r(message),
            },
            Self::RunFinished { .. } => self,
        }
    }
}

/// An event with the time it happened, as written to the journal and `--events`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stamped {
    /// RFC 3339 time, UTC.
    pub time: String,
    /// Milliseconds since the run started.
    pub elapsed_ms: u64,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}
