//! One phase, attempt after attempt: render the prompt, start the agent or `run` step, verify the
//! work, write the artifacts, and decide on a retry.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::approvals;
use super::context::{
    AttemptWindow, LiveAttempt, PhaseRunning, Shared, gate_env, millis, phase_index,
    phases_alongside, snapshot_options, split_bookkeeping, take_snapshot,
};
use super::control;
use crate::agent::prompt::{PromptContext, render_argv, render_prompt};
use crate::agent::prompt_file::PromptFile;
use crate::agent::response;
use crate::agent::transcript;
use crate::event::{
    AttemptOutcome, ChildExit, Event, GateReport, GateStatus, PhaseStatus, RUN_STEP,
};
use crate::model::{Agent, GateKind, Phase, VerifyMode, Worker};
use crate::process::watchdog;
use crate::process::{self, ChildSpec};
use crate::redact::Redactor;
use crate::verify::feedback::{self, AgentFailure};
use crate::verify::gates::{GateContext, run_gates};
use crate::verify::subagent::{self, SubAgentCheck, SubAgentOutcome};
use crate::workspace::{Changes, Snapshot};

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
}

/// Runs every attempt of one phase.
pub(crate) async fn run_phase(shared: Arc<Shared>, index: usize) -> PhaseResult {
    let phase = &shared.pipeline.phases[index];
    let _running = PhaseRunning::start(&shared, index);
    let started = Instant::now();
    let max_attempts = phase.retries.saturating_add(1);
    let mut previous_feedback: Option<(String, PathBuf)> = None;
    let mut session = Session::default();
    let mut attempt = 1;
    loop {
        shared.emit(Event::AttemptStarted {
            phase: phase.name.value.clone(),
            attempt,
            max_attempts,
        });
        let attempt_started = Instant::now();
        let result = match one_attempt(
            &shared,
            index,
            attempt,
            max_attempts,
            previous_feedback.as_ref(),
            &mut session,
        )
        .await
        {
            Ok(result) => result,
            Err(e) => fatal(format!("helixflow could not run the attempt: {e}")),
        };
        if let Some(reason) = &result.fatal {
            could_not_run(
                &shared,
                phase,
                attempt,
                max_attempts,
                attempt_started,
                reason,
            );
        }
        let finished = |status, reason: Option<String>| PhaseResult {
            status,
            attempts: attempt,
            reason,
            duration: started.elapsed(),
        };
        match result.outcome {
            AttemptOutcome::Passed => return finished(PhaseStatus::Passed, None),
            AttemptOutcome::Cancelled => {
                return finished(PhaseStatus::Cancelled, Some(shared.cancel_reason()));
            }
            AttemptOutcome::Failed => {}
        }
        let why_not_retry = if let Some(fatal) = &result.fatal {
            Some(fatal.clone())
        } else if attempt >= max_attempts {
            Some("no retries left".to_owned())
        } else if shared.stopping() {
            Some("not retried: the run is stopping".to_owned())
        } else if !shared.take_retry() {
            Some("not retried: the run's retry budget is spent".to_owned())
        } else {
            None
        };
        if let Some(reason) = why_not_retry {
            escalate(&shared, phase).await;
            return finished(PhaseStatus::Failed, Some(reason));
        }
        let backoff = phase.backoff.map_or(Duration::ZERO, |b| b.duration());
        shared.emit(Event::RetryScheduled {
            phase: phase.name.value.clone(),
            next_attempt: attempt + 1,
            backoff_ms: millis(backoff),
        });
        if !backoff.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = shared.cancel.soft.cancelled() => {
                    return finished(PhaseStatus::Cancelled, Some(shared.cancel_reason()));
                }
            }
        }
        let feedback_file = shared
            .run
            .attempt_dir(&phase.name.value, attempt)
            .map(|d| d.join("feedback.md"))
            .unwrap_or_default();
        previous_feedback = result.feedback.map(|f| (f, feedback_file));
        attempt += 1;
    }
}

/// The agent session a phase's retries continue: the one its worker started in this run, never a
/// verifier's, a sibling phase's, or one from an earlier run.
#[derive(Debug, Default)]
struct Session {
    /// The id helixflow gave the conversation (`{{ session_id }}` in `command`), when one started.
    given: Option<String>,
    /// The id the agent's output reported (`session-id`), once it did.
    reported: Option<String>,
}

