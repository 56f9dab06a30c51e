//! The terminal's approver: asks a person at the terminal to approve or reject an attempt, with the
//! progress bars taken off the screen while the question waits for an answer.

use std::io::{BufRead, Write};
use std::sync::Mutex;

use crate::engine::approvals::{ApprovalDecision, Approver};
use crate::report::ProgressPause;

/// Asks on standard error, reads the answer from standard input.
pub(crate) struct TerminalApprover {
    /// The run's progress bars, when they are drawn.
    pub progress: Option<ProgressPause>,
    /// One question at a time: phases running in parallel wait their turn.
    turn: Mutex<()>,
}

impl TerminalApprover {
    pub(crate) fn new(progress: Option<ProgressPause>) -> Self {
        Self {
            progress,
            turn: Mutex::new(()),
        }
    }
}

impl Approver for TerminalApprover {
    fn ask(&self, summary: &str, question: &str) -> std::io::Result<ApprovalDecision> {
        let _turn = self
            .turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &self.progress {
            Some(progress) => progress.while_asking(|| ask_terminal(summary, question)),
            None => ask_terminal(summary, question),
        }
    }
}

fn ask_terminal(summary: &str, question: &str) -> std::io::Result<ApprovalDecision> {
    let mut stderr = std::io::stderr().lock();
    let stdin = std::io::stdin();
    write!(stderr, "{summary}{question} [y/N] ")?;
    stderr.flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    let by = std::env::var("USER").unwrap_or_default();
    if matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
        return Ok(ApprovalDecision {
            approved: true,
            reason: String::new(),
            by,
        });
    }
    write!(stderr, "Reason (becomes feedback for the next attempt): ")?;
    stderr.flush()?;
    let mut reason = String::new();
    stdin.lock().read_line(&mut reason)?;
    Ok(ApprovalDecision {
        approved: false,
        reason: reason.trim().to_owned(),
        by,
    })
}
