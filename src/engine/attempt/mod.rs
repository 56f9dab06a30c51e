//! One phase, attempt after attempt: render the prompt, start the agent or `run` step, verify the
//! work, write the artifacts, and decide on a retry.
//!
//! One attempt is four steps, one file each: [`prepare`] (the snapshot before, the prompt, the
//! session, the child to start), [`worker`] (running it, and judging its exit and response),
//! [`verify`] (the snapshot after, then the verify modes) and [`conclude`] (`gates.json`, the
//! feedback, the attempt's end in the journal).

mod conclude;
mod phase_start;
mod prepare;
mod verify;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::context::{Run, millis};
use super::error::{AtStage, AttemptError, AttemptStage};
use super::isolation::{Applied, Worktree};
use super::state::{AttemptWindow, LiveAttempt, PhaseRunning};
use crate::event::usage::{FailureClass, Spend, Usage};
use crate::event::{
    AttemptOutcome, Event, GateReport, GateStatus, PhaseStatus, ReportKind, Step, Tier,
};
use crate::model::UnknownCost;
use crate::model::{GateKind, Isolation, Millis, Phase, PhaseId, VerifyMode};
use crate::verify::feedback::AgentFailure;
use crate::workspace::Snapshot;
use prepare::Session;

pub(crate) use prepare::{attempt_prompt, fingerprint_prompt};
pub(crate) use verify::verify_program as helixflow_program;