impl Session {
    /// The session a retry of `agent` continues: the reported id when the agent declares how to
    /// read one, else the id given to the command that started it. `None` when there is no
    /// session to continue (attempt 1 never reached the agent's model), and the retry starts
    /// over with `command` and the full prompt.
    fn to_resume(&self, agent: &Agent) -> Option<&str> {
        if agent.session_id.is_some() {
            self.reported.as_deref()
        } else {
            self.given.as_deref()
        }
    }
}

/// Linux refuses a single argument of `MAX_ARG_STRLEN` (32 pages, 128 KiB) bytes or more,
/// counting its terminating NUL.
const ARGUMENT_LIMIT: usize = 128 * 1024;

/// What an attempt's agent was started with, as the journal keeps it (`invocation.json`).
#[derive(Debug, serde::Serialize)]
struct Invocation<'a> {
    /// The argv, placeholders replaced.
    argv: &'a [String],
    /// Whether this was the agent's `resume`, continuing its session.
    resume: bool,
    /// `{{ session_id }}` of this invocation.
    session_id: &'a str,
    /// Whether a text went to standard input (`stdin.txt`).
    stdin: bool,
}

async fn one_attempt(
    shared: &Shared,
    index: usize,
    attempt: u32,
    max_attempts: u32,
    previous: Option<&(String, PathBuf)>,
    session: &mut Session,
) -> std::io::Result<AttemptResult> {
    let phase = &shared.pipeline.phases[index];
    let name = &phase.name.value;
    // From here on, the phases running alongside are noted: their changes are not this attempt's.
    let _window = AttemptWindow::open(shared, index);
    let dir = shared.run.attempt_dir(name, attempt)?;
    let step = |s: &str| {
        shared.emit(Event::Step {
            phase: name.clone(),
            attempt,
            step: s.to_owned(),
        });
    };
    let started = Instant::now();
    let cancelled = || {
        finish(
            shared,
            phase,
            attempt,
            started,
            AttemptOutcome::Cancelled,
            None,
            Vec::new(),
            None,
        )
    };

    // The diff shown to a verifier needs the files' earlier contents.
    let keep_contents = phase.verify.contains(&VerifyMode::SubAgent);
    let tracked = tracks_changes(phase);
    let before = if tracked {
        step("snapshot");
        let options = snapshot_options(shared, phase, keep_contents, None);
        Some(Arc::new(take_snapshot(shared, options, None).await?))
    } else {
        None
    };

    let (feedback_text, feedback_file) =
        previous.map_or(("", None), |(text, file)| (text.as_str(), Some(file)));
    // What the phase was asked to do, for a verifier.
    let mut task = String::new();
    let mut prompt_file: Option<(PromptFile, Option<watchdog::CrashCleanup>)> = None;
    let mut spec = match &phase.worker {
        Worker::Run(command) => {
            task = format!("Run the command `{command}`.");
            let mut spec = ChildSpec::shell(
                command,
                &shared.pipeline.workspace,
                dir.join("stdout.log"),
                dir.join("stderr.log"),
            );
            spec.timeout = phase.timeout.map(|t| t.duration());
            spec
        }
        Worker::Agent(agent_name) => {
            let agent = &shared.pipeline.agents[&agent_name.value];
            let prompt = match attempt_prompt(phase, attempt, max_attempts, feedback_text) {
                Ok(prompt) => prompt,
                Err(e) => return Ok(fatal(format!("the prompt does not render: {e:#}"))),
            };
            // A retry continues the worker's own session when there is one; otherwise it starts
            // a new one with the full prompt, which carries the feedback.
            let resume = match (&agent.resume, session.to_resume(agent)) {
                (Some(argv), Some(id)) if attempt > 1 => Some((argv, id.to_owned())),
                _ => None,
            };
            let session_id = match &resume {
                Some((_, id)) => id.clone(),
                None => {
                    let id = uuid::Uuid::new_v4().to_string();
                    *session = Session {
                        given: Some(id.clone()),
                        reported: None,
                    };
                    id
                }
            };
            let argv_template = resume.as_ref().map_or(&agent.command, |(argv, _)| *argv);
            let reads_file = argv_template.iter().any(|arg| arg.contains("prompt_file"));
            let file = PromptFile::write(
                &dir.join("prompt.md"),
                &prompt,
                &shared.redactor,
                reads_file,
            )?;
            let mut values = BTreeMap::from([
                ("prompt", prompt.clone()),
                ("prompt_file", file.path().display().to_string()),
                ("phase", name.clone()),
                ("attempt", attempt.to_string()),
                ("workspace", shared.pipeline.workspace.display().to_string()),
                ("session_id", session_id.clone()),
            ]);
            // What a resumed agent is told: the feedback, cut to a size that fits one argument.
            let given_feedback = resume.as_ref().map(|_| {
                feedback::for_agent(
                    feedback_text,
                    feedback_file.map_or(Path::new("feedback.md"), PathBuf::as_path),
                )
            });
            // `resume` may also name the previous attempt's feedback; in `command` those
            // placeholders are not replaced (lint reports them).
            if let Some(given) = &given_feedback {
                std::fs::write(dir.join("feedback-given.md"), shared.redactor.redact(given))?;
                values.insert("feedback", given.clone());
                values.insert(
                    "feedback_file",
                    feedback_file
                        .map(|f| f.display().to_string())
                        .unwrap_or_default(),
                );
            }
            let argv = render_argv(argv_template, &values);
            // Standard input carries the message of this invocation: the prompt that starts a
            // session, or the feedback that continues one.
            let stdin = agent
                .stdin
                .then(|| given_feedback.clone().unwrap_or_else(|| prompt.clone()));
            std::fs::write(
                dir.join("invocation.json"),
                shared.redactor.to_json_pretty(&Invocation {
                    argv: &argv,
                    resume: resume.is_some(),
                    session_id: &session_id,
                    stdin: stdin.is_some(),
                })?,
            )?;
            if let Some(text) = &stdin {
                std::fs::write(dir.join("stdin.txt"), shared.redactor.redact(text))?;
            }
            if let Some((at, arg)) = argv
                .iter()
                .enumerate()
                .find(|(_, arg)| arg.len() >= ARGUMENT_LIMIT)
            {
                return Ok(fatal(format!(
                    "argument {at} of the agent's {} is {} bytes, more than the 128 KiB the \
                     operating system allows in one argument: give the agent the prompt on \
                     standard input (`stdin #true`) or as a file (`{{{{ prompt_file }}}}`) instead \
                     of in its argv",
                    if resume.is_some() {
                        "`resume`"
                    } else {
                        "`command`"
                    },
                    arg.len()
                )));
            }
            // Kept until the attempt is over: a private copy is removed when it is dropped, and by
            // the watchdog should helixflow be killed first.
            let cleanup = watchdog::cleanup_on_crash(&file);
            prompt_file = Some((file, cleanup));
            let mut spec = ChildSpec::argv(
                &argv,
                &shared.pipeline.workspace,
                dir.join("stdout.log"),
                dir.join("stderr.log"),
            )?;
            spec.stdin = stdin.map(String::into_bytes);
            task.clone_from(&prompt);
            spec.timeout = phase.timeout.or(agent.timeout).map(|t| t.duration());
            spec.idle_timeout = agent.idle_timeout.map(|t| t.duration());
            spec.env.extend(
                agent
                    .env
                    .iter()
                    .map(|(k, v)| (OsString::from(k), OsString::from(v))),
            );
            spec
        }
    };
    // Pipeline env, then the agent's (added above), then the phase's, then helixflow's own.
    let mut env: Vec<(OsString, OsString)> = shared
        .pipeline
        .env
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    env.append(&mut spec.env);
    env.extend(
        phase
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env.push(("HELIXFLOW_RUN_DIR".into(), shared.run.path.clone().into()));
    env.push(("HELIXFLOW_PHASE".into(), name.into()));
    env.push(("HELIXFLOW_ATTEMPT".into(), attempt.to_string().into()));
    if let Some(file) = feedback_file {
        env.push(("HELIXFLOW_FEEDBACK_FILE".into(), file.clone().into()));
    }
    if let Some(socket) = &shared.socket {
        env.push((control::SOCKET_ENV.into(), socket.clone().into()));
    }
    spec.env = env;
    spec.grace = shared.options.grace;
    spec.redactor = shared.redactor.clone();
    spec.spawn_in_pool = shared.spawn_in_pool;

    let live = Arc::new(LiveAttempt {
        attempt,
        before: before.clone(),
        dir: dir.clone(),
        receipts: Mutex::new(Vec::new()),
    });
    if let Ok(mut attempts) = shared.live.lock() {
        attempts.insert(name.clone(), live.clone());
    }
    step(match phase.worker {
        Worker::Run(_) => RUN_STEP,
        Worker::Agent(_) => "agent",
    });
    let exit = process::run(spec, &shared.cancel).await;
    // The agent has exited: a private copy of its prompt goes now.
    drop(prompt_file);
    if let Ok(mut attempts) = shared.live.lock() {
        attempts.remove(name);
    }
    let exit = match exit {
        Ok(exit) => exit,
        Err(e) => {
            return Ok(fatal(format!(
                "cannot start the {}: {e}",
                worker_noun(phase)
            )));
        }
    };
    shared.emit(Event::ChildExited {
        phase: name.clone(),
        attempt,
        exit: exit.clone(),
    });
    if let Worker::Agent(agent_name) = &phase.worker
        && let Some(capture) = &shared.pipeline.agents[&agent_name.value].session_id
    {
        let log = dir.join("stdout.log");
        let capture = capture.clone();
        let reported = tokio::task::spawn_blocking(move || transcript::session_id(&capture, &log))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        // The session to continue is the one the latest attempt reported: a resume that
        // reported none (the CLI did not find the session) leaves none, and the next retry
        // starts over.
        session.reported = reported;
    }
    if exit.cancelled || shared.cancel.soft.is_cancelled() {
        return Ok(cancelled());
    }

    let (agent_failure, response_text) = agent_result(shared, phase, &exit, &dir).await;
    let mut reports: Vec<GateReport> = Vec::new();
    if agent_failure.is_none() {
        step("verify");
        // Without a `before`, nothing reads the changes; the files on disk are still listed
        // when an expected output may be missing, for the near-miss hints. With one, the ignore
        // rules are those from before the attempt: an ignore file the agent wrote or changed
        // hides none of its changes.
        let after = if tracked || lists_files(phase) {
            let rules = before.as_ref().and_then(|before| before.ignore_rules());
            let options = snapshot_options(shared, phase, false, rules);
            take_snapshot(shared, options, before.as_deref()).await?
        } else {
            Snapshot::default()
        };
        let alongside = phases_alongside(shared, index);
        let (before, changes, bookkeeping) = match &before {
            Some(before) => {
                let mut changes = before.diff(&after);
                let bookkeeping = split_bookkeeping(shared, phase, &mut changes);
                std::fs::write(
                    dir.join("changes.json"),
                    shared.redactor.to_json_pretty(&changes)?,
                )?;
                if !bookkeeping.is_empty() {
                    std::fs::write(
                        dir.join("bookkeeping.json"),
                        shared.redactor.to_json_pretty(&bookkeeping)?,
                    )?;
                }
                (before.clone(), changes, bookkeeping)
            }
            None => (
                Arc::new(Snapshot::default()),
                Changes::default(),
                Changes::default(),
            ),
        };
        let env: Vec<(OsString, OsString)> = gate_env(&shared.pipeline, phase);
        let emit = |report: &GateReport| {
            shared.emit(Event::GateFinished {
                phase: name.clone(),
                attempt,
                report: report.clone(),
            });
        };
        let passing =
            |reports: &[GateReport]| reports.iter().all(|r| r.status != GateStatus::Failed);

        // Modes run in the order self → external → sub-agent, each only when the earlier passed:
        // no verifier is paid to review work that already failed.
        if phase.verify.contains(&VerifyMode::SelfCheck) {
            let report = self_verification(&live, &after);
            emit(&report);
            reports.push(report);
        }
        if passing(&reports) && phase.verify.contains(&VerifyMode::External) {
            let context = GateContext {
                workspace: &shared.pipeline.workspace,
                phase,
                response: response_text.as_deref(),
                before: &before,
                after: &after,
                changes: &changes,
                bookkeeping: &bookkeeping,
                env: &env,
                logs: &dir,
                cancel: &shared.cancel,
                redactor: shared.redactor.clone(),
                grace: shared.options.grace,
                exclude: &shared.excluded,
                alongside: &alongside,
            };
            let mut on_report = |report: &GateReport| {
                // Approval gates are decided below, once everything else passed.
                if !report.is(crate::event::CheckKind::Approval) {
                    emit(report);
                }
            };
            reports.extend(run_gates(&context, &mut on_report).await);
        }
        if passing(&reports) {
            approvals::decide(shared, phase, attempt, &dir, &mut reports, &emit).await;
        }
        if passing(&reports)
            && phase.verify.contains(&VerifyMode::SubAgent)
            && !shared.cancel.soft.is_cancelled()
        {
            step("sub-agent verification");
            let review = Review {
                dir: &dir,
                task: &task,
                reports: &reports,
                changes: &changes,
                before: &before,
                env: &env,
            };
            let report = sub_agent(shared, phase, attempt, &review).await?;
            emit(&report);
            reports.push(report);
        }
    }
    std::fs::write(
        dir.join("gates.json"),
        shared.redactor.to_json_pretty(&reports)?,
    )?;
    if shared.cancel.soft.is_cancelled() {
        return Ok(cancelled());
    }

    let failed_gates: Vec<String> = reports
        .iter()
        .filter(|r| r.status == GateStatus::Failed)
        .map(|r| r.name.clone())
        .collect();
    if agent_failure.is_none() && failed_gates.is_empty() {
        return Ok(finish(
            shared,
            phase,
            attempt,
            started,
            AttemptOutcome::Passed,
            None,
            Vec::new(),
            None,
        ));
    }
    // The attempts the phase can still reach: its own retries, but no more than the run's
    // `retry-budget` has left. Phases running at once share the budget, and the count is what is
    // left when this feedback is written: a phase that retries first may still spend it, so an
    // attempt can turn out to be the last without the warning, but an attempt that gets the
    // warning is never followed by another.
    let reachable = match shared.retries_left() {
        Some(left) => max_attempts.min(attempt.saturating_add(left)),
        None => max_attempts,
    };
    let text = feedback::render(phase, attempt, reachable, agent_failure.as_ref(), &reports);
    let text = shared.redactor.redact(&text);
    std::fs::write(dir.join("feedback.md"), &text)?;
    Ok(finish(
        shared,
        phase,
        attempt,
        started,
        AttemptOutcome::Failed,
        Some(text),
        failed_gates,
        agent_failure.as_ref().and_then(AgentFailure::error),
    ))
}

/// What a sub-agent review of one attempt looks at.
struct Review<'r> {
    dir: &'r Path,
    task: &'r str,
    reports: &'r [GateReport],
    changes: &'r Changes,
    before: &'r Snapshot,
    env: &'r [(OsString, OsString)],
}

