//! Statuses as the report shows them: a word and a symbol for each (the page reads without
//! colour), and a CSS class for its colour.

use super::model::PhaseView;
use crate::event::record::Standing;
use crate::event::{AttemptOutcome, PhaseStatus};

/// Where a phase stands, or how an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Passed,
    Failed,
    Skipped,
    Cancelled,
    UpToDate,
    /// An attempt under way in a live run.
    Running,
    /// Started, but the run ended before it did.
    Unfinished,
    /// Waiting for its turn in a live run.
    Pending,
    /// Never started in a run that ended.
    NotStarted,
}

impl Status {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Cancelled => "cancelled",
            Status::UpToDate => "up to date",
            Status::Running => "running",
            Status::Unfinished => "unfinished",
            Status::Pending => "pending",
            Status::NotStarted => "not started",
        }
    }

    /// A symbol beside the word.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Status::Passed => "✓",
            Status::Failed => "✗",
            Status::Skipped => "↷",
            Status::Cancelled => "■",
            Status::UpToDate => "≡",
            Status::Running => "▶",
            Status::Unfinished => "◌",
            Status::Pending => "…",
            Status::NotStarted => "○",
        }
    }

    pub(crate) fn class(self) -> &'static str {
        match self {
            Status::Passed => "s-passed",
            Status::Failed => "s-failed",
            Status::Skipped => "s-skipped",
            Status::Cancelled => "s-cancelled",
            Status::UpToDate => "s-uptodate",
            Status::Running => "s-running",
            Status::Unfinished => "s-unfinished",
            Status::Pending | Status::NotStarted => "s-pending",
        }
    }

    /// How much it calls for attention: a fan-out shows its worst item's.
    pub(crate) fn severity(self) -> u8 {
        match self {
            Status::Failed => 8,
            Status::Cancelled => 7,
            Status::Unfinished => 6,
            Status::Running => 5,
            Status::Skipped => 4,
            Status::Pending | Status::NotStarted => 3,
            Status::Passed => 1,
            Status::UpToDate => 0,
        }
    }
}

/// A phase's status; `live` while the run goes on.
pub(crate) fn phase_status(phase: &PhaseView, live: bool) -> Status {
    match phase.standing() {
        Standing::Ended(PhaseStatus::Passed) => Status::Passed,
        Standing::Ended(PhaseStatus::Failed) => Status::Failed,
        Standing::Ended(PhaseStatus::Skipped) => Status::Skipped,
        Standing::Ended(PhaseStatus::Cancelled) => Status::Cancelled,
        Standing::Ended(PhaseStatus::UpToDate) => Status::UpToDate,
        Standing::Unfinished if live => Status::Running,
        Standing::Unfinished => Status::Unfinished,
        Standing::NotStarted if live => Status::Pending,
        Standing::NotStarted => Status::NotStarted,
    }
}

/// An attempt's status.
pub(crate) fn attempt_status(outcome: Option<AttemptOutcome>, live: bool) -> Status {
    match outcome {
        Some(AttemptOutcome::Passed) => Status::Passed,
        Some(AttemptOutcome::Failed) => Status::Failed,
        Some(AttemptOutcome::Cancelled) => Status::Cancelled,
        None if live => Status::Running,
        None => Status::Unfinished,
    }
}