/// The files `phase` made or changed when it passed in the run of `folder` (its `work.json`).
pub(crate) fn work_files(folder: &crate::store::run::RunDir, phase: &str) -> Vec<String> {
    std::fs::read_to_string(folder.phase_dir(phase).join(verify::WORK_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<verify::Work>(&text).ok())
        .map(|work| {
            work.into_iter()
                .filter_map(|(path, hash)| hash.map(|_| path))
                .collect()
        })
        .unwrap_or_default()
}

/// How a phase ended, for the scheduler.
#[derive(Debug, Clone)]
pub(crate) struct PhaseResult {
    pub status: PhaseStatus,
    pub attempts: u32,
    pub reason: Option<String>,
    pub duration: Duration,
}

/// What one attempt produced.
struct AttemptResult {
    outcome: AttemptOutcome,
    feedback: Option<String>,
    /// Set when the attempt could not even start (a prompt that does not render, a program that
    /// does not exist): retrying would fail the same way.
    fatal: Option<String>,
    /// Set when the attempt ended but the phase must not retry it: its work passed the gates and
    /// its verifier gave no usable review, which another run of the worker cannot mend.
    no_retry: Option<String>,
    /// How a failed attempt failed.
    class: Option<FailureClass>,
    /// For a failure of class `fatal` or `transient`: the agent's message, and what marked it.
    message: Option<String>,
    /// The wait a transient failure asked for.
    retry_after: Option<Duration>,
    /// What the agent used.
    usage: Option<Usage>,
}

/// Runs every attempt of one phase. A transient failure is tried again after a wait without
/// spending `retries` or the run's `retry-budget` (up to `transient-retries`), in the same tier;
/// a fatal one ends the phase at once; before each attempt the `max-cost` budgets are checked.
/// Each attempt of the work runs as its tier says: the phase with the `attempt` blocks that
/// cover it.
pub(crate) async fn run_phase(run: Arc<Run>, id: PhaseId) -> PhaseResult {
    let phase = &run.phase(id);
    let _running = PhaseRunning::start(&run.state.alongside, id);
    // From here on, the phases running alongside are noted: their changes are not this phase's.
    // The window spans every attempt, as the verdict covers what they changed together.
    let _window = AttemptWindow::open(&run.state.alongside, id);
    let started = Instant::now();
    let mut previous_feedback: Option<(String, PathBuf)> = None;
    let mut session = Session::default();
    // The workspace before the phase's first attempt, which its bundle starts from.
    let mut phase_before = phase_start::resumed(&run.ctx, phase);
    let mut start_kept = false;
    let mut attempt = 1;
    let mut tries = Tries::default();
    let mut spend = Spend::default();
    loop {
        let finished = |status, attempts, reason: Option<String>| PhaseResult {
            status,
            attempts,
            reason,
            duration: started.elapsed(),
        };
        if let Some(reason) = budget_spent(&run, phase, &spend) {
            conclude::escalate(&run, phase).await;
            return finished(PhaseStatus::Failed, attempt - 1, Some(reason));
        }
        let number = tries.numbered(phase, attempt);
        let tiered = tries.tiered(phase);
        let previous = previous_feedback.as_ref();
        let result = attempt_once(
            &run,
            id,
            &tiered,
            number,
            previous,
            &mut session,
            &mut phase_before,
        )
        .await;
        if let Some(usage) = &result.usage {
            add_spend(&run, phase, attempt, usage, &mut spend);
        }
        match result.outcome {
            AttemptOutcome::Passed => return finished(PhaseStatus::Passed, attempt, None),
            AttemptOutcome::Cancelled => {
                let reason = run.state.cancel.reason();
                return finished(PhaseStatus::Cancelled, attempt, Some(reason));
            }
            // Where the phase started is kept once it failed, for a run that resumes it.
            AttemptOutcome::Failed if !start_kept && phase.isolation != Isolation::Worktree => {
                start_kept = true;
                phase_start::keep(&run, phase, phase_before.as_deref());
            }
            AttemptOutcome::Failed => {}
        }
        let restart = restarts_session(&run, phase, attempt, &result, &mut session, &mut tries);
        let transient = restart
            || result.class == Some(FailureClass::Transient)
                && tries.transient < phase.transient_retries
                && !run.state.budget.stopping();
        if !restart && let Some(reason) = why_not_retry(&run, phase, &result, &tries, transient) {
            conclude::escalate(&run, phase).await;
            return finished(PhaseStatus::Failed, attempt, Some(reason));
        }
        let backoff = tries.next_wait(phase, &result, transient);
        if !retry_after(&run, phase, attempt, backoff).await {
            let reason = run.state.cancel.reason();
            return finished(PhaseStatus::Cancelled, attempt, Some(reason));
        }
        // A transient try does the same work again: the feedback of the last failure of the
        // work (if any) still applies.
        if !transient {
            previous_feedback = result.feedback.map(|text| {
                let file = run.ctx.folder.attempt_dir(&phase.name.value, attempt);
                (
                    text,
                    file.map(|d| d.join("feedback.md")).unwrap_or_default(),
                )
            });
        }
        attempt += 1;
    }
}

/// A retry that continued the agent's session and failed as fatal may have found the session
/// gone (Gemini CLI removes, as it starts, the session files it cannot read, one that another
/// Gemini CLI is writing included; `--resume` of it then exits 42): once per phase, the work is
/// tried again at once in a new session, with the full prompt and the feedback, as after a
/// transient failure. A failure that is fatal indeed ends that try too, and the phase. Returns
/// whether the next try starts a new session.
fn restarts_session(
    run: &Run,
    phase: &Phase,
    attempt: u32,
    result: &AttemptResult,
    session: &mut Session,
    tries: &mut Tries,
) -> bool {
    if !session.resumed
        || result.fatal.is_some()
        || result.class != Some(FailureClass::Fatal)
        || tries.restarted
        || run.state.budget.stopping()
    {
        return false;
    }
    tries.restart();
    *session = Session::default();
    run.emit(Event::Warning {
        message: format!(
            "attempt {attempt} of \"{}\" could not continue the agent's session ({}); attempt {} \
             starts a new session with the full prompt and the feedback",
            phase.name.value,
            result.message.as_deref().unwrap_or("a fatal failure"),
            attempt + 1
        ),
    });
    true
}

/// An attempt's number, and how many the phase has now.
#[derive(Clone, Copy)]
struct Numbered {
    attempt: u32,
    max_attempts: u32,
}

/// The phase as an attempt runs it, and its tier.
struct Tiered<'p> {
    /// The phase with the `attempt` blocks of this attempt of the work applied.
    phase: std::borrow::Cow<'p, Phase>,
    tier: Tier,
    /// Whether this try repeats the attempt of the work, and why.
    repeat: Repeat,
}

/// Why a try repeats the attempt of the work before it, in the same tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Repeat {
    /// It does not: a new attempt of the work.
    #[default]
    No,
    /// After a transient failure.
    Transient,
    /// In a new session, the one the attempt before continued being gone.
    NewSession,
}