/// Runs the phase's verifier; its verdict becomes one more gate report.
async fn sub_agent(
    shared: &Shared,
    phase: &Phase,
    attempt: u32,
    review: &Review<'_>,
) -> std::io::Result<GateReport> {
    let started = Instant::now();
    let report = |status, details| GateReport {
        name: "sub-agent".into(),
        kind: "sub-agent".into(),
        status,
        duration_ms: millis(started.elapsed()),
        details,
    };
    // Lint guarantees a known verifier for sub-agent mode.
    let Some(verifier) = phase
        .verifier
        .as_ref()
        .and_then(|v| shared.pipeline.agents.get(&v.value))
    else {
        return Ok(report(
            GateStatus::Failed,
            vec!["the phase has no verifier agent".into()],
        ));
    };
    let check = SubAgentCheck {
        workspace: &shared.pipeline.workspace,
        phase,
        task: review.task,
        verifier,
        attempt_dir: review.dir,
        gate_reports: review.reports,
        changes: review.changes,
        before: review.before,
        env: review.env,
        exclude: &shared.excluded,
        cancel: &shared.cancel,
        redactor: shared.redactor.clone(),
        grace: shared.options.grace,
        attempt,
        alongside: &phases_alongside(shared, phase_index(shared, phase)),
    };
    let outcome = subagent::check(&check).await?;
    Ok(match &outcome {
        SubAgentOutcome::Verdict(verdict) if verdict.success => report(
            GateStatus::Passed,
            verdict
                .checks_passed
                .iter()
                .map(|c| format!("checked: {c}"))
                .collect(),
        ),
        SubAgentOutcome::Verdict(_) | SubAgentOutcome::Void { .. } => report(
            GateStatus::Failed,
            vec![
                outcome
                    .feedback()
                    .unwrap_or_else(|| "the verifier rejected the work".into()),
            ],
        ),
        SubAgentOutcome::Cancelled => report(
            GateStatus::Skipped,
            vec!["the run was cancelled during the review".into()],
        ),
    })
}

