//! The one judge of a workspace: every verdict on a phase's gates — after an attempt, for a
//! `helixflow verify` receipt inside a run, outside a run (`helixflow check`, `helixflow verify`),
//! inside an agent's own session (`helixflow hook`) — is an [`Inspection`] built by the
//! constructor for its situation, and [`Inspection::judge`]
//! holds the rules on what each situation cannot judge. Every inspection runs with the
//! pipeline's redactor, so its `secret`s never reach a gate's log or detail.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::gates::{self, GateContext, checks_response, info};
use crate::event::{CheckKind, GateReport, GateStatus};
use crate::model::Phase;
use crate::process::Cancel;
use crate::redact::Redactor;
use crate::workspace::{Changes, Snapshot};

/// Where a phase is judged and how its gate commands run, whatever the situation.
#[derive(Clone)]
pub struct Scene<'a> {
    /// The workspace root; every relative path is resolved against it.
    pub workspace: &'a Path,
    /// Workspace-relative folders searches leave out (the state folder, report files).
    pub exclude: &'a [PathBuf],
    /// Added to helixflow's environment for gate commands: the pipeline's `env`, then the phase's.
    pub env: &'a [(OsString, OsString)],
    /// Where gate commands write their logs.
    pub logs: &'a Path,
    /// Stops running gate commands.
    pub cancel: &'a Cancel,
    /// Time between TERM and KILL when a gate command is stopped.
    pub grace: Duration,
    /// The pipeline's secrets, taken out of every log and detail.
    pub redactor: Arc<Redactor>,
    /// Every phase of the pipeline: a near miss never points at a file another phase declares.
    pub phases: &'a [Phase],
}

/// What an attempt changed: the diff from the workspace when it began to now, and apart from it
/// the changes to files its agent keeps for itself (`bookkeeping`).
#[derive(Debug, Clone, Copy)]
pub struct Changed<'a> {
    pub changes: &'a Changes,
    pub bookkeeping: &'a Changes,
}

/// In which situation a phase is judged: what can be known there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Situation {
    /// An attempt has ended: everything can be judged.
    AfterAttempt,
    /// `helixflow verify` inside a run, while the agent still works: its response is not known.
    Receipt,
    /// No attempt: what it changed, and its response, are not known.
    OutsideRun,
    /// An agent's own session stops (a Stop hook): what it changed is known when the phase's
    /// starting point was recorded, its response when the hook was told its last message.
    Session { started: bool, answered: bool },
}

/// One judgement of a phase's gates against the workspace.
pub struct Inspection<'a> {
    context: GateContext<'a>,
    situation: Situation,
    /// The earlier run in which the phase passed, for a re-run whose work is already in place.
    passed_before: Option<String>,
    /// The agent's `no-change` pattern, when its response matched it: it declared that there
    /// was nothing to change.
    declared: Option<String>,
}

/// How the details of a `changes` gate passed by an agent's declaration (`no-change`) start.
pub(crate) const NOTHING_TO_CHANGE: &str = "passed, nothing to change";

/// Whether a report is a `changes` gate passed because the agent declared there was nothing to
/// change.
pub(crate) fn passed_with_nothing_to_change(report: &GateReport) -> bool {
    report.is(CheckKind::Changes)
        && report.status == GateStatus::Passed
        && report
            .details
            .first()
            .is_some_and(|d| d.starts_with(NOTHING_TO_CHANGE))
}

/// What an inspection judges until it is told of changes: none.
static NO_CHANGES: Changes = Changes {
    created: Vec::new(),
    modified: Vec::new(),
    deleted: Vec::new(),
};