/// The tier of attempt `work` of the work of `phase`.
fn tier_of(phase: &Phase, work: u32) -> Tier {
    Tier {
        work_attempt: work,
        agent: phase.for_attempt(work).agent_name().map(str::to_owned),
        blocks: phase.blocks_for(work).iter().map(|b| b.label()).collect(),
    }
}

/// One attempt, whatever happens: helixflow's own failure to run it ends it as a fatal failure,
/// told in the journal.
async fn attempt_once(
    run: &Run,
    id: PhaseId,
    tiered: &Tiered<'_>,
    number: Numbered,
    previous: Option<&(String, PathBuf)>,
    session: &mut Session,
    phase_before: &mut Option<Arc<Snapshot>>,
) -> AttemptResult {
    let Numbered {
        attempt,
        max_attempts,
    } = number;
    run.emit(Event::AttemptStarted {
        phase: run.phase(id).name.value.clone(),
        attempt,
        max_attempts,
        tier: Some(tiered.tier.clone()),
    });
    let started = Instant::now();
    let result = match one_attempt(run, id, tiered, number, previous, session, phase_before).await {
        Ok(result) => result,
        Err(e) => conclude::fatal(e.to_string()),
    };
    if let Some(reason) = &result.fatal {
        conclude::could_not_run(run, &tiered.phase, attempt, max_attempts, started, reason);
    }
    result
}

/// Says that attempt `attempt + 1` comes after `backoff`, and waits for it; false when the run
/// was cancelled meanwhile.
async fn retry_after(run: &Run, phase: &Phase, attempt: u32, backoff: Duration) -> bool {
    run.emit(Event::RetryScheduled {
        phase: phase.name.value.clone(),
        next_attempt: attempt + 1,
        backoff_ms: millis(backoff),
    });
    if backoff.is_zero() {
        return true;
    }
    tokio::select! {
        () = tokio::time::sleep(backoff) => true,
        () = run.cancel().soft.cancelled() => false,
    }
}

/// Retries spent on failures of the work, and tries after transient failures.
#[derive(Default)]
struct Tries {
    retries: u32,
    transient: u32,
    /// Whether the next try repeats the one before, and why.
    repeat: Repeat,
    /// Whether a try started a new session after a resumed one failed as fatal.
    restarted: bool,
    /// Whether the next try is that one.
    restarting: bool,
}

impl Tries {
    /// Counts a try that repeats the attempt of the work in a new session, after the one that
    /// continued the session failed as fatal: like a try after a transient failure, it spends
    /// neither `retries` nor the run's `retry-budget`.
    fn restart(&mut self) {
        self.restarted = true;
        self.restarting = true;
    }

    /// Attempt `attempt`'s number, and how many the phase has now: its retries, and the tries
    /// after transient failures and in a new session so far.
    fn numbered(&self, phase: &Phase, attempt: u32) -> Numbered {
        let max_attempts = phase
            .retries
            .saturating_add(1)
            .saturating_add(self.transient)
            .saturating_add(u32::from(self.restarted));
        Numbered {
            attempt,
            max_attempts,
        }
    }

    /// The next attempt as its tier runs it. Attempts count the work: a try after a transient
    /// failure repeats the attempt before, in its tier.
    fn tiered<'p>(&self, phase: &'p Phase) -> Tiered<'p> {
        let work = self.retries + 1;
        Tiered {
            phase: phase.for_attempt(work),
            tier: tier_of(phase, work),
            repeat: self.repeat,
        }
    }

    /// Counts the next try and returns the wait before it: none for a try in a new session
    /// ([`Tries::restart`]), a transient failure's, else the `backoff` of the next attempt's tier.
    fn next_wait(&mut self, phase: &Phase, result: &AttemptResult, transient: bool) -> Duration {
        // A try in a new session after the session was lost: at once, counted by `restart`.
        if std::mem::take(&mut self.restarting) {
            self.repeat = Repeat::NewSession;
            return Duration::ZERO;
        }
        self.repeat = if transient {
            Repeat::Transient
        } else {
            Repeat::No
        };
        let next = phase.for_attempt(self.retries + if transient { 1 } else { 2 });
        let phase: &Phase = &next;
        if transient {
            let wait = transient_wait(phase, result.retry_after, self.transient);
            self.transient += 1;
            wait
        } else {
            self.retries += 1;
            phase.backoff.map_or(Duration::ZERO, Millis::duration)
        }
    }
}