/// The prompt an attempt gives its agent: the phase's template rendered with the attempt's
/// variables, with the verify instructions in `self` mode. `run --dry-run` shows this same text.
pub(crate) fn attempt_prompt(
    phase: &Phase,
    attempt: u32,
    max_attempts: u32,
    feedback: &str,
) -> Result<String, minijinja::Error> {
    let instructions = if phase.verify.contains(&VerifyMode::SelfCheck) {
        verify_instructions(phase)
    } else {
        String::new()
    };
    let context = PromptContext {
        phase,
        attempt,
        max_attempts,
        feedback,
        verify_instructions: &instructions,
    };
    render_prompt(phase.prompt.as_ref().map_or("", |p| p.text()), &context)
}

/// What a `self`-verified agent is told: the outputs, the gates, and the exact command.
fn verify_instructions(phase: &Phase) -> String {
    let mut text = String::from("## Verify your work before you finish\n\n");
    text.push_str(&format!(
        "Before you finish, run this command in the workspace:\n\n    {} verify\n\n",
        crate::agent::prompt::shell_quote(&verify_program())
    ));
    text.push_str(
        "It checks the expected outputs and the gates below and records a receipt. This phase passes only if \
         your last `helixflow verify` passed and no file changed after it. If it fails, fix what it reports \
         and run it again.\n",
    );
    if !phase.outputs.is_empty() {
        text.push_str("\nExpected outputs:\n");
        for output in &phase.outputs {
            text.push_str(&format!(
                "- {}\n",
                crate::agent::prompt::describe_output(output)
            ));
        }
    }
    if !phase.gates.is_empty() {
        text.push_str("\nGates:\n");
        for gate in &phase.gates {
            text.push_str(&format!("- {}\n", crate::verify::gates::describe(gate)));
        }
    }
    text
}