impl<'a> Inspection<'a> {
    /// The verdict on an attempt that ended: `now` is the workspace after it, `changed` what it
    /// changed, `alongside` the phases that ran at some time during it, `response` its agent's
    /// final response.
    #[must_use]
    pub fn after_attempt(
        scene: &Scene<'a>,
        phase: &'a Phase,
        now: &'a Snapshot,
        changed: Changed<'a>,
        alongside: &'a [&'a Phase],
        response: Option<&'a str>,
    ) -> Self {
        let mut context = context(scene, phase, now, changed, alongside);
        context.response = response;
        Inspection {
            context,
            situation: Situation::AfterAttempt,
            passed_before: None,
            declared: None,
        }
    }

    /// The phase passed in run `run_id` before: a re-run that changes nothing, because its work
    /// is already in place, passes `changes` when every other gate passes.
    #[must_use]
    pub fn passed_before(self, run_id: Option<String>) -> Self {
        Inspection {
            passed_before: run_id,
            ..self
        }
    }

    /// The agent declared that there was nothing to change (its response matched its
    /// `no-change` pattern): an attempt that changed nothing passes `changes` when every other
    /// gate passes.
    #[must_use]
    pub fn declared_no_change(self, pattern: Option<String>) -> Self {
        Inspection {
            declared: pattern,
            ..self
        }
    }

    /// A `helixflow verify` receipt, asked by an agent inside a run while it works.
    #[must_use]
    pub fn for_receipt(
        scene: &Scene<'a>,
        phase: &'a Phase,
        now: &'a Snapshot,
        changed: Changed<'a>,
        alongside: &'a [&'a Phase],
    ) -> Self {
        Inspection {
            context: context(scene, phase, now, changed, alongside),
            situation: Situation::Receipt,
            passed_before: None,
            declared: None,
        }
    }

    /// The workspace as `now` shows it, outside any attempt (`helixflow check`, `helixflow
    /// verify` outside a run).
    #[must_use]
    pub fn outside_run(scene: &Scene<'a>, phase: &'a Phase, now: &'a Snapshot) -> Self {
        let nothing = Changed {
            changes: &NO_CHANGES,
            bookkeeping: &NO_CHANGES,
        };
        Inspection {
            context: context(scene, phase, now, nothing, &[]),
            situation: Situation::OutsideRun,
            passed_before: None,
            declared: None,
        }
    }

    /// The workspace as `now` shows it when an agent's own session stops: `changed` is what
    /// changed since the phase started there (`helixflow hook use`), when that is known;
    /// `response` the agent's last message, when the hook was given it.
    #[must_use]
    pub fn in_session(
        scene: &Scene<'a>,
        phase: &'a Phase,
        now: &'a Snapshot,
        changed: Option<Changed<'a>>,
        response: Option<&'a str>,
    ) -> Self {
        let nothing = Changed {
            changes: &NO_CHANGES,
            bookkeeping: &NO_CHANGES,
        };
        let situation = Situation::Session {
            started: changed.is_some(),
            answered: response.is_some(),
        };
        let mut context = context(scene, phase, now, changed.unwrap_or(nothing), &[]);
        context.response = response;
        Inspection {
            context,
            situation,
            passed_before: None,
            declared: None,
        }
    }

    /// Runs the gates and returns their reports; `on_report` sees each one as it is final. A gate
    /// the situation cannot judge is reported as skipped, with the reason, never run against
    /// nothing.
    pub async fn judge(&self, on_report: &mut (dyn FnMut(&GateReport) + Send)) -> Vec<GateReport> {
        let situation = self.situation;
        let phase = self.context.phase;
        // With an earlier pass, or the agent's word that there was nothing to change, `changes`
        // is decided once every other gate is known.
        let nothing_changed =
            (self.passed_before.is_some() || self.declared.is_some()) && self.own_changes() == 0;
        let held = |report: &GateReport| nothing_changed && report.is(CheckKind::Changes);
        let mut reports = gates::run_gates(&self.context, &mut |report| {
            let mut report = report.clone();
            skip_unjudged(situation, phase, &mut report);
            if !held(&report) {
                on_report(&report);
            }
        })
        .await;
        for report in &mut reports {
            skip_unjudged(situation, phase, report);
        }
        if nothing_changed {
            // With `fail-fast`, gates after a failed `changes` were skipped, not passed: they
            // prove nothing, and the re-run fails as a first run would.
            let others_pass = reports
                .iter()
                .filter(|r| !r.is(CheckKind::Changes))
                .all(|r| match r.status {
                    GateStatus::Passed => true,
                    GateStatus::Skipped => !phase.fail_fast,
                    GateStatus::Failed => false,
                });
            for report in reports.iter_mut().filter(|r| held(r)) {
                if report.status == GateStatus::Failed {
                    self.nothing_to_do(report, others_pass);
                }
                on_report(report);
            }
        }
        reports
    }

    /// The verdict on a `changes` gate that failed for an attempt that changed nothing, with an
    /// earlier pass whose work is in place or the agent's word that there was nothing to change:
    /// it passes when every other gate passed.
    fn nothing_to_do(&self, report: &mut GateReport, others_pass: bool) {
        match (&self.declared, others_pass) {
            (Some(pattern), true) => {
                report.status = GateStatus::Passed;
                report.details = vec![format!(
                    "{NOTHING_TO_CHANGE}: the agent declared it (its response matches `no-change` \
                     `{pattern}`) and every other gate passed"
                )];
            }
            (Some(_), false) => report.details.push(
                "you declared that there was nothing to change: that passes `changes` only when \
                 every other gate passes, and another one failed"
                    .to_owned(),
            ),
            (None, true) => {
                report.status = GateStatus::Passed;
                report.details = vec![format!(
                    "nothing changed, and nothing had to: the phase passed in run {} and its \
                     work is in place (every other gate passed)",
                    self.passed_before.as_deref().unwrap_or_default()
                )];
            }
            (None, false) => {}
        }
    }

    /// How many of the changes are the phase's own (not claimed by a phase alongside).
    fn own_changes(&self) -> usize {
        let theirs = gates::claimed_by_others(self.context.phase, self.context.alongside);
        self.context
            .changes
            .all()
            .filter(|path| !theirs(path))
            .count()
    }
}