/// Why a failed attempt is the phase's last: a failure retrying cannot mend, no retries left, or
/// the run stopping or out of its retry budget (whose retry this takes otherwise).
fn why_not_retry(
    run: &Run,
    phase: &Phase,
    result: &AttemptResult,
    tries: &Tries,
    transient: bool,
) -> Option<String> {
    let message = || result.message.as_deref().unwrap_or("the agent failed");
    if let Some(reason) = result.fatal.as_ref().or(result.no_retry.as_ref()) {
        Some(reason.clone())
    } else if result.class == Some(FailureClass::Fatal) {
        Some(format!("{} (a fatal failure: not retried)", message()))
    } else if transient {
        None
    } else if tries.retries >= phase.retries {
        Some(if result.class == Some(FailureClass::Transient) {
            format!(
                "{} (transient, still after {} tries; no retries left)",
                message(),
                tries.transient
            )
        } else {
            "no retries left".to_owned()
        })
    } else if run.state.budget.stopping() {
        Some("not retried: the run is stopping".to_owned())
    } else if !run.state.budget.take_retry() {
        Some("not retried: the run's retry budget is spent".to_owned())
    } else {
        None
    }
}

/// Adds an attempt's usage to the phase's and the run's spend, with a warning when its cost is
/// unknown and a budget counts only known costs.
fn add_spend(run: &Run, phase: &Phase, attempt: u32, usage: &Usage, spend: &mut Spend) {
    spend.add(usage);
    run.state.budget.add_spend(usage);
    if let Some(of) = phase.item_of().and_then(|of| run.state.phases.id(of)) {
        run.state.fan_outs.add_spend(of, usage);
    }
    if usage.cost_usd.is_none()
        && (phase.max_cost.is_some() || run.ctx.pipeline.max_cost.is_some())
        && run.ctx.pipeline.unknown_cost == UnknownCost::Allow
    {
        run.emit(Event::Warning {
            message: format!(
                "the cost of attempt {attempt} of \"{}\" is unknown: the max-cost budget counts only known costs (unknown-cost \"allow\")",
                phase.name.value
            ),
        });
    }
}

/// One attempt under way: what each of its steps reads.
struct Attempt<'s> {
    run: &'s Run,
    id: PhaseId,
    /// The phase as this attempt runs it: with the `attempt` blocks of its tier applied.
    phase: &'s Phase,
    /// Its tier, and whether (and why) it repeats the attempt of the work.
    tier: &'s Tier,
    repeat: Repeat,
    /// The attempt's number, from 1.
    number: u32,
    max_attempts: u32,
    /// The attempt folder.
    dir: PathBuf,
    /// The attempt's own worktree, with `isolation "worktree"`.
    worktree: Option<Worktree>,
    started: Instant,
    /// What the agent used, once it exited.
    usage: Mutex<Option<Usage>>,
}

impl<'s> Attempt<'s> {
    /// Attempt `number` of phase `id` begins, as its tier says: its folder, and its worktree
    /// with `isolation "worktree"`.
    async fn begin(
        run: &'s Run,
        id: PhaseId,
        tiered: &'s Tiered<'_>,
        number: Numbered,
    ) -> Result<Attempt<'s>, AttemptError> {
        let phase: &Phase = &tiered.phase;
        let Numbered {
            attempt: number,
            max_attempts,
        } = number;
        let worktree = if phase.isolation == Isolation::Worktree {
            Some(
                Worktree::create(run, phase, number)
                    .await
                    .at(AttemptStage::Begin)?,
            )
        } else {
            None
        };
        Ok(Attempt {
            run,
            id,
            phase,
            tier: &tiered.tier,
            repeat: tiered.repeat,
            number,
            max_attempts,
            dir: run
                .ctx
                .folder
                .attempt_dir(&phase.name.value, number)
                .at(AttemptStage::Begin)?,
            worktree,
            started: Instant::now(),
            usage: Mutex::new(None),
        })
    }

    /// Where the attempt works: its worktree, or else the pipeline's workspace. The worker, the
    /// gates, the snapshots, `helixflow verify` and the verifier all see this folder.
    fn workspace(&self) -> &Path {
        self.worktree
            .as_ref()
            .map_or(&self.run.ctx.pipeline.workspace, Worktree::workspace)
    }

    /// Tells the reporters which step the attempt is at.
    fn step(&self, step: Step) {
        self.run.emit(Event::Step {
            phase: self.phase.name.value.clone(),
            attempt: self.number,
            step,
        });
    }
}