/// How the agent is told to start `helixflow verify`: as `helixflow` when that name on `PATH` is
/// this very program (an agent's permission rules, such as Claude Code's
/// `--allowedTools "Bash(helixflow verify:*)"`, match the command as written), else by its path.
fn verify_program() -> String {
    let Ok(exe) = std::env::current_exe() else {
        return "helixflow".to_owned();
    };
    let on_path = std::env::var_os("PATH")
        .and_then(|path| crate::process::shell::find_program("helixflow", &path))
        .and_then(|found| found.canonicalize().ok());
    if on_path.is_some_and(|found| exe.canonicalize().is_ok_and(|exe| exe == found)) {
        "helixflow".to_owned()
    } else {
        exe.display().to_string()
    }
}

/// The `self` mode's verdict: a passing receipt from this attempt, and nothing changed since.
fn self_verification(live: &LiveAttempt, after: &Snapshot) -> GateReport {
    let receipts = live.receipts.lock().map(|r| r.clone()).unwrap_or_default();
    let (status, details) = match receipts.last() {
        None => (
            GateStatus::Failed,
            vec!["no receipt: `helixflow verify` was not run during this attempt. Run it before you finish; \
                  the phase passes only with a passing receipt."
                .to_owned()],
        ),
        Some(receipt) if !receipt.success => {
            let mut details = vec![format!(
                "your last `helixflow verify` (receipt {} of this attempt) failed, and you finished anyway. What failed:",
                receipts.len()
            )];
            for gate in receipt.gates.iter().filter(|g| g.status == GateStatus::Failed) {
                details.push(format!("gate `{}` ({}):\n{}", gate.name, gate.kind, gate.details.join("\n")));
            }
            (GateStatus::Failed, details)
        }
        Some(receipt) => {
            let changed = receipt.snapshot.diff(after);
            if changed.is_empty() {
                (GateStatus::Passed, Vec::new())
            } else {
                let mut details = vec![format!(
                    "files changed after your last passing `helixflow verify`; run it again after your last change ({} changed):",
                    changed.len()
                )];
                details.extend(changed.created.iter().map(|p| format!("`{p}` was created")));
                details.extend(changed.modified.iter().map(|p| format!("`{p}` was modified")));
                details.extend(changed.deleted.iter().map(|p| format!("`{p}` was deleted")));
                (GateStatus::Failed, details)
            }
        }
    };
    GateReport {
        name: "self-verification".into(),
        kind: "self".into(),
        status,
        duration_ms: 0,
        details,
    }
}