fn context<'a>(
    scene: &Scene<'a>,
    phase: &'a Phase,
    now: &'a Snapshot,
    changed: Changed<'a>,
    alongside: &'a [&'a Phase],
) -> GateContext<'a> {
    GateContext {
        workspace: scene.workspace,
        phase,
        response: None,
        after: now,
        changes: changed.changes,
        bookkeeping: changed.bookkeeping,
        env: scene.env,
        logs: scene.logs,
        cancel: scene.cancel,
        redactor: scene.redactor.clone(),
        grace: scene.grace,
        exclude: scene.exclude,
        alongside,
        phases: scene.phases,
    }
}

/// The skip rules: gates on the agent's response cannot be judged before it exits, and gates on
/// what an attempt changed cannot be judged without one.
fn skip_unjudged(situation: Situation, phase: &Phase, report: &mut GateReport) {
    let why = match situation {
        Situation::AfterAttempt => None,
        Situation::Receipt => checks_response(phase, &report.name).then_some(
            "the response is known only after the agent exits; it is not checked by `helixflow verify`",
        ),
        Situation::OutsideRun => report
            .check_kind()
            .and_then(|kind| info(kind).outside_a_run)
            .or(checks_response(phase, &report.name)
                .then_some("the response exists only inside a run")),
        Situation::Session { started, answered } => {
            let kind = report.check_kind();
            if kind == Some(CheckKind::Approval) {
                Some("decided by a person during a run")
            } else if !started && kind.and_then(|kind| info(kind).outside_a_run).is_some() {
                Some(
                    "judged against where the phase started in this workspace, which is not \
                     recorded: `helixflow hook use PHASE` records it",
                )
            } else if !answered && checks_response(phase, &report.name) {
                Some("the agent's last message was not given to the hook")
            } else {
                None
            }
        }
    };
    if let Some(why) = why {
        report.status = GateStatus::Skipped;
        report.details = vec![why.to_owned()];
    }
}