/// One attempt: prepare the worker, run it, verify its work, conclude. A step that returns
/// `Err(result)` ends the attempt there, with that result.
async fn one_attempt(
    run: &Run,
    id: PhaseId,
    tiered: &Tiered<'_>,
    number: Numbered,
    previous: Option<&(String, PathBuf)>,
    session: &mut Session,
    phase_before: &mut Option<Arc<Snapshot>>,
) -> Result<AttemptResult, AttemptError> {
    let current = Attempt::begin(run, id, tiered, number).await?;
    let before = prepare::snapshot_before(&current)
        .await
        .at(AttemptStage::ReadBefore)?;
    // The phase's result is what its attempts changed together: a failed attempt's files are
    // still there when the next one starts, so its bundle starts from before the first.
    if phase_before.is_none() {
        phase_before.clone_from(&before);
    }
    let first_before = phase_before.clone();
    // A phase is judged on everything its attempts changed together: a forbidden change a failed
    // attempt left behind fails the next attempt too, until it is undone. An attempt in a
    // worktree of its own starts afresh, and is judged on its own changes.
    let judged_from = if current.worktree.is_some() {
        before.clone()
    } else {
        first_before.clone()
    };
    let worked = match run_worker(&current, previous, session, judged_from.clone())
        .await
        .at(AttemptStage::Worker)?
    {
        Ok(worked) => worked,
        Err(ended) => return Ok(ended),
    };
    let Worked {
        agent_failure,
        response,
        task,
        live,
    } = worked;
    let verified = if agent_failure.is_none() {
        verify::verify(
            &current,
            verify::Starts {
                phase: judged_from,
                attempt: before.as_deref(),
            },
            &live,
            &task,
            response.as_deref(),
        )
        .await
        .at(AttemptStage::Verify)?
    } else {
        verify::Verified {
            reports: Vec::new(),
            after: None,
            verifier_void: None,
            work: verify::Work::new(),
            nothing_to_change: false,
        }
    };
    let verify::Verified {
        mut reports,
        after,
        verifier_void,
        work,
        nothing_to_change,
    } = verified;
    reports.extend(verify::guarded(&current).await);
    if agent_failure.is_none()
        && !run.state.cancel.is_cancelled()
        && reports.iter().all(|r| r.status != GateStatus::Failed)
        && let Some(worktree) = &current.worktree
    {
        reports.push(apply_back(&current, worktree).await?);
    }
    // In a worktree of its own, an attempt starts from the workspace as it is, whatever earlier
    // attempts did: its bundle is its own changes there.
    let bundle_before = if current.worktree.is_some() {
        before
    } else {
        first_before
    };
    let ended = Ended {
        agent_failure,
        reports,
        after,
        verifier_void,
        work,
        nothing_to_change,
    };
    finish(&current, ended, bundle_before).at(AttemptStage::Record)
}

/// What an attempt's worker left.
struct Worked {
    /// How the agent or step failed, when it did.
    agent_failure: Option<AgentFailure>,
    /// The agent's final response.
    response: Option<String>,
    /// What the worker was asked to do, for a verifier.
    task: String,
    /// The attempt as `helixflow verify` saw it while the worker ran.
    live: Arc<LiveAttempt>,
}