/// Judges the child's exit, extracts and saves the response, and checks `evidence`.
async fn agent_result(
    shared: &Shared,
    phase: &Phase,
    exit: &ChildExit,
    dir: &Path,
) -> (Option<AgentFailure>, Option<String>) {
    if let Some(kind) = exit.timeout {
        let limit = match (&phase.worker, kind) {
            (Worker::Agent(a), crate::event::TimeoutKind::Idle) => {
                shared.pipeline.agents[&a.value].idle_timeout
            }
            (Worker::Agent(a), crate::event::TimeoutKind::Wall) => {
                phase.timeout.or(shared.pipeline.agents[&a.value].timeout)
            }
            (Worker::Run(_), _) => phase.timeout,
        };
        return (
            Some(AgentFailure::Timeout {
                kind,
                limit: limit.map_or(Duration::ZERO, |l| l.duration()),
            }),
            None,
        );
    }
    if !exit.success() {
        // The start of standard error often holds the real message (a CLI's usage text follows
        // it), the end what the program did last: both are kept.
        let stderr =
            process::head_and_tail(&dir.join("stderr.log"), 4096, 8192).unwrap_or_default();
        // An agent may say what went wrong only in its output (Claude Code exits 1 with nothing
        // on standard error and the API's message in its result event).
        let reported = match &phase.worker {
            Worker::Agent(a) => {
                let format = shared.pipeline.agents[&a.value].response;
                let (stdout, stderr) = (dir.join("stdout.log"), dir.join("stderr.log"));
                tokio::task::spawn_blocking(move || {
                    response::reported_error(format, &stdout, &stderr)
                })
                .await
                .ok()
                .flatten()
                .map(|e| shared.redactor.redact(&e))
            }
            Worker::Run(_) => None,
        };
        return (
            Some(AgentFailure::Exit {
                code: exit.code,
                signal: exit.signal,
                stderr,
                reported,
            }),
            None,
        );
    }
    let Worker::Agent(agent_name) = &phase.worker else {
        return (None, None);
    };
    // Reading the response and searching for evidence go through logs of any size: off the
    // runtime's thread, which supervises every other phase.
    let agent = shared.pipeline.agents[&agent_name.value].clone();
    let redactor = shared.redactor.clone();
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || agent_response(&agent, &redactor, &dir))
        .await
        .unwrap_or_else(|e| {
            let failure = AgentFailure::Response(format!("reading the response failed: {e}"));
            (Some(failure), None)
        })
}