/// Prepares and runs the attempt's worker (open to `helixflow verify` meanwhile, judged from
/// `judged_from`), and judges its exit, response and turns. `Err` ends the attempt there.
async fn run_worker(
    current: &Attempt<'_>,
    previous: Option<&(String, PathBuf)>,
    session: &mut Session,
    judged_from: Option<Arc<Snapshot>>,
) -> std::io::Result<Result<Worked, AttemptResult>> {
    let prepared = match prepare::worker(current, previous, session)? {
        Ok(prepared) => prepared,
        Err(ended) => return Ok(Err(ended)),
    };
    let live = Arc::new(LiveAttempt {
        phase: current.id,
        attempt: current.number,
        workspace: current.workspace().to_path_buf(),
        before: judged_from,
        dir: current.dir.clone(),
        receipts: Mutex::new(Vec::new()),
    });
    let exit = match worker::run(current, prepared.spec, prepared.prompt_file, &live, session).await
    {
        Ok(exit) => exit,
        Err(ended) => return Ok(Err(ended)),
    };
    let (mut agent_failure, response) =
        worker::agent_result(current.run, current.phase, &exit, &current.dir).await;
    if agent_failure.is_none()
        && let Some(failure) = too_many_turns(current.phase, current)
    {
        agent_failure = Some(failure);
    }
    Ok(Ok(Worked {
        agent_failure,
        response,
        task: prepared.task,
        live,
    }))
}

/// What an attempt's worker and verification left, for [`finish`].
struct Ended {
    agent_failure: Option<AgentFailure>,
    reports: Vec<GateReport>,
    after: Option<Snapshot>,
    verifier_void: Option<String>,
    work: verify::Work,
    nothing_to_change: bool,
}

/// Concludes an attempt: its result in the journal; for a pass, its work and bundle (from
/// `bundle_before`); for a void review, no retry of the worker.
fn finish(
    current: &Attempt<'_>,
    ended: Ended,
    bundle_before: Option<Arc<Snapshot>>,
) -> std::io::Result<AttemptResult> {
    let (run, phase) = (current.run, current.phase);
    let Ended {
        agent_failure,
        reports,
        after,
        verifier_void,
        work,
        nothing_to_change,
    } = ended;
    let mut result =
        conclude::conclude(current, agent_failure.as_ref(), &reports, nothing_to_change)?;
    if result.outcome == AttemptOutcome::Passed && !work.is_empty() && current.worktree.is_none() {
        // What a later re-run that changes nothing is checked against (`changes`).
        let dir = run.ctx.folder.phase_dir(&phase.name.value);
        std::fs::write(
            dir.join(verify::WORK_FILE),
            run.ctx.redactor.to_json_pretty(&work)?,
        )?;
    }
    if let Some(reason) = verifier_void
        && result.outcome == AttemptOutcome::Failed
    {
        let verifier = phase.verifier.as_ref().map_or("", |v| v.value.as_str());
        result.no_retry = Some(format!(
            "the verifier \"{verifier}\" gave no usable review in {} tries ({reason}); the work \
             passed its gates and is not run again: fix the verifier",
            verify::VERIFIER_TRIES
        ));
    }
    if let (true, AttemptOutcome::Passed, Some(before), Some(after)) = (
        run.ctx.options.bundles.wanted(phase),
        result.outcome,
        bundle_before,
        after,
    ) {
        // The attempt passed and says so in the journal already: a bundle that cannot be
        // written is told, not turned into a failure of the work.
        if let Err(e) = conclude::bundle(current, &before, &after) {
            run.emit(Event::Warning {
                message: format!(
                    "phase \"{}\" passed, but its bundle could not be written: {e}",
                    phase.name.value
                ),
            });
        }
    }
    Ok(result)
}

/// Applies a passing attempt's changes from its worktree to the workspace; a conflict fails the
/// attempt, and the next one starts from the workspace as it is then.
async fn apply_back(a: &Attempt<'_>, worktree: &Worktree) -> Result<GateReport, AttemptError> {
    a.step(Step::Apply);
    let started = Instant::now();
    let (status, details) = match worktree.apply(a.run).await.at(AttemptStage::ApplyBack)? {
        Applied::Done => (GateStatus::Passed, Vec::new()),
        Applied::Conflicts(files) => {
            let mut details = vec![format!(
                "your work passed its checks, but it does not apply to the workspace: another phase changed {} since your worktree was made, and the two changes do not merge (the same lines changed, a side deleted the file, or it is not text). The next attempt starts from the workspace as it is now: make your change again there.",
                if files.len() == 1 {
                    "this file"
                } else {
                    "these files"
                }
            )];
            details.extend(files.iter().map(|f| format!("`{f}`")));
            (GateStatus::Failed, details)
        }
        Applied::SharedChanged(files) => {
            let mut details = vec![
                "your work changed a folder that `worktree-share` shares read only (or the workspace's own copy of it): nothing was applied. Leave shared folders as they are; a phase that must change one brings it with `worktree-include` instead.".to_owned(),
            ];
            details.extend(files.iter().take(20).map(|f| format!("`{f}`")));
            if files.len() > 20 {
                details.push(format!("and {} more", files.len() - 20));
            }
            (GateStatus::Failed, details)
        }
    };
    let report = GateReport {
        name: "isolation".into(),
        kind: ReportKind::Worktree,
        status,
        duration_ms: millis(started.elapsed()),
        details,
    };
    a.run.emit(Event::GateFinished {
        phase: a.phase.name.value.clone(),
        attempt: a.number,
        report: report.clone(),
    });
    Ok(report)
}