/// The agent's response from its log, and whether it shows the evidence asked for.
fn agent_response(
    agent: &Agent,
    redactor: &Redactor,
    dir: &Path,
) -> (Option<AgentFailure>, Option<String>) {
    let response = match response::extract(agent.response, &dir.join("stdout.log")) {
        Ok(response) => response,
        Err(e) => return (Some(AgentFailure::Response(e.to_string())), None),
    };
    let _ = std::fs::write(dir.join("response.txt"), redactor.redact(&response.text));
    if let Some(error) = &response.error {
        return (
            Some(AgentFailure::Response(error.clone())),
            Some(response.text),
        );
    }
    if let Some(pattern) = &agent.evidence {
        let matched = regex::bytes::Regex::new(pattern)
            .map_err(std::io::Error::other)
            .and_then(|regex| {
                response::transcript_matches(
                    &regex,
                    &[&dir.join("stdout.log"), &dir.join("stderr.log")],
                )
            });
        if !matches!(matched, Ok(true)) {
            return (
                Some(AgentFailure::NoEvidence {
                    pattern: pattern.to_owned(),
                }),
                Some(response.text),
            );
        }
    }
    if let Some(tools) = &agent.evidence_tools {
        let calls =
            transcript::tool_calls(agent.response, &dir.join("stdout.log")).unwrap_or_default();
        if !calls.any_succeeded(tools) {
            return (
                Some(AgentFailure::NoToolEvidence {
                    tools: tools.clone(),
                    failed: calls.failed,
                }),
                Some(response.text),
            );
        }
    }
    (None, Some(response.text))
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site per outcome; a struct would only rename the arguments"
)]
fn finish(
    shared: &Shared,
    phase: &Phase,
    attempt: u32,
    started: Instant,
    outcome: AttemptOutcome,
    feedback: Option<String>,
    failed_gates: Vec<String>,
    error: Option<String>,
) -> AttemptResult {
    shared.emit(Event::AttemptFinished {
        phase: phase.name.value.clone(),
        attempt,
        outcome,
        duration_ms: millis(started.elapsed()),
        failed_gates,
        feedback: feedback.clone(),
        error,
    });
    AttemptResult {
        outcome,
        feedback,
        fatal: None,
    }
}