/// An attempt whose agent took more turns than the phase's `max-turns`, as its usage reports.
fn too_many_turns(phase: &Phase, a: &Attempt<'_>) -> Option<AgentFailure> {
    let limit = phase.max_turns?;
    let turns = a.usage.lock().ok()?.as_ref()?.turns?;
    (turns > limit).then(|| {
        AgentFailure::Response(format!(
            "the agent took {turns} turns, more than the phase's `max-turns` of {limit}"
        ))
    })
}

/// Why no new attempt of `phase` may start: a `max-cost` (the phase's, its `for-each` phase's
/// for all its items, or the run's) is spent, or cannot be held because a cost is unknown
/// (`unknown-cost "fail"`).
pub(crate) fn budget_spent(run: &Run, phase: &Phase, phase_spend: &Spend) -> Option<String> {
    let run_spend = run.state.budget.spend();
    let fan_out = phase
        .item_of()
        .and_then(|of| run.state.phases.id(of))
        .map(|of| (run.phase(of), run.state.fan_outs.spend(of)));
    let items_whose = fan_out
        .as_ref()
        .map(|(of, _)| format!("\"{}\"'s (for all its items)", of.name.value))
        .unwrap_or_default();
    let budgets = [
        (phase.max_cost, phase_spend, "the phase's"),
        (
            fan_out.as_ref().and_then(|(of, _)| of.max_cost),
            fan_out.as_ref().map_or(phase_spend, |(_, spend)| spend),
            items_whose.as_str(),
        ),
        (run.ctx.pipeline.max_cost, &run_spend, "the run's"),
    ];
    for (limit, spend, whose) in budgets {
        let Some(limit) = limit else { continue };
        let shown = crate::event::usage::Dollars::new(limit).unwrap_or_default();
        if spend.known_usd.amount() >= limit {
            return Some(format!(
                "{whose} max-cost of {shown} is spent: {} so far",
                spend.words()
            ));
        }
        if spend.unknown > 0 && run.ctx.pipeline.unknown_cost == UnknownCost::Fail {
            return Some(format!(
                "{whose} max-cost of {shown} cannot be held: spent {} (unknown-cost \"fail\")",
                spend.words()
            ));
        }
    }
    None
}

/// The wait before a transient failure's next try: the Retry-After it gave, else the phase's
/// `backoff` (2s when none) doubled for each earlier transient try, at most a minute.
fn transient_wait(phase: &Phase, retry_after: Option<Duration>, tries: u32) -> Duration {
    if let Some(wait) = retry_after {
        return wait;
    }
    let base = phase
        .backoff
        .map_or(Duration::from_secs(2), Millis::duration);
    base.saturating_mul(1 << tries.min(16))
        .min(Duration::from_mins(1))
}

/// Whether an attempt's changes to the workspace are read: by a passing attempt's bundle
/// (unless `run --no-bundles`), by `scope`, `protect` and `changes`, and by self and sub-agent
/// verification. Only then are snapshots taken before and after it (and `changes.json`
/// written): a walk of the workspace costs more than a short step.
fn tracks_changes(run: &Run, phase: &Phase) -> bool {
    run.ctx.options.bundles.wanted(phase)
        || !phase.scope.is_empty()
        || !phase.protect.is_empty()
        || phase
            .verify
            .iter()
            .any(|m| matches!(m, VerifyMode::SelfCheck | VerifyMode::SubAgent))
        || phase
            .gates
            .iter()
            .any(|g| matches!(g.kind, GateKind::Changes { .. }))
}