/// Ends an attempt that could not run, or could not be judged, in the journal with the reason,
/// and leaves the same account in its folder (no gate ran).
fn could_not_run(
    shared: &Shared,
    phase: &Phase,
    attempt: u32,
    max_attempts: u32,
    started: Instant,
    reason: &str,
) {
    if let Ok(dir) = shared.run.attempt_dir(&phase.name.value, attempt) {
        let _ = std::fs::write(dir.join("gates.json"), "[]");
        let text = format!("# Attempt {attempt} of {max_attempts} could not run\n\n{reason}\n");
        let _ = std::fs::write(dir.join("feedback.md"), shared.redactor.redact(&text));
    }
    shared.emit(Event::AttemptFinished {
        phase: phase.name.value.clone(),
        attempt,
        outcome: AttemptOutcome::Failed,
        duration_ms: millis(started.elapsed()),
        failed_gates: Vec::new(),
        feedback: None,
        error: Some(reason.to_owned()),
    });
}

fn fatal(message: String) -> AttemptResult {
    AttemptResult {
        outcome: AttemptOutcome::Failed,
        feedback: None,
        fatal: Some(message),
    }
}

fn worker_noun(phase: &Phase) -> &'static str {
    match phase.worker {
        Worker::Run(_) => "run step",
        Worker::Agent(_) => "agent",
    }
}

/// Whether an attempt's changes to the workspace are read: by `scope`, `protect` and `changes`,
/// and by self and sub-agent verification. Only then are snapshots taken before and after it
/// (and `changes.json` written): a walk of the workspace costs more than a short step.
fn tracks_changes(phase: &Phase) -> bool {
    !phase.scope.is_empty()
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

/// Whether the gates may look for misplaced files: `outputs` and `paths-exist` do when one is
/// missing.
fn lists_files(phase: &Phase) -> bool {
    !phase.outputs.is_empty()
        || phase
            .gates
            .iter()
            .any(|g| matches!(g.kind, GateKind::PathsExist { .. }))
}

/// Runs the phase's `escalate` command after its final failure.
async fn escalate(shared: &Shared, phase: &Phase) {
    let Some(command) = &phase.escalate else {
        return;
    };
    let Ok(dir) = std::fs::create_dir_all(shared.run.phase_dir(&phase.name.value))
        .map(|()| shared.run.phase_dir(&phase.name.value))
    else {
        return;
    };
    let mut spec = ChildSpec::shell(
        command,
        &shared.pipeline.workspace,
        dir.join("escalate.stdout"),
        dir.join("escalate.stderr"),
    );
    spec.env = gate_env(&shared.pipeline, phase);
    spec.env
        .push(("HELIXFLOW_RUN_DIR".into(), shared.run.path.clone().into()));
    spec.env
        .push(("HELIXFLOW_PHASE".into(), phase.name.value.clone().into()));
    spec.grace = shared.options.grace;
    spec.redactor = shared.redactor.clone();
    let code = process::run(spec, &shared.cancel)
        .await
        .ok()
        .and_then(|exit| exit.code);
    shared.emit(Event::Escalated {
        phase: phase.name.value.clone(),
        code,
    });
}
